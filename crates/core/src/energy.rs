//! Radio energy, the model the scheduler weighs and the lab accounts with (MPBond §6 estimates
//! energy from published power models, then checks them against a power monitor in §6.8:
//! absolute error up to 24%, relative savings within 5 points).
//!
//! A radio is a state machine driven by its packets, in [`BIN`]s:
//! - **idle** costs nothing (the device's base power is not the network's);
//! - the first packet after idle pays a **promotion** (LTE RRC_IDLE → RRC_CONNECTED);
//! - a bin with packets is **active**: `β` plus what its throughput costs ([`Throughput`]):
//!   for LTE `αu·up_Mbps + αd·down_Mbps` (Huang et al., MobiSys 2012, §5: power grows
//!   linearly with throughput in each direction), for WiFi the power of sending and of
//!   receiving for the share of the bin the radio is on the air (Android's power profiles);
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

/// TCP goodput of a WLAN close by, Mbit/s: 802.11n MCS 7 (65 Mbit/s) at the 60% MAC
/// efficiency of the lab's WLAN model (`lab::wlan`, 1 m with line of sight). A WiFi radio is
/// on the air all the time at this goodput, and for a share of the time below it: a pipe
/// throttled to 5 Mbit/s (the paper's `tc` on real WiFi, §6.1) keeps its radios on the air
/// an eighth of the time.
pub const WIFI_CLOSE_MBPS: f64 = 39.0;

/// A WiFi radio's power while sending, mW: 350 mA at 3.7 V, the `wifi.controller.tx` and
/// `wifi.controller.voltage` of the Pixel 2 XL's Android power profile (AOSP
/// device/google/taimen, `power_profile.xml`; the paper's primary is a Pixel 2, same
/// system-on-chip and WiFi).
pub const WIFI_TX_MW: f64 = 350.0 * 3.7;

/// A WiFi radio's power while receiving, mW: 125 mA at 3.7 V (`wifi.controller.rx`, the same
/// profile).
pub const WIFI_RX_MW: f64 = 125.0 * 3.7;

/// How a radio's active power grows with what it moves.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub enum Throughput {
    /// Linear in the throughput each way, mW per Mbit/s (Huang et al.'s fits, measured up to
    /// a phone's LTE and 802.11g rates of 2011).
    Linear {
        /// Extra power per Mbit/s sent.
        up: f64,
        /// Extra power per Mbit/s received.
        down: f64,
    },
    /// In proportion to the time the radio is on the air, as Android prices WiFi: the power
    /// while sending and while receiving, for the share of the bin its bytes take at the
    /// link's air rate (the goodput at which it would be on the air all the time), at most
    /// the whole bin. Unlike a linear fit it cannot exceed what the radio draws when busy:
    /// Huang et al.'s 283 mW per Mbit/s sent, applied to a 39 Mbit/s WLAN, would be 11 W.
    Airtime {
        /// Power while sending, mW.
        tx: f64,
        /// Power while receiving, mW.
        rx: f64,
    },
}

impl Throughput {
    /// Extra power, mW, for `up` and `down` Mbit/s over a link whose air rate is `air_mbps`
    /// (used by [`Throughput::Airtime`] only; 0 or less: the radio is on the air throughout).
    pub fn mw(&self, up: f64, down: f64, air_mbps: f64) -> f64 {
        match *self {
            Throughput::Linear { up: au, down: ad } => au * up + ad * down,
            Throughput::Airtime { tx, rx } => {
                let total = up + down;
                if total <= 0.0 {
                    return 0.0;
                }
                let busy = if air_mbps > 0.0 {
                    (total / air_mbps).min(1.0)
                } else {
                    1.0
                };
                busy * (tx * up + rx * down) / total
            }
        }
    }

    /// Extra power per Mbit/s sent (`sending`) or received, at air rate `air_mbps`: what a
    /// byte costs below saturation.
    pub fn mw_per_mbps(&self, sending: bool, air_mbps: f64) -> f64 {
        match *self {
            Throughput::Linear { up, down } => {
                if sending {
                    up
                } else {
                    down
                }
            }
            Throughput::Airtime { tx, rx } if air_mbps > 0.0 => {
                (if sending { tx } else { rx }) / air_mbps
            }
            Throughput::Airtime { .. } => 0.0,
        }
    }
}

