//! `cargo xtask demo-assets`: trains the tokenizers and the small models that `anyspec demo` ships
//! with, the tiny set from the public-domain Gutenberg books in `<data>/corpora/en-gutenberg` and
//! SmolLM2's small drafter from SmolLM2's own answers (`target-chats.jsonl.gz` in `--out`), and
//! writes them with loss curves and a README under `assets/demo/`.
//!
//! Everything runs on the CPU in release mode; the default step counts fit in about 30 minutes of
//! training on a 2-core machine.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, bail};
use anyspec_core::NoProgress;
use anyspec_train::{
    ModelSpec, StepLog, StoredDtype, TrainConfig, TrainReport, TrainableLlama, byte_tokenizer, encode_stream,
    save_checkpoint, train, train_byte_level_bpe, train_metaspace_bpe,
};
use tokenizers::Tokenizer;

/// The corpus, relative to `--data`.
const CORPUS: &str = "corpora/en-gutenberg/gutenberg_en";
/// The book held out for validation and demo prompts (not trained on).
const HELD_OUT_BOOK: &str = "pg1342";
/// Characters of training text the tokenizers learn from (a slice of every book).
const TOKENIZER_SAMPLE_CHARS: usize = 3_000_000;

/// Options of the pipeline.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The shared data directory (corpora/en-gutenberg).
    #[arg(long, default_value = "../shared")]
    data: PathBuf,
    /// Where the assets are written.
    #[arg(long, default_value = "assets/demo")]
    out: PathBuf,
    /// Optimiser steps of the target (default from the model table).
    #[arg(long)]
    target_steps: Option<usize>,
    /// Optimiser steps of each drafter (default from the model table).
    #[arg(long)]
    drafter_steps: Option<usize>,
    /// Overrides every model's step count (for a quick smoke run).
    #[arg(long)]
    steps: Option<usize>,
    /// Only these models (comma-separated names); the others are left as they are on disk.
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
}

/// One model of the demo.
struct Plan {
    name: &'static str,
    role: &'static str,
    text: Text,
    tokenizer: Which,
    spec: fn(vocab: usize, eos: u32) -> ModelSpec,
    steps: usize,
    batch_size: usize,
    seq_len: usize,
    learning_rate: f64,
}

#[derive(Clone, Copy, PartialEq)]
enum Which {
    ByteLevelBpe,
    Metaspace,
    Bytes,
    /// A byte-level BPE learned from SmolLM2's answers ([`Text::SmolLM2Answers`]).
    AnswersBpe,
}

/// What a model learns from.
#[derive(Clone, Copy, PartialEq)]
enum Text {
    /// The Gutenberg books (all but the held-out one).
    Gutenberg,
    /// SmolLM2-135M-Instruct's own answers, `target-chats.jsonl.gz` in `--out` (made by `cargo
    /// xtask target-outputs`), every tenth held out: the text SmolLM2's demo drafts.
    SmolLM2Answers,
}

/// SmolLM2's (prompt, answer) pairs, relative to `--out`.
const SMOLLM2_CHATS: &str = "target-chats.jsonl.gz";

fn spec(vocab: usize, eos: u32, hidden: usize, layers: usize, heads: usize, kv: usize) -> ModelSpec {
    ModelSpec {
        vocab_size: vocab,
        hidden_size: hidden,
        intermediate_size: hidden * 8 / 3 / 32 * 32,
        num_layers: layers,
        num_heads: heads,
        num_kv_heads: kv,
        max_position_embeddings: 1024,
        rope_theta: 10_000.0,
        rms_norm_eps: 1e-5,
        eos_token_id: eos,
    }
}

const TARGET_VOCAB: usize = 8192;
/// The vocabulary of SmolLM2's small drafter: a head of 4k rows keeps its step cheap (the hetero
/// paper's point) and the assets within 30 MB. 3,476 of its tokens are SmolLM2's too; an 8k
/// version (6,239 shared) drafted about as well (assets/demo/README.md).
const SMOLLM2_DRAFTER_VOCAB: usize = 4096;
const METASPACE_VOCAB: usize = 2048;

