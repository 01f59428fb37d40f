//! Tethering with a fixed split ratio (MPBond §6.2, Figure 5): the first part of the file over
//! the PS-Path, the rest over the helper's tether, each part one plain TCP connection with an
//! HTTP byte-range request. The tethered connection is end-to-end across the HS-Path and the
//! pipe (the helper forwards at layer 3), so it runs at the slower of the two and the helper's
//! WAN radio stays on until the pipe has drained: the cost MPBond's helper-side split removes.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::time::Instant;

use sha2::{Digest, Sha256};
use tokio::net::{TcpSocket, TcpStream};

use crate::http::{self, Fetch};

/// Connects to `to` from local address `from` (which selects the interface by policy routing).
pub async fn connect_from(to: SocketAddr, from: Option<IpAddr>) -> io::Result<TcpStream> {
    let sock = TcpSocket::new_v4()?;
    if let Some(ip) = from {
        sock.bind(SocketAddr::new(ip, 0))?;
    }
    let s = sock.connect(to).await?;
    s.set_nodelay(true)?;
    Ok(s)
}

/// Downloads `/bytes/size`: bytes `[0, ps_bytes)` over the default route (the PS-Path) and
/// `[ps_bytes, size)` from `tether`, concurrently. `intact` checks the whole file's SHA-256.
pub async fn download(
    origin: SocketAddr,
    size: u64,
    ps_bytes: u64,
    tether: IpAddr,
) -> io::Result<Fetch> {
    let started = Instant::now();
    let part = |from: Option<IpAddr>, a: u64, b: u64| async move {
        if a >= b {
            return Ok::<_, io::Error>((Vec::new(), vec![(0.0, 0)]));
        }
        let mut s = connect_from(origin, from).await?;
        let len = http::request(&mut s, size, Some((a, b))).await?;
        if len != b - a {
            return Err(io::Error::other(format!(
                "asked for {} bytes, the origin sends {len}",
                b - a
            )));
        }
        let mut progress = vec![(started.elapsed().as_secs_f64(), 0u64)];
        let data = http::read_body(&mut s, len, |got| {
            progress.push((started.elapsed().as_secs_f64(), got));
            Ok(())
        })
        .await?;
        Ok((data, progress))
    };
    let (ps, tethered) = tokio::try_join!(
        part(None, 0, ps_bytes.min(size)),
        part(Some(tether), ps_bytes.min(size), size)
    )?;
    let seconds = started.elapsed().as_secs_f64();
    let mut h = Sha256::new();
    h.update(&ps.0);
    h.update(&tethered.0);
    let sha = http::hex(&h.finalize());
    let bytes = (ps.0.len() + tethered.0.len()) as u64;
    Ok(Fetch {
        bytes,
        seconds,
        intact: bytes == size && sha == http::expected_sha256(0, size),
        sha256: sha,
        progress: merge_progress(&ps.1, &tethered.1),
    })
}

/// The sum of two cumulative progress records, at every time either moved.
pub fn merge_progress(a: &[(f64, u64)], b: &[(f64, u64)]) -> Vec<(f64, u64)> {
    let mut events: Vec<(f64, usize, u64)> = a
        .iter()
        .map(|&(t, n)| (t, 0, n))
        .chain(b.iter().map(|&(t, n)| (t, 1, n)))
        .collect();
    events.sort_by(|x, y| x.0.total_cmp(&y.0));
    let mut last = [0u64; 2];
    let mut out: Vec<(f64, u64)> = Vec::with_capacity(events.len());
    for (t, i, n) in events {
        last[i] = n;
        let total = last[0] + last[1];
        match out.last_mut() {
            Some(p) if t - p.0 < 0.01 => p.1 = total,
            _ => out.push((t, total)),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_of_two_parts_adds_up() {
        let a = [(0.0, 0), (0.1, 100), (0.3, 300)];
        let b = [(0.0, 0), (0.2, 50), (0.4, 500)];
        let m = merge_progress(&a, &b);
        assert_eq!(m.last(), Some(&(0.4, 800)));
        assert!(m.windows(2).all(|w| w[0].1 <= w[1].1 && w[0].0 < w[1].0));
        assert_eq!(m.iter().find(|p| p.0 == 0.2).map(|p| p.1), Some(150));
    }

    #[tokio::test]
    async fn a_split_download_reassembles_the_file() {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let origin = l.local_addr().unwrap();
        tokio::spawn(http::serve_origin(l));
        for (size, ps) in [(100_001u64, 30_000u64), (50_000, 0), (50_000, 50_000)] {
            let f = download(origin, size, ps, "127.0.0.1".parse().unwrap())
                .await
                .unwrap();
            assert!(f.intact, "size {size} split at {ps}");
            assert_eq!(f.bytes, size);
            assert_eq!(f.progress.last().map(|p| p.1), Some(size));
        }
    }
}
