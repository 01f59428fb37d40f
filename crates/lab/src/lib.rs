//! `mpbond lab`: a trace-driven multi-device testbed on one machine (docs/lab.md).
//!
//! Every device is a network namespace, every link an emulated one ([`emu`]: rate, trace,
//! delay, queue, loss, changes, in user space on TUN devices because this kernel has no
//! netem), and the programs are real: the mpbond daemons, the kernel's MPTCP, HTTP.

pub mod emu;
pub mod netns;
pub mod topo;
pub mod tun;
