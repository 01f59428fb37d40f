//! Receiver-side state of one stream: reassembly by DSN with a bounded out-of-order buffer and a
//! connection-level receive window.

use std::collections::{BTreeMap, VecDeque};

use bytes::Bytes;
use mpbond_proto::{DataAck, Reason, Sacks, StreamId, MAX_SACKS};

/// Why incoming data or a FIN was refused. Each one is the peer's fault and ends the stream with
/// the given reason code.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecvError {
    /// Data beyond what the receiver allowed (the window); accepting it could grow memory
    /// without bound.
    #[error("data up to DSN {end} is beyond the receive window ending at {limit}")]
    BeyondWindow {
        /// End of the offending data.
        end: u64,
        /// The most the receiver accepts.
        limit: u64,
    },
    /// Data or a FIN that disagrees with the final size.
    #[error("final size conflict: {0}")]
    FinalSize(&'static str),
    /// Too many separate out-of-order pieces (a peer sending tiny scattered segments).
    #[error("more than {0} out-of-order segments held")]
    TooFragmented(usize),
}

impl RecvError {
    /// The reason code for the `STREAM_RST` that answers this error.
    pub fn reason(&self) -> Reason {
        match self {
            RecvError::BeyondWindow { .. } => Reason::FLOW_CONTROL,
            RecvError::FinalSize(_) => Reason::FINAL_SIZE,
            RecvError::TooFragmented(_) => Reason::LIMIT_REACHED,
        }
    }
}

/// One stream's receiver state.
///
/// Memory is bounded by `capacity`: a byte is accepted only if its DSN is below
/// `consumed + capacity`, where `consumed` counts bytes the application has read. In-order
/// bytes wait in `ready` until read; others wait in `ooo`. The advertised window end is
/// `consumed + capacity` at the time of the last ACK and never moves back.
///
/// `capacity` starts at the configured window and may grow up to `max_capacity`
/// ([`RecvStream::with_max_capacity`], see [`RecvStream::autotune`]).
#[derive(Debug)]
pub struct RecvStream {
    capacity: u64,
    max_capacity: u64,
    /// The window may double again once `consumed` reaches this.
    grow_after: u64,
    max_segments: usize,
    consumed: u64,
    delivered: u64,
    ready: VecDeque<Bytes>,
    ooo: BTreeMap<u64, Bytes>,
    ooo_bytes: u64,
    final_size: Option<u64>,
    window_end: u64,
    duplicate_bytes: u64,
}

impl RecvStream {
    /// A stream that holds at most `capacity` bytes and at most `max_segments` out-of-order
    /// pieces.
    pub fn new(capacity: u64, max_segments: usize) -> Self {
        RecvStream {
            capacity,
            max_capacity: capacity,
            grow_after: 0,
            max_segments,
            consumed: 0,
            delivered: 0,
            ready: VecDeque::new(),
            ooo: BTreeMap::new(),
            ooo_bytes: 0,
            final_size: None,
            window_end: capacity,
            duplicate_bytes: 0,
        }
    }

    /// Lets the window grow up to `max` bytes while the application keeps up
    /// ([`RecvStream::autotune`]); by default it stays at its initial size.
    pub fn with_max_capacity(mut self, max: u64) -> Self {
        self.max_capacity = max.max(self.capacity);
        self
    }

    /// The current window size: the most bytes held at once.
    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// Receive-window autotuning, after Linux's dynamic right-sizing (`tcp_rcv_space_adjust`:
    /// the receive buffer grows while the application drains it as fast as data arrives). A
    /// multipath stream needs a window of about every subflow's bandwidth-delay product
    /// together, plus what piles up behind the slowest path's head of line (the MPTCP
    /// guideline is twice the sum of the bandwidths times the largest RTT, Raiciu et al.,
    /// NSDI 2012 §4.2); on bufferbloated LTE paths that is far above a fixed few MiB (11d in
    /// docs/evaluation.md). The window doubles when the data held beyond what the application
    /// has read reaches half of it (bytes waiting behind a hole, as Linux keeps its buffer at
    /// twice what arrives per RTT), or when data reaches within an eighth of the advertised
    /// edge, provided the application has less than a quarter of the window unread: the
    /// window is taken by bytes behind a hole or in flight, not by bytes the application left.
    /// At most once per window's worth of reading. A slow reader therefore never grows it,
    /// and `max_capacity` bounds it in any case. Without an RTT the receiver cannot see a
    /// single in-order path that is window-limited while the application reads at once (the
    /// edge moves on by a round trip's worth before the sender's next bytes arrive); such a
    /// stream keeps its initial window, as before autotuning. Multipath streams are the case
    /// that matters here, and their holes are what the first test sees.
    fn autotune(&mut self, end: u64) {
        let span = end.max(self.highest_received()) - self.consumed;
        if self.capacity >= self.max_capacity
            || self.consumed < self.grow_after
            || (span.saturating_mul(2) < self.capacity && end + self.capacity / 8 < self.window_end)
            || self.readable() > self.capacity / 4
        {
            return;
        }
        self.grow_after = self.consumed + self.capacity;
        self.capacity = (self.capacity.saturating_mul(2)).min(self.max_capacity);
    }

