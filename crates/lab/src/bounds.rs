//! What a scenario's links allow, without running it (`mpbond lab bounds`): for every
//! scheme, case and repetition, the fluid bound (capacity and propagation delay only) beside
//! the window-limited bound, in which each hop's sender keeps at most a window unacknowledged
//! and its acknowledgements ride the link's other direction (`mpbond_sim::fluid`).
//!
//! The two differ where a reverse link pauses: an LTE uplink outage stops every window-based
//! sender once its window is out, however much the downlink offers. The gap between them is
//! what no TCP-based scheme can recover, so a run is fairly held only against the second.

use std::fmt::Write;
use std::time::Duration;

use crate::report::median_p5_cell;
use crate::run::{bound, bound_mbps, bound_samples_mbps, video_stall_bound};
use crate::scenario::{Scenario, WorkloadKind};
use crate::scheme::Scheme;

/// The bounds table of `sc` (every variant, scheme, case and repetition), in Markdown, with
/// `window` bytes per hop for the window-limited bound and every WAN link (PS-Path, second
/// PS-Path, HS-Paths; both directions) at `wan_scale` times its capacity: "what if a
/// scheme got only 90% of what these links offer" (`mpbond lab bounds --wan-scale`).
pub fn table(sc: &Scenario, window: u64, wan_scale: f64) -> anyhow::Result<String> {
    if !(wan_scale.is_finite() && wan_scale > 0.0) {
        anyhow::bail!("the WAN scale must be a number above 0, not {wan_scale}");
    }
    let kind = sc.workload.kind;
    let mut out = String::new();
    let header = match kind {
        WorkloadKind::Download | WorkloadKind::Upload => {
            "| scheme | size | traces from | fluid time (s) | window-limited (s) | ratio |"
        }
        WorkloadKind::Bulk => {
            "| scheme | traces from | fluid mean (Mbit/s) | window-limited | fluid median / 5th pct | window-limited median / 5th pct |"
        }
        WorkloadKind::Video => {
            "| scheme | traces from | fluid mean (Mbit/s) | window-limited | fluid stall ratio | window-limited stall ratio |"
        }
        WorkloadKind::Chunks => anyhow::bail!(
            "no bound for a chunks workload (dual mode): its requests wait on their own gaps"
        ),
    };
    let columns = header.matches(" | ").count() + 1;
    for (variant, vsc) in sc.expand()? {
        if let Some(v) = &variant {
            let _ = writeln!(out, "\n### {v}\n");
        }
        let _ = writeln!(out, "{header}");
        let _ = writeln!(out, "|{}", " --- |".repeat(columns));
        for name in &vsc.schemes {
            let scheme = Scheme::parse(name)?;
            vsc.supports(scheme)?;
            let mut pooled: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
            for rep in 0..vsc.reps.max(1) {
                let mut topo = vsc.topology(Duration::ZERO, rep)?;
                scale_wan(&mut topo, wan_scale);
                let from = format!("{:.0} s", vsc.trace_offset(rep)?.as_secs_f64());
                match kind {
                    WorkloadKind::Download | WorkloadKind::Upload => {
                        let upload = kind == WorkloadKind::Upload;
                        for size in vsc.sizes().into_iter().filter(|&s| vsc.runs_at(name, s)) {
                            let f = bound(&topo, scheme, size, upload, None);
                            let w = bound(&topo, scheme, size, upload, Some(window));
                            let _ = writeln!(
                                out,
                                "| {name} | {} | {from} | {f:.3} | {w:.3} | {:.2} |",
                                kind.label(size, 0.0),
                                w / f
                            );
                        }
                    }
                    WorkloadKind::Bulk => {
                        let d = vsc.bulk_duration()?;
                        let s = vsc.sample_interval()?;
                        let f = bound_samples_mbps(&topo, scheme, d, s, None);
                        let w = bound_samples_mbps(&topo, scheme, d, s, Some(window));
                        let _ = writeln!(
                            out,
                            "| {name} | {from} | {:.2} | {:.2} | {} | {} |",
                            bound_mbps(&topo, scheme, d, None),
                            bound_mbps(&topo, scheme, d, Some(window)),
                            median_p5_cell(&f),
                            median_p5_cell(&w)
                        );
                        pooled[0].extend(f);
                        pooled[1].extend(w);
                    }
                    WorkloadKind::Video => {
                        let d = vsc.bulk_duration()?;
                        let stall = |w| -> anyhow::Result<String> {
                            Ok(video_stall_bound(&vsc, &topo, scheme, w, None)?
                                .map_or("- (adaptive ladder)".into(), |r| format!("{r:.3}")))
                        };
                        let _ = writeln!(
                            out,
                            "| {name} | {from} | {:.2} | {:.2} | {} | {} |",
                            bound_mbps(&topo, scheme, d, None),
                            bound_mbps(&topo, scheme, d, Some(window)),
                            stall(None)?,
                            stall(Some(window))?
                        );
                    }
                    WorkloadKind::Chunks => {}
                }
            }
            if kind == WorkloadKind::Bulk && vsc.reps > 1 {
                let _ = writeln!(
                    out,
                    "| {name} | pooled | - | - | {} | {} |",
                    median_p5_cell(&pooled[0]),
                    median_p5_cell(&pooled[1])
                );
            }
        }
    }
    Ok(out)
}

