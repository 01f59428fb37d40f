//! Energy-aware liveness for links over radios.
//!
//! Every link is pinged when it has been silent for a while, and a link silent for the stall
//! timeout is declared dead: that catches a hung peer within a second while data flows. On a
//! cellular link (a PS-Path or an HS-Path) the same pings, every 250 ms for as long as the
//! session lives, keep the radio out of its idle state for good: an LTE radio stays in its
//! 1 W tail for 11.6 s after every packet (Huang et al., MobiSys 2012), so a helper whose
//! HS-Path finished early would pay for it until the download ends, which is the energy that
//! the helper-side split exists to save (MPBond §4.2, §6.2) and that flexible feedback avoids
//! waking the radio for (§5). A pipe is a radio link too: WiFi's tail is 0.24 s, so pings
//! every 250 ms kept it promoted, active or in its tail at both ends for as long as an idle
//! session lived (docs/evaluation.md, item 33). So every link is in one of three states:
//! - **busy**: data moved since the last check (every 100 ms), in order or out of it (but not
//!   the peer's feedback reports, a few hundred bytes in order), more than a packet waits to
//!   be sent or acknowledged, or this end holds the peer back (its buffer is full); pinged
//!   when silent, dead after the stall timeout of silence;
//! - **cooling**: no data since the last check: not pinged, so the last data packet is the
//!   radio's last activity. A ping here would come 250 ms after the data and restart the
//!   tail (`mpbond lab run --packets` showed it on a helper's HS-Path);
//! - **quiet**: no data for [`QUIET_AFTER`]: pinged every [`QUIET_PING_EVERY`], dead only after
//!   [`QUIET_SILENCE`].
//!
//! Both ends see the same bytes move, so they agree within a round trip. When data moves
//! again, silence counts from that check on (`Activity::busy_for`): the peer had stopped
//! pinging too, and an upload after a download once tripped the stall rule on that old
//! silence. A cooling or quiet link is never trusted with data blindly: data waiting for it
//! makes it busy, and data sent on it that goes unacknowledged still trips the stall rule.
//!
//! So only the end that has data waiting watches a link closely. The receiving end of a
//! stalled link sees an idle one: a primary whose downlink pipe hangs behind a stuck relay, or
//! whose helper hangs, sends nothing on it and hears nothing, as between two downloads. The
//! sender sees it instead (the helper, whose relayed data waits for the pipe, or the proxy,
//! whose data waits on the HS-Path), and the proxy passes the helper's `SUBFLOW_CLOSE`, or
//! its own, to the primary over another path (`Session::remove_subflow`).

use std::time::{Duration, Instant};

use crate::sys::TcpInfo;

/// A link with no data for this long is quiet.
pub const QUIET_AFTER: Duration = Duration::from_millis(300);
/// Ping period of a quiet link (a NAT keepalive's order, well over an LTE tail).
pub const QUIET_PING_EVERY: Duration = Duration::from_secs(25);
/// Silence after which a cooling or quiet link is dead.
pub const QUIET_SILENCE: Duration = Duration::from_secs(75);
/// Bytes that must move (acknowledged or received) between two checks for a link to count
/// as carrying data: more than pings, pongs and feedback frames.
const BUSY_BYTES: u64 = 1500;
/// Data segments that must arrive between two checks, while no byte is delivered in order,
/// for a link to count as carrying data: a receiver waiting for a retransmission behind a
/// deep queue takes in data out of order (`tcpi_bytes_received` stands still). A quiet peer
/// pings once in 25 s, a busy one once in 250 ms, so two in one check are data. Without this
/// a primary whose downlink pipe waited 1.2 s for a retransmission (experiment 06 without
/// reinjection) counted the pipe idle, stopped pinging, and the helper tore the pipe down for
/// silence, the false death of item 19 back (docs/evaluation.md, item 33). Segments that are
/// delivered in order count by their bytes alone: a helper's feedback reports, two small
/// segments every 20 ms for 200 ms after its HS-Path's data, are ten a check, and counting them made
/// the proxy ping that HS-Path after its data, waking the helper's LTE radio for the ping,
/// its pong and their ACKs (experiment 14, docs/evaluation.md, item 35).
const BUSY_SEGS: u32 = 2;

