//! PAMS, the Pipe-Aware Multipath Scheduler (MPBond §4.3).
//!
//! Three parts, as in the paper:
//! - [`pad`]: the pipe-aware delay of a subflow, the time a byte scheduled now would take to
//!   reach the primary, accounting for the sender's queue, the helper's buffer and the pipe
//!   (§4.3.2);
//! - [`Pams::select`]: Algorithm 1, minimum-PAD selection with deferral (§4.3.3);
//! - [`Pams::reinjection`]: recall data from the slowest subflow when PADs drift apart
//!   (§4.3.4).

use std::borrow::Cow;
use std::time::Duration;

use super::{admission, Decision, Recall, SchedContext, Scheduler};
use crate::path::{PathKind, PathView};
use crate::Time;
use mpbond_proto::SubflowId;

/// Throughput floor, bytes per second, so that a path with no estimate yet has a large but
/// finite PAD instead of a division by zero.
const MIN_THROUGHPUT: f64 = 1.0;

/// The Pipe-Aware Delay of a subflow, in seconds (MPBond §4.3.2).
///
/// With B_s the bytes queued for the subflow at the sender, B_p the helper's buffered bytes,
/// Th the throughputs and OWD = RTT/2:
///
/// - direct subflow: `OWD_ps + B_s / Th_ps`;
/// - helper subflow whose buffer is still non-empty when the sender's queue has drained
///   (`B_p / B_s + 1 > Th_p / Th_hs`): `OWD_hs + (B_s + B_p) / Th_p + OWD_p`;
/// - otherwise: `OWD_hs + B_s / Th_hs + OWD_p`.
///
/// The case test is evaluated as `(B_p + B_s) · Th_hs > B_s · Th_p`, which is the same
/// inequality multiplied by `B_s · Th_hs` and stays defined when `B_s = 0`. A helper subflow
/// whose pipe has not reported yet is treated as having an empty, infinitely fast pipe of zero
/// delay: it falls in the third case with `OWD_p = 0`.
pub fn pad(p: &PathView) -> f64 {
    let th = p.throughput.max(MIN_THROUGHPUT);
    let b_s = p.queued as f64;
    match (p.kind, &p.pipe) {
        (PathKind::Helper, Some(pipe)) => {
            let th_p = pipe.throughput.max(MIN_THROUGHPUT);
            let b_p = pipe.buffered as f64;
            let owd_p = pipe.rtt / 2.0;
            if (b_p + b_s) * th > b_s * th_p {
                p.owd() + (b_s + b_p) / th_p + owd_p
            } else {
                p.owd() + b_s / th + owd_p
            }
        }
        _ => p.owd() + b_s / th,
    }
}

/// The Pipe-Aware Delay with the bytes already in flight counted as draining, not waiting
/// (an mpbond refinement of MPBond §4.3.2), in seconds.
///
/// B_s (and B_p) hold the bytes unsent *and* unacknowledged in the kernel, as SIOCOUTQ
/// reports them. The paper's `OWD + B_s / Th` charges every byte in flight a full service
/// time at the bottleneck and then the path's one-way delay on top. On a saturated path a
/// new byte is behind exactly B_s bytes that leave the bottleneck at `Th`, and the last of
/// them is acknowledged `B_s / Th` from now, so it reached the receiver one return delay
/// (about `min_rtt / 2`) earlier: the new byte arrives at `B_s / Th - min_rtt / 2`. A
/// path that is not saturated delivers a new byte after its propagation delay, `minRTT / 2`
/// ([`PathView::propagation_owd`]): the queue our own bytes built is already in `B_s / Th`,
/// and the smoothed RTT would count it again; after an idle period it even holds the queue of
/// the previous transfer (145 ms on a 50 ms path, read at the start of the next download).
/// So:
///
/// - direct subflow: `D_s = max(minRTT_ps / 2, B_s / Th_ps - minRTT_ps / 2)`;
/// - helper subflow: `max(D_hs + minRTT_p / 2, ahead / Th_p - minRTT_p / 2)` with `D_hs`
///   the same for the HS-Path: the byte either reaches an empty pipe (then crosses it at
///   its propagation delay), or it waits behind every byte ahead of it on the HS-Path and
///   in the helper, all of which the pipe drains at `Th_p` while it stays busy, the last of
///   them acknowledged a return delay after it arrived. `minRTT_p` is the pipe's minimum
///   RTT (`PIPE_MIN_RTT`, [`PipeView::propagation_rtt`]); the pipe RTT in `PIPE_FEEDBACK`
///   is its smoothed one while the helper relays, which holds the queue `ahead / Th_p`
///   already counts. Read as `OWD_p` it put a helper's last 32.8 KB behind a 5 Mbit/s
///   pipe at 0.107 s where the pipe delivers them in 54 ms (docs/evaluation.md, "What we changed",
///   item 58). A helper that does not send the minimum leaves the reported RTT in the first
///   term and nothing subtracted in the second. The helper's
///   report is one HS-Path delay old, so bytes the HS-Path acknowledged after it are in
///   neither B_s nor B_p; the subflow's outstanding bytes bound what is ahead from below:
///   `ahead = max(B_s + B_p, outstanding)`. Outstanding counts what the primary has not
///   acknowledged, and a `DATA_ACK` carries only the lowest four SACK ranges, so when
///   another subflow leaves more holes below a helper's bytes they stay outstanding after
///   the primary has them all: 2-3 MB for a second on a helper whose HS-Path and buffer
///   had emptied (11d, three devices). PAD then read the idle helper as busy, and PAMS gave
///   the segment's tail to the PS-Path's deep queue. What the HS-Path delivered since the
///   report ([`PipeView::unreported`]) closes the gap from above: where it is known,
///   `ahead = min(outstanding, B_s + B_p + unreported)`, at least `B_s + B_p`
///   (docs/evaluation.md, "What we changed", item 42). `unreported` also holds the bytes
///   the helper has SACKed, which a B_s read as the kernel's bytes still to deliver leaves
///   out (item 44).
///
/// Under CUBIC's standing queue at a cellular bottleneck the paper's form overstates a
/// direct subflow by about one RTT (srtt/2 + minRTT/2) and a helper subflow whose pipe is the
/// bottleneck by the HS-Path's OWD plus the pipe's; the two errors differ, which skews the
/// common finish. For an idle path whose smoothed RTT has settled both forms agree. In the
/// simulator this form cuts Figure 4's completion gap from 0.050 s to 0.008 s; in the lab
/// its effect is within the spread between runs (docs/evaluation.md, "What we changed",
/// items 7 and 9).
pub fn pad_drain(p: &PathView) -> f64 {
    let b_s = p.queued as f64;
    let d_s = p
        .propagation_owd()
        .max(b_s / p.throughput.max(MIN_THROUGHPUT) - p.min_rtt / 2.0);
    match (p.kind, &p.pipe) {
        (PathKind::Helper, Some(pipe)) => {
            let th_p = pipe.throughput.max(MIN_THROUGHPUT);
            let reported = b_s + pipe.buffered as f64;
            let outstanding = p.outstanding as f64;
            let ahead = match pipe.unreported {
                Some(u) => outstanding.min(reported + u as f64).max(reported),
                None => reported.max(outstanding),
            };
            (d_s + pipe.propagation_rtt() / 2.0)
                .max(ahead / th_p - pipe.min_rtt.min(pipe.rtt) / 2.0)
        }
        _ => d_s,
    }
}

/// Which formula gives a subflow's PAD ([`pad`] or [`pad_drain`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PadModel {
    /// MPBond §4.3.2 as published ([`pad`]).
    Paper,
    /// Bytes in flight drain instead of waiting a full one-way delay on top ([`pad_drain`]).
    Drain,
}

/// A PAD model name that is neither `paper` nor `drain`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown PAD model {0:?}: paper (MPBond §4.3.2 as published) or drain")]
pub struct UnknownPadModel(pub String);

impl std::str::FromStr for PadModel {
    type Err = UnknownPadModel;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "paper" => Ok(PadModel::Paper),
            "drain" => Ok(PadModel::Drain),
            other => Err(UnknownPadModel(other.to_string())),
        }
    }
}

impl PadModel {
    /// The PAD of `p` under this model, seconds.
    pub fn pad(self, p: &PathView) -> f64 {
        match self {
            PadModel::Paper => pad(p),
            PadModel::Drain => pad_drain(p),
        }
    }
}

