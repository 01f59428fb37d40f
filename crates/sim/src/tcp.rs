//! A TCP-like connection over one emulated link, carrying a byte stream of frames.
//!
//! Model (docs/sim.md has the full list of what it leaves out):
//! - **Stream.** The owner writes frames; each occupies a range of stream offsets. Packets carry
//!   up to one MSS of offsets. The receiver reassembles offsets and hands frames to its owner
//!   in order once their last byte arrived, as a real TCP socket plus a frame decoder would.
//! - **Congestion control.** CUBIC (RFC 8312: C = 0.4, β = 0.7, fast convergence, the
//!   Reno-friendly region) after a slow start from an initial window of 10 segments, as the
//!   proxy's decoupled CUBIC in MPBond §6.1.
//! - **Loss recovery.** Every packet is acknowledged individually (like SACK). Links are FIFO,
//!   so when a packet is acknowledged every earlier-sent packet still unacknowledged is lost
//!   (RACK with a zero reordering window); it is resent first, and the window is reduced once
//!   per recovery episode. A tail loss probe (RFC 8985 §7, on by default as in Linux):
//!   when data is in flight, nothing is known lost and two smoothed RTTs pass without an
//!   ACK, the last segment is sent again, once per tail, so a lost tail is found by the
//!   probe's ACK rather than by the timeout. A retransmission timeout (RFC 6298, 200 ms
//!   floor, exponential backoff) resends everything in flight and restarts from one segment;
//!   only the first timeout of an episode, outside fast recovery, lowers the slow-start
//!   threshold (Linux's `tcp_enter_loss`).
//! - **Delivery rate.** Each ACK yields a delivery-rate sample as Linux computes
//!   tcpi_delivery_rate (draft-cheng-iccrg-delivery-rate-estimation): bytes delivered between a
//!   packet's send and its ACK over the longer of the send and ACK intervals, flagged
//!   application-limited when the sender had run out of data.
//! - **Flow control.** The owner may cap the bytes in flight by a receive window.
//! - **Sender queue.** Bytes written but never sent are "not sent" bytes; the owner writes
//!   only while they are below a low-water mark, as the daemons do with TCP_NOTSENT_LOWAT.
//! - **Pacing** (optional, [`TcpConfig::pacing`]). As Linux paces a socket the daemons turn
//!   pacing on for (`tuning.pacing`): packets leave no closer than their length over the
//!   pacing rate, twice the window per smoothed RTT while the window is below half the
//!   slow-start threshold and 1.2 times it after (`tcp_pacing_ss_ratio`,
//!   `tcp_pacing_ca_ratio`), never above a cap the owner sets (SO_MAX_PACING_RATE, which
//!   the queue guard uses). Before the first RTT sample nothing is paced but by the cap.
//! - **HyStart** (optional, [`TcpConfig::hystart`]): slow start also ends, before any loss,
//!   on a rise of the round's RTT or a long ACK train, as Linux's CUBIC does by default
//!   ([`crate::hystart`]). Off, slow start ends only on the first loss.

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use mpbond_core::ranges::RangeSet;
use mpbond_core::Time;

use crate::hystart::{Ack, Exit, HyStart};
use crate::link::{Link, LinkConfig, Offer, Packet};
use crate::rng::Rng;

/// Settings of a connection.
#[derive(Clone, Debug, PartialEq)]
pub struct TcpConfig {
    /// Payload bytes per packet.
    pub mss: u64,
    /// Initial congestion window, packets (Linux: 10).
    pub initial_window: u64,
    /// Lower bound of the retransmission timeout.
    pub min_rto: Duration,
    /// Send a tail loss probe (RFC 8985 §7; Linux's tcp_early_retrans default).
    pub tail_loss_probe: bool,
    /// Pace packets as Linux does on a socket with pacing on (the daemons'
    /// `tuning.pacing`); off, a window's packets leave back to back.
    pub pacing: bool,
    /// End slow start by HyStart as Linux's CUBIC does (`hystart=1`, its default); off,
    /// slow start ends only on the first loss, as in every figure of docs/sim.md not
    /// marked otherwise.
    pub hystart: bool,
}

impl Default for TcpConfig {
    fn default() -> Self {
        TcpConfig {
            mss: 1448,
            initial_window: 10,
            min_rto: Duration::from_millis(200),
            tail_loss_probe: true,
            pacing: false,
            hystart: false,
        }
    }
}

const CUBIC_C: f64 = 0.4;
const CUBIC_BETA: f64 = 0.7;
/// Linux's pacing rate over the window's rate in slow start (`tcp_pacing_ss_ratio`, 200%)
/// and in congestion avoidance (`tcp_pacing_ca_ratio`, 120%).
const PACING_SS_RATIO: f64 = 2.0;
const PACING_CA_RATIO: f64 = 1.2;

#[derive(Clone, Copy, Debug)]
struct Sent {
    start: u64,
    end: u64,
    at: Time,
    retransmission: bool,
    /// Delivery-rate state when it was sent.
    delivered: u64,
    delivered_time: Time,
    first_sent_time: Time,
    app_limited: bool,
}

/// A delivery-rate sample (what TCP_INFO reports as tcpi_delivery_rate and
/// tcpi_delivery_rate_app_limited).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RateSample {
    /// Bytes per second.
    pub rate: f64,
    /// The sender was application-limited, so the sample may understate the path.
    pub app_limited: bool,
}

impl RateSample {
    /// Whether Linux keeps this sample in place of `kept` as the connection's delivery rate
    /// (`tcp_rate_gen`): always unless it is application-limited, then only if it is no
    /// lower. So TCP_INFO's rate can stay at an old, higher sample for as long as the
    /// sender keeps too little unsent to fill the window.
    pub fn replaces(&self, kept: Option<RateSample>) -> bool {
        !self.app_limited || kept.is_none_or(|k| self.rate >= k.rate)
    }
}

/// Most packets a [`Tcp`] remembers as given up on by a timeout or a probe: 16 K packets,
/// over 20 MB of 1448-byte segments, more than any window here.
const MAX_GIVEN_UP: usize = 1 << 14;

/// The window and threshold before the first timeout of an episode, kept to undo it if it
/// proves spurious.
#[derive(Clone, Copy, Debug)]
struct Undo {
    cwnd: f64,
    ssthresh: f64,
    w_max: f64,
    w_last_max: f64,
    /// The first packet id sent after the timeout: an ACK for one of these first means the
    /// loss was real.
    after: u64,
}

