//! Path estimation (MPBond §4.3.2).
//!
//! A [`PathEstimator`] turns TCP samples (from TCP_INFO in the daemons, from the TCP model in the
//! simulator) into the smoothed RTT and throughput that PAD needs. A [`PipeState`] keeps the
//! newest pipe feedback for a helper subflow.

use std::time::Duration;

use mpbond_proto::{PipeFeedback, PipeMinRtt};

use crate::goodput::{Backlog, Goodput};

use crate::path::PipeView;
use crate::Time;

/// One reading of a TCP connection's state.
#[derive(Clone, Copy, Debug)]
pub struct TcpSample {
    /// When it was taken.
    pub now: Time,
    /// Smoothed RTT, seconds (tcpi_rtt is already smoothed by the kernel).
    pub srtt: f64,
    /// Congestion window in bytes (tcpi_snd_cwnd × tcpi_snd_mss).
    pub cwnd: u64,
    /// Bytes in flight (tcpi_unacked × tcpi_snd_mss): with `cwnd`, whether the window was
    /// full when the sample was taken.
    pub in_flight: u64,
    /// The kernel's delivery-rate estimate, bytes per second, when it has one.
    pub delivery_rate: Option<f64>,
    /// True when the delivery-rate sample was limited by the application rather than the
    /// network (tcpi_delivery_rate_app_limited); such samples understate the path.
    pub app_limited: bool,
    /// True when the connection was in slow start (congestion window below the threshold):
    /// its rate then grows with the window, not with the path, and understates the path
    /// too.
    pub slow_start: bool,
    /// Segments retransmitted since the connection opened (tcpi_total_retrans); a rise
    /// marks a loss episode.
    pub retransmits: u64,
    /// The rate a standing queue at the path's bottleneck drains at, bytes per second: the
    /// bytes the peer acknowledged or SACKed over about the last [`DRAIN_SPAN`] while the
    /// smoothed RTT stayed over twice the minimum ([`crate::goodput::Backlog`],
    /// [`DrainRate`]). `None` without such a queue. Only the drain floor after a loss uses
    /// it ([`PathEstimator::with_drain_floor`]).
    pub drain_rate: Option<f64>,
}

/// A smoothed RTT this many times the minimum means a standing queue of half a
/// bandwidth-delay product or more at the path's bottleneck: with the window full as well,
/// the bottleneck has had no idle moment for the kernel's rate sample to miss, whatever the
/// sample's application-limited flag says ([`PathEstimator`]).
pub const QUEUED_RTT: f64 = 1.5;

/// The span the drain rate of [`TcpSample::drain_rate`] is measured over: the estimate's
/// time constant, so that it follows a path that slowed as fast as the average does.
pub const DRAIN_SPAN: Duration = Duration::from_millis(100);

/// Time constant of [`PathEstimator::rate_shortfall`]'s average: long enough to span several
/// of an LTE link's swings (its rate moves on scales of 0.1-1 s), short enough to forget a
/// drive through a bad cell within a few seconds.
pub const SHORTFALL_TAU: Duration = Duration::from_secs(1);

/// Largest [`PathEstimator::rate_shortfall`] reported, in natural-log units: a path's rate is
/// never taken to be less than half its estimate on its account.
pub const MAX_SHORTFALL: f64 = std::f64::consts::LN_2;

/// Smoothed RTTs after a loss for which the daemons and the simulator floor rate samples at
/// the drain rate (`tuning.drain_floor`, `mpbond sim --drain-floor`): CUBIC's pause after a
/// loss spoils the kernel's samples for two or three round trips.
pub const DRAIN_FLOOR_RTTS: f64 = 3.0;

/// The drain rate of one connection ([`TcpSample::drain_rate`]), the same in the daemons
/// (from TCP_INFO) and in the simulator (from its TCP model): a [`Goodput`] over
/// [`DRAIN_SPAN`] of the bytes the peer has, counted only while a queue stands at the
/// bottleneck. Unsent bytes do not make one: a path whose window is the limit acknowledges
/// at the window's pace, which a loss cuts.
#[derive(Debug, Clone)]
pub struct DrainRate(Goodput);

impl Default for DrainRate {
    fn default() -> Self {
        Self(Goodput::with_span(DRAIN_SPAN))
    }
}

impl DrainRate {
    /// Takes one reading: `delivered`, the bytes acknowledged plus SACKed; `to_deliver`, the
    /// bytes still to cross (unacknowledged less SACKed, plus unsent); the smoothed and the
    /// minimum RTT, seconds.
    pub fn observe(&mut self, now: Time, delivered: u64, to_deliver: u64, srtt: f64, min_rtt: f64) {
        let queue = Backlog {
            to_deliver,
            srtt,
            min_rtt,
            ..Backlog::default()
        };
        self.0.observe(now, delivered, queue.is_backlogged());
    }

    /// The rate over the standing queue under way, once it has lasted 50 ms.
    pub fn rate(&self) -> Option<f64> {
        self.0.current()
    }
}

/// Smoothed RTT and throughput of one path.
///
/// Throughput is an exponentially weighted moving average of CWND/RTT (MPBond §4.3.2), or of
/// the kernel's delivery rate when one is given. CWND/RTT overshoots in slow start and whenever
/// the smoothed RTT lags a growing queue; the delivery rate measures what the path actually
/// delivered. An application-limited delivery-rate sample (the scheduler left the path idle)
/// can only raise the estimate, never lower it, as in BBR, unless it came from a full window
/// over a standing queue ([`QUEUED_RTT`]); until the path has been seen busy it counts at
/// least CWND/RTT. Once a busy delivery rate has come, CWND/RTT is never
/// averaged in again (docs/design.md, "Path estimation"). The average uses a time constant
/// rather than a per-sample weight, counted from the last sample it took in, so it reacts at
/// the same speed whether samples come every ACK (simulator) or every few readings (daemon,
/// on a slow path).
///
/// Optionally ([`PathEstimator::with_loss_hold`], `tuning.loss_hold`), after a loss the
/// estimate does not fall below its value when the loss was seen, for a few smoothed RTTs
/// (at most [`MAX_LOSS_HOLD`]). A loss makes CUBIC halve its window: the sender pauses while
/// the standing queue at the bottleneck drains, the link stays busy, but every rate sample
/// whose send interval spans the pause reads low for two or three round trips. Measured on
/// MPBond Figure 4's 8 Mbps PS-Path: the average fell from 965 to 809 KB/s for about 0.4 s
/// after each loss, and PAMS made its last split of a 10 MB download inside such a dip,
/// giving the helper about 100 KB too many (the pipe then finished 0.25 s after the
/// PS-Path). A drop in capacity lowers the rate samples before the queue overflows, so the
/// level held is then already the lower one. The hold closes that gap in Figure 4 but
/// costs as much in Figure 5's setting, where the same dips on the HS-Path at the end of
/// the helper's share had been making PAMS give the helper less (docs/evaluation.md,
/// "What we changed", item 7); so it is off by default. A maximum over a few RTTs at all
/// times (as BBR keeps its bottleneck bandwidth) was tried first and did the same.
///
/// What is on by default ([`PathEstimator::with_drain_floor`], `tuning.drain_floor`) is a
/// floor that measures instead of remembering: for a few smoothed RTTs after a loss, a rate
/// sample below the rate the path's ACKs show its standing queue draining at
/// ([`TcpSample::drain_rate`]) counts as that rate. The kernel's sample divides the packets
/// delivered by the longer of their send and ACK intervals, so a sample whose packets were
/// sent across CUBIC's pause reads low although the bottleneck never stopped: on §6.8's
/// 8 Mbit/s PS-Path the samples fell to 720 KB/s and the average to 790 KB/s, back above
/// 950 KB/s only half a second after the recovery, while the link delivered 965 KB/s
/// throughout, and in 16 of 60 runs PAMS gave the helper 50-70 KB too many in that window
/// (docs/evaluation.md, item 29). An RTT over twice
/// the minimum means more than a bandwidth-delay product is queued; CUBIC's cut to 0.7 of
/// the window (Reno's to 0.5) leaves the link busy, so the ACK rate is the bottleneck's.
/// Unlike the hold, a loss caused by a drop in capacity shows at once: the ACKs slow with
/// the link, and the floor with them (within [`DRAIN_SPAN`]).
#[derive(Clone, Debug)]
pub struct PathEstimator {
    tau: f64,
    srtt: f64,
    min_rtt: f64,
    throughput: Option<f64>,
    /// When the last busy (not application-limited) delivery rate came; once one has, CWND/RTT
    /// is no longer averaged in.
    last_busy: Option<Time>,
    /// In the slow start that follows an idle period ([`RESTART_IDLE`]).
    restarting: bool,
    last: Option<Time>,
    hold_rtts: f64,
    retransmits: Option<u64>,
    /// The level held after a loss, and until when.
    hold: Option<(f64, Time)>,
    /// Smoothed RTTs the drain floor lasts after a loss (0: none).
    floor_rtts: f64,
    /// Until when rate samples are floored at the drain rate (after a loss).
    floor_until: Option<Time>,
    /// The average of the squared shortfall ([`PathEstimator::rate_shortfall`]), and when it
    /// last took a sample in.
    shortfall_sq: f64,
    shortfall_last: Option<Time>,
}