/// What a link is doing, for its liveness timers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// Data moved since the last check.
    Busy,
    /// No data since the last check, not yet quiet.
    Cooling,
    /// No data for [`QUIET_AFTER`].
    Quiet,
}

/// One liveness check's verdict for a link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Check {
    /// Ping the link when nothing was sent on it for this long (None: do not ping).
    pub ping_every: Option<Duration>,
    /// Nothing was heard from the peer for longer than the link's state allows.
    pub silent_too_long: bool,
}

/// Tracks whether a link carries data.
#[derive(Debug, Clone)]
pub struct Activity {
    /// Bytes moved at the last check; `None` before the first, whose bytes are the link's
    /// setup (handshake, join), not data.
    moved: Option<u64>,
    /// Data segments taken in at the last check (`tcpi_data_segs_in`).
    segs_in: Option<u32>,
    /// Bytes delivered in order at the last check (`tcpi_bytes_received`).
    received: Option<u64>,
    /// The last check that saw data move.
    busy_at: Instant,
    /// When the link last turned busy after a check without data.
    busy_from: Instant,
    was_busy: bool,
}

impl Default for Activity {
    fn default() -> Self {
        let now = Instant::now();
        Activity {
            moved: None,
            segs_in: None,
            received: None,
            busy_at: now,
            busy_from: now,
            was_busy: false,
        }
    }
}

impl Activity {
    /// The liveness check of a link (one call per check, with a fresh TCP_INFO): `silent` is
    /// how long ago the peer last sent anything; `queued`, the bytes this end holds for the
    /// link in user space (with the kernel's unsent and unacknowledged bytes from `info`,
    /// what waits for the link); `holding_back`, whether this end has stopped reading the link because
    /// its own buffer is full (a helper whose relay queue is full). A link with more than a
    /// packet waiting, or held back, is busy even if nothing moved: it is in use. Waiting
    /// data makes this end watch the peer (a stall behind a peer whose kernel still
    /// acknowledges, a hung relay, is caught only by the silence rule); holding back makes it
    /// ping, since the peer's data waits on it and the peer watches it.
    #[allow(clippy::too_many_arguments)]
    pub fn check(
        &mut self,
        info: &TcpInfo,
        queued: u64,
        holding_back: bool,
        now: Instant,
        silent: Duration,
        ping: Duration,
        stall: Duration,
    ) -> Check {
        let waiting = queued + info.notsent_bytes + info.unacked_bytes;
        let state = self.state(info, waiting > BUSY_BYTES || holding_back, now);
        let (ping_every, silence) = Self::timers(state, ping, stall);
        Check {
            ping_every,
            silent_too_long: silent.min(self.busy_for(now)) >= silence,
        }
    }

    /// Takes a fresh TCP_INFO (one call per check) and says what the link is doing. The
    /// first check only counts: what moved before it was the link's setup, and calling that
    /// data pinged a helper's idle HS-Path 250 ms later, waking its LTE radio in the middle
    /// of a download that left the helper out (`mpbond lab run --packets`, `mpbond-eco`).
    fn state(&mut self, info: &TcpInfo, in_use: bool, now: Instant) -> State {
        let moved = info.bytes_acked + info.bytes_received;
        let before = self.moved.replace(moved);
        let segs = self.segs_in.replace(info.data_segs_in);
        let received = self.received.replace(info.bytes_received);
        // Out of order: segments come in and nothing is delivered (in order, reports and
        // pings move `bytes_received`, and data moves it by more than BUSY_BYTES).
        let arriving = segs.is_some_and(|b| info.data_segs_in.wrapping_sub(b) >= BUSY_SEGS)
            && received.is_some_and(|r| r == info.bytes_received);
        let busy =
            before.is_some_and(|b| moved.saturating_sub(b) >= BUSY_BYTES) || arriving || in_use;
        if busy {
            self.busy_at = now;
            if !self.was_busy {
                self.busy_from = now;
            }
        }
        self.was_busy = busy;
        if busy {
            State::Busy
        } else if now.saturating_duration_since(self.busy_at) >= QUIET_AFTER {
            State::Quiet
        } else {
            State::Cooling
        }
    }

