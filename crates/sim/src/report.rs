//! What a run reports, as JSON (serde) or as a readable table.

use std::fmt::Write;

use serde::Serialize;

use crate::link::Capacity;

/// Per-subflow results.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct SubflowResult {
    /// `ps` or `helper<k>`.
    pub name: String,
    /// When the last new byte carried by this subflow reached the primary, seconds.
    pub completion_s: Option<f64>,
    /// New (first-copy) payload bytes it delivered to the primary.
    pub bytes: u64,
    /// Payload bytes it delivered that had already arrived another way.
    pub duplicate_bytes: u64,
    /// Payload bytes the scheduler put on it.
    pub scheduled_bytes: u64,
    /// TCP packets retransmitted on its links.
    pub retransmitted_packets: u64,
    /// TCP retransmission timeouts on its links.
    pub timeouts: u64,
    /// When the proxy first declared it dead, if it did.
    pub died_s: Option<f64>,
    /// How often it came back after dying (`Scenario::rejoin`).
    pub rejoins: u64,
    /// How often its WAN path stalled and went stale, its connections kept
    /// (`Scenario::dead_timeout`).
    pub stales: u64,
    /// Packets its WAN link's queue dropped (the connection in use at the end).
    pub wan_queue_drops: u64,
    /// Packets its pipe's queue dropped (the connection in use at the end; 0 for the
    /// PS-Path).
    pub pipe_queue_drops: u64,
    /// The capacity its WAN link offered toward the primary over the download and how much
    /// of it passed while the link stood idle, bytes (`link::Link::capacity`, the measure
    /// of the lab's reports; the connection in use at the end, since it opened). `None` when
    /// the download did not finish.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wan_capacity: Option<Capacity>,
    /// The same for its pipe (`None` for the PS-Path).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pipe_capacity: Option<Capacity>,
    /// How often the proxy's queue guard started capping its WAN link's pacing
    /// (`Scenario::queue_guard`, with pacing on).
    pub guard_caps: u64,
    /// Slow starts on its links that HyStart ended on an ACK train or on a rise of the
    /// RTT (with `--hystart`), as the kernel's `TCPHystartTrainDetect` and
    /// `TCPHystartDelayDetect` count them in the lab.
    pub hystart_exits: u64,
    /// The first slow start HyStart ended on its WAN link (with `--hystart`), as the lab's
    /// `scripts/slow-start-exits` reads the kernel's from `tcp_probe.csv`.
    pub hystart_exit: Option<HyStartExit>,
}

/// When and at what window HyStart ended a slow start, and by which test.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct HyStartExit {
    /// Seconds from the request.
    pub at_s: f64,
    /// The congestion window then, segments.
    pub window: u64,
    /// `delay` (the round's RTT rose) or `ack_train`.
    pub test: &'static str,
}

/// Reinjection counters.
#[derive(Debug, Clone, Serialize, PartialEq, Default)]
pub struct Reinjection {
    /// PAMS recalls.
    pub recalls: u64,
    /// Bytes recalled by PAMS.
    pub recalled_bytes: u64,
    /// Bytes scheduled a second time (recalls and dead subflows).
    pub reinjected_bytes: u64,
    /// Bytes taken back from dead subflows.
    pub rescued_bytes: u64,
    /// Recalled bytes helpers dropped from their buffers on `DATA_CANCEL`.
    pub cancelled_at_helpers: u64,
    /// Window rescues: heads of line sent again while their stream was blocked.
    pub window_rescues: u64,
    /// Bytes taken back by window rescues.
    pub window_rescued_bytes: u64,
    /// Late-head rescues: heads of line long past their due time sent again.
    pub late_rescues: u64,
    /// Bytes taken back by late-head rescues.
    pub late_rescued_bytes: u64,
    /// Loss rescues: heads of line held behind a hole their subflow's TCP was recovering
    /// from, sent again.
    pub loss_rescues: u64,
    /// Bytes taken back by loss rescues.
    pub loss_rescued_bytes: u64,
    /// Bytes copied by the tail copy (`Sender::tail_copy`).
    pub tail_copied_bytes: u64,
}

/// One phone interface's radio energy (the lab reports the same per device).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct InterfaceEnergy {
    /// `ps`, `hs<k>` or `pipe<k>`.
    pub name: String,
    /// Its radio (`lte`, `wifi`, ...).
    pub radio: String,
    /// Joules, the final tail included.
    pub joules: f64,
    /// Of which the tail after its last packet.
    pub tail_joules: f64,
}

