//! `mpbond bench`: the daemons' performance on unshaped loopback, measured side by side with a
//! plain TCP relay in one run (docs/performance.md).
//!
//! Daemons and the plain relay run as separate processes so that each one's CPU time can be
//! read from /proc; the origin and the client run in this process. Every run downloads through
//! SOCKS5 with several parallel streams and checks the byte count.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Args;
use mpbond_daemon::keys::KeyPair;
use mpbond_daemon::link::{self, Security};
use mpbond_lab::http::socks5_connect;
use mpbond_proto::Frame;
use serde::Serialize;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Options of `mpbond bench`.
#[derive(Args, Debug)]
pub struct BenchArgs {
    /// Bytes per goodput run (split over the parallel streams).
    #[arg(long, default_value = "2GB")]
    size: String,
    /// Parallel streams per goodput run.
    #[arg(long, default_value_t = 4)]
    streams: usize,
    /// Idle sessions opened for the memory measurement.
    #[arg(long, default_value_t = 200)]
    sessions: usize,
    /// Active streams opened for the memory measurement.
    #[arg(long, default_value_t = 100)]
    active_streams: usize,
    /// One-way delay added to the PS-Path for the stream-setup measurement.
    #[arg(long, default_value = "20ms")]
    delay: String,
    /// Write every number as JSON here too.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Only the goodput runs whose name contains this (e.g. "1 path"), and skip the memory and
    /// setup measurements: for profiling.
    #[arg(long)]
    only: Option<String>,
    /// Worker threads of each daemon (0 = the role's default: all cores for the proxy, one for
    /// the primary and helpers).
    #[arg(long, default_value_t = 0)]
    threads: usize,
}

/// `mpbond bench-relay`: a plain SOCKS5 CONNECT relay, the baseline (hidden).
#[derive(Args, Debug)]
pub struct RelayArgs {
    /// Where to listen.
    #[arg(long)]
    listen: SocketAddr,
}

#[derive(Serialize, Debug, Clone)]
struct Goodput {
    name: String,
    gbit_s: f64,
    cpu_s_per_gb: f64,
    ratio_to_plain: f64,
    bytes_per_subflow: Vec<u64>,
}

#[derive(Serialize, Debug, Default)]
struct Report {
    goodput: Vec<Goodput>,
    idle_session_bytes: f64,
    active_stream_bytes: f64,
    ps_rtt_ms: f64,
    direct_connect_ms: f64,
    bond_stream_setup_ms: f64,
    setup_extra_rtts: f64,
}

const NET: u8 = 90;
fn ip(host: u8) -> Ipv4Addr {
    Ipv4Addr::new(127, NET, 0, host)
}
fn addr(host: u8, port: u16) -> SocketAddr {
    SocketAddr::new(ip(host).into(), port)
}

/// A child process killed on drop.
struct Proc(Child);
impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
impl Proc {
    fn pid(&self) -> u32 {
        self.0.id()
    }
}

fn cpu_seconds(pid: u32) -> f64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name (which may contain spaces) start after the last ')'.
    let rest = s.rsplit_once(')').map(|x| x.1).unwrap_or("");
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = f.get(11).and_then(|x| x.parse().ok()).unwrap_or(0.0)
        + f.get(12).and_then(|x| x.parse().ok()).unwrap_or(0.0);
    ticks / 100.0
}

fn rss_bytes(pid: u32) -> f64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    s.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
        .unwrap_or(0.0)
        * 1024.0
}

fn spawn(args: &[&str], cfg: Option<&Path>) -> Result<Proc> {
    let exe = std::env::current_exe()?;
    let mut c = Command::new(exe);
    c.args(args);
    if let Some(p) = cfg {
        c.arg("-c").arg(p);
    }
    c.env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    Ok(Proc(c.spawn().context("cannot start a daemon")?))
}

// ---- origin and client -------------------------------------------------------------------

/// The origin: a client sends an 8-byte length, the origin sends that many bytes (and an
/// optional 8-byte rate, bytes/s, 0 = unlimited).
async fn origin(l: TcpListener) {
    let block = Arc::new(vec![0x5au8; 1 << 20]);
    loop {
        let Ok((mut s, _)) = l.accept().await else {
            continue;
        };
        let block = block.clone();
        tokio::spawn(async move {
            let mut req = [0u8; 16];
            if s.read_exact(&mut req).await.is_err() {
                return;
            }
            let n = u64::from_be_bytes(req[..8].try_into().unwrap_or_default());
            let rate = u64::from_be_bytes(req[8..].try_into().unwrap_or_default());
            let t0 = Instant::now();
            let mut sent = 0u64;
            while sent < n {
                let k = ((n - sent) as usize).min(block.len());
                let k = if rate > 0 { k.min(16 << 10) } else { k };
                if s.write_all(&block[..k]).await.is_err() {
                    return;
                }
                sent += k as u64;
                if rate > 0 {
                    let due = Duration::from_secs_f64(sent as f64 / rate as f64);
                    if let Some(w) = due.checked_sub(t0.elapsed()) {
                        tokio::time::sleep(w).await;
                    }
                }
            }
            let _ = s.shutdown().await;
        });
    }
}