    /// Accepts a segment. Returns how many of its bytes were new (the rest were duplicates,
    /// e.g. a reinjected copy that arrived second).
    pub fn on_data(&mut self, dsn: u64, payload: Bytes) -> Result<u64, RecvError> {
        let end = dsn
            .checked_add(payload.len() as u64)
            .ok_or(RecvError::FinalSize("DSN overflow"))?;
        let limit = self.consumed + self.capacity;
        if end > limit {
            return Err(RecvError::BeyondWindow { end, limit });
        }
        if let Some(f) = self.final_size {
            if end > f {
                return Err(RecvError::FinalSize("data beyond the final size"));
            }
        }
        let mut new = 0;
        let mut start = dsn.max(self.delivered);
        // Insert the parts of start..end not already held, walking the held pieces in order.
        let mut pieces: Vec<(u64, Bytes)> = Vec::new();
        if start < end {
            let overlapping: Vec<(u64, u64)> = self
                .ooo
                .range(..end)
                .rev()
                .take_while(|(&s, b)| s + b.len() as u64 > start)
                .map(|(&s, b)| (s, s + b.len() as u64))
                .collect();
            for (s, e) in overlapping.into_iter().rev() {
                if s > start {
                    pieces.push((
                        start,
                        payload.slice((start - dsn) as usize..(s - dsn) as usize),
                    ));
                }
                start = start.max(e);
            }
            if start < end {
                pieces.push((start, payload.slice((start - dsn) as usize..)));
            }
        }
        if self.ooo.len() + pieces.len() > self.max_segments
            && pieces.iter().any(|(s, _)| *s != self.delivered)
        {
            return Err(RecvError::TooFragmented(self.max_segments));
        }
        for (s, b) in pieces {
            new += b.len() as u64;
            self.ooo_bytes += b.len() as u64;
            self.ooo.insert(s, b);
        }
        self.duplicate_bytes += payload.len() as u64 - new;
        // Move the now-contiguous prefix to `ready`.
        while let Some(entry) = self.ooo.first_entry() {
            if *entry.key() != self.delivered {
                break;
            }
            let b = entry.remove();
            self.ooo_bytes -= b.len() as u64;
            self.delivered += b.len() as u64;
            self.ready.push_back(b);
        }
        self.autotune(end);
        Ok(new)
    }

    /// Records the final size from a `STREAM_FIN`.
    pub fn on_fin(&mut self, final_size: u64) -> Result<(), RecvError> {
        match self.final_size {
            Some(f) if f != final_size => Err(RecvError::FinalSize("two different final sizes")),
            _ if final_size < self.highest_received() => Err(RecvError::FinalSize(
                "final size below data already received",
            )),
            _ => {
                self.final_size = Some(final_size);
                Ok(())
            }
        }
    }

    fn highest_received(&self) -> u64 {
        self.ooo
            .last_key_value()
            .map_or(self.delivered, |(&s, b)| s + b.len() as u64)
    }

    /// Reads up to `max` in-order bytes.
    pub fn read(&mut self, max: usize) -> Option<Bytes> {
        let front = self.ready.front_mut()?;
        let b = if front.len() <= max {
            self.ready.pop_front()?
        } else {
            front.split_to(max)
        };
        self.consumed += b.len() as u64;
        Some(b)
    }

    /// In-order bytes waiting for the application.
    pub fn readable(&self) -> u64 {
        self.delivered - self.consumed
    }

    /// Bytes held in memory (in-order unread plus out-of-order).
    pub fn buffered(&self) -> u64 {
        self.readable() + self.ooo_bytes
    }

    /// Every byte below this has arrived.
    pub fn delivered(&self) -> u64 {
        self.delivered
    }

    /// The final size, if the FIN arrived.
    pub fn final_size(&self) -> Option<u64> {
        self.final_size
    }

    /// True when every byte up to the final size has arrived.
    pub fn all_received(&self) -> bool {
        self.final_size == Some(self.delivered)
    }