/// Counters of a connection.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TcpStats {
    /// Packets sent, including retransmissions.
    pub packets_sent: u64,
    /// Packets retransmitted.
    pub retransmissions: u64,
    /// Retransmission timeouts.
    pub timeouts: u64,
    /// Tail loss probes sent.
    pub probes: u64,
    /// Timeouts undone as spurious (F-RTO): an ACK for data sent before the timeout came
    /// first.
    pub undos: u64,
    /// Slow starts HyStart ended on an ACK train (`TCPHystartTrainDetect`).
    pub hystart_train_exits: u64,
    /// Slow starts HyStart ended on a rise of the RTT (`TCPHystartDelayDetect`).
    pub hystart_delay_exits: u64,
    /// The first slow start HyStart ended: when, at what window (segments, rounded) and
    /// why, to hold against the lab's `tcp_probe.csv` (`scripts/slow-start-exits`).
    pub first_hystart_exit: Option<(Time, u64, Exit)>,
}

/// One TCP connection (sender, link and receiver) carrying frames of type `F`.
#[derive(Debug)]
pub struct Tcp<F> {
    cfg: TcpConfig,
    link: Link,
    ack_delay: Duration,
    // --- sender ---
    frames: VecDeque<(u64, F)>,
    written: u64,
    next_send: u64,
    lost: RangeSet,
    inflight: BTreeMap<u64, Sent>,
    inflight_bytes: u64,
    next_id: u64,
    cwnd: f64,
    ssthresh: f64,
    w_max: f64,
    w_last_max: f64,
    epoch: Option<(Time, f64, f64)>,
    recovery_until: Option<u64>,
    srtt: Option<f64>,
    rttvar: f64,
    min_rtt: f64,
    backoff: u32,
    rto_at: Option<Time>,
    /// When the tail loss probe fires, if armed.
    probe_at: Option<Time>,
    /// A probe went out for the current tail; armed again once new data is acknowledged.
    probed: bool,
    /// The cumulative acknowledgement (`snd_una`): every byte below it is acknowledged.
    snd_una: u64,
    /// Bytes acknowledged above [`Tcp::snd_una`] (what a kernel holds as SACKed).
    sacked: RangeSet,
    /// Packets a retransmission timeout or a tail loss probe took out of the flight (by id),
    /// whose ACKs may still come: the data they carried is then acknowledged, as a kernel's
    /// cumulative ACK or SACK acknowledges it, rather than sent again.
    given_up: BTreeMap<u64, Sent>,
    /// Set by the first timeout of an episode until an ACK shows whether it was spurious.
    undo: Option<Undo>,
    last_progress: Time,
    rwnd: Option<u64>,
    /// The pacing cap (SO_MAX_PACING_RATE), bytes per second.
    pacing_cap: Option<f64>,
    /// The earliest time pacing lets the next packet leave.
    next_pace: Time,
    /// Set when pacing held a packet back: when to try again.
    pace_at: Option<Time>,
    hystart: HyStart,
    stats: TcpStats,
    rate_delivered: u64,
    rate_delivered_time: Time,
    rate_first_sent: Time,
    app_limited_until: u64,
    rate: Option<RateSample>,
    // --- receiver ---
    received: RangeSet,
    delivered: u64,
}

impl<F> Tcp<F> {
    /// A connection over a link with `link` settings whose ACKs take `ack_delay` back.
    pub fn new(cfg: TcpConfig, link: LinkConfig, ack_delay: Duration) -> Self {
        let cwnd = (cfg.initial_window * cfg.mss) as f64;
        Tcp {
            link: Link::new(link),
            ack_delay,
            frames: VecDeque::new(),
            written: 0,
            next_send: 0,
            lost: RangeSet::new(),
            inflight: BTreeMap::new(),
            inflight_bytes: 0,
            next_id: 0,
            cwnd,
            ssthresh: f64::INFINITY,
            w_max: 0.0,
            w_last_max: 0.0,
            epoch: None,
            recovery_until: None,
            srtt: None,
            rttvar: 0.0,
            min_rtt: f64::INFINITY,
            backoff: 0,
            rto_at: None,
            probe_at: None,
            probed: false,
            snd_una: 0,
            sacked: RangeSet::new(),
            given_up: BTreeMap::new(),
            undo: None,
            last_progress: Time::ZERO,
            rwnd: None,
            pacing_cap: None,
            next_pace: Time::ZERO,
            pace_at: None,
            hystart: HyStart::default(),
            stats: TcpStats::default(),
            rate_delivered: 0,
            rate_delivered_time: Time::ZERO,
            rate_first_sent: Time::ZERO,
            app_limited_until: 0,
            rate: None,
            received: RangeSet::new(),
            delivered: 0,
            cfg,
        }
    }

    /// The same connection opened at `now` rather than at time zero (a rejoin's new
    /// connection): its stall and delivery-rate clocks start there.
    pub fn opened_at(mut self, now: Time) -> Self {
        self.link.open_at(now);
        self.last_progress = now;
        self.rate_delivered_time = now;
        self.rate_first_sent = now;
        self
    }

    /// The link.
    pub fn link(&self) -> &Link {
        &self.link
    }

    /// Counters.
    pub fn stats(&self) -> TcpStats {
        self.stats
    }

    /// Appends a frame occupying `len` stream bytes.
    pub fn write(&mut self, len: u64, frame: F) {
        self.written += len.max(1);
        self.frames.push_back((self.written, frame));
    }

    /// Bytes written and never sent (tcpi_notsent_bytes).
    pub fn notsent(&self) -> u64 {
        self.written - self.next_send
    }

    /// Bytes sent and not acknowledged, including ones waiting to be resent.
    pub fn unacked(&self) -> u64 {
        self.inflight_bytes + self.lost.len()
    }

    /// Bytes the sender holds: not sent plus unacknowledged (SIOCOUTQ).
    pub fn outq(&self) -> u64 {
        self.notsent() + self.unacked()
    }

    /// Bytes in flight on the network.
    pub fn inflight(&self) -> u64 {
        self.inflight_bytes
    }

    /// Congestion window in bytes.
    pub fn cwnd(&self) -> u64 {
        self.cwnd as u64
    }

    /// Smoothed RTT in seconds, if measured.
    pub fn srtt(&self) -> Option<f64> {
        self.srtt
    }

    /// Smallest RTT seen, seconds.
    pub fn min_rtt(&self) -> Option<f64> {
        self.min_rtt.is_finite().then_some(self.min_rtt)
    }

    /// Unique payload bytes acknowledged, in order or not. This is more than the kernel's
    /// `tcpi_bytes_acked`, which counts only the cumulative ACK: it is
    /// [`Tcp::cumulative_acked`] plus [`Tcp::sacked`].
    pub fn bytes_acked(&self) -> u64 {
        self.snd_una + self.sacked.len()
    }