async fn fetch(socks: SocketAddr, origin: SocketAddr, n: u64, rate: u64) -> Result<u64> {
    let mut s = socks5_connect(socks, origin).await?;
    let mut req = n.to_be_bytes().to_vec();
    req.extend_from_slice(&rate.to_be_bytes());
    s.write_all(&req).await?;
    let mut buf = vec![0u8; 1 << 18];
    let mut got = 0u64;
    loop {
        let k = s.read(&mut buf).await?;
        if k == 0 {
            break;
        }
        got += k as u64;
    }
    if got != n {
        bail!("received {got} of {n} bytes");
    }
    Ok(got)
}

/// Downloads `total` bytes over `streams` parallel streams; returns (bytes, seconds).
async fn goodput(
    socks: SocketAddr,
    origin: SocketAddr,
    total: u64,
    streams: usize,
) -> Result<(u64, f64)> {
    let per = total / streams as u64;
    let t0 = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..streams {
        tasks.push(tokio::spawn(fetch(socks, origin, per, 0)));
    }
    let mut bytes = 0;
    for t in tasks {
        bytes += t.await??;
    }
    Ok((bytes, t0.elapsed().as_secs_f64()))
}

// ---- the plain relay ---------------------------------------------------------------------

/// `mpbond bench-relay`.
pub fn relay(a: RelayArgs) -> Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let l = TcpListener::bind(a.listen).await?;
        loop {
            let (mut c, _) = l.accept().await?;
            tokio::spawn(async move {
                let _ = c.set_nodelay(true);
                let mut h = [0u8; 3];
                if c.read_exact(&mut h).await.is_err() || c.write_all(&[5, 0]).await.is_err() {
                    return;
                }
                let mut r = [0u8; 10];
                if c.read_exact(&mut r).await.is_err() {
                    return;
                }
                let to = SocketAddr::from((
                    Ipv4Addr::new(r[4], r[5], r[6], r[7]),
                    u16::from_be_bytes([r[8], r[9]]),
                ));
                let Ok(mut o) = TcpStream::connect(to).await else {
                    return;
                };
                let _ = o.set_nodelay(true);
                if c.write_all(&[5, 0, 0, 1, 0, 0, 0, 0, 0, 0]).await.is_err() {
                    return;
                }
                let _ = tokio::io::copy_bidirectional(&mut c, &mut o).await;
            });
        }
    })
}

// ---- a delay line for the PS-Path --------------------------------------------------------

async fn delay_line(l: TcpListener, to: SocketAddr, d: Duration) {
    loop {
        let Ok((c, _)) = l.accept().await else {
            continue;
        };
        tokio::spawn(async move {
            let Ok(o) = TcpStream::connect(to).await else {
                return;
            };
            let _ = (c.set_nodelay(true), o.set_nodelay(true));
            let (cr, cw) = c.into_split();
            let (or, ow) = o.into_split();
            tokio::spawn(pump_delayed(cr, ow, d));
            tokio::spawn(pump_delayed(or, cw, d));
        });
    }
}

async fn pump_delayed(
    mut r: tokio::net::tcp::OwnedReadHalf,
    mut w: tokio::net::tcp::OwnedWriteHalf,
    d: Duration,
) {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(Instant, Vec<u8>)>();
    tokio::spawn(async move {
        while let Some((at, b)) = rx.recv().await {
            tokio::time::sleep_until((at + d).into()).await;
            if w.write_all(&b).await.is_err() {
                return;
            }
        }
        let _ = w.shutdown().await;
    });
    let mut buf = vec![0u8; 1 << 16];
    while let Ok(n) = r.read(&mut buf).await {
        if n == 0 || tx.send((Instant::now(), buf[..n].to_vec())).is_err() {
            break;
        }
    }
}

// ---- configuration -----------------------------------------------------------------------

struct Keys {
    proxy: KeyPair,
    phone: KeyPair,
    helpers: Vec<KeyPair>,
}

