//! The data receiver of a session: reassembles each stream and decides when to acknowledge.
//!
//! Sans-IO like [`crate::Sender`]: the owner feeds it frames and the time, reads stream bytes
//! for the application, and asks [`Receiver::poll_ack`] for `DATA_ACK`s to send, arming a timer
//! for [`Receiver::next_ack_deadline`].

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::Bytes;
use mpbond_proto::{DataAck, StreamId};

use crate::conn::recv_stream::{RecvError, RecvStream};
use crate::Time;

/// Bytes that arrive on a stream after this long without any start a new message (a
/// request, the next chunk of a player): they are acknowledged at once rather than after
/// [`ReceiverConfig::ack_delay`], like TCP's quick-ACK mode at the start of a connection.
/// Such a message is usually answered at once, and an ACK held even a few milliseconds then
/// leaves behind the answer's first bytes: at the proxy the `DATA_ACK` for a 45-byte HTTP
/// request queued behind the response on the PS-Path's downlink, took 110 ms instead of one
/// path delay, and the primary's late-head rescue sent the request again through the helper
/// in every download (docs/evaluation.md, item 31). A stream in bulk transfer has arrivals
/// every few milliseconds and keeps its delayed ACKs.
pub const QUICK_ACK_IDLE: Duration = Duration::from_millis(100);

/// Settings of a [`Receiver`].
#[derive(Clone, Debug)]
pub struct ReceiverConfig {
    /// Per-stream receive window to start with: bytes held (unread plus out of order).
    pub stream_window: u64,
    /// The most a stream's window may grow to while its application keeps up
    /// ([`RecvStream::with_max_capacity`]); 0 (or anything up to `stream_window`) keeps the
    /// window fixed.
    pub max_stream_window: u64,
    /// Out-of-order pieces held per stream at most.
    pub max_ooo_segments: usize,
    /// Most open streams.
    pub max_streams: usize,
    /// Acknowledge at once after this many new bytes.
    pub ack_every: u64,
    /// Otherwise acknowledge at most this long after the first unacknowledged byte.
    pub ack_delay: Duration,
}

impl Default for ReceiverConfig {
    fn default() -> Self {
        ReceiverConfig {
            stream_window: 16 << 20,
            max_stream_window: 0,
            max_ooo_segments: 16_384,
            max_streams: 4096,
            ack_every: 32 << 10,
            ack_delay: Duration::from_millis(10),
        }
    }
}

/// Errors for the owner.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReceiveError {
    /// Data for a stream that was never opened or is closed.
    #[error("unknown stream {0}")]
    UnknownStream(StreamId),
    /// The stream cap was hit.
    #[error("too many streams (limit {0})")]
    TooManyStreams(usize),
    /// The stream id is in use.
    #[error("stream {0} already exists")]
    StreamExists(StreamId),
    /// The peer broke the stream's rules; the stream must be reset.
    #[error("stream {stream}: {source}")]
    Stream {
        /// The stream.
        stream: StreamId,
        /// What was wrong.
        source: RecvError,
    },
}

#[derive(Debug)]
struct Entry {
    stream: RecvStream,
    /// New bytes since the last ACK.
    unacked: u64,
    /// When the first of them arrived.
    since: Option<Time>,
    /// Something (FIN, out-of-order data, a completed stream) warrants an ACK now.
    urgent: bool,
    /// When new bytes last arrived ([`QUICK_ACK_IDLE`]).
    last_arrival: Option<Time>,
}

/// The multipath data receiver of one session.
#[derive(Debug)]
pub struct Receiver {
    cfg: ReceiverConfig,
    streams: BTreeMap<StreamId, Entry>,
}

impl Receiver {
    /// A receiver with these settings.
    pub fn new(cfg: ReceiverConfig) -> Self {
        Receiver {
            cfg,
            streams: BTreeMap::new(),
        }
    }

    /// Opens a stream.
    pub fn open_stream(&mut self, id: StreamId) -> Result<(), ReceiveError> {
        if self.streams.contains_key(&id) {
            return Err(ReceiveError::StreamExists(id));
        }
        if self.streams.len() >= self.cfg.max_streams {
            return Err(ReceiveError::TooManyStreams(self.cfg.max_streams));
        }
        self.streams.insert(
            id,
            Entry {
                stream: RecvStream::new(self.cfg.stream_window, self.cfg.max_ooo_segments)
                    .with_max_capacity(self.cfg.max_stream_window),
                unacked: 0,
                since: None,
                urgent: false,
                last_arrival: None,
            },
        );
        Ok(())
    }

