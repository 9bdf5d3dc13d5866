//! `cargo xtask drafting-ceiling`: how much faster the n-gram drafters of `anyspec demo` could
//! be with the drafts they make, written to reports/drafting-ceiling.md (and .json).
//!
//! At temperature 0 every method's output is the target's greedy output, so the tokens that
//! `anyspec demo --save-tokens FILE` writes say exactly how many tokens of any deterministic
//! draft verification would accept at any position: the longest common prefix of the draft and
//! what the target wrote next. This command replays prompt lookup, the dictionary and the
//! hybrid (the library's own drafters, on the same dictionary file; with `--ngram-corpus`
//! also the token n-gram model and its hybrid with prompt lookup) at every position and walks
//! each prompt's output step by step under several rules for how much of a draft to verify:
//!
//! - **fixed γ**: verify the first γ drafted tokens;
//! - **best γ per class, in sample**: the one γ per confidence class
//!   ([`anyspec_core::Draft::cut_class`]) that maximises tokens per unit of cost, chosen with
//!   knowledge of this very run: a ceiling for any rule that keeps one γ per class (the tuner
//!   also follows each class's α through the text, and can beat it);
//! - **the demo's γ tuner, replayed**: [`anyspec_core::GammaTuner`] asked and fed step by step
//!   exactly as the engine does (one tuner across the prompts, calibrated with the same costs),
//!   with the modelled costs as its timings: what the tuner's rule gets without timing noise;
//! - **best γ per class and the target's confidence, in sample**: the same, with one γ per
//!   confidence class *and* bucket of the target's own top-1 probability for the token before
//!   the draft (the last token the previous step emitted, whose distribution the engine has in
//!   hand when it cuts the next draft): whether the target's certainty says more about the next
//!   draft than the drafter's match does;
//! - **… fitted on the other half of the prompts**: both per-class rules with their γ chosen on
//!   the even-numbered prompts and walked on the odd ones, and the other way round (two-fold
//!   cross-validation): an in-sample γ table of many cells also fits this run's noise, and only
//!   what survives on prompts it has not seen is a signal a runtime rule could use;
//! - **oracle**: verify exactly the tokens that will be accepted: a ceiling for any rule at all
//!   with these drafts;
//! - **oracle, the better candidate** (hybrids only): at every position the better of prompt
//!   lookup's and the static source's drafts, verified exactly as far as it is accepted: the most
//!   that choosing between the two (or verifying both as a tree) could add.
//!
//! A step's cost is the demo's measured cost of scoring that many positions in one pass
//! (`verify_cost`, ÷ one position); drafting costs nothing (its measured cost is below 1% of a
//! step for these drafters). "Modelled speedup" is tokens per unit of cost: autoregressive
//! decoding is 1.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use std::time::Duration;

use anyhow::{Context as _, bail};
use anyspec_core::GammaTuner;
use anyspec_core::adaptive::StepObservation;
use anyspec_dict_builder::Dictionary;
use anyspec_drafters::{
    DictionaryDrafter, Hybrid, HybridOrder, PromptLookup, PromptLookupConfig, StaticSource, TokenNgramConfig,
    TokenNgramDrafter, TokenNgramModel,
};
use anyspec_models::{Checkpoint, DeviceChoice, Engine, LoadOptions};
use serde::{Deserialize, Serialize};

/// The `format` of a token file this command reads (`anyspec demo --save-tokens`).
const FORMAT: &str = "anyspec-demo-tokens/1";
/// The longest draft replayed at a position.
const MAX_DRAFT: usize = 16;
/// The fixed γ rows of the report.
const FIXED: [usize; 5] = [1, 2, 3, 4, 6];
/// Upper edges of the buckets of the target's top-1 probability (the last bucket is open).
const CONFIDENCE_EDGES: [f32; 4] = [0.3, 0.6, 0.9, 0.99];

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The token file of a greedy `anyspec demo --save-tokens FILE` run.
    #[arg(long)]
    tokens: PathBuf,
    /// The dictionary to replay (default: the one the demo run used, named in the token file).
    #[arg(long)]
    dictionary: Option<PathBuf>,
    /// Where the Markdown report goes (the JSON lands beside it).
    #[arg(long, default_value = "reports/drafting-ceiling.md")]
    out: PathBuf,
    /// Also replay the token n-gram model counted from this text (gzip accepted; the demo's is
    /// assets/demo/target-outputs.txt.gz), alone and in a hybrid with prompt lookup.
    #[arg(long)]
    ngram_corpus: Option<PathBuf>,
    /// The run's target, which scores the saved outputs for the confidence rules and whose
    /// tokenizer counts --ngram-corpus (default: SmolLM2-135M-Instruct Q4_1 from the model
    /// cache, the demo's target).
    #[arg(long)]
    model: Option<PathBuf>,
    /// The n-gram model's longest context suffix, in tokens.
    #[arg(long, default_value_t = TokenNgramConfig::default().max_order)]
    ngram_order: usize,
    /// The n-gram model's least count for a suffix to propose.
    #[arg(long, default_value_t = TokenNgramConfig::default().min_count)]
    ngram_min_count: u32,
    /// The n-gram model's least probability for a drafted token.
    #[arg(long, default_value_t = TokenNgramConfig::default().min_prob)]
    ngram_min_prob: f32,
}