    /// Bytes the cumulative ACK covers (`tcpi_bytes_acked`): the receiver has every byte
    /// below it, in order. A loss holds it until its retransmission arrives, however much
    /// arrived behind the hole.
    pub fn cumulative_acked(&self) -> u64 {
        self.snd_una
    }

    /// Bytes acknowledged out of order, above the cumulative ACK (`tcpi_sacked` × MSS): the
    /// receiver holds them but cannot pass them on until the hole below is filled. Like the
    /// kernel, the sender counts them out of what it still has to deliver.
    pub fn sacked(&self) -> u64 {
        self.sacked.len()
    }

    /// Fraction of packets retransmitted.
    pub fn loss_rate(&self) -> f64 {
        if self.stats.packets_sent == 0 {
            0.0
        } else {
            self.stats.retransmissions as f64 / self.stats.packets_sent as f64
        }
    }

    /// Recovering from a loss (fast recovery, or timeouts not yet undone by an ACK, or
    /// segments known lost and not yet resent), as the kernel's Recovery and Loss states.
    pub fn recovering(&self) -> bool {
        self.recovery_until.is_some() || self.backoff > 0 || !self.lost.is_empty()
    }

    /// True while the congestion window is below the slow-start threshold.
    pub fn in_slow_start(&self) -> bool {
        self.cwnd < self.ssthresh
    }

    /// The latest delivery-rate sample.
    pub fn delivery_rate(&self) -> Option<RateSample> {
        self.rate
    }

    /// Caps the bytes in flight (the receiver's window); `None` for no cap.
    pub fn set_rwnd(&mut self, rwnd: Option<u64>) {
        self.rwnd = rwnd;
    }

    /// Caps the pacing rate, bytes per second (SO_MAX_PACING_RATE; `None`: no cap). Only
    /// a connection with [`TcpConfig::pacing`] paces.
    pub fn set_pacing_cap(&mut self, cap: Option<u64>) {
        self.pacing_cap = cap.map(|c| c as f64);
    }

    /// The rate packets are paced at, bytes per second, if they are: Linux's
    /// `tcp_update_pacing_rate` (the window, or the bytes in flight if more, per smoothed
    /// RTT, times the phase's ratio) under the cap.
    pub fn pacing_rate(&self) -> Option<f64> {
        if !self.cfg.pacing {
            return None;
        }
        let window = self.srtt.filter(|s| *s > 0.0).map(|srtt| {
            let ratio = if self.cwnd < self.ssthresh / 2.0 {
                PACING_SS_RATIO
            } else {
                PACING_CA_RATIO
            };
            ratio * self.cwnd.max(self.inflight_bytes as f64) / srtt
        });
        match (window, self.pacing_cap) {
            (Some(w), Some(c)) => Some(w.min(c)),
            (w, c) => w.or(c),
        }
        .filter(|r| *r > 0.0)
    }

    /// When pacing lets the packet it held back leave, if it held one back: the owner
    /// calls [`Tcp::try_send`] again then.
    pub fn pace_deadline(&self) -> Option<Time> {
        self.pace_at
    }

    /// True when the congestion and receive windows have room for another packet.
    pub fn window_open(&self) -> bool {
        self.inflight_bytes + self.cfg.mss <= self.cwnd as u64
            && self.rwnd.is_none_or(|r| self.inflight_bytes < r)
    }

    /// How long the connection has had data outstanding without any acknowledgement.
    pub fn stalled_for(&self, now: Time) -> Duration {
        if self.unacked() == 0 && self.notsent() == 0 {
            Duration::ZERO
        } else {
            now.saturating_since(self.last_progress)
        }
    }

    /// When an ACK last acknowledged new data (or data went out after an idle spell).
    pub fn last_progress(&self) -> Time {
        self.last_progress
    }

    /// When the retransmission timer (or the tail loss probe before it) fires, if armed.
    pub fn rto_deadline(&self) -> Option<Time> {
        match (self.probe_at, self.rto_at) {
            (Some(p), Some(r)) => Some(p.min(r)),
            (p, r) => p.or(r),
        }
    }

    /// Arms the tail loss probe two smoothed RTTs (at least 10 ms) from `now` while data is
    /// in flight, none is known lost and no probe went out for this tail (RFC 8985 §7.2;
    /// this model has no delayed ACKs, so no allowance for one). Not past the RTO.
    fn arm_probe(&mut self, now: Time) {
        self.probe_at = None;
        if !self.cfg.tail_loss_probe
            || self.probed
            || self.inflight.is_empty()
            || !self.lost.is_empty()
            || self.recovery_until.is_some()
        {
            return;
        }
        let Some(srtt) = self.srtt else { return };
        let at = now + Duration::from_secs_f64((2.0 * srtt).max(0.010));
        if self.rto_at.is_none_or(|r| at < r) {
            self.probe_at = Some(at);
        }
    }

    fn rto(&self) -> Duration {
        let base = match self.srtt {
            Some(s) => s + 4.0 * self.rttvar,
            None => 1.0,
        };
        let d = Duration::from_secs_f64(base).max(self.cfg.min_rto);
        d.saturating_mul(1 << self.backoff.min(6))
    }

    /// Sends what the windows allow. Returns a departure time to schedule if the link was idle.
    pub fn try_send(&mut self, now: Time, rng: &mut Rng) -> Option<Time> {
        let mut departure = None;
        let mut sent_any = false;
        self.pace_at = None;
        while self.window_open() {
            let pacing = self.pacing_rate();
            if pacing.is_some() && now < self.next_pace && self.has_data() {
                self.pace_at = Some(self.next_pace);
                break;
            }
            let (start, end, retx) = if let Some((s, e)) = self.lost.pop_front(self.cfg.mss) {
                (s, e, true)
            } else if self.next_send < self.written {
                let mut e = (self.next_send + self.cfg.mss).min(self.written);
                if let Some(r) = self.rwnd {
                    let room = r.saturating_sub(self.inflight_bytes);
                    e = e.min(self.next_send + room.max(1));
                }
                let s = self.next_send;
                self.next_send = e;
                (s, e, false)
            } else {
                break;
            };
            let id = self.next_id;
            self.next_id += 1;
            if self.inflight.is_empty() {
                self.rate_first_sent = now;
                self.rate_delivered_time = now;
            }
            self.inflight.insert(
                id,
                Sent {
                    start,
                    end,
                    at: now,
                    retransmission: retx,
                    delivered: self.rate_delivered,
                    delivered_time: self.rate_delivered_time,
                    first_sent_time: self.rate_first_sent,
                    app_limited: self.app_limited_until > 0,
                },
            );
            self.inflight_bytes += end - start;
            self.stats.packets_sent += 1;
            sent_any = true;
            if let Some(rate) = pacing {
                let gap = Duration::from_secs_f64((end - start) as f64 / rate);
                self.next_pace = self.next_pace.max(now) + gap;
            }
            if retx {
                self.stats.retransmissions += 1;
            }
            if self.unacked() == end - start && self.lost.is_empty() {
                // First data in flight after an idle period: progress clock restarts.
                self.last_progress = now;
            }
            if let Offer::Queued(Some(t)) = self.link.offer(now, Packet { id, start, end }, rng) {
                departure = Some(t);
            }
            if self.rto_at.is_none() {
                self.rto_at = Some(now + self.rto());
            }
        }
        // Out of data with room in the window: samples until this data is delivered are
        // application-limited.
        if self.notsent() == 0 && self.lost.is_empty() && self.window_open() {
            self.app_limited_until = (self.rate_delivered + self.inflight_bytes).max(1);
        }
        if sent_any {
            self.arm_probe(now);
        }
        departure
    }

