//! Slow-start queue guard: a link that has filled its bottleneck's queue in slow start is
//! paced a little above the rate it delivers, so that the queue grows slowly instead of
//! doubling into a burst of drops.
//!
//! In slow start CUBIC doubles its window every round trip and the kernel paces it at twice
//! the window's rate, so a link that has reached its bottleneck's rate adds to the queue
//! there as much as the path delivers. Two round trips later the queue overflows and drops
//! a window's worth of packets. That is ordinary TCP; what makes it costly in mpbond is
//! when it happens. PAMS makes every subflow finish together (MPBond §4.3), so the round
//! trip in which a subflow sends the last of its share is the one in which its window is
//! largest, and every subflow reaches it at the same time: the drops are the last 30-40
//! packets of each subflow, no later packet is there to reveal them, and the kernel
//! recovers them only after a retransmission timeout, from a window of one packet. Over the
//! LTE traces of experiment 10a (docs/evaluation.md, item 34) a 1 MB download lost the
//! tails of both its subflows that way in the same 50 ms and took 0.85-0.88 s where the
//! kernel's MPTCP took 0.81-0.84 s; the late-head rescue could not help, as every path was
//! waiting for its own timeout.
//!
//! CUBIC's HyStart is meant to leave slow start at this point, but on cellular links it
//! cannot tell a standing queue from the jitter of the link and of the ACKs' uplink: it
//! left slow start 43 KB into a download there until pacing was turned on, and did not
//! leave it at all in the case above (item 34). The guard asks for more evidence and does
//! less: while a link is in slow start, its smoothed RTT is [`QUEUE_DELAY`] above its
//! minimum, and it has more than [`FLIGHT_BDPS`] bandwidth-delay products and at least
//! [`MIN_FLIGHT`] in flight, the delay is its own queue, the path is delivering at its
//! bottleneck's rate, and the guard caps the link's pacing rate (SO_MAX_PACING_RATE) at
//! `factor` times that rate. The queue then grows by a quarter of the rate per second
//! (factor 1.25) instead of by the whole rate per round trip, so slow start ends by a small
//! loss much later, or the transfer ends first. The cap goes as soon as one condition
//! fails: the queue drained (the path's rate rose), or slow start ended.
//!
//! Why each condition: the bytes in flight rule out what the first version of the guard
//! fell for, a link early in slow start whose RTT rose with a dip of the trace or with its
//! ACKs' slow uplink while it had a few dozen packets out: capped at 1.25 times a rate
//! that its small window limited, it could only grow by a quarter per round trip, and
//! 10a's stretch from 0 s took 0.58-0.68 s instead of 0.53 s. The rate is the larger of the
//! kernel's last delivery-rate sample and the path estimate, so one low sample cannot
//! throttle a path. The guard only caps: it never holds a link below what it delivers.

use crate::sys::TcpInfo;

/// The SO_MAX_PACING_RATE value that keeps pacing on with no cap (see `sys::set_pacing`).
pub const NO_CAP: u64 = u64::MAX - 1;
/// A standing queue: the smoothed RTT at least this fraction of the minimum RTT above it
/// (25 ms on a 50 ms path; a quarter, 12.5 ms, also caught the jitter of LTE traces).
pub const QUEUE_DELAY: f64 = 0.5;
/// ... with more than this many bandwidth-delay products (the path's rate times its
/// minimum RTT) in flight, so that the link's own bytes can fill that queue ...
pub const FLIGHT_BDPS: f64 = 1.5;
/// ... and at least this much: below it the window is too small for its queue to matter.
pub const MIN_FLIGHT: u64 = 64 << 10;
/// The default factor over the delivered rate (`tuning.queue_guard`).
pub const DEFAULT_FACTOR: f64 = 1.25;

/// The guard of one link: whether it caps the link's pacing rate, and at what.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct QueueGuard {
    factor: f64,
    /// An HS-Path's own factor (`tuning.hs_queue_guard`), which holds in slow start and
    /// congestion avoidance alike while the helper's buffer is short.
    hs_factor: Option<f64>,
    /// How long the helper's buffer takes to drain through its pipe, seconds, if known
    /// ([`Self::set_pipe_drain`]).
    pipe_drain: Option<f64>,
    /// The cap the socket has now ([`NO_CAP`] when none).
    cap: u64,
}

impl QueueGuard {
    /// A guard pacing at `factor` times the delivered rate while it holds; a factor below 1
    /// (0: off) never caps.
    pub fn new(factor: f64) -> Self {
        QueueGuard {
            factor,
            hs_factor: None,
            pipe_drain: None,
            cap: NO_CAP,
        }
    }

