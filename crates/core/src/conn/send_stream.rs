//! Sender-side state of one stream: its meta buffer, what each subflow carries, and the data
//! to send again.

use std::collections::{BTreeMap, VecDeque};

use bytes::Bytes;
use mpbond_proto::{DataAck, SubflowId};

use crate::conn::send_buffer::SendBuffer;
use crate::ranges::RangeSet;
use crate::Time;

/// A segment scheduled on a subflow and not yet acknowledged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct InFlight {
    end: u64,
    subflow: SubflowId,
    /// When it was committed (the parts of a split segment keep its time).
    sent: Time,
    /// When the scheduler expected it at the receiver: `sent` plus the subflow's PAD at the
    /// decision ([`crate::scheduler::pams::pad_drain`]). A head of line well past it is late
    /// ([`crate::Sender`]'s late-head rescue).
    due: Time,
    /// Sent before, on another subflow or this one (a reinjection or a rescue).
    again: bool,
    /// Where it ends in its subflow's byte stream: the sender's count of bytes written to
    /// that subflow once this segment was (see [`SendStream::take_acked_copies`]).
    wire_end: u64,
}

/// The stream's head of line: the in-flight segment holding the byte at the cumulative ACK.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HeadOfLine {
    /// The subflow carrying it.
    pub subflow: SubflowId,
    /// When it was committed to that subflow.
    pub sent: Time,
    /// When the scheduler expected it at the receiver.
    pub due: Time,
    /// These bytes were sent before: a copy may still be on its way elsewhere.
    pub again: bool,
    /// Where it ends in its subflow's byte stream, by the sender's count of bytes written to
    /// that subflow.
    pub wire_end: u64,
}

/// Where the stream's end (`STREAM_FIN`) stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FinState {
    /// The application may still write.
    Open,
    /// The final size is known and no `STREAM_FIN` is in flight.
    Pending,
    /// A `STREAM_FIN` went out on this subflow.
    Sent(SubflowId),
    /// The receiver confirmed the final size.
    Acked,
}

/// Errors from acknowledgement processing: the peer acknowledged something impossible.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AckError {
    /// The ACK covers bytes that were never sent.
    #[error("data ACK up to {acked} but only {sent} bytes were sent")]
    BeyondSent {
        /// Highest DSN acknowledged.
        acked: u64,
        /// Bytes sent so far.
        sent: u64,
    },
}

/// One stream's sender state.
///
/// The DSN space splits into: acknowledged (`..cum_ack`), scheduled (in flight on some subflow,
/// or waiting in `retx` to be scheduled again), and new (`next_new..written`, the unscheduled
/// part of the meta buffer, MPBond §4.3.3 footnote 3).
#[derive(Debug)]
pub struct SendStream {
    buf: SendBuffer,
    capacity: u64,
    /// `capacity` follows the peer's window up to this ([`SendStream::with_max_capacity`]).
    max_capacity: u64,
    next_new: u64,
    retx: RangeSet,
    cum_ack: u64,
    window_end: u64,
    inflight: BTreeMap<u64, InFlight>,
    final_size: Option<u64>,
    fin: FinState,
    /// Whether the application source is idle with room to give more
    /// ([`SendStream::set_source_idle`]).
    source_idle: bool,
    chunk_ends: VecDeque<u64>,
    /// Recalled ranges waiting in `retx`, with the subflow they were recalled from: they must
    /// go to another subflow (MPBond §4.3.4 reinjects "into another subflow").
    recalled: Vec<(u64, u64, SubflowId)>,
    /// Copies (`again`) acknowledged since [`SendStream::take_acked_copies`] last ran, with
    /// where the last of each subflow's ends in its byte stream.
    acked_copies: Vec<(SubflowId, u64)>,
}

/// A segment ready to be scheduled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Segment {
    /// First DSN.
    pub start: u64,
    /// One past the last.
    pub end: u64,
    /// True when these bytes were scheduled before.
    pub reinjection: bool,
    /// The subflow these bytes were recalled from, which must not carry them again.
    pub avoid: Option<SubflowId>,
}

