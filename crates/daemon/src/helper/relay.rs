//! A helper's relay for one primary: its pipes, its HS-Path, and the buffers between them.
//!
//! Every link has a reader task and a writer task; the writer is the link's only writer and
//! sends control frames (pongs, feedback, `MP_JOIN_OK`) before relayed data. A monitor task
//! sends feedback, pings idle links, detects stalls and picks the pipe that carries downlink
//! data.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mpbond_core::{FeedbackGate, MinRttGate, Time};
use mpbond_proto::{
    Frame, PipeFeedback, PipeMinRtt, Reason, SessionId, SubflowId, MIN_VERSION, VERSION,
};
use tokio::net::TcpStream;
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use super::queue::RelayQueue;
use super::HelperShared;
use crate::config::{BufferingEstimate, FeedbackPolicy};
use crate::keys::PublicKey;
use crate::link::{self, Link, LinkWriter, Security};
use crate::liveness::{AwayCheck, Liveness, Reading, Verdict, Why};
use crate::meter::Meter;
use crate::status::{LinkStatus, Metrics, RelayStatus};
use crate::sys;
use crate::ticket::Ticket;

const PING_EVERY: Duration = Duration::from_millis(250);
/// Flexible feedback rides the HS-Path while it received data this recently, the primary's
/// PS-Path otherwise. Every report on an HS-Path whose data has ended keeps the helper's LTE
/// radio active instead of in its tail, but the other way round is slow while data flows:
/// the pipe queue toward the primary holds the relayed data ahead of the report. A 50 ms
/// window, tried in the lab, made downloads end later (stale reports kept PAMS from rescuing
/// the helper's tail); 200 ms keeps the timing.
const HS_ACTIVE_WINDOW: Duration = Duration::from_millis(200);

/// Control frames for one link's writer.
#[derive(Debug, Default)]
struct Ctrl {
    q: Mutex<VecDeque<Frame>>,
    notify: Notify,
}

impl Ctrl {
    fn push(&self, f: Frame) {
        self.q
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push_back(f);
        self.notify.notify_one();
    }
    fn pop(&self) -> Option<Frame> {
        self.q.lock().unwrap_or_else(|p| p.into_inner()).pop_front()
    }
}

struct Slot {
    id: u64,
    name: String,
    peer: String,
    sock: Arc<TcpStream>,
    ctrl: Arc<Ctrl>,
    tasks: Vec<JoinHandle<()>>,
    /// TCP_INFO, corrected for short packets.
    meter: Meter,
    /// A pipe's drain rate while the buffer keeps it busy (Th_p in feedback).
    goodput: mpbond_core::Goodput,
    /// Live, stale or dead ([`crate::liveness`]).
    live: Liveness,
    last_sent: Arc<AtomicU64>,
    /// When a byte last arrived ([`sys::mono_ms`]).
    last_rx: Arc<AtomicU64>,
    /// `tcpi_data_segs_in` when liveness last looked ([`crate::link::heard_in_kernel`]).
    data_segs_seen: u32,
    /// The reader waits for buffer space: the peer's silence is then our doing.
    blocked: Arc<std::sync::atomic::AtomicBool>,
    /// Whether it carries data (the HS-Path goes quiet when idle, see [`crate::quiet`]).
    activity: crate::quiet::Activity,
}

impl Slot {
    fn stop(&mut self) {
        for t in self.tasks.drain(..) {
            t.abort();
        }
        let _ = socket2::SockRef::from(self.sock.as_ref()).shutdown(std::net::Shutdown::Both);
    }

    fn status(&self) -> LinkStatus {
        LinkStatus {
            name: self.name.clone(),
            peer: self.peer.clone(),
            pending: 0,
            tcp: self.meter.tcp,
            // The helper's relay has no queue guard (docs/design.md).
            pacing_cap: None,
            congestion: crate::sys::congestion(self.sock.as_ref()).unwrap_or_default(),
            stale: self.live.is_stale(),
        }
    }
}