#[derive(Deserialize)]
struct Saved {
    format: String,
    target: String,
    temperature: f32,
    verify_cost: Vec<f64>,
    dictionary: Option<PathBuf>,
    prompts: Vec<SavedPrompt>,
    methods: Vec<SavedMethod>,
}

#[derive(Deserialize)]
struct SavedPrompt {
    ids: Vec<u32>,
}

#[derive(Deserialize)]
struct SavedMethod {
    key: String,
    speedup: f64,
    tokens_per_step: f64,
    outputs: Vec<Vec<u32>>,
}

/// What a drafter proposes at one position of one prompt's output.
struct Position {
    /// Confidence class of the draft (`None`: no draft, or a draft without one).
    class: Option<u16>,
    /// Draft length (≤ MAX_DRAFT).
    len: usize,
    /// Tokens of the whole draft verification would accept.
    accepted: usize,
    /// Hybrids only: tokens accepted of the better of prompt lookup's and the static source's
    /// drafts.
    better: Option<usize>,
    /// Bucket of the target's top-1 probability for the token before the position
    /// ([`CONFIDENCE_EDGES`]); `None` at an output's first position.
    confidence: Option<u8>,
}

/// One drafter's result under every rule.
#[derive(Serialize)]
struct DrafterCeiling {
    key: &'static str,
    drafter: &'static str,
    measured_speedup: Option<f64>,
    measured_tokens_per_step: Option<f64>,
    /// Shares of the positions where the drafter proposes nothing, and where its first token is
    /// wrong.
    no_draft: f64,
    first_wrong: f64,
    rules: Vec<RuleResult>,
}

#[derive(Serialize)]
struct RuleResult {
    rule: String,
    tokens_per_step: f64,
    modelled_speedup: f64,
}

#[allow(clippy::print_stderr)]
pub(crate) fn run(args: &Args) -> anyhow::Result<()> {
    let text = std::fs::read(&args.tokens).with_context(|| format!("reading --tokens {}", args.tokens.display()))?;
    let saved: Saved = serde_json::from_slice(&text).with_context(|| {
        format!("--tokens {}: not a token file of `anyspec demo --save-tokens`", args.tokens.display())
    })?;
    if saved.format != FORMAT {
        bail!("--tokens {}: format {:?}, this command reads {FORMAT:?}", args.tokens.display(), saved.format);
    }
    if saved.temperature != 0.0 {
        bail!(
            "--tokens {}: the run sampled at temperature {}; the replay needs greedy output (rerun the demo without \
             --temperature)",
            args.tokens.display(),
            saved.temperature
        );
    }
    if saved.verify_cost.len() < 2 {
        bail!("--tokens {}: the file has fewer than two verification costs (k = 1, 2, …)", args.tokens.display());
    }
    let Some(reference) = saved.methods.iter().find(|m| m.key == "ar") else {
        bail!("--tokens {}: no autoregressive outputs (key \"ar\") in the file", args.tokens.display());
    };
    if reference.outputs.len() != saved.prompts.len() {
        bail!(
            "--tokens {}: {} prompts but {} outputs",
            args.tokens.display(),
            saved.prompts.len(),
            reference.outputs.len()
        );
    }
    for method in &saved.methods {
        if method.outputs != reference.outputs {
            bail!(
                "--tokens {}: the {} row's outputs differ from autoregressive decoding's; the replay needs a run where \
                 every row matches it",
                args.tokens.display(),
                method.key
            );
        }
    }
    let dictionary_path = match (&args.dictionary, &saved.dictionary) {
        (Some(path), _) | (None, Some(path)) => path.clone(),
        (None, None) => bail!("--tokens {} names no dictionary; pass --dictionary FILE", args.tokens.display()),
    };
    let dictionary = Arc::new(
        Dictionary::open_unverified(&dictionary_path)
            .with_context(|| format!("opening the dictionary {}", dictionary_path.display()))?,
    );
    let cost = Cost::new(&saved.verify_cost);
    let sequences: Vec<(usize, Vec<u32>)> = saved
        .prompts
        .iter()
        .zip(&reference.outputs)
        .map(|(p, out)| (p.ids.len(), p.ids.iter().chain(out).copied().collect()))
        .collect();

    let model_path = crate::fetch_models::smollm2_or(args.model.as_deref())?;
    let checkpoint =
        Checkpoint::open(&model_path).with_context(|| format!("opening the target {}", model_path.display()))?;
    eprintln!("scoring the outputs with {}…", model_path.display());
    let confidence = target_confidence(&checkpoint, &sequences)?;
    let ngram = match &args.ngram_corpus {
        None => None,
        Some(path) => {
            eprintln!("counting the token n-gram model of {}…", path.display());
            let tokenizer = checkpoint.tokenizer()?;
            let config = TokenNgramConfig {
                max_order: args.ngram_order,
                min_count: args.ngram_min_count,
                min_prob: args.ngram_min_prob,
            };
            let model = TokenNgramModel::from_corpus(std::slice::from_ref(path), &tokenizer, config)
                .with_context(|| format!("--ngram-corpus {}", path.display()))?;
            Some(Arc::new(model))
        }
    };
    let mut drafters = vec![("prompt", "prompt lookup"), ("dict", "dictionary"), ("hybrid", "hybrid")];
    if ngram.is_some() {
        drafters.extend([("ngram", "token n-gram model"), ("hybrid-ngram", "hybrid: prompt lookup + n-gram model")]);
    }
    let mut results = Vec::new();
    for (key, name) in drafters {
        eprintln!("replaying {name}…");
        let positions = replay(key, &sequences, &dictionary, ngram.as_ref(), &confidence.buckets)?;
        // The run's measured figures belong to its own dictionary: shown only when replaying it.
        let same_dictionary = saved.dictionary.as_ref() == Some(&dictionary_path) || key == "prompt";
        let measured = saved.methods.iter().find(|m| m.key == key).filter(|_| same_dictionary);
        results.push(ceiling(key, name, &positions, &cost, measured));
    }
    let md = render(&saved, &args.tokens, &dictionary_path, args.ngram_corpus.as_deref(), &cost, &confidence, &results);
    write(&args.out, &md, &results)?;
    eprintln!("wrote {}", args.out.display());
    Ok(())
}