    /// Something to send: data to resend or never sent.
    fn has_data(&self) -> bool {
        !self.lost.is_empty() || self.next_send < self.written
    }

    /// The link's head packet departs at `now`. Returns it with its arrival time at the
    /// receiver, and the next departure to schedule.
    pub fn on_departure(&mut self, now: Time) -> Option<(Packet, Time, Option<Time>)> {
        self.link.depart(now)
    }

    /// A packet reaches the receiver. Returns the frames now complete, in order, and when the
    /// ACK for this packet reaches the sender.
    pub fn on_arrival(&mut self, now: Time, p: Packet) -> (Vec<F>, Time) {
        self.received.insert(p.start, p.end);
        if let Some((s, e)) = self.received.first() {
            if s <= self.delivered {
                self.delivered = self.delivered.max(e);
            }
        }
        let mut out = Vec::new();
        while self
            .frames
            .front()
            .is_some_and(|(end, _)| *end <= self.delivered)
        {
            if let Some((_, f)) = self.frames.pop_front() {
                out.push(f);
            }
        }
        (out, now + self.ack_delay)
    }

    /// The ACK of packet `id` reaches the sender.
    pub fn on_ack(&mut self, now: Time, id: u64) {
        let Some(sent) = self.inflight.remove(&id) else {
            if let Some(orig) = self.given_up.remove(&id) {
                self.late_ack(now, id, orig);
            }
            return;
        };
        if self.undo.is_some_and(|u| id >= u.after) {
            // Something sent after the timeout arrived before any ACK of what was sent
            // before it: the loss was real.
            self.undo = None;
        }
        let len = sent.end - sent.start;
        self.inflight_bytes -= len;
        self.acknowledge(sent.start, sent.end);
        self.rate_delivered += len;
        self.rate_delivered_time = now;
        if self.app_limited_until > 0 && self.rate_delivered > self.app_limited_until {
            self.app_limited_until = 0;
        }
        let send_elapsed = sent.at.saturating_since(sent.first_sent_time);
        let ack_elapsed = now.saturating_since(sent.delivered_time);
        let interval = send_elapsed.max(ack_elapsed).as_secs_f64();
        self.rate_first_sent = sent.at;
        // Like Linux, skip samples over intervals shorter than the minimum RTT, and keep an
        // application-limited sample only if it is no lower than the one kept
        // (`tcp_rate_gen`): what TCP_INFO reports as the delivery rate then stays at the last
        // sample that was not application-limited, or higher, however long the connection
        // runs application-limited at a lower rate.
        if interval > 0.0 && interval >= self.min_rtt.min(1.0) * 0.999 {
            let sample = RateSample {
                rate: (self.rate_delivered - sent.delivered) as f64 / interval,
                app_limited: sent.app_limited,
            };
            if sample.replaces(self.rate) {
                self.rate = Some(sample);
            }
        }
        self.last_progress = now;
        self.backoff = 0;
        self.probed = false;
        let rtt = (!sent.retransmission).then(|| (now - sent.at).as_secs_f64());
        if let Some(r) = rtt {
            self.rtt_sample(r);
        }
        if self.cfg.hystart && self.in_slow_start() {
            let ack = Ack {
                now,
                id,
                next_id: self.next_id,
                rtt,
            };
            let exit = self.hystart.on_ack(
                ack,
                self.min_rtt,
                self.cwnd / self.cfg.mss as f64,
                self.cfg.pacing,
            );
            if let Some(exit) = exit {
                self.ssthresh = self.cwnd;
                let window = (self.cwnd / self.cfg.mss as f64).round() as u64;
                self.stats
                    .first_hystart_exit
                    .get_or_insert((now, window, exit));
                match exit {
                    Exit::AckTrain => self.stats.hystart_train_exits += 1,
                    Exit::Delay => self.stats.hystart_delay_exits += 1,
                }
            }
        }
        // Every packet sent before this one and still unacknowledged was lost (FIFO link).
        let lost: Vec<u64> = self.inflight.range(..id).map(|(&k, _)| k).collect();
        let any_lost = !lost.is_empty();
        for k in lost {
            if let Some(s) = self.inflight.remove(&k) {
                self.inflight_bytes -= s.end - s.start;
                self.lost.insert(s.start, s.end);
            }
        }
        if any_lost && self.recovery_until.is_none() {
            self.on_congestion();
            self.recovery_until = Some(self.next_id);
        }
        if self.recovery_until.is_some_and(|r| id >= r) {
            self.recovery_until = None;
        }
        if self.recovery_until.is_none() {
            self.grow(now, len);
        }
        self.rearm(now);
    }

    /// The retransmission timer fired at `now` (the owner checks [`Tcp::rto_deadline`]).
    pub fn on_timeout(&mut self, now: Time) {
        if self.probe_at.is_some_and(|t| t <= now) && self.rto_at.is_none_or(|t| t > now) {
            self.probe();
            return;
        }
        if self.rto_at.is_none_or(|t| t > now) {
            return;
        }
        self.probe_at = None;
        if self.inflight.is_empty() && self.lost.is_empty() {
            self.rto_at = None;
            return;
        }
        self.stats.timeouts += 1;
        self.prune_given_up();
        for (id, s) in std::mem::take(&mut self.inflight) {
            self.lost.insert(s.start, s.end);
            self.give_up(id, s);
        }
        self.inflight_bytes = 0;
        // Only the first timeout of a loss episode lowers the threshold, from the window
        // the connection had, and not in fast recovery, which lowered it already (Linux's
        // `tcp_enter_loss`): a backed-off retransmission finds the window at one segment,
        // and lowering from that would leave a path back from an outage to crawl up from
        // two.
        if self.backoff == 0 && self.recovery_until.is_none() {
            self.undo = Some(Undo {
                cwnd: self.cwnd,
                ssthresh: self.ssthresh,
                w_max: self.w_max,
                w_last_max: self.w_last_max,
                after: self.next_id,
            });
            self.w_last_max = self.cwnd;
            self.w_max = self.cwnd;
            self.ssthresh = (self.cwnd * CUBIC_BETA).max(2.0 * self.cfg.mss as f64);
        }
        self.cwnd = self.cfg.mss as f64;
        self.epoch = None;
        self.recovery_until = None;
        self.hystart.rearm();
        self.backoff += 1;
        self.rto_at = Some(now + self.rto());
    }

