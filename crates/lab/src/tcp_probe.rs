//! Every TCP sender's window, slow-start threshold and smoothed RTT over a run, from the
//! kernel's `tcp:tcp_probe` tracepoint (with `--packets`: `tcp_probe.csv`).
//!
//! Why: `packets.csv` shows what crossed the links and `counters.csv` how often each device's
//! kernel did something (HyStart exits, timeouts), but neither shows a sender's congestion
//! window as it moved, which is what questions like "did HyStart end this slow start, at
//! what window, and what RTT did it see" turn on (docs/sim.md, "HyStart"). The tracepoint
//! fires whenever a socket of any namespace takes in a segment, with the socket's state
//! before it is processed; one tracefs instance of our own catches every socket of the
//! testbed, on the monotonic clock, without touching the host's global trace buffer.
//!
//! A diagnostic: where tracefs cannot be had (no tracefs in the kernel, no root), the run
//! goes on without it and says so.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crate::topo::addr;

/// Where tracefs lives on current kernels.
const TRACEFS: &str = "/sys/kernel/tracing";
/// The instance's ring buffer per CPU, KiB: the reader drains it every few milliseconds, so
/// this only has to hold a burst (a 1 Gbit/s burst of ACKs for 100 ms is about 8 MiB of
/// events).
const BUFFER_KIB: u32 = 16 * 1024;
/// At most this many events are kept (about 100 bytes each): a 60 s bulk run at 30 Mbit/s
/// makes a few hundred thousand. Memory stays bounded whatever runs.
const MAX_ROWS: usize = 4_000_000;
/// How long the reader sleeps when the pipe is empty.
const POLL: Duration = Duration::from_millis(10);
/// The value `ssthresh` takes before anything set it (`TCP_INFINITE_SSTHRESH`).
const INFINITE_SSTHRESH: u32 = 0x7fff_ffff;
/// What [`TcpProbe::mark_start`] writes into the trace.
const START_MARK: &str = "mpbond-lab-start";

/// One `tcp_probe` event: a segment arrived at a socket.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProbeEvent {
    /// CLOCK_MONOTONIC, nanoseconds (the instance's `mono` trace clock; microsecond
    /// resolution as printed).
    pub mono_ns: u64,
    /// The socket's own address.
    pub local: SocketAddr,
    /// Its peer's.
    pub remote: SocketAddr,
    /// Payload bytes of the arriving segment (0: a pure ACK).
    pub data_len: u32,
    /// Next sequence number to send.
    pub snd_nxt: u32,
    /// Oldest unacknowledged sequence number.
    pub snd_una: u32,
    /// Congestion window, segments.
    pub snd_cwnd: u32,
    /// Slow-start threshold, segments ([`INFINITE_SSTHRESH`] until something set it).
    pub ssthresh: u32,
    /// The peer's advertised window, bytes.
    pub snd_wnd: u32,
    /// Smoothed RTT, microseconds.
    pub srtt_us: u32,
    /// The window this socket advertises, bytes.
    pub rcv_wnd: u32,
}

