//! The simulated topology: a proxy, a primary and N helpers, driven by one event queue.
//!
//! - The **proxy** owns the data: a real [`Sender`] with the chosen scheduler, fed with
//!   [`PathView`]s built from its TCP connections (PS-Path, HS-Paths) and the pipe feedback it
//!   has received.
//! - Each **helper** reads frames from its HS-Path into a bounded user-space buffer and writes
//!   them to its pipe while the pipe socket's not-sent bytes are below the low-water mark (TCP
//!   splitting, MPBond §4.2). It drops bytes named by `DATA_CANCEL` and reports its buffer and
//!   pipe state every feedback interval.
//! - The **primary** reassembles with a real [`Receiver`], checks every byte against the
//!   original, and returns `DATA_ACK`s over the PS-Path.
//!
//! Control frames toward the proxy (ACKs, feedback, subflow failures) take the path's one-way
//! propagation delay and are never lost; data travels through the TCP model.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, VecDeque};
use std::time::Duration;

use bytes::Bytes;
use mpbond_core::{
    by_name, DrainRate, FeedbackGate, MinRttGate, Output, PathEstimator, PathKind, PathView,
    PipeState, Receiver, ReceiverConfig, Sender, SenderConfig, TcpSample, Time,
};
use mpbond_proto::{DataAck, PipeFeedback, PipeMinRtt, StreamId, SubflowId, DATA_OVERHEAD};

use crate::energy::{Iface, RadioMeter};
use crate::fluid::{lower_bound, FluidPath};
use crate::hystart::Exit;
use crate::link::{LinkConfig, Packet};
use crate::rate::Server;
use crate::report::{HyStartExit, Reinjection, SimResult, SubflowResult, TimelinePoint};
use crate::rng::Rng;
use crate::spec::{FeedbackRoute, HelperSpec, PathSpec, RateSource, Scenario};
use crate::tcp::Tcp;
use mpbond_core::energy::PathPower;
use mpbond_core::queue_guard::{GuardReading, QueueGuard, NO_CAP};

/// How often a flow's drain rate takes a reading: the daemons' tick. Per ACK, its 64
/// readings would span less than its 50 ms minimum on a fast pipe.
const DRAIN_READ_EVERY: Duration = Duration::from_millis(5);
/// How often the proxy's queue guard reads a link: the daemons' tick, at which they read
/// TCP_INFO (`Session::refresh_links`).
const GUARD_READ_EVERY: Duration = Duration::from_millis(5);

/// Errors that stop a simulation before it runs.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// The scheduler name is unknown.
    #[error(transparent)]
    Scheduler(#[from] mpbond_core::scheduler::UnknownScheduler),
    /// The scenario is inconsistent.
    #[error("invalid scenario: {0}")]
    Invalid(String),
}

const STREAM: StreamId = StreamId(1);
const FIN_WIRE: u64 = 4 + 4 + 8;
const CANCEL_WIRE: u64 = 4 + 4 + 8 + 8;
const STALL_CHECK: Duration = Duration::from_millis(100);
/// How long after a helper's subflow died the primary asks it to join again (the daemons'
/// `rejoin_after`).
const HELPER_REJOIN_AFTER: Duration = Duration::from_secs(1);

/// A stale path is back once its TCP has made progress and holds at most this much
/// unacknowledged, as in the daemons (`mpbond_daemon::liveness::BACK_UNACKED`).
const BACK_UNACKED: u64 = 4096;

/// Bytes a rejoin's handshake needs from the link toward the primary or helper (SYN-ACK and
/// the join's answer).
const HANDSHAKE_BYTES: u64 = 120;
/// Bytes of a packet toward the proxy, where uplinks are modelled (`PathSpec::up`): a TCP
/// ACK (IP and TCP headers with timestamps), a SYN, a `DATA_ACK` with its SACK blocks in its
/// TCP segment, pipe feedback in its own.
const ACK_WIRE: u64 = 52;
const SYN_WIRE: u64 = 60;
const DATA_ACK_WIRE: u64 = 52 + 90;
const FEEDBACK_WIRE: u64 = 52 + 40;

/// A path's direction toward the proxy where it is rate-limited: first in, first out, with
/// no queue limit (it carries ACKs and control frames, a few percent of the download's
/// bytes).
struct UpLink {
    rate: crate::rate::RateProfile,
    server: Server,
    free_at: Time,
}

impl UpLink {
    /// When `bytes` offered at `at` have left the bottleneck; None if it never serves again.
    fn carry(&mut self, at: Time, bytes: u64) -> Option<Time> {
        let start = at.max(self.free_at);
        let done = self.server.finish(&self.rate, start, bytes)?;
        self.free_at = done;
        Some(done)
    }
}

/// A frame inside a simulated TCP stream.
#[derive(Debug, Clone)]
enum SimFrame {
    Data {
        dsn: u64,
        payload: Bytes,
        /// The subflow the proxy scheduled it on.
        subflow: usize,
    },
    Fin {
        size: u64,
    },
    Cancel {
        start: u64,
        end: u64,
    },
}

impl SimFrame {
    fn wire_len(&self) -> u64 {
        match self {
            SimFrame::Data { payload, .. } => DATA_OVERHEAD as u64 + payload.len() as u64,
            SimFrame::Fin { .. } => FIN_WIRE,
            SimFrame::Cancel { .. } => CANCEL_WIRE,
        }
    }
}

/// Flow events carry the flow's epoch: a flow replaced by a rejoin ignores its
/// predecessor's packets and timers.
#[derive(Debug)]
enum Ev {
    Depart(usize, u32),
    Arrive(usize, u32, Packet),
    Ack(usize, u32, u64),
    Rto(usize, u32),
    /// Pacing lets flow `f` send again.
    Pace(usize, u32),
    DataAck(DataAck),
    Feedback(usize, PipeFeedback, Option<PipeMinRtt>),
    FeedbackTimer(usize),
    AckTimer,
    StallCheck,
    SubflowDown(usize),
    /// The daemons try to bring subflow `s` back.
    Rejoin(usize),
    /// Subflow `s`'s new connection is up.
    SubflowUp(usize),
    Sample,
}

struct Entry {
    at: Time,
    seq: u64,
    ev: Ev,
}

