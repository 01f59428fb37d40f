//! Slow-start queue guard (sans-IO; the daemons and the simulator run this one): a link that has filled its bottleneck's queue in slow start is
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
//! bottleneck's rate, and the guard caps the link's pacing rate (the daemons set
//! SO_MAX_PACING_RATE; the simulator's TCP model paces the same way) at
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

/// The cap value that means none: what [`QueueGuard::check`] returns to lift a cap. It is
/// also the SO_MAX_PACING_RATE value the daemons set for "paced, uncapped" (`u64::MAX`
/// would turn the kernel's pacing off).
pub const NO_CAP: u64 = u64::MAX - 1;
/// A standing queue: the smoothed RTT at least this fraction of the minimum RTT above it
/// (25 ms on a 50 ms path; a quarter, 12.5 ms, also caught the jitter of LTE traces).
pub const QUEUE_DELAY: f64 = 0.5;
/// ... with more than this many bandwidth-delay products (the path's rate times its
/// minimum RTT) in flight, so that the link's own bytes can fill that queue ...
pub const FLIGHT_BDPS: f64 = 1.5;
/// ... and at least this much: below it the window is too small for its queue to matter.
pub const MIN_FLIGHT: u64 = 64 << 10;
/// Gain of the moving mean and mean deviation of the delivery-rate samples per reading.
pub const RATE_GAIN: f64 = 1.0 / 16.0;
/// A steady delivery rate, for an HS-Path's own guard in congestion avoidance: the mean
/// deviation of the samples under this fraction of their mean.
pub const STEADY_DEV: f64 = 0.15;
/// A PS-Path's guard judges the rate steady only after this many readings since slow start
/// or a loss recovery ended (four time constants of the moving averages, about 0.3 s at the
/// daemons' 5 ms tick): a collapse of the rate takes a time constant to show in them, and a
/// cap set at a collapsed rate would hold the path at it; over LTE traces, whose rate holds
/// for a tenth of a second here and there, 16 readings still let the cap hold the PS-Path
/// below a rising rate (docs/evaluation.md, item 39).
pub const PS_STEADY_READINGS: u32 = 64;
/// ... and only while the mean deviation of the samples is under this fraction of their
/// mean, a third of [`STEADY_DEV`]: a constant link's samples hold within it (07's two
/// devices at 2 MB kept every run at 1.39 s), while an LTE trace's calm stretches mostly do
/// not (10a's stretch from 90 s no longer slower with the guard; docs/evaluation.md, item
/// 39).
pub const PS_STEADY_DEV: f64 = 0.05;
/// The default factor over the delivered rate (the daemons' `tuning.queue_guard`).
pub const DEFAULT_FACTOR: f64 = 1.25;
/// The default factor of an HS-Path's own guard (`tuning.hs_queue_guard`): its queue grows
/// by a tenth of the delivered rate per second, 150 KB in 2.4 s at 5 Mbit/s, too slowly to
/// overflow within most downloads (docs/evaluation.md, item 38; 1.05 did the same there).
pub const DEFAULT_HS_FACTOR: f64 = 1.1;
/// The default factor of a PS-Path's guard in congestion avoidance
/// (`tuning.ps_queue_guard`): off. At 1 (the queue held where it stands) it removes 07's
/// late drops (docs/evaluation.md, item 39: at 1.1 the queue still overflowed in 5 of 12
/// runs, at 1 in none of 64), but over 10a's LTE traces it cost 1-3% at 4 MB (about 1%
/// with [`PS_STEADY_DEV`]), so it is a setting for steady links.
pub const DEFAULT_PS_FACTOR: f64 = 0.0;

/// What the guard reads of a link's TCP state, in TCP_INFO's units: the daemons fill it
/// from TCP_INFO, the simulator from its TCP model.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GuardReading {
    /// Smoothed RTT, microseconds (`tcpi_rtt`).
    pub srtt_us: u32,
    /// Minimum RTT seen, microseconds (`tcpi_min_rtt`).
    pub min_rtt_us: u32,
    /// Bytes sent and not acknowledged (`tcpi_unacked` times the MSS).
    pub unacked_bytes: u64,
    /// The last delivery-rate sample, bytes per second (`tcpi_delivery_rate`).
    pub delivery_rate: u64,
    /// The window is below the slow-start threshold.
    pub slow_start: bool,
    /// The sender is recovering from a loss (`tcpi_ca_state` Recovery or Loss): its
    /// delivery-rate samples then measure the retransmissions, not the path.
    pub recovering: bool,
}

