//! WLAN pipe profiles whose rate follows the distance between two devices, in the spirit of
//! MPBond Figure 2 (watch-to-phone WiFi throughput against distance, line of sight or not).
//!
//! The paper gives the figure, not its numbers, so the profile is built from a standard
//! model, and docs/evaluation.md says so:
//! - received power: log-distance path loss, `RSSI = P_tx − PL(1 m) − 10·n·log10(d) − W`,
//!   with a wearable's `P_tx` = 10 dBm, `PL(1 m)` = 40 dB at 2.4 GHz, indoor exponent
//!   `n` = 3.5, and `W` = 12 dB of extra loss without line of sight (a wall or a body);
//! - rate: the 802.11n single-stream 20 MHz MCS whose receiver sensitivity the RSSI clears
//!   (MCS 7, 65 Mbit/s at −64 dBm, down to MCS 0, 6.5 Mbit/s at −82 dBm; nothing below),
//!   times 0.6 for MAC overhead: TCP goodput from 39 Mbit/s close by to 0 out of range.
//!
//! Names a scenario can use as a rate: `wlan:3m` or `wlan:12m-nlos` (a fixed distance), and
//! `wlan:walk` or `wlan:walk:SEED` (a 120 s walk: the helper's distance wanders between 1 and
//! 15 m at up to 1.2 m/s, line of sight lost and regained every 5 to 15 s, and ±3 dB of slow
//! shadowing; the profile repeats after 120 s).

use mpbond_sim::rate::Trace;

const P_TX_DBM: f64 = 10.0;
const PL_1M_DB: f64 = 40.0;
const EXPONENT: f64 = 3.5;
const NLOS_DB: f64 = 12.0;
const MAC_EFFICIENCY: f64 = 0.6;
/// (sensitivity dBm, PHY Mbit/s): 802.11n, one stream, 20 MHz, long guard interval.
const MCS: [(f64, f64); 8] = [
    (-64.0, 65.0),
    (-65.0, 58.5),
    (-66.0, 52.0),
    (-70.0, 39.0),
    (-74.0, 26.0),
    (-77.0, 19.5),
    (-79.0, 13.0),
    (-82.0, 6.5),
];

/// RSSI in dBm at `meters`, with or without line of sight.
pub fn rssi_dbm(meters: f64, los: bool) -> f64 {
    P_TX_DBM
        - PL_1M_DB
        - 10.0 * EXPONENT * meters.max(0.1).log10()
        - if los { 0.0 } else { NLOS_DB }
}

/// TCP goodput in bit/s at this RSSI.
pub fn goodput_bps(rssi: f64) -> f64 {
    MCS.iter()
        .find(|(sens, _)| rssi >= *sens)
        .map_or(0.0, |(_, phy)| phy * 1e6 * MAC_EFFICIENCY)
}

/// Parses a `wlan:` rate (without the prefix) into a trace, or a constant rate for a fixed
/// distance.
pub enum Profile {
    /// A fixed distance: constant goodput, bit/s.
    Constant(f64),
    /// A walk.
    Walk(Trace),
}

/// Builds the profile a `wlan:` rate names.
pub fn profile(spec: &str) -> anyhow::Result<Profile> {
    if let Some(rest) = spec.strip_prefix("walk") {
        let seed = match rest.strip_prefix(':') {
            Some(s) => s
                .parse()
                .map_err(|_| anyhow::anyhow!("wlan:walk:SEED needs a whole number"))?,
            None if rest.is_empty() => 1,
            None => anyhow::bail!("unknown WLAN profile wlan:{spec}"),
        };
        return Ok(Profile::Walk(walk(seed, 120)?));
    }
    let (d, los) = match spec.strip_suffix("-nlos") {
        Some(d) => (d, false),
        None => (spec, true),
    };
    let m: f64 = d
        .strip_suffix('m')
        .and_then(|x| x.parse().ok())
        .filter(|m: &f64| *m > 0.0 && m.is_finite())
        .ok_or_else(|| {
            anyhow::anyhow!(
                "WLAN profile wlan:{spec}: use wlan:3m, wlan:12m-nlos or wlan:walk[:SEED]"
            )
        })?;
    let bps = goodput_bps(rssi_dbm(m, los));
    if bps <= 0.0 {
        anyhow::bail!(
            "wlan:{spec}: out of range (RSSI {:.0} dBm)",
            rssi_dbm(m, los)
        );
    }
    Ok(Profile::Constant(bps))
}

/// A deterministic walk of `seconds` (see the module text), sampled every 100 ms.
pub fn walk(seed: u64, seconds: u64) -> anyhow::Result<Trace> {
    let mut rng = mpbond_sim::rng::Rng::new(seed);
    let mut uniform = move || rng.unit();
    let steps = seconds * 10;
    let mut d = 3.0f64;
    let mut v = 0.0f64;
    let mut los = true;
    let mut next_toggle = 5.0 + 10.0 * uniform();
    let mut shadow = 0.0f64;
    let mut rates = Vec::with_capacity(steps as usize);
    for i in 0..steps {
        let t = i as f64 / 10.0;
        // Speed changes a little every step; walls at 1 and 15 m turn the walker round.
        v = (v + (uniform() - 0.5) * 0.4).clamp(-1.2, 1.2);
        d += v * 0.1;
        if !(1.0..=15.0).contains(&d) {
            d = d.clamp(1.0, 15.0);
            v = -v;
        }
        if t >= next_toggle {
            los = !los;
            next_toggle = t + 5.0 + 10.0 * uniform();
        }
        shadow = (0.95 * shadow + (uniform() - 0.5) * 1.2).clamp(-3.0, 3.0);
        rates.push(goodput_bps(rssi_dbm(d, los) + shadow));
    }
    Ok(Trace::from_rates(
        &format!("wlan-walk-{seed}"),
        100,
        &rates,
    )?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_falls_with_distance_and_walls() {
        let r = |m, los| goodput_bps(rssi_dbm(m, los));
        assert!((r(1.0, true) - 39e6).abs() < 1.0);
        assert!(r(5.0, true) >= r(10.0, true) && r(10.0, true) > r(15.0, true));
        assert!(r(10.0, false) < r(10.0, true));
        assert_eq!(r(30.0, false), 0.0);
        assert!(matches!(profile("3m"), Ok(Profile::Constant(b)) if b > 20e6));
        assert!(profile("40m-nlos").is_err());
        assert!(profile("far").is_err());
    }

    #[test]
    fn a_walk_varies_and_is_reproducible() {
        let a = walk(7, 120).unwrap();
        assert_eq!(a, walk(7, 120).unwrap());
        assert_ne!(a.opportunities, walk(8, 120).unwrap().opportunities);
        let mean = a.mean_bps();
        assert!(mean > 5e6 && mean < 39e6, "{mean}");
        // Some second is at least twice as fast as another.
        let per_s: Vec<usize> = (0..120)
            .map(|s| {
                a.opportunities
                    .iter()
                    .filter(|&&o| o > s * 1000 && o <= (s + 1) * 1000)
                    .count()
            })
            .collect();
        let (lo, hi) = (per_s.iter().min().unwrap(), per_s.iter().max().unwrap());
        assert!(*hi >= 2 * lo.max(&1), "{lo} .. {hi}");
    }
}
