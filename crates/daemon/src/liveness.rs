//! Whether a link still carries packets: live, stale, or dead.
//!
//! A link is *stalled* when, for the stall timeout, nothing arrived from the peer while it
//! was busy ([`crate::quiet::Check::silent_too_long`]), or data sent stayed unacknowledged
//! with no ACK at all. MPBond tears such a subflow down and reinjects its data (§4.1, "Error
//! Handling"). On a cellular path that throws away a connection that would have worked again
//! a moment later: the LTE traces of experiment 11d have downlink outages of a second or two
//! and uplink outages of up to 5.6 s, and after each one a torn-down HS-Path had to be asked
//! to join again, connect, handshake and slow-start from scratch (2.3 s without the Verizon
//! helper in a two-device run whose downlink had stopped for 1.3 s). So a WAN link goes
//! *stale* first, as Linux MPTCP's subflows do (`net.mptcp.stale_loss_cnt`): its data is
//! reinjected at once and it gets nothing new, but its connection stays, and the moment the
//! path shows life again (bytes from the peer after a silence, an ACK after unacknowledged
//! data) it is scheduled on again, with its TCP state. It is *dead*, and torn down as
//! before, only when it stays stale for the dead timeout. Pipes, whose failures are a
//! device walking away rather than a cell's hiccup, die at the stall timeout as before.
//!
//! The state machine here is free of sockets and clocks: the session and the helper's relay
//! feed it a reading per liveness check.

use std::time::{Duration, Instant};

/// A stale link is back only once its TCP holds at most this much unacknowledged: what it
/// had queued when it stalled has crossed (a ping or two may be on the way). Bytes from a
/// peer in an uplink outage come in bursts at the uplink's rare delivery opportunities, and
/// a link taken back at the first of them stalled again within seconds, each time sending
/// its new data again elsewhere (11d, three devices: the AT&T HS-Path four times in a run
/// with logs).
pub const BACK_UNACKED: u64 = 4096;

/// Why a link stalled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Why {
    /// Nothing arrived from the peer for the stall timeout while the link was busy.
    Silent,
    /// Data sent stayed unacknowledged with no ACK at all for the stall timeout.
    NoAck,
}

impl Why {
    /// The reason, for logs and `link down` lines.
    pub fn text(self) -> &'static str {
        match self {
            Why::Silent => "stalled: nothing received within the stall timeout",
            Why::NoAck => "stalled: no ACK within the stall timeout",
        }
    }
}

/// One liveness check's reading of a link.
#[derive(Debug, Clone, Copy)]
pub struct Reading {
    /// Nothing was heard from the peer for longer than the link's activity allows
    /// ([`crate::quiet::Check::silent_too_long`]; false where our own backpressure silences
    /// the peer).
    pub silent_too_long: bool,
    /// Bytes sent and not acknowledged (TCP_INFO).
    pub unacked: u64,
    /// Time since the last ACK arrived (TCP_INFO's `last_ack_recv`).
    pub since_ack: Duration,
    /// Bytes TCP has acknowledged so far.
    pub bytes_acked: u64,
    /// When a byte from the peer last arrived ([`crate::sys::mono_ms`]).
    pub last_rx_ms: u64,
}

impl Reading {
    /// A reading from a fresh TCP_INFO, the activity check's verdict on the peer's silence
    /// and when a byte from the peer last arrived.
    pub fn of(info: &crate::sys::TcpInfo, silent_too_long: bool, last_rx_ms: u64) -> Self {
        Reading {
            silent_too_long,
            unacked: info.unacked_bytes,
            since_ack: Duration::from_millis(u64::from(info.last_ack_recv_ms)),
            bytes_acked: info.bytes_acked,
            last_rx_ms,
        }
    }
}

/// What a check found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Carrying packets.
    Live,
    /// Stalled just now; the connection is kept (take its data back, give it nothing new).
    Stale(Why),
    /// Still stale.
    StillStale,
    /// Stale no more: the path shows life again after this long.
    Back(Duration),
    /// Stalled for good: tear it down.
    Dead(Why),
}

