//! `cargo xtask`: project pipelines (reproductions, fixtures, demo assets, benchmarks).

use clap::{Parser, Subcommand};

/// Project pipelines, run as `cargo xtask <command>`.
#[derive(Debug, Parser)]
#[command(name = "cargo xtask")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Regenerate a paper reproduction report under `reports/`.
    Repro {
        #[command(subcommand)]
        which: Repro,
    },
}

#[derive(Debug, Subcommand)]
enum Repro {}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Repro { which } => match which {},
    }
}
