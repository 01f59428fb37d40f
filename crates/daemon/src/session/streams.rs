//! Streams of a session: opening (an application connection at the primary, an origin
//! connection at the proxy), moving bytes between the application and the core, and ending
//! cleanly or with a reason.

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use bytes::Bytes;
use mpbond_proto::{Destination, Frame, Host, Reason, StreamId};
use tokio::net::TcpStream;

use super::app::{AppIo, AppWrite, Credit, READ_CHUNK};
use super::{Event, Session, Side, APP_QUEUE};
use crate::status::Metrics;

/// A stream's state beyond what the core keeps.
pub(super) struct StreamState {
    pub dest: String,
    pub app: Option<AppIo>,
    /// Primary: the application socket, until the proxy confirms the origin.
    pub pending: Option<(TcpStream, bool)>,
    /// Primary: where it goes, to ask again if the `STREAM_OPEN` was lost.
    pub open_dest: Option<Destination>,
    /// The open handshake is not done. Primary: `STREAM_OPEN` sent, no answer yet (with
    /// early data the application is already sending). Proxy: data came first, over a faster
    /// subflow than the `STREAM_OPEN`, and waits here for its destination.
    pub awaiting_open: bool,
    /// Proxy: the origin connection is up (a repeated `STREAM_OPEN` is answered again).
    pub origin_up: bool,
    pub opened_at: Instant,
    /// Bytes acknowledged so far, to return send credit as ACKs arrive.
    pub acked: u64,
    /// Send credit given to the application reader in all: the initial `stream_buffer`
    /// plus what the stream's buffer grew by with the peer's window.
    pub granted: u64,
    pub fin_to_app: bool,
    pub app_write_done: bool,
    pub app_eof: bool,
}

/// The SOCKS5 reply for a result (RFC 1928 §6).
pub fn socks_reply(r: Result<(), Reason>) -> Vec<u8> {
    let code = match r {
        Ok(()) => 0,
        Err(Reason::CONNECT_FAILED) => 5,
        Err(Reason::DNS_FAILED) => 4,
        Err(Reason::TIMEOUT) => 4,
        Err(Reason::UNAUTHORIZED) => 2,
        Err(_) => 1,
    };
    vec![5, code, 0, 1, 0, 0, 0, 0, 0, 0]
}

impl Session {
    fn new_stream(&mut self, id: StreamId, dest: String) -> Result<(), Reason> {
        if self.streams.len() >= self.spec.max_streams {
            Metrics::inc(&self.spec.metrics.limits_hit);
            return Err(Reason::LIMIT_REACHED);
        }
        self.sender
            .open_stream(id)
            .map_err(|_| Reason::PROTOCOL_VIOLATION)?;
        if self.receiver.open_stream(id).is_err() {
            self.sender.close_stream(id);
            return Err(Reason::PROTOCOL_VIOLATION);
        }
        self.streams.insert(
            id,
            StreamState {
                dest,
                app: None,
                pending: None,
                open_dest: None,
                awaiting_open: false,
                origin_up: false,
                opened_at: Instant::now(),
                acked: 0,
                granted: self.spec.tuning.stream_buffer.0,
                fin_to_app: false,
                app_write_done: false,
                app_eof: false,
            },
        );
        Metrics::inc(&self.spec.metrics.streams_opened);
        Metrics::inc(&self.spec.metrics.streams_active);
        Ok(())
    }

    fn start_app(&mut self, id: StreamId, sock: TcpStream, prefix: Option<Vec<u8>>) {
        let credit = Credit::new(self.spec.tuning.stream_buffer.0);
        let io = AppIo::start(
            id,
            sock,
            prefix,
            credit,
            self.session_credit.clone(),
            APP_QUEUE / 2,
            self.tx.clone(),
        );
        if let Some(s) = self.streams.get_mut(&id) {
            s.app = Some(io);
        }
        self.readable.insert(id);
    }

