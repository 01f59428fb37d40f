//! Encoding and decoding of frames (docs/protocol.md, "Frame layout").
//!
//! The decoder is the first code that touches bytes from the network, so it is written to three
//! rules, each checked by property tests and the `decode` fuzz target:
//! - it never panics, whatever the input;
//! - it never allocates more than one maximum frame, and rejects an oversized length from the
//!   4-byte header alone, before any body is buffered;
//! - it consumes input only when it returns a whole frame, so a caller can feed it a byte at a
//!   time.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use std::net::{Ipv4Addr, Ipv6Addr};

use crate::frame::*;
use crate::{Reason, HEADER_LEN, MAX_BODY, MAX_PAYLOAD, MAX_SACKS};

/// Frame type bytes.
pub mod kind {
    #![allow(missing_docs)]
    pub const MP_CAPABLE: u8 = 0x01;
    pub const MP_OK: u8 = 0x02;
    pub const MP_JOIN: u8 = 0x03;
    pub const MP_JOIN_OK: u8 = 0x04;
    pub const INIT_MP: u8 = 0x05;
    pub const INIT_MP_JOIN: u8 = 0x06;
    pub const PIPE_OPEN: u8 = 0x07;
    pub const PIPE_OK: u8 = 0x08;
    pub const SUBFLOW_CLOSE: u8 = 0x09;
    pub const PATH_RESET: u8 = 0x0A;
    pub const CLOSE: u8 = 0x0F;
    pub const STREAM_OPEN: u8 = 0x10;
    pub const STREAM_OPENED: u8 = 0x11;
    pub const STREAM_DATA: u8 = 0x12;
    pub const DATA_ACK: u8 = 0x13;
    pub const STREAM_FIN: u8 = 0x14;
    pub const STREAM_RST: u8 = 0x15;
    pub const DATA_CANCEL: u8 = 0x16;
    pub const CHUNK_MARK: u8 = 0x17;
    pub const PIPE_FEEDBACK: u8 = 0x20;
    pub const PING: u8 = 0x21;
    pub const PONG: u8 = 0x22;
    /// Types at or above this are optional extensions.
    pub const FIRST_EXTENSION: u8 = 0x80;
    /// The first extension this version knows: a device's radios.
    pub const RADIOS: u8 = 0x80;
    /// A pipe's minimum RTT, beside its feedback.
    pub const PIPE_MIN_RTT: u8 = 0x81;
}

/// Most bytes of a ticket.
pub const MAX_TICKET: usize = 512;
/// Most bytes of a pipe name.
pub const MAX_PIPE_NAME: usize = 32;
/// Most bytes of a `CLOSE` reason text.
pub const MAX_CLOSE_REASON: usize = 512;
/// `DATA_ACK` flag: the receiver has seen the stream's FIN.
pub const ACK_FLAG_FIN: u8 = 0x01;
/// `PIPE_FEEDBACK` and `PIPE_MIN_RTT` flag: the report is about the uplink direction.
pub const FEEDBACK_FLAG_UPLINK: u8 = 0x01;
/// Size of a `STREAM_DATA` frame without its payload.
pub const DATA_OVERHEAD: usize = HEADER_LEN + 4 + 8;

/// Why a byte sequence is not a valid frame. Each maps to the reason code a receiver sends in its
/// `CLOSE` ([`DecodeError::reason`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// The header announces a body longer than [`MAX_BODY`].
    #[error("frame body of {len} bytes exceeds the maximum of {MAX_BODY}")]
    TooLarge {
        /// The announced body length.
        len: usize,
    },
    /// A mandatory frame type this version does not know.
    #[error("unknown mandatory frame type 0x{0:02x}")]
    UnknownType(u8),
    /// The body does not match the layout of its type.
    #[error("malformed {frame} frame: {detail}")]
    Malformed {
        /// The frame's name.
        frame: &'static str,
        /// What is wrong.
        detail: &'static str,
    },
}

impl DecodeError {
    /// The reason code to send in the `CLOSE` that answers this error.
    pub fn reason(&self) -> Reason {
        match self {
            DecodeError::TooLarge { .. } => Reason::FRAME_TOO_LARGE,
            DecodeError::UnknownType(_) => Reason::UNKNOWN_FRAME,
            DecodeError::Malformed { .. } => Reason::MALFORMED,
        }
    }
}

