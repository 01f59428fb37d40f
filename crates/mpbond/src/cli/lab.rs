//! `mpbond lab`: run scenarios on the namespace testbed (docs/lab.md).

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use mpbond_lab::netns;
use mpbond_lab::report;
use mpbond_lab::rerun::{rerun_stolen, Done, Reruns};
use mpbond_lab::run::{run_order, run_retrying, RunEnv, RunResult};
use mpbond_lab::scenario::{Scenario, WorkloadKind};
use mpbond_lab::scheme::Scheme;

/// `mpbond lab` subcommands.
#[derive(Subcommand, Debug)]
pub enum LabCmd {
    /// Run a scenario file: every scheme, size and repetition; write results.json, report.md
    /// and SVG plots, and judge the file's `[[claim]]`s (if any) on the results.
    Run(RunArgs),
    /// The demo: MPBond's common setting (PS 8, HS 10, pipe 5 Mbps), single vs kibbutz vs
    /// mpbond, in under 2 minutes.
    Demo(DemoArgs),
    /// Every experiment of MPBond §6 (scenarios/paper/*.toml), side by side with the paper's
    /// claims: a report per experiment and summary.md (docs/evaluation.md).
    Paper(PaperArgs),
    /// What a scenario's links allow, without running it (no root needed): for every scheme,
    /// case and repetition, the fluid bound beside the window-limited bound, whose senders
    /// keep at most a window unacknowledged and hear back over the uplinks (docs/lab.md).
    Bounds(BoundsArgs),
}

/// Options of `mpbond lab bounds`.
#[derive(Args, Debug)]
pub struct BoundsArgs {
    /// The scenario.
    scenario: PathBuf,
    /// Only these schemes (comma-separated, as for `lab run`).
    #[arg(long, value_delimiter = ',')]
    schemes: Option<Vec<String>>,
    /// Override the scenario's repetitions (each replays the traces from its own offset).
    #[arg(long)]
    reps: Option<usize>,
    /// Unacknowledged bytes per hop in the window-limited bound (default: the testbed's
    /// largest send buffer, 4 MiB).
    #[arg(long, value_name = "SIZE")]
    window: Option<String>,
    /// Every WAN link (PS-Path, HS-Paths) at this share of its capacity, e.g. 0.9: what the
    /// bounds would be for a scheme that gets only that much of what the links offer.
    #[arg(long, value_name = "FACTOR", default_value_t = 1.0)]
    wan_scale: f64,
}

/// Options of `mpbond lab paper`.
#[derive(Args, Debug)]
pub struct PaperArgs {
    /// Few repetitions and the scenarios' `[quick]` cuts (under 15 minutes).
    #[arg(long)]
    quick: bool,
    /// Only these experiments (comma-separated file stems or their prefixes: `02,06`, `11`
    /// for 11a-11d, `10a`).
    #[arg(long, value_delimiter = ',')]
    only: Option<Vec<String>>,
    /// Override every experiment's repetitions.
    #[arg(long)]
    reps: Option<usize>,
    /// Override every experiment's TCP congestion control (scenario key `cc`, default cubic
    /// as in MPBond §6.1), e.g. `bbr`.
    #[arg(long)]
    cc: Option<String>,
    /// Override every experiment's initial receive buffer on the phones (scenario key
    /// `phone_rcvbuf`, default 1MiB as Android's LTE profiles), e.g. `128KiB` as Linux's.
    #[arg(long)]
    phone_rcvbuf: Option<String>,
    /// Where the experiment files are.
    #[arg(long, default_value = "scenarios/paper")]
    dir: PathBuf,
    /// Output directory (default: lab-results/paper or lab-results/paper-quick).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Run nothing: judge the claims again on the results.json each selected experiment
    /// already has under the output directory, write each one's report.md and plots again
    /// from it (results.json is left as it is), and summary.md/summary.json. For a suite
    /// finished in parts with `--only` (every part from one build), after a claim in a
    /// scenario file changed, or for a newer build's tables.
    #[arg(long, conflicts_with_all = ["reps", "cc", "phone_rcvbuf", "rerun_stolen", "rerun_budget", "rerun_share"])]
    from_results: bool,
    #[command(flatten)]
    host: HostArgs,
}

