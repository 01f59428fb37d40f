//! Links and subflows of a session: adding and removing them, liveness, the link choice of a
//! pipe policy, and the [`PathView`]s the scheduler sees.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use mpbond_core::energy::PathPower;
use mpbond_core::{PathEstimator, PathKind, PathView, PipeState};
use mpbond_proto::{Frame, PipeFeedback, PipeMinRtt, Reason, SubflowId};
use tokio::sync::{oneshot, Notify};
use tokio::task::JoinHandle;

use super::{Event, LinkId, Session, Side, PING_EVERY};
use crate::keys::PublicKey;
use crate::link::{Link, LinkWriter};
use crate::liveness::{Liveness, Reading, Verdict, Why};
use crate::meter::Meter;
use crate::queue_guard::{self, GuardReading, QueueGuard};
use crate::status::{LinkStatus, Metrics, PipeStatus, SubflowStatus};
use crate::sys;

/// How much of a link's throughput its low-water mark holds.
const COMMIT_TIME: Duration = Duration::from_millis(2);

/// Smallest record (and data frame) `record_size` cuts to: about 2% framing.
pub(super) const MIN_RECORD: u64 = 2048;

/// One link owned by the session.
pub(super) struct LinkState {
    pub subflow: Option<SubflowId>,
    pub name: String,
    pub peer_addr: String,
    pub writer: LinkWriter,
    reader: JoinHandle<()>,
    watcher: JoinHandle<()>,
    arm: Arc<Notify>,
    armed: bool,
    /// TCP_INFO and the path estimate from it.
    pub meter: Meter,
    pub last_sent: Instant,
    pub idle: bool,
    /// The link's current TCP_NOTSENT_LOWAT, bytes.
    pub lowat: u64,
    /// Live, stale or dead ([`crate::liveness`]).
    live: Liveness,
    /// TCP's acknowledged bytes at the last reading that found them grown, or found
    /// nothing unacknowledged, and when ([`acks_stalled`]).
    acked_progress: (u64, Instant),
    last_rx: Arc<std::sync::atomic::AtomicU64>,
    /// `tcpi_data_segs_in` when liveness last looked ([`crate::link::heard_in_kernel`]).
    data_segs_seen: u32,
    /// Whether it carries data (cellular links go quiet when idle, see [`crate::quiet`]).
    activity: crate::quiet::Activity,
    /// Primary: the helper at the other end of this pipe.
    pub helper: Option<PublicKey>,
    /// Its pacing cap while it fills its queue in slow start ([`crate::queue_guard`]).
    guard: QueueGuard,
    gone: Option<oneshot::Sender<()>>,
}

impl LinkState {
    /// Stops the link's tasks and closes its socket.
    pub fn stop(&mut self) {
        self.reader.abort();
        self.watcher.abort();
        let _ =
            socket2::SockRef::from(self.writer.sock().as_ref()).shutdown(std::net::Shutdown::Both);
        self.gone.take();
    }
}

/// One subflow: a PS-Path or HS-Path link, or (at the primary) a helper's pipes.
pub(super) struct SubflowState {
    pub kind: PathKind,
    pub links: Vec<LinkId>,
    pub pipe: PipeState,
    pub policy: String,
    pub helper: Option<PublicKey>,
    pub helper_name: Option<String>,
    pub scheduled: u64,
    /// The radios its device declared (`RADIOS`), for PAMS's energy-aware admission.
    pub power: Option<PathPower>,
    rr: usize,
}

