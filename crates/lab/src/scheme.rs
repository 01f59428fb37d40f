//! The schemes compared in the lab, each the real thing.
//!
//! A scheme name is a kind (`kibbutz`, `mpbond`, `combine-64KiB`, ...) optionally followed by
//! `@N`, the number of devices it may use (the primary and N-1 helpers), so one scenario with
//! two helpers compares 2- and 3-device runs side by side (MPBond §6.3, Figure 9).

use std::fmt;

use mpbond_core::units::parse_size;

use crate::combine::DEFAULT_CHUNK;

/// Variants of mpbond itself: the scheduler, and the design choices §6.2 takes apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum MpbondVariant {
    /// PAMS with every mpbond default.
    Pams,
    /// The `minrtt` scheduler (MPBond-Naive, §4.3.1).
    Naive,
    /// PAMS exactly as published: no deferral lookahead (`tuning.pams_lookahead = 0`) and
    /// the paper's PAD (`tuning.pams_pad = "paper"`).
    Paper,
    /// PAMS with every mpbond default except the PAD formula, which is the paper's
    /// (`tuning.pams_pad = "paper"`): what counting bytes in flight as draining buys.
    PaperPad,
    /// mpbond whose path throughput estimates hold their level for 3 RTTs after a loss
    /// (`tuning.loss_hold = 3`): what keeping CUBIC's post-loss dip out of PAMS buys.
    LossHold,
    /// mpbond whose path throughput estimates take the kernel's rate samples as they are
    /// after a loss (`tuning.drain_floor = 0`): what the drain floor buys.
    NoDrainFloor,
    /// PAMS's recall test reads a source one recent rate shortfall slower than its estimate
    /// when the destination has drained (`tuning.recall_shortfall = 1`, off by default):
    /// what that buys at the end of a transfer on links whose rate swings.
    Shortfall,
    /// A subflow that drained carries copies of the tail of the last one to finish
    /// (`tuning.tail_copy = true`, off by default): what a two-sided finish buys.
    TailCopy,
    /// PAMS holds the last bytes of a transfer at the sender until a subflow's queue is down
    /// to 100 ms (`tuning.late_bind = "100ms"`, off by default): what late binding buys.
    LateBind,
    /// Helpers send no pipe minimum RTT (`tuning.pipe_min_rtt = false`), as a helper that
    /// predates `PIPE_MIN_RTT`: PAD reads a pipe's smoothed RTT as its delay.
    NoPipeMinRtt,
    /// Helpers send pipe feedback over the HS-Path all the time ("fixed-always", §6.2).
    FixedAlways,
    /// Helpers send pipe feedback over the HS-Path only while it carries data
    /// ("fixed-on-demand", §6.2).
    FixedOnDemand,
    /// PAMS without reinjection (§6.2, "Reinjection Under Changing Network Condition").
    NoReinject,
    /// Without window rescue (`tuning.window_rescue = false`): a head of line stuck on a late
    /// subflow is not sent again while the stream is blocked.
    NoRescue,
    /// Without late-head rescue (`tuning.late_rescue = false`): a head of line long past its
    /// due time is left to its subflow while the stream can still send new data.
    NoLateRescue,
    /// Without the loss rescue (`tuning.loss_rescue = false`): a head of line held behind a
    /// hole its subflow's TCP is recovering from waits for the retransmission unless it
    /// turns late.
    NoLossRescue,
    /// Without item 61's small records at the start of a burst to a helper
    /// (`tuning.ramp_records = false`): every record at the segment size from the first, so
    /// a helper, which relays a record only once all of it has arrived, starts its pipe one
    /// full record's HS-Path time later.
    NoRamp,
    /// Every segment and record at the full 16 KiB (`tuning.segment_time = "0ms"`), whatever
    /// the path's rate.
    FixedSegments,
    /// PAMS fed the helper's directly measured buffering delay instead of B_p/Th_p (§6.2,
    /// "Estimating Pipe Buffering").
    MeasuredBuffering,
    /// Without kernel pacing on its links (`tuning.pacing = false`): what pacing buys.
    Unpaced,
    /// A low-water mark four times the default (`tuning.lowat = "64KiB"`): each socket holds
    /// more unsent data, which a relay that waits to be scheduled (a busy or stolen CPU)
    /// leaves the kernel to send, at the cost of binding data to a path earlier.
    DeepLowat,
    /// Without the slow-start queue guard (`tuning.queue_guard = 0`): a link that fills its
    /// bottleneck's queue in slow start keeps doubling into it.
    NoGuard,
    /// Without the congestion control's restart when stream data resumes
    /// (`tuning.cc_restart = "0ms"`): CUBIC keeps the state it learnt before the download.
    NoCcRestart,
    /// BBR on every link (`tuning.congestion = "bbr"`) instead of the testbed's `cc`.
    Bbr,
    /// BBR on the proxy's HS-Paths alone (`tuning.hs_congestion = "bbr"`), the testbed's `cc`
    /// everywhere else: a short queue for a helper's retransmissions to wait behind.
    HsBbr,
    /// The HS-Paths' own queue guard at 1.1 (`tuning.hs_queue_guard`), in slow start and
    /// congestion avoidance: CUBIC kept, its queue filling too slowly to overflow. The
    /// default since item 38 (docs/evaluation.md), so the same as `mpbond`; kept so that
    /// the commands that measured it still run.
    HsGuard,
    /// Without the HS-Paths' own queue guard (`tuning.hs_queue_guard = 0`): they take the
    /// ordinary slow-start guard, as before item 38.
    NoHsGuard,
    /// The PS-Path's queue guard past slow start at 1 (`tuning.ps_queue_guard`): in
    /// congestion avoidance at a steady rate, outside loss recovery (docs/evaluation.md,
    /// item 39). Off by default.
    PsGuard,
    /// Without the PS-Path's guard past slow start (`tuning.ps_queue_guard = 0`), the
    /// default, so the same as `mpbond`; kept so that the commands that measured it still
    /// run.
    NoPsGuard,
    /// A stalled WAN link is torn down at the stall timeout and its device connects again
    /// (`tuning.dead_timeout = "0s"`), as MPBond §4.1 and mpbond before
    /// `mpbond_daemon::liveness` did, instead of going stale and keeping its connection.
    NoStale,
    /// The primary waits for the proxy to reach the origin before it relays the
    /// application's bytes (`[primary] early_data = false`): what 0-RTT stream open buys.
    WaitOpen,
    /// Energy-aware helper admission (`tuning.time_value`, in milliwatts here): PAMS leaves a
    /// helper out of a transfer when its radios cost more than the time it saves is worth
    /// at this rate. `mpbond-eco` is [`ECO_TIME_VALUE_MW`]; `mpbond-eco-<W>W` (e.g.
    /// `mpbond-eco-0W`, `mpbond-eco-2.5W`) any other value, to trace the trade.
    Eco(u32),
}

