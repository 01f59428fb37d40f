//! A secure link: one TCP connection (a PS-Path, an HS-Path or a pipe) carrying mpbond frames,
//! mutually authenticated and encrypted with Noise.
//!
//! **Handshake.** `Noise_IK_25519_AESGCM_SHA256` with prologue `mpbond/1`: the initiator knows
//! the responder's static key in advance (pinned from configuration or a ticket), the responder
//! learns and authenticates the initiator's static key from the first message. One round trip.
//! AES-GCM because every CPU mpbond targets has AES instructions: on the development machine
//! ring's AES-256-GCM seals and opens 26 Gbit/s per core against 8.4 for ChaCha20-Poly1305
//! (`cargo bench -p mpbond-daemon --bench aead`, docs/performance.md).
//!
//! **Records.** After the handshake the frame stream is cut into records of at most 65 519
//! plaintext bytes, each sent as a 2-byte length and the AES-GCM ciphertext (the standard Noise
//! framing). Each direction keeps its own key and nonce counter ([`crate::record`]), so the
//! reading and writing halves live in different tasks. Frames are encoded straight into an open
//! record and sealed in place; records end on frame boundaries, so the reader decrypts in place
//! and decodes frames out of the record without copying them (records from a peer that splits
//! frames are reassembled, at the cost of one copy).
//!
//! **Insecure mode** (benchmarks only, must be set on both ends) skips Noise: the peers exchange
//! their public keys in clear and frames travel unencrypted and unauthenticated.

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bytes::{Buf, BufMut, BytesMut};
use mpbond_proto::{decode, encode, encode_data_header, Frame, StreamId};
use snow::{params::NoiseParams, Builder};
use tokio::io::{AsyncReadExt, AsyncWriteExt, Interest};
use tokio::net::TcpStream;

use crate::keys::{KeyPair, PublicKey};
use crate::record::RecordKey;

/// The Noise protocol name.
pub const NOISE_PATTERN: &str = "Noise_IK_25519_AESGCM_SHA256";
const PROLOGUE: &[u8] = b"mpbond/1";
const MAX_RECORD: usize = 65_535;
const TAG: usize = crate::record::TAG_LEN;
const MAX_PLAINTEXT: usize = MAX_RECORD - TAG;
const INSECURE_MAGIC: &[u8; 8] = b"MPBINSEC";

/// Whether links are encrypted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum Security {
    /// Noise IK: authenticated and encrypted (the default).
    Noise,
    /// No authentication, no encryption: only for measuring the cost of encryption.
    Insecure,
}

