//! End-to-end tests: real proxy, primary and helper processes on loopback, an HTTP origin, and
//! clients going through SOCKS5. Every transfer is checked by SHA-256.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::thread;
use std::time::{Duration, Instant};

use common::*;

/// Round-robin keeps every subflow busy, so a failure always hits data in flight.
const RR: &str = "scheduler = \"roundrobin\"";

/// Bytes the proxy reinjected in its session (recalls and failed subflows).
fn reinjected(c: &Cluster) -> u64 {
    metric(c.proxy.control, "mpbond_bytes_reinjected_total")
}

/// The metric `name` of a daemon's control endpoint, 0 if absent.
fn metric(control: std::net::SocketAddr, name: &str) -> u64 {
    let m = http_get(control, "/metrics").unwrap_or_default();
    m.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

/// Downloads `n` bytes through the bond and checks them.
fn download(c: &Cluster, n: usize, seed: u64) {
    let got = curl_get(c.socks, &c.url(&format!("/bytes/{n}?seed={seed}")))
        .unwrap_or_else(|e| panic!("download failed: {e}\n{}", c.logs()));
    assert_eq!(got.len(), n, "length");
    assert!(sha(&got) == sha(&content(seed, n)), "content differs");
}

/// Round-robin, so that both helpers carry data in both directions even on unshaped loopback
/// (where PAMS rightly keeps everything on the direct path, whose PAD is always lowest).
#[test]
fn fifty_mb_down_and_twenty_mb_up_through_socks_with_two_helpers() {
    let c = Cluster::start(Spec {
        net: 11,
        helpers: 2,
        proxy_extra: "scheduler = \"roundrobin\"",
        primary_extra: "scheduler = \"roundrobin\"",
        ..Spec::default()
    });
    download(&c, 50_000_000, 1);
    let up = content(2, 20_000_000);
    let digest = curl_put(c.socks, &c.url("/upload"), &up, &c.dir)
        .unwrap_or_else(|e| panic!("upload failed: {e}\n{}", c.logs()));
    assert_eq!(digest, sha(&up));
    // Both directions used the helpers, not only the PS-Path.
    for (end, dev) in [("downlink", &c.proxy), ("uplink", &c.primary)] {
        let st = dev.status().unwrap();
        let s = &st.sessions[0];
        assert_eq!(s.subflows.len(), 3);
        let per: Vec<u64> = s.subflows.iter().map(|f| f.bytes_scheduled).collect();
        assert!(
            per.iter().all(|b| *b > 1_000_000),
            "{end}: every subflow carried data: {per:?}"
        );
    }
}

/// Records and data frames cut to the path's rate (`tuning.segment_time`): with a rate
/// budget of one microsecond every frame is cut to the 2 KiB floor, so a download and an
/// upload travel as thousands of small frames at computed offsets, over both paths, and
/// must still arrive byte for byte.
#[test]
fn data_cut_into_small_frames_arrives_intact() {
    let c = Cluster::start(Spec {
        net: 23,
        helpers: 1,
        tuning: "segment_time = \"1us\"",
        proxy_extra: RR,
        primary_extra: RR,
        ..Spec::default()
    });
    download(&c, 8_000_000, 21);
    let up = content(22, 3_000_000);
    let digest = curl_put(c.socks, &c.url("/upload"), &up, &c.dir)
        .unwrap_or_else(|e| panic!("upload failed: {e}\n{}", c.logs()));
    assert_eq!(digest, sha(&up));
}

#[test]
fn three_helpers_carry_a_download() {
    let c = Cluster::start(Spec {
        net: 12,
        helpers: 3,
        ..Spec::default()
    });
    download(&c, 30_000_000, 3);
    let st = c.proxy.status().unwrap();
    assert_eq!(st.sessions[0].subflows.len(), 4);
}

#[test]
fn hundred_concurrent_streams() {
    let c = Cluster::start(Spec {
        net: 13,
        helpers: 2,
        ..Spec::default()
    });
    let (socks, origin) = (c.socks, c.origin.addr);
    let handles: Vec<_> = (0..100u64)
        .map(|i| {
            thread::spawn(move || {
                let n = 200_000 + (i as usize) * 7919;
                let got = socks_get(socks, origin, &format!("/bytes/{n}?seed={}", 100 + i))?;
                if got == content(100 + i, n) {
                    Ok(())
                } else {
                    Err(format!("stream {i}: content differs"))
                }
            })
        })
        .collect();
    let results: Vec<Result<(), String>> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    let failed: Vec<&String> = results.iter().filter_map(|r| r.as_ref().err()).collect();
    assert!(failed.is_empty(), "{failed:?}\n{}", c.logs());
    // Every stream was cleaned up.
    let t0 = Instant::now();
    while c.proxy.status().unwrap().sessions[0].streams > 0 {
        assert!(t0.elapsed() < Duration::from_secs(10), "streams left open");
        thread::sleep(Duration::from_millis(50));
    }
}

/// Polls `ok` every 50 ms for up to `limit`; whether it held.
fn wait_until(limit: Duration, mut ok: impl FnMut() -> bool) -> bool {
    let t0 = Instant::now();
    while !ok() {
        if t0.elapsed() > limit {
            return false;
        }
        thread::sleep(Duration::from_millis(50));
    }
    true
}

/// Starts a throttled download in the background; returns its thread.
fn slow_download(
    c: &Cluster,
    n: usize,
    seed: u64,
    rate: u64,
) -> thread::JoinHandle<Result<Vec<u8>, String>> {
    let socks = c.socks;
    let url = c.url(&format!("/bytes/{n}?seed={seed}&rate={rate}"));
    thread::spawn(move || curl_get(socks, &url))
}

#[test]
fn helper_killed_mid_transfer_then_restarted_and_rejoined() {
    let mut c = Cluster::start(Spec {
        net: 14,
        helpers: 2,
        relays: true,
        proxy_extra: RR,
        primary_extra: RR,
        ..Spec::default()
    });
    let n = 40_000_000;
    let t = slow_download(&c, n, 4, 16_000_000);
    thread::sleep(Duration::from_millis(600));
    // Hold the pipe for a moment (shorter than the stall timeout) so the helper is sure to
    // have data in flight when it dies.
    c.relays[0].freeze();
    thread::sleep(Duration::from_millis(300));
    c.helpers[0].kill();
    c.relays[0].thaw();
    let got = t
        .join()
        .unwrap()
        .unwrap_or_else(|e| panic!("{e}\n{}", c.logs()));
    assert!(
        got == content(4, n),
        "content differs after the helper died"
    );
    c.wait_subflows(2, Duration::from_secs(5));
    assert!(reinjected(&c) > 0, "the dead helper's data was reinjected");
    // It comes back and carries traffic again.
    c.helpers[0].start();
    c.wait_subflows(3, Duration::from_secs(15));
    download(&c, 20_000_000, 5);
    let st = c.proxy.status().unwrap();
    let per = st.sessions[0]
        .subflows
        .iter()
        .filter(|f| f.kind == "helper")
        .map(|f| f.bytes_scheduled)
        .collect::<Vec<_>>();
    assert!(
        per.len() == 2 && per.iter().all(|b| *b > 0),
        "both helpers carry data: {per:?}"
    );
}

#[test]
fn stalled_pipe_is_torn_down_and_its_data_reinjected() {
    let c = Cluster::start(Spec {
        net: 15,
        helpers: 1,
        relays: true,
        tuning: "stall_timeout = \"1s\"",
        proxy_extra: RR,
        primary_extra: RR,
        ..Spec::default()
    });
    let n = 30_000_000;
    let t = slow_download(&c, n, 6, 12_000_000);
    thread::sleep(Duration::from_millis(700));
    c.relays[0].freeze();
    let t0 = Instant::now();
    let got = t
        .join()
        .unwrap()
        .unwrap_or_else(|e| panic!("{e}\n{}", c.logs()));
    assert!(
        got == content(6, n),
        "content differs after the pipe stalled"
    );
    // The stall was detected within the timeout plus detection granularity.
    assert!(c.subflows() == 1, "the stalled helper subflow is gone");
    let log = c.primary.log_text() + &c.proxy.log_text() + &c.helpers[0].log_text();
    assert!(log.contains("stalled"), "{}", c.logs());
    assert!(reinjected(&c) > 0, "the stalled pipe's data was reinjected");
    assert!(t0.elapsed() < Duration::from_secs(30));
}

/// A helper that hangs mid-download (its kernel still acknowledges on both its links), with
/// stalled links torn down at once (`dead_timeout = "0s"`, MPBond §4.1): the proxy, whose
/// data waits on the HS-Path, hears nothing from it and drops the subflow; the primary,
/// which sends nothing on a downlink pipe and lets an idle pipe go quiet, learns it from the
/// proxy within seconds rather than after a quiet link's 75 s. Once the helper wakes, it
/// joins again and carries data.
#[test]
fn hung_helper_is_dropped_at_both_ends_and_rejoins_when_it_wakes() {
    let c = Cluster::start(Spec {
        net: 39,
        helpers: 1,
        tuning: "stall_timeout = \"1s\"\ndead_timeout = \"0s\"",
        proxy_extra: RR,
        primary_extra: RR,
        ..Spec::default()
    });
    let n = 30_000_000;
    let t = slow_download(&c, n, 10, 12_000_000);
    thread::sleep(Duration::from_millis(700));
    c.helpers[0].pause();
    let got = t.join().unwrap();
    // Still hung: the helper itself can tell nobody anything.
    let dropped = wait_until(Duration::from_secs(5), || c.subflows() == 1);
    c.helpers[0].resume();
    let got = got.unwrap_or_else(|e| panic!("{e}\n{}", c.logs()));
    assert!(
        got == content(10, n),
        "content differs after the helper hung"
    );
    assert!(reinjected(&c) > 0, "the hung helper's data was reinjected");
    assert!(
        dropped,
        "the primary kept the hung helper's subflow\n{}",
        c.logs()
    );
    c.wait_subflows(2, Duration::from_secs(15));
    download(&c, 20_000_000, 11);
    let st = c.proxy.status().unwrap();
    let helper = st.sessions[0]
        .subflows
        .iter()
        .find(|f| f.kind == "helper")
        .map(|f| f.bytes_scheduled);
    assert!(
        helper.is_some_and(|b| b > 0),
        "the helper carries data again: {helper:?}"
    );
}

/// The same hang with the default liveness (`crate::liveness`): the HS-Path goes stale, its
/// data is sent again over the PS-Path and the download arrives intact, but the subflow and
/// its connection stay; when the helper wakes within the dead timeout it carries data again
/// on that same subflow, with no rejoin.
#[test]
fn hung_helper_goes_stale_and_carries_data_again_when_it_wakes() {
    let c = Cluster::start(Spec {
        net: 41,
        helpers: 1,
        tuning: "stall_timeout = \"1s\"\ndead_timeout = \"30s\"",
        proxy_extra: RR,
        primary_extra: RR,
        ..Spec::default()
    });
    let n = 30_000_000;
    let t = slow_download(&c, n, 12, 12_000_000);
    thread::sleep(Duration::from_millis(700));
    c.helpers[0].pause();
    // Whether the proxy's status shows a stale link (None while it does not answer).
    let any_stale = |c: &Cluster| {
        c.proxy.status().map(|st| {
            st.sessions
                .iter()
                .flat_map(|s| &s.subflows)
                .flat_map(|f| &f.links)
                .any(|l| l.stale)
        })
    };
    // The proxy's status shows the helper's link stale while it hangs.
    let shown = wait_until(Duration::from_secs(5), || any_stale(&c) == Some(true));
    let got = t.join().unwrap();
    c.helpers[0].resume();
    assert!(shown, "no stale link in the proxy's status\n{}", c.logs());
    let got = got.unwrap_or_else(|e| panic!("{e}\n{}", c.logs()));
    assert!(
        got == content(12, n),
        "content differs after the helper hung"
    );
    assert!(reinjected(&c) > 0, "the hung helper's data was reinjected");
    assert!(
        metric(c.proxy.control, "mpbond_links_stale_total") >= 1,
        "no link went stale\n{}",
        c.logs()
    );
    assert_eq!(metric(c.proxy.control, "mpbond_links_failed_total"), 0);
    assert_eq!(c.subflows(), 2, "the subflow was dropped\n{}", c.logs());
    let before = |c: &Cluster| {
        c.proxy.status().unwrap().sessions[0]
            .subflows
            .iter()
            .find(|f| f.kind == "helper")
            .map(|f| (f.id, f.bytes_scheduled))
    };
    // A download over loopback takes a fraction of a second: start it once the woken
    // helper's link has made progress and is no longer stale, or it may be over before the
    // proxy schedules on that link again.
    let recovered = wait_until(Duration::from_secs(10), || any_stale(&c) == Some(false));
    assert!(
        recovered,
        "the woken helper's link stays stale\n{}",
        c.logs()
    );
    let (id, sent) = before(&c).expect("the helper's subflow");
    download(&c, 20_000_000, 13);
    let (id2, sent2) = before(&c).expect("the helper's subflow");
    assert_eq!(id, id2, "the same subflow, no rejoin");
    assert!(
        sent2 > sent,
        "the helper carries data again: {sent} then {sent2}"
    );
}

#[test]
fn pipe_reset_keeps_the_stream_when_the_helper_has_another_pipe() {
    let c = Cluster::start(Spec {
        net: 16,
        helpers: 1,
        pipes: 2,
        relays: true,
        pipe_policy: "all",
        proxy_extra: RR,
        primary_extra: RR,
        ..Spec::default()
    });
    let n = 30_000_000;
    let t = slow_download(&c, n, 7, 12_000_000);
    thread::sleep(Duration::from_millis(700));
    c.relays[0].cut();
    let got = t
        .join()
        .unwrap()
        .unwrap_or_else(|e| panic!("{e}\n{}", c.logs()));
    assert!(got == content(7, n), "content differs after a pipe reset");
    assert_eq!(
        c.subflows(),
        2,
        "the helper subflow survived on its other pipe"
    );
}

#[test]
fn unknown_primary_is_refused_with_a_clear_reason() {
    let c = Cluster::start(Spec {
        net: 17,
        unknown_primary: true,
        ..Spec::default()
    });
    thread::sleep(Duration::from_millis(1500));
    let r = curl_get(c.socks, &c.url("/bytes/1000?seed=1"));
    assert!(r.is_err(), "an unknown primary must not get through");
    assert!(c.proxy.log_text().contains("allowlist"), "{}", c.logs());
    assert!(c.primary.log_text().contains("allowlist"), "{}", c.logs());
}

#[test]
fn forged_and_replayed_joins_are_refused() {
    use mpbond_daemon::keys::KeyPair;
    use mpbond_daemon::link::{self, Security};
    use mpbond_daemon::ticket::Ticket;
    use mpbond_proto::{Frame, Reason, SessionId};
    use std::time::SystemTime;

    let c = Cluster::start(Spec {
        net: 18,
        ..Spec::default()
    });
    let session = u64::from_str_radix(&c.proxy.status().unwrap().sessions[0].id, 16).unwrap();
    let primary_key = KeyPair::load(&c.dir.join("phone.key")).unwrap();
    let proxy_addr = c.net.addr(1, 7000);
    let proxy_pub = c.proxy.key.public;
    let rt = tokio::runtime::Runtime::new().unwrap();
    let join = |me: KeyPair, ticket: Vec<u8>| {
        rt.block_on(async {
            let s = tokio::net::TcpStream::connect(proxy_addr).await.unwrap();
            let mut l = link::connect(s, &me, &proxy_pub, Security::Noise)
                .await
                .unwrap();
            l.writer
                .push_frame(&Frame::MpJoin {
                    ver_min: 1,
                    ver_max: 1,
                    session: SessionId(session),
                    ticket: ticket.into(),
                })
                .unwrap();
            l.writer.flush().await.unwrap();
            let mut v = Vec::new();
            l.reader.read_frames(&mut v).await.unwrap();
            v.remove(0)
        })
    };
    let intruder = KeyPair::generate();
    // Forged: signed by the intruder's own key, claiming to come from the primary.
    let mut forged = Ticket::issue(
        &intruder,
        proxy_pub,
        &proxy_addr.to_string(),
        intruder.public,
        session,
        SystemTime::now(),
    )
    .unwrap();
    let at = 1 + 32 + 1 + proxy_addr.to_string().len();
    forged[at..at + 32].copy_from_slice(&primary_key.public.0);
    match join(intruder.clone(), forged) {
        Frame::Close { code, reason } => {
            assert_eq!(code, Reason::UNAUTHORIZED);
            assert!(reason.contains("forged"), "{reason}");
        }
        other => panic!("forged join accepted: {other:?}"),
    }
    // A genuine ticket works once, and its replay is refused.
    let helper = KeyPair::generate();
    let t = Ticket::issue(
        &primary_key,
        proxy_pub,
        &proxy_addr.to_string(),
        helper.public,
        session,
        SystemTime::now(),
    )
    .unwrap();
    assert!(matches!(
        join(helper.clone(), t.clone()),
        Frame::MpJoinOk { .. }
    ));
    match join(helper.clone(), t.clone()) {
        Frame::Close { code, reason } => {
            assert_eq!(code, Reason::UNAUTHORIZED);
            assert!(reason.contains("replay"), "{reason}");
        }
        other => panic!("replayed join accepted: {other:?}"),
    }
    // A genuine ticket presented by another device is refused.
    let t2 = Ticket::issue(
        &primary_key,
        proxy_pub,
        &proxy_addr.to_string(),
        helper.public,
        session,
        SystemTime::now(),
    )
    .unwrap();
    match join(intruder, t2) {
        Frame::Close { reason, .. } => assert!(reason.contains("different helper"), "{reason}"),
        other => panic!("borrowed ticket accepted: {other:?}"),
    }
    // The session is unharmed.
    download(&c, 5_000_000, 8);
}

#[test]
fn random_bytes_on_every_listening_port_do_not_hurt() {
    let c = Cluster::start(Spec {
        net: 19,
        helpers: 1,
        ..Spec::default()
    });
    let ports = [
        c.net.addr(1, 7000),  // proxy
        c.net.addr(10, 7100), // helper pipes
        c.socks,              // SOCKS5
        c.proxy.control,
        c.primary.control,
        c.helpers[0].control,
    ];
    let mut x = 0x1234_5678_9abc_def1u64;
    for round in 0..20 {
        for &p in &ports {
            let Ok(mut s) = TcpStream::connect(p) else {
                continue;
            };
            let n = [1usize, 2, 3, 40, 100, 1500, 70_000][round % 7];
            let junk: Vec<u8> = (0..n)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x as u8
                })
                .collect();
            let _ = s.write_all(&junk);
            let _ = s.set_read_timeout(Some(Duration::from_millis(50)));
            let mut sink = [0u8; 256];
            let _ = s.read(&mut sink);
        }
    }
    // Everything still serves.
    assert_eq!(c.subflows(), 2);
    download(&c, 10_000_000, 9);
    assert!(c.proxy.status().is_some() && c.helpers[0].status().is_some());
}

