//! A session: one primary's bond, seen from the proxy or from the primary.
//!
//! Both ends run the same actor. It owns the core [`Sender`] (downlink at the proxy, uplink at
//! the primary) and [`Receiver`], the writing halves of every link, and the application side of
//! every stream. Reader tasks (one per link), application tasks (two per stream) and writability
//! watchers (one per link) feed it [`Event`]s; after each batch of events it runs the scheduler
//! (`Session::pump`) and writes what it decided.
//!
//! The actor is the only writer of every link it owns, so frame order on a link is the order of
//! its decisions, which the cancel-before-resend rule of the core relies on.

mod frames;
mod links;
mod streams;

pub use streams::socks_reply as streams_reply;

pub mod app;

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use mpbond_core::{
    by_name, Output, PamsConfig, PathKind, Receiver, ReceiverConfig, Sender, SenderConfig, Time,
};
use mpbond_proto::{Destination, Frame, Reason, SessionId, StreamId, SubflowId};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot, watch};

use crate::config::Tuning;
use crate::keys::{KeyPair, PublicKey};
use crate::link::Link;
use crate::status::{Metrics, SessionStatus};

use app::Credit;
use links::{LinkState, SubflowState};
use streams::StreamState;

/// Identifies a link inside one session.
pub type LinkId = u64;

/// Which end of the bond this session runs at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    /// At the proxy: streams are opened by the primary and connect to origins.
    Proxy,
    /// At the primary: streams come from applications.
    Primary,
}

/// What a primary needs to let helpers join its session.
#[derive(Clone, Debug)]
pub struct TicketIssuer {
    /// The primary's key pair.
    pub me: KeyPair,
    /// The proxy's key.
    pub proxy_key: PublicKey,
    /// The proxy's address, as helpers should dial it.
    pub proxy_addr: String,
}

/// Everything needed to start a session.
#[derive(Clone, Debug)]
pub struct SessionSpec {
    /// Which end.
    pub side: Side,
    /// Its id.
    pub id: SessionId,
    /// The other end's name (the primary's at the proxy).
    pub peer_name: String,
    /// Scheduler for the data this end sends.
    pub scheduler: String,
    /// Shared tuning.
    pub tuning: Tuning,
    /// Most streams.
    pub max_streams: usize,
    /// Process counters.
    pub metrics: Arc<Metrics>,
    /// Primary only: ticket issuing for helpers.
    pub tickets: Option<TicketIssuer>,
    /// Proxy only: refuse origins in these networks.
    pub deny_origins: Vec<crate::net::Cidr>,
    /// How long the session survives without any link.
    pub linger: Duration,
    /// Primary only: relay an application's bytes before the proxy confirms the origin
    /// (`[primary] early_data`).
    pub early_data: bool,
    /// Primary only: the radio of its own PS-Path (`[primary] wan_radio`), for the uplink
    /// scheduler's energy-aware admission; helpers declare theirs in `RADIOS` frames.
    pub wan_radio: Option<mpbond_proto::Radio>,
}

/// Coarse state, watched by the primary's supervisor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Health {
    /// A direct subflow (the PS-Path) is up.
    pub direct: bool,
    /// Number of subflows.
    pub subflows: usize,
    /// The session has ended.
    pub ended: bool,
}

