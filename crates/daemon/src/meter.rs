//! What the kernel says about one TCP connection, turned into the core's path estimate.
//!
//! Every socket that carries mpbond data (the proxy's and primary's links, a helper's pipes
//! and HS-Path) is measured the same way, so that PAMS compares like with like: TCP_INFO read
//! on a timer, corrected for packets shorter than the MSS ([`PacketFill`]), and fed into a
//! [`PathEstimator`], the estimator the simulator runs too (MPBond §4.3.2).

use std::io;
use std::os::fd::AsRawFd;
use std::time::Duration;

use mpbond_core::{PacketFill, PathEstimator, TcpSample, Time};

use crate::sys::{self, TcpInfo};

/// Time constant of the throughput average: a few round trips of a cellular path.
pub const ESTIMATOR_TAU: Duration = Duration::from_millis(100);

/// The measured state of one TCP connection.
#[derive(Debug)]
pub struct Meter {
    /// The newest TCP_INFO reading, corrected for short packets.
    pub tcp: TcpInfo,
    /// Smoothed RTT and throughput.
    pub est: PathEstimator,
    fill: PacketFill,
}

impl Meter {
    /// A meter with no reading yet; `loss_hold` as in `tuning.loss_hold` (0 for none).
    pub fn new(loss_hold: f64) -> Self {
        Self {
            tcp: TcpInfo::default(),
            est: PathEstimator::new(ESTIMATOR_TAU).with_loss_hold(loss_hold),
            fill: PacketFill::new(),
        }
    }

    /// Reads TCP_INFO from `sock` and takes it in ([`Meter::update`]). Each new rate sample
    /// is traced with the link's name (`RUST_LOG=mpbond::estimator=trace`): what the kernel
    /// said, how the packet fill scaled it and the estimate it went into.
    pub fn read(&mut self, sock: &impl AsRawFd, now: Time, link: &str) -> io::Result<&TcpInfo> {
        let raw = sys::tcp_info(sock)?;
        let fresh = raw.bytes_acked != self.tcp.bytes_acked;
        self.update(raw, now);
        if fresh && tracing::enabled!(target: "mpbond::estimator", tracing::Level::TRACE) {
            let t = &self.tcp;
            tracing::trace!(target: "mpbond::estimator", link, rate = t.delivery_rate,
                raw_rate = raw.delivery_rate, app_limited = t.app_limited,
                slow_start = t.slow_start, fill = self.fill.fill(), cwnd = t.cwnd_bytes,
                srtt_us = t.rtt_us, acked = t.bytes_acked,
                est = self.est.throughput() as u64, "rate sample");
        }
        Ok(&self.tcp)
    }

    /// Takes one raw reading in: corrects it for short packets and feeds the estimator.
    ///
    /// The kernel's delivery rate counts only when it is fresh (something was acknowledged
    /// since the last reading): the kernel keeps reporting its last rate sample, flags and
    /// all, while nothing is acknowledged, so a link read every tick would keep feeding the
    /// last sample of its previous transfer as if it were new (after a download, the slow
    /// tail of it), and an idle period could not be told apart.
    pub fn update(&mut self, raw: TcpInfo, now: Time) {
        let fresh = raw.bytes_acked != self.tcp.bytes_acked;
        let t = raw.with_fill(&mut self.fill, now);
        self.tcp = t;
        if t.rtt_us == 0 {
            return;
        }
        self.est.on_sample(TcpSample {
            now,
            srtt: t.rtt_us as f64 / 1e6,
            cwnd: t.cwnd_bytes,
            delivery_rate: (fresh && t.delivery_rate > 0).then_some(t.delivery_rate as f64),
            app_limited: t.app_limited,
            slow_start: t.slow_start,
            retransmits: u64::from(t.total_retrans),
        });
    }

    /// Throughput in bytes per second, as PAMS and the helper's feedback use it.
    pub fn throughput(&self) -> f64 {
        self.est.throughput()
    }
}

/// Shortest span [`Goodput`] measures over: a dozen round trips of a WiFi pipe, so the
/// rate is not one burst of ACKs.
pub const GOODPUT_MIN_SPAN: Duration = Duration::from_millis(50);