#[test]
fn proxy_restart_ends_streams_with_an_error_and_service_resumes() {
    let mut c = Cluster::start(Spec {
        net: 20,
        helpers: 1,
        ..Spec::default()
    });
    let t = slow_download(&c, 40_000_000, 10, 10_000_000);
    thread::sleep(Duration::from_millis(800));
    c.proxy.kill();
    let r = t.join().unwrap();
    assert!(
        r.is_err(),
        "a stream cut by a proxy restart must fail, not end short"
    );
    c.proxy.start();
    c.wait_subflows(2, Duration::from_secs(20));
    download(&c, 5_000_000, 11);
}

/// The radios each device declares (`RADIOS`) reach both schedulers: the proxy's status
/// shows the PS-Path's and the helper's (the latter sent over the HS-Path), the primary's its
/// own and the helper's (sent over the pipe). With the energy-aware admission on and no value
/// on time, a download still arrives whole.
#[test]
fn declared_radios_reach_both_schedulers_and_an_eco_download_arrives_intact() {
    let c = Cluster::start(Spec {
        net: 24,
        helpers: 1,
        tuning: "time_value = 0.0",
        primary_extra: "wan_radio = \"lte\"",
        helper_extra: "wan_radio = \"lte\"\npipe_radio = \"wifi\"",
        ..Spec::default()
    });
    download(&c, 4_000_000, 31);
    for (end, dev) in [("proxy", &c.proxy), ("primary", &c.primary)] {
        let st = dev.status().unwrap();
        let mut radios: Vec<(String, Option<String>)> = st.sessions[0]
            .subflows
            .iter()
            .map(|f| (f.kind.clone(), f.radios.clone()))
            .collect();
        radios.sort();
        assert_eq!(
            radios,
            [
                ("direct".to_string(), Some("lte".to_string())),
                ("helper".to_string(), Some("lte+wifi".to_string()))
            ],
            "{end}\n{}",
            c.logs()
        );
    }
}

