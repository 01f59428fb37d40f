//! `swtc`: Scheduled Window-based Transmission Control, from "Avoiding Biased-Feeding in the
//! Scheduling of Collaborative Multipath TCP" (Tsai, Chou, Lan; PLOS ONE 2016;
//! ../shared/seeds/004_*.txt, section "Packet Scheduler").
//!
//! SWTC sends each segment on the path with the smallest expected delay until its ACK returns,
//! `E(D_i)`, built from
//! - `w_i = m_i + n_i`, the wait before the segment can enter path `i`: `m_i` to transmit the
//!   segments already queued on it, `n_i` until its congestion window opens;
//! - `r_i`, the network round trip, and `q_i`, the queueing delay at the bottleneck;
//! - `p_i`, the loss probability.
//!
//! `n_i` comes from per-segment predictions: when a segment is sent at `t` on path `i`, SWTC
//! records `est_ACK_AT = t + srtt_i + m_i`, and `n_i` is the time until the earliest outstanding
//! prediction when the window is full.
//!
//! Where the paper is vague, and what this implementation chooses:
//! - **Equation (2) is missing from the text.** We use `E(D_i) = w_i + r_i + q_i +
//!   p_i / (1 - p_i) · RTO_i`: each loss adds one retransmission timeout, and the number of
//!   losses before success is geometric. `p_i` is capped at 0.5.
//! - **`r_i` and `q_i`.** `r_i` is the smallest RTT seen (propagation) and `q_i = srtt_i - r_i`
//!   (the standing queue), so `r_i + q_i` is the smoothed RTT and nothing is counted twice.
//! - **`B_i`.** The paper uses TCP Westwood's bandwidth estimate; we use the path estimator's
//!   throughput (CWND/RTT or the kernel's delivery rate), which estimates the same quantity.
//! - **`RTO_i`.** `max(2 · srtt_i, 200 ms)`, Linux's floor.
//! - **Which paths.** As in the paper, SWTC considers only the sender-side path of each
//!   subflow (it assumes the helper-to-requestor links are similar and fast), so it does not see
//!   pipes or helper buffers.
//! - **Scheduled queues.** The paper assigns every packet to a per-path scheduled queue as soon
//!   as it is sent by the application. Here SWTC is asked only when some subflow is idle, like
//!   every mpbond scheduler, but it may still place a segment on a busy subflow whose expected
//!   delay is lower, which queues it there. The idle subflow's `w = 0` bounds such a queue to
//!   about `(r_idle - r_busy) · B_busy` bytes.

use std::collections::{BTreeMap, VecDeque};

use mpbond_proto::SubflowId;

use super::{Decision, SchedContext, Scheduler};
use crate::path::PathView;
use crate::Time;

/// Most ACK-time predictions kept per subflow; older ones are dropped (they only matter while
/// the window is full, and a window never holds this many segments).
const MAX_RECORDS: usize = 65_536;

/// The SWTC scheduler.
#[derive(Clone, Debug, Default)]
pub struct Swtc {
    /// Per subflow: (end offset of the segment in the TCP byte stream, predicted ACK time).
    records: BTreeMap<SubflowId, VecDeque<(u64, Time)>>,
}

impl Swtc {
    /// Drops predictions whose bytes TCP has acknowledged.
    fn expire(&mut self, paths: &[PathView]) {
        for p in paths {
            if let Some(q) = self.records.get_mut(&p.id) {
                while q.front().is_some_and(|&(end, _)| end <= p.bytes_acked) {
                    q.pop_front();
                }
            }
        }
        self.records
            .retain(|id, _| paths.iter().any(|p| p.id == *id));
    }

    /// `m_i`: time to transmit what is already queued on the path and not yet sent.
    fn queue_wait(p: &PathView) -> f64 {
        p.unsent() as f64 / p.throughput.max(1.0)
    }

    /// `E(D_i)` in seconds.
    pub fn expected_delay(&self, now: Time, p: &PathView) -> f64 {
        let m = Self::queue_wait(p);
        let n = if p.idle || p.inflight < p.cwnd {
            0.0
        } else {
            self.records
                .get(&p.id)
                .and_then(|q| q.front())
                .map_or(0.0, |&(_, at)| at.saturating_since(now).as_secs_f64())
        };
        let r = if p.min_rtt > 0.0 { p.min_rtt } else { p.rtt };
        let q = (p.rtt - r).max(0.0);
        let loss = p.loss_rate.clamp(0.0, 0.5);
        let rto = (2.0 * p.rtt).max(0.2);
        m + n + r + q + loss / (1.0 - loss) * rto
    }
}

