//! `anyspec dict`: DictSpec n-gram dictionaries — count, merge, build, inspect, emulate.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, bail};
use anyspec_core::Progress;
use anyspec_core::artifact::ArtifactKind;
use anyspec_dict_builder::{
    BuildParams, ContinuationRule, CorpusOptions, Dictionary, EmulationConfig, NgramCounts, build_dictionary, emulate,
    running_text::encode_plain, write_dictionary,
};
use anyspec_drafters::{DictionaryDrafter, Hybrid, HybridOrder, PromptLookup, PromptLookupConfig};
use serde::Serialize;

use crate::args::{flag_error, load_vocabulary};
use crate::output::{print_json, print_text, table};
use crate::output_guard::{Output, check_counted_once, check_output};

/// Build, shard and evaluate static n-gram dictionaries (DictSpec).
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(subcommand)]
    command: DictCommand,
}

#[derive(Debug, clap::Subcommand)]
enum DictCommand {
    /// Build a dictionary for one tokenizer from a corpus (or from count shards).
    Build(BuildArgs),
    /// Count word n-grams of part of a corpus into a shard (tokenizer-independent).
    Count(CountArgs),
    /// Merge count shards into one.
    Merge(MergeArgs),
    /// Replay reference text through a drafter and report the emulated speedup.
    Emulate(EmulateArgs),
    /// Show a dictionary's header: tokenizer fingerprint, build parameters, size.
    Info(InfoArgs),
}

#[derive(Debug, clap::Args)]
struct CorpusArgs {
    /// Corpus files: plain text, or JSONL (`*.jsonl`) with one document per line; gzip is
    /// recognised by content. Repeat the flag or list several paths.
    #[arg(long, num_args = 1.., required = true)]
    corpus: Vec<PathBuf>,
    /// The JSONL field that holds the text.
    #[arg(long, default_value = "text")]
    text_field: String,
}

#[derive(Debug, clap::Args)]
struct BuildArgs {
    /// The target model's `tokenizer.json`, GGUF file or checkpoint directory (its tokenizer is
    /// read); the dictionary only works with this tokenizer.
    #[arg(long)]
    tokenizer: PathBuf,
    /// Corpus files to count (plain text or JSONL, gzip accepted).
    #[arg(long, num_args = 1.., required_unless_present = "counts", conflicts_with = "counts")]
    corpus: Vec<PathBuf>,
    /// Count shards written by `anyspec dict count` / `merge`, instead of a corpus.
    #[arg(long, num_args = 1..)]
    counts: Vec<PathBuf>,
    /// The JSONL field that holds the text.
    #[arg(long, default_value = "text")]
    text_field: String,
    /// Where to write the dictionary.
    #[arg(short, long)]
    output: PathBuf,
    /// Replace an existing output file even if it is not an n-gram dictionary (an input is never replaced).
    #[arg(long)]
    force: bool,
    /// Word n-gram orders that contribute, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1,2,3")]
    orders: Vec<usize>,
    /// Most entries (prefixes) kept, the most frequent first (DictSpec §4.4 deploys 200k).
    #[arg(long, default_value_t = 200_000)]
    max_entries: usize,
    /// Keep a prefix's best continuation only if its probability is at least this (DictSpec's
    /// p_min; §4.4 deploys 0.8).
    #[arg(long, default_value_t = 0.8)]
    min_prob: f64,
    /// Longest prefix (context suffix) in tokens, 1–8.
    #[arg(long, default_value_t = 8)]
    max_prefix: usize,
    /// Longest stored continuation in tokens, 1–8.
    #[arg(long, default_value_t = 8)]
    max_continuation: usize,
    /// Which continuation a prefix stores: `most-frequent` (DictSpec §3.1: the exact
    /// continuation seen most often, which almost always ends with the prefix's word) or
    /// `chained` (ours: that one, extended across words while each next step's probability is
    /// at least --min-prob).
    #[arg(long, value_enum, default_value_t = Continuations::MostFrequent)]
    continuations: Continuations,
    /// Most frequent n-grams tokenized, over all orders.
    #[arg(long, default_value_t = 2_000_000)]
    max_ngrams: usize,
    /// Drop n-grams seen fewer times than this.
    #[arg(long, default_value_t = 2)]
    min_count: u64,
    /// Worker threads (0 = every core).
    #[arg(long, default_value_t = 0)]
    threads: usize,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, clap::Args)]