    /// Forgets a stream.
    pub fn close_stream(&mut self, id: StreamId) {
        self.streams.remove(&id);
    }

    /// True when the stream is open here.
    pub fn has_stream(&self, id: StreamId) -> bool {
        self.streams.contains_key(&id)
    }

    fn entry(&mut self, id: StreamId) -> Result<&mut Entry, ReceiveError> {
        self.streams
            .get_mut(&id)
            .ok_or(ReceiveError::UnknownStream(id))
    }

    /// A `STREAM_DATA` arrived. Returns the number of new bytes.
    pub fn on_data(
        &mut self,
        now: Time,
        id: StreamId,
        dsn: u64,
        payload: Bytes,
    ) -> Result<u64, ReceiveError> {
        let ack_every = self.cfg.ack_every;
        let e = self.entry(id)?;
        let before = e.stream.delivered();
        let window = e.stream.capacity();
        let new = e
            .stream
            .on_data(dsn, payload)
            .map_err(|source| ReceiveError::Stream { stream: id, source })?;
        let in_order = e.stream.delivered() - before;
        e.unacked += new;
        let mut starts_message = false;
        if new > 0 {
            e.since.get_or_insert(now);
            starts_message = e
                .last_arrival
                .is_none_or(|t| now.saturating_since(t) >= QUICK_ACK_IDLE);
            e.last_arrival = Some(now);
        }
        // Out-of-order arrival (a hole) or a finished stream: tell the sender now, since its
        // reinjection and buffer estimates depend on it.
        // The window grew: the sender is waiting on it.
        // The first bytes after a pause: the answer to them would overtake a held ACK.
        if starts_message
            || new > in_order
            || e.stream.all_received()
            || e.unacked >= ack_every
            || e.stream.capacity() > window
        {
            e.urgent = true;
        }
        Ok(new)
    }

    /// A `STREAM_FIN` arrived.
    pub fn on_fin(&mut self, id: StreamId, final_size: u64) -> Result<(), ReceiveError> {
        let e = self.entry(id)?;
        e.stream
            .on_fin(final_size)
            .map_err(|source| ReceiveError::Stream { stream: id, source })?;
        e.urgent = true;
        Ok(())
    }

    /// Reads up to `max` in-order bytes of a stream.
    pub fn read(&mut self, id: StreamId, max: usize) -> Option<Bytes> {
        let e = self.streams.get_mut(&id)?;
        let b = e.stream.read(max)?;
        // Reopen the sender's window promptly once the app has drained half of it.
        if e.stream.window_growth() >= e.stream.capacity() / 2 {
            e.urgent = true;
        }
        Some(b)
    }

    /// Read access to a stream's state.
    pub fn stream(&self, id: StreamId) -> Option<&RecvStream> {
        self.streams.get(&id).map(|e| &e.stream)
    }

    /// The next `DATA_ACK` due at `now`, if any.
    pub fn poll_ack(&mut self, now: Time) -> Option<DataAck> {
        let delay = self.cfg.ack_delay;
        let (&id, e) = self
            .streams
            .iter_mut()
            .find(|(_, e)| e.urgent || e.since.is_some_and(|t| now.saturating_since(t) >= delay))?;
        e.urgent = false;
        e.unacked = 0;
        e.since = None;
        Some(e.stream.make_ack(id))
    }

    /// An ACK for `id` regardless of timers (e.g. to answer a duplicate).
    pub fn ack_now(&mut self, id: StreamId) -> Option<DataAck> {
        let e = self.streams.get_mut(&id)?;
        e.urgent = false;
        e.unacked = 0;
        e.since = None;
        Some(e.stream.make_ack(id))
    }

    /// Makes every stream due for an ACK: after a link died, ACKs that were on it may be lost,
    /// and a sender waiting for its last ACK would wait forever.
    pub fn ack_all(&mut self) {
        for e in self.streams.values_mut() {
            e.urgent = true;
        }
    }