impl SendStream {
    /// A stream that buffers at most `capacity` unacknowledged bytes and may initially send
    /// below `initial_window`.
    pub fn new(capacity: u64, initial_window: u64) -> Self {
        SendStream {
            buf: SendBuffer::default(),
            capacity,
            max_capacity: capacity,
            next_new: 0,
            retx: RangeSet::new(),
            cum_ack: 0,
            window_end: initial_window,
            inflight: BTreeMap::new(),
            final_size: None,
            fin: FinState::Open,
            chunk_ends: VecDeque::new(),
            source_idle: false,
            recalled: Vec::new(),
            acked_copies: Vec::new(),
        }
    }

    /// Lets the buffer grow to twice the peer's receive window, up to `max` bytes: a
    /// receiver that autotunes its window (`RecvStream::autotune`) gains nothing unless the
    /// sender may hold as much unacknowledged. By default the buffer stays at its initial
    /// size.
    pub fn with_max_capacity(mut self, max: u64) -> Self {
        self.max_capacity = max.max(self.capacity);
        self
    }

    /// The most unacknowledged bytes buffered now.
    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// How many more bytes [`SendStream::write`] would accept now. Zero is backpressure: the
    /// caller must stop reading from its source until ACKs free space.
    pub fn writable(&self) -> u64 {
        if self.fin != FinState::Open {
            return 0;
        }
        self.capacity.saturating_sub(self.buf.len())
    }

    /// Appends application data. Returns the number of bytes taken (a prefix of `data`), which
    /// is less than `data.len()` when the buffer is full.
    pub fn write(&mut self, mut data: Bytes) -> usize {
        let n = (self.writable() as usize).min(data.len());
        data.truncate(n);
        self.buf.push(data);
        if n > 0 {
            self.source_idle = false;
        }
        n
    }

    /// The application will write nothing more.
    pub fn finish(&mut self) {
        if self.fin == FinState::Open {
            self.final_size = Some(self.buf.end());
            self.fin = FinState::Pending;
        }
    }

    /// Marks the end of an application chunk at `end` (MPBond §4.4, footnote 5). While a chunk
    /// is open, GetUntransmittedSize() counts only its bytes.
    pub fn mark_chunk_end(&mut self, end: u64) {
        if self.chunk_ends.back().is_none_or(|&last| end > last) {
            self.chunk_ends.push_back(end);
        }
    }

    /// Total bytes written by the application.
    pub fn written(&self) -> u64 {
        self.buf.end()
    }

    /// Every byte below this has been acknowledged.
    pub fn cum_ack(&self) -> u64 {
        self.cum_ack
    }

    /// The peer's window end.
    pub fn window_end(&self) -> u64 {
        self.window_end
    }

    /// The final size, once the application finished.
    pub fn final_size(&self) -> Option<u64> {
        self.final_size
    }

    /// Where the FIN stands.
    pub fn fin_state(&self) -> FinState {
        self.fin
    }

    /// Bytes waiting to be scheduled again (reinjection or a dead subflow).
    pub fn retx_len(&self) -> u64 {
        self.retx.len()
    }

    /// Never-scheduled bytes (the meta buffer).
    pub fn unscheduled_new(&self) -> u64 {
        self.buf.end() - self.next_new
    }

    /// GetUntransmittedSize(): bytes still to schedule in the current chunk if one is marked,
    /// else in the whole meta buffer, plus bytes waiting to be scheduled again.
    pub fn untransmitted(&mut self) -> u64 {
        while self.chunk_ends.front().is_some_and(|&e| e <= self.next_new) {
            self.chunk_ends.pop_front();
        }
        let new = match self.chunk_ends.front() {
            Some(&e) => e.min(self.buf.end()) - self.next_new,
            None => self.unscheduled_new(),
        };
        new + self.retx.len()
    }

    /// True when [`Self::untransmitted`] is everything left to send: the application has
    /// closed its side (the final size is known) or a chunk end is marked.
    pub fn untransmitted_is_final(&self) -> bool {
        self.final_size.is_some() || !self.chunk_ends.is_empty() || self.source_idle
    }

    /// The application has nothing more to give right now although the buffer has room (an
    /// HTTP response read to its end on a keep-alive connection): what is buffered is, as
    /// far as anyone knows, the rest of the transfer. Cleared by the next write.
    pub fn set_source_idle(&mut self, idle: bool) {
        self.source_idle = idle;
    }