#[test]
fn status_and_metrics_describe_the_bond() {
    let c = Cluster::start(Spec {
        net: 21,
        helpers: 1,
        // Reno is built into every kernel: the HS-Path's own congestion control shows.
        tuning: "hs_congestion = \"reno\"",
        ..Spec::default()
    });
    download(&c, 2_000_000, 12);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_mpbond"))
        .args(["status", "--control"])
        .arg(c.primary.control.to_string())
        .output()
        .unwrap();
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        table.contains("primary side") && table.contains("helper1"),
        "{table}"
    );
    let json = std::process::Command::new(env!("CARGO_BIN_EXE_mpbond"))
        .args(["status", "--json", "--control"])
        .arg(c.proxy.control.to_string())
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    let subflows = v["sessions"][0]["subflows"].as_array().unwrap();
    assert_eq!(subflows.len(), 2);
    // `tuning.hs_congestion` on the proxy's HS-Path alone.
    let cc = |kind: &str| {
        let sf = subflows.iter().find(|s| s["kind"] == kind).unwrap();
        sf["links"][0]["congestion"]
            .as_str()
            .unwrap_or("")
            .to_string()
    };
    assert_eq!(cc("helper"), "reno", "{v}");
    let direct = cc("direct");
    assert!(!direct.is_empty() && direct != "reno", "{v}");
    let m = http_get(c.proxy.control, "/metrics").unwrap();
    assert!(m.contains("mpbond_sessions_active 1"), "{m}");
    assert!(m.contains("mpbond_subflow_throughput_bps{"), "{m}");
    assert!(
        m.contains("# TYPE mpbond_queue_guard_caps_total counter"),
        "{m}"
    );
}