impl Session {
    /// Registers a link and starts its reader and watcher tasks. `hs_path`: a proxy's link
    /// to a helper, which takes `tuning.hs_congestion` ([`crate::link::tune`]) and
    /// `tuning.hs_queue_guard` ([`queue_guard::for_link`]).
    pub(super) fn add_link(
        &mut self,
        link: Link,
        name: String,
        subflow: Option<SubflowId>,
        helper: Option<PublicKey>,
        gone: Option<oneshot::Sender<()>>,
        hs_path: bool,
    ) -> LinkId {
        let id = self.next_link;
        self.next_link += 1;
        let Link {
            mut reader,
            mut writer,
            ..
        } = link;
        let last_rx = reader.last_rx();
        let sock = writer.sock().clone();
        let lowat = self.spec.tuning.lowat.0;
        crate::link::tune(&mut writer, &self.spec.tuning, hs_path);
        // The proxy's HS-Paths and the primary's pipes end at a helper, which relays each
        // record only once all of it has arrived.
        writer.set_ramp(self.spec.tuning.ramp_records && (hs_path || helper.is_some()));
        let peer_addr = sock
            .peer_addr()
            .map(|a| a.to_string())
            .unwrap_or_else(|_| "?".into());
        let tx = self.tx.clone();
        let reader = tokio::spawn(async move {
            let mut frames = Vec::new();
            loop {
                match reader.read_frames(&mut frames).await {
                    Ok(()) => {
                        let batch = std::mem::take(&mut frames);
                        if tx
                            .send(Event::Frames {
                                link: id,
                                frames: batch,
                            })
                            .await
                            .is_err()
                        {
                            return;
                        }
                    }
                    Err(e) => {
                        let _ = tx
                            .send(Event::LinkDown {
                                link: id,
                                why: e.to_string(),
                            })
                            .await;
                        return;
                    }
                }
            }
        });
        let arm = Arc::new(Notify::new());
        let (tx, arm2, wsock) = (self.tx.clone(), arm.clone(), sock.clone());
        let watcher = tokio::spawn(async move {
            loop {
                arm2.notified().await;
                if wsock.writable().await.is_err() {
                    return;
                }
                if tx.send(Event::Writable { link: id }).await.is_err() {
                    return;
                }
            }
        });
        let mut meter = Meter::new(self.spec.tuning.loss_hold, self.spec.tuning.drain_floor);
        let _ = meter.read(sock.as_ref(), self.now(), &name);
        self.links.insert(
            id,
            LinkState {
                subflow,
                name,
                peer_addr,
                writer,
                reader,
                watcher,
                arm,
                armed: false,
                meter,
                last_sent: Instant::now(),
                idle: true,
                lowat,
                live: Liveness::default(),
                acked_progress: (0, Instant::now()),
                last_rx,
                data_segs_seen: 0,
                activity: crate::quiet::Activity::default(),
                helper,
                guard: queue_guard::for_link(&self.spec.tuning, hs_path),
                gone,
            },
        );
        Metrics::inc(&self.spec.metrics.links_opened);
        self.orphaned_since = None;
        id
    }

    /// Makes a link part of a subflow, creating the subflow if needed.
    pub(super) fn attach(
        &mut self,
        link: LinkId,
        subflow: SubflowId,
        kind: PathKind,
        helper: Option<(PublicKey, String)>,
        policy: Option<String>,
    ) {
        if let Some(l) = self.links.get_mut(&link) {
            l.subflow = Some(subflow);
        }
        let sf = self
            .subflows
            .entry(subflow)
            .or_insert_with(|| SubflowState {
                kind,
                links: Vec::new(),
                pipe: PipeState::default(),
                policy: policy.clone().unwrap_or_else(|| "fastest".into()),
                helper: helper.as_ref().map(|h| h.0),
                helper_name: helper.as_ref().map(|h| h.1.clone()),
                scheduled: 0,
                // The primary knows its own PS-Path's radio; other subflows' come in
                // `RADIOS` frames.
                power: match (kind, self.spec.side) {
                    (PathKind::Direct, Side::Primary) => self.spec.wan_radio.map(|wan| PathPower {
                        wan,
                        pipe: None,
                        uplink: true,
                    }),
                    _ => None,
                },
                rr: 0,
            });
        if !sf.links.contains(&link) {
            sf.links.push(link);
        }
        self.sender.add_subflow(subflow, kind);
        tracing::info!(session = %self.spec.id, %subflow, ?kind, link, "subflow link attached");
    }

    /// A link failed or was closed.
    pub(super) fn link_down(&mut self, link: LinkId, why: &str) {
        let Some(mut ls) = self.links.remove(&link) else {
            return;
        };
        tracing::warn!(session = %self.spec.id, link = %ls.name, peer = %ls.peer_addr, why, "link down");
        if why != "peer closed the connection" {
            Metrics::inc(&self.spec.metrics.links_failed);
        }
        ls.stop();
        let Some(sfid) = ls.subflow else {
            // A pipe that never joined.
            if let Some(h) = ls.helper {
                if !self.links.values().any(|l| l.helper == Some(h)) {
                    self.joining.remove(&h);
                }
            }
            self.check_orphaned();
            return;
        };
        let remaining = match self.subflows.get_mut(&sfid) {
            Some(sf) => {
                sf.links.retain(|l| *l != link);
                sf.links.len()
            }
            None => 0,
        };
        if remaining > 0 {
            // One of several pipes: the subflow lives, but what was in flight on this pipe may
            // be lost in both directions.
            let n = self.sender.rescue_subflow(sfid);
            tracing::info!(session = %self.spec.id, subflow = %sfid, bytes = n, "pipe lost: reinjecting");
            if self.spec.side == Side::Primary {
                self.send_control(&Frame::PathReset {
                    subflow: sfid,
                    reason: Reason::PATH_FAILED,
                });
            }
        } else {
            self.remove_subflow(sfid, true);
        }
        self.reannounce();
        self.check_orphaned();
    }