#[derive(Default)]
struct State {
    session: Option<SessionId>,
    subflow: Option<SubflowId>,
    hs: Option<Slot>,
    pipes: Vec<Slot>,
    /// Pipes that carry downlink data now.
    selected: Vec<u64>,
    joining: bool,
    last_down: Option<Instant>,
    /// When uplink data last came in from the primary.
    last_up: Option<Instant>,
    empty_since: Option<Instant>,
    /// Whether each report goes out (`mpbond_core::feedback`): the downlink pipe's to the
    /// proxy, the HS-Path's to the primary.
    down_gate: FeedbackGate,
    up_gate: FeedbackGate,
    /// Whether each report's minimum RTT (`PIPE_MIN_RTT`) goes out with it.
    down_min_gate: MinRttGate,
    up_min_gate: MinRttGate,
    /// Whether the relay itself was away between liveness checks.
    away: AwayCheck,
}

/// The relay for one primary.
pub struct Relay {
    primary: PublicKey,
    primary_name: String,
    shared: Arc<HelperShared>,
    down: Arc<RelayQueue>,
    up: Arc<RelayQueue>,
    state: Mutex<State>,
    next_id: AtomicU64,
    epoch: Instant,
}

enum Which {
    Hs,
    Pipe,
}

impl Relay {
    /// A relay for `primary`, with its monitor running.
    pub fn start(
        primary: PublicKey,
        primary_name: String,
        shared: Arc<HelperShared>,
    ) -> Arc<Relay> {
        let cap = shared.cfg.buffer.0;
        let r = Arc::new(Relay {
            primary,
            primary_name,
            shared,
            down: Arc::new(RelayQueue::new(cap)),
            up: Arc::new(RelayQueue::new(cap)),
            state: Mutex::new(State::default()),
            next_id: AtomicU64::new(1),
            epoch: Instant::now(),
        });
        tokio::spawn(r.clone().monitor());
        r
    }