    /// The tail loss probe: the last segment sent goes again, now, whatever the window (it
    /// leaves the flight and is queued first for resending), so its ACK shows whether the
    /// segments before it were lost. No change to the window: that waits for the loss the
    /// probe reveals.
    fn probe(&mut self) {
        self.probe_at = None;
        self.probed = true;
        let Some((&id, _)) = self.inflight.iter().next_back() else {
            return;
        };
        if let Some(last) = self.inflight.remove(&id) {
            self.inflight_bytes -= last.end - last.start;
            self.lost.insert(last.start, last.end);
            self.prune_given_up();
            self.give_up(id, last);
            self.stats.probes += 1;
        }
    }

    /// The ACK of packet `id` (`orig`), which a timeout or a probe had given up on, came
    /// after all: its ACK was late, not lost (an uplink outage, a deep queue). Its data is
    /// acknowledged and not sent again. If a timeout gave it up and nothing sent since has
    /// been acknowledged, the timeout was spurious and is undone as Linux's F-RTO undoes it
    /// (RFC 5682; `tcp_try_undo_loss`): the window and threshold return to what they were,
    /// and what the timeout gave up on after this packet, and has not been sent again, is
    /// in flight once more. What was given up before it was lost (the link is FIFO).
    fn late_ack(&mut self, now: Time, id: u64, orig: Sent) {
        self.lost.remove(orig.start, orig.end);
        self.acknowledge(orig.start, orig.end);
        self.last_progress = now;
        self.backoff = 0;
        if let Some(u) = self.undo.take() {
            self.stats.undos += 1;
            self.cwnd = self.cwnd.max(u.cwnd);
            self.ssthresh = self.ssthresh.max(u.ssthresh);
            self.w_max = u.w_max;
            self.w_last_max = u.w_last_max;
            self.epoch = None;
            let back: Vec<u64> = self
                .given_up
                .range(id + 1..)
                .filter(|(_, s)| self.lost.covered(s.start, s.end) == s.end - s.start)
                .map(|(&k, _)| k)
                .collect();
            for k in back {
                if let Some(s) = self.given_up.remove(&k) {
                    self.lost.remove(s.start, s.end);
                    self.inflight_bytes += s.end - s.start;
                    self.inflight.insert(k, s);
                }
            }
        }
        self.rearm(now);
    }

    /// After an ACK: the retransmission timer runs while anything is in flight or waits to be
    /// resent, and the tail loss probe is armed again if due.
    fn rearm(&mut self, now: Time) {
        self.rto_at = if self.inflight.is_empty() && self.lost.is_empty() {
            None
        } else {
            Some(now + self.rto())
        };
        self.arm_probe(now);
    }

    /// Notes packet `id` as taken out of the flight, its ACK still possible
    /// ([`Tcp::given_up`]), keeping at most [`MAX_GIVEN_UP`] (the oldest go first).
    fn give_up(&mut self, id: u64, sent: Sent) {
        while self.given_up.len() >= MAX_GIVEN_UP {
            self.given_up.pop_first();
        }
        self.given_up.insert(id, sent);
    }

    /// Drops the given-up packets whose data has been acknowledged since.
    fn prune_given_up(&mut self) {
        let una = self.snd_una;
        self.given_up.retain(|_, s| s.end > una);
    }

    /// Marks `start..end` acknowledged: SACKed, and the cumulative point moved over it when
    /// it fills the hole there.
    fn acknowledge(&mut self, start: u64, end: u64) {
        self.sacked.insert(start, end);
        if let Some((s, e)) = self.sacked.first() {
            if s <= self.snd_una {
                self.snd_una = self.snd_una.max(e);
                self.sacked.remove_below(self.snd_una);
            }
        }
    }

    fn rtt_sample(&mut self, r: f64) {
        self.min_rtt = self.min_rtt.min(r);
        match self.srtt {
            None => {
                self.srtt = Some(r);
                self.rttvar = r / 2.0;
            }
            Some(s) => {
                self.rttvar = 0.75 * self.rttvar + 0.25 * (s - r).abs();
                self.srtt = Some(0.875 * s + 0.125 * r);
            }
        }
    }

    fn on_congestion(&mut self) {
        // Fast convergence (RFC 8312 §4.6).
        self.w_max = if self.cwnd < self.w_last_max {
            self.cwnd * (1.0 + CUBIC_BETA) / 2.0
        } else {
            self.cwnd
        };
        self.w_last_max = self.cwnd;
        self.cwnd = (self.cwnd * CUBIC_BETA).max(2.0 * self.cfg.mss as f64);
        self.ssthresh = self.cwnd;
        self.epoch = None;
    }

