//! The origin and the clients: a real HTTP/1.1 server that honours `Range`, and a client that
//! reaches it directly, over kernel MPTCP, or through a SOCKS5 proxy (mpbond's primary),
//! hashing what arrives and recording progress over time.
//!
//! The content of `/bytes/N` is a deterministic function of the offset, so any client can
//! compute the SHA-256 the download must have without the origin telling it.

use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use serde::Serialize;
use sha2::{Digest, Sha256};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

/// The byte at `offset` of every file.
pub fn content_byte(offset: u64) -> u8 {
    let mut z = (offset / 8).wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    (z >> ((offset % 8) * 8)) as u8
}

/// Fills `buf` with the content starting at `offset`.
pub fn fill(offset: u64, buf: &mut [u8]) {
    for (i, b) in buf.iter_mut().enumerate() {
        *b = content_byte(offset + i as u64);
    }
}

/// SHA-256 of bytes `[start, end)`.
pub fn expected_sha256(start: u64, end: u64) -> String {
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 64 << 10];
    let mut off = start;
    while off < end {
        let n = ((end - off) as usize).min(buf.len());
        fill(off, &mut buf[..n]);
        h.update(&buf[..n]);
        off += n as u64;
    }
    hex(&h.finalize())
}

/// The content's SHA-256 over the ranges a client will ask for, computed before it asks.
///
/// [`expected_sha256`] generates and hashes the whole range again: about 35 ms for one
/// 16 MB segment of §6.5's 360° video on the lab machine. A client that checks each piece
/// before it asks for the next, as the video player does, would otherwise put that time on
/// every request's path, where it counts as the scheme's (in a two-device run of 11d it was
/// a quarter of what each segment lost against the links' bound).
#[derive(Clone, Debug, Default)]
pub struct Reference(HashMap<(u64, u64), String>);

impl Reference {
    /// The sums of `ranges` (`[start, end)` each).
    pub fn of(ranges: impl IntoIterator<Item = (u64, u64)>) -> Self {
        let mut sums = HashMap::new();
        for r in ranges {
            sums.entry(r).or_insert_with(|| expected_sha256(r.0, r.1));
        }
        Self(sums)
    }

    /// Whether `sha` is the content's SHA-256 over `[start, end)`; a range computed
    /// beforehand is looked up, any other hashed now.
    pub fn matches(&self, start: u64, end: u64, sha: &str) -> bool {
        match self.0.get(&(start, end)) {
            Some(s) => s == sha,
            None => expected_sha256(start, end) == sha,
        }
    }
}

/// Lower-case hex.
pub fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Serves `GET /bytes/N` (keep-alive, `Range: bytes=a-b`) until the listener fails.
pub async fn serve_origin(l: TcpListener) {
    while let Ok((s, _)) = l.accept().await {
        tokio::spawn(async move {
            let _ = serve_conn(s).await;
        });
    }
}

