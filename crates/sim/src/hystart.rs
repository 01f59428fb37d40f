//! HyStart, the slow-start exit of Linux's CUBIC (`tcp_cubic.c`, `hystart=1` and
//! `hystart_detect=3`, its defaults), for the simulator's TCP model.
//!
//! Why: the lab's links run the kernel's CUBIC, whose slow start usually ends on a rise of
//! the round trip time or on a long train of closely spaced ACKs, before the bottleneck's
//! queue overflows (10a's kernel counters: `TCPHystartDelayDetect`, the pipe's exit "by the
//! ACK-train test at 50 packets", docs/evaluation.md). A model whose slow start ends only on
//! the first loss overshoots deep queues by far more than the lab does (docs/sim.md, Limits).
//!
//! The rule, as the kernel applies it (Ha and Rhee, "Taming the elephants: new TCP slow
//! start", Computer Networks 2011, with Linux's constants):
//! - rounds: a round starts when the first packet sent after the previous round's start is
//!   acknowledged;
//! - only while the window is at least 16 segments (`hystart_low_window`);
//! - **ACK train**: ACKs no more than 2 ms apart (`hystart_ack_delta_us`) from the round's
//!   start on, for longer than the minimum RTT (half of it if the socket is not paced, since
//!   pacing spreads a round's packets over up to half an RTT): the window already fills
//!   the path;
//! - **delay**: once 8 RTT samples of the round are in (`HYSTART_MIN_SAMPLES`), the round's
//!   smallest exceeds the connection's minimum RTT by an eighth of it, clamped to 4-16 ms
//!   (`HYSTART_DELAY_THRESH`): a queue has started to build.
//!
//! Either sets the slow-start threshold to the window, once; a retransmission timeout, which
//! starts slow start again, re-arms it.

use std::time::Duration;

use mpbond_core::Time;

/// Windows below this many segments never leave slow start by HyStart.
const LOW_WINDOW: f64 = 16.0;
/// The longest gap between two ACKs of one train.
const ACK_DELTA: Duration = Duration::from_millis(2);
/// RTT samples a round takes before the delay test applies.
const MIN_SAMPLES: u32 = 8;
/// Bounds of the delay test's threshold, seconds.
const DELAY_MIN: f64 = 0.004;
const DELAY_MAX: f64 = 0.016;

/// Why HyStart ended a slow start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    /// The round's ACKs arrived as one train for longer than the threshold.
    AckTrain,
    /// The round's smallest RTT rose above the connection's minimum by the threshold.
    Delay,
}

/// What HyStart reads from one ACK.
#[derive(Clone, Copy, Debug)]
pub struct Ack {
    /// When it arrived.
    pub now: Time,
    /// The packet it acknowledges (the model numbers packets in send order, as the
    /// kernel's sequence numbers).
    pub id: u64,
    /// The id the next packet sent will take: the end of a round that starts now.
    pub next_id: u64,
    /// Its RTT sample, seconds (none for a retransmission).
    pub rtt: Option<f64>,
}

/// HyStart's per-connection state.
#[derive(Clone, Debug)]
pub struct HyStart {
    /// Packet id that ends the current round once acknowledged (the model numbers packets in
    /// send order, as the kernel's sequence numbers).
    round_end: u64,
    round_start: Time,
    last_ack: Time,
    round_min_rtt: f64,
    samples: u32,
    found: bool,
}

impl Default for HyStart {
    fn default() -> Self {
        HyStart {
            round_end: 0,
            round_start: Time::ZERO,
            last_ack: Time::ZERO,
            round_min_rtt: f64::INFINITY,
            samples: 0,
            found: false,
        }
    }
}

