//! `anyspec shortlist`: frequency-ranked drafter shortlists (FR pruning): the drafter runs with
//! its LM head restricted to the `m` tokens a corpus uses most, end-of-sequence forced in.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::Context;
use anyspec_affinity::{EosRule, Shortlist, ShortlistParams, TokenFrequencies, describe_corpus};
use anyspec_core::Progress;
use anyspec_core::artifact::ArtifactKind;
use anyspec_dict_builder::CorpusOptions;
use anyspec_vocab_map::Vocabulary;
use serde::Serialize;

use crate::args::{flag_error, load_vocabulary};
use crate::output::{print_json, print_text};
use crate::output_guard::{Output, check_counted_once, check_output};

/// Frequency-ranked drafter shortlists (FR pruning).
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    /// Rank the drafter's tokens by corpus frequency and keep the top --size (the
    /// end-of-sequence token is always kept, counted within --size).
    Build(BuildArgs),
    /// Print a shortlist's record; with --tokenizer, check it against the drafter tokenizer.
    Inspect(InspectArgs),
}

#[derive(Debug, clap::Args)]
struct BuildArgs {
    /// The drafter model's tokenizer.json, GGUF file or checkpoint directory.
    #[arg(long, value_name = "TOKENIZER")]
    tokenizer: PathBuf,
    /// Corpus files: plain text, or JSONL (`*.jsonl`) with one document per line; gzip is
    /// recognised by content.
    #[arg(long, num_args = 1.., required = true)]
    corpus: Vec<PathBuf>,
    /// The JSONL field that holds the text.
    #[arg(long, default_value = "text")]
    text_field: String,
    /// m, the number of drafter tokens kept (forced tokens included).
    #[arg(long)]
    size: usize,
    /// Where to write the shortlist.
    #[arg(short, long)]
    output: PathBuf,
    /// Replace an existing output file even if it is not a drafter shortlist (an input is never replaced).
    #[arg(long)]
    force: bool,
    /// Keep every special token too, not only end-of-sequence.
    #[arg(long)]
    keep_special: bool,
    /// The end-of-sequence token's exact string (repeatable). Default: the special tokens named
    /// `</s>`, `<|endoftext|>`, `<|end_of_text|>`, `<|eot_id|>`, `<|im_end|>`, `<eos>`, `<|end|>`
    /// or `[SEP]`.
    #[arg(long, value_name = "TOKEN")]
    eos: Vec<String>,
    /// Worker threads (0 = every core).
    #[arg(long, default_value_t = 0)]
    threads: usize,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, clap::Args)]