/// How long [`PathEstimator`] holds its level after a loss when asked to
/// ([`PathEstimator::with_loss_hold`]), in smoothed RTTs: the dip lasts two or three.
pub const LOSS_HOLD_RTTS: f64 = 3.0;

/// A path without busy samples for longer than this has restarted its window when it sends
/// again: Linux does so after an idle period longer than the retransmission timeout, at
/// least 200 ms (`tcp_slow_start_after_idle`).
pub const RESTART_IDLE: Duration = Duration::from_millis(200);

/// Longest hold after a loss, seconds, whatever the RTT.
pub const MAX_LOSS_HOLD: f64 = 0.5;

impl PathEstimator {
    /// A new estimator whose average forgets with time constant `tau`.
    pub fn new(tau: Duration) -> Self {
        PathEstimator {
            tau: tau.as_secs_f64().max(1e-6),
            srtt: 0.0,
            min_rtt: f64::INFINITY,
            throughput: None,
            last_busy: None,
            restarting: false,
            last: None,
            hold_rtts: 0.0,
            retransmits: None,
            hold: None,
            floor_rtts: 0.0,
            floor_until: None,
            shortfall_sq: 0.0,
            shortfall_last: None,
        }
    }

    /// The same holding its level for `rtts` smoothed RTTs after a loss; 0 (the default)
    /// reports the plain average.
    pub fn with_loss_hold(mut self, rtts: f64) -> Self {
        self.hold_rtts = if rtts.is_finite() { rtts.max(0.0) } else { 0.0 };
        self
    }

    /// The same, except that for `rtts` smoothed RTTs after a loss (at most
    /// [`MAX_LOSS_HOLD`]) a rate sample below the sample's drain rate counts as that rate;
    /// 0 (the default here; [`DRAIN_FLOOR_RTTS`] in the daemons and the simulator) takes
    /// the samples as they are.
    pub fn with_drain_floor(mut self, rtts: f64) -> Self {
        self.floor_rtts = if rtts.is_finite() { rtts.max(0.0) } else { 0.0 };
        self
    }

    /// Feeds one sample.
    pub fn on_sample(&mut self, s: TcpSample) {
        if !(s.srtt.is_finite() && s.srtt > 0.0) {
            return;
        }
        self.srtt = s.srtt;
        self.min_rtt = self.min_rtt.min(s.srtt);
        self.note_loss(&s);
        self.note_shortfall(&s);
        // Readings that bring no rate sample leave `last` alone: the average's weight is the
        // time since the last sample it took in. Counting it from the last reading instead
        // (the daemons read every 5 ms; a 1 Mbit/s path acknowledges about every 20 ms)
        // stretched the time constant four times on slow paths: a 1 Mbit/s HS-Path read
        // 150 KB/s for 0.7 s after its first busy samples of 120 KB/s, and PAMS gave it a
        // quarter too much of a 1 MB download (docs/evaluation.md, item 17).
        let guessed = self.last_busy.is_none();
        let bottleneck = self.measures_bottleneck(&s);
        let Some(sample) = self.rate_sample(&s, bottleneck) else {
            return;
        };
        self.throughput = Some(match (self.throughput, self.last) {
            // The first sample that measured the bottleneck replaces an estimate that was
            // only the initial window's guess: averaging a guess in would keep a 1 Mbit/s
            // path at twice its rate for a time constant, while PAMS commits most of a short
            // download (docs/evaluation.md, item 36).
            (Some(_), _) if guessed && bottleneck => sample,
            // In slow start the window, and with it the rate, doubles every round trip: an
            // average over 100 ms (two round trips of a 50 ms path) trails it by up to four
            // times, and PAMS would split a short download by the paths' slow-start history
            // rather than by what they carry now. A busy sample above the estimate is what
            // the path delivered over its last round trip, so it counts at once.
            (Some(old), Some(_)) if s.slow_start && !s.app_limited && sample > old => sample,
            (Some(old), Some(last)) => {
                // A kernel rate sample spans at least one minimum RTT; after a gap (an
                // idle path, samples that said nothing new) it still speaks for no more
                // than that, so one sample cannot wipe out what the path measured before.
                let span = if self.min_rtt.is_finite() {
                    self.min_rtt
                } else {
                    self.tau
                };
                let dt = s.now.saturating_since(last).as_secs_f64().min(span);
                let w = 1.0 - (-dt / self.tau).exp();
                old + w * (sample - old)
            }
            _ => sample,
        });
        self.last = Some(s.now);
    }