/// The target's certainty at every generated position: for each prompt, the bucket
/// ([`CONFIDENCE_EDGES`]) of the top-1 probability of the distribution each output token was
/// chosen from, scored in one pass over the prompt and its output.
struct Confidence {
    buckets: Vec<Vec<u8>>,
    /// Positions whose arg-max in that pass is not the saved token (a pass over many positions
    /// may round differently from decoding one at a time; a wrong model disagrees everywhere).
    disagreements: usize,
    positions: usize,
}

fn target_confidence(checkpoint: &Checkpoint, sequences: &[(usize, Vec<u32>)]) -> anyhow::Result<Confidence> {
    let device = DeviceChoice::Cpu.device()?;
    let model = checkpoint.load_model_with(&device, &LoadOptions::engine(Engine::Native))?;
    let (mut buckets, mut disagreements, mut positions) = (Vec::new(), 0, 0);
    for (prompt_len, seq) in sequences {
        let rows = seq.len() - prompt_len;
        if rows == 0 {
            buckets.push(Vec::new());
            continue;
        }
        // Row j of the last `rows` predicts seq[prompt_len + j].
        let mut cache = model.new_cache();
        let logits = model.forward_on_host(&seq[..seq.len() - 1], &mut cache, rows, None)?;
        let mut of_prompt = Vec::with_capacity(rows);
        for (row, &token) in logits.iter().zip(&seq[*prompt_len..]) {
            let (best, max) =
                row.iter().enumerate().fold((0, f32::NEG_INFINITY), |b, (i, &x)| if x > b.1 { (i, x) } else { b });
            let total: f64 = row.iter().map(|&x| f64::from(x - max).exp()).sum();
            let top = (1.0 / total) as f32;
            of_prompt.push(CONFIDENCE_EDGES.iter().take_while(|&&edge| top >= edge).count() as u8);
            disagreements += usize::from(best as u32 != token);
        }
        positions += rows;
        buckets.push(of_prompt);
    }
    if disagreements * 20 > positions {
        bail!(
            "the target's arg-max differs from the saved output at {disagreements} of {positions} positions: the \
             token file comes from another model; pass that run's model with --model"
        );
    }
    Ok(Confidence { buckets, disagreements, positions })
}

/// Cost of scoring `rows` positions in one pass ÷ one position: `1 + slope · (rows − 1)`, the
/// slope the median of the measured `(v(k) − 1)/(k − 1)`. The demo times each k once, on a
/// machine shared with other work, and one slow or fast pass would otherwise decide the
/// rules (a measured v(2) below 1 makes "verify one more token" look free); the median of the
/// slopes ignores such a pass, and a line fits the measured curves of this runtime well
/// (`reports/cpu-runtime.md`).
struct Cost {
    slope: f64,
}