fn plans() -> Vec<Plan> {
    vec![
        Plan {
            name: "target",
            role: "target (byte-level BPE, 8k)",
            text: Text::Gutenberg,
            tokenizer: Which::ByteLevelBpe,
            spec: |v, e| spec(v, e, 256, 4, 4, 2),
            steps: 900,
            batch_size: 8,
            seq_len: 128,
            learning_rate: 3e-3,
        },
        Plan {
            name: "drafter-same",
            role: "drafter, same tokenizer as the target",
            text: Text::Gutenberg,
            tokenizer: Which::ByteLevelBpe,
            spec: |v, e| spec(v, e, 128, 2, 4, 2),
            steps: 400,
            batch_size: 8,
            seq_len: 128,
            learning_rate: 4e-3,
        },
        Plan {
            name: "drafter-sp",
            role: "drafter, SentencePiece-style BPE (2k, byte fallback)",
            text: Text::Gutenberg,
            tokenizer: Which::Metaspace,
            spec: |v, e| spec(v, e, 128, 2, 4, 2),
            steps: 300,
            batch_size: 8,
            seq_len: 128,
            learning_rate: 4e-3,
        },
        Plan {
            name: "drafter-byte",
            role: "drafter, one token per byte (SLRS)",
            text: Text::Gutenberg,
            tokenizer: Which::Bytes,
            spec: |v, e| spec(v, e, 128, 3, 4, 2),
            steps: 300,
            batch_size: 8,
            seq_len: 256,
            learning_rate: 4e-3,
        },
        Plan {
            name: "drafter-smollm2",
            role: "SmolLM2's drafter with another tokenizer (TLI, RDK, SLEM rows): its own 4k byte-level BPE",
            text: Text::SmolLM2Answers,
            tokenizer: Which::AnswersBpe,
            spec: |v, e| spec(v, e, 128, 2, 4, 2),
            steps: 1000,
            batch_size: 8,
            seq_len: 128,
            learning_rate: 4e-3,
        },
    ]
}

/// SmolLM2's answers in `chats` (JSONL, gzipped, an `answer` field per line), split into
/// training and held-out answers (every tenth, as `anyspec dynaspec eagle` holds out chats).
fn read_answers(chats: &Path) -> anyhow::Result<(Vec<String>, Vec<String>)> {
    let (mut train, mut valid) = (Vec::new(), Vec::new());
    let mut index = 0usize;
    anyspec_dict_builder::for_each_record(std::slice::from_ref(&chats.to_path_buf()), &["answer"], &NoProgress, |r| {
        let answer = r.fields.concat();
        let answer = answer.trim();
        if !answer.is_empty() {
            if index % 10 == 9 { &mut valid } else { &mut train }.push(answer.to_owned());
            index += 1;
        }
        anyhow::Ok(())
    })
    .with_context(|| {
        format!("reading SmolLM2's answers (make {} with `cargo xtask target-outputs`)", chats.display())
    })?;
    if valid.is_empty() {
        bail!("{} has fewer than ten answers; regenerate it with `cargo xtask target-outputs`", chats.display());
    }
    Ok((train, valid))
}

struct Corpus {
    train: Vec<String>,
    valid: Vec<String>,
    train_books: Vec<String>,
}

/// Paragraphs of every book; the held-out book becomes validation text.
fn read_corpus(data: &Path) -> anyhow::Result<Corpus> {
    let text_path = data.join(format!("{CORPUS}.txt"));
    let index_path = data.join(format!("{CORPUS}.index.tsv"));
    let text = std::fs::read(&text_path)
        .with_context(|| format!("reading {} (pass --data PATH to the shared data directory)", text_path.display()))?;
    let index = std::fs::read_to_string(&index_path).with_context(|| format!("reading {}", index_path.display()))?;
    let (mut train, mut valid, mut train_books) = (Vec::new(), Vec::new(), Vec::new());
    for line in index.lines().skip(1) {
        let fields: Vec<&str> = line.split('\t').collect();
        let [doc_id, title, .., start, len] = fields.as_slice() else {
            bail!("{}: malformed row {line:?}", index_path.display());
        };
        let (start, len): (usize, usize) = (start.parse()?, len.parse()?);
        let doc = std::str::from_utf8(&text[start..start + len]).context("the corpus is not UTF-8")?;
        let paragraphs = doc.split("\n\n").map(str::trim).filter(|p| !p.is_empty()).map(str::to_owned);
        if *doc_id == HELD_OUT_BOOK {
            valid.extend(paragraphs);
        } else {
            train.extend(paragraphs);
            train_books.push(format!("{doc_id} {title}"));
        }
    }
    if train.is_empty() || valid.is_empty() {
        bail!("{} has no training or no validation text (held-out book {HELD_OUT_BOOK})", index_path.display());
    }
    Ok(Corpus { train, valid, train_books })
}

