//! `cargo xtask`: project pipelines (reproductions, fixtures, demo assets, benchmarks).

mod dict_fixtures;
mod repro_vocab;

use std::path::PathBuf;

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
    /// Regenerate committed test fixtures.
    Fixtures {
        #[command(subcommand)]
        which: Fixtures,
    },
}

#[derive(Debug, Subcommand)]
enum Fixtures {
    /// The tiny BPE tokenizer under crates/dict-builder/tests/data, trained on the corpus there.
    Dict,
}

#[derive(Debug, Subcommand)]
enum Repro {
    /// hetero-vocab-sd Tables 4, 5, 6, 8 and 9 on the tokenizers in `<data>/tokenizers`, written
    /// to reports/vocab.md.
    Vocab {
        /// The shared data directory (tokenizers/ and corpora/).
        #[arg(long, default_value = "../shared")]
        data: PathBuf,
    },
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Repro { which } => match which {
            Repro::Vocab { data } => repro_vocab::run(&data),
        },
        Command::Fixtures { which } => match which {
            Fixtures::Dict => dict_fixtures::run(),
        },
    }
}
