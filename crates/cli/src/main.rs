//! `anyspec`: lossless speculative decoding from any drafter.

mod bridge;
mod commands;
mod output;
mod progress;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Lossless speculative decoding from any drafter: a small model with another tokenizer, an
/// n-gram dictionary, the prompt itself, or a pruned drafter.
#[derive(Debug, Parser)]
#[command(name = "anyspec", version, propagate_version = true)]
struct Cli {
    #[command(flatten)]
    global: GlobalArgs,
    #[command(subcommand)]
    command: Command,
}

/// Flags every subcommand understands.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct GlobalArgs {
    /// More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    verbose: u8,
    /// Less output: no logs below errors, no progress bars.
    #[arg(short, long, global = true)]
    quiet: bool,
    /// Do not draw progress bars (they are also hidden when stderr is not a terminal).
    #[arg(long, global = true)]
    no_progress: bool,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// The demo: the committed small models with every drafting method, compared in one table
    /// (acceptance, tokens per step, speed, and whether greedy output is unchanged).
    Demo(commands::demo::Args),
    /// Expected tokens per step, walltime improvement and the best γ for an acceptance rate.
    Theory(commands::theory::Args),
    /// Run every verification rule on toy Markov models and compare with theory.
    Simulate(commands::simulate::Args),
    /// Vocabulary maps between two tokenizers and vocabulary statistics (intersections,
    /// injectivity, fertility, decomposition counts).
    Vocab(commands::vocab::Args),
    /// Build, shard and evaluate static n-gram dictionaries (DictSpec).
    Dict(commands::dict::Args),
    /// Token-affinity matrices for RDK: corpus co-occurrence → row-stochastic sparse M.
    Affinity(commands::affinity::Args),
    /// Frequency-ranked drafter shortlists (FR pruning), end-of-sequence always kept.
    Shortlist(commands::shortlist::Args),
    /// Generate text with a checkpoint, autoregressive or speculative with a model drafter.
    Generate(commands::generate::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging(&cli.global);
    let progress = progress::BarReporter::new(!(cli.global.quiet || cli.global.no_progress));
    let result = match cli.command {
        Command::Demo(args) => commands::demo::run(args, &progress),
        Command::Theory(args) => commands::theory::run(args),
        Command::Simulate(args) => commands::simulate::run(args, &progress),
        Command::Vocab(args) => commands::vocab::run(args, &progress),
        Command::Dict(args) => commands::dict::run(args, &progress),
        Command::Affinity(args) => commands::affinity::run(args, &progress),
        Command::Shortlist(args) => commands::shortlist::run(args, &progress),
        Command::Generate(args) => commands::generate::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) if output::is_broken_pipe(&err) => ExitCode::SUCCESS,
        Err(err) => {
            #[allow(clippy::print_stderr)]
            {
                eprintln!("error: {err:#}");
            }
            ExitCode::FAILURE
        }
    }
}

fn init_logging(global: &GlobalArgs) {
    let default = match (global.quiet, global.verbose) {
        (true, _) => "error",
        (false, 0) => "warn",
        (false, 1) => "info",
        (false, 2) => "debug",
        (false, _) => "trace",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_target(false).init();
}
