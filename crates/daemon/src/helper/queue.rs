//! The helper's buffer between its HS-Path and its pipes, one per direction: the user-space
//! half of TCP splitting (MPBond §4.2).
//!
//! It is bounded in bytes: when full, the reader feeding it stops reading its socket, and TCP
//! flow control slows the sender. Recalled bytes (`DATA_CANCEL`) are cut out of it.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use mpbond_proto::{Frame, StreamId, DATA_OVERHEAD};
use tokio::sync::Notify;

/// Bytes a frame occupies in the buffer (its wire size, near enough for control frames).
pub fn frame_len(f: &Frame) -> u64 {
    match f {
        Frame::StreamData { payload, .. } => (DATA_OVERHEAD + payload.len()) as u64,
        _ => 32,
    }
}

#[derive(Debug, Default)]
struct Inner {
    /// Each frame with the time it arrived.
    frames: VecDeque<(Frame, Instant)>,
    bytes: u64,
}

/// A bounded FIFO of frames.
#[derive(Debug)]
pub struct RelayQueue {
    inner: Mutex<Inner>,
    cap: u64,
    space: Notify,
    /// Signalled when a frame is added.
    pub data: Notify,
    relayed: AtomicU64,
    cancelled: AtomicU64,
    /// How long the last frame taken out had waited, microseconds.
    last_sojourn_us: AtomicU64,
}

impl RelayQueue {
    /// A queue holding at most about `cap` bytes.
    pub fn new(cap: u64) -> Self {
        RelayQueue {
            inner: Mutex::new(Inner::default()),
            cap: cap.max(1),
            space: Notify::new(),
            data: Notify::new(),
            relayed: AtomicU64::new(0),
            cancelled: AtomicU64::new(0),
            last_sojourn_us: AtomicU64::new(0),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Adds a frame, waiting while the queue is full.
    pub async fn push(&self, f: Frame) {
        let len = frame_len(&f);
        let mut f = Some(f);
        loop {
            {
                let mut q = self.lock();
                if q.bytes + len <= self.cap || q.frames.is_empty() {
                    if let Some(f) = f.take() {
                        q.frames.push_back((f, Instant::now()));
                        q.bytes += len;
                    }
                    drop(q);
                    self.data.notify_one();
                    return;
                }
            }
            self.space.notified().await;
        }
    }

    /// Takes the oldest frame.
    pub fn pop(&self) -> Option<Frame> {
        let mut q = self.lock();
        let (f, arrived) = q.frames.pop_front()?;
        let len = frame_len(&f);
        q.bytes -= len;
        drop(q);
        self.last_sojourn_us
            .store(arrived.elapsed().as_micros() as u64, Ordering::Relaxed);
        if let Frame::StreamData { payload, .. } = &f {
            self.relayed
                .fetch_add(payload.len() as u64, Ordering::Relaxed);
        }
        self.space.notify_one();
        Some(f)
    }

    /// True when there is a frame to take.
    pub fn has_data(&self) -> bool {
        !self.lock().frames.is_empty()
    }

    /// Bytes held.
    pub fn bytes(&self) -> u64 {
        self.lock().bytes
    }

    /// How long the last frame taken out had waited in the queue: the directly measured
    /// buffering delay of MPBond §6.2, stale by the time it is known.
    pub fn last_sojourn(&self) -> Duration {
        Duration::from_micros(self.last_sojourn_us.load(Ordering::Relaxed))
    }

    /// Payload bytes taken out so far.
    pub fn relayed(&self) -> u64 {
        self.relayed.load(Ordering::Relaxed)
    }

    /// Payload bytes dropped by cancels so far.
    pub fn cancelled(&self) -> u64 {
        self.cancelled.load(Ordering::Relaxed)
    }

    /// Drops the bytes `start..end` of `stream` still held. Returns how many were dropped.
    pub fn cancel(&self, stream: StreamId, start: u64, end: u64) -> u64 {
        let mut q = self.lock();
        let mut kept = VecDeque::with_capacity(q.frames.len());
        let mut dropped = 0;
        let mut bytes = 0;
        for (f, arrived) in q.frames.drain(..) {
            match f {
                Frame::StreamData {
                    stream: s,
                    dsn,
                    payload,
                } if s == stream && dsn < end && dsn + payload.len() as u64 > start => {
                    let fend = dsn + payload.len() as u64;
                    if dsn < start {
                        let p = payload.slice(..(start - dsn) as usize);
                        kept.push_back((
                            Frame::StreamData {
                                stream: s,
                                dsn,
                                payload: p,
                            },
                            arrived,
                        ));
                    }
                    if fend > end {
                        let p = payload.slice((end - dsn) as usize..);
                        kept.push_back((
                            Frame::StreamData {
                                stream: s,
                                dsn: end,
                                payload: p,
                            },
                            arrived,
                        ));
                    }
                    dropped += fend.min(end) - dsn.max(start);
                }
                other => kept.push_back((other, arrived)),
            }
        }
        for (f, _) in &kept {
            bytes += frame_len(f);
        }
        q.frames = kept;
        q.bytes = bytes;
        drop(q);
        self.cancelled.fetch_add(dropped, Ordering::Relaxed);
        self.space.notify_one();
        dropped
    }

    /// Drops everything (the subflow died; its data will be reinjected by the sender).
    pub fn clear(&self) {
        let mut q = self.lock();
        q.frames.clear();
        q.bytes = 0;
        drop(q);
        self.space.notify_waiters();
        self.space.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use std::sync::Arc;
    use std::time::Duration;

    fn data(dsn: u64, len: usize) -> Frame {
        Frame::StreamData {
            stream: StreamId(1),
            dsn,
            payload: Bytes::from(vec![1u8; len]),
        }
    }

    #[tokio::test]
    async fn bounded_push_waits_for_pop() {
        let q = Arc::new(RelayQueue::new(2 * (DATA_OVERHEAD as u64 + 100)));
        q.push(data(0, 100)).await;
        q.push(data(100, 100)).await;
        let q2 = q.clone();
        let t = tokio::spawn(async move { q2.push(data(200, 100)).await });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!t.is_finished(), "full: the reader must wait");
        assert!(q.pop().is_some());
        t.await.unwrap();
        assert_eq!(q.relayed(), 100);
    }

    #[tokio::test]
    async fn cancel_trims_overlapping_frames() {
        let q = RelayQueue::new(1 << 20);
        q.push(data(0, 100)).await;
        q.push(data(100, 100)).await;
        q.push(data(200, 100)).await;
        assert_eq!(q.cancel(StreamId(1), 150, 250), 100);
        assert_eq!(q.cancel(StreamId(2), 0, 300), 0, "other streams untouched");
        let mut got = Vec::new();
        while let Some(Frame::StreamData { dsn, payload, .. }) = q.pop() {
            got.push((dsn, payload.len()));
        }
        assert_eq!(got, vec![(0, 100), (100, 50), (250, 50)]);
        assert_eq!(q.bytes(), 0);
        assert_eq!(q.cancelled(), 100);
    }
}
