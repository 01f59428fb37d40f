//! CI smoke test of `mpbond lab`: a small scenario with every scheme through two helpers, on
//! real namespaces and emulated links; every download must arrive intact (SHA-256), and
//! nothing may be left behind. Needs root, like the lab.

use std::process::Command;

#[test]
fn every_scheme_delivers_intact_bytes_and_cleans_up() {
    let out = std::env::temp_dir().join(format!("mpbond-lab-smoke-{}", std::process::id()));
    let scenario = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scenarios/smoke.toml");
    let before = Command::new("ip")
        .args(["netns", "list"])
        .output()
        .expect("ip");
    let r = Command::new(env!("CARGO_BIN_EXE_mpbond"))
        .args(["lab", "run", scenario, "--check", "--out"])
        .arg(&out)
        .output()
        .expect("run mpbond lab");
    let stdout = String::from_utf8_lossy(&r.stdout);
    assert!(
        r.status.success(),
        "mpbond lab failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&r.stderr)
    );
    let results: serde_json::Value = serde_json::from_slice(
        &std::fs::read(out.join("results.json")).expect("results.json written"),
    )
    .expect("valid JSON");
    let runs = results.as_array().expect("a list of runs");
    for scheme in ["single", "kibbutz", "kibbutz-n", "mpbond-naive", "mpbond"] {
        let run = runs
            .iter()
            .find(|r| r["scheme"] == scheme)
            .unwrap_or_else(|| panic!("no run of {scheme}"));
        assert_eq!(run["intact"], true, "{scheme}: {run}");
        assert_eq!(run["size"], 1_000_000, "{scheme}");
        assert!(run["seconds"].as_f64().expect("seconds") > 0.0);
    }
    // Helpers carried data in the multi-device schemes: some bytes crossed a pipe.
    for scheme in ["kibbutz", "mpbond"] {
        let run = runs.iter().find(|r| r["scheme"] == scheme).expect("run");
        let pipe_bytes: u64 = run["links"]
            .as_array()
            .expect("links")
            .iter()
            .filter(|l| l["link"].as_str().is_some_and(|n| n.starts_with("p1")))
            .map(|l| l["down"].as_u64().unwrap_or(0))
            .sum();
        assert!(
            pipe_bytes > 100_000,
            "{scheme}: only {pipe_bytes} bytes over pipe 1"
        );
    }
    assert!(out.join("report.md").exists());
    let after = Command::new("ip")
        .args(["netns", "list"])
        .output()
        .expect("ip");
    assert_eq!(
        String::from_utf8_lossy(&before.stdout),
        String::from_utf8_lossy(&after.stdout),
        "namespaces left behind"
    );
    let _ = std::fs::remove_dir_all(&out);
}