    /// True when the stream cannot send anything because its head of line is not
    /// acknowledged: nothing waits to be sent again, and either new data waits behind the
    /// peer's full window (the receiver holds a window's worth beyond the cumulative ACK) or
    /// everything buffered is scheduled and the buffer is full, so the application's source
    /// is held back until the head is acknowledged.
    pub fn window_blocked(&self) -> bool {
        if !self.retx.is_empty() {
            return false;
        }
        let peer_window = self.next_new < self.buf.end() && self.next_new >= self.window_end;
        let own_buffer = self.fin == FinState::Open
            && self.next_new == self.buf.end()
            && self.buf.len() >= self.capacity;
        peer_window || own_buffer
    }

    /// True when a data segment could be scheduled now (the window permitting).
    pub fn has_sendable_data(&self) -> bool {
        !self.retx.is_empty() || (self.next_new < self.buf.end() && self.next_new < self.window_end)
    }

    /// True when only the FIN remains to be sent.
    pub fn needs_bare_fin(&self) -> bool {
        self.fin == FinState::Pending
            && self.retx.is_empty()
            && Some(self.next_new) == self.final_size
    }

    /// True when every byte and the FIN are acknowledged.
    pub fn is_complete(&self) -> bool {
        self.fin == FinState::Acked
    }

    /// The next segment to schedule, at most `max` bytes: data waiting to be sent again first
    /// (it has the lowest DSNs and blocks the receiver), then new data inside the window.
    /// Nothing is committed; see [`SendStream::commit`].
    pub fn peek_segment(&self, max: u64) -> Option<Segment> {
        if let Some((s, e)) = self.retx.first() {
            let mut end = e.min(s + max);
            let mut avoid = None;
            for &(rs, re, sf) in &self.recalled {
                if rs <= s && s < re {
                    // Inside a recalled range: stop at its end.
                    avoid = Some(sf);
                    end = end.min(re);
                } else if rs > s {
                    // Stop before a recalled range that starts later.
                    end = end.min(rs);
                }
            }
            return Some(Segment {
                start: s,
                end,
                reinjection: true,
                avoid,
            });
        }
        let limit = self.buf.end().min(self.window_end);
        (self.next_new < limit).then(|| Segment {
            start: self.next_new,
            end: limit.min(self.next_new + max),
            reinjection: false,
            avoid: None,
        })
    }

    /// Commits a segment returned by [`SendStream::peek_segment`] to `subflow` and returns its
    /// bytes, plus the final size if this segment carries the stream's last byte. `due` is
    /// when the receiver should have it (`now` plus the subflow's PAD); `wire_end` is where
    /// its frame ends in the subflow's byte stream.
    pub fn commit(
        &mut self,
        start: u64,
        end: u64,
        subflow: SubflowId,
        now: Time,
        due: Time,
        wire_end: u64,
    ) -> (Bytes, Option<u64>) {
        let again = self.retx.remove(start, end) > 0;
        if again {
            self.forget_recalled(start, end);
        } else {
            debug_assert_eq!(start, self.next_new);
            self.next_new = end;
        }
        self.inflight.insert(
            start,
            InFlight {
                end,
                subflow,
                sent: now,
                due: due.max(now),
                again,
                wire_end,
            },
        );
        let payload = self.buf.slice(start, end).unwrap_or_default();
        let fin = self.take_fin_if_last(end, subflow);
        (payload, fin)
    }

    /// Drops the "recalled from" marks of `start..end`.
    fn forget_recalled(&mut self, start: u64, end: u64) {
        if self.recalled.is_empty() {
            return;
        }
        let mut kept = Vec::with_capacity(self.recalled.len());
        for (rs, re, sf) in self.recalled.drain(..) {
            if re <= start || rs >= end {
                kept.push((rs, re, sf));
                continue;
            }
            if rs < start {
                kept.push((rs, start, sf));
            }
            if re > end {
                kept.push((end, re, sf));
            }
        }
        self.recalled = kept;
    }

    /// Commits a bare FIN to `subflow`.
    pub fn commit_bare_fin(&mut self, subflow: SubflowId) -> Option<u64> {
        let end = self.next_new;
        self.take_fin_if_last(end, subflow)
    }

    fn take_fin_if_last(&mut self, end: u64, subflow: SubflowId) -> Option<u64> {
        let last = self.final_size == Some(end) && self.retx.is_empty();
        if last && self.fin == FinState::Pending {
            self.fin = FinState::Sent(subflow);
            self.final_size
        } else {
            None
        }
    }