/// What `lab run` and `lab paper` do about a busy host.
#[derive(Args, Debug)]
pub struct HostArgs {
    /// Run a run again, at most N more times, while the hypervisor stole more than 3% of a
    /// core from it (`cpu::STEAL_LIMIT`): steal slows mpbond's user-space relays, not the
    /// kernel's MPTCP, and a deployment's devices have their own CPUs. The reruns wait until
    /// the scenario's other runs are done (out of the burst of steal that hit the run) and
    /// go to the most stolen first. The quiet attempt is kept (or the least stolen); the
    /// others go to `stolen.json`. Costs up to N times a stolen run's time.
    #[arg(long, value_name = "N", default_value_t = 0)]
    rerun_stolen: usize,
    /// With --rerun-stolen, the most wall time the reruns may take over the whole
    /// invocation (all of `lab paper`'s experiments together), e.g. 8m: a rerun starts only
    /// while at least the stolen run's own time is left, so the suite ends within its
    /// budget plus less than one run. No limit without it. The summary says how much of it
    /// the reruns took and how many it refused.
    #[arg(long, value_name = "DURATION", requires = "rerun_stolen")]
    rerun_budget: Option<String>,
    /// With --rerun-stolen, each experiment's share of rerun time, in percent of the wall
    /// time its own runs took (e.g. 5%): its reruns may take what it earned plus what the
    /// experiments before it earned and left, within --rerun-budget if given. A rerun starts
    /// while any of that is left, and what it takes beyond is owed, paid from the next
    /// experiments' earnings, so a run longer than its share (a video) can still run again
    /// once. A burst of steal in one experiment then cannot spend the later experiments'
    /// reruns, as a budget alone (first come, first served) lets it.
    #[arg(long, value_name = "PERCENT", requires = "rerun_stolen")]
    rerun_share: Option<String>,
}

impl HostArgs {
    /// The reruns these options ask for.
    fn reruns(&self) -> Result<Reruns> {
        let budget = self
            .rerun_budget
            .as_deref()
            .map(mpbond_core::units::parse_duration)
            .transpose()
            .map_err(|e| anyhow::anyhow!("--rerun-budget: {e}"))?;
        let reruns = Reruns::new(self.rerun_stolen, budget);
        Ok(match self.rerun_share.as_deref() {
            Some(s) => reruns.with_share(parse_percent(s).context("--rerun-share")?),
            None => reruns,
        })
    }
}

