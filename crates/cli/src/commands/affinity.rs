//! `anyspec affinity`: build and inspect the token-affinity matrix `M` that RDK pushes a
//! drafter's distribution through (oov-sampling-rdk.txt Eq. 2, reconstructed; see
//! `anyspec_affinity::build`).

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, bail};
use anyspec_affinity::{Affinity, AffinityInfo, AffinityParams, CooccurrenceCounts, build_affinity, describe_corpus};
use anyspec_core::Progress;
use anyspec_core::artifact::ArtifactKind;
use anyspec_dict_builder::CorpusOptions;
use serde::Serialize;

use crate::args::{flag_error, load_vocabulary};
use crate::output::{print_json, print_text, table};
use crate::output_guard::{Output, check_counted_once, check_output};

/// Token-affinity matrices for RDK (out-of-vocabulary sampling).
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    /// Count windowed co-occurrences of target tokens in a corpus and write the row-stochastic,
    /// top-k sparse matrix M (safetensors, with the tokenizer fingerprint and parameters).
    Build(BuildArgs),
    /// Print a matrix's build record and shape; with --tokenizer, check it and show rows.
    Inspect(InspectArgs),
}

#[derive(Debug, clap::Args)]
struct BuildArgs {
    /// The target model's tokenizer.json, GGUF file or checkpoint directory; the matrix indexes
    /// its token ids.
    #[arg(long, value_name = "TOKENIZER")]
    tokenizer: PathBuf,
    /// Corpus files: plain text, or JSONL (`*.jsonl`) with one document per line; gzip is
    /// recognised by content. Windows never span two lines.
    #[arg(long, num_args = 1.., required = true)]
    corpus: Vec<PathBuf>,
    /// The JSONL field that holds the text.
    #[arg(long, default_value = "text")]
    text_field: String,
    /// Where to write the matrix (safetensors).
    #[arg(short, long)]
    output: PathBuf,
    /// Replace an existing output file even if it is not an affinity matrix (an input is never replaced).
    #[arg(long)]
    force: bool,
    /// The score each row is a softmax of: ppmi (ours, the default: positive PMI of windowed
    /// co-occurrence) or covariance (oov-sampling-rdk.txt Eq. 2 / App. C.3: a normalized
    /// covariance Ω, the correlation of windowed co-occurrence).
    #[arg(long, value_enum, default_value = "ppmi")]
    score: ScoreChoice,
    /// Largest distance in tokens at which two tokens co-occur.
    #[arg(long, default_value_t = AffinityParams::default().window)]
    window: usize,
    /// Softmax temperature τ over each row's scores: small keeps mass on the token and its best
    /// neighbours, large spreads it evenly over the kept entries.
    #[arg(long, default_value_t = AffinityParams::default().tau)]
    tau: f64,
    /// Entries kept per row, the token itself included.
    #[arg(long, default_value_t = AffinityParams::default().top_k)]
    top_k: usize,
    /// Pairs seen fewer times than this get no entry.
    #[arg(long, default_value_t = AffinityParams::default().min_count)]
    min_count: u64,
    /// Distinct token pairs held in memory while counting (about 20 bytes each); beyond it the
    /// rarest are dropped and the file records how approximate the counts are.
    #[arg(long, default_value_t = AffinityParams::default().max_pairs)]
    max_pairs: usize,
    /// Worker threads (0 = every core).
    #[arg(long, default_value_t = 0)]
    threads: usize,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

/// `--score`.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
enum ScoreChoice {
    /// Positive PMI of windowed co-occurrence (ours).
    Ppmi,
    /// The paper's Eq. 2: normalized covariance Ω.
    Covariance,
}

impl From<ScoreChoice> for anyspec_affinity::AffinityScore {
    fn from(choice: ScoreChoice) -> Self {
        match choice {
            ScoreChoice::Ppmi => anyspec_affinity::AffinityScore::Ppmi,
            ScoreChoice::Covariance => anyspec_affinity::AffinityScore::Covariance,
        }
    }
}

#[derive(Debug, clap::Args)]
struct InspectArgs {
    /// The matrix file.
    matrix: PathBuf,
    /// The target tokenizer.json: refuse the matrix if it was built for another one, and name
    /// tokens in --row output.
    #[arg(long, value_name = "TOKENIZER.JSON")]
    tokenizer: Option<PathBuf>,
    /// Show the row of this token (its exact string, e.g. `Ġthe`, or an id); repeatable. Needs
    /// --tokenizer.
    #[arg(long = "row", value_name = "TOKEN")]
    rows: Vec<String>,
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

/// Shape statistics of a matrix, shared by `build` and `inspect`.
#[derive(Serialize)]
struct Shape {
    nnz: usize,
    rows_with_entries: usize,
    mean_entries_per_row: f64,
    /// Mean `M_ii` over rows with entries: how much mass a token keeps.
    mean_self_weight: f64,
}

fn shape(affinity: &Affinity) -> Shape {
    let (offsets, columns, values) = affinity.matrix().csr();
    let rows = affinity.rows_with_entries();
    let mut self_weight = 0.0f64;
    for row in 0..affinity.matrix().size() {
        for k in offsets[row]..offsets[row + 1] {
            if columns[k] as usize == row {
                self_weight += f64::from(values[k]);
            }
        }
    }
    Shape {
        nnz: affinity.matrix().nnz(),
        rows_with_entries: rows,
        mean_entries_per_row: if rows == 0 { 0.0 } else { affinity.matrix().nnz() as f64 / rows as f64 },
        mean_self_weight: if rows == 0 { 1.0 } else { self_weight / rows as f64 },
    }
}

#[derive(Serialize)]
struct BuildReport {
    output: PathBuf,
    info: AffinityInfo,
    shape: Shape,
    file_bytes: usize,
    corpus_bytes: u64,
    seconds: f64,
    megabytes_per_second: f64,
}

fn build(args: BuildArgs, progress: &dyn Progress) -> anyhow::Result<()> {
    let params = AffinityParams {
        score: args.score.into(),
        window: args.window,
        tau: args.tau,
        top_k: args.top_k,
        min_count: args.min_count,
        max_pairs: args.max_pairs,
        threads: args.threads,
    };
    params.validate().map_err(flag_error)?;
    let inputs: Vec<(&str, &Path)> = std::iter::once(("--tokenizer", args.tokenizer.as_path()))
        .chain(args.corpus.iter().map(|p| ("--corpus", p.as_path())))
        .collect();
    let output = Output { flag: "-o", path: &args.output, kind: ArtifactKind::Affinity, force: args.force };
    check_output(&output, &inputs)?;
    check_counted_once(&inputs[1..])?;
    let vocabulary = load_vocabulary(&args.tokenizer)?;
    let started = Instant::now();
    let options = CorpusOptions { text_field: args.text_field.clone() };
    let counts = CooccurrenceCounts::count_files(
        &args.corpus,
        &options,
        &vocabulary,
        params.window,
        params.max_pairs,
        params.threads,
        progress,
    )
    .map_err(flag_error)?;
    let affinity = build_affinity(&counts, vocabulary.fingerprint(), &params, &describe_corpus(&args.corpus))
        .map_err(flag_error)?;
    let bytes = affinity.to_bytes()?;
    anyspec_core::artifact::write_atomically(&args.output, |w| std::io::Write::write_all(w, &bytes))
        .with_context(|| format!("-o {}: cannot write the matrix", args.output.display()))?;
    let seconds = started.elapsed().as_secs_f64();
    let corpus_bytes: u64 = args.corpus.iter().filter_map(|p| std::fs::metadata(p).ok()).map(|m| m.len()).sum();
    let report = BuildReport {
        output: args.output.clone(),
        shape: shape(&affinity),
        info: affinity.info().clone(),
        file_bytes: bytes.len(),
        corpus_bytes,
        seconds,
        megabytes_per_second: corpus_bytes as f64 / 1e6 / seconds.max(1e-9),
    };
    if args.json {
        return print_json(&report);
    }
    print_text(&format!(
        "wrote {}: {} rows move mass ({} entries, {:.1} per row, mean self-weight {:.3}), {:.2} MB, for tokenizer {}\n\
         counted {} tokens, {} distinct pairs{} in {:.1} s ({:.1} MB/s)",
        report.output.display(),
        report.shape.rows_with_entries,
        report.shape.nnz,
        report.shape.mean_entries_per_row,
        report.shape.mean_self_weight,
        report.file_bytes as f64 / 1e6,
        vocabulary.fingerprint().short(),
        report.info.tokens,
        report.info.distinct_pairs,
        prune_note(report.info.prune_floor),
        report.seconds,
        report.megabytes_per_second
    ))
}

fn prune_note(floor: u64) -> String {
    if floor == 0 {
        String::new()
    } else {
        format!(" (approximate: pairs seen ≤ {floor} times may be missing; raise --max-pairs)")
    }
}

#[derive(Serialize)]
struct RowEntry {
    id: u32,
    token: String,
    weight: f32,
    score: f32,
}

#[derive(Serialize)]
struct Row {
    id: u32,
    token: String,
    /// Empty: the identity row (the token keeps its mass).
    entries: Vec<RowEntry>,
}

#[derive(Serialize)]
struct InspectReport {
    path: PathBuf,
    info: AffinityInfo,
    shape: Shape,
    tokenizer_checked: bool,
    rows: Vec<Row>,
}

fn inspect(args: InspectArgs) -> anyhow::Result<()> {
    if !args.rows.is_empty() && args.tokenizer.is_none() {
        bail!("--row needs --tokenizer TOKENIZER.JSON (the target tokenizer the matrix was built for)");
    }
    let vocabulary = args.tokenizer.as_deref().map(load_vocabulary).transpose()?;
    let affinity = match &vocabulary {
        Some(v) => Affinity::load(&args.matrix, &v.fingerprint())?,
        None => Affinity::load_unchecked(&args.matrix)?,
    };
    let mut rows = Vec::new();
    if let Some(vocabulary) = &vocabulary {
        let name = |id: u32| vocabulary.token(id).map_or_else(|| format!("<{id}>"), |t| t.raw.clone());
        let (offsets, columns, values) = affinity.matrix().csr();
        for wanted in &args.rows {
            let id = vocabulary
                .tokens()
                .find(|(_, t)| t.raw == *wanted)
                .map(|(id, _)| id)
                .or_else(|| wanted.parse::<u32>().ok().filter(|&id| (id as usize) < vocabulary.len()))
                .with_context(|| {
                    format!("--row {wanted:?} is neither a token of the tokenizer nor an id below {}", vocabulary.len())
                })?;
            let range = offsets[id as usize]..offsets[id as usize + 1];
            let mut entries: Vec<RowEntry> = range
                .map(|k| RowEntry {
                    id: columns[k],
                    token: name(columns[k]),
                    weight: values[k],
                    score: affinity.scores().csr().2[k],
                })
                .collect();
            entries.sort_by(|a, b| b.weight.total_cmp(&a.weight));
            rows.push(Row { id, token: name(id), entries });
        }
    }
    let report = InspectReport {
        path: args.matrix.clone(),
        shape: shape(&affinity),
        info: affinity.info().clone(),
        tokenizer_checked: vocabulary.is_some(),
        rows,
    };
    if args.json {
        return print_json(&report);
    }
    let info = &report.info;
    let mut text = format!(
        "{}: affinity matrix over {} target tokens (tokenizer {})\n\
         built from {} ({} tokens, {} distinct pairs{}) with window {}, tau {}, top-k {}, min-count {}, score {}\n\
         {} rows move mass, {} entries ({:.1} per row), mean self-weight {:.3}{}\n",
        report.path.display(),
        info.vocab_size,
        info.target_fingerprint.short(),
        info.corpus,
        info.tokens,
        info.distinct_pairs,
        prune_note(info.prune_floor),
        info.window,
        info.tau,
        info.top_k,
        info.min_count,
        info.score,
        report.shape.rows_with_entries,
        report.shape.nnz,
        report.shape.mean_entries_per_row,
        report.shape.mean_self_weight,
        if report.tokenizer_checked { "; matches --tokenizer" } else { "" },
    );
    for row in &report.rows {
        text.push_str(&format!("\nrow {} {:?}", row.id, row.token));
        if row.entries.is_empty() {
            text.push_str(": identity (keeps its mass)\n");
            continue;
        }
        text.push('\n');
        let cells: Vec<Vec<String>> = row
            .entries
            .iter()
            .map(|e| {
                vec![e.id.to_string(), format!("{:?}", e.token), format!("{:.4}", e.weight), format!("{:.3}", e.score)]
            })
            .collect();
        text.push_str(&table(&["id", "token", "M", "score"], &cells));
    }
    print_text(&text)
}