async fn serve_conn(s: TcpStream) -> io::Result<()> {
    let _ = s.set_nodelay(true);
    let (r, mut w) = s.into_split();
    let mut r = BufReader::new(r);
    loop {
        let mut line = String::new();
        if r.read_line(&mut line).await? == 0 {
            return Ok(());
        }
        let mut range = None;
        let mut body_len: Option<u64> = None;
        loop {
            let mut h = String::new();
            if r.read_line(&mut h).await? == 0 {
                return Ok(());
            }
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            if let Some(v) = h
                .to_ascii_lowercase()
                .strip_prefix("range:")
                .map(|v| v.trim().to_string())
            {
                range = parse_range(&v);
            }
            if let Some(v) = h.to_ascii_lowercase().strip_prefix("content-length:") {
                body_len = v.trim().parse().ok();
            }
        }
        if line.starts_with("PUT /upload ") {
            let Some(n) = body_len else {
                w.write_all(b"HTTP/1.1 411 Length Required\r\nContent-Length: 0\r\n\r\n")
                    .await?;
                return Ok(());
            };
            let sha = hash_body(&mut r, n).await?;
            w.write_all(
                format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{sha}",
                    sha.len()
                )
                .as_bytes(),
            )
            .await?;
            continue;
        }
        let size = line
            .split_whitespace()
            .nth(1)
            .and_then(|p| p.strip_prefix("/bytes/"))
            .and_then(|n| n.parse::<u64>().ok());
        let Some(size) = size else {
            w.write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
                .await?;
            continue;
        };
        let (start, end, head) = match range {
            Some((a, b)) if a < size => {
                let b = b.map_or(size - 1, |b| b.min(size - 1));
                (
                    a,
                    b + 1,
                    format!(
                        "HTTP/1.1 206 Partial Content\r\nContent-Length: {}\r\nContent-Range: bytes {a}-{b}/{size}\r\n\r\n",
                        b + 1 - a
                    ),
                )
            }
            Some(_) => {
                w.write_all(
                    format!("HTTP/1.1 416 Range Not Satisfiable\r\nContent-Range: bytes */{size}\r\nContent-Length: 0\r\n\r\n")
                        .as_bytes(),
                )
                .await?;
                continue;
            }
            None => (
                0,
                size,
                format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: {size}\r\nAccept-Ranges: bytes\r\n\r\n"
                ),
            ),
        };
        w.write_all(head.as_bytes()).await?;
        let mut buf = vec![0u8; 64 << 10];
        let mut off = start;
        while off < end {
            let n = ((end - off) as usize).min(buf.len());
            fill(off, &mut buf[..n]);
            w.write_all(&buf[..n]).await?;
            off += n as u64;
        }
    }
}

/// Reads `n` body bytes and returns their SHA-256.
async fn hash_body<R: tokio::io::AsyncRead + Unpin>(r: &mut R, n: u64) -> io::Result<String> {
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 64 << 10];
    let mut left = n;
    while left > 0 {
        let want = (left as usize).min(buf.len());
        let k = r.read(&mut buf[..want]).await?;
        if k == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("upload ended {left} bytes short"),
            ));
        }
        h.update(&buf[..k]);
        left -= k as u64;
    }
    Ok(hex(&h.finalize()))
}

fn parse_range(v: &str) -> Option<(u64, Option<u64>)> {
    let spec = v.strip_prefix("bytes=")?;
    let (a, b) = spec.split_once('-')?;
    let a = a.trim().parse().ok()?;
    let b = if b.trim().is_empty() {
        None
    } else {
        Some(b.trim().parse().ok()?)
    };
    Some((a, b))
}

/// How a client reaches the origin.
#[derive(Clone, Debug)]
pub enum Via {
    /// Plain TCP.
    Direct,
    /// Kernel MPTCP (IPPROTO_MPTCP) to this relay, which connects on to the origin.
    Mptcp(SocketAddr),
    /// SOCKS5 CONNECT through this proxy (mpbond's primary).
    Socks(SocketAddr),
}

/// One download.
#[derive(Clone, Debug, Serialize)]
pub struct Fetch {
    /// Body bytes received.
    pub bytes: u64,
    /// Seconds from the request to the last byte.
    pub seconds: f64,
    /// SHA-256 of the body.
    pub sha256: String,
    /// Whether it equals the content's SHA-256.
    pub intact: bool,
    /// (seconds, bytes so far), sampled every 10 ms.
    pub progress: Vec<(f64, u64)>,
}

/// Connects as `via` says.
pub async fn connect(origin: SocketAddr, via: &Via) -> io::Result<TcpStream> {
    let s = match via {
        Via::Direct => TcpStream::connect(origin).await?,
        Via::Mptcp(relay) => {
            let relay = *relay;
            let std = tokio::task::spawn_blocking(move || -> io::Result<std::net::TcpStream> {
                let sock = socket2::Socket::new(
                    socket2::Domain::IPV4,
                    socket2::Type::STREAM,
                    Some(socket2::Protocol::MPTCP),
                )?;
                sock.connect_timeout(&relay.into(), Duration::from_secs(10))?;
                sock.set_nonblocking(true)?;
                Ok(sock.into())
            })
            .await
            .map_err(io::Error::other)??;
            TcpStream::from_std(std)?
        }
        Via::Socks(proxy) => socks5_connect(*proxy, origin).await?,
    };
    s.set_nodelay(true)?;
    Ok(s)
}

