//! Multipath schedulers: which subflow carries the next segment.
//!
//! Every scheduler implements [`Scheduler`] and is chosen by name with [`by_name`]. They see
//! only [`PathView`]s and a [`SchedContext`], so the same code runs in the daemons, the
//! simulator and the unit tests.

use std::fmt;

use mpbond_proto::SubflowId;

use crate::path::PathView;
use crate::Time;

pub mod admission;
pub mod minrtt;
pub mod pams;
pub mod roundrobin;
pub mod swtc;

pub use minrtt::MinRtt;
pub use pams::{
    lookahead_bytes, pad, pad_drain, queue_delay, PadModel, Pams, PamsConfig, RecallAmount,
    UnknownPadModel, LATE_BIND_HORIZON, LOOKAHEAD_RTTS,
};
pub use roundrobin::RoundRobin;
pub use swtc::Swtc;

/// What the sender knows when it asks for a decision.
#[derive(Clone, Copy, Debug)]
pub struct SchedContext {
    /// Now.
    pub now: Time,
    /// GetUntransmittedSize() of Algorithm 1: the unscheduled bytes of the current application
    /// chunk if one is marked, else of the stream's meta buffer (MPBond §4.4, footnote 5).
    pub untransmitted: u64,
    /// Size of the segment about to be scheduled, bytes.
    pub segment: u64,
    /// Whether `untransmitted` is all that is left: the stream's end (or the marked chunk's)
    /// is already in the sender's buffer. PAMS then plans the finish over the whole rest
    /// instead of its bounded lookahead ([`PamsConfig::lookahead_rtts`]).
    pub finite: bool,
}

/// A scheduling decision.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Decision {
    /// Put the segment on this subflow. Normally an idle one; a scheduler that models
    /// per-subflow queues (SWTC) may also name a busy one, which queues the segment there.
    Send(SubflowId),
    /// Do not schedule now; ask again when a subflow becomes idle or an ACK arrives
    /// (Algorithm 1, line 12).
    Defer,
}

/// A reinjection order: move up to `bytes` unacknowledged bytes with the highest sequence
/// numbers from subflow `from` back to the meta buffer (MPBond §4.3.4).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Recall {
    /// The subflow to take the data from.
    pub from: SubflowId,
    /// How many bytes, at most.
    pub bytes: u64,
}

/// A multipath scheduler.
pub trait Scheduler: fmt::Debug + Send {
    /// Its name, as accepted by [`by_name`].
    fn name(&self) -> &'static str;

    /// Chooses a subflow for the next segment. `paths` holds every live subflow, and at least
    /// one of them is idle.
    fn select(&mut self, ctx: &SchedContext, paths: &[PathView]) -> Decision;

    /// Tells the scheduler that `bytes` were put on `path` (after a `Send`).
    fn on_scheduled(&mut self, _now: Time, _path: &PathView, _bytes: u64) {}

    /// The subflows this scheduler would put no data on now: the sender's rescues, which pick
    /// their own subflow, skip them too. PAMS's energy-aware admission leaves helpers out
    /// ([`admission`]); the default leaves none out.
    fn left_out(&self, _ctx: &SchedContext, _paths: &[PathView]) -> Vec<SubflowId> {
        Vec::new()
    }

    /// Called when nothing is left unscheduled. Returns data to recall for reinjection, if the
    /// scheduler does reinjection. The default does none: data is reinjected only when its
    /// subflow dies, as in MPTCP.
    fn reinjection(&mut self, _ctx: &SchedContext, _paths: &[PathView]) -> Option<Recall> {
        None
    }
}

/// The names [`by_name`] accepts.
pub const NAMES: &[&str] = &["pams", "minrtt", "roundrobin", "swtc"];

/// Error for an unknown scheduler name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown scheduler {0:?}; choose one of: pams, minrtt, roundrobin, swtc")]
pub struct UnknownScheduler(pub String);

/// Creates a scheduler by name. `pams` takes its settings from `pams_config`; the others have
/// none.
pub fn by_name(
    name: &str,
    pams_config: PamsConfig,
) -> Result<Box<dyn Scheduler>, UnknownScheduler> {
    match name {
        "pams" => Ok(Box::new(Pams::new(pams_config))),
        "minrtt" | "mpbond-naive" => Ok(Box::new(MinRtt)),
        "roundrobin" | "rr" => Ok(Box::new(RoundRobin::default())),
        "swtc" => Ok(Box::new(Swtc::default())),
        other => Err(UnknownScheduler(other.to_string())),
    }
}

#[cfg(test)]
pub(crate) mod testutil {
    use super::*;
    use crate::path::{PathKind, PipeView};

    /// A direct path: RTT in ms, throughput in Mbps, B_s in bytes.
    pub fn direct(id: u8, rtt_ms: f64, mbps: f64, queued: u64, idle: bool) -> PathView {
        let mut p = PathView::new(SubflowId(id), PathKind::Direct);
        p.rtt = rtt_ms / 1000.0;
        p.min_rtt = p.rtt;
        p.throughput = mbps * 125_000.0;
        p.queued = queued;
        p.outstanding = queued;
        p.idle = idle;
        p
    }

    /// A helper path: HS RTT/throughput, B_s, pipe RTT/throughput, B_p.
    #[allow(clippy::too_many_arguments)]
    pub fn helper(
        id: u8,
        rtt_ms: f64,
        mbps: f64,
        queued: u64,
        pipe_rtt_ms: f64,
        pipe_mbps: f64,
        pipe_buffered: u64,
        idle: bool,
    ) -> PathView {
        let mut p = direct(id, rtt_ms, mbps, queued, idle);
        p.kind = PathKind::Helper;
        p.pipe = Some(PipeView {
            throughput: pipe_mbps * 125_000.0,
            rtt: pipe_rtt_ms / 1000.0,
            min_rtt: 0.0,
            buffered: pipe_buffered,
            unreported: None,
        });
        p.outstanding = queued + pipe_buffered;
        p
    }

    /// A primary on LTE at `ps` Mbit/s and a helper on LTE at `hs` behind a WiFi pipe at
    /// `pipe`, both radios declared and awake, RTT 50 ms, both idle.
    pub fn pair(ps: f64, hs: f64, pipe: f64) -> Vec<PathView> {
        use crate::energy::{PathPower, Radio};
        let mut d = direct(0, 50.0, ps, 0, true);
        d.power = Some(PathPower {
            wan: Radio::Lte,
            pipe: None,
            uplink: false,
        });
        d.wan_idle = 0.0;
        let mut h = helper(1, 50.0, hs, 0, 5.0, pipe, 0, true);
        h.power = Some(PathPower {
            wan: Radio::Lte,
            pipe: Some(Radio::Wifi),
            uplink: false,
        });
        h.wan_idle = 0.0;
        vec![d, h]
    }

    pub fn ctx(untransmitted: u64) -> SchedContext {
        SchedContext {
            now: Time::ZERO,
            untransmitted,
            segment: 1000,
            finite: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_resolve_and_unknown_is_clear() {
        for n in NAMES {
            assert_eq!(by_name(n, PamsConfig::default()).unwrap().name(), *n);
        }
        let e = by_name("fastest", PamsConfig::default()).unwrap_err();
        assert!(e.to_string().contains("choose one of"));
    }
}
