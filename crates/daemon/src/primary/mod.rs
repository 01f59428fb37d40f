//! `mpbond primary`: the device where applications run.
//!
//! A supervisor keeps one session with the proxy: it opens the PS-Path (`MP_CAPABLE`), and if
//! that path fails while helpers keep the session alive, it rejoins with a ticket it issues to
//! itself (`MP_JOIN`). When the session is lost (the proxy restarted), open streams end with a
//! reset and a new session is opened. A pipe manager per configured pipe keeps each pipe to
//! each helper connected and hands it to the current session, which asks the helper to join
//! (`INIT_MP_JOIN`). Applications come in through SOCKS5 ([`socks`]) or transparent
//! interception ([`transparent`]).

pub mod socks;
pub mod transparent;

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use mpbond_core::PathKind;
use mpbond_proto::{Frame, SessionId, SubflowId, MIN_VERSION, VERSION};
use tokio::sync::{oneshot, watch};

use crate::config::{HelperPeer, PipeConfig, PrimaryConfig, Tuning};
use crate::keys::KeyPair;
use crate::link::{self, Link, LinkError, Security};
use crate::net;
use crate::session::{Event, Session, SessionHandle, SessionSpec, Side, TicketIssuer};
use crate::status::Metrics;
use crate::ticket::Ticket;

/// The handle of the current session, if any.
pub type Current = watch::Receiver<Option<SessionHandle>>;

/// The primary role.
pub struct Primary {
    me: KeyPair,
    cfg: PrimaryConfig,
    tuning: Tuning,
    metrics: Arc<Metrics>,
    current: watch::Sender<Option<SessionHandle>>,
}

/// Why opening or joining failed.
#[derive(Debug, thiserror::Error)]
enum SetupError {
    #[error("{0}")]
    Link(#[from] LinkError),
    #[error("proxy refused: {0}")]
    Refused(String),
    #[error("timed out")]
    Timeout,
    #[error("{0}")]
    Other(String),
}

fn security(t: &Tuning) -> Security {
    if t.insecure {
        Security::Insecure
    } else {
        Security::Noise
    }
}

impl Primary {
    /// A primary with this identity and configuration.
    pub fn new(
        me: KeyPair,
        cfg: PrimaryConfig,
        tuning: Tuning,
        metrics: Arc<Metrics>,
    ) -> Arc<Self> {
        let (current, _) = watch::channel(None);
        Arc::new(Primary {
            me,
            cfg,
            tuning,
            metrics,
            current,
        })
    }

    /// The current session.
    pub fn current(&self) -> Current {
        self.current.subscribe()
    }

    /// Runs everything: the supervisor, the pipe managers and the application front ends.
    pub async fn run(self: Arc<Self>, stop: watch::Receiver<bool>) -> std::io::Result<()> {
        let mut tasks = Vec::new();
        for h in &self.cfg.helper {
            for p in &h.pipe {
                tasks.push(tokio::spawn(self.clone().pipe_manager(
                    h.clone(),
                    p.clone(),
                    stop.clone(),
                )));
            }
        }
        let mut guard = None;
        if let Some(addr) = self.cfg.socks {
            let l = tokio::net::TcpListener::bind(addr).await?;
            tracing::info!(%addr, "SOCKS5 listening");
            tasks.push(tokio::spawn(socks::serve(
                l,
                self.current(),
                self.cfg.max_streams,
                stop.clone(),
            )));
        }
        if let Some(t) = &self.cfg.transparent {
            let (l, g) = transparent::start(t).await?;
            guard = Some(g);
            tasks.push(tokio::spawn(transparent::serve(
                l,
                self.current(),
                stop.clone(),
            )));
        }
        self.clone().supervise(stop).await;
        for t in tasks {
            t.abort();
        }
        drop(guard);
        Ok(())
    }