    /// Removes a subflow whose links are gone: its data is reinjected on the others.
    pub(super) fn remove_subflow(&mut self, sfid: SubflowId, tell_peer: bool) {
        let Some(sf) = self.subflows.remove(&sfid) else {
            return;
        };
        for l in sf.links {
            if let Some(mut ls) = self.links.remove(&l) {
                ls.stop();
            }
        }
        let n = self.sender.remove_subflow(sfid);
        tracing::info!(session = %self.spec.id, subflow = %sfid, bytes = n, "subflow removed: reinjecting");
        if let Some(h) = sf.helper {
            self.helper_subflow.remove(&h);
            // Ask it to join again in a second if its pipes are still up.
            self.rejoin_after
                .insert(h, Instant::now() + Duration::from_secs(1));
        }
        // The other end of the subflow must stop using it too. Either end may be the only
        // one that can tell: a primary whose downlink pipe stalled behind a hung relay, or
        // whose helper hung, hears no data and sends none, so it sees an idle pipe and would
        // keep its subflow (with quiet pipes, `crate::quiet`, for 75 s); the helper (whose
        // data waits on the pipe) or the proxy (whose data waits on the HS-Path) sees the
        // stall, and the proxy tells the primary over another path.
        if tell_peer && sf.kind == PathKind::Helper {
            self.send_control(&Frame::SubflowClose {
                subflow: sfid,
                reason: Reason::PATH_FAILED,
            });
        }
    }

    fn check_orphaned(&mut self) {
        if self.links.is_empty() {
            self.orphaned_since.get_or_insert_with(Instant::now);
        }
    }

    /// Queues a frame on a link (not flushed).
    pub(super) fn push(&mut self, link: LinkId, f: &Frame) {
        if let Some(l) = self.links.get_mut(&link) {
            if let Err(e) = l.writer.push_frame(f) {
                tracing::error!(frame = f.name(), error = %e, "could not encode a frame");
            }
        }
    }

    /// Writes what a link has queued, and works out whether it is idle: nothing left in user
    /// space and fewer than `lowat` bytes not yet sent in the kernel. A busy link arms its
    /// watcher, which reports when the kernel wants more.
    pub(super) fn flush_link(&mut self, link: LinkId) {
        let Some(l) = self.links.get_mut(&link) else {
            return;
        };
        match l.writer.try_flush() {
            Ok(all) => {
                l.last_sent = Instant::now();
                l.idle = all && l.writer.ready_for_more();
                if !l.idle && !l.armed {
                    l.armed = true;
                    l.arm.notify_one();
                }
            }
            Err(e) => {
                let why = e.to_string();
                self.link_down(link, &why);
            }
        }
    }

    pub(super) fn on_writable(&mut self, link: LinkId) {
        if let Some(l) = self.links.get_mut(&link) {
            l.armed = false;
        }
        self.flush_link(link);
    }

    /// Reads TCP_INFO of every link, feeds the estimators and adapts each link's low-water
    /// mark (every tick).
    ///
    /// The mark bounds how long data committed to a path is bound to it, so it is set in time,
    /// not bytes: about [`COMMIT_TIME`] of the path's throughput, between the configured
    /// `lowat` and 16 times it. A 10 Mbit/s path keeps the configured 16 KiB (13 ms); a
    /// loopback path gets 256 KiB (a fraction of a millisecond), which lets frames for it go
    /// out in batches instead of one system call each.
    pub(super) fn refresh_links(&mut self) {
        let now = self.now();
        let base = self.spec.tuning.lowat.0;
        for l in self.links.values_mut() {
            if let Ok(&t) = l.meter.read(l.writer.sock().as_ref(), now, &l.name) {
                if t.bytes_acked != l.acked_progress.0 || t.unacked_bytes == 0 {
                    l.acked_progress = (t.bytes_acked, Instant::now());
                }
                let want = ((l.meter.est.throughput() * COMMIT_TIME.as_secs_f64()) as u64)
                    .clamp(base, base.saturating_mul(16));
                if want.abs_diff(l.lowat) * 4 > l.lowat {
                    l.lowat = want;
                    let _ = sys::set_notsent_lowat(l.writer.sock().as_ref(), want as u32);
                }
                if !l.idle && l.writer.pending() == 0 && t.notsent_bytes < l.lowat {
                    l.idle = true;
                }
                // An HS-Path's own guard weighs the helper's buffer (`set_pipe_drain`).
                if l.guard.watches_pipe() {
                    let drain = l
                        .subflow
                        .and_then(|sf| self.subflows.get(&sf))
                        .and_then(|sf| sf.pipe.view())
                        .and_then(|p| p.drain_time());
                    l.guard.set_pipe_drain(drain);
                }
                let was_capped = l.guard.cap().is_some();
                if let Some(cap) = l.guard.check(
                    &GuardReading::from(&t),
                    l.meter.est.throughput(),
                    l.meter.fill(),
                ) {
                    if !was_capped {
                        Metrics::inc(&self.spec.metrics.queue_guard_caps);
                    }
                    // Under the guard's own target, so that
                    // RUST_LOG=mpbond_daemon::queue_guard=debug shows it (docs/evaluation.md).
                    tracing::debug!(target: "mpbond_daemon::queue_guard", link = %l.name, cap, srtt_us = t.rtt_us,
                        min_rtt_us = t.min_rtt_us, in_flight = t.unacked_bytes, "queue guard");
                    if let Err(e) = sys::set_pacing_cap(l.writer.sock().as_ref(), cap) {
                        tracing::debug!(link = %l.name, error = %e, "pacing cap not set");
                    }
                }
            }
        }
    }

