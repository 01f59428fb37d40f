//! `mpbond`: bond the WAN links of several personal devices.
//!
//! One binary with a subcommand per role (proxy, primary, helper) and per tool (sim, lab,
//! status). Run `mpbond --help` for the list.

use clap::{Parser, Subcommand};

mod cli;

/// mpbond: several devices fetch Internet content together (MPBond, MobiSys 2020).
#[derive(Parser, Debug)]
#[command(name = "mpbond", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run the proxy: accepts primaries and helpers, connects streams to origins.
    Proxy(cli::daemon::ProxyArgs),
    /// Run the primary: SOCKS5 or transparent interception, PS-Path and pipes to helpers.
    Primary(cli::daemon::PrimaryArgs),
    /// Run a helper: relays between pipes from paired primaries and the proxy.
    Helper(cli::daemon::HelperArgs),
    /// Run every role in a configuration (dual mode: primary and helper in one process).
    Run(cli::daemon::DaemonArgs),
    /// Create a device key pair.
    Keygen(cli::daemon::KeygenArgs),
    /// Exchange public keys between devices (pairing cards).
    #[command(subcommand)]
    Pair(cli::daemon::PairCmd),
    /// Show a running daemon's sessions, subflows, pipes and buffers.
    Status(cli::daemon::StatusArgs),
    /// Simulate a download over a PS-Path and N helpers with the real scheduler code.
    Sim(Box<cli::sim::SimArgs>),
    /// The multi-device testbed: namespaces, emulated links, real baselines (docs/lab.md).
    #[command(subcommand)]
    Lab(cli::lab::LabCmd),
    /// Measure the daemons on loopback next to a plain TCP relay (docs/performance.md).
    Bench(cli::bench::BenchArgs),
    /// A plain SOCKS5 relay, the benchmark's baseline.
    #[command(hide = true)]
    BenchRelay(cli::bench::RelayArgs),
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let r = match cli.command {
        Command::Proxy(a) => cli::daemon::proxy(a),
        Command::Primary(a) => cli::daemon::primary(a),
        Command::Helper(a) => cli::daemon::helper(a),
        Command::Run(a) => cli::daemon::run_all(a),
        Command::Keygen(a) => cli::daemon::keygen(a),
        Command::Pair(c) => cli::daemon::pair(c),
        Command::Status(a) => cli::daemon::status(a),
        Command::Sim(a) => cli::sim::run(*a),
        Command::Bench(a) => cli::bench::run(a),
        Command::Lab(c) => cli::lab::run(c),
        Command::BenchRelay(a) => cli::bench::relay(a),
    };
    match r {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("mpbond: error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
