//! `anyspec dynaspec`: DynaSpec routers (context-aware dynamic shortlists for the drafter's LM
//! head): build one for a model from corpus text, inspect one.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::Context;
use anyspec_core::Progress;
use anyspec_core::artifact::ArtifactKind;
use anyspec_dict_builder::CorpusOptions;
use anyspec_dynaspec::{
    BuildParams, BuildReport, EagleBuildParams, EagleChat, EagleFile, EagleInfo, EagleReport, RouterFile, build_eagle,
    build_eagle_on_chats, build_router, model_fingerprint,
};
use anyspec_models::{Checkpoint, DeviceChoice, LoadOptions, TextTokenizer};
use anyspec_train::{EagleTrainConfig, RouterTrainConfig};
use serde::Serialize;

use crate::output::{print_json, print_text};

mod bench;
use crate::output_guard::{Output, check_counted_once, check_output};

/// DynaSpec routers: clusters of the LM head and a router that picks some per context.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    /// Cluster the model's LM head (spherical k-means), read the corpus with the model and its
    /// self-speculative drafter (its first --drafter-layers layers), train the router, measure
    /// its held-out recall, and write clusters + router to one file.
    Build(BuildArgs),
    /// Print a router's (or an EAGLE drafter's) record; with --model, check it was built for that
    /// model.
    Inspect(InspectArgs),
    /// Greedy speculative decoding with the self-speculative drafter under every head policy
    /// (full head, FR at several sizes, PA-FR, DynaSpec-F, DynaSpec-PA) on the same prompts:
    /// tokens per step, tokens/s, mean shortlist, drafter time per position, output = full head's.
    Bench(bench::BenchArgs),
    /// Train an EAGLE-style feature drafter for the model (the backbone of the paper's
    /// experiments): the model reads the corpus, and one decoder layer over [E(x_(t+1)), f_t]
    /// learns to predict the model's next final-norm hidden state f_(t+1) and, through the
    /// model's own frozen head, its next token. `dynaspec bench --eagle` drafts with it.
    Eagle(EagleArgs),
}