/// The value of time of `mpbond-eco`, milliwatts: about what a phone draws, screen on, while
/// its user waits for a download (Carroll and Heiser, USENIX ATC 2010, measured a few hundred
/// mW to over a watt for the display and processor of the phones they studied).
pub const ECO_TIME_VALUE_MW: u32 = 1000;

impl MpbondVariant {
    const ALL: [MpbondVariant; 32] = [
        MpbondVariant::Naive,
        MpbondVariant::Pams,
        MpbondVariant::Paper,
        MpbondVariant::PaperPad,
        MpbondVariant::LossHold,
        MpbondVariant::NoDrainFloor,
        MpbondVariant::Shortfall,
        MpbondVariant::TailCopy,
        MpbondVariant::LateBind,
        MpbondVariant::NoPipeMinRtt,
        MpbondVariant::FixedAlways,
        MpbondVariant::FixedOnDemand,
        MpbondVariant::NoReinject,
        MpbondVariant::NoRescue,
        MpbondVariant::NoLateRescue,
        MpbondVariant::NoLossRescue,
        MpbondVariant::NoRamp,
        MpbondVariant::FixedSegments,
        MpbondVariant::MeasuredBuffering,
        MpbondVariant::Unpaced,
        MpbondVariant::DeepLowat,
        MpbondVariant::NoGuard,
        MpbondVariant::NoCcRestart,
        MpbondVariant::Bbr,
        MpbondVariant::HsBbr,
        MpbondVariant::HsGuard,
        MpbondVariant::NoHsGuard,
        MpbondVariant::PsGuard,
        MpbondVariant::NoPsGuard,
        MpbondVariant::NoStale,
        MpbondVariant::WaitOpen,
        MpbondVariant::Eco(ECO_TIME_VALUE_MW),
    ];