impl Cost {
    fn new(measured: &[f64]) -> Self {
        let mut slopes: Vec<f64> =
            measured.iter().enumerate().skip(1).map(|(i, &v)| (v - 1.0) / i as f64).filter(|s| s.is_finite()).collect();
        slopes.sort_by(f64::total_cmp);
        let slope = slopes.get(slopes.len() / 2).copied().unwrap_or(0.1).max(0.0);
        Cost { slope }
    }

    fn of(&self, rows: usize) -> f64 {
        1.0 + self.slope * (rows.max(1) - 1) as f64
    }
}

/// Every position of every prompt's output: what the drafter proposes there and how much of
/// it the target's output accepts.
fn replay(
    key: &str,
    sequences: &[(usize, Vec<u32>)],
    dictionary: &Arc<Dictionary>,
    ngram: Option<&Arc<TokenNgramModel>>,
    confidence: &[Vec<u8>],
) -> anyhow::Result<Vec<Vec<Position>>> {
    let mut all = Vec::new();
    for ((prompt_len, seq), buckets) in sequences.iter().zip(confidence) {
        let mut prompt = PromptLookup::new(PromptLookupConfig::default())?;
        let new_hybrid = || PromptLookup::new(PromptLookupConfig::default()).map(|p| (p, HybridOrder::PromptFirst));
        let (p, order) = new_hybrid()?;
        let mut hybrid = Hybrid::new(DictionaryDrafter::new(dictionary.clone()), p, order);
        let mut dict = DictionaryDrafter::new(dictionary.clone());
        let mut ngram_drafter = ngram.map(|m| TokenNgramDrafter::new(m.clone()));
        let (p, order) = new_hybrid()?;
        let mut hybrid_ngram = ngram.map(|m| Hybrid::new(TokenNgramDrafter::new(m.clone()), p, order));
        let mut positions = Vec::new();
        for i in *prompt_len..seq.len() {
            let context = &seq[..i];
            let truth = &seq[i..];
            let draft = match (key, &mut ngram_drafter, &mut hybrid_ngram) {
                ("prompt", ..) => prompt.draft(context, MAX_DRAFT),
                ("dict", ..) => dict.draft(context, MAX_DRAFT),
                ("ngram", Some(n), _) => n.draft(context, MAX_DRAFT),
                ("hybrid-ngram", _, Some(h)) => h.draft(context, MAX_DRAFT),
                _ => hybrid.draft(context, MAX_DRAFT),
            };
            let better = match (key, &mut ngram_drafter) {
                ("hybrid", _) => Some(better_of(&mut prompt, &mut dict, context, truth)),
                ("hybrid-ngram", Some(n)) => Some(better_of(&mut prompt, n, context, truth)),
                _ => None,
            };
            positions.push(Position {
                class: draft.cut_class(),
                len: draft.tokens.len(),
                accepted: common_prefix(&draft.tokens, truth),
                better,
                // The distribution of the token before the draft: the previous step's last.
                confidence: (i > *prompt_len).then(|| buckets[i - prompt_len - 1]),
            });
        }
        all.push(positions);
    }
    Ok(all)
}

/// Tokens accepted of the better of prompt lookup's and `source`'s drafts at one position.
fn better_of(prompt: &mut PromptLookup, source: &mut dyn StaticSource, context: &[u32], truth: &[u32]) -> usize {
    let from_prompt = prompt.draft(context, MAX_DRAFT);
    let from_source = source.draft(context, MAX_DRAFT);
    common_prefix(&from_prompt.tokens, truth).max(common_prefix(&from_source.tokens, truth))
}

fn common_prefix(a: &[u32], b: &[u32]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// Walks every output step by step: at position `i`, `rule` returns (positions verified besides
/// the next token, tokens accepted); the step emits the accepted tokens plus one.
fn walk(positions: &[Vec<Position>], cost: &Cost, rule: &dyn Fn(&Position) -> (usize, usize)) -> (f64, f64) {
    walk_with(positions, cost, &mut |p, _| rule(p))
}

/// [`walk`] with a rule that may keep state across steps and is told how many tokens of the
/// output remain at the position (the step's own token included).
fn walk_with(
    positions: &[Vec<Position>],
    cost: &Cost,
    rule: &mut dyn FnMut(&Position, usize) -> (usize, usize),
) -> (f64, f64) {
    walk_totals(positions, cost, rule).rates()
}

/// What a walk emitted and spent.
#[derive(Clone, Copy, Debug, Default)]
struct Totals {
    tokens: usize,
    steps: usize,
    spent: f64,
}

impl Totals {
    /// Tokens per step, and tokens per unit of cost (the modelled speedup).
    fn rates(self) -> (f64, f64) {
        (self.tokens as f64 / self.steps.max(1) as f64, self.tokens as f64 / self.spent.max(1e-12))
    }

    fn plus(self, other: Totals) -> Totals {
        Totals { tokens: self.tokens + other.tokens, steps: self.steps + other.steps, spent: self.spent + other.spent }
    }
}

/// [`walk_with`] over any set of prompts, returning the totals.
fn walk_totals<'a>(
    prompts: impl IntoIterator<Item = &'a Vec<Position>>,
    cost: &Cost,
    rule: &mut dyn FnMut(&Position, usize) -> (usize, usize),
) -> Totals {
    let mut totals = Totals::default();
    for prompt in prompts {
        let mut i = 0;
        while i < prompt.len() {
            let (verified, accepted) = rule(&prompt[i], prompt.len() - i);
            // The last token of an output is emitted by the step itself, never drafted.
            let accepted = accepted.min(prompt.len() - i - 1);
            totals.tokens += accepted + 1;
            totals.steps += 1;
            totals.spent += cost.of(verified + 1);
            i += accepted + 1;
        }
    }
    totals
}

