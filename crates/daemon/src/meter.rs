//! What the kernel says about one TCP connection, turned into the core's path estimate.
//!
//! Every socket that carries mpbond data (the proxy's and primary's links, a helper's pipes
//! and HS-Path) is measured the same way, so that PAMS compares like with like: TCP_INFO read
//! on a timer, corrected for packets shorter than the MSS ([`PacketFill`]), and fed into a
//! [`PathEstimator`], the estimator the simulator runs too (MPBond §4.3.2).

use std::io;
use std::os::fd::AsRawFd;
use std::time::Duration;

use mpbond_core::{DrainRate, PacketFill, PathEstimator, TcpSample, Time};

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
    /// The rate the peer's ACKs and SACKs say a standing queue drains at
    /// ([`TcpSample::drain_rate`]); only measured where the estimate has a drain floor.
    drain: Option<DrainRate>,
}

impl Meter {
    /// A meter with no reading yet; `loss_hold` and `drain_floor` (in smoothed RTTs, 0 for
    /// none) as in `tuning.loss_hold` and `tuning.drain_floor`.
    pub fn new(loss_hold: f64, drain_floor: f64) -> Self {
        Self {
            tcp: TcpInfo::default(),
            est: PathEstimator::new(ESTIMATOR_TAU)
                .with_loss_hold(loss_hold)
                .with_drain_floor(drain_floor),
            fill: PacketFill::new(),
            drain: (drain_floor > 0.0).then(DrainRate::default),
        }
    }

    /// The share of each packet's MSS that carries payload, as last measured (1 for full
    /// packets): what [`TcpInfo::with_fill`] scaled the kernel's packet counts by.
    pub fn fill(&self) -> f64 {
        self.fill.fill()
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
        if let Some(d) = &mut self.drain {
            d.observe(
                now,
                t.bytes_acked + t.sacked_bytes,
                t.to_deliver(),
                f64::from(t.rtt_us) / 1e6,
                f64::from(t.min_rtt_us) / 1e6,
            );
        }
        self.est.on_sample(TcpSample {
            now,
            srtt: t.rtt_us as f64 / 1e6,
            cwnd: t.cwnd_bytes,
            in_flight: t.unacked_bytes,
            delivery_rate: (fresh && t.delivery_rate > 0).then_some(t.delivery_rate as f64),
            app_limited: t.app_limited,
            slow_start: t.slow_start,
            retransmits: u64::from(t.total_retrans),
            drain_rate: self.drain.as_ref().and_then(DrainRate::rate),
        });
    }

    /// Throughput in bytes per second, as PAMS and the helper's feedback use it.
    pub fn throughput(&self) -> f64 {
        self.est.throughput()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let mut m = Meter::new(0.0, 0.0);
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
        let mut m = Meter::new(0.0, 0.0);
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
        let mut m = Meter::new(0.0, 0.0);
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

    /// §6.8's PS-Path after a loss, as TCP_INFO showed it: the link delivers 965 KB/s
    /// throughout behind a standing queue (RTT 150 ms against 50), the cumulative ACK
    /// waits 200 ms for a retransmission while SACKs keep coming, then CUBIC's pause
    /// makes the kernel's samples read 720 KB/s for 250 ms. With the drain floor the
    /// estimate stays at the link's rate; without it, or without a standing queue, it dips
    /// as it did in the lab.
    #[test]
    fn the_drain_floor_keeps_the_rate_of_a_busy_link_through_a_loss() {
        let lowest = |floor: f64, rtt_us: u32| {
            let mut m = Meter::new(0.0, floor);
            let mut t = busy(965_000);
            t.rtt_us = rtt_us;
            t.min_rtt_us = 50_000;
            t.unacked_bytes = 400_000;
            let mut lowest = f64::INFINITY;
            // 4 packets every 6 ms: 965 KB/s.
            for step in 0..300u64 {
                let ms = step * 6;
                let (from, to) = (1000 / 6, 1200 / 6);
                if step == from {
                    t.total_retrans += 1;
                }
                if (from..to).contains(&step) {
                    // Loss recovery: delivered by SACK only; the kernel has no fresh sample.
                    t.sacked += 4;
                    t.sacked_bytes = u64::from(t.sacked) * 1448;
                } else {
                    if step == to {
                        t.bytes_acked += t.sacked_bytes;
                        t.sacked = 0;
                        t.sacked_bytes = 0;
                    }
                    t.bytes_acked += 4 * 1448;
                    t.delivery_rate = if (to..to + 250 / 6).contains(&step) {
                        720_000
                    } else {
                        965_000
                    };
                }
                t.delivered += 4;
                m.update(t, Time::from_millis(ms));
                if step > 100 {
                    lowest = lowest.min(m.throughput());
                }
            }
            lowest
        };
        let (with, without) = (
            lowest(mpbond_core::estimator::DRAIN_FLOOR_RTTS, 150_000),
            lowest(0.0, 150_000),
        );
        assert!(with > 0.97 * 965_000.0, "with the floor: {with}");
        assert!(without < 0.9 * 965_000.0, "without: {without}");
        // No standing queue (RTT 90 ms against 50): the cut may have left the link idle,
        // so there is no drain rate to floor at and the samples count as they are.
        assert_eq!(
            lowest(mpbond_core::estimator::DRAIN_FLOOR_RTTS, 90_000),
            lowest(0.0, 90_000)
        );
    }

    #[test]
    fn a_real_connection_with_small_writes_reads_short_packets() {
        use std::io::{Read, Write};
        use std::net::{TcpListener, TcpStream};
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        let mut c = TcpStream::connect(l.local_addr().expect("addr")).expect("connect");
        let (mut s, _) = l.accept().expect("accept");
        c.set_nodelay(true).expect("nodelay");
        let mut m = Meter::new(0.0, 0.0);
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