/// Span [`Goodput`] slides over once the backlog has lasted that long. At the helper's 20 ms
/// readings, windows of 50-60 ms hold some 25 packets of a 5 Mbit/s pipe, and one packet
/// more or less moved the rate by 4%: 579, 603 or 627 KB/s from a pipe draining 603 KB/s,
/// and the high readings gave the helper a segment too many in §6.8's setting
/// (docs/evaluation.md, item 20). A quarter of a second holds a hundred packets and still
/// follows a pipe whose rate changes (Fig. 7's step, §6.2) within a feedback or two.
pub const GOODPUT_SPAN: Duration = Duration::from_millis(250);

/// Most readings a [`Goodput`] keeps: [`GOODPUT_SPAN`] at the default 20 ms feedback
/// interval is 13; the cap bounds memory whatever the interval.
const GOODPUT_READINGS: usize = 64;

/// How fast a socket drains a backlog its writer keeps ahead of it: the bytes the peer
/// acknowledged or SACKed over the last [`GOODPUT_SPAN`] (at least [`GOODPUT_MIN_SPAN`]) during
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
#[derive(Debug, Default, Clone)]
pub struct Goodput {
    /// Readings (time, bytes delivered) of the current backlog, oldest first; empty
    /// without a backlog.
    readings: std::collections::VecDeque<(Time, u64)>,
    rate: Option<f64>,
}

impl Goodput {
    /// Takes one reading: `delivered`, the bytes the peer has (acknowledged plus SACKed,
    /// from TCP_INFO), and whether the writer had bytes waiting for the socket. A reading
    /// without a backlog ends the window.
    ///
    /// SACKed bytes count because the cumulative ACK stands still through loss recovery:
    /// a pipe that dropped a packet at its queue's tail kept delivering at its rate while
    /// its acknowledged bytes read 122 KB/s, and PAMS took the helper's last 25 KB back
    /// onto a PS-Path half as fast (02, item 20).
    ///
    /// The first span of a backlog is as short as [`GOODPUT_MIN_SPAN`] only while there is
    /// no rate yet; after that a new backlog keeps the last rate until it has lasted
    /// [`GOODPUT_SPAN`], since a short backlog (the last few packets of a download) measures
    /// how the backlog ended more than how fast the pipe drains.
    pub fn observe(&mut self, now: Time, delivered: u64, backlogged: bool) {
        if !backlogged {
            self.readings.clear();
            return;
        }
        self.readings.push_back((now, delivered));
        // Keep one reading at or before the span's start, so the span is never shorter
        // than GOODPUT_SPAN once the backlog has lasted that long.
        while (self.readings.len() > 1 && now.saturating_since(self.readings[1].0) >= GOODPUT_SPAN)
            || self.readings.len() > GOODPUT_READINGS
        {
            self.readings.pop_front();
        }
        if let Some(&(t0, a0)) = self.readings.front() {
            let dt = now.saturating_since(t0).as_secs_f64();
            let least = if self.rate.is_some() {
                GOODPUT_SPAN
            } else {
                GOODPUT_MIN_SPAN
            };
            if dt >= least.as_secs_f64() {
                self.rate = Some(delivered.saturating_sub(a0) as f64 / dt);
            }
        }
    }