/// Why a trace line is not an event.
#[derive(Clone, Debug, thiserror::Error, PartialEq, Eq)]
pub enum ParseError {
    /// Another event, a comment or a `[LOST n EVENTS]` line.
    #[error("not a tcp_probe event")]
    NotProbe,
    /// A field is missing or malformed.
    #[error("tcp_probe field {0} missing or malformed")]
    Field(&'static str),
}

/// Parses one line of the trace's text output, e.g.
/// `mpbond-1 [000] ..s2. 21016.335167: tcp_probe: family=AF_INET src=10.1.0.2:7000
/// dest=10.1.0.1:49975 mark=0x0 data_len=0 snd_nxt=0x66b7b151 snd_una=0x66b7b151
/// snd_cwnd=10 ssthresh=2147483647 snd_wnd=65536 srtt=63 rcv_wnd=65483 sock_cookie=1 ...`.
pub fn parse_line(line: &str) -> Result<ProbeEvent, ParseError> {
    let (head, fields) = line
        .split_once(" tcp_probe: ")
        .ok_or(ParseError::NotProbe)?;
    let mono_ns = timestamp_ns(head)?;
    let get = |key: &'static str| -> Result<&str, ParseError> {
        fields
            .split_whitespace()
            .find_map(|kv| kv.strip_prefix(key).and_then(|r| r.strip_prefix('=')))
            .ok_or(ParseError::Field(key))
    };
    let addr = |key: &'static str| -> Result<SocketAddr, ParseError> {
        get(key)?.parse().map_err(|_| ParseError::Field(key))
    };
    let num = |key: &'static str| -> Result<u32, ParseError> {
        let v = get(key)?;
        match v.strip_prefix("0x") {
            Some(hex) => u32::from_str_radix(hex, 16),
            None => v.parse(),
        }
        .map_err(|_| ParseError::Field(key))
    };
    Ok(ProbeEvent {
        mono_ns,
        local: addr("src")?,
        remote: addr("dest")?,
        data_len: num("data_len")?,
        snd_nxt: num("snd_nxt")?,
        snd_una: num("snd_una")?,
        snd_cwnd: num("snd_cwnd")?,
        ssthresh: num("ssthresh")?,
        snd_wnd: num("snd_wnd")?,
        srtt_us: num("srtt")?,
        rcv_wnd: num("rcv_wnd")?,
    })
}

/// The timestamp of a trace line from what precedes the event name: its last token,
/// `seconds.fraction:` (task names, before it, may hold spaces).
fn timestamp_ns(head: &str) -> Result<u64, ParseError> {
    let bad = ParseError::Field("timestamp");
    let ts = head
        .split_whitespace()
        .last()
        .and_then(|t| t.strip_suffix(':'))
        .ok_or(bad.clone())?;
    let (secs, frac) = ts.split_once('.').ok_or(bad.clone())?;
    let secs: u64 = secs.parse().map_err(|_| bad.clone())?;
    if frac.is_empty() || frac.len() > 9 {
        return Err(bad);
    }
    let frac_ns = frac.parse::<u64>().map_err(|_| bad.clone())? * 10u64.pow(9 - frac.len() as u32);
    secs.checked_mul(1_000_000_000)
        .and_then(|n| n.checked_add(frac_ns))
        .ok_or(bad)
}

/// The testbed's name for an address (docs/lab.md, "Testbed"): `proxy-ps` is the proxy's
/// PS-Path address, where primaries and helpers reach it; `helper1-hs` helper 1's HS-Path;
/// `primary-pipe1` and `helper-pipe1` the two ends of pipe 1 (numbered across helpers).
pub fn endpoint_name(ip: IpAddr) -> Option<String> {
    let IpAddr::V4(v4) = ip else {
        return None;
    };
    let fixed = [
        (addr::ORIGIN, "origin"),
        (addr::PROXY_WAN, "proxy-origin"),
        (addr::PS_PRIMARY, "primary-ps"),
        (addr::PS_PROXY, "proxy-ps"),
        (addr::PS2_PRIMARY, "primary-ps2"),
        (addr::PS2_PROXY, "proxy-ps2"),
        (Ipv4Addr::LOCALHOST, "lo"),
    ];
    if let Some((_, n)) = fixed.iter().find(|(a, _)| *a == v4) {
        return Some((*n).to_string());
    }
    let [a, b, c, d] = v4.octets();
    if a != 10 || c != 0 {
        return None;
    }
    match (b, d) {
        (11..=100, 1) => Some(format!("helper{}-hs", b - 10)),
        (11..=100, 2) => Some(format!("proxy-hs{}", b - 10)),
        (101..=200, 1) => Some(format!("primary-pipe{}", b - 100)),
        (101..=200, 2) => Some(format!("helper-pipe{}", b - 100)),
        _ => None,
    }
}