    /// Primary: an application wants `dest`.
    pub(super) fn open_stream(&mut self, dest: Destination, sock: TcpStream, socks: bool) {
        if self.spec.side != Side::Primary {
            return;
        }
        let id = StreamId(self.next_stream);
        self.next_stream = self.next_stream.wrapping_add(1).max(1);
        if let Err(r) = self.new_stream(id, dest.to_string()) {
            tracing::warn!(%dest, reason = %r, "stream refused");
            refuse_app(sock, socks, r);
            return;
        }
        if let Some(s) = self.streams.get_mut(&id) {
            s.open_dest = Some(dest.clone());
            s.awaiting_open = true;
        }
        tracing::debug!(stream = %id, %dest, early = self.spec.early_data, "opening");
        // Queued before any of the stream's data, on the control link: the proxy usually
        // learns the destination first, and buffers the data when it does not.
        self.send_control(&Frame::StreamOpen { stream: id, dest });
        if self.spec.early_data {
            // The SOCKS success goes out now, so that a reset that may follow (the proxy
            // refusing the stream) always comes after it; a fresh socket takes 10 bytes.
            let prefix =
                socks
                    .then(|| socks_reply(Ok(())))
                    .and_then(|r| match sock.try_write(&r) {
                        Ok(n) if n == r.len() => None,
                        Ok(n) => Some(r[n..].to_vec()),
                        Err(_) => Some(r),
                    });
            self.start_app(id, sock, prefix);
        } else if let Some(s) = self.streams.get_mut(&id) {
            s.pending = Some((sock, socks));
        }
    }

    /// Proxy: data or a FIN for a stream whose `STREAM_OPEN` has not arrived (0-RTT open,
    /// `[primary] early_data`: the open went over the control link, the data over a subflow
    /// that was faster this time). The stream is created without a destination so the bytes
    /// are kept (the primary's sender would not send them again); `peer_opened` fills in the
    /// rest. Called for every incoming data or FIN frame; it does nothing for a stream that
    /// exists, at the primary, and at or below the highest opened id (late data of a stream
    /// that is over). A stream the proxy cannot take is reset at once, so the primary's
    /// application gets an error rather than a stall.
    pub(super) fn early_stream(&mut self, id: StreamId) {
        if self.spec.side != Side::Proxy
            || id.0 <= self.highest_peer_stream
            || self.streams.contains_key(&id)
        {
            return;
        }
        match self.new_stream(id, "(awaiting STREAM_OPEN)".into()) {
            Ok(()) => {
                if let Some(s) = self.streams.get_mut(&id) {
                    s.awaiting_open = true;
                }
                tracing::debug!(stream = %id, "data before STREAM_OPEN; buffering");
            }
            Err(reason) => {
                tracing::debug!(stream = %id, %reason, "data before STREAM_OPEN refused");
                self.send_control(&Frame::StreamRst { stream: id, reason });
            }
        }
    }

    /// Proxy: the primary asked for a stream. A repeat (the first answer may have been lost
    /// with a link) is answered again rather than opening a second origin connection.
    pub(super) fn peer_opened(&mut self, id: StreamId, dest: Destination) {
        if self.spec.side != Side::Proxy {
            return;
        }
        let early = match self.streams.get(&id) {
            Some(s) if !s.awaiting_open => {
                if s.origin_up {
                    self.send_control(&Frame::StreamOpened { stream: id });
                }
                return;
            }
            Some(_) => true,
            None => false,
        };
        if !early && id.0 <= self.highest_peer_stream {
            // Opened and closed before: it is over.
            self.send_control(&Frame::StreamRst {
                stream: id,
                reason: Reason::CANCELLED,
            });
            return;
        }
        // Refused or not, this id is now taken: late data of it is dropped, not kept as an
        // early stream.
        self.highest_peer_stream = self.highest_peer_stream.max(id.0);
        if early {
            // Its data came first; now it has a destination.
            if let Some(s) = self.streams.get_mut(&id) {
                s.awaiting_open = false;
                s.dest = dest.to_string();
            }
        } else if let Err(r) = self.new_stream(id, dest.to_string()) {
            self.send_control(&Frame::StreamRst {
                stream: id,
                reason: r,
            });
            return;
        }
        let tx = self.tx.clone();
        let timeout = self.spec.tuning.connect_timeout.0;
        let deny = self.spec.deny_origins.clone();
        tokio::spawn(async move {
            let result = match tokio::time::timeout(timeout, connect_origin(&dest, &deny)).await {
                Ok(r) => r,
                Err(_) => Err(Reason::TIMEOUT),
            };
            if let Err(r) = &result {
                tracing::info!(stream = %id, %dest, reason = %r, "origin unreachable");
            }
            let _ = tx.send(Event::OriginReady { stream: id, result }).await;
        });
    }

