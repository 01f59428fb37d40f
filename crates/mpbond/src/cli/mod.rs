//! Command-line front end: one binary, one subcommand per role or tool.

pub mod bench;
pub mod daemon;
pub mod lab;
pub mod sim;
