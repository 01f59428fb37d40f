//! System tests of operating modes and limits: dual mode, caps, bounded memory under a slow
//! reader, transparent interception, pairing through the CLI.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

use common::*;

fn mpbond() -> Command {
    Command::new(env!("CARGO_BIN_EXE_mpbond"))
}

fn tmpdir(tag: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("mpbond-modes-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn wait_for(what: &str, limit: Duration, mut ok: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !ok() {
        assert!(t0.elapsed() < limit, "timed out waiting for {what}");
        thread::sleep(Duration::from_millis(50));
    }
}

fn session_subflows(d: &Device) -> usize {
    d.status()
        .and_then(|s| {
            s.sessions
                .iter()
                .find(|x| x.side == "primary")
                .map(|x| x.subflows.len())
        })
        .unwrap_or(0)
}

/// Two devices, each a primary that uses the other as its helper, in one process each
/// (MPBond §4.4.1), sharing one proxy.
#[test]
fn dual_mode_devices_help_each_other() {
    let net = Net(31);
    let dir = tmpdir("dual");
    let mut proxy = device(&dir, "proxy", "proxy", net.addr(1, 7070));
    let mut a = device(&dir, "a", "run", net.addr(2, 7070));
    let mut b = device(&dir, "b", "run", net.addr(3, 7070));
    std::fs::write(
        &proxy.cfg,
        format!(
            "key = \"proxy.key\"\n[control]\nlisten = \"{}\"\n[proxy]\nlisten = \"{}\"\ndeny_origins = []\nallow = [{{ name = \"a\", key = \"{}\" }}, {{ name = \"b\", key = \"{}\" }}]\n",
            proxy.control,
            net.addr(1, 7000),
            a.key.public,
            b.key.public
        ),
    )
    .unwrap();
    let dual = |me: &Device, other: &Device, my_ip: u8, other_ip: u8| {
        format!(
            "key = \"{me}.key\"\n[control]\nlisten = \"{ctl}\"\n[primary]\nproxy = \"{proxy}\"\nproxy_key = \"{pk}\"\nps_bind = \"{ip}\"\nsocks = \"{ip}:1080\"\nscheduler = \"roundrobin\"\n[[primary.helper]]\nname = \"{other}\"\nkey = \"{ok}\"\n[[primary.helper.pipe]]\nname = \"wifi\"\naddr = \"{oip}:7100\"\nbind = \"{ip}\"\n[helper]\nlisten = \"{ip}:7100\"\nhs_bind = \"{ip}\"\nallow = [{{ name = \"{other}\", key = \"{ok}\" }}]\n",
            me = me.name,
            ctl = me.control,
            proxy = net.addr(1, 7000),
            pk = proxy.key.public,
            ip = net.ip(my_ip),
            other = other.name,
            ok = other.key.public,
            oip = net.ip(other_ip),
        )
    };
    std::fs::write(&a.cfg, dual(&a, &b, 2, 3)).unwrap();
    std::fs::write(&b.cfg, dual(&b, &a, 3, 2)).unwrap();
    std::fs::write(
        &proxy.cfg,
        std::fs::read_to_string(&proxy.cfg)
            .unwrap()
            .replace("\n[proxy]", "\n[proxy]\nscheduler = \"roundrobin\""),
    )
    .unwrap();
    let origin = Origin::start(net.addr(200, 8000));
    proxy.start();
    a.start();
    b.start();
    wait_for(
        "both sessions with a helper",
        Duration::from_secs(15),
        || session_subflows(&a) == 2 && session_subflows(&b) == 2,
    );
    let ta = {
        let s = net.addr(2, 1080);
        let u = format!("http://{}/bytes/8000000?seed=41", origin.addr);
        thread::spawn(move || curl_get(s, &u))
    };
    let got_b = curl_get(
        net.addr(3, 1080),
        &format!("http://{}/bytes/8000000?seed=42", origin.addr),
    )
    .unwrap();
    let got_a = ta.join().unwrap().unwrap();
    assert!(got_a == content(41, 8_000_000) && got_b == content(42, 8_000_000));
    // Each relayed for the other.
    for d in [&a, &b] {
        let st = d.status().unwrap();
        assert_eq!(st.roles, vec!["primary".to_string(), "helper".to_string()]);
        assert!(
            st.relays[0].down_bytes > 0,
            "{} relayed for its friend",
            d.name
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A SOCKS CONNECT that returns the reply code.
fn socks_connect(socks: SocketAddr, to: SocketAddr) -> (TcpStream, u8) {
    let mut s = TcpStream::connect(socks).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s.write_all(&[5, 1, 0]).unwrap();
    let mut b = [0u8; 2];
    s.read_exact(&mut b).unwrap();
    let SocketAddr::V4(o) = to else { panic!() };
    let mut req = vec![5, 1, 0, 1];
    req.extend_from_slice(&o.ip().octets());
    req.extend_from_slice(&o.port().to_be_bytes());
    s.write_all(&req).unwrap();
    let mut rep = [0u8; 10];
    s.read_exact(&mut rep).unwrap();
    (s, rep[1])
}

/// Without early data the primary waits for the proxy, so a refusal is a SOCKS error code.
#[test]
fn stream_cap_is_a_clear_refusal() {
    let c = Cluster::start(Spec {
        net: 32,
        proxy_extra: "max_streams = 2",
        primary_extra: "early_data = false",
        ..Spec::default()
    });
    let (_s1, r1) = socks_connect(c.socks, c.origin.addr);
    let (_s2, r2) = socks_connect(c.socks, c.origin.addr);
    let (_s3, r3) = socks_connect(c.socks, c.origin.addr);
    assert_eq!((r1, r2), (0, 0));
    assert_eq!(
        r3, 1,
        "the third stream is refused with a SOCKS general failure"
    );
    assert!(
        c.primary.log_text().contains("LIMIT_REACHED"),
        "{}",
        c.logs()
    );
}

#[test]
fn session_cap_refuses_a_second_primary_with_a_reason() {
    let net = Net(33);
    let dir = tmpdir("scap");
    let mut proxy = device(&dir, "proxy", "proxy", net.addr(1, 7070));
    let mut p1 = device(&dir, "p1", "primary", net.addr(2, 7070));
    let mut p2 = device(&dir, "p2", "primary", net.addr(3, 7070));
    std::fs::write(
        &proxy.cfg,
        format!(
            "key = \"proxy.key\"\n[control]\nlisten = \"{}\"\n[proxy]\nlisten = \"{}\"\nmax_sessions = 1\ndeny_origins = []\nallow = [{{ name = \"p1\", key = \"{}\" }}, {{ name = \"p2\", key = \"{}\" }}]\n",
            proxy.control,
            net.addr(1, 7000),
            p1.key.public,
            p2.key.public
        ),
    )
    .unwrap();
    for (d, ip) in [(&p1, 2u8), (&p2, 3u8)] {
        std::fs::write(
            &d.cfg,
            format!(
                "key = \"{}.key\"\n[control]\nlisten = \"{}\"\n[primary]\nproxy = \"{}\"\nproxy_key = \"{}\"\nsocks = \"{}\"\n",
                d.name,
                d.control,
                net.addr(1, 7000),
                proxy.key.public,
                net.addr(ip, 1080)
            ),
        )
        .unwrap();
    }
    proxy.start();
    p1.start();
    wait_for("p1's session", Duration::from_secs(10), || {
        session_subflows(&p1) == 1
    });
    p2.start();
    wait_for("p2's refusal", Duration::from_secs(10), || {
        p2.log_text().contains("session limit")
    });
    assert!(proxy.log_text().contains("LIMIT_REACHED"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// With early data (the default) the SOCKS client is answered at once and sends its request
/// without waiting a round trip; a stream the proxy then refuses is reset, not left hanging,
/// and the log says why. Which of three streams the cap of two refuses depends on what reaches
/// the proxy first (a request riding the helper may beat an earlier `STREAM_OPEN` on the
/// PS-Path), so the test asks: exactly one is reset without a byte, the others arrive whole.
#[test]
fn early_data_refusal_is_a_reset_with_the_reason_logged() {
    let c = Cluster::start(Spec {
        net: 36,
        proxy_extra: "max_streams = 2",
        ..Spec::default()
    });
    let mut socks: Vec<TcpStream> = (0..3)
        .map(|_| {
            let (s, r) = socks_connect(c.socks, c.origin.addr);
            assert_eq!(r, 0, "answered before the proxy is asked");
            s
        })
        .collect();
    let n = 300_000;
    let sent: Vec<bool> = socks
        .iter_mut()
        .enumerate()
        .map(|(i, s)| {
            write!(
                s,
                "GET /bytes/{n}?seed={} HTTP/1.1\r\nHost: x\r\n\r\n",
                70 + i
            )
            .is_ok()
        })
        .collect();
    let mut refused = 0;
    for (i, s) in socks.iter_mut().enumerate() {
        let mut got = Vec::new();
        let end = s.read_to_end(&mut got);
        if got.is_empty() {
            // The reset reaches the client as the request's write error (when it came first;
            // the kernel reports it once) or as the read's, never as a clean end.
            assert!(
                !sent[i] || end.is_err(),
                "stream {i}: a refused stream ends with a reset, not a clean EOF"
            );
            refused += 1;
            continue;
        }
        assert!(
            http_body(&got) == content(70 + i as u64, n),
            "stream {i} intact"
        );
    }
    assert_eq!(refused, 1, "{}", c.logs());
    assert!(
        c.primary.log_text().contains("LIMIT_REACHED"),
        "{}",
        c.logs()
    );
}

/// An origin the proxy cannot reach: with early data the client has its SOCKS success, then
/// a reset once the proxy's connect fails, and the primary's log names the reason.
#[test]
fn early_data_to_an_unreachable_origin_is_reset() {
    let c = Cluster::start(Spec {
        net: 37,
        ..Spec::default()
    });
    // A port on the origin's address that nothing listens on.
    let closed = {
        let l = std::net::TcpListener::bind(c.net.addr(9, 0)).unwrap();
        l.local_addr().unwrap()
    };
    let (mut s, r) = socks_connect(c.socks, closed);
    assert_eq!(r, 0);
    let sent = write!(s, "GET / HTTP/1.1\r\nHost: x\r\n\r\n");
    let mut got = Vec::new();
    let end = s.read_to_end(&mut got);
    assert!(got.is_empty() && (sent.is_err() || end.is_err()));
    wait_for("the reason in the log", Duration::from_secs(5), || {
        c.primary.log_text().contains("CONNECT_FAILED")
    });
}

/// A client that stops reading: the bytes held along the way stay bounded by the windows and
/// buffers, and nothing is lost when it reads again.
#[test]
fn slow_reader_keeps_memory_bounded_and_loses_nothing() {
    let c = Cluster::start(Spec {
        net: 34,
        tuning: "stream_buffer = \"1MiB\"\nrecv_window = \"1MiB\"",
        ..Spec::default()
    });
    let n = 100_000_000;
    let (mut s, r) = socks_connect(c.socks, c.origin.addr);
    assert_eq!(r, 0);
    write!(s, "GET /bytes/{n}?seed=51 HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    // Read nothing for two seconds while the origin would happily send 100 MB.
    thread::sleep(Duration::from_secs(2));
    let proxy_st = c.proxy.status().unwrap();
    let primary_st = c.primary.status().unwrap();
    let held_proxy: u64 = proxy_st.sessions[0]
        .subflows
        .iter()
        .map(|f| f.outstanding)
        .sum();
    assert!(
        held_proxy <= 1 << 20,
        "proxy holds {held_proxy} bytes in flight for one stream"
    );
    let rss = |d: &Device| -> u64 {
        let pid = d.pid().unwrap();
        let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
        s.lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
            .unwrap()
            * 1024
    };
    let (rp, rq) = (rss(&c.proxy), rss(&c.primary));
    assert!(
        rp < 64 << 20 && rq < 64 << 20,
        "RSS proxy {rp}, primary {rq}"
    );
    assert_eq!(primary_st.sessions[0].streams, 1);
    // Now read everything.
    let mut r = std::io::BufReader::new(s);
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        let mut b = [0u8; 1];
        r.read_exact(&mut b).unwrap();
        head.push(b[0]);
    }
    let mut body = Vec::with_capacity(n);
    r.read_to_end(&mut body).unwrap();
    assert!(body == content(51, n), "content differs after the pause");
}

#[test]
fn pairing_cards_configure_all_three_devices() {
    let dir = tmpdir("pair");
    for d in ["proxy", "phone", "watch"] {
        let out = mpbond()
            .args(["keygen", "--out"])
            .arg(dir.join(format!("{d}.key")))
            .output()
            .unwrap();
        assert!(out.status.success());
        assert!(String::from_utf8_lossy(&out.stdout).contains("fingerprint"));
    }
    let card = |key: &str, role: &str, addr: Option<&str>| {
        let mut c = mpbond();
        c.args(["pair", "card", "--key"])
            .arg(dir.join(key))
            .args(["--role", role, "--name", role]);
        if let Some(a) = addr {
            c.args(["--addr", a]);
        }
        let out = c.output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    };
    std::fs::write(
        dir.join("proxy.toml"),
        "key = \"proxy.key\"\n[proxy]\nlisten = \"0.0.0.0:7000\"\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("phone.toml"),
        "# the phone\nkey = \"phone.key\"\n[primary]\nproxy = \"x:1\"\nproxy_key = \"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\"\nsocks = \"127.0.0.1:1080\"\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("watch.toml"),
        "key = \"watch.key\"\n[helper]\nlisten = \"0.0.0.0:7100\"\n",
    )
    .unwrap();
    let add = |cfg: &str, card: &str| {
        let out = mpbond()
            .args(["pair", "add", "-c"])
            .arg(dir.join(cfg))
            .arg(card)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let phone_card = card("phone.key", "primary", None);
    assert!(add("proxy.toml", &phone_card).contains("allowed primary"));
    assert!(add("watch.toml", &phone_card).contains("allowed primary"));
    assert!(add(
        "phone.toml",
        &card("watch.key", "helper", Some("192.168.49.2:7100"))
    )
    .contains("added helper"));
    assert!(add(
        "phone.toml",
        &card("proxy.key", "proxy", Some("203.0.113.7:7000"))
    )
    .contains("proxy set"));
    // The results validate, and a tampered card is refused.
    for cfg in ["proxy.toml", "phone.toml", "watch.toml"] {
        mpbond_daemon::config::Config::load(&dir.join(cfg)).unwrap();
    }
    assert!(std::fs::read_to_string(dir.join("phone.toml"))
        .unwrap()
        .starts_with("# the phone"));
    let mut bad = phone_card.clone();
    bad.insert(20, 'x');
    let out = mpbond()
        .args(["pair", "add", "-c"])
        .arg(dir.join("proxy.toml"))
        .arg(&bad)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("checksum"));
    let _ = std::fs::remove_dir_all(&dir);
}

fn nft_tables() -> String {
    Command::new("nft")
        .args(["list", "tables"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default()
}

/// Transparent interception: an unmodified client (curl without any proxy option, running as
/// an unprivileged user) is carried by mpbond; the rules are gone after SIGTERM.
#[test]
fn transparent_mode_intercepts_and_cleans_up() {
    let is_root = Command::new("id")
        .arg("-u")
        .output()
        .map(|o| o.stdout == b"0\n")
        .unwrap_or(false);
    assert!(
        is_root && Path::new("/usr/sbin/nft").exists(),
        "this test needs root and nftables (scripts/setup installs nftables)"
    );
    let c = Cluster::start(Spec {
        net: 35,
        primary_extra:
            "[primary.transparent]\nlisten = \"127.0.0.1:17081\"\nports = [8000]\nuids = [65534]",
        ..Spec::default()
    });
    wait_for("nft rules", Duration::from_secs(5), || {
        nft_tables().contains("mpbond_17081")
    });
    let out = Command::new("setpriv")
        .args([
            "--reuid",
            "65534",
            "--regid",
            "65534",
            "--clear-groups",
            "curl",
            "-s",
            "-S",
            "--fail",
            "--max-time",
            "30",
        ])
        .arg(c.url("/bytes/3000000?seed=61"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stderr),
        c.logs()
    );
    assert!(out.stdout == content(61, 3_000_000));
    let st = c.proxy.status().unwrap();
    let carried: u64 = st.sessions[0]
        .subflows
        .iter()
        .map(|f| f.bytes_scheduled)
        .sum();
    assert!(
        carried >= 3_000_000,
        "it went through the bond: {carried} bytes"
    );
    // SIGTERM removes the rules.
    let pid = c.primary.pid().unwrap();
    Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .unwrap();
    wait_for("rules removed", Duration::from_secs(5), || {
        !nft_tables().contains("mpbond_17081")
    });
}

/// A bad count of RTTs for the simulator's estimators is refused when the arguments are
/// parsed, with the flag and the rule in the message, before any simulation runs.
#[test]
fn sim_refuses_a_bad_count_of_rtts() {
    for (flag, value) in [
        ("--drain-floor", "-1"),
        ("--drain-floor", "nan"),
        ("--loss-hold", "inf"),
    ] {
        let out = mpbond()
            .args(["sim", "--size", "1MB", &format!("{flag}={value}")])
            .output()
            .expect("run mpbond sim");
        assert!(!out.status.success(), "{flag}={value} was accepted");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(flag) && err.contains("RTTs >= 0"),
            "{flag}={value}: {err}"
        );
    }
}

/// A queue guard for the simulator needs its pacing and a factor it can use: a factor below
/// 1 (but 0, off) or a guard without `--pacing` is refused before any simulation runs,
/// with the flag and the rule in the message.
#[test]
fn sim_refuses_a_queue_guard_it_cannot_run() {
    for (args, want) in [
        (vec!["--pacing", "--hs-queue-guard=0.9"], ">= 1"),
        (vec!["--pacing", "--queue-guard=nan"], ">= 1"),
        (vec!["--hs-queue-guard=1.1"], "need --pacing"),
        (vec!["--queue-guard=1.25"], "need --pacing"),
    ] {
        let out = mpbond()
            .args(["sim", "--size", "1MB"])
            .args(&args)
            .output()
            .expect("run mpbond sim");
        assert!(!out.status.success(), "{args:?} was accepted");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("queue-guard") && err.contains(want),
            "{args:?}: {err}"
        );
    }
}

/// `RUST_LOG=mpbond::sched=trace` makes the simulator log every scheduling decision with
/// its simulated time, as the daemons log theirs: the decisions' ranges cover the whole
/// download, in time order, each with the path views it was made from. Without it the
/// simulator logs nothing.
#[test]
fn sim_traces_every_scheduling_decision_when_asked() {
    let run = |log: Option<&str>| {
        let mut c = mpbond();
        c.args([
            "sim", "--ps", "8", "--hs", "10", "--pipe", "5", "--size", "1MB",
        ]);
        match log {
            Some(l) => c.env("RUST_LOG", l),
            None => c.env_remove("RUST_LOG"),
        };
        let out = c.output().expect("run mpbond sim");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let field = |line: &str, name: &str| -> Option<String> {
        let at = line.find(&format!(" {name}="))? + name.len() + 2;
        Some(line[at..].split_whitespace().next()?.to_string())
    };
    let log = run(Some("mpbond::sched=trace"));
    let mut covered: Vec<(u64, u64)> = Vec::new();
    let mut last_t = 0.0;
    for line in log.lines().filter(|l| l.contains(" sent ")) {
        let t: f64 = field(line, "t")
            .and_then(|v| v.parse().ok())
            .expect("a time");
        assert!(t >= last_t, "decisions out of time order: {line}");
        last_t = t;
        let dsn: u64 = field(line, "dsn")
            .and_then(|v| v.parse().ok())
            .expect("a dsn");
        let len: u64 = field(line, "len")
            .and_then(|v| v.parse().ok())
            .expect("a length");
        assert!(
            line.contains("paths=") && line.contains("q="),
            "no path views: {line}"
        );
        covered.push((dsn, dsn + len));
    }
    covered.sort_unstable();
    let mut end = 0;
    for (s, e) in covered {
        assert!(s <= end, "bytes {end}..{s} were never scheduled");
        end = end.max(e);
    }
    assert_eq!(end, 1_000_000, "the decisions cover the download");
    assert!(!run(None).contains(" sent "), "the trace is off by default");
}

/// `mpbond sim ARGS --json`, which must succeed: its result.
fn sim_json(args: &[&str]) -> serde_json::Value {
    let out = mpbond()
        .arg("sim")
        .args(args)
        .arg("--json")
        .output()
        .expect("run mpbond sim");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("json")
}

/// `--hystart` reaches the simulator's TCP model: its slow-start exits are reported per
/// subflow, and without the flag there are none.
#[test]
fn sim_hystart_is_an_option_and_reported() {
    let exits = |extra: &[&str]| -> u64 {
        let v = sim_json(&[&["--size", "2MB", "--pacing"], extra].concat());
        v["subflows"]
            .as_array()
            .expect("subflows")
            .iter()
            .map(|s| s["hystart_exits"].as_u64().expect("hystart_exits"))
            .sum()
    };
    assert_eq!(exits(&[]), 0);
    assert!(exits(&["--hystart"]) > 0);
}

/// A simulated pipe can follow the lab's WLAN profiles (`--trace pipe1=wlan:...`): a fixed
/// distance is its constant goodput (12 m without line of sight: MCS 0, 3.9 Mbit/s), and a
/// misspelt profile is named in the error.
#[test]
fn sim_pipes_follow_the_labs_wlan_profiles() {
    let time = |extra: &[&str]| -> f64 {
        let v = sim_json(&[&["--ps", "8", "--hs", "10", "--size", "4MB"], extra].concat());
        assert_eq!(v["verified"], true, "{v}");
        v["download_time_s"].as_f64().expect("download_time_s")
    };
    let wlan = time(&["--trace", "pipe1=wlan:12m-nlos"]);
    let constant = time(&["--pipe", "3.9"]);
    assert!((wlan / constant - 1.0).abs() < 0.02, "{wlan} vs {constant}");
    assert!(time(&["--pipe", "5"]) < 0.95 * wlan);
    assert!(time(&["--trace", "pipe1=wlan:walk"]) > 0.0);
    let bad = mpbond()
        .args(["sim", "--trace", "pipe1=wlan:moon"])
        .output()
        .expect("run mpbond sim");
    assert!(!bad.status.success());
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(err.contains("WLAN profile wlan:moon"), "{err}");
}
