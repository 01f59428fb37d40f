//! Connection and stream state (issue: "Connection and stream state").
//!
//! - [`SendStream`] / [`Sender`]: the meta buffer per stream, data sequence numbers, and for
//!   each subflow the data scheduled on it and not yet acknowledged, so that it can be
//!   reinjected.
//! - [`RecvStream`] / [`Receiver`]: reassembly with a bounded out-of-order buffer, data-level
//!   ACKs and a receive window, so a slow application cannot make memory grow without bound.

pub mod receiver;
pub mod recv_stream;
pub mod send_buffer;
pub mod send_stream;
pub mod sender;

pub use receiver::{ReceiveError, Receiver, ReceiverConfig};
pub use recv_stream::{RecvError, RecvStream};
pub use send_buffer::SendBuffer;
pub use send_stream::{AckError, FinState, HeadOfLine, Segment, SendStream};
pub use sender::{Cancel, Output, SendError, Sender, SenderConfig, SenderStats, Transmit};

#[cfg(test)]
mod tests;