    /// How long the link has been busy without a break. Silence counts only from there: a
    /// peer that was cooling or quiet did not ping, and gets the stall timeout from the
    /// moment data moves again to be heard from (its pings resume within a ping period).
    fn busy_for(&self, now: Instant) -> Duration {
        now.saturating_duration_since(self.busy_from)
    }

    /// The ping period (None: no pings) and the silence limit of a link in `state`.
    fn timers(state: State, ping: Duration, stall: Duration) -> (Option<Duration>, Duration) {
        match state {
            State::Busy => (Some(ping), stall),
            State::Cooling => (None, QUIET_SILENCE.max(stall)),
            State::Quiet => (Some(QUIET_PING_EVERY), QUIET_SILENCE.max(stall)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PING: Duration = Duration::from_millis(250);
    const STALL: Duration = Duration::from_secs(1);

    /// The ping period of a check with nothing queued and the peer just heard from.
    fn pings(a: &mut Activity, info: &TcpInfo, holding_back: bool, t: Instant) -> Option<Duration> {
        a.check(info, 0, holding_back, t, Duration::ZERO, PING, STALL)
            .ping_every
    }

    #[test]
    fn a_link_cools_then_turns_quiet_after_its_data_and_busy_again_with_data() {
        let t0 = Instant::now();
        let mut a = Activity::default();
        let mut info = TcpInfo {
            bytes_acked: 10_000,
            ..TcpInfo::default()
        };
        // The setup's bytes before the first check are not data.
        assert_eq!(a.state(&info, false, t0), State::Cooling);
        info.bytes_acked += 10_000;
        assert_eq!(a.state(&info, false, t0), State::Busy);
        // Pings and feedback: a few hundred bytes per check, for 0.5 s.
        let mut seen = Vec::new();
        for i in 1..=5 {
            info.bytes_received += 200;
            seen.push(a.state(&info, false, t0 + Duration::from_millis(100 * i)));
        }
        use State::*;
        assert_eq!(seen, [Cooling, Cooling, Quiet, Quiet, Quiet]);
        info.bytes_received += 20_000;
        let t1 = t0 + Duration::from_millis(600);
        assert_eq!(a.state(&info, false, t1), Busy);
        // Busy again since this check: the silence before it does not count.
        assert_eq!(
            a.busy_for(t1 + Duration::from_millis(50)),
            Duration::from_millis(50)
        );
        info.bytes_received += 20_000;
        assert_eq!(a.state(&info, false, t1 + Duration::from_millis(100)), Busy);
        assert_eq!(
            a.busy_for(t1 + Duration::from_millis(100)),
            Duration::from_millis(100)
        );
        let (ping, stall) = (PING, STALL);
        assert_eq!(
            Activity::timers(Quiet, ping, stall),
            (Some(QUIET_PING_EVERY), QUIET_SILENCE)
        );
        assert_eq!(
            Activity::timers(Cooling, ping, stall),
            (None, QUIET_SILENCE)
        );
        assert_eq!(Activity::timers(Busy, ping, stall), (Some(ping), stall));
    }

    #[test]
    fn silence_from_before_a_link_turned_busy_does_not_kill_it() {
        let t0 = Instant::now();
        let (ping, stall) = (PING, STALL);
        let mut a = Activity::default();
        let mut info = TcpInfo::default();
        // Quiet for 5 s: no pings were due from either end, nothing heard for 5 s.
        let quiet = a.check(
            &info,
            0,
            false,
            t0 + Duration::from_secs(5),
            Duration::from_secs(5),
            ping,
            stall,
        );
        assert_eq!(quiet.ping_every, Some(QUIET_PING_EVERY));
        assert!(!quiet.silent_too_long);
        // Data moves again (an upload): busy, but the 5 s of silence before are not held
        // against it; 1.2 s later with still nothing heard, the stall rule applies.
        info.bytes_acked += 100_000;
        let t1 = t0 + Duration::from_millis(5100);
        let busy = a.check(
            &info,
            0,
            false,
            t1,
            Duration::from_millis(5100),
            ping,
            stall,
        );
        assert_eq!(
            busy,
            Check {
                ping_every: Some(ping),
                silent_too_long: false
            }
        );
        info.bytes_acked += 100_000;
        let t2 = t1 + Duration::from_millis(1200);
        assert!(
            a.check(
                &info,
                0,
                false,
                t2,
                Duration::from_millis(6300),
                ping,
                stall
            )
            .silent_too_long
        );
    }

    /// A link with data waiting is busy though nothing moves (a stalled pipe behind a relay
    /// that stopped reading): it keeps its pings and its one-second silence rule. A few bytes
    /// of pings and reports waiting do not count.
    #[test]
    fn a_link_with_data_waiting_stays_busy() {
        let t0 = Instant::now();
        let (ping, stall) = (PING, STALL);
        let mut a = Activity::default();
        let info = TcpInfo::default();
        let c = a.check(&info, 60, false, t0, Duration::ZERO, ping, stall);
        assert_eq!(c.ping_every, None, "a ping waiting is not data");
        let mut b = Activity::default();
        for i in 0..5 {
            let c = b.check(
                &info,
                64_000,
                false,
                t0 + Duration::from_millis(100 * i),
                Duration::ZERO,
                ping,
                stall,
            );
            assert_eq!(c.ping_every, Some(ping));
        }
        let stuck = b.check(
            &info,
            64_000,
            false,
            t0 + Duration::from_millis(1200),
            Duration::from_millis(1200),
            ping,
            stall,
        );
        assert!(
            stuck.silent_too_long,
            "nothing heard for 1.2 s with data waiting"
        );
    }

    /// A helper whose buffer is full stops reading its HS-Path: nothing moves and it has
    /// nothing to send, but the proxy's data waits on it and the proxy, whose link is busy,
    /// declares it dead after a second of silence. So a link held back keeps its pings.
    #[test]
    fn a_link_held_back_keeps_its_pings() {
        let t0 = Instant::now();
        let ping = PING;
        let info = TcpInfo::default();
        let mut idle = Activity::default();
        let mut held = Activity::default();
        for i in 0..10 {
            let t = t0 + Duration::from_millis(100 * i);
            assert_eq!(
                pings(&mut held, &info, true, t),
                Some(ping),
                "held back at {i}00 ms"
            );
            assert_ne!(
                pings(&mut idle, &info, false, t),
                Some(ping),
                "idle at {i}00 ms"
            );
        }
    }

    /// A receiver waiting for a retransmission takes in data segments out of order while its
    /// in-order byte count stands still: the link is busy. A peer's pings, one per check at
    /// most, are not data.
    #[test]
    fn data_arriving_out_of_order_keeps_a_link_busy() {
        let t0 = Instant::now();
        let ping = PING;
        let mut info = TcpInfo {
            bytes_received: 1_000_000,
            ..TcpInfo::default()
        };
        let mut a = Activity::default();
        let mut pinged = Activity::default();
        for i in 0..10 {
            let t = t0 + Duration::from_millis(100 * i);
            info.data_segs_in += 8;
            let c = pings(&mut a, &info, false, t);
            let one_ping = TcpInfo {
                data_segs_in: i as u32,
                ..TcpInfo::default()
            };
            let p = pings(&mut pinged, &one_ping, false, t);
            if i > 0 {
                assert_eq!(c, Some(ping), "segments arriving at {i}00 ms");
                assert_ne!(p, Some(ping), "one ping a check at {i}00 ms");
            }
        }
    }

    /// A helper reports for 200 ms after its HS-Path's data: two small segments every 20 ms,
    /// ten a check, delivered in order. They are not data, so the link cools and is not pinged
    /// (a ping there woke the helper's LTE radio after its data, experiment 14).
    #[test]
    fn reports_arriving_in_order_let_a_link_cool() {
        let t0 = Instant::now();
        let ping = PING;
        let mut info = TcpInfo {
            bytes_received: 2_000_000,
            data_segs_in: 1_400,
            ..TcpInfo::default()
        };
        let mut a = Activity::default();
        pings(&mut a, &info, false, t0);
        for i in 1..=3 {
            info.data_segs_in += 10;
            info.bytes_received += 10 * 51;
            let t = t0 + Duration::from_millis(100 * i);
            let c = pings(&mut a, &info, false, t);
            assert_eq!(c, None, "reports at {i}00 ms: cooling, not pinged");
        }
        // The same segments with nothing delivered in order are data waiting for a
        // retransmission: busy.
        info.data_segs_in += 5;
        let c = pings(&mut a, &info, false, t0 + Duration::from_millis(400));
        assert_eq!(c, Some(ping));
    }
}
