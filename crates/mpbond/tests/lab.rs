//! CI smoke test of `mpbond lab`: a small scenario with every scheme through two helpers, on
//! real namespaces and emulated links; every download must arrive intact (SHA-256), and
//! nothing may be left behind. Needs root, like the lab.

use std::process::Command;
use std::sync::Mutex;

/// The lab tests run one at a time: each checks that it leaves no namespace behind, which
/// another test's live namespaces would spoil (and the 2-core machine runs them best alone).
static LAB: Mutex<()> = Mutex::new(());

/// Runs `mpbond lab run` on `scenarios/<name>.toml` with `args` and `--out <out>`, which must
/// succeed.
fn lab_run_into(name: &str, args: &[&str], out: &std::path::Path) {
    let scenario = format!("{}/../../scenarios/{name}.toml", env!("CARGO_MANIFEST_DIR"));
    let r = Command::new(env!("CARGO_BIN_EXE_mpbond"))
        .args(["lab", "run", &scenario])
        .args(args)
        .arg("--out")
        .arg(out)
        .output()
        .expect("run mpbond lab");
    assert!(
        r.status.success(),
        "mpbond lab {name} {args:?} failed:\n{}\n{}",
        String::from_utf8_lossy(&r.stdout),
        String::from_utf8_lossy(&r.stderr)
    );
}

/// Runs `mpbond lab run` on a scenario with `--check` and returns its runs and its report.
fn lab_run(name: &str) -> (Vec<serde_json::Value>, String) {
    let out = std::env::temp_dir().join(format!("mpbond-lab-{name}-{}", std::process::id()));
    lab_run_into(name, &["--check"], &out);
    let results: serde_json::Value = serde_json::from_slice(
        &std::fs::read(out.join("results.json")).expect("results.json written"),
    )
    .expect("valid JSON");
    let report = std::fs::read_to_string(out.join("report.md")).expect("report.md written");
    for plot in std::fs::read_dir(&out).expect("out dir") {
        let p = plot.expect("entry").path();
        if p.extension().is_some_and(|e| e == "svg") {
            let svg = std::fs::read_to_string(&p).expect("svg");
            assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        }
    }
    let _ = std::fs::remove_dir_all(&out);
    (results.as_array().expect("a list of runs").clone(), report)
}

fn run_of<'a>(runs: &'a [serde_json::Value], scheme: &str) -> &'a serde_json::Value {
    runs.iter()
        .find(|r| r["scheme"] == scheme)
        .unwrap_or_else(|| panic!("no run of {scheme}"))
}

/// IP bytes over the links whose names start with `prefix`, in direction `dir`.
fn link_bytes(run: &serde_json::Value, prefix: &str, dir: &str) -> u64 {
    run["links"]
        .as_array()
        .expect("links")
        .iter()
        .filter(|l| l["link"].as_str().is_some_and(|n| n.starts_with(prefix)))
        .map(|l| l[dir].as_u64().unwrap_or(0))
        .sum()
}

