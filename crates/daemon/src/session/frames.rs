//! What a session does with each incoming frame, and how helpers join.

use std::time::{Duration, Instant, SystemTime};

use mpbond_core::conn::ReceiveError;
use mpbond_core::energy::PathPower;
use mpbond_core::PathKind;
use mpbond_proto::{Frame, Radio, Reason, StreamId, SubflowId, VERSION};
use tokio::sync::oneshot;

use super::{LinkId, Session, Side};
use crate::keys::PublicKey;
use crate::link::Link;
use crate::status::Metrics;
use crate::ticket::Ticket;

impl Session {
    /// Frames from one link, in order.
    pub(super) fn on_frames(&mut self, link: LinkId, frames: Vec<Frame>) {
        for f in frames {
            if !self.links.contains_key(&link) {
                return;
            }
            self.on_frame(link, f);
        }
    }

    fn on_frame(&mut self, link: LinkId, f: Frame) {
        let now = self.now();
        match f {
            Frame::StreamData {
                stream,
                dsn,
                payload,
            } => {
                self.early_stream(stream);
                match self.receiver.on_data(now, stream, dsn, payload) {
                    Ok(n) => {
                        if n > 0 {
                            self.readable.insert(stream);
                        }
                    }
                    // Late data of a stream that already ended: harmless.
                    Err(ReceiveError::UnknownStream(_)) => {}
                    Err(e) => self.stream_error(stream, &e.to_string(), reason_of(&e)),
                }
            }
            Frame::DataAck(a) => {
                if let Err(e) = self.sender.on_ack(&a) {
                    self.stream_error(a.stream, &e.to_string(), Reason::PROTOCOL_VIOLATION);
                } else {
                    self.credit_acked(a.stream);
                }
            }
            Frame::StreamFin { stream, final_size } => {
                self.early_stream(stream);
                match self.receiver.on_fin(stream, final_size) {
                    Ok(()) => {
                        self.readable.insert(stream);
                    }
                    Err(ReceiveError::UnknownStream(_)) => {}
                    Err(e) => self.stream_error(stream, &e.to_string(), reason_of(&e)),
                }
            }
            Frame::StreamRst { stream, reason } => {
                tracing::info!(%stream, %reason, "stream reset by peer");
                self.fail_stream(stream, reason, true);
            }
            Frame::StreamOpen { stream, dest } => self.peer_opened(stream, dest),
            Frame::StreamOpened { stream } => self.peer_confirmed(stream),
            Frame::ChunkMark { stream, end } => {
                let _ = self.sender.mark_chunk_end(stream, end);
            }
            Frame::PipeFeedback(fb) => {
                if self.schedules(fb.uplink) {
                    self.on_feedback(fb);
                } else if self.spec.side == Side::Primary {
                    // Flexible feedback (MPBond §5): the helper's HS-Path is idle, so the
                    // report about its pipe travels via us to the proxy.
                    self.send_control(&Frame::PipeFeedback(fb));
                }
            }
            Frame::PipeMinRtt(m) => {
                if self.schedules(m.uplink) {
                    self.on_min_rtt(m);
                } else if self.spec.side == Side::Primary {
                    // It rides with the report it came with, the same way.
                    self.send_control(&Frame::PipeMinRtt(m));
                }
            }
            Frame::Ping { nonce } => self.push(link, &Frame::Pong { nonce }),
            Frame::Pong { .. } => {}
            Frame::SubflowClose { subflow, reason } => {
                tracing::info!(%subflow, %reason, "peer closed a subflow");
                // A helper's own close, on its HS-Path, reaches the proxy but maybe not the
                // primary: the pipe may be what failed. The proxy passes it on.
                let from_helper = self.spec.side == Side::Proxy
                    && self
                        .subflows
                        .get(&subflow)
                        .is_some_and(|s| s.links.contains(&link));
                self.remove_subflow(subflow, from_helper);
                self.reannounce();
            }
            Frame::PathReset { subflow, reason } => {
                let n = self.sender.rescue_subflow(subflow);
                tracing::info!(%subflow, %reason, bytes = n, "path reset: reinjecting");
            }
            Frame::Radios { wan, pipe } => self.on_radios(link, wan, pipe),
            Frame::MpJoinOk { subflow, .. } if self.spec.side == Side::Primary => {
                self.helper_joined(link, subflow);
            }
            Frame::Close { code, reason } => {
                let why = format!("peer closed the link: {code}: {reason}");
                self.link_down(link, &why);
            }
            // A cancel only means something to a helper; a stray one is harmless.
            Frame::Extension { .. } | Frame::DataCancel { .. } => {}
            other => {
                tracing::warn!(frame = other.name(), "unexpected frame; closing the link");
                Metrics::inc(&self.spec.metrics.refused);
                self.push(
                    link,
                    &Frame::Close {
                        code: Reason::PROTOCOL_VIOLATION,
                        reason: format!("{} not allowed here", other.name()),
                    },
                );
                self.flush_link(link);
                self.link_down(link, "protocol violation");
            }
        }
    }

