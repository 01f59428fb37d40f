//! Frame types: the in-memory form of every frame in docs/protocol.md.

use bytes::Bytes;
use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};

use crate::Reason;

/// Identifies one user stream (one application TCP connection) within a session.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug)]
pub struct StreamId(pub u32);

/// Identifies one subflow of a session. The proxy assigns them: 0 is the subflow that opened
/// the session (normally the PS-Path), joins get 1–255.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug)]
pub struct SubflowId(pub u8);

/// Identifies a session (a primary's bond) at the proxy.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug)]
pub struct SessionId(pub u64);

impl fmt::Display for StreamId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "s{}", self.0)
    }
}

impl fmt::Display for SubflowId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sf{}", self.0)
    }
}

impl fmt::Display for SessionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:016x}", self.0)
    }
}

/// Where a stream goes: a host (address or name, resolved at the proxy) and a port.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Destination {
    /// The host part.
    pub host: Host,
    /// TCP port at the origin.
    pub port: u16,
}

/// The host part of a [`Destination`], with the SOCKS5 address types.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum Host {
    /// An IPv4 address (type 1).
    V4(Ipv4Addr),
    /// A host name of 1–255 printable ASCII bytes (type 3), resolved at the proxy so that the
    /// primary never leaks DNS.
    Name(String),
    /// An IPv6 address (type 4).
    V6(Ipv6Addr),
}

impl fmt::Display for Destination {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.host {
            Host::V4(a) => write!(f, "{a}:{}", self.port),
            Host::V6(a) => write!(f, "[{a}]:{}", self.port),
            Host::Name(n) => write!(f, "{n}:{}", self.port),
        }
    }
}

/// Up to [`crate::MAX_SACKS`] selective-ACK blocks, stored inline so that decoding an ACK never
/// allocates.
#[derive(Clone, Copy, PartialEq, Eq, Default)]
pub struct Sacks {
    len: u8,
    blocks: [(u64, u64); crate::MAX_SACKS],
}

impl Sacks {
    /// An empty list.
    pub const fn new() -> Self {
        Sacks {
            len: 0,
            blocks: [(0, 0); crate::MAX_SACKS],
        }
    }

    /// Adds the half-open range `start..end`. Returns `false` (and adds nothing) when the list
    /// is full or the range is empty.
    pub fn push(&mut self, start: u64, end: u64) -> bool {
        if start >= end || self.len as usize >= crate::MAX_SACKS {
            return false;
        }
        self.blocks[self.len as usize] = (start, end);
        self.len += 1;
        true
    }

    /// The blocks as `(start, end)` half-open ranges.
    pub fn as_slice(&self) -> &[(u64, u64)] {
        &self.blocks[..self.len as usize]
    }

    /// Number of blocks.
    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// True when there are no blocks.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl fmt::Debug for Sacks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.as_slice()).finish()
    }
}

/// A data-level acknowledgement for one stream (`DATA_ACK`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct DataAck {
    /// The stream acknowledged.
    pub stream: StreamId,
    /// Every byte below this DSN has arrived.
    pub cum_ack: u64,
    /// The data sender may send bytes below this DSN; it never moves backwards.
    pub window_end: u64,
    /// Ranges above `cum_ack` that have also arrived.
    pub sacks: Sacks,
    /// The receiver has seen the stream's `STREAM_FIN` (flags bit 0). With `cum_ack` equal to
    /// the final size it tells the sender the stream is complete.
    pub fin_received: bool,
}

/// Pipe state reported to the data sender (`PIPE_FEEDBACK`, MPBond §4.3.2 and §5).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct PipeFeedback {
    /// The helper subflow this pipe belongs to.
    pub subflow: SubflowId,
    /// Measured pipe throughput, bits per second (Th_p).
    pub throughput_bps: u64,
    /// Measured pipe round-trip time, microseconds.
    pub rtt_us: u32,
    /// Bytes buffered at the helper for this subflow in this direction (B_p).
    pub buffered: u64,
    /// Sender's clock in microseconds; older feedback than the newest seen is discarded.
    pub timestamp_us: u64,
    /// Flags bit 0. `false`: the downlink pipe (helper to primary), for the proxy's scheduler.
    /// `true`: the uplink second hop (helper to proxy), for the primary's scheduler.
    pub uplink: bool,
}