    fn st(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// True when the relay has neither pipes nor an HS-Path and can be forgotten.
    pub fn idle_for(&self) -> Option<Duration> {
        self.st().empty_since.map(|t| t.elapsed())
    }

    /// Adds a pipe from the primary.
    pub fn add_pipe(self: &Arc<Self>, link: Link, name: String, leftover: Vec<Frame>) {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let slot = self.spawn_link(id, name.clone(), link, Which::Pipe);
        let mut st = self.st();
        st.pipes.push(slot);
        st.empty_since = None;
        if st.selected.is_empty() {
            st.selected.push(id);
        }
        drop(st);
        Metrics::inc(&self.shared.metrics.links_opened);
        tracing::info!(primary = %self.primary_name, pipe = %name, "pipe up");
        for f in leftover {
            let me = self.clone();
            tokio::spawn(async move { me.on_pipe_frame(id, f).await });
        }
    }

    fn spawn_link(self: &Arc<Self>, id: u64, name: String, link: Link, which: Which) -> Slot {
        let Link {
            mut reader,
            mut writer,
            ..
        } = link;
        let sock = writer.sock().clone();
        let last_rx = reader.last_rx();
        let blocked = Arc::new(std::sync::atomic::AtomicBool::new(false));
        crate::link::tune(&mut writer, &self.shared.tuning, false);
        let peer = sock
            .peer_addr()
            .map(|a| a.to_string())
            .unwrap_or_else(|_| "?".into());
        let ctrl = Arc::new(Ctrl::default());
        let last_sent = Arc::new(AtomicU64::new(0));
        let me = self.clone();
        let is_hs = matches!(which, Which::Hs);
        let (rx2, blocked2) = (last_rx.clone(), blocked.clone());
        let rd = tokio::spawn(async move {
            let mut frames = Vec::new();
            loop {
                match reader.read_frames(&mut frames).await {
                    Ok(()) => {
                        blocked2.store(true, Ordering::Relaxed);
                        for f in frames.drain(..) {
                            if is_hs {
                                me.on_hs_frame(id, f).await;
                            } else {
                                me.on_pipe_frame(id, f).await;
                            }
                        }
                        blocked2.store(false, Ordering::Relaxed);
                        // Time spent waiting for buffer space is not the peer's silence.
                        rx2.store(sys::mono_ms(), Ordering::Relaxed);
                    }
                    Err(e) => {
                        me.link_down(id, &e.to_string());
                        return;
                    }
                }
            }
        });
        let me = self.clone();
        let (c2, ls) = (ctrl.clone(), last_sent.clone());
        let wr = tokio::spawn(async move {
            let r = me.write_loop(id, &mut writer, c2, ls, is_hs).await;
            if let Err(e) = r {
                me.link_down(id, &e.to_string());
            }
        });
        Slot {
            id,
            name,
            peer,
            sock,
            ctrl,
            tasks: vec![rd, wr],
            meter: Meter::new(0.0, 0.0),
            goodput: mpbond_core::Goodput::default(),
            live: Liveness::default(),
            last_sent,
            last_rx,
            data_segs_seen: 0,
            blocked,
            activity: crate::quiet::Activity::default(),
        }
    }

    fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    /// Writes control frames first, then relayed data while the kernel wants more.
    async fn write_loop(
        &self,
        id: u64,
        w: &mut LinkWriter,
        ctrl: Arc<Ctrl>,
        last_sent: Arc<AtomicU64>,
        is_hs: bool,
    ) -> std::io::Result<()> {
        let queue = if is_hs { &self.up } else { &self.down };
        loop {
            while let Some(f) = ctrl.pop() {
                let _ = w.push_frame(&f);
            }
            let carries = is_hs || self.st().selected.contains(&id);
            let mut kernel_full = false;
            if carries {
                while w.pending() == 0 {
                    if !w.ready_for_more() {
                        kernel_full = true;
                        break;
                    }
                    let Some(f) = queue.pop() else { break };
                    let _ = w.push_frame(&f);
                    w.try_flush()?;
                }
            }
            let wrote_all = w.try_flush()?;
            if w.pending() == 0 {
                last_sent.store(self.now_ms(), Ordering::Relaxed);
            }
            if !wrote_all || (kernel_full && !w.ready_for_more()) {
                tokio::select! {
                    r = w.sock().writable() => r?,
                    _ = ctrl.notify.notified() => {}
                    _ = tokio::time::sleep(Duration::from_millis(50)) => {}
                }
            } else if carries && queue.has_data() {
                continue;
            } else {
                tokio::select! {
                    _ = ctrl.notify.notified() => {}
                    _ = queue.data.notified() => {}
                    _ = tokio::time::sleep(Duration::from_millis(20)) => {}
                }
            }
        }
    }

    async fn on_pipe_frame(self: &Arc<Self>, pipe: u64, f: Frame) {
        match f {
            Frame::Ping { nonce } => self.ctrl_pipe(pipe, Frame::Pong { nonce }),
            Frame::Pong { .. } | Frame::PipeOpen { .. } | Frame::Extension { .. } => {}
            Frame::InitMpJoin { session, ticket } => {
                let me = self.clone();
                tokio::spawn(async move { me.join(pipe, session, ticket.to_vec()).await });
            }
            Frame::DataCancel { stream, start, end } => {
                // The primary recalled uplink bytes: drop what we still hold of them.
                let n = self.up.cancel(stream, start, end);
                tracing::debug!(%stream, start, end, dropped = n, "uplink cancel");
            }
            Frame::Close { code, reason } => {
                self.link_down(pipe, &format!("primary closed the pipe: {code}: {reason}"));
            }
            other => {
                let hs = {
                    let mut st = self.st();
                    st.last_up = Some(Instant::now());
                    st.hs.is_some()
                };
                if hs {
                    self.up.push(other).await;
                }
            }
        }
    }

    async fn on_hs_frame(self: &Arc<Self>, hs: u64, f: Frame) {
        match f {
            Frame::Ping { nonce } => self.ctrl_hs(Frame::Pong { nonce }),
            Frame::Pong { .. } | Frame::Extension { .. } => {}
            Frame::DataCancel { stream, start, end } => {
                let n = self.down.cancel(stream, start, end);
                tracing::debug!(%stream, start, end, dropped = n, "cancel");
            }
            Frame::Close { code, reason } => {
                self.link_down(hs, &format!("proxy closed the HS-Path: {code}: {reason}"));
            }
            other => {
                self.st().last_down = Some(Instant::now());
                self.down.push(other).await;
            }
        }
    }

    fn ctrl_pipe(&self, pipe: u64, f: Frame) {
        if let Some(p) = self.st().pipes.iter().find(|p| p.id == pipe) {
            p.ctrl.push(f);
        }
    }

    fn ctrl_any_pipe(&self, f: Frame) {
        let st = self.st();
        let p = st
            .pipes
            .iter()
            .find(|p| st.selected.contains(&p.id))
            .or_else(|| st.pipes.first());
        if let Some(p) = p {
            p.ctrl.push(f);
        }
    }

    fn ctrl_hs(&self, f: Frame) {
        if let Some(h) = &self.st().hs {
            h.ctrl.push(f);
        }
    }

    /// The radios of this helper's subflow (`RADIOS`), when configured: the proxy's
    /// scheduler (downlink) and the primary's (uplink) weigh them in their energy-aware
    /// admission. Each gets it on its own link, after the join.
    fn radios(&self) -> Option<Frame> {
        self.shared.cfg.wan_radio.map(|wan| Frame::Radios {
            wan: Some(wan),
            pipe: self.shared.cfg.pipe_radio,
        })
    }

    /// Joins the primary's session at the proxy (MPBond §4.1).
    async fn join(self: Arc<Self>, pipe: u64, session: SessionId, ticket: Vec<u8>) {
        {
            let mut st = self.st();
            if st.session == Some(session) && st.hs.is_some() {
                if let Some(sf) = st.subflow {
                    drop(st);
                    self.ctrl_pipe(
                        pipe,
                        Frame::MpJoinOk {
                            version: VERSION,
                            subflow: sf,
                            session,
                        },
                    );
                    if let Some(radios) = self.radios() {
                        self.ctrl_pipe(pipe, radios);
                    }
                }
                return;
            }
            if st.joining {
                return;
            }
            st.joining = true;
        }
        let r = self.do_join(session, &ticket).await;
        self.st().joining = false;
        let (link, sf, leftover) = match r {
            Ok(x) => x,
            Err(e) => {
                tracing::warn!(primary = %self.primary_name, error = %e, "join failed");
                return;
            }
        };
        {
            let mut st = self.st();
            if let Some(mut old) = st.hs.take() {
                old.stop();
            }
        }
        self.down.clear();
        self.up.clear();
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let slot = self.spawn_link(id, "hs".into(), link, Which::Hs);
        {
            let mut st = self.st();
            st.hs = Some(slot);
            st.session = Some(session);
            st.subflow = Some(sf);
            st.empty_since = None;
        }
        Metrics::inc(&self.shared.metrics.links_opened);
        tracing::info!(primary = %self.primary_name, session = %session, subflow = %sf, "joined the session");
        if let Some(radios) = self.radios() {
            self.ctrl_hs(radios);
        }
        self.ctrl_pipe(
            pipe,
            Frame::MpJoinOk {
                version: VERSION,
                subflow: sf,
                session,
            },
        );
        if let Some(radios) = self.radios() {
            self.ctrl_pipe(pipe, radios);
        }
        for f in leftover {
            self.on_hs_frame(id, f).await;
        }
    }

    async fn do_join(
        &self,
        session: SessionId,
        ticket: &[u8],
    ) -> Result<(Link, SubflowId, Vec<Frame>), String> {
        let t = Ticket::decode(ticket).map_err(|e| e.to_string())?;
        if t.helper_key != self.shared.me.public {
            return Err("the ticket names another helper".into());
        }
        if t.primary_key != self.primary {
            return Err("the ticket was issued by another primary".into());
        }
        let timeout = self.shared.tuning.connect_timeout.0;
        let fut = async {
            let sock = crate::net::connect_name(&t.proxy_addr, self.shared.cfg.hs_bind)
                .await
                .map_err(|e| format!("connect {}: {e}", t.proxy_addr))?;
            let sec = if self.shared.tuning.insecure {
                Security::Insecure
            } else {
                Security::Noise
            };
            let mut link = link::connect(sock, &self.shared.me, &t.proxy_key, sec)
                .await
                .map_err(|e| e.to_string())?;
            link.writer
                .push_frame(&Frame::MpJoin {
                    ver_min: MIN_VERSION,
                    ver_max: VERSION,
                    session,
                    ticket: ticket.to_vec().into(),
                })
                .map_err(|e| e.to_string())?;
            link.writer.flush().await.map_err(|e| e.to_string())?;
            let mut v = Vec::new();
            link.reader
                .read_frames(&mut v)
                .await
                .map_err(|e| e.to_string())?;
            match v.remove(0) {
                Frame::MpJoinOk { subflow, .. } => Ok((link, subflow, v)),
                Frame::Close { code, reason } => Err(format!("proxy refused: {code}: {reason}")),
                other => Err(format!("unexpected {}", other.name())),
            }
        };
        tokio::time::timeout(timeout, fut)
            .await
            .map_err(|_| "timed out".to_string())?
    }

    /// A link failed or closed.
    fn link_down(&self, id: u64, why: &str) {
        let mut st = self.st();
        let sf = st.subflow;
        if st.hs.as_ref().is_some_and(|h| h.id == id) {
            if let Some(mut h) = st.hs.take() {
                h.stop();
            }
            st.session = None;
            st.subflow = None;
            self.down.clear();
            self.up.clear();
            Metrics::inc(&self.shared.metrics.links_failed);
            tracing::warn!(primary = %self.primary_name, why, "HS-Path down");
            if let Some(sf) = sf {
                // The primary reinjects its uplink data and stops using the subflow.
                for p in &st.pipes {
                    p.ctrl.push(Frame::SubflowClose {
                        subflow: sf,
                        reason: Reason::PATH_FAILED,
                    });
                }
            }
        } else if let Some(i) = st.pipes.iter().position(|p| p.id == id) {
            let mut p = st.pipes.remove(i);
            p.stop();
            st.selected.retain(|s| *s != id);
            Metrics::inc(&self.shared.metrics.links_failed);
            tracing::warn!(primary = %self.primary_name, pipe = %p.name, why, "pipe down");
            if st.pipes.is_empty() {
                // No way left to the primary: tear the subflow down (MPBond §4.1).
                if let Some(mut h) = st.hs.take() {
                    if let Some(sf) = sf {
                        h.ctrl.push(Frame::SubflowClose {
                            subflow: sf,
                            reason: Reason::PATH_FAILED,
                        });
                    }
                    let sock = h.sock.clone();
                    let tasks = std::mem::take(&mut h.tasks);
                    // Give the writer a moment to send the SUBFLOW_CLOSE, then close.
                    tokio::spawn(async move {
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        for t in tasks {
                            t.abort();
                        }
                        let _ = socket2::SockRef::from(sock.as_ref())
                            .shutdown(std::net::Shutdown::Both);
                    });
                }
                st.session = None;
                st.subflow = None;
                self.down.clear();
                self.up.clear();
            } else {
                if st.selected.is_empty() {
                    let first = st.pipes[0].id;
                    st.selected.push(first);
                }
                if let (Some(h), Some(sf)) = (&st.hs, sf) {
                    // Downlink bytes in the lost pipe's kernel buffer are gone.
                    h.ctrl.push(Frame::PathReset {
                        subflow: sf,
                        reason: Reason::PATH_FAILED,
                    });
                }
            }
        }
        if st.pipes.is_empty() && st.hs.is_none() {
            st.empty_since.get_or_insert_with(Instant::now);
        }
    }

    /// Feedback, pings, stall detection and pipe selection.
    async fn monitor(self: Arc<Self>) {
        let fb_every = self
            .shared
            .tuning
            .feedback_interval
            .0
            .max(Duration::from_millis(1));
        let mut tick = tokio::time::interval(fb_every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        let mut last_slow = Instant::now();
        loop {
            tick.tick().await;
            if self.idle_for().is_some_and(|d| d > Duration::from_secs(30)) {
                return;
            }
            self.refresh();
            self.feedback();
            if last_slow.elapsed() >= Duration::from_millis(100) {
                last_slow = Instant::now();
                self.liveness_and_selection();
            }
        }
    }

    /// The core's clock: time since the relay started.
    fn now(&self) -> Time {
        Time(self.epoch.elapsed().as_nanos().min(u128::from(u64::MAX)) as u64)
    }

    fn refresh(&self) {
        let now = self.now();
        let mut st = self.st();
        let st = &mut *st;
        for s in st.pipes.iter_mut().chain(st.hs.iter_mut()) {
            let _ = s.meter.read(s.sock.as_ref(), now, &s.name);
        }
        // A selected pipe is backlogged while data waits for it (`Backlog::is_backlogged`).
        let buffered = self.down.bytes();
        for p in st.pipes.iter_mut() {
            let t = &p.meter.tcp;
            let backlog = mpbond_core::goodput::Backlog {
                to_deliver: t.to_deliver(),
                buffered,
                notsent: t.notsent_bytes,
                srtt: f64::from(t.rtt_us) / 1e6,
                min_rtt: f64::from(t.min_rtt_us) / 1e6,
            };
            let backlogged = st.selected.contains(&p.id) && backlog.is_backlogged();
            p.goodput
                .observe(now, t.bytes_acked + t.sacked_bytes, backlogged);
        }
    }

    fn feedback(&self) {
        let mut st = self.st();
        let Some(sf) = st.subflow else { return };
        let ts = self.epoch.elapsed().as_micros() as u64;
        let carrying: Vec<&Slot> = st
            .pipes
            .iter()
            .filter(|p| st.selected.contains(&p.id))
            .collect();
        // What the pipes still have to carry: their kernel queues less the packets the
        // primary has SACKed, which SIOCOUTQ counts until the cumulative ACK covers them (a
        // pipe in loss recovery otherwise reads up to a window long, as a PS-Path did,
        // `TcpInfo::to_deliver`).
        let pipes_outq: u64 = st
            .pipes
            .iter()
            .map(|p| {
                sys::outq(p.sock.as_ref())
                    .unwrap_or(0)
                    .saturating_sub(p.meter.tcp.sacked_bytes)
            })
            .sum();
        // Th_p: while the buffer keeps a pipe busy, the rate it drains it by
        // (`mpbond_core::Goodput`); otherwise the kernel's newest delivery-rate sample, corrected
        // for short packets, or the last drain rate if higher. Not the smoothed estimate
        // the proxy keeps of its own paths: until a path has been seen busy that counts
        // CWND/RTT, and the helper's pipe, fed from a user-space queue under
        // TCP_NOTSENT_LOWAT, is marked application-limited so often that on a 5 ms pipe
        // that floor read well over the pipe's rate and slowed 07's 512 KB download
        // (docs/evaluation.md, item 13).
        let pipe_rate = carrying
            .iter()
            .map(|p| p.goodput.report(p.meter.tcp.delivery_rate))
            .sum::<u64>();
        let buffered = match self.shared.cfg.buffering_estimate {
            BufferingEstimate::Queue => self.down.bytes() + pipes_outq,
            // PAMS divides B_p by the pipe throughput: report the measured delay that way,
            // stale as it is (the last frame out, even once the buffer has drained).
            BufferingEstimate::Measured => {
                (self.down.last_sojourn().as_secs_f64() * pipe_rate as f64) as u64
            }
        };
        // "When there's data transfer on the corresponding path" (MPBond §6.2): the HS-Path
        // carried data lately. A buffer still draining into the pipe does not count: its
        // reports can go via the primary while the helper's cellular radio sleeps.
        let hs_active = st.last_down.is_some_and(|t| t.elapsed() < HS_ACTIVE_WINDOW);
        // Our own reports and pings wait in the pipe socket until acknowledged: under a
        // packet there is not relayed data.
        let down_busy =
            hs_active || self.down.bytes() > 0 || pipes_outq > mpbond_core::feedback::BUFFER_SLACK;
        // The paper's fixed policies (experiment 04's baselines) report as the paper's helper
        // did: every interval, what the pipe's socket says.
        let policy = self.shared.cfg.feedback;
        let idle = policy == FeedbackPolicy::Flexible && !down_busy;
        // Idle, the rate its last backlog drained at: the kernel's newest sample is then of
        // these reports and pings, and on a fast pipe it read 5.9 GB/s after one was
        // acknowledged (a loopback test), which PAMS would have taken for the pipe's rate.
        let rate = if !idle {
            pipe_rate
        } else {
            carrying
                .iter()
                .map(|p| {
                    p.goodput
                        .rate()
                        .map_or_else(|| p.goodput.report(p.meter.tcp.delivery_rate), |g| g as u64)
                })
                .sum::<u64>()
        };
        let down = PipeFeedback {
            subflow: sf,
            throughput_bps: rate * 8,
            rtt_us: carrying
                .iter()
                // Idle, the next byte meets no queue: the propagation delay, as PAD takes
                // for an idle path (`PathView::propagation_owd`). The smoothed RTT still held
                // the last download's queue and decayed over seconds of pings, a new
                // report at every step.
                .map(|p| {
                    let t = &p.meter.tcp;
                    if !idle || t.min_rtt_us == 0 {
                        t.rtt_us
                    } else {
                        t.min_rtt_us.min(t.rtt_us)
                    }
                })
                .min()
                .unwrap_or(0),
            buffered,
            timestamp_us: ts,
            uplink: false,
        };
        let down_min = PipeMinRtt {
            subflow: sf,
            min_rtt_us: carrying
                .iter()
                .map(|p| p.meter.tcp.min_rtt_us)
                .filter(|&m| m > 0)
                .min()
                .unwrap_or(0),
            timestamp_us: ts,
            uplink: false,
        };
        let up = st.hs.as_ref().map(|h| PipeFeedback {
            subflow: sf,
            throughput_bps: h.meter.tcp.delivery_rate * 8,
            rtt_us: h.meter.tcp.rtt_us,
            buffered: self.up.bytes() + sys::outq(h.sock.as_ref()).unwrap_or(0),
            timestamp_us: ts,
            uplink: true,
        });
        tracing::trace!(target: "mpbond::feedback", rate = pipe_rate, buffered,
            queued = self.down.bytes(), acked = ?carrying.iter().map(|p| p.meter.tcp.bytes_acked).collect::<Vec<_>>(),
            "pipe feedback");
        // An idle helper reports only news (`mpbond_core::feedback`): unchanged reports
        // every 20 ms kept the pipe's radios and, forwarded, the primary's LTE radio awake
        // for as long as the session lived.
        let now = self.now();
        let send_down =
            policy != FeedbackPolicy::Flexible || st.down_gate.should_send(now, &down, down_busy);
        if send_down && !down_busy {
            tracing::trace!(target: "mpbond::feedback", rate = down.throughput_bps,
                rtt_us = down.rtt_us, buffered = down.buffered, "idle pipe report sent");
        }
        let up = up.filter(|r| {
            let up_busy = r.buffered > mpbond_core::feedback::BUFFER_SLACK
                || st.last_up.is_some_and(|t| t.elapsed() < HS_ACTIVE_WINDOW);
            st.up_gate.should_send(now, r, up_busy)
        });
        // Each report's minimum RTT, when news (`MinRttGate`): the pipes' in the downlink
        // (`down_min`, the smallest of those carrying, as for the RTT), the HS-Path's uplink.
        let send_min = self.shared.tuning.pipe_min_rtt;
        let up_min = st.hs.as_ref().map(|h| PipeMinRtt {
            subflow: sf,
            min_rtt_us: h.meter.tcp.min_rtt_us,
            timestamp_us: ts,
            uplink: true,
        });
        // The downlink report's route: the HS-Path (`Some(true)`), the pipe and the primary's
        // PS-Path (`Some(false)`), or none (fixed-on-demand while the HS-Path is idle).
        let route = match policy {
            _ if !send_down => None,
            FeedbackPolicy::Always => Some(true),
            FeedbackPolicy::OnDemand => hs_active.then_some(true),
            // The HS-Path idle: the primary carries it over the PS-Path so the helper's WAN
            // radio can sleep.
            FeedbackPolicy::Flexible => Some(hs_active),
        };
        let down_min =
            (route.is_some() && send_min && st.down_min_gate.should_send(now, &down_min))
                .then_some(Frame::PipeMinRtt(down_min));
        let up_min = up_min
            .filter(|m| up.is_some() && send_min && st.up_min_gate.should_send(now, m))
            .map(Frame::PipeMinRtt);
        drop(st);
        if let Some(over_hs) = route {
            for f in std::iter::once(Frame::PipeFeedback(down)).chain(down_min) {
                if over_hs {
                    self.ctrl_hs(f);
                } else {
                    self.ctrl_any_pipe(f);
                }
            }
        }
        if let Some(up) = up {
            self.ctrl_any_pipe(Frame::PipeFeedback(up));
            if let Some(m) = up_min {
                self.ctrl_any_pipe(m);
            }
        }
    }

    fn liveness_and_selection(&self) {
        let stall = self.shared.tuning.stall_timeout.0;
        let now = Instant::now();
        let now_ms = self.now_ms();
        let mut dead = Vec::new();
        // The HS-Path went stale (why) or came back (after how long).
        let mut hs_event: Option<Result<Why, Duration>> = None;
        {
            let mut st = self.st();
            let st = &mut *st;
            let now_rx = sys::mono_ms();
            if st.away.away(now, stall) {
                // We were not running: nobody gets blamed for our absence.
                for s in st.pipes.iter().chain(st.hs.iter()) {
                    s.last_rx.store(now_rx, Ordering::Relaxed);
                }
            }
            let hs_id = st.hs.as_ref().map(|h| h.id);
            let selected = &st.selected;
            for s in st.pipes.iter_mut().chain(st.hs.iter_mut()) {
                crate::link::heard_in_kernel(
                    &s.last_rx,
                    &mut s.data_segs_seen,
                    s.meter.tcp.data_segs_in,
                    now_rx,
                );
                let silent = now_rx.saturating_sub(s.last_rx.load(Ordering::Relaxed));
                // The relay queue this link drains: the downlink one for a selected pipe, the
                // uplink one for the HS-Path.
                let queue = if Some(s.id) == hs_id {
                    self.up.bytes()
                } else if selected.contains(&s.id) {
                    self.down.bytes()
                } else {
                    0
                };
                let check = s.activity.check(
                    &s.meter.tcp,
                    queue,
                    s.blocked.load(Ordering::Relaxed),
                    now,
                    Duration::from_millis(silent),
                    PING_EVERY,
                    stall,
                );
                let is_hs = Some(s.id) == hs_id;
                let reading = Reading::of(
                    &s.meter.tcp,
                    !s.blocked.load(Ordering::Relaxed) && check.silent_too_long,
                    s.last_rx.load(Ordering::Relaxed),
                );
                // The HS-Path goes stale and keeps its connection; a pipe dies at the stall.
                let dead_after = self.shared.tuning.dead_after().filter(|_| is_hs);
                match s.live.update(&reading, now, stall, dead_after) {
                    Verdict::Live | Verdict::StillStale => {}
                    Verdict::Dead(why) => {
                        dead.push((s.id, why));
                        continue;
                    }
                    Verdict::Stale(why) => hs_event = Some(Ok(why)),
                    Verdict::Back(after) => hs_event = Some(Err(after)),
                }
                if check.ping_every.is_some_and(|p| {
                    now_ms.saturating_sub(s.last_sent.load(Ordering::Relaxed))
                        >= p.as_millis() as u64
                }) {
                    s.ctrl.push(Frame::Ping { nonce: s.id });
                }
            }
            // Pipe policy.
            let policy = self.shared.cfg.pipe_policy.as_str();
            let ids: Vec<u64> = st.pipes.iter().map(|p| p.id).collect();
            st.selected = match policy {
                "all" => ids,
                "fastest" => {
                    let cur = st.selected.first().copied();
                    let rate = |id: u64| {
                        st.pipes
                            .iter()
                            .find(|p| p.id == id)
                            .map_or(0, |p| p.meter.tcp.delivery_rate)
                    };
                    let best = st
                        .pipes
                        .iter()
                        .max_by_key(|p| p.meter.tcp.delivery_rate)
                        .map(|p| p.id);
                    match (cur, best) {
                        // Switch only for a clear gain, to avoid flapping.
                        (Some(c), Some(b)) if ids.contains(&c) && rate(b) <= rate(c) * 6 / 5 => {
                            vec![c]
                        }
                        (_, Some(b)) => vec![b],
                        _ => Vec::new(),
                    }
                }
                name => st
                    .pipes
                    .iter()
                    .find(|p| p.name == name)
                    .or_else(|| st.pipes.first())
                    .map(|p| vec![p.id])
                    .unwrap_or_default(),
            };
        }
        match hs_event {
            Some(Ok(why)) => {
                Metrics::inc(&self.shared.metrics.links_stale);
                tracing::warn!(primary = %self.primary_name, why = why.text(), "HS-Path stale");
                // The primary's bytes in flight over it go again on its other subflows;
                // what this relay holds for the pipe keeps flowing.
                let sf = self.st().subflow;
                if let Some(subflow) = sf {
                    self.ctrl_any_pipe(Frame::PathReset {
                        subflow,
                        reason: Reason::TIMEOUT,
                    });
                }
            }
            Some(Err(after)) => {
                tracing::warn!(primary = %self.primary_name, stale_for = ?after, "HS-Path back");
            }
            None => {}
        }
        for (id, why) in dead {
            self.link_down(id, why.text());
        }
    }

    /// A status snapshot.
    pub fn status(&self) -> RelayStatus {
        let st = self.st();
        RelayStatus {
            primary: self.primary_name.clone(),
            session: st.session.map_or("-".into(), |s| s.to_string()),
            down_buffered: self.down.bytes(),
            up_buffered: self.up.bytes(),
            down_bytes: self.down.relayed(),
            up_bytes: self.up.relayed(),
            pipes: st.pipes.iter().map(Slot::status).collect(),
            hs: st.hs.as_ref().map(Slot::status),
        }
    }

    /// Closes everything.
    pub fn stop(&self) {
        let mut st = self.st();
        for p in st.pipes.iter_mut() {
            p.stop();
        }
        if let Some(h) = st.hs.as_mut() {
            h.stop();
        }
        st.pipes.clear();
        st.hs = None;
    }
}