/// Every k-th paragraph up to about `chars` characters, so every book is represented.
fn sample(paragraphs: &[String], chars: usize) -> Vec<&str> {
    let total: usize = paragraphs.iter().map(String::len).sum();
    let stride = (total / chars).max(1);
    paragraphs.iter().step_by(stride).map(String::as_str).collect()
}

#[allow(clippy::print_stderr)]
pub(crate) fn run(args: &Args) -> anyhow::Result<()> {
    let started = Instant::now();
    let names: Vec<&str> = plans().iter().map(|p| p.name).collect();
    if let Some(unknown) = args.only.iter().find(|n| !names.contains(&n.as_str())) {
        bail!("--only {unknown}: no such model; the models are {}", names.join(", "));
    }
    let corpus = read_corpus(&args.data)?;
    std::fs::create_dir_all(&args.out)?;
    eprintln!(
        "corpus: {} training paragraphs from {} books, {} validation paragraphs ({HELD_OUT_BOOK})",
        corpus.train.len(),
        corpus.train_books.len(),
        corpus.valid.len()
    );

    let tokenizer_text = sample(&corpus.train, TOKENIZER_SAMPLE_CHARS);
    let t = Instant::now();
    let byte_level = train_byte_level_bpe(&tokenizer_text, TARGET_VOCAB)?;
    let metaspace = train_metaspace_bpe(&tokenizer_text, METASPACE_VOCAB, 150)?;
    let bytes = byte_tokenizer()?;
    eprintln!("tokenizers trained in {:.1} s", t.elapsed().as_secs_f64());
    let wanted = |plan: &Plan| args.only.is_empty() || args.only.iter().any(|n| n == plan.name);
    let answers = if plans().iter().any(|p| p.text == Text::SmolLM2Answers && wanted(p)) {
        let (train, valid) = read_answers(&args.out.join(SMOLLM2_CHATS))?;
        let tokenizer = train_byte_level_bpe(&train, SMOLLM2_DRAFTER_VOCAB)?;
        eprintln!("SmolLM2's answers: {} training, {} held out; their tokenizer trained", train.len(), valid.len());
        Some((train, valid, tokenizer))
    } else {
        None
    };

    let device = burn::tensor::Device::flex();
    let mut results: Vec<(String, ModelSpec, TrainReport, TrainConfig)> = Vec::new();
    for plan in plans() {
        if !wanted(&plan) {
            continue;
        }
        let missing = || anyhow::anyhow!("{}: SmolLM2's answers were not read", plan.name);
        let (train_text, valid_text) = match plan.text {
            Text::Gutenberg => (&corpus.train, &corpus.valid),
            Text::SmolLM2Answers => answers.as_ref().map(|(train, valid, _)| (train, valid)).ok_or_else(missing)?,
        };
        let (tokenizer, eos): (&Tokenizer, u32) = match plan.tokenizer {
            Which::ByteLevelBpe => (&byte_level, 0),
            Which::Metaspace => (&metaspace, 0),
            Which::Bytes => (&bytes, 0),
            Which::AnswersBpe => (answers.as_ref().map(|(_, _, tokenizer)| tokenizer).ok_or_else(missing)?, 0),
        };
        let t = Instant::now();
        let train_stream = encode_stream(tokenizer, train_text, eos)?;
        let valid_stream = encode_stream(tokenizer, valid_text, eos)?;
        eprintln!(
            "{}: {} training tokens, {} validation tokens (encoded in {:.1} s)",
            plan.name,
            train_stream.len(),
            valid_stream.len(),
            t.elapsed().as_secs_f64()
        );
        let spec = (plan.spec)(tokenizer.get_vocab_size(true), eos);
        let default_steps = if plan.name == "target" { args.target_steps } else { args.drafter_steps };
        let steps = args.steps.or(default_steps).unwrap_or(plan.steps);
        let config = TrainConfig {
            steps,
            batch_size: plan.batch_size,
            seq_len: plan.seq_len,
            learning_rate: plan.learning_rate,
            final_lr_fraction: 0.1,
            warmup_steps: (steps / 20).max(1),
            weight_decay: 0.1,
            eval_every: (steps / 10).max(1),
            eval_windows: 32,
            seed: 20_261_121,
        };
        eprintln!(
            "{}: {} parameters, {steps} steps of {}×{}",
            plan.name,
            spec.parameter_count(),
            plan.batch_size,
            plan.seq_len
        );
        let mut model = TrainableLlama::new(spec.clone(), 1, &device)?;
        let name = plan.name;
        let report = train(&mut model, &train_stream, &valid_stream, &config, &NoProgress, &mut |log: &StepLog| {
            if log.step.is_multiple_of(10) || log.valid_loss.is_some() {
                let valid = log.valid_loss.map(|v| format!(" valid {v:.3}")).unwrap_or_default();
                eprintln!(
                    "{name} step {:>5}/{steps} loss {:.3}{valid} lr {:.2e} |g| {:.2} {:.0} s",
                    log.step, log.loss, log.learning_rate, log.grad_norm, log.elapsed_s
                );
            }
        })?;
        let dir = args.out.join(plan.name);
        let metadata = [
            (
                "corpus",
                match plan.text {
                    Text::Gutenberg => format!("{CORPUS} (public domain), all books but {HELD_OUT_BOOK}"),
                    Text::SmolLM2Answers => {
                        format!("{SMOLLM2_CHATS}: SmolLM2-135M-Instruct's answers (Apache-2.0), all but every tenth")
                    }
                },
            ),
            ("steps", steps.to_string()),
            ("batch_size", plan.batch_size.to_string()),
            ("seq_len", plan.seq_len.to_string()),
            ("learning_rate", plan.learning_rate.to_string()),
            ("final_valid_loss", format!("{:.4}", report.final_valid_loss().unwrap_or(f32::NAN))),
        ];
        save_checkpoint(&model, tokenizer, &dir, StoredDtype::F16, &metadata)?;
        std::fs::write(dir.join("training.json"), serde_json::to_string(&report)?)?;
        eprintln!("{}: saved to {} after {:.0} s", plan.name, dir.display(), report.seconds);
        results.push((plan.name.to_owned(), spec, report, config));
    }

    write_prompts(&args.out, &corpus.valid)?;
    write_dictionary_corpus(&args.out, &corpus.train)?;
    let curves = args.out.join("loss_curves.png");
    let drew = draw_curves(&curves, &args.out)?;
    write_readme(&args.out, &corpus, drew, started.elapsed().as_secs_f64())?;
    eprintln!("demo assets written to {} in {:.0} s", args.out.display(), started.elapsed().as_secs_f64());
    Ok(())
}

