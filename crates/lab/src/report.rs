//! Results: `results.json` (every raw number), `report.md` (a table per size with mean, stdev
//! and ratio to the lower bound), and SVG plots.

use std::fmt::Write;
use std::path::Path;

use crate::energy::Radio;
use crate::run::RunResult;
use crate::scenario::WorkloadKind;

/// Mean and sample standard deviation.
pub fn mean_sd(v: &[f64]) -> (f64, f64) {
    if v.is_empty() {
        return (f64::NAN, f64::NAN);
    }
    let m = v.iter().sum::<f64>() / v.len() as f64;
    let sd = if v.len() > 1 {
        (v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (v.len() - 1) as f64).sqrt()
    } else {
        0.0
    };
    (m, sd)
}

/// The `q` quantile (0..1) of `v`, by linear interpolation.
pub fn quantile(v: &[f64], q: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let pos = q.clamp(0.0, 1.0) * (s.len() - 1) as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    s[lo] + (s[hi] - s[lo]) * (pos - lo as f64)
}

/// A table cell "median / 5th percentile" of samples, to two decimals.
pub fn median_p5_cell(v: &[f64]) -> String {
    format!("{:.2} / {:.2}", quantile(v, 0.5), quantile(v, 0.05))
}

/// Results of one (scheme), in the order schemes were given, for one size.
fn by_scheme<'a>(
    schemes: &'a [String],
    results: &'a [RunResult],
    size: u64,
) -> Vec<(&'a str, Vec<&'a RunResult>)> {
    schemes
        .iter()
        .map(|s| {
            (
                s.as_str(),
                results
                    .iter()
                    .filter(|r| r.size == size && &r.scheme == s)
                    .collect::<Vec<_>>(),
            )
        })
        .filter(|(_, v)| !v.is_empty())
        .collect()
}

/// Every goodput sample of these runs, pooled.
fn pooled(rs: &[&RunResult]) -> Vec<f64> {
    rs.iter()
        .flat_map(|r| r.throughput_mbps.iter().copied())
        .collect()
}

fn sizes(results: &[RunResult]) -> Vec<u64> {
    let mut sizes: Vec<u64> = results.iter().map(|r| r.size).collect();
    sizes.sort_unstable();
    sizes.dedup();
    sizes
}

fn size_label(r: &RunResult) -> String {
    r.workload.label(r.size, r.seconds)
}

/// The comparison tables, one block per file size (or one for a bulk run), in the order
/// schemes were given: time (or goodput) with its ratio to the fluid bound and to the
/// baselines, then radio energy per device.
pub fn table(name: &str, schemes: &[String], results: &[RunResult]) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "## {name}\n");
    for size in sizes(results) {
        let groups = by_scheme(schemes, results, size);
        let Some(first) = groups.first().map(|g| g.1[0]) else {
            continue;
        };
        let _ = writeln!(o, "### {}\n", size_label(first));
        let mean_of = |name: &str, f: fn(&RunResult) -> f64| {
            groups
                .iter()
                .find(|(s, _)| *s == name)
                .map(|(_, v)| mean_sd(&v.iter().map(|r| f(r)).collect::<Vec<_>>()).0)
        };
        let vs = |m: f64, base: Option<f64>| match base {
            Some(x) if x > 0.0 && m.is_finite() => format!("{:.2}", m / x),
            _ => "-".into(),
        };
        if first.workload == WorkloadKind::Chunks {
            let _ = writeln!(
                o,
                "| scheme | runs | chunks | primary's chunk time (s) | helper1's chunk time (s) | all (s) | transfer energy (J) | intact |"
            );
            let _ = writeln!(o, "|{}", " --- |".repeat(8));
            for (s, rs) in &groups {
                let of = |d: &str| -> Vec<f64> {
                    rs.iter()
                        .flat_map(|r| {
                            r.chunk_times
                                .iter()
                                .filter(|(x, _)| x == d)
                                .flat_map(|(_, t)| t.iter().copied())
                        })
                        .collect()
                };
                let (p, h) = (of("primary"), of("helper1"));
                let ms = |v: &[f64]| {
                    let (m, sd) = mean_sd(v);
                    if v.is_empty() {
                        "-".to_string()
                    } else {
                        format!("{m:.2} ± {sd:.2}")
                    }
                };
                let all: Vec<f64> = p.iter().chain(h.iter()).copied().collect();
                let e = mean_sd(&rs.iter().map(|r| r.transfer_energy_j).collect::<Vec<_>>()).0;
                let _ = writeln!(
                    o,
                    "| {s} | {} | {} | {} | {} | {} | {e:.1} | {}/{} |",
                    rs.len(),
                    all.len(),
                    ms(&p),
                    ms(&h),
                    ms(&all),
                    rs.iter().filter(|r| r.intact).count(),
                    rs.len()
                );
            }
        } else if first.workload == WorkloadKind::Video {
            let _ = writeln!(
                o,
                "| scheme | runs | mean bitrate (Mbit/s) | stall ratio | fluid / window-limited bound | stall (s) | startup (s) | switches | transfer energy (J) | intact |"
            );
            let _ = writeln!(o, "|{}", " --- |".repeat(10));
            for (s, rs) in &groups {
                let v = |f: fn(&crate::video::VideoStats) -> f64| {
                    mean_sd(
                        &rs.iter()
                            .filter_map(|r| r.video.as_ref().map(f))
                            .collect::<Vec<_>>(),
                    )
                };
                let (br, brsd) = v(|x| x.mean_bitrate_mbps);
                let (sr, srsd) = v(|x| x.stall_ratio);
                let e = mean_sd(&rs.iter().map(|r| r.transfer_energy_j).collect::<Vec<_>>()).0;
                // Mean over the runs of a bound, "-" where the runs have none.
                let mean_bound = |f: fn(&crate::video::VideoStats) -> Option<f64>| {
                    let b: Vec<f64> = rs
                        .iter()
                        .filter_map(|r| r.video.as_ref().and_then(f))
                        .collect();
                    if b.is_empty() {
                        "-".to_string()
                    } else {
                        format!("{:.0}%", mean_sd(&b).0 * 100.0)
                    }
                };
                let bound = format!(
                    "{} / {}",
                    mean_bound(|v| v.stall_ratio_bound),
                    mean_bound(|v| v.stall_ratio_window_bound)
                );
                let _ = writeln!(
                    o,
                    "| {s} | {} | {br:.2} ± {brsd:.2} | {:.0}% ± {:.0} | {bound} | {:.1} | {:.1} | {:.1} | {e:.1} | {}/{} |",
                    rs.len(),
                    sr * 100.0,
                    srsd * 100.0,
                    v(|x| x.stall_s).0,
                    v(|x| x.startup_s).0,
                    v(|x| x.switches as f64).0,
                    rs.iter().filter(|r| r.intact).count(),
                    rs.len()
                );
            }
        } else if first.workload == WorkloadKind::Bulk {
            let _ = writeln!(
                o,
                "| scheme | runs | goodput (Mbit/s), mean ± sd | median of samples | 5th pct | fluid bound | fluid median / 5th pct | arrivals median / 5th pct | bound ÷ goodput | median ÷ kibbutz | 5th pct ÷ kibbutz | transfer energy (J) | intact |"
            );
            let _ = writeln!(o, "|{}", " --- |".repeat(13));
            let pooled = |v: &[&RunResult]| -> Vec<f64> {
                v.iter()
                    .flat_map(|r| r.throughput_mbps.iter().copied())
                    .collect()
            };
            let kib = groups
                .iter()
                .find(|(s, _)| *s == "kibbutz")
                .map(|(_, v)| pooled(v));
            for (s, rs) in &groups {
                let (m, sd) = mean_sd(&rs.iter().map(|r| r.mean_mbps).collect::<Vec<_>>());
                let all = pooled(rs);
                let (med, p5) = (quantile(&all, 0.5), quantile(&all, 0.05));
                let b = mean_sd(&rs.iter().map(|r| r.bound_mbps).collect::<Vec<_>>()).0;
                // The fluid's samples (what the links offered) and what reached the
                // primary's interfaces (`run::arrival_samples`), beside the goodput's.
                let median_p5 = |of: fn(&RunResult) -> &[f64]| {
                    let v: Vec<f64> = rs.iter().flat_map(|r| of(r).iter().copied()).collect();
                    if v.is_empty() {
                        "-".to_string()
                    } else {
                        median_p5_cell(&v)
                    }
                };
                let fluid = median_p5(|r| &r.bound_samples_mbps);
                let arrivals = median_p5(|r| &r.arrival_mbps);
                let ratio = mean_sd(&rs.iter().map(|r| r.ratio_to_bound).collect::<Vec<_>>()).0;
                let e = mean_sd(&rs.iter().map(|r| r.transfer_energy_j).collect::<Vec<_>>()).0;
                let _ = writeln!(
                    o,
                    "| {s} | {} | {m:.2} ± {sd:.2} | {med:.2} | {p5:.2} | {b:.2} | {fluid} | {arrivals} | {ratio:.2} | {} | {} | {e:.1} | {}/{} |",
                    rs.len(),
                    vs(med, kib.as_ref().map(|k| quantile(k, 0.5))),
                    vs(p5, kib.as_ref().map(|k| quantile(k, 0.05))),
                    rs.iter().filter(|r| r.intact).count(),
                    rs.len()
                );
            }
        } else {
            let _ = writeln!(
                o,
                "| scheme | runs | time (s), mean ± sd | lower bound (s) | ratio to bound | ÷ single | ÷ kibbutz | ÷ combine | transfer energy (J) | with tails (J) | intact |"
            );
            let _ = writeln!(o, "|{}", " --- |".repeat(11));
            let single = mean_of("single", |r| r.seconds);
            let kib = mean_of("kibbutz", |r| r.seconds);
            let com = mean_of("combine", |r| r.seconds);
            for (s, rs) in &groups {
                let (m, sd) = mean_sd(&rs.iter().map(|r| r.seconds).collect::<Vec<_>>());
                let (te, tesd) =
                    mean_sd(&rs.iter().map(|r| r.transfer_energy_j).collect::<Vec<_>>());
                let e = mean_sd(&rs.iter().map(|r| r.energy_j).collect::<Vec<_>>()).0;
                // Means of the per-run bound and ratio: with `trace_step` every repetition
                // meets other conditions, so the bound differs from run to run.
                let lb = mean_sd(&rs.iter().map(|r| r.lower_bound_s).collect::<Vec<_>>()).0;
                let ratio = mean_sd(&rs.iter().map(|r| r.ratio_to_bound).collect::<Vec<_>>()).0;
                let _ = writeln!(
                    o,
                    "| {s} | {} | {m:.2} ± {sd:.2} | {lb:.2} | {ratio:.2} | {} | {} | {} | {te:.2} ± {tesd:.2} | {e:.1} | {}/{} |",
                    rs.len(),
                    vs(m, single),
                    vs(m, kib),
                    vs(m, com),
                    rs.iter().filter(|r| r.intact).count(),
                    rs.len()
                );
            }
        }
        let _ = writeln!(o);
        steal_line(&mut o, &groups);
        // Energy per device.
        let devices = device_names(results);
        let _ = writeln!(
            o,
            "Transfer energy per device (J, mean over runs, final tails not included; model in docs/lab.md):\n\n| scheme | {} | total |",
            devices.join(" | ")
        );
        let _ = writeln!(o, "|{}", " --- |".repeat(devices.len() + 2));
        for (s, rs) in &groups {
            let per = device_means(rs, &devices);
            let _ = writeln!(
                o,
                "| {s} | {} | {:.1} |",
                per.iter()
                    .map(|j| format!("{j:.1}"))
                    .collect::<Vec<_>>()
                    .join(" | "),
                per.iter().sum::<f64>()
            );
        }
        let _ = writeln!(o);
        interface_energy(&mut o, &groups);
        daemon_cpu(&mut o, &groups);
        host_load(&mut o, &groups);
        sender_activity(&mut o, &groups);
        kernel_counters(&mut o, &groups);
        // Bytes per device: what each device's WAN link carried toward it.
        let _ = writeln!(
            o,
            "Bytes over each device's WAN link toward it (MB, mean over runs):\n\n| scheme | {} |",
            devices.join(" | ")
        );
        let _ = writeln!(o, "|{}", " --- |".repeat(devices.len() + 1));
        for (s, rs) in &groups {
            let per: Vec<String> = devices
                .iter()
                .map(|d| {
                    let v: Vec<f64> = rs.iter().map(|r| wan_bytes(r, d) as f64 / 1e6).collect();
                    format!("{:.2}", mean_sd(&v).0)
                })
                .collect();
            let _ = writeln!(o, "| {s} | {} |", per.join(" | "));
        }
        let _ = writeln!(o);
        link_capacity(&mut o, &groups);
        segment_loss(&mut o, &groups);
        per_repetition(&mut o, &groups, first.workload);
    }
    o
}