impl PartialEq for Entry {
    fn eq(&self, o: &Self) -> bool {
        (self.at, self.seq) == (o.at, o.seq)
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Entry {
    fn cmp(&self, o: &Self) -> Ordering {
        // Min-heap on (time, insertion order): ties resolve in a fixed order.
        (o.at, o.seq).cmp(&(self.at, self.seq))
    }
}

struct Helper {
    ring: VecDeque<SimFrame>,
    ring_bytes: u64,
    pipe_est: PathEstimator,
    cancelled_bytes: u64,
    /// Whether each report goes out, under flexible feedback as the helper daemon does.
    gate: FeedbackGate,
    /// Whether the pipe's minimum RTT goes out with a report, as the helper daemon decides.
    min_gate: MinRttGate,
}

struct PerSubflow {
    alive: bool,
    /// Stalled, its connections kept (`Scenario::dead_timeout`): since when, and its TCP's
    /// last progress then.
    stale: Option<(Time, Time)>,
    /// How often it went stale.
    stales: u64,
    died_at: Option<Time>,
    rejoins: u64,
    useful: u64,
    duplicate: u64,
    last_useful: Option<Time>,
    scheduled: u64,
}

/// One simulation run.
struct World<'a> {
    sc: &'a Scenario,
    now: Time,
    queue: BinaryHeap<Entry>,
    seq: u64,
    events: u64,
    rng: Rng,
    /// 0: PS; 1 + 2k: HS of helper k; 2 + 2k: pipe of helper k.
    flows: Vec<Tcp<SimFrame>>,
    /// Bumped when a flow is replaced by a rejoin's new connection.
    epoch: Vec<u32>,
    /// Per flow, the rate its ACKs show a standing queue draining at (`TcpSample::
    /// drain_rate`), read at most every [`DRAIN_READ_EVERY`] like the daemons' ticks.
    drains: Vec<(DrainRate, Option<Time>)>,
    /// Each subflow's WAN uplink (0: PS, k+1: HS of helper k), where modelled.
    up: Vec<Option<UpLink>>,
    timer_at: Vec<Option<Time>>,
    /// Per flow, the pacing wake-up in force.
    pace_at: Vec<Option<Time>>,
    /// Per flow the proxy sends on (PS-Path, HS-Paths), its queue guard and when it last
    /// read the link, with pacing on (`TcpConfig::pacing`); none on pipes, whose sender is
    /// the helper, which runs no guard (docs/design.md).
    guards: Vec<Option<(QueueGuard, Option<Time>)>>,
    /// Per subflow, how often its guard started capping its link.
    guard_caps: Vec<u64>,
    proxy_est: Vec<PathEstimator>,
    pipe_state: Vec<PipeState>,
    sender: Sender,
    helpers: Vec<Helper>,
    receiver: Receiver,
    expected: Bytes,
    read_pos: u64,
    corrupted: bool,
    ack_timer_at: Option<Time>,
    sub: Vec<PerSubflow>,
    done_at: Option<Time>,
    timeline: Vec<TimelinePoint>,
    radios: RadioMeter,
}

fn flow_hs(k: usize) -> usize {
    1 + 2 * k
}
fn flow_pipe(k: usize) -> usize {
    2 + 2 * k
}
/// The helper whose pipe flow `f` is, if it is one.
fn pipe_of_flow(f: usize) -> Option<usize> {
    (f >= 2 && f % 2 == 0).then(|| (f - 2) / 2)
}
/// The phone interface that receives flow `f`'s packets: the primary's PS end, a helper's
/// HS end, or the primary's end of a pipe.
fn receiver_of_flow(f: usize) -> Iface {
    match f {
        0 => Iface::PrimaryWan,
        f if f % 2 == 1 => Iface::HelperWan((f - 1) / 2),
        f => Iface::PrimaryPipe((f - 2) / 2),
    }
}
/// The proxy-side flow of subflow `s` (0: PS, k+1: helper k).
fn flow_of_subflow(s: usize) -> usize {
    if s == 0 {
        0
    } else {
        flow_hs(s - 1)
    }
}

fn content(size: u64, seed: u64) -> Bytes {
    let mut r = Rng::new(seed ^ 0xC0FFEE);
    let mut v = Vec::with_capacity(size as usize + 8);
    while (v.len() as u64) < size {
        v.extend_from_slice(&r.next_u64().to_le_bytes());
    }
    v.truncate(size as usize);
    Bytes::from(v)
}

fn link_of(p: &PathSpec, mss: u64) -> LinkConfig {
    LinkConfig {
        rate: p.rate.clone(),
        delay: p.owd(),
        queue_bytes: p.queue_limit(mss),
        loss: p.loss,
    }
}

/// A path estimator as a new connection leaves it: one RTT sample (the handshake's) and the
/// initial window.
/// The queue guard of flow `f`, as the proxy daemon builds a link's
/// (`queue_guard::for_link`): with pacing on, the PS-Path takes `queue_guard` (and
/// `ps_queue_guard` past slow start at a steady rate) and an HS-Path `hs_queue_guard` while
/// its helper's buffer is short; pipes have none.
fn guard_of(sc: &Scenario, f: usize) -> Option<(QueueGuard, Option<Time>)> {
    if !sc.tcp.pacing || pipe_of_flow(f).is_some() {
        return None;
    }
    let g = if f == 0 {
        QueueGuard::for_ps_path(sc.queue_guard, sc.ps_queue_guard)
    } else {
        QueueGuard::for_hs_path(sc.queue_guard, sc.hs_queue_guard)
    };
    Some((g, None))
}

fn fresh_estimator(sc: &Scenario, rtt: Duration, now: Time) -> PathEstimator {
    let mut e = PathEstimator::new(sc.estimator_tau)
        .with_loss_hold(sc.loss_hold)
        .with_drain_floor(sc.drain_floor);
    e.on_sample(TcpSample {
        now,
        srtt: rtt.as_secs_f64().max(1e-6),
        cwnd: sc.tcp.initial_window * sc.tcp.mss,
        in_flight: 0,
        delivery_rate: None,
        app_limited: false,
        slow_start: false,
        retransmits: 0,
        drain_rate: None,
    });
    e
}

/// A helper's relay state when its subflow (re)joins, with the proxy's view of its pipe.
fn fresh_helper(sc: &Scenario, h: &HelperSpec, now: Time) -> (Helper, PipeState) {
    // No drain floor on the pipe: the daemons' helper reports Th_p from its own goodput
    // measure, not from a floored estimate (its meters take the kernel's samples as they
    // are).
    let mut pipe_est = fresh_estimator(sc, h.pipe.rtt, now).with_drain_floor(0.0);
    if sc.warm_pipes {
        // The pipe was measured when it was set up: its rate at that time.
        pipe_est = PathEstimator::new(sc.estimator_tau).with_loss_hold(sc.loss_hold);
        pipe_est.on_sample(TcpSample {
            now,
            srtt: h.pipe.rtt.as_secs_f64().max(1e-6),
            cwnd: 0,
            in_flight: 0,
            delivery_rate: Some(h.pipe.rate.nominal_bps(now) / 8.0),
            app_limited: false,
            slow_start: false,
            retransmits: 0,
            drain_rate: None,
        });
    }
    let mut ps = PipeState::default();
    ps.on_feedback(
        now,
        PipeFeedback {
            subflow: SubflowId(0),
            throughput_bps: (pipe_est.throughput() * 8.0) as u64,
            rtt_us: h.pipe.rtt.as_micros() as u32,
            buffered: 0,
            timestamp_us: now.as_micros(),
            uplink: false,
        },
        None,
    );
    (
        Helper {
            ring: VecDeque::new(),
            ring_bytes: 0,
            pipe_est,
            cancelled_bytes: 0,
            gate: FeedbackGate::new(),
            min_gate: MinRttGate::new(),
        },
        ps,
    )
}

impl<'a> World<'a> {
    fn new(sc: &'a Scenario) -> Result<Self, SimError> {
        if sc.segment == 0 {
            return Err(SimError::Invalid("segment size must be positive".into()));
        }
        let scheduler = by_name(&sc.scheduler, sc.pams)?;
        let mss = sc.tcp.mss;
        let mut flows = vec![Tcp::new(sc.tcp.clone(), link_of(&sc.ps, mss), sc.ps.owd())];
        for h in &sc.helpers {
            flows.push(Tcp::new(sc.tcp.clone(), link_of(&h.hs, mss), h.hs.owd()));
            flows.push(Tcp::new(
                sc.tcp.clone(),
                link_of(&h.pipe, mss),
                h.pipe.owd(),
            ));
        }
        let window = 64u64 << 20;
        let mut sender = Sender::new(
            scheduler,
            SenderConfig {
                max_segment: sc.segment,
                stream_capacity: sc.size.max(1),
                initial_window: window,
                cancel_recalled: sc.cancel_recalled,
                clamp_helper_buffer: sc.clamp_helper_buffer,
                late_rescue: sc.late_rescue,
                loss_rescue: sc.loss_rescue,
                tail_copy: sc.tail_copy,
                window_rescue: sc.window_rescue,
                ..SenderConfig::default()
            },
        );
        let mut receiver = Receiver::new(ReceiverConfig {
            stream_window: window,
            ..ReceiverConfig::default()
        });
        sender
            .open_stream(STREAM)
            .map_err(|e| SimError::Invalid(e.to_string()))?;
        receiver
            .open_stream(STREAM)
            .map_err(|e| SimError::Invalid(e.to_string()))?;
        let expected = content(sc.size, sc.seed);
        sender
            .write(STREAM, expected.clone())
            .map_err(|e| SimError::Invalid(e.to_string()))?;
        sender
            .finish(STREAM)
            .map_err(|e| SimError::Invalid(e.to_string()))?;
        let n = sc.helpers.len();
        sender.add_subflow(SubflowId(0), PathKind::Direct);
        for k in 0..n {
            sender.add_subflow(SubflowId(k as u8 + 1), PathKind::Helper);
        }
        let mut proxy_est = vec![fresh_estimator(sc, sc.ps.rtt, Time::ZERO)];
        let mut helpers = Vec::new();
        let mut pipe_state = Vec::new();
        for h in &sc.helpers {
            proxy_est.push(fresh_estimator(sc, h.hs.rtt, Time::ZERO));
            let (helper, pipe) = fresh_helper(sc, h, Time::ZERO);
            pipe_state.push(pipe);
            helpers.push(helper);
        }
        let sub = (0..=n)
            .map(|_| PerSubflow {
                alive: true,
                stale: None,
                stales: 0,
                died_at: None,
                rejoins: 0,
                useful: 0,
                duplicate: 0,
                last_useful: None,
                scheduled: 0,
            })
            .collect();
        let nflows = flows.len();
        let mut radios = RadioMeter::new(sc.wan_radio, sc.pipe_radio, n);
        radios.set_link(Iface::PrimaryWan, &sc.ps.rate, sc.ps.radio_rate);
        for (k, h) in sc.helpers.iter().enumerate() {
            radios.set_link(Iface::HelperWan(k), &h.hs.rate, h.hs.radio_rate);
            radios.set_link(Iface::PrimaryPipe(k), &h.pipe.rate, h.pipe.radio_rate);
            radios.set_link(Iface::HelperPipe(k), &h.pipe.rate, h.pipe.radio_rate);
        }
        Ok(World {
            sc,
            now: Time::ZERO,
            queue: BinaryHeap::new(),
            seq: 0,
            events: 0,
            rng: Rng::new(sc.seed),
            flows,
            epoch: vec![0; nflows],
            drains: vec![(DrainRate::default(), None); nflows],
            up: std::iter::once(&sc.ps)
                .chain(sc.helpers.iter().map(|h| &h.hs))
                .map(|p| {
                    p.up.clone().map(|rate| UpLink {
                        rate,
                        server: Server::default(),
                        free_at: Time::ZERO,
                    })
                })
                .collect(),
            timer_at: vec![None; nflows],
            pace_at: vec![None; nflows],
            guards: (0..nflows).map(|f| guard_of(sc, f)).collect(),
            guard_caps: vec![0; n + 1],
            proxy_est,
            pipe_state,
            sender,
            helpers,
            receiver,
            expected,
            read_pos: 0,
            corrupted: false,
            ack_timer_at: None,
            sub,
            done_at: None,
            timeline: Vec::new(),
            radios,
        })
    }

