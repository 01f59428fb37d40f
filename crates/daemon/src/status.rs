//! What `mpbond status` and `/metrics` report: snapshots of sessions, subflows and links, and
//! process-wide counters.

use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};

use crate::sys::TcpInfo;

/// Process-wide counters, exported on `/metrics`.
#[derive(Debug, Default)]
pub struct Metrics {
    /// Sessions opened.
    pub sessions_opened: AtomicU64,
    /// Sessions open now.
    pub sessions_active: AtomicU64,
    /// Streams opened.
    pub streams_opened: AtomicU64,
    /// Streams open now.
    pub streams_active: AtomicU64,
    /// Streams that ended with an error.
    pub streams_failed: AtomicU64,
    /// Payload bytes sent to the peer (all streams, including reinjected copies).
    pub bytes_sent: AtomicU64,
    /// New payload bytes received from the peer.
    pub bytes_received: AtomicU64,
    /// Bytes reinjected (recalls and failed subflows).
    pub bytes_reinjected: AtomicU64,
    /// Links established.
    pub links_opened: AtomicU64,
    /// Links that failed (reset, stalled, protocol error).
    pub links_failed: AtomicU64,
    /// Times a WAN link stalled and went stale, keeping its connection
    /// ([`crate::liveness`]).
    pub links_stale: AtomicU64,
    /// Connections refused: handshake failure, unknown device, bad ticket, malformed frame.
    pub refused: AtomicU64,
    /// Requests refused because a cap was hit.
    pub limits_hit: AtomicU64,
    /// Times the slow-start queue guard started capping a link's pacing rate
    /// ([`crate::queue_guard`]).
    pub queue_guard_caps: AtomicU64,
}

impl Metrics {
    /// Adds one.
    pub fn inc(c: &AtomicU64) {
        c.fetch_add(1, Ordering::Relaxed);
    }

    /// Subtracts one.
    pub fn dec(c: &AtomicU64) {
        c.fetch_sub(1, Ordering::Relaxed);
    }

    /// Adds `n`.
    pub fn add(c: &AtomicU64, n: u64) {
        c.fetch_add(n, Ordering::Relaxed);
    }

    /// Prometheus text exposition of the counters and of the per-subflow gauges in `status`.
    pub fn render(&self, status: &NodeStatus) -> String {
        let mut o = String::new();
        let g = |c: &AtomicU64| c.load(Ordering::Relaxed);
        let mut line = |name: &str, kind: &str, help: &str, v: u64| {
            let _ = writeln!(
                o,
                "# HELP mpbond_{name} {help}\n# TYPE mpbond_{name} {kind}"
            );
            let _ = writeln!(o, "mpbond_{name} {v}");
        };
        line(
            "sessions_opened_total",
            "counter",
            "Sessions opened.",
            g(&self.sessions_opened),
        );
        line(
            "sessions_active",
            "gauge",
            "Sessions open now.",
            g(&self.sessions_active),
        );
        line(
            "streams_opened_total",
            "counter",
            "Streams opened.",
            g(&self.streams_opened),
        );
        line(
            "streams_active",
            "gauge",
            "Streams open now.",
            g(&self.streams_active),
        );
        line(
            "streams_failed_total",
            "counter",
            "Streams that ended in error.",
            g(&self.streams_failed),
        );
        line(
            "bytes_sent_total",
            "counter",
            "Payload bytes sent.",
            g(&self.bytes_sent),
        );
        line(
            "bytes_received_total",
            "counter",
            "New payload bytes received.",
            g(&self.bytes_received),
        );
        line(
            "bytes_reinjected_total",
            "counter",
            "Payload bytes reinjected.",
            g(&self.bytes_reinjected),
        );
        line(
            "links_opened_total",
            "counter",
            "Links established.",
            g(&self.links_opened),
        );
        line(
            "links_failed_total",
            "counter",
            "Links that failed.",
            g(&self.links_failed),
        );
        line(
            "links_stale_total",
            "counter",
            "Times a WAN link stalled and went stale, keeping its connection.",
            g(&self.links_stale),
        );
        line(
            "refused_total",
            "counter",
            "Connections refused (auth, tickets, malformed).",
            g(&self.refused),
        );
        line(
            "limits_hit_total",
            "counter",
            "Requests refused by a cap.",
            g(&self.limits_hit),
        );
        line(
            "queue_guard_caps_total",
            "counter",
            "Times the slow-start queue guard started capping a link's pacing rate.",
            g(&self.queue_guard_caps),
        );
        let mut gauge = |name: &str, help: &str, rows: Vec<(String, f64)>| {
            let _ = writeln!(o, "# HELP mpbond_{name} {help}\n# TYPE mpbond_{name} gauge");
            for (labels, v) in rows {
                let _ = writeln!(o, "mpbond_{name}{{{labels}}} {v}");
            }
        };
        let mut tput = Vec::new();
        let mut rtt = Vec::new();
        let mut queued = Vec::new();
        let mut pipe_buf = Vec::new();
        for s in &status.sessions {
            for f in &s.subflows {
                let l = format!(
                    "session=\"{}\",subflow=\"{}\",kind=\"{}\"",
                    s.id, f.id, f.kind
                );
                tput.push((l.clone(), f.throughput_bps));
                rtt.push((l.clone(), f.rtt_ms / 1e3));
                queued.push((l.clone(), f.queued as f64));
                if let Some(p) = &f.pipe {
                    pipe_buf.push((l, p.buffered as f64));
                }
            }
        }
        gauge(
            "subflow_throughput_bps",
            "Estimated subflow throughput, bits/s.",
            tput,
        );
        gauge(
            "subflow_rtt_seconds",
            "Smoothed RTT of the subflow's first hop.",
            rtt,
        );
        gauge(
            "subflow_queued_bytes",
            "B_s: bytes queued for the subflow at the sender.",
            queued,
        );
        gauge(
            "subflow_helper_buffer_bytes",
            "B_p: bytes buffered at the helper.",
            pipe_buf,
        );
        o
    }
}