fn write_configs(
    dir: &Path,
    k: &Keys,
    helpers: usize,
    insecure: bool,
    scheduler: &str,
    proxy_port: u16,
    threads: usize,
) -> Result<()> {
    let tuning = format!("[tuning]\ninsecure = {insecure}\nthreads = {threads}\n");
    std::fs::write(
        dir.join("proxy.toml"),
        format!(
            "key = \"proxy.key\"\n{tuning}[control]\nlisten = \"{}\"\n[proxy]\nlisten = \"{}\"\nscheduler = \"{scheduler}\"\ndeny_origins = []\nallow = [{{ name = \"phone\", key = \"{}\" }}]\n",
            addr(1, 7070),
            addr(1, 7000),
            k.phone.public
        ),
    )?;
    let mut hs = String::new();
    for (i, h) in k.helpers.iter().take(helpers).enumerate() {
        let hip = ip(10 + i as u8);
        std::fs::write(
            dir.join(format!("helper{i}.toml")),
            format!(
                "key = \"helper{i}.key\"\n{tuning}[helper]\nlisten = \"{hip}:7100\"\nhs_bind = \"{hip}\"\nallow = [{{ name = \"phone\", key = \"{}\" }}]\n",
                k.phone.public
            ),
        )?;
        hs.push_str(&format!(
            "[[primary.helper]]\nname = \"h{i}\"\nkey = \"{}\"\n[[primary.helper.pipe]]\nname = \"wifi\"\naddr = \"{hip}:7100\"\nbind = \"{}\"\n",
            h.public,
            ip(2)
        ));
    }
    std::fs::write(
        dir.join("phone.toml"),
        format!(
            "key = \"phone.key\"\n{tuning}[control]\nlisten = \"{}\"\n[primary]\nproxy = \"{}\"\nproxy_key = \"{}\"\nps_bind = \"{}\"\nsocks = \"{}\"\nscheduler = \"{scheduler}\"\n{hs}",
            addr(2, 7070),
            addr(1, proxy_port),
            k.proxy.public,
            ip(2),
            addr(2, 1080)
        ),
    )?;
    Ok(())
}

struct Bond {
    procs: Vec<Proc>,
}

