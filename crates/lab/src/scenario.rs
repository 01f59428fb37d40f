//! Scenario files (`scenarios/*.toml`): topology, link profiles, changes, workload, schemes
//! and repetitions. docs/lab.md documents every key.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use mpbond_core::units::{parse_duration, parse_rate_bps, parse_size};
use mpbond_core::Time;
use mpbond_sim::link::LinkConfig;
use mpbond_sim::rate::{RateProfile, Source, Trace};
use serde::{Deserialize, Serialize};

use crate::energy::Radio;
use crate::scheme::Scheme;
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
    /// The radio behind it, for the energy model: `lte`, `wifi`, `bluetooth` or `ethernet`
    /// (default: `lte` for WAN links, `wifi` for pipes and `ps2`).
    #[serde(default)]
    pub radio: Option<String>,
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

/// What the workload does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum WorkloadKind {
    /// Download a file of each size, timing it.
    Download,
    /// Download without end for `duration`, sampling throughput every `sample`.
    Bulk,
    /// Upload a file of each size to the origin, timing until it confirms the hash.
    Upload,
}

impl WorkloadKind {
    /// What one item of the workload is, for progress lines and reports: a file of `size`
    /// bytes, or a bulk download of `bulk_s` seconds.
    pub fn label(self, size: u64, bulk_s: f64) -> String {
        match self {
            WorkloadKind::Bulk => format!("bulk download, {bulk_s:.0} s"),
            WorkloadKind::Download => format!("download {:.1} MB", size as f64 / 1e6),
            WorkloadKind::Upload => format!("upload {:.1} MB", size as f64 / 1e6),
        }
    }
}

/// The workload.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkloadDef {
    /// `download` (default), `bulk` or `upload`.
    #[serde(default = "default_kind")]
    pub kind: WorkloadKind,
    /// File sizes, one after the other (`["4MB", "10MB"]`), for `download` and `upload`.
    #[serde(default)]
    pub sizes: Vec<String>,
    /// How long a `bulk` download runs (default 60 s).
    #[serde(default = "default_duration")]
    pub duration: String,
    /// Throughput sampling interval of `bulk` (default 100 ms).
    #[serde(default = "default_sample")]
    pub sample: String,
}

fn default_kind() -> WorkloadKind {
    WorkloadKind::Download
}
fn default_duration() -> String {
    "60s".into()
}
fn default_sample() -> String {
    "100ms".into()
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
    /// The primary's second WAN link (WiFi, for `mptcp-wifi-lte`), if any.
    #[serde(default)]
    pub ps2: Option<LinkDef>,
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
        if let Some(p2) = &mut s.ps2 {
            fix(p2);
        }
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
            let scheme = crate::scheme::Scheme::parse(s)?;
            self.supports(scheme)?;
        }
        for s in &self.workload.sizes {
            parse_size(s)?;
        }
        match self.workload.kind {
            WorkloadKind::Download | WorkloadKind::Upload if self.workload.sizes.is_empty() => {
                anyhow::bail!("workload.sizes is empty")
            }
            WorkloadKind::Bulk => {
                if self.bulk_duration()? < Duration::from_secs(1) {
                    anyhow::bail!("workload.duration must be at least 1 s");
                }
                let s = parse_duration(&self.workload.sample)?;
                if s < Duration::from_millis(10) {
                    anyhow::bail!("workload.sample must be at least 10 ms");
                }
            }
            _ => {}
        }
        for l in self.link_defs() {
            if let Some(r) = &l.radio {
                Radio::parse(r)?;
            }
        }
        self.topology(Duration::ZERO)?;
        Ok(())
    }

    /// Whether this scenario can run `scheme`, with the reason if not.
    pub fn supports(&self, scheme: Scheme) -> anyhow::Result<()> {
        match scheme {
            Scheme::MptcpWifiLte if self.ps2.is_none() => {
                anyhow::bail!("scheme mptcp-wifi-lte needs a [ps2] link (the primary's WiFi)")
            }
            Scheme::Kibbutz | Scheme::KibbutzN | Scheme::Combine { .. }
                if self.helpers.is_empty() =>
            {
                anyhow::bail!("scheme {scheme} needs at least one [[helper]]")
            }
            Scheme::Combine { .. } if self.workload.kind != WorkloadKind::Download => {
                anyhow::bail!("scheme {scheme} only downloads files (COMBINE fetches byte ranges)")
            }
            _ => Ok(()),
        }
    }

    /// A `bulk` workload's length.
    pub fn bulk_duration(&self) -> anyhow::Result<Duration> {
        Ok(parse_duration(&self.workload.duration)?)
    }

    /// A `bulk` workload's sampling interval.
    pub fn sample_interval(&self) -> anyhow::Result<Duration> {
        Ok(parse_duration(&self.workload.sample)?)
    }

    fn link_defs(&self) -> impl Iterator<Item = &LinkDef> {
        std::iter::once(&self.ps)
            .chain(self.ps2.iter())
            .chain(self.helpers.iter().flat_map(|h| [&h.hs, &h.pipe]))
    }

    /// The radio of every emulated link, by the emulator's link name (`ps`, `ps2`, `hs1`,
    /// `p11`).
    pub fn radios(&self) -> anyhow::Result<Vec<(String, Radio)>> {
        let pick = |l: &LinkDef, default: Radio| -> anyhow::Result<Radio> {
            l.radio.as_deref().map_or(Ok(default), Radio::parse)
        };
        let mut v = vec![("ps".to_string(), pick(&self.ps, Radio::Lte)?)];
        if let Some(p2) = &self.ps2 {
            v.push(("ps2".into(), pick(p2, Radio::Wifi)?));
        }
        for (i, h) in self.helpers.iter().enumerate() {
            v.push((format!("hs{}", i + 1), pick(&h.hs, Radio::Lte)?));
            v.push((format!("p{}1", i + 1), pick(&h.pipe, Radio::Wifi)?));
        }
        Ok(v)
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
        let mut ps2 = self.ps2.as_ref().map(|l| params(l, w)).transpose()?;
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
                "ps2" => ps2
                    .as_mut()
                    .ok_or_else(|| anyhow::anyhow!("change on ps2, but there is no [ps2]"))?,
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
                        _ => anyhow::bail!("unknown link {l:?} (ps, ps2, hsK, pipeK)"),
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
            ps2,
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