    /// Processes a data-level ACK. Returns how many in-flight bytes it acknowledged on each
    /// subflow, so the caller can keep per-subflow counts.
    pub fn on_ack(&mut self, ack: &DataAck) -> Result<Vec<(SubflowId, u64)>, AckError> {
        let sent = self.next_new;
        let highest = ack
            .sacks
            .as_slice()
            .iter()
            .map(|&(_, e)| e)
            .fold(ack.cum_ack, u64::max);
        if highest > sent {
            return Err(AckError::BeyondSent {
                acked: highest,
                sent,
            });
        }
        let mut freed = Vec::new();
        if ack.cum_ack > self.cum_ack {
            self.remove_inflight(0, ack.cum_ack, &mut freed);
            self.retx.remove_below(ack.cum_ack);
            self.cum_ack = ack.cum_ack;
            self.buf.release_below(ack.cum_ack);
        }
        for &(s, e) in ack.sacks.as_slice() {
            self.remove_inflight(s, e, &mut freed);
            self.retx.remove(s, e);
            self.forget_recalled(s, e);
        }
        self.forget_recalled(0, self.cum_ack);
        self.window_end = self.window_end.max(ack.window_end);
        // Twice the peer's window: the sender learns of the receiver's progress an ACK late,
        // so a buffer the size of the window would stop it short of the window's edge, and
        // the receiver, seeing its window never fill, would never grow it.
        let want = (self.window_end - self.cum_ack).saturating_mul(2);
        if want > self.capacity {
            self.capacity = want.min(self.max_capacity);
        }
        if ack.fin_received && self.final_size == Some(self.cum_ack) {
            self.fin = FinState::Acked;
        }
        Ok(freed)
    }

    /// Removes the parts of in-flight segments inside `start..end`, noting the bytes per
    /// subflow.
    fn remove_inflight(&mut self, start: u64, end: u64, freed: &mut Vec<(SubflowId, u64)>) {
        // The segment that begins before `start` may overlap it.
        let first = self
            .inflight
            .range(..start)
            .next_back()
            .filter(|(_, f)| f.end > start)
            .map(|(&s, _)| s);
        let keys: Vec<u64> = first
            .into_iter()
            .chain(self.inflight.range(start..end).map(|(&s, _)| s))
            .collect();
        for s in keys {
            let Some(f) = self.inflight.remove(&s) else {
                continue;
            };
            let cut_start = s.max(start);
            let cut_end = f.end.min(end);
            if s < cut_start {
                self.inflight.insert(
                    s,
                    InFlight {
                        end: cut_start,
                        ..f
                    },
                );
            }
            if cut_end < f.end {
                self.inflight.insert(cut_end, f);
            }
            add(freed, f.subflow, cut_end - cut_start);
            if f.again {
                match self.acked_copies.iter_mut().find(|(s, _)| *s == f.subflow) {
                    Some((_, w)) => *w = (*w).max(f.wire_end),
                    None => self.acked_copies.push((f.subflow, f.wire_end)),
                }
            }
        }
    }

    /// The copies (bytes sent before, on another subflow or this one) acknowledged since
    /// the last call: per subflow, where the last of them ends in its byte stream (the
    /// `wire_end` of [`SendStream::commit`]). The receiver may have had them through the
    /// other copy while this one still waits in its subflow's queue, in front of what was
    /// sent there after it.
    pub fn take_acked_copies(&mut self) -> Vec<(SubflowId, u64)> {
        std::mem::take(&mut self.acked_copies)
    }

    /// Bytes in flight on `subflow`.
    pub fn outstanding_on(&self, subflow: SubflowId) -> u64 {
        self.inflight
            .iter()
            .filter(|(_, f)| f.subflow == subflow)
            .map(|(&s, f)| f.end - s)
            .sum()
    }

    /// Takes back everything in flight on a dead subflow so it is scheduled again (MPBond §4.1,
    /// "Error Handling"). Returns the bytes moved.
    pub fn take_subflow(&mut self, subflow: SubflowId) -> u64 {
        let dead: Vec<(u64, u64)> = self
            .inflight
            .iter()
            .filter(|(_, f)| f.subflow == subflow)
            .map(|(&s, f)| (s, f.end))
            .collect();
        let mut moved = 0;
        for (s, e) in dead {
            self.inflight.remove(&s);
            self.retx.insert(s, e);
            moved += e - s;
        }
        if self.fin == FinState::Sent(subflow) {
            self.fin = FinState::Pending;
        }
        moved
    }

