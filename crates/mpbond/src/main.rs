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
    /// Simulate a download over a PS-Path and N helpers with the real scheduler code.
    Sim(cli::sim::SimArgs),
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let r = match cli.command {
        Command::Sim(a) => cli::sim::run(a),
    };
    match r {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("mpbond: error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
