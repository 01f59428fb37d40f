//! How fast a socket drains a backlog its writer keeps ahead of it, from the bytes the peer
//! has, read on a timer: a helper's Th_p (MPBond §4.3.2). Free of sockets and clocks like the
//! other estimators, so the simulator can run it too.

use std::time::Duration;

use crate::Time;

/// Shortest span [`Goodput`] measures over: a dozen round trips of a WiFi pipe, so the
/// rate is not one burst of ACKs.
pub const MIN_SPAN: Duration = Duration::from_millis(50);

/// Span [`Goodput`] slides over once the backlog has lasted that long. At the helper's 20 ms
/// readings, windows of 50-60 ms hold some 25 packets of a 5 Mbit/s pipe, and one packet
/// more or less moved the rate by 4%: 579, 603 or 627 KB/s from a pipe draining 603 KB/s,
/// and the high readings gave the helper a segment too many in §6.8's setting
/// (docs/evaluation.md, item 20). A quarter of a second holds a hundred packets and still
/// follows a pipe whose rate changes (Fig. 7's step, §6.2) within a feedback or two.
pub const SPAN: Duration = Duration::from_millis(250);

/// Most readings a [`Goodput`] keeps: [`SPAN`] at the default 20 ms feedback
/// interval is 13; the cap bounds memory whatever the interval.
const MAX_READINGS: usize = 64;

/// Least data a socket must have to deliver for its ACKs to measure its rate: pings alone,
/// answered with delayed ACKs, read a long RTT on an idle pipe, and a window over them
/// measured 3-6 KB/s.
pub const BACKLOG_MIN: u64 = 16 * 1024;

/// What a writer knows of a socket it feeds, to tell whether the socket drains as fast as
/// it can ([`Backlog::is_backlogged`]): the input [`Goodput::observe`] needs.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Backlog {
    /// Bytes the socket still has to deliver: unacknowledged less SACKed, plus unsent.
    pub to_deliver: u64,
    /// Bytes waiting in the writer's own buffer for the socket.
    pub buffered: u64,
    /// Bytes written to the socket and not yet sent (tcpi_notsent_bytes).
    pub notsent: u64,
    /// Smoothed RTT of the socket, seconds (0 when unknown).
    pub srtt: f64,
    /// Smallest RTT seen, seconds (0 when unknown).
    pub min_rtt: f64,
}

impl Backlog {
    /// Whether data waits for the socket, so its ACKs come at its bottleneck's rate: in the
    /// writer's buffer, unsent in the socket, or queued at the bottleneck (a smoothed RTT
    /// over twice the minimum and 2 ms more), whatever the kernel's application-limited
    /// flag says. A helper holds most of its backlog in the pipe's kernel queue under
    /// TCP_NOTSENT_LOWAT, not in its buffer. Either way there must be at least
    /// [`BACKLOG_MIN`] to deliver.
    pub fn is_backlogged(&self) -> bool {
        let queued_at_bottleneck = self.min_rtt > 0.0 && self.srtt > 2.0 * self.min_rtt + 0.002;
        self.to_deliver >= BACKLOG_MIN
            && (self.buffered > 0 || self.notsent > 0 || queued_at_bottleneck)
    }
}

/// How fast a socket drains a backlog its writer keeps ahead of it: the bytes the peer
/// acknowledged or SACKed over the last [`SPAN`] (at least [`MIN_SPAN`]) during
/// which the writer always had more waiting.
///
/// Why not the kernel's delivery rate: a helper feeds its pipe from its own buffer under
/// TCP_NOTSENT_LOWAT, so the kernel flags nearly every sample application-limited, and its
/// per-ACK samples of a 4 ms pipe scatter around the rate (600-770 KB/s on a pipe that
/// drained 595 KB/s, traced with `RUST_LOG=mpbond::estimator=trace`). The newest sample
/// went into PIPE_FEEDBACK as Th_p, up to 860 KB/s on a 5 Mbit/s pipe, and PAMS gave the
/// helper 57 KB too much of a 1 MB download (docs/evaluation.md, item 20). While data waits
/// for the pipe (the caller decides: in the helper's buffer, in the socket, or queued at the
/// pipe's bottleneck), the rate the peer acknowledges it at is Th_p itself (MPBond §4.3.2's
/// B_p/Th_p is the time to drain that backlog).
#[derive(Debug, Clone)]
pub struct Goodput {
    /// Readings (time, bytes delivered) of the current backlog, oldest first; empty
    /// without a backlog.
    readings: std::collections::VecDeque<(Time, u64)>,
    rate: Option<f64>,
    /// The current backlog began with no rate to keep: it measures from [`MIN_SPAN`] on
    /// and refines with every reading until its span is `span`.
    first: bool,
    /// The span a lasting backlog slides over ([`SPAN`] unless set otherwise).
    span: Duration,
}