struct CountArgs {
    #[command(flatten)]
    corpus: CorpusArgs,
    /// Where to write the shard.
    #[arg(short, long)]
    output: PathBuf,
    /// Replace an existing output file even if it is not a count shard (an input is never replaced).
    #[arg(long)]
    force: bool,
    /// Highest n-gram order counted (dictionaries built from the shard may use any orders up to it).
    #[arg(long, default_value_t = 3)]
    max_order: usize,
    /// Worker threads (0 = every core).
    #[arg(long, default_value_t = 0)]
    threads: usize,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, clap::Args)]
struct MergeArgs {
    /// Shards to merge (all counted with the same --max-order).
    #[arg(required = true, num_args = 1..)]
    shards: Vec<PathBuf>,
    /// Where to write the merged shard.
    #[arg(short, long)]
    output: PathBuf,
    /// Replace an existing output file even if it is not a count shard (an input is never replaced).
    #[arg(long)]
    force: bool,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "snake_case")]
enum DrafterKind {
    /// The n-gram dictionary alone.
    Dict,
    /// Prompt lookup alone (needs no dictionary).
    Prompt,
    /// Dictionary and prompt lookup, one as the other's fallback (see --order).
    Hybrid,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum OrderArg {
    /// The dictionary first, prompt lookup as fallback.
    DictFirst,
    /// Prompt lookup first, the dictionary as fallback.
    PromptFirst,
}

#[derive(Debug, clap::Args)]
struct EmulateArgs {
    /// The dictionary (needed by --drafter dict and hybrid).
    #[arg(long)]
    dict: Option<PathBuf>,
    /// The tokenizer the dictionary was built for (a `tokenizer.json`, GGUF file or checkpoint
    /// directory); tokenizes the reference text.
    #[arg(long)]
    tokenizer: PathBuf,
    /// Reference text files; each is one sequence (or one per line with --per-line).
    #[arg(long, num_args = 1.., required = true)]
    text: Vec<PathBuf>,
    /// Treat every non-empty line as its own sequence (for sentence-per-line files).
    #[arg(long)]
    per_line: bool,
    /// Most tokens drafted per step (γ).
    #[arg(long, default_value_t = 8)]
    gamma: usize,
    /// Which drafter to emulate.
    #[arg(long, value_enum, default_value = "dict")]
    drafter: DrafterKind,
    /// Hybrid only: which drafter is asked first.
    #[arg(long, value_enum, default_value = "dict-first")]
    order: OrderArg,
    /// Prompt lookup: smallest n-gram matched.
    #[arg(long, default_value_t = 1)]
    min_ngram: usize,
    /// Prompt lookup: largest n-gram matched (tried first).
    #[arg(long, default_value_t = 3)]
    max_ngram: usize,
    /// Leading tokens of each sequence used as context only, not replayed.
    #[arg(long, default_value_t = 0)]
    prompt_tokens: usize,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, clap::Args)]
struct InfoArgs {
    /// The dictionary file.
    dict: PathBuf,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

pub(crate) fn run(args: Args, progress: &dyn Progress) -> anyhow::Result<()> {
    match args.command {
        DictCommand::Build(args) => build(args, progress),
        DictCommand::Count(args) => count(args, progress),
        DictCommand::Merge(args) => merge(args),
        DictCommand::Emulate(args) => emulate_command(args, progress),
        DictCommand::Info(args) => info(args),
    }
}

#[derive(Serialize)]
struct BuildReport {
    output: PathBuf,
    tokenizer_fingerprint: String,
    entries: u64,
    ngrams: u64,
    bytes: usize,
    text_bytes: u64,
    seconds: f64,
    megabytes_per_second: f64,
}

/// `--continuations`, the command-line face of [`ContinuationRule`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum Continuations {
    MostFrequent,
    Chained,
}