    fn name(self) -> &'static str {
        match self {
            MpbondVariant::Pams => "mpbond",
            MpbondVariant::Naive => "mpbond-naive",
            MpbondVariant::Paper => "mpbond-paper",
            MpbondVariant::PaperPad => "mpbond-paper-pad",
            MpbondVariant::LossHold => "mpbond-loss-hold",
            MpbondVariant::NoDrainFloor => "mpbond-no-drain-floor",
            MpbondVariant::Shortfall => "mpbond-shortfall",
            MpbondVariant::TailCopy => "mpbond-tail-copy",
            MpbondVariant::LateBind => "mpbond-late-bind",
            MpbondVariant::NoPipeMinRtt => "mpbond-no-pipe-min-rtt",
            MpbondVariant::FixedAlways => "mpbond-fixed-always",
            MpbondVariant::FixedOnDemand => "mpbond-fixed-on-demand",
            MpbondVariant::NoReinject => "mpbond-no-reinject",
            MpbondVariant::NoRescue => "mpbond-no-rescue",
            MpbondVariant::NoLateRescue => "mpbond-no-late-rescue",
            MpbondVariant::NoLossRescue => "mpbond-no-loss-rescue",
            MpbondVariant::NoRamp => "mpbond-no-ramp",
            MpbondVariant::FixedSegments => "mpbond-fixed-segments",
            MpbondVariant::MeasuredBuffering => "mpbond-measured-buffering",
            MpbondVariant::Unpaced => "mpbond-unpaced",
            MpbondVariant::DeepLowat => "mpbond-deep-lowat",
            MpbondVariant::NoGuard => "mpbond-no-guard",
            MpbondVariant::NoCcRestart => "mpbond-no-cc-restart",
            MpbondVariant::Bbr => "mpbond-bbr",
            MpbondVariant::HsBbr => "mpbond-hs-bbr",
            MpbondVariant::HsGuard => "mpbond-hs-guard",
            MpbondVariant::NoHsGuard => "mpbond-no-hs-guard",
            MpbondVariant::PsGuard => "mpbond-ps-guard",
            MpbondVariant::NoPsGuard => "mpbond-no-ps-guard",
            MpbondVariant::NoStale => "mpbond-no-stale",
            MpbondVariant::WaitOpen => "mpbond-wait-open",
            MpbondVariant::Eco(_) => "mpbond-eco",
        }
    }
}

/// What a scheme is, without its device count.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    /// The primary alone: plain TCP over its own WAN link.
    Single,
    /// Tethering plus the kernel's MPTCP (MPBond §6's baseline): a second MPTCP subflow from
    /// the primary's pipe address, forwarded at layer 3 by helper 1 over its WAN link.
    Kibbutz,
    /// The same with every helper tethered (one subflow per helper).
    KibbutzN,
    /// Tethering with a fixed split (MPBond §6.2, Figure 5): `ps_percent` % of the file over
    /// the PS-Path, the rest over helper 1's tether, each part one plain TCP connection with
    /// a byte-range request. End-to-end TCP across HS-Path and pipe, no helper buffer: what
    /// kibbutz would do with a fixed scheduling ratio.
    KibbutzSplit {
        /// Share of the file over the PS-Path, 0..=100.
        ps_percent: u8,
    },
    /// COMBINE (MPBond §6.1): HTTP byte-range chunks from a work queue, one worker per device,
    /// helpers returning their chunks over the pipe.
    Combine {
        /// Bytes per chunk (256 KiB by default).
        chunk: u64,
    },
    /// mpbond.
    Mpbond(MpbondVariant),
    /// Kernel MPTCP over the primary's two WAN interfaces (`ps`, LTE, and `ps2`, WiFi): the
    /// indoor comparison of MPBond §6.7. No helper.
    MptcpWifiLte,
}