    /// Whether a helper's report about this direction is for our scheduler: each end
    /// schedules one, the proxy the downlink and the primary the uplink.
    fn schedules(&self, uplink: bool) -> bool {
        match self.spec.side {
            Side::Proxy => !uplink,
            Side::Primary => uplink,
        }
    }

    /// The peer broke a stream's rules: reset that stream only.
    fn stream_error(&mut self, stream: StreamId, why: &str, reason: Reason) {
        tracing::warn!(%stream, why, "stream error");
        Metrics::inc(&self.spec.metrics.refused);
        self.send_control(&Frame::StreamRst { stream, reason });
        self.fail_stream(stream, reason, true);
    }

    /// Proxy: a helper with a valid ticket joins as a new subflow.
    pub(super) fn on_join(
        &mut self,
        link: Link,
        kind: PathKind,
        helper_name: String,
        leftover: Vec<Frame>,
    ) {
        let Some(sfid) = self.free_subflow_id() else {
            Metrics::inc(&self.spec.metrics.limits_hit);
            tracing::warn!(session = %self.spec.id, "no subflow id left; refusing join");
            return;
        };
        let helper = link.peer;
        let name = match kind {
            PathKind::Direct => "ps".to_string(),
            PathKind::Helper => format!("hs:{helper_name}"),
        };
        let id = self.add_link(link, name, Some(sfid), None, None, kind == PathKind::Helper);
        self.push(
            id,
            &Frame::MpJoinOk {
                version: VERSION,
                subflow: sfid,
                session: self.spec.id,
            },
        );
        self.flush_link(id);
        let who = (kind == PathKind::Helper).then_some((helper, helper_name));
        self.attach(id, sfid, kind, who, None);
        self.on_frames(id, leftover);
    }

    fn free_subflow_id(&mut self) -> Option<SubflowId> {
        for _ in 0..255 {
            let id = SubflowId(self.next_subflow);
            self.next_subflow = self.next_subflow.wrapping_add(1).max(1);
            if !self.subflows.contains_key(&id) {
                return Some(id);
            }
        }
        None
    }

    /// Primary: a pipe to a helper is up. If the helper has joined, the pipe joins its
    /// subflow; otherwise the helper is asked to join (`INIT_MP_JOIN`, MPBond §4.1).
    pub(super) fn on_pipe(
        &mut self,
        helper: PublicKey,
        helper_name: String,
        name: String,
        policy: String,
        link: Link,
        gone: oneshot::Sender<()>,
    ) {
        let id = self.add_link(link, name, None, Some(helper), Some(gone), false);
        if let Some(&sf) = self.helper_subflow.get(&helper) {
            self.attach(
                id,
                sf,
                PathKind::Helper,
                Some((helper, helper_name)),
                Some(policy),
            );
            return;
        }
        self.pipe_policies.insert(helper, (helper_name, policy));
        self.ask_to_join(helper);
    }