/// The pipe's minimum round-trip time (`PIPE_MIN_RTT`, an extension, type 0x81): what a byte
/// that meets no queue takes to cross it and be acknowledged.
///
/// [`PipeFeedback::rtt_us`] is the pipe's smoothed RTT while the helper relays, and so holds
/// the queue of what it had buffered a moment earlier (0.163 s on a 5 Mbit/s pipe whose
/// minimum is a few milliseconds, docs/evaluation.md item 58). PAD counts that queue already
/// as `B_p / Th_p`; for the delay of a byte behind it PAMS wants the propagation part, as it
/// takes the minimum RTT of a direct path. An extension, so that a version-1 peer that
/// predates it skips it and schedules on the smoothed RTT as before.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct PipeMinRtt {
    /// The helper subflow this pipe belongs to.
    pub subflow: SubflowId,
    /// The smallest RTT the pipe's TCP has measured lately (the kernel's `tcpi_min_rtt`,
    /// windowed over minutes), microseconds.
    pub min_rtt_us: u32,
    /// Sender's clock in microseconds; an older report than the newest seen is discarded.
    pub timestamp_us: u64,
    /// Flags bit 0, as in [`PipeFeedback::uplink`]: `true` for the uplink second hop (the
    /// helper's HS-Path to the proxy).
    pub uplink: bool,
}

/// One frame. See docs/protocol.md for each layout.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum Frame {
    /// Device → proxy: open a session (MPBond §4.1).
    MpCapable {
        /// Lowest supported version.
        ver_min: u8,
        /// Highest supported version.
        ver_max: u8,
        /// Empty when the primary opens its own session; a primary's ticket when a helper opens
        /// it on the primary's behalf after `INIT_MP`.
        ticket: Bytes,
    },
    /// Proxy → device: the session is open.
    MpOk {
        /// Negotiated version.
        version: u8,
        /// The subflow id given to this connection.
        subflow: SubflowId,
        /// The new session.
        session: SessionId,
    },
    /// Helper → proxy: attach this connection to a session as a subflow.
    MpJoin {
        /// Lowest supported version.
        ver_min: u8,
        /// Highest supported version.
        ver_max: u8,
        /// The session to join.
        session: SessionId,
        /// The primary's authorisation for this helper.
        ticket: Bytes,
    },
    /// Proxy → helper (relayed to the primary): the subflow joined.
    MpJoinOk {
        /// Negotiated version.
        version: u8,
        /// The subflow id given to this connection.
        subflow: SubflowId,
        /// The session joined.
        session: SessionId,
    },
    /// Primary → helper: open the session for me.
    InitMp {
        /// The primary's authorisation.
        ticket: Bytes,
    },
    /// Primary → helper: join my session.
    InitMpJoin {
        /// The session to join.
        session: SessionId,
        /// The primary's authorisation.
        ticket: Bytes,
    },
    /// Primary → helper: first frame on a pipe.
    PipeOpen {
        /// Lowest supported version.
        ver_min: u8,
        /// Highest supported version.
        ver_max: u8,
        /// Label of the pipe's local interface, e.g. `wifi` or `bt`.
        name: String,
    },
    /// Helper → primary: the pipe is open.
    PipeOk {
        /// Negotiated version.
        version: u8,
    },
    /// A subflow is being torn down; its unacknowledged data must be reinjected.
    SubflowClose {
        /// The subflow.
        subflow: SubflowId,
        /// Why.
        reason: Reason,
    },
    /// Some data on this subflow may have been lost (one of a helper's pipes failed), but the
    /// subflow continues: reinject its unacknowledged data.
    PathReset {
        /// The subflow.
        subflow: SubflowId,
        /// Why.
        reason: Reason,
    },
    /// The connection is closing.
    Close {
        /// Why, as a code.
        code: Reason,
        /// Why, for humans (at most 512 bytes).
        reason: String,
    },
    /// Primary → proxy: open a stream to an origin.
    StreamOpen {
        /// The new stream.
        stream: StreamId,
        /// Where to connect.
        dest: Destination,
    },
    /// Proxy → primary: the origin connection is up.
    StreamOpened {
        /// The stream.
        stream: StreamId,
    },
    /// Stream bytes starting at `dsn`.
    StreamData {
        /// The stream.
        stream: StreamId,
        /// Data sequence number of the first payload byte.
        dsn: u64,
        /// At most [`crate::MAX_PAYLOAD`] bytes.
        payload: Bytes,
    },
    /// Data-level acknowledgement and window.
    DataAck(DataAck),
    /// No data at or beyond `final_size` will be sent.
    StreamFin {
        /// The stream.
        stream: StreamId,
        /// Total bytes in this direction.
        final_size: u64,
    },
    /// Abort the stream in both directions.
    StreamRst {
        /// The stream.
        stream: StreamId,
        /// Why.
        reason: Reason,
    },
    /// Bytes `start..end` were reinjected elsewhere; a helper may drop its copy.
    DataCancel {
        /// The stream.
        stream: StreamId,
        /// First DSN.
        start: u64,
        /// One past the last DSN.
        end: u64,
    },
    /// The current application chunk of data flowing towards this frame's sender ends at `end`.
    ChunkMark {
        /// The stream.
        stream: StreamId,
        /// DSN one past the chunk's last byte.
        end: u64,
    },
    /// Pipe feedback for the scheduler.
    PipeFeedback(PipeFeedback),
    /// Liveness probe.
    Ping {
        /// Echoed in the pong.
        nonce: u64,
    },
    /// Answer to a ping.
    Pong {
        /// The ping's nonce.
        nonce: u64,
    },
    /// Device → proxy, on its own subflow: which radios carry it (an extension, type 0x80, so
    /// a peer that predates it skips it). The proxy's energy-aware helper admission weighs a
    /// helper's radios against the time it saves (docs/design.md, "Energy-aware admission");
    /// nothing else depends on it.
    Radios {
        /// The radio of the sender's own WAN link (its PS-Path or HS-Path); `None`: unknown.
        wan: Option<Radio>,
        /// The radio of the pipe between this helper and its primary; `None` for a primary,
        /// or unknown.
        pipe: Option<Radio>,
    },
    /// Helper → data sender, beside its `PIPE_FEEDBACK`: the pipe's minimum RTT (an
    /// extension, type 0x81).
    PipeMinRtt(PipeMinRtt),
    /// An extension frame (type 0x80–0xFF) that this version does not know; skipped.
    Extension {
        /// Its type byte.
        kind: u8,
        /// Its body, unparsed.
        body: Bytes,
    },
}