/// Characters of training text shipped (gzip) for `anyspec demo` to build its n-gram dictionary.
const DICTIONARY_CORPUS_CHARS: usize = 3_000_000;

/// `corpus.txt.gz`: an evenly spread sample of the training paragraphs, from which the demo
/// builds its DictSpec dictionary (the demo machine has no `../shared`).
fn write_dictionary_corpus(out: &Path, train: &[String]) -> anyhow::Result<()> {
    use std::io::Write as _;
    let file = std::fs::File::create(out.join("corpus.txt.gz"))?;
    let mut gz = flate2::write::GzEncoder::new(file, flate2::Compression::best());
    for paragraph in sample(train, DICTIONARY_CORPUS_CHARS) {
        gz.write_all(paragraph.as_bytes())?;
        gz.write_all(b"\n\n")?;
    }
    gz.finish()?.sync_all()?;
    Ok(())
}

/// The demo's prompts: the openings of a few paragraphs of the held-out book.
fn write_prompts(out: &Path, valid: &[String]) -> anyhow::Result<()> {
    let prompts: Vec<String> = valid
        .iter()
        .filter(|p| p.len() > 200 && !p.starts_with('“') && p.is_ascii())
        .step_by(97)
        .take(8)
        .map(|p| {
            let cut = p.char_indices().map(|(i, _)| i).filter(|&i| i >= 120).find(|&i| p[..i].ends_with(' '));
            p[..cut.unwrap_or(p.len())].trim_end().replace('\n', " ")
        })
        .collect();
    std::fs::write(out.join("prompts.json"), serde_json::to_string_pretty(&prompts)?)?;
    Ok(())
}

