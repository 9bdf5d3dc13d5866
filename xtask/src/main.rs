//! `cargo xtask`: project pipelines (reproductions, fixtures, demo assets, benchmarks).

mod demo_assets;
mod dict_fixtures;
mod repro_dict;
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
    /// Train the tokenizers and the four small models of `anyspec demo` into assets/demo/
    /// (about 15 minutes of CPU training in release mode).
    DemoAssets(demo_assets::Args),
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
    /// DictSpec fertility (Table 3), best-configuration emulation per tokenizer and language
    /// (Table 4) and fertility vs speedup (Figure 1), written to reports/dict.md.
    Dict {
        /// The shared data directory (tokenizers/ and corpora/).
        #[arg(long, default_value = "../shared")]
        data: PathBuf,
        /// Tokenizer directories (under <data>/tokenizers) that get the emulation sweep.
        #[arg(long, value_delimiter = ',', default_value = repro_dict::DEFAULT_SWEEP)]
        tokenizers: Vec<String>,
        /// A small grid (orders n1+n2+n3, 200k entries, two min-probs) for a quick look.
        #[arg(long)]
        quick: bool,
    },
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
            Repro::Dict { data, tokenizers, quick } => repro_dict::run(&data, &tokenizers, quick),
        },
        Command::DemoAssets(args) => demo_assets::run(&args),
        Command::Fixtures { which } => match which {
            Fixtures::Dict => dict_fixtures::run(),
        },
    }
}