    fn at(&mut self, at: Time, ev: Ev) {
        self.seq += 1;
        self.queue.push(Entry {
            at,
            seq: self.seq,
            ev,
        });
    }

    fn flow_alive(&self, f: usize) -> bool {
        f == 0 && self.sub[0].alive || f > 0 && self.sub[(f - 1) / 2 + 1].alive
    }

    /// Lets flow `f` send what its windows allow, scheduling its link and timer.
    fn kick(&mut self, f: usize) {
        if let Some(t) = self.flows[f].try_send(self.now, &mut self.rng) {
            self.at(t, Ev::Depart(f, self.epoch[f]));
        }
        self.arm_timer(f);
        // One wake-up per pacing deadline.
        if let Some(t) = self.flows[f].pace_deadline() {
            if self.pace_at[f] != Some(t) {
                self.pace_at[f] = Some(t);
                self.at(t, Ev::Pace(f, self.epoch[f]));
            }
        }
    }

    fn arm_timer(&mut self, f: usize) {
        if let Some(d) = self.flows[f].rto_deadline() {
            if self.timer_at[f].is_none_or(|t| t > d) {
                self.timer_at[f] = Some(d);
                self.at(d, Ev::Rto(f, self.epoch[f]));
            }
        }
    }

    fn run(mut self) -> SimResult {
        self.proxy_pump();
        for k in 0..self.helpers.len() {
            self.at(Time::ZERO + self.sc.feedback_interval, Ev::FeedbackTimer(k));
        }
        self.at(self.now + STALL_CHECK, Ev::StallCheck);
        if self.sc.timeline_every.is_some() {
            self.at(Time::ZERO, Ev::Sample);
        }
        let limit = Time::ZERO + self.sc.time_limit;
        while let Some(Entry { at, ev, .. }) = self.queue.pop() {
            if at > limit || self.done_at.is_some() {
                break;
            }
            self.now = at;
            self.events += 1;
            self.handle(ev);
        }
        self.result()
    }