/// A percentage in (0, 100], with or without its `%` sign ("5%", "2.5"), as a fraction.
fn parse_percent(s: &str) -> Result<f64> {
    let t = s.trim();
    let v: f64 = t
        .strip_suffix('%')
        .unwrap_or(t)
        .trim()
        .parse()
        .map_err(|_| anyhow::anyhow!("{s:?} is not a percentage (e.g. 5%)"))?;
    if !(v > 0.0 && v <= 100.0) {
        bail!("{s:?}: a percentage above 0 and at most 100");
    }
    Ok(v / 100.0)
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
    /// Override the scenario's TCP congestion control (`cc`, default cubic), e.g. `bbr`.
    #[arg(long)]
    cc: Option<String>,
    /// Override the phones' initial TCP receive buffer (`phone_rcvbuf`, default 1MiB as
    /// Android's LTE profiles), e.g. `128KiB` as Linux's.
    #[arg(long)]
    phone_rcvbuf: Option<String>,
    /// Only these schemes (comma-separated): single, kibbutz, kibbutz-n, kibbutz-split-<p>,
    /// combine (or combine-<chunk>, e.g. combine-64KiB), mpbond-naive, mpbond, mptcp-wifi-lte,
    /// and mpbond's variants (mpbond-paper, mpbond-paper-pad, mpbond-loss-hold,
    /// mpbond-no-reinject, ...; all in docs/lab.md), among them mpbond-eco, the energy-aware
    /// helper admission at 1 W a second (mpbond-eco-<W>W for another value, e.g.
    /// mpbond-eco-3W); any takes @N devices.
    #[arg(long, value_delimiter = ',')]
    schemes: Option<Vec<String>>,
    /// Only these of the workload's sizes (comma-separated, as the file spells them or in
    /// bytes), e.g. `2MB`: one case of an experiment, repeated, without a copy of its file.
    #[arg(long, value_delimiter = ',')]
    sizes: Option<Vec<String>>,
    /// Only this variant of the scenario's sweep or `[[variant]]` list, by name as the
    /// report spells it, e.g. `--variant "hs1 18Mbps, ps 1Mbps"` (08's corner cell);
    /// repeat for more. One cell of a grid, repeated, without a copy of its file.
    #[arg(long = "variant", value_name = "NAME")]
    variants: Vec<String>,
    /// Output directory (default: lab-results/<scenario name>).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Fail unless every download arrived intact (for CI).
    #[arg(long)]
    check: bool,
    /// Write each run's packet log (`link,dir,t_s,bytes,event`) to
    /// `<out>/work/.../<scheme>-<size>-<rep>/packets.csv`, and the kernel counters that
    /// moved on each device during the workload (`/proc/net/netstat` and `snmp`: MPTCP's
    /// data-level retransmissions, TCP losses and timeouts) to `counters.csv` beside it, and
    /// every socket's window, slow-start threshold and smoothed RTT at each segment it took
    /// in (the kernel's `tcp:tcp_probe`) to `tcp_probe.csv` (`scripts/slow-start-exits`).
    #[arg(long)]
    packets: bool,
    /// Before each measured download, fetch this much (e.g. 1MB) through the same client and
    /// daemons (scenario key `workload.warm`): a warm session, as a deployed mpbond keeps
    /// between downloads, instead of fresh daemons.
    #[arg(long, value_name = "SIZE")]
    warm: Option<String>,
    #[command(flatten)]
    host: HostArgs,
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
    // The lab's own warnings (a counter it cannot read, a probe it cannot start) go to
    // stderr; without a subscriber they were dropped. `RUST_LOG` also reaches the daemons.
    super::daemon::init_logging("warn");
    // Bounds are computed, not measured: no namespaces, no root.
    let cmd = match cmd {
        LabCmd::Bounds(a) => return bounds(a),
        other => other,
    };
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
            override_testbed(&mut sc, a.cc.as_deref(), a.phone_rcvbuf.as_deref())?;
            if let Some(w) = a.warm {
                sc.workload.warm = Some(w);
                sc.warm()?;
            }
            if let Some(s) = a.schemes {
                for x in &s {
                    sc.supports(Scheme::parse(x)?)?;
                }
                sc.schemes = s;
            }
            if let Some(s) = a.sizes {
                sc.only_sizes(&s)?;
            }
            if !a.variants.is_empty() {
                sc.only_variants(&a.variants, "--variant")?;
            }
            let stem = a
                .scenario
                .file_stem()
                .map_or("scenario".into(), |s| s.to_string_lossy().into_owned());
            let out = a
                .out
                .unwrap_or_else(|| PathBuf::from("lab-results").join(&stem));
            let mut reruns = a.host.reruns()?;
            let results = execute(&sc, &out, a.packets, &mut reruns)?;
            if let Some(line) = reruns.summary() {
                println!("{line}");
            }
            claims_report(&sc, &stem, &results, &out)?;
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
            execute(&sc, &a.out, false, &mut Reruns::default())?;
            Ok(())
        }
        LabCmd::Paper(a) => paper(a),
        LabCmd::Bounds(a) => bounds(a),
    }
}

/// `mpbond lab bounds`: the scenario's bounds table on stdout.
fn bounds(a: BoundsArgs) -> Result<()> {
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
    let window = match &a.window {
        Some(w) => {
            mpbond_core::units::parse_size(w).map_err(|e| anyhow::anyhow!("--window: {e}"))?
        }
        None => mpbond_lab::run::WINDOW_BOUND,
    };
    if window == 0 {
        bail!("--window must be above 0 bytes");
    }
    let table = mpbond_lab::bounds::table(&sc, window, a.wan_scale)?;
    let scale = if a.wan_scale == 1.0 {
        String::new()
    } else {
        format!("; WAN links at {} of their capacity", a.wan_scale)
    };
    println!(
        "# {}: bounds (window-limited: {} bytes unacknowledged per hop{scale})\n",
        sc.name, window
    );
    print!("{table}");
    Ok(())
}

