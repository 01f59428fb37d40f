//! Results: `results.json` (every raw number), `report.md` (a table per size with mean, stdev
//! and ratio to the lower bound), and SVG plots.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::Path;

use crate::run::RunResult;

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

/// The comparison table, one block per file size, in the order schemes were given.
pub fn table(name: &str, schemes: &[String], results: &[RunResult]) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "## {name}\n");
    let mut sizes: Vec<u64> = results.iter().map(|r| r.size).collect();
    sizes.sort_unstable();
    sizes.dedup();
    for size in sizes {
        let _ = writeln!(o, "### {:.1} MB\n", size as f64 / 1e6);
        let _ = writeln!(
            o,
            "| scheme | runs | download time (s), mean ± sd | lower bound (s) | ratio to bound | vs single | intact |"
        );
        let _ = writeln!(o, "| --- | --- | --- | --- | --- | --- | --- |");
        let by: BTreeMap<&str, Vec<&RunResult>> =
            results
                .iter()
                .filter(|r| r.size == size)
                .fold(BTreeMap::new(), |mut m, r| {
                    m.entry(r.scheme.as_str()).or_default().push(r);
                    m
                });
        let single = by
            .get("single")
            .map(|v| mean_sd(&v.iter().map(|r| r.seconds).collect::<Vec<_>>()).0);
        for s in schemes {
            let Some(rs) = by.get(s.as_str()) else {
                continue;
            };
            let t: Vec<f64> = rs.iter().map(|r| r.seconds).collect();
            let (m, sd) = mean_sd(&t);
            let lb = rs[0].lower_bound_s;
            let ok = rs.iter().filter(|r| r.intact).count();
            let _ = writeln!(
                o,
                "| {s} | {} | {m:.2} ± {sd:.2} | {lb:.2} | {:.2} | {} | {ok}/{} |",
                rs.len(),
                m / lb,
                single.map_or("-".into(), |x| format!("{:.2}", m / x)),
                rs.len()
            );
        }
        let _ = writeln!(o);
    }
    o
}

/// Writes results.json, report.md and the plots into `dir`.
pub fn write(
    dir: &Path,
    name: &str,
    schemes: &[String],
    results: &[RunResult],
) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir)?;
    std::fs::write(
        dir.join("results.json"),
        serde_json::to_string_pretty(results)?,
    )?;
    let mut md = format!("# Lab report: {name}\n\n");
    md.push_str(&table(name, schemes, results));
    md.push_str("Plots: ");
    for s in schemes {
        if let Some(r) = results.iter().find(|r| &r.scheme == s && r.rep == 0) {
            let f = format!("progress-{}-{}.svg", s, r.size);
            std::fs::write(dir.join(&f), progress_svg(r))?;
            let _ = write!(md, "[{f}]({f}) ");
        }
    }
    md.push('\n');
    std::fs::write(dir.join("report.md"), md)?;
    Ok(())
}

/// Download progress per subflow (IP bytes delivered to the primary over time), like MPBond's
/// Figure 4.
pub fn progress_svg(r: &RunResult) -> String {
    let (w, h, pad) = (640.0, 360.0, 50.0);
    let tmax = r
        .subflows
        .iter()
        .filter_map(|s| s.completion_s)
        .fold(r.seconds, f64::max)
        .max(0.1);
    let bmax = r.subflows.iter().map(|s| s.bytes).max().unwrap_or(1).max(1) as f64;
    let colors = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e"];
    let mut o = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n<text x=\"{pad}\" y=\"20\">{} {:.1} MB, rep {}: {:.2} s (bound {:.2} s)</text>\n",
        r.scheme,
        r.size as f64 / 1e6,
        r.rep,
        r.seconds,
        r.lower_bound_s
    );
    let _ = writeln!(
        o,
        "<line x1=\"{pad}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"black\"/><line x1=\"{pad}\" y1=\"{pad}\" x2=\"{pad}\" y2=\"{}\" stroke=\"black\"/>",
        h - pad,
        w - pad,
        h - pad,
        h - pad
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
        let c = colors[i % colors.len()];
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