    /// The rate `s` contributes to the average, or `None` when it says nothing new about the
    /// path; `bottleneck` is [`PathEstimator::measures_bottleneck`] of `s`.
    fn rate_sample(&mut self, s: &TcpSample, bottleneck: bool) -> Option<f64> {
        let window_rate = s.cwnd as f64 / s.srtt;
        let Some(r) = s.delivery_rate.filter(|r| r.is_finite() && *r > 0.0) else {
            // A reading without a delivery rate (the kernel skips intervals shorter than the
            // minimum RTT) says nothing about the rate once real ones have come: averaging
            // CWND/RTT in then drags the estimate toward a slow-start window over a short
            // RTT (a 4 ms pipe's first window reads 2.5 MB/s on a 625 KB/s link).
            return self.last_busy.is_none().then_some(window_rate);
        };
        // The drain rate (a queue stands at the bottleneck, [`TcpSample::drain_rate`]) speaks
        // for the path twice. An application-limited sample may be stale: the kernel keeps
        // one only if it is no lower than the sample it holds (`tcp_rate_gen`), so a path
        // that slowed while its sender kept little unsent (TCP_NOTSENT_LOWAT) reports its
        // old, higher rate for as long as that lasts; the rate its ACKs drain the queue at is
        // the path's, and below the kernel's sample it replaces it and lowers the estimate,
        // floor or not. Otherwise, after a loss, it floors the sample (the drain floor).
        let r = match s.drain_rate.filter(|d| d.is_finite() && *d > 0.0) {
            Some(d) if s.app_limited && d < r => return Some(d),
            Some(d) if self.floor_until.is_some_and(|u| s.now <= u) => r.max(d),
            _ => r,
        };
        let (r, understated) = if s.app_limited && !bottleneck {
            // An application-limited sample only bounds the path from below. Until the path
            // has been seen busy, what its window sends in the next round trip is the better
            // guess: a session whose links carried only pings otherwise starts every path at
            // the pings' few KB/s, and PAMS then splits the first round trips by noise.
            let r = if self.last_busy.is_some() {
                r
            } else {
                r.max(window_rate)
            };
            (r, true)
        } else {
            let idle = self
                .last_busy
                .is_some_and(|b| s.now.saturating_since(b) > RESTART_IDLE);
            self.last_busy = Some(s.now);
            // After an idle period the kernel restarts the window from its initial value;
            // until it leaves that slow start, a sample tells how far the window has got, not
            // what the path carries.
            self.restarting = s.slow_start && (self.restarting || idle);
            (r, self.restarting && !bottleneck)
        };
        // A sample that understates the path can raise the estimate, never lower it.
        if understated && self.throughput.is_some_and(|t| r <= t) {
            None
        } else {
            Some(r)
        }
    }

    /// Whether `s` was taken with the window full and a standing queue at the bottleneck
    /// ([`QUEUED_RTT`]), so that its rate is the bottleneck's even when the kernel marks it
    /// application-limited or the window is restarting.
    ///
    /// The kernel marks a rate sample application-limited when any of its packets left
    /// while the socket had less than a packet to send and room in the window. PAMS keeps
    /// the sockets' unsent data small on purpose (it decides late, TCP_NOTSENT_LOWAT), so
    /// in slow start, where every ACK opens the window by a packet, nearly every sample of
    /// mpbond's subflows carries the mark, also on a path whose bottleneck queue is
    /// filling. On the 1 Mbit/s PS-Path of experiment 08's cell PS 1/HS 18 the samples read
    /// 64-122 KB/s with the window full and the RTT climbing from 53 to 128 ms, all marked,
    /// so none could lower the initial window's guess of 290 KB/s, and PAMS gave that path
    /// 105-120 KB of a 512 KB download where its share was about 87 KB (docs/evaluation.md,
    /// item 36).
    fn measures_bottleneck(&self, s: &TcpSample) -> bool {
        self.min_rtt.is_finite()
            && s.srtt >= QUEUED_RTT * self.min_rtt
            && s.cwnd > 0
            && s.in_flight.saturating_mul(4) >= s.cwnd.saturating_mul(3)
    }

    /// Starts (or extends) the hold when the retransmission count rose, at the level the
    /// estimate had before this sample; ends an expired one.
    fn note_loss(&mut self, s: &TcpSample) {
        if self.hold.is_some_and(|(_, until)| s.now > until) {
            self.hold = None;
        }
        let lost = self.retransmits.is_some_and(|r| s.retransmits > r);
        self.retransmits = Some(s.retransmits);
        if lost && self.floor_rtts > 0.0 {
            let span = Duration::from_secs_f64((self.floor_rtts * s.srtt).min(MAX_LOSS_HOLD));
            self.floor_until = Some(s.now + span);
        }
        if !lost || self.hold_rtts <= 0.0 {
            return;
        }
        // During a hold this is the held level: back-to-back losses keep the first one's.
        let level = self.throughput();
        if level <= 0.0 {
            return;
        }
        let span = Duration::from_secs_f64((self.hold_rtts * s.srtt).min(MAX_LOSS_HOLD));
        self.hold = Some((level, s.now + span));
    }

    /// Takes in how far the rate the path's standing queue drained at
    /// ([`TcpSample::drain_rate`], the last [`DRAIN_SPAN`]) fell short of the estimate before
    /// this sample: `ln(estimate / drain rate)`, or 0 when the path delivered at least its
    /// estimate. Without a standing queue the drain rate says nothing (the sender, not the
    /// path, set the pace) and the average keeps its value.
    fn note_shortfall(&mut self, s: &TcpSample) {
        let (Some(drain), Some(est)) = (
            s.drain_rate.filter(|d| d.is_finite() && *d > 0.0),
            self.throughput.filter(|t| *t > 0.0),
        ) else {
            return;
        };
        let short = (est / drain).ln().clamp(0.0, 4.0);
        // As the throughput's average: the weight is the time since the last sample taken in,
        // at most one drain span (which is what one drain rate speaks for), so readings
        // every 5 ms (daemons) and every ACK (simulator) average alike.
        let dt = self
            .shortfall_last
            .map_or(DRAIN_SPAN, |l| s.now.saturating_since(l).min(DRAIN_SPAN));
        let w = 1.0 - (-dt.as_secs_f64() / SHORTFALL_TAU.as_secs_f64()).exp();
        self.shortfall_sq += w * (short * short - self.shortfall_sq);
        self.shortfall_last = Some(s.now);
    }

    /// How far, lately, the path delivered below its estimate: the root mean square over
    /// about [`SHORTFALL_TAU`] of `max(0, ln(estimate / drain rate))`, taken while a queue
    /// stood at its bottleneck, at most [`MAX_SHORTFALL`]; 0 on a path never seen behind a
    /// queue. A path of constant capacity should read near 0 (over the simulator's grid of
    /// constant rates the caution that reads it moved no download); an LTE link reads
    /// 0.4-0.6 (a median, in a run of 11d's traces: `scripts/estimate-error`), which says
    /// its next few hundred milliseconds may well bring a third to a half less than the
    /// estimate. The estimate itself cannot follow such swings: the kernel's rate samples
    /// span a round trip, 0.6 s behind an LTE link's 1 MB queue, and a fresher rate is too
    /// noisy to split by (docs/evaluation.md, item 53). PAMS's recall test can read a source
    /// this much slower ([`crate::scheduler::PamsConfig::shortfall_sigmas`], off by
    /// default).
    pub fn rate_shortfall(&self) -> f64 {
        self.shortfall_sq.max(0.0).sqrt().min(MAX_SHORTFALL)
    }

    /// Smoothed RTT in seconds (0 before the first sample).
    pub fn srtt(&self) -> f64 {
        self.srtt
    }

    /// Smallest RTT seen, seconds (0 before the first sample).
    pub fn min_rtt(&self) -> f64 {
        if self.min_rtt.is_finite() {
            self.min_rtt
        } else {
            0.0
        }
    }

    /// Throughput in bytes per second: the smoothed average, or the level held after a
    /// loss if that is higher (0 before the first sample).
    pub fn throughput(&self) -> f64 {
        let avg = self.throughput.unwrap_or(0.0);
        self.hold.map_or(avg, |(level, _)| avg.max(level))
    }
}