    fn handle(&mut self, ev: Ev) {
        match ev {
            Ev::Depart(f, e)
            | Ev::Arrive(f, e, _)
            | Ev::Ack(f, e, _)
            | Ev::Rto(f, e)
            | Ev::Pace(f, e)
                if e != self.epoch[f] => {}
            Ev::Depart(f, e) => {
                if let Some((p, arrive, next)) = self.flows[f].on_departure(self.now) {
                    if let Some(k) = pipe_of_flow(f) {
                        self.radios.sent(Iface::HelperPipe(k), self.now, p.len());
                    }
                    if self.flow_alive(f) {
                        self.at(arrive, Ev::Arrive(f, e, p));
                    }
                    if let Some(t) = next {
                        self.at(t, Ev::Depart(f, e));
                    }
                }
            }
            Ev::Arrive(f, e, p) => {
                self.radios.received(receiver_of_flow(f), self.now, p.len());
                let (frames, ack_at) = self.flows[f].on_arrival(self.now, p);
                // A WAN path's ACK crosses its uplink, where modelled; a pipe's only its delay.
                let ack_at = match f {
                    0 => self.arrival_at_proxy(0, self.now, ACK_WIRE),
                    f if f % 2 == 1 => self.arrival_at_proxy((f - 1) / 2 + 1, self.now, ACK_WIRE),
                    _ => {
                        // A pipe's ACK: the primary sends it, the helper hears it.
                        if let Some(k) = pipe_of_flow(f) {
                            self.radios.crossed_pipe(k, false, self.now, ack_at, 0);
                        }
                        Some(ack_at)
                    }
                };
                if let Some(t) = ack_at {
                    self.at(t, Ev::Ack(f, e, p.id));
                }
                self.deliver(f, frames);
            }
            Ev::Ack(f, _, id) => {
                if !self.flow_alive(f) {
                    return;
                }
                self.flows[f].on_ack(self.now, id);
                self.sample(f);
                self.guard(f);
                self.kick(f);
                self.pump_owner(f);
            }
            Ev::Pace(f, _) => {
                if self.pace_at[f] != Some(self.now) || !self.flow_alive(f) {
                    return;
                }
                self.pace_at[f] = None;
                self.kick(f);
                self.pump_owner(f);
            }
            Ev::Rto(f, _) => {
                if self.timer_at[f] != Some(self.now) || !self.flow_alive(f) {
                    return;
                }
                self.timer_at[f] = None;
                self.flows[f].on_timeout(self.now);
                self.kick(f);
            }
            Ev::DataAck(a) => {
                // The receiver is ours, so a bad ACK is a bug: surface it in the result.
                if self.sender.on_ack(&a).is_err() {
                    self.corrupted = true;
                }
                self.proxy_pump();
            }
            Ev::Feedback(k, fb, min_rtt) => {
                if self.sub[k + 1].alive {
                    let acked = self.flows[flow_of_subflow(k + 1)].cumulative_acked();
                    self.pipe_state[k].on_feedback(self.now, fb, Some(acked));
                    if let Some(m) = min_rtt {
                        self.pipe_state[k].on_min_rtt(m);
                    }
                    self.proxy_pump();
                }
            }
            Ev::FeedbackTimer(k) => self.feedback(k),
            Ev::AckTimer => {
                self.ack_timer_at = None;
                self.send_acks();
            }
            Ev::StallCheck => self.stall_check(),
            Ev::SubflowDown(s) => {
                if self.sub[s].alive {
                    tracing::trace!(
                        target: "mpbond::sched",
                        t = self.now.as_secs_f64(),
                        subflow = %SubflowId(s as u8),
                        "dead"
                    );
                    self.sub[s].alive = false;
                    self.sub[s].stale = None;
                    self.sub[s].died_at.get_or_insert(self.now);
                    self.sender.remove_subflow(SubflowId(s as u8));
                    self.proxy_pump();
                    if self.sc.rejoin {
                        let after = if s == 0 {
                            Duration::ZERO
                        } else {
                            HELPER_REJOIN_AFTER
                        };
                        self.at(self.now + after, Ev::Rejoin(s));
                    }
                }
            }
            Ev::Rejoin(s) => {
                if let Some(up) = self.handshake_done(s) {
                    self.at(up, Ev::SubflowUp(s));
                }
            }
            Ev::SubflowUp(s) => self.subflow_up(s),
            Ev::Sample => {
                self.timeline.push(TimelinePoint {
                    t: self.now.as_secs_f64(),
                    bytes: self.sub.iter().map(|s| s.useful).collect(),
                });
                if let Some(every) = self.sc.timeline_every {
                    self.at(self.now + every, Ev::Sample);
                }
            }
        }
    }

    /// Feeds the estimator of a flow's sender with the connection's state after an ACK.
    fn sample(&mut self, f: usize) {
        let tcp = &self.flows[f];
        let Some(srtt) = tcp.srtt() else { return };
        let rate = match self.sc.rate_source {
            RateSource::DeliveryRate => tcp.delivery_rate(),
            RateSource::CwndRtt => None,
        };
        // In order or SACKed, the bytes acknowledged are the bytes the peer has (the daemons
        // read `tcpi_bytes_acked` plus the SACKed bytes here too).
        let (drain, last) = &mut self.drains[f];
        if last.is_none_or(|t| self.now.saturating_since(t) >= DRAIN_READ_EVERY) {
            let min_rtt = tcp.min_rtt().unwrap_or(0.0);
            drain.observe(self.now, tcp.bytes_acked(), tcp.outq(), srtt, min_rtt);
            *last = Some(self.now);
        }
        let s = TcpSample {
            now: self.now,
            srtt,
            cwnd: tcp.cwnd(),
            in_flight: tcp.inflight(),
            delivery_rate: rate.map(|r| r.rate),
            app_limited: rate.is_some_and(|r| r.app_limited),
            slow_start: tcp.in_slow_start(),
            retransmits: tcp.stats().retransmissions,
            drain_rate: drain.rate(),
        };
        if f == 0 {
            self.proxy_est[0].on_sample(s);
        } else if f % 2 == 1 {
            self.proxy_est[(f - 1) / 2 + 1].on_sample(s);
        } else {
            self.helpers[(f - 2) / 2].pipe_est.on_sample(s);
        }
    }

