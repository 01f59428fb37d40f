//! `mpbond proxy`: accepts subflows from primaries and helpers, groups them into sessions, and
//! connects each stream to its origin over plain TCP (MPBond §4, "MPBond-capable proxy").
//!
//! Admission, in order, each failure answered with a `CLOSE` that says why:
//! 1. the Noise handshake authenticates the device's static key;
//! 2. `MP_CAPABLE` without a ticket opens a session only for a primary on the allowlist;
//! 3. `MP_CAPABLE` with a ticket (`INIT_MP`) or `MP_JOIN` needs a ticket signed by an allowed
//!    primary, naming the connected device, unexpired and unused; a join must name a live session
//!    of that primary;
//! 4. caps on sessions are checked.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use mpbond_core::PathKind;
use mpbond_proto::{negotiate_version, Frame, Reason, SessionId, SubflowId, MIN_VERSION, VERSION};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Semaphore};

use crate::config::{ProxyConfig, Tuning};
use crate::keys::{KeyPair, PublicKey};
use crate::link::{self, Link, Security};
use crate::net::Cidr;
use crate::session::{Event, Session, SessionHandle, SessionSpec, Side};
use crate::status::{Metrics, SessionStatus};
use crate::ticket::{Ticket, TicketVerifier};

/// Handshakes in progress at once; more connections wait, so a flood cannot exhaust memory.
const MAX_HANDSHAKES: usize = 256;
/// Time allowed for the handshake and the first frame.
const SETUP_TIMEOUT: Duration = Duration::from_secs(5);

struct Entry {
    handle: SessionHandle,
    primary: PublicKey,
}

/// The proxy's shared state.
pub struct Proxy {
    me: KeyPair,
    cfg: ProxyConfig,
    tuning: Tuning,
    deny: Vec<Cidr>,
    metrics: Arc<Metrics>,
    sessions: Mutex<HashMap<SessionId, Entry>>,
    verifier: Mutex<TicketVerifier>,
}