/// What each link offered toward the primary over the workload, and the share of it that
/// passed while the link stood idle with nothing queued: capacity no sender used. A direct
/// measure of where a scheme falls short of the links (11d in docs/evaluation.md), where
/// goodput alone cannot tell a link left idle from one whose bytes were lost or sent twice.
/// An HS-Path's capacity above its pipe's counts too (a helper can buffer only what PAMS
/// gives it), and so do the first round trips, before any data can be on the way.
fn link_capacity(o: &mut String, groups: &[(&str, Vec<&RunResult>)]) {
    let mut links: Vec<String> = Vec::new();
    for (_, rs) in groups {
        for l in rs.iter().flat_map(|r| &r.links) {
            if l.down_offered.is_some() && !links.contains(&l.link) {
                links.push(l.link.clone());
            }
        }
    }
    if links.is_empty() {
        return;
    }
    let _ = writeln!(
        o,
        "Capacity each link offered toward the primary over the workload, and how much of it \
         passed while the link stood idle, nothing queued (MB offered, % unused; mean over \
         runs; crate::emu::DirReport::capacity):\n\n| scheme | {} |",
        links.join(" | ")
    );
    let _ = writeln!(o, "|{}", " --- |".repeat(links.len() + 1));
    for (s, rs) in groups {
        let cells: Vec<String> = links
            .iter()
            .map(|name| {
                let (mut offered, mut unused, mut carried, mut n) = (0.0, 0.0, 0, 0);
                for l in rs.iter().flat_map(|r| &r.links).filter(|l| &l.link == name) {
                    if let (Some(a), Some(b)) = (l.down_offered, l.down_unused) {
                        offered += a;
                        unused += b;
                        carried += l.down;
                        n += 1;
                    }
                }
                // A link the scheme does not use (a helper's, for a single phone) is idle
                // by design, not capacity left on the table.
                if n == 0 || offered <= 0.0 || carried == 0 {
                    return "-".into();
                }
                format!(
                    "{:.1} ({:.0}%)",
                    offered / n as f64 / 1e6,
                    100.0 * unused / offered
                )
            })
            .collect();
        let _ = writeln!(o, "| {s} | {} |", cells.join(" | "));
    }
    let _ = writeln!(o);
}

/// One video run's segments against their links ([`segment_loss_of`]).
#[derive(Debug, Clone, PartialEq)]
pub struct SegmentLoss {
    /// The time from each request to the segment's last byte, summed, seconds.
    pub took_s: f64,
    /// The part of it beyond the earliest end the links allowed each segment from its
    /// request (`run::segment_bounds`), seconds.
    pub lost_s: f64,
    /// Per segment (numbered from 1): when it was asked for and what it lost, seconds.
    pub per_segment: Vec<(usize, f64, f64)>,
}

/// A video run's [`SegmentLoss`]; `None` without segment bounds. A segment the links could
/// not deliver within the bound's horizon counts in neither sum.
pub fn segment_loss_of(r: &RunResult) -> Option<SegmentLoss> {
    let v = r.video.as_ref()?;
    if v.segment_bound_s.is_empty() {
        return None;
    }
    let (mut took, mut lost, mut per) = (0.0, 0.0, Vec::new());
    for (i, (&asked, &bound)) in v.asked_s.iter().zip(&v.segment_bound_s).enumerate() {
        let Some(&(done, _)) = r.progress.get(i + 1) else {
            break;
        };
        if !bound.is_finite() {
            continue;
        }
        took += done - asked;
        lost += done - bound;
        per.push((i + 1, asked, done - bound));
    }
    Some(SegmentLoss {
        took_s: took,
        lost_s: lost,
        per_segment: per,
    })
}