/// A way to download, with the number of devices it may use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Scheme {
    /// What it is.
    pub kind: Kind,
    /// `@N`: at most N devices (the primary and N-1 helpers); None = the kind's default.
    pub devices: Option<usize>,
}

impl From<Kind> for Scheme {
    fn from(kind: Kind) -> Scheme {
        Scheme {
            kind,
            devices: None,
        }
    }
}

impl Scheme {
    /// The plain kinds (COMBINE with its default chunk), in report order.
    pub fn kinds() -> Vec<Kind> {
        let mut v = vec![
            Kind::Single,
            Kind::Kibbutz,
            Kind::KibbutzN,
            Kind::Combine {
                chunk: DEFAULT_CHUNK,
            },
        ];
        v.extend(MpbondVariant::ALL.iter().map(|&m| Kind::Mpbond(m)));
        v.push(Kind::MptcpWifiLte);
        v
    }

    /// Parses a scheme name: a kind, `combine-<size>` (COMBINE's chunk), `kibbutz-split-<p>`
    /// (p % over the PS-Path), each optionally with `@N` devices.
    pub fn parse(s: &str) -> anyhow::Result<Scheme> {
        let (base, devices) = match s.split_once('@') {
            Some((b, n)) => {
                let n: usize = n
                    .parse()
                    .ok()
                    .filter(|&n| n >= 1)
                    .ok_or_else(|| anyhow::anyhow!("scheme {s:?}: @N needs N ≥ 1 devices"))?;
                (b, Some(n))
            }
            None => (s, None),
        };
        let kind = Self::parse_kind(base).map_err(|e| anyhow::anyhow!("scheme {s:?}: {e}"))?;
        Ok(Scheme { kind, devices })
    }

    fn parse_kind(s: &str) -> anyhow::Result<Kind> {
        if let Some(size) = s.strip_prefix("combine-") {
            let chunk = parse_size(size).map_err(|e| anyhow::anyhow!("chunk size: {e}"))?;
            if chunk < 1024 {
                anyhow::bail!("a chunk must be at least 1 KB");
            }
            return Ok(Kind::Combine { chunk });
        }
        if let Some(w) = s
            .strip_prefix("mpbond-eco-")
            .and_then(|w| w.strip_suffix('W'))
        {
            let mw = w
                .parse::<f64>()
                .ok()
                .filter(|w| w.is_finite() && (0.0..=1e6).contains(w))
                .ok_or_else(|| anyhow::anyhow!("the value of time is watts >= 0, e.g. 2.5W"))?;
            return Ok(Kind::Mpbond(MpbondVariant::Eco(
                (mw * 1000.0).round() as u32
            )));
        }
        if let Some(p) = s.strip_prefix("kibbutz-split-") {
            let ps_percent = p
                .parse::<u8>()
                .ok()
                .filter(|&p| p <= 100)
                .ok_or_else(|| anyhow::anyhow!("the split is a percentage, 0 to 100"))?;
            return Ok(Kind::KibbutzSplit { ps_percent });
        }
        Scheme::kinds()
            .into_iter()
            .find(|k| Scheme::from(*k).to_string() == s)
            .ok_or_else(|| {
                let names: Vec<String> = Scheme::kinds()
                    .iter()
                    .map(|k| Scheme::from(*k).to_string())
                    .collect();
                anyhow::anyhow!(
                    "unknown scheme; available: {} (and combine-<size>, e.g. combine-64KiB; kibbutz-split-<p>; any with @N devices)",
                    names.join(", ")
                )
            })
    }

    /// How many of the scenario's `helpers` the scheme uses.
    pub fn helpers_used(self, helpers: usize) -> usize {
        let by_kind = match self.kind {
            Kind::Single | Kind::MptcpWifiLte => 0,
            Kind::Kibbutz | Kind::KibbutzSplit { .. } => helpers.min(1),
            _ => helpers,
        };
        match self.devices {
            Some(n) => by_kind.min(n - 1),
            None => by_kind,
        }
    }

    /// True for mpbond in any variant.
    pub fn is_mpbond(self) -> bool {
        matches!(self.kind, Kind::Mpbond(_))
    }
}

