//! Simulator speed: simulated seconds per CPU second.
//!
//! `cargo bench -p mpbond-sim --bench sim_speed`. Each scenario runs `REPS` times; the table
//! gives the median thread CPU time per run (clock_gettime(CLOCK_THREAD_CPUTIME_ID), so other
//! load on the machine does not inflate it much), the simulated download time, their ratio and
//! the events processed per CPU second.

use std::time::Duration;

use mpbond_sim::spec::LinkRef;
use mpbond_sim::{run, Scenario};

const REPS: usize = 15;

#[allow(unsafe_code)]
fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we own; the clock id is a constant.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime failed");
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

fn main() {
    let mut cases: Vec<(&str, Scenario)> = vec![
        (
            "10 MB, 1 helper, pams",
            Scenario::paper_common(1, 10_000_000, "pams"),
        ),
        (
            "10 MB, 3 helpers, pams",
            Scenario::paper_common(3, 10_000_000, "pams"),
        ),
        (
            "10 MB, 3 helpers, minrtt",
            Scenario::paper_common(3, 10_000_000, "minrtt"),
        ),
        (
            "100 MB, 3 helpers, pams",
            Scenario::paper_common(3, 100_000_000, "pams"),
        ),
    ];
    let mut lossy = Scenario::paper_common(3, 10_000_000, "pams");
    for l in [LinkRef::Ps, LinkRef::Hs(1), LinkRef::Pipe(2)] {
        lossy.path_mut(l).expect("link exists").loss = 0.01;
    }
    cases.push(("10 MB, 3 helpers, pams, 1% loss", lossy));

    println!(
        "{:<34} {:>10} {:>10} {:>14} {:>12}",
        "scenario", "CPU/run", "simulated", "sim s / CPU s", "events/CPU s"
    );
    for (name, sc) in &cases {
        let mut cpu = Vec::with_capacity(REPS);
        let mut last = None;
        for _ in 0..REPS {
            let t0 = thread_cpu();
            let r = run(sc).expect("scenario runs");
            cpu.push(thread_cpu() - t0);
            assert!(r.verified, "{name}: data not verified");
            last = Some(r);
        }
        cpu.sort();
        let median = cpu[REPS / 2].as_secs_f64();
        let r = last.expect("at least one run");
        let sim = r.download_time_s.unwrap_or(f64::NAN);
        println!(
            "{:<34} {:>8.1}ms {:>9.2}s {:>14.0} {:>12.0}",
            name,
            median * 1e3,
            sim,
            sim / median,
            r.events as f64 / median
        );
    }
    println!("({REPS} runs each; median CPU time)");
}