    async fn supervise(self: Arc<Self>, mut stop: watch::Receiver<bool>) {
        let mut backoff = Duration::from_millis(200);
        while !*stop.borrow() {
            let opened = tokio::select! {
                r = self.open() => r,
                _ = stop.changed() => break,
            };
            let (link, session, leftover) = match opened {
                Ok(x) => {
                    backoff = Duration::from_millis(200);
                    x
                }
                Err(e) => {
                    tracing::warn!(proxy = %self.cfg.proxy, error = %e, retry_in = ?backoff, "cannot open a session");
                    tokio::select! {
                        _ = tokio::time::sleep(backoff) => {}
                        _ = stop.changed() => break,
                    }
                    backoff = (backoff * 2).min(Duration::from_secs(5));
                    continue;
                }
            };
            let handle = match Session::spawn(SessionSpec {
                side: Side::Primary,
                id: session,
                peer_name: "proxy".into(),
                scheduler: self.cfg.scheduler.clone(),
                tuning: self.tuning.clone(),
                max_streams: self.cfg.max_streams,
                metrics: self.metrics.clone(),
                tickets: Some(TicketIssuer {
                    me: self.me.clone(),
                    proxy_key: self.cfg.proxy_key,
                    proxy_addr: self.cfg.proxy.clone(),
                }),
                deny_origins: Vec::new(),
                linger: Duration::from_secs(3),
                early_data: self.cfg.early_data,
                wan_radio: self.cfg.wan_radio,
            }) {
                Ok(h) => h,
                Err(e) => {
                    tracing::error!(error = %e, "cannot start a session");
                    return;
                }
            };
            let _ = handle
                .tx
                .send(Event::AddLink {
                    subflow: SubflowId(0),
                    kind: PathKind::Direct,
                    name: "ps".into(),
                    link,
                    leftover,
                    gone: None,
                })
                .await;
            tracing::info!(session = %session, "session with the proxy is up");
            self.current.send_replace(Some(handle.clone()));
            self.watch_session(&handle, &mut stop).await;
            self.current.send_replace(None);
            let _ = handle.tx.send(Event::Stop).await;
        }
    }

    /// Follows a session until it ends, rejoining its PS-Path when that path fails.
    async fn watch_session(&self, handle: &SessionHandle, stop: &mut watch::Receiver<bool>) {
        let mut health = handle.health.clone();
        let mut backoff = Duration::from_millis(200);
        let mut seen_direct = false;
        loop {
            let h = *health.borrow();
            if h.ended {
                return;
            }
            seen_direct |= h.direct;
            if seen_direct && !h.direct {
                match self.rejoin(handle.id).await {
                    Ok((link, sf, leftover)) => {
                        backoff = Duration::from_millis(200);
                        let _ = handle
                            .tx
                            .send(Event::AddLink {
                                subflow: sf,
                                kind: PathKind::Direct,
                                name: "ps".into(),
                                link,
                                leftover,
                                gone: None,
                            })
                            .await;
                    }
                    Err(SetupError::Refused(why)) => {
                        tracing::warn!(why, "the proxy no longer knows this session");
                        return;
                    }
                    Err(e) => {
                        tracing::info!(error = %e, retry_in = ?backoff, "PS-Path rejoin failed");
                        tokio::select! {
                            _ = tokio::time::sleep(backoff) => {}
                            _ = stop.changed() => return,
                        }
                        backoff = (backoff * 2).min(Duration::from_secs(5));
                        continue;
                    }
                }
            }
            tokio::select! {
                r = health.changed() => if r.is_err() { return },
                _ = stop.changed() => if *stop.borrow() { return },
                _ = tokio::time::sleep(Duration::from_millis(500)) => {}
            }
        }
    }

    async fn connect_proxy(&self) -> Result<Link, SetupError> {
        let sock = net::connect_name(&self.cfg.proxy, self.cfg.ps_bind)
            .await
            .map_err(|e| SetupError::Other(format!("connect {}: {e}", self.cfg.proxy)))?;
        Ok(link::connect(sock, &self.me, &self.cfg.proxy_key, security(&self.tuning)).await?)
    }

    /// Opens a new session: PS-Path, `MP_CAPABLE`, `MP_OK`.
    async fn open(&self) -> Result<(Link, SessionId, Vec<Frame>), SetupError> {
        let t = self.tuning.connect_timeout.0;
        tokio::time::timeout(t, async {
            let mut link = self.connect_proxy().await?;
            link.writer
                .push_frame(&Frame::MpCapable {
                    ver_min: MIN_VERSION,
                    ver_max: VERSION,
                    ticket: Default::default(),
                })
                .map_err(|e| SetupError::Other(e.to_string()))?;
            link.writer.flush().await.map_err(LinkError::Io)?;
            let (first, rest) = first_frames(&mut link).await?;
            match first {
                Frame::MpOk { session, .. } => {
                    self.declare_radios(&mut link)?;
                    Ok((link, session, rest))
                }
                Frame::Close { code, reason } => {
                    Err(SetupError::Refused(format!("{code}: {reason}")))
                }
                other => Err(SetupError::Other(format!("unexpected {}", other.name()))),
            }
        })
        .await
        .map_err(|_| SetupError::Timeout)?
    }

    /// Tells the proxy which radio carries the PS-Path (`RADIOS`), when the configuration
    /// names it; the frame goes out with the session's first write on the link.
    fn declare_radios(&self, link: &mut Link) -> Result<(), SetupError> {
        if let Some(wan) = self.cfg.wan_radio {
            link.writer
                .push_frame(&Frame::Radios {
                    wan: Some(wan),
                    pipe: None,
                })
                .map_err(|e| SetupError::Other(e.to_string()))?;
        }
        Ok(())
    }

