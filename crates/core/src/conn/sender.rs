//! The data sender of a session: many streams over many subflows, one scheduler.
//!
//! Sans-IO: the owner tells it what the application wrote, which subflows exist, what ACKs
//! arrived, and the state of each subflow as [`PathView`]s; it answers with [`Output`]s:
//! [`Transmit`]s (a segment for a subflow) and [`Cancel`]s (recalled ranges a helper should
//! drop). The proxy runs one for downlink, the primary one for uplink, and the simulator runs
//! the same code.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::Duration;

use bytes::Bytes;
use mpbond_proto::{DataAck, StreamId, SubflowId, DATA_OVERHEAD, MAX_PAYLOAD};

use crate::conn::send_stream::{AckError, FinState, HeadOfLine, SendStream};
use crate::path::{PathKind, PathView};
use crate::scheduler::{Decision, Recall, SchedContext, Scheduler};
use crate::Time;

/// Settings of a [`Sender`].
#[derive(Clone, Debug)]
pub struct SenderConfig {
    /// Largest segment (one `STREAM_DATA` payload), at most [`MAX_PAYLOAD`].
    pub max_segment: usize,
    /// Unacknowledged bytes buffered per stream before [`Sender::write`] pushes back, to
    /// start with.
    pub stream_capacity: u64,
    /// How far a stream's buffer may grow to match the peer's receive window
    /// ([`SendStream::with_max_capacity`]); 0 (or anything up to `stream_capacity`) keeps it
    /// fixed.
    pub max_stream_capacity: u64,
    /// Window assumed for a new stream until its first ACK.
    pub initial_window: u64,
    /// Most open streams.
    pub max_streams: usize,
    /// Ask helpers to drop recalled bytes (`DATA_CANCEL`) instead of sending them anyway.
    pub cancel_recalled: bool,
    /// Count in B_s and B_p only bytes the subflow still has outstanding: B_s is clamped to
    /// the outstanding bytes (plus framing), B_p to what is left of them. Bytes recalled from a
    /// subflow stay in its kernel queue or helper buffer for a while but no longer delay
    /// anything that matters, and helper feedback is up to one HS-Path delay old; without the
    /// clamp, PAD would count both and reinjection would fire again at once. An mpbond
    /// refinement of MPBond §4.3.2. Copies a late-head rescue left behind stay counted
    /// until the path's TCP acknowledges them ([`Sender::late_rescue`]), and so do copies
    /// the receiver had through another path before this one's TCP acknowledged them
    /// ([`Sender::on_ack`]): both still hold the path's queue in front of what was sent
    /// there after them.
    pub clamp_helper_buffer: bool,
    /// Send a window-blocked stream's head of line again on an idle subflow
    /// ([`Sender::window_rescue`]). An mpbond addition.
    pub window_rescue: bool,
    /// Send a head of line that is well past the time PAMS expected it again on a subflow
    /// that would deliver it sooner, with the rest of its subflow's share behind it, even
    /// while the stream still has new data ([`Sender::late_rescue`]). An mpbond addition.
    pub late_rescue: bool,
    /// Send a head of line held behind a hole its subflow's TCP is recovering from again on
    /// a subflow that delivers it well before the retransmission can, with the rest of its
    /// subflow's share behind it, as soon as the loss is known rather than once the head is
    /// late ([`Sender::late_rescue`]). An mpbond addition.
    pub loss_rescue: bool,
    /// Once a transfer's rest is all scheduled, let a subflow that has drained carry copies
    /// of the tail of the subflow that will finish last, last segment first, keeping about a
    /// round trip of copies in flight ([`Sender::tail_copy`]). An mpbond addition, off by
    /// default.
    pub tail_copy: bool,
}

/// Fewest bytes one window rescue takes back (more when the idle subflow's window is larger).
pub const WINDOW_RESCUE_MIN: u64 = 64 << 10;

impl Default for SenderConfig {
    fn default() -> Self {
        SenderConfig {
            max_segment: MAX_PAYLOAD,
            stream_capacity: 16 << 20,
            max_stream_capacity: 0,
            initial_window: 16 << 20,
            max_streams: 4096,
            cancel_recalled: true,
            clamp_helper_buffer: true,
            window_rescue: true,
            late_rescue: true,
            loss_rescue: true,
            tail_copy: false,
        }
    }
}

/// A segment to send.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transmit {
    /// On this subflow.
    pub subflow: SubflowId,
    /// Of this stream.
    pub stream: StreamId,
    /// DSN of the first byte.
    pub dsn: u64,
    /// The bytes; empty for a bare FIN.
    pub payload: Bytes,
    /// `Some(final size)` when a `STREAM_FIN` must follow the data on the same subflow.
    pub fin: Option<u64>,
    /// True when these bytes were scheduled before (reinjection or a dead subflow).
    pub reinjected: bool,
}

/// A `DATA_CANCEL` to send to the helper on `subflow`: it may drop `start..end` of `stream`
/// from its buffer, because the bytes were recalled and will be sent again.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cancel {
    /// The helper subflow.
    pub subflow: SubflowId,
    /// The stream.
    pub stream: StreamId,
    /// First recalled DSN.
    pub start: u64,
    /// One past the last.
    pub end: u64,
}

/// What the owner must send next, in this order.
///
/// Cancels and data come out of one queue because their order on a subflow matters: a
/// recalled range may be scheduled again on the same helper, and the helper must see the
/// cancel before the new copy, or it would drop the new copy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Output {
    /// Stream data (and possibly a FIN) for a subflow.
    Data(Transmit),
    /// A `DATA_CANCEL` for a helper subflow.
    Cancel(Cancel),
}

/// Errors the owner must act on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SendError {
    /// The stream id is in use.
    #[error("stream {0} already exists")]
    StreamExists(StreamId),
    /// No such stream.
    #[error("unknown stream {0}")]
    UnknownStream(StreamId),
    /// The stream cap was hit.
    #[error("too many streams (limit {0})")]
    TooManyStreams(usize),
    /// The stream was finished; no more writes.
    #[error("stream {0} is finished")]
    Finished(StreamId),
    /// The peer acknowledged bytes never sent.
    #[error("stream {stream}: {source}")]
    BadAck {
        /// The stream.
        stream: StreamId,
        /// What was wrong.
        source: AckError,
    },
}