impl Bond {
    async fn start(dir: &Path, helpers: usize) -> Result<Bond> {
        let mut procs = vec![spawn(&["proxy"], Some(&dir.join("proxy.toml")))?];
        for i in 0..helpers {
            procs.push(spawn(
                &["helper"],
                Some(&dir.join(format!("helper{i}.toml"))),
            )?);
        }
        procs.push(spawn(&["primary"], Some(&dir.join("phone.toml")))?);
        let b = Bond { procs };
        let t0 = Instant::now();
        while subflows(addr(2, 7070)).await != 1 + helpers {
            if t0.elapsed() > Duration::from_secs(20) {
                bail!("the bond did not come up");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Ok(b)
    }

    fn cpu(&self) -> f64 {
        self.procs.iter().map(|p| cpu_seconds(p.pid())).sum()
    }
}

async fn status(control: SocketAddr) -> Option<mpbond_daemon::status::NodeStatus> {
    let mut s = TcpStream::connect(control).await.ok()?;
    s.write_all(b"GET /status HTTP/1.0\r\n\r\n").await.ok()?;
    let mut r = String::new();
    s.read_to_string(&mut r).await.ok()?;
    serde_json::from_str(r.split_once("\r\n\r\n")?.1).ok()
}

async fn subflows(control: SocketAddr) -> usize {
    status(control)
        .await
        .and_then(|s| s.sessions.first().map(|x| x.subflows.len()))
        .unwrap_or(0)
}

// ---- the benchmark -----------------------------------------------------------------------

/// `mpbond bench`.
pub fn run(a: BenchArgs) -> Result<()> {
    let total = mpbond_core::units::parse_size(&a.size)?;
    let delay = mpbond_core::units::parse_duration(&a.delay)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let report = rt.block_on(bench(
        total,
        a.streams,
        a.sessions,
        a.active_streams,
        delay,
        a.only.as_deref(),
        a.threads,
    ))?;
    print!("{}", table(&report));
    if let Some(p) = a.json {
        std::fs::write(&p, serde_json::to_string_pretty(&report)?)?;
    }
    Ok(())
}

async fn bench(
    total: u64,
    streams: usize,
    sessions: usize,
    active: usize,
    delay: Duration,
    only: Option<&str>,
    threads: usize,
) -> Result<Report> {
    let dir = std::env::temp_dir().join(format!("mpbond-bench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    let keys = Keys {
        proxy: KeyPair::generate(),
        phone: KeyPair::generate(),
        helpers: (0..2).map(|_| KeyPair::generate()).collect(),
    };
    keys.proxy.save(&dir.join("proxy.key"))?;
    keys.phone.save(&dir.join("phone.key"))?;
    for (i, h) in keys.helpers.iter().enumerate() {
        h.save(&dir.join(format!("helper{i}.key")))?;
    }
    let origin_addr = addr(200, 8000);
    tokio::spawn(origin(TcpListener::bind(origin_addr).await?));
    let mut report = Report::default();

    // Plain relay.
    let mut plain_gbps = f64::NAN;
    if only.is_none_or(|o| "plain TCP relay".contains(o)) {
        eprintln!("bench: plain TCP relay");
        let relay = spawn(
            &["bench-relay", "--listen", &addr(3, 1080).to_string()],
            None,
        )?;
        tokio::time::sleep(Duration::from_millis(300)).await;
        let c0 = cpu_seconds(relay.pid());
        let (bytes, secs) = goodput(addr(3, 1080), origin_addr, total, streams).await?;
        plain_gbps = bytes as f64 * 8.0 / secs / 1e9;
        report.goodput.push(Goodput {
            name: "plain TCP relay".into(),
            gbit_s: plain_gbps,
            cpu_s_per_gb: (cpu_seconds(relay.pid()) - c0) / (bytes as f64 / 1e9),
            ratio_to_plain: 1.0,
            bytes_per_subflow: vec![],
        });
    }

    for (name, helpers, insecure, sched) in [
        ("mpbond, 1 path, Noise", 0, false, "pams"),
        ("mpbond, 1 path, no encryption", 0, true, "pams"),
        ("mpbond, 3 paths, Noise", 2, false, "roundrobin"),
        ("mpbond, 3 paths, no encryption", 2, true, "roundrobin"),
    ] {
        if only.is_some_and(|o| !name.contains(o)) {
            continue;
        }
        eprintln!("bench: {name}");
        write_configs(&dir, &keys, helpers, insecure, sched, 7000, threads)?;
        let bond = Bond::start(&dir, helpers).await?;
        let c0 = bond.cpu();
        let (bytes, secs) = goodput(addr(2, 1080), origin_addr, total, streams).await?;
        let cpu = bond.cpu() - c0;
        let per = status(addr(1, 7070))
            .await
            .and_then(|s| {
                s.sessions
                    .first()
                    .map(|x| x.subflows.iter().map(|f| f.bytes_scheduled).collect())
            })
            .unwrap_or_default();
        let g = bytes as f64 * 8.0 / secs / 1e9;
        report.goodput.push(Goodput {
            name: name.into(),
            gbit_s: g,
            cpu_s_per_gb: cpu / (bytes as f64 / 1e9),
            ratio_to_plain: g / plain_gbps,
            bytes_per_subflow: per,
        });
        drop(bond);
        tokio::time::sleep(Duration::from_millis(300)).await;
    }

    if only.is_some() {
        let _ = std::fs::remove_dir_all(&dir);
        return Ok(report);
    }

    // Memory per idle session: many primaries each open a session.
    eprintln!("bench: memory per idle session ({sessions} sessions)");
    let primaries: Vec<KeyPair> = (0..sessions).map(|_| KeyPair::generate()).collect();
    let allow: Vec<String> = primaries
        .iter()
        .enumerate()
        .map(|(i, k)| format!("{{ name = \"p{i}\", key = \"{}\" }}", k.public))
        .collect();
    std::fs::write(
        dir.join("mem-proxy.toml"),
        format!(
            "key = \"proxy.key\"\n[proxy]\nlisten = \"{}\"\nmax_sessions = {}\ndeny_origins = []\nallow = [{}]\n",
            addr(1, 7001),
            sessions + 10,
            allow.join(", ")
        ),
    )?;
    let proxy = spawn(&["proxy"], Some(&dir.join("mem-proxy.toml")))?;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let before = rss_bytes(proxy.pid());
    let mut links = Vec::new();
    for k in &primaries {
        let s = TcpStream::connect(addr(1, 7001)).await?;
        let mut l = link::connect(s, k, &keys.proxy.public, Security::Noise).await?;
        l.writer.push_frame(&Frame::MpCapable {
            ver_min: 1,
            ver_max: 1,
            ticket: Default::default(),
        })?;
        l.writer.flush().await?;
        let mut v = Vec::new();
        l.reader.read_frames(&mut v).await?;
        if !matches!(v.first(), Some(Frame::MpOk { .. })) {
            bail!("session refused: {v:?}");
        }
        links.push(l);
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    report.idle_session_bytes = (rss_bytes(proxy.pid()) - before) / sessions as f64;
    drop(links);
    drop(proxy);

    // Memory per active stream, and stream setup time over a delayed PS-Path.
    eprintln!("bench: memory per active stream ({active} streams) and stream setup time");
    tokio::spawn(delay_line(
        TcpListener::bind(addr(1, 7002)).await?,
        addr(1, 7000),
        delay,
    ));
    write_configs(&dir, &keys, 0, false, "pams", 7002, threads)?;
    let bond = Bond::start(&dir, 0).await?;
    let proxy_pid = bond.procs[0].pid();
    tokio::time::sleep(Duration::from_millis(300)).await;
    // The PS-Path's round trip as the bond sees it: a 1-byte echo through an identical delay
    // line (the kernel's RTT only covers the hop to the local delay line).
    let echo = TcpListener::bind(addr(4, 7000)).await?;
    tokio::spawn(async move {
        while let Ok((mut s, _)) = echo.accept().await {
            tokio::spawn(async move {
                let _ = s.set_nodelay(true);
                let mut b = [0u8; 1];
                while s.read_exact(&mut b).await.is_ok() {
                    if s.write_all(&b).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    tokio::spawn(delay_line(
        TcpListener::bind(addr(4, 7001)).await?,
        addr(4, 7000),
        delay,
    ));
    let mut e = TcpStream::connect(addr(4, 7001)).await?;
    e.set_nodelay(true)?;
    let mut rtts = Vec::new();
    for _ in 0..30 {
        let t = Instant::now();
        e.write_all(&[1]).await?;
        let mut b = [0u8; 1];
        e.read_exact(&mut b).await?;
        rtts.push(t.elapsed().as_secs_f64() * 1e3);
    }
    let mut direct = Vec::new();
    let mut bonded = Vec::new();
    for _ in 0..30 {
        let t = Instant::now();
        let s = TcpStream::connect(origin_addr).await?;
        direct.push(t.elapsed().as_secs_f64() * 1e3);
        drop(s);
        let t = Instant::now();
        let s = socks5_connect(addr(2, 1080), origin_addr).await?;
        bonded.push(t.elapsed().as_secs_f64() * 1e3);
        drop(s);
    }
    let med = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    report.direct_connect_ms = med(&mut direct);
    report.bond_stream_setup_ms = med(&mut bonded);
    report.ps_rtt_ms = med(&mut rtts);
    report.setup_extra_rtts =
        (report.bond_stream_setup_ms - report.direct_connect_ms) / report.ps_rtt_ms.max(1e-3);
    let before = rss_bytes(proxy_pid);
    let mut tasks = Vec::new();
    for _ in 0..active {
        // 10 s of data at 2 Mbit/s each: active, not bulk.
        tasks.push(tokio::spawn(fetch(
            addr(2, 1080),
            origin_addr,
            2_500_000,
            250_000,
        )));
    }
    tokio::time::sleep(Duration::from_secs(4)).await;
    report.active_stream_bytes = (rss_bytes(proxy_pid) - before) / active as f64;
    for t in tasks {
        t.await??;
    }
    drop(bond);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(report)
}

fn table(r: &Report) -> String {
    use std::fmt::Write;
    let mut o = String::new();
    let _ = writeln!(
        o,
        "| run | goodput | vs plain relay | CPU s per GB | bytes per subflow |"
    );
    let _ = writeln!(o, "| --- | --- | --- | --- | --- |");
    for g in &r.goodput {
        let _ = writeln!(
            o,
            "| {} | {:.2} Gbit/s | {:.2} | {:.2} | {} |",
            g.name,
            g.gbit_s,
            g.ratio_to_plain,
            g.cpu_s_per_gb,
            if g.bytes_per_subflow.is_empty() {
                "-".to_string()
            } else {
                g.bytes_per_subflow
                    .iter()
                    .map(|b| format!("{:.0} MB", *b as f64 / 1e6))
                    .collect::<Vec<_>>()
                    .join(" / ")
            }
        );
    }
    let _ = writeln!(o);
    let _ = writeln!(
        o,
        "proxy memory per idle session: {:.1} KiB",
        r.idle_session_bytes / 1024.0
    );
    let _ = writeln!(
        o,
        "proxy memory per active stream: {:.1} KiB",
        r.active_stream_bytes / 1024.0
    );
    let _ = writeln!(
        o,
        "stream setup: {:.2} ms through the bond vs {:.2} ms direct connect; PS-Path RTT {:.2} ms; extra = {:.2} RTT",
        r.bond_stream_setup_ms, r.direct_connect_ms, r.ps_rtt_ms, r.setup_extra_rtts
    );
    o
}