/// Training and validation loss of every model found under `out`, in one PNG.
fn draw_curves(path: &Path, out: &Path) -> anyhow::Result<bool> {
    use plotters::prelude::*;
    if !crate::plot::register_font()? {
        return Ok(false);
    }
    let mut series: Vec<(String, TrainReportLite)> = Vec::new();
    for plan in plans() {
        let file = out.join(plan.name).join("training.json");
        if let Ok(text) = std::fs::read_to_string(&file) {
            series.push((plan.name.to_owned(), serde_json::from_str(&text)?));
        }
    }
    if series.is_empty() {
        return Ok(false);
    }
    let max_step = series.iter().map(|(_, r)| r.steps.len()).max().unwrap_or(1) as f64;
    let max_loss = series.iter().flat_map(|(_, r)| r.steps.iter().map(|s| s.loss)).fold(0f32, f32::max) as f64;
    let root = BitMapBackend::new(path, (1000, 600)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption("Demo models: training loss (lines, 20-step mean) and validation loss (dots)", ("sans-serif", 20))
        .margin(20)
        .x_label_area_size(45)
        .y_label_area_size(60)
        .build_cartesian_2d(0f64..max_step, 0f64..max_loss * 1.05)?;
    chart
        .configure_mesh()
        .x_desc("optimiser step")
        .y_desc("cross-entropy (nats per token of the model's own tokenizer)")
        .label_style(("sans-serif", 14))
        .draw()?;
    let palette = [
        RGBColor(31, 119, 180),
        RGBColor(214, 39, 40),
        RGBColor(44, 160, 44),
        RGBColor(148, 103, 189),
        RGBColor(255, 127, 14),
    ];
    for (i, (name, report)) in series.iter().enumerate() {
        let color = palette[i % palette.len()];
        let losses: Vec<f32> = report.steps.iter().map(|s| s.loss).collect();
        let smoothed: Vec<(f64, f64)> = (0..losses.len())
            .map(|j| {
                let from = j.saturating_sub(19);
                let window = &losses[from..=j];
                ((j + 1) as f64, window.iter().map(|&l| f64::from(l)).sum::<f64>() / window.len() as f64)
            })
            .collect();
        chart
            .draw_series(std::iter::once(PathElement::new(smoothed, color.stroke_width(2))))?
            .label(name.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2)));
        chart.draw_series(
            report
                .steps
                .iter()
                .filter_map(|s| s.valid_loss.map(|v| Circle::new((s.step as f64, f64::from(v)), 5, color.filled()))),
        )?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .label_font(("sans-serif", 14))
        .border_style(BLACK)
        .background_style(WHITE)
        .draw()?;
    root.present()?;
    Ok(true)
}

#[derive(serde::Deserialize)]
struct TrainReportLite {
    steps: Vec<StepLite>,
    tokens_seen: u64,
    seconds: f64,
}

#[derive(serde::Deserialize)]
struct StepLite {
    step: usize,
    loss: f32,
    valid_loss: Option<f32>,
}

