//! Radio energy of the phones in a simulated run, priced by the power model the lab and PAMS's
//! energy-aware admission use ([`mpbond_core::energy`]).
//!
//! Every packet a phone sends or receives is binned per interface ([`BIN`]), the way the lab
//! bins its packet logs (`lab::energy`): a transmission when it leaves the phone (for a pipe,
//! when it leaves the link's bottleneck; toward the proxy, when the uplink has served it), a
//! reception when it arrives. Each packet counts [`HEADER`] bytes on top of its payload, so
//! ACKs and control frames keep a radio awake as they do in the lab. The bins are priced with
//! [`RadioModel::energy_split`]: promotions, active bins, the tails of pauses, and the whole
//! tail after the last packet, reported apart.
//!
//! The meter also knows when each interface last moved something, which the proxy's views
//! need ([`mpbond_core::PathView::wan_idle`]): the daemons read it from their sockets.

use std::collections::BTreeMap;
use std::time::Duration;

use mpbond_core::energy::{Radio, RadioModel, BIN, WIFI_CLOSE_MBPS};
use mpbond_core::Time;

use crate::rate::RateProfile;
use crate::report::{DeviceEnergy, InterfaceEnergy};

/// IP and TCP headers (with timestamps) of every packet, bytes.
pub const HEADER: u64 = 52;

/// One interface of a phone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Iface {
    /// The primary's WAN link (the PS-Path).
    PrimaryWan,
    /// The primary's end of helper `k`'s pipe.
    PrimaryPipe(usize),
    /// Helper `k`'s WAN link (its HS-Path).
    HelperWan(usize),
    /// Helper `k`'s end of its pipe.
    HelperPipe(usize),
}

impl Iface {
    /// The WAN interface of subflow `s`: the primary's for the direct one (0), helper
    /// `s - 1`'s otherwise.
    pub fn wan_of_subflow(s: usize) -> Iface {
        if s == 0 {
            Iface::PrimaryWan
        } else {
            Iface::HelperWan(s - 1)
        }
    }
}

/// The air rate of a WiFi link over the [`BIN`] from `from`, Mbit/s: the goodput at which its
/// radios would be on the air all of it ([`mpbond_core::energy::Throughput::Airtime`]). If
/// `radio_rate`, the rate is the radio's own (a WLAN profile that follows the distance) and
/// the air rate is the link's capacity there; otherwise the rate throttles a WLAN close by (the
/// paper's `tc` on real WiFi, MPBond §6.1), whose radios still send at
/// [`WIFI_CLOSE_MBPS`] or the throttle's rate if that is higher. The lab prices its pipes the
/// same way.
pub fn air_mbps(rate: &RateProfile, radio_rate: bool, from: Time) -> f64 {
    let bytes = rate.cumulative_bytes(from + BIN) - rate.cumulative_bytes(from);
    let capacity = bytes * 8.0 / BIN.as_secs_f64() / 1e6;
    if radio_rate {
        capacity
    } else {
        capacity.max(WIFI_CLOSE_MBPS)
    }
}

/// [`air_mbps`] over bin `b` of an activity record whose bin 0 starts at `origin`.
pub fn air_mbps_of_bin(rate: &RateProfile, radio_rate: bool, origin: Time, b: u64) -> f64 {
    let offset = Duration::from_micros(b.saturating_mul(BIN.as_micros() as u64));
    air_mbps(rate, radio_rate, origin + offset)
}

#[derive(Default)]
struct Activity {
    /// Bin index → (bytes sent, bytes received).
    bins: BTreeMap<u64, (u64, u64)>,
    last: Option<Time>,
    /// The link's rate and whether it is the radio's own, for airtime pricing; `None`: a WLAN
    /// close by.
    link: Option<(RateProfile, bool)>,
}

/// Packet activity of every phone interface in one run.
pub struct RadioMeter {
    wan: Radio,
    pipe: Radio,
    helpers: usize,
    /// Primary WAN, primary pipes 0..n, helper WANs 0..n, helper pipes 0..n.
    ifaces: Vec<Activity>,
}

impl RadioMeter {
    /// A meter for a primary and `helpers` helpers, every WAN link on `wan` and every pipe on
    /// `pipe`.
    pub fn new(wan: Radio, pipe: Radio, helpers: usize) -> Self {
        RadioMeter {
            wan,
            pipe,
            helpers,
            ifaces: (0..1 + 3 * helpers).map(|_| Activity::default()).collect(),
        }
    }