    /// Proxy: the origin connection finished.
    pub(super) fn origin_ready(&mut self, id: StreamId, result: Result<TcpStream, Reason>) {
        if !self.streams.contains_key(&id) {
            return;
        }
        match result {
            Ok(sock) => {
                if let Some(s) = self.streams.get_mut(&id) {
                    s.origin_up = true;
                    tracing::debug!(stream = %id, dest = %s.dest, "origin connected");
                }
                self.send_control(&Frame::StreamOpened { stream: id });
                self.start_app(id, sock, None);
            }
            Err(r) => {
                self.send_control(&Frame::StreamRst {
                    stream: id,
                    reason: r,
                });
                self.fail_stream(id, r, false);
            }
        }
    }

    /// Primary: the proxy reached the origin.
    pub(super) fn peer_confirmed(&mut self, id: StreamId) {
        let Some(s) = self.streams.get_mut(&id) else {
            // The stream ended here meanwhile (it expired, or the proxy refused its early
            // data and the `STREAM_OPEN` arrived after): close the proxy's end too.
            if id.0 < self.next_stream {
                self.send_control(&Frame::StreamRst {
                    stream: id,
                    reason: Reason::CANCELLED,
                });
            }
            return;
        };
        s.awaiting_open = false;
        if let Some((sock, socks)) = s.pending.take() {
            let prefix = socks.then(|| socks_reply(Ok(())));
            self.start_app(id, sock, prefix);
        }
    }

    pub(super) fn app_data(&mut self, id: StreamId, data: Bytes) {
        let n = data.len() as u64;
        match self.sender.write(id, data) {
            Ok(taken) if taken as u64 == n => {}
            _ => {
                // The credit makes this impossible; refuse the stream rather than lose bytes.
                tracing::error!(stream = %id, "send buffer overflow");
                self.fail_stream(id, Reason::INTERNAL, true);
            }
        }
    }

    pub(super) fn app_eof(&mut self, id: StreamId) {
        if let Some(s) = self.streams.get_mut(&id) {
            s.app_eof = true;
        }
        let _ = self.sender.finish(id);
        self.maybe_finish(id);
    }

    pub(super) fn app_failed(&mut self, id: StreamId, why: &str) {
        if self.streams.contains_key(&id) {
            tracing::info!(stream = %id, why, "application socket failed");
            self.send_control(&Frame::StreamRst {
                stream: id,
                reason: Reason::CANCELLED,
            });
            self.fail_stream(id, Reason::CANCELLED, true);
        }
    }

    /// Ends a stream abnormally: the application sees a reset (or a SOCKS failure), the core
    /// forgets it.
    pub(super) fn fail_stream(&mut self, id: StreamId, reason: Reason, reset: bool) {
        let Some(mut s) = self.streams.remove(&id) else {
            return;
        };
        if let Some((sock, socks)) = s.pending.take() {
            refuse_app(sock, socks, reason);
        }
        if let Some(app) = s.app.take() {
            app.abort(reset || reason != Reason::NO_ERROR);
            // Return the credit this stream still held to the session budget.
            let held = self
                .sender
                .stream(id)
                .map_or(0, |st| st.written() - st.cum_ack());
            self.session_credit.give(held);
        }
        self.sender.close_stream(id);
        self.receiver.close_stream(id);
        self.readable.remove(&id);
        Metrics::dec(&self.spec.metrics.streams_active);
        if reason != Reason::NO_ERROR && self.failed.insert(id) {
            Metrics::inc(&self.spec.metrics.streams_failed);
        }
        tracing::debug!(stream = %id, dest = %s.dest, %reason, "stream ended");
    }