fn endpoint(a: SocketAddr) -> String {
    match endpoint_name(a.ip()) {
        Some(n) => format!("{n}:{}", a.port()),
        None => a.to_string(),
    }
}

/// Writes `events` as CSV, times in seconds from `start_mono_ns` (negative: before the
/// workload started), sequence numbers as bytes from the first `snd_una` seen on each
/// socket (wrapping as TCP's do), `ssthresh` empty while infinite:
/// `t_s,local,remote,data_len,una,nxt,cwnd,ssthresh,srtt_us,snd_wnd,rcv_wnd`.
pub fn write_csv(path: &Path, events: &[ProbeEvent], start_mono_ns: u64) -> io::Result<()> {
    let mut f = io::BufWriter::new(File::create(path)?);
    writeln!(
        f,
        "t_s,local,remote,data_len,una,nxt,cwnd,ssthresh,srtt_us,snd_wnd,rcv_wnd"
    )?;
    let mut base = std::collections::HashMap::new();
    for e in events {
        let b = *base.entry((e.local, e.remote)).or_insert(e.snd_una);
        let t = (e.mono_ns as f64 - start_mono_ns as f64) / 1e9;
        let ssthresh = if e.ssthresh >= INFINITE_SSTHRESH {
            String::new()
        } else {
            e.ssthresh.to_string()
        };
        writeln!(
            f,
            "{t:.6},{},{},{},{},{},{},{ssthresh},{},{},{}",
            endpoint(e.local),
            endpoint(e.remote),
            e.data_len,
            e.snd_una.wrapping_sub(b),
            e.snd_nxt.wrapping_sub(b),
            e.snd_cwnd,
            e.srtt_us,
            e.snd_wnd,
            e.rcv_wnd
        )?;
    }
    f.flush()
}

/// A running capture: a tracefs instance with `tcp:tcp_probe` on and a thread draining it.
pub struct TcpProbe {
    instance: PathBuf,
    stop: Arc<AtomicBool>,
    reader: Option<JoinHandle<io::Result<Capture>>>,
}

/// What the reader collected.
#[derive(Debug, Default)]
pub struct Capture {
    /// The events, in time order.
    pub events: Vec<ProbeEvent>,
    /// When [`TcpProbe::mark_start`] was called, on the events' clock.
    pub start_ns: Option<u64>,
    /// Events the ring buffer overwrote before they were read, or beyond [`MAX_ROWS`].
    pub lost: u64,
}

impl TcpProbe {
    /// Creates the instance (mounting tracefs if it is not), turns the event on and starts
    /// draining it. `tag` goes into the instance's name, for whoever lists the instances.
    pub fn start(tag: &str) -> io::Result<TcpProbe> {
        let root = Path::new(TRACEFS);
        if !root.join("instances").is_dir() {
            let ok = std::process::Command::new("mount")
                .args(["-t", "tracefs", "nodev", TRACEFS])
                .status()
                .map(|s| s.success())
                .unwrap_or(false);
            if !ok || !root.join("instances").is_dir() {
                return Err(io::Error::other(format!(
                    "no tracefs at {TRACEFS} (needs root and a kernel with tracing)"
                )));
            }
        }
        remove_stale(&root.join("instances"));
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let instance = root
            .join("instances")
            .join(format!("mpbond-lab-{}-{n}-{tag}", std::process::id()));
        fs::create_dir(&instance)?;
        let mut probe = TcpProbe {
            instance: instance.clone(),
            stop: Arc::new(AtomicBool::new(false)),
            reader: None,
        };
        // From here on, dropping `probe` removes the instance.
        fs::write(instance.join("trace_clock"), "mono")?;
        fs::write(instance.join("buffer_size_kb"), BUFFER_KIB.to_string())?;
        fs::write(instance.join("events/tcp/tcp_probe/enable"), "1")?;
        let pipe = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(instance.join("trace_pipe"))?;
        let stop = probe.stop.clone();
        probe.reader = Some(
            std::thread::Builder::new()
                .name("tcp-probe".into())
                .spawn(move || drain(pipe, &stop))?,
        );
        Ok(probe)
    }

