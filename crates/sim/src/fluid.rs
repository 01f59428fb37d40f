//! The fluid lower bound: the earliest time any scheduler could deliver a download, given only
//! link capacities and propagation delays.
//!
//! Each path is treated as a fluid that fills its links perfectly from time 0 (no slow start,
//! no headers, no losses, no scheduling mistakes). The PS-Path delivers `C_ps(T - OWD_ps)` bytes
//! by time `T`, where `C` is the link's cumulative capacity. A helper path is two links in
//! tandem with a buffer between them (MPBond §4.2): its output `D` follows
//! `D(t) = min(A(t), D(t - dt) + C_p(t) - C_p(t - dt))`, with `A(t) = C_hs(t - OWD_hs)` the
//! bytes that have reached the helper, and delivers `D(T - OWD_p)` by `T`. The bound is the
//! first `T` at which all paths together have delivered the download.
//!
//! With constant rates and equal delays this is `size / (PS + Σ min(HS, pipe)) + delay`; it
//! stays exact (to the grid step) when rates change or follow traces, where the helper buffer
//! lets a fast HS-Path run ahead of a slow pipe and catch up later.

use std::time::Duration;

use mpbond_core::Time;

use crate::rate::RateProfile;

/// A path of the bound: the PS-Path (`pipe = None`) or a helper path.
#[derive(Clone, Debug)]
pub struct FluidPath<'a> {
    /// The WAN link (PS-Path or HS-Path).
    pub wan: &'a RateProfile,
    /// Its one-way propagation delay.
    pub wan_delay: Duration,
    /// The pipe, for a helper path.
    pub pipe: Option<(&'a RateProfile, Duration)>,
}

/// Grid step of the computation.
pub const STEP: Duration = Duration::from_micros(100);