/// The default [`PamsConfig::late_bind_horizon`], seconds.
pub const LATE_BIND_HORIZON: f64 = 0.5;

/// The queueing delay a byte sent on `p` now would meet beyond its propagation delays, under
/// [`pad_drain`]: its sender-side path's queue and, for a helper, what waits ahead of it in
/// the helper and its pipe, seconds (at least 0).
pub fn queue_delay(p: &PathView) -> f64 {
    let base = p.propagation_owd() + p.pipe.as_ref().map_or(0.0, |q| q.propagation_rtt() / 2.0);
    (pad_drain(p) - base).max(0.0)
}

/// Default lookahead of Algorithm 1's deferral, in RTTs of the slowest subflow
/// ([`PamsConfig::lookahead_rtts`]).
pub const LOOKAHEAD_RTTS: f64 = 2.0;

/// Floor of the lookahead horizon, so that very short RTTs still leave the pipes a buffer.
const MIN_LOOKAHEAD: f64 = 0.02;

/// The bytes all subflows together can deliver within `rtts` round trips of the slowest one
/// (a helper subflow's round trip includes its pipe's).
pub fn lookahead_bytes(paths: &[PathView], rtts: f64) -> f64 {
    let horizon = paths
        .iter()
        .map(|p| p.rtt + p.pipe.as_ref().map_or(0.0, |q| q.rtt))
        .fold(0.0, f64::max)
        * rtts;
    let rate: f64 = paths.iter().map(|p| p.effective_throughput()).sum();
    horizon.max(MIN_LOOKAHEAD) * rate
}

/// How many bytes a reinjection recalls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecallAmount {
    /// `r = (maxPAD - minPAD) · B_max`, as in MPBond §4.3.4.
    Paper,
    /// `r = (maxPAD - minPAD) · B_max · B_min / (B_max + B_min)`: the amount after which both
    /// subflows finish together. Moving `x` bytes from the slowest subflow A to the fastest B
    /// ends A at `PAD_A - x/B_A` and B at `PAD_B + x/B_B`; equating them gives this `x`. The
    /// paper's amount is larger by `(B_A + B_B) / B_B`, which makes B the slowest subflow and
    /// sends data back, most visibly on short transfers. An mpbond refinement.
    Balanced,
}

/// Settings of PAMS.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PamsConfig {
    /// Reinjection triggers when `(maxPAD - minPAD) / minPAD > eta` (MPBond §4.3.4; the paper
    /// uses 0.2).
    pub eta: f64,
    /// Whether to reinject at all.
    pub reinjection: bool,
    /// The recall amount formula.
    pub recall: RecallAmount,
    /// After a recall, no further recall for this many RTTs of the recalled subflow's
    /// sender-side path, so that PAD can reflect the first one: its propagation RTT when the
    /// recalled bytes all sat in the sender's own TCP queue (the books show the recall at
    /// once), its smoothed RTT when the recall reached into a helper's buffer (the cancel has
    /// to reach the helper and fresh feedback has to come back). An mpbond addition; the
    /// paper does not say how often reinjection may fire.
    pub hold_rtts: f64,
    /// Lower bound of the hold-down time.
    pub min_hold: Duration,
    /// Bounded lookahead for Algorithm 1's deferral, in RTTs of the slowest subflow (`None`:
    /// the paper's unbounded form). The paper compares the bytes faster subflows could carry
    /// first with *all* unscheduled bytes; when the sender holds a large backlog (a long
    /// download, a stream, a bulk transfer) that comparison always says "send", so a helper
    /// subflow is filled at its HS-Path rate while its pipe drains slower, the helper's
    /// buffer grows to its cap, and every byte behind it waits in the primary's reorder
    /// buffer. With a lookahead, only the bytes all subflows can deliver within this horizon
    /// count as the backlog, which keeps each subflow's PAD within about one horizon of the
    /// fastest one: the pipe stays busy, the helper's buffer stays small. An mpbond
    /// refinement; for a backlog smaller than the horizon it is Algorithm 1 unchanged.
    ///
    /// The bound holds only while the stream is open ([`SchedContext::finite`] false). Once
    /// its end is in the sender's buffer the backlog is all that is left, and Algorithm 1
    /// over the whole of it plans a common finish: an HS-Path faster than its pipe fills the
    /// helper's buffer and finishes early, so the helper's cellular radio can sleep while the
    /// pipe drains (the energy saving of the split, MPBond §6.2, Figure 5). Bounding that case
    /// kept the HS-Path at the pipe's pace to the end and cost the helper its radio savings.
    pub lookahead_rtts: Option<f64>,
    /// Most gain a recall from a helper subflow whose HS-Path has nothing left to carry needs
    /// (its cancel wakes the helper's idle cellular radio). An mpbond addition; the paper's
    /// recalls are about pipes that collapse, gains of seconds.
    ///
    /// A radio still in its tail (Huang et al.: 11.6 s of LTE) is not promoted again: the
    /// cancel only stretches the tail by the time the link has been idle. So the gain needed
    /// is that idle time ([`PathView::wan_idle`]), at most this: a recall that saves a
    /// tenth of a second 0.1 s after the helper's last feedback is worth it (both devices'
    /// radios and pipes stop sooner), one that wakes a helper idle for seconds is not.
    /// The same bound applies to new data for a helper that already did its share of a
    /// finite transfer (`Pams::wake_cost`); zero turns both off.
    pub wake_gain: Duration,
    /// How PAD counts bytes in flight ([`PadModel`]).
    pub pad: PadModel,
    /// How many [`PathView::rate_shortfall`]s slower than its estimate the recall test reads
    /// a source subflow's sender-side path ([`PathView::cautious`]) when the destination has
    /// carried all it had (nothing queued at the sender, nothing buffered at its helper); 0
    /// (the default, until the lab shows what it buys) reads the estimate.
    ///
    /// At the end of a transfer the question is whether the last bytes of the slowest
    /// subflow would arrive sooner elsewhere, and the two mistakes cost differently: a
    /// recall that was not needed sends bytes twice over a link that would otherwise idle
    /// (bytes still in the source's TCP arrive from both, the first copy counts), one that
    /// does not fire leaves the transfer waiting on a path that slowed. On an LTE link the
    /// estimate trails such a slowdown by a round trip of its queue: in 11d a helper's
    /// HS-Path read 1.30 MB/s and delivered its last 244 KB at about 0.6 MB/s, no recall
    /// fired while the PS-Path and the AT&T helper stood empty, and the segment waited a
    /// quarter of a second for those bytes.
    /// Reading the source one shortfall slower lets the recall fire there, and leaves a path
    /// of steady capacity (shortfall near 0) as it was. Between two loaded subflows both
    /// estimates are as unsure, and the caution is not applied. An mpbond addition to
    /// §4.3.4 (docs/evaluation.md, item 53).
    pub shortfall_sigmas: f64,
    /// Energy-aware helper admission: what a second of the transfer's finish is worth, in
    /// joules (watts). Set, PAMS schedules only on the subflows whose radios the time they
    /// save pays for ([`super::admission`]); unset, it minimises time alone, as MPBond does.
    /// An mpbond addition.
    pub time_value: Option<f64>,
    /// Late binding at the end of a transfer: once the bytes still unscheduled are within
    /// [`PamsConfig::late_bind_horizon`] of the end at the subflows' combined rate, a subflow
    /// takes new bytes only while the queue a byte would join there is at most this long
    /// ([`queue_delay`]), seconds; `None` (the default) lets every subflow fill its window.
    /// An mpbond addition to Algorithm 1.
    ///
    /// A byte handed to a subflow's TCP cannot be taken back, and under CUBIC behind a deep
    /// cellular queue a subflow's window holds its whole round trip, queue included: 1 MB,
    /// about 0.3 s, on each of 11d's LTE paths. PAMS plans a common finish over those
    /// commitments from rate estimates, and when a path's rate moves within its queue's 0.3 s
    /// the paths end apart and a recall can only send copies. Holding the last bytes at the
    /// sender until a subflow's queue has drained to this delay keeps each path busy (its
    /// queue still holds this long of its rate) while the final assignment is made this long
    /// before each path would run dry, not a whole queue before. In the lab it halved 11d's
    /// recalls but lowered no stall ratio, and cost 10a 2-6% of its time (docs/evaluation.md,
    /// item 59), so it is off by default.
    pub late_bind: Option<f64>,
    /// How close to the end late binding starts, in seconds of the subflows' combined
    /// effective throughput over the unscheduled bytes ([`PamsConfig::late_bind`]).
    pub late_bind_horizon: f64,
}