fn namespaces() -> String {
    let o = Command::new("ip")
        .args(["netns", "list"])
        .output()
        .expect("ip");
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Every scheme downloads intact through two helpers; the helpers and the second WAN link
/// carry data where the scheme uses them; energy is accounted to the devices that worked.
/// The workloads' upload and bulk forms also deliver intact bytes. Nothing is left behind.
#[test]
fn every_scheme_and_workload_delivers_intact_bytes_and_cleans_up() {
    let _one = LAB.lock().unwrap_or_else(|p| p.into_inner());
    let before = namespaces();
    let (runs, _) = lab_run("smoke");
    for scheme in [
        "single",
        "kibbutz",
        "kibbutz-n",
        "combine",
        "mpbond-naive",
        "mpbond",
        "mptcp-wifi-lte",
    ] {
        let run = run_of(&runs, scheme);
        assert_eq!(run["intact"], true, "{scheme}: {run}");
        assert_eq!(run["size"], 1_000_000, "{scheme}");
        assert!(run["seconds"].as_f64().expect("seconds") > 0.0);
        assert!(run["transfer_energy_j"].as_f64().expect("energy") > 0.0);
    }
    // Helpers carried data in the multi-device schemes: some bytes crossed pipe 1 (and, for
    // the schemes that use every helper, pipe 2), and the helper spent energy.
    for scheme in ["kibbutz", "kibbutz-n", "combine", "mpbond-naive", "mpbond"] {
        let run = run_of(&runs, scheme);
        let p1 = link_bytes(run, "p1", "down");
        assert!(p1 > 100_000, "{scheme}: only {p1} bytes over pipe 1");
        let helper_j = run["energy"]
            .as_array()
            .expect("energy")
            .iter()
            .find(|d| d["device"] == "helper1")
            .and_then(|d| d["joules"].as_f64())
            .unwrap_or(0.0);
        assert!(helper_j > 0.0, "{scheme}: helper 1 spent no energy");
        if scheme != "kibbutz" {
            let p2 = link_bytes(run, "p2", "down");
            assert!(p2 > 50_000, "{scheme}: only {p2} bytes over pipe 2");
        }
    }
    let single = run_of(&runs, "single");
    assert_eq!(
        link_bytes(single, "p", "down") - link_bytes(single, "ps", "down"),
        0
    );
    let wl = run_of(&runs, "mptcp-wifi-lte");
    assert!(link_bytes(wl, "ps2", "down") > 100_000, "no data over ps2");
    // mpbond's daemons answered on their control endpoints: the senders' counters are in
    // the results (a clean 1 MB download fails no link), and no other scheme has them.
    let sched = &run_of(&runs, "mpbond")["sched"];
    assert!(
        sched["recalls"].is_u64(),
        "no scheduler statistics: {sched}"
    );
    assert_eq!(sched["links_failed"], 0, "{sched}");
    assert!(run_of(&runs, "kibbutz").get("sched").is_none());

    let (up, _) = lab_run("smoke-upload");
    for r in &up {
        assert_eq!(r["intact"], true, "{r}");
        assert_eq!(r["workload"], "upload");
    }
    assert!(link_bytes(run_of(&up, "mpbond"), "p1", "up") > 100_000);

    let (bulk, report) = lab_run("smoke-bulk");
    for r in bulk {
        assert_eq!(r["intact"], true, "{r}");
        let samples = r["throughput_mbps"].as_array().expect("samples");
        assert_eq!(samples.len(), 30, "3 s in 100 ms samples");
        // 13 Mbit/s is the physical limit; a working scheme gets well above one path's 8.
        let mean = r["mean_mbps"].as_f64().expect("mean");
        assert!(mean > 8.0 && mean < 13.0, "{}: {mean}", r["scheme"]);
        // What reached the primary's interfaces, in the same intervals: at least the
        // goodput (headers and any copies on top), at most what its PS-Path and pipe carry.
        let arrivals: Vec<f64> = r["arrival_mbps"]
            .as_array()
            .expect("arrival samples")
            .iter()
            .map(|x| x.as_f64().expect("a number"))
            .collect();
        assert_eq!(arrivals.len(), 30);
        let arrived = arrivals.iter().sum::<f64>() / 30.0;
        assert!(
            arrived >= mean * 0.98 && arrived <= 13.0 * 1.02,
            "{}: {arrived} Mbit/s arrived for {mean} Mbit/s of goodput",
            r["scheme"]
        );
    }
    // `lab run` judges the scenario's claims in its report.
    assert!(
        report.contains("## The paper's claims") && report.contains("p5_arrival_mbps mpbond"),
        "{report}"
    );
    assert_eq!(before, namespaces(), "namespaces left behind");
}

/// `mpbond lab paper` on the smoke experiments: the §6.2 scheme variants, topology
/// variants, the video player and dual mode all deliver intact bytes, and every claim gets
/// a value in the summary.
#[test]
fn the_paper_suite_runs_its_smoke_experiments_end_to_end() {
    let _one = LAB.lock().unwrap_or_else(|p| p.into_inner());
    let before = namespaces();
    let out = std::env::temp_dir().join(format!("mpbond-lab-paper-{}", std::process::id()));
    let dir = format!("{}/../../scenarios/paper-smoke", env!("CARGO_MANIFEST_DIR"));
    // `mpbond lab paper` on the smoke experiments into `out`, with `args`.
    let paper = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_mpbond"))
            .args(["lab", "paper", "--dir", &dir])
            .args(args)
            .arg("--out")
            .arg(&out)
            .output()
            .unwrap_or_else(|e| panic!("run mpbond lab paper {args:?}: {e}"))
    };
    // A mistyped --only names itself and what is there, before anything runs.
    let typo = paper(&["--only", "a,z"]);
    let err = String::from_utf8_lossy(&typo.stderr);
    assert!(!typo.status.success(), "--only z ran: {err}");
    assert!(
        err.contains("--only z: no such experiment") && err.contains("c-dual"),
        "{err}"
    );
    // So does a share of rerun time that is no percentage.
    for bad in ["150%", "five"] {
        let r = paper(&["--rerun-stolen", "1", "--rerun-share", bad]);
        let err = String::from_utf8_lossy(&r.stderr);
        assert!(!r.status.success(), "--rerun-share {bad} ran: {err}");
        assert!(err.contains("--rerun-share") && err.contains(bad), "{err}");
    }
    // Stolen runs may run again, each experiment earning 5% of its runs' time for it.
    let r = paper(&["--rerun-stolen", "1", "--rerun-share", "5%"]);
    assert!(
        r.status.success(),
        "mpbond lab paper failed:\n{}\n{}",
        String::from_utf8_lossy(&r.stdout),
        String::from_utf8_lossy(&r.stderr)
    );
    let read = |p: std::path::PathBuf| -> serde_json::Value {
        serde_json::from_slice(&std::fs::read(&p).unwrap_or_else(|e| panic!("{p:?}: {e}")))
            .expect("valid JSON")
    };
    let summary = read(out.join("summary.json"));
    let outcomes = summary.as_array().expect("outcomes");
    assert_eq!(outcomes.len(), 4, "{summary}");
    for o in outcomes {
        assert_ne!(o["outcome"]["verdict"], "missing", "{o}");
        assert!(
            o["outcome"]["ours"][0].as_f64().is_some_and(|v| v > 0.0),
            "{o}"
        );
    }
    let md = std::fs::read_to_string(out.join("summary.md")).expect("summary.md");
    assert!(md.contains("| experiment | claim |"), "{md}");
    assert!(
        md.contains("each experiment earning 5.0% of its first attempts' time"),
        "{md}"
    );

    let a = read(out.join("a-schemes/results.json"));
    let a = a.as_array().expect("runs");
    assert_eq!(a.len(), 8, "4 schemes x 2 variants");
    for v in ["WLAN pipe", "fast HS"] {
        assert_eq!(a.iter().filter(|r| r["variant"] == v).count(), 4);
    }
    for run in a {
        assert_eq!(run["intact"], true, "{run}");
        // Every scheme here uses the helper: data crossed the pipe and the PS-Path.
        assert!(link_bytes(run, "p1", "down") > 100_000, "{run}");
        assert!(link_bytes(run, "ps", "down") > 100_000, "{run}");
        // mpbond's daemons were charged the CPU they used during the download (MPBond
        // §6.8); tethering runs none on the devices.
        let cpu = run["cpu"].as_array().expect("cpu");
        if run["scheme"]
            .as_str()
            .is_some_and(|s| s.starts_with("mpbond"))
        {
            for device in ["proxy", "primary", "helper1"] {
                let c = cpu.iter().find(|c| c["device"] == device);
                assert!(
                    c.and_then(|c| c["cpu_s"].as_f64()).is_some_and(|s| s > 0.0),
                    "{device}: {run}"
                );
            }
        } else {
            assert!(cpu.is_empty(), "{run}");
        }
    }

    let b = read(out.join("b-video/results.json"));
    for run in b.as_array().expect("runs") {
        assert_eq!(run["intact"], true, "{run}");
        assert_eq!(run["video"]["segments"], 4, "{run}");
        assert!(run["video"]["mean_bitrate_mbps"]
            .as_f64()
            .is_some_and(|x| x > 0.04));
    }

    let c = read(out.join("c-dual/results.json"));
    for run in c.as_array().expect("runs") {
        assert_eq!(run["intact"], true, "{run}");
        let devices = run["chunk_times"].as_array().expect("chunk times");
        assert_eq!(devices.len(), 2, "both phones ran: {run}");
        for d in devices {
            assert!(!d[1].as_array().expect("times").is_empty(), "{run}");
        }
        // Both phones' radios are accounted in both schemes.
        assert_eq!(run["energy"].as_array().map(Vec::len), Some(2), "{run}");
        assert!(
            run["cc"].as_str().is_some_and(|cc| cc.starts_with("cubic")),
            "{run}"
        );
    }

    // --from-results runs nothing: it judges the claims again and writes every report again
    // from results.json, which it leaves as it was.
    let results_before = std::fs::read(out.join("c-dual/results.json")).expect("results");
    let report_before = std::fs::read_to_string(out.join("c-dual/report.md")).expect("report");
    std::fs::remove_file(out.join("c-dual/report.md")).expect("remove report");
    let again = paper(&["--from-results"]);
    assert!(
        again.status.success(),
        "--from-results failed: {}",
        String::from_utf8_lossy(&again.stderr)
    );
    assert_eq!(read(out.join("summary.json")), summary);
    assert_eq!(
        std::fs::read(out.join("c-dual/results.json")).expect("results"),
        results_before
    );
    assert_eq!(
        std::fs::read_to_string(out.join("c-dual/report.md")).expect("report written again"),
        report_before
    );
    let _ = std::fs::remove_dir_all(&out);
    assert_eq!(namespaces(), before, "namespaces left behind");
}