/// Why a frame cannot be encoded: it breaks a limit of the protocol. Encoding checks every
/// limit the decoder checks, so mpbond never sends a frame its peer must reject.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EncodeError {
    /// A variable-size field is too long.
    #[error("{what} is {len} bytes, more than the maximum of {max}")]
    TooLong {
        /// Which field.
        what: &'static str,
        /// Its length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// A field has a value the protocol forbids.
    #[error("invalid {0}")]
    Invalid(&'static str),
}

/// Decodes one frame from the front of `buf`.
///
/// Returns `Ok(None)` when `buf` does not yet hold a whole frame (nothing is consumed), and
/// `Ok(Some(frame))` after removing the frame's bytes from `buf`. An error leaves `buf` in an
/// unspecified state: the connection must be closed.
pub fn decode(buf: &mut BytesMut) -> Result<Option<Frame>, DecodeError> {
    loop {
        let Some(body_len) = peek_body_len(buf)? else {
            return Ok(None);
        };
        if buf.len() < HEADER_LEN + body_len {
            return Ok(None);
        }
        let kind = buf[0];
        let flags = buf[1];
        buf.advance(HEADER_LEN);
        let body = buf.split_to(body_len).freeze();
        match parse_body(kind, flags, body)? {
            Some(frame) => return Ok(Some(frame)),
            // Unknown extension frame: skipped, try the next one.
            None => continue,
        }
    }
}

/// Decodes one frame from the front of a byte slice, returning it and the number of bytes it
/// used. Unknown extension frames are returned as [`Frame::Extension`] rather than skipped.
/// Returns `Ok(None)` when the slice does not hold a whole frame.
pub fn decode_slice(input: &[u8]) -> Result<Option<(Frame, usize)>, DecodeError> {
    let Some(body_len) = peek_body_len(input)? else {
        return Ok(None);
    };
    let total = HEADER_LEN + body_len;
    let Some(frame_bytes) = input.get(..total) else {
        return Ok(None);
    };
    let body = Bytes::copy_from_slice(&frame_bytes[HEADER_LEN..]);
    let frame = match parse_body(frame_bytes[0], frame_bytes[1], body.clone())? {
        Some(f) => f,
        None => Frame::Extension {
            kind: frame_bytes[0],
            body,
        },
    };
    Ok(Some((frame, total)))
}

/// Reads the body length from a header, rejecting oversized frames before their body arrives.
fn peek_body_len(buf: &[u8]) -> Result<Option<usize>, DecodeError> {
    if buf.len() < HEADER_LEN {
        return Ok(None);
    }
    let len = u16::from_be_bytes([buf[2], buf[3]]) as usize;
    if len > MAX_BODY {
        return Err(DecodeError::TooLarge { len });
    }
    Ok(Some(len))
}

/// A bounds-checked reader over a frame body.
struct Body {
    buf: Bytes,
    frame: &'static str,
}

impl Body {
    fn err(&self, detail: &'static str) -> DecodeError {
        DecodeError::Malformed {
            frame: self.frame,
            detail,
        }
    }

    fn need(&self, n: usize) -> Result<(), DecodeError> {
        if self.buf.remaining() < n {
            Err(self.err("body too short"))
        } else {
            Ok(())
        }
    }

    fn u8(&mut self) -> Result<u8, DecodeError> {
        self.need(1)?;
        Ok(self.buf.get_u8())
    }

    fn u16(&mut self) -> Result<u16, DecodeError> {
        self.need(2)?;
        Ok(self.buf.get_u16())
    }

    fn u32(&mut self) -> Result<u32, DecodeError> {
        self.need(4)?;
        Ok(self.buf.get_u32())
    }

    fn u64(&mut self) -> Result<u64, DecodeError> {
        self.need(8)?;
        Ok(self.buf.get_u64())
    }

    fn bytes(&mut self, n: usize) -> Result<Bytes, DecodeError> {
        self.need(n)?;
        Ok(self.buf.split_to(n))
    }

    fn rest(&mut self) -> Bytes {
        std::mem::take(&mut self.buf)
    }

    /// A `u16`-length-prefixed ticket.
    fn ticket(&mut self) -> Result<Bytes, DecodeError> {
        let n = self.u16()? as usize;
        if n > MAX_TICKET {
            return Err(self.err("ticket longer than 512 bytes"));
        }
        self.bytes(n)
    }

    fn text(&mut self, n: usize) -> Result<String, DecodeError> {
        let b = self.bytes(n)?;
        String::from_utf8(b.to_vec()).map_err(|_| self.err("text is not UTF-8"))
    }

    fn end(self) -> Result<(), DecodeError> {
        if self.buf.has_remaining() {
            Err(self.err("trailing bytes after the body"))
        } else {
            Ok(())
        }
    }
}

fn frame_name(k: u8) -> &'static str {
    use kind::*;
    match k {
        MP_CAPABLE => "MP_CAPABLE",
        MP_OK => "MP_OK",
        MP_JOIN => "MP_JOIN",
        MP_JOIN_OK => "MP_JOIN_OK",
        INIT_MP => "INIT_MP",
        INIT_MP_JOIN => "INIT_MP_JOIN",
        PIPE_OPEN => "PIPE_OPEN",
        PIPE_OK => "PIPE_OK",
        SUBFLOW_CLOSE => "SUBFLOW_CLOSE",
        PATH_RESET => "PATH_RESET",
        CLOSE => "CLOSE",
        STREAM_OPEN => "STREAM_OPEN",
        STREAM_OPENED => "STREAM_OPENED",
        STREAM_DATA => "STREAM_DATA",
        DATA_ACK => "DATA_ACK",
        STREAM_FIN => "STREAM_FIN",
        STREAM_RST => "STREAM_RST",
        DATA_CANCEL => "DATA_CANCEL",
        CHUNK_MARK => "CHUNK_MARK",
        PIPE_FEEDBACK => "PIPE_FEEDBACK",
        PING => "PING",
        PONG => "PONG",
        RADIOS => "RADIOS",
        PIPE_MIN_RTT => "PIPE_MIN_RTT",
        _ => "EXTENSION",
    }
}

