//! Energy-aware liveness for cellular links.
//!
//! Every link is pinged when it has been silent for a while, and a link silent for the stall
//! timeout is declared dead: that catches a hung peer within a second while data flows. On a
//! cellular link (a PS-Path or an HS-Path) the same pings, every 250 ms for as long as the
//! session lives, keep the radio out of its idle state for good: an LTE radio stays in its
//! 1 W tail for 11.6 s after every packet (Huang et al., MobiSys 2012), so a helper whose
//! HS-Path finished early would pay for it until the download ends, which is the energy that
//! the helper-side split exists to save (MPBond §4.2, §6.2) and that flexible feedback avoids
//! waking the radio for (§5). So a cellular link that has moved no data for [`QUIET_AFTER`]
//! is *quiet*: it is pinged every [`QUIET_PING_EVERY`] and declared dead only after
//! [`QUIET_SILENCE`]. Both ends see the same bytes move, so they agree within a round trip;
//! data sent on a quiet link that goes unacknowledged still trips the stall rule at once.

use std::time::{Duration, Instant};

use crate::sys::TcpInfo;

/// A cellular link with no data for this long is quiet.
pub const QUIET_AFTER: Duration = Duration::from_millis(300);
/// Ping period of a quiet link (a NAT keepalive's order, well over an LTE tail).
pub const QUIET_PING_EVERY: Duration = Duration::from_secs(25);
/// Silence after which a quiet link is dead.
pub const QUIET_SILENCE: Duration = Duration::from_secs(75);
/// Bytes that must move (acknowledged or received) between two checks for a link to count
/// as carrying data: more than pings, pongs and feedback frames.
const BUSY_BYTES: u64 = 1500;

/// Tracks whether a link carries data.
#[derive(Debug, Clone)]
pub struct Activity {
    moved: u64,
    busy_at: Instant,
}

impl Default for Activity {
    fn default() -> Self {
        Activity {
            moved: 0,
            busy_at: Instant::now(),
        }
    }
}

impl Activity {
    /// Takes a fresh TCP_INFO; true when the link has been quiet for [`QUIET_AFTER`].
    pub fn quiet(&mut self, info: &TcpInfo, now: Instant) -> bool {
        let moved = info.bytes_acked + info.bytes_received;
        if moved.saturating_sub(self.moved) >= BUSY_BYTES {
            self.busy_at = now;
        }
        self.moved = moved;
        now.saturating_duration_since(self.busy_at) >= QUIET_AFTER
    }

    /// The ping period and the silence limit of a link, cellular or not.
    pub fn timers(quiet: bool, ping: Duration, stall: Duration) -> (Duration, Duration) {
        if quiet {
            (QUIET_PING_EVERY, QUIET_SILENCE.max(stall))
        } else {
            (ping, stall)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_link_turns_quiet_soon_after_its_data_and_busy_again_with_data() {
        let t0 = Instant::now();
        let mut a = Activity::default();
        let mut info = TcpInfo {
            bytes_acked: 10_000,
            ..TcpInfo::default()
        };
        assert!(!a.quiet(&info, t0));
        // Pings and feedback: a few hundred bytes per check, for 0.5 s.
        for i in 1..=5 {
            info.bytes_received += 200;
            let q = a.quiet(&info, t0 + Duration::from_millis(100 * i));
            assert_eq!(q, i >= 3, "check {i}");
        }
        info.bytes_received += 20_000;
        assert!(!a.quiet(&info, t0 + Duration::from_millis(600)));
        let stall = Duration::from_secs(1);
        assert_eq!(
            Activity::timers(true, Duration::from_millis(250), stall),
            (QUIET_PING_EVERY, QUIET_SILENCE)
        );
        assert_eq!(
            Activity::timers(false, Duration::from_millis(250), stall),
            (Duration::from_millis(250), stall)
        );
    }
}
