//! The paper's published results as checks on ours: each `[[claim]]` of a scenario names a
//! metric, a scheme (and optionally a baseline, making it a ratio) and the paper's value;
//! [`evaluate`] computes ours from the runs and says whether we beat it.

use serde::Serialize;

use crate::report::{mean_sd, quantile};
use crate::run::RunResult;
use crate::scenario::{ClaimDef, PaperValue};

/// What a claim measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Metric {
    /// Download time, s.
    Time,
    /// Radio energy of all devices, final tails excluded, J (the transfer's own energy).
    Energy,
    /// The same with the final tails, J.
    EnergyWithTails,
    /// The primary's transfer energy, J.
    PrimaryEnergy,
    /// The helpers' transfer energy, J.
    HelperEnergy,
    /// Time between the first and last subflow's last data packet, s (MPBond §4.3.1).
    Gap,
    /// Mean goodput, Mbit/s.
    MeanMbps,
    /// Median of the goodput samples of all runs, Mbit/s.
    MedianMbps,
    /// 5th percentile of the goodput samples, Mbit/s.
    P5Mbps,
    /// Median of the arrival samples of all runs (bytes reaching the primary's interfaces,
    /// `run::arrival_samples`), Mbit/s.
    MedianArrivalMbps,
    /// 5th percentile of the arrival samples, Mbit/s.
    P5ArrivalMbps,
    /// Mean video bitrate, Mbit/s.
    Bitrate,
    /// Video stall time over video length.
    StallRatio,
    /// IP bytes over the cellular links (`ps` and every `hsK`), both directions, MB: what
    /// a carrier meters.
    CellMb,
    /// TCP payload over the cellular links, both directions, MB: the data without the IP
    /// and TCP headers, to set against a file's size.
    CellPayloadMb,
    /// `chunks`: the primary's mean chunk time, s.
    ChunkTimePrimary,
    /// `chunks`: helper 1's mean chunk time (dual mode), s.
    ChunkTimeHelper,
    /// The primary's mpbond daemon: CPU seconds over the workload's seconds (a share of one
    /// core; MPBond §6.8). Only schemes that run daemons on the devices have it.
    CpuPrimary,
    /// The same for the busiest helper's daemon.
    CpuHelper,
}

impl Metric {
    /// Parses a metric name.
    pub fn parse(s: &str) -> anyhow::Result<Metric> {
        Ok(match s {
            "time" => Metric::Time,
            "energy" => Metric::Energy,
            "energy_with_tails" => Metric::EnergyWithTails,
            "primary_energy" => Metric::PrimaryEnergy,
            "helper_energy" => Metric::HelperEnergy,
            "gap" => Metric::Gap,
            "mean_mbps" => Metric::MeanMbps,
            "median_mbps" => Metric::MedianMbps,
            "p5_mbps" => Metric::P5Mbps,
            "median_arrival_mbps" => Metric::MedianArrivalMbps,
            "p5_arrival_mbps" => Metric::P5ArrivalMbps,
            "bitrate" => Metric::Bitrate,
            "stall_ratio" => Metric::StallRatio,
            "cell_mb" => Metric::CellMb,
            "cell_payload_mb" => Metric::CellPayloadMb,
            "chunk_time_primary" => Metric::ChunkTimePrimary,
            "chunk_time_helper" => Metric::ChunkTimeHelper,
            "cpu_primary" => Metric::CpuPrimary,
            "cpu_helper" => Metric::CpuHelper,
            _ => anyhow::bail!(
                "unknown metric {s:?}: time, energy, energy_with_tails, primary_energy, helper_energy, gap, mean_mbps, median_mbps, p5_mbps, median_arrival_mbps, p5_arrival_mbps, bitrate, stall_ratio, cell_mb, cell_payload_mb, chunk_time_primary, chunk_time_helper, cpu_primary, cpu_helper"
            ),
        })
    }

    /// True when a smaller value is better.
    pub fn lower_is_better(self) -> bool {
        !matches!(
            self,
            Metric::MeanMbps
                | Metric::MedianMbps
                | Metric::P5Mbps
                | Metric::MedianArrivalMbps
                | Metric::P5ArrivalMbps
                | Metric::Bitrate
        )
    }