/// Seconds per modelled unit of cost (one single-position pass), for the tuner's timings.
const UNIT_SECONDS: f64 = 1e-3;
/// The demo's most tokens drafted per step (`--gamma` default).
const DEMO_GAMMA: usize = 6;

/// [`walk`] with the engine's use of [`GammaTuner`] (`anyspec_core::generate_tuned`): ask the
/// drafter for `next_gamma`, cut the draft to `verify_len_for(γ, class)`, observe the step. One
/// tuner serves every prompt, as in the demo, calibrated first with the modelled pass costs as
/// the demo calibrates it with measured ones.
fn walk_tuner(positions: &[Vec<Position>], cost: &Cost) -> (f64, f64) {
    let mut tuner = GammaTuner::new(DEMO_GAMMA);
    for k in 1..=DEMO_GAMMA + 1 {
        tuner.observe_verify_time(k, Duration::from_secs_f64(cost.of(k) * UNIT_SECONDS));
    }
    walk_with(positions, cost, &mut |p, remaining| {
        let gamma = tuner.next_gamma().min(DEMO_GAMMA).min(remaining - 1);
        let drafted = p.len.min(gamma);
        let (verified, class) =
            if drafted == 0 { (0, None) } else { (tuner.verify_len_for(gamma, p.class).min(drafted), p.class) };
        let accepted = p.accepted.min(verified);
        tuner.observe(&StepObservation {
            drafted: verified,
            accepted,
            bonus: accepted == verified,
            // Drafting is modelled free; a tiny time keeps the tuner's "free drafter" rule.
            draft_time: Duration::from_secs_f64(1e-4 * UNIT_SECONDS * drafted as f64),
            verify_time: Duration::from_secs_f64(cost.of(verified + 1) * UNIT_SECONDS),
            class,
            source: None,
        });
        (verified, accepted)
    })
}

/// A step that verifies at most `gamma` tokens of the draft at `p`: (positions verified,
/// tokens accepted), as [`walk`]'s rules return them.
fn up_to(gamma: usize, p: &Position) -> (usize, usize) {
    let g = gamma.min(p.len);
    (g, p.accepted.min(g))
}

/// The modelled rates of the γ per value of `key` that [`best_gamma_by`] fits on all the
/// prompts, walked on the same prompts (in sample).
fn in_sample<K: std::hash::Hash + Eq + Copy>(
    positions: &[Vec<Position>],
    cost: &Cost,
    key: &dyn Fn(&Position) -> K,
) -> (f64, f64) {
    let best = best_gamma_by(&positions.iter().collect::<Vec<_>>(), cost, key);
    walk(positions, cost, &|p| up_to(best.get(&key(p)).copied().unwrap_or(0), p))
}

/// The γ per value of `key` that maximises tokens per unit of cost over `prompts`, found by
/// iterating on the rate λ: each key takes the γ with the largest Σ (accepted + 1) − λ · cost,
/// and λ is then the rate that walk achieves.
fn best_gamma_by<K: std::hash::Hash + Eq + Copy>(
    prompts: &[&Vec<Position>],
    cost: &Cost,
    key: &dyn Fn(&Position) -> K,
) -> HashMap<K, usize> {
    let mut by_key: HashMap<K, Vec<(usize, usize)>> = HashMap::new();
    for p in prompts.iter().copied().flatten() {
        by_key.entry(key(p)).or_default().push((p.len, p.accepted));
    }
    let mut lambda = 1.0;
    let mut best = HashMap::new();
    for _ in 0..8 {
        best = by_key
            .iter()
            .map(|(&k, drafts)| {
                let score = |g: usize| {
                    drafts
                        .iter()
                        .map(|&(len, acc)| (acc.min(g) + 1) as f64 - lambda * cost.of(g.min(len) + 1))
                        .sum::<f64>()
                };
                // Counting down, so that among equally good γ the smallest wins (`max_by` keeps
                // the last maximum).
                let g = (0..=MAX_DRAFT).rev().max_by(|&a, &b| score(a).total_cmp(&score(b))).unwrap_or(0);
                (k, g)
            })
            .collect();
        let totals =
            walk_totals(prompts.iter().copied(), cost, &mut |p, _| up_to(best.get(&key(p)).copied().unwrap_or(0), p));
        lambda = totals.rates().1;
    }
    best
}