    /// The guard of a link with `tuning`: none without `pacing` (the guard works through
    /// the kernel's pacing, and a cap would turn it on); on a proxy's HS-Path (`hs_path`)
    /// with `hs_queue_guard` set, that factor in every phase while the helper's buffer is
    /// short, and `queue_guard` in slow start otherwise; on any other link `queue_guard` in
    /// slow start.
    pub fn for_link(tuning: &crate::config::Tuning, hs_path: bool) -> Self {
        if !tuning.pacing {
            QueueGuard::new(0.0)
        } else if hs_path && tuning.hs_queue_guard >= 1.0 {
            QueueGuard {
                hs_factor: Some(tuning.hs_queue_guard),
                ..QueueGuard::new(tuning.queue_guard)
            }
        } else {
            QueueGuard::new(tuning.queue_guard)
        }
    }

    /// Whether this is an HS-Path's own guard, which needs [`Self::set_pipe_drain`].
    pub fn watches_pipe(&self) -> bool {
        self.hs_factor.is_some()
    }

    /// For an HS-Path's own guard: how long the helper's buffer takes to drain through its
    /// pipe (B_p/Th_p, from the pipe's feedback), if known. The buffer is short when that is
    /// less than the HS-Path's queue delay (smoothed RTT less the minimum). Only then does a
    /// drop at the HS-Path's queue leave the pipe idle while the retransmission crosses that
    /// queue, so only then does the guard hold past slow start and at its own factor;
    /// otherwise the link has the ordinary guard.
    pub fn set_pipe_drain(&mut self, seconds: Option<f64>) {
        self.pipe_drain = seconds;
    }

    /// The pacing cap in force, bytes per second, if any.
    pub fn cap(&self) -> Option<u64> {
        (self.cap != NO_CAP).then_some(self.cap)
    }

    /// Looks at a TCP_INFO reading and the path's estimated rate (bytes per second), both
    /// corrected for short packets with `fill` (`TcpInfo::with_fill`, `Meter::fill`), and
    /// returns the SO_MAX_PACING_RATE to set when it must change ([`NO_CAP`] to lift the
    /// cap). The kernel paces packets, so the cap is in its units: the corrected rate
    /// divided by the fill, or a link of short packets would be held below what it
    /// delivers. A cap within an eighth of the one in force is left as it is: the kernel's
    /// delivery-rate samples move by a few percent every ACK.
    pub fn check(&mut self, info: &TcpInfo, est_rate: f64, fill: f64) -> Option<u64> {
        let want = self.wanted(info, est_rate, fill);
        let change = match (want == NO_CAP, self.cap == NO_CAP) {
            (true, true) => false,
            (true, false) | (false, true) => true,
            (false, false) => want.abs_diff(self.cap) * 8 > self.cap,
        };
        if change {
            self.cap = want;
            Some(want)
        } else {
            None
        }
    }

