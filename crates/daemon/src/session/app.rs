//! The application side of a stream: the client's socket at the primary, the origin's socket
//! at the proxy.
//!
//! A reader task moves bytes from the socket into the session, but only as many as the stream
//! and the session may still buffer ([`Credit`]); when the credit runs out it stops reading, and
//! TCP flow control pushes back on the application or the origin. A writer task moves bytes the
//! other way and tells the session when its queue drains, so the session reads from the
//! reassembly buffer only what the application takes.

use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use bytes::{Bytes, BytesMut};
use mpbond_proto::StreamId;
use tokio::net::TcpStream;
use tokio::sync::{mpsc, Notify};
use tokio::task::JoinHandle;

use super::Event;

/// Bytes read from an application socket at a time, at most.
pub const READ_CHUNK: u64 = 64 << 10;

/// A byte budget shared by a producer that waits and a consumer that returns bytes.
#[derive(Debug)]
pub struct Credit {
    avail: Mutex<u64>,
    notify: Notify,
    closed: AtomicBool,
}

impl Credit {
    /// A budget of `n` bytes.
    pub fn new(n: u64) -> Arc<Credit> {
        Arc::new(Credit {
            avail: Mutex::new(n),
            notify: Notify::new(),
            closed: AtomicBool::new(false),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, u64> {
        self.avail.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Waits until some budget is free and takes up to `max` of it; `None` once closed.
    pub async fn take(&self, max: u64) -> Option<u64> {
        loop {
            if self.closed.load(Ordering::Acquire) {
                return None;
            }
            {
                let mut a = self.lock();
                if *a > 0 {
                    let k = (*a).min(max);
                    *a -= k;
                    return Some(k);
                }
            }
            self.notify.notified().await;
        }
    }

    /// Returns `n` bytes to the budget.
    pub fn give(&self, n: u64) {
        if n == 0 {
            return;
        }
        *self.lock() += n;
        self.notify.notify_one();
    }

    /// Bytes free now.
    pub fn available(&self) -> u64 {
        *self.lock()
    }

    /// Wakes the waiter for good.
    pub fn close(&self) {
        self.closed.store(true, Ordering::Release);
        self.notify.notify_one();
    }
}

/// What the session hands the writer task.
#[derive(Debug)]
pub enum AppWrite {
    /// Bytes for the application.
    Data(Bytes),
    /// The peer finished: shut the socket's write side down.
    Fin,
}

/// Handles of a stream's application I/O.
#[derive(Debug)]
pub struct AppIo {
    /// The socket (shared by both tasks), kept to reset it.
    pub sock: Arc<TcpStream>,
    /// To the writer task.
    pub to_app: mpsc::UnboundedSender<AppWrite>,
    /// Bytes queued for the writer task.
    pub queued: Arc<AtomicU64>,
    /// The stream's send budget.
    pub credit: Arc<Credit>,
    reader: JoinHandle<()>,
    writer: JoinHandle<()>,
    /// Set by [`AppIo::abort`]; a handle dropped without it resets the application.
    ended: AtomicBool,
}

impl AppIo {
    /// Starts both tasks. `prefix` is written to the application first (a SOCKS reply).
    pub fn start(
        stream: StreamId,
        sock: TcpStream,
        prefix: Option<Vec<u8>>,
        credit: Arc<Credit>,
        session_credit: Arc<Credit>,
        low_water: u64,
        events: mpsc::Sender<Event>,
    ) -> AppIo {
        let sock = Arc::new(sock);
        let (to_app, rx) = mpsc::unbounded_channel();
        let queued = Arc::new(AtomicU64::new(0));
        let reader = tokio::spawn(read_loop(
            stream,
            sock.clone(),
            credit.clone(),
            session_credit,
            events.clone(),
        ));
        let writer = tokio::spawn(write_loop(
            stream,
            sock.clone(),
            prefix,
            rx,
            queued.clone(),
            low_water,
            events,
        ));
        AppIo {
            sock,
            to_app,
            queued,
            credit,
            reader,
            writer,
            ended: AtomicBool::new(false),
        }
    }

    /// Stops both tasks. With `reset`, the application sees a TCP reset rather than a FIN.
    pub fn abort(&self, reset: bool) {
        self.ended.store(true, Ordering::Relaxed);
        self.credit.close();
        self.reader.abort();
        self.writer.abort();
        let s = socket2::SockRef::from(self.sock.as_ref());
        if reset {
            // Closed with a zero linger once the aborted tasks drop their handles: a reset
            // only. A shutdown here would send a FIN first, and a client reading fast could
            // take the stream's end for a clean one.
            let _ = s.set_linger(Some(std::time::Duration::ZERO));
        } else {
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
    }

    /// Stops reading from the application (the stream's send side is done or reset).
    pub fn stop_reading(&self) {
        self.credit.close();
        self.reader.abort();
    }
}

async fn read_loop(
    stream: StreamId,
    sock: Arc<TcpStream>,
    credit: Arc<Credit>,
    session: Arc<Credit>,
    events: mpsc::Sender<Event>,
) {
    // Whether the session has been told that the application has nothing more right now.
    let mut idle = false;
    loop {
        let Some(k) = credit.take(READ_CHUNK).await else {
            return;
        };
        let Some(k2) = session.take(k).await else {
            return;
        };
        credit.give(k - k2);
        let mut buf = BytesMut::with_capacity(k2 as usize);
        let r = loop {
            match sock.try_read_buf(&mut buf) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    // Credit in hand and nothing to read: the source is idle (the scheduler
                    // may plan the finish of what is buffered, see `SchedContext::finite`).
                    if !idle {
                        idle = true;
                        if events.send(Event::AppIdle { stream }).await.is_err() {
                            return;
                        }
                    }
                    if let Err(e) = sock.readable().await {
                        break Err(e);
                    }
                }
                other => break other,
            }
        };
        match r {
            Ok(0) => {
                credit.give(k2);
                session.give(k2);
                let _ = events.send(Event::AppEof { stream }).await;
                return;
            }
            Ok(n) => {
                idle = false;
                let unused = k2 - n as u64;
                credit.give(unused);
                session.give(unused);
                let data = buf.freeze();
                if events.send(Event::AppData { stream, data }).await.is_err() {
                    return;
                }
            }
            Err(e) => {
                let _ = events
                    .send(Event::AppFailed {
                        stream,
                        why: e.to_string(),
                    })
                    .await;
                return;
            }
        }
    }
}

async fn write_all(sock: &TcpStream, mut b: &[u8]) -> io::Result<()> {
    while !b.is_empty() {
        sock.writable().await?;
        match sock.try_write(b) {
            Ok(n) => b = &b[n..],
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

async fn write_loop(
    stream: StreamId,
    sock: Arc<TcpStream>,
    prefix: Option<Vec<u8>>,
    mut rx: mpsc::UnboundedReceiver<AppWrite>,
    queued: Arc<AtomicU64>,
    low_water: u64,
    events: mpsc::Sender<Event>,
) {
    let fail = |e: io::Error| Event::AppFailed {
        stream,
        why: e.to_string(),
    };
    if let Some(p) = prefix {
        if let Err(e) = write_all(&sock, &p).await {
            let _ = events.send(fail(e)).await;
            return;
        }
    }
    // Whatever is queued when the socket is writable goes out in one vectored write: at
    // Gbit/s a stream receives a segment per frame, and one system call per 16 KiB segment
    // was the primary's largest cost.
    let mut batch: Vec<Bytes> = Vec::new();
    let mut fin = false;
    while !fin {
        match rx.recv().await {
            Some(AppWrite::Data(b)) => batch.push(b),
            Some(AppWrite::Fin) => fin = true,
            None => return,
        }
        let mut bytes: usize = batch.iter().map(|b| b.len()).sum();
        while !fin && batch.len() < WRITE_BATCH && bytes < WRITE_BATCH_BYTES {
            match rx.try_recv() {
                Ok(AppWrite::Data(b)) => {
                    bytes += b.len();
                    batch.push(b);
                }
                Ok(AppWrite::Fin) => fin = true,
                Err(_) => break,
            }
        }
        if let Err(e) = write_all_vectored(&sock, &mut batch).await {
            let _ = events.send(fail(e)).await;
            return;
        }
        let before = queued.fetch_sub(bytes as u64, Ordering::AcqRel);
        let after = before.saturating_sub(bytes as u64);
        if before >= low_water && after < low_water {
            let _ = events.send(Event::AppDrained { stream }).await;
        }
    }
    let _ = socket2::SockRef::from(sock.as_ref()).shutdown(std::net::Shutdown::Write);
    let _ = events.send(Event::AppWriteDone { stream }).await;
}

/// Most buffers per vectored write (well under IOV_MAX).
const WRITE_BATCH: usize = 64;
/// Most bytes per vectored write.
const WRITE_BATCH_BYTES: usize = 1 << 20;

/// Writes every buffer of `batch` in order, emptying it.
async fn write_all_vectored(sock: &TcpStream, batch: &mut Vec<Bytes>) -> io::Result<()> {
    let mut first = 0;
    while first < batch.len() {
        sock.writable().await?;
        let slices: Vec<io::IoSlice<'_>> =
            batch[first..].iter().map(|b| io::IoSlice::new(b)).collect();
        match sock.try_write_vectored(&slices) {
            Ok(mut n) => {
                while n > 0 && first < batch.len() {
                    let len = batch[first].len();
                    if n >= len {
                        n -= len;
                        first += 1;
                    } else {
                        let _ = batch[first].split_to(n);
                        n = 0;
                    }
                }
                while first < batch.len() && batch[first].is_empty() {
                    first += 1;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
    }
    batch.clear();
    Ok(())
}

impl Drop for AppIo {
    /// A handle dropped without [`AppIo::abort`] belongs to a session that ended without
    /// ending its streams, which only a bug does (a panic in the session task unwinds through
    /// here): the application gets a reset at once instead of a connection that never moves
    /// again while its reader task waits for credit forever.
    fn drop(&mut self) {
        if !self.ended.load(Ordering::Relaxed) {
            tracing::error!("a session dropped a live application stream: resetting it");
            self.abort(true);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn credit_blocks_until_given_and_closes() {
        let c = Credit::new(10);
        assert_eq!(c.take(4).await, Some(4));
        assert_eq!(c.take(100).await, Some(6));
        let c2 = c.clone();
        let waiter = tokio::spawn(async move { c2.take(5).await });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiter.is_finished(), "no credit: the reader waits");
        c.give(3);
        assert_eq!(waiter.await.unwrap(), Some(3));
        c.close();
        assert_eq!(c.take(1).await, None);
    }

    /// A stream's I/O dropped without being ended (its session died) resets the
    /// application's connection; one ended cleanly first closes it with a FIN, not a reset.
    #[tokio::test]
    async fn a_dropped_live_stream_resets_its_application() {
        use tokio::io::AsyncReadExt;
        for clean in [false, true] {
            let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let mut app = tokio::net::TcpStream::connect(l.local_addr().unwrap())
                .await
                .unwrap();
            let (ours, _) = l.accept().await.unwrap();
            let (events, _rx) = mpsc::channel(8);
            let io = AppIo::start(
                StreamId(1),
                ours,
                None,
                Credit::new(0),
                Credit::new(0),
                1,
                events,
            );
            if clean {
                io.abort(false);
            }
            drop(io);
            let mut buf = [0u8; 8];
            let r = tokio::time::timeout(Duration::from_secs(5), app.read(&mut buf))
                .await
                .expect("the application is not left hanging");
            if clean {
                assert_eq!(r.unwrap(), 0, "a clean end is a FIN");
            } else {
                let e = r.expect_err("a reset");
                assert_eq!(e.kind(), std::io::ErrorKind::ConnectionReset);
            }
        }
    }
}