/// Two-fold cross-validation of the per-class rules: γ tables fitted on the even-numbered
/// prompts walk the odd ones and the other way round. With `by_confidence` the table is per
/// class and bucket of the target's confidence, falling back to the class's own γ (fitted on
/// the same half) for a pair that half never saw; a class it never saw verifies nothing.
fn cross_validated(positions: &[Vec<Position>], cost: &Cost, by_confidence: bool) -> (f64, f64) {
    let mut totals = Totals::default();
    for fold in 0..2 {
        let train: Vec<&Vec<Position>> =
            positions.iter().enumerate().filter(|(i, _)| i % 2 == fold).map(|(_, p)| p).collect();
        let test = positions.iter().enumerate().filter(|(i, _)| i % 2 != fold).map(|(_, p)| p);
        let by_class = best_gamma_by(&train, cost, &|p| p.class);
        let by_pair =
            if by_confidence { best_gamma_by(&train, cost, &|p| (p.class, p.confidence)) } else { HashMap::new() };
        totals = totals.plus(walk_totals(test, cost, &mut |p, _| {
            up_to(by_pair.get(&(p.class, p.confidence)).or(by_class.get(&p.class)).copied().unwrap_or(0), p)
        }));
    }
    totals.rates()
}

fn ceiling(
    key: &'static str,
    drafter: &'static str,
    positions: &[Vec<Position>],
    cost: &Cost,
    measured: Option<&SavedMethod>,
) -> DrafterCeiling {
    let all: Vec<&Position> = positions.iter().flatten().collect();
    let n = all.len().max(1) as f64;
    let no_draft = all.iter().filter(|p| p.len == 0).count() as f64 / n;
    let first_wrong = all.iter().filter(|p| p.len > 0 && p.accepted == 0).count() as f64 / n;
    let mut rules = Vec::new();
    let mut push = |rule: String, (tokens_per_step, modelled_speedup): (f64, f64)| {
        rules.push(RuleResult { rule, tokens_per_step, modelled_speedup });
    };
    for g in FIXED {
        push(format!("fixed γ = {g}"), walk(positions, cost, &|p| up_to(g, p)));
    }
    push("the demo's γ tuner, replayed".into(), walk_tuner(positions, cost));
    push("best γ per confidence class, in sample".into(), in_sample(positions, cost, &|p| p.class));
    push(
        "best γ per class and the target's confidence, in sample".into(),
        in_sample(positions, cost, &|p| (p.class, p.confidence)),
    );
    push("best γ per class, fitted on the other half of the prompts".into(), cross_validated(positions, cost, false));
    push(
        "best γ per class and the target's confidence, fitted on the other half".into(),
        cross_validated(positions, cost, true),
    );
    push("oracle: verify exactly what is accepted".into(), walk(positions, cost, &|p| (p.accepted, p.accepted)));
    if positions.iter().flatten().any(|p| p.better.is_some()) {
        push(
            "oracle, the better of prompt lookup's and the static source's drafts".into(),
            walk(positions, cost, &|p| {
                let acc = p.better.unwrap_or(p.accepted);
                (acc, acc)
            }),
        );
    }
    DrafterCeiling {
        key,
        drafter,
        measured_speedup: measured.map(|m| m.speedup),
        measured_tokens_per_step: measured.map(|m| m.tokens_per_step),
        no_draft,
        first_wrong,
        rules,
    }
}

