//! `roundrobin`: Linux MPTCP's round-robin scheduler.
//!
//! Each segment goes to the next idle subflow after the one used last, in subflow-id order. It
//! spreads load evenly in packets, not in time, so it is a baseline rather than a contender.

use mpbond_proto::SubflowId;

use super::{Decision, SchedContext, Scheduler};
use crate::path::PathView;

/// The round-robin scheduler.
#[derive(Clone, Copy, Debug, Default)]
pub struct RoundRobin {
    last: Option<SubflowId>,
}

impl Scheduler for RoundRobin {
    fn name(&self) -> &'static str {
        "roundrobin"
    }

    fn select(&mut self, _ctx: &SchedContext, paths: &[PathView]) -> Decision {
        let idle = || paths.iter().filter(|p| p.idle);
        let after_last = idle()
            .filter(|p| self.last.is_none_or(|l| p.id > l))
            .min_by_key(|p| p.id);
        match after_last.or_else(|| idle().min_by_key(|p| p.id)) {
            Some(p) => Decision::Send(p.id),
            None => Decision::Defer,
        }
    }

    fn on_scheduled(&mut self, _now: crate::Time, path: &PathView, _bytes: u64) {
        self.last = Some(path.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheduler::testutil::*;

    #[test]
    fn cycles_over_idle_subflows() {
        let mut paths = vec![
            direct(0, 50.0, 8.0, 0, true),
            direct(1, 50.0, 8.0, 0, true),
            direct(2, 50.0, 8.0, 0, true),
        ];
        let mut rr = RoundRobin::default();
        let mut order = Vec::new();
        for _ in 0..4 {
            let Decision::Send(id) = rr.select(&ctx(1), &paths) else {
                panic!()
            };
            rr.on_scheduled(crate::Time::ZERO, &paths[id.0 as usize], 1);
            order.push(id.0);
        }
        assert_eq!(order, vec![0, 1, 2, 0]);
        paths[1].idle = false;
        let mut rr = RoundRobin::default();
        rr.on_scheduled(crate::Time::ZERO, &paths[0], 1);
        assert_eq!(
            rr.select(&ctx(1), &paths),
            Decision::Send(SubflowId(2)),
            "skips busy 1"
        );
    }
}