/// Events for the session actor.
#[derive(Debug)]
pub enum Event {
    /// A link that is already a subflow (PS-Path or HS-Path) with its id.
    AddLink {
        /// The subflow id the proxy assigned.
        subflow: SubflowId,
        /// Direct or helper.
        kind: PathKind,
        /// Name for status.
        name: String,
        /// The link.
        link: Link,
        /// Frames read together with the setup frame.
        leftover: Vec<Frame>,
        /// Fired (dropped) when the link is gone.
        gone: Option<oneshot::Sender<()>>,
    },
    /// Proxy: a helper (or the primary itself, rejoining) presented a valid ticket.
    Join {
        /// The link.
        link: Link,
        /// Helper path, or the primary's own (direct) path.
        kind: PathKind,
        /// The helper's name (or key fingerprint).
        helper_name: String,
        /// Frames read together with `MP_JOIN`.
        leftover: Vec<Frame>,
    },
    /// Primary: a pipe to a helper is up.
    AddPipe {
        /// The helper's key.
        helper: PublicKey,
        /// Its name.
        helper_name: String,
        /// The pipe's name.
        name: String,
        /// Pipe policy of this helper.
        policy: String,
        /// The link.
        link: Link,
        /// Fired (dropped) when the pipe is gone.
        gone: oneshot::Sender<()>,
    },
    /// Frames from a link's reader.
    Frames {
        /// Which link.
        link: LinkId,
        /// The frames, in order.
        frames: Vec<Frame>,
    },
    /// A link's reader ended.
    LinkDown {
        /// Which link.
        link: LinkId,
        /// Why.
        why: String,
    },
    /// A link's socket can take more data.
    Writable {
        /// Which link.
        link: LinkId,
    },
    /// Primary: an application connection to carry.
    Open {
        /// Where it goes.
        dest: Destination,
        /// The application's socket.
        sock: TcpStream,
        /// It came through SOCKS5 and waits for a reply.
        socks: bool,
    },
    /// Proxy: the origin connection for a stream is up or failed.
    OriginReady {
        /// The stream.
        stream: StreamId,
        /// The socket, or why not.
        result: Result<TcpStream, Reason>,
    },
    /// Bytes from an application socket.
    AppData {
        /// The stream.
        stream: StreamId,
        /// The bytes.
        data: Bytes,
    },
    /// The application has nothing more to read right now, with buffer room to spare.
    AppIdle {
        /// The stream.
        stream: StreamId,
    },
    /// The application closed its sending side.
    AppEof {
        /// The stream.
        stream: StreamId,
    },
    /// The application socket failed.
    AppFailed {
        /// The stream.
        stream: StreamId,
        /// Why.
        why: String,
    },
    /// The application writer's queue drained below the low-water mark.
    AppDrained {
        /// The stream.
        stream: StreamId,
    },
    /// The application writer delivered the FIN.
    AppWriteDone {
        /// The stream.
        stream: StreamId,
    },
    /// Asks for a status snapshot.
    Status {
        /// Where to send it.
        reply: oneshot::Sender<SessionStatus>,
    },
    /// Ends the session.
    Stop,
}

/// A handle to a running session.
#[derive(Clone, Debug)]
pub struct SessionHandle {
    /// Its id.
    pub id: SessionId,
    /// Its event queue.
    pub tx: mpsc::Sender<Event>,
    /// Its health.
    pub health: watch::Receiver<Health>,
}

impl SessionHandle {
    /// A status snapshot, if the session still runs.
    pub async fn status(&self) -> Option<SessionStatus> {
        let (reply, rx) = oneshot::channel();
        self.tx.send(Event::Status { reply }).await.ok()?;
        rx.await.ok()
    }
}

/// Application bytes queued for a writer task before the session stops reading from the
/// reassembly buffer.
const APP_QUEUE: u64 = 512 << 10;
/// Scheduler tick.
const TICK: Duration = Duration::from_millis(5);
/// Ping a link after this much silence from our side.
const PING_EVERY: Duration = Duration::from_millis(250);

/// The session actor.
pub struct Session {
    spec: SessionSpec,
    tx: mpsc::Sender<Event>,
    epoch: Instant,
    sender: Sender,
    receiver: Receiver,
    links: HashMap<LinkId, LinkState>,
    subflows: BTreeMap<SubflowId, SubflowState>,
    streams: HashMap<StreamId, StreamState>,
    /// Streams with received bytes or a FIN to hand to their application.
    readable: BTreeSet<StreamId>,
    next_link: LinkId,
    next_stream: u32,
    next_subflow: u8,
    session_credit: Arc<Credit>,
    /// Primary: helpers whose `INIT_MP_JOIN` is out, and when.
    joining: HashMap<PublicKey, Instant>,
    /// Primary: helpers that must be asked to join again after this time.
    rejoin_after: HashMap<PublicKey, Instant>,
    /// Whether this end itself was away between liveness checks (`crate::liveness`).
    away: crate::liveness::AwayCheck,
    /// Primary: the subflow of each joined helper.
    helper_subflow: HashMap<PublicKey, SubflowId>,
    /// Primary: each helper's name and pipe policy.
    pipe_policies: HashMap<PublicKey, (String, String)>,
    /// Since when the session has had no link.
    orphaned_since: Option<Instant>,
    health: watch::Sender<Health>,
    ended: bool,
    /// Streams already counted as failed.
    failed: HashSet<StreamId>,
    /// Proxy: the highest stream id the primary opened (ids only grow).
    highest_peer_stream: u32,
}

