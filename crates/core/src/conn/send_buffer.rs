//! The bytes of one stream that the sender must keep: everything the application wrote that the
//! receiver has not yet acknowledged, so that any of it can be sent again on another subflow.

use std::collections::VecDeque;

use bytes::{Bytes, BytesMut};

/// Application bytes from the cumulative ACK up to the last byte written, as a list of the
/// chunks the application handed over (no copy on write; a copy on read only when a segment
/// spans two chunks).
#[derive(Debug, Default)]
pub struct SendBuffer {
    /// (DSN of the first byte, bytes), contiguous and ascending.
    chunks: VecDeque<(u64, Bytes)>,
    base: u64,
    end: u64,
}

impl SendBuffer {
    /// DSN of the first byte held.
    pub fn base(&self) -> u64 {
        self.base
    }

    /// DSN one past the last byte held.
    pub fn end(&self) -> u64 {
        self.end
    }

    /// Bytes held.
    pub fn len(&self) -> u64 {
        self.end - self.base
    }

    /// True when nothing is held.
    pub fn is_empty(&self) -> bool {
        self.end == self.base
    }

    /// Appends bytes at [`SendBuffer::end`].
    pub fn push(&mut self, data: Bytes) {
        if data.is_empty() {
            return;
        }
        let n = data.len() as u64;
        self.chunks.push_back((self.end, data));
        self.end += n;
    }

    /// Forgets every byte below `dsn` (they were acknowledged).
    pub fn release_below(&mut self, dsn: u64) {
        let dsn = dsn.min(self.end);
        if dsn <= self.base {
            return;
        }
        while let Some((start, bytes)) = self.chunks.front_mut() {
            let chunk_end = *start + bytes.len() as u64;
            if chunk_end <= dsn {
                self.chunks.pop_front();
            } else {
                if *start < dsn {
                    let cut = (dsn - *start) as usize;
                    *bytes = bytes.slice(cut..);
                    *start = dsn;
                }
                break;
            }
        }
        self.base = dsn;
    }

    /// The bytes `start..end`, or `None` when they are not all held.
    pub fn slice(&self, start: u64, end: u64) -> Option<Bytes> {
        if start < self.base || end > self.end || start > end {
            return None;
        }
        if start == end {
            return Some(Bytes::new());
        }
        let i = self
            .chunks
            .partition_point(|(s, _)| *s <= start)
            .checked_sub(1)?;
        let (s0, b0) = &self.chunks[i];
        let off = (start - s0) as usize;
        let want = (end - start) as usize;
        if off + want <= b0.len() {
            return Some(b0.slice(off..off + want));
        }
        let mut out = BytesMut::with_capacity(want);
        let mut at = start;
        for (s, b) in self.chunks.range(i..) {
            if at >= end {
                break;
            }
            let from = (at - s) as usize;
            let to = ((end - s) as usize).min(b.len());
            out.extend_from_slice(&b[from..to]);
            at = s + to as u64;
        }
        Some(out.freeze())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slices_within_and_across_chunks() {
        let mut b = SendBuffer::default();
        b.push(Bytes::from_static(b"hello "));
        b.push(Bytes::from_static(b"world"));
        b.push(Bytes::new());
        assert_eq!(b.len(), 11);
        assert_eq!(b.slice(0, 5).unwrap(), "hello");
        assert_eq!(b.slice(4, 8).unwrap(), "o wo");
        assert_eq!(b.slice(0, 11).unwrap(), "hello world");
        assert!(b.slice(3, 12).is_none());
        b.release_below(3);
        assert!(b.slice(2, 4).is_none());
        assert_eq!(b.slice(3, 11).unwrap(), "lo world");
        b.release_below(8);
        assert_eq!(b.base(), 8);
        assert_eq!(b.slice(8, 11).unwrap(), "rld");
        b.release_below(100);
        assert!(b.is_empty());
        assert_eq!(b.end(), 11);
    }
}