    /// The rate over the newest span, bytes per second.
    pub fn rate(&self) -> Option<f64> {
        self.rate
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

    fn busy(rate: u64) -> TcpInfo {
        TcpInfo {
            rtt_us: 50_000,
            cwnd_bytes: 100_000,
            delivery_rate: rate,
            mss: 1448,
            ..TcpInfo::default()
        }
    }

    #[test]
    fn a_repeated_reading_of_an_idle_link_is_not_a_new_rate_sample() {
        // A link measured at 1 MB/s, then idle: the kernel keeps reporting the slow last
        // sample of the transfer's tail (200 KB/s, not application-limited).
        let mut m = Meter::new(0.0);
        let mut t = busy(1_000_000);
        for ms in (0..1000).step_by(5) {
            t.bytes_acked += 5 * 1448;
            t.delivered += 5;
            m.update(t, Time::from_millis(ms));
        }
        assert!((m.throughput() - 1e6).abs() < 1e3, "{}", m.throughput());
        t.delivery_rate = 200_000;
        t.bytes_acked += 1448;
        t.delivered += 1;
        m.update(t, Time::from_millis(1000));
        let after_tail = m.throughput();
        for ms in (1005..3000).step_by(5) {
            m.update(t, Time::from_millis(ms));
        }
        assert_eq!(
            m.throughput(),
            after_tail,
            "two idle seconds moved the estimate"
        );
        assert!(after_tail > 0.9e6, "{after_tail}");
    }

    #[test]
    fn short_packets_do_not_inflate_the_rate() {
        // The kernel reports 1 MB/s counting each packet as a full MSS, but every other
        // packet carries 600 bytes (2 KiB records sent one at a time): the path moves
        // 2048 bytes per 2 × 1448, about 707 KB/s.
        let mut m = Meter::new(0.0);
        let mut t = busy(1_000_000);
        for ms in (0..2000).step_by(5) {
            t.bytes_acked += 2 * 2048;
            t.delivered += 4;
            m.update(t, Time::from_millis(ms));
        }
        let want = 1e6 * 2048.0 / 2896.0;
        assert!(
            (m.throughput() - want).abs() < want * 0.01,
            "{}",
            m.throughput()
        );
        assert!(m.tcp.cwnd_bytes < 75_000 && m.tcp.cwnd_bytes > 65_000);
    }

    /// Loss recovery: SACKs keep counting packets delivered while the cumulative ACK, and
    /// with it `bytes_acked`, waits for the lost packet's retransmission. Full packets stay
    /// full packets: the reading must not fall to the smallest fill (a 600 KB/s pipe was
    /// reported at 30 KB/s for the 200 ms of an RTO before this).
    #[test]
    fn sacked_packets_during_recovery_are_not_empty_packets() {
        let mut m = Meter::new(0.0);
        let mut t = busy(600_000);
        let mut ms = 0;
        while ms < 1000 {
            t.bytes_acked += 2 * 1448;
            t.delivered += 2;
            m.update(t, Time::from_millis(ms));
            ms += 5;
        }
        // One packet lost: 40 more are SACKed over 200 ms, nothing cumulatively acked.
        for _ in 0..40 {
            t.delivered += 1;
            t.sacked += 1;
            m.update(t, Time::from_millis(ms));
            ms += 5;
            assert_eq!(m.tcp.delivery_rate, 600_000, "at {ms} ms");
        }
        // The retransmission arrives: the cumulative ACK covers all 41.
        t.delivered += 1;
        t.sacked = 0;
        t.bytes_acked += 41 * 1448;
        m.update(t, Time::from_millis(ms));
        assert_eq!(m.tcp.delivery_rate, 600_000);
    }

    #[test]
    fn a_real_connection_with_small_writes_reads_short_packets() {
        use std::io::{Read, Write};
        use std::net::{TcpListener, TcpStream};
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        let mut c = TcpStream::connect(l.local_addr().expect("addr")).expect("connect");
        let (mut s, _) = l.accept().expect("accept");
        c.set_nodelay(true).expect("nodelay");
        let mut m = Meter::new(0.0);
        m.read(&c, Time::ZERO, "test").expect("tcp_info");
        // 100-byte writes, each acknowledged before the next: one short packet each.
        let mut buf = [0u8; 100];
        for i in 0..40u64 {
            c.write_all(&[7u8; 100]).expect("write");
            s.read_exact(&mut buf).expect("read");
            std::thread::sleep(Duration::from_millis(2));
            m.read(&c, Time::from_millis(i + 1), "test")
                .expect("tcp_info");
        }
        assert!(m.tcp.mss > 0, "no MSS reported");
        // Bytes per delivered packet over the MSS: 100 / mss, far below 1.
        let fill = m.fill.fill();
        assert!(fill < 0.2, "fill {fill} (mss {})", m.tcp.mss);
    }
}