/// A helper's pipe minimum RTT (`PIPE_MIN_RTT`) reaches the proxy's scheduler with its
/// downlink reports and the primary's with its uplink ones; with `tuning.pipe_min_rtt` off
/// (a helper that predates the frame) neither has one and the download still arrives whole.
#[test]
fn the_pipes_minimum_rtt_reaches_both_schedulers_unless_turned_off() {
    let min_rtt = |c: &Cluster| -> Vec<Option<f64>> {
        [&c.proxy, &c.primary]
            .iter()
            .map(|d| {
                let pipe = helper_pipe(d)?;
                pipe.min_rtt_ms.inspect(|&m| assert!(m > 0.0, "{pipe:?}"))
            })
            .collect()
    };
    let c = Cluster::start(Spec {
        net: 25,
        helpers: 1,
        ..Spec::default()
    });
    download(&c, 4_000_000, 41);
    let got = min_rtt(&c);
    assert!(got.iter().all(Option::is_some), "{got:?}\n{}", c.logs());
    drop(c);
    let c = Cluster::start(Spec {
        net: 26,
        helpers: 1,
        tuning: "pipe_min_rtt = false",
        ..Spec::default()
    });
    download(&c, 4_000_000, 42);
    let got = min_rtt(&c);
    assert_eq!(got, [None, None], "{}", c.logs());
}