    fn wanted(&self, info: &TcpInfo, est_rate: f64, fill: f64) -> u64 {
        let queue_delay = f64::from(info.rtt_us.saturating_sub(info.min_rtt_us)) / 1e6;
        let buffer_short = self.pipe_drain.is_some_and(|d| d < queue_delay);
        let own = self.hs_factor.filter(|_| buffer_short);
        let factor = own.unwrap_or(self.factor);
        if factor < 1.0 || !(info.slow_start || own.is_some()) || info.min_rtt_us == 0 {
            return NO_CAP;
        }
        let rate = (info.delivery_rate as f64).max(est_rate);
        let min_rtt = info.min_rtt_us as f64 / 1e6;
        let queued = info.rtt_us as f64 >= info.min_rtt_us as f64 * (1.0 + QUEUE_DELAY);
        let flight = info.unacked_bytes;
        if rate > 0.0
            && queued
            && flight >= MIN_FLIGHT
            && flight as f64 > FLIGHT_BDPS * rate * min_rtt
        {
            let fill = if fill.is_finite() {
                fill.clamp(0.05, 1.0)
            } else {
                1.0
            };
            ((rate * factor / fill) as u64).clamp(1, NO_CAP - 1)
        } else {
            NO_CAP
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A link in slow start on a 50 ms path delivering 1.25 MB/s (10 Mbit/s).
    fn info(rtt_ms: u32, flight: u64) -> TcpInfo {
        TcpInfo {
            rtt_us: rtt_ms * 1000,
            min_rtt_us: 50_000,
            unacked_bytes: flight,
            delivery_rate: 1_250_000,
            slow_start: true,
            ..TcpInfo::default()
        }
    }

    #[test]
    fn a_link_filling_its_queue_in_slow_start_is_paced_just_above_its_rate() {
        let mut g = QueueGuard::new(1.25);
        // A BDP is 62.5 KB; 200 KB out and 80 ms: its own queue.
        assert_eq!(g.check(&info(80, 200_000), 0.0, 1.0), Some(1_562_500));
        assert_eq!(g.cap(), Some(1_562_500));
        // The path estimate counts when it is above the last sample.
        let mut g = QueueGuard::new(1.25);
        assert_eq!(
            g.check(&info(80, 200_000), 2_000_000.0, 1.0),
            Some(2_500_000)
        );
    }

    #[test]
    fn a_delay_the_link_cannot_have_made_itself_is_left_alone() {
        let mut g = QueueGuard::new(1.25);
        // The RTT rose, but with 40 KB out (the trace's dip or the ACKs' uplink): not its
        // own queue, and capping it would slow its slow start to a quarter per round trip.
        assert_eq!(g.check(&info(80, 40_000), 0.0, 1.0), None);
        // 80 KB out is over 64 KB but not over 1.5 BDPs of this path.
        assert_eq!(g.check(&info(80, 80_000), 0.0, 1.0), None);
        // 200 KB out without the delay: the queue is not there yet.
        assert_eq!(g.check(&info(70, 200_000), 0.0, 1.0), None);
        assert_eq!(g.cap(), None);
    }

    #[test]
    fn the_cap_lifts_when_slow_start_ends_or_the_queue_drains() {
        let mut g = QueueGuard::new(1.25);
        assert!(g.check(&info(80, 200_000), 0.0, 1.0).is_some());
        let mut done = info(80, 200_000);
        done.slow_start = false;
        assert_eq!(g.check(&done, 0.0, 1.0), Some(NO_CAP));
        assert_eq!(g.check(&done, 0.0, 1.0), None, "set once");
        assert!(g.check(&info(80, 200_000), 0.0, 1.0).is_some());
        assert_eq!(g.check(&info(60, 200_000), 0.0, 1.0), Some(NO_CAP));
        assert_eq!(g.cap(), None);
    }

    #[test]
    fn the_cap_follows_the_rate_but_not_its_jitter() {
        let mut g = QueueGuard::new(1.25);
        assert_eq!(g.check(&info(80, 400_000), 0.0, 1.0), Some(1_562_500));
        let mut a = info(80, 400_000);
        a.delivery_rate = 1_300_000; // 4% more: left alone
        assert_eq!(g.check(&a, 0.0, 1.0), None);
        a.delivery_rate = 1_600_000; // 28% more: followed
        assert_eq!(g.check(&a, 0.0, 1.0), Some(2_000_000));
    }

    #[test]
    fn the_cap_is_in_the_kernels_units_when_packets_are_short() {
        // Half-full packets: 1.25 MB/s of payload is 2.5 MB/s of packets to the kernel.
        let mut g = QueueGuard::new(1.25);
        assert_eq!(g.check(&info(80, 200_000), 0.0, 0.5), Some(3_125_000));
        // A fill the meter has not measured yet counts as full packets.
        let mut g = QueueGuard::new(1.25);
        assert_eq!(g.check(&info(80, 200_000), 0.0, f64::NAN), Some(1_562_500));
    }

    #[test]
    fn an_hs_path_guard_holds_past_slow_start() {
        let t = crate::config::Tuning {
            hs_queue_guard: 1.1,
            ..Default::default()
        };
        let mut ca = info(80, 200_000);
        ca.slow_start = false;
        // The ordinary guard leaves congestion avoidance alone, on any link.
        assert_eq!(QueueGuard::for_link(&t, false).check(&ca, 0.0, 1.0), None);
        // An HS-Path's own guard, while the helper's buffer is short, caps it there too, at
        // its factor, and in slow start.
        let mut hs = QueueGuard::for_link(&t, true);
        hs.set_pipe_drain(Some(0.0));
        assert_eq!(hs.check(&ca, 0.0, 1.0), Some(1_375_000));
        let mut ss = QueueGuard::for_link(&t, true);
        ss.set_pipe_drain(Some(0.0));
        assert_eq!(ss.check(&info(80, 200_000), 0.0, 1.0), Some(1_375_000));
        // With a buffer that outlasts the HS-Path's queue, it is the ordinary guard: none in
        // congestion avoidance, 1.25 in slow start.
        let mut long = QueueGuard::for_link(&t, true);
        long.set_pipe_drain(Some(0.5));
        assert_eq!(long.check(&ca, 0.0, 1.0), None);
        assert_eq!(long.check(&info(80, 200_000), 0.0, 1.0), Some(1_562_500));
        // It still lifts when the queue drains.
        ca.rtt_us = 60_000;
        assert_eq!(hs.check(&ca, 0.0, 1.0), Some(NO_CAP));
        // Unset, an HS-Path takes the ordinary guard; without pacing there is none.
        let plain = crate::config::Tuning::default();
        assert_eq!(
            QueueGuard::for_link(&plain, true).check(&ca, 0.0, 1.0),
            None
        );
        let unpaced = crate::config::Tuning { pacing: false, ..t };
        assert_eq!(
            QueueGuard::for_link(&unpaced, true).check(&info(80, 200_000), 0.0, 1.0),
            None
        );
    }

    #[test]
    fn a_factor_below_one_never_caps() {
        for f in [0.0, 0.5] {
            let mut g = QueueGuard::new(f);
            assert_eq!(g.check(&info(120, 400_000), 0.0, 1.0), None);
        }
    }
}
