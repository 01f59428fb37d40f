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
//!
//! **The window-limited bound.** The fluid assumes a sender always knows it may send. A
//! window-based transport (every TCP, and so every scheme of MPBond §6) keeps at most a
//! window `W` of bytes unacknowledged, and its acknowledgements ride the reverse link: an
//! LTE uplink that delivers nothing for seconds (the traces of `../shared/traces` have
//! such outages) stops every sender on that path once `W` is out, whatever the downlink
//! offers. With a [`Feedback`] each hop's sender obeys `S(t) <= S(o - OWD) + W`, where `o`
//! is the last delivery opportunity of the reverse link at or before `t - OWD_rev` (the
//! newest acknowledgement the sender can have: it left the receiver at `o` and covers what
//! had arrived there). Acknowledgements are free otherwise (cumulative, never delayed, never
//! queued behind other traffic), so this too is a bound no real run can beat when `W` is at
//! least the transport's largest window.

use std::collections::VecDeque;
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
    /// Where the acknowledgements go, for the window-limited bound; `None`: the plain fluid,
    /// whose senders never wait for feedback.
    pub feedback: Option<Feedback<'a>>,
}

/// The reverse link of one hop: its delivery opportunities carry the hop's acknowledgements.
#[derive(Clone, Copy, Debug)]
pub struct AckLink<'a> {
    /// The link (a download's uplink).
    pub link: &'a RateProfile,
    /// Its one-way propagation delay.
    pub delay: Duration,
}

/// The feedback of a path's hops for the window-limited bound (module text).
#[derive(Clone, Copy, Debug)]
pub struct Feedback<'a> {
    /// The WAN link's return path.
    pub wan: AckLink<'a>,
    /// The pipe's return path (helper paths; `None`: the pipe's sender never waits).
    pub pipe: Option<AckLink<'a>>,
    /// The most bytes a hop's sender keeps unacknowledged.
    pub window: u64,
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
    let mut out = Vec::with_capacity(marks.len());
    let mut prev_total = 0.0;
    walk(paths, horizon, |k, total| {
        while let Some(&m) = marks.get(out.len()) {
            let m = m as f64;
            if total < m {
                break;
            }
            out.push(crossing(k, prev_total, total, m));
        }
        prev_total = total;
        out.len() < marks.len()
    });
    out.resize(marks.len(), f64::INFINITY);
    out
}