/// The guard of one link: whether it caps the link's pacing rate, and at what.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct QueueGuard {
    factor: f64,
    /// An HS-Path's own factor (`tuning.hs_queue_guard`), which holds in slow start and
    /// congestion avoidance alike while the helper's buffer is short.
    hs_factor: Option<f64>,
    /// A PS-Path's factor in congestion avoidance (`tuning.ps_queue_guard`), while its
    /// delivery rate is steady.
    ps_factor: Option<f64>,
    /// How long the helper's buffer takes to drain through its pipe, seconds, if known
    /// ([`Self::set_pipe_drain`]).
    pipe_drain: Option<f64>,
    /// The cap the link has now ([`NO_CAP`] when none).
    cap: u64,
    /// Moving mean and mean deviation of the delivery-rate samples, bytes per second.
    rate_mean: f64,
    rate_dev: f64,
    /// Readings that went into them.
    rate_n: u32,
}

impl QueueGuard {
    /// A guard pacing at `factor` times the delivered rate while it holds; a factor below 1
    /// (0: off) never caps.
    pub fn new(factor: f64) -> Self {
        QueueGuard {
            factor,
            hs_factor: None,
            ps_factor: None,
            pipe_drain: None,
            cap: NO_CAP,
            rate_mean: 0.0,
            rate_dev: 0.0,
            rate_n: 0,
        }
    }

    /// The guard of a proxy's HS-Path (docs/evaluation.md, item 38): `hs_factor` while the
    /// helper's buffer is short (see [`Self::set_pipe_drain`]), in slow start, and in
    /// congestion avoidance while the path's delivery rate is steady; `factor` in slow start
    /// otherwise. An `hs_factor` below 1 gives the ordinary guard.
    ///
    /// Why steady: on a link whose rate holds (08's constant links), CUBIC's window grows
    /// into the queue and overflows it, and a split-TCP helper's pipe idles while the
    /// retransmission crosses that queue; paced a tenth over its rate, the queue never
    /// overflows. Over LTE traces the rate swings, and the drops the guard spares the
    /// HS-Path in congestion avoidance were what kept its window and standing queue small:
    /// held, it ran a deeper queue that the next dip overflowed anyway, and 10a's 4 MB
    /// downloads took about 2% longer. Steady means the mean deviation of the delivery-rate
    /// samples since slow start ended is under [`STEADY_DEV`] of their mean (moving
    /// averages with gain [`RATE_GAIN`] per reading, about 80 ms at the daemons' 5 ms
    /// tick); slow start's ramp is left out, or it would read as unsteady for the first
    /// quarter second of congestion avoidance, while the queue fills.
    pub fn for_hs_path(factor: f64, hs_factor: f64) -> Self {
        QueueGuard {
            hs_factor: (hs_factor >= 1.0).then_some(hs_factor),
            ..QueueGuard::new(factor)
        }
    }