fn render(
    saved: &Saved,
    tokens: &Path,
    dictionary: &Path,
    ngram_corpus: Option<&Path>,
    cost: &Cost,
    confidence: &Confidence,
    results: &[DrafterCeiling],
) -> String {
    let mut md = String::new();
    let positions: usize = saved.methods.first().map_or(0, |m| m.outputs.iter().map(Vec::len).sum());
    let _ = writeln!(md, "# How fast can the n-gram drafters get? A replay of `anyspec demo`'s greedy run\n");
    let _ = writeln!(
        md,
        "Generated by `cargo xtask drafting-ceiling --tokens {}{}` from a run of `anyspec demo --save-tokens` on {} \
         ({} prompts, {positions} generated tokens; dictionary {}). At temperature 0 the target's output says \
         exactly what any deterministic draft would have had accepted, so each drafter is replayed at every \
         position and each output walked step by step under several rules for how much of a draft to verify. A \
         step's cost is that of scoring k positions in one pass ÷ one: v(k) = 1 + {:.3} (k − 1), the median slope \
         of the run's measured v(1..{}) = {} (robust to one noisy pass); drafting is free. *Modelled speedup* = \
         tokens ÷ cost (autoregressive decoding: 1); *measured* is the demo's own speedup in that run (its γ \
         tuner, real timings).\n",
        tokens.display(),
        ngram_corpus.map_or(String::new(), |p| format!(" --ngram-corpus {}", p.display())),
        saved.target,
        saved.prompts.len(),
        dictionary.display(),
        cost.slope,
        saved.verify_cost.len(),
        saved.verify_cost.iter().map(|v| format!("{v:.2}")).collect::<Vec<_>>().join(" "),
    );
    let agreement = if confidence.disagreements == 0 {
        format!("its arg-max is the saved token at all {} positions", confidence.positions)
    } else {
        format!(
            "its arg-max differs from the saved token at {} of {} positions: a pass over many positions may round \
             differently from decoding one at a time",
            confidence.disagreements, confidence.positions
        )
    };
    let _ = writeln!(
        md,
        "*The target's confidence* at a position is its top-1 probability for the token before it (the last \
         token the previous step emitted, whose distribution the engine holds when it cuts the next draft), in \
         five buckets with edges {}, from one pass of the target over each prompt and its output ({agreement}).\n",
        CONFIDENCE_EDGES.iter().map(|e| e.to_string()).collect::<Vec<_>>().join(", "),
    );
    for r in results {
        let _ = writeln!(md, "## {}\n", r.drafter);
        let _ = writeln!(
            md,
            "No draft at {:.1}% of positions; first drafted token wrong at {:.1}%. Measured in the run: {} tokens/step, \
             {} speedup.\n",
            100.0 * r.no_draft,
            100.0 * r.first_wrong,
            r.measured_tokens_per_step.map_or("—".into(), |v| format!("{v:.2}")),
            r.measured_speedup.map_or("—".into(), |v| format!("{v:.2}×")),
        );
        let _ = writeln!(md, "| rule | tokens/step | modelled speedup |\n|---|---|---|");
        for rule in &r.rules {
            let _ = writeln!(md, "| {} | {:.2} | {:.2}× |", rule.rule, rule.tokens_per_step, rule.modelled_speedup);
        }
        let _ = writeln!(md);
    }
    let _ = writeln!(
        md,
        "## Reading it\n\nThe gap between the replayed tuner and the *oracle* is what a better acceptance predictor \
         could still win with these drafts; *best γ per class* shows how much of the tuner's result a static \
         per-class rule would get, and *the target's confidence* whether the target's own certainty adds to the \
         drafter's match. A table of γ per class (and bucket) fitted in sample also fits this run's noise; the \
         rows *fitted on the other half of the prompts* show what carries over to prompts it has not seen, which \
         is all a rule in the runtime could use. The gap between *measured* and the replayed tuner is what the model leaves out: \
         the run's real step costs beyond the pass (drafting, argmax over the vocabulary, bookkeeping) and the \
         timing noise the real tuner learns from. Beyond the oracle only new drafts help: positions with no draft \
         or a wrong first token are steps of one token whatever the rule."
    );
    md
}