    /// Lets the sender of flow `f` write more (the proxy, or a helper for its pipe).
    fn pump_owner(&mut self, f: usize) {
        match pipe_of_flow(f) {
            Some(k) => self.helper_pump(k),
            None => self.proxy_pump(),
        }
    }

    /// The proxy's queue guard reads flow `f`'s link (at most every [`GUARD_READ_EVERY`])
    /// and caps or frees its pacing, as `Session::refresh_links` does from TCP_INFO. An
    /// HS-Path's guard weighs its helper's buffer from the newest pipe feedback.
    fn guard(&mut self, f: usize) {
        let now = self.now;
        let s = if f == 0 { 0 } else { (f - 1) / 2 + 1 };
        let pipe = (s > 0).then(|| self.pipe_state[s - 1].view()).flatten();
        let tcp = &mut self.flows[f];
        let Some((g, last)) = self.guards[f].as_mut() else {
            return;
        };
        if last.is_some_and(|t| now.saturating_since(t) < GUARD_READ_EVERY) {
            return;
        }
        *last = Some(now);
        let (Some(srtt), Some(min_rtt)) = (tcp.srtt(), tcp.min_rtt()) else {
            return;
        };
        if g.watches_pipe() {
            g.set_pipe_drain(pipe.and_then(|p| p.drain_time()));
        }
        let reading = GuardReading {
            srtt_us: (srtt * 1e6) as u32,
            min_rtt_us: (min_rtt * 1e6) as u32,
            unacked_bytes: tcp.unacked(),
            delivery_rate: tcp.delivery_rate().map_or(0, |r| r.rate as u64),
            slow_start: tcp.in_slow_start(),
            recovering: tcp.recovering(),
        };
        let was_capped = g.cap().is_some();
        if let Some(cap) = g.check(&reading, self.proxy_est[s].throughput(), 1.0) {
            tcp.set_pacing_cap((cap != NO_CAP).then_some(cap));
            if !was_capped {
                self.guard_caps[s] += 1;
            }
        }
    }

    /// Frames that completed at the receiving end of flow `f`.
    fn deliver(&mut self, f: usize, frames: Vec<SimFrame>) {
        if frames.is_empty() {
            return;
        }
        if f == 0 || f % 2 == 0 {
            let via = if f == 0 { 0 } else { (f - 2) / 2 + 1 };
            for fr in frames {
                self.primary_frame(fr, via);
            }
            self.send_acks();
        } else {
            let k = (f - 1) / 2;
            for fr in frames {
                self.helper_frame(k, fr);
            }
            self.helper_pump(k);
        }
    }

    fn helper_frame(&mut self, k: usize, fr: SimFrame) {
        let h = &mut self.helpers[k];
        match fr {
            SimFrame::Cancel { start, end } => {
                let mut kept = VecDeque::with_capacity(h.ring.len());
                for f in h.ring.drain(..) {
                    match f {
                        SimFrame::Data {
                            dsn,
                            payload,
                            subflow,
                        } if dsn < end && dsn + payload.len() as u64 > start => {
                            let pend = dsn + payload.len() as u64;
                            let before = DATA_OVERHEAD as u64 + payload.len() as u64;
                            let mut after = 0;
                            if dsn < start {
                                let p = payload.slice(..(start - dsn) as usize);
                                after += DATA_OVERHEAD as u64 + p.len() as u64;
                                kept.push_back(SimFrame::Data {
                                    dsn,
                                    payload: p,
                                    subflow,
                                });
                            }
                            if pend > end {
                                let p = payload.slice((end - dsn) as usize..);
                                after += DATA_OVERHEAD as u64 + p.len() as u64;
                                kept.push_back(SimFrame::Data {
                                    dsn: end,
                                    payload: p,
                                    subflow,
                                });
                            }
                            h.cancelled_bytes += pend.min(end) - dsn.max(start);
                            h.ring_bytes -= before;
                            h.ring_bytes += after;
                        }
                        other => kept.push_back(other),
                    }
                }
                h.ring = kept;
            }
            other => {
                h.ring_bytes += other.wire_len();
                h.ring.push_back(other);
            }
        }
    }

    /// Moves frames from a helper's buffer into its pipe socket, and reopens the HS-Path
    /// receive window by what left the buffer.
    fn helper_pump(&mut self, k: usize) {
        if !self.sub[k + 1].alive {
            return;
        }
        let pf = flow_pipe(k);
        while self.flows[pf].notsent() < self.sc.notsent_lowat {
            let Some(fr) = self.helpers[k].ring.pop_front() else {
                break;
            };
            let len = fr.wire_len();
            self.helpers[k].ring_bytes -= len;
            self.flows[pf].write(len, fr);
        }
        self.kick(pf);
        let hf = flow_hs(k);
        let room = self
            .sc
            .helper_buffer
            .saturating_sub(self.helpers[k].ring_bytes);
        self.flows[hf].set_rwnd(Some(room));
        let before = self.flows[hf].notsent();
        self.kick(hf);
        if self.flows[hf].notsent() != before {
            self.proxy_pump();
        }
    }

    fn primary_frame(&mut self, fr: SimFrame, via: usize) {
        match fr {
            SimFrame::Data { dsn, payload, .. } => {
                let len = payload.len() as u64;
                match self.receiver.on_data(self.now, STREAM, dsn, payload) {
                    Ok(new) => {
                        let s = &mut self.sub[via];
                        s.useful += new;
                        s.duplicate += len - new;
                        if new > 0 {
                            s.last_useful = Some(self.now);
                        }
                    }
                    Err(_) => self.corrupted = true,
                }
            }
            SimFrame::Fin { size, .. } => {
                if self.receiver.on_fin(STREAM, size).is_err() {
                    self.corrupted = true;
                }
            }
            SimFrame::Cancel { .. } => {}
        }
        while let Some(b) = self.receiver.read(STREAM, usize::MAX) {
            let end = self.read_pos + b.len() as u64;
            if end > self.expected.len() as u64
                || self.expected[self.read_pos as usize..end as usize] != b[..]
            {
                self.corrupted = true;
            }
            self.read_pos = end;
        }
        if self
            .receiver
            .stream(STREAM)
            .is_some_and(|s| s.is_finished())
            && self.done_at.is_none()
        {
            self.done_at = Some(self.now);
        }
    }