struct InspectArgs {
    /// The shortlist file.
    shortlist: PathBuf,
    /// The drafter tokenizer.json: refuse the shortlist if it was built for another one, and name
    /// the end-of-sequence tokens.
    #[arg(long, value_name = "TOKENIZER.JSON")]
    tokenizer: Option<PathBuf>,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

pub(crate) fn run(args: Args, progress: &dyn Progress) -> anyhow::Result<()> {
    match args.command {
        Command::Build(args) => build(args, progress),
        Command::Inspect(args) => inspect(args),
    }
}

#[derive(Serialize)]
struct Report {
    path: PathBuf,
    drafter_fingerprint: String,
    drafter_size: usize,
    size: usize,
    eos: Vec<u32>,
    eos_tokens: Vec<String>,
    forced: usize,
    keep_special: bool,
    corpus: String,
    corpus_tokens: u64,
    coverage: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    seconds: Option<f64>,
}

fn report(path: &Path, list: &Shortlist, vocabulary: Option<&Vocabulary>, seconds: Option<f64>) -> Report {
    let name = |id: u32| vocabulary.and_then(|v| v.token(id)).map_or_else(|| format!("<{id}>"), |t| t.raw.clone());
    Report {
        path: path.to_path_buf(),
        drafter_fingerprint: list.drafter_fingerprint().to_string(),
        drafter_size: list.drafter_size(),
        size: list.ids().len(),
        eos: list.eos().to_vec(),
        eos_tokens: list.eos().iter().map(|&id| name(id)).collect(),
        forced: list.forced().len(),
        keep_special: list.keep_special(),
        corpus: list.corpus().to_string(),
        corpus_tokens: list.corpus_tokens(),
        coverage: list.coverage(),
        seconds,
    }
}

/// A warning when the corpus has fewer distinct tokens than the shortlist keeps: the rest are
/// kept in token-id order, which ranks nothing.
fn unseen_warning(list: &Shortlist, frequencies: &TokenFrequencies) -> Option<String> {
    let counts = frequencies.counts();
    let unseen = list.ids().iter().filter(|&&id| counts[id as usize] == 0 && !list.forced().contains(&id)).count();
    (unseen > 0).then(|| {
        let seen = counts.iter().filter(|&&c| c > 0).count();
        format!(
            "{unseen} of the {} kept tokens never occur in the corpus (it has {seen} distinct tokens): they were \
             kept in token-id order, not by frequency; count a larger corpus, or pass a --size of at most {}",
            list.ids().len(),
            list.ids().len() - unseen
        )
    })
}

fn print_report(report: &Report, json: bool, verb: &str) -> anyhow::Result<()> {
    if json {
        return print_json(report);
    }
    let eos: Vec<String> = report.eos.iter().zip(&report.eos_tokens).map(|(id, t)| format!("{t} ({id})")).collect();
    print_text(&format!(
        "{verb} {}: {} of {} drafter tokens kept (tokenizer {}), end-of-sequence {}, {} forced in{}\n\
         covers {:.2}% of the {} tokens of {}{}",
        report.path.display(),
        report.size,
        report.drafter_size,
        &report.drafter_fingerprint[..8],
        eos.join(", "),
        report.forced,
        if report.keep_special { " (every special token)" } else { "" },
        100.0 * report.coverage,
        report.corpus_tokens,
        report.corpus,
        report.seconds.map_or_else(String::new, |s| format!(" ({s:.1} s)")),
    ))
}

fn build(args: BuildArgs, progress: &dyn Progress) -> anyhow::Result<()> {
    let inputs: Vec<(&str, &Path)> = std::iter::once(("--tokenizer", args.tokenizer.as_path()))
        .chain(args.corpus.iter().map(|p| ("--corpus", p.as_path())))
        .collect();
    let output = Output { flag: "-o", path: &args.output, kind: ArtifactKind::Shortlist, force: args.force };
    check_output(&output, &inputs)?;
    check_counted_once(&inputs[1..])?;
    let vocabulary = load_vocabulary(&args.tokenizer)?;
    let started = Instant::now();
    let options = CorpusOptions { text_field: args.text_field.clone() };
    let frequencies = TokenFrequencies::count_files(&args.corpus, &options, &vocabulary, args.threads, progress)?;
    let params = ShortlistParams {
        size: args.size,
        keep_special: args.keep_special,
        eos: if args.eos.is_empty() { EosRule::Auto } else { EosRule::Named(args.eos.clone()) },
    };
    let list =
        Shortlist::build(&vocabulary, &frequencies, &params, &describe_corpus(&args.corpus)).map_err(flag_error)?;
    list.save(&args.output).with_context(|| format!("-o {}: cannot write the shortlist", args.output.display()))?;
    let seconds = started.elapsed().as_secs_f64();
    let report = report(&args.output, &list, Some(&vocabulary), Some(seconds));
    // On stderr, and in the `warnings` array that print_json gives every report.
    if let Some(warning) = unseen_warning(&list, &frequencies) {
        crate::output::warn(warning);
    }
    print_report(&report, args.json, "wrote")
}

fn inspect(args: InspectArgs) -> anyhow::Result<()> {
    let vocabulary = args.tokenizer.as_deref().map(load_vocabulary).transpose()?;
    let list = match &vocabulary {
        Some(v) => Shortlist::load(&args.shortlist, &v.fingerprint())?,
        None => Shortlist::load_unchecked(&args.shortlist)?,
    };
    print_report(&report(&args.shortlist, &list, vocabulary.as_ref(), None), args.json, "shortlist")
}