    /// Marks the workload's start in the trace (a `trace_marker` write, stamped on the
    /// events' own clock, so no clock of ours has to agree with the kernel's).
    pub fn mark_start(&self) -> io::Result<()> {
        fs::write(self.instance.join("trace_marker"), START_MARK)
    }

    /// Turns the event off and returns what was captured.
    pub fn finish(mut self) -> io::Result<Capture> {
        let mut cap = self
            .stop_reader()
            .unwrap_or_else(|| Ok(Capture::default()))?;
        // Each CPU's buffer is in order; the pipe merges them, but sort to be sure.
        cap.events.sort_by_key(|e| e.mono_ns);
        Ok(cap)
    }

    /// Turns the event off and joins the reader, once: what it read, if it was running.
    fn stop_reader(&mut self) -> Option<io::Result<Capture>> {
        let _ = fs::write(self.instance.join("events/tcp/tcp_probe/enable"), "0");
        self.stop.store(true, Ordering::SeqCst);
        let r = self.reader.take()?;
        Some(
            r.join()
                .map_err(|_| io::Error::other("the tcp_probe reader panicked"))
                .and_then(|c| c),
        )
    }
}

impl Drop for TcpProbe {
    fn drop(&mut self) {
        let _ = self.stop_reader();
        // rmdir of a tracefs instance frees its buffers.
        if let Err(e) = fs::remove_dir(&self.instance) {
            tracing::warn!(instance = %self.instance.display(), error = %e,
                "cannot remove the tcp_probe trace instance");
        }
    }
}

/// The process that made a lab trace instance, from its name (`mpbond-lab-<pid>-...`).
fn owner_pid(name: &str) -> Option<u32> {
    name.strip_prefix("mpbond-lab-")?
        .split('-')
        .next()?
        .parse()
        .ok()
}

/// Removes the lab trace instances whose process is gone: a run killed before it could drop
/// its [`TcpProbe`] leaves its instance behind, with its ring buffers held in the kernel
/// (and the lab's test, which checks that a run leaves none, failing).
fn remove_stale(instances: &Path) {
    let Ok(dir) = fs::read_dir(instances) else {
        return;
    };
    for e in dir.filter_map(|e| e.ok()) {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = owner_pid(&name) else {
            continue;
        };
        if Path::new(&format!("/proc/{pid}")).exists() {
            continue;
        }
        let _ = fs::write(e.path().join("events/tcp/tcp_probe/enable"), "0");
        match fs::remove_dir(e.path()) {
            Ok(()) => {
                tracing::info!(instance = %name, "removed a trace instance its run left behind")
            }
            Err(err) => tracing::warn!(instance = %name, error = %err,
                "cannot remove a trace instance its run left behind"),
        }
    }
}