impl From<Continuations> for ContinuationRule {
    fn from(value: Continuations) -> Self {
        match value {
            Continuations::MostFrequent => ContinuationRule::MostFrequent,
            Continuations::Chained => ContinuationRule::Chained,
        }
    }
}

fn build(args: BuildArgs, progress: &dyn Progress) -> anyhow::Result<()> {
    let params = BuildParams {
        orders: args.orders.clone(),
        max_ngrams: args.max_ngrams,
        min_count: args.min_count,
        max_entries: args.max_entries,
        min_prob: args.min_prob,
        max_prefix: args.max_prefix,
        max_continuation: args.max_continuation,
        continuations: args.continuations.into(),
    };
    params.validate().map_err(flag_error)?;
    let inputs: Vec<(&str, &Path)> = std::iter::once(("--tokenizer", args.tokenizer.as_path()))
        .chain(args.corpus.iter().map(|p| ("--corpus", p.as_path())))
        .chain(args.counts.iter().map(|p| ("--counts", p.as_path())))
        .collect();
    let output = Output { flag: "-o", path: &args.output, kind: ArtifactKind::Dictionary, force: args.force };
    check_output(&output, &inputs)?;
    check_counted_once(&inputs[1..])?;
    let vocabulary = load_vocabulary(&args.tokenizer)?;
    let started = Instant::now();
    let counts = if args.counts.is_empty() {
        let options = CorpusOptions { text_field: args.text_field.clone() };
        NgramCounts::count_files(&args.corpus, &options, params.max_order(), args.threads, progress)?
    } else {
        NgramCounts::merge_shards(&args.counts)?
    };
    let bytes = build_dictionary(&counts, &vocabulary, &params, args.threads, progress).map_err(flag_error)?;
    write_dictionary(&args.output, &bytes)?;
    let seconds = started.elapsed().as_secs_f64();
    let dictionary = Dictionary::open(&args.output, &vocabulary.fingerprint())?;
    let report = BuildReport {
        output: args.output.clone(),
        tokenizer_fingerprint: vocabulary.fingerprint().to_string(),
        entries: dictionary.len() as u64,
        ngrams: dictionary.info().ngrams,
        bytes: bytes.len(),
        text_bytes: counts.text_bytes(),
        seconds,
        megabytes_per_second: counts.text_bytes() as f64 / 1e6 / seconds.max(1e-9),
    };
    if args.json {
        return print_json(&report);
    }
    print_text(&format!(
        "wrote {}: {} entries from {} n-grams, {:.2} MB, for tokenizer {}\ncounted {:.1} MB of text in {:.1} s ({:.1} MB/s)",
        report.output.display(),
        report.entries,
        report.ngrams,
        report.bytes as f64 / 1e6,
        vocabulary.fingerprint().short(),
        report.text_bytes as f64 / 1e6,
        report.seconds,
        report.megabytes_per_second
    ))
}

#[derive(Serialize)]
struct CountReport {
    output: PathBuf,
    max_order: usize,
    text_bytes: u64,
    distinct_by_order: Vec<usize>,
    seconds: f64,
}

fn count_report(output: &Path, counts: &NgramCounts, seconds: f64) -> CountReport {
    CountReport {
        output: output.to_path_buf(),
        max_order: counts.max_order(),
        text_bytes: counts.text_bytes(),
        distinct_by_order: (1..=counts.max_order()).map(|o| counts.distinct(o)).collect(),
        seconds,
    }
}

