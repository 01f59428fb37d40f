//! Scenario files (`scenarios/*.toml`): topology, link profiles, changes, workload, schemes
//! and repetitions. docs/lab.md documents every key.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use mpbond_core::units::{parse_duration, parse_rate_bps, parse_size};
use mpbond_core::Time;
use mpbond_sim::link::LinkConfig;
use mpbond_sim::rate::{RateProfile, Source, Trace};
use serde::Deserialize;

use crate::topo::{HelperLinks, LinkParams, TopologySpec};

/// One link as written: rates per direction (`"8Mbps"`, or `"trace:PATH"`), one-way delay,
/// queue and loss.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkDef {
    /// Toward the primary.
    pub down: String,
    /// Away from the primary (default: same as down).
    #[serde(default)]
    pub up: Option<String>,
    /// One-way delay, both directions.
    #[serde(default = "default_delay")]
    pub delay: String,
    /// Drop-tail queue per direction, bytes (`"150KB"`).
    #[serde(default = "default_queue")]
    pub queue: String,
    /// Random loss probability per packet, 0..1.
    #[serde(default)]
    pub loss: f64,
}

fn default_delay() -> String {
    "25ms".into()
}
fn default_queue() -> String {
    "150KB".into()
}

/// A helper.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HelperDef {
    /// Its HS-Path.
    pub hs: LinkDef,
    /// Its pipe.
    pub pipe: LinkDef,
}

/// A change at a time after the workload starts.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChangeDef {
    /// When, after the workload starts (`"2s"`).
    pub at: String,
    /// Which link: `ps`, `hs1`, `pipe1`, ...
    pub link: String,
    /// `down`, `up` or `both` (default).
    #[serde(default = "default_both")]
    pub dir: String,
    /// The new rate (`"1Mbps"`, `"down"`).
    pub rate: String,
}

fn default_both() -> String {
    "both".into()
}

/// The workload.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkloadDef {
    /// File sizes to download, one after the other (`["4MB", "10MB"]`).
    pub sizes: Vec<String>,
}

/// A scenario file.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Its name, for reports.
    pub name: String,
    /// Schemes to compare (see [`crate::scheme::Scheme`]).
    pub schemes: Vec<String>,
    /// Repetitions of every (scheme, size).
    #[serde(default = "default_reps")]
    pub reps: usize,
    /// The primary's WAN link.
    pub ps: LinkDef,
    /// The helpers.
    #[serde(default, rename = "helper")]
    pub helpers: Vec<HelperDef>,
    /// Changes.
    #[serde(default, rename = "change")]
    pub changes: Vec<ChangeDef>,
    /// The workload.
    pub workload: WorkloadDef,
    /// Random-loss seed.
    #[serde(default)]
    pub seed: u64,
}

fn default_reps() -> usize {
    3
}

impl Scenario {
    /// Reads and checks a scenario file; trace paths are relative to it.
    pub fn load(path: &Path) -> anyhow::Result<Scenario> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
        let mut s: Scenario =
            toml::from_str(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        let dir = path.parent().unwrap_or(Path::new("."));
        let fix = |l: &mut LinkDef| {
            for r in std::iter::once(&mut l.down).chain(l.up.iter_mut()) {
                if let Some(p) = r.strip_prefix("trace:") {
                    if Path::new(p).is_relative() && !Path::new(p).exists() {
                        *r = format!("trace:{}", dir.join(p).display());
                    }
                }
            }
        };
        fix(&mut s.ps);
        for h in &mut s.helpers {
            fix(&mut h.hs);
            fix(&mut h.pipe);
        }
        s.check()
            .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        Ok(s)
    }

    /// Parses scenario text (for tests and built-in scenarios).
    pub fn parse(text: &str) -> anyhow::Result<Scenario> {
        let s: Scenario = toml::from_str(text)?;
        s.check()?;
        Ok(s)
    }

    fn check(&self) -> anyhow::Result<()> {
        for s in &self.schemes {
            crate::scheme::Scheme::parse(s)?;
        }
        for s in &self.workload.sizes {
            parse_size(s)?;
        }
        if self.workload.sizes.is_empty() {
            anyhow::bail!("workload.sizes is empty");
        }
        self.topology(Duration::ZERO)?;
        Ok(())
    }

    /// Sizes in bytes.
    pub fn sizes(&self) -> Vec<u64> {
        self.workload
            .sizes
            .iter()
            .filter_map(|s| parse_size(s).ok())
            .collect()
    }

    /// The testbed, with every rate profile starting at the scenario's nominal rates and
    /// traces and changes shifted to begin `warmup` after emulator time 0 (when the workload
    /// starts).
    pub fn topology(&self, warmup: Duration) -> anyhow::Result<TopologySpec> {
        let w = Time::ZERO + warmup;
        let mut ps = params(&self.ps, w)?;
        let mut helpers = Vec::new();
        for h in &self.helpers {
            helpers.push(HelperLinks {
                hs: params(&h.hs, w)?,
                pipes: vec![params(&h.pipe, w)?],
            });
        }
        for c in &self.changes {
            let at = w + parse_duration(&c.at)?;
            let bps = parse_rate_bps(&c.rate)?;
            let target: &mut LinkParams = match c.link.as_str() {
                "ps" => &mut ps,
                l => {
                    let (kind, k) =
                        l.split_at(l.find(|ch: char| ch.is_ascii_digit()).unwrap_or(l.len()));
                    let k: usize = k
                        .parse()
                        .map_err(|_| anyhow::anyhow!("unknown link {l:?}"))?;
                    let h = helpers
                        .get_mut(k.wrapping_sub(1))
                        .ok_or_else(|| anyhow::anyhow!("no helper {k} for link {l:?}"))?;
                    match kind {
                        "hs" => &mut h.hs,
                        "pipe" => &mut h.pipes[0],
                        _ => anyhow::bail!("unknown link {l:?} (ps, hsK, pipeK)"),
                    }
                }
            };
            match c.dir.as_str() {
                "down" => target.down.rate.change_at(at, Source::Constant(bps)),
                "up" => target.up.rate.change_at(at, Source::Constant(bps)),
                "both" => {
                    target.down.rate.change_at(at, Source::Constant(bps));
                    target.up.rate.change_at(at, Source::Constant(bps));
                }
                d => anyhow::bail!("change dir {d:?}: down, up or both"),
            }
        }
        Ok(TopologySpec {
            ps,
            ps2: None,
            helpers,
            seed: self.seed,
        })
    }
}

fn profile(rate: &str, warmup: Time) -> anyhow::Result<RateProfile> {
    if let Some(path) = rate.strip_prefix("trace:") {
        let t = Arc::new(Trace::load(path)?);
        let mut p = RateProfile::constant(t.mean_bps());
        p.change_at(warmup, Source::Trace(t));
        return Ok(p);
    }
    Ok(RateProfile::constant(parse_rate_bps(rate)?))
}

fn params(l: &LinkDef, warmup: Time) -> anyhow::Result<LinkParams> {
    let delay = parse_duration(&l.delay)?;
    let queue_bytes = parse_size(&l.queue)?;
    if !(0.0..1.0).contains(&l.loss) {
        anyhow::bail!("loss {} must be in [0, 1)", l.loss);
    }
    let cfg = |rate: &str| -> anyhow::Result<LinkConfig> {
        Ok(LinkConfig {
            rate: profile(rate, warmup)?,
            delay,
            queue_bytes,
            loss: l.loss,
        })
    };
    Ok(LinkParams {
        down: cfg(&l.down)?,
        up: cfg(l.up.as_deref().unwrap_or(&l.down))?,
    })
}