/// Reads the instance's pipe until `stop` is set and the pipe is empty.
fn drain(mut pipe: File, stop: &AtomicBool) -> io::Result<Capture> {
    let mut cap = Capture::default();
    let mut buf = vec![0u8; 1 << 16];
    let mut partial = Vec::new();
    loop {
        match pipe.read(&mut buf) {
            Ok(0) => {
                if stop.load(Ordering::SeqCst) {
                    break;
                }
                std::thread::sleep(POLL);
            }
            Ok(n) => {
                partial.extend_from_slice(&buf[..n]);
                while let Some(end) = partial.iter().position(|&b| b == b'\n') {
                    let line: Vec<u8> = partial.drain(..=end).collect();
                    take_line(&String::from_utf8_lossy(&line), &mut cap);
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                if stop.load(Ordering::SeqCst) {
                    break;
                }
                std::thread::sleep(POLL);
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(cap)
}

fn take_line(line: &str, cap: &mut Capture) {
    match parse_line(line.trim_end()) {
        Ok(e) if cap.events.len() < MAX_ROWS => cap.events.push(e),
        Ok(_) => cap.lost += 1,
        Err(ParseError::NotProbe) if line.contains(START_MARK) => {
            cap.start_ns = line
                .split_once(" tracing_mark_write: ")
                .and_then(|(head, _)| timestamp_ns(head).ok());
        }
        Err(ParseError::NotProbe) => {
            // "CPU:1 [LOST 42 EVENTS]": the ring buffer overwrote them.
            if let Some(n) = line
                .split_once("[LOST ")
                .and_then(|(_, r)| r.split_whitespace().next())
                .and_then(|n| n.parse::<u64>().ok())
            {
                cap.lost += n;
            }
        }
        Err(e) => tracing::debug!(error = %e, line, "skipping a tcp_probe line"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LINE: &str = " tokio-rt-worker-16545 [000] ..s2. 21016.335230: tcp_probe: \
family=AF_INET src=10.1.0.2:7000 dest=10.11.0.1:41793 mark=0x0 data_len=0 \
snd_nxt=0x3c2f73a3 snd_una=0x3c2f738b snd_cwnd=26 ssthresh=2147483647 snd_wnd=65483 \
srtt=55102 rcv_wnd=65536 sock_cookie=2 skbaddr=000000009c76c4ab skaddr=000000004483ad95";

    /// An instance left by a run that died is removed by the next; a live run's, and
    /// anything not the lab's, stays.
    #[test]
    fn stale_instances_of_dead_runs_are_removed() {
        assert_eq!(owner_pid("mpbond-lab-4278-0-single-0-0"), Some(4278));
        assert_eq!(owner_pid("mpbond-lab-start"), None);
        assert_eq!(owner_pid("other-4278-0"), None);
        let dir = std::env::temp_dir().join(format!("mpbond-stale-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        // No process has pid 4 194 304 (the kernel's largest pid is one less).
        let (dead, live, other) = (
            dir.join("mpbond-lab-4194304-0-single-0-0"),
            dir.join(format!("mpbond-lab-{}-0-mpbond-0-0", std::process::id())),
            dir.join("someone-else"),
        );
        for d in [&dead, &live, &other] {
            fs::create_dir_all(d).unwrap();
        }
        remove_stale(&dir);
        assert!(!dead.exists() && live.exists() && other.exists());
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn parses_an_event_line() {
        let e = parse_line(LINE).expect("a tcp_probe line");
        assert_eq!(e.mono_ns, 21_016_335_230_000);
        assert_eq!(e.local, "10.1.0.2:7000".parse().unwrap());
        assert_eq!(e.remote, "10.11.0.1:41793".parse().unwrap());
        assert_eq!(e.snd_nxt - e.snd_una, 0x18);
        assert_eq!(e.snd_cwnd, 26);
        assert_eq!(e.ssthresh, INFINITE_SSTHRESH);
        assert_eq!(e.srtt_us, 55102);
        assert_eq!((e.snd_wnd, e.rcv_wnd, e.data_len), (65483, 65536, 0));
    }

    #[test]
    fn a_task_name_with_spaces_still_finds_the_timestamp() {
        let l = LINE.replace("tokio-rt-worker-16545", "a b c-7");
        assert_eq!(parse_line(&l).map(|e| e.mono_ns), Ok(21_016_335_230_000));
    }

    #[test]
    fn other_lines_are_not_events_and_bad_fields_are_named() {
        assert_eq!(parse_line("# tracer: nop"), Err(ParseError::NotProbe));
        assert_eq!(
            parse_line(&LINE.replace("snd_cwnd=26", "snd_cwnd=x")),
            Err(ParseError::Field("snd_cwnd"))
        );
        assert_eq!(
            parse_line(&LINE.replace("src=10.1.0.2:7000", "src=nowhere")),
            Err(ParseError::Field("src"))
        );
        let mut cap = Capture::default();
        take_line("CPU:1 [LOST 42 EVENTS]", &mut cap);
        take_line(LINE, &mut cap);
        take_line(
            "  mpbond-9 [001] ..... 21016.400000: tracing_mark_write: mpbond-lab-start",
            &mut cap,
        );
        assert_eq!((cap.events.len(), cap.lost), (1, 42));
        assert_eq!(cap.start_ns, Some(21_016_400_000_000));
    }

    #[test]
    fn names_the_testbed_addresses() {
        let n = |s: &str| endpoint_name(s.parse().unwrap());
        assert_eq!(n("10.1.0.2").as_deref(), Some("proxy-ps"));
        assert_eq!(n("10.11.0.1").as_deref(), Some("helper1-hs"));
        assert_eq!(n("10.12.0.2").as_deref(), Some("proxy-hs2"));
        assert_eq!(n("10.102.0.1").as_deref(), Some("primary-pipe2"));
        assert_eq!(n("10.200.0.2").as_deref(), Some("origin"));
        assert_eq!(n("192.168.1.1"), None);
        assert_eq!(n("::1"), None);
    }

    #[test]
    fn the_csv_has_times_from_the_start_and_relative_sequence_numbers() {
        let e = parse_line(LINE).unwrap();
        let later = ProbeEvent {
            mono_ns: e.mono_ns + 50_000_000,
            snd_una: e.snd_una.wrapping_add(2896),
            snd_nxt: e.snd_nxt.wrapping_add(5792),
            ssthresh: 30,
            ..e
        };
        let dir = std::env::temp_dir().join(format!("mpbond-probe-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let path = dir.join("tcp_probe.csv");
        write_csv(&path, &[e, later], e.mono_ns + 10_000_000).unwrap();
        let text = fs::read_to_string(&path).unwrap();
        let _ = fs::remove_dir_all(&dir);
        let rows: Vec<&str> = text.lines().collect();
        assert_eq!(rows.len(), 3, "{text}");
        assert_eq!(
            rows[1],
            "-0.010000,proxy-ps:7000,helper1-hs:41793,0,0,24,26,,55102,65483,65536"
        );
        assert_eq!(
            rows[2],
            "0.040000,proxy-ps:7000,helper1-hs:41793,0,2896,5816,26,30,55102,65483,65536"
        );
    }

    #[test]
    fn captures_a_loopback_connection() {
        // Needs root, as every lab test with namespaces; skips nothing: a machine without
        // tracefs fails here with the reason.
        let probe = TcpProbe::start("test").expect("a tcp_probe capture (needs root)");
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        probe.mark_start().unwrap();
        let port = l.local_addr().unwrap().port();
        let t = std::thread::spawn(move || {
            let (mut s, _) = l.accept().unwrap();
            let mut v = Vec::new();
            s.read_to_end(&mut v).unwrap();
            v.len()
        });
        let mut c = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        c.write_all(&[7u8; 200_000]).unwrap();
        drop(c);
        assert_eq!(t.join().unwrap(), 200_000);
        std::thread::sleep(Duration::from_millis(50));
        let cap = probe.finish().unwrap();
        assert_eq!(cap.lost, 0);
        let start = cap.start_ns.expect("the start mark");
        let events = cap.events;
        // This connection opened after the mark. (Other tests of this binary run in parallel
        // and their loopback connections show in the same capture, some before the mark.)
        let ours = |e: &ProbeEvent| e.remote.port() == port || e.local.port() == port;
        assert!(
            events
                .iter()
                .filter(|e| ours(e))
                .all(|e| e.mono_ns >= start),
            "events of this connection before the mark"
        );
        // The sender's ACKs and the receiver's data both show, each on its own socket.
        assert!(
            events
                .iter()
                .any(|e| e.remote.port() == port && e.data_len == 0),
            "no ACK at the sending socket"
        );
        assert!(
            events
                .iter()
                .any(|e| e.local.port() == port && e.data_len > 0),
            "no data segment at the listening socket"
        );
        assert!(events.windows(2).all(|w| w[0].mono_ns <= w[1].mono_ns));
    }
}