    /// How much plaintext a record on `link` carries before it is written: a mark's worth
    /// (`lowat`), or on a path slower than that per `tuning.segment_time`, that long's worth
    /// of the path's throughput, at least [`MIN_RECORD`], and less on a link to a helper while a
    /// burst after a pause ramps up (`LinkWriter::set_ramp`). The peer decrypts a record, and so
    /// hands its frames on, only once all of it has arrived: on a path in a 1 Mbit/s dip a
    /// 16 KiB record reaches the primary 130 ms at a time, and an application waiting on that
    /// path gets nothing in between (experiment 10b, docs/evaluation.md). Data frames are
    /// cut to this size too (`pump`); the scheduler still decides whole segments.
    pub(super) fn record_size(&self, link: LinkId) -> u64 {
        let Some(l) = self.links.get(&link) else {
            return u64::MAX;
        };
        let time = self.spec.tuning.segment_time.0.as_secs_f64();
        let th = l.meter.throughput();
        let size = if time > 0.0 && th > 0.0 {
            l.lowat.min(((th * time) as u64).max(MIN_RECORD))
        } else {
            l.lowat
        };
        // A link to a helper starts a burst after a pause in smaller records still
        // (`LinkWriter::set_ramp`).
        l.writer.ramp_cap().map_or(size, |cap| size.min(cap as u64))
    }

    /// Writes what a link has queued once it is a record's worth (`record`, from
    /// `record_size`); until then the link stays idle (the kernel was below its mark at the
    /// last check, so it can take that much).
    pub(super) fn push_batched(&mut self, link: LinkId, record: u64) {
        let due = self
            .links
            .get(&link)
            .is_some_and(|l| l.writer.pending() as u64 >= record);
        if due {
            self.flush_link(link);
        }
    }

    /// Liveness and pings (every 100 ms). Every endpoint sends something at least every
    /// [`PING_EVERY`], so a link has stalled when, for the stall timeout, either
    /// - no byte arrived from the peer (the path or the peer stopped; this also catches a
    ///   middlebox or a hung peer whose kernel still acknowledges), or
    /// - data we sent stayed unacknowledged with no ACK at all (the kernel's view: the path
    ///   stopped carrying packets).
    ///
    /// A stalled WAN link (the proxy's links, the primary's PS-Path) goes stale: its
    /// subflow's data is reinjected and it gets nothing new, but it keeps its connection and
    /// is scheduled on again when the path shows life; it dies only after the dead timeout
    /// (a pipe at the stall; [`crate::liveness`]).
    ///
    /// A peer that our own backpressure silences cannot trip either rule: its kernel still
    /// sends window probes, ours answers them, and nothing of ours is unacknowledged.
    pub(super) fn liveness(&mut self) {
        let stall = self.spec.tuning.stall_timeout.0;
        let dead_after = self.spec.tuning.dead_after();
        let side = self.spec.side;
        let now = Instant::now();
        let now_ms = crate::sys::mono_ms();
        let mut events = Vec::new();
        let mut ping = Vec::new();
        if self.away.away(now, stall) {
            // We were not running: nobody gets blamed for our absence.
            for l in self.links.values() {
                l.last_rx.store(now_ms, Ordering::Relaxed);
            }
        }
        for (&id, l) in self.links.iter_mut() {
            crate::link::heard_in_kernel(
                &l.last_rx,
                &mut l.data_segs_seen,
                l.meter.tcp.data_segs_in,
                now_ms,
            );
            let last_rx_ms = l.last_rx.load(Ordering::Relaxed);
            let silent = now_ms.saturating_sub(last_rx_ms);
            let check = l.activity.check(
                &l.meter.tcp,
                l.writer.pending() as u64,
                // The session reads every link at once (flow control is per stream).
                false,
                now,
                Duration::from_millis(silent),
                PING_EVERY,
                stall,
            );
            let reading = Reading::of(&l.meter.tcp, check.silent_too_long, last_rx_ms);
            // The proxy's links are all WAN paths; the primary's are its PS-Path and pipes.
            let wan = side == Side::Proxy || l.helper.is_none();
            let verdict = l
                .live
                .update(&reading, now, stall, dead_after.filter(|_| wan));
            match verdict {
                Verdict::Live | Verdict::StillStale => {}
                other => {
                    events.push((id, other));
                    continue;
                }
            }
            if check.ping_every.is_some_and(|p| now - l.last_sent >= p) && l.writer.pending() == 0 {
                ping.push(id);
            }
        }
        for id in ping {
            self.push(id, &Frame::Ping { nonce: id });
            self.flush_link(id);
        }
        for (id, verdict) in events {
            match verdict {
                Verdict::Dead(why) => self.link_down(id, why.text()),
                Verdict::Stale(why) => self.link_stale(id, why),
                Verdict::Back(after) => self.link_back(id, after),
                Verdict::Live | Verdict::StillStale => {}
            }
        }
    }

