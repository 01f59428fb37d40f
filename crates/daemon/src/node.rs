//! One mpbond process: the roles its configuration names, the control endpoint, and signal
//! handling. Several roles in one process is dual mode (MPBond §4.4.1).

use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::config::Config;
use crate::helper::Helper;
use crate::keys::KeyPair;
use crate::primary::Primary;
use crate::proxy::Proxy;
use crate::status::{Metrics, NodeStatus};

/// Which roles to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Roles {
    /// Run `[proxy]`.
    pub proxy: bool,
    /// Run `[primary]`.
    pub primary: bool,
    /// Run `[helper]`.
    pub helper: bool,
}

/// The running roles, for status.
pub struct Node {
    key: KeyPair,
    metrics: Arc<Metrics>,
    proxy: Option<Arc<Proxy>>,
    primary: Option<Arc<Primary>>,
    helper: Option<Arc<Helper>>,
}

impl Node {
    /// A snapshot of everything.
    pub async fn status(&self) -> NodeStatus {
        let mut s = NodeStatus {
            device: self.key.public.to_string(),
            ..NodeStatus::default()
        };
        if let Some(p) = &self.proxy {
            s.roles.push("proxy".into());
            s.sessions.extend(p.status().await);
        }
        if let Some(p) = &self.primary {
            s.roles.push("primary".into());
            let h = p.current().borrow().clone();
            if let Some(h) = h {
                if let Some(st) = h.status().await {
                    s.sessions.push(st);
                }
            }
        }
        if let Some(h) = &self.helper {
            s.roles.push("helper".into());
            s.relays.extend(h.status());
        }
        s
    }
}

/// Runs `roles` from `cfg` until SIGINT or SIGTERM.
pub async fn run(cfg: Config, roles: Roles) -> anyhow::Result<()> {
    let key = KeyPair::load(&cfg.key)?;
    let metrics = Arc::new(Metrics::default());
    let (stop_tx, stop) = watch::channel(false);
    let mut tasks = tokio::task::JoinSet::new();
    let mut node = Node {
        key: key.clone(),
        metrics: metrics.clone(),
        proxy: None,
        primary: None,
        helper: None,
    };
    if cfg.tuning.insecure {
        tracing::warn!("insecure = true: links are neither authenticated nor encrypted");
    }
    if roles.proxy {
        let pc = cfg
            .proxy
            .clone()
            .ok_or_else(|| anyhow::anyhow!("the configuration has no [proxy] section"))?;
        let p = Proxy::new(key.clone(), pc, cfg.tuning.clone(), metrics.clone())
            .map_err(|e| anyhow::anyhow!(e))?;
        node.proxy = Some(p.clone());
        tasks.spawn(p.run(stop.clone()));
    }
    if roles.helper {
        let hc = cfg
            .helper
            .clone()
            .ok_or_else(|| anyhow::anyhow!("the configuration has no [helper] section"))?;
        let h = Helper::new(key.clone(), hc, cfg.tuning.clone(), metrics.clone());
        node.helper = Some(h.clone());
        tasks.spawn(h.run(stop.clone()));
    }
    if roles.primary {
        let pc = cfg
            .primary
            .clone()
            .ok_or_else(|| anyhow::anyhow!("the configuration has no [primary] section"))?;
        let p = Primary::new(key.clone(), pc, cfg.tuning.clone(), metrics.clone());
        node.primary = Some(p.clone());
        tasks.spawn(p.run(stop.clone()));
    }
    let node = Arc::new(node);
    if let Some(c) = &cfg.control {
        let l = TcpListener::bind(c.listen).await?;
        tracing::info!(listen = %c.listen, "control endpoint: GET /status, GET /metrics");
        tokio::spawn(serve_control(l, node.clone(), stop.clone()));
    }
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    let mut failed: anyhow::Result<()> = Ok(());
    tokio::select! {
        _ = tokio::signal::ctrl_c() => tracing::info!("SIGINT: shutting down"),
        _ = term.recv() => tracing::info!("SIGTERM: shutting down"),
        Some(r) = tasks.join_next() => {
            failed = match r {
                Ok(Ok(())) => Ok(()),
                Ok(Err(e)) => Err(anyhow::anyhow!(e)),
                Err(e) => Err(anyhow::anyhow!("a role stopped: {e}")),
            };
        }
    }
    let _ = stop_tx.send(true);
    let _ = tokio::time::timeout(Duration::from_secs(3), async {
        while tasks.join_next().await.is_some() {}
    })
    .await;
    failed
}

/// A minimal HTTP/1.0 responder for `GET /status` (JSON) and `GET /metrics` (Prometheus), on
/// loopback only (the configuration refuses other addresses).
async fn serve_control(l: TcpListener, node: Arc<Node>, mut stop: watch::Receiver<bool>) {
    loop {
        let (mut s, _) = tokio::select! {
            r = l.accept() => match r { Ok(x) => x, Err(_) => continue },
            _ = stop.changed() => return,
        };
        let node = node.clone();
        tokio::spawn(async move {
            // Read the request head (bounded), so no unread bytes turn our close into a reset.
            let mut buf = Vec::with_capacity(1024);
            let read_head = async {
                let mut chunk = [0u8; 1024];
                while !buf.windows(4).any(|w| w == b"\r\n\r\n") && buf.len() < 8192 {
                    match s.read(&mut chunk).await {
                        Ok(0) | Err(_) => break,
                        Ok(k) => buf.extend_from_slice(&chunk[..k]),
                    }
                }
            };
            if tokio::time::timeout(Duration::from_secs(5), read_head)
                .await
                .is_err()
            {
                return;
            }
            let n = buf.len();
            let req = String::from_utf8_lossy(&buf[..n]);
            let path = req.split_whitespace().nth(1).unwrap_or("/");
            let (code, ctype, body) = match path {
                "/status" => {
                    let st = node.status().await;
                    (
                        "200 OK",
                        "application/json",
                        serde_json::to_string_pretty(&st).unwrap_or_default(),
                    )
                }
                "/metrics" => {
                    let st = node.status().await;
                    (
                        "200 OK",
                        "text/plain; version=0.0.4",
                        node.metrics.render(&st),
                    )
                }
                _ => (
                    "404 Not Found",
                    "text/plain",
                    "try /status or /metrics\n".into(),
                ),
            };
            let head = format!(
                "HTTP/1.0 {code}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            );
            let _ = s.write_all(head.as_bytes()).await;
            let _ = s.write_all(body.as_bytes()).await;
        });
    }
}