/// The scenario's `[[claim]]`s judged on one `lab run`'s results, printed and appended to
/// its report, so a single experiment shows its verdicts without the whole `lab paper`
/// suite. A claim on a scheme the run left out (`--schemes`) says "not run".
fn claims_report(
    sc: &Scenario,
    stem: &str,
    results: &[RunResult],
    out: &std::path::Path,
) -> Result<()> {
    if sc.claims.is_empty() {
        return Ok(());
    }
    let outcomes = sc
        .claims
        .iter()
        .map(|c| Ok((stem.to_string(), mpbond_lab::claim::evaluate(c, results)?)))
        .collect::<Result<Vec<_>>>()?;
    let table = mpbond_lab::claim::table(&outcomes);
    let path = out.join("report.md");
    let mut md = std::fs::read_to_string(&path)
        .with_context(|| format!("cannot read {}", path.display()))?;
    md.push_str(&format!("\n## The paper's claims\n\n{table}"));
    std::fs::write(&path, md).with_context(|| format!("cannot write {}", path.display()))?;
    print!("\n{table}");
    Ok(())
}

/// `mpbond lab paper`: every experiment file in order, then the summary of claims.
fn paper(a: PaperArgs) -> Result<()> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(&a.dir)
        .with_context(|| {
            format!(
                "cannot list {} (run from the repository root, or pass --dir)",
                a.dir.display()
            )
        })?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    if let Some(only) = &a.only {
        let stem = |f: &PathBuf| {
            f.file_stem()
                .map_or(String::new(), |s| s.to_string_lossy().into_owned())
        };
        // `07` is `07-stable`, `11` every `11a`..`11d`, `10a` only `10a-...`; never `1` for `10`.
        let selects = |o: &str, f: &PathBuf| {
            let s = stem(f);
            s.strip_prefix(o)
                .is_some_and(|rest| !rest.starts_with(|c: char| c.is_ascii_digit()))
        };
        let unknown: Vec<&str> = only
            .iter()
            .map(String::as_str)
            .filter(|o| !files.iter().any(|f| selects(o, f)))
            .collect();
        if !unknown.is_empty() {
            let have: Vec<String> = files.iter().map(stem).collect();
            bail!(
                "--only {}: no such experiment in {} (there: {})",
                unknown.join(","),
                a.dir.display(),
                have.join(", ")
            );
        }
        files.retain(|f| only.iter().any(|o| selects(o, f)));
    }
    if files.is_empty() {
        bail!("no experiment files selected in {}", a.dir.display());
    }
    let out = a.out.clone().unwrap_or_else(|| {
        PathBuf::from(if a.quick {
            "lab-results/paper-quick"
        } else {
            "lab-results/paper"
        })
    });
    let began = std::time::Instant::now();
    // One budget for the whole suite.
    let mut reruns = a.host.reruns()?;
    let mut outcomes = Vec::new();
    let mut notes = Vec::new();
    for f in &files {
        let stem = f
            .file_stem()
            .map_or(String::new(), |s| s.to_string_lossy().into());
        let sc = match Scenario::load(f) {
            Ok(sc) => sc,
            Err(e) if format!("{e:#}").contains("cannot read trace") => {
                eprintln!("lab paper: skipping {stem}: {e:#}");
                notes.push(format!("- {stem}: skipped, {e:#}"));
                continue;
            }
            Err(e) => return Err(e),
        };
        let mut sc = if a.quick { sc.quick()? } else { sc };
        if let Some(r) = a.reps {
            sc.reps = r;
        }
        override_testbed(&mut sc, a.cc.as_deref(), a.phone_rcvbuf.as_deref())?;
        let t = std::time::Instant::now();
        let before = reruns.tally;
        let results = if a.from_results {
            // The report again too, with this build's tables, beside results.json as it is.
            let dir = out.join(&stem);
            let results = report::read(&dir)?;
            report::write_report(&dir, &sc.name, &sc.schemes, &results)?;
            results
        } else {
            execute(&sc, &out.join(&stem), false, &mut reruns)?
        };
        let label = format!("{stem} ({})", sc.paper.as_deref().unwrap_or(&sc.name));
        for c in &sc.claims {
            outcomes.push((label.clone(), mpbond_lab::claim::evaluate(c, &results)?));
        }
        // How much the host took from the runs: mpbond's user-space relays slow under the
        // hypervisor's steal where the kernel's MPTCP does not (docs/evaluation.md, 07).
        let steal = report::steal_stats(&results).map_or(String::new(), |(mean, above, n)| {
            format!(
                "; the hypervisor stole {:.1}% of a core on the mean, {above} of {n} runs above {:.0}%",
                100.0 * mean,
                100.0 * mpbond_lab::cpu::STEAL_LIMIT
            )
        });
        notes.push(if a.from_results {
            format!(
                "- {stem}: {} runs read from {stem}/results.json{steal}; report {stem}/report.md",
                results.len()
            )
        } else {
            let again = reruns.tally.since(&before).clause();
            format!(
                "- {stem}: {} runs ({} reps) in {:.0} s{steal}{}; report {stem}/report.md",
                results.len(),
                sc.reps,
                t.elapsed().as_secs_f64(),
                if again.is_empty() {
                    String::new()
                } else {
                    format!("; {again}")
                }
            )
        });
    }
    let table = mpbond_lab::claim::table(&outcomes);
    let firm = mpbond_lab::claim::firmness(&outcomes);
    let table = if firm.is_empty() {
        table
    } else {
        format!("{table}\n{firm}\n")
    };
    let md = format!(
        "# MPBond §6 side by side{}{}\n\n{table}\n{}\n\n{}\n",
        if a.quick { " (quick)" } else { "" },
        a.cc.as_ref()
            .map_or(String::new(), |cc| format!(", TCP {cc}")),
        notes.join("\n"),
        if a.from_results {
            "Judged from earlier runs' results, and each report written again from them (each names its TCP congestion control)."
                .to_string()
        } else {
            let again = reruns
                .summary()
                .map_or(String::new(), |line| format!(" {line}"));
            format!("Total {:.0} s.{again}", began.elapsed().as_secs_f64())
        }
    );
    std::fs::create_dir_all(&out)?;
    std::fs::write(out.join("summary.md"), &md)?;
    let json: Vec<_> = outcomes
        .iter()
        .map(|(e, o)| serde_json::json!({ "experiment": e, "outcome": o }))
        .collect();
    std::fs::write(
        out.join("summary.json"),
        serde_json::to_string_pretty(&json)?,
    )?;
    println!("{md}");
    println!("summary: {}", out.join("summary.md").display());
    Ok(())
}