    /// Recalls up to `max` in-flight bytes of `subflow`, highest DSNs first, so they are
    /// scheduled again (PAMS reinjection, MPBond §4.3.4). Returns the recalled ranges in
    /// ascending order.
    pub fn recall(&mut self, subflow: SubflowId, max: u64) -> Vec<(u64, u64)> {
        self.recall_where(subflow, max, false)
    }

    /// As [`SendStream::recall`], but only bytes sent once: the tail copy
    /// ([`crate::Sender`]'s `tail_copy`) copies a subflow's own share, never a copy it
    /// carries of another's (that would send a third).
    pub fn recall_originals(&mut self, subflow: SubflowId, max: u64) -> Vec<(u64, u64)> {
        self.recall_where(subflow, max, true)
    }

    fn recall_where(
        &mut self,
        subflow: SubflowId,
        max: u64,
        originals_only: bool,
    ) -> Vec<(u64, u64)> {
        let mut left = max;
        let mut out = Vec::new();
        let candidates: Vec<(u64, u64)> = self
            .inflight
            .iter()
            .rev()
            .filter(|(_, f)| f.subflow == subflow && !(originals_only && f.again))
            .map(|(&s, f)| (s, f.end))
            .collect();
        for (s, e) in candidates {
            if left == 0 {
                break;
            }
            let take_from = s.max(e - left.min(e - s));
            let Some(f) = self.inflight.remove(&s) else {
                continue;
            };
            if take_from > s {
                self.inflight.insert(
                    s,
                    InFlight {
                        end: take_from,
                        // The part left was written before the part recalled.
                        wire_end: f.wire_end.saturating_sub(e - take_from),
                        ..f
                    },
                );
            }
            self.retx.insert(take_from, e);
            self.recalled.push((take_from, e, subflow));
            left -= e - take_from;
            out.push((take_from, e));
        }
        if !out.is_empty() && self.fin == FinState::Sent(subflow) {
            self.fin = FinState::Pending;
        }
        out.reverse();
        out
    }

    /// The head of line: the segment holding the byte at the cumulative ACK. `None` when that
    /// byte is not in flight (acknowledged, or waiting in `retx`).
    pub fn head(&self) -> Option<HeadOfLine> {
        let (&start, f) = self.inflight.first_key_value()?;
        (start == self.cum_ack).then_some(HeadOfLine {
            subflow: f.subflow,
            sent: f.sent,
            due: f.due,
            again: f.again,
            wire_end: f.wire_end,
        })
    }

    /// Takes back `subflow`'s share from the head of line on, lowest DSNs first, while
    /// `late(sent, due)` holds for its ranges and at most `max` bytes, passing over ranges in
    /// flight on other subflows. For a head that is late because its path stalled or lost
    /// it: a TCP subflow delivers in order, so what it carries after the late head waits
    /// behind it too, while the ranges on other subflows in between are arriving (or
    /// arrived: SACKed ranges are no longer in flight). A range sent before (`again`) ends
    /// it: its first copy is still on its way. Returns the ranges, ascending.
    pub fn take_share_from_head(
        &mut self,
        subflow: SubflowId,
        max: u64,
        late: impl Fn(Time, Time) -> bool,
    ) -> Vec<(u64, u64)> {
        self.take_from_head(subflow, max, true, |f| !f.again && late(f.sent, f.due))
    }

    /// Takes back `subflow`'s share from the head of line on, like
    /// [`SendStream::take_share_from_head`], for the ranges that end in its byte stream past
    /// `wire_from` (the sender's count of bytes written to it): the ones behind a hole its TCP
    /// is recovering from. Returns the ranges, ascending.
    pub fn take_blocked_share(
        &mut self,
        subflow: SubflowId,
        max: u64,
        wire_from: u64,
    ) -> Vec<(u64, u64)> {
        self.take_from_head(subflow, max, true, |f| !f.again && f.wire_end > wire_from)
    }

    /// Takes the head of line back from `subflow` so it is sent again on another one: the
    /// in-flight ranges on `subflow` from the cumulative ACK on, lowest first, up to the first
    /// range on another subflow and at most `max` bytes. Unlike [`SendStream::recall`], which
    /// trims the tail of a slow subflow's share at the end of a transfer, this frees the bytes
    /// the receiver's reorder buffer waits for. Returns the ranges, ascending.
    pub fn take_head(&mut self, subflow: SubflowId, max: u64) -> Vec<(u64, u64)> {
        self.take_from_head(subflow, max, false, |_| true)
    }