    /// Rejoins an existing session over a new PS-Path with a ticket issued to ourselves.
    async fn rejoin(
        &self,
        session: SessionId,
    ) -> Result<(Link, SubflowId, Vec<Frame>), SetupError> {
        let t = self.tuning.connect_timeout.0;
        tokio::time::timeout(t, async {
            let ticket = Ticket::issue(
                &self.me,
                self.cfg.proxy_key,
                &self.cfg.proxy,
                self.me.public,
                session.0,
                SystemTime::now(),
            )
            .map_err(|e| SetupError::Other(e.to_string()))?;
            let mut link = self.connect_proxy().await?;
            link.writer
                .push_frame(&Frame::MpJoin {
                    ver_min: MIN_VERSION,
                    ver_max: VERSION,
                    session,
                    ticket: ticket.into(),
                })
                .map_err(|e| SetupError::Other(e.to_string()))?;
            link.writer.flush().await.map_err(LinkError::Io)?;
            let (first, rest) = first_frames(&mut link).await?;
            match first {
                Frame::MpJoinOk { subflow, .. } => {
                    self.declare_radios(&mut link)?;
                    Ok((link, subflow, rest))
                }
                Frame::Close { code, reason } => {
                    Err(SetupError::Refused(format!("{code}: {reason}")))
                }
                other => Err(SetupError::Other(format!("unexpected {}", other.name()))),
            }
        })
        .await
        .map_err(|_| SetupError::Timeout)?
    }

    /// Keeps one pipe to one helper connected and attached to the current session.
    async fn pipe_manager(
        self: Arc<Self>,
        helper: HelperPeer,
        pipe: PipeConfig,
        mut stop: watch::Receiver<bool>,
    ) {
        let mut current = self.current();
        let mut backoff = Duration::from_millis(200);
        while !*stop.borrow() {
            let Some(handle) = current.borrow().clone() else {
                tokio::select! {
                    _ = current.changed() => {}
                    _ = stop.changed() => {}
                }
                continue;
            };
            let r = tokio::time::timeout(
                self.tuning.connect_timeout.0,
                self.open_pipe(&helper, &pipe),
            )
            .await;
            let link = match r {
                Ok(Ok(l)) => {
                    backoff = Duration::from_millis(200);
                    l
                }
                Ok(Err(e)) => {
                    tracing::debug!(helper = %helper.name, pipe = %pipe.name, error = %e, retry_in = ?backoff, "pipe down");
                    tokio::select! {
                        _ = tokio::time::sleep(backoff) => {}
                        _ = stop.changed() => {}
                    }
                    backoff = (backoff * 2).min(Duration::from_secs(2));
                    continue;
                }
                Err(_) => continue,
            };
            tracing::info!(helper = %helper.name, pipe = %pipe.name, "pipe up");
            let (gone_tx, gone_rx) = oneshot::channel();
            let sent = handle
                .tx
                .send(Event::AddPipe {
                    helper: helper.key,
                    helper_name: helper.name.clone(),
                    name: pipe.name.clone(),
                    policy: helper.pipe_policy.clone(),
                    link,
                    gone: gone_tx,
                })
                .await;
            if sent.is_err() {
                // That session has ended; wait for the supervisor to publish the next one.
                tokio::select! {
                    _ = current.changed() => {}
                    _ = tokio::time::sleep(Duration::from_millis(500)) => {}
                    _ = stop.changed() => {}
                }
                continue;
            }
            tokio::select! {
                _ = gone_rx => {}
                _ = stop.changed() => {}
            }
            tracing::info!(helper = %helper.name, pipe = %pipe.name, "pipe gone");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    async fn open_pipe(&self, helper: &HelperPeer, pipe: &PipeConfig) -> Result<Link, SetupError> {
        let sock = net::connect_from(pipe.addr, pipe.bind)
            .await
            .map_err(|e| SetupError::Other(format!("connect {}: {e}", pipe.addr)))?;
        let mut link = link::connect(sock, &self.me, &helper.key, security(&self.tuning)).await?;
        link.writer
            .push_frame(&Frame::PipeOpen {
                ver_min: MIN_VERSION,
                ver_max: VERSION,
                name: pipe.name.clone(),
            })
            .map_err(|e| SetupError::Other(e.to_string()))?;
        link.writer.flush().await.map_err(LinkError::Io)?;
        let (first, _) = first_frames(&mut link).await?;
        match first {
            Frame::PipeOk { .. } => Ok(link),
            Frame::Close { code, reason } => Err(SetupError::Refused(format!("{code}: {reason}"))),
            other => Err(SetupError::Other(format!("unexpected {}", other.name()))),
        }
    }
}

/// Reads until the first frame, returning it and any frames that came with it.
async fn first_frames(link: &mut Link) -> Result<(Frame, Vec<Frame>), LinkError> {
    let mut v = Vec::new();
    link.reader.read_frames(&mut v).await?;
    let first = v.remove(0);
    Ok((first, v))
}