/// Parses a body; `Ok(None)` for an extension frame to be skipped.
fn parse_body(k: u8, flags: u8, body: Bytes) -> Result<Option<Frame>, DecodeError> {
    use kind::*;
    let mut b = Body {
        buf: body,
        frame: frame_name(k),
    };
    let frame = match k {
        MP_CAPABLE => {
            let ver_min = b.u8()?;
            let ver_max = b.u8()?;
            let ticket = b.ticket()?;
            Frame::MpCapable {
                ver_min,
                ver_max,
                ticket,
            }
        }
        MP_OK => Frame::MpOk {
            version: b.u8()?,
            subflow: SubflowId(b.u8()?),
            session: SessionId(b.u64()?),
        },
        MP_JOIN => {
            let ver_min = b.u8()?;
            let ver_max = b.u8()?;
            let session = SessionId(b.u64()?);
            let ticket = b.ticket()?;
            Frame::MpJoin {
                ver_min,
                ver_max,
                session,
                ticket,
            }
        }
        MP_JOIN_OK => Frame::MpJoinOk {
            version: b.u8()?,
            subflow: SubflowId(b.u8()?),
            session: SessionId(b.u64()?),
        },
        INIT_MP => Frame::InitMp {
            ticket: b.ticket()?,
        },
        INIT_MP_JOIN => {
            let session = SessionId(b.u64()?);
            Frame::InitMpJoin {
                session,
                ticket: b.ticket()?,
            }
        }
        PIPE_OPEN => {
            let ver_min = b.u8()?;
            let ver_max = b.u8()?;
            let n = b.u8()? as usize;
            if n > MAX_PIPE_NAME {
                return Err(b.err("pipe name longer than 32 bytes"));
            }
            Frame::PipeOpen {
                ver_min,
                ver_max,
                name: b.text(n)?,
            }
        }
        PIPE_OK => Frame::PipeOk { version: b.u8()? },
        SUBFLOW_CLOSE => Frame::SubflowClose {
            subflow: SubflowId(b.u8()?),
            reason: Reason(b.u16()?),
        },
        PATH_RESET => Frame::PathReset {
            subflow: SubflowId(b.u8()?),
            reason: Reason(b.u16()?),
        },
        CLOSE => {
            let code = Reason(b.u16()?);
            let n = b.u16()? as usize;
            if n > MAX_CLOSE_REASON {
                return Err(b.err("reason text longer than 512 bytes"));
            }
            Frame::Close {
                code,
                reason: b.text(n)?,
            }
        }
        STREAM_OPEN => {
            let stream = StreamId(b.u32()?);
            let port = b.u16()?;
            let host = match b.u8()? {
                1 => {
                    let v = b.u32()?;
                    Host::V4(Ipv4Addr::from(v))
                }
                4 => {
                    b.need(16)?;
                    let mut a = [0u8; 16];
                    b.buf.copy_to_slice(&mut a);
                    Host::V6(Ipv6Addr::from(a))
                }
                3 => {
                    let n = b.u8()? as usize;
                    if n == 0 {
                        return Err(b.err("empty host name"));
                    }
                    let raw = b.bytes(n)?;
                    if !raw.iter().all(|c| c.is_ascii_graphic()) {
                        return Err(b.err("host name is not printable ASCII"));
                    }
                    // All bytes are ASCII, so this cannot fail; map the error anyway.
                    Host::Name(String::from_utf8(raw.to_vec()).map_err(|_| b.err("host name"))?)
                }
                _ => return Err(b.err("unknown address type")),
            };
            Frame::StreamOpen {
                stream,
                dest: Destination { host, port },
            }
        }
        STREAM_OPENED => Frame::StreamOpened {
            stream: StreamId(b.u32()?),
        },
        STREAM_DATA => {
            let stream = StreamId(b.u32()?);
            let dsn = b.u64()?;
            let payload = b.rest();
            if payload.len() > MAX_PAYLOAD {
                return Err(b.err("payload longer than 16384 bytes"));
            }
            if dsn.checked_add(payload.len() as u64).is_none() {
                return Err(b.err("data sequence number overflows"));
            }
            Frame::StreamData {
                stream,
                dsn,
                payload,
            }
        }
        DATA_ACK => {
            let stream = StreamId(b.u32()?);
            let cum_ack = b.u64()?;
            let window_end = b.u64()?;
            if window_end < cum_ack {
                return Err(b.err("window end below the cumulative ACK"));
            }
            let n = b.u8()? as usize;
            if n > MAX_SACKS {
                return Err(b.err("more than 4 SACK blocks"));
            }
            let mut sacks = Sacks::new();
            for _ in 0..n {
                let start = b.u64()?;
                let end = b.u64()?;
                if start >= end || start <= cum_ack {
                    return Err(b.err("SACK block empty or not above the cumulative ACK"));
                }
                sacks.push(start, end);
            }
            Frame::DataAck(DataAck {
                stream,
                cum_ack,
                window_end,
                sacks,
                fin_received: flags & ACK_FLAG_FIN != 0,
            })
        }
        STREAM_FIN => Frame::StreamFin {
            stream: StreamId(b.u32()?),
            final_size: b.u64()?,
        },
        STREAM_RST => Frame::StreamRst {
            stream: StreamId(b.u32()?),
            reason: Reason(b.u16()?),
        },
        DATA_CANCEL => {
            let stream = StreamId(b.u32()?);
            let start = b.u64()?;
            let end = b.u64()?;
            if start >= end {
                return Err(b.err("empty range"));
            }
            Frame::DataCancel { stream, start, end }
        }
        CHUNK_MARK => Frame::ChunkMark {
            stream: StreamId(b.u32()?),
            end: b.u64()?,
        },
        PIPE_FEEDBACK => Frame::PipeFeedback(PipeFeedback {
            subflow: SubflowId(b.u8()?),
            throughput_bps: b.u64()?,
            rtt_us: b.u32()?,
            buffered: b.u64()?,
            timestamp_us: b.u64()?,
            uplink: flags & FEEDBACK_FLAG_UPLINK != 0,
        }),
        PING => Frame::Ping { nonce: b.u64()? },
        PONG => Frame::Pong { nonce: b.u64()? },
        RADIOS => Frame::Radios {
            wan: Radio::from_code(b.u8()?),
            pipe: Radio::from_code(b.u8()?),
        },
        PIPE_MIN_RTT => Frame::PipeMinRtt(PipeMinRtt {
            subflow: SubflowId(b.u8()?),
            min_rtt_us: b.u32()?,
            timestamp_us: b.u64()?,
            uplink: flags & FEEDBACK_FLAG_UPLINK != 0,
        }),
        k if k >= FIRST_EXTENSION => return Ok(None),
        k => return Err(DecodeError::UnknownType(k)),
    };
    b.end()?;
    Ok(Some(frame))
}