impl Session {
    /// Starts a session actor.
    pub fn spawn(spec: SessionSpec) -> Result<SessionHandle, String> {
        let (tx, rx) = mpsc::channel(1024);
        let t = &spec.tuning;
        let pams = PamsConfig {
            lookahead_rtts: (t.pams_lookahead > 0.0).then_some(t.pams_lookahead),
            reinjection: t.pams_reinjection,
            shortfall_sigmas: t.recall_shortfall,
            pad: t.pad_model()?,
            time_value: t.time_value,
            late_bind: (!t.late_bind.0.is_zero()).then_some(t.late_bind.0.as_secs_f64()),
            late_bind_horizon: t.late_bind_horizon.0.as_secs_f64(),
            ..PamsConfig::default()
        };
        let scheduler = by_name(&spec.scheduler, pams).map_err(|e| e.to_string())?;
        let sender = Sender::new(
            scheduler,
            SenderConfig {
                max_segment: t.segment.0 as usize,
                stream_capacity: t.stream_buffer.0,
                max_stream_capacity: t.window_max.0,
                initial_window: t.recv_window.0,
                max_streams: spec.max_streams,
                window_rescue: t.window_rescue,
                late_rescue: t.late_rescue,
                loss_rescue: t.loss_rescue,
                tail_copy: t.tail_copy,
                ..SenderConfig::default()
            },
        );
        let receiver = Receiver::new(ReceiverConfig {
            stream_window: t.recv_window.0,
            max_stream_window: t.window_max.0,
            max_streams: spec.max_streams,
            // An immediate ACK per 1/16 of the window: often enough to keep the sender's
            // window and credit moving, rare enough not to cost a frame per 32 KiB at Gbit/s
            // (slow streams are still acknowledged within the 10 ms delay).
            ack_every: (t.recv_window.0 / 16).max(32 << 10),
            ..ReceiverConfig::default()
        });
        let (health, health_rx) = watch::channel(Health::default());
        let id = spec.id;
        let s = Session {
            session_credit: Credit::new(t.session_buffer.0),
            tx: tx.clone(),
            epoch: Instant::now(),
            sender,
            receiver,
            links: HashMap::new(),
            subflows: BTreeMap::new(),
            streams: HashMap::new(),
            readable: BTreeSet::new(),
            next_link: 1,
            next_stream: 1,
            next_subflow: 1,
            joining: HashMap::new(),
            rejoin_after: HashMap::new(),
            away: Default::default(),
            helper_subflow: HashMap::new(),
            pipe_policies: HashMap::new(),
            orphaned_since: Some(Instant::now()),
            health,
            ended: false,
            failed: HashSet::new(),
            highest_peer_stream: 0,
            spec,
        };
        Metrics::inc(&s.spec.metrics.sessions_opened);
        Metrics::inc(&s.spec.metrics.sessions_active);
        tokio::spawn(s.run(rx));
        Ok(SessionHandle {
            id,
            tx,
            health: health_rx,
        })
    }

    fn now(&self) -> Time {
        Time(self.epoch.elapsed().as_nanos() as u64)
    }

    async fn run(mut self, mut rx: mpsc::Receiver<Event>) {
        let mut tick = tokio::time::interval(TICK);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        let mut last_slow = Instant::now();
        tracing::info!(session = %self.spec.id, side = ?self.spec.side, peer = %self.spec.peer_name, "session started");
        while !self.ended {
            tokio::select! {
                ev = rx.recv() => {
                    let Some(ev) = ev else { break };
                    self.handle(ev);
                    // Take whatever else is queued before scheduling, in bounded batches.
                    for _ in 0..256 {
                        match rx.try_recv() {
                            Ok(ev) => self.handle(ev),
                            Err(_) => break,
                        }
                    }
                }
                _ = tick.tick() => {
                    self.refresh_links();
                    if last_slow.elapsed() >= Duration::from_millis(100) {
                        last_slow = Instant::now();
                        self.slow_tick();
                    }
                }
            }
            self.pump();
            self.publish_health();
        }
        self.shutdown();
    }