    /// One run's value (None for metrics pooled over runs).
    fn of_run(self, r: &RunResult) -> Option<f64> {
        let device = |primary: bool| {
            r.energy
                .iter()
                .filter(|e| (e.device == "primary") == primary)
                .map(|e| e.joules - e.tail_joules)
                .sum::<f64>()
        };
        Some(match self {
            Metric::Time => r.seconds,
            Metric::Energy => r.transfer_energy_j,
            Metric::EnergyWithTails => r.energy_j,
            Metric::PrimaryEnergy => device(true),
            Metric::HelperEnergy => device(false),
            Metric::Gap => {
                let c: Vec<f64> = r
                    .subflows
                    .iter()
                    // Subflows end where they reach the primary: PS-Paths and pipes.
                    .filter(|s| s.reaches_primary() && s.bytes * 20 > r.bytes)
                    .filter_map(|s| s.completion_s)
                    .collect();
                if c.len() < 2 {
                    0.0
                } else {
                    c.iter().copied().fold(f64::MIN, f64::max)
                        - c.iter().copied().fold(f64::MAX, f64::min)
                }
            }
            Metric::MeanMbps => r.mean_mbps,
            Metric::Bitrate => r.video.as_ref()?.mean_bitrate_mbps,
            Metric::StallRatio => r.video.as_ref()?.stall_ratio,
            Metric::CellMb | Metric::CellPayloadMb => {
                let mut bytes = 0;
                for l in r
                    .links
                    .iter()
                    .filter(|l| l.link == "ps" || l.link.starts_with("hs"))
                {
                    bytes += if self == Metric::CellMb {
                        l.down + l.up
                    } else {
                        // Runs from before the payload was recorded have no value.
                        l.payload?
                    };
                }
                bytes as f64 / 1e6
            }
            Metric::ChunkTimePrimary | Metric::ChunkTimeHelper => {
                let want = if self == Metric::ChunkTimePrimary {
                    "primary"
                } else {
                    "helper1"
                };
                let t = &r.chunk_times.iter().find(|(d, _)| d == want)?.1;
                t.iter().sum::<f64>() / t.len().max(1) as f64
            }
            Metric::CpuPrimary | Metric::CpuHelper => {
                // A run the hypervisor stole from measures the host, not mpbond.
                if r.stolen() {
                    return None;
                }
                let primary = self == Metric::CpuPrimary;
                let busiest = r
                    .cpu
                    .iter()
                    .filter(|c| {
                        if primary {
                            c.device == "primary"
                        } else {
                            c.device.starts_with("helper")
                        }
                    })
                    .map(|c| c.cpu_s)
                    .reduce(f64::max)?;
                busiest / r.cpu_window_s().max(1e-9)
            }
            Metric::MedianMbps
            | Metric::P5Mbps
            | Metric::MedianArrivalMbps
            | Metric::P5ArrivalMbps => return None,
        })
    }

    /// The value over several runs: the mean, or the pooled quantile.
    pub fn of_runs(self, rs: &[&RunResult]) -> f64 {
        // Samples pooled over the runs: the goodput's or the arrivals'.
        let pooled = |of: fn(&RunResult) -> &[f64]| -> Vec<f64> {
            rs.iter().flat_map(|r| of(r).iter().copied()).collect()
        };
        match self {
            Metric::MedianMbps => quantile(&pooled(|r| &r.throughput_mbps), 0.5),
            Metric::P5Mbps => quantile(&pooled(|r| &r.throughput_mbps), 0.05),
            Metric::MedianArrivalMbps => quantile(&pooled(|r| &r.arrival_mbps), 0.5),
            Metric::P5ArrivalMbps => quantile(&pooled(|r| &r.arrival_mbps), 0.05),
            m => mean_sd(&rs.iter().filter_map(|r| m.of_run(r)).collect::<Vec<_>>()).0,
        }
    }
}

/// How ours compares.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// Better than the paper by more than 2%.
    Beats,
    /// Within 2%.
    Matches,
    /// Worse by more than 2%.
    Short,
    /// No runs to compute it from.
    Missing,
    /// The runs are there, but the value is undefined in every case: a ratio of 0 to 0
    /// (10b's 5th-percentile goodput, 0 for every scheme). Not "not run": the experiment
    /// ran and says something, only no number.
    #[serde(rename = "no value")]
    NoValue,
}

/// A claim with our value.
#[derive(Clone, Debug, Serialize)]
pub struct Outcome {
    /// The claim.
    pub claim: ClaimDef,
    /// Our value per case (variant, size), in run order.
    pub cases: Vec<(String, f64)>,
    /// Our lowest and highest value over the cases.
    pub ours: Option<(f64, f64)>,
    /// The verdict.
    pub verdict: Verdict,
    /// The mean over the cases, which the verdict weighs (`None` without a value).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mean: Option<f64>,
    /// The mean's 95% interval, from a bootstrap over the repetitions (each resample keeps
    /// a repetition's runs together, so ratios stay paired as they ran); `None` under
    /// [`INTERVAL_MIN_REPS`] repetitions. It measures the spread of the runs here, from run
    /// to run, not the paper's or the host's from day to day.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interval: Option<(f64, f64)>,
    /// Whether the verdict holds at both ends of [`Self::interval`] (so across it: the bands
    /// are ordered), that is, whether the runs' spread could not have turned it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub firm: Option<bool>,
}

impl Outcome {
    /// "0.91" or "0.88–0.95".
    pub fn ours_text(&self) -> String {
        match self.ours {
            Some((a, b)) if a == b || (a - b).abs() < 0.005 => fmt(a),
            Some((a, b)) => format!("{}–{}", fmt(a), fmt(b)),
            None => "-".into(),
        }
    }

    /// "0.81 [0.79, 0.83]": the mean over cases and its interval ("0.81" without one; "-"
    /// without a value).
    pub fn mean_text(&self) -> String {
        match (self.mean, self.interval) {
            (Some(m), Some((lo, hi))) => format!("{} [{}, {}]", fmt(m), fmt(lo), fmt(hi)),
            (Some(m), None) => fmt(m),
            (None, _) => "-".into(),
        }
    }

    /// The paper's value as text.
    pub fn paper_text(&self) -> String {
        match self.claim.paper {
            PaperValue::One(x) => fmt(x),
            PaperValue::Range([a, b]) => format!("{}–{}", fmt(a), fmt(b)),
        }
    }
}