    /// A WAN link stalled but keeps its connection ([`crate::liveness`]): once its subflow
    /// has no live link left, its data in flight goes to the others and it gets nothing new.
    fn link_stale(&mut self, link: LinkId, why: Why) {
        let Some(l) = self.links.get(&link) else {
            return;
        };
        Metrics::inc(&self.spec.metrics.links_stale);
        let sfid = l.subflow;
        tracing::warn!(session = %self.spec.id, link = %l.name, peer = %l.peer_addr, why = why.text(), "link stale");
        let Some(sfid) = sfid else {
            return;
        };
        if self.subflow_link(sfid, true).is_none() {
            let n = self.sender.suspend_subflow(sfid);
            tracing::info!(session = %self.spec.id, subflow = %sfid, bytes = n, "subflow stale: reinjecting");
            // The primary may not see a helper's HS-Path stall (a hung helper's pipe still
            // acknowledges): it sends its own bytes in flight over that helper again.
            let helper = self
                .subflows
                .get(&sfid)
                .is_some_and(|s| s.kind == PathKind::Helper);
            if self.spec.side == Side::Proxy && helper {
                self.send_control(&Frame::PathReset {
                    subflow: sfid,
                    reason: Reason::TIMEOUT,
                });
            }
        }
    }

    /// A stale link carries packets again: its subflow is scheduled on again.
    fn link_back(&mut self, link: LinkId, after: Duration) {
        let Some(l) = self.links.get(&link) else {
            return;
        };
        tracing::warn!(session = %self.spec.id, link = %l.name, peer = %l.peer_addr, stale_for = ?after, "link back");
        if let Some(sfid) = l.subflow {
            self.sender.resume_subflow(sfid);
        }
    }

    /// The link that carries data (or a cancel) of a subflow now, by its pipe policy.
    pub(super) fn subflow_link(&mut self, sfid: SubflowId, data: bool) -> Option<LinkId> {
        let sf = self.subflows.get_mut(&sfid)?;
        let alive: Vec<LinkId> = sf
            .links
            .iter()
            .copied()
            .filter(|l| self.links.get(l).is_some_and(|x| !x.live.is_stale()))
            .collect();
        if alive.len() <= 1 || !data {
            return alive.first().copied();
        }
        let fastest = || {
            alive.iter().copied().max_by(|a, b| {
                let ta = self.links.get(a).map_or(0.0, |l| l.meter.est.throughput());
                let tb = self.links.get(b).map_or(0.0, |l| l.meter.est.throughput());
                ta.total_cmp(&tb)
            })
        };
        match sf.policy.as_str() {
            "fastest" => fastest(),
            "all" => {
                let n = alive.len();
                for i in 0..n {
                    let l = alive[(sf.rr + i) % n];
                    if self.links.get(&l).is_some_and(|x| x.idle) {
                        sf.rr = (sf.rr + i + 1) % n;
                        return Some(l);
                    }
                }
                alive.get(sf.rr % n).copied()
            }
            name => alive
                .iter()
                .copied()
                .find(|l| self.links.get(l).is_some_and(|x| x.name == name))
                .or_else(fastest),
        }
    }

