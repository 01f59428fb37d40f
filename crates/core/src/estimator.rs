//! Path estimation (MPBond §4.3.2).
//!
//! A [`PathEstimator`] turns TCP samples (from TCP_INFO in the daemons, from the TCP model in the
//! simulator) into the smoothed RTT and throughput that PAD needs. A [`PipeState`] keeps the
//! newest pipe feedback for a helper subflow.

use std::time::Duration;

use mpbond_proto::PipeFeedback;

use crate::path::PipeView;
use crate::Time;

/// One reading of a TCP connection's state.
#[derive(Clone, Copy, Debug)]
pub struct TcpSample {
    /// When it was taken.
    pub now: Time,
    /// Smoothed RTT, seconds (tcpi_rtt is already smoothed by the kernel).
    pub srtt: f64,
    /// Congestion window in bytes (tcpi_snd_cwnd × tcpi_snd_mss).
    pub cwnd: u64,
    /// The kernel's delivery-rate estimate, bytes per second, when it has one.
    pub delivery_rate: Option<f64>,
    /// True when the delivery-rate sample was limited by the application rather than the
    /// network (tcpi_delivery_rate_app_limited); such samples understate the path.
    pub app_limited: bool,
}

/// Smoothed RTT and throughput of one path.
///
/// Throughput is an exponentially weighted moving average of CWND/RTT (MPBond §4.3.2), or of
/// the kernel's delivery rate when one is given. CWND/RTT overshoots in slow start and whenever
/// the smoothed RTT lags a growing queue; the delivery rate measures what the path actually
/// delivered. An application-limited delivery-rate sample (the scheduler left the path idle)
/// can only raise the estimate, never lower it, as in BBR. The average uses a time constant
/// rather than a per-sample weight, so it reacts at the same speed whether samples come every
/// ACK (simulator) or every few milliseconds (daemon).
#[derive(Clone, Debug)]
pub struct PathEstimator {
    tau: f64,
    srtt: f64,
    min_rtt: f64,
    throughput: Option<f64>,
    last: Option<Time>,
}

impl PathEstimator {
    /// A new estimator whose average forgets with time constant `tau`.
    pub fn new(tau: Duration) -> Self {
        PathEstimator {
            tau: tau.as_secs_f64().max(1e-6),
            srtt: 0.0,
            min_rtt: f64::INFINITY,
            throughput: None,
            last: None,
        }
    }

    /// Feeds one sample.
    pub fn on_sample(&mut self, s: TcpSample) {
        if !(s.srtt.is_finite() && s.srtt > 0.0) {
            return;
        }
        self.srtt = s.srtt;
        self.min_rtt = self.min_rtt.min(s.srtt);
        let sample = match s.delivery_rate {
            Some(r) if r.is_finite() && r > 0.0 => {
                if s.app_limited && self.throughput.is_some_and(|t| r <= t) {
                    self.srtt = s.srtt;
                    self.last = Some(s.now);
                    return;
                }
                r
            }
            _ => s.cwnd as f64 / s.srtt,
        };
        self.throughput = Some(match (self.throughput, self.last) {
            (Some(old), Some(last)) => {
                let dt = s.now.saturating_since(last).as_secs_f64();
                let w = 1.0 - (-dt / self.tau).exp();
                old + w * (sample - old)
            }
            _ => sample,
        });
        self.last = Some(s.now);
    }

    /// Smoothed RTT in seconds (0 before the first sample).
    pub fn srtt(&self) -> f64 {
        self.srtt
    }

    /// Smallest RTT seen, seconds (0 before the first sample).
    pub fn min_rtt(&self) -> f64 {
        if self.min_rtt.is_finite() {
            self.min_rtt
        } else {
            0.0
        }
    }

    /// Smoothed throughput in bytes per second (0 before the first sample).
    pub fn throughput(&self) -> f64 {
        self.throughput.unwrap_or(0.0)
    }
}

