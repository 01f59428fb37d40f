//! The schemes compared in the lab, each the real thing.

use std::fmt;

use mpbond_core::units::parse_size;

use crate::combine::DEFAULT_CHUNK;

/// A way to download.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Scheme {
    /// The primary alone: plain TCP over its own WAN link.
    Single,
    /// Tethering plus the kernel's MPTCP (MPBond §6's baseline): a second MPTCP subflow from
    /// the primary's pipe address, forwarded at layer 3 by helper 1 over its WAN link.
    Kibbutz,
    /// The same with every helper tethered (one subflow per helper).
    KibbutzN,
    /// COMBINE (MPBond §6.1): HTTP byte-range chunks from a work queue, one worker per device,
    /// helpers returning their chunks over the pipe. The chunk size in bytes.
    Combine {
        /// Bytes per chunk (256 KiB by default).
        chunk: u64,
    },
    /// mpbond with the `minrtt` scheduler (MPBond-Naive).
    MpbondNaive,
    /// mpbond with PAMS.
    Mpbond,
    /// mpbond with PAMS exactly as published: no deferral lookahead
    /// (`tuning.pams_lookahead = 0`).
    MpbondPaper,
    /// Kernel MPTCP over the primary's two WAN interfaces (`ps`, LTE, and `ps2`, WiFi): the
    /// indoor comparison of MPBond §6.7. No helper.
    MptcpWifiLte,
}

impl Scheme {
    /// Every scheme (COMBINE with its default chunk), in report order.
    pub const ALL: [Scheme; 8] = [
        Scheme::Single,
        Scheme::Kibbutz,
        Scheme::KibbutzN,
        Scheme::Combine {
            chunk: DEFAULT_CHUNK,
        },
        Scheme::MpbondNaive,
        Scheme::Mpbond,
        Scheme::MpbondPaper,
        Scheme::MptcpWifiLte,
    ];

    /// Parses a scheme name; `combine-128KiB` (any size) picks COMBINE's chunk size.
    pub fn parse(s: &str) -> anyhow::Result<Scheme> {
        if let Some(size) = s.strip_prefix("combine-") {
            let chunk =
                parse_size(size).map_err(|e| anyhow::anyhow!("scheme {s:?}: chunk size: {e}"))?;
            if chunk < 1024 {
                anyhow::bail!("scheme {s:?}: a chunk must be at least 1 KB");
            }
            return Ok(Scheme::Combine { chunk });
        }
        Scheme::ALL
            .into_iter()
            .find(|x| x.to_string() == s)
            .ok_or_else(|| {
                let names: Vec<String> = Scheme::ALL.iter().map(|x| x.to_string()).collect();
                anyhow::anyhow!(
                    "unknown scheme {s:?}; available: {} (and combine-<size>, e.g. combine-64KiB)",
                    names.join(", ")
                )
            })
    }

    /// How many of the scenario's `helpers` the scheme uses.
    pub fn helpers_used(self, helpers: usize) -> usize {
        match self {
            Scheme::Single | Scheme::MptcpWifiLte => 0,
            Scheme::Kibbutz => helpers.min(1),
            _ => helpers,
        }
    }
}

impl fmt::Display for Scheme {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Scheme::Single => f.write_str("single"),
            Scheme::Kibbutz => f.write_str("kibbutz"),
            Scheme::KibbutzN => f.write_str("kibbutz-n"),
            Scheme::Combine { chunk } if *chunk == DEFAULT_CHUNK => f.write_str("combine"),
            Scheme::Combine { chunk } if chunk % 1000 == 0 => {
                write!(f, "combine-{}KB", chunk / 1000)
            }
            Scheme::Combine { chunk } if chunk % 1024 == 0 => {
                write!(f, "combine-{}KiB", chunk / 1024)
            }
            Scheme::Combine { chunk } => write!(f, "combine-{chunk}B"),
            Scheme::MpbondNaive => f.write_str("mpbond-naive"),
            Scheme::Mpbond => f.write_str("mpbond"),
            Scheme::MpbondPaper => f.write_str("mpbond-paper"),
            Scheme::MptcpWifiLte => f.write_str("mptcp-wifi-lte"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_bad_names_say_what_exists() {
        for s in Scheme::ALL {
            assert_eq!(Scheme::parse(&s.to_string()).unwrap(), s);
        }
        assert_eq!(
            Scheme::parse("combine-64KiB").unwrap(),
            Scheme::Combine { chunk: 64 * 1024 }
        );
        for name in ["combine-64KiB", "combine-128KB", "combine-1500B"] {
            assert_eq!(Scheme::parse(name).unwrap().to_string(), name);
        }
        let e = Scheme::parse("kibutz").unwrap_err().to_string();
        assert!(e.contains("kibbutz") && e.contains("combine"), "{e}");
        assert!(Scheme::parse("combine-12").is_err());
        assert!(Scheme::parse("combine-x").is_err());
    }
}