    /// The link for control frames (above all the primary's `DATA_ACK`s): see
    /// [`pick_control_link`].
    pub(super) fn control_link(&self) -> Option<LinkId> {
        let candidates: Vec<ControlCandidate> = self
            .subflows
            .values()
            .flat_map(|s| s.links.iter().map(move |l| (s.kind, *l)))
            .filter_map(|(kind, l)| {
                self.links.get(&l).map(|x| ControlCandidate {
                    link: l,
                    direct: kind == PathKind::Direct,
                    srtt: x.meter.est.srtt(),
                    stalled: x.live.is_stale()
                        || acks_stalled(
                            x.meter.tcp.unacked_bytes,
                            x.acked_progress.1.elapsed(),
                            x.meter.est.min_rtt(),
                        ),
                })
            })
            .collect();
        pick_control_link(&candidates)
    }

    /// After a link died, control frames that were on it may be lost; TCP loses nothing
    /// otherwise. So the state they carried is announced again on the remaining links: every
    /// stream is acknowledged, and streams still waiting to be opened ask again (the proxy
    /// answers a repeated `STREAM_OPEN` idempotently).
    pub(super) fn reannounce(&mut self) {
        if self.links.is_empty() {
            return;
        }
        self.receiver.ack_all();
        if self.spec.side == Side::Primary {
            let pending: Vec<(mpbond_proto::StreamId, mpbond_proto::Destination)> = self
                .streams
                .iter()
                .filter(|(_, s)| s.awaiting_open)
                .filter_map(|(id, s)| s.open_dest.clone().map(|d| (*id, d)))
                .collect();
            for (stream, dest) in pending {
                self.send_control(&Frame::StreamOpen { stream, dest });
            }
        }
    }

    /// Queues a control frame on the control link. It goes out with the flush at the end of
    /// the current pump, batched with whatever else is due, rather than costing a system call
    /// of its own.
    pub(super) fn send_control(&mut self, f: &Frame) {
        if let Some(l) = self.control_link() {
            self.push(l, f);
        }
    }

    /// Applies a helper's report about the second hop of its subflow.
    pub(super) fn on_feedback(&mut self, fb: PipeFeedback) {
        let now = self.now();
        let acked = self.subflow_acked(fb.subflow);
        if let Some(sf) = self.subflows.get_mut(&fb.subflow) {
            sf.pipe.on_feedback(now, fb, Some(acked));
        }
    }

    /// Applies a helper's report of its second hop's minimum RTT (`PIPE_MIN_RTT`).
    pub(super) fn on_min_rtt(&mut self, m: PipeMinRtt) {
        if let Some(sf) = self.subflows.get_mut(&m.subflow) {
            sf.pipe.on_min_rtt(m);
        }
    }

    /// The bytes TCP has acknowledged on all of a subflow's links. A report's mark
    /// ([`Self::on_feedback`]) and the view ([`Self::views`]) both take this sum, not the
    /// view's `bytes_acked`, which counts only the links the pipe policy picked, so that
    /// [`PipeState::unreported`] compares like with like.
    fn subflow_acked(&self, id: SubflowId) -> u64 {
        self.subflow_delivered(id).0
    }

    /// The bytes TCP has acknowledged on all of a subflow's links and the bytes their
    /// receivers have SACKed now ([`PipeState::view_at`]).
    fn subflow_delivered(&self, id: SubflowId) -> (u64, u64) {
        self.subflows.get(&id).map_or((0, 0), |sf| {
            sf.links
                .iter()
                .filter_map(|l| self.links.get(l))
                .fold((0, 0), |(a, s), l| {
                    (a + l.meter.tcp.bytes_acked, s + l.meter.tcp.sacked_bytes)
                })
        })
    }