/// `--packets` keeps each run's diagnostics: the packet log, the kernel counters that moved,
/// and every socket's window from the kernel's `tcp_probe` (the proxy's senders toward the
/// primary and the helper acknowledged the whole file between them). No trace instance is
/// left behind.
#[test]
fn packets_keeps_the_packet_log_counters_and_every_senders_window() {
    let _one = LAB.lock().unwrap_or_else(|p| p.into_inner());
    let before = namespaces();
    let out = std::env::temp_dir().join(format!("mpbond-lab-packets-{}", std::process::id()));
    lab_run_into("smoke", &["--schemes", "mpbond", "--packets"], &out);
    let run = out.join("work/v0/mpbond-1000000-0");
    let read = |f: &str| {
        std::fs::read_to_string(run.join(f)).unwrap_or_else(|e| panic!("{f} in {run:?}: {e}"))
    };
    assert!(read("packets.csv").lines().count() > 500);
    assert!(read("counters.csv").contains("proxy,Tcp,OutSegs,"));
    let probe = read("tcp_probe.csv");
    let mut lines = probe.lines();
    assert_eq!(
        lines.next(),
        Some("t_s,local,remote,data_len,una,nxt,cwnd,ssthresh,srtt_us,snd_wnd,rcv_wnd")
    );
    // The highest byte each of the proxy's subflows had acknowledged, by peer.
    let mut acked = std::collections::BTreeMap::<String, u64>::new();
    for l in lines {
        let f: Vec<&str> = l.split(',').collect();
        assert_eq!(f.len(), 11, "{l}");
        let t: f64 = f[0].parse().expect("t_s");
        assert!((-60.0..60.0).contains(&t), "{l}");
        assert!(f[6].parse::<u32>().expect("cwnd") > 0, "{l}");
        if f[1].starts_with("proxy-ps:") {
            let una: u64 = f[4].parse().expect("una");
            let peer = f[2].split(':').next().expect("peer").to_string();
            let e = acked.entry(peer).or_default();
            *e = (*e).max(una);
        }
    }
    let to = |p: &str| acked.get(p).copied().unwrap_or(0);
    assert!(to("primary-ps") > 100_000, "{acked:?}");
    assert!(to("helper1-hs") + to("helper2-hs") > 100_000, "{acked:?}");
    // Framing and control frames add to the file's bytes, never take away.
    let total: u64 = acked.values().sum();
    assert!(total >= 1_000_000, "{acked:?}");
    let _ = std::fs::remove_dir_all(&out);
    assert_eq!(before, namespaces(), "namespaces left behind");
    let left: Vec<_> = std::fs::read_dir("/sys/kernel/tracing/instances")
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with("mpbond-lab-"))
                .collect()
        })
        .unwrap_or_default();
    assert!(left.is_empty(), "trace instances left: {left:?}");
}