impl Frame {
    /// The type byte of this frame on the wire.
    pub fn kind(&self) -> u8 {
        use crate::codec::kind::*;
        match self {
            Frame::MpCapable { .. } => MP_CAPABLE,
            Frame::MpOk { .. } => MP_OK,
            Frame::MpJoin { .. } => MP_JOIN,
            Frame::MpJoinOk { .. } => MP_JOIN_OK,
            Frame::InitMp { .. } => INIT_MP,
            Frame::InitMpJoin { .. } => INIT_MP_JOIN,
            Frame::PipeOpen { .. } => PIPE_OPEN,
            Frame::PipeOk { .. } => PIPE_OK,
            Frame::SubflowClose { .. } => SUBFLOW_CLOSE,
            Frame::PathReset { .. } => PATH_RESET,
            Frame::Close { .. } => CLOSE,
            Frame::StreamOpen { .. } => STREAM_OPEN,
            Frame::StreamOpened { .. } => STREAM_OPENED,
            Frame::StreamData { .. } => STREAM_DATA,
            Frame::DataAck(_) => DATA_ACK,
            Frame::StreamFin { .. } => STREAM_FIN,
            Frame::StreamRst { .. } => STREAM_RST,
            Frame::DataCancel { .. } => DATA_CANCEL,
            Frame::ChunkMark { .. } => CHUNK_MARK,
            Frame::PipeFeedback(_) => PIPE_FEEDBACK,
            Frame::Ping { .. } => PING,
            Frame::Pong { .. } => PONG,
            Frame::Radios { .. } => RADIOS,
            Frame::PipeMinRtt(_) => PIPE_MIN_RTT,
            Frame::Extension { kind, .. } => *kind,
        }
    }

