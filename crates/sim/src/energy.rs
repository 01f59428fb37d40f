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

use mpbond_core::energy::{Radio, RadioModel, BIN};
use mpbond_core::Time;

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

#[derive(Default)]
struct Activity {
    /// Bin index → (bytes sent, bytes received).
    bins: BTreeMap<u64, (u64, u64)>,
    last: Option<Time>,
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
            let (transfer, tail) = RadioModel::for_radio(radio).energy_split(&bins);
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