/// Why a link failed.
#[derive(Debug, thiserror::Error)]
pub enum LinkError {
    /// Socket error.
    #[error("I/O: {0}")]
    Io(#[from] io::Error),
    /// The peer closed the connection.
    #[error("peer closed the connection")]
    Closed,
    /// The handshake failed: wrong key, not an mpbond peer, or one side insecure.
    #[error("handshake failed: {0} (wrong key, not an mpbond peer, or only one side has insecure = true?)")]
    Handshake(String),
    /// A record did not decrypt: corrupted or forged traffic.
    #[error("record failed authentication")]
    Crypto,
    /// A record or frame broke the protocol.
    #[error("protocol error: {0}")]
    Protocol(String),
}

impl LinkError {
    /// The reason code to report for this error.
    pub fn reason(&self) -> mpbond_proto::Reason {
        use mpbond_proto::Reason;
        match self {
            LinkError::Closed => Reason::NO_ERROR,
            LinkError::Protocol(_) => Reason::MALFORMED,
            LinkError::Handshake(_) | LinkError::Crypto => Reason::UNAUTHORIZED,
            LinkError::Io(_) => Reason::PATH_FAILED,
        }
    }
}

fn params() -> NoiseParams {
    // A constant, known-good pattern string.
    #[allow(clippy::expect_used)]
    NOISE_PATTERN.parse().expect("valid Noise pattern")
}

async fn write_msg(s: &mut TcpStream, m: &[u8]) -> io::Result<()> {
    let mut b = Vec::with_capacity(2 + m.len());
    b.extend_from_slice(&(m.len() as u16).to_be_bytes());
    b.extend_from_slice(m);
    s.write_all(&b).await
}

async fn read_msg(s: &mut TcpStream) -> Result<Vec<u8>, LinkError> {
    let mut l = [0u8; 2];
    s.read_exact(&mut l).await.map_err(|e| match e.kind() {
        io::ErrorKind::UnexpectedEof => LinkError::Closed,
        _ => LinkError::Io(e),
    })?;
    let mut m = vec![0u8; u16::from_be_bytes(l) as usize];
    s.read_exact(&mut m).await?;
    Ok(m)
}

fn hs_err(e: snow::Error) -> LinkError {
    LinkError::Handshake(e.to_string())
}

/// An established link, before it is split.
#[derive(Debug)]
pub struct Link {
    /// Reading half.
    pub reader: LinkReader,
    /// Writing half.
    pub writer: LinkWriter,
    /// The peer's authenticated static key (claimed, in insecure mode).
    pub peer: PublicKey,
}

fn prepare(sock: &TcpStream) -> io::Result<()> {
    sock.set_nodelay(true)
}

/// Applies the link settings of `tuning` to an established link: the low-water mark (the
/// scheduler decides late), kernel pacing, the congestion control and its restart after a
/// pause in stream data ([`LinkWriter::set_cc_restart`]). Used by the session (proxy and
/// primary) and by the helper's relay, so every link of mpbond sends the same way, but for
/// the congestion control of a proxy's HS-Path (`hs_path`; `Tuning::congestion_for`).
/// Failures are logged and the link is kept: it still works, only less well.
pub fn tune(writer: &mut LinkWriter, tuning: &crate::config::Tuning, hs_path: bool) {
    writer.set_cc_restart(tuning.cc_restart.0);
    let sock = writer.sock.as_ref();
    if let Err(e) = crate::sys::set_notsent_lowat(sock, tuning.lowat.0 as u32) {
        tracing::warn!(error = %e, "TCP_NOTSENT_LOWAT not set");
    }
    if tuning.pacing {
        if let Err(e) = crate::sys::set_pacing(sock) {
            tracing::warn!(error = %e, "kernel pacing not set");
        }
    }
    let congestion = tuning.congestion_for(hs_path);
    if !congestion.is_empty() {
        if let Err(e) = crate::sys::set_congestion(sock, congestion) {
            tracing::warn!(congestion = %congestion, error = %e,
                "congestion control not set (see /proc/sys/net/ipv4/tcp_available_congestion_control)");
        }
    }
}

/// Opens a link as initiator to a peer whose public key we know.
pub async fn connect(
    mut sock: TcpStream,
    me: &KeyPair,
    peer: &PublicKey,
    security: Security,
) -> Result<Link, LinkError> {
    prepare(&sock)?;
    if security == Security::Insecure {
        let mut hello = INSECURE_MAGIC.to_vec();
        hello.extend_from_slice(&me.public.0);
        write_msg(&mut sock, &hello).await?;
        let reply = read_msg(&mut sock).await?;
        let claimed = insecure_key(&reply)?;
        if claimed != *peer {
            return Err(LinkError::Handshake("peer presented another key".into()));
        }
        return Ok(split(sock, None, claimed));
    }
    let mut hs = Builder::new(params())
        .local_private_key(me.secret())
        .and_then(|b| b.remote_public_key(&peer.0))
        .and_then(|b| b.prologue(PROLOGUE))
        .and_then(|b| b.build_initiator())
        .map_err(hs_err)?;
    let mut buf = vec![0u8; 1024];
    let n = hs.write_message(&[], &mut buf).map_err(hs_err)?;
    write_msg(&mut sock, &buf[..n]).await?;
    let reply = read_msg(&mut sock).await?;
    let mut payload = vec![0u8; 1024];
    hs.read_message(&reply, &mut payload).map_err(hs_err)?;
    if !hs.is_handshake_finished() {
        return Err(LinkError::Handshake("handshake not finished".into()));
    }
    let (send, recv) = hs.dangerously_get_raw_split();
    Ok(split(sock, Some((send, recv)), *peer))
}

/// Accepts a link as responder; the peer's static key is learned and authenticated.
pub async fn accept(
    mut sock: TcpStream,
    me: &KeyPair,
    security: Security,
) -> Result<Link, LinkError> {
    prepare(&sock)?;
    let first = read_msg(&mut sock).await?;
    if security == Security::Insecure {
        let claimed = insecure_key(&first)?;
        let mut hello = INSECURE_MAGIC.to_vec();
        hello.extend_from_slice(&me.public.0);
        write_msg(&mut sock, &hello).await?;
        return Ok(split(sock, None, claimed));
    }
    let mut hs = Builder::new(params())
        .local_private_key(me.secret())
        .and_then(|b| b.prologue(PROLOGUE))
        .and_then(|b| b.build_responder())
        .map_err(hs_err)?;
    let mut payload = vec![0u8; 1024];
    hs.read_message(&first, &mut payload).map_err(hs_err)?;
    let remote = hs
        .get_remote_static()
        .and_then(|k| <[u8; 32]>::try_from(k).ok())
        .ok_or_else(|| LinkError::Handshake("no remote static key".into()))?;
    let mut buf = vec![0u8; 1024];
    let n = hs.write_message(&[], &mut buf).map_err(hs_err)?;
    write_msg(&mut sock, &buf[..n]).await?;
    if !hs.is_handshake_finished() {
        return Err(LinkError::Handshake("handshake not finished".into()));
    }
    // The split's first key carries initiator-to-responder traffic.
    let (recv, send) = hs.dangerously_get_raw_split();
    Ok(split(sock, Some((send, recv)), PublicKey(remote)))
}

fn insecure_key(m: &[u8]) -> Result<PublicKey, LinkError> {
    if m.len() != 40 || &m[..8] != INSECURE_MAGIC {
        return Err(LinkError::Handshake(
            "expected an insecure-mode hello".into(),
        ));
    }
    let mut k = [0u8; 32];
    k.copy_from_slice(&m[8..]);
    Ok(PublicKey(k))
}

fn split(sock: TcpStream, keys: Option<([u8; 32], [u8; 32])>, peer: PublicKey) -> Link {
    let sock = Arc::new(sock);
    let (send, recv) = match keys {
        Some((s, r)) => (Some(RecordKey::new(&s)), Some(RecordKey::new(&r))),
        None => (None, None),
    };
    Link {
        reader: LinkReader {
            sock: sock.clone(),
            last_rx: Arc::new(AtomicU64::new(crate::sys::mono_ms())),
            key: recv,
            raw: BytesMut::with_capacity(MAX_RECORD + 2),
            plain: BytesMut::new(),
        },
        writer: LinkWriter {
            sock,
            key: send,
            out: BytesMut::with_capacity(2 * MAX_RECORD),
            record: None,
            scratch: BytesMut::with_capacity(1024),
            cc_restart_ms: None,
            last_data_ms: None,
            cc_restart_due: false,
            ramps: false,
            ramp: None,
            cc_restarts: 0,
        },
        peer,
    }
}

/// Most bytes a link's socket may hold (SIOCOUTQ) for a congestion control restart
/// ([`LinkWriter::set_cc_restart`]): room for pings and feedback, not for a stream's data.
pub const CC_RESTART_MAX_QUEUED: u64 = 4096;

/// The writing half of a link. Frames are queued in memory, sealed into records and written
/// without blocking; what the socket does not take waits in [`LinkWriter::pending`].
#[derive(Debug)]
pub struct LinkWriter {
    sock: Arc<TcpStream>,
    key: Option<RecordKey>,
    /// Bytes for the socket: sealed records, then the open record.
    out: BytesMut,
    /// Where the open record's 2-byte length starts in `out`.
    record: Option<usize>,
    scratch: BytesMut,
    /// Pause in stream data after which the congestion control starts afresh; `None` never.
    cc_restart_ms: Option<u64>,
    /// When stream data was last queued ([`crate::sys::mono_ms`]); `None` before the first.
    last_data_ms: Option<u64>,
    /// The next flush restarts the congestion control before it writes.
    cc_restart_due: bool,
    /// How many times the congestion control restarted.
    cc_restarts: u64,
    /// Whether a burst after a pause starts in small records ([`LinkWriter::set_ramp`]).
    ramps: bool,
    /// While such a burst ramps up ([`LinkWriter::start_burst`]): the largest data frame,
    /// and so record, the next piece may fill.
    ramp: Option<usize>,
}

/// A pause in stream data (ms) after which a link's next data starts in small records
/// ([`LinkWriter::start_burst`]).
pub const RAMP_IDLE_MS: u64 = 100;
/// The first record of a burst carries this much data at most; each next one twice the last
/// one's, until [`RAMP_END`].
pub const RAMP_FIRST: usize = 2048;
/// Where the ramp ends: a record's usual size (`tuning.lowat`, 16 KiB by default) is no
/// longer cut.
pub const RAMP_END: usize = 16 << 10;

impl LinkWriter {
    /// The socket, for TCP_INFO and readiness.
    pub fn sock(&self) -> &Arc<TcpStream> {
        &self.sock
    }

