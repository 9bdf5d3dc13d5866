//! `anyspec`: lossless speculative decoding from any drafter.

mod args;
mod commands;
mod output;
mod output_guard;
mod progress;

use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

/// Lossless speculative decoding from any drafter: a small model with another tokenizer, an
/// n-gram dictionary, the prompt itself, or a pruned drafter.
#[derive(Debug, Parser)]
#[command(name = "anyspec", version = env!("ANYSPEC_VERSION"), propagate_version = true)]
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
    /// Where anyspec keeps fetched models, the demo's unpacked assets and built artifacts
    /// (default: $ANYSPEC_CACHE, else $XDG_CACHE_HOME/anyspec, else ~/.cache/anyspec;
    /// ~/Library/Caches/anyspec on macOS, %LOCALAPPDATA%\anyspec on Windows).
    #[arg(long, global = true, value_name = "DIR")]
    cache_dir: Option<std::path::PathBuf>,
}

impl GlobalArgs {
    /// The cache root: `--cache-dir`, else the environment's choice.
    pub(crate) fn cache_root(&self) -> anyhow::Result<std::path::PathBuf> {
        Ok(anyspec_model_store::cache_root(self.cache_dir.as_deref())?)
    }
}

#[derive(Debug, Subcommand)]
enum Command {
    /// The demo: SmolLM2-135M-Instruct (fetched once; the committed tiny models as fallback)
    /// with every drafting method, compared in one table (acceptance, drafter cost, speed, and
    /// whether greedy output is unchanged).
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
    /// DynaSpec routers: cluster a model's LM head and train a router that picks the clusters
    /// the drafter's head is evaluated on, per context.
    Dynaspec(commands::dynaspec::Args),
    /// Generate text with a checkpoint, autoregressive or speculative with a model drafter.
    Generate(commands::generate::Args),
    /// What anyspec keeps in its cache directory (models, demo assets, artifacts): list the
    /// sizes, fetch models, clear some or all.
    Cache(commands::cache::Args),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell) on stdout.
    Completions(commands::completions::Args),
}

fn main() -> ExitCode {
    let cli = Cli::from_arg_matches(&command().get_matches()).unwrap_or_else(|err| err.exit());
    init_logging(&cli.global);
    remove_temporaries_on_signals();
    let progress = progress::BarReporter::new(!(cli.global.quiet || cli.global.no_progress));
    let result = match cli.command {
        Command::Demo(args) => commands::demo::run(args, &cli.global, &progress),
        Command::Theory(args) => commands::theory::run(args),
        Command::Simulate(args) => commands::simulate::run(args, &progress),
        Command::Vocab(args) => commands::vocab::run(args, &progress),
        Command::Dict(args) => commands::dict::run(args, &progress),
        Command::Affinity(args) => commands::affinity::run(args, &progress),
        Command::Shortlist(args) => commands::shortlist::run(args, &progress),
        Command::Dynaspec(args) => commands::dynaspec::run(args, &progress),
        Command::Generate(args) => commands::generate::run(args),
        Command::Cache(args) => commands::cache::run(args, &cli.global),
        Command::Completions(args) => commands::completions::run(args, command()),
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

/// The command line, every subcommand taking negative numbers as values: `--temperature -1`
/// reaches the range check that says what is allowed, instead of clap's "unexpected argument".
fn command() -> clap::Command {
    fn allow_negative(command: clap::Command) -> clap::Command {
        let names: Vec<String> = command.get_subcommands().map(|s| s.get_name().to_owned()).collect();
        names
            .iter()
            .fold(command.allow_negative_numbers(true), |command, name| command.mut_subcommand(name, allow_negative))
    }
    allow_negative(Cli::command())
}

/// On SIGINT or SIGTERM, removes the temporary files of the artifacts being written (the files
/// they replace stay as they were) and then ends the process as the signal would have, so the
/// shell still sees "interrupted". A thread waits for the signals, so the removal runs as
/// ordinary code, not inside a signal handler.
#[cfg(unix)]
fn remove_temporaries_on_signals() {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let mut signals = match signal_hook::iterator::Signals::new([SIGINT, SIGTERM]) {
        Ok(signals) => signals,
        Err(err) => {
            tracing::debug!("cannot listen for SIGINT/SIGTERM ({err}); an interrupted build leaves its temporary file");
            return;
        }
    };
    let spawned = std::thread::Builder::new().name("signals".into()).spawn(move || {
        if let Some(signal) = signals.forever().next() {
            for temp in anyspec_core::artifact::remove_temporaries_in_flight() {
                tracing::debug!("removed {}", temp.display());
            }
            let _ = signal_hook::low_level::emulate_default_handler(signal);
            std::process::exit(128 + signal);
        }
    });
    if let Err(err) = spawned {
        tracing::debug!("cannot start the signal thread ({err}); an interrupted build leaves its temporary file");
    }
}

#[cfg(not(unix))]
fn remove_temporaries_on_signals() {}

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