fn print_count_report(report: &CountReport, json: bool) -> anyhow::Result<()> {
    if json {
        return print_json(report);
    }
    let distinct: Vec<String> =
        report.distinct_by_order.iter().enumerate().map(|(i, n)| format!("{}-grams {n}", i + 1)).collect();
    print_text(&format!(
        "wrote {}: {:.1} MB of text, distinct {} ({:.1} s)",
        report.output.display(),
        report.text_bytes as f64 / 1e6,
        distinct.join(", "),
        report.seconds
    ))
}

fn count(args: CountArgs, progress: &dyn Progress) -> anyhow::Result<()> {
    let inputs: Vec<(&str, &Path)> = args.corpus.corpus.iter().map(|p| ("--corpus", p.as_path())).collect();
    let output = Output { flag: "-o", path: &args.output, kind: ArtifactKind::CountShard, force: args.force };
    check_output(&output, &inputs)?;
    check_counted_once(&inputs)?;
    let started = Instant::now();
    let options = CorpusOptions { text_field: args.corpus.text_field.clone() };
    let counts = NgramCounts::count_files(&args.corpus.corpus, &options, args.max_order, args.threads, progress)
        .map_err(flag_error)?;
    counts.write_shard(&args.output)?;
    print_count_report(&count_report(&args.output, &counts, started.elapsed().as_secs_f64()), args.json)
}

fn merge(args: MergeArgs) -> anyhow::Result<()> {
    let inputs: Vec<(&str, &Path)> = args.shards.iter().map(|p| ("shard", p.as_path())).collect();
    let output = Output { flag: "-o", path: &args.output, kind: ArtifactKind::CountShard, force: args.force };
    check_output(&output, &inputs)?;
    check_counted_once(&inputs)?;
    let started = Instant::now();
    let counts = NgramCounts::merge_shards(&args.shards)?;
    counts.write_shard(&args.output)?;
    print_count_report(&count_report(&args.output, &counts, started.elapsed().as_secs_f64()), args.json)
}

#[derive(Serialize)]
struct EmulateReport {
    drafter: DrafterKind,
    gamma: usize,
    sequences: usize,
    tokens: u64,
    steps: u64,
    steps_with_draft: u64,
    drafted: u64,
    accepted: u64,
    speedup: f64,
    coverage: f64,
    mean_accepted_length: f64,
    acceptance_rate: f64,
    seconds: f64,
}