    /// Makes room for `len` more plaintext bytes in the open record (opening one if needed).
    fn reserve_record(&mut self, len: usize) {
        if self.key.is_none() {
            return;
        }
        if let Some(start) = self.record {
            if self.out.len() - start - 2 + len <= MAX_PLAINTEXT {
                return;
            }
            self.seal();
        }
        self.record = Some(self.out.len());
        self.out.put_u16(0);
    }

    /// Restarts the socket's congestion control when stream data resumes after `pause` without
    /// any (`Duration::ZERO`: never).
    ///
    /// Why: a link of mpbond lives for the whole session, and between transfers it carries
    /// only small frames (the handshake, control frames, the odd ping). CUBIC keeps what it
    /// learnt from those for the connection's life, above all the smallest RTT it saw
    /// (`delay_min`), against which HyStart ends slow start: once a round's RTT exceeds it by
    /// an eighth (4-16 ms), or once an ACK train spans half of it. On a cellular path whose
    /// scheduling delay moves by more than that from one moment to the next, state measured
    /// before the transfer ends the transfer's slow start early. In 10a's stretch from 0 s
    /// (docs/evaluation.md) mpbond's two proxy subflows left slow start at 227-233 packets
    /// together without the restart and at 326-336 with it (kibbutz's fresh MPTCP subflows at
    /// 465-546), and the 4 MB download took 1.37 s instead of 1.18 s. Switching the socket's
    /// congestion control away and back makes the kernel initialise it again
    /// (`tcp_reinit_congestion_control`), as for a new connection. The window and `ssthresh`
    /// belong to the socket and stay as they are; Linux's own restart after idle
    /// (`tcp_slow_start_after_idle`) looks after the window.
    pub fn set_cc_restart(&mut self, pause: std::time::Duration) {
        self.cc_restart_ms = (!pause.is_zero()).then_some(pause.as_millis() as u64);
    }

