//! `mpbond sim`: a deterministic discrete-event simulator of MPBond topologies.
//!
//! It runs the real core code (the [`mpbond_core::Sender`] with any scheduler, the
//! [`mpbond_core::Receiver`], the path estimator) over a model of the network: a PS-Path and N
//! helpers, each with an HS-Path, a user-space buffer and a pipe, every path a TCP-like
//! connection over a rate-limited, delayed, drop-tail link. docs/sim.md describes the model and
//! its limits.

pub mod energy;
pub mod fluid;
pub mod hystart;
pub mod link;
pub mod rate;
pub mod report;
pub mod rng;
pub mod spec;
pub mod tcp;
pub mod world;

pub use report::SimResult;
pub use spec::Scenario;
pub use world::{run, SimError};
