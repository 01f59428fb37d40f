//! What mpbond's senders did in a run, read from the daemons' own control endpoints
//! (`GET /status` and `GET /metrics`, `[control]` in their configuration) once the workload
//! is over: PAMS recalls (MPBond §4.3.4), the bytes sent a second time (recalls, window and
//! late-head rescues, dead subflows) and the links that failed.
//!
//! These are the costs a scheme's time and energy do not show by themselves: a duplicate
//! byte crosses a radio twice, and a link the proxy declares dead (no ACK within the stall
//! timeout, as when an LTE uplink goes out) costs a reconnect and a fresh slow start. The
//! counters run from the daemons' start, so a `--warm` download is included.

use std::net::SocketAddr;
use std::time::Duration;

use mpbond_daemon::status::NodeStatus;
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The loopback port of every lab daemon's control endpoint (in its own namespace).
pub const CONTROL_PORT: u16 = 9700;

/// The `[control]` section the lab gives a daemon.
pub fn control_section() -> String {
    format!("[control]\nlisten = \"127.0.0.1:{CONTROL_PORT}\"\n")
}

/// Sender-side activity of mpbond's sessions in one run, summed over the daemons asked (the
/// proxy sends downloads, the primary uploads).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct SchedStats {
    /// PAMS recalls (MPBond §4.3.4).
    pub recalls: u64,
    /// Payload bytes sent a second time: recalled, rescued, or taken from dead subflows.
    pub reinjected_bytes: u64,
    /// Bytes taken back by window rescues (`Sender::window_rescue`).
    pub window_rescued_bytes: u64,
    /// Bytes taken back by late-head rescues (`Sender::late_rescue`).
    pub late_rescued_bytes: u64,
    /// Bytes taken back by loss rescues (`Sender::late_rescue`).
    #[serde(default)]
    pub loss_rescued_bytes: u64,
    /// Bytes copied by the tail copy (`Sender::tail_copy`).
    #[serde(default)]
    pub tail_copied_bytes: u64,
    /// Links that failed (stall timeout, reset, protocol error).
    pub links_failed: u64,
    /// Times a WAN link stalled and went stale, keeping its connection (none before
    /// `mpbond_daemon::liveness`).
    #[serde(default)]
    pub links_stale: u64,
}

impl SchedStats {
    /// Adds one daemon's status and Prometheus metrics text.
    pub fn add(&mut self, status: &NodeStatus, metrics: &str) {
        for s in &status.sessions {
            self.recalls += s.recalls;
            self.reinjected_bytes += s.reinjected_bytes;
            self.window_rescued_bytes += s.window_rescued_bytes;
            self.late_rescued_bytes += s.late_rescued_bytes;
            self.loss_rescued_bytes += s.loss_rescued_bytes;
            self.tail_copied_bytes += s.tail_copied_bytes;
        }
        self.links_failed += metric(metrics, "mpbond_links_failed_total").unwrap_or(0);
        self.links_stale += metric(metrics, "mpbond_links_stale_total").unwrap_or(0);
    }
}

/// The value of counter `name` in Prometheus text.
fn metric(text: &str, name: &str) -> Option<u64> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .find_map(|l| {
            let mut it = l.split_whitespace();
            (it.next() == Some(name)).then(|| it.next())?
        })
        .and_then(|v| v.parse().ok())
}

/// One daemon's status and metrics, from inside its namespace.
pub async fn query(port: u16) -> anyhow::Result<(NodeStatus, String)> {
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let status = get(addr, "/status").await?;
    let status: NodeStatus = serde_json::from_str(&status)
        .map_err(|e| anyhow::anyhow!("the control endpoint's /status is not a status: {e}"))?;
    let metrics = get(addr, "/metrics").await?;
    Ok((status, metrics))
}

/// Whether a daemon's sessions are all up: `sessions` of them, each with `subflows`
/// subflows that have every link they need (`links(kind)`: one for the direct subflow and
/// at the proxy, one per pipe for a helper subflow at the primary).
pub fn connected(
    status: &NodeStatus,
    sessions: usize,
    subflows: usize,
    links: impl Fn(&str) -> usize,
) -> bool {
    status.sessions.len() == sessions
        && status.sessions.iter().all(|s| {
            s.subflows.len() == subflows
                && s.subflows.iter().all(|f| f.links.len() >= links(&f.kind))
        })
}