/// One phone's radio energy over the download ([`crate::energy`]).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct DeviceEnergy {
    /// `primary` or `helper<k>`.
    pub device: String,
    /// Joules of all its interfaces, their final tails included.
    pub joules: f64,
    /// Of which the tails after each interface's last packet.
    pub tail_joules: f64,
    /// Per interface.
    pub interfaces: Vec<InterfaceEnergy>,
}

/// Cumulative new bytes per subflow at one instant.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct TimelinePoint {
    /// Seconds.
    pub t: f64,
    /// Per subflow, in the order of `subflows`.
    pub bytes: Vec<u64>,
}

/// The result of one simulation run.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct SimResult {
    /// Scheduler used.
    pub scheduler: String,
    /// Download size, bytes.
    pub size_bytes: u64,
    /// Time until the primary's application had every byte, seconds; `None` if the run hit
    /// its time limit.
    pub download_time_s: Option<f64>,
    /// The fluid lower bound, seconds.
    pub lower_bound_s: f64,
    /// Download time over the lower bound.
    pub ratio_to_bound: Option<f64>,
    /// Last minus first completion among subflows that carried data, seconds.
    pub completion_gap_s: f64,
    /// Per subflow.
    pub subflows: Vec<SubflowResult>,
    /// Reinjection counters.
    pub reinjection: Reinjection,
    /// Every byte arrived, exactly once in the application stream, equal to what was sent.
    pub verified: bool,
    /// Joules the phones' radios spent on the download, without the tails after each
    /// interface's last packet (the lab's transfer energy).
    pub transfer_energy_j: f64,
    /// Per phone.
    pub energy: Vec<DeviceEnergy>,
    /// Events processed.
    pub events: u64,
    /// Progress samples, when requested.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub timeline: Vec<TimelinePoint>,
}

/// Formats a byte count with a decimal unit.
pub fn human_bytes(b: u64) -> String {
    let b = b as f64;
    if b >= 1e9 {
        format!("{:.2} GB", b / 1e9)
    } else if b >= 1e6 {
        format!("{:.2} MB", b / 1e6)
    } else if b >= 1e3 {
        format!("{:.1} KB", b / 1e3)
    } else {
        format!("{b} B")
    }
}

fn secs(x: Option<f64>) -> String {
    x.map_or("-".to_string(), |v| format!("{v:.3} s"))
}

impl SimResult {
    /// A readable multi-line summary.
    pub fn table(&self) -> String {
        let mut o = String::new();
        let _ = writeln!(
            o,
            "scheduler {}  size {}  {}",
            self.scheduler,
            human_bytes(self.size_bytes),
            if self.verified {
                "data verified"
            } else {
                "DATA NOT VERIFIED"
            }
        );
        let _ = writeln!(
            o,
            "download time {}   lower bound {:.3} s   ratio {}",
            secs(self.download_time_s),
            self.lower_bound_s,
            self.ratio_to_bound
                .map_or("-".to_string(), |r| format!("{r:.3}"))
        );
        let _ = writeln!(
            o,
            "{:<9} {:>10} {:>11} {:>6} {:>10} {:>7} {:>5} {:>5} {:>7}",
            "subflow",
            "completes",
            "bytes",
            "share",
            "duplicate",
            "retrans",
            "stale",
            "died",
            "rejoins"
        );
        for s in &self.subflows {
            let share = if self.size_bytes > 0 {
                100.0 * s.bytes as f64 / self.size_bytes as f64
            } else {
                0.0
            };
            let _ = writeln!(
                o,
                "{:<9} {:>10} {:>11} {:>5.1}% {:>10} {:>7} {:>5} {:>5} {:>7}",
                s.name,
                secs(s.completion_s),
                human_bytes(s.bytes),
                share,
                human_bytes(s.duplicate_bytes),
                s.retransmitted_packets,
                s.stales,
                s.died_s.map_or("-".to_string(), |d| format!("{d:.1}s")),
                s.rejoins
            );
        }
        let r = &self.reinjection;
        let _ = writeln!(
            o,
            "completion gap {:.3} s   reinjection: {} recalls, {} recalled, {} rescued from dead subflows, {} dropped at helpers, {} tail copies",
            self.completion_gap_s,
            r.recalls,
            human_bytes(r.recalled_bytes),
            human_bytes(r.rescued_bytes),
            human_bytes(r.cancelled_at_helpers),
            human_bytes(r.tail_copied_bytes)
        );
        let per_device: Vec<String> = self
            .energy
            .iter()
            .map(|d| format!("{} {:.2} J", d.device, d.joules - d.tail_joules))
            .collect();
        let _ = writeln!(
            o,
            "transfer energy {:.2} J ({}; final tails not counted)",
            self.transfer_energy_j,
            per_device.join(", ")
        );
        o
    }
}