impl Scheduler for Swtc {
    fn name(&self) -> &'static str {
        "swtc"
    }

    fn select(&mut self, ctx: &SchedContext, paths: &[PathView]) -> Decision {
        self.expire(paths);
        let mut best: Option<(&PathView, f64)> = None;
        for p in paths {
            let d = self.expected_delay(ctx.now, p);
            // Ties go to an idle subflow, then to the lower id.
            let better = match best {
                None => true,
                Some((b, bd)) => d < bd || (d == bd && p.idle && !b.idle),
            };
            if better {
                best = Some((p, d));
            }
        }
        best.map_or(Decision::Defer, |(p, _)| Decision::Send(p.id))
    }

    fn on_scheduled(&mut self, now: Time, path: &PathView, bytes: u64) {
        let m = Self::queue_wait(path);
        let end = path.bytes_acked + path.queued + bytes;
        let at = now + std::time::Duration::from_secs_f64((path.rtt + m).max(0.0));
        let q = self.records.entry(path.id).or_default();
        if q.len() >= MAX_RECORDS {
            q.pop_front();
        }
        q.push_back((end, at));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheduler::testutil::*;

    #[test]
    fn paper_figure_8_example() {
        // Fig. 8: r1 = 20, r2 = 12 (time units taken as ms). At t = 12 the ACK of segment 1
        // returns on path 2, so n2 = 0, while path 1's earliest ACK is due at 20: n1 = 8.
        let now = Time::from_millis(12);
        let mut s = Swtc::default();
        let mut p1 = direct(1, 20.0, 8.0, 1000, false);
        p1.cwnd = 1000;
        p1.inflight = 1000;
        let p2 = direct(2, 12.0, 8.0, 0, true);
        s.records
            .insert(p1.id, VecDeque::from([(1000, Time::from_millis(20))]));
        assert!((s.expected_delay(now, &p1) - (0.008 + 0.020)).abs() < 1e-9);
        assert!((s.expected_delay(now, &p2) - 0.012).abs() < 1e-9);
        assert_eq!(s.select(&ctx(1), &[p1, p2]), Decision::Send(SubflowId(2)));
    }

    #[test]
    fn est_ack_time_includes_queue_wait() {
        // Fig. 8, segment 4: est_ACK_AT = t + srtt + m, with m the transmission delay of the
        // segment queued in front of it (2 units): 12 + 12 + 2 = 26.
        let mut s = Swtc::default();
        let mut p = direct(2, 12.0, 0.0, 0, true);
        p.throughput = 500_000.0; // 1000 bytes take 2 ms
        p.queued = 1000;
        p.inflight = 0;
        s.on_scheduled(Time::from_millis(12), &p, 1000);
        let (&end, &at) = {
            let q = &s.records[&p.id];
            let (e, a) = q.back().unwrap();
            (e, a)
        };
        assert_eq!(end, 2000);
        assert_eq!(at, Time::from_millis(26));
    }

    #[test]
    fn waits_for_much_faster_busy_path_and_bounds_its_queue() {
        // Path 1: 10 ms RTT, busy but its window opens now. Path 2: 100 ms RTT, idle.
        let mut fast = direct(1, 10.0, 8.0, 0, false);
        fast.cwnd = 10_000;
        fast.inflight = 10_000;
        fast.queued = 10_000;
        let slow = direct(2, 100.0, 8.0, 0, true);
        let mut s = Swtc::default();
        assert_eq!(
            s.select(&ctx(1), &[fast.clone(), slow.clone()]),
            Decision::Send(SubflowId(1))
        );
        // With 91 ms of data already queued on the fast path (91 000 B at 1 MB/s), the idle
        // slow path is better: 0.1 s against 0.101 s.
        fast.queued = 10_000 + 91_000;
        assert_eq!(
            s.select(&ctx(1), &[fast, slow]),
            Decision::Send(SubflowId(2))
        );
    }

    #[test]
    fn loss_penalises_a_path() {
        let clean = direct(1, 50.0, 8.0, 0, true);
        let mut lossy = direct(2, 40.0, 8.0, 0, true);
        lossy.loss_rate = 0.1; // 0.04 + 0.1/0.9 * 0.2 = 0.062 > 0.05
        let mut s = Swtc::default();
        assert_eq!(
            s.select(&ctx(1), &[clean, lossy]),
            Decision::Send(SubflowId(1))
        );
    }
}