/// The `## ` sections [`write_readme`] writes; any other section of an existing README (SmolLM2's:
/// measurements of `cargo xtask target-outputs`, `anyspec dynaspec eagle` and the prompt choice,
/// written by hand) is kept.
const GENERATED_SECTIONS: [&str; 4] = ["Corpus and licence", "Models", "Loss curves", "Rebuilding"];

/// `generated` with the sections of `existing` that are not among [`GENERATED_SECTIONS`]
/// inserted, in their order, after the generated "Corpus and licence" section (before the
/// tiny models' tables), where the README has always had them.
fn with_kept_sections(generated: &str, existing: Option<&str>) -> String {
    // (title, text) of each `## ` section; the text before the first is titled "".
    fn sections(md: &str) -> Vec<(&str, String)> {
        let mut out: Vec<(&str, String)> = vec![("", String::new())];
        for line in md.split_inclusive('\n') {
            if let Some(title) = line.strip_prefix("## ") {
                out.push((title.trim_end(), String::new()));
            }
            out.last_mut().expect("starts with one").1.push_str(line);
        }
        out
    }
    let kept: Vec<String> = existing
        .map(|md| {
            sections(md)
                .into_iter()
                .filter(|(title, _)| !title.is_empty() && !GENERATED_SECTIONS.contains(title))
                .map(|(_, text)| if text.ends_with("\n\n") { text } else { format!("{}\n\n", text.trim_end()) })
                .collect()
        })
        .unwrap_or_default();
    let mut md = String::new();
    let mut inserted = kept.is_empty();
    for (title, text) in sections(generated) {
        if !inserted && title == "Models" {
            kept.iter().for_each(|k| md.push_str(k));
            inserted = true;
        }
        md.push_str(&text);
    }
    if !inserted {
        kept.iter().for_each(|k| md.push_str(k));
    }
    md
}