    /// Interface `i` is on a link of this rate (`radio_rate`: see [`air_mbps`]), which prices
    /// a WiFi radio's airtime. Unset interfaces are taken as on a WLAN close by.
    pub fn set_link(&mut self, i: Iface, rate: &RateProfile, radio_rate: bool) {
        if let Some(x) = self.index(i) {
            self.ifaces[x].link = Some((rate.clone(), radio_rate));
        }
    }

    fn index(&self, i: Iface) -> Option<usize> {
        let n = self.helpers;
        match i {
            Iface::PrimaryWan => Some(0),
            Iface::PrimaryPipe(k) if k < n => Some(1 + k),
            Iface::HelperWan(k) if k < n => Some(1 + n + k),
            Iface::HelperPipe(k) if k < n => Some(1 + 2 * n + k),
            _ => None,
        }
    }

    fn record(&mut self, i: Iface, at: Time, payload: u64, sent: bool) {
        let Some(x) = self.index(i) else {
            return;
        };
        let a = &mut self.ifaces[x];
        let bin = at.as_micros() / BIN.as_micros() as u64;
        let e = a.bins.entry(bin).or_default();
        if sent {
            e.0 += payload + HEADER;
        } else {
            e.1 += payload + HEADER;
        }
        a.last = Some(a.last.map_or(at, |l| l.max(at)));
    }

    /// Interface `i` sent a packet of `payload` bytes at `at`.
    pub fn sent(&mut self, i: Iface, at: Time, payload: u64) {
        self.record(i, at, payload, true);
    }

    /// Interface `i` received a packet of `payload` bytes at `at`.
    pub fn received(&mut self, i: Iface, at: Time, payload: u64) {
        self.record(i, at, payload, false);
    }

    /// A packet of `payload` bytes crosses helper `k`'s pipe: one end sends it at `at`, the
    /// other receives it at `arrives`.
    pub fn crossed_pipe(
        &mut self,
        k: usize,
        toward_primary: bool,
        at: Time,
        arrives: Time,
        payload: u64,
    ) {
        let (from, to) = if toward_primary {
            (Iface::HelperPipe(k), Iface::PrimaryPipe(k))
        } else {
            (Iface::PrimaryPipe(k), Iface::HelperPipe(k))
        };
        self.sent(from, at, payload);
        self.received(to, arrives, payload);
    }

    /// Seconds since interface `i` last moved a packet; infinity if it never has (as
    /// [`mpbond_core::PathView::wan_idle`] reads unknown idleness).
    pub fn idle_for(&self, i: Iface, now: Time) -> f64 {
        self.index(i)
            .and_then(|x| self.ifaces[x].last)
            .map_or(f64::INFINITY, |l| now.saturating_since(l).as_secs_f64())
    }