/// Where a video run lost time against its links: per scheme, the time its segments took
/// from request to last byte, and how much of it went beyond what the links allowed each
/// segment from its own request (`run::segment_bounds`), with the worst segments. The
/// stall bound says how much a scheme could have stalled at best; this says where it lost
/// the difference: in a few segments (an outage, a rate collapse with a deep queue) or a
/// little in every one (each segment's end, where the paths must finish together).
fn segment_loss(o: &mut String, groups: &[(&str, Vec<&RunResult>)]) {
    let rows: Vec<String> = groups
        .iter()
        .filter_map(|(s, rs)| {
            let per: Vec<_> = rs
                .iter()
                .filter_map(|r| segment_loss_of(r).map(|l| (r.rep, l)))
                .collect();
            if per.is_empty() {
                return None;
            }
            let n = per.len() as f64;
            let took: f64 = per.iter().map(|(_, l)| l.took_s).sum::<f64>() / n;
            let lost: f64 = per.iter().map(|(_, l)| l.lost_s).sum::<f64>() / n;
            let segments = per
                .iter()
                .map(|(_, l)| l.per_segment.len())
                .max()
                .unwrap_or(0);
            let mut worst: Vec<(usize, usize, f64, f64)> = per
                .iter()
                .flat_map(|(rep, l)| {
                    l.per_segment
                        .iter()
                        .map(move |&(k, at, x)| (*rep, k, at, x))
                })
                .collect();
            worst.sort_by(|a, b| b.3.total_cmp(&a.3));
            let worst: Vec<String> = worst
                .iter()
                .take(3)
                .map(|(rep, k, at, x)| {
                    format!("rep {rep} segment {k} (asked at {at:.1} s): {x:.2} s")
                })
                .collect();
            Some(format!(
                "| {s} | {} | {segments} | {took:.1} | {lost:.2} ({:.0}%) | {:.3} | {} |",
                per.len(),
                100.0 * lost / took.max(1e-9),
                lost / segments.max(1) as f64,
                worst.join("; ")
            ))
        })
        .collect();
    if rows.is_empty() {
        return;
    }
    let _ = writeln!(
        o,
        "Time the segments took, from each request to its last byte, and how much of it went \
         beyond the earliest end the links allowed that segment from its request (s, mean \
         over runs; crate::run::segment_bounds):\n\n| scheme | runs | segments | segment \
         time | lost against the links | lost per segment | worst segments |"
    );
    let _ = writeln!(o, "|{}", " --- |".repeat(7));
    for r in rows {
        let _ = writeln!(o, "{r}");
    }
    let _ = writeln!(o);
}

/// With `trace_step`, each repetition replays another stretch of the traces: one row per
/// repetition with every scheme's time (bulk: goodput), so the spread over conditions and
/// the paired ratios are visible, not only the means.
fn per_repetition(o: &mut String, groups: &[(&str, Vec<&RunResult>)], workload: WorkloadKind) {
    let mut offsets: Vec<(usize, f64)> = groups
        .iter()
        .flat_map(|(_, rs)| rs.iter().map(|r| (r.rep, r.trace_offset_s)))
        .collect();
    offsets.sort_by_key(|x| x.0);
    offsets.dedup_by_key(|x| x.0);
    if offsets.iter().all(|x| x.1 == 0.0) {
        return;
    }
    let bulk = matches!(workload, WorkloadKind::Bulk | WorkloadKind::Video);
    let _ = writeln!(
        o,
        "Per repetition, each from its own point of the traces ({}):\n\n| rep | traces from (s) | {} |",
        if bulk { "mean goodput, Mbit/s" } else { "time, s" },
        groups.iter().map(|g| g.0).collect::<Vec<_>>().join(" | ")
    );
    let _ = writeln!(o, "|{}", " --- |".repeat(groups.len() + 2));
    for (rep, off) in offsets {
        let cells: Vec<String> = groups
            .iter()
            .map(|(_, rs)| {
                rs.iter().find(|r| r.rep == rep).map_or("-".into(), |r| {
                    format!("{:.2}", if bulk { r.mean_mbps } else { r.seconds })
                })
            })
            .collect();
        let _ = writeln!(o, "| {rep} | {off:.0} | {} |", cells.join(" | "));
    }
    let _ = writeln!(o);
}

/// Transfer energy per interface: which radio of which device the joules went to (a
/// helper's pipe costs about the same under every scheme that moves the same bytes through
/// it, its cellular radio is where schemes differ; MPBond §6.2).
fn interface_energy(o: &mut String, groups: &[(&str, Vec<&RunResult>)]) {
    let mut cols: Vec<(String, String, Radio)> = Vec::new();
    for (_, rs) in groups {
        for r in rs {
            for e in &r.energy {
                for (link, radio, _, _) in &e.interfaces {
                    let c = (e.device.clone(), link.clone(), *radio);
                    if !cols.contains(&c) {
                        cols.push(c);
                    }
                }
            }
        }
    }
    if cols.is_empty() {
        return;
    }
    let _ = writeln!(
        o,
        "Transfer energy per interface (J, mean over runs; device link (radio)):\n\n| scheme | {} |",
        cols.iter()
            .map(|(d, l, r)| format!("{d} {l} ({})", radio_name(*r)))
            .collect::<Vec<_>>()
            .join(" | ")
    );
    let _ = writeln!(o, "|{}", " --- |".repeat(cols.len() + 1));
    for (s, rs) in groups {
        let cells: Vec<String> = cols
            .iter()
            .map(|(d, l, _)| {
                // Runs of a scheme that did not use this device have no value, not 0.
                let v: Vec<f64> = rs
                    .iter()
                    .filter_map(|r| {
                        r.energy
                            .iter()
                            .filter(|e| &e.device == d)
                            .flat_map(|e| e.interfaces.iter())
                            .find(|i| &i.0 == l)
                            .map(|i| i.2 - i.3)
                    })
                    .collect();
                if v.is_empty() {
                    "-".into()
                } else {
                    format!("{:.2}", mean_sd(&v).0)
                }
            })
            .collect();
        let _ = writeln!(o, "| {s} | {} |", cells.join(" | "));
    }
    let _ = writeln!(o);
}

fn radio_name(r: Radio) -> &'static str {
    match r {
        Radio::Lte => "LTE",
        Radio::Wifi => "WiFi",
        Radio::Bluetooth => "Bluetooth",
        Radio::Ethernet => "Ethernet",
    }
}

/// CPU of mpbond's daemons over the workload, as a share of one core (MPBond §6.8), for the
/// schemes that run them.
fn daemon_cpu(o: &mut String, groups: &[(&str, Vec<&RunResult>)]) {
    let mut devices: Vec<String> = Vec::new();
    for (_, rs) in groups {
        for c in rs.iter().flat_map(|r| r.cpu.iter()) {
            if !devices.contains(&c.device) {
                devices.push(c.device.clone());
            }
        }
    }
    if devices.is_empty() {
        return;
    }
    let _ = writeln!(
        o,
        "CPU of mpbond's daemons over the workload (% of one core, mean ± sd over the runs in which the hypervisor stole at most {:.0}% of a core, as the CPU claims take them; the host's table below counts the runs left out; crate::cpu):\n\n| scheme | {} |",
        100.0 * crate::cpu::STEAL_LIMIT,
        devices.join(" | ")
    );
    let _ = writeln!(o, "|{}", " --- |".repeat(devices.len() + 1));
    for (s, rs) in groups {
        if rs.iter().all(|r| r.cpu.is_empty()) {
            continue;
        }
        let cells: Vec<String> = devices
            .iter()
            .map(|d| {
                let v: Vec<f64> = rs
                    .iter()
                    .filter(|r| !r.stolen())
                    .filter_map(|r| {
                        let c = r.cpu.iter().find(|c| &c.device == d)?;
                        Some(100.0 * c.cpu_s / r.cpu_window_s().max(1e-9))
                    })
                    .collect();
                if v.is_empty() {
                    "-".into()
                } else {
                    let (m, sd) = mean_sd(&v);
                    format!("{m:.1} ± {sd:.1}")
                }
            })
            .collect();
        let _ = writeln!(o, "| {s} | {} |", cells.join(" | "));
    }
    let _ = writeln!(o);
}

/// The hypervisor's steal over some runs ([`crate::cpu::HostCpu::steal_s`]): its mean as a
/// share of one core, how many runs were above [`crate::cpu::STEAL_LIMIT`], and how many
/// recorded it; `None` when none did (results written before steal was recorded).
pub fn steal_stats<'a>(
    runs: impl IntoIterator<Item = &'a RunResult>,
) -> Option<(f64, usize, usize)> {
    let (mut sum, mut above, mut n) = (0.0, 0, 0);
    for r in runs {
        let Some(share) = r.steal_share() else {
            continue;
        };
        sum += share;
        above += usize::from(r.stolen());
        n += 1;
    }
    (n > 0).then(|| (sum / n as f64, above, n))
}