    /// The scheduler's view of every subflow.
    pub(super) fn views(&mut self) -> Vec<PathView> {
        let (now_ms, wall) = (sys::mono_ms(), Instant::now());
        let ids: Vec<SubflowId> = self.subflows.keys().copied().collect();
        let mut out = Vec::with_capacity(ids.len());
        for id in ids {
            let policy_all = self
                .subflows
                .get(&id)
                .is_some_and(|s| s.policy == "all" && s.links.len() > 1);
            let links: Vec<LinkId> = if policy_all {
                self.subflows
                    .get(&id)
                    .map(|s| s.links.clone())
                    .unwrap_or_default()
                    .into_iter()
                    .filter(|l| self.links.get(l).is_some_and(|x| !x.live.is_stale()))
                    .collect()
            } else {
                self.subflow_link(id, true).into_iter().collect()
            };
            let Some(sf) = self.subflows.get(&id) else {
                continue;
            };
            if links.is_empty() {
                continue;
            }
            let mut v = PathView::new(id, sf.kind);
            v.idle = false;
            for l in links.iter().filter_map(|l| self.links.get(l)) {
                v.idle |= l.idle;
                v.rtt = v.rtt.max(l.meter.est.srtt());
                v.min_rtt = if v.min_rtt == 0.0 {
                    l.meter.est.min_rtt()
                } else {
                    v.min_rtt.min(l.meter.est.min_rtt())
                };
                v.throughput += l.meter.est.throughput();
                v.rate_shortfall = v.rate_shortfall.max(l.meter.est.rate_shortfall());
                v.cwnd += l.meter.tcp.cwnd_bytes;
                v.inflight += l.meter.tcp.unacked_bytes;
                v.queued += l.writer.pending() as u64 + l.meter.tcp.to_deliver();
                v.bytes_acked += l.meter.tcp.bytes_acked;
                v.loss_rate = v.loss_rate.max(l.meter.tcp.loss_rate());
                v.recovering |= l.meter.tcp.recovering;
                v.sacked += l.meter.tcp.sacked_bytes;
                // Only a cellular link's idleness is known here (a primary's helper subflows
                // run over pipes; the helper's radio is out of sight).
                if l.helper.is_none() {
                    let rx_ms = now_ms.saturating_sub(l.last_rx.load(Ordering::Relaxed));
                    let tx = wall.saturating_duration_since(l.last_sent).as_secs_f64();
                    v.wan_idle = v.wan_idle.min(tx.min(rx_ms as f64 / 1e3));
                }
            }
            if sf.kind == PathKind::Helper {
                let (acked, sacked) = self.subflow_delivered(id);
                v.pipe = sf.pipe.view_at(acked, sacked);
            }
            v.power = sf.power;
            out.push(v);
        }
        out
    }

    pub(super) fn subflow_status(&self) -> Vec<SubflowStatus> {
        let now = self.now();
        self.subflows
            .iter()
            .map(|(id, sf)| {
                let links: Vec<LinkStatus> = sf
                    .links
                    .iter()
                    .filter_map(|l| self.links.get(l))
                    .map(|l| LinkStatus {
                        name: l.name.clone(),
                        peer: l.peer_addr.clone(),
                        pending: l.writer.pending() as u64,
                        tcp: l.meter.tcp,
                        pacing_cap: l.guard.cap(),
                        congestion: sys::congestion(l.writer.sock().as_ref()).unwrap_or_default(),
                        stale: l.live.is_stale(),
                    })
                    .collect();
                let ests: Vec<&PathEstimator> = sf
                    .links
                    .iter()
                    .filter_map(|l| self.links.get(l).map(|x| &x.meter.est))
                    .collect();
                SubflowStatus {
                    id: id.0,
                    kind: match sf.kind {
                        PathKind::Direct => "direct".into(),
                        PathKind::Helper => "helper".into(),
                    },
                    helper: sf.helper_name.clone(),
                    throughput_bps: ests.iter().map(|e| e.throughput()).sum::<f64>() * 8.0,
                    rtt_ms: ests.iter().map(|e| e.srtt()).fold(0.0, f64::max) * 1e3,
                    queued: links.iter().map(|l| l.pending + l.tcp.to_deliver()).sum(),
                    outstanding: self.sender.outstanding(*id),
                    bytes_scheduled: sf.scheduled,
                    radios: sf.power.map(|p| match p.pipe {
                        Some(pipe) => format!("{}+{}", p.wan.name(), pipe.name()),
                        None => p.wan.name().to_string(),
                    }),
                    pipe: sf.pipe.view().map(|p| PipeStatus {
                        throughput_bps: p.throughput * 8.0,
                        rtt_ms: p.rtt * 1e3,
                        min_rtt_ms: (p.min_rtt > 0.0).then_some(p.min_rtt * 1e3),
                        buffered: p.buffered,
                        age_ms: sf.pipe.age(now).map_or(f64::NAN, |d| d.as_secs_f64() * 1e3),
                    }),
                    links,
                }
            })
            .collect()
    }
}

/// A link on which bytes have waited this long with none of them acknowledged (or two
/// minimum RTTs, if longer) carries no control frames while another link can
/// ([`acks_stalled`]): Linux's smallest retransmission timeout.
const CONTROL_STALL_MIN: Duration = Duration::from_millis(200);

