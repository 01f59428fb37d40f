//! Radio energy per device, from each interface's packet log and the power model of
//! [`mpbond_core::energy`] (the one PAMS's energy-aware admission weighs), the way MPBond §6
//! estimates energy.
//!
//! Each interface's packets are binned ([`BIN`]) and priced by its radio's
//! [`RadioModel`]; the parameters, with their sources, are in [`RadioModel::for_radio`] and
//! docs/lab.md. Transmissions are counted when they leave the device's queue (the emulator's
//! delivery time minus the link's one-way delay) and receptions when they arrive. A WiFi
//! radio's airtime is priced against its link's air rate ([`mpbond_sim::energy::air_mbps`],
//! as the simulator prices its pipes).

use std::time::Duration;

pub use mpbond_core::energy::{Radio, RadioModel, BIN};
use mpbond_core::Time;
use mpbond_sim::rate::RateProfile;

use crate::emu::{DirReport, PacketEvent};

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
    /// The link's rate (emulator time) and whether it is the radio's own, for a WiFi
    /// radio's airtime.
    pub rate: &'a RateProfile,
    /// See [`crate::topo::LinkParams::radio_rate`].
    pub radio_rate: bool,
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

/// Joules of an interface's activity ([`activity`] from `start_us`) under `model`:
/// (transfer, final tail). A WiFi radio's airtime is priced against the link's air rate in
/// each bin.
pub fn price(
    i: &Interface<'_>,
    bins: &[(u64, u64, u64)],
    model: &RadioModel,
    start_us: u64,
) -> (f64, f64) {
    let origin = Time::ZERO + Duration::from_micros(start_us);
    model.energy_split_air(bins, |b| {
        mpbond_sim::energy::air_mbps_of_bin(i.rate, i.radio_rate, origin, b)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The radio names a scenario may give, and a clear refusal of others.
    #[test]
    fn scenario_radio_names_parse() {
        assert_eq!(Radio::parse("bt"), Ok(Radio::Bluetooth));
        assert!(Radio::parse("5g")
            .unwrap_err()
            .to_string()
            .contains("lte, wifi, bluetooth or ethernet"));
    }
}