/// One link of a subflow.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct LinkStatus {
    /// Its name (`ps`, `hs`, or a pipe name).
    pub name: String,
    /// The peer's address.
    pub peer: String,
    /// Bytes queued in user space for it.
    pub pending: u64,
    /// Kernel state.
    pub tcp: TcpInfo,
    /// The slow-start queue guard's pacing cap in force, bytes per second
    /// ([`crate::queue_guard`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pacing_cap: Option<u64>,
    /// The socket's congestion control (TCP_CONGESTION), as `tuning.congestion` and, on a
    /// proxy's HS-Paths, `tuning.hs_congestion` set it; empty if it could not be read.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub congestion: String,
    /// Stalled, its connection kept: it gets no new data until the path shows life
    /// ([`crate::liveness`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub stale: bool,
}

/// Pipe (or second-hop) state reported by a helper.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PipeStatus {
    /// Throughput, bits/s.
    pub throughput_bps: f64,
    /// RTT, ms.
    pub rtt_ms: f64,
    /// Minimum RTT, ms (`PIPE_MIN_RTT`); absent while the helper has sent none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_rtt_ms: Option<f64>,
    /// Bytes buffered at the helper.
    pub buffered: u64,
    /// Age of the report, ms.
    pub age_ms: f64,
}

/// One subflow of a session.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SubflowStatus {
    /// Its id.
    pub id: u8,
    /// `direct` or `helper`.
    pub kind: String,
    /// The helper's name, for helper subflows.
    pub helper: Option<String>,
    /// Estimated throughput of the first hop, bits/s.
    pub throughput_bps: f64,
    /// Smoothed RTT of the first hop, ms.
    pub rtt_ms: f64,
    /// B_s, bytes.
    pub queued: u64,
    /// Payload bytes scheduled and not yet acknowledged.
    pub outstanding: u64,
    /// Payload bytes scheduled on it since it joined.
    pub bytes_scheduled: u64,
    /// The radios that carry it, as its device declared them (`RADIOS`): the WAN radio,
    /// then `+` and the pipe's for a helper, e.g. `lte+wifi`. What the energy-aware
    /// admission weighs (`tuning.time_value`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub radios: Option<String>,
    /// The helper's report.
    pub pipe: Option<PipeStatus>,
    /// Its links.
    pub links: Vec<LinkStatus>,
}

