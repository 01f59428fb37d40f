//! When a helper sends its pipe report (`PIPE_FEEDBACK`, MPBond §4.3.2): every feedback
//! interval while it relays data, and otherwise only when the report says something new.
//!
//! The paper's helper reports every interval, and so did mpbond's, for as long as the
//! session lived. Between downloads that is 50 reports a second saying the same thing (an
//! empty buffer, the last rate the pipe drained at), and with flexible feedback (§5) the
//! primary forwards each of them to the proxy over its PS-Path: its LTE radio never left its
//! active state, 1.3 W for as long as the session was open, and the pipe's WiFi at both ends
//! never slept either (docs/evaluation.md, item 32). Nothing reads an unchanged report: the
//! proxy keeps the newest one, and liveness has its own pings (`daemon::quiet`). So an idle
//! helper reports a change of its buffer or RTT at once and otherwise only every [`REFRESH`].
//!
//! Beside a report it sends, a helper sends its pipe's minimum RTT (`PIPE_MIN_RTT`) when the
//! far end does not have it yet: for a new subflow, when the kernel's minimum moved, and
//! every [`REFRESH`] ([`MinRttGate`]).
//!
//! Sans-IO: the helper daemon and the simulator ask the same [`FeedbackGate`] and
//! [`MinRttGate`].

use std::time::Duration;

use mpbond_proto::{PipeFeedback, PipeMinRtt};

use crate::Time;

/// An idle helper repeats an unchanged report this often: over an LTE tail (11.6 s, Huang et
/// al.), so that a radio the report crosses can sleep between repeats; the order of a NAT
/// keepalive, like the quiet links' pings.
pub const REFRESH: Duration = Duration::from_secs(25);

/// A rate or round trip that moved by more than this fraction is news.
const CHANGE: f64 = 0.125;

/// A round trip that moved by less than this is not news, whatever the fraction (a pipe's
/// few milliseconds jitter by more than an eighth).
const RTT_SLACK_US: u32 = 2_000;

/// Buffer levels within this many bytes (a packet) are the same news: the helper's own
/// reports and pings sit in its pipe socket until the primary acknowledges them, and counted
/// in B_p they made every other report differ from the last (51 bytes, then 0, then 51).
pub const BUFFER_SLACK: u64 = 1500;

/// Decides, report by report, whether a helper sends it. One per direction (the downlink
/// pipe's report to the proxy, the HS-Path's to the primary).
#[derive(Debug, Default, Clone)]
pub struct FeedbackGate {
    last: Option<(PipeFeedback, Time)>,
}

impl FeedbackGate {
    /// A gate that has sent nothing yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether to send `report` now. `busy`: the helper relays data in this direction (its
    /// buffer or its outgoing socket holds bytes, or data arrived lately), when the
    /// scheduler at the other end needs every report. Records the report as sent when the
    /// answer is yes.
    pub fn should_send(&mut self, now: Time, report: &PipeFeedback, busy: bool) -> bool {
        let send = match &self.last {
            None => true,
            Some((last, at)) => {
                busy || differs(last, report, busy) || now.saturating_since(*at) >= REFRESH
            }
        };
        if send {
            self.last = Some((*report, now));
        }
        send
    }
}

/// A minimum RTT that moved by less than this is not news (the kernel's minimum moves only
/// when a smaller sample comes or its window of minutes passes).
const MIN_RTT_SLACK_US: u32 = 250;

/// Decides whether a `PIPE_MIN_RTT` goes out beside a report that does. One per direction.
///
/// The minimum changes seldom, so it rides with the reports only when it is news: the far
/// end keeps the newest per subflow ([`crate::PipeState::on_min_rtt`]).
#[derive(Debug, Default, Clone)]
pub struct MinRttGate {
    last: Option<(PipeMinRtt, Time)>,
}

impl MinRttGate {
    /// A gate that has sent nothing yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether to send `report` now, with a pipe report that goes out: the first one, one
    /// for another subflow (the helper joined again: the far end's state for it is new), a
    /// minimum that moved by more than [`CHANGE`] and [`MIN_RTT_SLACK_US`], and otherwise
    /// every [`REFRESH`]. A zero minimum (the kernel has none yet) is never sent. Records
    /// the report as sent when the answer is yes.
    pub fn should_send(&mut self, now: Time, report: &PipeMinRtt) -> bool {
        if report.min_rtt_us == 0 {
            return false;
        }
        let send = match &self.last {
            None => true,
            Some((last, at)) => {
                last.subflow != report.subflow
                    || rtt_moved(last.min_rtt_us, report.min_rtt_us, MIN_RTT_SLACK_US)
                    || now.saturating_since(*at) >= REFRESH
            }
        };
        if send {
            self.last = Some((*report, now));
        }
        send
    }
}

/// Whether `new` tells the far end something `old` did not: another subflow, a buffer level
/// more than [`BUFFER_SLACK`] away, a round trip that moved by more than [`CHANGE`], or,
/// while the helper relays data, a rate that did. An idle pipe's rate is no news: nothing
/// measures it but the kernel's samples of the reports themselves, and on a fast pipe those
/// flapped between 1.5 MB/s (a report still unacknowledged) and 5.9 GB/s, each report making
/// the next one news (a loopback test of the daemons).
fn differs(old: &PipeFeedback, new: &PipeFeedback, busy: bool) -> bool {
    old.subflow != new.subflow
        || old.buffered.abs_diff(new.buffered) > BUFFER_SLACK
        || (busy && moved(old.throughput_bps as f64, new.throughput_bps as f64))
        || rtt_moved(old.rtt_us, new.rtt_us, RTT_SLACK_US)
}