/// Whether a link's own sending looks stuck: `unacked` bytes wait, and TCP acknowledged
/// nothing new for `no_progress_for` (counted from the last reading with nothing
/// unacknowledged, if later), at least [`CONTROL_STALL_MIN`] or two minimum RTTs. On a
/// cellular link that is an uplink outage, or a downlink one, which holds the ACKs. On the
/// LTE traces of experiment 11d the PS-Path's uplink is silent for 0.72 s while its downlink
/// keeps delivering. The time since the last ACK received would not tell: every data
/// segment from the peer carries one, and the downlink delivered for a quarter second into
/// that outage. Nor would the smoothed RTT serve as the yardstick: the peer's ACKs for a
/// primary's few bytes ride the downlink behind the proxy's standing queue (0.9 s in that
/// outage), yet while the uplink works they come back in a steady stream, one for every few
/// frames sent.
fn acks_stalled(unacked: u64, no_progress_for: Duration, min_rtt: f64) -> bool {
    let two_rtts = 2.0 * min_rtt;
    let wait = if two_rtts.is_finite() && two_rtts > 0.0 {
        CONTROL_STALL_MIN.max(Duration::from_secs_f64(two_rtts.min(60.0)))
    } else {
        CONTROL_STALL_MIN
    };
    unacked > 0 && no_progress_for >= wait
}

/// A link that could carry control frames, as [`pick_control_link`] weighs it.
#[derive(Clone, Copy, Debug)]
struct ControlCandidate {
    link: LinkId,
    /// A PS-Path (no helper buffer to wait behind).
    direct: bool,
    /// Smoothed RTT, seconds.
    srtt: f64,
    /// [`acks_stalled`].
    stalled: bool,
}

/// The link for control frames: the direct path when there is one (no helper buffer to wait
/// behind), else the lowest-RTT link; but first of all a link whose sending is not stalled
/// ([`acks_stalled`]).
///
/// The primary's `DATA_ACK`s are what the proxy's books of every subflow rest on: what each
/// has outstanding, and so PAD, reinjection and the late-head rescue. In an outage of the
/// PS-Path's uplink they would wait in its socket while the helpers' bytes keep arriving.
/// With every helper delivering and no `DATA_ACK` getting through, the proxy counted 6.6 MB
/// outstanding on a helper that held 1.3 MB (11d, two devices, a 0.72 s uplink silence of
/// the T-Mobile trace), recalled all of it when the ACKs came back, dropped the helper's
/// buffer and sent the segment's tail over the PS-Path alone. Another path's uplink carries
/// them meanwhile (a helper relays them on its HS-Path); the proxy takes `DATA_ACK`s from any
/// link and ignores a late one that acknowledges less.
fn pick_control_link(candidates: &[ControlCandidate]) -> Option<LinkId> {
    let pick = |direct: bool, live: bool| {
        candidates
            .iter()
            .filter(|c| (!direct || c.direct) && (!live || !c.stalled))
            .min_by(|a, b| a.srtt.total_cmp(&b.srtt))
            .map(|c| c.link)
    };
    pick(true, true)
        .or_else(|| pick(false, true))
        .or_else(|| pick(true, false))
        .or_else(|| pick(false, false))
}

#[cfg(test)]
mod control_tests {
    use super::*;

    fn cand(link: LinkId, direct: bool, srtt: f64, stalled: bool) -> ControlCandidate {
        ControlCandidate {
            link,
            direct,
            srtt,
            stalled,
        }
    }

    #[test]
    fn control_frames_avoid_a_link_whose_acks_stopped() {
        // The direct path first, even when a pipe is faster.
        let ps = cand(1, true, 0.06, false);
        let pipe = cand(2, false, 0.005, false);
        let pipe2 = cand(3, false, 0.004, false);
        assert_eq!(pick_control_link(&[pipe, ps]), Some(1));
        // Its uplink silent: the fastest live helper link.
        let ps_stalled = cand(1, true, 0.06, true);
        assert_eq!(pick_control_link(&[pipe, ps_stalled, pipe2]), Some(3));
        // Every link stalled: still one, the direct first.
        let pipe_stalled = cand(2, false, 0.005, true);
        assert_eq!(pick_control_link(&[pipe_stalled, ps_stalled]), Some(1));
        assert_eq!(pick_control_link(&[pipe_stalled]), Some(2));
        assert_eq!(pick_control_link(&[]), None);
    }

    #[test]
    fn a_link_is_stalled_only_with_bytes_waiting_and_no_progress_for_long() {
        let ms = Duration::from_millis;
        // Nothing unacknowledged: an idle link is not stalled however long it was quiet.
        assert!(!acks_stalled(0, ms(5_000), 0.05));
        // Bytes waiting: stalled after 200 ms without progress on a fast path ...
        assert!(!acks_stalled(300, ms(150), 0.05));
        assert!(acks_stalled(300, ms(200), 0.05));
        // ... after two minimum RTTs on a slow one ...
        assert!(!acks_stalled(300, ms(500), 0.3));
        assert!(acks_stalled(300, ms(600), 0.3));
        // ... and a path with no RTT sample yet, or a nonsense one, still has a bound.
        assert!(acks_stalled(300, ms(200), f64::NAN));
        assert!(!acks_stalled(300, ms(199), -1.0));
    }
}