/// Counters for reports and tests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SenderStats {
    /// Payload bytes scheduled for the first time.
    pub new_bytes: u64,
    /// Payload bytes scheduled again.
    pub reinjected_bytes: u64,
    /// PAMS recalls performed.
    pub recalls: u64,
    /// Bytes recalled by PAMS.
    pub recalled_bytes: u64,
    /// Bytes taken back from dead subflows.
    pub rescued_bytes: u64,
    /// Window rescues performed ([`Sender::window_rescue`]).
    pub window_rescues: u64,
    /// Bytes taken back by window rescues.
    pub window_rescued_bytes: u64,
    /// Late-head rescues performed ([`Sender::late_rescue`]).
    pub late_rescues: u64,
    /// Bytes taken back by late-head rescues.
    pub late_rescued_bytes: u64,
    /// Loss rescues performed ([`Sender::late_rescue`]; counted apart from the late-head
    /// rescues).
    pub loss_rescues: u64,
    /// Bytes taken back by loss rescues.
    pub loss_rescued_bytes: u64,
    /// Segments copied by the tail copy ([`Sender::tail_copy`]).
    pub tail_copies: u64,
    /// Bytes copied by the tail copy.
    pub tail_copied_bytes: u64,
}

#[derive(Debug, Default, Clone, Copy)]
struct SubflowAcct {
    outstanding: u64,
    kind: Option<PathKind>,
    /// The path's `bytes_acked` when last seen, and since when it has had that value.
    acked: (u64, Time),
    /// What the path's TCP held when last seen (`PathView::queued` before the clamp).
    kernel_queued: u64,
    /// Bytes of data frames handed out on this subflow since it joined: where each segment
    /// ends in its byte stream (the `wire_end` of `SendStream::commit`).
    written: u64,
    /// `written` when `kernel_queued` was read: the byte at `acked.0 + kernel_queued` of the
    /// path's TCP stream is the one at `written_seen` of ours.
    written_seen: u64,
    /// Until the path's `bytes_acked` reaches this, bytes taken back by a late-head rescue,
    /// or copies acknowledged through another path, still sit in its queue in front of
    /// anything new: the clamp of B_s keeps counting them (see [`Sender::late_rescue`] and
    /// [`Sender::on_ack`]).
    ghost_end: u64,
    /// Since when the path's TCP has been recovering from a loss, as first seen
    /// ([`PathView::recovering`]); `None` while it is not.
    recovery_seen: Option<Time>,
}

impl SubflowAcct {
    /// Keeps the clamp of B_s counting the path's queue up to where byte `wire_end` of our
    /// count of bytes written to it sits in its TCP stream, placed from the queue last seen
    /// (our count may differ from the TCP's by control frames, but not over that short a
    /// stretch).
    fn hold_queue_to(&mut self, wire_end: u64) {
        let end = (self.acked.0 + self.kernel_queued + wire_end).saturating_sub(self.written_seen);
        self.ghost_end = self.ghost_end.max(end);
    }
}

/// A path with bytes in flight whose TCP acknowledged nothing for this long (or two
/// smoothed RTTs if longer) is stalled: Linux's smallest retransmission timeout.
const STALL_MIN: Duration = Duration::from_millis(200);

/// A head of line is late ([`Sender::late_rescue`]) once it is past its due time by the data
/// ACK's way back, the receiver's ACK hold and a slack: this fraction of the delay predicted
/// when it was scheduled, and at least [`LATE_SLACK_MIN`]. Rate estimates of cellular paths
/// swing by tens of percent from one round trip to the next; a head that took less than twice
/// its predicted delay is noise, one that took more has met a loss or a rate collapse.
const LATE_SLACK_FRACTION: f64 = 1.0;

/// A late head goes to another subflow only if that one delivers it within this fraction of
/// the time the head is late already ([`Sender::late_rescue`]). It was a half while PAD
/// read helpers with unreported deliveries as busy; once it read them right (PAMS's cap on
/// a helper's outstanding bytes, `pad_drain`), idle helpers met a half so often that the
/// rescue sent 3-4 times the bytes for the same stall ratio in 11d. A quarter keeps the
/// stall ratio and sends what it sent before (docs/evaluation.md, "What we changed",
/// item 43).
const LATE_GAIN: f64 = 0.25;

/// A head of line held behind a loss goes to another subflow only if that one delivers it
/// within this fraction of the time left until the retransmission is expected
/// ([`Sender::late_rescue`]). That time is a prediction from the path's round trip, not an
/// extrapolation of a lateness, so the bar is lower than [`LATE_GAIN`].
const LOSS_GAIN: f64 = 0.5;

/// Smallest slack of a late head.
const LATE_SLACK_MIN: Duration = Duration::from_millis(50);

/// How long a receiver may hold a data ACK (the daemons' `ReceiverConfig::ack_delay`).
const ACK_HOLD: Duration = Duration::from_millis(10);

/// The late-head scan runs at most this often (it walks every stream).
const LATE_SCAN: Duration = Duration::from_millis(2);

/// The multipath data sender of one session.
#[derive(Debug)]
pub struct Sender {
    cfg: SenderConfig,
    scheduler: Box<dyn Scheduler>,
    streams: BTreeMap<StreamId, SendStream>,
    /// Streams that may have something to send, in round-robin order.
    active: VecDeque<StreamId>,
    subflows: BTreeMap<SubflowId, SubflowAcct>,
    /// Subflows removed with [`Sender::remove_subflow`]: a stale view naming one is ignored
    /// rather than bringing it back, or data would be scheduled on a path that no longer
    /// exists. Only [`Sender::add_subflow`] revives an id.
    retired: BTreeSet<SubflowId>,
    cancels: VecDeque<Cancel>,
    stats: SenderStats,
    /// No window or late-head rescue before this: one per round trip of the subflow the last
    /// one went to.
    rescue_hold: Time,
    /// No late-head scan before this ([`LATE_SCAN`]).
    late_scan: Time,
}

impl Sender {
    /// A sender using `scheduler`.
    pub fn new(scheduler: Box<dyn Scheduler>, mut cfg: SenderConfig) -> Self {
        cfg.max_segment = cfg.max_segment.clamp(1, MAX_PAYLOAD);
        Sender {
            cfg,
            scheduler,
            streams: BTreeMap::new(),
            active: VecDeque::new(),
            subflows: BTreeMap::new(),
            retired: BTreeSet::new(),
            cancels: VecDeque::new(),
            stats: SenderStats::default(),
            rescue_hold: Time::ZERO,
            late_scan: Time::ZERO,
        }
    }