/// The newest pipe feedback of one helper subflow, as the data sender knows it.
#[derive(Clone, Debug, Default)]
pub struct PipeState {
    newest: Option<PipeFeedback>,
    received_at: Option<Time>,
}

impl PipeState {
    /// Records feedback unless it is older than what we have (feedback can arrive over
    /// several paths and overtake itself). Returns whether it was used.
    pub fn on_feedback(&mut self, now: Time, fb: PipeFeedback) -> bool {
        if let Some(old) = &self.newest {
            if fb.timestamp_us < old.timestamp_us {
                return false;
            }
        }
        self.newest = Some(fb);
        self.received_at = Some(now);
        true
    }

    /// The pipe as PAD sees it, if any feedback has arrived.
    pub fn view(&self) -> Option<PipeView> {
        self.newest.map(|f| PipeView {
            throughput: f.throughput_bps as f64 / 8.0,
            rtt: f.rtt_us as f64 / 1e6,
            buffered: f.buffered,
        })
    }

    /// How old the newest feedback is.
    pub fn age(&self, now: Time) -> Option<Duration> {
        self.received_at.map(|t| now.saturating_since(t))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mpbond_proto::SubflowId;

    fn sample(ms: u64, srtt: f64, cwnd: u64) -> TcpSample {
        TcpSample {
            now: Time::from_millis(ms),
            srtt,
            cwnd,
            delivery_rate: None,
            app_limited: false,
        }
    }

    #[test]
    fn cwnd_over_rtt_and_time_constant() {
        let mut e = PathEstimator::new(Duration::from_millis(100));
        e.on_sample(sample(0, 0.05, 50_000));
        assert_eq!(e.throughput(), 1_000_000.0);
        // One time constant later, the average has moved 1 - 1/e of the way to 2 MB/s.
        e.on_sample(sample(100, 0.05, 100_000));
        let expect = 1e6 + (1.0 - (-1.0f64).exp()) * 1e6;
        assert!((e.throughput() - expect).abs() < 1e-6);
        assert_eq!(e.srtt(), 0.05);
    }

    #[test]
    fn delivery_rate_preferred_and_app_limited_samples_only_raise() {
        let mut e = PathEstimator::new(Duration::from_millis(100));
        let mut s = sample(0, 0.1, 10_000);
        s.delivery_rate = Some(500_000.0);
        e.on_sample(s);
        assert_eq!(
            e.throughput(),
            500_000.0,
            "delivery rate, not cwnd/rtt = 100 000"
        );
        s.app_limited = true;
        s.delivery_rate = Some(100.0);
        s.now = Time::from_millis(100);
        e.on_sample(s);
        assert_eq!(e.throughput(), 500_000.0, "an idle path is not a slow path");
        s.delivery_rate = Some(900_000.0);
        s.now = Time::from_millis(200);
        e.on_sample(s);
        assert!(e.throughput() > 500_000.0);
    }

    #[test]
    fn bad_rtt_ignored() {
        let mut e = PathEstimator::new(Duration::from_millis(100));
        e.on_sample(sample(0, 0.0, 1));
        e.on_sample(sample(0, f64::NAN, 1));
        assert_eq!(e.throughput(), 0.0);
    }

    #[test]
    fn stale_feedback_discarded() {
        let fb = |ts, buf| PipeFeedback {
            subflow: SubflowId(1),
            throughput_bps: 8_000_000,
            rtt_us: 4_000,
            buffered: buf,
            timestamp_us: ts,
            uplink: false,
        };
        let mut p = PipeState::default();
        assert!(p.on_feedback(Time::ZERO, fb(10, 100)));
        assert!(!p.on_feedback(Time::ZERO, fb(5, 999)));
        let v = p.view().unwrap();
        assert_eq!((v.buffered, v.throughput, v.rtt), (100, 1_000_000.0, 0.004));
    }
}