    /// The walk behind [`SendStream::take_head`] and [`SendStream::take_share_from_head`]:
    /// `subflow`'s in-flight ranges from the cumulative ACK on, at most `max` bytes, while
    /// `keep` accepts them; with `pass_others` past other subflows' ranges and gaps, without
    /// it only a contiguous run. The bytes taken wait in `retx`, marked as recalled from
    /// `subflow`; if the FIN rode the last of them, it is pending again.
    fn take_from_head(
        &mut self,
        subflow: SubflowId,
        max: u64,
        pass_others: bool,
        keep: impl Fn(&InFlight) -> bool,
    ) -> Vec<(u64, u64)> {
        let mut want = max;
        let mut next = self.cum_ack;
        let mut picked = Vec::new();
        for (&s, f) in self.inflight.range(self.cum_ack..) {
            if want == 0 {
                break;
            }
            if f.subflow != subflow && pass_others {
                continue;
            }
            if f.subflow != subflow || (s != next && !pass_others) {
                break;
            }
            if !keep(f) {
                break;
            }
            let take_to = f.end.min(s + want);
            want -= take_to - s;
            next = take_to;
            picked.push((s, *f, take_to));
        }
        let mut out = Vec::with_capacity(picked.len());
        for (s, f, take_to) in picked {
            self.inflight.remove(&s);
            if take_to < f.end {
                self.inflight.insert(take_to, f);
            }
            self.retx.insert(s, take_to);
            self.recalled.push((s, take_to, subflow));
            out.push((s, take_to));
        }
        let last = out.last().map(|&(_, e)| e);
        if last.is_some() && self.fin == FinState::Sent(subflow) && self.final_size == last {
            self.fin = FinState::Pending;
        }
        out
    }
}