/// One line on how much the hypervisor stole over the case's runs, so that a reader can
/// tell a slow or costly run on a busy host from mpbond's own spread; nothing for results
/// written before steal was recorded.
fn steal_line(o: &mut String, groups: &[(&str, Vec<&RunResult>)]) {
    let all = || {
        groups
            .iter()
            .flat_map(|(s, rs)| rs.iter().map(move |r| (*s, *r)))
    };
    let Some((mean, above, n)) = steal_stats(all().map(|(_, r)| r)) else {
        return;
    };
    let share = |r: &RunResult| r.steal_share().unwrap_or(0.0);
    let Some((s, r)) = all().max_by(|a, b| share(a.1).total_cmp(&share(b.1))) else {
        return;
    };
    // Runs taken again for the steal (`--rerun-stolen`): the steal above is the kept ones'.
    let aside: Vec<f64> = all()
        .flat_map(|(_, r)| r.set_aside_steal.iter().copied())
        .collect();
    let rerun = all().filter(|(_, r)| !r.set_aside_steal.is_empty()).count();
    let again = if aside.is_empty() {
        String::new()
    } else {
        let lo = aside.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = aside.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        format!(
            " {rerun} of them ran again after more than {:.0}% was stolen (`--rerun-stolen`; the {} attempts set aside, {:.1}-{:.1}% stolen, are in stolen.json).",
            100.0 * crate::cpu::STEAL_LIMIT,
            aside.len(),
            100.0 * lo,
            100.0 * hi
        )
    };
    let _ = writeln!(
        o,
        "The hypervisor stole {:.1}% of a core over the workload on the mean of these {n} runs; {above} above {:.0}%, the most {:.1}% ({s}, repetition {}).{again}\n",
        100.0 * mean,
        100.0 * crate::cpu::STEAL_LIMIT,
        100.0 * share(r),
        r.rep
    );
}

/// The host around the daemons' CPU figures ([`crate::cpu::HostCpu`]), for the schemes
/// whose daemons were measured: a run whose daemons took more CPU while the probe's fixed
/// work also cost more, or while the hypervisor stole time, or beside other load, is the
/// host's, not mpbond's. Each cell is the mean ± sd over runs and the largest run's.
fn host_load(o: &mut String, groups: &[(&str, Vec<&RunResult>)]) {
    const COLS: usize = 6;
    let rows: Vec<(&str, Vec<[f64; COLS]>, usize)> = groups
        .iter()
        .filter_map(|(s, rs)| {
            let v: Vec<[f64; COLS]> = rs
                .iter()
                .filter(|r| !r.cpu.is_empty())
                .filter_map(|r| {
                    let h = r.host_cpu.as_ref()?;
                    let steal = r.steal_share()?;
                    let secs = r.cpu_window_s().max(1e-9);
                    let wait: f64 = r.cpu.iter().map(|c| c.wait_s).sum();
                    let cpu: f64 = r.cpu.iter().map(|c| c.cpu_s).sum();
                    let sys: f64 = r.cpu.iter().map(|c| c.sys_s).sum();
                    Some([
                        h.probe_cpu_ms,
                        h.probe_sys_ms,
                        h.probe_wall_ms / h.probe_cpu_ms.max(1e-9),
                        100.0 * steal,
                        100.0 * wait / secs,
                        100.0 * sys / cpu.max(1e-9),
                    ])
                })
                .collect();
            let stolen = rs
                .iter()
                .filter(|r| !r.cpu.is_empty())
                .filter(|r| r.stolen())
                .count();
            (!v.is_empty()).then_some((*s, v, stolen))
        })
        .collect();
    if rows.is_empty() {
        return;
    }
    let _ = writeln!(
        o,
        "The host over the workload, to read the CPU above against (mean ± sd over runs, the largest run's in brackets; crate::cpu::HostCpu): every 100 ms a probe times the same fixed work in user space and in the kernel's socket calls (ms of its thread's CPU) and the user-space work's wall time against its CPU time; the hypervisor's steal (% of one core); the daemons' time waiting on a run queue (% of the run, summed over daemons) and the kernel's share of their CPU (stime, in 10 ms ticks); and the runs left out of the CPU above and the CPU claims for more steal than {:.0}% of a core:\n\n| scheme | probe user ms | probe sockets ms | probe wall ÷ CPU | steal % | run-queue wait % | daemons in kernel % | left out |\n| --- | --- | --- | --- | --- | --- | --- | --- |",
        100.0 * crate::cpu::STEAL_LIMIT
    );
    for (s, v, stolen) in rows {
        let cells: Vec<String> = (0..COLS)
            .map(|i| {
                let col: Vec<f64> = v.iter().map(|r| r[i]).collect();
                let (m, sd) = mean_sd(&col);
                let max = col.iter().copied().fold(f64::MIN, f64::max);
                if i < 3 {
                    format!("{m:.2} ± {sd:.2} ({max:.2})")
                } else {
                    format!("{m:.1} ± {sd:.1} ({max:.1})")
                }
            })
            .collect();
        let _ = writeln!(
            o,
            "| {s} | {} | {stolen} of {} |",
            cells.join(" | "),
            v.len()
        );
    }
    let _ = writeln!(o);
}

/// What mpbond's senders did (`crate::sched`), for the schemes whose daemons reported it:
/// recalls, bytes sent a second time (also as a share of the payload), rescues and failed
/// links, means per run.
fn sender_activity(o: &mut String, groups: &[(&str, Vec<&RunResult>)]) {
    if groups
        .iter()
        .all(|(_, rs)| rs.iter().all(|r| r.sched.is_none()))
    {
        return;
    }
    let _ = writeln!(
        o,
        "mpbond's senders (mean per run; crate::sched): PAMS recalls, payload sent a second time, rescues, tail copies, links that went stale (stalled, connection kept) and that failed:\n\n| scheme | recalls | sent again (MB) | of the payload | window rescues (MB) | late-head rescues (MB) | loss rescues (MB) | tail copies (MB) | stale links | failed links |"
    );
    let _ = writeln!(o, "|{}", " --- |".repeat(10));
    for (s, rs) in groups {
        let with: Vec<(&crate::sched::SchedStats, u64)> = rs
            .iter()
            .filter_map(|r| r.sched.as_ref().map(|x| (x, r.bytes)))
            .collect();
        if with.is_empty() {
            continue;
        }
        let mean = |f: &dyn Fn(&crate::sched::SchedStats) -> u64| {
            with.iter().map(|(x, _)| f(x) as f64).sum::<f64>() / with.len() as f64
        };
        let again = mean(&|x| x.reinjected_bytes);
        let payload = with.iter().map(|(_, b)| *b as f64).sum::<f64>() / with.len() as f64;
        let _ = writeln!(
            o,
            "| {s} | {:.1} | {:.2} | {:.1}% | {:.2} | {:.2} | {:.2} | {:.2} | {:.1} | {:.1} |",
            mean(&|x| x.recalls),
            again / 1e6,
            100.0 * again / payload.max(1.0),
            mean(&|x| x.window_rescued_bytes) / 1e6,
            mean(&|x| x.late_rescued_bytes) / 1e6,
            mean(&|x| x.loss_rescued_bytes) / 1e6,
            mean(&|x| x.tail_copied_bytes) / 1e6,
            mean(&|x| x.links_stale),
            mean(&|x| x.links_failed)
        );
    }
    let _ = writeln!(o);
}