/// Opens a SOCKS5 CONNECT (no authentication, IPv4 destination) through `proxy`.
pub async fn socks5_connect(proxy: SocketAddr, to: SocketAddr) -> io::Result<TcpStream> {
    let mut s = TcpStream::connect(proxy).await?;
    s.set_nodelay(true)?;
    s.write_all(&[5, 1, 0]).await?;
    let mut b = [0u8; 2];
    s.read_exact(&mut b).await?;
    let SocketAddr::V4(o) = to else {
        return Err(io::Error::other("IPv4 destinations only"));
    };
    let mut req = vec![5, 1, 0, 1];
    req.extend_from_slice(&o.ip().octets());
    req.extend_from_slice(&o.port().to_be_bytes());
    s.write_all(&req).await?;
    let mut rep = [0u8; 10];
    s.read_exact(&mut rep).await?;
    if rep[1] != 0 {
        return Err(io::Error::other(format!("SOCKS5 reply {}", rep[1])));
    }
    Ok(s)
}

/// Sends `GET /bytes/size` (with `Range` if given) on `s` and reads the response head; returns
/// the body's length, which the caller then reads from `s`.
pub async fn request(s: &mut TcpStream, size: u64, range: Option<(u64, u64)>) -> io::Result<u64> {
    let req = match range {
        Some((a, b)) => format!(
            "GET /bytes/{size} HTTP/1.1\r\nHost: origin\r\nRange: bytes={a}-{}\r\n\r\n",
            b - 1
        ),
        None => format!("GET /bytes/{size} HTTP/1.1\r\nHost: origin\r\n\r\n"),
    };
    s.write_all(req.as_bytes()).await?;
    read_head(s).await
}

/// Reads a response head byte by byte up to the blank line (heads are small, and reading no
/// further leaves the body on the socket); returns the Content-Length of a 200 or 206.
async fn read_head(s: &mut TcpStream) -> io::Result<u64> {
    let mut head = Vec::new();
    let mut b = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if s.read(&mut b).await? == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "connection closed before the response head",
            ));
        }
        head.push(b[0]);
        if head.len() > 8192 {
            return Err(io::Error::other("response head too long"));
        }
    }
    let head = String::from_utf8_lossy(&head).to_string();
    let status = head.split_whitespace().nth(1).unwrap_or("");
    if status != "200" && status != "206" {
        return Err(io::Error::other(format!("origin answered {status}")));
    }
    head.lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("content-length:")
                .and_then(|v| v.trim().parse().ok())
        })
        .ok_or_else(|| io::Error::other("no Content-Length"))
}

/// Reads a response body of `len` bytes from `s` into memory, calling `on_read` with the
/// bytes read so far after every read (progress records, shared counters).
pub async fn read_body(
    s: &mut TcpStream,
    len: u64,
    mut on_read: impl FnMut(u64) -> io::Result<()>,
) -> io::Result<Vec<u8>> {
    let mut data = vec![0u8; len as usize];
    let mut got = 0usize;
    while got < data.len() {
        let n = s.read(&mut data[got..]).await?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("closed after {got} of {len} bytes"),
            ));
        }
        got += n;
        on_read(got as u64)?;
    }
    Ok(data)
}

/// Downloads `/bytes/size` (or the range `[start, end)` of it) over `s`, keeping `s` usable
/// for the next request. The check of what arrived hashes the range afterwards, outside
/// `seconds`; a client that asks again at once passes its [`Reference`] to [`get_checked`].
pub async fn get(
    s: &mut TcpStream,
    size: u64,
    range: Option<(u64, u64)>,
    started: Instant,
) -> io::Result<Fetch> {
    get_checked(s, size, range, started, &Reference::default()).await
}