/// One session.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SessionStatus {
    /// Session id (hex).
    pub id: String,
    /// `proxy` or `primary`.
    pub side: String,
    /// The primary's name (at the proxy).
    pub primary: String,
    /// Scheduler.
    pub scheduler: String,
    /// Open streams.
    pub streams: usize,
    /// Subflows.
    pub subflows: Vec<SubflowStatus>,
    /// PAMS recalls so far.
    pub recalls: u64,
    /// Bytes reinjected so far.
    pub reinjected_bytes: u64,
    /// Bytes taken back by window rescues so far (`Sender::window_rescue`).
    #[serde(default)]
    pub window_rescued_bytes: u64,
    /// Bytes taken back by late-head rescues so far (`Sender::late_rescue`).
    #[serde(default)]
    pub late_rescued_bytes: u64,
    /// Bytes taken back by loss rescues so far (`Sender::late_rescue`).
    #[serde(default)]
    pub loss_rescued_bytes: u64,
    /// Bytes copied by the tail copy so far (`Sender::tail_copy`).
    #[serde(default)]
    pub tail_copied_bytes: u64,
}

/// A helper's relay for one primary.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RelayStatus {
    /// The primary's name.
    pub primary: String,
    /// The session.
    pub session: String,
    /// Downlink bytes buffered.
    pub down_buffered: u64,
    /// Uplink bytes buffered.
    pub up_buffered: u64,
    /// Bytes relayed down.
    pub down_bytes: u64,
    /// Bytes relayed up.
    pub up_bytes: u64,
    /// Its pipes.
    pub pipes: Vec<LinkStatus>,
    /// Its HS-Path.
    pub hs: Option<LinkStatus>,
}

/// Everything one process reports.
#[derive(Clone, Debug, Serialize, Deserialize, Default)]
pub struct NodeStatus {
    /// The device's public key.
    pub device: String,
    /// Roles running.
    pub roles: Vec<String>,
    /// Sessions (proxy and primary roles).
    pub sessions: Vec<SessionStatus>,
    /// Relays (helper role).
    pub relays: Vec<RelayStatus>,
}

impl NodeStatus {
    /// A readable table.
    pub fn table(&self) -> String {
        let mut o = String::new();
        let _ = writeln!(o, "device {}  roles {}", self.device, self.roles.join(", "));
        for s in &self.sessions {
            let _ = writeln!(
                o,
                "\nsession {} ({} side, primary {}, scheduler {}): {} streams, {} recalls, {} bytes reinjected, {} rescued ({} late, {} behind a loss), {} tail copies",
                s.id, s.side, s.primary, s.scheduler, s.streams, s.recalls, s.reinjected_bytes,
                s.window_rescued_bytes + s.late_rescued_bytes + s.loss_rescued_bytes,
                s.late_rescued_bytes, s.loss_rescued_bytes,
                s.tail_copied_bytes
            );
            let _ = writeln!(
                o,
                "  {:<4} {:<7} {:<10} {:>11} {:>9} {:>11} {:>11} {:>12}",
                "id", "kind", "helper", "Mbit/s", "RTT ms", "B_s", "B_p", "outstanding"
            );
            for f in &s.subflows {
                let _ = writeln!(
                    o,
                    "  {:<4} {:<7} {:<10} {:>11.2} {:>9.1} {:>11} {:>11} {:>12}",
                    f.id,
                    f.kind,
                    f.helper.as_deref().unwrap_or("-"),
                    f.throughput_bps / 1e6,
                    f.rtt_ms,
                    f.queued,
                    f.pipe
                        .as_ref()
                        .map_or("-".to_string(), |p| p.buffered.to_string()),
                    f.outstanding
                );
                for l in &f.links {
                    let _ = writeln!(
                        o,
                        "       link {:<8} {:<22} cwnd {:>9} B  unacked {:>9} B  rate {:>8.2} Mbit/s{}",
                        l.name,
                        l.peer,
                        l.tcp.cwnd_bytes,
                        l.tcp.unacked_bytes,
                        l.tcp.delivery_rate as f64 * 8.0 / 1e6,
                        if l.stale { "  stale" } else { "" }
                    );
                }
            }
        }
        for r in &self.relays {
            let _ = writeln!(
                o,
                "\nrelay for {} (session {}): down {} B buffered, {} B relayed; up {} B buffered, {} B relayed; HS-Path {}",
                r.primary,
                r.session,
                r.down_buffered,
                r.down_bytes,
                r.up_buffered,
                r.up_bytes,
                if r.hs.is_some() { "up" } else { "down" }
            );
            for l in &r.pipes {
                let _ = writeln!(
                    o,
                    "       pipe {:<8} {:<22} rate {:>8.2} Mbit/s  RTT {:>7.1} ms",
                    l.name,
                    l.peer,
                    l.tcp.delivery_rate as f64 * 8.0 / 1e6,
                    l.tcp.rtt_us as f64 / 1e3
                );
            }
        }
        o
    }
}