#[derive(Debug, Clone, Copy)]
struct Stale {
    since: Instant,
    why: Why,
    /// `last_rx_ms` and `bytes_acked` when it went stale: either moving is the sign of life
    /// that matches the stall.
    last_rx_ms: u64,
    bytes_acked: u64,
}

/// A link's liveness across checks.
#[derive(Debug, Clone, Default)]
pub struct Liveness {
    unacked_since: Option<Instant>,
    stale: Option<Stale>,
}

impl Liveness {
    /// True while the link is stale: it must get no new data.
    pub fn is_stale(&self) -> bool {
        self.stale.is_some()
    }

    /// One check at `now`. `dead_after`: how long a link may stay stale before it is dead;
    /// `None` for a link that dies at the stall timeout itself (a pipe). A stale link is back
    /// only on the sign of life its stall lacked: bytes from a silent peer (an ACK alone
    /// could come from the kernel of a hung peer), an ACK for unacknowledged data.
    pub fn update(
        &mut self,
        r: &Reading,
        now: Instant,
        stall: Duration,
        dead_after: Option<Duration>,
    ) -> Verdict {
        if let Some(s) = self.stale {
            let life = match s.why {
                Why::Silent => r.last_rx_ms > s.last_rx_ms,
                Why::NoAck => r.bytes_acked > s.bytes_acked,
            };
            let back = life && r.unacked <= BACK_UNACKED;
            let stale_for = now.saturating_duration_since(s.since);
            if back {
                self.stale = None;
                // The no-ACK rule counts afresh from here.
                self.unacked_since = None;
                return Verdict::Back(stale_for);
            }
            if dead_after.is_none_or(|d| stale_for >= d) {
                return Verdict::Dead(s.why);
            }
            return Verdict::StillStale;
        }
        let why = if r.silent_too_long {
            Some(Why::Silent)
        } else if r.unacked > 0 {
            let since = *self.unacked_since.get_or_insert(now);
            (now.saturating_duration_since(since) >= stall && r.since_ack >= stall)
                .then_some(Why::NoAck)
        } else {
            self.unacked_since = None;
            None
        };
        match (why, dead_after) {
            (None, _) => Verdict::Live,
            (Some(why), None) => Verdict::Dead(why),
            (Some(why), Some(_)) => {
                self.stale = Some(Stale {
                    since: now,
                    why,
                    last_rx_ms: r.last_rx_ms,
                    bytes_acked: r.bytes_acked,
                });
                Verdict::Stale(why)
            }
        }
    }
}

/// Notices when this daemon itself was away between two liveness checks (stopped,
/// descheduled, a laptop asleep): its peers' silence over that time says nothing about them,
/// so the caller gives every link a fresh stall timeout to be heard from. Without it a helper
/// woken from a pause found its pipe silent for the pause's length and tore it down.
#[derive(Debug, Clone, Default)]
pub struct AwayCheck {
    last: Option<Instant>,
}