    /// The uplink delay from the primary to the proxy: over the PS-Path, or over a live helper.
    fn uplink_delay(&self) -> Option<Duration> {
        match self.uplink_via()? {
            0 => Some(self.sc.ps.owd()),
            s => Some(self.sc.helpers[s - 1].pipe.owd() + self.sc.helpers[s - 1].hs.owd()),
        }
    }

    /// The subflow the primary's control frames take: the PS-Path, else a helper's; one that
    /// is not stale first, as the daemons' control link avoids a stalled one.
    fn uplink_via(&self) -> Option<usize> {
        (0..self.sub.len())
            .find(|&s| self.usable(s))
            .or_else(|| (0..self.sub.len()).find(|&s| self.sub[s].alive))
    }

    fn send_acks(&mut self) {
        // Over the PS-Path, or over a live helper's pipe and HS-Path.
        let Some(via) = self.uplink_via() else {
            return;
        };
        let first_hop = if via == 0 {
            Duration::ZERO
        } else {
            self.sc.helpers[via - 1].pipe.owd()
        };
        while let Some(a) = self.receiver.poll_ack(self.now) {
            if via > 0 {
                let wire = DATA_ACK_WIRE - crate::energy::HEADER;
                let hop = self.now + first_hop;
                self.radios
                    .crossed_pipe(via - 1, false, self.now, hop, wire);
            }
            if let Some(t) = self.arrival_at_proxy(via, self.now + first_hop, DATA_ACK_WIRE) {
                self.at(t, Ev::DataAck(a));
            }
        }
        if let Some(d) = self.receiver.next_ack_deadline() {
            let d = d.max(self.now);
            if self.ack_timer_at.is_none_or(|t| t > d) {
                self.ack_timer_at = Some(d);
                self.at(d, Ev::AckTimer);
            }
        }
    }

    fn feedback(&mut self, k: usize) {
        if !self.sub[k + 1].alive || self.done_at.is_some() {
            return;
        }
        let h = &self.helpers[k];
        let pipe = &self.flows[flow_pipe(k)];
        let flexible = self.sc.feedback_route == FeedbackRoute::Flexible;
        // As the helper daemon: under flexible feedback an idle helper reports its pipe's
        // propagation delay, and only news (`mpbond_core::feedback`).
        let busy = h.ring_bytes > 0
            || pipe.outq() > mpbond_core::feedback::BUFFER_SLACK
            || self.flows[flow_hs(k)].outq() > 0;
        let rtt = if flexible && !busy && h.pipe_est.min_rtt() > 0.0 {
            h.pipe_est.min_rtt()
        } else {
            h.pipe_est.srtt()
        };
        let fb = PipeFeedback {
            subflow: SubflowId(k as u8 + 1),
            throughput_bps: (h.pipe_est.throughput() * 8.0) as u64,
            rtt_us: (rtt * 1e6) as u32,
            buffered: h.ring_bytes + pipe.outq(),
            timestamp_us: self.now.as_micros(),
            uplink: false,
        };
        let now = self.now;
        if flexible && !self.helpers[k].gate.should_send(now, &fb, busy) {
            self.at(self.now + self.sc.feedback_interval, Ev::FeedbackTimer(k));
            return;
        }
        let min_rtt = PipeMinRtt {
            subflow: fb.subflow,
            min_rtt_us: (self.helpers[k].pipe_est.min_rtt() * 1e6) as u32,
            timestamp_us: fb.timestamp_us,
            uplink: false,
        };
        let min_rtt = (self.sc.pipe_min_rtt && self.helpers[k].min_gate.should_send(now, &min_rtt))
            .then_some(min_rtt);
        let spec = &self.sc.helpers[k];
        let arrives = match self.sc.feedback_route {
            FeedbackRoute::Flexible if self.flows[flow_hs(k)].outq() == 0 && self.usable(0) => {
                let wire = FEEDBACK_WIRE - crate::energy::HEADER;
                let hop = self.now + spec.pipe.owd();
                self.radios.crossed_pipe(k, true, self.now, hop, wire);
                self.arrival_at_proxy(0, hop, FEEDBACK_WIRE)
            }
            _ => self.arrival_at_proxy(k + 1, self.now, FEEDBACK_WIRE),
        };
        if let Some(t) = arrives {
            self.at(t, Ev::Feedback(k, fb, min_rtt));
        }
        self.at(self.now + self.sc.feedback_interval, Ev::FeedbackTimer(k));
    }

    /// When `bytes` sent toward the proxy at `at` over subflow `s`'s WAN path arrive there:
    /// its uplink's service (where modelled) and its one-way delay. None if that uplink
    /// never serves again.
    fn arrival_at_proxy(&mut self, s: usize, at: Time, bytes: u64) -> Option<Time> {
        let owd = if s == 0 {
            self.sc.ps.owd()
        } else {
            self.sc.helpers[s - 1].hs.owd()
        };
        let left = match self.up[s].as_mut() {
            Some(u) => u.carry(at, bytes)?,
            None => at,
        };
        let wire = bytes.saturating_sub(crate::energy::HEADER);
        self.radios.sent(Iface::wan_of_subflow(s), left, wire);
        Some(left + owd)
    }

    /// When a rejoin of subflow `s` begun now is up at the proxy: the primary reconnects its
    /// PS-Path at once; for a helper the request crosses the pipe and the helper connects
    /// over its HS-Path. The handshake's answer waits behind what the dead connection left
    /// queued on the link (the emulator's queue is shared) and for the link to serve at all
    /// (an outage; the SYN waits for the uplink's, where modelled); then the join takes one
    /// more round trip. None if the link never serves again.
    fn handshake_done(&mut self, s: usize) -> Option<Time> {
        let sc = self.sc;
        let (path, ask) = if s == 0 {
            (&sc.ps, Duration::ZERO)
        } else {
            let h = &sc.helpers[s - 1];
            (&h.hs, h.pipe.owd())
        };
        let left = self.flows[flow_of_subflow(s)].link().queued_bytes();
        let syn_at = self.arrival_at_proxy(s, self.now + ask, SYN_WIRE)?;
        let served = Server::default().finish(&path.rate, syn_at, left + HANDSHAKE_BYTES)?;
        Some(served + path.owd() + path.rtt)
    }

