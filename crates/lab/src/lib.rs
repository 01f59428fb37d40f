//! `mpbond lab`: a trace-driven multi-device testbed on one machine (docs/lab.md).
//!
//! Every device is a network namespace, every link an emulated one ([`emu`]: rate, trace,
//! delay, queue, loss, changes, in user space on TUN devices because this kernel has no
//! netem), and the programs are real: the mpbond daemons, the kernel's MPTCP, HTTP.

pub mod bounds;
pub mod claim;
pub mod combine;
pub mod counters;
pub mod cpu;
pub mod emu;
pub mod energy;
pub mod http;
pub mod netns;
pub mod report;
pub mod rerun;
pub mod run;
pub mod scenario;
pub mod sched;
pub mod scheme;
pub mod split;
pub mod tcp_probe;
pub mod topo;
pub mod tun;
pub mod video;
pub mod wlan;