/// The earliest end, in seconds, of each of a series of transfers that may each begin only
/// `gap` after the previous one ended (the first at `gap`), on links and helper buffers that
/// the previous one left empty: a client that asks for the next piece once it holds the last,
/// as a DASH player fetches one segment at a time over one connection. [`arrival_times`] of
/// the cumulative sizes lets later pieces ride earlier capacity (a helper could buffer the
/// next segments during an HS-Path burst before they are asked for), so for such a client it
/// is no bound. Transfers that cannot end within `horizon` of time 0 get infinity.
pub fn sequential_arrival_times(
    sizes: &[u64],
    paths: &[FluidPath<'_>],
    gap: Duration,
    horizon: Duration,
) -> Vec<f64> {
    let dt = STEP.as_secs_f64();
    let last = (horizon.as_secs_f64() / dt).ceil() as usize;
    let gap = lag(gap);
    let mut out = Vec::with_capacity(sizes.len());
    let mut start = gap;
    for &size in sizes {
        let Some(t) = transfer_end(paths, start, last, size) else {
            break;
        };
        out.push(t);
        start = (t / dt).ceil() as usize + gap;
    }
    out.resize(sizes.len(), f64::INFINITY);
    out
}

/// The earliest end, in seconds, of each transfer `i` of `sizes[i]` bytes asked for at
/// `asked[i]` seconds and begun `gap` later, on links and helper buffers empty at its start:
/// what the links allowed each piece of a real run from the moment that run asked for it.
/// [`sequential_arrival_times`] chains the pieces at the bound's own ends, so past the first
/// its pieces start earlier than a run's and meet other capacity; held against its own
/// requests, the time a run took for each piece beyond this is what it lost there (the lab
/// reports it per video segment). A transfer that cannot end within `horizon` of time 0, or
/// whose request time is not a time, gets infinity.
pub fn arrival_times_from(
    sizes: &[u64],
    asked: &[f64],
    paths: &[FluidPath<'_>],
    gap: Duration,
    horizon: Duration,
) -> Vec<f64> {
    let dt = STEP.as_secs_f64();
    let last = (horizon.as_secs_f64() / dt).ceil() as usize;
    let gap = lag(gap);
    sizes
        .iter()
        .zip(asked)
        .map(|(&size, &at)| {
            if !(at.is_finite() && at >= 0.0) {
                return f64::INFINITY;
            }
            let start = (at / dt).ceil() as usize + gap;
            transfer_end(paths, start, last, size).unwrap_or(f64::INFINITY)
        })
        .collect()
}

/// When, in seconds, a transfer of `size` bytes that begins at grid point `start` on empty
/// links and helper buffers has been delivered, if by grid point `last`.
fn transfer_end(paths: &[FluidPath<'_>], start: usize, last: usize, size: u64) -> Option<f64> {
    if start > last {
        return None;
    }
    let m = size as f64;
    let (mut prev, mut end) = (0.0, None);
    walk_from(paths, start, last, |k, total| {
        if total >= m {
            end = Some(crossing(k, prev, total, m));
            return false;
        }
        prev = total;
        true
    });
    end
}

/// When, in seconds, the delivered bytes passed `mark` between grid points `k - 1`
/// (`before`) and `k` (`after`), interpolated within the step.
fn crossing(k: usize, before: f64, after: f64, mark: f64) -> f64 {
    let frac = if after > before {
        ((mark - before) / (after - before)).max(0.0)
    } else {
        1.0
    };
    (k as f64 - 1.0 + frac).max(0.0) * STEP.as_secs_f64()
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
fn walk(paths: &[FluidPath<'_>], horizon: Duration, step: impl FnMut(usize, f64) -> bool) {
    let steps = (horizon.as_secs_f64() / STEP.as_secs_f64()).ceil() as usize;
    walk_from(paths, 0, steps, step);
}

/// Steps through grid points `start..=last` of a transfer that begins at `start` on empty
/// links and helper buffers, telling `step` each point and the bytes all paths have
/// delivered since `start`, while it returns true.
fn walk_from(
    paths: &[FluidPath<'_>],
    start: usize,
    last: usize,
    mut step: impl FnMut(usize, f64) -> bool,
) {
    let mut hops: Vec<(Hop<'_>, Option<Hop<'_>>)> = paths
        .iter()
        .map(|p| {
            let fb = p.feedback;
            let wan = Hop::new(p.wan, p.wan_delay, fb.map(|f| (f.wan, f.window)), start);
            let pipe = p.pipe.map(|(link, delay)| {
                Hop::new(
                    link,
                    delay,
                    fb.and_then(|f| f.pipe.map(|a| (a, f.window))),
                    start,
                )
            });
            (wan, pipe)
        })
        .collect();
    for k in start..=last {
        let mut total = 0.0;
        for (wan, pipe) in &mut hops {
            // The origin side has the whole download from time 0.
            let reached = wan.step(k, f64::INFINITY);
            total += match pipe {
                None => reached,
                // The helper forwards what has reached it (the buffer of MPBond §4.2).
                Some(pipe) => pipe.step(k, reached),
            };
        }
        if !step(k, total) {
            return;
        }
    }
}

/// The grid point `k` as a time.
fn at(k: usize) -> Time {
    Time::from_secs_f64(k as f64 * STEP.as_secs_f64())
}

/// A delay in grid steps.
fn lag(d: Duration) -> usize {
    (d.as_secs_f64() / STEP.as_secs_f64()).round() as usize
}

/// `S(k - j)` for `j >= 1` from a hop's history before `S(k)` is pushed (0 before time 0).
fn sent_before(history: &VecDeque<f64>, j: usize) -> f64 {
    let n = history.len();
    if j == 0 || j > n {
        return 0.0;
    }
    history[n - j]
}

/// One link of a path with its sender: what it has sent by each grid point, given what its
/// sender has to send, the link's capacity and (with feedback) its window.
struct Hop<'a> {
    link: &'a RateProfile,
    /// Propagation delay in steps.
    lag: usize,
    /// The link's cumulative capacity at the previous step.
    capacity: f64,
    /// Bytes sent by the current step, `S(k)`.
    sent: f64,
    /// `S` over the last steps, newest last: enough to look back over the propagation
    /// delay and, with feedback, a round trip.
    history: VecDeque<f64>,
    ack: Option<AckState<'a>>,
}

/// A hop's acknowledgements: the reverse link and the newest acknowledged byte count.
struct AckState<'a> {
    link: &'a RateProfile,
    /// Reverse propagation delay in steps.
    lag: usize,
    /// The reverse link's cumulative capacity at the previous step it was looked at.
    capacity: f64,
    /// Bytes the sender knows have arrived.
    acked: f64,
    window: f64,
}

impl<'a> Hop<'a> {
    /// A hop whose first step is `start`: the capacity before it is lost.
    fn new(
        link: &'a RateProfile,
        delay: Duration,
        ack: Option<(AckLink<'a>, u64)>,
        start: usize,
    ) -> Self {
        Hop {
            link,
            lag: lag(delay),
            capacity: if start == 0 {
                0.0
            } else {
                link.cumulative_bytes(at(start - 1))
            },
            sent: 0.0,
            history: VecDeque::new(),
            ack: ack.map(|(a, window)| AckState {
                link: a.link,
                lag: lag(a.delay),
                capacity: 0.0,
                acked: 0.0,
                window: window as f64,
            }),
        }
    }

    /// Advances to step `k` (called for consecutive k from the hop's start) with `input`
    /// bytes at the sender; returns the bytes that have reached the far end by then.
    fn step(&mut self, k: usize, input: f64) -> f64 {
        let capacity = self.link.cumulative_bytes(at(k));
        let mut sent = input.min(self.sent + (capacity - self.capacity));
        self.capacity = capacity;
        // The round trip an acknowledgement closes, at least one step.
        let mut keep = self.lag + 1;
        if let Some(a) = self.ack.as_mut() {
            let rtt = (self.lag + a.lag).max(1);
            keep = keep.max(rtt + 1);
            if k >= a.lag {
                // An opportunity of the reverse link at x = k - lag_rev carried everything
                // that had reached the receiver by x, S(x - lag), to the sender now.
                let rev = a.link.cumulative_bytes(at(k - a.lag));
                if rev > a.capacity {
                    a.acked = sent_before(&self.history, rtt);
                }
                a.capacity = rev;
            }
            sent = sent.min(a.acked + a.window);
        }
        // Every term is at least the previous S (input and the acknowledgements only grow),
        // so S never falls.
        self.sent = sent;
        self.history.push_back(self.sent);
        while self.history.len() > keep {
            self.history.pop_front();
        }
        // S(k - lag), once the hop has been running that long (the history keeps at least
        // lag + 1 steps).
        let n = self.history.len();
        if n > self.lag {
            self.history[n - 1 - self.lag]
        } else {
            0.0
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rate::Source;

    /// Each arrival time within half a millisecond of the one wanted.
    fn assert_times(got: &[f64], want: &[f64]) {
        for (t, w) in got.iter().zip(want) {
            assert!((t - w).abs() < 5e-4, "{got:?} against {want:?}");
        }
    }

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
                feedback: None,
            },
            FluidPath {
                wan: hs,
                wan_delay: ms(delays[1]),
                pipe: Some((pipe, ms(delays[2]))),
                feedback: None,
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
            feedback: None,
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
                feedback: None,
            },
            FluidPath {
                wan: &a,
                wan_delay: ms(100),
                pipe: None,
                feedback: None,
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

    /// Feedback over constant reverse links, the paths' own delays.
    fn with_feedback<'a>(
        paths: [FluidPath<'a>; 2],
        up: &'a RateProfile,
        window: u64,
    ) -> [FluidPath<'a>; 2] {
        paths.map(|mut p| {
            p.feedback = Some(Feedback {
                wan: AckLink {
                    link: up,
                    delay: p.wan_delay,
                },
                pipe: p.pipe.map(|(_, delay)| AckLink { link: up, delay }),
                window,
            });
            p
        })
    }

    /// With reverse links that never pause and a window above every path's
    /// bandwidth-delay product, the window-limited bound is the fluid's.
    #[test]
    fn ample_windows_leave_the_fluid_bound_alone() {
        let ps = RateProfile::constant(8e6);
        let hs = RateProfile::constant(10e6);
        let pipe = RateProfile::constant(5e6);
        let up = RateProfile::constant(1e6);
        let plain = ps_and_helper(&ps, &hs, &pipe, [25, 23, 2]);
        let fed = with_feedback(plain.clone(), &up, 4 << 20);
        let horizon = Duration::from_secs(100);
        let (a, b) = (
            lower_bound(10_000_000, &plain, horizon),
            lower_bound(10_000_000, &fed, horizon),
        );
        assert!((a - b).abs() < 2e-4, "{a} vs {b}");
    }

    /// A window caps a path at W per round trip: 125 kB over 2 × 25 ms is 20 Mbit/s on a
    /// 100 Mbit/s link.
    #[test]
    fn a_window_caps_a_path_at_one_window_per_round_trip() {
        let fast = RateProfile::constant(100e6);
        let up = RateProfile::constant(1e6);
        let path = FluidPath {
            wan: &fast,
            wan_delay: ms(25),
            pipe: None,
            feedback: Some(Feedback {
                wan: AckLink {
                    link: &up,
                    delay: ms(25),
                },
                pipe: None,
                window: 125_000,
            }),
        };
        let got = max_delivered(&[path], Duration::from_secs(10)) * 8.0 / 10.0;
        assert!((got - 20e6).abs() / 20e6 < 0.01, "{got}");
    }

    /// Sample `i` (100 ms) of an 8 Mbit/s hop 10 ms long whose reverse link is out from 1 s
    /// to 3 s, with a 500 kB window: the last acknowledgement before the outage covers
    /// 0.99 MB, so delivery stops at 1.5 s and resumes 20 ms after the reverse link does.
    fn outage_sample(i: usize) -> f64 {
        match i {
            0 => 90_000.0,
            15..=29 => 0.0,
            30 => 80_000.0,
            _ => 100_000.0,
        }
    }

    /// An uplink outage from 1 s to 3 s on an 8 Mbit/s PS-Path (10 ms each way, window
    /// 500 kB): the last acknowledgement left the receiver at 1.0 s covering 0.99 MB, so the
    /// sender stops at 1.49 MB, which arrives by 1.5 s; the next acknowledgement reaches it at
    /// 3.01 s and data the receiver at 3.02 s. The plain fluid ignores the outage.
    #[test]
    fn an_uplink_outage_stops_the_sender_after_one_window() {
        let down = RateProfile::constant(8e6);
        let mut up = RateProfile::constant(1e6);
        up.change_at(Time::from_millis(1000), Source::Constant(0.0));
        up.change_at(Time::from_millis(3000), Source::Constant(1e6));
        let plain = FluidPath {
            wan: &down,
            wan_delay: ms(10),
            pipe: None,
            feedback: None,
        };
        let mut fed = plain.clone();
        fed.feedback = Some(Feedback {
            wan: AckLink {
                link: &up,
                delay: ms(10),
            },
            pipe: None,
            window: 500_000,
        });
        let span = Duration::from_secs(4);
        let got = delivered_per_sample(&[fed], span, ms(100));
        let free = delivered_per_sample(&[plain], span, ms(100));
        assert_eq!(got.len(), 40);
        for (i, (b, f)) in got.iter().zip(&free).enumerate() {
            let want = outage_sample(i);
            assert!((b - want).abs() < 200.0, "sample {i}: {b} vs {want}");
            let want_free = if i == 0 { 90_000.0 } else { 100_000.0 };
            assert!((f - want_free).abs() < 200.0, "free sample {i}: {f}");
        }
    }

    /// The helper's pipe has a window of its own: an outage of the pipe's reverse link stops
    /// the helper's forwarding, and the helper buffer keeps what the HS-Path brings.
    #[test]
    fn a_pipe_outage_stops_the_helper_forwarding() {
        let hs = RateProfile::constant(8e6);
        let pipe = RateProfile::constant(8e6);
        let up = RateProfile::constant(1e6);
        let mut pipe_up = RateProfile::constant(1e6);
        pipe_up.change_at(Time::from_millis(1000), Source::Constant(0.0));
        pipe_up.change_at(Time::from_millis(3000), Source::Constant(1e6));
        let path = FluidPath {
            wan: &hs,
            wan_delay: Duration::ZERO,
            pipe: Some((&pipe, ms(10))),
            feedback: Some(Feedback {
                wan: AckLink {
                    link: &up,
                    delay: Duration::ZERO,
                },
                pipe: Some(AckLink {
                    link: &pipe_up,
                    delay: ms(10),
                }),
                window: 500_000,
            }),
        };
        let got = delivered_per_sample(&[path], Duration::from_secs(4), ms(100));
        for (i, b) in got.iter().enumerate() {
            let want = outage_sample(i);
            assert!((b - want).abs() < 200.0, "sample {i}: {b} vs {want}");
        }
    }

    /// Transfers one after the other: each waits for the gap and crosses the delay again,
    /// where the cumulative arrival times run them back to back.
    #[test]
    fn sequential_transfers_wait_for_each_other() {
        let ps = RateProfile::constant(8e6);
        let paths = [FluidPath {
            wan: &ps,
            wan_delay: ms(10),
            pipe: None,
            feedback: None,
        }];
        let got = sequential_arrival_times(
            &[100_000, 100_000, 100_000],
            &paths,
            ms(10),
            Duration::from_secs(10),
        );
        // Each: 10 ms request, 10 ms delay, 100 ms at 1 MB/s.
        assert_times(&got, &[0.12, 0.24, 0.36]);
        let back_to_back = arrival_times(
            &[100_000, 200_000, 300_000],
            &paths,
            Duration::from_secs(10),
        );
        assert_times(&back_to_back, &[0.11, 0.21, 0.31]);
        // Each held against its own request: asked for at 0, 1 and 1.05 s (a run slower
        // than the bound), each ends 120 ms after its request, as the first does above.
        let own = arrival_times_from(
            &[100_000, 100_000, 100_000],
            &[0.0, 1.0, 1.05],
            &paths,
            ms(10),
            Duration::from_secs(10),
        );
        assert_times(&own, &[0.12, 1.12, 1.17]);
        // A request time that is no time, or past the horizon: no end.
        let none = arrival_times_from(
            &[100_000, 100_000],
            &[f64::NAN, 20.0],
            &paths,
            ms(10),
            Duration::from_secs(10),
        );
        assert!(none.iter().all(|t| t.is_infinite()), "{none:?}");
    }

    /// A helper cannot buffer a transfer nobody asked for yet: an HS-Path at 10 Mbit/s for
    /// 1 s, then down, behind a 1 Mbit/s pipe. Back to back, 250 kB arrive by 2 s (the
    /// helper holds the second 125 kB from the first second); asked for one after the
    /// other, the second 125 kB start at 1 s, when the HS-Path is down, and never arrive.
    #[test]
    fn a_helper_cannot_buffer_what_was_not_asked_for() {
        let mut hs = RateProfile::constant(10e6);
        hs.change_at(Time::from_millis(1000), Source::Constant(0.0));
        let pipe = RateProfile::constant(1e6);
        let paths = [FluidPath {
            wan: &hs,
            wan_delay: Duration::ZERO,
            pipe: Some((&pipe, Duration::ZERO)),
            feedback: None,
        }];
        let horizon = Duration::from_secs(10);
        let cumulative = arrival_times(&[125_000, 250_000], &paths, horizon);
        assert!((cumulative[1] - 2.0).abs() < 1e-3, "{cumulative:?}");
        let one_by_one =
            sequential_arrival_times(&[125_000, 125_000], &paths, Duration::ZERO, horizon);
        assert!((one_by_one[0] - 1.0).abs() < 1e-3, "{one_by_one:?}");
        assert!(one_by_one[1].is_infinite(), "{one_by_one:?}");
    }
}