fn fmt(x: f64) -> String {
    if x.is_infinite() {
        // Only a ratio against a baseline at 0 is infinite (the values are not negative).
        "∞".into()
    } else if x.abs() >= 100.0 {
        format!("{x:.0}")
    } else {
        format!("{x:.2}")
    }
}

/// The distinct scheme names in `results` a `best:` or `best-time:` baseline picks from,
/// sorted: those of a comma-separated list (`combine@2,combine-64KiB@2`: COMBINE at each
/// chunk size MPBond §6.1 tried), or else every one that starts with `spec`
/// (`kibbutz-split-`: every fixed split of §6.2).
fn candidates<'a>(results: &[&'a RunResult], spec: &str) -> Vec<&'a str> {
    let listed: Vec<&str> = spec.split(',').map(str::trim).collect();
    let picks = |name: &str| {
        if listed.len() > 1 {
            listed.contains(&name)
        } else {
            name.starts_with(spec)
        }
    };
    let mut names: Vec<&str> = results
        .iter()
        .filter(|r| picks(&r.scheme))
        .map(|r| r.scheme.as_str())
        .collect();
    names.sort_unstable();
    names.dedup();
    names
}

/// Checks the claims' names and metrics.
pub fn check(claims: &[ClaimDef]) -> anyhow::Result<()> {
    for c in claims {
        Metric::parse(&c.metric).map_err(|e| anyhow::anyhow!("claim {:?}: {e}", c.what))?;
    }
    Ok(())
}

/// Resamples behind [`Outcome::interval`]: enough for the 2.5th and 97.5th percentiles to
/// sit 25 resamples in from each end.
const RESAMPLES: usize = 1000;

/// The fewest repetitions [`Outcome::interval`] is drawn from: resampling one or two has
/// too few distinct draws to say anything a table of the runs does not.
pub const INTERVAL_MIN_REPS: usize = 3;

/// Our value of `c` from `results`: per (variant, size) case, the scheme's metric (divided
/// by the baseline's for a ratio); the verdict compares the mean over cases with the middle
/// of the paper's value, in the metric's direction. With [`INTERVAL_MIN_REPS`] repetitions
/// or more, a bootstrap over them gives that mean's 95% interval and says whether the
/// verdict holds across it ([`Outcome::firm`]).
pub fn evaluate(c: &ClaimDef, results: &[RunResult]) -> anyhow::Result<Outcome> {
    let m = Metric::parse(&c.metric)?;
    let size = c
        .size
        .as_deref()
        .map(mpbond_core::units::parse_size)
        .transpose()?;
    let all: Vec<&RunResult> = results.iter().collect();
    let (cases, undefined) = cases_of(c, m, size, &all);
    let ours = (!cases.is_empty()).then(|| {
        // From the infinities, so that an infinite ratio (a baseline at 0) stays one: from
        // f64::MAX, 10b's 5th percentile at the interfaces against a kibbutz at 0 read
        // "1.8e308–inf" in 7d9470c's suite.
        let lo = cases.iter().map(|c| c.1).fold(f64::INFINITY, f64::min);
        let hi = cases.iter().map(|c| c.1).fold(f64::NEG_INFINITY, f64::max);
        (lo, hi)
    });
    let mean = (!cases.is_empty()).then(|| mean_of(&cases));
    let verdict = match mean {
        None if undefined => Verdict::NoValue,
        None => Verdict::Missing,
        Some(mean) => verdict_of(c, m, mean),
    };
    let interval = mean.and_then(|_| interval(c, m, size, &all));
    let firm =
        interval.map(|(lo, hi)| verdict_of(c, m, lo) == verdict && verdict_of(c, m, hi) == verdict);
    Ok(Outcome {
        claim: c.clone(),
        cases,
        ours,
        verdict,
        mean,
        interval,
        firm,
    })
}

/// The mean over the cases, the number a verdict weighs.
fn mean_of(cases: &[(String, f64)]) -> f64 {
    cases.iter().map(|c| c.1).sum::<f64>() / cases.len() as f64
}

/// The verdict for our mean `mean` against the middle of the paper's value: more than 2%
/// better beats, within 2% matches (absolutely, 0.02, against a paper value of 0).
fn verdict_of(c: &ClaimDef, m: Metric, mean: f64) -> Verdict {
    let paper = match c.paper {
        PaperValue::One(x) => x,
        PaperValue::Range([a, b]) => (a + b) / 2.0,
    };
    // Relative difference in the "better" direction; a paper value of 0 compares
    // absolutely.
    let scale = paper.abs().max(1e-9);
    let better = if m.lower_is_better() {
        (paper - mean) / scale
    } else {
        (mean - paper) / scale
    };
    if paper == 0.0 {
        if (mean - paper).abs() < 0.02 {
            Verdict::Matches
        } else if better > 0.0 {
            Verdict::Beats
        } else {
            Verdict::Short
        }
    } else if better > 0.02 {
        Verdict::Beats
    } else if better >= -0.02 {
        Verdict::Matches
    } else {
        Verdict::Short
    }
}