#[derive(Debug, clap::Args)]
struct EagleArgs {
    /// The model (target): a GGUF file or a checkpoint directory.
    #[arg(long, value_name = "M.gguf|DIR")]
    model: PathBuf,
    /// Corpus files, as for `build` (text the model itself wrote suits best).
    #[arg(long, num_args = 1.., required = true)]
    corpus: Vec<PathBuf>,
    /// The JSONL field that holds the text (with --prompt-field: the answer).
    #[arg(long, default_value = "text")]
    text_field: String,
    /// Train on chats: every --corpus file is JSONL (`cargo xtask target-outputs` writes
    /// assets/demo/target-chats.jsonl.gz) and each record's prompt, in this field, goes through
    /// the model's chat template with its answer (--text-field) after it. The model reads each
    /// chat whole, so its features at the answer carry the prompt, as when a drafter drafts an
    /// answer; training keeps the answer and the --prompt-context positions before it.
    #[arg(long, value_name = "FIELD")]
    prompt_field: Option<String>,
    /// With --prompt-field: prompt positions kept before each answer (the drafter's attention
    /// reaches back into the prompt at the start of an answer).
    #[arg(long, default_value_t = 64, requires = "prompt_field")]
    prompt_context: usize,
    /// Where to write the drafter (safetensors).
    #[arg(short, long)]
    output: PathBuf,
    /// Replace an existing output file even if it is not an EAGLE drafter (an input is never replaced).
    #[arg(long)]
    force: bool,
    /// Corpus positions read at most (training and held-out together).
    #[arg(long, default_value_t = 60_000)]
    max_positions: usize,
    /// Training epochs.
    #[arg(long, default_value_t = 4)]
    epochs: usize,
    /// Training window (positions attended over).
    #[arg(long, default_value_t = 128)]
    window: usize,
    /// Windows per optimiser step.
    #[arg(long, default_value_t = 16)]
    batch_size: usize,
    /// AdamW learning rate.
    #[arg(long, default_value_t = 1e-3)]
    learning_rate: f64,
    /// The cross-entropy term runs over the corpus's this-many most frequent next tokens.
    #[arg(long, default_value_t = 8192)]
    ce_shortlist: usize,
    /// Seed of the initialisation and the shuffles.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

fn eagle(args: EagleArgs, progress: &dyn Progress) -> anyhow::Result<()> {
    let inputs: Vec<(&str, &Path)> = std::iter::once(("--model", args.model.as_path()))
        .chain(args.corpus.iter().map(|p| ("--corpus", p.as_path())))
        .collect();
    let output = Output { flag: "-o", path: &args.output, kind: ArtifactKind::FeatureDrafter, force: args.force };
    check_output(&output, &inputs)?;
    check_counted_once(&inputs[1..])?;
    let started = Instant::now();
    let checkpoint = Checkpoint::open(&args.model).with_context(|| format!("--model {}", args.model.display()))?;
    let tokenizer =
        checkpoint.tokenizer().with_context(|| format!("--model {}: its tokenizer", args.model.display()))?;
    let device = DeviceChoice::Cpu.device().context("the CPU device")?;
    let model = checkpoint
        .load_model_with(&device, &LoadOptions::default())
        .with_context(|| format!("--model {}", args.model.display()))?;
    let params = EagleBuildParams {
        max_positions: args.max_positions,
        prompt_context: args.prompt_context,
        ce_shortlist: args.ce_shortlist,
        train: EagleTrainConfig {
            window: args.window,
            batch_size: args.batch_size,
            epochs: args.epochs,
            learning_rate: args.learning_rate,
            seed: args.seed,
            ..EagleTrainConfig::default()
        },
        corpus: describe(&args.corpus),
        ..EagleBuildParams::default()
    };
    let (file, report) = match &args.prompt_field {
        None => {
            let options = CorpusOptions { text_field: args.text_field.clone() };
            let texts = router_texts(&args.corpus, &options, &tokenizer, args.max_positions, progress)
                .with_context(|| "--corpus: reading the text")?;
            build_eagle(&model, &texts, &params, progress)?
        }
        Some(prompt_field) => {
            let chats = chat_texts(&args.corpus, [prompt_field, &args.text_field], &checkpoint, &tokenizer, progress)
                .with_context(|| "--corpus: reading the chats")?;
            build_eagle_on_chats(&model, &chats, &params, progress)?
        }
    };
    file.save(&args.output).with_context(|| format!("-o {}: cannot write the drafter", args.output.display()))?;
    let seconds = started.elapsed().as_secs_f64();
    print_eagle(&args.output, &file.info, Some((&report, seconds)), args.json, "wrote")
}

#[derive(Serialize)]
struct EagleRecord<'a> {
    path: &'a Path,
    model_fingerprint: &'a str,
    layers: usize,
    corpus: &'a str,
    positions: usize,
    epochs: usize,
    window: usize,
    ce_shortlist: usize,
    loss_log: &'a [f32],
    valid_accuracy: &'a [f32],
    #[serde(skip_serializing_if = "Option::is_none")]
    build: Option<&'a EagleReport>,
    #[serde(skip_serializing_if = "Option::is_none")]
    seconds: Option<f64>,
}

fn print_eagle(
    path: &Path,
    info: &EagleInfo,
    build: Option<(&EagleReport, f64)>,
    json: bool,
    verb: &str,
) -> anyhow::Result<()> {
    let record = EagleRecord {
        path,
        model_fingerprint: &info.model_fingerprint,
        layers: info.layers,
        corpus: &info.corpus,
        positions: info.positions,
        epochs: info.epochs,
        window: info.window,
        ce_shortlist: info.ce_shortlist,
        loss_log: &info.loss_log,
        valid_accuracy: &info.valid_accuracy,
        build: build.map(|(b, _)| b),
        seconds: build.map(|(_, s)| s),
    };
    if json {
        return print_json(&record);
    }
    let list = |v: &[f32]| v.iter().map(|l| format!("{l:.3}")).collect::<Vec<_>>().join(" → ");
    let mut text = format!(
        "{verb} {}: an EAGLE drafter of {} layer for model {}\ntrained on {} positions of {} for {} epochs (window \
         {}, cross-entropy over the {} most frequent tokens); loss {}; held-out top-1 agreement with the model {}",
        path.display(),
        info.layers,
        &info.model_fingerprint[..info.model_fingerprint.len().min(12)],
        info.positions,
        info.corpus,
        info.epochs,
        info.window,
        info.ce_shortlist,
        list(&info.loss_log),
        list(&info.valid_accuracy),
    );
    if let Some((report, seconds)) = build {
        text.push_str(&format!(
            "\n{} held-out positions, held-out loss {}\n(reading {:.1} s, training {:.1} s, {seconds:.1} s in all)",
            report.valid_positions,
            list(&report.valid_loss_log),
            report.seconds.0,
            report.seconds.1,
        ));
    }
    print_text(&text)
}

