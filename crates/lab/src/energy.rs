//! Radio energy per device, from each interface's packet log and published power models, the
//! way MPBond §6 estimates energy (it uses models, then checks them against a power monitor in
//! §6.8: absolute error up to 24%, relative savings within 5 points).
//!
//! Each interface is a state machine driven by its packets, in 100 ms bins:
//! - **idle** costs nothing (the device's base power is not the network's);
//! - the first packet after idle pays a **promotion** (LTE RRC_IDLE → RRC_CONNECTED);
//! - a bin with packets is **active**: `β + αu·up_Mbps + αd·down_Mbps` (Huang et al.,
//!   MobiSys 2012, §5: power grows linearly with throughput in each direction);
//! - a bin without packets within `tail` of the last activity is **tail** (the radio waits
//!   in a high-power state for more data); after the last packet the whole tail is paid.
//!
//! The parameters, with their sources, are in [`RadioModel::for_radio`] and docs/lab.md.
//! Transmissions are counted when they leave the device's queue (the emulator's delivery time
//! minus the link's one-way delay) and receptions when they arrive.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::emu::{DirReport, PacketEvent};

/// Bin width of the activity model.
pub const BIN: Duration = Duration::from_millis(100);

/// The radio technology behind an interface.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Radio {
    /// Cellular 4G.
    Lte,
    /// 802.11.
    Wifi,
    /// Bluetooth (classic, RFCOMM pipes as in MPBond §5).
    Bluetooth,
    /// A wire: no radio energy.
    Ethernet,
}

impl Radio {
    /// Parses `lte`, `wifi`, `bluetooth` or `ethernet`.
    pub fn parse(s: &str) -> anyhow::Result<Radio> {
        Ok(match s {
            "lte" => Radio::Lte,
            "wifi" => Radio::Wifi,
            "bluetooth" | "bt" => Radio::Bluetooth,
            "ethernet" => Radio::Ethernet,
            _ => anyhow::bail!("radio {s:?}: lte, wifi, bluetooth or ethernet"),
        })
    }
}

/// One radio's power model (mW, Mbps, seconds).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct RadioModel {
    /// Extra power per Mbps sent, mW.
    pub alpha_up: f64,
    /// Extra power per Mbps received, mW.
    pub alpha_down: f64,
    /// Power while active at zero throughput, mW.
    pub beta: f64,
    /// Power during promotion from idle, mW.
    pub promo_mw: f64,
    /// Promotion duration, s.
    pub promo_s: f64,
    /// Power in the tail, mW.
    pub tail_mw: f64,
    /// Tail duration, s.
    pub tail_s: f64,
}

impl RadioModel {
    /// The published parameters.
    ///
    /// - LTE and WiFi: Huang et al., "A Close Examination of Performance and Power
    ///   Characteristics of 4G LTE Networks", MobiSys 2012, Tables 3 and 4: LTE
    ///   αu 438.39, αd 51.97, β 1288.04 mW; promotion 1210.7 mW for 260.1 ms; tail 1060.0 mW
    ///   for 11 576 ms. WiFi αu 283.17, αd 137.01, β 132.86 mW; promotion 124.4 mW for
    ///   79.1 ms; tail 119.3 mW for 238.1 ms.
    /// - Bluetooth: Aalborg University's phone measurements (Perrucci et al., "Energy
    ///   measurements on mobile phones"): 0.57 µJ/bit at 0.69 Mbps over RFCOMM, i.e. about
    ///   390 mW while transferring, taken here as a flat active power with no promotion or
    ///   tail (a connected, idle link adds about 3 mW there).
    pub fn for_radio(r: Radio) -> RadioModel {
        match r {
            Radio::Lte => RadioModel {
                alpha_up: 438.39,
                alpha_down: 51.97,
                beta: 1288.04,
                promo_mw: 1210.7,
                promo_s: 0.2601,
                tail_mw: 1060.0,
                tail_s: 11.576,
            },
            Radio::Wifi => RadioModel {
                alpha_up: 283.17,
                alpha_down: 137.01,
                beta: 132.86,
                promo_mw: 124.4,
                promo_s: 0.0791,
                tail_mw: 119.3,
                tail_s: 0.2381,
            },
            Radio::Bluetooth => RadioModel {
                alpha_up: 0.0,
                alpha_down: 0.0,
                beta: 390.0,
                promo_mw: 0.0,
                promo_s: 0.0,
                tail_mw: 0.0,
                tail_s: 0.0,
            },
            Radio::Ethernet => RadioModel {
                alpha_up: 0.0,
                alpha_down: 0.0,
                beta: 0.0,
                promo_mw: 0.0,
                promo_s: 0.0,
                tail_mw: 0.0,
                tail_s: 0.0,
            },
        }
    }

    /// Joules spent by an interface whose packets fall in the given bins (each entry: bin
    /// index, bytes sent, bytes received; sorted by bin), starting idle and paying the full
    /// tail after the last bin.
    pub fn energy(&self, bins: &[(u64, u64, u64)]) -> f64 {
        let (transfer, tail) = self.energy_split(bins);
        transfer + tail
    }