    /// When the next delayed ACK falls due, for the owner's timer.
    pub fn next_ack_deadline(&self) -> Option<Time> {
        self.streams
            .values()
            .filter_map(|e| {
                if e.urgent {
                    Some(Time::ZERO)
                } else {
                    e.since.map(|t| t + self.cfg.ack_delay)
                }
            })
            .min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delayed_and_immediate_acks() {
        let mut r = Receiver::new(ReceiverConfig {
            ack_every: 100,
            ack_delay: Duration::from_millis(10),
            ..ReceiverConfig::default()
        });
        let s = StreamId(1);
        r.open_stream(s).unwrap();
        assert_eq!(r.open_stream(s), Err(ReceiveError::StreamExists(s)));
        // A stream's first bytes: at once (QUICK_ACK_IDLE).
        r.on_data(Time::ZERO, s, 0, Bytes::from(vec![0u8; 4]))
            .unwrap();
        assert_eq!(r.next_ack_deadline(), Some(Time::ZERO));
        assert_eq!(r.poll_ack(Time::ZERO).unwrap().cum_ack, 4);
        // More soon after: delayed.
        r.on_data(Time::from_millis(1), s, 4, Bytes::from(vec![0u8; 6]))
            .unwrap();
        assert_eq!(r.poll_ack(Time::from_millis(1)), None);
        assert_eq!(r.next_ack_deadline(), Some(Time::from_millis(11)));
        let a = r.poll_ack(Time::from_millis(11)).unwrap();
        assert_eq!(a.cum_ack, 10);
        // Out of order: immediate, with a SACK.
        r.on_data(Time::from_millis(11), s, 20, Bytes::from(vec![0u8; 5]))
            .unwrap();
        let a = r.poll_ack(Time::from_millis(11)).unwrap();
        assert_eq!(a.sacks.as_slice(), &[(20, 25)]);
        // Enough bytes: immediate.
        r.on_data(Time::from_millis(12), s, 10, Bytes::from(vec![0u8; 10]))
            .unwrap();
        r.on_data(Time::from_millis(12), s, 25, Bytes::from(vec![0u8; 100]))
            .unwrap();
        assert_eq!(r.poll_ack(Time::from_millis(12)).unwrap().cum_ack, 125);
        assert_eq!(r.poll_ack(Time::from_millis(100)), None);
    }

    #[test]
    fn a_message_after_a_pause_is_acknowledged_at_once() {
        let mut r = Receiver::new(ReceiverConfig {
            ack_every: 1 << 20,
            ack_delay: Duration::from_millis(10),
            ..ReceiverConfig::default()
        });
        let s = StreamId(3);
        r.open_stream(s).unwrap();
        let mut t = Time::ZERO;
        let mut dsn = 0u64;
        let mut at_once = Vec::new();
        // A bulk stretch (a segment every 2 ms), a pause of the quick-ACK idle time, then a
        // lone request, then one just short of the idle time after it.
        for g in [0u64, 2, 2, 2, 2, 100, 99] {
            t += Duration::from_millis(g);
            r.on_data(t, s, dsn, Bytes::from(vec![7u8; 45])).unwrap();
            dsn += 45;
            let now = r.next_ack_deadline() == Some(Time::ZERO);
            at_once.push(now);
            if now {
                let a = r.poll_ack(t).unwrap();
                assert_eq!(a.cum_ack, dsn, "the ACK covers all that arrived");
            } else {
                assert!(r.poll_ack(t).is_none());
            }
        }
        assert_eq!(
            at_once,
            [true, false, false, false, false, true, false],
            "only the first bytes and the bytes after a {QUICK_ACK_IDLE:?} pause skip the hold"
        );
    }

    #[test]
    fn ack_all_re_announces_every_stream() {
        let mut r = Receiver::new(ReceiverConfig::default());
        for i in 0..3 {
            r.open_stream(StreamId(i)).unwrap();
            r.on_data(Time::ZERO, StreamId(i), 0, Bytes::from_static(b"x"))
                .unwrap();
        }
        while r.poll_ack(Time::from_millis(100)).is_some() {}
        assert_eq!(
            r.poll_ack(Time::from_millis(200)),
            None,
            "nothing new: no ACK"
        );
        r.ack_all();
        let mut n = 0;
        while let Some(a) = r.poll_ack(Time::from_millis(200)) {
            assert_eq!(a.cum_ack, 1);
            n += 1;
        }
        assert_eq!(n, 3);
    }

    #[test]
    fn errors_name_the_stream() {
        let mut r = Receiver::new(ReceiverConfig {
            stream_window: 4,
            ..ReceiverConfig::default()
        });
        let s = StreamId(9);
        assert_eq!(
            r.on_data(Time::ZERO, s, 0, Bytes::new()),
            Err(ReceiveError::UnknownStream(s))
        );
        r.open_stream(s).unwrap();
        let e = r
            .on_data(Time::ZERO, s, 0, Bytes::from_static(b"12345"))
            .unwrap_err();
        assert!(e.to_string().contains("s9"), "{e}");
        assert!(e.to_string().contains("window"), "{e}");
    }
}