    /// The frame's name as in docs/protocol.md, for logs.
    pub fn name(&self) -> &'static str {
        match self {
            Frame::MpCapable { .. } => "MP_CAPABLE",
            Frame::MpOk { .. } => "MP_OK",
            Frame::MpJoin { .. } => "MP_JOIN",
            Frame::MpJoinOk { .. } => "MP_JOIN_OK",
            Frame::InitMp { .. } => "INIT_MP",
            Frame::InitMpJoin { .. } => "INIT_MP_JOIN",
            Frame::PipeOpen { .. } => "PIPE_OPEN",
            Frame::PipeOk { .. } => "PIPE_OK",
            Frame::SubflowClose { .. } => "SUBFLOW_CLOSE",
            Frame::PathReset { .. } => "PATH_RESET",
            Frame::Close { .. } => "CLOSE",
            Frame::StreamOpen { .. } => "STREAM_OPEN",
            Frame::StreamOpened { .. } => "STREAM_OPENED",
            Frame::StreamData { .. } => "STREAM_DATA",
            Frame::DataAck(_) => "DATA_ACK",
            Frame::StreamFin { .. } => "STREAM_FIN",
            Frame::StreamRst { .. } => "STREAM_RST",
            Frame::DataCancel { .. } => "DATA_CANCEL",
            Frame::ChunkMark { .. } => "CHUNK_MARK",
            Frame::PipeFeedback(_) => "PIPE_FEEDBACK",
            Frame::Ping { .. } => "PING",
            Frame::Pong { .. } => "PONG",
            Frame::Radios { .. } => "RADIOS",
            Frame::PipeMinRtt(_) => "PIPE_MIN_RTT",
            Frame::Extension { .. } => "EXTENSION",
        }
    }
}

/// The radio technology of a link, as a device declares it in [`Frame::Radios`]: what its
/// energy costs depend on (Huang et al., MobiSys 2012, for LTE and WiFi).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize, serde::Deserialize),
    serde(rename_all = "lowercase")
)]
pub enum Radio {
    /// Cellular 4G.
    Lte,
    /// 802.11.
    Wifi,
    /// Bluetooth (classic, RFCOMM pipes as in MPBond §5).
    Bluetooth,
    /// A wire: no radio energy.
    Ethernet,
}

/// A radio name that is none of `lte`, `wifi`, `bluetooth` (`bt`) and `ethernet`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("radio {0:?}: lte, wifi, bluetooth or ethernet")]
pub struct UnknownRadio(pub String);

impl Radio {
    /// Parses `lte`, `wifi`, `bluetooth` (or `bt`) and `ethernet`.
    pub fn parse(s: &str) -> Result<Radio, UnknownRadio> {
        Ok(match s {
            "lte" => Radio::Lte,
            "wifi" => Radio::Wifi,
            "bluetooth" | "bt" => Radio::Bluetooth,
            "ethernet" => Radio::Ethernet,
            _ => return Err(UnknownRadio(s.to_string())),
        })
    }

    /// The name [`parse`](Self::parse) reads.
    pub fn name(self) -> &'static str {
        match self {
            Radio::Lte => "lte",
            Radio::Wifi => "wifi",
            Radio::Bluetooth => "bluetooth",
            Radio::Ethernet => "ethernet",
        }
    }

    /// Its code on the wire (0 stands for "unknown").
    pub fn code(self) -> u8 {
        match self {
            Radio::Lte => 1,
            Radio::Wifi => 2,
            Radio::Bluetooth => 3,
            Radio::Ethernet => 4,
        }
    }

    /// The radio of a wire code; `None` for 0 and for codes a later version may add, so a
    /// newer peer's radio reads as unknown instead of breaking the connection.
    pub fn from_code(c: u8) -> Option<Radio> {
        match c {
            1 => Some(Radio::Lte),
            2 => Some(Radio::Wifi),
            3 => Some(Radio::Bluetooth),
            4 => Some(Radio::Ethernet),
            _ => None,
        }
    }
}

impl std::str::FromStr for Radio {
    type Err = UnknownRadio;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Radio::parse(s)
    }
}