impl Default for Goodput {
    fn default() -> Self {
        Self::with_span(SPAN)
    }
}

impl Goodput {
    /// A goodput measured over `span` (at least [`MIN_SPAN`]) once a backlog lasts that
    /// long, instead of [`SPAN`]: shorter where it must follow a path within a round trip
    /// or two rather than average a pipe's ACKs ([`Goodput::current`]).
    pub fn with_span(span: Duration) -> Self {
        Self {
            readings: std::collections::VecDeque::new(),
            rate: None,
            first: false,
            span: span.max(MIN_SPAN),
        }
    }

    /// Takes one reading: `delivered`, the bytes the peer has (acknowledged plus SACKed,
    /// from TCP_INFO), and whether the writer had bytes waiting for the socket. A reading
    /// without a backlog ends the window.
    ///
    /// SACKed bytes count because the cumulative ACK stands still through loss recovery:
    /// a pipe that dropped a packet at its queue's tail kept delivering at its rate while
    /// its acknowledged bytes read 122 KB/s, and PAMS took the helper's last 25 KB back
    /// onto a PS-Path half as fast (02, item 20).
    ///
    /// A backlog that began with no rate yet measures from [`MIN_SPAN`] on, over all of
    /// its readings, up to [`SPAN`]; a later backlog keeps the last rate until it has
    /// lasted [`SPAN`], since a short backlog (the last few packets of a download)
    /// measures how the backlog ended more than how fast the pipe drains. (The first
    /// backlog's 50 ms rate was once kept for its first 250 ms too: in the simulator the
    /// ACKs of a pipe's first queue came 3% faster than the pipe, and that stood for the
    /// rest of a 512 KB download, docs/sim.md.)
    pub fn observe(&mut self, now: Time, delivered: u64, backlogged: bool) {
        if !backlogged {
            self.readings.clear();
            return;
        }
        if self.readings.is_empty() {
            self.first = self.rate.is_none();
        }
        self.readings.push_back((now, delivered));
        // Keep one reading at or before the span's start, so the span is never shorter
        // than SPAN once the backlog has lasted that long.
        while (self.readings.len() > 1 && now.saturating_since(self.readings[1].0) >= self.span)
            || self.readings.len() > MAX_READINGS
        {
            self.readings.pop_front();
        }
        if let Some(&(t0, a0)) = self.readings.front() {
            let dt = now.saturating_since(t0).as_secs_f64();
            let least = if self.first { MIN_SPAN } else { self.span };
            if dt >= least.as_secs_f64() {
                self.rate = Some(delivered.saturating_sub(a0) as f64 / dt);
            }
        }
    }

    /// The rate over the newest span, bytes per second.
    pub fn rate(&self) -> Option<f64> {
        self.rate
    }

    /// The rate over the current backlog alone, once it has lasted [`MIN_SPAN`]: unlike
    /// [`Goodput::rate`], never a rate kept from an earlier backlog, so it can bound what a
    /// path delivers now (`PathEstimator`'s drain floor).
    pub fn current(&self) -> Option<f64> {
        let (&(t0, a0), &(t1, a1)) = (self.readings.front()?, self.readings.back()?);
        let dt = t1.saturating_since(t0).as_secs_f64();
        (dt >= MIN_SPAN.as_secs_f64()).then(|| a1.saturating_sub(a0) as f64 / dt)
    }

