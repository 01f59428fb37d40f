//! The mpbond daemons: `proxy`, `primary` and `helper`, running the sans-IO core over real TCP
//! sockets with tokio.

pub mod config;
pub mod helper;
pub mod keys;
pub mod link;
pub mod liveness;
pub mod meter;
pub mod net;
pub mod node;
pub mod pair;
pub mod primary;
pub mod proxy;
pub mod queue_guard;
pub mod quiet;
pub mod record;
pub mod session;
pub mod status;
pub mod sys;
pub mod ticket;
