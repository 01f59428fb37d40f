//! `minrtt`: the default scheduler of Linux MPTCP (Paasch et al., CSWS 2014).
//!
//! It puts each segment on the idle subflow whose sender-side path has the smallest smoothed
//! RTT. On MPBond's topology it sees only the PS-Path and the HS-Paths, not the pipes or the
//! helper buffers, so it fills helpers faster than their pipes drain; the paper calls this
//! configuration "MPBond-Naive" (§4.3.1, Figure 4).

use super::{Decision, SchedContext, Scheduler};
use crate::path::PathView;

/// The minimum-RTT scheduler.
#[derive(Clone, Copy, Debug, Default)]
pub struct MinRtt;

impl Scheduler for MinRtt {
    fn name(&self) -> &'static str {
        "minrtt"
    }

    fn select(&mut self, _ctx: &SchedContext, paths: &[PathView]) -> Decision {
        paths
            .iter()
            .filter(|p| p.idle)
            .fold(None, |best: Option<&PathView>, p| match best {
                Some(b) if b.rtt <= p.rtt => Some(b),
                _ => Some(p),
            })
            .map_or(Decision::Defer, |p| Decision::Send(p.id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheduler::testutil::*;
    use mpbond_proto::SubflowId;

    #[test]
    fn picks_idle_path_with_lowest_rtt_ignoring_pipes() {
        let paths = vec![
            direct(0, 50.0, 8.0, 0, true),
            // Lower HS RTT, but a huge helper backlog: minRTT does not care.
            helper(1, 40.0, 10.0, 0, 4.0, 5.0, 10_000_000, true),
            direct(2, 10.0, 8.0, 0, false),
        ];
        assert_eq!(MinRtt.select(&ctx(1), &paths), Decision::Send(SubflowId(1)));
        // Equal RTTs: the first one wins.
        let paths = vec![direct(3, 50.0, 1.0, 0, true), direct(4, 50.0, 9.0, 0, true)];
        assert_eq!(MinRtt.select(&ctx(1), &paths), Decision::Send(SubflowId(3)));
        let busy = vec![direct(0, 50.0, 8.0, 0, false)];
        assert_eq!(MinRtt.select(&ctx(1), &busy), Decision::Defer);
    }
}
