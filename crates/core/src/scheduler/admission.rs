//! Energy-aware helper admission: which helpers PAMS may give more data at all (an mpbond
//! addition; MPBond §4.3 minimises time only, and its §4.1 policies switch a device off by
//! battery level or data cap, not by what it costs per transfer).
//!
//! PAMS plans a common finish over every subflow, so a helper gets its share whenever it
//! makes the transfer end sooner, by however little. In the power model our lab uses
//! ([`crate::energy`]), a helper's LTE radio costs its β (1.29 W) for as long as it carries
//! data plus a tail, and a byte over its pipe about what an LTE downlink byte costs (8.4 times
//! as much in Huang et al.'s linear WiFi fit, the lab's model before airtime pricing). So
//! where the primary's own path is fast, a helper can cost more joules than the seconds it
//! saves are worth: the lab's experiment 08 had cells where mpbond ended 9% sooner than
//! kibbutz for 15% more energy under the linear fit (docs/evaluation.md, 08).
//!
//! The rule prices each plan in joules: every subflow's radios for the time it carries data
//! ([`PathPower::active_w`]), for its bytes ([`PathPower::joules_per_byte`]) and for waking
//! it ([`PathPower::wake_j`]), plus the transfer's finish time at the user's value of time,
//! in watts ([`PamsConfig::time_value`](super::PamsConfig::time_value)). The plan is
//! PAMS's own: the subflows fill from their PADs at their throughputs until the backlog is
//! delivered ([`finish_level`]). Helpers are dropped one at a time, the one whose removal
//! saves most first, while dropping one makes the plan cheaper. The direct subflow is never
//! dropped, and a subflow whose radios are unknown costs nothing, so without `RADIOS` frames
//! the rule is PAMS unchanged.

use super::pams::finish_level;
use super::PadModel;
use crate::path::{PathKind, PathView};

/// What delivering `backlog` bytes over `paths` costs, in joules: the finish time at
/// `time_value` watts, plus each subflow's radios for the data the plan gives it.
/// Infinity when the paths cannot deliver it (no throughput).
pub fn plan_cost(model: PadModel, paths: &[PathView], backlog: f64, time_value: f64) -> f64 {
    let subflows: Vec<(f64, f64)> = paths
        .iter()
        .map(|p| (model.pad(p), p.effective_throughput()))
        .collect();
    let level = finish_level(&subflows, backlog);
    if !level.is_finite() {
        return f64::INFINITY;
    }
    let mut joules = time_value * level;
    for (p, &(pad, th)) in paths.iter().zip(&subflows) {
        let Some(power) = p.power else {
            continue;
        };
        // The data already queued is sent whatever the plan; what the plan adds runs from
        // the subflow's PAD to the common finish.
        let busy = (level - pad).max(0.0);
        if busy <= 0.0 || th <= 0.0 {
            continue;
        }
        joules += power.active_w() * busy
            + power.joules_per_byte() * busy * th
            + power.wake_j(p.wan_idle);
    }
    joules
}