/// The kernel's counters of losses and of MPTCP's data level (`RunResult::kernel`), mean per
/// run, one column per device and counter that moved in any run: where a kernel sender
/// (kibbutz's MPTCP, any scheme's TCP) lost time, which its packet log only shows as pauses.
fn kernel_counters(o: &mut String, groups: &[(&str, Vec<&RunResult>)]) {
    let mut keys: Vec<&String> = groups
        .iter()
        .flat_map(|(_, rs)| rs.iter().flat_map(|r| r.kernel.keys()))
        .collect();
    keys.sort();
    keys.dedup();
    if keys.is_empty() {
        return;
    }
    let _ = writeln!(
        o,
        "Kernel counters that moved (mean per run; device and counter, lab::counters):\n\n| scheme | {} |",
        keys.iter().map(|k| k.as_str()).collect::<Vec<_>>().join(" | ")
    );
    let _ = writeln!(o, "|{}", " --- |".repeat(keys.len() + 1));
    for (s, rs) in groups {
        let cells: Vec<String> = keys
            .iter()
            .map(|k| {
                let v: Vec<f64> = rs
                    .iter()
                    .map(|r| r.kernel.get(*k).copied().unwrap_or(0) as f64)
                    .collect();
                format!("{:.1}", mean_sd(&v).0)
            })
            .collect();
        let _ = writeln!(o, "| {s} | {} |", cells.join(" | "));
    }
    let _ = writeln!(o);
}

/// IP bytes toward `device` on its WAN links (`ps` and `ps2` for the primary, `hsK` for
/// helper K).
fn wan_bytes(r: &RunResult, device: &str) -> u64 {
    r.links
        .iter()
        .filter(|l| match device.strip_prefix("helper") {
            Some(k) => l.link == format!("hs{k}"),
            None => l.link == "ps" || l.link == "ps2",
        })
        .map(|l| l.down)
        .sum()
}

fn device_names(results: &[RunResult]) -> Vec<String> {
    let mut d: Vec<String> = Vec::new();
    for r in results {
        for e in &r.energy {
            if !d.contains(&e.device) {
                d.push(e.device.clone());
            }
        }
    }
    d
}

fn device_means(rs: &[&RunResult], devices: &[String]) -> Vec<f64> {
    devices
        .iter()
        .map(|d| {
            let v: Vec<f64> = rs
                .iter()
                .map(|r| {
                    r.energy
                        .iter()
                        .find(|e| &e.device == d)
                        .map_or(0.0, |e| e.joules - e.tail_joules)
                })
                .collect();
            mean_sd(&v).0
        })
        .collect()
}

/// The variants in `results`, in the order they ran (one `None` without variants).
pub fn variants(results: &[RunResult]) -> Vec<Option<String>> {
    let mut v: Vec<Option<String>> = Vec::new();
    for r in results {
        if !v.contains(&r.variant) {
            v.push(r.variant.clone());
        }
    }
    v
}

/// The tables of every variant, each under its own heading.
pub fn tables(name: &str, schemes: &[String], results: &[RunResult]) -> String {
    let mut o = String::new();
    for v in variants(results) {
        let rs: Vec<RunResult> = results.iter().filter(|r| r.variant == v).cloned().collect();
        let title = match &v {
            Some(v) => format!("{name}: {v}"),
            None => name.to_string(),
        };
        o.push_str(&table(&title, schemes, &rs));
    }
    o
}

/// Reads back the runs [`write()`] put in `dir/results.json`, so claims can be judged again
/// without running anything (`mpbond lab paper --from-results`): after a suite that was cut
/// off and finished with `--only`, or after a claim's wording or bound changed.
pub fn read(dir: &Path) -> anyhow::Result<Vec<RunResult>> {
    use anyhow::Context;
    let path = dir.join("results.json");
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("cannot read {} (run the experiment first)", path.display()))?;
    serde_json::from_str(&text).with_context(|| {
        format!(
            "{} is not a list of lab runs from this version of mpbond",
            path.display()
        )
    })
}

/// Writes results.json, then report.md and the plots ([`write_report`]), into `dir`; and
/// the attempts `--rerun-stolen` set aside for the hypervisor's steal (`set_aside`) to
/// stolen.json, so nothing measured is lost, or, when there are none, removes an older
/// run's stolen.json (the directory then holds one run's results only).
pub fn write(
    dir: &Path,
    name: &str,
    schemes: &[String],
    results: &[RunResult],
    set_aside: &[RunResult],
) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir)?;
    std::fs::write(
        dir.join("results.json"),
        serde_json::to_string_pretty(results)?,
    )?;
    let stolen = dir.join("stolen.json");
    if set_aside.is_empty() {
        if let Err(e) = std::fs::remove_file(&stolen) {
            if e.kind() != std::io::ErrorKind::NotFound {
                return Err(e.into());
            }
        }
    } else {
        std::fs::write(stolen, serde_json::to_string_pretty(set_aside)?)?;
    }
    write_report(dir, name, schemes, results)
}

/// Writes report.md and the plots into `dir` (a table and plots per variant), leaving
/// results.json as it is: `mpbond lab paper --from-results` rewrites a report from the runs
/// on disk with this build's tables (a share of a core taken over the measured window, for
/// one). The report names the runs' TCP congestion control (each run's [`RunResult::cc`]),
/// since results depend on it; for runs written before they recorded it, the label the
/// report in `dir` already gives.
pub fn write_report(
    dir: &Path,
    name: &str,
    schemes: &[String],
    results: &[RunResult],
) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir)?;
    let report = dir.join("report.md");
    let cc = congestion_of(results)
        .or_else(|| {
            std::fs::read_to_string(&report)
                .ok()
                .and_then(|md| congestion_in(&md))
        })
        .unwrap_or_else(|| "not recorded".to_string());
    let mut md = format!("# Lab report: {name}\n\nTCP congestion control: {cc}.\n\n");
    for (i, v) in variants(results).into_iter().enumerate() {
        let rs: Vec<RunResult> = results.iter().filter(|r| r.variant == v).cloned().collect();
        let (title, prefix) = match &v {
            Some(v) => (format!("{name}: {v}"), format!("v{}-", i + 1)),
            None => (name.to_string(), String::new()),
        };
        write_group(dir, &mut md, &title, &prefix, schemes, &rs)?;
    }
    std::fs::write(report, md)?;
    Ok(())
}

/// The congestion control the runs recorded: one label, or every distinct one in the order
/// met (`; ` between) if they differ; `None` if no run recorded it.
fn congestion_of(results: &[RunResult]) -> Option<String> {
    let mut labels: Vec<&str> = Vec::new();
    for r in results {
        if !r.cc.is_empty() && !labels.contains(&r.cc.as_str()) {
            labels.push(&r.cc);
        }
    }
    (!labels.is_empty()).then(|| labels.join("; "))
}

/// The label a report written by [`write_report`] gives its congestion control.
fn congestion_in(report: &str) -> Option<String> {
    report.lines().find_map(|l| {
        l.strip_prefix("TCP congestion control: ")
            .map(|cc| cc.trim_end_matches('.').to_string())
            .filter(|cc| !cc.is_empty() && cc != "not recorded")
    })
}

fn write_group(
    dir: &Path,
    md: &mut String,
    name: &str,
    prefix: &str,
    schemes: &[String],
    results: &[RunResult],
) -> anyhow::Result<()> {
    md.push_str(&table(name, schemes, results));
    md.push_str("Plots:\n\n");
    for size in sizes(results) {
        let groups = by_scheme(schemes, results, size);
        for (s, rs) in &groups {
            let f = format!("{prefix}progress-{s}-{size}.svg");
            std::fs::write(dir.join(&f), progress_svg(rs[0]))?;
            let _ = writeln!(md, "- [{f}]({f})");
        }
        let series: Vec<(String, Vec<f64>)> = groups
            .iter()
            .map(|(s, rs)| (s.to_string(), pooled(rs)))
            .collect();
        let label = groups
            .first()
            .map(|g| size_label(g.1[0]))
            .unwrap_or_default();
        let f = format!("{prefix}throughput-cdf-{size}.svg");
        std::fs::write(
            dir.join(&f),
            cdf_svg(&format!("{name}: {label}, goodput per sample"), &series),
        )?;
        let _ = writeln!(md, "- [{f}]({f})");
        let devices = device_names(results);
        let bars: Vec<(String, Vec<f64>)> = groups
            .iter()
            .map(|(s, rs)| (s.to_string(), device_means(rs, &devices)))
            .collect();
        let f = format!("{prefix}energy-{size}.svg");
        std::fs::write(
            dir.join(&f),
            energy_svg(
                &format!("{name}: {label}, transfer energy per device"),
                &devices,
                &bars,
            ),
        )?;
        let _ = writeln!(md, "- [{f}]({f})");
    }
    md.push('\n');
    Ok(())
}

const COLORS: [&str; 7] = [
    "#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#17becf",
];

