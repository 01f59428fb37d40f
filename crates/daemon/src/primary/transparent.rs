//! Transparent interception: nftables redirects chosen outgoing TCP connections to a local port,
//! where the primary reads each one's original destination (SO_ORIGINAL_DST) and carries it
//! like a SOCKS connection.
//!
//! The rules live in their own table, `inet mpbond_<port>`, created at start and deleted when
//! the [`RulesGuard`] drops: on a clean exit, and after SIGINT or SIGTERM, which the daemon turns
//! into a clean exit. A table left by a crashed run is replaced at the next start. The daemon's
//! own connections carry a socket mark ([`OWN_MARK`]) that the rules skip, so mpbond never
//! intercepts itself.

use std::net::SocketAddr;
use std::process::Stdio;
use std::time::Duration;

use mpbond_proto::{Destination, Host};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;
use tokio::sync::watch;

use super::Current;
use crate::config::TransparentConfig;
use crate::session::Event;

/// The socket mark of mpbond's own connections.
pub const OWN_MARK: u32 = 0x4d50_424e;

/// The nftables script for a configuration.
pub fn rules(cfg: &TransparentConfig) -> String {
    let table = table_name(cfg);
    let port = cfg.listen.port();
    let mut matches = Vec::new();
    let ports = if cfg.ports.is_empty() {
        String::new()
    } else {
        format!(
            " tcp dport {{ {} }}",
            cfg.ports
                .iter()
                .map(|p| p.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    let uids = if cfg.uids.is_empty() {
        String::new()
    } else {
        format!(
            " meta skuid {{ {} }}",
            cfg.uids
                .iter()
                .map(|u| u.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    if cfg.cgroups.is_empty() {
        matches.push(format!("{uids}{ports}"));
    } else {
        for c in &cfg.cgroups {
            let c = c.trim_matches('/');
            let level = c.split('/').count();
            matches.push(format!(
                " socket cgroupv2 level {level} \"{c}\"{uids}{ports}"
            ));
        }
    }
    let mut s = format!(
        "table inet {table} {{\n  chain output {{\n    type nat hook output priority -100; policy accept;\n    meta mark {OWN_MARK:#x} return\n"
    );
    for m in matches {
        s.push_str(&format!("    meta l4proto tcp{m} redirect to :{port}\n"));
    }
    s.push_str("  }\n}\n");
    s
}

fn table_name(cfg: &TransparentConfig) -> String {
    format!("mpbond_{}", cfg.listen.port())
}

async fn nft(script: &str) -> std::io::Result<()> {
    let mut child = tokio::process::Command::new("nft")
        .arg("-f")
        .arg("-")
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| {
            std::io::Error::new(
                e.kind(),
                format!("cannot run nft ({e}); install nftables for transparent mode"),
            )
        })?;
    if let Some(mut i) = child.stdin.take() {
        i.write_all(script.as_bytes()).await?;
    }
    let out = child.wait_with_output().await?;
    if out.status.success() {
        Ok(())
    } else {
        Err(std::io::Error::other(format!(
            "nft failed (root or CAP_NET_ADMIN needed): {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )))
    }
}

/// Deletes the table when dropped.
#[derive(Debug)]
pub struct RulesGuard {
    table: String,
}

impl Drop for RulesGuard {
    fn drop(&mut self) {
        let r = std::process::Command::new("nft")
            .args(["delete", "table", "inet", &self.table])
            .stderr(Stdio::null())
            .status();
        match r {
            Ok(s) if s.success() => tracing::info!(table = %self.table, "nftables rules removed"),
            _ => tracing::warn!(table = %self.table, "could not remove nftables rules"),
        }
    }
}

/// Binds the redirect target and installs the rules.
pub async fn start(cfg: &TransparentConfig) -> std::io::Result<(TcpListener, RulesGuard)> {
    let l = TcpListener::bind(cfg.listen).await?;
    let table = table_name(cfg);
    let _ = nft(&format!("table inet {table}\ndelete table inet {table}\n")).await;
    nft(&rules(cfg)).await?;
    tracing::info!(%table, listen = %cfg.listen, "transparent interception on");
    Ok((l, RulesGuard { table }))
}

/// Accepts redirected connections.
pub async fn serve(listener: TcpListener, current: Current, mut stop: watch::Receiver<bool>) {
    loop {
        let (sock, peer) = tokio::select! {
            r = listener.accept() => match r {
                Ok(x) => x,
                Err(_) => {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = stop.changed() => return,
        };
        let ipv6 = matches!(sock.local_addr(), Ok(SocketAddr::V6(_)));
        let dst = match crate::sys::original_dst(&sock, ipv6) {
            Ok(d) => d,
            Err(e) => {
                tracing::warn!(%peer, error = %e, "no original destination; not a redirected connection");
                continue;
            }
        };
        let dest = Destination {
            host: match dst {
                SocketAddr::V4(a) => Host::V4(*a.ip()),
                SocketAddr::V6(a) => Host::V6(*a.ip()),
            },
            port: dst.port(),
        };
        let handle = current.borrow().clone();
        if let Some(h) = handle {
            let _ = sock.set_nodelay(true);
            let _ =
                h.tx.send(Event::Open {
                    dest,
                    sock,
                    socks: false,
                })
                .await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_match_ports_uids_and_cgroups() {
        let cfg = TransparentConfig {
            listen: "127.0.0.1:1081".parse().unwrap(),
            ports: vec![80, 443],
            uids: vec![1000],
            cgroups: vec!["/user.slice/app.scope".into()],
        };
        let r = rules(&cfg);
        assert!(r.contains("table inet mpbond_1081"));
        assert!(r.contains("meta mark 0x4d50424e return"));
        assert!(r.contains(
            "meta l4proto tcp socket cgroupv2 level 2 \"user.slice/app.scope\" meta skuid { 1000 } tcp dport { 80, 443 } redirect to :1081"
        ));
        let all = rules(&TransparentConfig {
            ports: vec![],
            uids: vec![],
            cgroups: vec![],
            ..cfg
        });
        assert!(all.contains("    meta l4proto tcp redirect to :1081\n"));
    }
}
