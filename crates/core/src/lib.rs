//! The mpbond multipath core, sans-IO.
//!
//! Nothing here opens a socket, spawns a thread or reads a clock. Time and events go in,
//! decisions come out, so the daemons, the simulator and the unit tests all run this one
//! implementation of the parts of MPBond that matter:
//!
//! - [`conn`]: per-stream send and receive state, the session [`Sender`] that asks a scheduler
//!   where each segment goes, and the [`Receiver`] that reassembles and acknowledges;
//! - [`estimator`]: RTT and throughput of paths, and pipe feedback (MPBond §4.3.2);
//! - [`scheduler`]: PAMS (MPBond §4.3) and the baselines minRTT, round-robin and SWTC;
//! - [`path`]: the numbers a scheduler sees of each subflow;
//! - [`energy`]: the radios' power model, shared by PAMS's energy-aware admission and the lab;
//! - [`queue_guard`]: the pacing cap that keeps a link's slow start from overflowing its
//!   bottleneck's queue.

pub mod conn;
pub mod energy;
pub mod estimator;
pub mod feedback;
pub mod goodput;
pub mod path;
pub mod queue_guard;
pub mod ranges;
pub mod scheduler;
mod time;
pub mod units;

pub use conn::{Cancel, Output, Receiver, ReceiverConfig, Sender, SenderConfig, Transmit};
pub use estimator::{DrainRate, PacketFill, PathEstimator, PipeState, TcpSample};
pub use feedback::{FeedbackGate, MinRttGate};
pub use goodput::Goodput;
pub use path::{PathKind, PathView, PipeView};
pub use scheduler::{by_name, Decision, PamsConfig, Recall, SchedContext, Scheduler};
pub use time::Time;