impl HyStart {
    /// An ACK arrived during slow start. `min_rtt` is the connection's smallest RTT so
    /// far, `window_segments` the congestion window in segments and `paced` whether the
    /// socket paces. Returns the exit, if this ACK ends slow start.
    pub fn on_ack(
        &mut self,
        ack: Ack,
        min_rtt: f64,
        window_segments: f64,
        paced: bool,
    ) -> Option<Exit> {
        let Ack {
            now,
            id,
            next_id,
            rtt,
        } = ack;
        if self.found {
            return None;
        }
        if id >= self.round_end {
            self.round_end = next_id;
            self.round_start = now;
            self.last_ack = now;
            self.round_min_rtt = f64::INFINITY;
            self.samples = 0;
        }
        if window_segments < LOW_WINDOW || !min_rtt.is_finite() {
            return None;
        }
        if now.saturating_since(self.last_ack) <= ACK_DELTA {
            self.last_ack = now;
            let threshold = if paced { min_rtt } else { min_rtt / 2.0 };
            if now.saturating_since(self.round_start).as_secs_f64() > threshold {
                self.found = true;
                return Some(Exit::AckTrain);
            }
        }
        if let Some(r) = rtt {
            self.round_min_rtt = self.round_min_rtt.min(r);
            if self.samples < MIN_SAMPLES {
                self.samples += 1;
            } else if self.round_min_rtt > min_rtt + (min_rtt / 8.0).clamp(DELAY_MIN, DELAY_MAX) {
                self.found = true;
                return Some(Exit::Delay);
            }
        }
        None
    }

    /// A retransmission timeout restarts slow start: HyStart may end it again.
    pub fn rearm(&mut self) {
        *self = HyStart::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(t: u64) -> Time {
        Time::ZERO + Duration::from_millis(t)
    }

    fn ack(now: Time, id: u64, next_id: u64, rtt: Option<f64>) -> Ack {
        Ack {
            now,
            id,
            next_id,
            rtt,
        }
    }

    #[test]
    fn a_rising_round_trip_ends_slow_start_after_eight_samples() {
        let mut h = HyStart::default();
        // Round 1 (ids 0..20, min RTT 50 ms): flat RTTs, ACKs 5 ms apart (no train).
        for i in 0..20 {
            assert_eq!(
                h.on_ack(ack(ms(50 + 5 * i), i, 40, Some(0.050)), 0.050, 20.0, true),
                None
            );
        }
        // Round 2: RTTs 58 ms, above 50 + max(50/8, 4) = 56.25 ms; the ninth sample decides.
        let mut exit = None;
        for i in 0..9 {
            exit = h.on_ack(
                ack(ms(200 + 5 * i), 40 + i, 80, Some(0.058)),
                0.050,
                40.0,
                true,
            );
            if i < 8 {
                assert_eq!(exit, None, "sample {i} is before the test applies");
            }
        }
        assert_eq!(exit, Some(Exit::Delay));
        // Once found, no second exit.
        assert_eq!(
            h.on_ack(ack(ms(300), 90, 120, Some(0.2)), 0.050, 80.0, true),
            None
        );
    }

    #[test]
    fn a_long_ack_train_ends_slow_start_and_a_short_window_never_does() {
        // ACKs 1 ms apart from the round's start: past the 50 ms minimum RTT when paced.
        let mut h = HyStart::default();
        let mut exit = None;
        let mut at = 0;
        for i in 0..60 {
            exit = h.on_ack(ack(ms(100 + i), i, 100, Some(0.050)), 0.050, 32.0, true);
            if exit.is_some() {
                at = i;
                break;
            }
        }
        assert_eq!(exit, Some(Exit::AckTrain));
        assert_eq!(at, 51, "the train must outlast the minimum RTT");
        // Unpaced, half the minimum RTT is enough.
        let mut h = HyStart::default();
        let first = (0..60).find(|&i| {
            h.on_ack(ack(ms(100 + i), i, 100, Some(0.050)), 0.050, 32.0, false)
                .is_some()
        });
        assert_eq!(first, Some(26));
        // Below 16 segments neither test applies, however the ACKs come.
        let mut h = HyStart::default();
        for i in 0..60 {
            assert_eq!(
                h.on_ack(ack(ms(100 + i), i, 100, Some(0.2)), 0.050, 15.0, true),
                None
            );
        }
    }

    #[test]
    fn a_gap_breaks_the_train_for_the_rest_of_the_round() {
        let mut h = HyStart::default();
        assert_eq!(
            h.on_ack(ack(ms(100), 0, 100, None), 0.050, 32.0, true),
            None
        );
        // 3 ms later: the train is broken; later ACKs 1 ms apart do not restart it.
        for i in 0..80 {
            assert_eq!(
                h.on_ack(ack(ms(103 + i), 1 + i, 100, None), 0.050, 32.0, true),
                None
            );
        }
        // A new round starts a new train.
        let exit =
            (0..60).find_map(|i| h.on_ack(ack(ms(300 + i), 100 + i, 200, None), 0.050, 32.0, true));
        assert_eq!(exit, Some(Exit::AckTrain));
    }
}