    /// Whether the kernel holds no more than control frames (at most
    /// [`CC_RESTART_MAX_QUEUED`] bytes unsent or unacknowledged): a pause in queuing data is
    /// a pause on the wire only once the data queued before it has drained, which on a slow
    /// path behind a deep queue takes longer than the pause.
    fn wire_idle(&self) -> bool {
        crate::sys::outq(self.sock.as_ref()).is_ok_and(|q| q <= CC_RESTART_MAX_QUEUED)
    }

    /// How many times the congestion control restarted ([`LinkWriter::set_cc_restart`]).
    pub fn cc_restarts(&self) -> u64 {
        self.cc_restarts
    }

    /// Notes that stream data is queued now, and whether it ends a pause long enough for a
    /// congestion control restart.
    fn data_queued(&mut self) {
        let now = crate::sys::mono_ms();
        if self.cc_restart_ms.is_some_and(|p| self.paused(now, p)) {
            self.cc_restart_due = true;
        }
        self.last_data_ms = Some(now);
    }

    /// Whether no stream data was queued on this link in the `pause_ms` before `now` (or
    /// ever): the one test behind both the congestion control restart and the record ramp.
    fn paused(&self, now: u64, pause_ms: u64) -> bool {
        self.last_data_ms
            .is_none_or(|t| now.saturating_sub(t) >= pause_ms)
    }

    /// Makes a burst of stream data after a pause start in small records on this link
    /// ([`LinkWriter::start_burst`]): for a link whose peer relays what it gets, a helper.
    ///
    /// Why: the peer authenticates, and so hands on, a record only once all of it has
    /// arrived. A helper relays the proxy's frames to its pipe one record at a time, so at
    /// the start of a transfer its pipe waits for the whole first record to cross the HS-Path:
    /// a 16 KiB record takes 13 ms at 10 Mbit/s, and the pipes of experiment 11b's three
    /// devices began each video segment 17-20 ms after the PS-Path (docs/evaluation.md, 11b).
    /// A 2 KiB first record waits 1.6 ms; the ramp's three small records cost about 100
    /// bytes of framing a burst. A link to the primary itself is left as it is: there a
    /// record's size only sets when the application sees the first bytes, not how long the
    /// link is busy.
    pub fn set_ramp(&mut self, on: bool) {
        self.ramps = on;
        if !on {
            self.ramp = None;
        }
    }

    /// Called before stream data is cut into frames for this link: with
    /// [`LinkWriter::set_ramp`] on, after a pause of [`RAMP_IDLE_MS`] or more, the burst's
    /// first records start at [`RAMP_FIRST`] and double ([`LinkWriter::ramp_cap`]), as TLS
    /// servers size records after idle.
    pub fn start_burst(&mut self) {
        if self.ramps && self.paused(crate::sys::mono_ms(), RAMP_IDLE_MS) {
            self.ramp = Some(RAMP_FIRST);
        }
    }

    /// The most data the next data frame (and its record) may carry while a burst ramps up;
    /// `None` once it has ([`LinkWriter::start_burst`]).
    pub fn ramp_cap(&self) -> Option<usize> {
        self.ramp
    }

    /// Queues a frame.
    pub fn push_frame(&mut self, f: &Frame) -> Result<(), mpbond_proto::EncodeError> {
        if matches!(f, Frame::StreamData { .. }) {
            self.data_queued();
        }
        self.scratch.clear();
        encode(f, &mut self.scratch)?;
        self.reserve_record(self.scratch.len());
        self.out.put_slice(&self.scratch);
        Ok(())
    }

    /// Queues a `STREAM_DATA` frame without building a [`Frame`].
    pub fn push_data(
        &mut self,
        stream: StreamId,
        dsn: u64,
        payload: &[u8],
    ) -> Result<(), mpbond_proto::EncodeError> {
        let h = encode_data_header(stream, dsn, payload.len())?;
        self.data_queued();
        // The ramp's next step: twice this frame's room, until a record's usual size.
        self.ramp = self
            .ramp
            .map(|c| c.saturating_mul(2))
            .filter(|&c| c < RAMP_END);
        self.reserve_record(h.len() + payload.len());
        self.out.put_slice(&h);
        self.out.put_slice(payload);
        Ok(())
    }

    /// Bytes queued and not yet handed to the kernel.
    pub fn pending(&self) -> usize {
        self.out.len()
    }

