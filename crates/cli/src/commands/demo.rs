//! `anyspec demo`: the whole mission on a fresh machine. Loads the small models committed under
//! `assets/demo/`, builds the artifacts their drafters need into a cache (once per input), then
//! generates from a handful of held-out prompts with every method and prints one comparison
//! table.
//!
//! Adding a method is one entry in [`METHODS`]: a name and a function that builds its drafter
//! from the loaded [`Assets`].

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use anyspec_affinity::{Affinity, AffinityParams, CooccurrenceCounts, build_affinity};
use anyspec_core::{Drafter, GenerationConfig, Progress, ProgressUnit, SamplingConfig, Stats, Target as _, generate};
use anyspec_dict_builder::{BuildParams, CorpusOptions, Dictionary, NgramCounts, build_dictionary, write_dictionary};
use anyspec_drafters::slrs::{DEFAULT_SLRS_BUDGET, SlrsConfig};
use anyspec_drafters::{
    Algo, DictionaryDrafter, Hybrid, HybridOrder, ModelDrafter, PromptLookup, PromptLookupConfig, RdkForm,
};
use anyspec_models::{Checkpoint, DeviceChoice, Llama, LlamaTarget, TextTokenizer};
use anyspec_vocab_map::{MatchMode, VocabMap, Vocabulary};
use rand::SeedableRng;
use rand::rngs::StdRng;
use serde::Serialize;

use crate::bridge;
use crate::commands::theory::flag_error;
use crate::output::{print_json, print_text, table};

/// Runs the demo models with every drafting method and compares them with autoregressive
/// decoding: acceptance, tokens per step, speed, and whether the greedy output is unchanged.
///
/// Needs nothing but the committed `assets/demo/` (four small models trained by
/// `cargo xtask demo-assets`); artifacts such as the n-gram dictionary are built on first use
/// into --cache and reused while their inputs are unchanged.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The demo assets (default: ./assets/demo, else the repository's assets/demo).
    #[arg(long, value_name = "DIR")]
    assets: Option<PathBuf>,
    /// Where built artifacts are kept (default: $XDG_CACHE_HOME/anyspec/demo, else the
    /// repository's target/anyspec-demo-cache).
    #[arg(long, value_name = "DIR")]
    cache: Option<PathBuf>,
    /// Two prompts and 24 tokens each: a smoke run that finishes in seconds.
    #[arg(long)]
    quick: bool,
    /// How many of the prompts in assets/demo/prompts.json to use (default: all; 2 with --quick).
    #[arg(long)]
    prompts: Option<usize>,
    /// New tokens per prompt (default 64; 24 with --quick).
    #[arg(long)]
    max_tokens: Option<usize>,
    /// Most tokens drafted per verification step (γ).
    #[arg(long, default_value_t = 5)]
    gamma: usize,
    /// Only these methods, comma-separated: same, dict, hybrid, union, tli, rdk, slem, slrs
    /// (autoregressive decoding always runs: it is the reference). Default: all.
    #[arg(long, value_delimiter = ',', value_name = "LIST")]
    methods: Option<Vec<String>>,
    /// Sampling temperature (0 = greedy, where every method must reproduce the autoregressive
    /// output exactly).
    #[arg(long, default_value_t = 0.0)]
    temperature: f32,
    /// Seed of the sampling RNG.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Where the models run: cpu, wgpu or cuda (the last two need the cargo feature of that name).
    #[arg(long, default_value = "cpu", value_parser = parse_device)]
    device: DeviceChoice,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    json: bool,
}

fn parse_device(name: &str) -> Result<DeviceChoice, String> {
    let choice: DeviceChoice = name.parse().map_err(|e: anyspec_models::Error| e.to_string())?;
    choice.device().map_err(|e| e.to_string())?;
    Ok(choice)
}

/// A method's drafter for one prompt; `None` decodes autoregressively.
type MaybeDrafter = Option<Box<dyn Drafter>>;

/// A row of the table: how to build the method's drafter for one prompt (`None` = autoregressive).
struct Method {
    /// What `--methods` calls it.
    key: &'static str,
    name: &'static str,
    /// One line for the legend under the table.
    about: &'static str,
    build: fn(&Assets) -> anyhow::Result<MaybeDrafter>,
}