    /// True when the application has read every byte up to the final size.
    pub fn is_finished(&self) -> bool {
        self.final_size == Some(self.consumed)
    }

    /// Payload bytes that arrived more than once.
    pub fn duplicate_bytes(&self) -> u64 {
        self.duplicate_bytes
    }

    /// How far the window would move if an ACK were sent now.
    pub fn window_growth(&self) -> u64 {
        (self.consumed + self.capacity).saturating_sub(self.window_end)
    }

    /// Builds the `DATA_ACK` for this stream and advances the advertised window.
    pub fn make_ack(&mut self, stream: StreamId) -> DataAck {
        self.window_end = self.window_end.max(self.consumed + self.capacity);
        let mut sacks = Sacks::new();
        let mut cur: Option<(u64, u64)> = None;
        for (&s, b) in &self.ooo {
            let e = s + b.len() as u64;
            match cur {
                Some((cs, ce)) if ce == s => cur = Some((cs, e)),
                Some((cs, ce)) => {
                    sacks.push(cs, ce);
                    if sacks.len() == MAX_SACKS {
                        cur = None;
                        break;
                    }
                    cur = Some((s, e));
                }
                None => cur = Some((s, e)),
            }
        }
        if let Some((cs, ce)) = cur {
            sacks.push(cs, ce);
        }
        DataAck {
            stream,
            cum_ack: self.delivered,
            window_end: self.window_end,
            sacks,
            fin_received: self.final_size.is_some(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn b(s: &str) -> Bytes {
        Bytes::copy_from_slice(s.as_bytes())
    }

    fn read_all(r: &mut RecvStream) -> Vec<u8> {
        let mut v = Vec::new();
        while let Some(x) = r.read(3) {
            v.extend_from_slice(&x);
        }
        v
    }

    #[test]
    fn reorders_and_drops_duplicates() {
        let mut r = RecvStream::new(100, 16);
        assert_eq!(r.on_data(5, b("fgh")).unwrap(), 3);
        assert_eq!(r.readable(), 0);
        assert_eq!(
            r.on_data(0, b("abcdefg")).unwrap(),
            5,
            "overlap with 5..8 trimmed"
        );
        assert_eq!(r.on_data(2, b("cd")).unwrap(), 0);
        assert_eq!(r.duplicate_bytes(), 2 + 2);
        assert_eq!(read_all(&mut r), b"abcdefgh");
        let ack = r.make_ack(StreamId(3));
        assert_eq!(
            (ack.cum_ack, ack.window_end, ack.fin_received),
            (8, 108, false)
        );
    }

    #[test]
    fn window_bounds_memory_until_the_app_reads() {
        let mut r = RecvStream::new(10, 16);
        r.on_data(0, b("0123456789")).unwrap();
        assert_eq!(
            r.on_data(10, b("x")),
            Err(RecvError::BeyondWindow { end: 11, limit: 10 })
        );
        assert_eq!(
            RecvError::BeyondWindow { end: 0, limit: 0 }.reason(),
            Reason::FLOW_CONTROL
        );
        assert_eq!(r.read(4).unwrap(), "0123");
        assert_eq!(r.window_growth(), 4);
        r.on_data(10, b("abcd")).unwrap();
        assert_eq!(r.buffered(), 10);
    }

    #[test]
    fn the_window_doubles_while_the_app_keeps_up_and_only_up_to_its_maximum() {
        let mut r = RecvStream::new(100, 64).with_max_capacity(300);
        r.make_ack(StreamId(1));
        // A hole at 0..10 (the head on a slow path) and the rest of the window filled behind
        // it: the sender is window-limited and the application has nothing to read.
        r.on_data(10, Bytes::from(vec![1u8; 39])).unwrap();
        assert_eq!(r.capacity(), 100, "less than half the window taken");
        r.on_data(49, Bytes::from(vec![1u8; 51])).unwrap();
        assert_eq!(r.capacity(), 200);
        assert_eq!(r.make_ack(StreamId(1)).window_end, 200);
        // No second doubling before the application has read a window's worth.
        r.on_data(100, Bytes::from(vec![1u8; 100])).unwrap();
        assert_eq!(r.capacity(), 200);
        r.on_data(0, Bytes::from(vec![1u8; 10])).unwrap();
        while r.read(1000).is_some() {}
        r.make_ack(StreamId(1));
        r.on_data(210, Bytes::from(vec![1u8; 190])).unwrap();
        assert_eq!(r.capacity(), 300, "capped at the maximum");
        r.on_data(200, Bytes::from(vec![1u8; 10])).unwrap();
        while r.read(1000).is_some() {}
        r.make_ack(StreamId(1));
        r.on_data(400, Bytes::from(vec![1u8; 300])).unwrap();
        assert_eq!(r.capacity(), 300);
        assert_eq!(
            r.on_data(700, b("x")),
            Err(RecvError::BeyondWindow {
                end: 701,
                limit: 700
            })
        );
    }

    #[test]
    fn a_slow_reader_never_grows_the_window() {
        let mut r = RecvStream::new(100, 64).with_max_capacity(1 << 20);
        r.make_ack(StreamId(1));
        r.on_data(0, Bytes::from(vec![1u8; 100])).unwrap();
        assert_eq!(
            r.capacity(),
            100,
            "the window is full of bytes the app left"
        );
        r.read(10).unwrap();
        r.make_ack(StreamId(1));
        r.on_data(100, Bytes::from(vec![1u8; 10])).unwrap();
        assert_eq!(r.capacity(), 100);
        assert_eq!(r.buffered(), 100);
        // Without a maximum the window is fixed whatever happens.
        let mut f = RecvStream::new(100, 64);
        f.make_ack(StreamId(1));
        f.on_data(1, Bytes::from(vec![1u8; 99])).unwrap();
        assert_eq!(f.capacity(), 100);
    }

    #[test]
    fn sacks_list_the_lowest_ranges() {
        let mut r = RecvStream::new(1000, 64);
        for s in [10u64, 12, 20, 30, 40, 50] {
            r.on_data(s, b("xx")).unwrap();
        }
        let ack = r.make_ack(StreamId(0));
        assert_eq!(ack.cum_ack, 0);
        assert_eq!(
            ack.sacks.as_slice(),
            &[(10, 14), (20, 22), (30, 32), (40, 42)]
        );
    }

    #[test]
    fn fin_rules() {
        let mut r = RecvStream::new(100, 16);
        r.on_data(0, b("abc")).unwrap();
        assert!(r.on_fin(2).is_err(), "below received data");
        r.on_fin(5).unwrap();
        assert!(r.on_fin(6).is_err());
        assert!(r.on_data(4, b("xy")).is_err(), "beyond final size");
        r.on_data(3, b("de")).unwrap();
        assert!(r.all_received());
        assert!(!r.is_finished());
        read_all(&mut r);
        assert!(r.is_finished());
        assert!(r.make_ack(StreamId(0)).fin_received);
    }

    #[test]
    fn fragmentation_is_capped() {
        let mut r = RecvStream::new(1000, 3);
        for s in [10u64, 20, 30] {
            r.on_data(s, b("x")).unwrap();
        }
        assert_eq!(r.on_data(40, b("x")), Err(RecvError::TooFragmented(3)));
        // In-order data is still accepted: it shrinks the out-of-order set.
        r.on_data(0, b("0123456789")).unwrap();
        assert_eq!(r.delivered(), 11);
    }

    proptest! {
        /// Any mix of reordering, duplication and overlap delivers exactly the original bytes,
        /// once, in order.
        #[test]
        fn reassembly_under_reordering_and_duplication(
            data in proptest::collection::vec(any::<u8>(), 1..600),
            cuts in proptest::collection::vec((0usize..600, 1usize..80), 1..60),
            seed in any::<u64>(),
        ) {
            let n = data.len();
            let mut segs: Vec<(usize, usize)> = cuts.into_iter().map(|(s, l)| (s % n, ((s % n) + l).min(n))).collect();
            // Make sure everything is covered at least once.
            let mut at = 0;
            while at < n { let e = (at + 50).min(n); segs.push((at, e)); at = e; }
            // Deterministic shuffle.
            let mut x = seed | 1;
            for i in (1..segs.len()).rev() {
                x ^= x << 13; x ^= x >> 7; x ^= x << 17;
                segs.swap(i, (x % (i as u64 + 1)) as usize);
            }
            let mut r = RecvStream::new(n as u64, 10_000);
            let mut new_total = 0;
            for (s, e) in segs {
                new_total += r.on_data(s as u64, Bytes::copy_from_slice(&data[s..e])).unwrap();
                prop_assert!(r.buffered() <= n as u64);
            }
            prop_assert_eq!(new_total, n as u64);
            r.on_fin(n as u64).unwrap();
            let mut got = Vec::new();
            while let Some(x) = r.read(7) { got.extend_from_slice(&x); }
            prop_assert_eq!(got, data);
            prop_assert!(r.is_finished());
        }
    }
}