    fn grow(&mut self, now: Time, acked: u64) {
        let mss = self.cfg.mss as f64;
        if self.cwnd < self.ssthresh {
            self.cwnd += acked as f64;
            return;
        }
        let rtt = self.srtt.unwrap_or(0.1).max(1e-3);
        let (start, k, origin) = *self.epoch.get_or_insert_with(|| {
            if self.cwnd < self.w_max {
                let k = ((self.w_max - self.cwnd) / mss / CUBIC_C).cbrt();
                (now, k, self.w_max)
            } else {
                (now, 0.0, self.cwnd)
            }
        });
        let t = (now - start).as_secs_f64() + rtt;
        let cubic = origin + CUBIC_C * (t - k).powi(3) * mss;
        let reno = self.w_max * CUBIC_BETA
            + 3.0 * (1.0 - CUBIC_BETA) / (1.0 + CUBIC_BETA) * (t / rtt) * mss;
        let target = cubic.max(reno).min(1.5 * self.cwnd);
        let mut increase = if target > self.cwnd {
            (target - self.cwnd) / self.cwnd * acked as f64
        } else {
            0.01 * mss * acked as f64 / self.cwnd
        };
        if self.w_max == 0.0 {
            // Before any loss there is no W_max to grow back to, and Linux's CUBIC grows at
            // least 5% per RTT "while the available bandwidth is still unknown"
            // (bictcp_update's cap of 20 ACKs per segment). Only a slow start that HyStart
            // ended gets here: a loss or a timeout sets W_max.
            increase = increase.max(acked as f64 / 20.0);
        }
        self.cwnd += increase;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rate::RateProfile;

    /// Runs a bulk transfer of `n` 1448-byte frames over one connection and returns the
    /// connection and the time the last frame arrived.
    fn bulk(bps: f64, owd_ms: u64, queue: u64, n: usize) -> (Tcp<usize>, Time, Vec<usize>) {
        bulk_with(TcpConfig::default(), None, bps, owd_ms, queue, n)
    }

    /// [`bulk`] with settings and a pacing cap, bytes per second.
    fn bulk_with(
        cfg: TcpConfig,
        cap: Option<u64>,
        bps: f64,
        owd_ms: u64,
        queue: u64,
        n: usize,
    ) -> (Tcp<usize>, Time, Vec<usize>) {
        #[derive(PartialEq, Eq, PartialOrd, Ord)]
        enum Ev {
            Depart,
            Arrive(Packet),
            Ack(u64),
            Timer,
            Pace,
        }
        let mut tcp: Tcp<usize> = Tcp::new(
            cfg,
            LinkConfig {
                rate: RateProfile::constant(bps),
                delay: Duration::from_millis(owd_ms),
                queue_bytes: queue,
                loss: 0.0,
            },
            Duration::from_millis(owd_ms),
        );
        tcp.set_pacing_cap(cap);
        for i in 0..n {
            tcp.write(1448, i);
        }
        let mut rng = Rng::new(1);
        let mut q = std::collections::BinaryHeap::new();
        let mut seq = 0u64;
        let mut push = |q: &mut std::collections::BinaryHeap<_>, t: Time, e: Ev| {
            seq += 1;
            q.push(std::cmp::Reverse((t, seq, e)));
        };
        if let Some(t) = tcp.try_send(Time::ZERO, &mut rng) {
            push(&mut q, t, Ev::Depart);
        }
        if let Some(t) = tcp.pace_deadline() {
            push(&mut q, t, Ev::Pace);
        }
        push(&mut q, tcp.rto_deadline().unwrap(), Ev::Timer);
        let mut got = Vec::new();
        let mut last = Time::ZERO;
        let mut paced_at = tcp.pace_deadline();
        while let Some(std::cmp::Reverse((now, _, e))) = q.pop() {
            let send = match e {
                Ev::Depart => {
                    if let Some((p, at, next)) = tcp.on_departure(now) {
                        push(&mut q, at, Ev::Arrive(p));
                        if let Some(t) = next {
                            push(&mut q, t, Ev::Depart);
                        }
                    }
                    false
                }
                Ev::Arrive(p) => {
                    let (frames, ack_at) = tcp.on_arrival(now, p);
                    if !frames.is_empty() {
                        last = now;
                    }
                    got.extend(frames);
                    push(&mut q, ack_at, Ev::Ack(p.id));
                    false
                }
                Ev::Ack(id) => {
                    tcp.on_ack(now, id);
                    true
                }
                Ev::Timer => {
                    tcp.on_timeout(now);
                    if let Some(t) = tcp.rto_deadline() {
                        push(&mut q, t.max(now + Duration::from_millis(1)), Ev::Timer);
                    }
                    true
                }
                // Only the wake-up for the deadline in force counts.
                Ev::Pace => paced_at.take_if(|t| *t == now).is_some(),
            };
            if send {
                if let Some(t) = tcp.try_send(now, &mut rng) {
                    push(&mut q, t, Ev::Depart);
                }
                if let Some(t) = tcp.pace_deadline().filter(|t| paced_at != Some(*t)) {
                    paced_at = Some(t);
                    push(&mut q, t, Ev::Pace);
                }
            }
            if got.len() == n {
                break;
            }
        }
        (tcp, last, got)
    }

    #[test]
    fn fills_the_link_and_delivers_in_order() {
        // 10 Mbps, 50 ms RTT, queue of one BDP; 5000 packets = 7.24 MB = 5.79 s at line rate.
        let (tcp, last, got) = bulk(10e6, 25, 62_500, 5000);
        assert_eq!(got, (0..5000).collect::<Vec<_>>());
        let ideal = 5000.0 * 1448.0 * 8.0 / 10e6 + 0.025;
        let t = last.as_secs_f64();
        eprintln!(
            "bulk: {t:.3} s vs line rate {ideal:.3} s, {:?}",
            tcp.stats()
        );
        assert!(
            t > ideal && t < ideal * 1.08,
            "took {t:.3} s, line rate {ideal:.3} s"
        );
        assert!(
            tcp.stats().retransmissions > 0,
            "drop-tail losses were recovered"
        );
        assert!(tcp.stats().timeouts == 0, "{:?}", tcp.stats());
        // RTT between propagation and propagation + full queue.
        let srtt = tcp.srtt().unwrap();
        assert!((0.05..0.05 + 0.05 + 0.01).contains(&srtt), "{srtt}");
    }

    /// Paced at a cap of 1.25 MB/s on a 100 Mbit/s link, a connection delivers at the cap,
    /// not at the link's rate, and keeps the link's queue empty: no drop although the
    /// queue holds only 8 packets. Unpaced, the same transfer's slow start overflows that
    /// queue.
    #[test]
    fn a_pacing_cap_holds_the_rate_and_keeps_the_queue_empty() {
        let paced = TcpConfig {
            pacing: true,
            ..TcpConfig::default()
        };
        let n = 2000; // 2.9 MB
        let (tcp, last, got) = bulk_with(paced.clone(), Some(1_250_000), 100e6, 10, 8 * 1500, n);
        assert_eq!(got, (0..n).collect::<Vec<_>>());
        let at_cap = n as f64 * 1448.0 / 1.25e6;
        let t = last.as_secs_f64();
        assert!(
            t > at_cap && t < at_cap * 1.05,
            "{t:.3} s, {at_cap:.3} s at the cap"
        );
        assert_eq!(tcp.link().stats().queue_drops, 0, "{:?}", tcp.stats());
        assert_eq!(tcp.stats().retransmissions, 0);
        let (unpaced, ..) = bulk_with(
            TcpConfig::default(),
            Some(1_250_000),
            100e6,
            10,
            8 * 1500,
            n,
        );
        assert!(
            unpaced.link().stats().queue_drops > 0,
            "the cap paces only a paced socket"
        );
    }

    /// Paced without a cap, a connection still fills its link (pacing at twice, then 1.2
    /// times, the window's rate never holds it below what the window allows) and every
    /// byte arrives in order.
    #[test]
    fn pacing_without_a_cap_still_fills_the_link() {
        let paced = TcpConfig {
            pacing: true,
            ..TcpConfig::default()
        };
        let (tcp, last, got) = bulk_with(paced, None, 10e6, 25, 62_500, 5000);
        assert_eq!(got, (0..5000).collect::<Vec<_>>());
        let ideal = 5000.0 * 1448.0 * 8.0 / 10e6 + 0.025;
        let t = last.as_secs_f64();
        assert!(
            t > ideal && t < ideal * 1.08,
            "took {t:.3} s, line rate {ideal:.3} s"
        );
        assert!(tcp.pacing_rate().is_some());
    }

    /// With HyStart, a paced slow start over a deep queue (4 BDPs) ends on its own, before
    /// the queue overflows: no drop in a 1.4 MB transfer, which still fills the link as
    /// fast as the one whose slow start ran into the queue's limit and lost packets. After
    /// the exit CUBIC has no W_max and grows 5% per RTT, as Linux's does.
    #[test]
    fn hystart_ends_slow_start_before_a_deep_queue_overflows() {
        let cfg = |hystart| TcpConfig {
            pacing: true,
            hystart,
            ..TcpConfig::default()
        };
        let (queue, n) = (4 * 62_500, 1000);
        let (tcp, last, got) = bulk_with(cfg(true), None, 10e6, 25, queue, n);
        assert_eq!(got, (0..n).collect::<Vec<_>>());
        let s = tcp.stats();
        assert_eq!(s.hystart_train_exits + s.hystart_delay_exits, 1, "{s:?}");
        assert_eq!(tcp.link().stats().queue_drops, 0, "{s:?}");
        let (plain, plain_last, _) = bulk_with(cfg(false), None, 10e6, 25, queue, n);
        assert!(plain.link().stats().queue_drops > 0, "{:?}", plain.stats());
        assert_eq!(
            plain.stats().hystart_train_exits + plain.stats().hystart_delay_exits,
            0
        );
        let (t, t_plain) = (last.as_secs_f64(), plain_last.as_secs_f64());
        eprintln!("hystart {t:.3} s, plain {t_plain:.3} s");
        assert!(
            t < 1.05 * t_plain,
            "{t:.3} s with HyStart, {t_plain:.3} s without"
        );
    }

    /// Linux's rule for the delivery rate TCP_INFO reports: a sample that is not
    /// application-limited always replaces the one kept, an application-limited one only
    /// when it is no lower.
    #[test]
    fn an_application_limited_rate_below_the_kept_one_is_not_kept() {
        let s = |rate: f64, app_limited: bool| RateSample { rate, app_limited };
        let kept = Some(s(2e6, false));
        assert!(s(1e6, true).replaces(None));
        assert!(!s(1e6, true).replaces(kept));
        assert!(s(3e6, true).replaces(kept));
        assert!(s(1e6, false).replaces(kept));
        assert!(s(1e6, false).replaces(Some(s(2e6, true))));
    }

    #[test]
    fn tiny_queue_still_completes() {
        let (_, _, got) = bulk(20e6, 10, 3000, 2000);
        assert_eq!(got.len(), 2000);
    }

    /// A connection over a fast 10 ms link that has sent five 1448-byte frames at time 0:
    /// the connection, its random source, and each packet with its arrival time.
    fn five_sent(cfg: TcpConfig) -> (Tcp<usize>, Rng, Vec<(Packet, Time)>) {
        let mut tcp: Tcp<usize> = Tcp::new(
            cfg,
            LinkConfig {
                rate: RateProfile::constant(1e9),
                delay: Duration::from_millis(10),
                queue_bytes: 1 << 20,
                loss: 0.0,
            },
            Duration::from_millis(10),
        );
        let mut rng = Rng::new(1);
        for i in 0..5 {
            tcp.write(1448, i);
        }
        let mut next = tcp.try_send(Time::ZERO, &mut rng);
        let mut sent = Vec::new();
        while let Some(t) = next {
            let (p, at, n) = tcp.on_departure(t).expect("a packet departs");
            sent.push((p, at));
            next = n;
        }
        assert_eq!(sent.len(), 5);
        (tcp, rng, sent)
    }

    /// Sends what the connection may send at `now`; returns the packets with their arrival
    /// times.
    fn send_all(tcp: &mut Tcp<usize>, rng: &mut Rng, now: Time) -> Vec<(Packet, Time)> {
        let mut out = Vec::new();
        let mut next = tcp.try_send(now, rng);
        while let Some(t) = next {
            let (p, at, n) = tcp.on_departure(t).expect("a packet departs");
            out.push((p, at));
            next = n;
        }
        out
    }

    /// An uplink outage: all five segments arrive but their ACKs come only after the
    /// timeout has resent the first. The first late ACK shows the timeout spurious (F-RTO):
    /// window and threshold come back, the other three segments count as in flight again
    /// and nothing more is sent twice.
    #[test]
    fn a_timeout_whose_acks_were_only_late_is_undone() {
        let (mut tcp, mut rng, sent) = five_sent(TcpConfig {
            tail_loss_probe: false,
            ..TcpConfig::default()
        });
        let (cwnd, ssthresh) = (tcp.cwnd, tcp.ssthresh);
        let mut acks = Vec::new();
        let mut got = Vec::new();
        for &(p, at) in &sent {
            let (frames, _) = tcp.on_arrival(at, p);
            got.extend(frames);
            acks.push(p.id);
        }
        let fire = tcp.rto_deadline().expect("a timer is armed");
        tcp.on_timeout(fire);
        assert_eq!(tcp.cwnd, tcp.cfg.mss as f64);
        let retx = send_all(&mut tcp, &mut rng, fire);
        assert_eq!(retx.len(), 1, "one segment's window");
        let late = fire + Duration::from_millis(1);
        for id in acks {
            tcp.on_ack(late, id);
        }
        assert_eq!(tcp.stats().undos, 1);
        assert!(tcp.cwnd >= cwnd, "{} < {cwnd}", tcp.cwnd);
        assert_eq!(tcp.ssthresh, ssthresh);
        assert_eq!(tcp.cumulative_acked(), 5 * 1448);
        assert!(tcp.lost.is_empty());
        assert!(
            send_all(&mut tcp, &mut rng, late).is_empty(),
            "nothing to send again"
        );
        // The retransmission arrives (a duplicate) and is acknowledged: the connection is idle.
        let (p, at) = retx[0];
        let (frames, _) = tcp.on_arrival(at, p);
        got.extend(frames);
        tcp.on_ack(at + Duration::from_millis(10), p.id);
        assert_eq!(got, vec![0, 1, 2, 3, 4]);
        assert_eq!(tcp.rto_deadline(), None);
        assert_eq!(tcp.stats().retransmissions, 1);
    }

    /// A real loss: the five segments are dropped and the retransmission's ACK comes first.
    /// The timeout stands.
    #[test]
    fn a_timeout_whose_retransmission_is_acknowledged_first_stands() {
        let (mut tcp, mut rng, _dropped) = five_sent(TcpConfig {
            tail_loss_probe: false,
            ..TcpConfig::default()
        });
        let cwnd = tcp.cwnd;
        let fire = tcp.rto_deadline().expect("a timer is armed");
        tcp.on_timeout(fire);
        let retx = send_all(&mut tcp, &mut rng, fire);
        let (p, at) = retx[0];
        let (frames, ack_at) = tcp.on_arrival(at, p);
        assert_eq!(frames, vec![0]);
        tcp.on_ack(ack_at, p.id);
        assert_eq!(tcp.stats().undos, 0);
        assert!((tcp.ssthresh - cwnd * CUBIC_BETA).abs() < 1.0);
        assert!(tcp.cwnd <= 2.0 * tcp.cfg.mss as f64, "{}", tcp.cwnd);
        assert_eq!(tcp.cumulative_acked(), 1448);
    }

    /// An outage: nothing comes back and the timer fires again and again. Only the first
    /// timeout lowers the slow-start threshold (Linux's `tcp_enter_loss`); the backed-off
    /// ones leave it, so the connection can slow-start back to it when the path returns.
    #[test]
    fn only_the_first_timeout_of_an_outage_lowers_the_threshold() {
        let (mut tcp, _rng, _sent) = five_sent(TcpConfig {
            tail_loss_probe: false,
            ..TcpConfig::default()
        });
        let window = tcp.cwnd;
        let mut fire = tcp.rto_deadline().expect("a timer is armed");
        tcp.on_timeout(fire);
        let first = tcp.ssthresh;
        assert!(
            (first - window * CUBIC_BETA).abs() < 1.0,
            "{first} vs {window}"
        );
        for _ in 0..3 {
            fire = tcp.rto_deadline().expect("the timer is armed again");
            tcp.on_timeout(fire);
            assert_eq!(tcp.cwnd, tcp.cfg.mss as f64);
            assert_eq!(tcp.ssthresh, first);
        }
        assert_eq!(tcp.stats().timeouts, 4);
    }

    /// The last two of five segments are lost: two smoothed RTTs later the probe resends
    /// the last one, its ACK shows the fourth lost, and everything arrives well before the
    /// 200 ms retransmission timeout would have fired. Without the probe, the timeout.
    #[test]
    fn a_lost_tail_is_found_by_the_probe_not_the_timeout() {
        for tlp in [true, false] {
            let (mut tcp, mut rng, sent) = five_sent(TcpConfig {
                tail_loss_probe: tlp,
                ..TcpConfig::default()
            });
            let ms = |m: f64| Time::ZERO + Duration::from_secs_f64(m / 1e3);
            // Three arrive and are acknowledged; the last two are dropped.
            let mut got = Vec::new();
            let mut now = ms(0.0);
            for &(p, at) in &sent[..3] {
                let (frames, ack_at) = tcp.on_arrival(at, p);
                got.extend(frames);
                tcp.on_ack(ack_at, p.id);
                now = ack_at;
            }
            let fire = tcp.rto_deadline().expect("a timer is armed");
            if tlp {
                // Two smoothed RTTs of 20 ms.
                assert!(
                    fire < now + Duration::from_millis(50),
                    "{fire:?} vs {now:?}"
                );
            } else {
                assert!(fire >= now + Duration::from_millis(200));
            }
            // Whatever fires goes out, and from then on nothing is lost.
            tcp.on_timeout(fire);
            let mut t = fire;
            for _ in 0..10 {
                let mut next = tcp.try_send(t, &mut rng);
                let mut batch = Vec::new();
                while let Some(d) = next {
                    let (p, at, n) = tcp.on_departure(d).expect("a packet departs");
                    batch.push((p, at));
                    next = n;
                }
                if batch.is_empty() {
                    break;
                }
                for (p, at) in batch {
                    let (frames, ack_at) = tcp.on_arrival(at, p);
                    got.extend(frames);
                    tcp.on_ack(ack_at, p.id);
                    t = ack_at;
                }
            }
            assert_eq!(got, vec![0, 1, 2, 3, 4], "tlp {tlp}");
            let st = tcp.stats();
            if tlp {
                assert_eq!((st.probes, st.timeouts), (1, 0), "{st:?}");
                assert!(t < ms(120.0), "done at {t:?}");
            } else {
                assert_eq!((st.probes, st.timeouts), (0, 1), "{st:?}");
            }
        }
    }

    /// The second of five segments is lost: the cumulative ACK stops at the first, the three
    /// behind the hole count as SACKed (the receiver holds them and passes none on), and the
    /// retransmission moves the cumulative ACK to the end, as `tcpi_bytes_acked` and
    /// `tcpi_sacked` do. PAD's view of a helper needs both (item 44).
    #[test]
    fn bytes_behind_a_hole_are_sacked_until_it_is_filled() {
        let (mut tcp, mut rng, sent) = five_sent(TcpConfig::default());
        let mut got = Vec::new();
        let mut now = Time::ZERO;
        for (i, &(p, at)) in sent.iter().enumerate() {
            if i == 1 {
                continue; // dropped
            }
            let (frames, ack_at) = tcp.on_arrival(at, p);
            got.extend(frames);
            tcp.on_ack(ack_at, p.id);
            now = ack_at;
        }
        assert_eq!(got, vec![0], "nothing passes the hole");
        assert_eq!(tcp.bytes_acked(), 4 * 1448);
        assert_eq!(tcp.cumulative_acked(), 1448);
        assert_eq!(tcp.sacked(), 3 * 1448);
        assert_eq!(tcp.unacked(), 1448, "only the hole is left to deliver");
        let mut next = tcp.try_send(now, &mut rng);
        let mut resent = 0;
        while let Some(t) = next {
            let (p, at, n) = tcp.on_departure(t).expect("a packet departs");
            let (frames, ack_at) = tcp.on_arrival(at, p);
            got.extend(frames);
            tcp.on_ack(ack_at, p.id);
            resent += 1;
            next = n;
        }
        assert_eq!(resent, 1);
        assert_eq!(got, vec![0, 1, 2, 3, 4]);
        assert_eq!(tcp.cumulative_acked(), 5 * 1448);
        assert_eq!((tcp.sacked(), tcp.bytes_acked()), (0, 5 * 1448));
    }
}
