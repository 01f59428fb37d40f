//! `mpbond helper`: lends this device's WAN link to paired primaries.
//!
//! It accepts pipes only from primaries on its allowlist (Noise-authenticated), keeps one
//! [`Relay`] per primary, and serves several primaries at once. Dual mode (MPBond §4.4.1) is a
//! device running this and a primary in one process.

mod queue;
mod relay;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mpbond_proto::{negotiate_version, Frame, Reason, MIN_VERSION, VERSION};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Semaphore};

use crate::config::{HelperConfig, Tuning};
use crate::keys::{KeyPair, PublicKey};
use crate::link::{self, Security};
use crate::status::{Metrics, RelayStatus};

pub use queue::RelayQueue;
pub use relay::Relay;

const SETUP_TIMEOUT: Duration = Duration::from_secs(5);
const MAX_HANDSHAKES: usize = 64;

/// What every relay of this helper shares.
pub struct HelperShared {
    /// The helper's key pair.
    pub me: KeyPair,
    /// Its configuration.
    pub cfg: HelperConfig,
    /// Shared tuning.
    pub tuning: Tuning,
    /// Counters.
    pub metrics: Arc<Metrics>,
}

/// The helper role.
pub struct Helper {
    shared: Arc<HelperShared>,
    relays: Mutex<HashMap<PublicKey, Arc<Relay>>>,
}

impl Helper {
    /// A helper with this identity and configuration.
    pub fn new(me: KeyPair, cfg: HelperConfig, tuning: Tuning, metrics: Arc<Metrics>) -> Arc<Self> {
        Arc::new(Helper {
            shared: Arc::new(HelperShared {
                me,
                cfg,
                tuning,
                metrics,
            }),
            relays: Mutex::new(HashMap::new()),
        })
    }

    fn relays(&self) -> std::sync::MutexGuard<'_, HashMap<PublicKey, Arc<Relay>>> {
        self.relays.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Status of every relay.
    pub fn status(&self) -> Vec<RelayStatus> {
        self.relays().values().map(|r| r.status()).collect()
    }

    /// Accepts pipes until `stop` turns true.
    pub async fn run(self: Arc<Self>, mut stop: watch::Receiver<bool>) -> std::io::Result<()> {
        let l = TcpListener::bind(self.shared.cfg.listen).await?;
        tracing::info!(listen = %self.shared.cfg.listen, key = %self.shared.me.public, "helper listening for pipes");
        let permits = Arc::new(Semaphore::new(MAX_HANDSHAKES));
        let mut sweep = tokio::time::interval(Duration::from_secs(5));
        loop {
            tokio::select! {
                r = l.accept() => {
                    let Ok((sock, peer)) = r else {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    };
                    let Ok(permit) = permits.clone().acquire_owned().await else { continue };
                    let me = self.clone();
                    tokio::spawn(async move {
                        me.admit(sock, peer).await;
                        drop(permit);
                    });
                }
                _ = sweep.tick() => {
                    self.relays().retain(|_, r| r.idle_for().is_none_or(|d| d < Duration::from_secs(30)));
                }
                _ = stop.changed() => if *stop.borrow() { break },
            }
        }
        for (_, r) in self.relays().drain() {
            r.stop();
        }
        Ok(())
    }

    async fn admit(self: &Arc<Self>, sock: TcpStream, peer: std::net::SocketAddr) {
        let sec = if self.shared.tuning.insecure {
            Security::Insecure
        } else {
            Security::Noise
        };
        let setup = async {
            let mut link = link::accept(sock, &self.shared.me, sec).await?;
            let mut frames = Vec::new();
            link.reader.read_frames(&mut frames).await?;
            Ok::<_, link::LinkError>((link, frames))
        };
        let (mut link, mut frames) = match tokio::time::timeout(SETUP_TIMEOUT, setup).await {
            Ok(Ok(x)) => x,
            Ok(Err(e)) => {
                Metrics::inc(&self.shared.metrics.refused);
                tracing::info!(%peer, error = %e, "pipe refused");
                return;
            }
            Err(_) => {
                Metrics::inc(&self.shared.metrics.refused);
                tracing::info!(%peer, "pipe refused: no handshake within 5 s");
                return;
            }
        };
        let refuse = |code: Reason, reason: String| Frame::Close { code, reason };
        let allowed = self
            .shared
            .cfg
            .allow
            .iter()
            .find(|p| p.key == link.peer)
            .map(|p| p.name.clone());
        let verdict = match (frames.remove(0), allowed) {
            (_, None) => Err(refuse(
                Reason::UNAUTHORIZED,
                "device is not paired with this helper".into(),
            )),
            (
                Frame::PipeOpen {
                    ver_min,
                    ver_max,
                    name,
                    ..
                },
                Some(primary),
            ) => match negotiate_version(ver_min, ver_max) {
                Some(v) => Ok((v, name, primary)),
                None => Err(refuse(
                    Reason::VERSION_MISMATCH,
                    format!("this helper speaks versions {MIN_VERSION} to {VERSION}"),
                )),
            },
            (other, Some(_)) => Err(refuse(
                Reason::PROTOCOL_VIOLATION,
                format!("{} before PIPE_OPEN", other.name()),
            )),
        };
        let (version, pipe_name, primary_name) = match verdict {
            Ok(x) => x,
            Err(close) => {
                Metrics::inc(&self.shared.metrics.refused);
                tracing::warn!(%peer, device = %link.peer, frame = ?close, "pipe refused");
                let _ = link.writer.push_frame(&close);
                let _ = tokio::time::timeout(Duration::from_secs(1), link.writer.close()).await;
                return;
            }
        };
        let relay = {
            let mut relays = self.relays();
            if !relays.contains_key(&link.peer) && relays.len() >= self.shared.cfg.max_primaries {
                None
            } else {
                Some(
                    relays
                        .entry(link.peer)
                        .or_insert_with(|| {
                            Relay::start(link.peer, primary_name.clone(), self.shared.clone())
                        })
                        .clone(),
                )
            }
        };
        let Some(relay) = relay else {
            Metrics::inc(&self.shared.metrics.limits_hit);
            let _ = link.writer.push_frame(&refuse(
                Reason::LIMIT_REACHED,
                format!(
                    "serving {} primaries already",
                    self.shared.cfg.max_primaries
                ),
            ));
            let _ = link.writer.close().await;
            return;
        };
        let _ = link.writer.push_frame(&Frame::PipeOk { version });
        if link.writer.flush().await.is_err() {
            return;
        }
        relay.add_pipe(link, pipe_name, frames);
    }
}