    /// [`energy`](Self::energy) split into the transfer (promotions, active bins and the
    /// tails of pauses) and the final tail after the last packet. The final tail is the same
    /// for every scheme that wakes a radio at all (12.3 J for LTE), so comparisons of how
    /// well a scheme uses the radios read better without it; MPBond's own figures (about
    /// 2 J for a helper's 4 MB share, §6.8) are of that size too.
    pub fn energy_split(&self, bins: &[(u64, u64, u64)]) -> (f64, f64) {
        let bin_s = BIN.as_secs_f64();
        let mbps = |bytes: u64| bytes as f64 * 8.0 / bin_s / 1e6;
        let mut mj = 0.0;
        let mut last: Option<u64> = None;
        for &(b, up, down) in bins {
            match last {
                Some(l) if b <= l => continue,
                Some(l) => {
                    let gap = (b - l - 1) as f64 * bin_s;
                    if gap < self.tail_s {
                        mj += self.tail_mw * gap;
                    } else {
                        mj += self.tail_mw * self.tail_s + self.promo_mw * self.promo_s;
                    }
                }
                None => mj += self.promo_mw * self.promo_s,
            }
            mj += (self.beta + self.alpha_up * mbps(up) + self.alpha_down * mbps(down)) * bin_s;
            last = Some(b);
        }
        let tail = if last.is_some() {
            self.tail_mw * self.tail_s
        } else {
            0.0
        };
        (mj / 1000.0, tail / 1000.0)
    }
}

/// One interface of a device: its radio, and the emulator's logs of what it sent and
/// received, with the link's one-way delay in each direction.
pub struct Interface<'a> {
    /// The radio.
    pub radio: Radio,
    /// What it sent, logged at the far end, `delay` later.
    pub sent: &'a DirReport,
    /// One-way delay of the sending direction.
    pub sent_delay: Duration,
    /// What it received.
    pub received: &'a DirReport,
}

/// Bins of an interface's activity from `start_us` (emulator time) on.
pub fn activity(i: &Interface<'_>, start_us: u64) -> Vec<(u64, u64, u64)> {
    let bin_us = BIN.as_micros() as u64;
    let shift = i.sent_delay.as_micros() as u64;
    let mut m = std::collections::BTreeMap::<u64, (u64, u64)>::new();
    for r in &i.sent.records {
        if r.event == PacketEvent::Delivered {
            let t = r.t_us.saturating_sub(shift);
            if t >= start_us {
                m.entry((t - start_us) / bin_us).or_default().0 += u64::from(r.size);
            }
        }
    }
    for r in &i.received.records {
        if r.event == PacketEvent::Delivered && r.t_us >= start_us {
            m.entry((r.t_us - start_us) / bin_us).or_default().1 += u64::from(r.size);
        }
    }
    m.into_iter().map(|(b, (u, d))| (b, u, d)).collect()
}

/// Joules of one interface from `start_us` on: (transfer, final tail).
pub fn interface_energy(i: &Interface<'_>, start_us: u64) -> (f64, f64) {
    RadioModel::for_radio(i.radio).energy_split(&activity(i, start_us))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9 * b.abs().max(1.0)
    }

    /// One second of LTE download at 8 Mbps: promotion + 10 active bins + the whole tail,
    /// each term worked out by hand from Huang et al.'s parameters.
    #[test]
    fn lte_transfer_pays_promotion_activity_and_tail() {
        let m = RadioModel::for_radio(Radio::Lte);
        let bytes = 100_000; // 8 Mbps in a 100 ms bin
        let bins: Vec<_> = (0..10).map(|b| (b, 0, bytes)).collect();
        let want =
            (1210.7 * 0.2601 + 10.0 * (1288.04 + 51.97 * 8.0) * 0.1 + 1060.0 * 11.576) / 1000.0;
        assert!(
            close(m.energy(&bins), want),
            "{} vs {want}",
            m.energy(&bins)
        );
        // Nothing sent, nothing spent.
        assert_eq!(m.energy(&[]), 0.0);
    }

    /// A short pause stays in the tail (no second promotion); a pause longer than the tail
    /// costs the whole tail and a new promotion.
    #[test]
    fn pauses_cost_tail_and_long_pauses_a_new_promotion() {
        let m = RadioModel::for_radio(Radio::Lte);
        let one = m.energy(&[(0, 0, 1000)]);
        let short = m.energy(&[(0, 0, 1000), (10, 0, 1000)]);
        // 9 idle bins in the tail, one more active bin.
        let active = (1288.04 + 51.97 * 0.08) * 0.1 / 1000.0;
        assert!(close(short, one + 9.0 * 0.1 * 1.060 + active));
        let long = m.energy(&[(0, 0, 1000), (200, 0, 1000)]);
        assert!(close(long, 2.0 * one));
        // Sending costs more than receiving on LTE (αu > αd).
        assert!(m.energy(&[(0, 100_000, 0)]) > m.energy(&[(0, 0, 100_000)]));
    }

    #[test]
    fn wifi_and_bluetooth_are_far_cheaper_than_lte_for_the_same_transfer() {
        let bins: Vec<_> = (0..20).map(|b| (b, 2_000, 60_000)).collect();
        let lte = RadioModel::for_radio(Radio::Lte).energy(&bins);
        let wifi = RadioModel::for_radio(Radio::Wifi).energy(&bins);
        let bt = RadioModel::for_radio(Radio::Bluetooth).energy(&bins);
        assert!(wifi < lte / 5.0 && bt < lte / 5.0, "{lte} {wifi} {bt}");
        assert_eq!(RadioModel::for_radio(Radio::Ethernet).energy(&bins), 0.0);
        assert!(Radio::parse("5g").is_err());
    }
}