    /// Seals the open record in place.
    fn seal(&mut self) {
        let (Some(start), Some(key)) = (self.record.take(), self.key.as_mut()) else {
            return;
        };
        let body = start + 2;
        if self.out.len() == body {
            // Empty record: drop its header.
            self.out.truncate(start);
            return;
        }
        let n = self.out.len() - body;
        // Sealing only fails when the nonces are exhausted after 2^64 records.
        let tag = key.seal(&mut self.out[body..]).unwrap_or([0u8; TAG]);
        self.out.put_slice(&tag);
        self.out[start..body].copy_from_slice(&((n + TAG) as u16).to_be_bytes());
    }

    /// Writes as much as the socket takes now. `Ok(true)` when everything queued is written.
    ///
    /// The write is a plain non-blocking `send`, not tokio's `try_write`: with
    /// TCP_NOTSENT_LOWAT the kernel accepts data whether or not it reports the socket
    /// writable, and tokio's cached readiness (cleared by [`LinkWriter::ready_for_more`]) must
    /// not stop a write the kernel would take.
    pub fn try_flush(&mut self) -> io::Result<bool> {
        self.seal();
        if std::mem::take(&mut self.cc_restart_due) && self.wire_idle() {
            match crate::sys::restart_congestion(self.sock.as_ref()) {
                Ok(true) => self.cc_restarts += 1,
                Ok(false) => {}
                Err(e) => tracing::debug!(error = %e, "congestion control not restarted"),
            }
        }
        let sock = socket2::SockRef::from(self.sock.as_ref());
        while !self.out.is_empty() {
            match sock.send_with_flags(&self.out, libc::MSG_NOSIGNAL) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => self.out.advance(n),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    // The send buffer is full: wait for the next write-space event.
                    self.clear_writable();
                    return Ok(false);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(true)
    }

    /// True when the kernel wants more data now: with TCP_NOTSENT_LOWAT, fewer than the mark's
    /// bytes wait to be sent. When it returns false, `sock().writable().await` completes as soon
    /// as the kernel wants more: tokio's cached state is cleared first and the kernel is asked
    /// second, so no event falls in between.
    pub fn ready_for_more(&self) -> bool {
        self.clear_writable();
        crate::sys::poll_writable(self.sock.as_ref())
    }

    /// Forgets the socket's cached "writable" state, so that the next `writable().await` waits
    /// for the kernel's next write-space event.
    fn clear_writable(&self) {
        let _ = self.sock.try_io(Interest::WRITABLE, || {
            Err::<(), _>(io::ErrorKind::WouldBlock.into())
        });
    }

    /// Writes everything queued, waiting for the socket as needed.
    pub async fn flush(&mut self) -> io::Result<()> {
        while !self.try_flush()? {
            if !self.ready_for_more() {
                self.sock.writable().await?;
            }
        }
        Ok(())
    }

    /// Shuts the write direction down (sends FIN) after flushing.
    pub async fn close(&mut self) {
        let _ = self.flush().await;
        let _ = socket2::SockRef::from(self.sock.as_ref()).shutdown(std::net::Shutdown::Write);
    }
}

/// Moves a link's liveness clock (`last_rx`, [`LinkReader::last_rx`]) to `now_ms` when the
/// kernel took in a data segment since the last call (`data_segs_in`, from TCP_INFO, past
/// `*seen`), even if no byte of it reached the reader; returns whether it did.
///
/// Why: the reader sees nothing while a lost packet's retransmission waits behind a deep
/// queue. In experiment 06 (docs/evaluation.md) the pipe falls to 1 Mbit/s behind a 150 KB
/// queue, 1.2 s of it, and the primary declared the pipe dead ("nothing received within the
/// stall timeout") while packets kept arriving every few milliseconds; the session then
/// tore the pipe down and moved its data, a reinjection the scheme "without reinjection"
/// was not meant to have. A peer whose kernel only acknowledges (a hung daemon) sends no
/// data segments, so the rule still catches it.
pub fn heard_in_kernel(
    last_rx: &AtomicU64,
    seen: &mut u32,
    data_segs_in: u32,
    now_ms: u64,
) -> bool {
    if data_segs_in == *seen {
        return false;
    }
    *seen = data_segs_in;
    last_rx.fetch_max(now_ms, Ordering::Relaxed);
    true
}

/// The reading half of a link.
#[derive(Debug)]
pub struct LinkReader {
    sock: Arc<TcpStream>,
    last_rx: Arc<AtomicU64>,
    key: Option<RecordKey>,
    raw: BytesMut,
    /// Plaintext of records that ended inside a frame, until the frame completes.
    plain: BytesMut,
}

impl LinkReader {
    /// The socket.
    pub fn sock(&self) -> &Arc<TcpStream> {
        &self.sock
    }

    /// When a byte last arrived ([`crate::sys::mono_ms`]): the liveness clock. Bytes, not
    /// frames, so a slow link carrying a large record still counts as alive.
    pub fn last_rx(&self) -> Arc<AtomicU64> {
        self.last_rx.clone()
    }