/// Every method the demo compares, autoregressive first (the reference of `speedup` and
/// `matches_ar`).
const METHODS: &[Method] = &[
    Method { key: "ar", name: "autoregressive", about: "one target forward pass per token", build: |_| Ok(None) },
    Method {
        key: "same",
        name: "model, same tokenizer",
        about: "drafter-same, a smaller model sharing the target's byte-level BPE",
        build: |a| Ok(Some(Box::new(ModelDrafter::new(a.model("drafter-same")?.clone(), a.target_vocab)))),
    },
    Method {
        key: "dict",
        name: "dictionary",
        about: "DictSpec n-gram dictionary built from assets/demo/corpus.txt.gz",
        build: |a| Ok(Some(Box::new(DictionaryDrafter::new(a.dictionary.clone())))),
    },
    Method {
        key: "hybrid",
        name: "hybrid (dictionary + prompt lookup)",
        about: "dictionary first, prompt lookup (n = 3..1) when it has nothing",
        build: |a| {
            let prompt = PromptLookup::new(PromptLookupConfig::default())?;
            let dictionary = DictionaryDrafter::new(a.dictionary.clone());
            Ok(Some(Box::new(Hybrid::new(dictionary, prompt, HybridOrder::DictionaryFirst))))
        },
    },
    Method {
        key: "union",
        name: "union → drafter-sp",
        about: "drafter-sp (SentencePiece-style, 2k) over the union of vocabularies; drafts outside the target's are rejected",
        build: |a| a.hetero("drafter-sp", Algo::Union),
    },
    Method {
        key: "tli",
        name: "TLI → drafter-sp",
        about: "drafter-sp restricted to the shared tokens, its LM head pruned to them",
        build: |a| a.hetero("drafter-sp", Algo::Tli),
    },
    Method {
        key: "rdk",
        name: "RDK → drafter-sp",
        about: "TLI, then redistributed over the target's vocabulary by the affinity matrix (exact)",
        build: |a| a.hetero("drafter-sp", Algo::Rdk),
    },
    Method {
        key: "slem",
        name: "SLEM → drafter-sp",
        about: "drafter-sp's text re-tokenized with the target tokenizer, verified by exact match",
        build: |a| a.hetero("drafter-sp", Algo::Slem),
    },
    Method {
        key: "slrs",
        name: "SLRS → drafter-byte",
        about: "drafter-byte spells target tokens byte by byte; string-level rejection sampling against ψ \
                (at temperature > 0 the lookahead is cut so ψ costs at most 500 drafter positions per token)",
        build: |a| a.hetero("drafter-byte", Algo::Slrs),
    },
];

/// Drafter positions SLRS may score per drafted token when sampling (temperature > 0). At
/// temperature 0 the expansion collapses to the walk's own path and the default budget applies.
///
/// With drafter-byte, 500 allows a lookahead of 3 bytes (488 positions); 4 bytes would be 1,791.
/// Each position costs about one drafter forward position even batched as a tree, so at 4 bytes
/// the row took 125 s of the demo's time (6 prompts × 64 tokens at T = 0.8) for 1.32 tokens per
/// step, against 1.10 at 2 bytes.
const SAMPLED_SLRS_BUDGET: u64 = 500;

/// The models the demo ships (directories under assets/demo).
const MODELS: &[&str] = &["target", "drafter-same", "drafter-sp", "drafter-byte"];