    /// The guard of a proxy's PS-Path with a factor for congestion avoidance: `factor` in
    /// slow start, as every link's, and `ps_factor` past it while the path's delivery rate
    /// is steady (as [`Self::for_hs_path`] judges it, but within [`PS_STEADY_DEV`] and over
    /// at least [`PS_STEADY_READINGS`]) and the sender is not recovering from a loss. A `ps_factor` below 1 gives the
    /// ordinary guard.
    ///
    /// Why: on a link whose rate holds, CUBIC grows its window into the bottleneck's queue
    /// and overflows it, and PAMS makes every subflow finish together, so a drop in the
    /// last round trips leaves the retransmission a queue's delay behind the other paths
    /// while the primary, which reads in order, waits for it (07's two devices at 2 MB,
    /// docs/evaluation.md, item 39). Paced at its rate (a factor of 1), the queue stays
    /// where it stood when the cap came; should the path's rate rise, the queue drains,
    /// the standing-queue test fails and the cap goes. Over swinging rates it should stand
    /// aside, for the reason [`Self::for_hs_path`] gives, but over 10a's LTE traces it
    /// still costs about 1% at 4 MB, so it is off by default ([`DEFAULT_PS_FACTOR`]).
    pub fn for_ps_path(factor: f64, ps_factor: f64) -> Self {
        QueueGuard {
            ps_factor: (ps_factor >= 1.0).then_some(ps_factor),
            ..QueueGuard::new(factor)
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

    /// Looks at a reading of the link and the path's estimated rate (bytes per second),
    /// both corrected for short packets with `fill` (the daemons' `TcpInfo::with_fill` and
    /// `Meter::fill`; 1 for full packets), and returns the pacing cap to set when it must
    /// change ([`NO_CAP`] to lift the cap). Pacing counts packets, so the cap is in their
    /// units: the corrected rate divided by the fill, or a link of short packets would be
    /// held below what it delivers. A cap within an eighth of the one in force is left as
    /// it is: delivery-rate samples move by a few percent every ACK.
    pub fn check(&mut self, info: &GuardReading, est_rate: f64, fill: f64) -> Option<u64> {
        let x = info.delivery_rate as f64;
        if info.slow_start || (info.recovering && self.ps_factor.is_some()) {
            // A rate that doubles every round trip says nothing of how steady the path is:
            // the statistics start with congestion avoidance. Nor does the pace of a loss
            // recovery's retransmissions, for a PS-Path's guard: they start again after it.
            self.rate_mean = 0.0;
            self.rate_dev = 0.0;
            self.rate_n = 0;
        } else if x > 0.0 && (self.hs_factor.is_some() || self.ps_factor.is_some()) {
            // Only a guard that holds past slow start asks whether the rate is steady.
            self.rate_n = self.rate_n.saturating_add(1);
            if self.rate_mean == 0.0 {
                self.rate_mean = x;
            } else {
                self.rate_dev += ((x - self.rate_mean).abs() - self.rate_dev) * RATE_GAIN;
                self.rate_mean += (x - self.rate_mean) * RATE_GAIN;
            }
        }
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

    fn wanted(&self, info: &GuardReading, est_rate: f64, fill: f64) -> u64 {
        let queue_delay = f64::from(info.srtt_us.saturating_sub(info.min_rtt_us)) / 1e6;
        let buffer_short = self.pipe_drain.is_some_and(|d| d < queue_delay);
        let steady = self.rate_dev < STEADY_DEV * self.rate_mean;
        let own = self
            .hs_factor
            .filter(|_| buffer_short && (steady || info.slow_start))
            .or(self.ps_factor.filter(|_| {
                self.rate_dev < PS_STEADY_DEV * self.rate_mean
                    && self.rate_n >= PS_STEADY_READINGS
                    && !info.slow_start
                    && !info.recovering
            }));
        let factor = own.unwrap_or(self.factor);
        if factor < 1.0 || !(info.slow_start || own.is_some()) || info.min_rtt_us == 0 {
            return NO_CAP;
        }
        let rate = (info.delivery_rate as f64).max(est_rate);
        let min_rtt = info.min_rtt_us as f64 / 1e6;
        let queued = info.srtt_us as f64 >= info.min_rtt_us as f64 * (1.0 + QUEUE_DELAY);
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
    fn info(rtt_ms: u32, flight: u64) -> GuardReading {
        GuardReading {
            srtt_us: rtt_ms * 1000,
            min_rtt_us: 50_000,
            unacked_bytes: flight,
            delivery_rate: 1_250_000,
            slow_start: true,
            recovering: false,
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
    fn an_hs_path_guard_holds_past_slow_start_while_the_helpers_buffer_is_short() {
        let mut ca = info(80, 200_000);
        ca.slow_start = false;
        // The ordinary guard leaves congestion avoidance alone.
        assert_eq!(QueueGuard::new(1.25).check(&ca, 0.0, 1.0), None);
        // An HS-Path's own guard, while the helper's buffer is short, caps it there too, at
        // its factor, and in slow start.
        let mut hs = QueueGuard::for_hs_path(1.25, 1.1);
        assert!(hs.watches_pipe());
        hs.set_pipe_drain(Some(0.0));
        assert_eq!(hs.check(&ca, 0.0, 1.0), Some(1_375_000));
        let mut ss = QueueGuard::for_hs_path(1.25, 1.1);
        ss.set_pipe_drain(Some(0.0));
        assert_eq!(ss.check(&info(80, 200_000), 0.0, 1.0), Some(1_375_000));
        // A buffer that outlasts the HS-Path's queue (30 ms here), or one not known yet:
        // the ordinary guard, none in congestion avoidance, 1.25 in slow start.
        for drain in [Some(0.5), None] {
            let mut long = QueueGuard::for_hs_path(1.25, 1.1);
            long.set_pipe_drain(drain);
            assert_eq!(long.check(&ca, 0.0, 1.0), None);
            assert_eq!(long.check(&info(80, 200_000), 0.0, 1.0), Some(1_562_500));
        }
        // It still lifts when the queue drains.
        ca.srtt_us = 60_000;
        assert_eq!(hs.check(&ca, 0.0, 1.0), Some(NO_CAP));
        // A factor below 1 for the HS-Path is the ordinary guard.
        assert!(!QueueGuard::for_hs_path(1.25, 0.0).watches_pipe());
    }

    /// An HS-Path's own guard holds in congestion avoidance only while the delivery rate is
    /// steady: fed samples that swing by half either way, as over an LTE trace, it leaves
    /// the link to the ordinary guard (none in congestion avoidance); steady again, it holds.
    #[test]
    fn an_hs_path_guard_holds_in_congestion_avoidance_only_at_a_steady_rate() {
        let mut ca = info(80, 200_000);
        ca.slow_start = false;
        let mut g = QueueGuard::for_hs_path(1.25, 1.1);
        g.set_pipe_drain(Some(0.0));
        let mut caps = Vec::new();
        for i in 0..200 {
            let mut r = ca;
            r.delivery_rate = if i % 2 == 0 { 625_000 } else { 1_875_000 };
            caps.push(g.check(&r, 0.0, 1.0));
        }
        assert_eq!(g.cap(), None, "a swinging rate: {:?}", &caps[150..]);
        for _ in 0..200 {
            g.check(&ca, 0.0, 1.0);
        }
        assert_eq!(g.cap(), Some(1_375_000), "steady again");
        // In slow start it holds at once, whatever the rate did.
        let mut ss = QueueGuard::for_hs_path(1.25, 1.1);
        ss.set_pipe_drain(Some(0.0));
        let mut r = info(80, 200_000);
        r.delivery_rate = 625_000;
        ss.check(&r, 0.0, 1.0);
        assert_eq!(ss.check(&info(80, 200_000), 0.0, 1.0), Some(1_375_000));
    }

    #[test]
    fn a_ps_path_guard_holds_in_congestion_avoidance_only_at_a_steady_rate() {
        let mut ca = info(80, 200_000);
        ca.slow_start = false;
        // Slow start: the ordinary factor.
        let mut ss = QueueGuard::for_ps_path(1.25, 1.1);
        assert!(!ss.watches_pipe());
        assert_eq!(ss.check(&info(80, 200_000), 0.0, 1.0), Some(1_562_500));
        // Congestion avoidance at a steady 1.25 MB/s: its own factor once the rate has had
        // time to show it is steady, with no pipe to ask.
        let mut ps = QueueGuard::for_ps_path(1.25, 1.1);
        for _ in 1..PS_STEADY_READINGS {
            assert_eq!(ps.check(&ca, 0.0, 1.0), None);
        }
        assert_eq!(ps.check(&ca, 0.0, 1.0), Some(1_375_000));
        // A loss recovery lifts it and starts the count again: a recovery's rate is the
        // retransmissions'.
        let mut rec = ca;
        rec.recovering = true;
        rec.delivery_rate = 25_000;
        assert_eq!(ps.check(&rec, 0.0, 1.0), Some(NO_CAP));
        for _ in 1..PS_STEADY_READINGS {
            assert_eq!(ps.check(&ca, 0.0, 1.0), None);
        }
        assert_eq!(ps.check(&ca, 0.0, 1.0), Some(1_375_000));
        // A rate that swings by half either way: not steady, no cap; steady again, it holds.
        let mut caps = Vec::new();
        for i in 0..200 {
            let mut r = ca;
            r.delivery_rate = if i % 2 == 0 { 625_000 } else { 1_875_000 };
            caps.push(ps.check(&r, 0.0, 1.0));
        }
        assert_eq!(ps.cap(), None, "a swinging rate: {:?}", &caps[150..]);
        for _ in 0..200 {
            ps.check(&ca, 0.0, 1.0);
        }
        assert_eq!(ps.cap(), Some(1_375_000), "steady again");
        // Below 1: the ordinary guard, none in congestion avoidance.
        assert_eq!(
            QueueGuard::for_ps_path(1.25, 0.0).check(&ca, 0.0, 1.0),
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