/// How full a TCP connection's packets are, from its cumulative counters.
///
/// Linux reports the delivery rate, the congestion window and the packets in flight in
/// packets, and TCP_INFO turns them into bytes with the MSS (`tcp_get_info`: the delivery
/// rate is packets delivered × `mss_cache` / interval). A packet shorter than the MSS still
/// counts as a full one, so a sender that writes small records, each sent at once on an
/// idle socket, reads a path faster than it is: with rate-sized records of 2-12 KiB (the
/// proxy's frames on a slow path, a helper relaying them one by one) the helper reported its
/// 5 Mbit/s pipe at up to 6.2 Mbit/s, the endgame reinjection took too little from it, and
/// 07's 512 KB download took 0.50 s where 16 KiB records took 0.46 s (docs/evaluation.md,
/// item 13).
///
/// The fill is the bytes acknowledged per packet delivered, as a fraction of the MSS, over a
/// window of at least [`PacketFill::MIN_PACKETS`] packets delivered within a few round trips
/// ([`PacketFill::window`]); the daemons scale those readings by it. Sparse traffic (pings,
/// feedback, an idle link) says nothing about the data that will follow, so a window that
/// outlives its time restarts and the fill goes back to 1, the kernel's own assumption.
#[derive(Clone, Copy, Debug)]
pub struct PacketFill {
    /// `(when, bytes_acked, delivered)` at the start of the current window.
    base: Option<(Time, u64, u32)>,
    fill: f64,
}

impl Default for PacketFill {
    fn default() -> Self {
        Self::new()
    }
}

impl PacketFill {
    /// Packets a window spans before its fill counts: a handful, so that one short packet
    /// (a FIN, the tail of a record) does not swing the reading.
    pub const MIN_PACKETS: u32 = 8;
    /// The smallest fill reported: a window of pure ACK-sized data is not worth scaling a
    /// rate to nothing for.
    pub const MIN_FILL: f64 = 0.05;
    /// The shortest time a window may take (see [`PacketFill::window`]).
    pub const MIN_WINDOW: Duration = Duration::from_millis(50);

    /// Full packets until measured otherwise.
    pub fn new() -> Self {
        Self {
            base: None,
            fill: 1.0,
        }
    }

    /// How long a window may take before it counts as sparse traffic: four smoothed RTTs,
    /// at least [`PacketFill::MIN_WINDOW`] (8 full packets in 50 ms are 1.9 Mbit/s; a pipe's
    /// 20 ms feedback frames need 160 ms).
    pub fn window(srtt: f64) -> Duration {
        let rtts = if srtt.is_finite() && srtt > 0.0 {
            Duration::from_secs_f64((4.0 * srtt).min(10.0))
        } else {
            Duration::ZERO
        };
        rtts.max(Self::MIN_WINDOW)
    }

    /// Takes one reading of the connection's counters (`tcpi_bytes_acked`,
    /// `tcpi_delivered`, `tcpi_snd_mss`) and its smoothed RTT (seconds), and returns the
    /// fill to scale by.
    pub fn observe(
        &mut self,
        now: Time,
        srtt: f64,
        bytes_acked: u64,
        delivered: u32,
        mss: u32,
    ) -> f64 {
        let Some((t0, b0, d0)) = self.base else {
            self.base = Some((now, bytes_acked, delivered));
            return self.fill;
        };
        let packets = delivered.wrapping_sub(d0);
        if mss == 0 || bytes_acked < b0 || packets > u32::MAX / 2 {
            // A counter went backwards (a new connection behind the same reader): restart.
            self.base = Some((now, bytes_acked, delivered));
            return self.fill;
        }
        // A window counts once it holds MIN_PACKETS for every window time it took (a late
        // reading of dense traffic still counts); one that ran out of time with fewer is
        // sparse traffic, and starts over from full packets.
        let windows = now.saturating_since(t0).as_secs_f64() / Self::window(srtt).as_secs_f64();
        let needed = f64::from(Self::MIN_PACKETS) * windows.max(1.0);
        if f64::from(packets) >= needed {
            let bytes = (bytes_acked - b0) as f64;
            self.fill = (bytes / (f64::from(packets) * f64::from(mss))).clamp(Self::MIN_FILL, 1.0);
            self.base = Some((now, bytes_acked, delivered));
        } else if windows > 1.0 {
            self.fill = 1.0;
            self.base = Some((now, bytes_acked, delivered));
        }
        self.fill
    }

    /// The last measured fill (1 before a window was complete).
    pub fn fill(&self) -> f64 {
        self.fill
    }
}

/// The newest pipe feedback of one helper subflow, as the data sender knows it.
#[derive(Clone, Debug, Default)]
pub struct PipeState {
    newest: Option<PipeFeedback>,
    /// The newest `PIPE_MIN_RTT` of this pipe.
    min_rtt: Option<PipeMinRtt>,
    received_at: Option<Time>,
    /// The sender-side path's acknowledged bytes when the newest feedback arrived.
    acked_at_report: Option<u64>,
}

impl PipeState {
    /// Records feedback unless it is older than what we have (feedback can arrive over
    /// several paths and overtake itself). Returns whether it was used. `hs_acked` is the
    /// sender-side path's TCP bytes acknowledged so far, if known ([`PipeState::unreported`]).
    pub fn on_feedback(&mut self, now: Time, fb: PipeFeedback, hs_acked: Option<u64>) -> bool {
        if let Some(old) = &self.newest {
            if fb.timestamp_us < old.timestamp_us {
                return false;
            }
        }
        self.newest = Some(fb);
        self.received_at = Some(now);
        self.acked_at_report = hs_acked;
        true
    }

    /// Records the pipe's minimum RTT unless the report is older than what we have. Returns
    /// whether it was used.
    pub fn on_min_rtt(&mut self, report: PipeMinRtt) -> bool {
        if self
            .min_rtt
            .is_some_and(|old| report.timestamp_us < old.timestamp_us)
        {
            return false;
        }
        self.min_rtt = Some(report);
        true
    }

    /// The pipe as PAD sees it, if any feedback has arrived; its
    /// [`PipeView::unreported`] is unknown (see [`PipeState::view_at`]).
    pub fn view(&self) -> Option<PipeView> {
        self.newest.map(|f| PipeView {
            throughput: f.throughput_bps as f64 / 8.0,
            rtt: f.rtt_us as f64 / 1e6,
            min_rtt: self.min_rtt.map_or(0.0, |m| m.min_rtt_us as f64 / 1e6),
            buffered: f.buffered,
            unreported: None,
        })
    }

    /// [`PipeState::view`] with [`PipeView::unreported`] filled in from the sender-side
    /// path's TCP now: its acknowledged bytes, and the bytes its receiver (the helper) has
    /// SACKed. The SACKed bytes sit out of order in the helper's kernel: they are not in B_p
    /// (the helper cannot read them yet), not in the acknowledged count, and not in B_s where
    /// B_s leaves SACKed bytes out (the daemons' `TcpInfo::to_deliver`, right for a direct
    /// path, whose receiver has them), yet they still have to cross the pipe ahead of
    /// anything new. Without them PAD read a helper in loss recovery on its HS-Path up to a
    /// window short, and PAMS gave it a window too much (docs/evaluation.md, "What we
    /// changed", item 44). `hs_acked` must be the cumulative count (`tcpi_bytes_acked`), as
    /// given to [`PipeState::on_feedback`]: a count with the SACKed bytes in it would leave
    /// out those SACKed when the report was written, which were not in its B_p either.
    pub fn view_at(&self, hs_acked: u64, hs_sacked: u64) -> Option<PipeView> {
        self.view().map(|mut v| {
            v.unreported = self.unreported(hs_acked).map(|u| u + hs_sacked);
            v
        })
    }

