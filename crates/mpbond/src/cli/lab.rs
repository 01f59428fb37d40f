//! `mpbond lab`: run scenarios on the namespace testbed (docs/lab.md).

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use mpbond_lab::netns;
use mpbond_lab::report;
use mpbond_lab::run::{run_one, RunEnv, RunResult};
use mpbond_lab::scenario::{Scenario, WorkloadKind};
use mpbond_lab::scheme::Scheme;

/// `mpbond lab` subcommands.
#[derive(Subcommand, Debug)]
pub enum LabCmd {
    /// Run a scenario file: every scheme, size and repetition; write results.json, report.md
    /// and SVG plots.
    Run(RunArgs),
    /// The demo: MPBond's common setting (PS 8, HS 10, pipe 5 Mbps), single vs kibbutz vs
    /// mpbond, in under 2 minutes.
    Demo(DemoArgs),
}

/// Options of `mpbond lab run`.
#[derive(Args, Debug)]
pub struct RunArgs {
    /// The scenario (scenarios/*.toml; every key is in docs/lab.md): links, helpers, changes,
    /// the workload (download, upload or bulk), schemes and repetitions.
    scenario: PathBuf,
    /// Override the scenario's repetitions.
    #[arg(long)]
    reps: Option<usize>,
    /// Only these schemes (comma-separated): single, kibbutz, kibbutz-n, combine (or
    /// combine-<chunk>, e.g. combine-64KiB), mpbond-naive, mpbond, mpbond-paper,
    /// mptcp-wifi-lte.
    #[arg(long, value_delimiter = ',')]
    schemes: Option<Vec<String>>,
    /// Output directory (default: lab-results/<scenario name>).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Fail unless every download arrived intact (for CI).
    #[arg(long)]
    check: bool,
}

/// Options of `mpbond lab demo`.
#[derive(Args, Debug)]
pub struct DemoArgs {
    /// Output directory.
    #[arg(long, default_value = "lab-results/demo")]
    out: PathBuf,
}

const DEMO: &str = include_str!("../../../../scenarios/demo.toml");

/// Runs `mpbond lab`.
pub fn run(cmd: LabCmd) -> Result<()> {
    match netns::prepare().map_err(anyhow::Error::msg)? {
        netns::Setup::Ready => {}
        netns::Setup::Reexecuted(code) => std::process::exit(code),
    }
    install_cleanup()?;
    match cmd {
        LabCmd::Run(a) => {
            let mut sc = Scenario::load(&a.scenario)?;
            if let Some(r) = a.reps {
                sc.reps = r;
            }
            if let Some(s) = a.schemes {
                for x in &s {
                    sc.supports(Scheme::parse(x)?)?;
                }
                sc.schemes = s;
            }
            let stem = a
                .scenario
                .file_stem()
                .map_or("scenario".into(), |s| s.to_string_lossy().into_owned());
            let out = a
                .out
                .unwrap_or_else(|| PathBuf::from("lab-results").join(stem));
            let results = execute(&sc, &out)?;
            if a.check {
                let bad: Vec<String> = results
                    .iter()
                    .filter(|r| !r.intact)
                    .map(|r| format!("{} {} rep {}", r.scheme, r.size, r.rep))
                    .collect();
                if !bad.is_empty() {
                    bail!("downloads not intact: {}", bad.join(", "));
                }
            }
            Ok(())
        }
        LabCmd::Demo(a) => {
            let sc = Scenario::parse(DEMO)?;
            execute(&sc, &a.out)?;
            Ok(())
        }
    }
}

fn execute(sc: &Scenario, out: &std::path::Path) -> Result<Vec<RunResult>> {
    let env = RunEnv {
        exe: std::env::current_exe().context("cannot find the mpbond binary")?,
        work: out.join("work"),
    };
    let _ = std::fs::remove_dir_all(&env.work);
    let sizes = match sc.workload.kind {
        WorkloadKind::Bulk => vec![0],
        _ => sc.sizes(),
    };
    let bulk_s = sc.bulk_duration()?.as_secs_f64();
    let what = |size: u64| sc.workload.kind.label(size, bulk_s);
    let total = sc.schemes.len() * sizes.len() * sc.reps;
    let mut results = Vec::new();
    let mut n = 0;
    let began = std::time::Instant::now();
    eprintln!(
        "lab: {} ({total} runs), writing to {}",
        sc.name,
        out.display()
    );
    // Repetitions outermost, so slow drift of a shared machine hits every scheme alike.
    for rep in 0..sc.reps {
        for &size in &sizes {
            for s in &sc.schemes {
                n += 1;
                let scheme = Scheme::parse(s)?;
                let tty = std::io::IsTerminal::is_terminal(&std::io::stderr());
                if tty {
                    eprint!(
                        "lab: [{n}/{total}] {s:<14} {:>16} rep {rep}: running",
                        what(size)
                    );
                }
                let r = run_one(sc, scheme, size, rep, &env)
                    .with_context(|| format!("{scheme}, {}, rep {rep}", what(size)));
                let r = match r {
                    Ok(r) => r,
                    Err(e) => {
                        eprintln!(" failed");
                        return Err(e);
                    }
                };
                let left = began.elapsed().as_secs_f64() / n as f64 * (total - n) as f64;
                let headline = match sc.workload.kind {
                    WorkloadKind::Bulk => format!("{:.2} Mbit/s", r.mean_mbps),
                    _ => format!("{:.2} s", r.seconds),
                };
                eprintln!(
                    "{}lab: [{n}/{total}] {s:<14} {:>16} rep {rep}: {headline} ({:.2}x bound), {:.2} J{}   (about {:.0} s left)",
                    if tty { "\r\x1b[2K" } else { "" },
                    what(size),
                    r.ratio_to_bound,
                    r.transfer_energy_j,
                    if r.intact { "" } else { "  NOT INTACT" },
                    left
                );
                results.push(r);
            }
        }
    }
    report::write(out, &sc.name, &sc.schemes, &results)?;
    let _ = std::fs::remove_dir_all(&env.work);
    print!("{}", report::table(&sc.name, &sc.schemes, &results));
    println!("report: {}", out.join("report.md").display());
    Ok(results)
}

/// On Ctrl-C or SIGTERM, delete every namespace (and so every process and device) of this
/// run before exiting.
fn install_cleanup() -> Result<()> {
    std::thread::Builder::new()
        .name("lab-signals".into())
        .spawn(|| {
            let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            rt.block_on(async {
                let Ok(mut term) =
                    tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
                else {
                    return;
                };
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
                eprintln!("lab: interrupted, cleaning up");
                netns::cleanup_all();
                std::process::exit(130);
            });
        })?;
    Ok(())
}