/// 0-RTT stream open at the proxy, driven frame by frame: a stream's request and FIN arrive
/// before its `STREAM_OPEN` (as when the open rides the PS-Path and the data a faster
/// subflow). The proxy keeps them, connects once the open comes, and the response arrives
/// whole. Data of a stream whose open never comes is reset with a timeout, not kept.
#[test]
fn data_before_stream_open_is_kept_until_the_open_arrives() {
    use mpbond_daemon::keys::KeyPair;
    use mpbond_daemon::link::{self, Security};
    use mpbond_proto::{Destination, Frame, Host, Reason, StreamId};
    use std::collections::BTreeMap;

    let c = Cluster::start(Spec {
        net: 22,
        tuning: "connect_timeout = \"1s\"",
        ..Spec::default()
    });
    let me = KeyPair::load(&c.dir.join("phone.key")).unwrap();
    let (proxy_addr, proxy_pub) = (c.net.addr(1, 7000), c.proxy.key.public);
    let std::net::SocketAddr::V4(origin) = c.origin.addr else {
        panic!("IPv4 origin")
    };
    let n = 200_000;
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (body, reset) = rt.block_on(async {
        let s = tokio::net::TcpStream::connect(proxy_addr).await.unwrap();
        let mut l = link::connect(s, &me, &proxy_pub, Security::Noise)
            .await
            .unwrap();
        l.writer
            .push_frame(&Frame::MpCapable {
                ver_min: 1,
                ver_max: 1,
                ticket: Vec::new().into(),
            })
            .unwrap();
        l.writer.flush().await.unwrap();
        let mut got = Vec::new();
        l.reader.read_frames(&mut got).await.unwrap();
        assert!(matches!(got[0], Frame::MpOk { .. }), "{:?}", got[0]);
        let get = format!("GET /bytes/{n}?seed=71 HTTP/1.0\r\nHost: x\r\n\r\n");
        let (s1, s5) = (StreamId(1), StreamId(5));
        for f in [
            Frame::StreamData {
                stream: s1,
                dsn: 0,
                payload: get.clone().into_bytes().into(),
            },
            Frame::StreamFin {
                stream: s1,
                final_size: get.len() as u64,
            },
            // Stream 5 never gets its STREAM_OPEN.
            Frame::StreamData {
                stream: s5,
                dsn: 0,
                payload: b"orphan".to_vec().into(),
            },
            Frame::StreamOpen {
                stream: s1,
                dest: Destination {
                    host: Host::V4(*origin.ip()),
                    port: origin.port(),
                },
            },
        ] {
            l.writer.push_frame(&f).unwrap();
        }
        l.writer.flush().await.unwrap();
        let mut parts = BTreeMap::new();
        let (mut fin, mut reset5) = (None, None);
        let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
        while fin.is_none() || reset5.is_none() {
            let mut v = Vec::new();
            tokio::time::timeout_at(deadline, l.reader.read_frames(&mut v))
                .await
                .expect("the proxy answers stream 1 and resets stream 5 in time")
                .unwrap();
            for f in v {
                match f {
                    Frame::StreamData {
                        stream,
                        dsn,
                        payload,
                    } if stream == s1 => {
                        parts.insert(dsn, payload);
                    }
                    Frame::StreamFin { stream, final_size } if stream == s1 => {
                        fin = Some(final_size)
                    }
                    Frame::StreamRst { stream, reason } if stream == s1 => {
                        panic!("stream 1 reset: {reason}")
                    }
                    Frame::StreamRst { stream, reason } if stream == s5 => reset5 = Some(reason),
                    _ => {}
                }
            }
        }
        let mut whole = Vec::new();
        for (dsn, p) in parts {
            if dsn as usize == whole.len() {
                whole.extend_from_slice(&p);
            }
        }
        assert_eq!(Some(whole.len() as u64), fin, "every byte up to the FIN");
        (whole, reset5)
    });
    assert!(
        sha(http_body(&body)) == sha(&content(71, n)),
        "content differs"
    );
    assert_eq!(reset, Some(Reason::TIMEOUT), "{}", c.logs());
}