    /// Joules per phone: the primary first, then each helper, each with its interfaces.
    pub fn report(&self) -> Vec<DeviceEnergy> {
        let price = |x: usize, radio: Radio, name: String| {
            let bins: Vec<(u64, u64, u64)> = self.ifaces[x]
                .bins
                .iter()
                .map(|(&b, &(up, down))| (b, up, down))
                .collect();
            let link = &self.ifaces[x].link;
            let air = |b: u64| {
                link.as_ref().map_or(WIFI_CLOSE_MBPS, |(rate, own)| {
                    air_mbps_of_bin(rate, *own, Time::ZERO, b)
                })
            };
            let (transfer, tail) = RadioModel::for_radio(radio).energy_split_air(&bins, air);
            InterfaceEnergy {
                name,
                radio: radio.name().to_string(),
                joules: transfer + tail,
                tail_joules: tail,
            }
        };
        let n = self.helpers;
        let device = |name: String, interfaces: Vec<InterfaceEnergy>| DeviceEnergy {
            device: name,
            joules: interfaces.iter().map(|i| i.joules).sum(),
            tail_joules: interfaces.iter().map(|i| i.tail_joules).sum(),
            interfaces,
        };
        let mut primary = vec![price(0, self.wan, "ps".into())];
        primary.extend((0..n).map(|k| price(1 + k, self.pipe, format!("pipe{}", k + 1))));
        let mut out = vec![device("primary".into(), primary)];
        for k in 0..n {
            out.push(device(
                format!("helper{}", k + 1),
                vec![
                    price(1 + n + k, self.wan, format!("hs{}", k + 1)),
                    price(1 + 2 * n + k, self.pipe, format!("pipe{}", k + 1)),
                ],
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn at(ms: u64) -> Time {
        Time::ZERO + Duration::from_millis(ms)
    }

    /// A packet lands in its interface's bin with its headers, and is priced by that
    /// interface's radio: the same bins through core's model give the same joules.
    #[test]
    fn packets_are_binned_per_interface_and_priced_by_their_radio() {
        let mut m = RadioMeter::new(Radio::Lte, Radio::Wifi, 1);
        m.received(Iface::PrimaryWan, at(10), 1448);
        m.received(Iface::PrimaryWan, at(90), 1448);
        m.sent(Iface::PrimaryWan, at(150), 0);
        m.sent(Iface::HelperPipe(0), at(20), 1448);
        m.received(Iface::PrimaryPipe(0), at(22), 1448);
        let r = m.report();
        assert_eq!(r.len(), 2);
        let lte = RadioModel::for_radio(Radio::Lte);
        let (t, tail) = lte.energy_split(&[(0, 0, 2 * (1448 + HEADER)), (1, HEADER, 0)]);
        let ps = &r[0].interfaces[0];
        assert_eq!((ps.name.as_str(), ps.radio.as_str()), ("ps", "lte"));
        assert!((ps.joules - (t + tail)).abs() < 1e-12 && (ps.tail_joules - tail).abs() < 1e-12);
        let wifi = RadioModel::for_radio(Radio::Wifi);
        let pipe = wifi.energy(&[(0, 0, 1448 + HEADER)]);
        assert!((r[0].interfaces[1].joules - pipe).abs() < 1e-12);
        assert!((r[0].joules - (t + tail + pipe)).abs() < 1e-12);
        // The helper's LTE radio moved nothing and costs nothing; its pipe end sent.
        assert_eq!(r[1].interfaces[0].joules, 0.0);
        let sent = wifi.energy(&[(0, 1448 + HEADER, 0)]);
        assert!((r[1].joules - sent).abs() < 1e-12);
    }

    /// A pipe's airtime is priced against its air rate: a throttle on a WLAN close by keeps
    /// the radio on the air a share of the time, a WLAN at 12 m without line of sight (3.9
    /// Mbit/s, its own rate) all of it, and a trace's rate is read bin by bin.
    #[test]
    fn a_pipes_airtime_follows_its_air_rate() {
        let throttle = RateProfile::constant(5e6);
        assert_eq!(air_mbps(&throttle, false, at(0)), WIFI_CLOSE_MBPS);
        assert!((air_mbps(&RateProfile::constant(3.9e6), true, at(0)) - 3.9).abs() < 1e-9);
        // A throttle above the WLAN's rate is the air rate itself.
        assert!((air_mbps(&RateProfile::constant(100e6), false, at(0)) - 100.0).abs() < 1e-9);
        let mut stepped = RateProfile::constant(20e6);
        stepped.change_at(at(1000), crate::rate::Source::Constant(2e6));
        assert!((air_mbps(&stepped, true, at(0)) - 20.0).abs() < 1e-6);
        assert!((air_mbps(&stepped, true, at(1000)) - 2.0).abs() < 1e-6);
        // The same 5 Mbit/s through a throttled pipe and through a slow WLAN.
        let price = |link: Option<(&RateProfile, bool)>| {
            let mut m = RadioMeter::new(Radio::Lte, Radio::Wifi, 1);
            if let Some((rate, own)) = link {
                m.set_link(Iface::HelperPipe(0), rate, own);
            }
            for ms in (0..1000).step_by(2) {
                m.sent(Iface::HelperPipe(0), at(ms), 1250 - HEADER);
            }
            m.report()[1].interfaces[1].joules
        };
        let throttled = price(Some((&throttle, false)));
        let slow = price(Some((&RateProfile::constant(3.9e6), true)));
        let unset = price(None);
        assert!((throttled - unset).abs() < 1e-12, "{throttled} {unset}");
        // Busy all the time sending (1.295 W + β) against 5/39 of it.
        assert!(slow > 3.0 * throttled, "{slow} {throttled}");
    }

    /// Idleness is measured from an interface's last packet, unknown before the first, and an
    /// interface that does not exist is ignored rather than a panic.
    #[test]
    fn idleness_is_since_the_last_packet() {
        let mut m = RadioMeter::new(Radio::Lte, Radio::Wifi, 1);
        assert_eq!(m.idle_for(Iface::HelperWan(0), at(5)), f64::INFINITY);
        m.received(Iface::HelperWan(0), at(100), 1000);
        m.sent(Iface::HelperWan(0), at(40), 0);
        assert!((m.idle_for(Iface::HelperWan(0), at(350)) - 0.25).abs() < 1e-9);
        m.sent(Iface::HelperWan(3), at(1), 10);
        assert_eq!(m.idle_for(Iface::HelperWan(3), at(5)), f64::INFINITY);
        assert_eq!(m.report().len(), 2);
    }
}