    /// The scheduler's name.
    pub fn scheduler_name(&self) -> &'static str {
        self.scheduler.name()
    }

    /// Counters.
    pub fn stats(&self) -> SenderStats {
        self.stats
    }

    /// Opens a stream.
    pub fn open_stream(&mut self, id: StreamId) -> Result<(), SendError> {
        if self.streams.contains_key(&id) {
            return Err(SendError::StreamExists(id));
        }
        if self.streams.len() >= self.cfg.max_streams {
            return Err(SendError::TooManyStreams(self.cfg.max_streams));
        }
        self.streams.insert(
            id,
            SendStream::new(self.cfg.stream_capacity, self.cfg.initial_window)
                .with_max_capacity(self.cfg.max_stream_capacity),
        );
        Ok(())
    }

    /// Forgets a stream (after completion or a reset). In-flight accounting is released.
    pub fn close_stream(&mut self, id: StreamId) {
        if let Some(mut s) = self.streams.remove(&id) {
            for (sf, acct) in self.subflows.iter_mut() {
                acct.outstanding = acct.outstanding.saturating_sub(s.take_subflow(*sf));
            }
        }
        self.active.retain(|s| *s != id);
    }

    /// Appends application data; returns how much was taken (less than `data.len()` under
    /// backpressure).
    pub fn write(&mut self, id: StreamId, data: Bytes) -> Result<usize, SendError> {
        let s = self
            .streams
            .get_mut(&id)
            .ok_or(SendError::UnknownStream(id))?;
        if s.fin_state() != FinState::Open {
            return Err(SendError::Finished(id));
        }
        let n = s.write(data);
        if n > 0 {
            self.activate(id);
        }
        Ok(n)
    }

    /// How many bytes [`Sender::write`] would take now.
    pub fn writable(&self, id: StreamId) -> u64 {
        self.streams.get(&id).map_or(0, |s| s.writable())
    }

    /// The application finished writing.
    pub fn finish(&mut self, id: StreamId) -> Result<(), SendError> {
        let s = self
            .streams
            .get_mut(&id)
            .ok_or(SendError::UnknownStream(id))?;
        s.finish();
        self.activate(id);
        Ok(())
    }

    /// The application source of `id` has nothing more right now though the buffer has room
    /// (see [`SendStream::set_source_idle`]); PAMS then treats what is buffered as the rest
    /// of the transfer. Unknown streams are ignored (the event may outlive the stream).
    pub fn set_source_idle(&mut self, id: StreamId) {
        if let Some(s) = self.streams.get_mut(&id) {
            s.set_source_idle(true);
        }
    }

    /// Marks an application chunk boundary (MPBond §4.4, footnote 5).
    pub fn mark_chunk_end(&mut self, id: StreamId, end: u64) -> Result<(), SendError> {
        let s = self
            .streams
            .get_mut(&id)
            .ok_or(SendError::UnknownStream(id))?;
        s.mark_chunk_end(end);
        Ok(())
    }

    /// Read access to a stream's state.
    pub fn stream(&self, id: StreamId) -> Option<&SendStream> {
        self.streams.get(&id)
    }

    /// True when the stream's bytes and FIN are all acknowledged.
    pub fn is_complete(&self, id: StreamId) -> bool {
        self.streams.get(&id).is_some_and(|s| s.is_complete())
    }

    /// Number of open streams.
    pub fn stream_count(&self) -> usize {
        self.streams.len()
    }

    /// Registers a subflow. Views of unknown subflows are registered on first sight, so this
    /// is optional, but it lets a new subflow be counted before its first view.
    pub fn add_subflow(&mut self, id: SubflowId, kind: PathKind) {
        self.retired.remove(&id);
        self.subflows.entry(id).or_default().kind = Some(kind);
    }

    /// A subflow died (its HS-Path, its pipe, or the PS-Path failed): every byte in flight on it
    /// is scheduled again on the others (MPBond §4.1, "Error Handling"). Returns the bytes
    /// taken back.
    pub fn remove_subflow(&mut self, id: SubflowId) -> u64 {
        self.subflows.remove(&id);
        self.retired.insert(id);
        self.take_back(id)
    }

    /// A subflow's path stopped carrying packets but its connection is kept, since most
    /// outages of a cellular link end within seconds (Linux MPTCP's "stale" subflows,
    /// `net.mptcp.stale_loss_cnt`): every byte in flight on it is scheduled again on the
    /// others, as for a dead one (MPBond §4.1, "Error Handling"), and it gets nothing new
    /// until [`Sender::resume_subflow`]. What it had been given still sits in its TCP's
    /// queue and will cross the path first when it comes back, so the clamp of B_s keeps
    /// counting that queue then (`ghost_end`, as for the copies of [`Sender::on_ack`]).
    /// Returns the bytes taken back.
    pub fn suspend_subflow(&mut self, id: SubflowId) -> u64 {
        if self.retired.contains(&id) {
            return 0;
        }
        let moved = self.take_back(id);
        self.retired.insert(id);
        let a = self.subflows.entry(id).or_default();
        a.outstanding = 0;
        let written = a.written;
        a.hold_queue_to(written);
        moved
    }

    /// A suspended subflow's path carries packets again: it is scheduled on as before, with
    /// its books kept ([`Sender::suspend_subflow`]). A removed subflow comes back only
    /// through [`Sender::add_subflow`].
    pub fn resume_subflow(&mut self, id: SubflowId) {
        if self.subflows.contains_key(&id) {
            self.retired.remove(&id);
        }
    }

    /// Some of a subflow's data may be lost but the subflow lives on (a helper lost one of its
    /// pipes, `PATH_RESET`): everything in flight on it is scheduled again, on any subflow.
    /// Returns the bytes taken back.
    pub fn rescue_subflow(&mut self, id: SubflowId) -> u64 {
        let moved = self.take_back(id);
        if let Some(a) = self.subflows.get_mut(&id) {
            a.outstanding = 0;
        }
        moved
    }

    fn take_back(&mut self, id: SubflowId) -> u64 {
        let mut moved = 0;
        let ids: Vec<StreamId> = self.streams.keys().copied().collect();
        for sid in ids {
            let n = self.streams.get_mut(&sid).map_or(0, |s| s.take_subflow(id));
            let fin_back = self.streams.get(&sid).is_some_and(|s| s.needs_bare_fin());
            if n > 0 || fin_back {
                moved += n;
                self.activate(sid);
            }
        }
        self.stats.rescued_bytes += moved;
        moved
    }

    /// Payload bytes scheduled on `id` and not acknowledged.
    pub fn outstanding(&self, id: SubflowId) -> u64 {
        self.subflows.get(&id).map_or(0, |a| a.outstanding)
    }

    /// Processes a data-level ACK. ACKs for unknown (closed) streams are ignored.
    pub fn on_ack(&mut self, ack: &DataAck) -> Result<(), SendError> {
        let Some(s) = self.streams.get_mut(&ack.stream) else {
            return Ok(());
        };
        let was_sendable = s.has_sendable_data();
        let freed = s.on_ack(ack).map_err(|source| SendError::BadAck {
            stream: ack.stream,
            source,
        })?;
        let now_sendable = s.has_sendable_data();
        let copies = s.take_acked_copies();
        for (sf, n) in freed {
            if let Some(a) = self.subflows.get_mut(&sf) {
                a.outstanding = a.outstanding.saturating_sub(n);
            }
        }
        // A copy the receiver had through another path (a dead subflow's data it had
        // received before the subflow was declared dead, a recalled range whose original
        // arrived first) still waits in its own subflow's TCP, in front of what was sent
        // there after it: the clamp of B_s keeps counting the path's queue up to it, as it
        // does for the copies a late-head rescue leaves behind (`ghost_end`).
        for (sf, wire_end) in copies {
            if let Some(a) = self.subflows.get_mut(&sf) {
                a.hold_queue_to(wire_end);
            }
        }
        if now_sendable && !was_sendable {
            self.activate(ack.stream);
        }
        Ok(())
    }

    /// True when no stream has data waiting to be scheduled (window-blocked data counts as
    /// waiting).
    pub fn all_scheduled(&self) -> bool {
        self.streams
            .values()
            .all(|s| s.unscheduled_new() == 0 && s.retx_len() == 0)
    }

    fn activate(&mut self, id: StreamId) {
        if !self.active.contains(&id) {
            self.active.push_back(id);
        }
    }

    /// Fills in what the sender knows about each subflow (`outstanding`) and applies the
    /// helper-buffer clamp.
    fn prepare(&mut self, views: &mut [PathView]) {
        for v in views.iter_mut() {
            if self.retired.contains(&v.id) {
                v.idle = false;
                v.outstanding = 0;
                continue;
            }
            let acct = self.subflows.entry(v.id).or_default();
            acct.kind.get_or_insert(v.kind);
            acct.kernel_queued = v.queued;
            acct.written_seen = acct.written;
            v.outstanding = acct.outstanding;
            if self.cfg.clamp_helper_buffer {
                let segments = v.outstanding.div_ceil(self.cfg.max_segment as u64);
                let wire = v.outstanding + segments * DATA_OVERHEAD as u64;
                let ghost = acct.ghost_end.saturating_sub(v.bytes_acked);
                v.queued = v.queued.min(wire + ghost);
                if let Some(pipe) = v.pipe.as_mut() {
                    pipe.buffered = pipe.buffered.min(wire.saturating_sub(v.queued));
                }
            }
        }
    }

    /// Asks for the next thing to send. `views` must describe every live subflow; the owner
    /// sends what it gets, in order, refreshes the views (at least `idle`, `queued`,
    /// `inflight`) and calls again until it gets `None`. It also calls again whenever a
    /// subflow becomes idle, an ACK arrives or feedback changes, since a deferred decision may
    /// then change.
    ///
    /// When nothing is left unscheduled, this is also where PAMS reinjection runs.
    pub fn poll_transmit(&mut self, now: Time, views: &mut [PathView]) -> Option<Output> {
        if let Some(c) = self.cancels.pop_front() {
            return Some(Output::Cancel(c));
        }
        match self.poll_data(now, views) {
            Some(t) => Some(Output::Data(t)),
            // A recall queues cancels and leaves its data for the following calls.
            None => self.cancels.pop_front().map(Output::Cancel),
        }
    }

    fn poll_data(&mut self, now: Time, views: &mut [PathView]) -> Option<Transmit> {
        for v in views.iter() {
            let acct = self.subflows.entry(v.id).or_default();
            if acct.acked.0 != v.bytes_acked || v.inflight == 0 {
                acct.acked = (v.bytes_acked, now);
            }
            acct.recovery_seen = if v.recovering && v.inflight > 0 {
                Some(acct.recovery_seen.unwrap_or(now))
            } else {
                None
            };
        }
        if !views.iter().any(|v| v.idle) {
            return None;
        }
        self.prepare(views);
        if self.late_rescue(now, views) > 0 {
            if !self.cancels.is_empty() {
                // The cancels go out before the rescued data.
                return None;
            }
            self.prepare(views);
        }
        if let Some(t) = self.try_schedule(now, views) {
            return Some(t);
        }
        if self.window_rescue(now, views) > 0 {
            if !self.cancels.is_empty() {
                // The cancels go out before the rescued data.
                return None;
            }
            self.prepare(views);
            return self.try_schedule(now, views);
        }
        if !self.all_scheduled() {
            return None;
        }
        let ctx = SchedContext {
            now,
            untransmitted: 0,
            segment: self.cfg.max_segment as u64,
            finite: true,
        };
        let Some(recall) = self.scheduler.reinjection(&ctx, views) else {
            if self.tail_copy(&ctx, views) == 0 || !self.cancels.is_empty() {
                return None;
            }
            self.prepare(views);
            return self.try_schedule(now, views);
        };
        if self.recall(recall) == 0 || !self.cancels.is_empty() {
            // Nothing recalled, or cancels must go out before the recalled data.
            return None;
        }
        self.prepare(views);
        self.try_schedule(now, views)
    }

    /// Round-robin over active streams; the first one the scheduler does not defer wins.
    fn try_schedule(&mut self, now: Time, views: &mut [PathView]) -> Option<Transmit> {
        for _ in 0..self.active.len() {
            let sid = *self.active.front()?;
            let Some(stream) = self.streams.get_mut(&sid) else {
                self.active.pop_front();
                continue;
            };
            if !stream.has_sendable_data() {
                if stream.needs_bare_fin() {
                    if let Some(i) = bare_fin_subflow(views) {
                        let fin = stream.commit_bare_fin(views[i].id);
                        self.active.pop_front();
                        return Some(Transmit {
                            subflow: views[i].id,
                            stream: sid,
                            dsn: fin.unwrap_or(0),
                            payload: Bytes::new(),
                            fin,
                            reinjected: false,
                        });
                    }
                    self.active.rotate_left(1);
                } else {
                    self.active.pop_front();
                }
                continue;
            }
            let Some(seg) = stream.peek_segment(self.cfg.max_segment as u64) else {
                self.active.rotate_left(1);
                continue;
            };
            let (start, end, reinjected) = (seg.start, seg.end, seg.reinjection);
            let ctx = SchedContext {
                now,
                untransmitted: stream.untransmitted(),
                segment: end - start,
                finite: stream.untransmitted_is_final(),
            };
            let decision = match seg.avoid {
                // Recalled bytes go to another subflow: decide without their source.
                Some(avoid) => {
                    let others: Vec<PathView> =
                        views.iter().filter(|v| v.id != avoid).cloned().collect();
                    if others.iter().any(|v| v.idle) {
                        self.scheduler.select(&ctx, &others)
                    } else {
                        Decision::Defer
                    }
                }
                None => self.scheduler.select(&ctx, views),
            };
            let pick = match decision {
                Decision::Send(id) if Some(id) != seg.avoid && !self.retired.contains(&id) => {
                    views.iter().position(|v| v.id == id)
                }
                _ => None,
            };
            let Some(i) = pick else {
                self.active.rotate_left(1);
                continue;
            };
            let subflow = views[i].id;
            let len = end - start;
            self.scheduler.on_scheduled(now, &views[i], len);
            let v = &mut views[i];
            v.outstanding += len;
            v.queued += len + DATA_OVERHEAD as u64;
            let due = now + secs(crate::scheduler::pams::pad_drain(v), 60.0);
            let acct = self.subflows.entry(subflow).or_default();
            acct.written += len + DATA_OVERHEAD as u64;
            let (payload, fin) = stream.commit(start, end, subflow, now, due, acct.written);
            if reinjected {
                self.stats.reinjected_bytes += len;
            } else {
                self.stats.new_bytes += len;
            }
            acct.outstanding += len;
            self.active.rotate_left(1);
            return Some(Transmit {
                subflow,
                stream: sid,
                dsn: start,
                payload,
                fin,
                reinjected,
            });
        }
        None
    }

    /// Carries out a PAMS recall: highest DSNs first, across streams from the highest id.
    fn recall(&mut self, r: Recall) -> u64 {
        let mut left = r.bytes;
        let ids: Vec<StreamId> = self.streams.keys().rev().copied().collect();
        let mut total = 0;
        for sid in ids {
            if left == 0 {
                break;
            }
            let Some(s) = self.streams.get_mut(&sid) else {
                continue;
            };
            let ranges = s.recall(r.from, left);
            let n = self.taken_back(r.from, sid, &ranges);
            left -= n;
            total += n;
        }
        if total > 0 {
            self.stats.recalls += 1;
            self.stats.recalled_bytes += total;
        }
        total
    }

    /// Books `ranges` of stream `sid` taken back from subflow `from` to be sent elsewhere
    /// (a recall or a window rescue): a helper is told to drop its copies (`DATA_CANCEL`),
    /// the subflow's outstanding count drops and the stream is scheduled again. Returns the
    /// bytes.
    fn taken_back(&mut self, from: SubflowId, sid: StreamId, ranges: &[(u64, u64)]) -> u64 {
        self.taken_back_and(from, sid, ranges, self.cfg.cancel_recalled)
    }

    /// [`Sender::taken_back`], telling a helper to drop its copies only if `cancel`.
    fn taken_back_and(
        &mut self,
        from: SubflowId,
        sid: StreamId,
        ranges: &[(u64, u64)],
        cancel: bool,
    ) -> u64 {
        let total: u64 = ranges.iter().map(|&(a, b)| b - a).sum();
        if total == 0 {
            return 0;
        }
        let helper = self
            .subflows
            .get(&from)
            .and_then(|a| a.kind)
            .is_some_and(|k| k == PathKind::Helper);
        if helper && cancel {
            self.cancels
                .extend(ranges.iter().map(|&(start, end)| Cancel {
                    subflow: from,
                    stream: sid,
                    start,
                    end,
                }));
        }
        self.activate(sid);
        if let Some(a) = self.subflows.get_mut(&from) {
            a.outstanding = a.outstanding.saturating_sub(total);
        }
        total
    }

    /// Window rescue: MPTCP's opportunistic retransmission (Raiciu et al., "How Hard Can It
    /// Be? Designing and Implementing a Deployable Multipath TCP", NSDI 2012, §4.2) for
    /// mpbond's streams. When a stream can send nothing because the receiver's window is
    /// full, or its own buffer is (both start at 4 MiB in the daemons), the receiver holds
    /// that much beyond its cumulative ACK and waits for the head of line, which sits on one
    /// subflow (a path in an outage, a helper behind a slow pipe); every other subflow idles
    /// because nothing new may be sent. PAMS's own reinjection (MPBond §4.3.4) only runs once nothing is left to schedule, so without
    /// this the stream stalls until that subflow delivers or dies (on the LTE traces of
    /// experiment 11d, 0.44 s at a time while an HS-Path's uplink was out). The head (from
    /// the cumulative ACK, the run on that subflow, at least [`WINDOW_RESCUE_MIN`] bytes or
    /// the idle subflow's congestion window) is sent again on the idle subflow with the
    /// smallest PAD; a helper is told to drop its copy. Only when the head is older than a
    /// round trip of its subflow (pipe included), and at most once per round trip of the
    /// subflow it goes to. It costs duplicate bytes, but only on subflows that could send
    /// nothing else.
    ///
    /// The same rescue covers the end of a chunk (everything scheduled) when the head's path
    /// has stalled: bytes in flight and no TCP ACK for [`STALL_MIN`] or two RTTs. PAMS's
    /// reinjection cannot see that (the stalled path's estimates are those of its last
    /// ACKs, so its PAD looks short), and the liveness check gives up on the link only after
    /// the stall timeout (1 s). Returns the bytes taken back.
    fn window_rescue(&mut self, now: Time, views: &[PathView]) -> u64 {
        if !self.cfg.window_rescue || now < self.rescue_hold {
            return 0;
        }
        let mut picked = None;
        let mut left_out = None;
        for (&sid, stream) in self.streams.iter() {
            if stream.has_sendable_data() {
                continue;
            }
            let Some(crate::conn::HeadOfLine {
                subflow: from,
                sent,
                ..
            }) = stream.head()
            else {
                continue;
            };
            let Some(src) = views.iter().find(|v| v.id == from) else {
                continue;
            };
            let round_trip = src.rtt.max(src.min_rtt) + src.pipe.as_ref().map_or(0.0, |p| p.rtt);
            let late = if stream.window_blocked() {
                now.saturating_since(sent).as_secs_f64() >= round_trip
            } else {
                let since = self.subflows.get(&from).map_or(now, |a| a.acked.1);
                let stall = STALL_MIN.as_secs_f64().max(2.0 * src.rtt);
                src.inflight > 0 && now.saturating_since(since).as_secs_f64() >= stall
            };
            if !late {
                continue;
            }
            if let Some(to) = self.rescue_target(now, views, from, &mut left_out) {
                picked = Some((sid, from, to.cwnd.max(WINDOW_RESCUE_MIN), to.rtt));
                break;
            }
        }
        let Some((sid, from, max, hold)) = picked else {
            return 0;
        };
        let Some(stream) = self.streams.get_mut(&sid) else {
            return 0;
        };
        let ranges = stream.take_head(from, max);
        let total = self.taken_back(from, sid, &ranges);
        if total == 0 {
            return 0;
        }
        self.hold_rescues(now, hold);
        self.stats.window_rescues += 1;
        self.stats.window_rescued_bytes += total;
        total
    }

    /// Where a rescued head goes: the idle live subflow other than `from` with the smallest
    /// PAD (shared by the window and late-head rescues), among those the scheduler would
    /// put data on (`Scheduler::left_out`: a helper left out to save its radios is not
    /// woken for a copy either). `left_out` caches the scheduler's answer for one scan over
    /// the streams, asked at the first late head.
    fn rescue_target<'v>(
        &self,
        now: Time,
        views: &'v [PathView],
        from: SubflowId,
        left_out: &mut Option<Vec<SubflowId>>,
    ) -> Option<&'v PathView> {
        let pad = crate::scheduler::pams::pad_drain;
        let left_out = left_out.get_or_insert_with(|| {
            let ctx = SchedContext {
                now,
                untransmitted: 0,
                segment: self.cfg.max_segment as u64,
                finite: false,
            };
            self.scheduler.left_out(&ctx, views)
        });
        views
            .iter()
            .filter(|v| {
                v.idle && v.id != from && !self.retired.contains(&v.id) && !left_out.contains(&v.id)
            })
            .min_by(|a, b| pad(a).total_cmp(&pad(b)))
    }

    /// Tail copy: a two-sided finish. Once every byte of a transfer whose rest is known
    /// ([`SendStream::untransmitted_is_final`]) is scheduled, PAMS planned a common finish
    /// from rate estimates, and on a cellular path those trail the rate by a round trip of a
    /// deep queue: one subflow drains early and idles while another still delivers the last
    /// bytes (in 11d's segments a link ends 0.1-0.5 s before the others). PAMS's recall
    /// moves a share it computes from the same estimates, and only for a gain above a round
    /// trip. Here the subflow that drained (idle, at most [`Sender::copy_budget`] in its
    /// queue) takes the last segment still held once by the subflow with the largest PAD,
    /// then, as it drains, the one before, and so on: the source delivers its share from the
    /// front and the copies arrive from the back, so the transfer ends where the two meet,
    /// whatever the rates turn out to be, without predicting them. The copying stops where
    /// the source's PAD, which no longer counts what was copied, falls within two of the
    /// destination's segment times of the destination's own. A helper source drops its copy
    /// (`DATA_CANCEL`) only when ours gains more than the destination's round trip; in a
    /// closer race both travel. The source's TCP still carries the copied bytes it holds,
    /// and what it costs is those bytes sent twice, at most about a round trip of the
    /// destination's capacity past the meeting point; the next request of a
    /// request-response workload takes that round trip anyway. A helper whose cellular
    /// radio has gone idle is not woken for it. Off by default: in the lab it did not move
    /// 11d beyond its spread and sent 2.5-2.8% of 07's bytes twice (docs/evaluation.md,
    /// item 57). Returns the bytes copied.
    /// `ctx` is the reinjection's: nothing left unscheduled, the rest final.
    fn tail_copy(&mut self, ctx: &SchedContext, views: &[PathView]) -> u64 {
        if !self.cfg.tail_copy {
            return 0;
        }
        let pad = crate::scheduler::pams::pad_drain;
        let seg = ctx.segment;
        let left_out = self.scheduler.left_out(ctx, views);
        let Some(to) = views
            .iter()
            .filter(|v| {
                v.idle
                    && !self.retired.contains(&v.id)
                    && !left_out.contains(&v.id)
                    && Self::takes_copies(v, seg)
            })
            .min_by(|a, b| pad(a).total_cmp(&pad(b)))
        else {
            return 0;
        };
        // The copy of one segment must arrive before the source's uncopied share ends, by
        // at least its own time on the destination: a copy that does not win holds the
        // destination that long (a 16 KiB segment takes 131 ms at 1 Mbit/s).
        let seg_time = seg as f64 / to.effective_throughput().max(1.0);
        let arrive = pad(to) + 2.0 * seg_time;
        let to_rtt = to.propagation_rtt() + to.pipe.as_ref().map_or(0.0, |q| q.propagation_rtt());
        let mut sources: Vec<&PathView> = views
            .iter()
            .filter(|v| {
                v.id != to.id
                    && !self.retired.contains(&v.id)
                    && v.outstanding > 0
                    && pad(v) > arrive
            })
            .collect();
        sources.sort_by(|a, b| pad(b).total_cmp(&pad(a)));
        let ids: Vec<StreamId> = self
            .streams
            .iter()
            .rev()
            .filter(|(_, s)| s.untransmitted_is_final())
            .map(|(&id, _)| id)
            .collect();
        for src in sources {
            for &sid in &ids {
                let Some(stream) = self.streams.get_mut(&sid) else {
                    continue;
                };
                let ranges = stream.recall_originals(src.id, seg);
                // The helper drops its copy only when ours gains more than a round trip of
                // the destination (PAMS's recall test); a closer race keeps both.
                let cancel = self.cfg.cancel_recalled && pad(src) - arrive > to_rtt;
                let total = self.taken_back_and(src.id, sid, &ranges, cancel);
                if total == 0 {
                    continue;
                }
                self.stats.tail_copies += 1;
                self.stats.tail_copied_bytes += total;
                return total;
            }
        }
        0
    }

    /// Whether a subflow may carry copies of another's data (the tail copy, the loss
    /// rescue): it has drained ([`Sender::drained_for_copy`]) and, for a helper, its
    /// cellular radio is awake, since a copy must not wake it.
    fn takes_copies(v: &PathView, segment: u64) -> bool {
        Self::drained_for_copy(v, segment) && (v.kind == PathKind::Direct || v.radio_awake())
    }

    /// How much a subflow may hold in its queue and still take a tail copy: about what it
    /// delivers in its propagation round trip (enough to keep it busy, little to waste past
    /// the point where the copies meet the source), at least two segments.
    fn copy_budget(v: &PathView, segment: u64) -> f64 {
        (v.effective_throughput() * v.propagation_rtt()).max(2.0 * segment as f64)
    }

    /// Whether a subflow has drained far enough to take a tail copy: its queue within
    /// [`Sender::copy_budget`], and a helper's buffer within its pipe's round trip (two
    /// segments at least). A helper relays its buffer in DSN order, so a copy of another
    /// subflow's tail (lower DSNs than the helper's own last bytes) would go out on the pipe
    /// before them: with a backlog at the helper the copy displaces its own share instead of
    /// using idle capacity (in the simulator, PS 1, HS 18, pipe 5 Mbit/s at 1 MB ended 27 ms
    /// later, the pipe's time for one segment).
    fn drained_for_copy(v: &PathView, segment: u64) -> bool {
        let pipe_ok = v
            .pipe
            .as_ref()
            .is_none_or(|p| p.buffered as f64 <= (p.throughput * p.rtt).max(2.0 * segment as f64));
        (v.queued as f64) < Self::copy_budget(v, segment) && pipe_ok
    }

    /// No further rescue for `hold` seconds (the RTT of the subflow the last one went to),
    /// at least a millisecond.
    fn hold_rescues(&mut self, now: Time, hold: f64) {
        self.rescue_hold = now + secs(hold, 1.0).max(Duration::from_millis(1));
    }

    /// How much a late-head or loss rescue takes to `to`: what it delivers within `within`
    /// seconds behind its own delay (PAD), one segment at least (the head), and at most
    /// [`WINDOW_RESCUE_MIN`] or its congestion window, if larger.
    fn rescue_max(&self, to: &PathView, within: f64) -> u64 {
        let budget = to.throughput * (within - crate::scheduler::pams::pad_drain(to));
        to.cwnd
            .max(WINDOW_RESCUE_MIN)
            .min((budget.max(0.0) as u64).max(self.cfg.max_segment as u64))
    }

    /// How long a head of line held behind a loss still has to wait, and where the blocked
    /// part of its subflow's byte stream starts (by the sender's count of bytes written to
    /// it): `Some` when its subflow's TCP is recovering ([`PathView::recovering`]) and the
    /// head ends past the cumulative ACK, placed in that count from the queue last read
    /// plus the bytes SACKed above it. The retransmission went out about when the recovery
    /// was first seen and crosses the path's queue, so it is expected at the receiver a
    /// smoothed RTT less the propagation delay back from then (plus the pipe's, for a
    /// helper); a head due later than that is not held up by the loss.
    fn loss_wait(&self, now: Time, views: &[PathView], h: &HeadOfLine) -> Option<(f64, u64)> {
        if !self.cfg.loss_rescue {
            return None;
        }
        let v = views.iter().find(|v| v.id == h.subflow)?;
        let a = self.subflows.get(&h.subflow)?;
        // Set from these very views at the top of `poll_data`.
        let seen = a.recovery_seen?;
        let wire_from = a
            .written_seen
            .saturating_sub(a.kernel_queued.saturating_add(v.sacked));
        if h.wire_end <= wire_from {
            // Acknowledged by its TCP: the data ACK is on its way.
            return None;
        }
        let pipe = v.pipe.as_ref().map_or(0.0, |p| p.propagation_rtt() / 2.0);
        let arrive = seen + secs(v.rtt - v.propagation_owd() + pipe, 2.0);
        if h.due >= arrive {
            return None;
        }
        let wait = arrive.saturating_since(now).as_secs_f64();
        (wait > 0.0).then_some((wait, wire_from))
    }

    /// Late-head rescue, and its loss branch. Loss rescue: once every byte is scheduled
    /// (before, copies would take their destination's capacity from new data), a head of
    /// line held behind a hole its subflow's TCP is recovering from ([`Sender::loss_wait`])
    /// goes out again at once, with its subflow's blocked share behind it, on the idle
    /// subflow with the smallest PAD, if that one has drained ([`Sender::drained_for_copy`]),
    /// is not a helper whose radio has gone idle, and delivers within [`LOSS_GAIN`] of the
    /// time the retransmission still needs; no more than it delivers before the
    /// retransmission is due. The late-head rescue would wait until the head is past its
    /// due time by as long again as its predicted delay, which behind a deep queue is about
    /// when the retransmission arrives anyway.
    ///
    /// Late-head rescue: a stream's head of line that is well past the time the scheduler
    /// expected it at the receiver (its `due`: commit time plus the subflow's PAD, MPBond
    /// §4.3.2; late once past it by the data ACK's way back, the receiver's ACK hold and a
    /// slack of [`LATE_SLACK_FRACTION`] of the predicted delay) goes out again on the idle
    /// subflow with the smallest PAD, if that one would deliver it within [`LATE_GAIN`] of
    /// the time the head is late already, together with its subflow's late share behind it
    /// (at most [`WINDOW_RESCUE_MIN`] bytes or the idle subflow's congestion window, if
    /// larger, and no more than the idle subflow delivers within that same bound: a copy
    /// arriving later than its original would only hold up what that subflow carries next);
    /// a helper is told to drop its copies. A copy is never rescued again: its
    /// original is still on its way.
    ///
    /// [`Sender::window_rescue`] waits until the stream can send nothing; with autotuned
    /// windows of up to 32 MiB that may be never, and the application waits meanwhile. On
    /// the LTE traces of experiment 10b most 100 ms samples in which the application got no
    /// byte although every link delivered were of this kind: the PS-Path's rate collapsed
    /// in a trace dip (5 to 0.2 Mbit/s) with 150 KB queued, or a drop at its full queue sent
    /// the retransmission behind that queue (about one smoothed RTT, up to 1.5 s), while the
    /// helper's subflow kept filling the receiver's reorder buffer. A TCP subflow delivers in
    /// order, so its later segments wait behind the late one; taking its share from the head
    /// on (passing over the other subflows' ranges) frees them too. At most one rescue per
    /// round trip of the subflow the last one went to (shared with the window rescue).
    ///
    /// The copies left behind still hold the source's queue: until its TCP acknowledges them
    /// the clamp of B_s keeps counting them (`ghost_end`), or PAMS would take the emptied
    /// path for a fast one, queue new data behind the copies, and the next head there would
    /// be late in turn: the rescue would feed on itself. Returns the bytes taken back.
    fn late_rescue(&mut self, now: Time, views: &[PathView]) -> u64 {
        if !(self.cfg.late_rescue || self.cfg.loss_rescue)
            || now < self.rescue_hold
            || now < self.late_scan
        {
            return 0;
        }
        self.late_scan = now + LATE_SCAN;
        // The data ACK crosses a whole path back: at the primary a helper subflow's
        // sender-side path is only the pipe, and the proxy is a WAN hop (the helper's
        // report's RTT) beyond it.
        let ack_way_back = views
            .iter()
            .filter(|v| !self.retired.contains(&v.id))
            .map(|v| v.propagation_owd() + v.pipe.as_ref().map_or(0.0, |q| q.rtt / 2.0))
            .fold(f64::INFINITY, f64::min);
        if !ack_way_back.is_finite() {
            return 0;
        }
        let grace = secs(ack_way_back, 1.0) + ACK_HOLD;
        let is_late = |sent: Time, due: Time| {
            let predicted = due.saturating_since(sent);
            let slack = predicted.mul_f64(LATE_SLACK_FRACTION).max(LATE_SLACK_MIN);
            now >= due + grace + slack
        };
        let pad = crate::scheduler::pams::pad_drain;
        // Copies of a blocked share take their target's capacity from the data it would
        // carry next: only once every byte is scheduled do they ride capacity that would
        // otherwise idle.
        let loss_rescue = self.all_scheduled();
        let mut picked = None;
        let mut left_out = None;
        for (&sid, stream) in self.streams.iter() {
            // A head sent before has a copy on its way elsewhere (a rescue's original
            // stays in its path's queue): sending a third would only add to the traffic.
            let Some(h) = stream.head().filter(|h| !h.again) else {
                continue;
            };
            // Held behind a loss: the copy must arrive well before the retransmission, and
            // only what arrives before it is worth copying (one segment at least, the head).
            if let Some((wait, wire_from)) = self.loss_wait(now, views, &h).filter(|_| loss_rescue)
            {
                let seg = self.cfg.max_segment as u64;
                let to = self
                    .rescue_target(now, views, h.subflow, &mut left_out)
                    .filter(|v| pad(v) < wait * LOSS_GAIN && Self::takes_copies(v, seg));
                if let Some(to) = to {
                    let max = self.rescue_max(to, wait);
                    picked = Some((sid, h.subflow, max, to.rtt, Some(wire_from)));
                    break;
                }
            }
            if !self.cfg.late_rescue || !is_late(h.sent, h.due) {
                continue;
            }
            // The head is likely to take about as long again as it is late already; another
            // path must deliver a copy in half that, or the copy is not worth its bytes.
            let late_by = now.saturating_since(h.due).as_secs_f64();
            let to = self
                .rescue_target(now, views, h.subflow, &mut left_out)
                .filter(|v| pad(v) < late_by * LATE_GAIN);
            if let Some(to) = to {
                // The rest of the share must meet the head's bound too: only what the
                // target delivers within LATE_GAIN of the lateness.
                let max = self.rescue_max(to, late_by * LATE_GAIN);
                picked = Some((sid, h.subflow, max, to.rtt, None));
                break;
            }
        }
        let Some((sid, from, max, hold, blocked_from)) = picked else {
            return 0;
        };
        let Some(stream) = self.streams.get_mut(&sid) else {
            return 0;
        };
        let ranges = match blocked_from {
            Some(wire_from) => stream.take_blocked_share(from, max, wire_from),
            None => stream.take_share_from_head(from, max, is_late),
        };
        let total = self.taken_back(from, sid, &ranges);
        if total == 0 {
            return 0;
        }
        // The copies left behind still hold the path's queue: whatever is scheduled on it
        // next waits behind them, and PAD must say so, or PAMS would take the emptied path
        // for a fast one and the next head there would be late again.
        if let (Some(a), Some(v)) = (
            self.subflows.get_mut(&from),
            views.iter().find(|v| v.id == from),
        ) {
            a.ghost_end = a.ghost_end.max(v.bytes_acked + a.kernel_queued);
        }
        self.hold_rescues(now, hold);
        if blocked_from.is_some() {
            self.stats.loss_rescues += 1;
            self.stats.loss_rescued_bytes += total;
            return total;
        }
        self.stats.late_rescues += 1;
        self.stats.late_rescued_bytes += total;
        total
    }
}

