//! Test harness: real `mpbond` processes (proxy, primary, helpers) on a private loopback
//! network per test (`127.N.0.0/24`), an HTTP origin, a SOCKS5 client, and a TCP relay that
//! can freeze a pipe.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Ipv4Addr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use mpbond_daemon::keys::KeyPair;
use mpbond_daemon::status::NodeStatus;
use sha2::{Digest, Sha256};

/// Deterministic content: byte `i` of stream `seed`.
pub fn content(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut v = Vec::with_capacity(len + 8);
    while v.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.extend_from_slice(&x.to_le_bytes());
    }
    v.truncate(len);
    v
}

/// Hex SHA-256.
pub fn sha(b: &[u8]) -> String {
    Sha256::digest(b)
        .iter()
        .map(|x| format!("{x:02x}"))
        .collect()
}

/// The private network of one test.
#[derive(Clone, Copy, Debug)]
pub struct Net(pub u8);

impl Net {
    pub fn ip(&self, host: u8) -> Ipv4Addr {
        Ipv4Addr::new(127, self.0, 0, host)
    }
    pub fn addr(&self, host: u8, port: u16) -> SocketAddr {
        SocketAddr::new(self.ip(host).into(), port)
    }
}

// ---------------------------------------------------------------------------------------------
// Origin

/// An HTTP/1.1 origin: `GET /bytes/N?seed=S[&rate=BYTES_PER_S]` returns deterministic bytes,
/// `PUT /upload` answers with the SHA-256 of the body.
pub struct Origin {
    pub addr: SocketAddr,
    stop: Arc<AtomicBool>,
}

