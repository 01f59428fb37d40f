//! The mpbond wire protocol (docs/protocol.md).
//!
//! This crate is sans-IO: it turns [`Frame`] values into bytes and bytes into frames, and knows
//! nothing of sockets, tasks or clocks. The daemons, the simulator, the tests and the fuzz
//! target all use this one codec.

mod codec;
mod frame;
mod reason;

pub use codec::{
    decode, decode_slice, encode, encode_data_header, kind, DecodeError, EncodeError, ACK_FLAG_FIN,
    DATA_OVERHEAD, MAX_CLOSE_REASON, MAX_PIPE_NAME, MAX_TICKET,
};
pub use frame::{
    DataAck, Destination, Frame, Host, PipeFeedback, PipeMinRtt, Radio, Sacks, SessionId, StreamId,
    SubflowId, UnknownRadio,
};
pub use reason::Reason;

/// The protocol version this build speaks.
pub const VERSION: u8 = 1;
/// Oldest protocol version this build speaks.
pub const MIN_VERSION: u8 = 1;
/// Bytes in a frame header: type, flags, body length.
pub const HEADER_LEN: usize = 4;
/// Largest frame body; the decoder rejects a longer length before reading the body.
pub const MAX_BODY: usize = 16_400;
/// Largest `STREAM_DATA` payload.
pub const MAX_PAYLOAD: usize = 16_384;
/// Largest whole frame.
pub const MAX_FRAME: usize = HEADER_LEN + MAX_BODY;
/// Most SACK blocks in one `DATA_ACK`.
pub const MAX_SACKS: usize = 4;

/// Picks the version both sides speak, given the peer's range (docs/protocol.md, "Version
/// negotiation"). `None` means there is none and the answer is `CLOSE(VERSION_MISMATCH)`.
pub fn negotiate_version(peer_min: u8, peer_max: u8) -> Option<u8> {
    let hi = peer_max.min(VERSION);
    let lo = peer_min.max(MIN_VERSION);
    (lo <= hi).then_some(hi)
}

#[cfg(test)]
mod tests;
