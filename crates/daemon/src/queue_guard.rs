//! The queue guard of the daemons' links: the guard itself is sans-IO
//! ([`mpbond_core::queue_guard`], shared with the simulator); this module reads it from
//! TCP_INFO and builds each link's guard from the tuning.

pub use mpbond_core::queue_guard::{
    GuardReading, QueueGuard, DEFAULT_FACTOR, DEFAULT_HS_FACTOR, DEFAULT_PS_FACTOR, NO_CAP,
};

use crate::sys::TcpInfo;

impl From<&TcpInfo> for GuardReading {
    fn from(t: &TcpInfo) -> Self {
        GuardReading {
            srtt_us: t.rtt_us,
            min_rtt_us: t.min_rtt_us,
            unacked_bytes: t.unacked_bytes,
            delivery_rate: t.delivery_rate,
            slow_start: t.slow_start,
            recovering: t.recovering,
        }
    }
}

/// The guard of a link with `tuning`: none without `pacing` (the guard works through the
/// kernel's pacing, and a cap would turn it on); on a proxy's HS-Path (`hs_path`) with
/// `hs_queue_guard` set, that factor in every phase while the helper's buffer is short,
/// and `queue_guard` in slow start otherwise; on any other link (a proxy's PS-Path, where
/// downloads go) `queue_guard` in slow start and, with `ps_queue_guard` set, that factor in
/// congestion avoidance at a steady rate.
pub fn for_link(tuning: &crate::config::Tuning, hs_path: bool) -> QueueGuard {
    if !tuning.pacing {
        QueueGuard::new(0.0)
    } else if hs_path {
        QueueGuard::for_hs_path(tuning.queue_guard, tuning.hs_queue_guard)
    } else {
        QueueGuard::for_ps_path(tuning.queue_guard, tuning.ps_queue_guard)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A link in congestion avoidance on a 50 ms path delivering 1.25 MB/s (10 Mbit/s),
    /// 200 KB out and an 80 ms smoothed RTT: its own queue.
    fn queued_ca() -> TcpInfo {
        TcpInfo {
            rtt_us: 80_000,
            min_rtt_us: 50_000,
            unacked_bytes: 200_000,
            delivery_rate: 1_250_000,
            slow_start: false,
            ..TcpInfo::default()
        }
    }

    #[test]
    fn the_tuning_picks_each_links_guard() {
        let t = crate::config::Tuning {
            hs_queue_guard: 1.1,
            ps_queue_guard: 0.0,
            ..Default::default()
        };
        let ca = GuardReading::from(&queued_ca());
        let ss = GuardReading {
            slow_start: true,
            ..ca
        };
        // Any link but an HS-Path, with `ps_queue_guard` off: the ordinary guard, slow start
        // only.
        let mut ps = for_link(&t, false);
        assert!(!ps.watches_pipe());
        assert_eq!(ps.check(&ca, 0.0, 1.0), None);
        assert_eq!(ps.check(&ss, 0.0, 1.0), Some(1_562_500));
        // An HS-Path with `hs_queue_guard`: its own guard, past slow start while the
        // helper's buffer is short.
        let mut hs = for_link(&t, true);
        assert!(hs.watches_pipe());
        hs.set_pipe_drain(Some(0.0));
        assert_eq!(hs.check(&ca, 0.0, 1.0), Some(1_375_000));
        // By default an HS-Path has its own guard; at 0, the ordinary one. Without pacing
        // there is none.
        assert!(for_link(&crate::config::Tuning::default(), true).watches_pipe());
        let plain = crate::config::Tuning {
            hs_queue_guard: 0.0,
            ..t.clone()
        };
        assert!(!for_link(&plain, true).watches_pipe());
        assert_eq!(for_link(&plain, true).check(&ca, 0.0, 1.0), None);
        // With `ps_queue_guard` at 1 (off by default), the other links hold in congestion
        // avoidance too, at the rate they deliver.
        assert_eq!(crate::config::Tuning::default().ps_queue_guard, 0.0);
        let ps_guard = crate::config::Tuning {
            hs_queue_guard: 1.1,
            ps_queue_guard: 1.0,
            ..Default::default()
        };
        let mut ps = for_link(&ps_guard, false);
        for _ in 1..mpbond_core::queue_guard::PS_STEADY_READINGS {
            assert_eq!(ps.check(&ca, 0.0, 1.0), None, "not yet shown steady");
        }
        assert_eq!(ps.check(&ca, 0.0, 1.0), Some(1_250_000));
        // In a loss recovery it stands aside.
        let recovering = GuardReading {
            recovering: true,
            ..ca
        };
        assert_eq!(ps.check(&recovering, 0.0, 1.0), Some(NO_CAP));
        let unpaced = crate::config::Tuning { pacing: false, ..t };
        assert_eq!(for_link(&unpaced, true).check(&ss, 0.0, 1.0), None);
        assert_eq!(for_link(&unpaced, false).check(&ss, 0.0, 1.0), None);
    }
}