impl fmt::Display for Scheme {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            Kind::Single => f.write_str("single")?,
            Kind::Kibbutz => f.write_str("kibbutz")?,
            Kind::KibbutzN => f.write_str("kibbutz-n")?,
            Kind::KibbutzSplit { ps_percent } => write!(f, "kibbutz-split-{ps_percent}")?,
            Kind::Combine { chunk } if chunk == DEFAULT_CHUNK => f.write_str("combine")?,
            Kind::Combine { chunk } if chunk % 1000 == 0 => {
                write!(f, "combine-{}KB", chunk / 1000)?
            }
            Kind::Combine { chunk } if chunk % 1024 == 0 => {
                write!(f, "combine-{}KiB", chunk / 1024)?
            }
            Kind::Combine { chunk } => write!(f, "combine-{chunk}B")?,
            Kind::Mpbond(MpbondVariant::Eco(mw)) if mw != ECO_TIME_VALUE_MW => {
                let w = format!("{:.3}", f64::from(mw) / 1000.0);
                write!(
                    f,
                    "mpbond-eco-{}W",
                    w.trim_end_matches('0').trim_end_matches('.')
                )?
            }
            Kind::Mpbond(m) => f.write_str(m.name())?,
            Kind::MptcpWifiLte => f.write_str("mptcp-wifi-lte")?,
        }
        if let Some(n) = self.devices {
            write!(f, "@{n}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_bad_names_say_what_exists() {
        for k in Scheme::kinds() {
            let s = Scheme::from(k);
            assert_eq!(Scheme::parse(&s.to_string()).unwrap(), s);
        }
        assert_eq!(
            Scheme::parse("combine-64KiB").unwrap().kind,
            Kind::Combine { chunk: 64 * 1024 }
        );
        assert_eq!(
            Scheme::parse("mpbond-eco-1W").unwrap().to_string(),
            "mpbond-eco"
        );
        assert_eq!(
            Scheme::parse("mpbond-eco-0.25W").unwrap().kind,
            Kind::Mpbond(MpbondVariant::Eco(250))
        );
        for name in [
            "combine-64KiB",
            "combine-128KB",
            "combine-1500B",
            "kibbutz-split-30",
            "mpbond@3",
            "combine-64KiB@2",
            "mpbond-no-reinject",
            "mpbond-no-rescue",
            "mpbond-no-late-rescue",
            "mpbond-no-loss-rescue",
            "mpbond-fixed-segments",
            "mpbond-unpaced",
            "mpbond-deep-lowat",
            "mpbond-no-guard",
            "mpbond-no-cc-restart",
            "mpbond-no-drain-floor",
            "mpbond-shortfall@3",
            "mpbond-bbr@2",
            "mpbond-hs-bbr",
            "mpbond-hs-guard",
            "mpbond-no-hs-guard",
            "mpbond-ps-guard",
            "mpbond-no-ps-guard",
            "mpbond-no-stale@2",
            "mpbond-wait-open",
            "mpbond-eco@2",
            "mpbond-eco-0W",
            "mpbond-eco-2.5W",
            "mpbond-eco-10W@3",
        ] {
            assert_eq!(Scheme::parse(name).unwrap().to_string(), name);
        }
        let e = Scheme::parse("kibutz").unwrap_err().to_string();
        assert!(e.contains("kibbutz") && e.contains("combine"), "{e}");
        for bad in [
            "combine-12",
            "combine-x",
            "kibbutz-split-101",
            "mpbond-eco-xW",
            "mpbond-eco--1W",
            "mpbond@0",
            "mpbond@x",
        ] {
            assert!(Scheme::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn device_counts_limit_the_helpers() {
        let used = |s: &str, h| Scheme::parse(s).unwrap().helpers_used(h);
        assert_eq!(used("mpbond", 2), 2);
        assert_eq!(used("mpbond@2", 2), 1);
        assert_eq!(used("mpbond@1", 2), 0);
        assert_eq!(used("kibbutz", 2), 1);
        assert_eq!(used("kibbutz-n", 2), 2);
        assert_eq!(used("kibbutz-split-40", 2), 1);
        assert_eq!(used("combine@3", 1), 1);
        assert_eq!(used("single@3", 2), 0);
    }
}