    /// Returns send credit for newly acknowledged bytes, and for what the stream's buffer
    /// grew by when the peer's window did.
    pub(super) fn credit_acked(&mut self, id: StreamId) {
        let Some((cum, capacity)) = self.sender.stream(id).map(|s| (s.cum_ack(), s.capacity()))
        else {
            return;
        };
        if let Some(s) = self.streams.get_mut(&id) {
            let freed = cum.saturating_sub(s.acked);
            s.acked = cum;
            if let Some(app) = &s.app {
                let grown = capacity.saturating_sub(s.granted);
                if grown > 0 {
                    s.granted += grown;
                    tracing::debug!(stream = %id, buffer = s.granted, "send buffer grew with the peer's window");
                }
                app.credit.give(freed + grown);
            }
            self.session_credit.give(freed);
        }
        self.maybe_finish(id);
    }

    /// Hands reassembled bytes to the applications whose writers have room.
    pub(super) fn deliver_to_apps(&mut self) {
        let ids: Vec<StreamId> = self.readable.iter().copied().collect();
        for id in ids {
            let Some(s) = self.streams.get_mut(&id) else {
                self.readable.remove(&id);
                continue;
            };
            let Some(app) = &s.app else {
                continue;
            };
            let mut blocked = false;
            loop {
                if app.queued.load(Ordering::Acquire) >= APP_QUEUE {
                    blocked = true;
                    break;
                }
                let Some(b) = self.receiver.read(id, READ_CHUNK as usize) else {
                    break;
                };
                Metrics::add(&self.spec.metrics.bytes_received, b.len() as u64);
                app.queued.fetch_add(b.len() as u64, Ordering::AcqRel);
                let _ = app.to_app.send(AppWrite::Data(b));
            }
            let all_read = self.receiver.stream(id).is_some_and(|r| r.is_finished());
            if all_read && !s.fin_to_app {
                s.fin_to_app = true;
                let _ = app.to_app.send(AppWrite::Fin);
            }
            if !blocked {
                self.readable.remove(&id);
            }
        }
    }

    /// Forgets a stream once both directions are done.
    pub(super) fn maybe_finish(&mut self, id: StreamId) {
        let done = self
            .streams
            .get(&id)
            .is_some_and(|s| s.app_write_done && s.app_eof && self.sender.is_complete(id));
        if done {
            self.fail_stream(id, Reason::NO_ERROR, false);
        }
    }

    /// Expires streams whose open handshake takes too long: at the primary, the proxy has not
    /// reached the origin; at the proxy, early data whose `STREAM_OPEN` never came.
    pub(super) fn expire_pending(&mut self) {
        let limit = self.spec.tuning.connect_timeout.0 + Duration::from_secs(2);
        let stale: Vec<StreamId> = self
            .streams
            .iter()
            .filter(|(_, s)| s.awaiting_open && s.opened_at.elapsed() > limit)
            .map(|(id, _)| *id)
            .collect();
        for id in stale {
            self.send_control(&Frame::StreamRst {
                stream: id,
                reason: Reason::TIMEOUT,
            });
            self.fail_stream(id, Reason::TIMEOUT, true);
        }
    }
}

fn refuse_app(sock: TcpStream, socks: bool, r: Reason) {
    tokio::spawn(async move {
        if socks {
            let reply = socks_reply(Err(r));
            let _ = sock.writable().await;
            let _ = sock.try_write(&reply);
        }
        let s = socket2::SockRef::from(&sock);
        let _ = s.set_linger(Some(Duration::ZERO));
        drop(sock);
    });
}

/// Resolves and connects to an origin, refusing denied networks.
async fn connect_origin(
    dest: &Destination,
    deny: &[crate::net::Cidr],
) -> Result<TcpStream, Reason> {
    let addrs: Vec<SocketAddr> = match &dest.host {
        Host::V4(a) => vec![SocketAddr::new((*a).into(), dest.port)],
        Host::V6(a) => vec![SocketAddr::new((*a).into(), dest.port)],
        Host::Name(n) => tokio::net::lookup_host((n.as_str(), dest.port))
            .await
            .map_err(|_| Reason::DNS_FAILED)?
            .collect(),
    };
    let allowed: Vec<SocketAddr> = addrs
        .into_iter()
        .filter(|a| !deny.iter().any(|c| c.contains(a.ip())))
        .collect();
    if allowed.is_empty() {
        return Err(Reason::UNAUTHORIZED);
    }
    for a in allowed {
        if let Ok(s) = TcpStream::connect(a).await {
            let _ = s.set_nodelay(true);
            return Ok(s);
        }
    }
    Err(Reason::CONNECT_FAILED)
}
