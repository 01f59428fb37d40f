//! The schemes compared in the lab, each the real thing.

use std::fmt;

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
    /// mpbond with the `minrtt` scheduler (MPBond-Naive).
    MpbondNaive,
    /// mpbond with PAMS.
    Mpbond,
}

impl Scheme {
    /// Every scheme, in report order.
    pub const ALL: [Scheme; 5] = [
        Scheme::Single,
        Scheme::Kibbutz,
        Scheme::KibbutzN,
        Scheme::MpbondNaive,
        Scheme::Mpbond,
    ];

    /// Parses a scheme name.
    pub fn parse(s: &str) -> anyhow::Result<Scheme> {
        Scheme::ALL
            .into_iter()
            .find(|x| x.name() == s)
            .ok_or_else(|| {
                let names: Vec<&str> = Scheme::ALL.iter().map(|x| x.name()).collect();
                anyhow::anyhow!(
                    "unknown scheme {s:?}; available: {} (combine and mptcp-wifi-lte are not built yet)",
                    names.join(", ")
                )
            })
    }

    /// Its name in scenario files and reports.
    pub fn name(self) -> &'static str {
        match self {
            Scheme::Single => "single",
            Scheme::Kibbutz => "kibbutz",
            Scheme::KibbutzN => "kibbutz-n",
            Scheme::MpbondNaive => "mpbond-naive",
            Scheme::Mpbond => "mpbond",
        }
    }
}

impl fmt::Display for Scheme {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