/// `x` seconds as a duration, at most `max`; zero for anything negative or not a number.
/// The inputs are estimates built from kernel readings and peer reports, which must not be
/// able to panic the daemon (`Duration::from_secs_f64` does on NaN or a negative value).
fn secs(x: f64, max: f64) -> Duration {
    if x > 0.0 {
        Duration::from_secs_f64(x.min(max))
    } else {
        Duration::ZERO
    }
}

/// Where a bare FIN goes, if anywhere yet: an idle direct subflow (the one with the smallest
/// RTT); else an idle helper subflow whose HS-Path is awake anyway (it carried something in
/// the last [`crate::path::RADIO_AWAKE`], or its idleness is unknown); else, while a direct subflow exists
/// but is busy, nowhere: the FIN waits for it, since it only has to arrive with the stream's
/// last bytes and a helper whose share is done would pay for those few bytes with a wake-up
/// of its cellular radio (in the lab, a second of LTE tail after a 4 MB download:
/// docs/evaluation.md, experiment 14). Without a direct subflow, the idle helper subflow
/// with the smallest RTT.
fn bare_fin_subflow(views: &[PathView]) -> Option<usize> {
    let min_rtt = |pick: &dyn Fn(&PathView) -> bool| {
        views
            .iter()
            .enumerate()
            .filter(|(_, v)| v.idle && pick(v))
            .min_by(|a, b| a.1.rtt.total_cmp(&b.1.rtt))
            .map(|(i, _)| i)
    };
    let direct = |v: &PathView| v.kind == crate::path::PathKind::Direct;
    min_rtt(&direct)
        .or_else(|| min_rtt(&|v: &PathView| !direct(v) && v.radio_awake()))
        .or_else(|| {
            if views.iter().any(direct) {
                None
            } else {
                min_rtt(&|_: &PathView| true)
            }
        })
}