    /// Sends `INIT_MP_JOIN` with a fresh ticket over one of the helper's pipes.
    pub(super) fn ask_to_join(&mut self, helper: PublicKey) {
        if self.helper_subflow.contains_key(&helper)
            || self
                .joining
                .get(&helper)
                .is_some_and(|t| t.elapsed() < self.spec.tuning.connect_timeout.0)
        {
            return;
        }
        let Some(issuer) = self.spec.tickets.clone() else {
            return;
        };
        let Some(link) = self
            .links
            .iter()
            .find(|(_, l)| l.helper == Some(helper))
            .map(|(id, _)| *id)
        else {
            return;
        };
        match Ticket::issue(
            &issuer.me,
            issuer.proxy_key,
            &issuer.proxy_addr,
            helper,
            self.spec.id.0,
            SystemTime::now(),
        ) {
            Ok(t) => {
                self.push(
                    link,
                    &Frame::InitMpJoin {
                        session: self.spec.id,
                        ticket: t.into(),
                    },
                );
                self.flush_link(link);
                self.joining.insert(helper, Instant::now());
                self.rejoin_after.remove(&helper);
            }
            Err(e) => tracing::error!(error = %e, "cannot issue a ticket"),
        }
    }

    /// Primary: the helper's join went through; its pipes become subflow `sfid`.
    /// A device declared the radios of the subflow this link carries. A helper's pipe radio
    /// only means something on a helper subflow, and an unknown WAN radio leaves the
    /// subflow's cost unknown (the admission then treats it as free).
    fn on_radios(&mut self, link: LinkId, wan: Option<Radio>, pipe: Option<Radio>) {
        let Some(id) = self.links.get(&link).and_then(|l| l.subflow) else {
            return;
        };
        let Some(sf) = self.subflows.get_mut(&id) else {
            return;
        };
        let pipe = if sf.kind == PathKind::Helper {
            pipe
        } else {
            None
        };
        let uplink = self.spec.side == Side::Primary;
        sf.power = wan.map(|wan| PathPower { wan, pipe, uplink });
        tracing::info!(subflow = %id, ?wan, ?pipe, "radios declared");
    }

    fn helper_joined(&mut self, link: LinkId, sfid: SubflowId) {
        let Some(helper) = self.links.get(&link).and_then(|l| l.helper) else {
            return;
        };
        self.joining.remove(&helper);
        self.helper_subflow.insert(helper, sfid);
        let (name, policy) = self
            .pipe_policies
            .get(&helper)
            .cloned()
            .unwrap_or_else(|| (helper.fingerprint(), "fastest".into()));
        let pipes: Vec<LinkId> = self
            .links
            .iter()
            .filter(|(_, l)| l.helper == Some(helper))
            .map(|(id, _)| *id)
            .collect();
        for p in pipes {
            self.attach(
                p,
                sfid,
                PathKind::Helper,
                Some((helper, name.clone())),
                Some(policy.clone()),
            );
        }
        tracing::info!(session = %self.spec.id, helper = %name, subflow = %sfid, "helper joined");
    }

    /// Every 100 ms: liveness, pings, join retries, expiry.
    pub(super) fn slow_tick(&mut self) {
        self.liveness();
        self.expire_pending();
        if self.spec.side == Side::Primary {
            let due: Vec<PublicKey> = self
                .links
                .values()
                .filter_map(|l| l.helper)
                .filter(|h| !self.helper_subflow.contains_key(h))
                .filter(|h| {
                    self.rejoin_after
                        .get(h)
                        .is_none_or(|t| Instant::now() >= *t)
                })
                .collect();
            for h in due {
                self.ask_to_join(h);
            }
        }
        if let Some(since) = self.orphaned_since {
            let grace = match self.spec.side {
                Side::Proxy => self.spec.linger,
                Side::Primary => Duration::from_secs(3),
            };
            if since.elapsed() >= grace {
                tracing::info!(session = %self.spec.id, "no link left; ending the session");
                self.ended = true;
            }
        }
        // At the primary, a session that can no longer reach the proxy at all is over.
        if self.spec.side == Side::Primary && self.subflows.is_empty() {
            self.orphaned_since.get_or_insert_with(Instant::now);
        }
    }
}

fn reason_of(e: &ReceiveError) -> Reason {
    match e {
        ReceiveError::Stream { source, .. } => source.reason(),
        ReceiveError::TooManyStreams(_) => Reason::LIMIT_REACHED,
        _ => Reason::PROTOCOL_VIOLATION,
    }
}