/// Empirical CDFs of throughput samples, one line per scheme.
pub fn cdf_svg(title: &str, series: &[(String, Vec<f64>)]) -> String {
    let (w, h, pad) = (640.0, 360.0, 50.0);
    let xmax = series
        .iter()
        .flat_map(|(_, v)| v.iter().copied())
        .fold(1.0, f64::max);
    let mut o = svg_head(w, h, pad, title);
    let _ = writeln!(
        o,
        "<text x=\"{}\" y=\"{}\">Mbit/s, 0 to {xmax:.1}</text><text x=\"5\" y=\"{}\">CDF</text>",
        w / 2.0 - 40.0,
        h - 15.0,
        h / 2.0
    );
    for (i, (name, v)) in series.iter().enumerate() {
        if v.is_empty() {
            continue;
        }
        let mut s = v.clone();
        s.sort_by(f64::total_cmp);
        let n = s.len() as f64;
        let pts: Vec<String> = s
            .iter()
            .enumerate()
            .map(|(k, x)| {
                format!(
                    "{:.1},{:.1}",
                    pad + x / xmax * (w - 2.0 * pad),
                    h - pad - (k + 1) as f64 / n * (h - 2.0 * pad)
                )
            })
            .collect();
        let c = COLORS[i % COLORS.len()];
        let _ = writeln!(
            o,
            "<polyline fill=\"none\" stroke=\"{c}\" stroke-width=\"2\" points=\"{}\"/>\n<text x=\"{}\" y=\"{}\" fill=\"{c}\">{name} (median {:.1})</text>",
            pts.join(" "),
            pad + 10.0,
            pad + 15.0 * i as f64,
            quantile(v, 0.5)
        );
    }
    o.push_str("</svg>\n");
    o
}

/// Stacked bars of energy per device, one bar per scheme.
pub fn energy_svg(title: &str, devices: &[String], bars: &[(String, Vec<f64>)]) -> String {
    let (w, h, pad) = (640.0, 360.0, 50.0);
    let ymax = bars
        .iter()
        .map(|(_, v)| v.iter().sum::<f64>())
        .fold(0.1, f64::max);
    let mut o = svg_head(w, h, pad, title);
    let _ = writeln!(
        o,
        "<text x=\"5\" y=\"{}\">J</text><text x=\"5\" y=\"{}\">{ymax:.1}</text>",
        h / 2.0,
        pad + 4.0
    );
    let slot = (w - 2.0 * pad) / bars.len().max(1) as f64;
    for (i, (name, v)) in bars.iter().enumerate() {
        let x = pad + slot * i as f64 + slot * 0.15;
        let mut y = h - pad;
        for (d, j) in v.iter().enumerate() {
            let bh = j / ymax * (h - 2.0 * pad);
            y -= bh;
            let _ = writeln!(
                o,
                "<rect x=\"{x:.1}\" y=\"{y:.1}\" width=\"{:.1}\" height=\"{bh:.1}\" fill=\"{}\"/>",
                slot * 0.7,
                COLORS[d % COLORS.len()]
            );
        }
        let _ = writeln!(
            o,
            "<text x=\"{x:.1}\" y=\"{}\">{name}</text><text x=\"{x:.1}\" y=\"{:.1}\">{:.1}</text>",
            h - pad + 15.0,
            y - 4.0,
            v.iter().sum::<f64>()
        );
    }
    for (d, name) in devices.iter().enumerate() {
        let _ = writeln!(
            o,
            "<text x=\"{}\" y=\"{}\" fill=\"{}\">{name}</text>",
            w - pad - 80.0,
            pad + 15.0 * d as f64,
            COLORS[d % COLORS.len()]
        );
    }
    o.push_str("</svg>\n");
    o
}

fn svg_head(w: f64, h: f64, pad: f64, title: &str) -> String {
    let mut o = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n<text x=\"{pad}\" y=\"20\">{}</text>\n",
        xml_escape(title)
    );
    let _ = writeln!(
        o,
        "<line x1=\"{pad}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"black\"/><line x1=\"{pad}\" y1=\"{pad}\" x2=\"{pad}\" y2=\"{}\" stroke=\"black\"/>",
        h - pad,
        w - pad,
        h - pad,
        h - pad
    );
    o
}

fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// Progress per subflow (IP data bytes delivered to the primary over time, or from it for an
/// upload), like MPBond's Figure 4.
pub fn progress_svg(r: &RunResult) -> String {
    let (w, h, pad) = (640.0, 360.0, 50.0);
    let tmax = r
        .subflows
        .iter()
        .filter_map(|s| s.completion_s)
        .fold(r.seconds, f64::max)
        .max(0.1);
    let bmax = r.subflows.iter().map(|s| s.bytes).max().unwrap_or(1).max(1) as f64;
    let mut o = svg_head(
        w,
        h,
        pad,
        &format!(
            "{}, {}, rep {}: {:.2} s (bound {:.2} s)",
            r.scheme,
            size_label(r),
            r.rep,
            r.seconds,
            r.lower_bound_s
        ),
    );
    let _ = writeln!(
        o,
        "<text x=\"{}\" y=\"{}\">time (s), 0 to {tmax:.2}</text><text x=\"5\" y=\"{}\">MB</text><text x=\"5\" y=\"{}\">{:.1}</text>",
        w / 2.0 - 40.0,
        h - 15.0,
        h / 2.0,
        pad + 4.0,
        bmax / 1e6
    );
    for (i, s) in r.subflows.iter().enumerate() {
        if s.progress.is_empty() {
            continue;
        }
        let c = COLORS[i % COLORS.len()];
        let pts: Vec<String> = std::iter::once((0.0, 0u64))
            .chain(s.progress.iter().copied())
            .map(|(t, b)| {
                format!(
                    "{:.1},{:.1}",
                    pad + t / tmax * (w - 2.0 * pad),
                    h - pad - b as f64 / bmax * (h - 2.0 * pad)
                )
            })
            .collect();
        let _ = writeln!(
            o,
            "<polyline fill=\"none\" stroke=\"{c}\" stroke-width=\"2\" points=\"{}\"/>\n<text x=\"{}\" y=\"{}\" fill=\"{c}\">{} ({:.2} s)</text>",
            pts.join(" "),
            w - pad - 120.0,
            pad + 15.0 * i as f64,
            s.link,
            s.completion_s.unwrap_or(0.0)
        );
    }
    o.push_str("</svg>\n");
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::claim::tests::run;

    /// What `write` leaves in results.json reads back as the same runs, to the last bit, so
    /// a claim judged again by `lab paper --from-results` gets the value the run itself got;
    /// a missing or foreign file is a clear error.
    #[test]
    fn results_read_back_as_written() {
        let dir = std::env::temp_dir().join(format!("mpbond-report-{}", std::process::id()));
        let mut a = run("mpbond", 1_000_000, 2.0, 10.0);
        a.variant = Some("pipe 5".into());
        a.energy = vec![crate::run::DeviceEnergy {
            device: "helper1".into(),
            joules: 3.5,
            tail_joules: 1.25,
            interfaces: vec![("hs1".into(), Radio::Lte, 3.0, 1.0)],
        }];
        a.video = Some(crate::video::VideoStats {
            mean_bitrate_mbps: 4.2,
            stall_ratio: 0.03,
            ..Default::default()
        });
        a.chunk_times = vec![("primary".into(), vec![0.5, 0.75])];
        a.subflows[1].completion_s = None;
        // Floats of every kind of digit string (a plain parse got the last bit of some of
        // experiment 14's joules wrong, and its claims moved in the 16th digit).
        a.throughput_mbps = (1..2000).map(|i| (i as f64 * 0.37).sin() * 7.3).collect();
        let mut b = run("kibbutz", 1_000_000, 2.5, 12.0);
        b.variant = a.variant.clone();
        let rs = vec![a, b];
        write(&dir, "t", &["kibbutz".into(), "mpbond".into()], &rs, &[]).unwrap();
        let back = read(&dir).unwrap();
        assert_eq!(
            serde_json::to_value(&back).unwrap(),
            serde_json::to_value(&rs).unwrap()
        );
        let c = crate::scenario::ClaimDef {
            what: "t".into(),
            metric: "time".into(),
            scheme: "mpbond".into(),
            vs: Some("kibbutz".into()),
            paper: crate::scenario::PaperValue::One(0.9),
            size: None,
            variant: None,
        };
        let (now, then) = (
            crate::claim::evaluate(&c, &rs).unwrap(),
            crate::claim::evaluate(&c, &back).unwrap(),
        );
        assert_eq!((now.ours, now.verdict), (then.ours, then.verdict));
        // Attempts set aside for steal are kept beside the runs; a run without any removes
        // an older run's file.
        write(&dir, "t", &["kibbutz".into()], &rs, &rs[..1]).unwrap();
        let aside: Vec<RunResult> =
            serde_json::from_str(&std::fs::read_to_string(dir.join("stolen.json")).unwrap())
                .unwrap();
        assert_eq!(aside.len(), 1);
        write(&dir, "t", &["kibbutz".into()], &rs, &[]).unwrap();
        assert!(!dir.join("stolen.json").exists());
        write(&dir, "t", &["kibbutz".into()], &rs, &[]).unwrap();
        std::fs::write(dir.join("results.json"), "{\"scheme\": 1}").unwrap();
        let e = format!("{:#}", read(&dir).unwrap_err());
        assert!(e.contains("not a list of lab runs"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
        let e = format!("{:#}", read(&dir).unwrap_err());
        assert!(e.contains("run the experiment first"), "{e}");
    }

    #[test]
    fn a_report_written_again_names_the_runs_congestion_control_and_leaves_the_runs() {
        let dir = std::env::temp_dir().join(format!("mpbond-report-again-{}", std::process::id()));
        let schemes = ["kibbutz".to_string(), "mpbond".to_string()];
        let mut rs = vec![
            run("kibbutz", 1_000_000, 2.5, 12.0),
            run("mpbond", 1_000_000, 2.0, 10.0),
        ];
        write(&dir, "t", &schemes, &rs, &[]).unwrap();
        let report = |d: &Path| std::fs::read_to_string(d.join("report.md")).unwrap();
        assert!(report(&dir).contains("TCP congestion control: cubic, HyStart on.\n"));
        let runs = std::fs::read(dir.join("results.json")).unwrap();

        // Runs written before they recorded it: the label the report already gives stays.
        for r in &mut rs {
            r.cc.clear();
        }
        write_report(&dir, "t", &schemes, &rs).unwrap();
        assert!(report(&dir).contains("TCP congestion control: cubic, HyStart on.\n"));
        assert_eq!(std::fs::read(dir.join("results.json")).unwrap(), runs);
        // Nor the runs nor a report: said so, not guessed.
        std::fs::remove_file(dir.join("report.md")).unwrap();
        write_report(&dir, "t", &schemes, &rs).unwrap();
        assert!(report(&dir).contains("TCP congestion control: not recorded.\n"));
        // Runs under different settings name each.
        rs[0].cc = "bbr".into();
        rs[1].cc = "cubic, HyStart on".into();
        write_report(&dir, "t", &schemes, &rs).unwrap();
        assert!(report(&dir).contains("TCP congestion control: bbr; cubic, HyStart on.\n"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn repetitions_from_other_points_of_the_traces_get_a_row_each() {
        let mut rs = Vec::new();
        for (rep, (k, m)) in [(1.0, 0.8), (4.0, 2.0)].into_iter().enumerate() {
            for (scheme, secs) in [("kibbutz", k), ("mpbond", m)] {
                let mut r = run(scheme, 1_000_000, secs, 5.0);
                r.rep = rep;
                r.trace_offset_s = rep as f64 * 15.0;
                r.lower_bound_s = 0.5 * (rep + 1) as f64;
                r.ratio_to_bound = secs / r.lower_bound_s;
                rs.push(r);
            }
        }
        let schemes = vec!["kibbutz".to_string(), "mpbond".to_string()];
        let t = table("t", &schemes, &rs);
        assert!(t.contains("| 0 | 0 | 1.00 | 0.80 |"), "{t}");
        assert!(t.contains("| 1 | 15 | 4.00 | 2.00 |"), "{t}");
        // The bound and the ratio to it are means over the runs (0.5 and 1.0 s; 1.6 and 2.0).
        assert!(
            t.contains("| mpbond | 2 | 1.40 ± 0.85 | 0.75 | 1.80 |"),
            "{t}"
        );
        // Without offsets there is no such table.
        for r in &mut rs {
            r.trace_offset_s = 0.0;
        }
        assert!(!table("t", &schemes, &rs).contains("Per repetition"));
    }

    /// The capacity table gives each link's offered megabytes and the share that passed
    /// with the link idle, averaged over runs, and leaves a link the scheme did not use
    /// empty; results without the figures (older runs) add no table.
    #[test]
    fn link_capacity_shows_what_each_link_left_unused() {
        use crate::run::LinkBytes;
        let link = |name: &str, down: u64, offered: f64, unused: f64| LinkBytes {
            link: name.into(),
            down,
            up: 0,
            drops: 0,
            payload: None,
            down_offered: Some(offered),
            down_unused: Some(unused),
        };
        let mut rs = Vec::new();
        for (scheme, unused) in [("single", [4e6, 4e6]), ("mpbond", [1e6, 3e6])] {
            for (rep, u) in unused.into_iter().enumerate() {
                let mut r = run(scheme, 1_000_000, 1.0, 5.0);
                r.rep = rep;
                let hs = if scheme == "single" { 0 } else { 500_000 };
                r.links = vec![link("ps", 500_000, 20e6, u), link("hs1", hs, 10e6, 10e6)];
                rs.push(r);
            }
        }
        let schemes = vec!["single".to_string(), "mpbond".to_string()];
        let t = table("t", &schemes, &rs);
        assert!(t.contains("| scheme | ps | hs1 |"), "{t}");
        assert!(t.contains("| single | 20.0 (20%) | - |"), "{t}");
        assert!(t.contains("| mpbond | 20.0 (10%) | 10.0 (100%) |"), "{t}");
        for r in &mut rs {
            for l in &mut r.links {
                (l.down_offered, l.down_unused) = (None, None);
            }
        }
        assert!(!table("t", &schemes, &rs).contains("Capacity each link"));
    }

    #[test]
    fn segment_loss_says_where_a_video_run_lost_time_against_its_links() {
        // Three segments asked for at 0, 2 and 5 s, done at 2, 5 and 6 s; the links allowed
        // them by 1.5, 3 and 6 s: 0.5, 2 and 0 s lost of 6 s.
        let mut r = run("mpbond", 0, 6.0, 5.0);
        r.workload = WorkloadKind::Video;
        r.progress = vec![(0.0, 0), (2.0, 100), (5.0, 200), (6.0, 300)];
        r.video = Some(crate::video::VideoStats {
            asked_s: vec![0.0, 2.0, 5.0],
            segment_bound_s: vec![1.5, 3.0, 6.0],
            ..Default::default()
        });
        let l = segment_loss_of(&r).unwrap();
        assert!(
            (l.took_s - 6.0).abs() < 1e-9 && (l.lost_s - 2.5).abs() < 1e-9,
            "{l:?}"
        );
        assert_eq!(
            l.per_segment,
            vec![(1, 0.0, 0.5), (2, 2.0, 2.0), (3, 5.0, 0.0)]
        );
        let schemes = vec!["mpbond".to_string()];
        let t = table("t", &schemes, &[r.clone()]);
        assert!(
            t.contains("| mpbond | 1 | 3 | 6.0 | 2.50 (42%) | 0.833 | rep 0 segment 2 (asked at 2.0 s): 2.00 s; rep 0 segment 1"),
            "{t}"
        );
        // A segment the links could not deliver within the horizon counts in neither sum.
        r.video.as_mut().unwrap().segment_bound_s[1] = f64::INFINITY;
        let l = segment_loss_of(&r).unwrap();
        assert!(
            (l.took_s - 3.0).abs() < 1e-9 && (l.lost_s - 0.5).abs() < 1e-9,
            "{l:?}"
        );
        // No bounds (a run from before they were computed, or not a video): no table.
        r.video.as_mut().unwrap().segment_bound_s.clear();
        assert!(segment_loss_of(&r).is_none());
        assert!(!table("t", &schemes, &[r]).contains("lost against the links"));
    }

    /// A bulk run's table puts the median and 5th percentile of the fluid's samples (what
    /// the links offered per interval) and of the arrivals at the primary beside the
    /// scheme's own.
    #[test]
    fn bulk_rows_show_the_fluid_samples() {
        let mut rs = Vec::new();
        for (scheme, fluid) in [("kibbutz", vec![]), ("mpbond", vec![6.0; 20])] {
            let mut r = run(scheme, 0, 60.0, 5.0);
            r.workload = WorkloadKind::Bulk;
            r.throughput_mbps = vec![0.0, 4.0, 4.0, 4.0];
            if scheme == "mpbond" {
                r.arrival_mbps = vec![3.0, 5.0, 5.0, 5.0];
            }
            r.bound_samples_mbps = fluid;
            rs.push(r);
        }
        let schemes = vec!["kibbutz".to_string(), "mpbond".to_string()];
        let t = table("t", &schemes, &rs);
        assert!(t.contains("fluid median / 5th pct"), "{t}");
        assert!(t.contains("| 6.00 / 6.00 | 5.00 / 3.30 |"), "{t}");
        assert!(
            t.lines()
                .any(|l| l.starts_with("| kibbutz |") && l.contains("| - |")),
            "{t}"
        );
    }

    /// Energy per interface names each device's radio, leaves a device a scheme did not use
    /// empty rather than 0, and the daemons' CPU is a share of one core for the schemes
    /// that ran them.
    #[test]
    fn interface_energy_and_daemon_cpu() {
        use crate::cpu::DaemonCpu;
        use crate::run::DeviceEnergy;
        let dev = |d: &str, ifs: Vec<(&str, Radio, f64)>| DeviceEnergy {
            device: d.into(),
            joules: 0.0,
            tail_joules: 0.0,
            // (link, radio, joules with the tail, tail): 1 J of final tail each.
            interfaces: ifs
                .into_iter()
                .map(|(l, r, j)| (l.to_string(), r, j + 1.0, 1.0))
                .collect(),
        };
        let mut k = run("kibbutz", 1_000_000, 2.0, 5.0);
        k.energy = vec![dev("primary", vec![("ps", Radio::Lte, 3.0)])];
        let mut m = run("mpbond", 1_000_000, 2.0, 5.0);
        m.energy = vec![
            dev("primary", vec![("ps", Radio::Lte, 2.5)]),
            dev("helper1", vec![("hs1", Radio::Lte, 1.25)]),
        ];
        m.cpu = vec![DaemonCpu {
            device: "primary".into(),
            cpu_s: 0.05,
            wait_s: 0.01,
            sys_s: 0.03,
        }];
        m.host_cpu = Some(crate::cpu::HostCpu {
            steal_s: 0.02,
            lab_s: 0.4,
            probes: 20,
            probe_cpu_ms: 0.3,
            probe_cpu_max_ms: 0.5,
            probe_wall_ms: 0.36,
            probe_sys_ms: 0.2,
            window_s: 2.0,
        });
        k.host_cpu = m.host_cpu.clone();
        let schemes = vec!["kibbutz".to_string(), "mpbond".to_string()];
        // A second run, in which the hypervisor stole half a core and the daemon read 50%:
        // left out of the CPU table, counted in the host's.
        let mut stolen = m.clone();
        stolen.cpu[0].cpu_s = 1.0;
        stolen.host_cpu = Some(crate::cpu::HostCpu {
            steal_s: 1.0,
            ..m.host_cpu.clone().unwrap_or_default()
        });
        let t = table("t", &schemes, &[k.clone(), m.clone(), stolen]);
        assert!(
            t.contains("| scheme | primary ps (LTE) | helper1 hs1 (LTE) |"),
            "{t}"
        );
        assert!(t.contains("| kibbutz | 3.00 | - |"), "{t}");
        assert!(t.contains("| mpbond | 2.50 | 1.25 |"), "{t}");
        // 0.05 s of CPU in a 2 s download: 2.5% of a core; kibbutz gets no row.
        assert!(t.contains("| mpbond | 2.5 ± 0.0 |"), "{t}");
        let cpu = t
            .split("CPU of")
            .nth(1)
            .and_then(|c| c.split("\n\n").nth(1));
        assert!(cpu.is_some_and(|c| !c.contains("kibbutz")), "{t}");
        // Results written before steal was recorded give no figure rather than 0.
        assert_eq!(steal_stats(&[run("mpbond", 1, 1.0, 1.0)]), None);
        // The steal over the case: kibbutz's 1%, mpbond's 1% and 50%.
        assert!(
            t.contains("stole 17.3% of a core over the workload on the mean of these 3 runs; 1 above 3%, the most 50.0% (mpbond, repetition 0)."),
            "{t}"
        );
        assert!(!t.contains("ran again"), "{t}");
        // A run kept after two attempts were set aside for their steal says so.
        let mut again = k.clone();
        again.set_aside_steal = vec![0.12, 0.045];
        let t2 = table("t", &schemes, &[again, m.clone()]);
        assert!(
            t2.contains("1 of them ran again after more than 3% was stolen (`--rerun-stolen`; the 2 attempts set aside, 4.5-12.0% stolen, are in stolen.json)."),
            "{t2}"
        );
        // The host's table has mpbond's runs only: the probe's 0.3 ms of CPU in 0.36 ms
        // and 0.2 ms in sockets, 1% and 50% of a core stolen, the daemon 0.5% waiting and
        // 60% and 3% of its time in the kernel, one run of two left out.
        let host = t.split("The host over the workload").nth(1).unwrap_or("");
        assert!(
            host.contains(
                "| mpbond | 0.30 ± 0.00 (0.30) | 0.20 ± 0.00 (0.20) | 1.20 ± 0.00 (1.20) | 25.5 ± 34.6 (50.0) | 0.5 ± 0.0 (0.5) | 31.5 ± 40.3 (60.0) | 1 of 2 |"
            ),
            "{t}"
        );
        assert!(
            !host.split("\n\n").nth(1).unwrap_or("").contains("kibbutz"),
            "{t}"
        );
        assert!(
            !t.contains("mpbond's senders"),
            "no statistics, no table: {t}"
        );
    }

    /// The kernel counters' table: a column per device and counter that moved anywhere, the
    /// mean over every run of the scheme (0 where a run did not move it).
    #[test]
    fn kernel_counters_are_means_per_scheme_with_a_column_each() {
        let mut k1 = run("kibbutz", 1_000_000, 2.0, 5.0);
        k1.kernel.insert("primary NoDSSInWindow".into(), 50);
        k1.kernel.insert("proxy MPTCPRetrans".into(), 13);
        let mut k2 = run("kibbutz", 1_000_000, 2.0, 5.0);
        k2.kernel.insert("proxy MPTCPRetrans".into(), 3);
        let m = run("mpbond", 1_000_000, 2.0, 5.0);
        let schemes = vec!["kibbutz".to_string(), "mpbond".to_string()];
        let t = table("t", &schemes, &[k1, k2, m]);
        assert!(
            t.contains("| scheme | primary NoDSSInWindow | proxy MPTCPRetrans |"),
            "{t}"
        );
        assert!(t.contains("| kibbutz | 25.0 | 8.0 |"), "{t}");
        assert!(t.contains("| mpbond | 0.0 | 0.0 |"), "{t}");
        let none = table("t", &schemes, &[run("mpbond", 1_000_000, 2.0, 5.0)]);
        assert!(!none.contains("Kernel counters"), "{none}");
    }

    /// The senders' table: means per run, the bytes sent again as a share of the payload,
    /// and no row for a scheme without statistics.
    #[test]
    fn sender_activity_is_a_share_of_the_payload() {
        let k = run("kibbutz", 1_000_000, 2.0, 5.0);
        let mut runs = vec![k];
        for (recalls, again) in [(1, 40_000), (3, 60_000)] {
            let mut m = run("mpbond", 1_000_000, 2.0, 5.0);
            m.sched = Some(crate::sched::SchedStats {
                recalls,
                reinjected_bytes: again,
                window_rescued_bytes: 10_000,
                late_rescued_bytes: 0,
                loss_rescued_bytes: 30_000,
                tail_copied_bytes: 20_000,
                links_stale: 2,
                links_failed: 1,
            });
            runs.push(m);
        }
        let schemes = vec!["kibbutz".to_string(), "mpbond".to_string()];
        let t = table("t", &schemes, &runs);
        assert!(
            t.contains("| mpbond | 2.0 | 0.05 | 5.0% | 0.01 | 0.00 | 0.03 | 0.02 | 2.0 | 1.0 |"),
            "{t}"
        );
        let part = t
            .split("mpbond's senders")
            .nth(1)
            .and_then(|p| p.split("\n\n").nth(1))
            .unwrap_or("");
        assert!(
            part.contains("| mpbond |") && !part.contains("| kibbutz |"),
            "{t}"
        );
    }
}