    fn handle(&mut self, ev: Event) {
        match ev {
            Event::AddLink {
                subflow,
                kind,
                name,
                link,
                leftover,
                gone,
            } => {
                // A session the primary opened through a helper: its first subflow is an
                // HS-Path as much as one that joins later.
                let hs_path = self.spec.side == Side::Proxy && kind == PathKind::Helper;
                let id = self.add_link(link, name, Some(subflow), None, gone, hs_path);
                self.attach(id, subflow, kind, None, None);
                self.on_frames(id, leftover);
            }
            Event::Join {
                link,
                kind,
                helper_name,
                leftover,
            } => self.on_join(link, kind, helper_name, leftover),
            Event::AddPipe {
                helper,
                helper_name,
                name,
                policy,
                link,
                gone,
            } => self.on_pipe(helper, helper_name, name, policy, link, gone),
            Event::Frames { link, frames } => self.on_frames(link, frames),
            Event::LinkDown { link, why } => self.link_down(link, &why),
            Event::Writable { link } => self.on_writable(link),
            Event::Open { dest, sock, socks } => self.open_stream(dest, sock, socks),
            Event::OriginReady { stream, result } => self.origin_ready(stream, result),
            Event::AppData { stream, data } => self.app_data(stream, data),
            Event::AppEof { stream } => self.app_eof(stream),
            Event::AppIdle { stream } => self.sender.set_source_idle(stream),
            Event::AppFailed { stream, why } => self.app_failed(stream, &why),
            Event::AppDrained { stream } => {
                self.readable.insert(stream);
            }
            Event::AppWriteDone { stream } => {
                if let Some(s) = self.streams.get_mut(&stream) {
                    s.app_write_done = true;
                }
                self.maybe_finish(stream);
            }
            Event::Status { reply } => {
                let _ = reply.send(self.status());
            }
            Event::Stop => self.ended = true,
        }
    }

    /// Schedules and writes: hands received bytes to applications, sends due ACKs, and asks
    /// the core sender for data while subflows are idle.
    fn pump(&mut self) {
        let now = self.now();
        self.deliver_to_apps();
        while let Some(a) = self.receiver.poll_ack(now) {
            self.send_control(&Frame::DataAck(a));
        }
        let mut views = self.views();
        while !views.is_empty() {
            let Some(out) = self.sender.poll_transmit(now, &mut views) else {
                break;
            };
            match out {
                Output::Cancel(c) => {
                    if tracing::enabled!(target: "mpbond::sched", tracing::Level::TRACE) {
                        trace_recall(&c, &views);
                    }
                    let f = Frame::DataCancel {
                        stream: c.stream,
                        start: c.start,
                        end: c.end,
                    };
                    if let Some(v) = quiet_helper(&views, c.subflow) {
                        tracing::debug!(
                            target: "mpbond::wake",
                            to = %c.subflow,
                            idle = v.wan_idle,
                            start = c.start,
                            end = c.end,
                            paths = %mpbond_core::path::format_views(&views),
                            "quiet helper woken by a recall"
                        );
                    }
                    if let Some(l) = self.subflow_link(c.subflow, false) {
                        self.push(l, &f);
                        self.flush_link(l);
                    }
                }
                Output::Data(t) => {
                    if tracing::enabled!(target: "mpbond::sched", tracing::Level::TRACE) {
                        trace_decision(&t, &views);
                    }
                    if let Some(v) = quiet_helper(&views, t.subflow) {
                        tracing::debug!(
                            target: "mpbond::wake",
                            to = %t.subflow,
                            idle = v.wan_idle,
                            dsn = t.dsn,
                            len = t.payload.len(),
                            fin = t.fin.is_some(),
                            reinjected = t.reinjected,
                            paths = %mpbond_core::path::format_views(&views),
                            "quiet helper woken"
                        );
                    }
                    let Some(l) = self.subflow_link(t.subflow, true) else {
                        // The subflow lost its last link during this pump (a write failed):
                        // it was removed, so these bytes are taken back and rescheduled.
                        self.sender.remove_subflow(t.subflow);
                        views = self.views();
                        continue;
                    };
                    if let Some(sf) = self.subflows.get_mut(&t.subflow) {
                        sf.scheduled += t.payload.len() as u64;
                    }
                    Metrics::add(&self.spec.metrics.bytes_sent, t.payload.len() as u64);
                    if t.reinjected {
                        Metrics::add(&self.spec.metrics.bytes_reinjected, t.payload.len() as u64);
                    }
                    // Cut into frames no larger than the link's records, so a slow path
                    // delivers in small steps, and a helper's link starts a burst in
                    // smaller ones still (`record_size`).
                    if let Some(ls) = self.links.get_mut(&l) {
                        ls.writer.start_burst();
                    }
                    let mut record = self.record_size(l);
                    let mut off = 0;
                    while off < t.payload.len() {
                        let piece = usize::try_from(record)
                            .unwrap_or(usize::MAX)
                            .clamp(1, t.payload.len() - off);
                        if let Some(ls) = self.links.get_mut(&l) {
                            let chunk = &t.payload[off..off + piece];
                            let _ = ls.writer.push_data(t.stream, t.dsn + off as u64, chunk);
                        }
                        self.push_batched(l, record);
                        off += piece;
                        // The ramp's next step, for the next piece and the FIN below.
                        record = self.record_size(l);
                    }
                    if let Some(ls) = self.links.get_mut(&l) {
                        if let Some(size) = t.fin {
                            let _ = ls.writer.push_frame(&Frame::StreamFin {
                                stream: t.stream,
                                final_size: size,
                            });
                        }
                    }
                    self.push_batched(l, record);
                }
            }
            views = self.views();
        }
        let ids: Vec<LinkId> = self.links.keys().copied().collect();
        for l in ids {
            if self.links.get(&l).is_some_and(|s| s.writer.pending() > 0) {
                self.flush_link(l);
            }
        }
    }

