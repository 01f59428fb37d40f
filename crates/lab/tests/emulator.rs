//! Validation of the link emulator on real namespaces (needs root, as the lab does): the
//! measured rate, delay and loss of an emulated link match its configuration, and a trace
//! replays at its own mean rate.

use std::net::{SocketAddr, UdpSocket};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use mpbond_lab::emu::{LinkReport, PacketEvent};
use mpbond_lab::netns;
use mpbond_lab::topo::{addr, LinkParams, Testbed, TopologySpec};
use mpbond_sim::link::LinkConfig;
use mpbond_sim::rate::{RateProfile, Trace};

/// The tests that measure the emulator's rate, delay and loss hold this while they run, so
/// that on two cores one's flood does not slow another's emulator: the delay test read a
/// median of 51.06 ms for 50 ms while the others ran beside it (once, in a whole
/// `scripts/test`), and passed in 3 runs of its own.
fn one_at_a_time() -> MutexGuard<'static, ()> {
    static SERIAL: Mutex<()> = Mutex::new(());
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn cfg(rate: RateProfile, delay_ms: u64, loss: f64) -> LinkConfig {
    LinkConfig {
        rate,
        delay: Duration::from_millis(delay_ms),
        queue_bytes: 150_000,
        loss,
    }
}

fn testbed(down: LinkConfig) -> Testbed {
    testbed_with(down, "cubic").expect("testbed")
}

fn testbed_with(down: LinkConfig, cc: &str) -> Result<Testbed, netns::NetError> {
    // SAFETY: geteuid has no preconditions.
    #[allow(unsafe_code)]
    let root = unsafe { libc::geteuid() } == 0;
    assert!(
        root,
        "the emulator tests need root (namespaces and TUN devices)"
    );
    match netns::prepare() {
        Ok(netns::Setup::Ready) => {}
        other => panic!("{other:?}"),
    }
    let up = cfg(RateProfile::constant(100e6), 20, 0.0);
    Testbed::build(&TopologySpec {
        ps: LinkParams {
            down,
            up,
            radio_rate: false,
        },
        ps2: None,
        helpers: vec![],
        seed: 7,
        cc: cc.into(),
        phone_rcvbuf: 512 << 10,
    })
}

/// Sends 1500-byte IP packets (1472-byte UDP payloads) from the proxy to the primary at
/// `pps` packets per second for `secs`; returns how many arrived.
fn flood(tb: &Testbed, pps: u64, secs: f64, size: usize) -> u64 {
    let (prox, prim) = (tb.names.proxy.clone(), tb.names.primary.clone());
    let rx = std::thread::spawn(move || {
        netns::enter(&prim).expect("enter");
        let s = UdpSocket::bind((addr::PS_PRIMARY, 9000)).expect("bind");
        s.set_read_timeout(Some(Duration::from_millis(800)))
            .expect("timeout");
        let mut n = 0;
        let mut b = [0u8; 2000];
        while s.recv(&mut b).is_ok() {
            n += 1;
        }
        n
    });
    std::thread::sleep(Duration::from_millis(100));
    std::thread::spawn(move || {
        netns::enter(&prox).expect("enter");
        let s = UdpSocket::bind((addr::PS_PROXY, 0)).expect("bind");
        let to = SocketAddr::from((addr::PS_PRIMARY, 9000));
        let payload = vec![0x42u8; size];
        let start = Instant::now();
        let total = (pps as f64 * secs) as u64;
        for i in 0..total {
            let due = start + Duration::from_secs_f64(i as f64 / pps as f64);
            if let Some(w) = due.checked_duration_since(Instant::now()) {
                std::thread::sleep(w);
            }
            let _ = s.send_to(&payload, to);
        }
    })
    .join()
    .expect("sender");
    rx.join().expect("receiver")
}

/// IP bit rate delivered toward the primary between `from` and `to` seconds of emulator time.
fn delivered_bps(links: &[LinkReport], from: f64, to: f64) -> f64 {
    let ps = links.iter().find(|l| l.name == "ps").expect("ps link");
    let bytes: u64 = ps
        .ba
        .records
        .iter()
        .filter(|r| r.event == PacketEvent::Delivered)
        .filter(|r| (r.t_us as f64) >= from * 1e6 && (r.t_us as f64) < to * 1e6)
        .map(|r| u64::from(r.size))
        .sum();
    bytes as f64 * 8.0 / (to - from)
}

