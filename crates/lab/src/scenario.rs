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
use crate::scheme::{Kind, Scheme};
use crate::topo::{HelperLinks, LinkParams, TopologySpec};
use crate::wlan;

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
fn default_cc() -> String {
    "cubic".into()
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
    /// Stream a DASH video of `duration` with the player emulator ([`crate::video`]).
    Video,
    /// Files of `sizes[0]` one after the other with random pauses of `gap` between them, for
    /// `duration`, on the primary and, with `dual = true`, on helper 1 too (MPBond §6.6).
    Chunks,
}

impl WorkloadKind {
    /// What one item of the workload is, for progress lines and reports: a file of `size`
    /// bytes, or a bulk download of `bulk_s` seconds.
    pub fn label(self, size: u64, bulk_s: f64) -> String {
        match self {
            WorkloadKind::Bulk => format!("bulk download, {bulk_s:.0} s"),
            WorkloadKind::Download => format!("download {:.1} MB", size as f64 / 1e6),
            WorkloadKind::Upload => format!("upload {:.1} MB", size as f64 / 1e6),
            WorkloadKind::Video => format!("video, {bulk_s:.0} s"),
            WorkloadKind::Chunks => format!("{:.1} MB chunks", size as f64 / 1e6),
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
    /// `video`: the bitrate ladder, `bbb`, `tos` or `fixed:<rate>`.
    #[serde(default)]
    pub ladder: Option<String>,
    /// `video`: seconds of video per segment (default 2 s).
    #[serde(default = "default_segment")]
    pub segment: String,
    /// `chunks`: the pause after each chunk, uniform between these (default 1 s to 5 s).
    #[serde(default = "default_gap")]
    pub gap: [String; 2],
    /// `download`: first fetch this much (`"1MB"`) through the same client, daemons and
    /// links, then stay idle until the measured download starts (`run::WARM_LEAD` after the
    /// workload's usual start). Every run otherwise starts from fresh daemons, whose path
    /// estimates know nothing yet; a deployed mpbond keeps its session, and its estimates,
    /// across downloads. Default: none.
    #[serde(default)]
    pub warm: Option<String>,
}

fn default_gap() -> [String; 2] {
    ["1s".into(), "5s".into()]
}

fn default_segment() -> String {
    "2s".into()
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
    /// TCP congestion control of every testbed namespace (`net.ipv4.tcp_congestion_control`,
    /// one per namespace): every TCP connection of every scheme uses it, the proxy's subflows
    /// included. Default `cubic`, the paper's "decoupled CUBIC" (MPBond §6.1), so results do
    /// not change with the host's default (BBR on some machines).
    #[serde(default = "default_cc")]
    pub cc: String,
    /// The receive buffer a phone's TCP socket starts with (`net.ipv4.tcp_rmem`'s default on
    /// the primary and the helpers), e.g. `128KiB` as a Linux server. Default 1 MiB, as
    /// Android's LTE profiles (`topo::PHONE_RECEIVE_BUFFER` says what the choice does).
    #[serde(default)]
    pub phone_rcvbuf: Option<String>,
    /// Variants of the topology, each run and reported on its own (`[[variant]]`).
    #[serde(default, rename = "variant")]
    pub variants: Vec<VariantDef>,
    /// A grid of variants: every combination of these link rates (`[sweep] ps = [...]`).
    #[serde(default)]
    pub sweep: std::collections::BTreeMap<String, Vec<String>>,
    /// Where the scenario comes from in the paper (`"§6.2, Figure 5"`), for reports.
    #[serde(default)]
    pub paper: Option<String>,
    /// The paper's results this scenario checks (`[[claim]]`).
    #[serde(default, rename = "claim")]
    pub claims: Vec<ClaimDef>,
    /// What `mpbond lab paper --quick` runs instead (`[quick]`).
    #[serde(default)]
    pub quick: Option<QuickDef>,
    /// Dual mode (MPBond §6.6): helper 1 is a primary too, with the primary as its helper,
    /// and both run the workload at once. Schemes: `single` (each device alone) and `mpbond`.
    #[serde(default)]
    pub dual: bool,
    /// How far into every trace (and WLAN walk) each repetition starts: repetition `r` begins
    /// `r × trace_step` in, wrapping at each trace's end (`"15s"`; default 0, every repetition
    /// replays the same first seconds). Runs go repetition by repetition, so every scheme of a
    /// repetition meets the same stretch of the traces and ratios stay paired, while the
    /// repetitions together sample the traces' varying conditions (MPBond §6.4).
    #[serde(default)]
    pub trace_step: Option<String>,
    /// The sizes at which some schemes run, where not at every size of the workload
    /// (`[scheme_sizes] "combine-64KiB@2" = ["512KB"]`). MPBond §6.1 tried COMBINE with 128 KB
    /// and 64 KB chunks for small files only and reported the best; a scheme not listed here
    /// runs at every size.
    #[serde(default)]
    pub scheme_sizes: std::collections::BTreeMap<String, Vec<String>>,
}

/// One variant of a scenario: new rates for some links.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VariantDef {
    /// Its name in reports.
    pub name: String,
    /// Link (`ps`, `ps2`, `hsK`, `pipeK`) to rate (both directions unless the link has its
    /// own `up`), e.g. `{ ps = "1Mbps", hs1 = "18Mbps" }`.
    pub set: std::collections::BTreeMap<String, String>,
}

/// A published number and how to compute ours (docs/evaluation.md).
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ClaimDef {
    /// What it says, in words.
    pub what: String,
    /// The metric (see [`crate::claim::Metric`]).
    pub metric: String,
    /// The scheme measured.
    pub scheme: String,
    /// If set, the claim is the ratio scheme ÷ `vs`.
    #[serde(default)]
    pub vs: Option<String>,
    /// The paper's value, or its range over the cases the claim covers.
    pub paper: PaperValue,
    /// Only runs of this size.
    #[serde(default)]
    pub size: Option<String>,
    /// Only this variant (default: every variant, one case each).
    #[serde(default)]
    pub variant: Option<String>,
}

/// A single published value or a range.
#[derive(Clone, Copy, Debug, Deserialize, Serialize)]
#[serde(untagged)]
pub enum PaperValue {
    /// One number.
    One(f64),
    /// From .. to.
    Range([f64; 2]),
}

/// Overrides for the quick suite.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QuickDef {
    /// Repetitions (default 1).
    #[serde(default)]
    pub reps: Option<usize>,
    /// Schemes.
    #[serde(default)]
    pub schemes: Option<Vec<String>>,
    /// File sizes.
    #[serde(default)]
    pub sizes: Option<Vec<String>>,
    /// Bulk or video duration.
    #[serde(default)]
    pub duration: Option<String>,
    /// Only these variants, by name.
    #[serde(default)]
    pub variants: Option<Vec<String>>,
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
        let fix_rate = |r: &mut String| {
            if let Some(spec) = r.strip_prefix("trace:") {
                let (p, scale) = match spec.rsplit_once('*') {
                    Some((p, f)) => (p, format!("*{f}")),
                    None => (spec, String::new()),
                };
                if Path::new(p).is_relative() && !Path::new(p).exists() {
                    *r = format!("trace:{}{scale}", dir.join(p).display());
                }
            }
        };
        let fix = |l: &mut LinkDef| {
            for r in std::iter::once(&mut l.down).chain(l.up.iter_mut()) {
                fix_rate(r);
            }
        };
        for v in &mut s.variants {
            v.set.values_mut().for_each(fix_rate);
        }
        for values in s.sweep.values_mut() {
            values.iter_mut().for_each(fix_rate);
        }
        fix(&mut s.ps);
        if let Some(p2) = &mut s.ps2 {
            fix(p2);
        }
        for h in &mut s.helpers {
            fix(&mut h.hs);
            fix(&mut h.pipe);
        }
        s.check()
            .and_then(|()| s.check_claims())
            .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        Ok(s)
    }

    /// Parses scenario text (for tests and built-in scenarios).
    pub fn parse(text: &str) -> anyhow::Result<Scenario> {
        let s: Scenario = toml::from_str(text)?;
        s.check()?;
        s.check_claims()?;
        Ok(s)
    }

    /// The phones' initial receive buffer in bytes (`phone_rcvbuf`, default Android's), which
    /// must lie between 4 KiB (`tcp_rmem`'s minimum here) and the testbed's maximum.
    pub fn phone_rcvbuf(&self) -> anyhow::Result<u64> {
        use crate::topo::{PHONE_RECEIVE_BUFFER, RECEIVE_BUFFER_MAX};
        let Some(v) = &self.phone_rcvbuf else {
            return Ok(PHONE_RECEIVE_BUFFER);
        };
        let b = parse_size(v).map_err(|e| anyhow::anyhow!("phone_rcvbuf: {e}"))?;
        if !(4096..=RECEIVE_BUFFER_MAX).contains(&b) {
            anyhow::bail!(
                "phone_rcvbuf {v:?}: must be from 4KiB to {} MiB, the testbed's tcp_rmem maximum",
                RECEIVE_BUFFER_MAX >> 20
            );
        }
        Ok(b)
    }

    fn check(&self) -> anyhow::Result<()> {
        crate::claim::check(&self.claims)?;
        self.phone_rcvbuf()?;
        for s in &self.schemes {
            let scheme = crate::scheme::Scheme::parse(s)?;
            self.supports(scheme)?;
        }
        for s in &self.workload.sizes {
            parse_size(s)?;
        }
        let workload_sizes = self.sizes();
        for (scheme, sizes) in &self.scheme_sizes {
            crate::scheme::Scheme::parse(scheme)
                .map_err(|e| anyhow::anyhow!("scheme_sizes: {e}"))?;
            if sizes.is_empty() {
                anyhow::bail!(
                    "scheme_sizes.{scheme:?} lists no size; leave the scheme out instead"
                );
            }
            for s in sizes {
                let size =
                    parse_size(s).map_err(|e| anyhow::anyhow!("scheme_sizes.{scheme:?}: {e}"))?;
                if !workload_sizes.contains(&size) {
                    anyhow::bail!(
                        "scheme_sizes.{scheme:?}: {s} is not one of workload.sizes ({})",
                        self.workload.sizes.join(", ")
                    );
                }
            }
        }
        self.warm()?;
        match self.workload.kind {
            WorkloadKind::Download | WorkloadKind::Upload if self.workload.sizes.is_empty() => {
                anyhow::bail!("workload.sizes is empty")
            }
            WorkloadKind::Video => {
                crate::video::ladder(self.workload.ladder.as_deref().unwrap_or(""))?;
                if parse_duration(&self.workload.segment)? < Duration::from_millis(100) {
                    anyhow::bail!("workload.segment must be at least 100 ms");
                }
                if self.bulk_duration()? < Duration::from_secs(1) {
                    anyhow::bail!("workload.duration must be at least 1 s");
                }
            }
            WorkloadKind::Chunks => {
                if self.workload.sizes.len() != 1 {
                    anyhow::bail!("a chunks workload has one size, the chunk's");
                }
                let (a, b) = self.gap()?;
                if a > b {
                    anyhow::bail!("workload.gap: the first bound is above the second");
                }
                if self.bulk_duration()? < Duration::from_secs(1) {
                    anyhow::bail!("workload.duration must be at least 1 s");
                }
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
        // Also parses trace_step: repetition 0's offset is 0 × trace_step.
        self.topology(Duration::ZERO, 0)?;
        Ok(())
    }

    /// The scenario's variants, each a scenario of its own with its name (`None` for a
    /// scenario without variants). `[sweep]` gives every combination, `[[variant]]` adds its
    /// own; a variant's rates replace the links' `down` (and `up` unless the link sets it).
    pub fn expand(&self) -> anyhow::Result<Vec<(Option<String>, Scenario)>> {
        let defs = self.variant_defs()?;
        if defs.is_empty() {
            return Ok(vec![(None, self.clone())]);
        }
        let mut out = Vec::new();
        for d in defs {
            let mut sc = self.clone();
            sc.variants.clear();
            sc.sweep.clear();
            for (link, rate) in &d.set {
                let l: &mut LinkDef = match link.as_str() {
                    "ps" => &mut sc.ps,
                    "ps2" => sc
                        .ps2
                        .as_mut()
                        .ok_or_else(|| anyhow::anyhow!("variant {:?}: no [ps2]", d.name))?,
                    other => {
                        let (kind, k) = other.split_at(
                            other
                                .find(|c: char| c.is_ascii_digit())
                                .unwrap_or(other.len()),
                        );
                        let h = k
                            .parse::<usize>()
                            .ok()
                            .and_then(|k| sc.helpers.get_mut(k.wrapping_sub(1)))
                            .ok_or_else(|| {
                                anyhow::anyhow!("variant {:?}: no link {other:?}", d.name)
                            })?;
                        match kind {
                            "hs" => &mut h.hs,
                            "pipe" => &mut h.pipe,
                            _ => anyhow::bail!(
                                "variant {:?}: unknown link {other:?} (ps, ps2, hsK, pipeK)",
                                d.name
                            ),
                        }
                    }
                };
                l.down = rate.clone();
            }
            sc.check()
                .map_err(|e| anyhow::anyhow!("variant {:?}: {e}", d.name))?;
            out.push((Some(d.name), sc));
        }
        Ok(out)
    }

    /// Each claim names what the file runs: its scheme and baseline among the schemes (a
    /// `best:` or `best-time:` baseline at least one of them, each of a list), its size
    /// among the sizes and its variant among the variants. A claim that named something
    /// else would find no case and read "not run" after the whole suite; checked on the
    /// file as written, since `--schemes`, `--sizes`, `--variant` and `--quick` may leave a
    /// claim without its case on purpose.
    fn check_claims(&self) -> anyhow::Result<()> {
        let variants: Vec<String> = self.variant_defs()?.into_iter().map(|d| d.name).collect();
        let runs = |name: &str| self.schemes.iter().any(|s| s == name);
        for c in &self.claims {
            let bad = |what: String| anyhow::anyhow!("claim {:?}: {what}", c.what);
            if !runs(&c.scheme) {
                return Err(bad(format!("scheme {:?} is not one of schemes", c.scheme)));
            }
            if let Some(vs) = &c.vs {
                let ok = match vs
                    .strip_prefix("best-time:")
                    .or_else(|| vs.strip_prefix("best:"))
                {
                    Some(list) if list.contains(',') => list.split(',').all(|n| runs(n.trim())),
                    Some(prefix) => self.schemes.iter().any(|s| s.starts_with(prefix)),
                    None => runs(vs),
                };
                if !ok {
                    return Err(bad(format!("baseline {vs:?} is not among schemes")));
                }
            }
            if let Some(size) = &c.size {
                let b = parse_size(size).map_err(|e| bad(e.to_string()))?;
                if !self.sizes().contains(&b) {
                    return Err(bad(format!("size {size} is not one of workload.sizes")));
                }
            }
            if let Some(v) = &c.variant {
                if !variants.contains(v) {
                    return Err(bad(format!(
                        "variant {v:?} is not one of the file's ({})",
                        variants.join("; ")
                    )));
                }
            }
        }
        Ok(())
    }

    /// The variants `[sweep]` and `[[variant]]` define, sweep cells first.
    fn variant_defs(&self) -> anyhow::Result<Vec<VariantDef>> {
        let mut defs = Vec::new();
        let mut grid: Vec<Vec<(String, String)>> = vec![Vec::new()];
        for (link, values) in &self.sweep {
            if values.is_empty() {
                anyhow::bail!("sweep.{link} is empty");
            }
            grid = grid
                .into_iter()
                .flat_map(|g| {
                    values.iter().map(move |v| {
                        let mut g = g.clone();
                        g.push((link.clone(), v.clone()));
                        g
                    })
                })
                .collect();
        }
        if !self.sweep.is_empty() {
            for g in grid {
                defs.push(VariantDef {
                    name: g
                        .iter()
                        .map(|(l, v)| format!("{l} {v}"))
                        .collect::<Vec<_>>()
                        .join(", "),
                    set: g.into_iter().collect(),
                });
            }
        }
        defs.extend(self.variants.iter().cloned());
        Ok(defs)
    }

    /// The workload at `sizes` instead of its own; a scheme limited to sizes the cut leaves
    /// out ([`Scenario::scheme_sizes`]) does not run at all.
    fn cut_sizes(&mut self, sizes: Vec<String>) {
        self.workload.sizes = sizes;
        let kept = self.sizes();
        let mut gone = Vec::new();
        for (scheme, sizes) in self.scheme_sizes.iter_mut() {
            sizes.retain(|s| parse_size(s).is_ok_and(|s| kept.contains(&s)));
            if sizes.is_empty() {
                gone.push(scheme.clone());
            }
        }
        for g in gone {
            self.scheme_sizes.remove(&g);
            self.schemes.retain(|s| *s != g);
        }
    }

    /// Only these of the workload's sizes (`mpbond lab run --sizes`), to repeat one case of
    /// an experiment without a copy of its file. A size the workload lacks is refused.
    pub fn only_sizes(&mut self, keep: &[String]) -> anyhow::Result<()> {
        if keep.is_empty() {
            anyhow::bail!("--sizes lists no size");
        }
        let have = self.sizes();
        for k in keep {
            let size = parse_size(k).map_err(|e| anyhow::anyhow!("--sizes: {e}"))?;
            if !have.contains(&size) {
                anyhow::bail!(
                    "--sizes: {k} is not one of the workload's sizes ({})",
                    self.workload.sizes.join(", ")
                );
            }
        }
        self.cut_sizes(keep.to_vec());
        self.check()
    }

    /// Keeps only the variants named in `keep` (`mpbond lab run --variant`, `[quick]
    /// variants`): one cell of a sweep, repeated, without a copy of its file. `what` names
    /// the option in errors.
    pub fn only_variants(&mut self, keep: &[String], what: &str) -> anyhow::Result<()> {
        if keep.is_empty() {
            anyhow::bail!("{what} lists no variant");
        }
        let all = self.expand()?;
        let names: Vec<&str> = all.iter().filter_map(|v| v.0.as_deref()).collect();
        for k in keep {
            if !names.contains(&k.as_str()) {
                if names.is_empty() {
                    anyhow::bail!("{what}: no variant {k:?}; the scenario has no variants");
                }
                anyhow::bail!("{what}: no variant {k:?}; it has {}", names.join("; "));
            }
        }
        self.sweep.clear();
        self.variants = all
            .into_iter()
            .filter_map(|(name, v)| {
                let name = name?;
                keep.contains(&name).then(|| VariantDef {
                    name,
                    set: link_rates(&v),
                })
            })
            .collect();
        self.check()
    }

    /// The scenario as `mpbond lab paper --quick` runs it: `[quick]` applied, one repetition
    /// unless it says otherwise.
    pub fn quick(&self) -> anyhow::Result<Scenario> {
        let mut sc = self.clone();
        let q = self.quick.clone().unwrap_or_default();
        sc.reps = q.reps.unwrap_or(1);
        if let Some(s) = q.schemes {
            sc.schemes = s;
        }
        if let Some(s) = q.sizes {
            sc.cut_sizes(s);
        }
        if let Some(d) = q.duration {
            sc.workload.duration = d;
        }
        if let Some(keep) = q.variants {
            sc.only_variants(&keep, "quick.variants")?;
        }
        sc.check()?;
        Ok(sc)
    }

    /// `chunks`: the pause bounds.
    /// The warm-up download's size ([`WorkloadDef::warm`]), if any.
    pub fn warm(&self) -> anyhow::Result<Option<u64>> {
        let Some(w) = &self.workload.warm else {
            return Ok(None);
        };
        if self.workload.kind != WorkloadKind::Download {
            anyhow::bail!("workload.warm applies to downloads only");
        }
        let size = parse_size(w).map_err(|e| anyhow::anyhow!("workload.warm: {e}"))?;
        if size == 0 {
            anyhow::bail!("workload.warm: a warm-up of 0 bytes; leave the key out instead");
        }
        Ok(Some(size))
    }

    /// `chunks`: the bounds of the pause after each chunk.
    pub fn gap(&self) -> anyhow::Result<(Duration, Duration)> {
        Ok((
            parse_duration(&self.workload.gap[0])?,
            parse_duration(&self.workload.gap[1])?,
        ))
    }

    /// Whether this scenario can run `scheme`, with the reason if not.
    pub fn supports(&self, scheme: Scheme) -> anyhow::Result<()> {
        if self.dual {
            if self.helpers.len() != 1 {
                anyhow::bail!("dual mode needs exactly one [[helper]]");
            }
            if !matches!(scheme.kind, Kind::Single | Kind::Mpbond(_)) {
                anyhow::bail!("dual mode runs single and mpbond only, not {scheme}");
            }
        }
        match scheme.kind {
            Kind::MptcpWifiLte if self.ps2.is_none() => {
                anyhow::bail!("scheme mptcp-wifi-lte needs a [ps2] link (the primary's WiFi)")
            }
            Kind::Kibbutz | Kind::KibbutzN | Kind::KibbutzSplit { .. } | Kind::Combine { .. }
                if self.helpers.is_empty() =>
            {
                anyhow::bail!("scheme {scheme} needs at least one [[helper]]")
            }
            Kind::Combine { .. } | Kind::KibbutzSplit { .. }
                if self.workload.kind != WorkloadKind::Download =>
            {
                anyhow::bail!("scheme {scheme} only downloads files (it fetches byte ranges)")
            }
            _ => Ok(()),
        }
    }

    /// The video player a `video` workload runs.
    pub fn player(&self) -> anyhow::Result<crate::video::Player> {
        Ok(crate::video::Player {
            ladder: crate::video::ladder(self.workload.ladder.as_deref().unwrap_or(""))?,
            segment_s: parse_duration(&self.workload.segment)?.as_secs_f64(),
            video_s: self.bulk_duration()?.as_secs_f64(),
        })
    }

    /// A `bulk` workload's length (and a `video` workload's).
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
            Ok(l.radio.as_deref().map_or(Ok(default), Radio::parse)?)
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
}

/// Every link's `down` rate by its variant name (`ps`, `hs1`, `pipe1`, ...).
fn link_rates(sc: &Scenario) -> std::collections::BTreeMap<String, String> {
    let mut m = std::collections::BTreeMap::new();
    m.insert("ps".to_string(), sc.ps.down.clone());
    if let Some(p) = &sc.ps2 {
        m.insert("ps2".into(), p.down.clone());
    }
    for (i, h) in sc.helpers.iter().enumerate() {
        m.insert(format!("hs{}", i + 1), h.hs.down.clone());
        m.insert(format!("pipe{}", i + 1), h.pipe.down.clone());
    }
    m
}

impl Scenario {
    /// Whether `scheme` runs at `size`: at every size unless [`Scenario::scheme_sizes`] lists
    /// it.
    pub fn runs_at(&self, scheme: &str, size: u64) -> bool {
        self.scheme_sizes
            .get(scheme)
            .is_none_or(|v| v.iter().any(|s| parse_size(s).ok() == Some(size)))
    }

    /// Sizes in bytes.
    pub fn sizes(&self) -> Vec<u64> {
        self.workload
            .sizes
            .iter()
            .filter_map(|s| parse_size(s).ok())
            .collect()
    }

    /// Where repetition `rep` starts every trace: `rep × trace_step` (see
    /// [`Scenario::trace_step`]).
    pub fn trace_offset(&self, rep: usize) -> anyhow::Result<Duration> {
        let Some(step) = &self.trace_step else {
            return Ok(Duration::ZERO);
        };
        let step = parse_duration(step).map_err(|e| anyhow::anyhow!("trace_step: {e}"))?;
        step.checked_mul(u32::try_from(rep).unwrap_or(u32::MAX))
            .ok_or_else(|| anyhow::anyhow!("trace_step {step:?} x repetition {rep} overflows"))
    }

    /// The testbed, with every rate profile starting at the scenario's nominal rates and
    /// traces and changes shifted to begin `warmup` after emulator time 0 (when the workload
    /// starts).
    /// Repetition `rep` replays every trace from [`Scenario::trace_offset`] on.
    pub fn topology(&self, warmup: Duration, rep: usize) -> anyhow::Result<TopologySpec> {
        let w = Time::ZERO + warmup;
        let off = self.trace_offset(rep)?;
        let mut ps = params(&self.ps, w, off)?;
        let mut ps2 = self.ps2.as_ref().map(|l| params(l, w, off)).transpose()?;
        let mut helpers = Vec::new();
        for h in &self.helpers {
            helpers.push(HelperLinks {
                hs: params(&h.hs, w, off)?,
                pipes: vec![params(&h.pipe, w, off)?],
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
            cc: self.cc.clone(),
            phone_rcvbuf: self.phone_rcvbuf()?,
        })
    }
}

fn profile(rate: &str, warmup: Time, offset: Duration) -> anyhow::Result<RateProfile> {
    let trace = if let Some(spec) = rate.strip_prefix("trace:") {
        // `trace:PATH*2.5` scales every rate of the trace.
        let (path, factor) = match spec.rsplit_once('*') {
            Some((p, f)) => {
                let f: f64 = f
                    .parse()
                    .ok()
                    .filter(|f: &f64| *f > 0.0 && f.is_finite())
                    .ok_or_else(|| anyhow::anyhow!("{rate}: the scale after * must be > 0"))?;
                (p, f)
            }
            None => (spec, 1.0),
        };
        let t = Trace::load(path)?;
        if factor == 1.0 {
            t
        } else {
            t.scaled(factor)
        }
    } else if let Some(spec) = rate.strip_prefix("wlan:") {
        match wlan::profile(spec)? {
            wlan::Profile::Constant(bps) => return Ok(RateProfile::constant(bps)),
            wlan::Profile::Walk(t) => t,
        }
    } else {
        return Ok(RateProfile::constant(parse_rate_bps(rate)?));
    };
    let t = Arc::new(trace.starting_at(offset.as_millis().try_into().unwrap_or(u64::MAX)));
    let mut p = RateProfile::constant(t.mean_bps());
    p.change_at(warmup, Source::Trace(t));
    Ok(p)
}

fn params(l: &LinkDef, warmup: Time, offset: Duration) -> anyhow::Result<LinkParams> {
    let delay = parse_duration(&l.delay)?;
    let queue_bytes = parse_size(&l.queue)?;
    if !(0.0..1.0).contains(&l.loss) {
        anyhow::bail!("loss {} must be in [0, 1)", l.loss);
    }
    let cfg = |rate: &str| -> anyhow::Result<LinkConfig> {
        Ok(LinkConfig {
            rate: profile(rate, warmup, offset)?,
            delay,
            queue_bytes,
            loss: l.loss,
        })
    };
    Ok(LinkParams {
        down: cfg(&l.down)?,
        up: cfg(l.up.as_deref().unwrap_or(&l.down))?,
        radio_rate: l.down.starts_with("wlan:"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = r#"
name = "t"
schemes = ["kibbutz", "mpbond"]
[ps]
down = "8Mbps"
[[helper]]
hs = { down = "10Mbps" }
pipe = { down = "5Mbps" }
[workload]
sizes = ["1MB", "2MB"]
"#;

    #[test]
    fn a_warm_up_is_a_size_and_only_for_downloads() {
        let sc = Scenario::parse(&format!("{BASE}warm = \"1MB\"\n")).unwrap();
        assert_eq!(sc.warm().unwrap(), Some(1_000_000));
        assert_eq!(Scenario::parse(BASE).unwrap().warm().unwrap(), None);
        let bad = |extra: &str| {
            Scenario::parse(&format!("{BASE}{extra}"))
                .unwrap_err()
                .to_string()
        };
        assert!(bad("warm = \"lots\"\n").contains("workload.warm"));
        assert!(bad("warm = \"0MB\"\n").contains("0 bytes"));
        let bulk = BASE.replace(
            "sizes = [\"1MB\", \"2MB\"]",
            "kind = \"bulk\"\nwarm = \"1MB\"",
        );
        let e = Scenario::parse(&bulk).unwrap_err().to_string();
        assert!(e.contains("downloads only"), "{e}");
    }

    /// The phones' receive buffer defaults to Android's, takes a size, and a size the testbed
    /// cannot set is refused when the file is read, naming the key.
    #[test]
    fn the_phones_receive_buffer_is_a_size_within_the_testbeds_bounds() {
        let with = |v: &str| format!("phone_rcvbuf = \"{v}\"\n{BASE}");
        assert_eq!(
            Scenario::parse(BASE).unwrap().phone_rcvbuf().unwrap(),
            crate::topo::PHONE_RECEIVE_BUFFER
        );
        assert_eq!(
            Scenario::parse(&with("128KiB"))
                .unwrap()
                .phone_rcvbuf()
                .unwrap(),
            128 << 10
        );
        for bad in ["lots", "1KiB", "64MiB"] {
            let e = Scenario::parse(&with(bad)).unwrap_err().to_string();
            assert!(e.contains("phone_rcvbuf"), "{bad}: {e}");
        }
    }

    /// A scenario whose COMBINE with 64 KiB chunks runs at 1 MB only, and its text without the
    /// limit.
    fn combine_at_1mb_only() -> (String, Scenario) {
        let base = BASE.replace(
            "[\"kibbutz\", \"mpbond\"]",
            "[\"combine-64KiB\", \"mpbond\"]",
        );
        let sc = Scenario::parse(&format!(
            "{base}[scheme_sizes]\n\"combine-64KiB\" = [\"1MB\"]\n"
        ))
        .unwrap();
        (base, sc)
    }

    /// COMBINE's smaller chunks run at the small size only (MPBond §6.1), every other scheme
    /// at every size; a limit that names a size the workload lacks, or none, or a scheme
    /// that does not exist, is refused; a quick cut without that size drops the scheme.
    #[test]
    fn a_scheme_can_be_limited_to_some_sizes() {
        let (base, sc) = combine_at_1mb_only();
        assert!(sc.runs_at("combine-64KiB", 1_000_000));
        assert!(!sc.runs_at("combine-64KiB", 2_000_000));
        assert!(sc.runs_at("mpbond", 2_000_000));
        let e = |limit: &str| {
            Scenario::parse(&format!("{base}[scheme_sizes]\n{limit}\n"))
                .unwrap_err()
                .to_string()
        };
        let msg = e("\"combine-64KiB\" = [\"512KB\"]");
        assert!(msg.contains("not one of workload.sizes"), "{msg}");
        assert!(e("\"combine-64KiB\" = []").contains("lists no size"));
        assert!(e("\"combo\" = [\"1MB\"]").contains("unknown scheme"));
        assert!(e("\"mpbond\" = [\"lots\"]").contains("scheme_sizes.\"mpbond\""));
        let q = Scenario::parse(&format!(
            "{base}[scheme_sizes]\n\"combine-64KiB\" = [\"1MB\"]\n[quick]\nsizes = [\"2MB\"]\n"
        ))
        .unwrap()
        .quick()
        .unwrap();
        assert_eq!(q.schemes, ["mpbond"]);
    }

    /// `lab run --sizes` keeps the named sizes of the workload and drops a scheme limited to
    /// the others; a size the workload lacks, or none, is refused with its reason.
    #[test]
    fn a_run_can_keep_some_of_the_workloads_sizes() {
        let (_, sc) = combine_at_1mb_only();
        let mut two = sc.clone();
        two.only_sizes(&["2MB".into()]).unwrap();
        assert_eq!(two.sizes(), [2_000_000]);
        assert_eq!(two.schemes, ["mpbond"]);
        let mut one = sc.clone();
        one.only_sizes(&["1000000".into()]).unwrap();
        assert_eq!(one.sizes(), [1_000_000]);
        assert_eq!(one.schemes, ["combine-64KiB", "mpbond"]);
        let e = |keep: &[&str]| {
            let keep: Vec<String> = keep.iter().map(|s| s.to_string()).collect();
            sc.clone().only_sizes(&keep).unwrap_err().to_string()
        };
        let msg = e(&["3MB"]);
        assert!(
            msg.contains("3MB is not one of the workload's sizes (1MB, 2MB)"),
            "{msg}"
        );
        assert!(e(&["lots"]).starts_with("--sizes: "));
        assert!(e(&[]).contains("lists no size"));
    }

    /// A claim must name what the file runs: its scheme, its baseline (a `best:` prefix one
    /// scheme starts with, every scheme of a `best-time:` list), a size of the workload and
    /// a variant of the sweep; anything else is refused at load, naming the claim.
    #[test]
    fn a_claim_names_what_the_file_runs() {
        let with = |claim: &str| {
            Scenario::parse(&format!(
                "{BASE}[sweep]\nps = [\"1Mbps\", \"5Mbps\"]\n[[claim]]\nwhat = \"c\"\nmetric = \"time\"\npaper = 1.0\n{claim}\n"
            ))
            .map(|_| ())
            .map_err(|e| e.to_string())
        };
        for ok in [
            "scheme = \"mpbond\"\nvs = \"kibbutz\"\nsize = \"2MB\"\nvariant = \"ps 5Mbps\"",
            "scheme = \"mpbond\"\nvs = \"best:kib\"",
            "scheme = \"mpbond\"\nvs = \"best-time:kibbutz, mpbond\"",
        ] {
            assert_eq!(with(ok), Ok(()), "{ok}");
        }
        for (bad, says) in [
            (
                "scheme = \"combine\"",
                "scheme \"combine\" is not one of schemes",
            ),
            (
                "scheme = \"mpbond\"\nvs = \"single\"",
                "baseline \"single\"",
            ),
            (
                "scheme = \"mpbond\"\nvs = \"best:combine\"",
                "baseline \"best:combine\"",
            ),
            (
                "scheme = \"mpbond\"\nvs = \"best-time:kibbutz,single\"",
                "is not among schemes",
            ),
            (
                "scheme = \"mpbond\"\nsize = \"3MB\"",
                "size 3MB is not one of workload.sizes",
            ),
            (
                "scheme = \"mpbond\"\nvariant = \"ps 2Mbps\"",
                "variant \"ps 2Mbps\" is not one of the file's (ps 1Mbps; ps 5Mbps)",
            ),
        ] {
            let e = with(bad).unwrap_err();
            assert!(
                e.starts_with("claim \"c\": ") && e.contains(says),
                "{bad}: {e}"
            );
        }
    }

    /// Every scenario the repository ships loads (its claims checked against its schemes and
    /// sizes), expands into its variants and has a quick form, so a broken experiment file
    /// fails here rather than an hour into `lab paper`. Files whose LTE traces are not on
    /// this machine are left out, as `lab paper` skips them; at least the paper's other
    /// experiments and the smoke set must be there.
    #[test]
    fn every_shipped_scenario_loads_expands_and_has_a_quick_form() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios");
        let mut files = Vec::new();
        for dir in [root.clone(), root.join("paper"), root.join("paper-smoke")] {
            for f in std::fs::read_dir(&dir).unwrap() {
                let f = f.unwrap().path();
                if f.extension().is_some_and(|e| e == "toml") {
                    files.push(f);
                }
            }
        }
        let (mut loaded, mut paper) = (0, 0);
        for f in &files {
            let sc = match Scenario::load(f) {
                Ok(sc) => sc,
                Err(e) if format!("{e:#}").contains("cannot read trace") => continue,
                Err(e) => panic!("{e:#}"),
            };
            for (name, v) in sc
                .expand()
                .unwrap_or_else(|e| panic!("{}: {e:#}", f.display()))
            {
                assert!(
                    !v.sizes().is_empty() || v.workload.kind != WorkloadKind::Download,
                    "{name:?}"
                );
            }
            let q = sc
                .quick()
                .unwrap_or_else(|e| panic!("{}: quick: {e:#}", f.display()));
            q.expand()
                .unwrap_or_else(|e| panic!("{}: quick: {e:#}", f.display()));
            loaded += 1;
            paper += usize::from(f.parent().is_some_and(|d| d.ends_with("paper")));
        }
        // 18 experiment files, three of them on the traces; the smoke set's three.
        assert!(paper >= 16, "{paper} of the paper's experiments loaded");
        assert!(loaded >= paper + 3, "{loaded} scenarios loaded");
    }

    #[test]
    fn a_sweep_expands_to_every_combination_and_variants_follow() {
        let sc = Scenario::parse(&format!(
            "{BASE}[sweep]\nps = [\"1Mbps\", \"5Mbps\"]\nhs1 = [\"2Mbps\", \"3Mbps\"]\n[[variant]]\nname = \"wlan\"\nset = {{ pipe1 = \"wlan:3m\" }}\n[quick]\nsizes = [\"1MB\"]\nvariants = [\"hs1 3Mbps, ps 1Mbps\"]\n"
        ))
        .unwrap();
        let v = sc.expand().unwrap();
        let names: Vec<_> = v.iter().map(|x| x.0.clone().unwrap()).collect();
        assert_eq!(
            names,
            [
                "hs1 2Mbps, ps 1Mbps",
                "hs1 2Mbps, ps 5Mbps",
                "hs1 3Mbps, ps 1Mbps",
                "hs1 3Mbps, ps 5Mbps",
                "wlan"
            ]
        );
        let third = &v[2].1;
        assert_eq!(
            (third.ps.down.as_str(), third.helpers[0].hs.down.as_str()),
            ("1Mbps", "3Mbps")
        );
        assert_eq!(v[4].1.helpers[0].pipe.down, "wlan:3m");
        assert_eq!(
            v[4].1.ps.down, "8Mbps",
            "a variant leaves other links alone"
        );
        let q = sc.quick().unwrap();
        assert_eq!((q.reps, q.sizes()), (1, vec![1_000_000]));
        let qv = q.expand().unwrap();
        assert_eq!(qv.len(), 1);
        assert_eq!(qv[0].0.as_deref(), Some("hs1 3Mbps, ps 1Mbps"));
        assert_eq!(qv[0].1.helpers[0].hs.down, "3Mbps");

        // `--variant`: the same cut on the full scenario, a sweep cell and a named variant.
        let mut one = sc.clone();
        one.only_variants(&["wlan".into(), "hs1 2Mbps, ps 5Mbps".into()], "--variant")
            .unwrap();
        let ov = one.expand().unwrap();
        let names: Vec<_> = ov.iter().map(|x| x.0.clone().unwrap()).collect();
        assert_eq!(names, ["hs1 2Mbps, ps 5Mbps", "wlan"]);
        assert_eq!(
            (
                ov[0].1.ps.down.as_str(),
                ov[0].1.helpers[0].hs.down.as_str()
            ),
            ("5Mbps", "2Mbps")
        );
        assert_eq!(ov[1].1.helpers[0].pipe.down, "wlan:3m");
        let err = sc
            .clone()
            .only_variants(&["hs1 9Mbps".into()], "--variant")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("--variant") && err.contains("hs1 9Mbps") && err.contains("wlan"),
            "{err}"
        );
    }

    /// A `wlan:` pipe's rate is its radio's own, which prices its airtime; a plain rate is a
    /// throttle on a WLAN close by, and so is every WAN link's.
    #[test]
    fn a_wlan_profile_is_the_radios_own_rate() {
        let throttled = Scenario::parse(BASE).unwrap();
        let t = throttled.topology(Duration::ZERO, 0).unwrap();
        assert!(!t.helpers[0].pipes[0].radio_rate && !t.ps.radio_rate);
        let walk =
            Scenario::parse(&BASE.replace("down = \"5Mbps\"", "down = \"wlan:12m-nlos\"")).unwrap();
        let t = walk.topology(Duration::ZERO, 0).unwrap();
        assert!(t.helpers[0].pipes[0].radio_rate && !t.helpers[0].hs.radio_rate);
    }

    #[test]
    fn each_repetition_starts_the_traces_trace_step_further_in() {
        let walk = BASE.replace("down = \"5Mbps\"", "down = \"wlan:walk\"");
        let sc =
            Scenario::parse(&walk.replace("name = \"t\"", "name = \"t\"\ntrace_step = \"15s\""))
                .unwrap();
        let pipe_trace = |rep| {
            let t = sc.topology(Duration::ZERO, rep).unwrap();
            match t.helpers[0].pipes[0].down.rate.segments().last() {
                Some((_, Source::Trace(t))) => (**t).clone(),
                other => panic!("the pipe should follow a trace, not {other:?}"),
            }
        };
        let (r0, r1, r8) = (pipe_trace(0), pipe_trace(1), pipe_trace(8));
        assert_eq!(r1, r0.starting_at(15_000));
        // The walk lasts 120 s, so repetition 8 (120 s in) is repetition 0 again.
        assert_eq!(r8.opportunities, r0.opportunities);
        assert_ne!(r1.opportunities, r0.opportunities);
        // Without trace_step every repetition replays the same stretch.
        let same = Scenario::parse(&walk).unwrap();
        let t = |rep| {
            format!(
                "{:?}",
                same.topology(Duration::ZERO, rep).unwrap().helpers[0].pipes[0]
                    .down
                    .rate
                    .segments()
            )
        };
        assert_eq!(t(0), t(3));
        let bad =
            Scenario::parse(&BASE.replace("name = \"t\"", "name = \"t\"\ntrace_step = \"soon\""))
                .unwrap_err()
                .to_string();
        assert!(bad.contains("trace_step"), "{bad}");
    }

    #[test]
    fn bad_variants_claims_and_workloads_say_what_is_wrong() {
        let e = |extra: &str| {
            Scenario::parse(&format!("{BASE}{extra}"))
                .and_then(|s| s.expand().map(|_| ()))
                .unwrap_err()
                .to_string()
        };
        assert!(e("[[variant]]\nname = \"x\"\nset = { hs9 = \"1Mbps\" }\n").contains("hs9"));
        assert!(e("[[variant]]\nname = \"x\"\nset = { ps = \"fast\" }\n").contains("variant"));
        assert!(e(
            "[[claim]]\nwhat = \"w\"\nmetric = \"speed\"\nscheme = \"mpbond\"\npaper = 1.0\n"
        )
        .contains("speed"));
        // quick() is where unknown quick variants are caught.
        let sc = Scenario::parse(&format!("{BASE}[quick]\nvariants = [\"nope\"]\n")).unwrap();
        assert!(sc.quick().unwrap_err().to_string().contains("nope"));
        let dual = BASE.replace(
            "schemes = [\"kibbutz\", \"mpbond\"]",
            "schemes = [\"kibbutz\"]\ndual = true",
        );
        assert!(Scenario::parse(&dual)
            .unwrap_err()
            .to_string()
            .contains("dual"));
        let video = BASE.replace(
            "sizes = [\"1MB\", \"2MB\"]",
            "kind = \"video\"\nladder = \"vhs\"",
        );
        assert!(Scenario::parse(&video)
            .unwrap_err()
            .to_string()
            .contains("vhs"));
    }
}