/// The 95% interval of the mean over cases, by a bootstrap over repetitions: each resample
/// draws as many repetitions as ran, with replacement, and takes every run of a drawn one,
/// so the schemes that ran side by side in a repetition (at the same offset into the
/// traces, in the same minutes of a shared host) stay together, and a ratio is paired as
/// it was measured. `None` under [`INTERVAL_MIN_REPS`] repetitions. Seeded, so the same
/// runs give the same interval.
fn interval(c: &ClaimDef, m: Metric, size: Option<u64>, runs: &[&RunResult]) -> Option<(f64, f64)> {
    let mut reps: Vec<usize> = runs.iter().map(|r| r.rep).collect();
    reps.sort_unstable();
    reps.dedup();
    if reps.len() < INTERVAL_MIN_REPS {
        return None;
    }
    let by_rep: Vec<Vec<&RunResult>> = reps
        .iter()
        .map(|&k| runs.iter().copied().filter(|r| r.rep == k).collect())
        .collect();
    let mut rng = mpbond_sim::rng::Rng::new(0x6d70_626f_6e64);
    let mut means = Vec::with_capacity(RESAMPLES);
    let mut sample: Vec<&RunResult> = Vec::with_capacity(runs.len());
    for _ in 0..RESAMPLES {
        sample.clear();
        for _ in 0..by_rep.len() {
            sample.extend(&by_rep[rng.below(by_rep.len() as u64) as usize]);
        }
        let (cases, _) = cases_of(c, m, size, &sample);
        if !cases.is_empty() {
            let mean = mean_of(&cases);
            if !mean.is_nan() {
                means.push(mean);
            }
        }
    }
    if means.len() < RESAMPLES / 2 {
        return None;
    }
    // By rank, not interpolated: an infinite ratio (a baseline at 0) stays one.
    means.sort_by(f64::total_cmp);
    let at = |q: f64| means[((q * (means.len() - 1) as f64).round() as usize).min(means.len() - 1)];
    Some((at(0.025), at(0.975)))
}

/// Our value per (variant, size) case of `c` in `runs`, and whether a case had runs but an
/// undefined value (a ratio of 0 to 0, or CPU with every run left out for steal).
fn cases_of(
    c: &ClaimDef,
    m: Metric,
    size: Option<u64>,
    results: &[&RunResult],
) -> (Vec<(String, f64)>, bool) {
    let mut keys: Vec<(Option<String>, u64)> = Vec::new();
    for r in results {
        let k = (r.variant.clone(), r.size);
        let wanted = size.is_none_or(|s| s == r.size)
            && c.variant
                .as_ref()
                .is_none_or(|v| r.variant.as_ref() == Some(v));
        if wanted && !keys.contains(&k) {
            keys.push(k);
        }
    }
    let mut cases = Vec::new();
    let mut undefined = false;
    for (variant, sz) in keys {
        let of = |scheme: &str| -> Vec<&RunResult> {
            results
                .iter()
                .copied()
                .filter(|r| r.variant == variant && r.size == sz && r.scheme == scheme)
                .collect()
        };
        let mine = of(&c.scheme);
        if mine.is_empty() {
            continue;
        }
        let v = m.of_runs(&mine);
        // `best-time:PREFIX` (or `best-time:A,B,C`): the scheme with that prefix (or of that
        // list) that downloaded fastest in this case (the split ratio "found offline", the
        // chunk size with "the best performance"), compared on the claim's metric.
        let best_time =
            c.vs.as_deref()
                .and_then(|b| b.strip_prefix("best-time:"))
                .map(|prefix| {
                    candidates(results, prefix)
                        .into_iter()
                        .map(|n| (n, Metric::Time.of_runs(&of(n))))
                        .filter(|x| x.1.is_finite())
                        .min_by(|a, b| a.1.total_cmp(&b.1))
                        .map(|x| x.0.to_string())
                });
        let vs = match best_time {
            Some(Some(name)) => Some(name),
            Some(None) => continue,
            None => c.vs.clone(),
        };
        // The baseline's value, for a ratio.
        let base = match vs.as_deref().map(|b| (b, b.strip_prefix("best:"))) {
            // `best:PREFIX`: the best of every scheme whose name starts with PREFIX (the
            // split ratio "found offline" of MPBond §6.2).
            Some((_, Some(prefix))) => {
                let vals = candidates(results, prefix)
                    .into_iter()
                    .map(|n| m.of_runs(&of(n)))
                    .filter(|x| x.is_finite());
                Some(if m.lower_is_better() {
                    vals.fold(f64::NAN, f64::min)
                } else {
                    vals.fold(f64::NAN, f64::max)
                })
            }
            Some((b, None)) => {
                let base = of(b);
                if base.is_empty() {
                    continue;
                }
                Some(m.of_runs(&base))
            }
            None => None,
        };
        let own = v;
        let v = base.map_or(v, |b| v / b);
        // A baseline of 0 (kibbutz's 5th-percentile goodput when it stalls) makes our ratio
        // infinite: that is a result (infinitely better, or worse), not a missing one. Both
        // at 0 leave it undefined; a metric the runs do not have leaves it missing.
        if v.is_nan() {
            undefined |= own == 0.0 && base == Some(0.0);
            // CPU measured in every run, but every run left out for the host's steal.
            undefined |= matches!(m, Metric::CpuPrimary | Metric::CpuHelper)
                && mine.iter().any(|r| !r.cpu.is_empty());
            continue;
        }
        let label = match (&variant, sz) {
            (Some(v), 0) => v.clone(),
            (Some(v), s) => format!("{v}, {:.1} MB", s as f64 / 1e6),
            (None, 0) => "-".into(),
            (None, s) => format!("{:.1} MB", s as f64 / 1e6),
        };
        cases.push((label, v));
    }
    (cases, undefined)
}