    fn publish_health(&mut self) {
        let h = Health {
            direct: self
                .subflows
                .values()
                .any(|s| s.kind == PathKind::Direct && !s.links.is_empty()),
            subflows: self.subflows.len(),
            ended: self.ended,
        };
        self.health.send_if_modified(|old| {
            let changed = *old != h;
            *old = h;
            changed
        });
    }

    fn shutdown(&mut self) {
        tracing::info!(session = %self.spec.id, "session ended");
        let ids: Vec<StreamId> = self.streams.keys().copied().collect();
        for s in ids {
            self.fail_stream(s, Reason::PATH_FAILED, false);
        }
        let links: Vec<LinkId> = self.links.keys().copied().collect();
        for l in links {
            if let Some(mut ls) = self.links.remove(&l) {
                let _ = ls.writer.push_frame(&Frame::Close {
                    code: Reason::SHUTTING_DOWN,
                    reason: "session ended".into(),
                });
                let _ = ls.writer.try_flush();
                ls.stop();
            }
        }
        Metrics::dec(&self.spec.metrics.sessions_active);
        self.ended = true;
        self.publish_health();
    }

    fn status(&self) -> SessionStatus {
        let st = self.sender.stats();
        SessionStatus {
            id: self.spec.id.to_string(),
            side: match self.spec.side {
                Side::Proxy => "proxy".into(),
                Side::Primary => "primary".into(),
            },
            primary: self.spec.peer_name.clone(),
            scheduler: self.sender.scheduler_name().into(),
            streams: self.streams.len(),
            subflows: self.subflow_status(),
            recalls: st.recalls,
            reinjected_bytes: st.reinjected_bytes,
            window_rescued_bytes: st.window_rescued_bytes,
            late_rescued_bytes: st.late_rescued_bytes,
            loss_rescued_bytes: st.loss_rescued_bytes,
            tail_copied_bytes: st.tail_copied_bytes,
        }
    }
}

/// One scheduling decision and the path views it was made from, for offline analysis of
/// PAMS in the lab (`RUST_LOG=mpbond::sched=trace`): per subflow its id, idle flag, PAD
/// inputs (queued, outstanding, throughput, RTT) and, for a helper, the pipe's reported
/// buffer and throughput and what the HS-Path delivered that no report counted (`u`:
/// acknowledged since the report, plus what the helper holds SACKed).
fn trace_decision(t: &mpbond_core::conn::Transmit, views: &[mpbond_core::PathView]) {
    tracing::trace!(
        target: "mpbond::sched",
        to = %t.subflow,
        dsn = t.dsn,
        len = t.payload.len(),
        reinjected = t.reinjected,
        paths = %mpbond_core::path::format_views(views),
        "sent"
    );
}

/// The decision trace's line for a range PAMS took back from a helper (its `DATA_CANCEL`),
/// as the simulator logs it: `recalled`, the subflow it was on, the range, the path views.
fn trace_recall(c: &mpbond_core::conn::Cancel, views: &[mpbond_core::PathView]) {
    tracing::trace!(
        target: "mpbond::sched",
        to = %c.subflow,
        start = c.start,
        end = c.end,
        paths = %mpbond_core::path::format_views(views),
        "recalled"
    );
}

/// The view of `subflow` if it is a helper subflow whose HS-Path has nothing queued and has
/// been quiet for more than a bin of the energy model, and `mpbond::wake` is on: sending
/// on it (data or a recall's cancel) wakes, or keeps awake, the helper's cellular radio.
/// Rare (the end of a transfer), so unlike `mpbond::sched` the log
/// (`RUST_LOG=mpbond::wake=debug`) can stay on in timed runs.
fn quiet_helper(
    views: &[mpbond_core::PathView],
    subflow: mpbond_proto::SubflowId,
) -> Option<&mpbond_core::PathView> {
    if !tracing::enabled!(target: "mpbond::wake", tracing::Level::DEBUG) {
        return None;
    }
    views
        .iter()
        .find(|v| v.id == subflow && v.hs_path_drained() && !v.radio_awake())
}