/// The lower bound in seconds, or infinity if the paths cannot deliver `size` bytes within
/// `horizon`.
pub fn lower_bound(size: u64, paths: &[FluidPath<'_>], horizon: Duration) -> f64 {
    arrival_times(&[size], paths, horizon)[0]
}

/// The earliest times, in seconds, by which the paths can have delivered each of `marks`
/// (ascending byte counts): [`lower_bound`] for every mark in one pass. Marks the paths
/// cannot reach within `horizon` get infinity.
pub fn arrival_times(marks: &[u64], paths: &[FluidPath<'_>], horizon: Duration) -> Vec<f64> {
    let dt = STEP.as_secs_f64();
    let mut out = Vec::with_capacity(marks.len());
    let mut prev_total = 0.0;
    walk(paths, horizon, |k, total| {
        while let Some(&m) = marks.get(out.len()) {
            let m = m as f64;
            if total < m {
                break;
            }
            let frac = if total > prev_total {
                ((m - prev_total) / (total - prev_total)).max(0.0)
            } else {
                1.0
            };
            out.push((k as f64 - 1.0 + frac).max(0.0) * dt);
        }
        prev_total = total;
        out.len() < marks.len()
    });
    out.resize(marks.len(), f64::INFINITY);
    out
}

/// The most bytes the paths can have delivered by `t`: the fluid upper bound on a bulk
/// transfer's volume, whose ratio to `t` bounds its mean throughput.
pub fn max_delivered(paths: &[FluidPath<'_>], t: Duration) -> f64 {
    let mut last = 0.0;
    walk(paths, t, |_, total| {
        last = total;
        true
    });
    last
}

/// The bytes the paths can deliver in each `sample` interval of `[0, duration)`, in order:
/// the fluid counterpart of a bulk transfer's goodput samples. A scheduler that never
/// blocks the receiver on a late path would hand the application this much per interval,
/// so these samples' median and 5th percentile are what a scheme's own can be held
/// against (MPBond §6.4, Figure 15, reports both).
pub fn delivered_per_sample(
    paths: &[FluidPath<'_>],
    duration: Duration,
    sample: Duration,
) -> Vec<f64> {
    let per = (sample.as_secs_f64() / STEP.as_secs_f64()).round().max(1.0) as usize;
    let n = (duration.as_secs_f64() / sample.as_secs_f64()).floor() as usize;
    let mut out = Vec::with_capacity(n);
    let mut last = 0.0;
    walk(paths, sample.mul_f64(n as f64), |k, total| {
        if k > 0 && k % per == 0 {
            out.push(total - last);
            last = total;
        }
        out.len() < n
    });
    out
}

/// Steps through `[0, horizon]`, telling `step` the bytes all paths have delivered by each
/// grid point, while it returns true.
fn walk(paths: &[FluidPath<'_>], horizon: Duration, mut step: impl FnMut(usize, f64) -> bool) {
    let dt = STEP.as_secs_f64();
    let steps = (horizon.as_secs_f64() / dt).ceil() as usize;
    let at = |k: usize| Time::from_secs_f64(k as f64 * dt);
    let lag = |d: Duration| (d.as_secs_f64() / dt).round() as usize;
    // Per helper path: the buffer output D at each step (in helper time).
    let mut outputs: Vec<Vec<f64>> = paths.iter().map(|_| Vec::new()).collect();
    for k in 0..=steps {
        let mut total = 0.0;
        for (j, p) in paths.iter().enumerate() {
            match p.pipe {
                None => {
                    let l = lag(p.wan_delay);
                    if k >= l {
                        total += p.wan.cumulative_bytes(at(k - l));
                    }
                }
                Some((pipe, pipe_delay)) => {
                    let l_in = lag(p.wan_delay);
                    let arrived = if k >= l_in {
                        p.wan.cumulative_bytes(at(k - l_in))
                    } else {
                        0.0
                    };
                    let out = &mut outputs[j];
                    let d = match out.last() {
                        None => arrived.min(pipe.cumulative_bytes(at(0))),
                        Some(&prev) => {
                            let served =
                                pipe.cumulative_bytes(at(k)) - pipe.cumulative_bytes(at(k - 1));
                            arrived.min(prev + served)
                        }
                    };
                    out.push(d);
                    let l_out = lag(pipe_delay);
                    if k >= l_out {
                        total += out[k - l_out];
                    }
                }
            }
        }
        if !step(k, total) {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rate::Source;

    fn ms(x: u64) -> Duration {
        Duration::from_millis(x)
    }

    /// A PS-Path and one helper path with the given one-way delays.
    fn ps_and_helper<'a>(
        ps: &'a RateProfile,
        hs: &'a RateProfile,
        pipe: &'a RateProfile,
        delays: [u64; 3],
    ) -> [FluidPath<'a>; 2] {
        [
            FluidPath {
                wan: ps,
                wan_delay: ms(delays[0]),
                pipe: None,
            },
            FluidPath {
                wan: hs,
                wan_delay: ms(delays[1]),
                pipe: Some((pipe, ms(delays[2]))),
            },
        ]
    }

    #[test]
    fn constant_rates_match_the_closed_form() {
        // PS 8, HS 10, pipe 5 Mbps, 10 MB, all paths 25 ms + 2 ms for the pipe.
        let ps = RateProfile::constant(8e6);
        let hs = RateProfile::constant(10e6);
        let pipe = RateProfile::constant(5e6);
        let paths = ps_and_helper(&ps, &hs, &pipe, [25, 23, 2]);
        let lb = lower_bound(10_000_000, &paths, Duration::from_secs(100));
        let closed = 80e6 / 13e6 + 0.025;
        assert!((lb - closed).abs() < 2e-4, "{lb} vs {closed}");
    }

    #[test]
    fn helper_buffer_lets_hs_run_ahead_of_a_slow_pipe() {
        // HS 10 Mbps for 1 s then down; pipe 1 Mbps for 1 s then 10 Mbps. The helper buffers
        // 1.25 MB - 125 kB in the first second and drains it at 10 Mbps: 1.25 MB arrive by
        // 1 + 0.9 s. Without a buffer (min of the rates) it would never finish.
        let mut hs = RateProfile::constant(10e6);
        hs.change_at(Time::from_millis(1000), Source::Constant(0.0));
        let mut pipe = RateProfile::constant(1e6);
        pipe.change_at(Time::from_millis(1000), Source::Constant(10e6));
        let paths = [FluidPath {
            wan: &hs,
            wan_delay: Duration::ZERO,
            pipe: Some((&pipe, Duration::ZERO)),
        }];
        let lb = lower_bound(1_250_000, &paths, Duration::from_secs(10));
        assert!((lb - 1.9).abs() < 1e-3, "{lb}");
        assert!(lower_bound(2_000_000, &paths, Duration::from_secs(10)).is_infinite());
    }

    #[test]
    fn max_delivered_is_the_inverse_of_the_lower_bound() {
        // PS 8 Mbps (10 ms) + HS 10 / pipe 5 Mbps: 13 Mbps after the delays.
        let ps = RateProfile::constant(8e6);
        let hs = RateProfile::constant(10e6);
        let pipe = RateProfile::constant(5e6);
        let paths = ps_and_helper(&ps, &hs, &pipe, [10, 10, 0]);
        let by_10s = max_delivered(&paths, Duration::from_secs(10));
        let want = 13e6 / 8.0 * 9.99;
        assert!((by_10s - want).abs() / want < 1e-3, "{by_10s} vs {want}");
        let t = lower_bound(by_10s as u64, &paths, Duration::from_secs(20));
        assert!((t - 10.0).abs() < 1e-3, "{t}");
    }

    #[test]
    fn arrival_times_are_the_lower_bounds_of_each_mark() {
        let ps = RateProfile::constant(8e6);
        let hs = RateProfile::constant(10e6);
        let pipe = RateProfile::constant(5e6);
        let paths = ps_and_helper(&ps, &hs, &pipe, [10, 10, 0]);
        let marks = [100_000, 1_000_000, 4_000_000, u64::MAX];
        let got = arrival_times(&marks, &paths, Duration::from_secs(20));
        // 13 Mbit/s from 10 ms on.
        for (m, t) in marks.iter().zip(&got).take(3) {
            let want = 0.01 + *m as f64 / (13e6 / 8.0);
            assert!((t - want).abs() < 1e-3, "{m}: {t} vs {want}");
        }
        assert!(got[3].is_infinite());
    }

    #[test]
    fn unequal_delays() {
        // Two 8 Mbps paths, 0 and 100 ms: 2 MB. Fluid: 8e6*t + 8e6*(t-0.1) = 16e6 -> t = 1.05.
        let a = RateProfile::constant(8e6);
        let paths = [
            FluidPath {
                wan: &a,
                wan_delay: Duration::ZERO,
                pipe: None,
            },
            FluidPath {
                wan: &a,
                wan_delay: ms(100),
                pipe: None,
            },
        ];
        let lb = lower_bound(2_000_000, &paths, Duration::from_secs(10));
        assert!((lb - 1.05).abs() < 2e-4, "{lb}");
    }

    /// Per-sample capacity: a PS-Path at 8 Mbit/s that goes down from 1 s to 1.5 s, and a
    /// helper path whose HS-Path (10 Mbit/s) outruns its 5 Mbit/s pipe. Samples of 100 ms
    /// carry 100 kB (PS) + 62.5 kB (pipe), the PS part missing in the outage; they add up
    /// to what `max_delivered` says.
    #[test]
    fn samples_follow_the_links_and_add_up() {
        let mut ps = RateProfile::constant(8e6);
        ps.change_at(Time::from_millis(1000), Source::Constant(0.0));
        ps.change_at(Time::from_millis(1500), Source::Constant(8e6));
        let hs = RateProfile::constant(10e6);
        let pipe = RateProfile::constant(5e6);
        let paths = ps_and_helper(&ps, &hs, &pipe, [0, 0, 0]);
        let got = delivered_per_sample(&paths, Duration::from_secs(2), ms(100));
        assert_eq!(got.len(), 20);
        for (i, b) in got.iter().enumerate() {
            let want = if (10..15).contains(&i) {
                62_500.0
            } else {
                162_500.0
            };
            assert!((b - want).abs() < 100.0, "sample {i}: {b} vs {want}");
        }
        let total: f64 = got.iter().sum();
        let all = max_delivered(&paths, Duration::from_secs(2));
        assert!((total - all).abs() < 1.0, "{total} vs {all}");
    }
}
