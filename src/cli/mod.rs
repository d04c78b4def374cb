//! One file per subcommand: parse options, call the library, write outputs.
//! Each reads like a Kaldi `gmmbin/` main: tables in, library calls, tables out.

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(name = "amtool", version, about = "GPU-accelerated GMM/HMM acoustic-model toolkit for Kaldi and HTK files")]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {}

/// Run a parsed command line; returns the process exit code.
pub fn run(cli: Cli) -> i32 {
    match cli.command {}
}