/// [`get`], checking what arrived against `reference`. The first `progress` record is the
/// moment the response head arrived (no body bytes yet): a player that times its bandwidth
/// samples from there, as ExoPlayer does, reads it ([`crate::video`]).
pub async fn get_checked(
    s: &mut TcpStream,
    size: u64,
    range: Option<(u64, u64)>,
    started: Instant,
    reference: &Reference,
) -> io::Result<Fetch> {
    let len = request(s, size, range).await?;
    let mut h = Sha256::new();
    let mut got = 0u64;
    let mut buf = vec![0u8; 256 << 10];
    let mut progress = vec![(started.elapsed().as_secs_f64(), 0)];
    while got < len {
        let want = ((len - got) as usize).min(buf.len());
        let n = s.read(&mut buf[..want]).await?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("closed after {got} of {len} bytes"),
            ));
        }
        h.update(&buf[..n]);
        got += n as u64;
        let t = started.elapsed().as_secs_f64();
        if progress.last().is_none_or(|(lt, _)| t - lt >= 0.01) || got == len {
            progress.push((t, got));
        }
    }
    let (a, e) = range.unwrap_or((0, size));
    let sha = hex(&h.finalize());
    Ok(Fetch {
        bytes: got,
        seconds: started.elapsed().as_secs_f64(),
        intact: got == e - a && reference.matches(a, e, &sha),
        sha256: sha,
        progress,
    })
}

/// Uploads `size` bytes of the content to the origin's `/upload` over `s` and waits for the
/// origin's SHA-256 of what it received; `intact` says whether it matches what was sent.
/// `progress` is what the client has handed to its socket (the links' logs say what moved).
pub async fn put(s: &mut TcpStream, size: u64, started: Instant) -> io::Result<Fetch> {
    s.write_all(
        format!("PUT /upload HTTP/1.1\r\nHost: origin\r\nContent-Length: {size}\r\n\r\n")
            .as_bytes(),
    )
    .await?;
    let mut buf = vec![0u8; 64 << 10];
    let mut off = 0u64;
    let mut progress = vec![(started.elapsed().as_secs_f64(), 0)];
    while off < size {
        let n = ((size - off) as usize).min(buf.len());
        fill(off, &mut buf[..n]);
        s.write_all(&buf[..n]).await?;
        off += n as u64;
        progress.push((started.elapsed().as_secs_f64(), off));
    }
    let len = read_head(s).await?;
    if len > 1024 {
        return Err(io::Error::other("upload answer too long"));
    }
    let mut answer = vec![0u8; len as usize];
    s.read_exact(&mut answer).await?;
    let sha = String::from_utf8_lossy(&answer).to_string();
    Ok(Fetch {
        bytes: size,
        seconds: started.elapsed().as_secs_f64(),
        intact: sha == expected_sha256(0, size),
        sha256: sha,
        progress,
    })
}

/// A `bulk` download: reads `/bytes/size` for `duration`, counting the bytes of every
/// `sample` interval, then closes. `intact` checks the prefix that arrived.
pub async fn bulk(
    mut s: TcpStream,
    size: u64,
    duration: Duration,
    sample: Duration,
) -> io::Result<(Fetch, Vec<f64>)> {
    let started = Instant::now();
    let len = request(&mut s, size, None).await?;
    let deadline = tokio::time::Instant::now() + duration;
    let mut h = Sha256::new();
    let mut got = 0u64;
    let mut buf = vec![0u8; 256 << 10];
    let mut progress = vec![(started.elapsed().as_secs_f64(), 0)];
    let sample_s = sample.as_secs_f64();
    let mut bins: Vec<u64> = Vec::new();
    while got < len {
        let n = match tokio::time::timeout_at(deadline, s.read(&mut buf)).await {
            Err(_) => break,
            Ok(r) => r?,
        };
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("closed after {got} bytes"),
            ));
        }
        let n = n.min((len - got) as usize);
        h.update(&buf[..n]);
        got += n as u64;
        let t = started.elapsed().as_secs_f64();
        let bin = (t / sample_s) as usize;
        if bins.len() <= bin {
            bins.resize(bin + 1, 0);
        }
        bins[bin] += n as u64;
        if progress.last().is_none_or(|(lt, _)| t - lt >= 0.01) {
            progress.push((t, got));
        }
    }
    drop(s);
    let whole = (duration.as_secs_f64() / sample_s).floor() as usize;
    bins.resize(whole, 0);
    let mbps = bins
        .iter()
        .map(|&b| b as f64 * 8.0 / sample_s / 1e6)
        .collect();
    let sha = hex(&h.finalize());
    progress.push((started.elapsed().as_secs_f64(), got));
    Ok((
        Fetch {
            bytes: got,
            seconds: duration.as_secs_f64(),
            intact: sha == expected_sha256(0, got),
            sha256: sha,
            progress,
        },
        mbps,
    ))
}