/// One sentence on how many verdicts hold across their intervals ([`Outcome::firm`]), and
/// which do not; empty when no claim has an interval.
pub fn firmness(outcomes: &[(String, Outcome)]) -> String {
    let with: Vec<&(String, Outcome)> = outcomes.iter().filter(|(_, o)| o.firm.is_some()).collect();
    if with.is_empty() {
        return String::new();
    }
    let loose: Vec<String> = with
        .iter()
        .filter(|(_, o)| o.firm == Some(false))
        .map(|(e, o)| format!("{} ({})", e.split(' ').next().unwrap_or(e), o.claim.what))
        .collect();
    let mut line = format!(
        "Of the {} verdicts with a 95% interval (claims with {INTERVAL_MIN_REPS} repetitions or more), {} hold across it",
        with.len(),
        with.len() - loose.len()
    );
    if loose.is_empty() {
        line.push('.');
    } else {
        line.push_str(&format!(
            "; the runs' spread could turn these: {}.",
            loose.join("; ")
        ));
    }
    line
}

/// A Markdown table of outcomes: claim, the paper's value, ours (range over cases), verdict,
/// the mean the verdict weighs with its 95% interval, and whether the verdict holds across it.
pub fn table(outcomes: &[(String, Outcome)]) -> String {
    use std::fmt::Write;
    let mut o = String::from(
        "| experiment | claim | metric | paper | ours | verdict | mean [95% interval] | firm |\n| --- | --- | --- | --- | --- | --- | --- | --- |\n",
    );
    for (exp, x) in outcomes {
        let metric = match &x.claim.vs {
            Some(b) => format!("{} {} ÷ {b}", x.claim.metric, x.claim.scheme),
            None => format!("{} {}", x.claim.metric, x.claim.scheme),
        };
        let _ = writeln!(
            o,
            "| {exp} | {} | {metric} | {} | {} | {} | {} | {} |",
            x.claim.what,
            x.paper_text(),
            x.ours_text(),
            match x.verdict {
                Verdict::Beats => "**beats**",
                Verdict::Matches => "matches",
                Verdict::Short => "short",
                Verdict::Missing => "not run",
                Verdict::NoValue => "no value",
            },
            x.mean_text(),
            match x.firm {
                Some(true) => "yes",
                Some(false) => "no",
                None => "-",
            }
        );
    }
    o
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::run::SubflowResult;
    use crate::scenario::WorkloadKind;

    /// A download run with two subflows, for tests here and in [`crate::report`].
    pub(crate) fn run(scheme: &str, size: u64, seconds: f64, energy: f64) -> RunResult {
        RunResult {
            scheme: scheme.into(),
            cc: "cubic, HyStart on".into(),
            workload: WorkloadKind::Download,
            size,
            rep: 0,
            trace_offset_s: 0.0,
            seconds,
            bytes: size,
            mean_mbps: size as f64 * 8.0 / seconds / 1e6,
            intact: true,
            sha256: String::new(),
            lower_bound_s: 1.0,
            bound_mbps: 1.0,
            bound_samples_mbps: Vec::new(),
            ratio_to_bound: seconds,
            throughput_mbps: vec![1.0, 2.0, 3.0],
            arrival_mbps: vec![],
            subflows: vec![
                SubflowResult {
                    link: "ps".into(),
                    completion_s: Some(seconds),
                    bytes: size / 2,
                    progress: vec![],
                },
                SubflowResult {
                    link: "p11".into(),
                    completion_s: Some(seconds - 0.5),
                    bytes: size / 2,
                    progress: vec![],
                },
            ],
            links: vec![],
            energy: vec![],
            energy_j: energy,
            transfer_energy_j: energy,
            transfer_energy_linear_wifi_j: None,
            progress: vec![],
            variant: None,
            video: None,
            chunk_times: vec![],
            cpu: vec![],
            host_cpu: None,
            set_aside_steal: vec![],
            sched: None,
            kernel: Default::default(),
        }
    }

    /// `n` repetitions of mpbond and kibbutz at 1 MB, kibbutz's time `base(rep)` and
    /// mpbond's `ratio(rep)` of it.
    fn paired(
        n: usize,
        base: impl Fn(usize) -> f64,
        ratio: impl Fn(usize) -> f64,
    ) -> Vec<RunResult> {
        let mut rs = Vec::new();
        for rep in 0..n {
            for (scheme, t) in [("kibbutz", base(rep)), ("mpbond", base(rep) * ratio(rep))] {
                let mut r = run(scheme, 1_000_000, t, 10.0);
                r.rep = rep;
                rs.push(r);
            }
        }
        rs
    }

    #[test]
    fn the_interval_resamples_repetitions_and_keeps_their_runs_paired() {
        let c = claim("time", Some("kibbutz"), PaperValue::One(0.9));
        // Each repetition at its own point of the traces (kibbutz 1-10 s), mpbond at 0.8 of
        // kibbutz in every one: paired, every resample's ratio is 0.8, however far the
        // times spread; taken unpaired it would spread over most of 0.3-2.
        let rs = paired(8, |k| 1.0 + k as f64 * 1.3, |_| 0.8);
        let o = evaluate(&c, &rs).unwrap();
        let (lo, hi) = o.interval.expect("8 repetitions give an interval");
        assert!(
            (lo - 0.8).abs() < 1e-9 && (hi - 0.8).abs() < 1e-9,
            "{lo} {hi}"
        );
        assert_eq!((o.verdict, o.firm), (Verdict::Beats, Some(true)));
        assert_eq!(o.mean_text(), "0.80 [0.80, 0.80]");

        // Ratios spread around the paper's 0.9, from 0.84 to 0.96: the mean matches, but
        // the interval reaches past the 2% band on a side, so the verdict is not firm.
        let rs = paired(8, |_| 2.0, |k| 0.84 + 0.12 * k as f64 / 7.0);
        let o = evaluate(&c, &rs).unwrap();
        let (lo, hi) = o.interval.unwrap();
        let mean = o.mean.unwrap();
        assert!(lo < mean && mean < hi, "{lo} {mean} {hi}");
        assert!(
            lo > 0.84 && hi < 0.96,
            "the mean spreads less than the runs: {lo} {hi}"
        );
        assert_eq!((o.verdict, o.firm), (Verdict::Matches, Some(false)));
        // The same runs give the same interval.
        assert_eq!(evaluate(&c, &rs).unwrap().interval, o.interval);

        // Two repetitions are too few: the mean without an interval.
        let o = evaluate(&c, &paired(2, |_| 2.0, |k| 0.7 + 0.1 * k as f64)).unwrap();
        assert_eq!((o.interval, o.firm), (None, None));
        assert_eq!(o.mean_text(), "0.75");
        assert!(table(&[("01".into(), o.clone())]).contains("| 0.75 | - |"));
        // The summary's sentence counts the verdicts with an interval and names the loose.
        let firm = evaluate(&c, &paired(8, |k| 1.0 + k as f64, |_| 0.8)).unwrap();
        let loose = evaluate(&c, &paired(8, |_| 2.0, |k| 0.84 + 0.12 * k as f64 / 7.0)).unwrap();
        let line = firmness(&[
            ("07-stable (§6.3)".into(), firm),
            ("10a-varying (§6.4)".into(), loose),
            ("11d (§6.5)".into(), o),
        ]);
        assert_eq!(
            line,
            "Of the 2 verdicts with a 95% interval (claims with 3 repetitions or more), 1 hold across it; the runs' spread could turn these: 10a-varying (t)."
        );
        assert_eq!(firmness(&[]), "");
    }

    fn claim(metric: &str, vs: Option<&str>, paper: PaperValue) -> ClaimDef {
        ClaimDef {
            what: "t".into(),
            metric: metric.into(),
            scheme: "mpbond".into(),
            vs: vs.map(String::from),
            paper,
            size: None,
            variant: None,
        }
    }

    #[test]
    fn ratios_per_case_and_verdicts_follow_the_metric_direction() {
        let rs = vec![
            run("mpbond", 1_000_000, 2.0, 10.0),
            run("kibbutz", 1_000_000, 2.5, 10.0),
            run("mpbond", 2_000_000, 3.0, 10.0),
            run("kibbutz", 2_000_000, 4.0, 12.5),
        ];
        // Ratios 0.8 and 0.75, mean 0.775; the paper's 0.89-0.95 is worse: we beat it.
        let o = evaluate(
            &claim("time", Some("kibbutz"), PaperValue::Range([0.89, 0.95])),
            &rs,
        )
        .unwrap();
        assert_eq!(o.cases.len(), 2);
        assert_eq!(o.ours, Some((0.75, 0.8)));
        assert_eq!(o.verdict, Verdict::Beats);
        // Energy ratios 1.0 and 0.8, mean 0.9 against 0.8: short.
        let o = evaluate(&claim("energy", Some("kibbutz"), PaperValue::One(0.8)), &rs).unwrap();
        assert_eq!(o.verdict, Verdict::Short);
        // A baseline at 0 gives an infinite ratio, better for goodput, worse for time.
        let mut stalled = rs.clone();
        for r in stalled.iter_mut().filter(|r| r.scheme == "kibbutz") {
            r.mean_mbps = 0.0;
            r.seconds = 0.0;
        }
        let o = evaluate(
            &claim("mean_mbps", Some("kibbutz"), PaperValue::One(1.9)),
            &stalled,
        );
        let o = o.unwrap();
        assert_eq!(o.verdict, Verdict::Beats);
        assert_eq!(o.ours, Some((f64::INFINITY, f64::INFINITY)));
        assert_eq!(o.ours_text(), "∞");
        let o = evaluate(
            &claim("time", Some("kibbutz"), PaperValue::One(0.9)),
            &stalled,
        );
        assert_eq!(o.unwrap().verdict, Verdict::Short);
        // Higher is better for goodput: 4 and 5.33 Mbit/s against 4.5 beats on average.
        let o = evaluate(&claim("mean_mbps", None, PaperValue::One(4.5)), &rs).unwrap();
        assert_eq!(o.verdict, Verdict::Beats);
        // The gap between subflows: 0.5 s in every run.
        let o = evaluate(&claim("gap", None, PaperValue::One(0.5)), &rs).unwrap();
        assert_eq!(o.verdict, Verdict::Matches);
        // A size filter keeps one case; a missing baseline gives no value.
        let mut c = claim("time", Some("kibbutz"), PaperValue::One(0.8));
        c.size = Some("2MB".into());
        assert_eq!(evaluate(&c, &rs).unwrap().cases.len(), 1);
        let o = evaluate(&claim("time", Some("combine"), PaperValue::One(0.8)), &rs).unwrap();
        assert_eq!(o.verdict, Verdict::Missing);
        assert!(Metric::parse("speed").is_err());
        // best: the lowest of the matching baselines.
        let mut rs2 = rs.clone();
        rs2.push(run("kibbutz-fast", 1_000_000, 1.0, 10.0));
        rs2.push(run("kibbutz-fast", 2_000_000, 2.0, 10.0));
        let o = evaluate(
            &claim("time", Some("best:kibbutz"), PaperValue::One(1.0)),
            &rs2,
        )
        .unwrap();
        assert_eq!(o.ours, Some((1.5, 2.0)));
        // best-time: the fastest of them, compared on energy: kibbutz-fast (10 J each).
        let mut rs3 = rs2.clone();
        rs3.push(run("kibbutz-slow", 1_000_000, 9.0, 1.0));
        rs3.push(run("kibbutz-slow", 2_000_000, 9.0, 1.0));
        let o = evaluate(
            &claim("energy", Some("best-time:kibbutz-"), PaperValue::One(1.0)),
            &rs3,
        )
        .unwrap();
        assert_eq!(o.ours, Some((1.0, 1.0)));
        // best-time over a list, one of which ran at 1 MB only (COMBINE's smaller chunks for
        // small files, MPBond §6.1): at 1 MB the faster kibbutz-slow is out of the list, so
        // kibbutz-fast (10 J) is picked; at 2 MB only kibbutz (12.5 J) is there to pick.
        let mut rs4 = rs.clone();
        rs4.push(run("kibbutz-fast", 1_000_000, 1.0, 5.0));
        rs4.push(run("kibbutz-slow", 1_000_000, 0.5, 1.0));
        let o = evaluate(
            &claim(
                "energy",
                Some("best-time:kibbutz, kibbutz-fast"),
                PaperValue::One(1.0),
            ),
            &rs4,
        )
        .unwrap();
        assert_eq!(o.cases.len(), 2);
        assert_eq!(o.cases[0].1, 2.0, "{:?}", o.cases);
        assert_eq!(o.cases[1].1, 0.8, "{:?}", o.cases);
        // best over the same list, on time: 2/1 and 3/4.
        let o = evaluate(
            &claim(
                "time",
                Some("best:kibbutz,kibbutz-fast"),
                PaperValue::One(1.0),
            ),
            &rs4,
        )
        .unwrap();
        assert_eq!(o.ours, Some((0.75, 2.0)));
    }

    /// CPU shares: the primary's daemon, the busiest helper's, and nothing for a scheme
    /// without daemons (its runs give no case rather than a 0).
    #[test]
    fn cpu_is_a_share_of_one_core_over_the_download() {
        use crate::cpu::DaemonCpu;
        let cpu = |d: &str, s: f64| DaemonCpu {
            device: d.into(),
            cpu_s: s,
            wait_s: 0.0,
            sys_s: 0.0,
        };
        let mut m = run("mpbond", 1_000_000, 2.0, 10.0);
        m.cpu = vec![
            cpu("proxy", 1.0),
            cpu("primary", 0.1),
            cpu("helper1", 0.04),
            cpu("helper2", 0.06),
        ];
        let k = run("kibbutz", 1_000_000, 2.5, 10.0);
        let rs = vec![m, k];
        let o = evaluate(&claim("cpu_primary", None, PaperValue::One(0.04)), &rs).unwrap();
        assert!((o.ours.unwrap().0 - 0.05).abs() < 1e-12);
        assert_eq!(o.verdict, Verdict::Short);
        let o = evaluate(&claim("cpu_helper", None, PaperValue::One(0.04)), &rs).unwrap();
        assert!((o.ours.unwrap().0 - 0.03).abs() < 1e-12);
        assert_eq!(o.verdict, Verdict::Beats);
        let mut c = claim("cpu_primary", None, PaperValue::One(0.04));
        c.scheme = "kibbutz".into();
        assert_eq!(evaluate(&c, &rs).unwrap().verdict, Verdict::Missing);

        // A run in which the hypervisor stole more than 3% of a core is left out: with a
        // quiet run beside it, the quiet run's figure stands; alone, the claim has no value.
        let host = |steal_s: f64| crate::cpu::HostCpu {
            steal_s,
            ..Default::default()
        };
        let mut quiet = rs[0].clone();
        quiet.host_cpu = Some(host(0.05));
        let mut stolen = rs[0].clone();
        stolen.host_cpu = Some(host(0.5));
        stolen.cpu = vec![cpu("primary", 0.4)];
        let both = vec![quiet, stolen.clone()];
        let o = evaluate(&claim("cpu_primary", None, PaperValue::One(0.04)), &both).unwrap();
        assert!((o.ours.unwrap().0 - 0.05).abs() < 1e-12, "{:?}", o.ours);
        let o = evaluate(
            &claim("cpu_primary", None, PaperValue::One(0.04)),
            &[stolen],
        )
        .unwrap();
        assert_eq!((o.ours, o.verdict), (None, Verdict::NoValue));

        // A chunks workload's `seconds` is its mean chunk time (1 s here), not the 90 s its
        // CPU and steal were measured over: the shares take the measured window, and for
        // results written before it, the probes' count (one every 100 ms).
        let mut chunks = rs[0].clone();
        chunks.workload = WorkloadKind::Chunks;
        chunks.seconds = 1.0;
        chunks.cpu = vec![cpu("primary", 1.8)];
        chunks.host_cpu = Some(crate::cpu::HostCpu {
            window_s: 90.0,
            ..host(1.8)
        });
        assert!(!chunks.stolen(), "1.8 s stolen in 90 s is 2% of a core");
        let o = evaluate(
            &claim("cpu_primary", None, PaperValue::One(0.04)),
            std::slice::from_ref(&chunks),
        )
        .unwrap();
        assert!((o.ours.unwrap().0 - 0.02).abs() < 1e-12, "{:?}", o.ours);
        chunks.host_cpu = Some(crate::cpu::HostCpu {
            steal_s: 3.6,
            probes: 900,
            ..Default::default()
        });
        assert!((chunks.cpu_window_s() - 90.0).abs() < 1e-9);
        assert!(chunks.stolen(), "3.6 s stolen in 90 s is 4% of a core");
        // A download's window falls back to its own seconds.
        let mut old = rs[0].clone();
        old.host_cpu = Some(host(0.05));
        assert_eq!(old.cpu_window_s(), old.seconds);
    }

    /// The arrival claims pool the runs' arrival samples, independently of the goodput's:
    /// an application that read nothing in an interval can still have had its radios busy.
    #[test]
    fn arrival_claims_pool_the_arrival_samples() {
        let mut r = run("mpbond", 0, 1.0, 1.0);
        r.workload = WorkloadKind::Bulk;
        r.throughput_mbps = vec![0.0, 0.0, 8.0, 8.0];
        r.arrival_mbps = vec![6.0, 7.0, 9.0, 9.0];
        let mut k = r.clone();
        k.scheme = "kibbutz".into();
        k.arrival_mbps = vec![2.0, 3.0, 9.0, 9.0];
        let rs = [r, k];
        let p5 = evaluate(&claim("p5_arrival_mbps", None, PaperValue::One(6.0)), &rs).unwrap();
        assert!((p5.ours.unwrap().0 - 6.15).abs() < 1e-9, "{:?}", p5.ours);
        assert_eq!(p5.verdict, Verdict::Beats);
        let vs = claim("median_arrival_mbps", Some("kibbutz"), PaperValue::One(1.0));
        assert_eq!(
            evaluate(&vs, &rs).unwrap().ours,
            Some((8.0 / 6.0, 8.0 / 6.0))
        );
        // The goodput's own 5th percentile is 0.
        let g = evaluate(&claim("p5_mbps", None, PaperValue::One(6.0)), &rs).unwrap();
        assert_eq!(g.ours, Some((0.0, 0.0)));
        // ... and kibbutz's too: the ratio has no value, though both schemes ran.
        let o = evaluate(
            &claim("p5_mbps", Some("kibbutz"), PaperValue::One(1.9)),
            &rs,
        )
        .unwrap();
        assert_eq!((o.ours, o.verdict), (None, Verdict::NoValue));
        assert!(table(&[("10b".into(), o)]).contains("| no value |"));
        // Results written before arrival samples existed give no value rather than a 0.
        let mut old = rs.to_vec();
        old.iter_mut().for_each(|r| r.arrival_mbps.clear());
        let o = evaluate(&claim("p5_arrival_mbps", None, PaperValue::One(6.0)), &old).unwrap();
        assert_eq!(o.verdict, Verdict::Missing);
    }
    /// Cellular bytes count the `ps` and `hsK` links in both directions, not the pipes or a
    /// second primary link: as IP bytes (`cell_mb`) or as TCP payload (`cell_payload_mb`,
    /// set against a file's size); results from before the payload was recorded give no
    /// value rather than 0.
    #[test]
    fn cellular_bytes_count_the_cellular_links_with_or_without_headers() {
        use crate::run::LinkBytes;
        let link = |name: &str, down: u64, up: u64, payload: Option<u64>| LinkBytes {
            link: name.into(),
            down,
            up,
            drops: 0,
            payload,
            down_offered: None,
            down_unused: None,
        };
        let mut r = run("mpbond", 4_000_000, 1.0, 1.0);
        r.links = vec![
            link("ps", 2_100_000, 50_000, Some(2_010_000)),
            link("ps2", 9_000_000, 0, Some(9_000_000)),
            link("hs1", 2_060_000, 40_000, Some(2_000_000)),
            link("p11", 2_070_000, 40_000, Some(2_000_000)),
        ];
        let rs = [r];
        let ip = evaluate(&claim("cell_mb", None, PaperValue::One(4.0)), &rs).unwrap();
        assert!((ip.ours.unwrap().0 - 4.25).abs() < 1e-9, "{:?}", ip.ours);
        assert_eq!(ip.verdict, Verdict::Short);
        let data = evaluate(&claim("cell_payload_mb", None, PaperValue::One(4.0)), &rs).unwrap();
        assert!(
            (data.ours.unwrap().0 - 4.01).abs() < 1e-9,
            "{:?}",
            data.ours
        );
        assert_eq!(data.verdict, Verdict::Matches);
        let mut old = rs.to_vec();
        old[0].links.iter_mut().for_each(|l| l.payload = None);
        let o = evaluate(&claim("cell_payload_mb", None, PaperValue::One(4.0)), &old).unwrap();
        assert_eq!(o.verdict, Verdict::Missing);
    }
}