/// The subflows PAMS may schedule on for a backlog of `backlog` bytes, when a second of the
/// finish is worth `time_value` joules: `paths` without the helpers whose radios would cost
/// more than they save, or that the plan would give nothing (see the module's
/// documentation). Keeps the order of `paths`.
pub fn admit(model: PadModel, paths: &[PathView], backlog: f64, time_value: f64) -> Vec<PathView> {
    let mut kept: Vec<PathView> = paths.to_vec();
    loop {
        let now = plan_cost(model, &kept, backlog, time_value);
        let level = finish_level(
            &kept
                .iter()
                .map(|p| (model.pad(p), p.effective_throughput()))
                .collect::<Vec<_>>(),
            backlog,
        );
        let mut best: Option<(usize, f64)> = None;
        for i in 0..kept.len() {
            let p = &kept[i];
            if p.kind != PathKind::Helper || p.power.is_none() {
                continue;
            }
            let mut without = kept.clone();
            without.remove(i);
            let cost = plan_cost(model, &without, backlog, time_value);
            // A helper the plan gives nothing costs nothing and saves nothing: it is left
            // out, so that a rescue does not wake it for a copy of a few bytes.
            let idle_in_plan = level <= model.pad(p);
            let cheaper = cost < now || (cost <= now && idle_in_plan);
            if cheaper && best.is_none_or(|(_, b)| cost < b) {
                best = Some((i, cost));
            }
        }
        match best {
            Some((i, _)) => {
                kept.remove(i);
            }
            None => return kept,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::energy::{PathPower, Radio};
    use crate::scheduler::testutil::*;

    fn ids(v: &[PathView]) -> Vec<u8> {
        v.iter().map(|p| p.id.0).collect()
    }

    /// A fast primary path and a small file: the helper would end the transfer 0.05 s sooner
    /// for far more pipe and LTE energy than the 0.1 J it saves the primary's radio.
    /// With no value on time it is left out; at 20 W a second it is worth it.
    #[test]
    fn a_helper_that_saves_little_time_is_left_out_unless_time_is_dear() {
        let paths = pair(18.0, 5.0, 5.0);
        let m = PadModel::Drain;
        assert_eq!(ids(&admit(m, &paths, 512_000.0, 0.0)), vec![0]);
        assert_eq!(ids(&admit(m, &paths, 512_000.0, 20.0)), vec![0, 1]);
    }

    /// A slow primary path: the helper saves seconds of the primary's LTE, more than its
    /// own radios cost, so it is used even when time is worth nothing.
    #[test]
    fn a_helper_that_saves_the_primary_seconds_is_kept_at_any_value_of_time() {
        let paths = pair(1.0, 18.0, 5.0);
        assert_eq!(
            ids(&admit(PadModel::Drain, &paths, 512_000.0, 0.0)),
            vec![0, 1]
        );
    }

    /// Waking a helper whose LTE radio has slept costs a promotion and a whole tail
    /// (12.6 J), which the same download does not pay back at 1 W a second; an awake radio
    /// it does.
    #[test]
    fn a_sleeping_helper_radio_costs_its_tail() {
        let mut paths = pair(2.0, 18.0, 10.0);
        let m = PadModel::Drain;
        assert_eq!(ids(&admit(m, &paths, 1_000_000.0, 1.0)), vec![0, 1]);
        paths[1].wan_idle = 60.0;
        assert_eq!(ids(&admit(m, &paths, 1_000_000.0, 1.0)), vec![0]);
    }

    /// Without declared radios the rule changes nothing, and the direct subflow is never
    /// dropped, even when it is the costly one.
    #[test]
    fn unknown_radios_cost_nothing_and_the_direct_path_stays() {
        let mut paths = pair(18.0, 5.0, 5.0);
        paths[1].power = None;
        assert_eq!(
            ids(&admit(PadModel::Drain, &paths, 512_000.0, 0.0)),
            vec![0, 1]
        );
        let mut paths = pair(1.0, 18.0, 5.0);
        paths[0].wan_idle = 60.0;
        let kept = admit(PadModel::Drain, &paths, 512_000.0, 0.0);
        assert!(ids(&kept).contains(&0), "{:?}", ids(&kept));
    }

    /// With two helpers, the costlier one goes first, and only while it pays: a helper
    /// behind a Bluetooth pipe (0.39 W at each end whatever it moves) costs more than one
    /// behind WiFi (0.13 W at each end, and 1.3 W sending for the eighth of the time a
    /// 5 Mbit/s pipe is on the air) for the same bytes.
    #[test]
    fn the_costliest_helper_goes_first() {
        let mut paths = pair(10.0, 10.0, 5.0);
        let mut bt = helper(2, 50.0, 10.0, 0, 5.0, 5.0, 0, true);
        bt.power = Some(PathPower {
            wan: Radio::Lte,
            pipe: Some(Radio::Bluetooth),
            uplink: false,
        });
        bt.wan_idle = 0.0;
        paths.push(bt);
        let m = PadModel::Drain;
        let no_wifi = plan_cost(m, &[paths[0].clone(), paths[2].clone()], 2_000_000.0, 1.0);
        let no_bt = plan_cost(m, &paths[..2], 2_000_000.0, 1.0);
        assert!(no_bt < no_wifi, "{no_wifi} {no_bt}");
        let kept = ids(&admit(m, &paths, 2_000_000.0, 1.0));
        assert!(!kept.contains(&2) || kept.contains(&1), "{kept:?}");
    }

    /// A backlog the direct path delivers before the helper's first byte could arrive gives
    /// the helper nothing: it is left out, so no rescue wakes it for a copy.
    #[test]
    fn a_helper_the_plan_gives_nothing_is_left_out() {
        let mut paths = pair(5.0, 10.0, 5.0);
        paths[1].min_rtt = 0.2;
        paths[1].rtt = 0.2;
        assert_eq!(ids(&admit(PadModel::Drain, &paths, 60.0, 1.0)), vec![0]);
    }

    /// A plan that cannot deliver (no throughput anywhere) is infinitely dear, so nothing is
    /// dropped for it.
    #[test]
    fn no_throughput_no_verdict() {
        let mut paths = pair(0.0, 0.0, 0.0);
        paths[0].throughput = 0.0;
        paths[1].throughput = 0.0;
        assert!(plan_cost(PadModel::Drain, &paths, 1e6, 1.0).is_infinite());
        assert_eq!(ids(&admit(PadModel::Drain, &paths, 1e6, 1.0)), vec![0, 1]);
    }
}