    /// Subflow `s` is back: new connections (the helper's pipe too, whose data in flight
    /// was dropped with the subflow), fresh estimates, an empty relay buffer, and the sender
    /// schedules on it again.
    fn subflow_up(&mut self, s: usize) {
        if self.sub[s].alive || self.done_at.is_some() {
            return;
        }
        let sc = self.sc;
        let mss = sc.tcp.mss;
        let now = self.now;
        let renew = |w: &mut Self, f: usize, p: &PathSpec| {
            w.flows[f] = Tcp::new(sc.tcp.clone(), link_of(p, mss), p.owd()).opened_at(now);
            w.epoch[f] += 1;
            w.timer_at[f] = None;
            w.pace_at[f] = None;
            w.guards[f] = guard_of(sc, f);
            w.drains[f] = (DrainRate::default(), None);
        };
        if s == 0 {
            renew(self, 0, &sc.ps);
            self.proxy_est[0] = fresh_estimator(sc, sc.ps.rtt, now);
        } else {
            let k = s - 1;
            let h = &sc.helpers[k];
            renew(self, flow_hs(k), &h.hs);
            renew(self, flow_pipe(k), &h.pipe);
            self.proxy_est[s] = fresh_estimator(sc, h.hs.rtt, now);
            let cancelled = self.helpers[k].cancelled_bytes;
            let (mut helper, pipe) = fresh_helper(sc, h, now);
            helper.cancelled_bytes = cancelled;
            self.helpers[k] = helper;
            self.pipe_state[k] = pipe;
            self.at(now + sc.feedback_interval, Ev::FeedbackTimer(k));
        }
        tracing::trace!(
            target: "mpbond::sched",
            t = now.as_secs_f64(),
            subflow = %SubflowId(s as u8),
            "rejoined"
        );
        self.sub[s].alive = true;
        self.sub[s].rejoins += 1;
        let kind = if s == 0 {
            PathKind::Direct
        } else {
            PathKind::Helper
        };
        self.sender.add_subflow(SubflowId(s as u8), kind);
        self.proxy_pump();
    }

    fn stall_check(&mut self) {
        let limit = self.sc.stall_timeout;
        if self.sub[0].alive && self.wan_stalled(0, limit) {
            // The proxy sees its own PS-Path stall.
            self.at(self.now, Ev::SubflowDown(0));
        }
        for k in 0..self.helpers.len() {
            if !self.sub[k + 1].alive {
                continue;
            }
            if self.wan_stalled(k + 1, limit) {
                self.at(self.now, Ev::SubflowDown(k + 1));
            } else if self.flows[flow_pipe(k)].stalled_for(self.now) >= limit {
                // The helper or primary sees the pipe stall and tells the proxy.
                let d = self.uplink_delay().unwrap_or_default();
                self.at(self.now + d, Ev::SubflowDown(k + 1));
            }
        }
        if self.done_at.is_none() {
            self.at(self.now + STALL_CHECK, Ev::StallCheck);
        }
    }

    /// Whether subflow `s`'s WAN path is dead by the daemons' rule (`mpbond_daemon::
    /// liveness`): stalled for the stall timeout with no dead timeout, or stale for the dead
    /// timeout. On the way it makes the path stale when it stalls (its data goes elsewhere,
    /// its connections stay) and brings a stale one back when its TCP has made progress and
    /// delivered what it held ([`BACK_UNACKED`]).
    fn wan_stalled(&mut self, s: usize, limit: Duration) -> bool {
        let f = flow_of_subflow(s);
        let dead_after = self.sc.dead_timeout;
        if let Some((since, progress)) = self.sub[s].stale {
            if self.flows[f].last_progress() > progress && self.flows[f].unacked() <= BACK_UNACKED {
                self.sub[s].stale = None;
                tracing::trace!(
                    target: "mpbond::sched",
                    t = self.now.as_secs_f64(),
                    subflow = %SubflowId(s as u8),
                    stale_for = self.now.saturating_since(since).as_secs_f64(),
                    "back"
                );
                self.sender.resume_subflow(SubflowId(s as u8));
                self.proxy_pump();
                return false;
            }
            return self.now.saturating_since(since) >= dead_after;
        }
        if self.flows[f].stalled_for(self.now) < limit {
            return false;
        }
        if dead_after.is_zero() {
            return true;
        }
        tracing::trace!(
            target: "mpbond::sched",
            t = self.now.as_secs_f64(),
            subflow = %SubflowId(s as u8),
            "stale"
        );
        self.sub[s].stale = Some((self.now, self.flows[f].last_progress()));
        self.sub[s].stales += 1;
        self.sender.suspend_subflow(SubflowId(s as u8));
        self.proxy_pump();
        false
    }

    /// A subflow that carries data: alive and not stale.
    fn usable(&self, s: usize) -> bool {
        self.sub[s].alive && self.sub[s].stale.is_none()
    }

    fn views(&self) -> Vec<PathView> {
        let mut v = Vec::with_capacity(self.sub.len());
        for (s, st) in self.sub.iter().enumerate() {
            if !st.alive || st.stale.is_some() {
                continue;
            }
            let tcp = &self.flows[flow_of_subflow(s)];
            let est = &self.proxy_est[s];
            let mut p = PathView::new(
                SubflowId(s as u8),
                if s == 0 {
                    PathKind::Direct
                } else {
                    PathKind::Helper
                },
            );
            p.idle = tcp.notsent() < self.sc.notsent_lowat;
            p.rtt = est.srtt();
            p.min_rtt = est.min_rtt();
            p.throughput = est.throughput();
            p.rate_shortfall = est.rate_shortfall();
            p.cwnd = tcp.cwnd();
            p.inflight = tcp.inflight();
            p.queued = tcp.outq();
            // The kernel's split: `tcpi_bytes_acked` is the cumulative ACK only, and the
            // bytes SACKed above it are a count of their own.
            p.bytes_acked = tcp.cumulative_acked();
            p.loss_rate = tcp.loss_rate();
            p.recovering = tcp.recovering();
            p.sacked = tcp.sacked();
            if s > 0 {
                p.pipe = self.pipe_state[s - 1].view_at(p.bytes_acked, tcp.sacked());
            }
            if self.sc.radio_state {
                p.wan_idle = self.radios.idle_for(Iface::wan_of_subflow(s), self.now);
                p.power = Some(PathPower {
                    wan: self.sc.wan_radio,
                    pipe: (s > 0).then_some(self.sc.pipe_radio),
                    uplink: false,
                });
            }
            v.push(p);
        }
        v
    }