#[derive(Debug, clap::Args)]
struct BuildArgs {
    /// The model: a GGUF file or a checkpoint directory.
    #[arg(long, value_name = "M.gguf|DIR")]
    model: PathBuf,
    /// Corpus files: plain text (documents separated by blank lines), or JSONL (`*.jsonl`) with
    /// one document per line; gzip is recognised by content. Text the model itself wrote suits
    /// best (drafting happens on its outputs).
    #[arg(long, num_args = 1.., required = true)]
    corpus: Vec<PathBuf>,
    /// The JSONL field that holds the text.
    #[arg(long, default_value = "text")]
    text_field: String,
    /// Where to write the router (safetensors).
    #[arg(short, long)]
    output: PathBuf,
    /// Replace an existing output file even if it is not a DynaSpec router (an input is never replaced).
    #[arg(long)]
    force: bool,
    /// Layers of the self-speculative drafter whose hidden state the router reads.
    #[arg(long, default_value_t = 6, conflicts_with = "all_layers")]
    drafter_layers: usize,
    /// Read the model's own final hidden state (all its layers): the router of the EAGLE
    /// drafter (`anyspec dynaspec eagle`), which drafts from the model's features.
    #[arg(long)]
    all_layers: bool,
    /// M, the number of clusters (at most the vocabulary size).
    #[arg(long, default_value_t = 256)]
    clusters: usize,
    /// Labels: the clusters of the target's this-many most likely next tokens.
    #[arg(long, default_value_t = 4)]
    label_top_k: usize,
    /// Corpus positions read at most (training and held-out together).
    #[arg(long, default_value_t = 20_000)]
    max_positions: usize,
    /// Router training epochs.
    #[arg(long, default_value_t = 8)]
    epochs: usize,
    /// Width of the router's hidden layer.
    #[arg(long, default_value_t = 256)]
    hidden: usize,
    /// Seed of k-means and training.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, clap::Args)]
struct InspectArgs {
    /// The router file (or an EAGLE drafter file).
    router: PathBuf,
    /// A model (GGUF file or checkpoint directory): refuse the router if it was built for another.
    #[arg(long, value_name = "M.gguf|DIR")]
    model: Option<PathBuf>,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

pub(crate) fn run(args: Args, progress: &dyn Progress) -> anyhow::Result<()> {
    match args.command {
        Command::Build(args) => build(args, progress),
        Command::Inspect(args) => inspect(args),
        Command::Bench(args) => bench::run(args, progress),
        Command::Eagle(args) => eagle(args, progress),
    }
}

#[derive(Serialize)]
struct Record {
    path: PathBuf,
    model_fingerprint: String,
    vocab_size: usize,
    clusters: usize,
    drafter_layers: usize,
    label_top_k: usize,
    positions: usize,
    epochs: usize,
    corpus: String,
    data_digest: String,
    loss_log: Vec<f32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    build: Option<BuildReport>,
    #[serde(skip_serializing_if = "Option::is_none")]
    seconds: Option<f64>,
}

fn record(path: &Path, file: &RouterFile, build: Option<BuildReport>, seconds: Option<f64>) -> Record {
    let i = &file.info;
    Record {
        path: path.to_path_buf(),
        model_fingerprint: i.model_fingerprint.clone(),
        vocab_size: i.vocab_size,
        clusters: file.clusters.len(),
        drafter_layers: i.drafter_layers,
        label_top_k: i.label_top_k,
        positions: i.positions,
        epochs: i.epochs,
        corpus: i.corpus.clone(),
        data_digest: i.data_digest.clone(),
        loss_log: i.loss_log.clone(),
        build,
        seconds,
    }
}

fn print_record(r: &Record, json: bool, verb: &str) -> anyhow::Result<()> {
    if json {
        return print_json(r);
    }
    let mut text = format!(
        "{verb} {}: {} clusters of a {}-token vocabulary (model {}), router over the hidden state of the {}, \
         labels = clusters of the target's top {}\ntrained on {} positions of {} for {} epochs, loss {}",
        r.path.display(),
        r.clusters,
        r.vocab_size,
        &r.model_fingerprint[..r.model_fingerprint.len().min(12)],
        crate::output::first_layers(r.drafter_layers),
        r.label_top_k,
        r.positions,
        r.corpus,
        r.epochs,
        r.loss_log.iter().map(|l| format!("{l:.3}")).collect::<Vec<_>>().join(" → "),
    );
    if let Some(b) = &r.build {
        text.push_str(&format!(
            "\ncluster sizes {} / {} / {} (min / median / max), {:.2} positive clusters per position, {} held-out positions\n\
             held-out recall (target mass in the shortlist; FR = the corpus's most frequent tokens, same size):\n\
             {:>8} {:>10} {:>8} {:>10} {:>9} {:>10} {:>9}",
            b.cluster_sizes.0,
            b.cluster_sizes.1,
            b.cluster_sizes.2,
            b.mean_positive_clusters,
            b.valid_positions,
            "clusters",
            "mean size",
            "vocab %",
            "p(S) dyn",
            "top-1 dyn",
            "p(S) FR",
            "top-1 FR",
        ));
        for row in &b.recall {
            text.push_str(&format!(
                "\n{:>8} {:>10.0} {:>7.1}% {:>10.4} {:>9.4} {:>10.4} {:>9.4}",
                row.clusters,
                row.mean_size,
                100.0 * row.vocab_share,
                row.target_mass,
                row.top1_hit,
                row.fr_target_mass,
                row.fr_top1_hit
            ));
        }
    }
    if let Some(s) = r.seconds {
        text.push_str(&format!("\n({s:.1} s)"));
    }
    print_text(&text)
}

fn build(args: BuildArgs, progress: &dyn Progress) -> anyhow::Result<()> {
    let inputs: Vec<(&str, &Path)> = std::iter::once(("--model", args.model.as_path()))
        .chain(args.corpus.iter().map(|p| ("--corpus", p.as_path())))
        .collect();
    let output = Output { flag: "-o", path: &args.output, kind: ArtifactKind::Router, force: args.force };
    check_output(&output, &inputs)?;
    check_counted_once(&inputs[1..])?;
    let started = Instant::now();
    let checkpoint = Checkpoint::open(&args.model).with_context(|| format!("--model {}", args.model.display()))?;
    let vocab = checkpoint.config().vocab_size;
    let layers = checkpoint.config().num_layers;
    if args.clusters == 0 || args.clusters > vocab {
        anyhow::bail!("--clusters must be in 1..={vocab} (the model's vocabulary size), got {}", args.clusters);
    }
    let drafter_layers = if args.all_layers { layers } else { args.drafter_layers };
    if drafter_layers == 0 || drafter_layers > layers {
        anyhow::bail!(
            "--drafter-layers must be in 1..={layers} (the model has {layers} layers; --all-layers for the EAGLE \
             drafter's router), got {drafter_layers}"
        );
    }
    let tokenizer =
        checkpoint.tokenizer().with_context(|| format!("--model {}: its tokenizer", args.model.display()))?;
    let device = DeviceChoice::Cpu.device().context("the CPU device")?;
    let model = checkpoint
        .load_model_with(&device, &LoadOptions::default())
        .with_context(|| format!("--model {}", args.model.display()))?;

    let options = CorpusOptions { text_field: args.text_field.clone() };
    let texts = router_texts(&args.corpus, &options, &tokenizer, args.max_positions, progress)
        .with_context(|| "--corpus: reading the text")?;

    let params = BuildParams {
        clusters: args.clusters,
        seed: args.seed,
        drafter_layers,
        label_top_k: args.label_top_k,
        max_positions: args.max_positions,
        train: RouterTrainConfig { hidden: args.hidden, epochs: args.epochs, seed: args.seed, ..Default::default() },
        corpus: describe(&args.corpus),
        ..BuildParams::default()
    };
    let (file, report) = build_router(&model, &texts, &params, progress)?;
    file.save(&args.output).with_context(|| format!("-o {}: cannot write the router", args.output.display()))?;
    let seconds = started.elapsed().as_secs_f64();
    print_record(&record(&args.output, &file, Some(report), Some(seconds)), args.json, "wrote")
}

/// The documents of `corpus` (split at blank lines), tokenized, until twice `max_positions`
/// tokens are read: a router's training and held-out text (`anyspec dynaspec build`, and the
/// demo's DynaSpec row).
pub(crate) fn router_texts(
    corpus: &[PathBuf],
    options: &CorpusOptions,
    tokenizer: &TextTokenizer,
    max_positions: usize,
    progress: &dyn Progress,
) -> anyhow::Result<Vec<Vec<u32>>> {
    let mut texts: Vec<Vec<u32>> = Vec::new();
    let mut tokens = 0usize;
    anyspec_dict_builder::for_each_chunk(corpus, options, progress, |chunk| {
        for document in chunk.split("\n\n").map(str::trim).filter(|d| !d.is_empty()) {
            if tokens >= max_positions * 2 {
                break;
            }
            let ids = tokenizer.encode(document).map_err(|e| anyspec_dict_builder::Error::Tokenizer {
                text: document.chars().take(40).collect(),
                message: e.to_string(),
            })?;
            tokens += ids.len();
            texts.push(ids);
        }
        Ok(())
    })?;
    Ok(texts)
}

/// The (prompt, answer) records of JSONL `corpus` files as chats: the prompt through the
/// model's chat template, tokenized as `anyspec demo` tokenizes it, then the answer's tokens.
fn chat_texts(
    corpus: &[PathBuf],
    [prompt_field, answer_field]: [&str; 2],
    checkpoint: &Checkpoint,
    tokenizer: &TextTokenizer,
    progress: &dyn Progress,
) -> anyhow::Result<Vec<EagleChat>> {
    checkpoint.chat_prompt(None, "").context("--prompt-field reads chats through the model's chat template")?;
    let mut chats = Vec::new();
    anyspec_dict_builder::for_each_record(corpus, &[prompt_field, answer_field], progress, |record| {
        let [prompt, answer] = &record.fields[..] else { unreachable!("two fields were asked for") };
        let where_ = || format!("{} line {}", record.path.display(), record.line);
        let mut tokens =
            tokenizer.encode(&checkpoint.chat_prompt(None, prompt).with_context(where_)?).with_context(where_)?;
        let answer_start = tokens.len();
        tokens.extend(tokenizer.encode(answer.trim()).with_context(where_)?);
        // An empty answer has nothing to learn from.
        if tokens.len() > answer_start {
            chats.push(EagleChat { tokens, answer_start });
        }
        anyhow::Ok(())
    })?;
    if chats.is_empty() {
        anyhow::bail!("no chat with a non-empty answer; check --prompt-field and --text-field");
    }
    Ok(chats)
}

fn inspect(args: InspectArgs) -> anyhow::Result<()> {
    let fingerprint = match &args.model {
        Some(path) => {
            let checkpoint = Checkpoint::open(path).with_context(|| format!("--model {}", path.display()))?;
            let device = DeviceChoice::Cpu.device().context("the CPU device")?;
            let model = checkpoint
                .load_model_with(&device, &LoadOptions::default())
                .with_context(|| format!("--model {}", path.display()))?;
            let c = model.config();
            Some(model_fingerprint(c.vocab_size, c.hidden_size, &model.lm_head_rows()?))
        }
        None => None,
    };
    if matches!(ArtifactKind::of_file(&args.router), Ok(Some(ArtifactKind::FeatureDrafter))) {
        let file = match &fingerprint {
            Some(f) => EagleFile::load(&args.router, f)?,
            None => EagleFile::load_unchecked(&args.router)?,
        };
        return print_eagle(&args.router, &file.info, None, args.json, "EAGLE drafter");
    }
    let file = match &fingerprint {
        Some(f) => RouterFile::load(&args.router, f)?,
        None => RouterFile::load_unchecked(&args.router)?,
    };
    print_record(&record(&args.router, &file, None, None), args.json, "router")
}

fn describe(paths: &[PathBuf]) -> String {
    paths
        .iter()
        .map(|p| p.file_name().map_or_else(|| p.display().to_string(), |n| n.to_string_lossy().into_owned()))
        .collect::<Vec<_>>()
        .join(", ")
}