/// Polls the control endpoint on `port` until `ready` holds for its status or `within`
/// has passed; answers how long it took, or the last status seen (None if the endpoint
/// never answered) when it gave up.
pub async fn wait_until(
    port: u16,
    within: Duration,
    ready: impl Fn(&NodeStatus) -> bool,
) -> Result<Duration, Option<NodeStatus>> {
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let began = tokio::time::Instant::now();
    let mut last = None;
    loop {
        if let Ok(body) = get(addr, "/status").await {
            if let Ok(status) = serde_json::from_str::<NodeStatus>(&body) {
                if ready(&status) {
                    return Ok(began.elapsed());
                }
                last = Some(status);
            }
        }
        if began.elapsed() >= within {
            return Err(last);
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The body of `GET path` (HTTP/1.0, the endpoint closes after answering), within 5 s.
async fn get(addr: SocketAddr, path: &str) -> anyhow::Result<String> {
    let fetch = async {
        let mut s = TcpStream::connect(addr).await?;
        s.write_all(format!("GET {path} HTTP/1.0\r\n\r\n").as_bytes())
            .await?;
        let mut buf = Vec::new();
        s.read_to_end(&mut buf).await?;
        anyhow::Ok(buf)
    };
    let buf = tokio::time::timeout(Duration::from_secs(5), fetch)
        .await
        .map_err(|_| anyhow::anyhow!("the control endpoint at {addr} did not answer in 5 s"))??;
    let text = String::from_utf8_lossy(&buf);
    let (head, body) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| anyhow::anyhow!("{addr}{path}: no HTTP response"))?;
    if !head.starts_with("HTTP/1.0 200") {
        anyhow::bail!(
            "{addr}{path}: {}",
            head.lines().next().unwrap_or("no status line")
        );
    }
    Ok(body.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use mpbond_daemon::status::{LinkStatus, SessionStatus, SubflowStatus};

    fn session(recalls: u64, reinjected: u64, window: u64, late: u64) -> SessionStatus {
        let tail = late / 2;
        SessionStatus {
            id: "s".into(),
            side: "proxy".into(),
            primary: "phone".into(),
            scheduler: "pams".into(),
            streams: 0,
            subflows: Vec::new(),
            recalls,
            reinjected_bytes: reinjected,
            window_rescued_bytes: window,
            late_rescued_bytes: late,
            loss_rescued_bytes: late / 5,
            tail_copied_bytes: tail,
        }
    }

    /// Sessions add up; the failed links come from the metrics' counter, not from a
    /// similarly named line or a comment.
    #[test]
    fn stats_sum_sessions_and_read_the_failed_links() {
        let st = NodeStatus {
            sessions: vec![session(2, 300, 100, 50), session(1, 20, 0, 20)],
            ..NodeStatus::default()
        };
        let metrics = "# HELP mpbond_links_failed_total Links that failed.\n\
                       # TYPE mpbond_links_failed_total counter\n\
                       mpbond_links_failed_total 3\n\
                       mpbond_links_failed_total_extra 9\n\
                       mpbond_links_stale_total 5\n";
        let mut s = SchedStats::default();
        s.add(&st, metrics);
        s.add(&NodeStatus::default(), "mpbond_links_failed_total 1\n");
        assert_eq!(
            s,
            SchedStats {
                recalls: 3,
                reinjected_bytes: 320,
                window_rescued_bytes: 100,
                late_rescued_bytes: 70,
                loss_rescued_bytes: 14,
                tail_copied_bytes: 35,
                links_failed: 4,
                links_stale: 5,
            }
        );
        assert_eq!(metric("garbage", "mpbond_links_failed_total"), None);
    }

    fn subflow(kind: &str, links: usize) -> SubflowStatus {
        SubflowStatus {
            id: 0,
            kind: kind.into(),
            helper: None,
            throughput_bps: 0.0,
            rtt_ms: 0.0,
            queued: 0,
            outstanding: 0,
            bytes_scheduled: 0,
            radios: None,
            pipe: None,
            links: (0..links)
                .map(|i| LinkStatus {
                    name: format!("l{i}"),
                    peer: String::new(),
                    pending: 0,
                    tcp: Default::default(),
                    pacing_cap: None,
                    congestion: String::new(),
                    stale: false,
                })
                .collect(),
        }
    }

    /// A daemon is connected only with every session, every subflow and every link it
    /// needs: a helper subflow short of a pipe, a missing subflow or a missing session is not.
    #[test]
    fn connected_needs_every_session_subflow_and_link() {
        let with = |subflows: Vec<SubflowStatus>| SessionStatus {
            subflows,
            ..session(0, 0, 0, 0)
        };
        let node = |sessions: Vec<SessionStatus>| NodeStatus {
            sessions,
            ..NodeStatus::default()
        };
        let links = |k: &str| if k == "helper" { 2 } else { 1 };
        let full = with(vec![subflow("direct", 1), subflow("helper", 2)]);
        assert!(connected(&node(vec![full.clone()]), 1, 2, links));
        assert!(!connected(&node(vec![full.clone()]), 2, 2, links));
        assert!(!connected(&node(vec![]), 1, 2, links));
        let short_pipe = with(vec![subflow("direct", 1), subflow("helper", 1)]);
        assert!(!connected(&node(vec![short_pipe]), 1, 2, links));
        let no_helper = with(vec![subflow("direct", 1)]);
        assert!(!connected(&node(vec![no_helper]), 1, 2, links));
        let no_link = with(vec![subflow("direct", 0), subflow("helper", 2)]);
        assert!(!connected(&node(vec![no_link, full]), 2, 2, links));
    }

    /// The query reads a real HTTP/1.0 exchange and says what went wrong otherwise.
    #[tokio::test]
    async fn query_reads_status_and_metrics_and_rejects_errors() {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = l.local_addr().unwrap().port();
        let body = serde_json::to_string(&NodeStatus {
            sessions: vec![session(1, 2, 3, 4)],
            ..NodeStatus::default()
        })
        .unwrap();
        let server = tokio::spawn(async move {
            for _ in 0..3 {
                let (mut s, _) = l.accept().await.unwrap();
                let mut req = [0u8; 256];
                let n = s.read(&mut req).await.unwrap();
                let req = String::from_utf8_lossy(&req[..n]).to_string();
                let reply = if req.starts_with("GET /status") {
                    format!("HTTP/1.0 200 OK\r\n\r\n{body}")
                } else if req.starts_with("GET /metrics") {
                    "HTTP/1.0 200 OK\r\n\r\nmpbond_links_failed_total 2\n".to_string()
                } else {
                    "HTTP/1.0 404 Not Found\r\n\r\n".to_string()
                };
                s.write_all(reply.as_bytes()).await.unwrap();
            }
        });
        let (st, m) = query(port).await.unwrap();
        let mut s = SchedStats::default();
        s.add(&st, &m);
        assert_eq!((s.recalls, s.links_failed), (1, 2));
        let e = get(SocketAddr::from(([127, 0, 0, 1], port)), "/nothing")
            .await
            .unwrap_err();
        assert!(e.to_string().contains("404"), "{e}");
        server.await.unwrap();
    }
    /// Waiting gives up after its time with what it saw: nothing from an endpoint that
    /// never answers, the last status from one whose daemon never got ready.
    #[tokio::test]
    async fn waiting_gives_up_with_what_it_saw() {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = l.local_addr().unwrap().port();
        drop(l);
        let r = wait_until(port, Duration::from_millis(30), |_| true).await;
        assert!(matches!(r, Err(None)), "{r:?}");

        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = l.local_addr().unwrap().port();
        let body = serde_json::to_string(&NodeStatus {
            sessions: vec![session(7, 0, 0, 0)],
            ..NodeStatus::default()
        })
        .unwrap();
        let server = tokio::spawn(async move {
            loop {
                let (mut s, _) = l.accept().await.unwrap();
                let mut req = [0u8; 256];
                let _ = s.read(&mut req).await;
                let _ = s
                    .write_all(format!("HTTP/1.0 200 OK\r\n\r\n{body}").as_bytes())
                    .await;
            }
        });
        let r = wait_until(port, Duration::from_millis(50), |st| st.sessions.len() == 2).await;
        match r {
            Err(Some(st)) => assert_eq!(st.sessions[0].recalls, 7),
            other => panic!("{other:?}"),
        }
        let r = wait_until(port, Duration::from_secs(5), |st| st.sessions.len() == 1).await;
        assert!(r.is_ok_and(|t| t < Duration::from_secs(5)));
        server.abort();
    }
}