    fn proxy_pump(&mut self) {
        if self.done_at.is_some() {
            return;
        }
        loop {
            let mut views = self.views();
            if views.is_empty() {
                break;
            }
            let t = match self.sender.poll_transmit(self.now, &mut views) {
                None => break,
                Some(Output::Cancel(c)) => {
                    if tracing::enabled!(target: "mpbond::sched", tracing::Level::TRACE) {
                        tracing::trace!(
                            target: "mpbond::sched",
                            t = self.now.as_secs_f64(),
                            to = %c.subflow,
                            start = c.start,
                            end = c.end,
                            paths = %mpbond_core::path::format_views(&views),
                            "recalled"
                        );
                    }
                    let s = c.subflow.0 as usize;
                    if s > 0 && self.sub[s].alive {
                        let f = flow_hs(s - 1);
                        let fr = SimFrame::Cancel {
                            start: c.start,
                            end: c.end,
                        };
                        self.flows[f].write(CANCEL_WIRE, fr);
                        self.kick(f);
                    }
                    continue;
                }
                Some(Output::Data(t)) => t,
            };
            // The daemons' decision trace (`RUST_LOG=mpbond::sched=trace`), with the
            // simulated time: the same line for the same decision in either.
            if tracing::enabled!(target: "mpbond::sched", tracing::Level::TRACE) {
                tracing::trace!(
                    target: "mpbond::sched",
                    t = self.now.as_secs_f64(),
                    to = %t.subflow,
                    dsn = t.dsn,
                    len = t.payload.len(),
                    reinjected = t.reinjected,
                    paths = %mpbond_core::path::format_views(&views),
                    "sent"
                );
            }
            let s = t.subflow.0 as usize;
            let f = flow_of_subflow(s);
            self.sub[s].scheduled += t.payload.len() as u64;
            if !t.payload.is_empty() {
                let fr = SimFrame::Data {
                    dsn: t.dsn,
                    payload: t.payload,
                    subflow: s,
                };
                self.flows[f].write(fr.wire_len(), fr);
            }
            if let Some(size) = t.fin {
                self.flows[f].write(FIN_WIRE, SimFrame::Fin { size });
            }
            self.kick(f);
        }
    }

    fn result(self) -> SimResult {
        let sc = self.sc;
        let mut paths = vec![FluidPath {
            wan: &sc.ps.rate,
            wan_delay: sc.ps.owd(),
            pipe: None,
            feedback: None,
        }];
        for h in &sc.helpers {
            paths.push(FluidPath {
                wan: &h.hs.rate,
                wan_delay: h.hs.owd(),
                pipe: Some((&h.pipe.rate, h.pipe.owd())),
                feedback: None,
            });
        }
        let lb = lower_bound(sc.size, &paths, sc.time_limit);
        let download = self.done_at.map(|t| t.as_secs_f64());
        let subflows: Vec<SubflowResult> = self
            .sub
            .iter()
            .enumerate()
            .map(|(s, st)| {
                let flows: Vec<&Tcp<SimFrame>> = if s == 0 {
                    vec![&self.flows[0]]
                } else {
                    vec![&self.flows[flow_hs(s - 1)], &self.flows[flow_pipe(s - 1)]]
                };
                SubflowResult {
                    name: if s == 0 {
                        "ps".to_string()
                    } else {
                        format!("helper{s}")
                    },
                    completion_s: st.last_useful.map(|t| t.as_secs_f64()),
                    bytes: st.useful,
                    duplicate_bytes: st.duplicate,
                    scheduled_bytes: st.scheduled,
                    retransmitted_packets: flows.iter().map(|f| f.stats().retransmissions).sum(),
                    timeouts: flows.iter().map(|f| f.stats().timeouts).sum(),
                    died_s: st.died_at.map(|t| t.as_secs_f64()),
                    rejoins: st.rejoins,
                    stales: st.stales,
                    wan_queue_drops: flows[0].link().stats().queue_drops,
                    pipe_queue_drops: flows.get(1).map_or(0, |f| f.link().stats().queue_drops),
                    wan_capacity: self
                        .done_at
                        .and_then(|end| flows[0].link().capacity(Time::ZERO, end)),
                    pipe_capacity: self
                        .done_at
                        .and_then(|end| flows.get(1)?.link().capacity(Time::ZERO, end)),
                    guard_caps: self.guard_caps[s],
                    hystart_exits: flows
                        .iter()
                        .map(|f| f.stats().hystart_train_exits + f.stats().hystart_delay_exits)
                        .sum(),
                    hystart_exit: flows[0].stats().first_hystart_exit.map(|(at, window, e)| {
                        HyStartExit {
                            at_s: at.as_secs_f64(),
                            window,
                            test: match e {
                                Exit::Delay => "delay",
                                Exit::AckTrain => "ack_train",
                            },
                        }
                    }),
                }
            })
            .collect();
        let times: Vec<f64> = subflows
            .iter()
            .filter(|s| s.bytes > 0)
            .filter_map(|s| s.completion_s)
            .collect();
        let gap = if times.is_empty() {
            0.0
        } else {
            times.iter().cloned().fold(f64::MIN, f64::max)
                - times.iter().cloned().fold(f64::MAX, f64::min)
        };
        let st = self.sender.stats();
        let energy = self.radios.report();
        let verified = !self.corrupted
            && self.done_at.is_some()
            && self.read_pos == sc.size
            && subflows.iter().map(|s| s.bytes).sum::<u64>() == sc.size;
        SimResult {
            scheduler: sc.scheduler.clone(),
            size_bytes: sc.size,
            download_time_s: download,
            lower_bound_s: lb,
            ratio_to_bound: download.map(|d| d / lb),
            completion_gap_s: gap,
            subflows,
            reinjection: Reinjection {
                recalls: st.recalls,
                recalled_bytes: st.recalled_bytes,
                reinjected_bytes: st.reinjected_bytes,
                rescued_bytes: st.rescued_bytes,
                cancelled_at_helpers: self.helpers.iter().map(|h| h.cancelled_bytes).sum(),
                window_rescues: st.window_rescues,
                window_rescued_bytes: st.window_rescued_bytes,
                late_rescues: st.late_rescues,
                late_rescued_bytes: st.late_rescued_bytes,
                loss_rescues: st.loss_rescues,
                loss_rescued_bytes: st.loss_rescued_bytes,
                tail_copied_bytes: st.tail_copied_bytes,
            },
            verified,
            transfer_energy_j: energy.iter().map(|d| d.joules - d.tail_joules).sum(),
            energy,
            events: self.events,
            timeline: self.timeline,
        }
    }
}

/// Runs a scenario to completion (or its time limit).
pub fn run(sc: &Scenario) -> Result<SimResult, SimError> {
    Ok(World::new(sc)?.run())
}