/// The testbed settings `--cc` and `--phone-rcvbuf` override in every scenario; a bad
/// buffer size fails here, before any run.
fn override_testbed(sc: &mut Scenario, cc: Option<&str>, phone_rcvbuf: Option<&str>) -> Result<()> {
    if let Some(cc) = cc {
        sc.cc = cc.to_string();
    }
    if let Some(b) = phone_rcvbuf {
        sc.phone_rcvbuf = Some(b.to_string());
        sc.phone_rcvbuf()?;
    }
    Ok(())
}

/// Runs every scheme, size, variant and repetition of `sc` into `out`; `reruns` as `lab run
/// --rerun-stolen` and `--rerun-budget` (what the reruns take comes off its budget).
fn execute(
    sc: &Scenario,
    out: &std::path::Path,
    packet_log: bool,
    reruns: &mut Reruns,
) -> Result<Vec<RunResult>> {
    let env = RunEnv {
        exe: mpbond_lab::run::own_executable().context("cannot find the mpbond binary")?,
        work: out.join("work"),
        packet_log,
    };
    let _ = std::fs::remove_dir_all(&env.work);
    let variants = sc.expand()?;
    let sizes = match sc.workload.kind {
        WorkloadKind::Bulk | WorkloadKind::Video => vec![0],
        _ => sc.sizes(),
    };
    let bulk_s = sc.bulk_duration()?.as_secs_f64();
    let what = |size: u64| sc.workload.kind.label(size, bulk_s);
    let per_rep = sizes
        .iter()
        .map(|&size| sc.schemes.iter().filter(|s| sc.runs_at(s, size)).count())
        .sum::<usize>();
    let total = variants.len() * per_rep * sc.reps;
    // Each run as it came, with what a rerun of it needs: its scheme, variant, size and
    // repetition.
    let mut batch = Vec::new();
    let mut plan = Vec::new();
    let mut n = 0;
    let began = std::time::Instant::now();
    eprintln!(
        "lab: {} ({total} runs), writing to {}",
        sc.name,
        out.display()
    );
    let headline = |r: &RunResult| match (&r.video, sc.workload.kind) {
        (Some(v), _) => format!(
            "{:.2} Mbit/s video, stalls {:.0}%",
            v.mean_bitrate_mbps,
            v.stall_ratio * 100.0
        ),
        (None, WorkloadKind::Bulk) => format!("{:.2} Mbit/s", r.mean_mbps),
        _ => format!("{:.2} s", r.seconds),
    };
    // A variant's name as the progress lines show it.
    let vname = |vi: usize| {
        variants[vi]
            .0
            .as_ref()
            .map_or(String::new(), |v| format!(" [{v}]"))
    };
    // Variants and reruns get their own scratch space (keys are never overwritten), as a
    // reconnect's attempt does.
    let run = |s: &str, vi: usize, size: u64, rep: usize, k: usize| -> Result<RunResult> {
        let scheme = Scheme::parse(s)?;
        let work = env.work.join(format!("v{vi}"));
        let env = RunEnv {
            exe: env.exe.clone(),
            work: if k == 0 {
                work
            } else {
                work.join(format!("rerun{k}"))
            },
            packet_log,
        };
        run_retrying(&variants[vi].1, scheme, size, rep, &env)
            .with_context(|| format!("{scheme}, {}{}, rep {rep}", what(size), vname(vi)))
    };
    // Repetitions outermost, so slow drift of a shared machine hits every scheme alike, and
    // the schemes' order turned round from one repetition to the next (`run_order`), so
    // does the place in the sequence.
    for rep in 0..sc.reps {
        for vi in 0..variants.len() {
            let vname = vname(vi);
            for &size in &sizes {
                let here: Vec<&String> =
                    sc.schemes.iter().filter(|s| sc.runs_at(s, size)).collect();
                for s in run_order(&here, rep) {
                    n += 1;
                    let tty = std::io::IsTerminal::is_terminal(&std::io::stderr());
                    if tty {
                        eprint!(
                            "lab: [{n}/{total}] {s:<14} {:>16}{vname} rep {rep}: running",
                            what(size)
                        );
                    }
                    let t = std::time::Instant::now();
                    let r = match run(s, vi, size, rep, 0) {
                        Ok(r) => r,
                        Err(e) => {
                            eprintln!(" failed");
                            return Err(e);
                        }
                    };
                    let left = began.elapsed().as_secs_f64() / n as f64 * (total - n) as f64;
                    eprintln!(
                        "{}lab: [{n}/{total}] {s:<14} {:>16}{vname} rep {rep}: {} ({:.2}x bound), {:.2} J{}{}   (about {:.0} s left)",
                        if tty { "\r\x1b[2K" } else { "" },
                        what(size),
                        headline(&r),
                        r.ratio_to_bound,
                        r.transfer_energy_j,
                        if r.intact { "" } else { "  NOT INTACT" },
                        if r.stolen() {
                            format!(
                                ", {:.1}% of a core stolen",
                                100.0 * r.steal_share().unwrap_or(0.0)
                            )
                        } else {
                            String::new()
                        },
                        left
                    );
                    batch.push(Done {
                        result: r,
                        took: t.elapsed(),
                    });
                    plan.push((s.clone(), vi, size, rep));
                }
            }
        }
    }
    // The stolen runs again, now that the batch is done (`--rerun-stolen`).
    let label = |i: usize| {
        let (s, vi, size, rep) = &plan[i];
        format!("{s} {}{} rep {rep}", what(*size), vname(*vi))
    };
    let kept = rerun_stolen(reruns, batch, label, headline, |i, k| {
        let (s, vi, size, rep) = &plan[i];
        run(s, *vi, *size, *rep, k)
    })?;
    let mut results = Vec::new();
    // Attempts set aside for the hypervisor's steal.
    let mut stolen = Vec::new();
    for ((mut r, aside), (_, vi, _, _)) in kept.into_iter().zip(&plan) {
        let variant = &variants[*vi].0;
        r.variant = variant.clone();
        results.push(r);
        stolen.extend(aside.into_iter().map(|mut a| {
            a.variant = variant.clone();
            a
        }));
    }
    report::write(out, &sc.name, &sc.schemes, &results, &stolen)?;
    // The scratch space goes unless it holds the packet logs that were asked for.
    if !packet_log {
        let _ = std::fs::remove_dir_all(&env.work);
    }
    print!("{}", report::tables(&sc.name, &sc.schemes, &results));
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