/// Whether `b` differs from `a` by more than [`CHANGE`] of the larger.
fn moved(a: f64, b: f64) -> bool {
    (a - b).abs() > CHANGE * a.abs().max(b.abs())
}

/// Whether a round trip moved: by more than `slack_us` and by more than [`CHANGE`].
fn rtt_moved(old_us: u32, new_us: u32, slack_us: u32) -> bool {
    old_us.abs_diff(new_us) > slack_us && moved(f64::from(old_us), f64::from(new_us))
}

#[cfg(test)]
mod tests {
    use super::*;
    use mpbond_proto::SubflowId;

    fn report(rate_mbps: u64, rtt_ms: u32, buffered: u64) -> PipeFeedback {
        PipeFeedback {
            subflow: SubflowId(1),
            throughput_bps: rate_mbps * 1_000_000,
            rtt_us: rtt_ms * 1000,
            buffered,
            timestamp_us: 0,
            uplink: false,
        }
    }

    fn at(ms: u64) -> Time {
        Time::from_millis(ms)
    }

    /// While the helper relays data every report goes; idle, an unchanged report goes only
    /// every REFRESH, and the first one always.
    #[test]
    fn an_idle_helper_repeats_itself_only_every_refresh() {
        let mut g = FeedbackGate::new();
        let idle = report(5, 4, 0);
        assert!(g.should_send(at(0), &idle, false));
        let sent = (1..=1000)
            .filter(|i| g.should_send(at(20 * i), &idle, false))
            .count();
        assert_eq!(sent, 0, "20 s of unchanged reports");
        assert!(g.should_send(at(25_000), &idle, false));
        assert!(!g.should_send(at(25_020), &idle, false));
        // Busy: every report, changed or not.
        assert!((1..=10).all(|i| g.should_send(at(25_020 + 20 * i), &idle, true)));
    }

    /// A new buffer level, another subflow or an RTT that moved by more than an eighth is
    /// news at once; jitter is not, nor an idle pipe's rate.
    #[test]
    fn a_change_is_sent_at_once_and_jitter_is_not() {
        let mut g = FeedbackGate::new();
        assert!(g.should_send(at(0), &report(5, 4, 0), false));
        assert!(
            !g.should_send(at(20), &report(5, 5, 0), false),
            "1 ms of RTT jitter"
        );
        let mut near = report(5, 4, 0);
        near.throughput_bps = 5_400_000;
        assert!(!g.should_send(at(40), &near, false), "8% of rate");
        assert!(
            !g.should_send(at(50), &report(5, 4, 51), false),
            "a report in the socket"
        );
        assert!(
            g.should_send(at(60), &report(5, 4, 16_384), false),
            "bytes buffered"
        );
        assert!(
            g.should_send(at(80), &report(5, 4, 0), false),
            "the buffer drained"
        );
        assert!(
            !g.should_send(at(100), &report(5000, 4, 0), false),
            "an idle rate"
        );
        assert!(
            g.should_send(at(110), &report(7, 4, 0), true),
            "busy: every report"
        );
        assert!(g.should_send(at(120), &report(7, 40, 0), false), "RTT x10");
        let mut other = report(7, 40, 0);
        other.subflow = SubflowId(2);
        assert!(g.should_send(at(140), &other, false));
        assert!(!g.should_send(at(160), &other, false));
    }

    fn min_rtt(subflow: u8, us: u32) -> PipeMinRtt {
        PipeMinRtt {
            subflow: SubflowId(subflow),
            min_rtt_us: us,
            timestamp_us: 0,
            uplink: false,
        }
    }

    /// The minimum goes with the first report, for a new subflow, when it moved by more
    /// than an eighth and 250 µs, and every REFRESH; an unknown (zero) minimum never.
    #[test]
    fn the_minimum_rtt_is_sent_when_news_and_every_refresh() {
        let mut g = MinRttGate::new();
        assert!(!g.should_send(at(0), &min_rtt(1, 0)), "no minimum yet");
        assert!(g.should_send(at(20), &min_rtt(1, 4_000)));
        assert!(!g.should_send(at(40), &min_rtt(1, 4_000)));
        assert!(!g.should_send(at(60), &min_rtt(1, 3_800)), "5%");
        assert!(g.should_send(at(80), &min_rtt(1, 3_000)), "25%, 1 ms");
        assert!(!g.should_send(at(100), &min_rtt(1, 3_100)));
        assert!(
            g.should_send(at(120), &min_rtt(2, 3_000)),
            "another subflow"
        );
        assert!(!g.should_send(at(24_000), &min_rtt(2, 3_000)));
        assert!(g.should_send(at(25_120), &min_rtt(2, 3_000)), "refresh");
        // Short pipes: a fraction alone is not news.
        let mut g = MinRttGate::new();
        assert!(g.should_send(at(0), &min_rtt(1, 400)));
        assert!(!g.should_send(at(20), &min_rtt(1, 200)), "200 µs");
    }
}