    /// Whether a window is running (the writer has had a backlog since the last reading).
    pub fn backlogged(&self) -> bool {
        !self.readings.is_empty()
    }

    /// The drain rate to report, given the kernel's newest sample `kernel`: the measured
    /// goodput while the backlog lasts; without one, the larger of the two, since a
    /// socket with nothing waiting may since have got faster than it last drained (the
    /// next backlog corrects an overstatement within a span).
    pub fn report(&self, kernel: u64) -> u64 {
        match self.rate {
            Some(g) if self.backlogged() => g as u64,
            Some(g) => (g as u64).max(kernel),
            None => kernel,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The first 50 ms of backlog give delivered bytes over time; a reading without a
    /// backlog ends the window but keeps the last rate, which then only bounds the kernel's
    /// sample from below.
    #[test]
    fn goodput_is_what_a_backlog_drains_by() {
        let ms = |m: u64| Time(m * 1_000_000);
        let mut g = Goodput::default();
        assert_eq!(g.report(700_000), 700_000);
        g.observe(ms(0), 1_000, true);
        g.observe(ms(30), 19_000, true);
        assert_eq!(g.rate(), None);
        g.observe(ms(50), 31_000, true);
        assert_eq!(g.rate(), Some(600_000.0));
        // Backlogged: the goodput, however high the kernel's sample.
        assert_eq!(g.report(770_000), 600_000);
        // The buffer ran dry: the window ends; the kernel's sample counts if higher.
        g.observe(ms(55), 33_000, false);
        assert!(!g.backlogged());
        assert_eq!((g.report(500_000), g.report(770_000)), (600_000, 770_000));
        // A new backlog starts a new window from its first reading (the 20 KB acknowledged
        // meanwhile without a backlog do not count), and keeps the last rate until it has
        // lasted a full span.
        g.observe(ms(100), 53_000, true);
        g.observe(ms(150), 58_000, true);
        assert_eq!(g.rate(), Some(600_000.0));
        g.observe(ms(340), 78_000, true);
        assert_eq!(g.rate(), Some(600_000.0));
        g.observe(ms(400), 83_000, true);
        assert_eq!(g.rate(), Some(100_000.0));
        assert_eq!(g.report(770_000), 100_000);
    }

    /// Once a backlog lasts, the rate is over the last 250 ms, not the newest 50: ACKs that
    /// come a packet early or late in one reading move it by a fifth as much, and a pipe
    /// that slows is followed within a span.
    #[test]
    fn goodput_slides_over_the_last_quarter_second() {
        let ms = |m: u64| Time(m * 1_000_000);
        let mut g = Goodput::default();
        // 600 KB/s read every 20 ms; the reading at 300 ms sees 1448 bytes early.
        let mut acked = 0;
        for i in 0..=20u64 {
            let early = if i == 15 { 1_448 } else { 0 };
            g.observe(ms(i * 20), acked + early, true);
            acked += 12_000;
        }
        // Over 260 ms (the oldest reading kept is at or before 250 ms ago): exact.
        assert_eq!(g.rate(), Some(600_000.0));
        g.observe(ms(420), acked + 1_448, true);
        let r = g.rate().unwrap_or(0.0);
        // 50 ms windows would read 629 KB/s here.
        assert!((r - 605_569.0).abs() < 1.0, "{r}");
        // The pipe halves: after a span of it, the old rate is gone.
        for i in 22..=35u64 {
            acked += 6_000;
            g.observe(ms(i * 20), acked, true);
        }
        assert_eq!(g.rate(), Some(300_000.0));
        assert!(g.readings.len() <= 15);
    }

    /// Data waiting anywhere ahead of the socket's bottleneck makes a backlog; a few
    /// kilobytes in flight, or a long RTT on a pipe carrying only pings, do not.
    #[test]
    fn a_backlog_is_data_waiting_for_the_socket() {
        let pipe = Backlog {
            to_deliver: 64 * 1024,
            srtt: 0.005,
            min_rtt: 0.004,
            ..Backlog::default()
        };
        // In flight only, no queue at the bottleneck: the sender may be the limit.
        assert!(!pipe.is_backlogged());
        assert!(Backlog {
            buffered: 1,
            ..pipe
        }
        .is_backlogged());
        assert!(Backlog { notsent: 1, ..pipe }.is_backlogged());
        // A standing queue: RTT over twice the minimum and 2 ms more.
        assert!(Backlog {
            srtt: 0.0101,
            ..pipe
        }
        .is_backlogged());
        assert!(!Backlog {
            srtt: 0.0099,
            ..pipe
        }
        .is_backlogged());
        // Too little to deliver, whatever waits: delayed ACKs of pings are no rate.
        let pings = Backlog {
            to_deliver: BACKLOG_MIN - 1,
            buffered: 10_000,
            notsent: 1,
            srtt: 0.2,
            ..pipe
        };
        assert!(!pings.is_backlogged());
        // An unknown minimum RTT says nothing about a queue.
        assert!(!Backlog {
            min_rtt: 0.0,
            srtt: 1.0,
            ..pipe
        }
        .is_backlogged());
    }

    /// `current` is the rate of the backlog under way over the shorter span asked for:
    /// nothing before it has lasted [`MIN_SPAN`], nothing once it has ended, and never the
    /// rate of an earlier backlog, which `rate` keeps.
    #[test]
    fn the_current_rate_is_the_running_backlog_s_own() {
        let ms = |m: u64| Time(m * 1_000_000);
        let mut g = Goodput::with_span(Duration::from_millis(100));
        let mut acked = 0u64;
        for i in 0..=10u64 {
            g.observe(ms(i * 5), acked, true);
            acked += 5_000;
        }
        // 50 ms at 1 MB/s.
        assert_eq!(g.current(), Some(1e6));
        for i in 11..=40u64 {
            g.observe(ms(i * 5), acked, true);
            acked += if i < 36 { 5_000 } else { 2_000 };
        }
        // The last 100 ms: 80 ms at 1 MB/s, then 20 ms at 0.4 MB/s (the rate at 195-200 ms
        // shows at the next reading).
        let r = g.current().unwrap_or(0.0);
        assert!((r - 0.88e6).abs() < 1.0, "{r}");
        assert!(g.readings.len() <= 22, "{}", g.readings.len());
        g.observe(ms(205), acked, false);
        assert_eq!(g.current(), None);
        assert!(g.rate().is_some());
        // A new backlog at half the rate: nothing until it has lasted 50 ms, then its own.
        for i in 0..10u64 {
            acked += 2_500;
            g.observe(ms(300 + i * 5), acked, true);
            assert_eq!(g.current(), None, "at {} ms", 300 + i * 5);
        }
        acked += 2_500;
        g.observe(ms(350), acked, true);
        assert_eq!(g.current(), Some(0.5e6));
    }

    /// The first backlog's rate is refined with every reading as its span grows to a
    /// quarter second, not held at its first 50 ms: a pipe's first ACKs, compressed behind
    /// its first queue, came faster than the pipe (the simulator, docs/sim.md).
    #[test]
    fn the_first_backlog_refines_its_rate() {
        let ms = |m: u64| Time(m * 1_000_000);
        let mut g = Goodput::default();
        // 60 ms of ACKs at 640 KB/s, then the pipe's 600 KB/s.
        let mut acked = 0u64;
        g.observe(ms(0), acked, true);
        for i in 1..=3u64 {
            acked += 12_800;
            g.observe(ms(i * 20), acked, true);
        }
        assert_eq!(g.rate(), Some(640_000.0));
        for i in 4..=6u64 {
            acked += 12_000;
            g.observe(ms(i * 20), acked, true);
        }
        // Over all 120 ms so far: (38_400 + 36_000) / 0.12.
        let r = g.rate().unwrap_or(0.0);
        assert!((r - 620_000.0).abs() < 1.0, "{r}");
        for i in 7..=20u64 {
            acked += 12_000;
            g.observe(ms(i * 20), acked, true);
        }
        assert_eq!(g.rate(), Some(600_000.0));
    }
}