impl Default for PamsConfig {
    fn default() -> Self {
        PamsConfig {
            eta: 0.2,
            reinjection: true,
            recall: RecallAmount::Balanced,
            hold_rtts: 1.0,
            min_hold: Duration::from_millis(10),
            lookahead_rtts: Some(LOOKAHEAD_RTTS),
            wake_gain: Duration::from_secs(1),
            pad: PadModel::Drain,
            shortfall_sigmas: 0.0,
            time_value: None,
            late_bind: None,
            late_bind_horizon: LATE_BIND_HORIZON,
        }
    }
}

/// The Pipe-Aware Multipath Scheduler.
#[derive(Clone, Debug)]
pub struct Pams {
    cfg: PamsConfig,
    hold_until: Time,
}

impl Pams {
    /// PAMS with the given settings.
    pub fn new(cfg: PamsConfig) -> Self {
        Pams {
            cfg,
            hold_until: Time::ZERO,
        }
    }

    /// Its settings.
    pub fn config(&self) -> &PamsConfig {
        &self.cfg
    }

    /// The gain, in seconds of the transfer's finish, that sending more on `p` must bring:
    /// nonzero only for a helper subflow that already did its share of a finite transfer
    /// (its HS-Path has nothing queued and has been quiet, the helper's buffer still
    /// drains into the pipe). Algorithm 1 planned a common finish there, so every later
    /// decision sits on a knife edge between the helper and the direct path and small
    /// estimation noise sends a few kilobytes back to the helper, each stretching its
    /// cellular radio's active time (measured: ~170 KB in trickles over the 1.5 s after
    /// the HS-Path's share was done, MPBond Figure 5's setting, 10% more helper energy).
    /// As for recalls ([`PamsConfig::wake_gain`]), the cost is the time the HS-Path has
    /// been idle, at most `wake_gain`; unknown idleness (infinity) costs nothing, so a
    /// caller without radio state gets Algorithm 1. An mpbond addition to §4.3.3.
    fn wake_cost(&self, ctx: &SchedContext, p: &PathView) -> f64 {
        if ctx.finite && p.outstanding > 0 && p.wan_idle.is_finite() {
            self.quiet_helper_cost(p).max(0.0)
        } else {
            0.0
        }
    }

    /// Whether the segment about to be scheduled ends the finite transfer sooner on
    /// subflow `t` than left to the others: Algorithm 1's test (line 12) asks only whether
    /// the segment's first byte would arrive before the faster subflows are through the
    /// backlog, but its last byte arrives `segment / Th_t` later, 0.13 s for 16 KiB on a
    /// 1 Mbit/s path. With `L(x)` the time the busy subflows finish `x` bytes (water-filling
    /// from their PADs), the segment goes on `t` only if `max(PAD_t + segment / Th_t,
    /// L(backlog - segment)) < L(backlog)`. An mpbond refinement of §4.3.3 for the end of
    /// a transfer, where a slow subflow was given the last segments and finished after the
    /// direct one (docs/evaluation.md, item 18).
    fn segment_pays(&self, ctx: &SchedContext, paths: &[PathView], t: usize, pad_t: f64) -> bool {
        let th_t = paths[t].effective_throughput();
        if th_t <= 0.0 {
            return true;
        }
        let seg = ctx.segment.min(ctx.untransmitted) as f64;
        // As in Algorithm 1, the busy subflows are the ones that carry the rest if this one
        // waits (a deferral is asked again when one of them frees up); with none busy the
        // segment goes.
        let others: Vec<(f64, f64)> = paths
            .iter()
            .filter(|p| !p.idle)
            .map(|p| (self.cfg.pad.pad(p), p.effective_throughput()))
            .collect();
        let without = finish_level(&others, ctx.untransmitted as f64);
        if !without.is_finite() {
            return true;
        }
        let with = (pad_t + seg / th_t).max(finish_level(&others, ctx.untransmitted as f64 - seg));
        with < without
    }

    /// What touching a helper subflow with nothing left on its HS-Path costs its cellular
    /// radio, in seconds of gain a recall or new data must bring: the time the HS-Path has
    /// been idle, at most [`PamsConfig::wake_gain`]. Zero for any other subflow.
    fn quiet_helper_cost(&self, p: &PathView) -> f64 {
        if p.hs_path_drained() {
            p.wan_idle.min(self.cfg.wake_gain.as_secs_f64())
        } else {
            0.0
        }
    }

    /// The longest queue a subflow may hold and still take new bytes, while late binding
    /// is on and the transfer's unscheduled bytes are within its horizon of the end
    /// ([`PamsConfig::late_bind`]); `None` otherwise.
    fn late_bind_cap(&self, ctx: &SchedContext, paths: &[PathView]) -> Option<f64> {
        let q = self.cfg.late_bind?;
        if !ctx.finite {
            return None;
        }
        let rate: f64 = paths.iter().map(|p| p.effective_throughput()).sum();
        (ctx.untransmitted as f64 <= rate * self.cfg.late_bind_horizon).then_some(q)
    }

    /// The subflows the energy-aware admission lets PAMS use for `backlog` bytes
    /// ([`admission::admit`]); all of them when no value of time is set.
    fn admitted<'p>(&self, paths: &'p [PathView], backlog: f64) -> Cow<'p, [PathView]> {
        match self.cfg.time_value {
            Some(w) => Cow::Owned(admission::admit(self.cfg.pad, paths, backlog, w)),
            None => Cow::Borrowed(paths),
        }
    }
}

/// When `bytes` more would be delivered if every subflow sent from its PAD on at its
/// effective throughput (water-filling: the level `L` with `sum (L - PAD_i)+ * Th_i =
/// bytes`). Infinity when no subflow has a throughput.
pub(crate) fn finish_level(subflows: &[(f64, f64)], bytes: f64) -> f64 {
    let mut s: Vec<(f64, f64)> = subflows
        .iter()
        .copied()
        .filter(|&(_, th)| th > 0.0)
        .collect();
    s.sort_by(|a, b| a.0.total_cmp(&b.0));
    let (mut rate, mut left) = (0.0, bytes);
    for k in 0..s.len() {
        rate += s[k].1;
        let level = s[k].0 + left / rate;
        match s.get(k + 1) {
            Some(&(next, _)) if level > next => left -= (next - s[k].0) * rate,
            _ => return level,
        }
    }
    f64::INFINITY
}

/// What is left to deliver: the unscheduled bytes and those still outstanding (a recall or
/// a rescue sends the latter again).
fn remaining(ctx: &SchedContext, paths: &[PathView]) -> f64 {
    ctx.untransmitted as f64 + paths.iter().map(|p| p.outstanding as f64).sum::<f64>()
}

/// How much sooner `bytes` would be delivered with subflow `t` than without it, seconds.
fn finish_gain(model: PadModel, paths: &[PathView], t: usize, bytes: f64) -> f64 {
    let mut subflows: Vec<(f64, f64)> = paths
        .iter()
        .map(|p| (model.pad(p), p.effective_throughput()))
        .collect();
    let with = finish_level(&subflows, bytes);
    subflows.remove(t);
    let without = finish_level(&subflows, bytes);
    if without.is_finite() {
        without - with
    } else {
        f64::INFINITY
    }
}

impl Default for Pams {
    fn default() -> Self {
        Pams::new(PamsConfig::default())
    }
}