impl AwayCheck {
    /// True when the previous check was at least `stall` before `now`.
    pub fn away(&mut self, now: Instant, stall: Duration) -> bool {
        let away = self
            .last
            .is_some_and(|l| now.saturating_duration_since(l) >= stall);
        self.last = Some(now);
        away
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn reading(silent: bool, unacked: u64, since_ack: u64, acked: u64, rx: u64) -> Reading {
        Reading {
            silent_too_long: silent,
            unacked,
            since_ack: ms(since_ack),
            bytes_acked: acked,
            last_rx_ms: rx,
        }
    }

    const STALL: Duration = Duration::from_secs(1);
    const DEAD: Option<Duration> = Some(Duration::from_secs(10));

    #[test]
    fn unacknowledged_data_without_acks_makes_a_link_stale_then_an_ack_brings_it_back() {
        let t0 = Instant::now();
        let mut l = Liveness::default();
        // Data waits; ACKs stop. Not stale before the stall timeout ...
        assert_eq!(
            l.update(&reading(false, 5000, 0, 100, 0), t0, STALL, DEAD),
            Verdict::Live
        );
        let r = reading(false, 5000, 900, 100, 0);
        assert_eq!(l.update(&r, t0 + ms(900), STALL, DEAD), Verdict::Live);
        // ... stale at it, and the connection kept.
        let r = reading(false, 5000, 1000, 100, 0);
        assert_eq!(
            l.update(&r, t0 + ms(1000), STALL, DEAD),
            Verdict::Stale(Why::NoAck)
        );
        assert!(l.is_stale());
        // Bytes from the peer do not end a no-ACK stall (a downlink still delivering while
        // the uplink is out); an ACK for our data does.
        let r = reading(false, 5000, 1500, 100, 1400);
        assert_eq!(
            l.update(&r, t0 + ms(1500), STALL, DEAD),
            Verdict::StillStale
        );
        // An ACK while most of what it had queued is still unacknowledged is not enough ...
        let r = reading(false, 50_000, 10, 2100, 1400);
        assert_eq!(
            l.update(&r, t0 + ms(2000), STALL, DEAD),
            Verdict::StillStale
        );
        // ... once the queue has crossed, it is back.
        let r = reading(false, 3000, 10, 2100, 1400);
        assert_eq!(
            l.update(&r, t0 + ms(2300), STALL, DEAD),
            Verdict::Back(ms(1300))
        );
        assert!(!l.is_stale());
        // The no-ACK timer starts again from the recovery.
        let r = reading(false, 3000, 1000, 2100, 1400);
        assert_eq!(l.update(&r, t0 + ms(2400), STALL, DEAD), Verdict::Live);
        assert_eq!(l.update(&r, t0 + ms(3300), STALL, DEAD), Verdict::Live);
        assert_eq!(
            l.update(&r, t0 + ms(3400), STALL, DEAD),
            Verdict::Stale(Why::NoAck)
        );
    }

    #[test]
    fn a_gap_between_checks_as_long_as_the_stall_timeout_is_an_absence() {
        let t0 = Instant::now();
        let mut a = AwayCheck::default();
        assert!(!a.away(t0, STALL));
        assert!(!a.away(t0 + ms(100), STALL));
        assert!(!a.away(t0 + ms(1099), STALL));
        assert!(a.away(t0 + ms(2099), STALL));
        assert!(!a.away(t0 + ms(2199), STALL));
    }

    #[test]
    fn a_silent_peer_is_back_only_when_it_sends_something() {
        let t0 = Instant::now();
        let mut l = Liveness::default();
        let r = reading(true, 0, 5000, 100, 500);
        assert_eq!(l.update(&r, t0, STALL, DEAD), Verdict::Stale(Why::Silent));
        // A hung peer's kernel still acknowledges: that is no sign of life.
        let r = reading(true, 0, 0, 900, 500);
        assert_eq!(l.update(&r, t0 + ms(500), STALL, DEAD), Verdict::StillStale);
        let r = reading(false, 0, 0, 900, 1700);
        assert_eq!(
            l.update(&r, t0 + ms(700), STALL, DEAD),
            Verdict::Back(ms(700))
        );
    }

    #[test]
    fn a_link_stale_for_the_dead_timeout_is_dead_and_a_pipe_dies_at_the_stall() {
        let t0 = Instant::now();
        let mut l = Liveness::default();
        let r = reading(true, 0, 0, 0, 0);
        assert_eq!(l.update(&r, t0, STALL, DEAD), Verdict::Stale(Why::Silent));
        assert_eq!(
            l.update(&r, t0 + ms(9_999), STALL, DEAD),
            Verdict::StillStale
        );
        assert_eq!(
            l.update(&r, t0 + ms(10_000), STALL, DEAD),
            Verdict::Dead(Why::Silent)
        );
        // Without a dead timeout the stall itself kills.
        let mut pipe = Liveness::default();
        let r = reading(false, 10, 0, 0, 0);
        assert_eq!(pipe.update(&r, t0, STALL, None), Verdict::Live);
        let r = reading(false, 10, 1000, 0, 0);
        assert_eq!(
            pipe.update(&r, t0 + ms(1000), STALL, None),
            Verdict::Dead(Why::NoAck)
        );
        // An idle link is never stalled, however long it was quiet.
        let mut idle = Liveness::default();
        let r = reading(false, 0, 60_000, 0, 0);
        assert_eq!(idle.update(&r, t0, STALL, DEAD), Verdict::Live);
        assert_eq!(idle.update(&r, t0 + ms(60_000), STALL, DEAD), Verdict::Live);
    }
}