impl Origin {
    pub fn start(addr: SocketAddr) -> Origin {
        let l = TcpListener::bind(addr).unwrap();
        l.set_nonblocking(true).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let s2 = stop.clone();
        thread::spawn(move || {
            while !s2.load(Ordering::Relaxed) {
                match l.accept() {
                    Ok((s, _)) => {
                        s.set_nonblocking(false).unwrap();
                        thread::spawn(move || {
                            let _ = serve_http(s);
                        });
                    }
                    Err(_) => thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        Origin { addr, stop }
    }
}

impl Drop for Origin {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

fn serve_http(s: TcpStream) -> std::io::Result<()> {
    let mut r = BufReader::new(s.try_clone()?);
    let mut line = String::new();
    r.read_line(&mut line)?;
    let mut parts = line.split_whitespace();
    let method = parts.next().unwrap_or("").to_string();
    let target = parts.next().unwrap_or("").to_string();
    let mut len = 0usize;
    loop {
        let mut h = String::new();
        if r.read_line(&mut h)? == 0 || h == "\r\n" {
            break;
        }
        if let Some(v) = h.to_ascii_lowercase().strip_prefix("content-length:") {
            len = v.trim().parse().unwrap_or(0);
        }
    }
    let mut w = s;
    if method == "PUT" || method == "POST" {
        let mut h = Sha256::new();
        let mut left = len;
        let mut buf = vec![0u8; 1 << 16];
        while left > 0 {
            let n = r.read(&mut buf[..left.min(1 << 16)])?;
            if n == 0 {
                break;
            }
            h.update(&buf[..n]);
            left -= n;
        }
        let d: String = h.finalize().iter().map(|x| format!("{x:02x}")).collect();
        write!(
            w,
            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{d}",
            d.len()
        )?;
        return Ok(());
    }
    let (path, query) = target.split_once('?').unwrap_or((&target, ""));
    let n: usize = path
        .strip_prefix("/bytes/")
        .and_then(|x| x.parse().ok())
        .unwrap_or(0);
    let mut seed = 0u64;
    let mut rate = 0u64;
    for kv in query.split('&') {
        match kv.split_once('=') {
            Some(("seed", v)) => seed = v.parse().unwrap_or(0),
            Some(("rate", v)) => rate = v.parse().unwrap_or(0),
            _ => {}
        }
    }
    let body = content(seed, n);
    write!(
        w,
        "HTTP/1.1 200 OK\r\nContent-Length: {n}\r\nConnection: close\r\n\r\n"
    )?;
    let t0 = Instant::now();
    for (i, chunk) in body.chunks(64 << 10).enumerate() {
        w.write_all(chunk)?;
        if rate > 0 {
            let due = Duration::from_secs_f64(((i + 1) * (64 << 10)) as f64 / rate as f64);
            if let Some(wait) = due.checked_sub(t0.elapsed()) {
                thread::sleep(wait);
            }
        }
    }
    w.flush()?;
    let _ = w.shutdown(Shutdown::Write);
    // Drain until the client closes, so the FIN handshake completes normally.
    let mut sink = [0u8; 1024];
    while matches!(r.read(&mut sink), Ok(n) if n > 0) {}
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Relay

/// A TCP relay in front of a pipe, to stall it.
pub struct Relay {
    pub addr: SocketAddr,
    frozen: Arc<AtomicBool>,
    conns: Arc<Mutex<Vec<TcpStream>>>,
}

impl Relay {
    pub fn start(addr: SocketAddr, target: SocketAddr) -> Relay {
        let l = TcpListener::bind(addr).unwrap();
        let frozen = Arc::new(AtomicBool::new(false));
        let conns = Arc::new(Mutex::new(Vec::new()));
        let (f, c) = (frozen.clone(), conns.clone());
        thread::spawn(move || {
            for s in l.incoming().flatten() {
                let Ok(t) = TcpStream::connect(target) else {
                    continue;
                };
                c.lock().unwrap().push(s.try_clone().unwrap());
                c.lock().unwrap().push(t.try_clone().unwrap());
                for (mut a, mut b) in [(s.try_clone().unwrap(), t.try_clone().unwrap()), (t, s)] {
                    let f = f.clone();
                    thread::spawn(move || {
                        let mut buf = vec![0u8; 1 << 16];
                        loop {
                            while f.load(Ordering::Relaxed) {
                                thread::sleep(Duration::from_millis(10));
                            }
                            match a.read(&mut buf) {
                                Ok(0) | Err(_) => break,
                                Ok(n) => {
                                    while f.load(Ordering::Relaxed) {
                                        thread::sleep(Duration::from_millis(10));
                                    }
                                    if b.write_all(&buf[..n]).is_err() {
                                        break;
                                    }
                                }
                            }
                        }
                        let _ = b.shutdown(Shutdown::Write);
                    });
                }
            }
        });
        Relay {
            addr,
            frozen,
            conns,
        }
    }

    /// Stops forwarding in both directions; the connections stay open (a stalled pipe).
    pub fn freeze(&self) {
        self.frozen.store(true, Ordering::Relaxed);
    }

    /// Resumes forwarding.
    pub fn thaw(&self) {
        self.frozen.store(false, Ordering::Relaxed);
    }

    /// Cuts every connection (a pipe reset).
    pub fn cut(&self) {
        for c in self.conns.lock().unwrap().drain(..) {
            let _ = c.shutdown(Shutdown::Both);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Devices and clusters

/// One mpbond process.
pub struct Device {
    pub name: String,
    pub key: KeyPair,
    pub cfg: PathBuf,
    pub control: SocketAddr,
    pub log: PathBuf,
    role: String,
    child: Option<Child>,
}

impl Device {
    pub fn start(&mut self) {
        let log = std::fs::File::create(&self.log).unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_mpbond"))
            .args([self.role.as_str(), "-c"])
            .arg(&self.cfg)
            // `MPBOND_TEST_LOG=debug cargo test ...` for the daemons' debug logs.
            .env(
                "RUST_LOG",
                std::env::var("MPBOND_TEST_LOG").unwrap_or_else(|_| "info".into()),
            )
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        self.child = Some(child);
    }

    /// SIGKILL, no clean-up.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// SIGSTOP: the process hangs, its kernel still acknowledges what arrives.
    pub fn pause(&self) {
        self.signal("-STOP");
    }

    /// SIGCONT after [`Device::pause`].
    pub fn resume(&self) {
        self.signal("-CONT");
    }

    fn signal(&self, sig: &str) {
        let pid = self.pid().expect("the device runs").to_string();
        let ok = Command::new("kill")
            .args([sig, pid.as_str()])
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "kill {sig} {pid} failed");
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(|c| c.id())
    }

    pub fn status(&self) -> Option<NodeStatus> {
        let body = http_get(self.control, "/status")?;
        serde_json::from_str(&body).ok()
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Device {
    fn drop(&mut self) {
        self.kill();
    }
}

pub fn http_get(addr: SocketAddr, path: &str) -> Option<String> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_millis(500)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(3))).ok()?;
    s.write_all(format!("GET {path} HTTP/1.0\r\n\r\n").as_bytes())
        .ok()?;
    let mut r = String::new();
    s.read_to_string(&mut r).ok()?;
    r.split_once("\r\n\r\n").map(|(_, b)| b.to_string())
}

/// How to build a cluster.
pub struct Spec {
    pub net: u8,
    pub helpers: usize,
    /// Pipes per helper (each binds its own primary address).
    pub pipes: usize,
    /// Put a freezable relay in front of every pipe.
    pub relays: bool,
    pub tuning: &'static str,
    pub proxy_extra: &'static str,
    pub primary_extra: &'static str,
    /// Lines added to every helper's `[helper]` section.
    pub helper_extra: &'static str,
    pub pipe_policy: &'static str,
    /// Leave the primary off the proxy's allowlist.
    pub unknown_primary: bool,
}

impl Default for Spec {
    fn default() -> Self {
        Spec {
            net: 1,
            helpers: 1,
            pipes: 1,
            relays: false,
            tuning: "",
            proxy_extra: "",
            primary_extra: "",
            helper_extra: "",
            pipe_policy: "fastest",
            unknown_primary: false,
        }
    }
}

pub struct Cluster {
    pub net: Net,
    pub dir: PathBuf,
    pub proxy: Device,
    pub primary: Device,
    pub helpers: Vec<Device>,
    pub relays: Vec<Relay>,
    pub origin: Origin,
    pub socks: SocketAddr,
}

pub fn device(dir: &std::path::Path, name: &str, role: &str, control: SocketAddr) -> Device {
    let key = KeyPair::generate();
    let key_path = dir.join(format!("{name}.key"));
    key.save(&key_path).unwrap();
    Device {
        name: name.into(),
        key,
        cfg: dir.join(format!("{name}.toml")),
        control,
        log: dir.join(format!("{name}.log")),
        role: role.into(),
        child: None,
    }
}

impl Cluster {
    /// Writes the configurations and starts everything; waits until every helper joined.
    pub fn start(spec: Spec) -> Cluster {
        let net = Net(spec.net);
        let dir =
            std::env::temp_dir().join(format!("mpbond-it-{}-{}", spec.net, std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let proxy = device(&dir, "proxy", "proxy", net.addr(1, 7070));
        let primary = device(&dir, "phone", "primary", net.addr(2, 7070));
        let mut helpers: Vec<Device> = (0..spec.helpers)
            .map(|k| {
                device(
                    &dir,
                    &format!("helper{}", k + 1),
                    "helper",
                    net.addr(10 + k as u8, 7070),
                )
            })
            .collect();
        let allow = if spec.unknown_primary {
            String::new()
        } else {
            format!("{{ name = \"phone\", key = \"{}\" }}", primary.key.public)
        };
        let tuning = if spec.tuning.is_empty() {
            String::new()
        } else {
            format!("[tuning]\n{}\n", spec.tuning)
        };
        std::fs::write(
            &proxy.cfg,
            format!(
                "key = \"proxy.key\"\n{tuning}[control]\nlisten = \"{}\"\n[proxy]\nlisten = \"{}\"\ndeny_origins = []\nallow = [{allow}]\n{}\n",
                proxy.control,
                net.addr(1, 7000),
                spec.proxy_extra
            ),
        )
        .unwrap();
        let mut relays = Vec::new();
        let mut helper_sections = String::new();
        for (k, h) in helpers.iter_mut().enumerate() {
            let hip = net.ip(10 + k as u8);
            std::fs::write(
                &h.cfg,
                format!(
                    "key = \"{}.key\"\n{tuning}[control]\nlisten = \"{}\"\n[helper]\nlisten = \"{hip}:7100\"\nhs_bind = \"{hip}\"\npipe_policy = \"{}\"\nallow = [{{ name = \"phone\", key = \"{}\" }}]\n{}\n",
                    h.name, h.control, spec.pipe_policy, primary.key.public, spec.helper_extra
                ),
            )
            .unwrap();
            helper_sections.push_str(&format!(
                "[[primary.helper]]\nname = \"{}\"\nkey = \"{}\"\npipe_policy = \"{}\"\n",
                h.name, h.key.public, spec.pipe_policy
            ));
            for p in 0..spec.pipes {
                let target = SocketAddr::new(hip.into(), 7100);
                let addr = if spec.relays {
                    let r = Relay::start(net.addr(100 + (k * 8 + p) as u8, 7200), target);
                    let a = r.addr;
                    relays.push(r);
                    a
                } else {
                    target
                };
                helper_sections.push_str(&format!(
                    "[[primary.helper.pipe]]\nname = \"pipe{p}\"\naddr = \"{addr}\"\nbind = \"{}\"\n",
                    net.ip(2 + 30 * p as u8)
                ));
            }
        }
        let socks = net.addr(2, 1080);
        std::fs::write(
            &primary.cfg,
            format!(
                "key = \"phone.key\"\n{tuning}[control]\nlisten = \"{}\"\n[primary]\nproxy = \"{}\"\nproxy_key = \"{}\"\nps_bind = \"{}\"\nsocks = \"{socks}\"\n{}\n{helper_sections}",
                primary.control,
                net.addr(1, 7000),
                proxy.key.public,
                net.ip(2),
                spec.primary_extra
            ),
        )
        .unwrap();
        let origin = Origin::start(net.addr(200, 8000));
        let mut c = Cluster {
            net,
            dir,
            proxy,
            primary,
            helpers,
            relays,
            origin,
            socks,
        };
        c.proxy.start();
        for h in c.helpers.iter_mut() {
            h.start();
        }
        c.primary.start();
        if !spec.unknown_primary {
            c.wait_subflows(1 + spec.helpers, Duration::from_secs(15));
        }
        c
    }

    /// Subflows of the primary's session (0 when there is none).
    pub fn subflows(&self) -> usize {
        self.primary
            .status()
            .and_then(|s| s.sessions.first().map(|x| x.subflows.len()))
            .unwrap_or(0)
    }

    pub fn wait_subflows(&self, n: usize, limit: Duration) {
        let t0 = Instant::now();
        while self.subflows() != n {
            if t0.elapsed() > limit {
                panic!(
                    "only {} of {n} subflows after {limit:?}\n{}",
                    self.subflows(),
                    self.logs()
                );
            }
            thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.origin.addr)
    }

    /// The tail of every log and every daemon's status, for failure messages.
    pub fn logs(&self) -> String {
        let mut o = String::new();
        for d in [&self.proxy, &self.primary] {
            if let Some(st) = d.status() {
                o.push_str(&format!("---- {} status ----\n{}", d.name, st.table()));
            }
        }
        for d in [&self.proxy, &self.primary]
            .into_iter()
            .chain(self.helpers.iter())
        {
            let t = d.log_text();
            let tail: Vec<&str> = t.lines().rev().take(25).collect();
            o.push_str(&format!("---- {} ----\n", d.name));
            for l in tail.into_iter().rev() {
                o.push_str(l);
                o.push('\n');
            }
        }
        o
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if thread::panicking() {
            eprintln!("{}", self.logs());
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

// ---------------------------------------------------------------------------------------------
// Clients

/// `curl --socks5-hostname` GET; returns the body or curl's error.
pub fn curl_get(socks: SocketAddr, url: &str) -> Result<Vec<u8>, String> {
    let out = Command::new("curl")
        .args([
            "-s",
            "-S",
            "--fail",
            "--max-time",
            "60",
            "--socks5-hostname",
        ])
        .arg(socks.to_string())
        .arg(url)
        .output()
        .map_err(|e| format!("cannot run curl: {e}"))?;
    if out.status.success() {
        Ok(out.stdout)
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

/// `curl -T` PUT of `body`; returns the origin's answer.
pub fn curl_put(
    socks: SocketAddr,
    url: &str,
    body: &[u8],
    dir: &std::path::Path,
) -> Result<String, String> {
    let f = dir.join("upload.bin");
    std::fs::write(&f, body).unwrap();
    let out = Command::new("curl")
        .args([
            "-s",
            "-S",
            "--fail",
            "--max-time",
            "60",
            "--socks5-hostname",
        ])
        .arg(socks.to_string())
        .arg("-T")
        .arg(&f)
        .arg(url)
        .output()
        .map_err(|e| format!("cannot run curl: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

/// The body of a raw HTTP response: what follows the blank line after the headers.
pub fn http_body(response: &[u8]) -> &[u8] {
    let at = response
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("an HTTP response with headers");
    &response[at + 4..]
}

/// A minimal SOCKS5 + HTTP GET client, for many concurrent streams without many processes.
pub fn socks_get(socks: SocketAddr, origin: SocketAddr, path: &str) -> Result<Vec<u8>, String> {
    let e = |x: std::io::Error| x.to_string();
    let mut s = TcpStream::connect(socks).map_err(e)?;
    s.set_read_timeout(Some(Duration::from_secs(60)))
        .map_err(e)?;
    s.write_all(&[5, 1, 0]).map_err(e)?;
    let mut b = [0u8; 2];
    s.read_exact(&mut b).map_err(e)?;
    let SocketAddr::V4(o) = origin else {
        return Err("IPv4 only".into());
    };
    let mut req = vec![5, 1, 0, 1];
    req.extend_from_slice(&o.ip().octets());
    req.extend_from_slice(&o.port().to_be_bytes());
    s.write_all(&req).map_err(e)?;
    let mut rep = [0u8; 10];
    s.read_exact(&mut rep).map_err(e)?;
    if rep[1] != 0 {
        return Err(format!("SOCKS reply {}", rep[1]));
    }
    write!(s, "GET {path} HTTP/1.1\r\nHost: {origin}\r\n\r\n").map_err(e)?;
    let mut r = BufReader::new(s);
    let mut len = 0usize;
    loop {
        let mut h = String::new();
        r.read_line(&mut h).map_err(e)?;
        if h == "\r\n" || h.is_empty() {
            break;
        }
        if let Some(v) = h.to_ascii_lowercase().strip_prefix("content-length:") {
            len = v.trim().parse().unwrap_or(0);
        }
    }
    let mut body = vec![0u8; len];
    r.read_exact(&mut body).map_err(e)?;
    Ok(body)
}