fn add(v: &mut Vec<(SubflowId, u64)>, id: SubflowId, n: u64) {
    if n == 0 {
        return;
    }
    match v.iter_mut().find(|(s, _)| *s == id) {
        Some((_, c)) => *c += n,
        None => v.push((id, n)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mpbond_proto::{Sacks, StreamId};

    fn ack(cum: u64, win: u64, sacks: &[(u64, u64)]) -> DataAck {
        ack_fin(cum, win, sacks, false)
    }

    fn ack_fin(cum: u64, win: u64, sacks: &[(u64, u64)], fin: bool) -> DataAck {
        let mut s = Sacks::new();
        for &(a, b) in sacks {
            s.push(a, b);
        }
        DataAck {
            stream: StreamId(0),
            cum_ack: cum,
            window_end: win,
            sacks: s,
            fin_received: fin,
        }
    }

    const A: SubflowId = SubflowId(0);
    const B: SubflowId = SubflowId(1);

    fn send(s: &mut SendStream, max: u64, sf: SubflowId) -> (u64, u64, bool) {
        let g = s.peek_segment(max).unwrap();
        s.commit(g.start, g.end, sf, Time::ZERO, Time::ZERO, g.end);
        (g.start, g.end, g.reinjection)
    }

    #[test]
    fn write_respects_capacity_and_window() {
        let mut s = SendStream::new(10, 6);
        assert_eq!(s.write(Bytes::from_static(b"0123456789abc")), 10);
        assert_eq!(s.writable(), 0);
        assert_eq!(send(&mut s, 4, A), (0, 4, false));
        assert_eq!(send(&mut s, 4, B), (4, 6, false), "window ends at 6");
        assert!(s.peek_segment(4).is_none());
        let freed = s.on_ack(&ack(4, 12, &[])).unwrap();
        assert_eq!(freed, vec![(A, 4)]);
        assert_eq!(s.writable(), 4);
        assert_eq!(s.write(Bytes::from_static(b"defgh")), 4);
        assert_eq!(send(&mut s, 100, A), (6, 12, false));
    }

    #[test]
    fn the_buffer_follows_the_peer_window_up_to_its_maximum() {
        let mut s = SendStream::new(10, 10).with_max_capacity(25);
        assert_eq!(s.write(Bytes::from(vec![0u8; 20])), 10);
        send(&mut s, 10, A);
        s.on_ack(&ack(4, 4 + 11, &[])).unwrap();
        assert_eq!(s.capacity(), 22, "twice the peer's window of 11");
        assert_eq!(s.writable(), 16);
        s.on_ack(&ack(5, 5 + 20, &[])).unwrap();
        assert_eq!(s.capacity(), 25, "capped");
        let mut fixed = SendStream::new(10, 10);
        fixed.write(Bytes::from(vec![0u8; 10]));
        send(&mut fixed, 10, A);
        fixed.on_ack(&ack(4, 100, &[])).unwrap();
        assert_eq!(fixed.capacity(), 10);
    }

    /// `DATA_ACK`s can overtake each other: the receiver moves its control frames off a link
    /// whose sending stalled (an uplink outage), and the ones left in that link's socket
    /// arrive after newer ones. A late ACK takes nothing back.
    #[test]
    fn a_late_ack_that_says_less_changes_nothing() {
        let mut s = SendStream::new(100, 40);
        s.write(Bytes::from(vec![3u8; 30]));
        send(&mut s, 10, A); // 0..10
        send(&mut s, 10, B); // 10..20
        send(&mut s, 10, A); // 20..30
        let newer = s.on_ack(&ack(20, 60, &[(25, 30)])).unwrap();
        assert_eq!(newer, vec![(A, 15), (B, 10)]);
        let (outstanding, window) = (s.outstanding_on(A), s.window_end);
        // The older ACK, sent before the outage: a lower cumulative ACK, a smaller window, a
        // SACK block the newer one covered.
        let freed = s.on_ack(&ack(5, 45, &[(12, 15)])).unwrap();
        assert!(freed.is_empty(), "{freed:?}");
        assert_eq!(s.outstanding_on(A), outstanding);
        assert_eq!(s.outstanding_on(B), 0);
        assert_eq!(s.window_end, window);
        assert_eq!(s.outstanding_on(A), 5, "20..25 still out");
        assert!(
            s.peek_segment(100).is_none(),
            "nothing comes back to be sent again"
        );
    }

    #[test]
    fn ack_beyond_sent_is_an_error() {
        let mut s = SendStream::new(100, 100);
        s.write(Bytes::from_static(b"abc"));
        send(&mut s, 2, A);
        assert_eq!(
            s.on_ack(&ack(3, 100, &[])),
            Err(AckError::BeyondSent { acked: 3, sent: 2 })
        );
        assert!(s.on_ack(&ack(0, 100, &[(1, 9)])).is_err());
    }

    #[test]
    fn sack_and_partial_cum_ack_split_segments() {
        let mut s = SendStream::new(100, 100);
        s.write(Bytes::from(vec![7u8; 30]));
        send(&mut s, 10, A); // 0..10
        send(&mut s, 10, B); // 10..20
        send(&mut s, 10, A); // 20..30
        let freed = s.on_ack(&ack(5, 100, &[(12, 25)])).unwrap();
        assert_eq!(freed, vec![(A, 5 + 5), (B, 8)]);
        assert_eq!(s.outstanding_on(A), 5 + 5);
        assert_eq!(s.outstanding_on(B), 2);
        // B dies: only its unacknowledged 10..12 comes back.
        assert_eq!(s.take_subflow(B), 2);
        assert_eq!(send(&mut s, 100, A), (10, 12, true));
    }

    #[test]
    fn recall_takes_highest_dsns_first_and_splits() {
        let mut s = SendStream::new(100, 100);
        s.write(Bytes::from(vec![1u8; 40]));
        send(&mut s, 10, A); // 0..10
        send(&mut s, 10, B); // 10..20
        send(&mut s, 10, A); // 20..30
        send(&mut s, 10, B); // 30..40
        assert_eq!(s.recall(B, 15), vec![(15, 20), (30, 40)]);
        assert_eq!(s.outstanding_on(B), 5);
        assert_eq!(s.retx_len(), 15);
        assert_eq!(s.untransmitted(), 15);
        // Recalled data goes out before anything new, lowest first, and not on B.
        assert_eq!(s.peek_segment(100).unwrap().avoid, Some(B));
        assert_eq!(send(&mut s, 100, A), (15, 20, true));
        assert_eq!(send(&mut s, 100, A), (30, 40, true));
        assert!(s.peek_segment(100).is_none());
        assert_eq!(s.recall(A, 0), vec![]);
    }

    #[test]
    fn fin_rides_last_segment_and_is_resent_after_subflow_death() {
        let mut s = SendStream::new(100, 100);
        s.write(Bytes::from_static(b"xyz"));
        s.finish();
        assert_eq!(s.writable(), 0);
        let g = s.peek_segment(10).unwrap();
        let (payload, fin) = s.commit(g.start, g.end, B, Time::ZERO, Time::ZERO, g.end);
        assert_eq!((&payload[..], fin), (&b"xyz"[..], Some(3)));
        assert_eq!(s.fin_state(), FinState::Sent(B));
        s.take_subflow(B);
        assert_eq!(s.fin_state(), FinState::Pending);
        let g = s.peek_segment(10).unwrap();
        assert!(g.reinjection && g.avoid.is_none());
        assert_eq!(
            s.commit(g.start, g.end, A, Time::ZERO, Time::ZERO, g.end).1,
            Some(3)
        );
        s.on_ack(&ack(3, 100, &[])).unwrap();
        assert!(!s.is_complete(), "FIN not yet confirmed");
        s.on_ack(&ack_fin(3, 100, &[], true)).unwrap();
        assert!(s.is_complete());
    }

    #[test]
    fn bare_fin_when_finished_after_everything_was_sent() {
        let mut s = SendStream::new(100, 100);
        s.write(Bytes::from_static(b"ab"));
        send(&mut s, 10, A);
        s.finish();
        assert!(!s.has_sendable_data());
        assert!(s.needs_bare_fin());
        assert_eq!(s.commit_bare_fin(B), Some(2));
        assert!(!s.needs_bare_fin());
    }

    #[test]
    fn chunk_limits_untransmitted() {
        let mut s = SendStream::new(1000, 1000);
        s.write(Bytes::from(vec![0u8; 1000]));
        s.mark_chunk_end(300);
        s.mark_chunk_end(200); // not after the last mark: ignored
        assert_eq!(s.untransmitted(), 300);
        send(&mut s, 100, A);
        assert_eq!(s.untransmitted(), 200);
        send(&mut s, 200, A);
        assert_eq!(
            s.untransmitted(),
            700,
            "chunk done: whole meta buffer again"
        );
    }

    /// A late subflow's share is taken from the head on, past the other subflow's ranges,
    /// while its ranges are late and up to the limit; a copy sent before ends it.
    #[test]
    fn share_from_head_passes_over_other_subflows() {
        let mut s = SendStream::new(1000, 1000);
        s.write(Bytes::from(vec![7u8; 1000]));
        // A: 0..100 (sent at 0 s), B: 100..200, A: 200..300 (1 s), B: 300..400, A: 400..500 (2 s).
        for (i, sf) in [A, B, A, B, A].into_iter().enumerate() {
            let g = s.peek_segment(100).unwrap();
            let t = Time::from_secs_f64(i as f64 / 2.0);
            s.commit(g.start, g.end, sf, t, t, g.end);
        }
        let head = s.head().unwrap();
        assert_eq!(
            (head.subflow, head.sent, head.again),
            (A, Time::ZERO, false)
        );
        // B's first range arrived.
        s.on_ack(&ack(0, 1000, &[(100, 200)])).unwrap();
        // Ranges sent before 1.5 s are late: A's first two.
        let late = |sent: Time, _due: Time| sent < Time::from_secs_f64(1.5);
        assert_eq!(
            s.take_share_from_head(A, 1000, late),
            vec![(0, 100), (200, 300)]
        );
        assert_eq!(s.outstanding_on(A), 100);
        // They go out again first, on B; a copy is never taken again.
        let g = s.peek_segment(1000).unwrap();
        assert_eq!((g.start, g.end, g.avoid), (0, 100, Some(A)));
        s.commit(g.start, g.end, B, Time::ZERO, Time::ZERO, g.end);
        assert!(s.head().unwrap().again);
        assert!(s.take_share_from_head(B, 1000, |_, _| true).is_empty());
        // The limit cuts a range.
        let mut s2 = SendStream::new(1000, 1000);
        s2.write(Bytes::from(vec![7u8; 300]));
        send(&mut s2, 300, A);
        assert_eq!(s2.take_share_from_head(A, 120, |_, _| true), vec![(0, 120)]);
        assert_eq!(s2.outstanding_on(A), 180);
    }
}