#[test]
fn constant_rate_is_within_3_percent() {
    let _serial = one_at_a_time();
    let mut tb = testbed(cfg(RateProfile::constant(10e6), 20, 0.0));
    let t0 = tb.emu.as_ref().expect("emu").now().as_secs_f64();
    // 1500-byte packets at 1.5x the link rate for 4 s: the link is saturated throughout.
    flood(&tb, 1250, 4.0, 1472);
    let links = tb.emu.take().expect("emu").stop();
    let bps = delivered_bps(&links, t0 + 1.0, t0 + 4.0);
    let err = (bps / 10e6 - 1.0).abs();
    assert!(
        err < 0.03,
        "measured {bps:.0} bit/s for 10 Mbit/s ({:.1}%)",
        err * 100.0
    );
}

#[test]
fn delay_is_within_1ms() {
    let _serial = one_at_a_time();
    let tb = testbed(cfg(RateProfile::constant(50e6), 30, 0.0));
    let (prox, prim) = (tb.names.proxy.clone(), tb.names.primary.clone());
    // A UDP echo in the proxy namespace; 50 small pings from the primary. Up 20 ms + down 30 ms.
    std::thread::spawn(move || {
        netns::enter(&prox).expect("enter");
        let s = UdpSocket::bind((addr::PS_PROXY, 9001)).expect("bind");
        s.set_read_timeout(Some(Duration::from_secs(3)))
            .expect("timeout");
        let mut b = [0u8; 64];
        while let Ok((n, from)) = s.recv_from(&mut b) {
            let _ = s.send_to(&b[..n], from);
        }
    });
    let rtts = std::thread::spawn(move || {
        netns::enter(&prim).expect("enter");
        let s = UdpSocket::bind((addr::PS_PRIMARY, 0)).expect("bind");
        s.set_read_timeout(Some(Duration::from_secs(1)))
            .expect("timeout");
        let mut v = Vec::new();
        std::thread::sleep(Duration::from_millis(200));
        for i in 0..50u8 {
            let t = Instant::now();
            s.send_to(&[i; 32], (addr::PS_PROXY, 9001)).expect("send");
            let mut b = [0u8; 64];
            if s.recv(&mut b).is_ok() {
                v.push(t.elapsed().as_secs_f64() * 1e3);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        v
    })
    .join()
    .expect("pinger");
    assert!(
        rtts.len() >= 48,
        "only {} of 50 echoes came back",
        rtts.len()
    );
    let mut sorted = rtts.clone();
    sorted.sort_by(f64::total_cmp);
    let median = sorted[sorted.len() / 2];
    // Propagation 50 ms plus serialization of two 60-byte packets (negligible at these rates).
    assert!(
        (median - 50.0).abs() < 1.0,
        "median RTT {median:.2} ms for 50 ms: {rtts:?}"
    );
    drop(tb);
}

#[test]
fn loss_matches_the_configured_probability() {
    let _serial = one_at_a_time();
    let tb = testbed(cfg(RateProfile::constant(50e6), 5, 0.05));
    // 4000 small packets well under the rate: only random loss removes any.
    let got = flood(&tb, 2000, 2.0, 100);
    let loss = 1.0 - got as f64 / 4000.0;
    // Binomial sd at p = 0.05, n = 4000 is 0.34%: allow 4 sd.
    assert!(
        (loss - 0.05).abs() < 0.014,
        "loss {:.2}% for 5%",
        loss * 100.0
    );
}

#[test]
fn trace_replays_at_its_mean_rate() {
    let _serial = one_at_a_time();
    // A synthetic trace (the shipped LTE traces are optional inputs): 1 s period, the rate
    // ramping 2 → 14 Mbit/s, one line per 1500-byte opportunity.
    let mut text = String::new();
    // Opportunities up to ms m: the integral of the rate, (2 m + 6 m²/1000) kbit / 12 kbit.
    let upto = |m: u64| (m as f64 * (2.0 + 6.0 * m as f64 / 1000.0) / 12.0) as u64;
    for ms in 1..=1000u64 {
        for _ in upto(ms - 1)..upto(ms) {
            text.push_str(&format!("{ms}\n"));
        }
    }
    let trace = Arc::new(Trace::parse("ramp", &text).expect("trace"));
    let mean = trace.mean_bps();
    let mut tb = testbed(cfg(RateProfile::trace(trace), 10, 0.0));
    let t0 = tb.emu.as_ref().expect("emu").now().as_secs_f64();
    // Saturate at 1.4x the peak rate and measure over three whole periods of the trace,
    // which starts at emulator time 0.
    flood(&tb, 1700, 4.5 - t0, 1472);
    let links = tb.emu.take().expect("emu").stop();
    let bps = delivered_bps(&links, 1.0, 4.0);
    let err = (bps / mean - 1.0).abs();
    assert!(
        err < 0.03,
        "trace mean {mean:.0} bit/s, replayed {bps:.0} ({:.1}%)",
        err * 100.0
    );
}

/// A sysctl's value inside namespace `n`, whitespace collapsed.
fn namespace_sysctl(n: &str, key: &str) -> String {
    let out = std::process::Command::new("ip")
        .args(["netns", "exec", n, "sysctl", "-n", key])
        .output()
        .expect("sysctl");
    let v = String::from_utf8_lossy(&out.stdout);
    v.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The default congestion control inside namespace `n`.
fn namespace_cc(n: &str) -> String {
    namespace_sysctl(n, "net.ipv4.tcp_congestion_control")
}

#[test]
fn phones_and_servers_get_their_own_pinned_receive_buffers() {
    // The host's own tcp_rmem (32 MiB maximum here) must not leak into the testbed.
    let tb = testbed(cfg(RateProfile::constant(10e6), 5, 0.0));
    let rmem = |n: &str| namespace_sysctl(n, "net.ipv4.tcp_rmem");
    assert_eq!(rmem(&tb.names.primary), "4096 524288 6291456");
    assert_eq!(rmem(&tb.names.proxy), "4096 131072 6291456");
    assert_eq!(rmem(&tb.names.origin), "4096 131072 6291456");
}

/// Every namespace forwards, filters no reverse path on any device (the emulator's TUN
/// devices included), keeps no TCP metrics from one connection to the next and has IPv6 off
/// (the settings `crate::netns::sysctl` writes from a thread inside each namespace).
#[test]
fn every_namespace_forwards_without_reverse_path_filters_or_metrics() {
    let tb = testbed(cfg(RateProfile::constant(10e6), 5, 0.0));
    for n in tb.namespaces() {
        assert_eq!(namespace_sysctl(n, "net.ipv4.ip_forward"), "1", "{n}");
        assert_eq!(
            namespace_sysctl(n, "net.ipv4.tcp_no_metrics_save"),
            "1",
            "{n}"
        );
        let out = std::process::Command::new("ip")
            .args([
                "netns",
                "exec",
                n,
                "sysctl",
                "-a",
                "-r",
                "rp_filter|disable_ipv6",
            ])
            .output()
            .expect("sysctl");
        let text = String::from_utf8_lossy(&out.stdout);
        let rp: Vec<&str> = text.lines().filter(|l| l.contains("rp_filter")).collect();
        assert!(rp.len() >= 3, "{n}: all, default and lo at least: {text}");
        assert!(rp.iter().all(|l| l.ends_with("= 0")), "{n}: {text}");
        let v6: Vec<&str> = text
            .lines()
            .filter(|l| l.contains("disable_ipv6"))
            .collect();
        assert!(v6.iter().all(|l| l.ends_with("= 1")), "{n}: {text}");
    }
}

#[test]
fn every_namespace_uses_the_scenarios_congestion_control() {
    // Reno is never a host default, so seeing it proves the testbed set it.
    let tb = testbed_with(cfg(RateProfile::constant(10e6), 5, 0.0), "reno").expect("testbed");
    for n in tb.namespaces() {
        assert_eq!(namespace_cc(n), "reno", "{n}");
    }
    drop(tb);
    let err = testbed_with(cfg(RateProfile::constant(10e6), 5, 0.0), "nosuchcc")
        .err()
        .expect("an unknown congestion control must fail");
    let msg = err.to_string();
    assert!(
        msg.contains("\"nosuchcc\"") && msg.contains("cubic"),
        "the error names the request and what the kernel has: {msg}"
    );
}

#[test]
fn a_congestion_control_the_host_does_not_allow_in_namespaces_is_allowed_first() {
    // A namespace may default only to an algorithm in the host's allowed list (else
    // EPERM); on a host defaulting to BBR that list lacks CUBIC, the lab's default.
    let read = |f: &str| {
        std::fs::read_to_string(format!("/proc/sys/net/ipv4/{f}"))
            .expect(f)
            .trim()
            .to_string()
    };
    let default = read("tcp_congestion_control");
    let available = read("tcp_available_congestion_control");
    let cc = available
        .split_whitespace()
        .find(|a| *a != default && *a != "reno")
        .expect("the kernel has a congestion control besides reno and the default")
        .to_string();
    // Take it out of the allowed list, as on a host that never allowed it.
    let allowed: Vec<String> = read("tcp_allowed_congestion_control")
        .split_whitespace()
        .filter(|a| *a != cc)
        .map(str::to_string)
        .collect();
    std::fs::write(
        "/proc/sys/net/ipv4/tcp_allowed_congestion_control",
        allowed.join(" "),
    )
    .expect("shrink the allowed list");
    let tb = testbed_with(cfg(RateProfile::constant(10e6), 5, 0.0), &cc).expect("testbed");
    for n in tb.namespaces() {
        assert_eq!(namespace_cc(n), cc, "{n}");
    }
    assert!(
        read("tcp_allowed_congestion_control")
            .split_whitespace()
            .any(|a| a == cc),
        "{cc} allowed again"
    );
}