/// One radio's power model (mW, Mbps, seconds).
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct RadioModel {
    /// What its throughput costs on top of `beta`.
    pub throughput: Throughput,
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
    /// - LTE: Huang et al., "A Close Examination of Performance and Power Characteristics of
    ///   4G LTE Networks", MobiSys 2012, Tables 3 and 4: αu 438.39, αd 51.97, β 1288.04 mW;
    ///   promotion 1210.7 mW for 260.1 ms; tail 1060.0 mW for 11 576 ms.
    /// - WiFi: on the air, 1295 mW sending and 462.5 mW receiving ([`WIFI_TX_MW`],
    ///   [`WIFI_RX_MW`]: the Pixel 2 XL's power profile); the states around it from Huang et
    ///   al.: β 132.86 mW, promotion 124.4 mW for 79.1 ms, tail 119.3 mW for 238.1 ms. Their
    ///   linear fit (αu 283.17, αd 137.01 mW per Mbit/s) is
    ///   [`huang2012_wifi`](Self::huang2012_wifi), kept for comparison.
    /// - Bluetooth: Aalborg University's phone measurements (Perrucci et al., "Energy
    ///   measurements on mobile phones"): 0.57 µJ/bit at 0.69 Mbps over RFCOMM, i.e. about
    ///   390 mW while transferring, taken here as a flat active power with no promotion or
    ///   tail (a connected, idle link adds about 3 mW there).
    pub fn for_radio(r: Radio) -> RadioModel {
        let flat = |beta| RadioModel {
            throughput: Throughput::Linear { up: 0.0, down: 0.0 },
            beta,
            promo_mw: 0.0,
            promo_s: 0.0,
            tail_mw: 0.0,
            tail_s: 0.0,
        };
        match r {
            Radio::Lte => RadioModel {
                throughput: Throughput::Linear {
                    up: 438.39,
                    down: 51.97,
                },
                beta: 1288.04,
                promo_mw: 1210.7,
                promo_s: 0.2601,
                tail_mw: 1060.0,
                tail_s: 11.576,
            },
            Radio::Wifi => RadioModel {
                throughput: Throughput::Airtime {
                    tx: WIFI_TX_MW,
                    rx: WIFI_RX_MW,
                },
                ..Self::huang2012_wifi()
            },
            Radio::Bluetooth => flat(390.0),
            Radio::Ethernet => flat(0.0),
        }
    }

    /// Huang et al.'s WiFi model as published (MobiSys 2012, Table 4), linear in throughput:
    /// the lab's WiFi model before its airtime pricing, kept so reports can say what the
    /// change does (`transfer_energy_linear_wifi_j`).
    pub fn huang2012_wifi() -> RadioModel {
        RadioModel {
            throughput: Throughput::Linear {
                up: 283.17,
                down: 137.01,
            },
            beta: 132.86,
            promo_mw: 124.4,
            promo_s: 0.0791,
            tail_mw: 119.3,
            tail_s: 0.2381,
        }
    }

    /// Joules spent by an interface whose packets fall in the given bins (each entry: bin
    /// index, bytes sent, bytes received; sorted by bin), starting idle and paying the full
    /// tail after the last bin, on a link whose air rate is [`WIFI_CLOSE_MBPS`].
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
        self.energy_split_air(bins, |_| WIFI_CLOSE_MBPS)
    }

    /// [`energy_split`](Self::energy_split) on a link whose air rate changes: `air_mbps(bin)`
    /// is the goodput at which the radio would be on the air all of that bin (a WLAN whose
    /// rate follows the distance; only [`Throughput::Airtime`] reads it).
    pub fn energy_split_air(
        &self,
        bins: &[(u64, u64, u64)],
        air_mbps: impl Fn(u64) -> f64,
    ) -> (f64, f64) {
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
            // Only airtime pricing reads the air rate (a lab link's capacity in that bin).
            let air = match self.throughput {
                Throughput::Airtime { .. } => air_mbps(b),
                Throughput::Linear { .. } => 0.0,
            };
            mj += (self.beta + self.throughput.mw(mbps(up), mbps(down), air)) * bin_s;
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

    /// Joules per byte delivered over the subflow below saturation: the WAN radio receives it
    /// (sends it, uplink), and on a pipe one end sends it and the other receives it, at the
    /// air rate of a WLAN close by ([`WIFI_CLOSE_MBPS`]). A WiFi pipe's byte costs 0.87 times
    /// an LTE downlink byte (33 + 12 against 52 mW per Mbit/s; 8.4 times in Huang et al.'s
    /// linear WiFi model), so what a helper costs is mostly its LTE radio's time.
    pub fn joules_per_byte(&self) -> f64 {
        let per_mbps_to_j_per_byte = 8.0 / 1e6 / 1000.0;
        let wan = RadioModel::for_radio(self.wan)
            .throughput
            .mw_per_mbps(self.uplink, WIFI_CLOSE_MBPS);
        let pipe = self.pipe.map_or(0.0, |r| {
            let t = RadioModel::for_radio(r).throughput;
            t.mw_per_mbps(true, WIFI_CLOSE_MBPS) + t.mw_per_mbps(false, WIFI_CLOSE_MBPS)
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

    /// WiFi is priced by airtime: below the air rate in proportion to the bytes, at it and
    /// beyond at the radio's busy power and no more; a slower WLAN keeps the radio on the air
    /// longer for the same bytes. Huang et al.'s linear fit, kept for comparison, grows
    /// without bound.
    #[test]
    fn wifi_pays_for_airtime_up_to_a_busy_radio() {
        let m = RadioModel::for_radio(Radio::Wifi);
        let per_bin = |up: u64, down: u64, air: f64| {
            // One active bin after a promotion, without the final tail.
            m.energy_split_air(&[(0, up, down)], |_| air).0 - 0.1244 * 0.0791
        };
        // 5 Mbit/s sent over a 39 Mbit/s WLAN: on the air 5/39 of the bin.
        let five = 5e6 / 8.0 / 10.0;
        let want = (132.86 + 1295.0 * 5.0 / 39.0) * 0.1 / 1000.0;
        assert!(close(per_bin(five as u64, 0, 39.0), want));
        // Received instead: the receiving power.
        let want = (132.86 + 462.5 * 5.0 / 39.0) * 0.1 / 1000.0;
        assert!(close(per_bin(0, five as u64, 39.0), want));
        // At or beyond the air rate the radio is simply busy: 1.295 W sending, however fast.
        let busy = (132.86 + 1295.0) * 0.1 / 1000.0;
        assert!(close(per_bin(39 * five as u64 / 5, 0, 39.0), busy));
        assert!(close(per_bin(80 * five as u64 / 5, 0, 39.0), busy));
        // A WLAN at 3.9 Mbit/s (12 m without line of sight) is busy at 5 Mbit/s offered, and
        // so is a link whose air rate is unknown (0).
        assert!(close(per_bin(five as u64, 0, 3.9), busy));
        assert!(close(per_bin(five as u64, 0, 0.0), busy));
        // Both ways in one busy bin: the airtime splits by bytes.
        let both = (132.86 + (1295.0 + 462.5) / 2.0) * 0.1 / 1000.0;
        assert!(close(
            per_bin(40 * five as u64 / 5, 40 * five as u64 / 5, 39.0),
            both
        ));
        // Huang et al.'s linear model at 39 Mbit/s sent: over 11 W.
        let huang = RadioModel::huang2012_wifi();
        let at_39 = huang.energy_split(&[(0, 39 * five as u64 / 5, 0)]).0 / 0.1;
        assert!(at_39 > 11.0, "{at_39} W");
        // The default air rate is a WLAN close by.
        assert!(close(
            m.energy_split(&[(0, five as u64, 0)]).0,
            m.energy_split_air(&[(0, five as u64, 0)], |_| WIFI_CLOSE_MBPS)
                .0
        ));
    }

    /// The per-subflow costs, worked out by hand from the published parameters.
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
        // Over a pipe: one end sends and the other receives, each for the byte's airtime at
        // 39 Mbit/s.
        assert!(close(
            hs.joules_per_byte() * 1e6,
            (51.97 + (1295.0 + 462.5) / 39.0) * 8.0 / 1000.0
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