    /// Bytes the sender-side path (the HS-Path, at the proxy) delivered to the helper since
    /// the newest report, given its TCP's acknowledged bytes now: none of them is in that
    /// report's B_p. The helper's report and the TCP ACKs of what it received ride the same
    /// uplink, so an ACK that arrived before the report was for bytes the helper had when it
    /// wrote the report, and one that arrived after, for bytes it had not. `None` without a
    /// reading at the report; 0 after the path's connection was replaced (its count starts
    /// again), until the next report.
    pub fn unreported(&self, hs_acked: u64) -> Option<u64> {
        self.acked_at_report.map(|a| hs_acked.saturating_sub(a))
    }

    /// How old the newest feedback is.
    pub fn age(&self, now: Time) -> Option<Duration> {
        self.received_at.map(|t| now.saturating_since(t))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packet_fill_is_bytes_per_delivered_packet_over_the_mss() {
        let ms = Time::from_millis;
        let mut f = PacketFill::new();
        assert_eq!(f.observe(ms(0), 0.05, 1, 1, 1448), 1.0);
        // Full packets: 10 × 1448 bytes.
        assert_eq!(f.observe(ms(10), 0.05, 1 + 14_480, 11, 1448), 1.0);
        // 2 KiB records sent one by one: 1448 + 600 bytes per two packets.
        let fill = f.observe(ms(20), 0.05, 1 + 14_480 + 10 * 2048, 31, 1448);
        assert!((fill - 2048.0 / 2896.0).abs() < 1e-9, "{fill}");
        // Fewer than MIN_PACKETS since: the last fill stands, the window keeps growing.
        let b = 1 + 14_480 + 10 * 2048;
        assert_eq!(f.observe(ms(30), 0.05, b + 1448 * 4, 35, 1448), fill);
        assert_eq!(f.observe(ms(40), 0.05, b + 1448 * 8, 39, 1448), 1.0);
    }

    #[test]
    fn sparse_small_packets_do_not_set_the_fill() {
        let ms = Time::from_millis;
        let mut f = PacketFill::new();
        f.observe(ms(0), 0.005, 0, 0, 1448);
        // Feedback frames of 60 bytes every 20 ms on a 5 ms pipe: never 8 packets within
        // the 50 ms window, so the fill stays 1 for the data that follows.
        for i in 1..=20u64 {
            assert_eq!(f.observe(ms(20 * i), 0.005, 60 * i, i as u32, 1448), 1.0);
        }
        // A burst of small records inside one window is measured.
        assert!(f.observe(ms(410), 0.005, 1200 + 8 * 700, 28, 1448) < 0.5);
        // Dense traffic read late (a tick skipped under load) still counts: 40 packets of
        // 724 bytes in 120 ms.
        assert_eq!(f.observe(ms(530), 0.005, 6800 + 40 * 724, 68, 1448), 0.5);
    }

    #[test]
    fn packet_fill_survives_nonsense_counters() {
        let ms = Time::from_millis;
        let mut f = PacketFill::new();
        f.observe(ms(0), 0.05, 1_000_000, 100, 1448);
        // Counters going backwards or an MSS of 0 restart the window, never panic.
        assert_eq!(f.observe(ms(1), 0.05, 10, 5, 1448), 1.0);
        assert_eq!(f.observe(ms(2), f64::NAN, 20, 50, 0), 1.0);
        // More bytes than packets × MSS (a changed MSS) caps at 1; ACK-only progress floors
        // at MIN_FILL.
        assert_eq!(f.observe(ms(3), -1.0, 20 + 100_000, 60, 1448), 1.0);
        assert_eq!(
            f.observe(ms(4), f64::INFINITY, 20 + 100_000, 70, 1448),
            PacketFill::MIN_FILL
        );
        // u32 wrap of tcpi_delivered.
        let mut w = PacketFill::new();
        w.observe(ms(0), 0.05, 0, u32::MAX - 3, 1000);
        assert_eq!(w.observe(ms(5), 0.05, 5_000, 6, 1000), 0.5);
    }
    use mpbond_proto::SubflowId;

    fn sample(ms: u64, srtt: f64, cwnd: u64) -> TcpSample {
        TcpSample {
            now: Time::from_millis(ms),
            srtt,
            cwnd,
            in_flight: 0,
            delivery_rate: None,
            app_limited: false,
            slow_start: false,
            retransmits: 0,
            drain_rate: None,
        }
    }

    /// The shortfall measures how far a busy path's ACKs fell below its estimate, lately:
    /// near 0 while they keep up, rising while the estimate trails a slower drain (the
    /// kernel's samples still read the old rate), decaying over [`SHORTFALL_TAU`] once the
    /// drain keeps up again, untouched by readings without a standing queue, capped at
    /// [`MAX_SHORTFALL`].
    #[test]
    fn the_shortfall_follows_how_far_the_drain_falls_below_the_estimate() {
        let busy = |ms: u64, drain: Option<f64>| TcpSample {
            delivery_rate: Some(1e6),
            in_flight: 300_000,
            drain_rate: drain,
            ..sample(ms, 0.3, 300_000)
        };
        let mut e = PathEstimator::new(Duration::from_millis(100));
        assert_eq!(e.rate_shortfall(), 0.0);
        // Two seconds of ACKs at the estimate, then above it: no shortfall.
        for ms in (0..2000).step_by(5) {
            e.on_sample(busy(ms, Some(if ms < 1000 { 1e6 } else { 1.2e6 })));
        }
        assert!(e.rate_shortfall() < 1e-9, "{}", e.rate_shortfall());
        // Two seconds of ACKs at half the estimate while the kernel's samples still read
        // 1 MB/s: ln 2 over two time constants, sqrt(1 - e^-2) of the way there.
        for ms in (2000..4000).step_by(5) {
            e.on_sample(busy(ms, Some(5e5)));
        }
        assert!((e.throughput() - 1e6).abs() < 1.0, "{}", e.throughput());
        let short = e.rate_shortfall();
        let expect = std::f64::consts::LN_2 * (1.0 - (-2.0f64).exp()).sqrt();
        assert!((short - expect).abs() < 0.02, "{short} against {expect}");
        // Readings without a standing queue say nothing and leave it.
        for ms in (4000..6000).step_by(5) {
            e.on_sample(busy(ms, None));
        }
        assert_eq!(e.rate_shortfall(), short);
        // The drain keeps up again: the squares decay over the time constant.
        for ms in (6000..7500).step_by(5) {
            e.on_sample(busy(ms, Some(1e6)));
        }
        let left = short * (-0.75f64).exp();
        assert!(
            (e.rate_shortfall() - left).abs() < 0.02,
            "{} against {left}",
            e.rate_shortfall()
        );
        // A collapse to a tenth reads at most MAX_SHORTFALL.
        for ms in (7500..12_000).step_by(5) {
            e.on_sample(busy(ms, Some(1e5)));
        }
        assert_eq!(e.rate_shortfall(), MAX_SHORTFALL);
    }

    #[test]
    fn cwnd_over_rtt_and_time_constant() {
        let mut e = PathEstimator::new(Duration::from_millis(100));
        e.on_sample(sample(0, 0.1, 100_000));
        assert_eq!(e.throughput(), 1_000_000.0);
        // One time constant later, the average has moved 1 - 1/e of the way to 2 MB/s.
        e.on_sample(sample(100, 0.1, 200_000));
        let expect = 1e6 + (1.0 - (-1.0f64).exp()) * 1e6;
        assert!((e.throughput() - expect).abs() < 1e-6);
        assert_eq!(e.srtt(), 0.1);
    }

    /// The time constant holds in time whatever the reading rate: readings without a fresh
    /// rate (a slow path acknowledges less often than the daemons read it) do not shrink
    /// the next sample's weight, and after a gap one sample counts for one minimum RTT.
    #[test]
    fn the_time_constant_counts_from_the_last_sample() {
        let busy = |ms: u64, rate: Option<f64>| TcpSample {
            delivery_rate: rate,
            ..sample(ms, 0.05, 50_000)
        };
        // Measured at 300 KB/s, then busy samples of 120 KB/s every 20 ms, read every 5 ms.
        let mut e = PathEstimator::new(Duration::from_millis(100));
        e.on_sample(busy(0, Some(300_000.0)));
        for ms in (5..=200).step_by(5) {
            e.on_sample(busy(ms, (ms % 20 == 0).then_some(120_000.0)));
        }
        // 200 ms are two time constants: within e^-2 of the way (24 KB/s above 120 KB/s).
        let expect = 120_000.0 + 180_000.0 * (-2.0f64).exp();
        assert!((e.throughput() - expect).abs() < 1.0, "{}", e.throughput());
        // A second of readings without samples, then one sample: it counts for 50 ms (the
        // minimum RTT), not for the whole second.
        for ms in (205..1200).step_by(5) {
            e.on_sample(busy(ms, None));
        }
        let before = e.throughput();
        e.on_sample(busy(1200, Some(600_000.0)));
        let w = 1.0 - (-0.5f64).exp();
        assert!((e.throughput() - (before + w * (600_000.0 - before))).abs() < 1.0);
    }

    #[test]
    fn delivery_rate_preferred_and_app_limited_samples_only_raise() {
        let mut e = PathEstimator::new(Duration::from_millis(100));
        let mut s = sample(0, 0.1, 10_000);
        s.delivery_rate = Some(500_000.0);
        e.on_sample(s);
        assert_eq!(
            e.throughput(),
            500_000.0,
            "delivery rate, not cwnd/rtt = 100 000"
        );
        s.app_limited = true;
        s.delivery_rate = Some(100.0);
        s.now = Time::from_millis(100);
        e.on_sample(s);
        assert_eq!(e.throughput(), 500_000.0, "an idle path is not a slow path");
        s.delivery_rate = Some(900_000.0);
        s.now = Time::from_millis(200);
        e.on_sample(s);
        assert!(e.throughput() > 500_000.0);
    }

    /// The kernel keeps an application-limited rate sample only if it is no lower than the
    /// one it holds, so a path that slowed while its sender kept little unsent reports its
    /// old rate on every reading (11d's Verizon HS-Path: 2.005 MB/s for 1.2 s while its ACKs
    /// came at 0.94 MB/s behind a smoothed RTT of 0.4-0.9 s, the estimate creeping up to the stale
    /// value). Over a standing queue the drain rate replaces such a sample when lower; it
    /// never raises one, and a sample that is not application-limited stays as it is.
    #[test]
    fn a_stale_application_limited_sample_gives_way_to_the_drain_rate() {
        let stale = |ms: u64, drain: Option<f64>| TcpSample {
            app_limited: true,
            drain_rate: drain,
            srtt: 0.6,
            ..rate(ms, 2_000_000.0, 0)
        };
        let mut e = PathEstimator::new(Duration::from_millis(100));
        e.on_sample(rate(0, 2_000_000.0, 0));
        let mut held = e.clone();
        for ms in (5..1000).step_by(5) {
            e.on_sample(stale(ms, Some(950_000.0)));
            held.on_sample(stale(ms, None));
        }
        assert!(
            (e.throughput() - 950_000.0).abs() < 10_000.0,
            "{}",
            e.throughput()
        );
        assert!(
            held.throughput() >= 2_000_000.0 - 1.0,
            "{}",
            held.throughput()
        );
        // A drain rate above the sample does not raise it, and a busy sample is kept.
        let mut e = PathEstimator::new(Duration::from_millis(100));
        e.on_sample(rate(0, 1_000_000.0, 0));
        for ms in (5..1000).step_by(5) {
            e.on_sample(TcpSample {
                app_limited: true,
                drain_rate: Some(3_000_000.0),
                ..rate(ms, 1_000_000.0, 0)
            });
        }
        assert!(
            (e.throughput() - 1_000_000.0).abs() < 1.0,
            "{}",
            e.throughput()
        );
        for ms in (1000..2000).step_by(5) {
            e.on_sample(TcpSample {
                drain_rate: Some(500_000.0),
                ..rate(ms, 1_000_000.0, 0)
            });
        }
        assert!(
            (e.throughput() - 1_000_000.0).abs() < 1.0,
            "{}",
            e.throughput()
        );
    }

    #[test]
    fn cwnd_over_rtt_is_not_mixed_into_delivery_rates() {
        // A pipe: 4 ms RTT, 625 KB/s. Its first readings after a burst have no delivery rate
        // while the window is 11 segments: CWND/RTT would say 4 MB/s.
        let mut e = PathEstimator::new(Duration::from_millis(100));
        e.on_sample(TcpSample {
            srtt: 0.004,
            cwnd: 16_000,
            ..rate(0, 625_000.0, 0)
        });
        e.on_sample(sample(80, 0.004, 16_000));
        assert_eq!(e.throughput(), 625_000.0);
        assert_eq!(e.srtt(), 0.004);
        // Before any delivery rate, CWND/RTT is the provisional estimate.
        let mut e = PathEstimator::new(Duration::from_millis(100));
        e.on_sample(sample(0, 0.05, 14_480));
        assert!((e.throughput() - 289_600.0).abs() < 1e-6);
    }

    #[test]
    fn a_path_seen_only_idle_is_rated_by_its_window() {
        // A session's PS-Path has carried only pings: the kernel's rate sample (app-limited)
        // reads 28 KB/s, the initial window over 55 ms reads 263 KB/s.
        let mut e = PathEstimator::new(Duration::from_millis(100));
        let mut s = sample(0, 0.055, 14_480);
        s.delivery_rate = Some(28_000.0);
        s.app_limited = true;
        e.on_sample(s);
        let window = 14_480.0 / 0.055;
        assert!((e.throughput() - window).abs() < 1e-6, "{}", e.throughput());
        // The first busy sample is averaged in from there; from then on the window is not.
        s.now = Time::from_millis(100);
        s.app_limited = false;
        s.delivery_rate = Some(100_000.0);
        e.on_sample(s);
        let after = e.throughput();
        assert!(after < window && after > 100_000.0, "{after}");
        s.now = Time::from_millis(200);
        s.app_limited = true;
        s.delivery_rate = Some(30_000.0);
        s.cwnd = 1_000_000;
        e.on_sample(s);
        assert_eq!(
            e.throughput(),
            after,
            "idle, and no window guess once measured"
        );
    }

    /// Experiment 08's PS 1/HS 18 cell (item 36): a 1 Mbit/s path in slow start, fed a
    /// segment at a time, reads 64-122 KB/s with its window full and its RTT climbing, every
    /// sample flagged application-limited. Once the RTT shows a standing queue, the sample is
    /// the bottleneck's and replaces the initial window's guess; with room left in the
    /// window, or before the queue shows, the flag holds as before.
    #[test]
    fn a_full_window_over_a_standing_queue_measures_the_bottleneck() {
        let at = |ms: u64, srtt: f64, cwnd: u64, in_flight: u64, r: f64| TcpSample {
            srtt,
            cwnd,
            in_flight,
            delivery_rate: Some(r),
            app_limited: true,
            slow_start: true,
            ..sample(ms, srtt, cwnd)
        };
        let run = |in_flight_share: f64| {
            let out = |w: u64| (w as f64 * in_flight_share) as u64;
            let mut e = PathEstimator::new(Duration::from_millis(100));
            // After the pings: the initial window over 50 ms.
            e.on_sample(at(0, 0.05, 14_480, 0, 28_000.0));
            assert!((e.throughput() - 289_600.0).abs() < 1.0);
            // The RTT is up a fifth: no standing queue yet, the guess stands.
            e.on_sample(at(40, 0.06, 20_000, out(20_000), 64_000.0));
            let guess = e.throughput();
            assert!(guess >= 289_600.0, "{guess}");
            // Half again the minimum RTT.
            e.on_sample(at(80, 0.077, 22_680, out(22_680), 90_000.0));
            (guess, e.throughput())
        };
        let (_, full) = run(1.0);
        assert_eq!(full, 90_000.0, "replaces the guess");
        let (guess, half) = run(0.5);
        assert_eq!(
            half, guess,
            "room in the window: application-limited as before"
        );

        // Later samples from the full window are averaged in, whichever way they move (a
        // sample flagged application-limited is not taken at once in slow start).
        let mut e = PathEstimator::new(Duration::from_millis(100));
        e.on_sample(at(0, 0.05, 14_480, 0, 28_000.0));
        e.on_sample(at(80, 0.077, 22_680, 22_680, 90_000.0));
        e.on_sample(at(100, 0.09, 26_000, 26_000, 122_000.0));
        let up = e.throughput();
        assert!(up > 90_000.0 && up < 122_000.0, "{up}");
        e.on_sample(at(120, 0.1, 27_000, 27_000, 60_000.0));
        let t = e.throughput();
        assert!(t < up && t > 60_000.0, "{t}");
    }

    fn rate(ms: u64, bytes_per_s: f64, retransmits: u64) -> TcpSample {
        TcpSample {
            delivery_rate: Some(bytes_per_s),
            retransmits,
            ..sample(ms, 0.1, 0)
        }
    }

    #[test]
    fn the_slow_start_after_an_idle_period_cannot_lower_what_was_measured() {
        let busy = |ms: u64, r: f64, slow_start: bool| TcpSample {
            slow_start,
            ..rate(ms, r, 0)
        };
        let mut e = PathEstimator::new(Duration::from_millis(100));
        for ms in (0..1000).step_by(10) {
            e.on_sample(busy(ms, 1e6, false));
        }
        // One second without acknowledgements, then the window restarts: the samples climb
        // from a tenth of the rate, still in slow start.
        for (i, r) in [1e5, 2e5, 4e5, 8e5].into_iter().enumerate() {
            e.on_sample(busy(2000 + 50 * i as u64, r, true));
            assert!(e.throughput() > 0.99e6, "{r}: {}", e.throughput());
        }
        // Out of slow start, a lower rate is the path's and is followed.
        for ms in (2200..2700).step_by(10) {
            e.on_sample(busy(ms, 5e5, false));
        }
        assert!(e.throughput() < 6e5, "{}", e.throughput());
        // The initial slow start of a fresh connection is averaged in as it comes: nothing
        // was measured before it.
        let mut e = PathEstimator::new(Duration::from_millis(100));
        e.on_sample(sample(0, 0.05, 14_480));
        for ms in (10..300).step_by(10) {
            e.on_sample(busy(ms, 1e5, true));
        }
        assert!(e.throughput() < 1.2e5, "{}", e.throughput());
    }

    #[test]
    fn a_rising_rate_in_slow_start_counts_at_once() {
        let at = |ms: u64, r: f64, slow_start: bool, app_limited: bool| TcpSample {
            slow_start,
            app_limited,
            ..rate(ms, r, 0)
        };
        let mut e = PathEstimator::new(Duration::from_millis(100));
        e.on_sample(at(0, 1e5, true, false));
        // The window doubles every 50 ms: the estimate keeps up instead of trailing.
        for (i, r) in [2e5, 4e5, 8e5].into_iter().enumerate() {
            e.on_sample(at(50 * (i as u64 + 1), r, true, false));
            assert_eq!(e.throughput(), r);
        }
        // A lower sample in slow start, an application-limited one, and any sample after
        // slow start are averaged as before.
        e.on_sample(at(160, 4e5, true, false));
        let after_lower = e.throughput();
        assert!(after_lower < 8e5 && after_lower > 6e5, "{after_lower}");
        e.on_sample(at(170, 2e6, true, true));
        assert!(e.throughput() < 1e6, "{}", e.throughput());
        let mut e2 = PathEstimator::new(Duration::from_millis(100));
        e2.on_sample(at(0, 1e5, false, false));
        e2.on_sample(at(10, 8e5, false, false));
        assert!(e2.throughput() < 2e5, "{}", e2.throughput());
    }

    #[test]
    fn the_dip_after_a_loss_is_held_and_a_drop_without_loss_is_not() {
        // 1 MB/s for a second (10 ms samples, RTT 100 ms); a loss at 1 s, then the dip of
        // CUBIC's pause: 0.6 MB/s for 200 ms (two RTTs), then 1 MB/s again.
        let mut held = PathEstimator::new(Duration::from_millis(100)).with_loss_hold(3.0);
        let mut plain = PathEstimator::new(Duration::from_millis(100));
        let mut feed = |ms: u64, r: f64, retx: u64| {
            held.on_sample(rate(ms, r, retx));
            plain.on_sample(rate(ms, r, retx));
            (held.throughput(), plain.throughput())
        };
        for ms in (0..1000).step_by(10) {
            feed(ms, 1e6, 0);
        }
        let mut lowest = (f64::INFINITY, f64::INFINITY);
        for ms in (1000..1200).step_by(10) {
            let (h, p) = feed(ms, 6e5, 1);
            lowest = (lowest.0.min(h), lowest.1.min(p));
        }
        assert!(
            lowest.1 < 7.5e5,
            "the plain average follows the dip: {lowest:?}"
        );
        assert!(
            lowest.0 > 0.99e6,
            "the hold keeps the path's rate: {lowest:?}"
        );
        // The hold ends after 3 RTTs: a rate that stays low shows then.
        for ms in (1200..1600).step_by(10) {
            feed(ms, 3e5, 1);
        }
        let (h, p) = feed(1600, 3e5, 1);
        assert!(h == p && h < 4e5, "after the hold: {h} (average {p})");
        // A drop in capacity without a loss is followed at once.
        let mut e = PathEstimator::new(Duration::from_millis(100)).with_loss_hold(3.0);
        for ms in (0..1000).step_by(10) {
            e.on_sample(rate(ms, 1e6, 5));
        }
        for ms in (1000..1300).step_by(10) {
            e.on_sample(rate(ms, 3e5, 5));
        }
        assert!(e.throughput() < 4e5, "{}", e.throughput());
    }

    #[test]
    fn after_a_loss_a_sample_counts_at_least_what_the_queue_drains_at() {
        // 1 MB/s (10 ms samples, RTT 100 ms); a loss at 1 s, then CUBIC's pause: the
        // kernel's samples read 0.6 MB/s for 200 ms while the ACKs say the standing queue
        // still drains at 1 MB/s.
        let at = |ms: u64, r: f64, retx: u64, drain: f64| TcpSample {
            drain_rate: Some(drain),
            ..rate(ms, r, retx)
        };
        let mut floored = PathEstimator::new(Duration::from_millis(100)).with_drain_floor(3.0);
        let mut plain = PathEstimator::new(Duration::from_millis(100));
        let mut feed = |s: TcpSample| {
            floored.on_sample(s);
            plain.on_sample(s);
            (floored.throughput(), plain.throughput())
        };
        for ms in (0..1000).step_by(10) {
            feed(at(ms, 1e6, 0, 1e6));
        }
        // Before any loss a low sample counts as it is, whatever the drain rate says.
        let (f, p) = feed(at(1000, 6e5, 0, 1e6));
        assert_eq!(f, p);
        assert!(f < 0.97e6, "{f}");
        for ms in (1010..1200).step_by(10) {
            feed(at(ms, 1e6, 0, 1e6));
        }
        let mut lowest = (f64::INFINITY, f64::INFINITY);
        for ms in (1200..1400).step_by(10) {
            let (f, p) = feed(at(ms, 6e5, 1, 1e6));
            lowest = (lowest.0.min(f), lowest.1.min(p));
        }
        assert!(lowest.1 < 7.5e5, "the plain average dips: {lowest:?}");
        assert!(
            lowest.0 > 0.98e6,
            "the floor keeps the path's rate: {lowest:?}"
        );
        // A second loss caused by a drop in capacity: the ACKs slow with the link, and the
        // floor with them.
        for ms in (1400..1700).step_by(10) {
            feed(at(ms, 3e5, 2, 3e5));
        }
        let (f, p) = feed(at(1700, 3e5, 2, 3e5));
        assert!(f < 3.5e5 && p < 3.5e5, "{f} {p}");
        // Three RTTs after the last loss the floor is gone: a sample under the drain rate
        // counts as it is, and so does any sample without a drain rate (no standing
        // queue), loss or not. Each moves both averages the same share of the way to it.
        for ms in (1710..2190).step_by(10) {
            feed(at(ms, 3e5, 2, 3e5));
        }
        let mut before = feed(at(2190, 3e5, 2, 3e5));
        let share = |from: f64, to: f64| (from - to) / (from - 1e5);
        for s in [
            at(2200, 1e5, 2, 3e5),
            TcpSample {
                drain_rate: None,
                ..rate(2210, 1e5, 3)
            },
            TcpSample {
                drain_rate: None,
                ..rate(2220, 1e5, 3)
            },
        ] {
            let (f, p) = feed(s);
            assert!(f < before.0, "{f} {before:?}");
            assert!((share(before.0, f) - share(before.1, p)).abs() < 1e-9);
            before = (f, p);
        }
    }

    #[test]
    fn bad_rtt_ignored() {
        let mut e = PathEstimator::new(Duration::from_millis(100));
        e.on_sample(sample(0, 0.0, 1));
        e.on_sample(sample(0, f64::NAN, 1));
        assert_eq!(e.throughput(), 0.0);
    }

    #[test]
    fn stale_feedback_discarded() {
        let fb = |ts, buf| PipeFeedback {
            subflow: SubflowId(1),
            throughput_bps: 8_000_000,
            rtt_us: 4_000,
            buffered: buf,
            timestamp_us: ts,
            uplink: false,
        };
        let mut p = PipeState::default();
        assert!(p.on_feedback(Time::ZERO, fb(10, 100), None));
        assert!(!p.on_feedback(Time::ZERO, fb(5, 999), None));
        let v = p.view().unwrap();
        assert_eq!((v.buffered, v.throughput, v.rtt), (100, 1_000_000.0, 0.004));
        // No minimum yet: the view says 0, and the propagation RTT is the reported one.
        assert_eq!((v.min_rtt, v.propagation_rtt()), (0.0, 0.004));
        let min = |ts, us| PipeMinRtt {
            subflow: SubflowId(1),
            min_rtt_us: us,
            timestamp_us: ts,
            uplink: false,
        };
        assert!(p.on_min_rtt(min(8, 1_500)));
        assert!(!p.on_min_rtt(min(7, 900)), "older than the newest");
        let v = p.view().unwrap();
        assert_eq!((v.min_rtt, v.propagation_rtt()), (0.0015, 0.0015));
        // A newer report replaces it, and later feedback keeps it.
        assert!(p.on_min_rtt(min(12, 2_000)));
        assert!(p.on_feedback(Time::ZERO, fb(20, 0), None));
        assert_eq!(p.view().unwrap().min_rtt, 0.002);
    }

    #[test]
    fn unreported_is_what_the_hs_path_delivered_since_the_report() {
        let fb = |ts| PipeFeedback {
            subflow: SubflowId(1),
            throughput_bps: 8_000_000,
            rtt_us: 4_000,
            buffered: 50_000,
            timestamp_us: ts,
            uplink: false,
        };
        let mut p = PipeState::default();
        // No reading at the report: unknown, and the view says so.
        p.on_feedback(Time::ZERO, fb(10), None);
        assert_eq!(p.unreported(70_000), None);
        assert_eq!(p.view_at(70_000, 0).unwrap().unreported, None);
        // The HS-Path had 40 000 bytes acknowledged when the report came, 70 000 now.
        p.on_feedback(Time::ZERO, fb(20), Some(40_000));
        assert_eq!(p.unreported(70_000), Some(30_000));
        let v = p.view_at(70_000, 0).unwrap();
        assert_eq!((v.buffered, v.unreported), (50_000, Some(30_000)));
        // In a loss recovery the helper holds 20 000 bytes out of order: SACKed, neither
        // acknowledged nor in its report, still to cross the pipe.
        assert_eq!(p.view_at(70_000, 20_000).unwrap().unreported, Some(50_000));
        assert_eq!(p.view().unwrap().unreported, None);
        // A stale report does not move the mark; a new connection's count starts again
        // below it, which reads 0 until the next report.
        assert!(!p.on_feedback(Time::ZERO, fb(15), Some(0)));
        assert_eq!(p.unreported(70_000), Some(30_000));
        assert_eq!(p.unreported(1_000), Some(0));
    }
}