fn emulate_command(args: EmulateArgs, progress: &dyn Progress) -> anyhow::Result<()> {
    let vocabulary = load_vocabulary(&args.tokenizer)?;
    let dictionary = match (args.drafter, &args.dict) {
        (DrafterKind::Prompt, _) => None,
        (_, None) => bail!("--drafter {:?} needs --dict PATH (a dictionary built for --tokenizer)", args.drafter),
        (_, Some(path)) => Some(Arc::new(Dictionary::open(path, &vocabulary.fingerprint())?)),
    };
    let prompt_config = PromptLookupConfig { min_ngram: args.min_ngram, max_ngram: args.max_ngram };
    let prompt = || -> anyhow::Result<PromptLookup> { PromptLookup::new(prompt_config).map_err(flag_error) };
    let mut drafter: Box<dyn anyspec_core::Drafter> = match (args.drafter, dictionary) {
        (DrafterKind::Prompt, _) => Box::new(prompt()?),
        (DrafterKind::Dict, Some(d)) => Box::new(DictionaryDrafter::new(d)),
        (DrafterKind::Hybrid, Some(d)) => {
            let order = match args.order {
                OrderArg::DictFirst => HybridOrder::DictionaryFirst,
                OrderArg::PromptFirst => HybridOrder::PromptFirst,
            };
            Box::new(Hybrid::new(DictionaryDrafter::new(d), prompt()?, order))
        }
        (_, None) => bail!("--dict is required for this drafter"),
    };

    let mut sequences = Vec::new();
    for path in &args.text {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("--text {}: cannot read it as UTF-8 text", path.display()))?;
        if args.per_line {
            for line in text.lines().filter(|l| !l.trim().is_empty()) {
                sequences.push(encode_plain(vocabulary.tokenizer(), line)?);
            }
        } else {
            sequences.push(encode_plain(vocabulary.tokenizer(), &text)?);
        }
    }
    let config = EmulationConfig { gamma: args.gamma, prompt_tokens: args.prompt_tokens };
    let started = Instant::now();
    let counts = emulate(drafter.as_mut(), &sequences, &config, progress).map_err(flag_error)?;
    if counts.tokens == 0 {
        let total: usize = sequences.iter().map(Vec::len).sum();
        bail!(
            "no tokens to replay: the --text files hold {total} tokens in {} sequences, none after the first \
             --prompt-tokens {} of a sequence; give longer text (or a smaller --prompt-tokens)",
            sequences.len(),
            args.prompt_tokens
        );
    }
    let report = EmulateReport {
        drafter: args.drafter,
        gamma: args.gamma,
        sequences: sequences.len(),
        tokens: counts.tokens,
        steps: counts.steps,
        steps_with_draft: counts.steps_with_draft,
        drafted: counts.drafted,
        accepted: counts.accepted,
        speedup: counts.speedup(),
        coverage: counts.coverage(),
        mean_accepted_length: counts.mean_accepted_length(),
        acceptance_rate: counts.acceptance_rate(),
        seconds: started.elapsed().as_secs_f64(),
    };
    if args.json {
        return print_json(&report);
    }
    let rows = vec![
        vec!["tokens replayed".into(), report.tokens.to_string()],
        vec!["verification steps".into(), report.steps.to_string()],
        vec!["emulated speedup (tokens / steps)".into(), format!("{:.4}×", report.speedup)],
        vec!["coverage (steps with a draft)".into(), format!("{:.4}", report.coverage)],
        vec!["mean accepted length".into(), format!("{:.4}", report.mean_accepted_length)],
        vec!["acceptance rate".into(), format!("{:.4}", report.acceptance_rate)],
        vec!["emulation time".into(), format!("{:.3} s", report.seconds)],
    ];
    print_text(&table(&["quantity", "value"], &rows))
}

#[derive(Serialize)]
struct InfoReport<'a> {
    path: &'a Path,
    format_version: u32,
    tokenizer_fingerprint: String,
    bytes: usize,
    info: &'a anyspec_dict_builder::DictionaryInfo,
}

fn info(args: InfoArgs) -> anyhow::Result<()> {
    let dictionary = Dictionary::open_unverified(&args.dict)?;
    let report = InfoReport {
        path: &args.dict,
        format_version: anyspec_dict_builder::FORMAT_VERSION,
        tokenizer_fingerprint: dictionary.fingerprint().to_string(),
        bytes: dictionary.size_bytes(),
        info: dictionary.info(),
    };
    if args.json {
        return print_json(&report);
    }
    let p = &report.info.params;
    let rows = vec![
        vec!["tokenizer fingerprint".into(), report.tokenizer_fingerprint.clone()],
        vec!["entries".into(), report.info.entries.to_string()],
        vec!["size".into(), format!("{:.3} MB", report.bytes as f64 / 1e6)],
        vec!["orders".into(), format!("{:?}", p.orders)],
        vec!["max entries / min prob".into(), format!("{} / {}", p.max_entries, p.min_prob)],
        vec!["max prefix / continuation".into(), format!("{} / {}", p.max_prefix, p.max_continuation)],
        vec!["continuations".into(), p.continuations.name().into()],
        vec!["n-grams used / min count".into(), format!("{} / {}", report.info.ngrams, p.min_count)],
        vec!["corpus text".into(), format!("{:.1} MB", report.info.text_bytes as f64 / 1e6)],
    ];
    print_text(&table(&["field", "value"], &rows))
}