    /// Waits for at least one frame and appends every complete frame available to `out`.
    pub async fn read_frames(&mut self, out: &mut Vec<Frame>) -> Result<(), LinkError> {
        loop {
            self.take_frames(out)?;
            if !out.is_empty() {
                return Ok(());
            }
            self.sock.readable().await?;
            self.raw.reserve(MAX_RECORD + 2);
            match self.sock.try_read_buf(&mut self.raw) {
                Ok(0) => return Err(LinkError::Closed),
                Ok(_) => self.last_rx.store(crate::sys::mono_ms(), Ordering::Relaxed),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// Decodes every complete frame from `buf` into `out`.
    fn decode_all(buf: &mut BytesMut, out: &mut Vec<Frame>) -> Result<(), LinkError> {
        loop {
            match decode(buf) {
                Ok(Some(f)) => out.push(f),
                Ok(None) => return Ok(()),
                Err(e) => return Err(LinkError::Protocol(e.to_string())),
            }
        }
    }

    /// Opens every complete record in `raw` and decodes its frames.
    fn take_frames(&mut self, out: &mut Vec<Frame>) -> Result<(), LinkError> {
        let Some(key) = self.key.as_mut() else {
            return Self::decode_all(&mut self.raw, out);
        };
        while self.raw.len() >= 2 {
            let n = u16::from_be_bytes([self.raw[0], self.raw[1]]) as usize;
            if n < TAG {
                return Err(LinkError::Protocol("record shorter than its tag".into()));
            }
            if self.raw.len() < 2 + n {
                break;
            }
            let mut rec = self.raw.split_to(2 + n);
            rec.advance(2);
            let m = key.open(&mut rec[..]).map_err(|_| LinkError::Crypto)?;
            rec.truncate(m);
            if self.plain.is_empty() {
                // The usual case: the record holds whole frames, decoded in place.
                Self::decode_all(&mut rec, out)?;
                if !rec.is_empty() {
                    self.plain = rec;
                }
            } else {
                self.plain.extend_from_slice(&rec);
                Self::decode_all(&mut self.plain, out)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use std::time::Duration;
    use tokio::net::TcpListener;

    /// A data segment the kernel took in moves the liveness clock, as a byte read does; a
    /// reading without one leaves it, and the clock never goes back.
    #[test]
    fn data_segments_in_the_kernel_count_as_heard() {
        let last_rx = AtomicU64::new(1_000);
        let mut seen = 0;
        assert!(!heard_in_kernel(&last_rx, &mut seen, 0, 2_500));
        assert_eq!(last_rx.load(Ordering::Relaxed), 1_000);
        assert!(heard_in_kernel(&last_rx, &mut seen, 7, 2_500));
        assert_eq!((last_rx.load(Ordering::Relaxed), seen), (2_500, 7));
        assert!(!heard_in_kernel(&last_rx, &mut seen, 7, 3_900));
        assert_eq!(last_rx.load(Ordering::Relaxed), 2_500);
        // The reader stored a later time meanwhile: a kernel reading does not undo it.
        last_rx.store(4_000, Ordering::Relaxed);
        assert!(heard_in_kernel(&last_rx, &mut seen, 9, 3_950));
        assert_eq!(last_rx.load(Ordering::Relaxed), 4_000);
        // The kernel's counter wraps (u32): any change is news.
        seen = u32::MAX;
        assert!(heard_in_kernel(&last_rx, &mut seen, 0, 5_000));
        assert_eq!(last_rx.load(Ordering::Relaxed), 5_000);
    }

    async fn pair(sec: Security, wrong_key: bool) -> Result<(Link, Link), LinkError> {
        let l = TcpListener::bind("127.0.0.1:0").await?;
        let addr = l.local_addr()?;
        let server = KeyPair::generate();
        let client = KeyPair::generate();
        let expect = if wrong_key {
            KeyPair::generate().public
        } else {
            server.public
        };
        let s2 = server.clone();
        let acc = tokio::spawn(async move {
            let (s, _) = l.accept().await?;
            accept(s, &s2, sec).await
        });
        let c = connect(TcpStream::connect(addr).await?, &client, &expect, sec).await;
        let a = acc.await.map_err(|e| LinkError::Protocol(e.to_string()))?;
        let (c, a) = (c?, a?);
        assert_eq!(a.peer, client.public, "the server learns who connected");
        Ok((c, a))
    }

    async fn exchange(sec: Security) {
        let (mut c, mut a) = pair(sec, false).await.unwrap();
        let payload = Bytes::from((0..200_000u32).map(|i| i as u8).collect::<Vec<_>>());
        let mut sent = Vec::new();
        for (i, chunk) in payload.chunks(16_384).enumerate() {
            c.writer
                .push_data(StreamId(1), (i * 16_384) as u64, chunk)
                .unwrap();
            sent.push(chunk.to_vec());
        }
        c.writer.push_frame(&Frame::Ping { nonce: 9 }).unwrap();
        let w = tokio::spawn(async move {
            c.writer.flush().await.unwrap();
            c
        });
        let mut got = Vec::new();
        let mut frames = Vec::new();
        while got.len() < sent.len() + 1 {
            a.reader.read_frames(&mut frames).await.unwrap();
            got.append(&mut frames);
        }
        for (f, want) in got.iter().zip(&sent) {
            match f {
                Frame::StreamData { payload, .. } => assert_eq!(&payload[..], &want[..]),
                other => panic!("unexpected {other:?}"),
            }
        }
        assert_eq!(got.last(), Some(&Frame::Ping { nonce: 9 }));
        let mut c = w.await.unwrap();
        c.writer.close().await;
        let mut frames = Vec::new();
        assert!(matches!(
            a.reader.read_frames(&mut frames).await,
            Err(LinkError::Closed)
        ));
    }

    #[tokio::test]
    async fn congestion_control_restarts_only_when_stream_data_resumes_after_a_pause() {
        let (mut c, mut a) = pair(Security::Insecure, false).await.unwrap();
        crate::sys::set_congestion(c.writer.sock().as_ref(), "cubic").unwrap();
        c.writer.set_cc_restart(Duration::from_millis(300));
        let mut frames = Vec::new();
        let send = |w: &mut LinkWriter, data: bool| {
            if data {
                w.push_data(StreamId(1), 0, b"x").unwrap();
            } else {
                w.push_frame(&Frame::Ping { nonce: 1 }).unwrap();
            }
            assert!(w.try_flush().unwrap());
        };
        // The first data restarts; data soon after and pings never do.
        send(&mut c.writer, true);
        send(&mut c.writer, true);
        send(&mut c.writer, false);
        assert_eq!(c.writer.cc_restarts(), 1);
        tokio::time::sleep(Duration::from_millis(350)).await;
        send(&mut c.writer, false);
        assert_eq!(c.writer.cc_restarts(), 1, "a ping is not stream data");
        send(&mut c.writer, true);
        assert_eq!(c.writer.cc_restarts(), 2, "data after the pause restarts");
        assert_eq!(
            crate::sys::congestion(c.writer.sock().as_ref()).unwrap(),
            "cubic"
        );
        // Every frame arrived.
        let mut got = 0;
        while got < 5 {
            a.reader.read_frames(&mut frames).await.unwrap();
            got += frames.len();
            frames.clear();
        }
        assert_eq!(got, 5);
        // Off, and on a control other than CUBIC: never.
        c.writer.set_cc_restart(Duration::ZERO);
        tokio::time::sleep(Duration::from_millis(350)).await;
        send(&mut c.writer, true);
        c.writer.set_cc_restart(Duration::from_millis(1));
        crate::sys::set_congestion(c.writer.sock().as_ref(), "reno").unwrap();
        tokio::time::sleep(Duration::from_millis(5)).await;
        send(&mut c.writer, true);
        assert_eq!(c.writer.cc_restarts(), 2);
        assert_eq!(
            crate::sys::congestion(c.writer.sock().as_ref()).unwrap(),
            "reno"
        );
        // Data still queued from before the pause (a reader that stopped): not idle on the
        // wire, so no restart.
        crate::sys::set_congestion(c.writer.sock().as_ref(), "cubic").unwrap();
        c.writer.set_cc_restart(Duration::from_millis(300));
        let block = vec![7u8; 16_000];
        let mut queued = 0;
        while c.writer.try_flush().unwrap() && queued < 64 << 20 {
            c.writer.push_data(StreamId(1), 0, &block).unwrap();
            queued += block.len();
        }
        assert!(crate::sys::outq(c.writer.sock().as_ref()).unwrap() > CC_RESTART_MAX_QUEUED);
        tokio::time::sleep(Duration::from_millis(350)).await;
        c.writer.push_data(StreamId(1), 0, b"x").unwrap();
        let _ = c.writer.try_flush().unwrap();
        assert_eq!(
            c.writer.cc_restarts(),
            2,
            "data queued in the kernel: no restart"
        );
    }

    /// With the ramp on, a burst of stream data after a pause of [`RAMP_IDLE_MS`] (or the
    /// link's first) starts with a record cap of [`RAMP_FIRST`] that doubles with each data
    /// frame until [`RAMP_END`]; data soon after a frame keeps the ramp where it is, pings
    /// neither start nor end one, and a link without the ramp never cuts.
    #[tokio::test]
    async fn a_burst_after_a_pause_ramps_its_records_up() {
        let (mut c, _a) = pair(Security::Insecure, false).await.unwrap();
        let w = &mut c.writer;
        w.start_burst();
        assert_eq!(w.ramp_cap(), None, "off by default");
        w.set_ramp(true);
        let mut caps = Vec::new();
        w.start_burst();
        while let Some(cap) = w.ramp_cap() {
            caps.push(cap);
            w.push_data(StreamId(1), 0, &vec![1u8; cap]).unwrap();
            w.start_burst();
            if caps.len() > 8 {
                break;
            }
        }
        assert_eq!(caps, [RAMP_FIRST, 2 * RAMP_FIRST, 4 * RAMP_FIRST]);
        // Right after data: no new ramp; a ping does not count as data.
        w.push_frame(&Frame::Ping { nonce: 1 }).unwrap();
        w.start_burst();
        assert_eq!(w.ramp_cap(), None);
        tokio::time::sleep(Duration::from_millis(RAMP_IDLE_MS + 20)).await;
        w.push_frame(&Frame::Ping { nonce: 2 }).unwrap();
        w.start_burst();
        assert_eq!(
            w.ramp_cap(),
            Some(RAMP_FIRST),
            "data after the pause ramps again"
        );
        w.set_ramp(false);
        assert_eq!(w.ramp_cap(), None);
    }

    #[tokio::test]
    async fn noise_link_carries_frames_both_ways_in_order() {
        exchange(Security::Noise).await;
    }

    #[tokio::test]
    async fn insecure_link_carries_frames() {
        exchange(Security::Insecure).await;
    }

    #[tokio::test]
    async fn wrong_pinned_key_fails_the_handshake() {
        let e = pair(Security::Noise, true).await.unwrap_err();
        assert!(
            matches!(e, LinkError::Handshake(_) | LinkError::Closed),
            "{e}"
        );
    }

    #[tokio::test]
    async fn insecure_client_against_noise_server_is_refused() {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let server = KeyPair::generate();
        let s2 = server.clone();
        let acc = tokio::spawn(async move {
            let (s, _) = l.accept().await.unwrap();
            accept(s, &s2, Security::Noise).await
        });
        let _ = connect(
            TcpStream::connect(addr).await.unwrap(),
            &KeyPair::generate(),
            &server.public,
            Security::Insecure,
        )
        .await;
        assert!(matches!(acc.await.unwrap(), Err(LinkError::Handshake(_))));
    }

    /// Another implementation may cut records inside frames; they are reassembled.
    #[tokio::test]
    async fn records_that_split_frames_are_reassembled() {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let a = TcpStream::connect(l.local_addr().unwrap()).await.unwrap();
        let (b, _) = l.accept().await.unwrap();
        let (k1, k2) = ([7u8; 32], [9u8; 32]);
        let mut rx = split(b, Some((k2, k1)), PublicKey([0; 32]));
        let mut frames = BytesMut::new();
        let payload: Vec<u8> = (0..40_000u32).map(|i| i as u8).collect();
        for (i, chunk) in payload.chunks(16_384).enumerate() {
            encode(
                &Frame::StreamData {
                    stream: StreamId(3),
                    dsn: (i * 16_384) as u64,
                    payload: bytes::Bytes::copy_from_slice(chunk),
                },
                &mut frames,
            )
            .unwrap();
        }
        encode(&Frame::Ping { nonce: 1 }, &mut frames).unwrap();
        // Cut the plaintext into records at awkward places.
        let mut key = RecordKey::new(&k1);
        let mut wire = Vec::new();
        for part in frames.chunks(7_001) {
            let mut p = part.to_vec();
            let tag = key.seal(&mut p).unwrap();
            wire.extend_from_slice(&((p.len() + TAG) as u16).to_be_bytes());
            wire.extend_from_slice(&p);
            wire.extend_from_slice(&tag);
        }
        let w = tokio::spawn(async move {
            let mut a = a;
            a.write_all(&wire).await.unwrap();
            a
        });
        let mut got = Vec::new();
        while got.len() < 4 {
            let mut v = Vec::new();
            rx.reader.read_frames(&mut v).await.unwrap();
            got.append(&mut v);
        }
        let mut data = Vec::new();
        for f in &got[..3] {
            let Frame::StreamData { payload, .. } = f else {
                panic!("{f:?}")
            };
            data.extend_from_slice(payload);
        }
        assert_eq!(data, payload);
        assert_eq!(got[3], Frame::Ping { nonce: 1 });
        drop(w.await.unwrap());
    }

    #[tokio::test]
    async fn tampered_record_is_rejected() {
        let (c, mut a) = pair(Security::Noise, false).await.unwrap();
        // Write a bogus record directly on the socket.
        let mut rec = vec![0u8, 40];
        rec.extend_from_slice(&[0xAB; 40]);
        let mut n = 0;
        while n < rec.len() {
            c.writer.sock().writable().await.unwrap();
            n += c.writer.sock().try_write(&rec[n..]).unwrap_or(0);
        }
        let mut frames = Vec::new();
        assert!(matches!(
            a.reader.read_frames(&mut frames).await,
            Err(LinkError::Crypto)
        ));
    }
}