/// A listening MPTCP socket on `listen` (needs a runtime), for [`relay`]: the MPTCP-capable
/// proxy of the kibbutz baseline accepts MPTCP connections and connects each to the origin
/// with plain TCP.
pub fn mptcp_listener(listen: SocketAddr) -> io::Result<TcpListener> {
    let sock = socket2::Socket::new(
        socket2::Domain::IPV4,
        socket2::Type::STREAM,
        Some(socket2::Protocol::MPTCP),
    )?;
    sock.set_reuse_address(true)?;
    sock.bind(&listen.into())?;
    sock.listen(128)?;
    sock.set_nonblocking(true)?;
    TcpListener::from_std(sock.into())
}

/// Relays every connection accepted on `l` to `origin` with plain TCP, both ways, until
/// either side closes: the proxy side of kibbutz and COMBINE's helper agent.
pub async fn relay(l: TcpListener, origin: SocketAddr) -> io::Result<()> {
    loop {
        let (mut c, _) = l.accept().await?;
        tokio::spawn(async move {
            if let Ok(mut o) = TcpStream::connect(origin).await {
                let _ = c.set_nodelay(true);
                let _ = o.set_nodelay(true);
                let _ = tokio::io::copy_bidirectional(&mut c, &mut o).await;
            }
        });
    }
}

/// Sequential downloads of `size` bytes with a random pause of `gap` (uniform between the
/// two bounds) after each, until `duration` has passed (MPBond §6.6's workload: 1 MB chunks
/// 1-5 s apart, like a video player). Returns each chunk's time and whether all were intact.
pub async fn chunks(
    origin: SocketAddr,
    via: &Via,
    size: u64,
    gap: (Duration, Duration),
    duration: Duration,
    seed: u64,
) -> io::Result<(Vec<f64>, bool, u64)> {
    let mut rng = mpbond_sim::rng::Rng::new(seed);
    let reference = Reference::of([(0, size)]);
    let end = Instant::now() + duration;
    let mut s = connect(origin, via).await?;
    let (mut times, mut intact, mut bytes) = (Vec::new(), true, 0u64);
    while Instant::now() < end {
        let t0 = Instant::now();
        let f = get_checked(&mut s, size, None, t0, &reference).await?;
        times.push(f.seconds);
        intact &= f.intact;
        bytes += f.bytes;
        let g = gap.0.as_secs_f64() + rng.unit() * (gap.1.as_secs_f64() - gap.0.as_secs_f64());
        tokio::time::sleep(Duration::from_secs_f64(g.max(0.0))).await;
    }
    Ok((times, intact, bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reference_checks_the_ranges_it_holds_and_any_other() {
        let r = Reference::of([(0, 100_000), (10, 20)]);
        assert!(r.matches(0, 100_000, &expected_sha256(0, 100_000)));
        assert!(r.matches(10, 20, &expected_sha256(10, 20)));
        assert!(!r.matches(0, 100_000, &expected_sha256(0, 99_999)));
        // A range it was not given is hashed when asked.
        assert!(r.matches(5, 50, &expected_sha256(5, 50)));
        assert!(!r.matches(5, 50, &expected_sha256(5, 51)));
    }

    #[tokio::test]
    async fn a_download_is_judged_by_the_reference_it_is_given() {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let origin = l.local_addr().unwrap();
        tokio::spawn(serve_origin(l));
        let size = 300_000;
        let mut s = connect(origin, &Via::Direct).await.unwrap();
        let good = Reference::of([(0, size)]);
        let f = get_checked(&mut s, size, None, Instant::now(), &good)
            .await
            .unwrap();
        assert!(f.intact);
        assert_eq!(
            (f.bytes, f.sha256.as_str()),
            (size, expected_sha256(0, size).as_str())
        );
        // The same bytes against a wrong sum for that range: the lookup decides, and says no.
        let wrong = Reference(HashMap::from([((0, size), expected_sha256(1, size + 1))]));
        let f = get_checked(&mut s, size, None, Instant::now(), &wrong)
            .await
            .unwrap();
        assert!(!f.intact);
    }
}