impl Proxy {
    /// A proxy with this identity and configuration.
    pub fn new(
        me: KeyPair,
        cfg: ProxyConfig,
        tuning: Tuning,
        metrics: Arc<Metrics>,
    ) -> Result<Arc<Proxy>, String> {
        let deny = cfg
            .deny_origins
            .iter()
            .map(|s| Cidr::parse(s))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Arc::new(Proxy {
            verifier: Mutex::new(TicketVerifier::new(me.clone())),
            me,
            cfg,
            tuning,
            deny,
            metrics,
            sessions: Mutex::new(HashMap::new()),
        }))
    }

    fn sessions(&self) -> std::sync::MutexGuard<'_, HashMap<SessionId, Entry>> {
        self.sessions.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Checks a join ticket presented by `presenter` (authentic, for this proxy, signed by an
    /// allowed primary, naming the presenter, unexpired, unused).
    fn verify_ticket(
        &self,
        ticket: &[u8],
        presenter: &PublicKey,
    ) -> Result<Ticket, (Reason, String)> {
        self.verifier
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .verify(
                ticket,
                presenter,
                |k| self.allowed(k).is_some(),
                SystemTime::now(),
            )
            .map_err(|e| (Reason::UNAUTHORIZED, e.to_string()))
    }

    fn allowed(&self, k: &PublicKey) -> Option<String> {
        self.cfg
            .allow
            .iter()
            .find(|p| p.key == *k)
            .map(|p| p.name.clone())
    }

    /// Status of every session.
    pub async fn status(&self) -> Vec<SessionStatus> {
        let handles: Vec<SessionHandle> =
            self.sessions().values().map(|e| e.handle.clone()).collect();
        let mut out = Vec::new();
        for h in handles {
            if let Some(s) = h.status().await {
                out.push(s);
            }
        }
        out
    }

    /// Accepts connections until `stop` turns true.
    pub async fn run(self: Arc<Self>, mut stop: watch::Receiver<bool>) -> std::io::Result<()> {
        let listener = TcpListener::bind(self.cfg.listen).await?;
        tracing::info!(listen = %self.cfg.listen, key = %self.me.public, "proxy listening");
        let permits = Arc::new(Semaphore::new(MAX_HANDSHAKES));
        loop {
            tokio::select! {
                r = listener.accept() => {
                    let (sock, peer) = match r {
                        Ok(x) => x,
                        Err(e) => {
                            tracing::warn!(error = %e, "accept failed");
                            tokio::time::sleep(Duration::from_millis(50)).await;
                            continue;
                        }
                    };
                    let Ok(permit) = permits.clone().acquire_owned().await else { continue };
                    let me = self.clone();
                    tokio::spawn(async move {
                        me.admit(sock, peer).await;
                        drop(permit);
                    });
                }
                _ = stop.changed() => {
                    if *stop.borrow() { break; }
                }
            }
        }
        let all: Vec<SessionHandle> = self.sessions().drain().map(|(_, e)| e.handle).collect();
        for h in all {
            let _ = h.tx.send(Event::Stop).await;
        }
        Ok(())
    }

    async fn admit(self: Arc<Self>, sock: TcpStream, peer: std::net::SocketAddr) {
        let security = if self.tuning.insecure {
            Security::Insecure
        } else {
            Security::Noise
        };
        let setup = async {
            let mut link = link::accept(sock, &self.me, security).await?;
            let mut frames = Vec::new();
            link.reader.read_frames(&mut frames).await?;
            Ok::<_, link::LinkError>((link, frames))
        };
        let (mut link, mut frames) = match tokio::time::timeout(SETUP_TIMEOUT, setup).await {
            Ok(Ok(x)) => x,
            Ok(Err(e)) => {
                Metrics::inc(&self.metrics.refused);
                tracing::info!(%peer, error = %e, "connection refused");
                return;
            }
            Err(_) => {
                Metrics::inc(&self.metrics.refused);
                tracing::info!(%peer, "connection refused: no handshake within 5 s");
                return;
            }
        };
        let first = frames.remove(0);
        let result = match first {
            Frame::MpCapable {
                ver_min,
                ver_max,
                ticket,
            } => self.open_session(&mut link, ver_min, ver_max, &ticket),
            Frame::MpJoin {
                ver_min,
                ver_max,
                session,
                ticket,
            } => self.join_session(&link, ver_min, ver_max, session, &ticket),
            other => Err((
                Reason::PROTOCOL_VIOLATION,
                format!("{} before MP_CAPABLE or MP_JOIN", other.name()),
            )),
        };
        match result {
            Ok(Admit::Open {
                handle,
                kind,
                version,
            }) => {
                let _ = link.writer.push_frame(&Frame::MpOk {
                    version,
                    subflow: SubflowId(0),
                    session: handle.id,
                });
                if link.writer.flush().await.is_err() {
                    return;
                }
                let _ = handle
                    .tx
                    .send(Event::AddLink {
                        subflow: SubflowId(0),
                        kind,
                        name: match kind {
                            PathKind::Direct => "ps".into(),
                            PathKind::Helper => "hs".into(),
                        },
                        link,
                        leftover: frames,
                        gone: None,
                    })
                    .await;
            }
            Ok(Admit::Join {
                handle,
                kind,
                helper_name,
            }) => {
                let _ = handle
                    .tx
                    .send(Event::Join {
                        link,
                        kind,
                        helper_name,
                        leftover: frames,
                    })
                    .await;
            }
            Err((code, reason)) => {
                Metrics::inc(&self.metrics.refused);
                tracing::warn!(%peer, device = %link.peer, %code, %reason, "refused");
                let _ = link.writer.push_frame(&Frame::Close { code, reason });
                let _ = tokio::time::timeout(Duration::from_secs(1), link.writer.close()).await;
            }
        }
    }

    fn version(ver_min: u8, ver_max: u8) -> Result<u8, (Reason, String)> {
        negotiate_version(ver_min, ver_max).ok_or((
            Reason::VERSION_MISMATCH,
            format!("this proxy speaks versions {MIN_VERSION} to {VERSION}"),
        ))
    }

    fn open_session(
        self: &Arc<Self>,
        link: &mut Link,
        ver_min: u8,
        ver_max: u8,
        ticket: &[u8],
    ) -> Result<Admit, (Reason, String)> {
        let version = Self::version(ver_min, ver_max)?;
        let (primary, name, kind) = if ticket.is_empty() {
            let name = self.allowed(&link.peer).ok_or((
                Reason::UNAUTHORIZED,
                "device is not on this proxy's allowlist".to_string(),
            ))?;
            (link.peer, name, PathKind::Direct)
        } else {
            // INIT_MP: a helper opens the session for its primary.
            let t = self.verify_ticket(ticket, &link.peer)?;
            let name = self.allowed(&t.primary_key).unwrap_or_default();
            (t.primary_key, name, PathKind::Helper)
        };
        if self.sessions().len() >= self.cfg.max_sessions {
            Metrics::inc(&self.metrics.limits_hit);
            return Err((
                Reason::LIMIT_REACHED,
                format!("session limit ({}) reached", self.cfg.max_sessions),
            ));
        }
        let mut raw = [0u8; 8];
        getrandom::fill(&mut raw).map_err(|e| (Reason::INTERNAL, e.to_string()))?;
        let id = SessionId(u64::from_be_bytes(raw) | 1);
        let handle = Session::spawn(SessionSpec {
            side: Side::Proxy,
            id,
            peer_name: name.clone(),
            scheduler: self.cfg.scheduler.clone(),
            tuning: self.tuning.clone(),
            max_streams: self.cfg.max_streams,
            metrics: self.metrics.clone(),
            tickets: None,
            deny_origins: self.deny.clone(),
            linger: self.cfg.session_linger.0,
            early_data: false,
            wan_radio: None,
        })
        .map_err(|e| (Reason::INTERNAL, e))?;
        self.sessions().insert(
            id,
            Entry {
                handle: handle.clone(),
                primary,
            },
        );
        // Forget the session when it ends.
        let me = self.clone();
        let mut health = handle.health.clone();
        tokio::spawn(async move {
            while health.changed().await.is_ok() {
                if health.borrow().ended {
                    break;
                }
            }
            me.sessions().remove(&id);
        });
        tracing::info!(session = %id, primary = %name, "session opened");
        Ok(Admit::Open {
            handle,
            kind,
            version,
        })
    }

    fn join_session(
        &self,
        link: &Link,
        ver_min: u8,
        ver_max: u8,
        session: SessionId,
        ticket: &[u8],
    ) -> Result<Admit, (Reason, String)> {
        Self::version(ver_min, ver_max)?;
        let t = self.verify_ticket(ticket, &link.peer)?;
        if t.session != session.0 {
            return Err((
                Reason::UNAUTHORIZED,
                "ticket is for another session".to_string(),
            ));
        }
        let sessions = self.sessions();
        let e = sessions
            .get(&session)
            .filter(|e| e.primary == t.primary_key)
            .ok_or((
                Reason::UNAUTHORIZED,
                "no such session for this primary".to_string(),
            ))?;
        let kind = if link.peer == t.primary_key {
            PathKind::Direct
        } else {
            PathKind::Helper
        };
        Ok(Admit::Join {
            handle: e.handle.clone(),
            kind,
            helper_name: link.peer.fingerprint(),
        })
    }
}

enum Admit {
    Open {
        handle: SessionHandle,
        kind: PathKind,
        version: u8,
    },
    Join {
        handle: SessionHandle,
        kind: PathKind,
        helper_name: String,
    },
}
