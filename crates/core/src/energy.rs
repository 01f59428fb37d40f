//! Radio energy, the model the scheduler weighs and the lab accounts with (MPBond §6 estimates
//! energy from published power models, then checks them against a power monitor in §6.8:
//! absolute error up to 24%, relative savings within 5 points).
//!
//! A radio is a state machine driven by its packets, in [`BIN`]s:
//! - **idle** costs nothing (the device's base power is not the network's);
//! - the first packet after idle pays a **promotion** (LTE RRC_IDLE → RRC_CONNECTED);
//! - a bin with packets is **active**: `β + αu·up_Mbps + αd·down_Mbps` (Huang et al.,
//!   MobiSys 2012, §5: power grows linearly with throughput in each direction);
//! - a bin without packets within `tail` of the last activity is **tail** (the radio waits
//!   in a high-power state for more data); after the last packet the whole tail is paid.
//!
//! [`PathPower`] turns the same parameters into what one more byte, one more second and one
//! more wake-up of a subflow cost, for PAMS's energy-aware helper admission
//! ([`crate::scheduler::admission`]).

use std::time::Duration;

pub use mpbond_proto::Radio;

/// Bin width of the activity model.
pub const BIN: Duration = Duration::from_millis(100);

/// One radio's power model (mW, Mbps, seconds).
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
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

/// The radios that carry one subflow, as its devices declared them (`RADIOS` frames):
/// the sender-side WAN link's, and for a helper subflow its pipe's (both ends: the helper
/// sends on it, the primary receives).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PathPower {
    /// The radio of the PS-Path or HS-Path.
    pub wan: Radio,
    /// The pipe's radio; `None` for the direct subflow.
    pub pipe: Option<Radio>,
    /// Whether the subflow carries data toward the proxy (the primary's uplink scheduler):
    /// then the WAN radio sends, at LTE's αu of 438 mW per Mbit/s instead of αd's 52.
    pub uplink: bool,
}

impl PathPower {
    /// Watts the subflow's radios draw while it carries data, beyond what they draw for its
    /// throughput: the WAN radio's β, and the pipe radio's β at both ends.
    pub fn active_w(&self) -> f64 {
        let wan = RadioModel::for_radio(self.wan).beta;
        let pipe = self
            .pipe
            .map_or(0.0, |r| 2.0 * RadioModel::for_radio(r).beta);
        (wan + pipe) / 1000.0
    }

    /// Joules per byte delivered over the subflow, from the α terms: the WAN radio receives
    /// it (sends it, uplink), and on a pipe one end sends it and the other receives it. A
    /// WiFi pipe's byte costs 8.4 times an LTE downlink byte in Huang et al.'s model (283 +
    /// 137 against 52 mW per Mbit/s), which is why a helper on a fast pipe can cost more
    /// than it saves.
    pub fn joules_per_byte(&self) -> f64 {
        let per_mbps_to_j_per_byte = 8.0 / 1e6 / 1000.0;
        let m = RadioModel::for_radio(self.wan);
        let wan = if self.uplink {
            m.alpha_up
        } else {
            m.alpha_down
        };
        let pipe = self.pipe.map_or(0.0, |r| {
            let m = RadioModel::for_radio(r);
            m.alpha_up + m.alpha_down
        });
        (wan + pipe) * per_mbps_to_j_per_byte
    }

    /// Joules that putting data on the WAN radio now costs beyond its transfer, after it has
    /// been idle for `idle_s` seconds (infinite: unknown, taken as asleep). Whatever it moves
    /// now, it waits a whole tail after its last packet; had it been left alone it would have
    /// finished the tail it is in. So the extra is the tail already spent, `tail_mw ·
    /// idle_s`, and once the radio has slept (`idle_s` past the tail) the whole tail and a
    /// promotion: 12.6 J for LTE (Huang et al.), 0.04 J for WiFi. A radio that moved
    /// something within one [`BIN`] is awake and costs nothing more.
    pub fn wake_j(&self, idle_s: f64) -> f64 {
        let m = RadioModel::for_radio(self.wan);
        if idle_s < BIN.as_secs_f64() {
            0.0
        } else if idle_s < m.tail_s {
            m.tail_mw * idle_s / 1000.0
        } else {
            (m.tail_mw * m.tail_s + m.promo_mw * m.promo_s) / 1000.0
        }
    }
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
    }

    /// The per-subflow costs, worked out by hand from Huang et al.'s parameters.
    #[test]
    fn path_costs_follow_the_published_parameters() {
        let ps = PathPower {
            wan: Radio::Lte,
            pipe: None,
            uplink: false,
        };
        let hs = PathPower {
            wan: Radio::Lte,
            pipe: Some(Radio::Wifi),
            uplink: false,
        };
        assert!(close(ps.active_w(), 1.28804));
        assert!(close(hs.active_w(), 1.28804 + 2.0 * 0.13286));
        // 1 MB over LTE: 8 Mbit at 51.97 mW per Mbit/s.
        assert!(close(ps.joules_per_byte() * 1e6, 51.97 * 8.0 / 1000.0));
        assert!(close(
            hs.joules_per_byte() * 1e6,
            (51.97 + 283.17 + 137.01) * 8.0 / 1000.0
        ));
        // Uplink: the WAN radio sends.
        let up = PathPower { uplink: true, ..ps };
        assert!(close(up.joules_per_byte() * 1e6, 438.39 * 8.0 / 1000.0));
        // Awake, in the tail, asleep.
        assert_eq!(hs.wake_j(0.05), 0.0);
        assert!(close(hs.wake_j(2.0), 2.0 * 1.060));
        let asleep = 1.060 * 11.576 + 1.2107 * 0.2601;
        assert!(close(hs.wake_j(30.0), asleep));
        assert!(close(hs.wake_j(f64::INFINITY), asleep));
        // A wire costs nothing at all.
        let wire = PathPower {
            wan: Radio::Ethernet,
            pipe: Some(Radio::Ethernet),
            uplink: false,
        };
        assert_eq!(
            (wire.active_w(), wire.joules_per_byte(), wire.wake_j(100.0)),
            (0.0, 0.0, 0.0)
        );
    }
}