/// Every WAN link of `topo`, both directions, at `factor` times its capacity.
fn scale_wan(topo: &mut crate::topo::TopologySpec, factor: f64) {
    let mut links: Vec<&mut crate::topo::LinkParams> = vec![&mut topo.ps];
    if let Some(p2) = topo.ps2.as_mut() {
        links.push(p2);
    }
    links.extend(topo.helpers.iter_mut().map(|h| &mut h.hs));
    for l in links {
        l.down.rate = l.down.rate.scaled(factor);
        l.up.rate = l.up.rate.scaled(factor);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scenario(extra: &str, workload: &str) -> Scenario {
        let text = format!(
            r#"
name = "bounds"
schemes = ["single", "mpbond"]
reps = 1
[ps]
down = "8Mbps"
delay = "10ms"
{extra}
[[helper]]
hs = {{ down = "10Mbps", delay = "10ms" }}
pipe = {{ down = "5Mbps", delay = "2ms" }}
[workload]
{workload}
"#
        );
        Scenario::parse(&text).expect("test scenario")
    }

    /// Rows of the table's body (after the header and the rule).
    fn rows(t: &str) -> Vec<Vec<String>> {
        t.lines()
            .filter(|l| {
                l.starts_with("| ") && !l.starts_with("| scheme") && !l.starts_with("| ---")
            })
            .map(|l| {
                l.trim_matches('|')
                    .split(" | ")
                    .map(|c| c.trim().to_string())
                    .collect()
            })
            .collect()
    }

    /// Constant links whose uplinks never pause: the window-limited bound is the fluid's.
    #[test]
    fn steady_uplinks_give_the_fluid_bound() {
        let sc = scenario("", "kind = \"download\"\nsizes = [\"4MB\"]");
        let t = table(&sc, 4 << 20, 1.0).expect("table");
        let r = rows(&t);
        assert_eq!(r.len(), 2, "{t}");
        for row in &r {
            assert_eq!(row[3], row[4], "{t}");
            assert_eq!(row[5], "1.00", "{t}");
        }
        // single: 4 MB of IP bytes at 8 Mbit/s plus the delays; mpbond adds 5 Mbit/s.
        let single: f64 = r[0][3].parse().expect("number");
        let mpbond: f64 = r[1][3].parse().expect("number");
        assert!(single > 4.0 && single < 4.3, "{t}");
        assert!(mpbond > 2.4 && mpbond < 2.7, "{t}");
    }

    /// The PS-Path's uplink goes out from 1 s to 3 s of a 4 s bulk download: with a
    /// 500 kB window the sender stops at 1.5 s, so the window-limited mean loses about
    /// 1.5 s of 8 Mbit/s and its 5th percentile is 0, where the fluid never dips.
    #[test]
    fn an_uplink_outage_lowers_the_window_limited_bound() {
        let sc = scenario(
            "",
            "kind = \"bulk\"\nduration = \"4s\"\n\n[[change]]\nat = \"1s\"\nlink = \"ps\"\ndir = \"up\"\nrate = \"down\"\n\n[[change]]\nat = \"3s\"\nlink = \"ps\"\ndir = \"up\"\nrate = \"8Mbps\"",
        );
        let t = table(&sc, 500_000, 1.0).expect("table");
        let r = rows(&t);
        let single = &r[0];
        let fluid: f64 = single[2].parse().expect("number");
        let windowed: f64 = single[3].parse().expect("number");
        assert!(
            (fluid - 8.0 * 1448.0 / 1500.0 * 3.99 / 4.0).abs() < 0.05,
            "{t}"
        );
        let lost = fluid - windowed;
        assert!(
            (lost - 8.0 * 1448.0 / 1500.0 * 1.5 / 4.0).abs() < 0.1,
            "{t}"
        );
        assert!(single[5].ends_with("/ 0.00"), "{t}");
        assert!(!single[4].ends_with("/ 0.00"), "{t}");
    }

    /// At half the WAN capacity a single path's download takes about twice as long (the
    /// delays stay); a scale that is not a positive number is refused.
    #[test]
    fn a_wan_scale_slows_the_bound_down() {
        let sc = scenario("", "kind = \"download\"\nsizes = [\"4MB\"]");
        let full: f64 = rows(&table(&sc, 4 << 20, 1.0).expect("table"))[0][3]
            .parse()
            .expect("number");
        let half: f64 = rows(&table(&sc, 4 << 20, 0.5).expect("table"))[0][3]
            .parse()
            .expect("number");
        assert!(
            (half - 0.02 - 2.0 * (full - 0.02)).abs() < 0.01,
            "{full} {half}"
        );
        for bad in [0.0, -1.0, f64::NAN] {
            let e = table(&sc, 4 << 20, bad).expect_err("bad scale");
            assert!(e.to_string().contains("WAN scale"), "{e}");
        }
    }

    /// A dual-mode workload has no bound, and says so.
    #[test]
    fn chunks_have_no_bound() {
        let sc = scenario(
            "",
            "kind = \"chunks\"\nsizes = [\"1MB\"]\nduration = \"10s\"",
        );
        let e = table(&sc, 1 << 20, 1.0).expect_err("no bound");
        assert!(e.to_string().contains("chunks"), "{e}");
    }
}