impl Scheduler for Pams {
    fn name(&self) -> &'static str {
        "pams"
    }

    /// Algorithm 1. The target is the idle subflow with the smallest PAD (line 6). Each busy
    /// subflow `i` whose PAD is below the target's could deliver `(PAD[target] - PAD[i]) *
    /// Th[i]` more bytes before a byte sent on the target arrives, with `Th[i]` the subflow's
    /// end-to-end throughput, `min(Th_hs, Th_p)` for a helper (line 10). If the busy subflows
    /// together could carry more than what is left to send, sending on the target would only
    /// make the transfer finish later, so the segment waits (line 12). With a lookahead
    /// ([`PamsConfig::lookahead_rtts`]) what is left to send counts at most what all
    /// subflows can deliver within that horizon.
    fn select(&mut self, ctx: &SchedContext, paths: &[PathView]) -> Decision {
        let paths = &*self.admitted(paths, ctx.untransmitted as f64);
        let queue_cap = self.late_bind_cap(ctx, paths);
        let backlog = match self.cfg.lookahead_rtts {
            Some(r) if !ctx.finite => (ctx.untransmitted as f64).min(lookahead_bytes(paths, r)),
            _ => ctx.untransmitted as f64,
        };
        // The idle subflow with the smallest PAD is Algorithm 1's target. The next one is
        // tried only when it would wake a finished helper for too little (`wake_cost`).
        let mut passed: Vec<bool> = Vec::new();
        loop {
            let mut target: Option<(usize, f64)> = None;
            for (i, p) in paths.iter().enumerate() {
                if !p.idle
                    || passed.get(i).copied().unwrap_or(false)
                    || queue_cap.is_some_and(|q| queue_delay(p) > q)
                {
                    continue;
                }
                let d = self.cfg.pad.pad(p);
                if target.is_none_or(|(_, best)| d < best) {
                    target = Some((i, d));
                }
            }
            let Some((t, pad_t)) = target else {
                return Decision::Defer;
            };
            let diff: f64 = paths
                .iter()
                .filter(|p| !p.idle)
                .map(|p| (self.cfg.pad.pad(p), p.effective_throughput()))
                .filter(|&(d, _)| d < pad_t)
                .map(|(d, th)| (pad_t - d) * th)
                .sum();
            if diff > backlog {
                return Decision::Defer;
            }
            if ctx.finite && !self.segment_pays(ctx, paths, t, pad_t) {
                return Decision::Defer;
            }
            let cost = self.wake_cost(ctx, &paths[t]);
            if cost > 0.0 && finish_gain(self.cfg.pad, paths, t, backlog) < cost {
                // Rare (the end of a transfer): only now does the pass list allocate.
                passed.resize(paths.len(), false);
                passed[t] = true;
                continue;
            }
            return Decision::Send(paths[t].id);
        }
    }

    /// With the energy-aware admission on, the helpers it leaves out of delivering what is
    /// left: the unscheduled bytes and those still outstanding (a rescue resends the
    /// latter).
    fn left_out(&self, ctx: &SchedContext, paths: &[PathView]) -> Vec<SubflowId> {
        if self.cfg.time_value.is_none() {
            return Vec::new();
        }
        let kept = self.admitted(paths, remaining(ctx, paths));
        paths
            .iter()
            .filter(|p| !kept.iter().any(|k| k.id == p.id))
            .map(|p| p.id)
            .collect()
    }

    /// Reinjection (§4.3.4): when nothing is left unscheduled and
    /// `(maxPAD - minPAD) / minPAD > eta`, recall bytes from the subflow with the largest PAD:
    /// `(maxPAD - minPAD) * B` with `B` that subflow's effective throughput ([`RecallAmount`]
    /// says which formula). Only a subflow with unacknowledged data can be the source, and
    /// only a gain of more than the receiving subflow's round trip is worth a recall (its
    /// minimum RTT once it has nothing in flight).
    fn reinjection(&mut self, ctx: &SchedContext, paths: &[PathView]) -> Option<Recall> {
        if !self.cfg.reinjection || ctx.untransmitted > 0 || ctx.now < self.hold_until {
            return None;
        }
        // Recalled bytes go back to the meta buffer and from there to an admitted subflow:
        // a helper left out by the energy-aware admission is no destination (it stays a
        // source). With nothing unscheduled the admission prices the outstanding data.
        let dests = self.admitted(paths, remaining(ctx, paths));
        let (min_pad, min_th, min_rtt, dest_drained) = dests
            .iter()
            .map(|p| {
                // The round trip a recalled byte would see there. A subflow with nothing
                // in flight has drained its queue, but its smoothed RTT still holds the
                // queueing of its last data (the 1 MB LTE queues of experiment 11d put
                // 0.3-0.8 s into it), which would block every recall to it at the end of a
                // chunk; its minimum RTT is what the next byte meets (as `pad_drain` says).
                let own = if p.inflight == 0 {
                    p.propagation_rtt()
                } else {
                    p.rtt
                };
                // The same for an emptied pipe, whose reported RTT is its smoothed one while
                // the helper relays.
                let pipe = p.pipe.as_ref().map_or(0.0, |q| {
                    if q.buffered == 0 {
                        q.propagation_rtt()
                    } else {
                        q.rtt
                    }
                });
                let rtt = own + pipe;
                let drained = p.queued == 0 && p.pipe.as_ref().is_none_or(|q| q.buffered == 0);
                (self.cfg.pad.pad(p), p.effective_throughput(), rtt, drained)
            })
            .fold((f64::INFINITY, 0.0, 0.0, false), |a, b| {
                if b.0 < a.0 {
                    b
                } else {
                    a
                }
            });
        // Toward a subflow that has carried all it had, whose capacity would otherwise go
        // unused, sources are read at the rate they may well fall to
        // ([`PamsConfig::shortfall_sigmas`]). Between two loaded subflows both estimates
        // are as unsure, and reading one of them slower would only move bytes by the
        // difference of their shortfalls.
        let sigmas = if dest_drained {
            self.cfg.shortfall_sigmas
        } else {
            0.0
        };
        // The first source with the largest PAD, held by value: a cautious view is a copy.
        let (src, max_pad) = paths
            .iter()
            .filter(|p| p.outstanding > 0)
            .map(|p| p.cautious(sigmas))
            .fold(None, |best: Option<(PathView, f64)>, p| {
                let d = self.cfg.pad.pad(&p);
                match best {
                    Some((_, bd)) if bd >= d => best,
                    _ => Some((p, d)),
                }
            })?;
        let src = &src;
        if !(min_pad.is_finite() && min_pad > 0.0) {
            return None;
        }
        if (max_pad - min_pad) / min_pad <= self.cfg.eta {
            return None;
        }
        // A gain within one round trip of the receiving subflow is below what PAD can tell
        // apart, and near the end of a transfer such recalls bounce small tails between
        // subflows, waking a helper's cellular radio that had finished for a few kilobytes.
        // (An mpbond addition to §4.3.4.)
        if max_pad - min_pad <= min_rtt {
            return None;
        }
        // A helper subflow with nothing left on its HS-Path has handed everything to the
        // helper; recalling from it sends the cancel over that idle cellular link and wakes
        // the radio (MPBond §6.2's energy argument): the gain must pay for the tail it
        // stretches, or past the tail for a new promotion.
        if max_pad - min_pad < self.quiet_helper_cost(src) {
            return None;
        }
        let th = src.effective_throughput();
        let r = match self.cfg.recall {
            RecallAmount::Paper => (max_pad - min_pad) * th,
            RecallAmount::Balanced => (max_pad - min_pad) * th * min_th / (th + min_th).max(1e-9),
        }
        .floor();
        let bytes = (r as u64).min(src.outstanding);
        if bytes == 0 {
            return None;
        }
        // The hold lets PAD reflect the recall. A direct path's recall shows in the sender's
        // own books at once (its outstanding bytes, and so the clamp of B_s, drop), so its
        // propagation round trip is enough; its smoothed RTT would be a second or more on a
        // path stalled in an LTE outage, and would block the next recall from that very
        // path for as long. So does a helper's whose recalled bytes all still sit in the
        // HS-Path's TCP here (a recall takes the highest DSNs, the last written): its
        // outstanding bytes and the clamp of B_s and B_p drop at once, and the helper's
        // buffer never held them. Only a recall that reaches into the helper's buffer needs
        // the cancel to cross the HS-Path and feedback to come back: one smoothed RTT there,
        // which a deep queue makes 0.7 s (11d, three devices; item 52 of
        // docs/evaluation.md's "What we changed").
        let settle = if src.kind == PathKind::Direct || bytes <= src.queued {
            src.propagation_rtt()
        } else {
            src.rtt
        };
        let hold = Duration::from_secs_f64((self.cfg.hold_rtts * settle).max(0.0));
        self.hold_until = ctx.now + hold.max(self.cfg.min_hold);
        Some(Recall {
            from: src.id,
            bytes,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheduler::testutil::*;
    use mpbond_proto::SubflowId;

    /// PAMS with the paper's PAD (§4.3.2): the numbers in these tests are worked out with it.
    fn paper_cfg() -> PamsConfig {
        PamsConfig {
            pad: PadModel::Paper,
            ..PamsConfig::default()
        }
    }

    fn published() -> Pams {
        Pams::new(paper_cfg())
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn pad_direct() {
        // OWD 25 ms + 100 000 B / 1 000 000 B/s = 0.125 s
        let p = direct(0, 50.0, 8.0, 100_000, true);
        assert!(close(pad(&p), 0.125));
    }

    #[test]
    fn pad_helper_buffer_still_full_after_drain() {
        // B_p/B_s + 1 = 3 > Th_p/Th_hs = 0.5: case 2.
        // 0.020 + (125 000 + 250 000) / 625 000 + 0.002 = 0.622
        // First principles: T1 = 0.1 s, B_p' = 250 000 - 62 500 + 125 000 = 312 500,
        // T2 = 0.5 s, total = 0.1 + 0.02 + 0.5 + 0.002.
        let p = helper(1, 40.0, 10.0, 125_000, 4.0, 5.0, 250_000, true);
        assert!(close(pad(&p), 0.622));
    }

    #[test]
    fn pad_helper_buffer_empties() {
        // B_p/B_s + 1 = 1.4 <= Th_p/Th_hs = 5: case 3.
        // 0.020 + 250 000 / 250 000 + 0.002 = 1.022 (T1 = 1 s drains B_p = 100 000 at
        // 1.25 MB/s long before the sender queue is through, so B_p' = 0).
        let p = helper(1, 40.0, 2.0, 250_000, 4.0, 10.0, 100_000, true);
        assert!(close(pad(&p), 1.022));
    }

    #[test]
    fn pad_cases_meet_at_the_boundary_and_handle_empty_sender_queue() {
        // B_p/B_s + 1 = 2 = Th_p/Th_hs: case 3, which equals case 2 there.
        let p = helper(1, 40.0, 4.0, 100_000, 4.0, 8.0, 100_000, true);
        assert!(close(pad(&p), 0.02 + 0.2 + 0.002));
        // B_s = 0 with a non-empty helper buffer: case 2, 0.02 + 50 000/625 000 + 0.002.
        let p = helper(1, 40.0, 10.0, 0, 4.0, 5.0, 50_000, true);
        assert!(close(pad(&p), 0.102));
        // Everything empty: just the two one-way delays.
        let p = helper(1, 40.0, 10.0, 0, 4.0, 5.0, 0, true);
        assert!(close(pad(&p), 0.022));
    }

    #[test]
    fn pad_helper_without_feedback_and_without_throughput() {
        let mut p = helper(1, 40.0, 10.0, 125_000, 4.0, 5.0, 0, true);
        p.pipe = None;
        assert!(close(pad(&p), 0.02 + 0.1));
        let p = direct(0, 50.0, 0.0, 10, true);
        assert!(pad(&p).is_finite() && pad(&p) > 1.0);
    }

    #[test]
    fn pad_drain_counts_bytes_in_flight_as_draining() {
        // A direct path with a standing queue: min RTT 50 ms, srtt 150 ms, 1 MB/s, and
        // 150 000 bytes in flight (the window). A new byte waits 100 ms in the queue, then
        // 25 ms of propagation: 0.125 s. The paper's form adds both halves of the RTT on top
        // of the whole window's service time.
        let mut p = direct(0, 150.0, 8.0, 150_000, false);
        p.min_rtt = 0.05;
        assert!(close(pad_drain(&p), 0.125), "{}", pad_drain(&p));
        assert!(close(pad(&p), 0.225));
        // Nothing in flight: one-way delay in both forms.
        let mut idle = direct(0, 150.0, 8.0, 0, true);
        assert!(close(pad_drain(&idle), 0.075) && close(pad(&idle), 0.075));
        // Once the minimum is known, an empty path's byte meets no queue: the 150 ms smoothed
        // RTT is the previous transfer's, and only the propagation delay counts.
        idle.min_rtt = 0.05;
        assert!(close(pad_drain(&idle), 0.025), "{}", pad_drain(&idle));
        assert!(close(pad(&idle), 0.075));
        // A helper whose 5 Mbps pipe is the bottleneck: everything ahead of the byte (100 000
        // on the HS-Path, 400 000 at the helper) leaves the pipe at 625 000 B/s.
        let mut h = helper(1, 60.0, 10.0, 100_000, 4.0, 5.0, 400_000, true);
        h.min_rtt = 0.05;
        assert!(close(pad_drain(&h), 0.8), "{}", pad_drain(&h));
        assert!(close(pad(&h), 0.03 + 0.8 + 0.002));
        // The helper's report is one HS-Path delay old: bytes acknowledged on the HS-Path but
        // not in its last report are still ahead of the byte (outstanding 600 000).
        h.outstanding = 600_000;
        assert!(close(pad_drain(&h), 0.96), "{}", pad_drain(&h));
        // Knowing what the HS-Path delivered since the report bounds that from above:
        // 50 000 bytes since, so at most 550 000 ahead, whatever stays unacknowledged beyond
        // (the primary's DATA_ACKs list only the lowest SACK ranges) ...
        let pipe = |h: &mut PathView, unreported| h.pipe.as_mut().unwrap().unreported = unreported;
        pipe(&mut h, Some(50_000));
        assert!(close(pad_drain(&h), 0.88), "{}", pad_drain(&h));
        h.outstanding = 7_600_000;
        assert!(close(pad_drain(&h), 0.88), "{}", pad_drain(&h));
        // ... it only caps the outstanding bytes: fewer of them still count as they are ...
        h.outstanding = 520_000;
        assert!(close(pad_drain(&h), 0.832), "{}", pad_drain(&h));
        // ... and the queue and the helper's buffer always count in full.
        h.outstanding = 0;
        assert!(close(pad_drain(&h), 0.8), "{}", pad_drain(&h));
        pipe(&mut h, None);
        h.outstanding = 7_600_000;
        assert!(close(pad_drain(&h), 12.16), "{}", pad_drain(&h));
        // A fast, empty pipe: the HS-Path is the bottleneck (125 000 bytes in flight at
        // 1.25 MB/s, 25 ms back) and the pipe adds its one-way delay.
        let mut fast = helper(1, 60.0, 10.0, 125_000, 4.0, 20.0, 0, true);
        fast.min_rtt = 0.05;
        assert!(
            close(pad_drain(&fast), 0.075 + 0.002),
            "{}",
            pad_drain(&fast)
        );
        // The model is a setting; names parse, others are a clear error.
        assert_eq!("paper".parse::<PadModel>(), Ok(PadModel::Paper));
        assert_eq!("drain".parse::<PadModel>(), Ok(PadModel::Drain));
        let e = "fifo".parse::<PadModel>().unwrap_err().to_string();
        assert!(e.contains("fifo") && e.contains("drain"), "{e}");
    }

    /// A helper's last bytes in 07: nothing left on its HS-Path (min RTT 52 ms), 32 768
    /// bytes at the helper, a 5 Mbit/s pipe whose smoothed RTT (163 ms) still holds the
    /// queue of what it buffered a moment earlier. Read as the pipe's one-way delay it put
    /// the byte at 0.026 + 0.0815 s; with the pipe's minimum RTT (4 ms) the byte waits
    /// behind the 32 768 bytes the pipe drains in 52 ms, and the last of them arrived 2 ms
    /// before its ACK. A helper that sends no minimum keeps the old reading.
    #[test]
    fn pad_drain_takes_the_pipes_minimum_rtt_for_its_delay() {
        let mut h = helper(1, 52.0, 10.0, 0, 163.0, 5.0, 32_768, true);
        h.min_rtt = 0.052;
        assert!(close(pad_drain(&h), 0.026 + 0.0815), "{}", pad_drain(&h));
        h.pipe.as_mut().unwrap().min_rtt = 0.004;
        let drain = 32_768.0 / 625_000.0;
        assert!(close(pad_drain(&h), drain - 0.002), "{}", pad_drain(&h));
        // Emptied, the byte crosses both hops at their propagation delays.
        h.pipe.as_mut().unwrap().buffered = 0;
        h.outstanding = 0;
        assert!(close(pad_drain(&h), 0.026 + 0.002), "{}", pad_drain(&h));
        // A minimum above the reported RTT (a window of minutes behind a pipe that got
        // faster) counts no more than the RTT.
        h.pipe.as_mut().unwrap().min_rtt = 0.2;
        assert!(close(pad_drain(&h), 0.026 + 0.0815), "{}", pad_drain(&h));
        // The paper's PAD is as published: the reported RTT.
        assert!(close(pad(&h), 0.026 + 0.0815), "{}", pad(&h));
    }

    /// PS busy with PAD 0.075 s; the idle helper's PAD is 0.527 s.
    fn two_paths() -> Vec<PathView> {
        vec![
            direct(0, 50.0, 8.0, 50_000, false),
            helper(1, 50.0, 10.0, 0, 4.0, 5.0, 312_500, true),
        ]
    }

    #[test]
    fn deferral_two_paths() {
        let paths = two_paths();
        assert!(close(pad(&paths[0]), 0.075));
        assert!(close(pad(&paths[1]), 0.527));
        // Diff = (0.527 - 0.075) * 1 000 000 = 452 000 bytes.
        let mut s = unbounded();
        assert_eq!(s.select(&ctx(400_000), &paths), Decision::Defer);
        assert_eq!(
            s.select(&ctx(452_001), &paths),
            Decision::Send(SubflowId(1))
        );
        assert_eq!(
            s.select(&ctx(5_000_000), &paths),
            Decision::Send(SubflowId(1))
        );
    }

    #[test]
    fn deferral_sums_over_busy_subflows_with_effective_throughput() {
        let mut paths = two_paths();
        // A busy helper: HS 10 Mbps, pipe 3 Mbps, so Th = min = 375 000 B/s;
        // PAD = 0.025 + 64 875 / 375 000 + 0.002 = 0.2.
        paths.push(helper(2, 50.0, 10.0, 0, 4.0, 3.0, 64_875, false));
        assert!(close(pad(&paths[2]), 0.2));
        // A busy path slower than the target does not count.
        paths.push(direct(3, 50.0, 8.0, 1_000_000, false));
        // Diff = 452 000 + (0.527 - 0.2) * 375 000 = 574 625.
        let mut s = unbounded();
        assert_eq!(s.select(&ctx(574_000), &paths), Decision::Defer);
        assert_eq!(
            s.select(&ctx(575_000), &paths),
            Decision::Send(SubflowId(1))
        );
    }

    #[test]
    fn target_is_idle_subflow_with_min_pad() {
        let paths = vec![
            direct(0, 50.0, 8.0, 200_000, true),              // 0.225
            helper(1, 50.0, 10.0, 0, 4.0, 5.0, 50_000, true), // 0.107
            direct(2, 10.0, 8.0, 0, false),                   // 0.005 but busy
        ];
        let mut s = unbounded();
        // Busy path 2 could carry (0.107 - 0.005) * 1e6 = 102 000 bytes first.
        assert_eq!(
            s.select(&ctx(1_000_000), &paths),
            Decision::Send(SubflowId(1))
        );
        assert_eq!(s.select(&ctx(100_000), &paths), Decision::Defer);
        let all_busy: Vec<_> = paths
            .into_iter()
            .map(|mut p| {
                p.idle = false;
                p
            })
            .collect();
        assert_eq!(s.select(&ctx(1), &all_busy), Decision::Defer);
    }

    /// Algorithm 1 exactly as published: the whole backlog counts.
    fn unbounded() -> Pams {
        Pams::new(PamsConfig {
            lookahead_rtts: None,
            ..paper_cfg()
        })
    }

    #[test]
    fn lookahead_keeps_a_full_helper_buffer_from_growing_under_a_large_backlog() {
        // The helper's buffer holds 0.5 s of pipe data (PAD 0.527 s) while PS is busy with
        // PAD 0.075 s. The paper's rule sends on the helper whenever 452 000 bytes or more
        // are waiting; a bulk transfer always has that much.
        let paths = two_paths();
        assert_eq!(
            unbounded().select(&ctx(50_000_000), &paths),
            Decision::Send(SubflowId(1))
        );
        // Lookahead: 2 RTTs of the slowest subflow (helper: 50 + 4 ms) at 1 + 0.625 MB/s
        // = 175 500 bytes < 452 000, so the helper waits for its pipe to drain.
        let la = lookahead_bytes(&paths, 2.0);
        assert!(close(la, 0.108 * 1_625_000.0), "{la}");
        let mut s = published();
        assert_eq!(s.select(&ctx(50_000_000), &paths), Decision::Defer);
        // Once the buffer has drained to 0.1 s (PAD 0.127 s, diff 52 000) it sends again.
        let mut paths = paths;
        paths[1].pipe.as_mut().unwrap().buffered = 62_500;
        assert!(close(pad(&paths[1]), 0.127));
        assert_eq!(
            s.select(&ctx(50_000_000), &paths),
            Decision::Send(SubflowId(1))
        );
        // A small backlog is Algorithm 1 unchanged.
        assert_eq!(s.select(&ctx(40_000), &paths), Decision::Defer);
    }

    /// The amounts as published; `wake_gain` off (its own test below).
    fn paper() -> Pams {
        Pams::new(PamsConfig {
            recall: RecallAmount::Paper,
            wake_gain: Duration::ZERO,
            ..paper_cfg()
        })
    }

    fn balanced() -> Pams {
        Pams::new(PamsConfig {
            wake_gain: Duration::ZERO,
            ..paper_cfg()
        })
    }

    #[test]
    fn small_gains_do_not_wake_a_finished_helper_or_bounce_within_an_rtt() {
        // The helper's HS-Path has nothing queued and its idle time is unknown: a 0.45 s gain
        // is below the 1 s wake_gain.
        assert_eq!(published().reinjection(&ctx(0), &two_paths()), None);
        // Idle for 2 s, the same; idle for 0.5 s (the radio in its tail), still not worth
        // stretching the tail; idle for 0.3 s (its last feedback just now), worth it.
        for (idle, worth) in [(2.0, false), (0.5, false), (0.3, true)] {
            let mut paths = two_paths();
            paths[1].wan_idle = idle;
            let r = published().reinjection(&ctx(0), &paths);
            assert_eq!(r.is_some(), worth, "HS-Path idle {idle} s");
        }
        // With data still on its HS-Path the same gap is recalled.
        let mut paths = two_paths();
        paths[1].queued = 1000;
        paths[1].outstanding += 1000;
        assert!(published().reinjection(&ctx(0), &paths).is_some());
        // A gap above eta but within the receiving subflow's RTT: no recall.
        // PAD0 = 0.1 (RTT 200 ms, empty), PAD1 = 0.02 + 0.12 = 0.14: 40% over, but the
        // 40 ms gain is within path 0's 200 ms round trip.
        let paths = vec![
            direct(0, 200.0, 8.0, 0, true),
            direct(1, 40.0, 8.0, 120_000, true),
        ];
        assert_eq!(balanced().reinjection(&ctx(0), &paths), None);
        let mut short = paths.clone();
        short[0].rtt = 0.03; // PAD0 = 0.015: the same recall is now worth it
        assert!(balanced().reinjection(&ctx(0), &short).is_some());
    }

    /// The end of a chunk behind deep queues: the receiving subflow has drained (nothing in
    /// flight) but its smoothed RTT still holds its last data's queueing (500 ms on a 50 ms
    /// path), while the other drains 0.6 MB at 10 Mbit/s. PAD1 = 0.48 - 0.025 = 0.455 s and
    /// PAD0 = 0.025 s: the 0.43 s gain is worth a recall against the drained path's 50 ms
    /// round trip, though not against the 500 ms its smoothed RTT says. While that path
    /// still has data in flight, its smoothed RTT counts.
    #[test]
    fn a_drained_subflow_is_judged_by_its_minimum_rtt() {
        let mut fast = direct(0, 500.0, 40.0, 0, true);
        fast.min_rtt = 0.05;
        let slow = direct(1, 50.0, 10.0, 600_000, false);
        let r = balanced().reinjection(&ctx(0), &[fast.clone(), slow.clone()]);
        assert!(
            matches!(r, Some(Recall { from: SubflowId(1), bytes }) if bytes > 100_000),
            "{r:?}"
        );
        let mut busy = fast;
        busy.inflight = 20_000;
        assert_eq!(balanced().reinjection(&ctx(0), &[busy, slow]), None);
    }

    #[test]
    fn finish_level_fills_the_earliest_subflows_first() {
        // PAD 0 and 1 s, 1 byte/s each: 3 bytes end at 2 s (2 on the first, 1 on the second).
        assert!(close(finish_level(&[(1.0, 1.0), (0.0, 1.0)], 3.0), 2.0));
        // 0.5 bytes fit before the second subflow starts.
        assert!(close(finish_level(&[(0.0, 1.0), (1.0, 1.0)], 0.5), 0.5));
        assert!(finish_level(&[(0.0, 0.0)], 1.0).is_infinite());
    }

    fn finite(untransmitted: u64) -> SchedContext {
        SchedContext {
            finite: true,
            ..ctx(untransmitted)
        }
    }

    /// The end of 1 MB over PS 5/HS 1 Mbit/s: the PS-Path busy with 171 KB (PAD 0.26 s),
    /// the HS-Path idle (PAD 0.39 s at 125 KB/s), 82 KB left in 16 KiB segments. Algorithm
    /// 1 sends (the PS-Path carries 78 KB < 82 KB before the HS-Path's PAD), but the
    /// segment's last byte would arrive at 0.52 s and the PS-Path alone ends at 0.40 s.
    #[test]
    fn the_last_segments_do_not_go_where_they_end_later() {
        let paths = vec![
            direct(0, 50.0, 4.8, 171_000, false),
            helper(1, 50.0, 1.0, 51_600, 4.0, 40.0, 0, true),
        ];
        assert!((pad_drain(&paths[0]) - 0.26).abs() < 1e-6);
        assert!((pad_drain(&paths[1]) - 0.39).abs() < 1e-3);
        let seg = |c: SchedContext| SchedContext {
            segment: 16_384,
            ..c
        };
        assert_eq!(
            Pams::default().select(&seg(finite(82_000)), &paths),
            Decision::Defer
        );
        // An open stream: Algorithm 1 as published.
        assert_eq!(
            Pams::default().select(&seg(ctx(82_000)), &paths),
            Decision::Send(SubflowId(1))
        );
        // 400 KB left: the segment ends at 0.52 s, the PS-Path would need until 0.93 s.
        assert_eq!(
            Pams::default().select(&seg(finite(400_000)), &paths),
            Decision::Send(SubflowId(1))
        );
    }

    #[test]
    fn a_helper_that_did_its_share_is_not_woken_for_a_knife_edge_gain() {
        // End of a download: PS busy (PAD 0.121 s), the helper's HS-Path done and quiet for
        // 0.3 s, its buffer draining (PAD 0.187 s). Algorithm 1 sends 8 750 of the 50 000
        // bytes left to the helper: 7 ms sooner, for 0.3 s more of its radio.
        let mut paths = vec![
            direct(0, 50.0, 5.0, 60_000, false),
            helper(1, 50.0, 10.0, 0, 4.0, 5.0, 100_000, true),
        ];
        paths[1].wan_idle = 0.3;
        let gain = finish_gain(PadModel::Paper, &paths, 1, 50_000.0);
        assert!(close(gain, 0.201 - 0.194), "{gain}");
        assert_eq!(published().select(&finite(50_000), &paths), Decision::Defer);
        // The same with unknown idleness, during a stream, or with the radio never quiet:
        // Algorithm 1 unchanged.
        let mut unknown = paths.clone();
        unknown[1].wan_idle = f64::INFINITY;
        let mut busy_radio = paths.clone();
        busy_radio[1].wan_idle = 0.0;
        for (p, c) in [
            (&unknown, finite(50_000)),
            (&busy_radio, finite(50_000)),
            (&paths, ctx(50_000)),
        ] {
            assert_eq!(published().select(&c, p), Decision::Send(SubflowId(1)));
        }
        // 2 MB left: the helper brings the finish 1.57 s forward, worth even a 1 s wake.
        let mut long_idle = paths.clone();
        long_idle[1].wan_idle = 5.0;
        assert_eq!(
            published().select(&finite(2_000_000), &long_idle),
            Decision::Send(SubflowId(1))
        );
        // The helper's PAD is the smallest but the PS-Path is idle too: the segment goes
        // there instead of waiting (helper gain 0.071 s < 0.3 s).
        let mut both_idle = vec![
            direct(0, 50.0, 5.0, 60_000, true),
            helper(1, 50.0, 10.0, 0, 4.0, 5.0, 20_000, true),
        ];
        both_idle[1].wan_idle = 0.3;
        assert_eq!(
            published().select(&finite(50_000), &both_idle),
            Decision::Send(SubflowId(0))
        );
        both_idle[1].wan_idle = 0.05;
        assert_eq!(
            published().select(&finite(50_000), &both_idle),
            Decision::Send(SubflowId(1))
        );
    }

    /// With [`PamsConfig::shortfall_sigmas`] at 1, the recall test reads a source whose ACKs
    /// lately fell short of its estimate that much slower. A PS-Path with 90 KB left at 1 MB/s
    /// (PAD 65 ms) beside an empty one (25 ms): the 40 ms gap is within the empty path's
    /// 50 ms round trip, so nothing moves. With a shortfall of 0.5 the source reads 607 KB/s,
    /// its PAD 123 ms, and a recall balances the two at that rate; with the shortfall
    /// switched off (0 sigmas, the default), or toward a subflow with bytes of its own,
    /// nothing moves.
    #[test]
    fn a_source_that_fell_short_of_its_estimate_is_read_slower_by_the_recall_test() {
        let empty = direct(0, 50.0, 8.0, 0, true);
        let steady = direct(1, 50.0, 8.0, 90_000, false);
        let ps =
            |s: &mut Pams, src: &PathView| s.reinjection(&ctx(0), &[empty.clone(), src.clone()]);
        let on = PamsConfig {
            shortfall_sigmas: 1.0,
            ..PamsConfig::default()
        };
        assert_eq!(ps(&mut Pams::new(on), &steady), None);
        let slowed = PathView {
            rate_shortfall: 0.5,
            ..steady.clone()
        };
        let th = 1e6 * (-0.5f64).exp();
        let gap = (90_000.0 / th - 0.025) - 0.025;
        let balanced = (gap * th * 1e6 / (th + 1e6)).floor() as u64;
        assert_eq!(
            ps(&mut Pams::new(on), &slowed),
            Some(Recall {
                from: SubflowId(1),
                bytes: balanced
            })
        );
        assert_eq!(ps(&mut Pams::new(PamsConfig::default()), &slowed), None);
        // Toward a subflow that still has bytes of its own (10 KB, the same 25 ms PAD) both
        // estimates are as unsure: the source is read at its estimate, and nothing moves.
        let loaded = direct(0, 50.0, 8.0, 10_000, false);
        assert_eq!(Pams::new(on).reinjection(&ctx(0), &[loaded, slowed]), None);
    }

    #[test]
    fn reinjection_amount() {
        let paths = two_paths();
        let mut s = paper();
        // Something still unscheduled: no reinjection.
        assert_eq!(s.reinjection(&ctx(1), &paths), None);
        // (0.527 - 0.075) / 0.075 = 6.03 > 0.2; r = 0.452 * min(1.25 MB/s, 625 kB/s)
        // = 282 500 bytes from the helper subflow.
        assert_eq!(
            s.reinjection(&ctx(0), &paths),
            Some(Recall {
                from: SubflowId(1),
                bytes: 282_500
            })
        );
        // Held down right after a recall.
        assert_eq!(s.reinjection(&ctx(0), &paths), None);
        let mut later = ctx(0);
        later.now = Time::from_millis(51);
        assert!(s.reinjection(&later, &paths).is_some());
    }

    #[test]
    fn balanced_reinjection_amount() {
        // Same paths: B_max = 625 000 B/s (helper), B_min = 1 000 000 B/s (PS).
        // r = 0.452 * 625 000 * 1 000 000 / 1 625 000 = 173 846 bytes; afterwards both end at
        // 0.075 + 173 846 / 1e6 = 0.527 - 173 846 / 625 000 = 0.2488 s.
        let mut s = balanced();
        assert_eq!(
            s.reinjection(&ctx(0), &two_paths()),
            Some(Recall {
                from: SubflowId(1),
                bytes: 173_846
            })
        );
        let end_a: f64 = 0.527 - 173_846.0 / 625_000.0;
        let end_b = 0.075 + 173_846.0 / 1_000_000.0;
        assert!((end_a - end_b).abs() < 1e-5);
    }

    /// After a recall from a direct subflow the next may come one propagation round trip
    /// later, not one smoothed RTT: the sender's own books show the recall at once, and a
    /// direct path stalled in an outage has a smoothed RTT of a second (in the simulator,
    /// the AT&T PS-Path and Verizon HS-Path from 90 s, 2 MB: 2.791 s with the old hold,
    /// 2.454 s with this one; `scripts/sim-traces`). So may one from a helper whose recalled
    /// bytes all sit in its HS-Path's TCP at the sender; one that reaches into the helper's
    /// buffer waits a round trip of its HS-Path, which its cancel has to cross.
    #[test]
    fn a_recall_holds_for_the_propagation_round_trip_unless_it_reaches_into_a_helpers_buffer() {
        let at = |ms: u64| SchedContext {
            now: Time::ZERO + Duration::from_millis(ms),
            ..ctx(0)
        };
        // A recall from `source` (subflow 1) beside an empty direct path, then the hold of
        // its 50 ms propagation round trip, then the next recall.
        let holds_for_its_propagation_round_trip = |source: PathView| {
            let paths = vec![direct(0, 50.0, 8.0, 0, true), source];
            let mut s = balanced();
            assert_eq!(
                s.reinjection(&at(0), &paths).map(|r| r.from),
                Some(SubflowId(1))
            );
            assert_eq!(s.reinjection(&at(40), &paths), None, "within 50 ms");
            assert_eq!(
                s.reinjection(&at(60), &paths).map(|r| r.from),
                Some(SubflowId(1))
            );
        };
        // The PS-Path holds 1 MB at 1 MB/s behind a 1 s smoothed RTT (50 ms propagation).
        let mut stalled = direct(1, 1000.0, 8.0, 1_000_000, false);
        stalled.min_rtt = 0.05;
        holds_for_its_propagation_round_trip(stalled);
        // The same source as a helper subflow whose bytes all still sit in its HS-Path's
        // TCP at the sender (empty helper buffer): the books show the recall at once too.
        let mut h = helper(1, 1000.0, 8.0, 1_000_000, 4.0, 80.0, 0, false);
        h.min_rtt = 0.05;
        holds_for_its_propagation_round_trip(h);
        // A helper whose recall reaches into its buffer (10 KB left in the HS-Path's TCP,
        // 1 MB at the helper behind a 5 Mbit/s pipe): its cancel must cross the HS-Path and
        // the helper's report come back before PAD shows the recall, one smoothed RTT.
        let mut h = helper(1, 1000.0, 8.0, 10_000, 4.0, 5.0, 1_000_000, false);
        h.min_rtt = 0.05;
        let paths = vec![direct(0, 50.0, 8.0, 0, true), h];
        let mut s = balanced();
        let first = s.reinjection(&at(0), &paths).expect("a recall");
        assert_eq!(first.from, SubflowId(1));
        assert!(
            first.bytes > 10_000,
            "{first:?} reaches into the helper's buffer"
        );
        assert_eq!(
            s.reinjection(&at(60), &paths),
            None,
            "within the HS-Path's RTT"
        );
        assert!(s.reinjection(&at(1010), &paths).is_some());
    }

    /// The queue a byte joins: beyond one bandwidth-delay product on a direct path, and for
    /// a helper what its HS-Path, buffer and pipe hold ahead of it at the pipe's rate.
    #[test]
    fn queue_delay_is_what_a_byte_waits_beyond_propagation() {
        // 1 MB at 3 MB/s over a 50 ms path: 0.333 s to drain, less one RTT of it in flight.
        let d = direct(0, 50.0, 24.0, 1_000_000, true);
        assert!(
            close(queue_delay(&d), 1e6 / 3e6 - 0.05),
            "{}",
            queue_delay(&d)
        );
        // Nothing queued: no queue, whatever the smoothed RTT holds.
        let mut empty = direct(0, 50.0, 24.0, 0, true);
        empty.rtt = 0.4;
        assert_eq!(queue_delay(&empty), 0.0);
        // A helper whose pipe (4 ms, 5 MB/s) holds 500 KB: ahead / Th_p less the pipe's
        // propagation delay at both ends of the byte's wait.
        let mut h = helper(1, 50.0, 80.0, 0, 4.0, 40.0, 500_000, true);
        if let Some(p) = h.pipe.as_mut() {
            p.min_rtt = 0.004;
        }
        let want = 500_000.0 / 5e6 - 0.002 - (0.025 + 0.002);
        assert!(close(queue_delay(&h), want), "{} {want}", queue_delay(&h));
    }

    /// Late binding: near the end of a transfer a subflow whose queue is deeper than the cap
    /// takes nothing more, though its window has room, and takes bytes again once the queue
    /// has drained to the cap; before the horizon, or on an open stream, it fills as before.
    #[test]
    fn late_binding_holds_the_last_bytes_off_a_deep_queue() {
        let mut pams = Pams::new(PamsConfig {
            late_bind: Some(0.1),
            ..PamsConfig::default()
        });
        // Both paths hold 1 MB (0.28 s of queue each); the helper is busy.
        let deep = vec![
            direct(0, 50.0, 24.0, 1_000_000, true),
            helper(1, 50.0, 24.0, 1_000_000, 4.0, 39.0, 0, false),
        ];
        // 2 MB left is within 0.5 s at the 6 MB/s they carry together: hold.
        assert_eq!(pams.select(&finite(2_000_000), &deep), Decision::Defer);
        // Further from the end, or on a stream whose end is unknown, fill as before.
        assert_eq!(
            pams.select(&finite(20_000_000), &deep),
            Decision::Send(SubflowId(0))
        );
        assert_eq!(
            pams.select(&ctx(2_000_000), &deep),
            Decision::Send(SubflowId(0))
        );
        // Off, the deep path takes the bytes.
        assert_eq!(
            Pams::default().select(&finite(2_000_000), &deep),
            Decision::Send(SubflowId(0))
        );
        // Drained to 200 KB (17 ms of queue), the direct path takes them again.
        let mut drained = deep.clone();
        drained[0].queued = 200_000;
        drained[0].outstanding = 200_000;
        assert_eq!(
            pams.select(&finite(2_000_000), &drained),
            Decision::Send(SubflowId(0))
        );
    }

    #[test]
    fn reinjection_threshold_and_cap() {
        let mut s = Pams::new(PamsConfig {
            eta: 10.0,
            wake_gain: Duration::ZERO,
            ..paper_cfg()
        });
        assert_eq!(
            s.reinjection(&ctx(0), &two_paths()),
            None,
            "6.03 < eta = 10"
        );

        // PADs 0.075 and 0.085: (0.085 - 0.075) / 0.075 = 0.13 <= 0.2.
        let paths = vec![
            direct(0, 50.0, 8.0, 50_000, true),
            direct(1, 50.0, 8.0, 60_000, true),
        ];
        assert_eq!(balanced().reinjection(&ctx(0), &paths), None);

        // Never more than the subflow has outstanding.
        let mut paths = two_paths();
        paths[1].outstanding = 1000;
        assert_eq!(
            paper().reinjection(&ctx(0), &paths),
            Some(Recall {
                from: SubflowId(1),
                bytes: 1000
            })
        );
        // Disabled.
        let mut off = Pams::new(PamsConfig {
            reinjection: false,
            ..paper_cfg()
        });
        assert_eq!(off.reinjection(&ctx(0), &two_paths()), None);
    }

    /// With a value of time set, a helper whose radios cost more than the time it saves gets
    /// no segment (Send to the direct path, Defer while only the helper is idle) and is left
    /// out for rescues; without one, or without declared radios, PAMS uses it as before.
    #[test]
    fn the_energy_aware_admission_keeps_a_costly_helper_idle() {
        let paths = |direct_idle: bool| {
            let mut v = pair(18.0, 5.0, 5.0);
            v[0].idle = direct_idle;
            v
        };
        let mut c = ctx(512_000);
        c.finite = true;
        c.segment = 16_384;
        let mut eco = Pams::new(PamsConfig {
            time_value: Some(0.0),
            ..PamsConfig::default()
        });
        assert_eq!(eco.select(&c, &paths(true)), Decision::Send(SubflowId(0)));
        assert_eq!(eco.select(&c, &paths(false)), Decision::Defer);
        assert_eq!(eco.left_out(&c, &paths(false)), vec![SubflowId(1)]);
        // Time only: the idle helper gets the segment.
        let mut pams = Pams::default();
        assert_eq!(pams.select(&c, &paths(false)), Decision::Send(SubflowId(1)));
        assert!(pams.left_out(&c, &paths(false)).is_empty());
        // Radios unknown: the admission has nothing to weigh.
        let mut unknown = paths(false);
        unknown[1].power = None;
        assert_eq!(eco.select(&c, &unknown), Decision::Send(SubflowId(1)));
    }
}