fn put_ticket(out: &mut BytesMut, t: &Bytes) -> Result<(), EncodeError> {
    if t.len() > MAX_TICKET {
        return Err(EncodeError::TooLong {
            what: "ticket",
            len: t.len(),
            max: MAX_TICKET,
        });
    }
    out.put_u16(t.len() as u16);
    out.put_slice(t);
    Ok(())
}

/// Appends the encoding of `frame` to `out`.
///
/// Fails, without writing anything, when the frame breaks a protocol limit.
pub fn encode(frame: &Frame, out: &mut BytesMut) -> Result<(), EncodeError> {
    let start = out.len();
    let r = encode_inner(frame, out);
    if r.is_err() {
        out.truncate(start);
    }
    r
}

fn encode_inner(frame: &Frame, out: &mut BytesMut) -> Result<(), EncodeError> {
    let start = out.len();
    let flags = match frame {
        Frame::DataAck(a) if a.fin_received => ACK_FLAG_FIN,
        Frame::PipeFeedback(f) if f.uplink => FEEDBACK_FLAG_UPLINK,
        Frame::PipeMinRtt(f) if f.uplink => FEEDBACK_FLAG_UPLINK,
        _ => 0,
    };
    out.put_u8(frame.kind());
    out.put_u8(flags);
    out.put_u16(0); // length, patched below
    match frame {
        Frame::MpCapable {
            ver_min,
            ver_max,
            ticket,
        } => {
            out.put_u8(*ver_min);
            out.put_u8(*ver_max);
            put_ticket(out, ticket)?;
        }
        Frame::MpOk {
            version,
            subflow,
            session,
        }
        | Frame::MpJoinOk {
            version,
            subflow,
            session,
        } => {
            out.put_u8(*version);
            out.put_u8(subflow.0);
            out.put_u64(session.0);
        }
        Frame::MpJoin {
            ver_min,
            ver_max,
            session,
            ticket,
        } => {
            out.put_u8(*ver_min);
            out.put_u8(*ver_max);
            out.put_u64(session.0);
            put_ticket(out, ticket)?;
        }
        Frame::InitMp { ticket } => put_ticket(out, ticket)?,
        Frame::InitMpJoin { session, ticket } => {
            out.put_u64(session.0);
            put_ticket(out, ticket)?;
        }
        Frame::PipeOpen {
            ver_min,
            ver_max,
            name,
        } => {
            if name.len() > MAX_PIPE_NAME {
                return Err(EncodeError::TooLong {
                    what: "pipe name",
                    len: name.len(),
                    max: MAX_PIPE_NAME,
                });
            }
            out.put_u8(*ver_min);
            out.put_u8(*ver_max);
            out.put_u8(name.len() as u8);
            out.put_slice(name.as_bytes());
        }
        Frame::PipeOk { version } => out.put_u8(*version),
        Frame::SubflowClose { subflow, reason } | Frame::PathReset { subflow, reason } => {
            out.put_u8(subflow.0);
            out.put_u16(reason.0);
        }
        Frame::Close { code, reason } => {
            if reason.len() > MAX_CLOSE_REASON {
                return Err(EncodeError::TooLong {
                    what: "close reason",
                    len: reason.len(),
                    max: MAX_CLOSE_REASON,
                });
            }
            out.put_u16(code.0);
            out.put_u16(reason.len() as u16);
            out.put_slice(reason.as_bytes());
        }
        Frame::StreamOpen { stream, dest } => {
            out.put_u32(stream.0);
            out.put_u16(dest.port);
            match &dest.host {
                Host::V4(a) => {
                    out.put_u8(1);
                    out.put_slice(&a.octets());
                }
                Host::V6(a) => {
                    out.put_u8(4);
                    out.put_slice(&a.octets());
                }
                Host::Name(n) => {
                    if n.is_empty() || n.len() > 255 || !n.bytes().all(|c| c.is_ascii_graphic()) {
                        return Err(EncodeError::Invalid(
                            "host name (must be 1-255 printable ASCII bytes)",
                        ));
                    }
                    out.put_u8(3);
                    out.put_u8(n.len() as u8);
                    out.put_slice(n.as_bytes());
                }
            }
        }
        Frame::StreamOpened { stream } => out.put_u32(stream.0),
        Frame::StreamData {
            stream,
            dsn,
            payload,
        } => {
            if payload.len() > MAX_PAYLOAD {
                return Err(EncodeError::TooLong {
                    what: "STREAM_DATA payload",
                    len: payload.len(),
                    max: MAX_PAYLOAD,
                });
            }
            if dsn.checked_add(payload.len() as u64).is_none() {
                return Err(EncodeError::Invalid("data sequence number overflows"));
            }
            out.put_u32(stream.0);
            out.put_u64(*dsn);
            out.put_slice(payload);
        }
        Frame::DataAck(a) => {
            if a.window_end < a.cum_ack {
                return Err(EncodeError::Invalid("window end below the cumulative ACK"));
            }
            out.put_u32(a.stream.0);
            out.put_u64(a.cum_ack);
            out.put_u64(a.window_end);
            out.put_u8(a.sacks.len() as u8);
            for &(s, e) in a.sacks.as_slice() {
                if s <= a.cum_ack {
                    return Err(EncodeError::Invalid(
                        "SACK block not above the cumulative ACK",
                    ));
                }
                out.put_u64(s);
                out.put_u64(e);
            }
        }
        Frame::StreamFin { stream, final_size } => {
            out.put_u32(stream.0);
            out.put_u64(*final_size);
        }
        Frame::StreamRst { stream, reason } => {
            out.put_u32(stream.0);
            out.put_u16(reason.0);
        }
        Frame::DataCancel { stream, start, end } => {
            if start >= end {
                return Err(EncodeError::Invalid("empty DATA_CANCEL range"));
            }
            out.put_u32(stream.0);
            out.put_u64(*start);
            out.put_u64(*end);
        }
        Frame::ChunkMark { stream, end } => {
            out.put_u32(stream.0);
            out.put_u64(*end);
        }
        Frame::PipeFeedback(f) => {
            out.put_u8(f.subflow.0);
            out.put_u64(f.throughput_bps);
            out.put_u32(f.rtt_us);
            out.put_u64(f.buffered);
            out.put_u64(f.timestamp_us);
        }
        Frame::PipeMinRtt(f) => {
            out.put_u8(f.subflow.0);
            out.put_u32(f.min_rtt_us);
            out.put_u64(f.timestamp_us);
        }
        Frame::Ping { nonce } | Frame::Pong { nonce } => out.put_u64(*nonce),
        Frame::Radios { wan, pipe } => {
            out.put_u8(wan.map_or(0, Radio::code));
            out.put_u8(pipe.map_or(0, Radio::code));
        }
        Frame::Extension { kind, body } => {
            if *kind < kind::FIRST_EXTENSION {
                return Err(EncodeError::Invalid("extension type below 0x80"));
            }
            out.put_slice(body);
        }
    }
    let body_len = out.len() - start - HEADER_LEN;
    if body_len > MAX_BODY {
        return Err(EncodeError::TooLong {
            what: "frame body",
            len: body_len,
            max: MAX_BODY,
        });
    }
    out[start + 2..start + 4].copy_from_slice(&(body_len as u16).to_be_bytes());
    Ok(())
}

/// Writes just the 16-byte header of a `STREAM_DATA` frame whose payload the caller sends
/// separately (vectored writes avoid copying the payload).
pub fn encode_data_header(
    stream: StreamId,
    dsn: u64,
    payload_len: usize,
) -> Result<[u8; DATA_OVERHEAD], EncodeError> {
    if payload_len > MAX_PAYLOAD {
        return Err(EncodeError::TooLong {
            what: "STREAM_DATA payload",
            len: payload_len,
            max: MAX_PAYLOAD,
        });
    }
    let mut h = [0u8; DATA_OVERHEAD];
    h[0] = kind::STREAM_DATA;
    h[2..4].copy_from_slice(&((payload_len + 12) as u16).to_be_bytes());
    h[4..8].copy_from_slice(&stream.0.to_be_bytes());
    h[8..16].copy_from_slice(&dsn.to_be_bytes());
    Ok(h)
}