/// assets/demo/README.md from what is on disk (so a partial `--only` rebuild keeps it whole).
fn write_readme(out: &Path, corpus: &Corpus, drew: bool, seconds: f64) -> anyhow::Result<()> {
    let mut md = String::new();
    writeln!(md, "# Demo models\n")?;
    writeln!(
        md,
        "Five small Llama-architecture models and four tokenizers, trained from scratch in Rust \
         (burn autodiff, `tokenizers` trainers) by `cargo xtask demo-assets`: a tiny target and three \
         drafters, so that `anyspec demo` runs on a machine that cannot download a model, and a drafter \
         with its own tokenizer for SmolLM2. They are tiny and undertrained: they exist to exercise \
         every code path of speculative decoding, not to write good prose.\n"
    )?;
    writeln!(md, "## Corpus and licence\n")?;
    writeln!(
        md,
        "`shared/{CORPUS}.txt`: {} public-domain English books from Project Gutenberg (via the \
         GITenberg repositories; Project Gutenberg boilerplate removed, see `shared/corpora/SOURCES.md`). \
         The works are in the public domain in the US; the derived weights and tokenizers here carry \
         the project's licence (MIT OR Apache-2.0). *Pride and Prejudice* ({HELD_OUT_BOOK}) is held out from training: \
         it supplies the validation loss and the demo prompts (`prompts.json`). `corpus.txt.gz` is \
         an evenly spread {:.0} MB sample of the training paragraphs, from which `anyspec demo` builds \
         the tiny target's n-gram dictionary and the affinity matrix (SmolLM2's dictionary and n-gram \
         model come from `target-outputs.txt.gz`, below).\n",
        corpus.train_books.len() + 1,
        DICTIONARY_CORPUS_CHARS as f64 / 1e6
    )?;
    writeln!(md, "Trained on: {}.\n", corpus.train_books.join("; "))?;
    writeln!(
        md,
        "`drafter-smollm2` is SmolLM2's drafter with another tokenizer, the drafter of `anyspec demo`'s \
         union, TLI, RDK, SLEM and auto rows on SmolLM2. It learns from SmolLM2-135M-Instruct's own \
         answers (`{SMOLLM2_CHATS}`, below; the model's Apache-2.0 licence allows it): every tenth answer \
         is held out for the validation loss, and its tokenizer is learned from the training answers.\n"
    )?;
    writeln!(md, "## Models\n")?;
    writeln!(
        md,
        "| directory | role | tokenizer vocab | layers × width (heads / kv heads) | parameters | steps × batch × seq | tokens seen | final validation loss | train time | size on disk |"
    )?;
    writeln!(md, "|---|---|---|---|---|---|---|---|---|---|")?;
    let mut total_bytes = 0u64;
    let mut train_seconds = 0.0;
    for plan in plans() {
        let dir = out.join(plan.name);
        let Ok(config) = std::fs::read_to_string(dir.join("config.json")) else { continue };
        let config: serde_json::Value = serde_json::from_str(&config)?;
        let report: TrainReportLite = serde_json::from_str(&std::fs::read_to_string(dir.join("training.json"))?)?;
        let get = |k: &str| config[k].as_u64().unwrap_or(0) as usize;
        let spec = ModelSpec {
            vocab_size: get("vocab_size"),
            hidden_size: get("hidden_size"),
            intermediate_size: get("intermediate_size"),
            num_layers: get("num_hidden_layers"),
            num_heads: get("num_attention_heads"),
            num_kv_heads: get("num_key_value_heads"),
            max_position_embeddings: get("max_position_embeddings"),
            rope_theta: 10_000.0,
            rms_norm_eps: 1e-5,
            eos_token_id: 0,
        };
        let bytes: u64 = std::fs::read_dir(&dir)?.filter_map(|e| e.ok()?.metadata().ok()).map(|m| m.len()).sum();
        total_bytes += bytes;
        train_seconds += report.seconds;
        let valid = report.steps.iter().rev().find_map(|s| s.valid_loss).unwrap_or(f32::NAN);
        writeln!(
            md,
            "| `{}` | {} | {} | {} × {} ({} / {}) | {:.2} M | {} × {} × {} | {:.2} M | {valid:.3} nats | {:.0} s | {:.1} MB |",
            plan.name,
            plan.role,
            spec.vocab_size,
            spec.num_layers,
            spec.hidden_size,
            spec.num_heads,
            spec.num_kv_heads,
            spec.parameter_count() as f64 / 1e6,
            report.steps.len(),
            plan.batch_size,
            plan.seq_len,
            report.tokens_seen as f64 / 1e6,
            report.seconds,
            bytes as f64 / 1e6
        )?;
    }
    writeln!(
        md,
        "\nWeights are stored as f16 (`model.safetensors`, Hugging Face tensor names, tied embeddings); \
         the loaders convert to f32. Total: {:.1} MB. Each directory is a Hugging Face checkpoint \
         (`config.json` with `model_type: llama`, `model.safetensors`, `tokenizer.json`) plus \
         `training.json`, the per-step loss log.\n",
        total_bytes as f64 / 1e6
    )?;
    writeln!(md, "Tokenizers:\n")?;
    writeln!(
        md,
        "- `target`, `drafter-same`: GPT-2 style byte-level BPE, {TARGET_VOCAB} tokens, `<|endoftext|>` = 0."
    )?;
    writeln!(
        md,
        "- `drafter-sp`: SentencePiece-style BPE (Metaspace `▁` word starts, 256 `<0xXX>` byte-fallback \
         tokens, 150-character alphabet), {METASPACE_VOCAB} tokens, `</s>` = 0."
    )?;
    writeln!(md, "- `drafter-byte`: one token per UTF-8 byte (GPT-2 byte alphabet), 257 tokens, `<|endoftext|>` = 0.")?;
    writeln!(
        md,
        "- `drafter-smollm2`: GPT-2 style byte-level BPE learned from SmolLM2's training answers, {SMOLLM2_DRAFTER_VOCAB} \
         tokens, `<|endoftext|>` = 0.\n"
    )?;
    writeln!(
        md,
        "Losses are in nats per token of each model's own tokenizer, so they are not comparable across \
         tokenizers (a byte carries less than a BPE token).\n"
    )?;
    writeln!(md, "## Loss curves\n")?;
    if drew {
        writeln!(md, "![training and validation loss](loss_curves.png)\n")?;
    } else {
        writeln!(md, "Not drawn: no TrueType font (DejaVuSans) was found on this machine.\n")?;
    }
    writeln!(md, "## Rebuilding\n")?;
    writeln!(md, "```sh\ncargo run --release -p xtask -- demo-assets --data ../shared --out assets/demo\n```\n")?;
    writeln!(
        md,
        "CPU only. Training took {:.0} s in all (the per-model times above), on a 2-core machine shared \
         with other builds; tokenizer training and corpus encoding add about a minute. Model seeds are \
         fixed, but neither the `tokenizers` BPE trainer (multi-threaded counting, hash-map order) nor \
         burn's multi-threaded reductions are promised to be bit-reproducible, so expect a rebuild to \
         give equivalent rather than identical files. `--steps N` gives a quick smoke run; \
         `--only target,drafter-same` retrains some models and leaves the others on disk (this \
         README, the prompts, the dictionary corpus and the loss curves are always rewritten; the \
         last such pass took {:.0} s).",
        train_seconds, seconds
    )?;
    let path = out.join("README.md");
    let existing = match std::fs::read_to_string(&path) {
        Ok(text) => Some(text),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(anyhow::Error::new(e).context(format!("reading {}", path.display()))),
    };
    let md = with_kept_sections(&md, existing.as_deref());
    anyspec_core::artifact::write_atomically(&path, |w| std::io::Write::write_all(w, md.as_bytes()))
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rewritten_readme_keeps_the_sections_it_does_not_generate() {
        let generated = "# Demo models\n\nIntro.\n\n## Corpus and licence\n\nNew corpus.\n\n## Models\n\nNew table.\n\n\
                         ## Loss curves\n\nNew plot.\n\n## Rebuilding\n\nNew command.\n";
        let existing = "# Demo models\n\nOld intro.\n\n## Corpus and licence\n\nOld corpus.\n\n## SmolLM2's answers\n\n\
                        Measured.\n\n## SmolLM2's EAGLE drafter\n\nTrained.\n## Models\n\nOld table.\n\n## Rebuilding\n\nOld.\n";
        assert_eq!(
            with_kept_sections(generated, Some(existing)),
            "# Demo models\n\nIntro.\n\n## Corpus and licence\n\nNew corpus.\n\n## SmolLM2's answers\n\nMeasured.\n\n\
             ## SmolLM2's EAGLE drafter\n\nTrained.\n\n## Models\n\nNew table.\n\n## Loss curves\n\nNew plot.\n\n\
             ## Rebuilding\n\nNew command.\n"
        );
        assert_eq!(with_kept_sections(generated, None), generated);
        assert_eq!(with_kept_sections(generated, Some(generated)), generated);
    }

    #[test]
    fn an_unknown_model_name_is_refused_before_any_work() {
        let args = Args {
            data: PathBuf::from("/nonexistent"),
            out: PathBuf::from("/nonexistent"),
            target_steps: None,
            drafter_steps: None,
            steps: None,
            only: vec!["drafter-smollm2".into(), "drafter-smolm2".into()],
        };
        let err = run(&args).unwrap_err().to_string();
        assert!(err.contains("--only drafter-smolm2") && err.contains("drafter-byte, drafter-smollm2"), "{err}");
    }

    #[test]
    fn the_committed_readme_survives_a_rewrite_of_its_generated_sections() {
        // The committed README, cut down to what the generator writes, then merged with itself:
        // the SmolLM2 sections come back where they are.
        let committed = include_str!("../../assets/demo/README.md");
        let generated: String = committed
            .split_inclusive('\n')
            .scan(true, |keep, line| {
                if let Some(title) = line.strip_prefix("## ") {
                    *keep = GENERATED_SECTIONS.contains(&title.trim_end());
                }
                Some(if *keep { line } else { "" })
            })
            .collect();
        assert!(generated.len() < committed.len() && !generated.contains("## SmolLM2"), "the cut removed nothing");
        assert_eq!(with_kept_sections(&generated, Some(committed)), committed);
    }
}
