//! COMBINE's collaborative download (Ananthanarayanan et al., MobiSys 2007), the
//! application-level baseline of MPBond §6.1.
//!
//! The file is cut into fixed-size chunks held in one work queue. Every device is a worker
//! that takes the next chunk whenever it is free and fetches it with an HTTP `Range` request
//! over its own WAN link: the primary straight to the origin, each helper through a small
//! agent on the helper that relays the request to the origin over the helper's WAN link and
//! streams the chunk back over the pipe. Each worker keeps one persistent connection, so the
//! only per-chunk cost is the request's round trip (COMBINE does not pipeline), and the
//! download ends when the slowest worker's last chunk lands: the two inefficiencies MPBond's
//! byte-level scheduling removes.

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use sha2::{Digest, Sha256};
use tokio::net::{TcpListener, TcpStream};

use crate::http::{self, Fetch};

/// COMBINE's default chunk size, 256 KB (MPBond §6.1; taken as KiB); 128 and 64 are the options.
pub const DEFAULT_CHUNK: u64 = 256 * 1024;

/// The helper's agent: every connection from the primary is relayed to the origin over the
/// helper's own WAN link (its default route), both ways, until either side closes. It takes
/// a bound listener so that the lab knows the agent is there before the download starts.
pub async fn serve_helper(l: TcpListener, origin: SocketAddr) -> io::Result<()> {
    http::relay(l, origin).await
}

/// Shared state of one download.
struct Job {
    size: u64,
    chunk: u64,
    next: AtomicU64,
    got: AtomicU64,
    started: Instant,
    progress: Mutex<Vec<(f64, u64)>>,
    /// Chunks as they arrived: (offset, bytes).
    parts: Mutex<Vec<(u64, Vec<u8>)>>,
}

/// Downloads `/bytes/size` with the work queue: `workers` are the addresses each device's
/// connection goes to (the origin for the primary, a helper agent's pipe address for each
/// helper). Returns the same record as a single-connection download; `intact` checks the
/// reassembled file's SHA-256.
pub async fn download(
    origin: SocketAddr,
    helpers: &[SocketAddr],
    size: u64,
    chunk: u64,
) -> io::Result<Fetch> {
    if chunk == 0 {
        return Err(io::Error::other("chunk size must be positive"));
    }
    let job = Arc::new(Job {
        size,
        chunk,
        next: AtomicU64::new(0),
        got: AtomicU64::new(0),
        started: Instant::now(),
        progress: Mutex::new(vec![(0.0, 0)]),
        parts: Mutex::new(Vec::new()),
    });
    let mut tasks = Vec::new();
    for to in std::iter::once(origin).chain(helpers.iter().copied()) {
        let job = job.clone();
        tasks.push(tokio::spawn(async move { worker(to, &job).await }));
    }
    for t in tasks {
        t.await.map_err(io::Error::other)??;
    }
    let seconds = job.started.elapsed().as_secs_f64();
    let mut parts = std::mem::take(&mut *job.parts.lock().map_err(poisoned)?);
    parts.sort_by_key(|(off, _)| *off);
    let mut h = Sha256::new();
    let mut expect = 0u64;
    for (off, data) in &parts {
        if *off != expect {
            return Err(io::Error::other(format!(
                "chunk at {off} is missing or overlaps (expected {expect})"
            )));
        }
        h.update(data);
        expect += data.len() as u64;
    }
    let sha = http::hex(&h.finalize());
    let progress = std::mem::take(&mut *job.progress.lock().map_err(poisoned)?);
    Ok(Fetch {
        bytes: expect,
        seconds,
        intact: expect == size && sha == http::expected_sha256(0, size),
        sha256: sha,
        progress,
    })
}

fn poisoned<T>(_: T) -> io::Error {
    io::Error::other("a worker panicked")
}

/// One device: take the next chunk, fetch it, repeat until the queue is empty.
async fn worker(to: SocketAddr, job: &Job) -> io::Result<()> {
    let mut s: Option<TcpStream> = None;
    loop {
        let off = job.next.fetch_add(job.chunk, Ordering::SeqCst);
        if off >= job.size {
            return Ok(());
        }
        let end = (off + job.chunk).min(job.size);
        let conn = match &mut s {
            Some(c) => c,
            None => {
                let c = TcpStream::connect(to).await?;
                c.set_nodelay(true)?;
                s.insert(c)
            }
        };
        let len = http::request(conn, job.size, Some((off, end))).await?;
        if len != end - off {
            return Err(io::Error::other(format!(
                "asked for {} bytes at {off}, got a body of {len}",
                end - off
            )));
        }
        let mut counted = 0;
        let data = http::read_body(conn, len, |filled| {
            let n = filled - counted;
            counted = filled;
            let total = job.got.fetch_add(n, Ordering::SeqCst) + n;
            let t = job.started.elapsed().as_secs_f64();
            let mut p = job.progress.lock().map_err(poisoned)?;
            if p.last().is_none_or(|(lt, _)| t - lt >= 0.01) || total == job.size {
                p.push((t, total));
            }
            Ok(())
        })
        .await
        .map_err(|e| io::Error::new(e.kind(), format!("chunk at {off}: {e}")))?;
        job.parts.lock().map_err(poisoned)?.push((off, data));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// On loopback: an origin, two helper agents, and the primary's queue put the file back
    /// together byte for byte, whatever chunk size (including one that does not divide it).
    #[test]
    fn reassembles_the_file_from_every_worker() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let origin = l.local_addr().unwrap();
            tokio::spawn(http::serve_origin(l));
            let mut agents = Vec::new();
            for _ in 0..2 {
                let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
                agents.push(l.local_addr().unwrap());
                tokio::spawn(serve_helper(l, origin));
            }
            for (size, chunk) in [(1_000_000, 65_536), (300_001, 100_000), (10, 4096)] {
                let f = download(origin, &agents, size, chunk).await.unwrap();
                assert!(f.intact, "size {size} chunk {chunk}");
                assert_eq!(f.bytes, size);
                assert_eq!(f.progress.last().map(|p| p.1), Some(size));
            }
            assert!(download(origin, &agents, 10, 0).await.is_err());
        });
    }
}