/// The proxy's newest report about the helper's pipe, how old it is in ms.
fn pipe_report_age_ms(c: &Cluster) -> Option<f64> {
    helper_pipe(&c.proxy).map(|p| p.age_ms)
}

/// What a device's scheduler knows of the helper's second hop, from its status: at the
/// proxy the pipe, at the primary the helper's HS-Path.
fn helper_pipe(d: &Device) -> Option<mpbond_daemon::status::PipeStatus> {
    d.status()?
        .sessions
        .first()?
        .subflows
        .iter()
        .find(|f| f.kind == "helper")?
        .pipe
        .clone()
}

/// A helper reports on its pipe every feedback interval while it relays data, and goes
/// quiet once idle: before `mpbond_core::feedback`, its unchanged reports went out every
/// 20 ms for as long as the session lived, forwarded by the primary over its PS-Path, and
/// kept both phones' radios from ever sleeping (docs/evaluation.md, item 32). Loose bounds,
/// for a loaded machine: a report within 200 ms at some point of the download, and in 4 s
/// of idleness a second without one.
#[test]
fn an_idle_helper_stops_reporting_until_it_relays_again() {
    let c = Cluster::start(Spec {
        net: 38,
        helpers: 1,
        proxy_extra: RR,
        primary_extra: RR,
        ..Spec::default()
    });
    let n = 6_000_000;
    let t = slow_download(&c, n, 6, 3_000_000);
    let mut freshest = f64::INFINITY;
    while !t.is_finished() {
        if let Some(age) = pipe_report_age_ms(&c) {
            freshest = freshest.min(age);
        }
        thread::sleep(Duration::from_millis(50));
    }
    let got = t
        .join()
        .unwrap()
        .unwrap_or_else(|e| panic!("{e}\n{}", c.logs()));
    assert!(got == content(6, n), "content differs");
    assert!(
        freshest < 200.0,
        "no fresh report while the helper relayed: {freshest} ms"
    );
    // Idle for 4 s: a few reports of news as the pipe settles (its buffer drained, its RTT
    // back to the minimum), then silence, so the newest report grows old. At one report
    // every 20 ms it would never be more than a few tens of milliseconds old.
    let mut oldest: f64 = 0.0;
    for _ in 0..40 {
        thread::sleep(Duration::from_millis(100));
        let age = pipe_report_age_ms(&c).expect("the proxy has a report");
        oldest = oldest.max(age);
    }
    assert!(
        oldest > 1000.0,
        "the idle helper kept reporting: its report was never older than {oldest} ms in 4 s\n{}",
        c.logs()
    );
    // Data again: the helper relays its share, and its reports come back within a few
    // feedback intervals.
    let scheduled = |c: &Cluster| {
        c.proxy.status().and_then(|st| {
            let s = st.sessions.first()?;
            s.subflows
                .iter()
                .find(|f| f.kind == "helper")
                .map(|f| f.bytes_scheduled)
        })
    };
    let before = scheduled(&c).expect("the proxy has a helper subflow");
    download(&c, 4_000_000, 7);
    assert!(
        scheduled(&c).expect("the proxy has a helper subflow") > before,
        "the helper carried nothing of the second download"
    );
    let t0 = Instant::now();
    let mut again = f64::INFINITY;
    while t0.elapsed() < Duration::from_secs(1) && again >= 200.0 {
        again = pipe_report_age_ms(&c).expect("the proxy has a report");
        thread::sleep(Duration::from_millis(10));
    }
    assert!(
        again < 200.0,
        "no report after the helper relayed again: {again} ms\n{}",
        c.logs()
    );
}