/// Everything a method may build its drafter from.
pub(crate) struct Assets {
    dir: PathBuf,
    target_tokenizer: TextTokenizer,
    target_vocab: usize,
    models: Vec<(&'static str, Checkpoint, Llama)>,
    dictionary: Arc<Dictionary>,
    target_vocabulary: Vocabulary,
    /// The drafters with another tokenizer, by directory name: vocabulary, tokenizer and the
    /// target ↔ drafter vocabulary map (byte surfaces).
    hetero: Vec<(&'static str, Vocabulary, TextTokenizer, Arc<VocabMap>)>,
    /// The RDK affinity matrix over the target's vocabulary.
    affinity: Arc<Affinity>,
    /// Most drafter positions SLRS may score per drafted token (its lookahead is lowered to fit).
    slrs_budget: u64,
    /// What was taken from or built into the cache.
    artifacts: Vec<Artifact>,
}

/// A cached artifact and whether this run built it.
#[derive(Debug, Serialize)]
struct Artifact {
    name: String,
    path: PathBuf,
    /// True when this run built it, false when it was reused from the cache.
    built: bool,
    detail: String,
}

impl Assets {
    /// A loaded model by directory name.
    fn model(&self, name: &str) -> anyhow::Result<&Llama> {
        self.models
            .iter()
            .find(|(n, _, _)| *n == name)
            .map(|(_, _, m)| m)
            .with_context(|| format!("{} has no model {name}", self.dir.display()))
    }

    /// The drafter `name` (another tokenizer than the target's) through `algo`.
    fn hetero(&self, name: &str, algo: Algo) -> anyhow::Result<MaybeDrafter> {
        let (_, vocabulary, tokenizer, map) = self
            .hetero
            .iter()
            .find(|(n, ..)| *n == name)
            .with_context(|| format!("{} has no drafter {name} with another tokenizer", self.dir.display()))?;
        let pair = bridge::Pair {
            target_vocab: &self.target_vocabulary,
            drafter_vocab: vocabulary,
            target_tokenizer: &self.target_tokenizer,
            drafter_tokenizer: tokenizer,
            map,
            target_rows: self.target_vocab,
        };
        let rdk = (algo == Algo::Rdk).then(|| RdkForm::Exact(self.affinity.matrix().clone()));
        let options = bridge::Options {
            rdk,
            slrs: SlrsConfig { lookahead: None, budget: self.slrs_budget },
            slrs_fit_lookahead: true,
            ..bridge::Options::default()
        };
        Ok(Some(bridge::build(algo, &pair, self.model(name)?.clone(), options)?))
    }
}

/// One row of `--json` output; field names are stable.
#[derive(Debug, Serialize)]
struct Row {
    method: &'static str,
    /// Accepted / drafted (null for autoregressive decoding).
    acceptance_rate: Option<f64>,
    /// Drafted tokens accepted per step (null for autoregressive decoding).
    mean_accepted_length: Option<f64>,
    tokens_per_step: f64,
    tokens_per_second: f64,
    /// tokens_per_second over autoregressive tokens_per_second.
    speedup: f64,
    /// Whether every prompt's output equals the autoregressive output (null unless temperature 0).
    matches_ar: Option<bool>,
    generated: u64,
    steps: u64,
    drafted: u64,
    accepted: u64,
    decode_ms: f64,
    draft_ms: f64,
    verify_ms: f64,
}

/// What `--json` prints.
#[derive(Debug, Serialize)]
struct Report {
    assets: PathBuf,
    cache: PathBuf,
    device: &'static str,
    gamma: usize,
    temperature: f32,
    max_tokens: usize,
    prompts: Vec<String>,
    /// The autoregressive continuation of the first prompt, to show what the models write.
    sample: String,
    artifacts: Vec<Artifact>,
    rows: Vec<Row>,
}

pub(crate) fn run(args: Args, progress: &dyn Progress) -> anyhow::Result<()> {
    let sampling = SamplingConfig::new(args.temperature, None, 1.0).map_err(flag_error)?;
    if args.gamma == 0 {
        bail!("--gamma 0: a step must be allowed to draft at least one token; pass --gamma 1 or more");
    }
    let max_tokens = args.max_tokens.unwrap_or(if args.quick { 24 } else { 64 });
    if max_tokens == 0 {
        bail!("--max-tokens 0 generates nothing; pass 1 or more");
    }
    let dir = resolve_assets(args.assets.as_deref())?;
    let cache = resolve_cache(args.cache.as_deref());
    std::fs::create_dir_all(&cache).with_context(|| format!("creating the cache directory {}", cache.display()))?;
    let all_prompts = read_prompts(&dir)?;
    let count = args.prompts.unwrap_or(if args.quick { 2 } else { all_prompts.len() });
    if count == 0 {
        bail!("--prompts 0 runs nothing; pass 1..={}", all_prompts.len());
    }
    let prompts: Vec<String> = all_prompts.into_iter().take(count).collect();

    let methods = select_methods(args.methods.as_deref())?;
    let mut assets = load_assets(&dir, &cache, args.device, progress)?;
    if args.temperature > 0.0 {
        // Sampling makes SLRS score every live branch of the drafter's byte tree (one tree pass
        // per level, but every node is a drafter position): cap it so the row finishes in
        // seconds, not minutes.
        assets.slrs_budget = SAMPLED_SLRS_BUDGET;
    }
    let encoded = prompts
        .iter()
        .map(|p| assets.target_tokenizer.encode(p).map_err(anyhow::Error::from))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let config = GenerationConfig {
        gamma: args.gamma,
        max_new_tokens: max_tokens,
        // Every method generates the same number of tokens, so speeds compare like for like.
        stop_tokens: Vec::new(),
        sampling,
        ..GenerationConfig::default()
    };
    config.validate().map_err(flag_error)?;
    let mut target = LlamaTarget::new(assets.model("target")?.clone());

    // Warm-up: the first passes pay for allocations and thread-pool start-up.
    progress.start("warming up", Some(methods.len() as u64), ProgressUnit::Items);
    for &method in &methods {
        let warm = GenerationConfig { max_new_tokens: 4, ..config.clone() };
        run_method(method, &assets, &mut target, &encoded[..1], &warm, args.seed)?;
        progress.advance(1);
    }
    progress.finish();

    let mut results: Vec<(&Method, Outcome)> = Vec::new();
    progress.start("generating", Some(methods.len() as u64), ProgressUnit::Items);
    for &method in &methods {
        results.push((method, run_method(method, &assets, &mut target, &encoded, &config, args.seed)?));
        progress.advance(1);
    }
    progress.finish();

    let reference = &results[0].1;
    let ar_speed = reference.tokens_per_second();
    let rows: Vec<Row> = results
        .iter()
        .map(|(method, outcome)| {
            let s = &outcome.stats;
            let speculative = s.drafted > 0 || method.name != METHODS[0].name;
            Row {
                method: method.name,
                acceptance_rate: speculative.then(|| s.acceptance_rate()),
                mean_accepted_length: speculative.then(|| s.mean_accepted_length()),
                tokens_per_step: s.tokens_per_step(),
                tokens_per_second: outcome.tokens_per_second(),
                speedup: outcome.tokens_per_second() / ar_speed.max(1e-9),
                matches_ar: (args.temperature == 0.0).then(|| outcome.outputs == reference.outputs),
                generated: s.generated,
                steps: s.steps,
                drafted: s.drafted,
                accepted: s.accepted,
                decode_ms: outcome.decode.as_secs_f64() * 1e3,
                draft_ms: s.draft_time.as_secs_f64() * 1e3,
                verify_ms: s.verify_time.as_secs_f64() * 1e3,
            }
        })
        .collect();
    let sample = assets.target_tokenizer.decode(&reference.outputs[0])?;
    let report = Report {
        assets: dir,
        cache,
        device: args.device.name(),
        gamma: args.gamma,
        temperature: args.temperature,
        max_tokens,
        prompts,
        sample,
        artifacts: std::mem::take(&mut assets.artifacts),
        rows,
    };
    if args.json {
        return print_json(&report);
    }
    print_text(&render(&report))
}

/// Counters and outputs of one method over every prompt.
struct Outcome {
    stats: Stats,
    decode: Duration,
    outputs: Vec<Vec<u32>>,
}

impl Outcome {
    fn tokens_per_second(&self) -> f64 {
        self.stats.generated as f64 / self.decode.as_secs_f64().max(1e-9)
    }
}

fn run_method(
    method: &Method,
    assets: &Assets,
    target: &mut LlamaTarget,
    prompts: &[Vec<u32>],
    config: &GenerationConfig,
    seed: u64,
) -> anyhow::Result<Outcome> {
    let mut outcome = Outcome { stats: Stats::default(), decode: Duration::ZERO, outputs: Vec::new() };
    for prompt in prompts {
        let mut drafter = (method.build)(assets).with_context(|| format!("building the {} drafter", method.name))?;
        target.reset();
        // Prefill outside the timed region, as `anyspec generate` does; generate reuses the cache.
        target.score(prompt, 0)?;
        let mut rng = StdRng::seed_from_u64(seed);
        let started = Instant::now();
        let generation = generate(
            target,
            drafter.as_deref_mut().map(|d| d as &mut dyn Drafter),
            prompt,
            config,
            &mut rng,
            &mut |_| std::ops::ControlFlow::Continue(()),
        )
        .with_context(|| format!("generating with {}", method.name))?;
        outcome.decode += started.elapsed();
        outcome.stats.merge(&generation.stats);
        outcome.outputs.push(generation.tokens);
    }
    Ok(outcome)
}

fn render(report: &Report) -> String {
    let header =
        ["method", "acceptance rate", "mean accepted length", "tokens/step", "tokens/s", "speedup vs AR", "matches_ar"];
    let dash = || "—".to_string();
    let rows: Vec<Vec<String>> = report
        .rows
        .iter()
        .map(|r| {
            vec![
                r.method.to_string(),
                r.acceptance_rate.map_or_else(dash, |v| format!("{v:.3}")),
                r.mean_accepted_length.map_or_else(dash, |v| format!("{v:.2}")),
                format!("{:.2}", r.tokens_per_step),
                format!("{:.1}", r.tokens_per_second),
                format!("{:.2}×", r.speedup),
                r.matches_ar.map_or_else(dash, |m| if m { "yes".into() } else { "NO".into() }),
            ]
        })
        .collect();
    let mut out = format!(
        "anyspec demo · {} prompts × {} tokens · γ = {} · temperature {} · {}\n\n",
        report.prompts.len(),
        report.max_tokens,
        report.gamma,
        report.temperature,
        report.device
    );
    out.push_str(&table(&header, &rows));
    out.push('\n');
    for artifact in &report.artifacts {
        let how = if artifact.built { "built" } else { "cached" };
        out.push_str(&format!("{} ({}, {how}): {}\n", artifact.name, artifact.detail, artifact.path.display()));
    }
    out.push('\n');
    for method in METHODS.iter().filter(|m| report.rows.iter().any(|r| r.method == m.name)) {
        out.push_str(&format!("{}: {}\n", method.name, method.about));
    }
    out.push_str(&format!(
        "\nprompt: {}\nautoregressive continuation: {}\n",
        report.prompts[0].trim(),
        report.sample.trim()
    ));
    out
}

/// The methods `--methods` names, in table order, autoregressive first; all without the flag.
fn select_methods(keys: Option<&[String]>) -> anyhow::Result<Vec<&'static Method>> {
    let Some(keys) = keys else { return Ok(METHODS.iter().collect()) };
    let known: Vec<&str> = METHODS.iter().map(|m| m.key).collect();
    if let Some(unknown) = keys.iter().find(|k| !known.contains(&k.trim())) {
        bail!("--methods: unknown method {unknown:?}; choose from {}", known[1..].join(", "));
    }
    Ok(METHODS
        .iter()
        .enumerate()
        .filter(|(i, m)| *i == 0 || keys.iter().any(|k| k.trim() == m.key))
        .map(|(_, m)| m)
        .collect())
}

/// `--assets`, else `./assets/demo`, else the repository's `assets/demo` (found from where this
/// binary was built).
fn resolve_assets(flag: Option<&Path>) -> anyhow::Result<PathBuf> {
    if let Some(dir) = flag {
        if !dir.join("target").join("config.json").is_file() {
            bail!(
                "--assets {}: no target/config.json there; point it at the demo assets directory \
                 (assets/demo in the repository, or rebuild with `cargo xtask demo-assets`)",
                dir.display()
            );
        }
        return Ok(dir.to_owned());
    }
    let candidates =
        [PathBuf::from("assets/demo"), Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join("..").join("assets/demo")];
    for dir in &candidates {
        if dir.join("target").join("config.json").is_file() {
            return Ok(dir.clone());
        }
    }
    bail!(
        "no demo assets in ./assets/demo or {}; pass --assets DIR, or rebuild them with `cargo xtask demo-assets`",
        candidates[1].display()
    )
}

fn resolve_cache(flag: Option<&Path>) -> PathBuf {
    if let Some(dir) = flag {
        return dir.to_owned();
    }
    match std::env::var_os("XDG_CACHE_HOME") {
        Some(base) if !base.is_empty() => PathBuf::from(base).join("anyspec").join("demo"),
        _ => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/anyspec-demo-cache"),
    }
}

fn read_prompts(dir: &Path) -> anyhow::Result<Vec<String>> {
    let path = dir.join("prompts.json");
    let text = std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let prompts: Vec<String> =
        serde_json::from_str(&text).with_context(|| format!("{} is not a JSON list of strings", path.display()))?;
    if prompts.is_empty() || prompts.iter().any(|p| p.trim().is_empty()) {
        bail!("{} must list at least one non-empty prompt", path.display());
    }
    Ok(prompts)
}

fn load_assets(dir: &Path, cache: &Path, device: DeviceChoice, progress: &dyn Progress) -> anyhow::Result<Assets> {
    let device = device.device()?;
    progress.start("loading the demo models", Some(MODELS.len() as u64), ProgressUnit::Items);
    let mut models = Vec::new();
    for &name in MODELS {
        let path = dir.join(name);
        let checkpoint = Checkpoint::open(&path).with_context(|| format!("opening {}", path.display()))?;
        let model = checkpoint.load_model(&device).with_context(|| format!("loading {}", path.display()))?;
        models.push((name, checkpoint, model));
        progress.advance(1);
    }
    progress.finish();
    let target = &models[0].1;
    let target_tokenizer = target.tokenizer()?;
    let target_vocab = target.config().vocab_size;
    let target_vocabulary = Vocabulary::from_file(&dir.join("target").join("tokenizer.json"))?;
    let same = Vocabulary::from_file(&dir.join("drafter-same").join("tokenizer.json"))?;
    if same.fingerprint() != target_vocabulary.fingerprint() {
        bail!(
            "{}: drafter-same does not share the target's tokenizer; rebuild the assets with `cargo xtask demo-assets`",
            dir.display()
        );
    }
    let mut artifacts = Vec::new();
    let dictionary = Arc::new(dictionary(dir, cache, &target_vocabulary, progress, &mut artifacts)?);
    let affinity = Arc::new(affinity(dir, cache, &target_vocabulary, progress, &mut artifacts)?);
    let mut hetero = Vec::new();
    for name in ["drafter-sp", "drafter-byte"] {
        let path = dir.join(name);
        let drafter = Vocabulary::from_file(&path.join("tokenizer.json"))?;
        let map = Arc::new(vocab_map(cache, &target_vocabulary, &drafter, name, &mut artifacts)?);
        let checkpoint = &models.iter().find(|(n, ..)| *n == name).context("a demo model is missing")?.1;
        let tokenizer = checkpoint.tokenizer().with_context(|| format!("reading {}", path.display()))?;
        hetero.push((name, drafter, tokenizer, map));
    }
    Ok(Assets {
        dir: dir.to_owned(),
        target_tokenizer,
        target_vocab,
        models,
        dictionary,
        target_vocabulary,
        hetero,
        affinity,
        slrs_budget: DEFAULT_SLRS_BUDGET,
        artifacts,
    })
}

/// The RDK affinity matrix of the target's tokenizer, counted over `corpus.txt.gz` on first use
/// and cached under a key of the corpus bytes, the tokenizer fingerprint and the parameters.
fn affinity(
    dir: &Path,
    cache: &Path,
    vocabulary: &Vocabulary,
    progress: &dyn Progress,
    artifacts: &mut Vec<Artifact>,
) -> anyhow::Result<Affinity> {
    let corpus = dir.join("corpus.txt.gz");
    let bytes = std::fs::read(&corpus).with_context(|| format!("reading {}", corpus.display()))?;
    let params = AffinityParams::default();
    let key = fnv1a(&[&bytes, vocabulary.fingerprint().to_string().as_bytes(), format!("{params:?}").as_bytes()]);
    let path = cache.join(format!("affinity-{key:016x}.safetensors"));
    let (affinity, built) = match Affinity::load(&path, &vocabulary.fingerprint()) {
        Ok(affinity) => (affinity, false),
        Err(err) => {
            if path.exists() {
                // A damaged cache entry is rebuilt rather than reported: the cache is ours.
                tracing::warn!("rebuilding {}: {err}", path.display());
            }
            let counts = CooccurrenceCounts::count_files(
                std::slice::from_ref(&corpus),
                &CorpusOptions::default(),
                vocabulary,
                params.window,
                params.max_pairs,
                params.threads,
                progress,
            )
            .with_context(|| format!("counting co-occurrences in {}", corpus.display()))?;
            let affinity = build_affinity(&counts, vocabulary.fingerprint(), &params, &corpus.display().to_string())?;
            affinity.save(&path).with_context(|| format!("writing {}", path.display()))?;
            (affinity, true)
        }
    };
    artifacts.push(Artifact {
        name: "affinity matrix (target tokenizer)".into(),
        path,
        built,
        detail: format!("{} rows with neighbours, τ = {}", affinity.rows_with_entries(), affinity.tau()),
    });
    Ok(affinity)
}

/// The byte-surface vocabulary map target → `name`, cached under the two fingerprints.
fn vocab_map(
    cache: &Path,
    target: &Vocabulary,
    drafter: &Vocabulary,
    name: &str,
    artifacts: &mut Vec<Artifact>,
) -> anyhow::Result<VocabMap> {
    let path = cache.join(format!("vocab-map-{}-{}.map", target.fingerprint().short(), drafter.fingerprint().short()));
    let (map, built) = match VocabMap::load(&path, target, drafter) {
        Ok(map) => (map, false),
        Err(_) => {
            let map = VocabMap::build(target, drafter, MatchMode::Bytes);
            map.save(&path).with_context(|| format!("writing {}", path.display()))?;
            (map, true)
        }
    };
    artifacts.push(Artifact {
        name: format!("vocabulary map target → {name}"),
        path,
        built,
        detail: format!("{} tokens in common", map.intersection()),
    });
    Ok(map)
}

/// The DictSpec dictionary for the target's tokenizer, built from `corpus.txt.gz` on first use.
/// Its file name hashes the corpus bytes, the tokenizer fingerprint and the build parameters, so
/// a changed input builds a new one and an unchanged one is reused.
fn dictionary(
    dir: &Path,
    cache: &Path,
    vocabulary: &Vocabulary,
    progress: &dyn Progress,
    artifacts: &mut Vec<Artifact>,
) -> anyhow::Result<Dictionary> {
    let corpus = dir.join("corpus.txt.gz");
    let bytes = std::fs::read(&corpus).with_context(|| format!("reading {}", corpus.display()))?;
    let params = BuildParams::default();
    let key = fnv1a(&[&bytes, vocabulary.fingerprint().to_string().as_bytes(), format!("{params:?}").as_bytes()]);
    let path = cache.join(format!("dictionary-{key:016x}.dict"));
    if path.is_file() {
        match Dictionary::open(&path, &vocabulary.fingerprint()) {
            Ok(dictionary) => {
                artifacts.push(dictionary_artifact(&path, &dictionary, false));
                return Ok(dictionary);
            }
            // A damaged cache entry is rebuilt rather than reported: the cache is ours.
            Err(err) => tracing::warn!("rebuilding {}: {err}", path.display()),
        }
    }
    let counts = NgramCounts::count_files(
        std::slice::from_ref(&corpus),
        &CorpusOptions::default(),
        params.max_order(),
        0,
        progress,
    )
    .with_context(|| format!("counting n-grams in {}", corpus.display()))?;
    let built = build_dictionary(&counts, vocabulary, &params, 0, progress)?;
    write_dictionary(&path, &built)?;
    let dictionary = Dictionary::open(&path, &vocabulary.fingerprint())?;
    artifacts.push(dictionary_artifact(&path, &dictionary, true));
    Ok(dictionary)
}

fn dictionary_artifact(path: &Path, dictionary: &Dictionary, built: bool) -> Artifact {
    Artifact {
        name: "n-gram dictionary (target tokenizer)".into(),
        path: path.to_owned(),
        built,
        detail: format!("{} entries", dictionary.len()),
    }
}

/// 64-bit FNV-1a over the concatenated parts: a cache key, not a security boundary.
fn fnv1a(parts: &[&[u8]]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts {
        for &b in *part {
            hash ^= u64::from(b);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
        hash ^= 0xff;
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}