fn write(out: &Path, md: &str, results: &[DrafterCeiling]) -> anyhow::Result<()> {
    if let Some(dir) = out.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let json = serde_json::to_vec_pretty(results)?;
    anyspec_core::artifact::write_atomically(out, |w| std::io::Write::write_all(w, md.as_bytes()))
        .with_context(|| format!("writing {}", out.display()))?;
    let json_path = out.with_extension("json");
    anyspec_core::artifact::write_atomically(&json_path, |w| std::io::Write::write_all(w, &json))
        .with_context(|| format!("writing {}", json_path.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(len: usize, accepted: usize) -> Position {
        Position { class: Some(len as u16), len, accepted, better: None, confidence: None }
    }

    #[test]
    fn the_cost_line_ignores_one_noisy_pass() {
        // v(2) measured below one pass: the median slope is the other passes'.
        let cost = Cost::new(&[1.0, 0.58, 1.12, 1.18, 1.24, 1.30]);
        assert!((cost.slope - 0.06).abs() < 1e-9, "{}", cost.slope);
        assert!((cost.of(1) - 1.0).abs() < 1e-12 && (cost.of(4) - 1.18).abs() < 1e-9);
    }

    #[test]
    fn a_walk_steps_past_what_is_accepted_and_pays_for_what_is_verified() {
        let cost = Cost { slope: 0.1 };
        // Position 0: a 3-token draft, 2 right. Then one position with a wrong draft and one
        // without; the walk from 0 lands on 3 (2 accepted + 1) and ends there.
        let prompt = vec![at(3, 2), at(2, 0), at(1, 0), at(0, 0)];
        let positions = vec![prompt];
        let (per_step, rate) = walk(&positions, &cost, &|p| (p.len, p.accepted));
        // Steps: verify 3 + 1 rows (cost 1.3), emit 3 tokens; then a plain step (cost 1), 1 token.
        assert!((per_step - 2.0).abs() < 1e-12);
        assert!((rate - 4.0 / 2.3).abs() < 1e-12);
        // The oracle pays only for what is accepted: 1.2 + 1.
        let (_, oracle) = walk(&positions, &cost, &|p| (p.accepted, p.accepted));
        assert!((oracle - 4.0 / 2.2).abs() < 1e-12);
    }

    #[test]
    fn the_replayed_tuner_drafts_deep_where_drafts_are_right_and_probes_where_they_are_wrong() {
        let cost = Cost { slope: 0.08 };
        let right: Vec<Position> = (0..300).map(|_| at(6, 6)).collect();
        let (per_step, rate) = walk_tuner(&[right], &cost);
        assert!(per_step > 6.0, "{per_step}");
        assert!(rate > 4.0, "{rate}");
        let wrong: Vec<Position> = (0..300).map(|_| at(6, 0)).collect();
        let (per_step, rate) = walk_tuner(&[wrong], &cost);
        // Every step emits one token; after the first tests it verifies a token only to probe.
        assert!((per_step - 1.0).abs() < 1e-12);
        assert!(rate > 0.97 && rate < 1.0, "{rate}");
    }

    #[test]
    fn the_best_gamma_per_class_is_at_least_every_fixed_gamma_and_at_most_the_oracle() {
        let cost = Cost { slope: 0.08 };
        // Class 4 drafts are right to the end, class 1 drafts always wrong.
        let prompt: Vec<Position> = (0..60).map(|i| if i % 3 == 0 { at(4, 4) } else { at(1, 0) }).collect();
        let positions = vec![prompt];
        let best = best_gamma_by(&positions.iter().collect::<Vec<_>>(), &cost, &|p| p.class);
        assert_eq!(best[&Some(4)], 4);
        assert_eq!(best[&Some(1)], 0);
        let rate = |rule: &dyn Fn(&Position) -> (usize, usize)| walk(&positions, &cost, rule).1;
        let tuned = in_sample(&positions, &cost, &|p| p.class).1;
        for g in FIXED {
            assert!(tuned >= rate(&|p| up_to(g, p)) - 1e-12, "γ = {g}");
        }
        assert!(tuned <= rate(&|p| (p.accepted, p.accepted)) + 1e-12);
    }
    #[test]
    fn the_target_confidence_rule_cuts_where_the_class_cannot() {
        let cost = Cost { slope: 0.08 };
        // One class throughout: right to the end where the target was sure (bucket 4), wrong
        // where it was not (bucket 0). The class alone must pick one γ for both.
        let prompt = |n: usize| -> Vec<Position> {
            (0..n)
                .map(|i| {
                    let sure = i % 2 == 0;
                    let confidence = Some(if sure { 4 } else { 0 });
                    Position { class: Some(3), len: 4, accepted: if sure { 4 } else { 0 }, better: None, confidence }
                })
                .collect()
        };
        let positions = vec![prompt(80), prompt(80)];
        let (_, by_class) = in_sample(&positions, &cost, &|p| p.class);
        let (_, by_pair) = in_sample(&positions, &cost, &|p| (p.class, p.confidence));
        assert!(by_pair > by_class + 0.05, "{by_pair} vs {by_class}");
        // The same structure in both halves: what is learnt on one carries over to the other.
        let (_, cv_pair) = cross_validated(&positions, &cost, true);
        let (_, cv_class) = cross_validated(&positions, &cost, false);
        assert!(cv_pair > cv_class + 0.05, "{cv_pair} vs {cv_class}");
    }

    #[test]
    fn the_cross_validated_rule_never_sees_the_prompts_it_walks() {
        let cost = Cost { slope: 0.08 };
        // The same class right on the even prompt and wrong on the odd one: in sample, verifying
        // the whole draft pays on average; fitted on one half and walked on the other, the γ
        // learnt on the right prompt is wasted on the wrong one and vice versa.
        let right: Vec<Position> = (0..60).map(|_| at(4, 4)).collect();
        let wrong: Vec<Position> = (0..60).map(|_| at(4, 0)).collect();
        let positions = vec![right, wrong];
        let (_, fitted) = in_sample(&positions, &cost, &|p| p.class);
        let (_, cv) = cross_validated(&positions, &cost, false);
        assert!(fitted > 1.2, "{fitted}");
        assert!(cv < 1.0, "{cv}");
    }
}