/// Segments the primary has sent on its pipes to the helper (pings, pongs, ACKs, uplink).
fn primary_pipe_segments(c: &Cluster) -> Option<u64> {
    let st = c.primary.status()?;
    let sf = st
        .sessions
        .first()?
        .subflows
        .iter()
        .find(|f| f.kind == "helper")?;
    Some(sf.links.iter().map(|l| u64::from(l.tcp.segs_out)).sum())
}

/// An idle pipe is pinged as rarely as an idle cellular link (`daemon::quiet`): WiFi's tail
/// is a quarter of a second, so pings every 250 ms kept both ends' radios from sleeping for
/// as long as an idle session lived (docs/evaluation.md, item 33). Data brings the pings
/// back, and the pipe still carries it.
#[test]
fn an_idle_pipe_is_left_quiet() {
    let c = Cluster::start(Spec {
        net: 40,
        helpers: 1,
        proxy_extra: RR,
        primary_extra: RR,
        ..Spec::default()
    });
    download(&c, 4_000_000, 8);
    // Let the pipe cool down and go quiet, then count what the primary sends on it.
    thread::sleep(Duration::from_secs(1));
    let before = primary_pipe_segments(&c).expect("the primary has a helper pipe");
    thread::sleep(Duration::from_secs(2));
    let after = primary_pipe_segments(&c).expect("the primary has a helper pipe");
    assert!(
        after - before <= 2,
        "the primary sent {} segments on an idle pipe in 2 s",
        after - before
    );
    download(&c, 4_000_000, 9);
    let st = c.proxy.status().unwrap();
    let helper = st.sessions[0]
        .subflows
        .iter()
        .find(|f| f.kind == "helper")
        .unwrap();
    assert!(helper.bytes_scheduled > 0, "the helper carries data again");
}
