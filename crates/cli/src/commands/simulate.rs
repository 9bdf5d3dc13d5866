//! `anyspec simulate`: every verification rule on toy Markov models, measured against theory.
//!
//! The target is a random first-order Markov chain; drafters are noisy copies of it over the same
//! vocabulary, or chains over a different vocabulary that overlaps the target's partially. For
//! each rule the engine generates text and the table sets what it measured beside what theory
//! predicts from the per-context acceptance rates α_c = Σ min(p_c, q_c), averaged over the
//! target's stationary distribution.

use std::ops::ControlFlow;

use anyspec_core::projection::{ABSENT, AffinityMatrix, IdMap};
use anyspec_core::sampling::logits_to_probs;
use anyspec_core::theory::expected_tokens_per_step;
use anyspec_core::toy::{Bridge, DraftMode, MarkovChain, MarkovDrafter, MarkovTarget};
use anyspec_core::{
    DeterministicRule, Drafter, GenerationConfig, Progress, ProgressUnit, SamplingConfig, Stats, generate,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;

use crate::args::flag_error;
use crate::output::{print_json, print_text, table};

/// Runs the draft → verify engine on toy Markov target/drafter pairs for every rule and prints
/// measured acceptance and tokens per step beside the theoretical values.
#[derive(Debug, clap::Args)]
#[command(allow_negative_numbers = true)]
pub(crate) struct Args {
    /// Draft length γ (tokens drafted per verification step).
    #[arg(long, default_value_t = 4)]
    gamma: usize,
    /// Tokens generated per method.
    #[arg(long, default_value_t = 20_000)]
    tokens: usize,
    /// Target vocabulary size, 2..=4096 (the toy models are dense vocab × vocab tables).
    #[arg(long, default_value_t = 48)]
    vocab: usize,
    /// Share of the drafter's vocabulary that the target also has, for the heterogeneous rules.
    #[arg(long, default_value_t = 0.75)]
    overlap: f64,
    /// How far the drafter is from the target (noise added to the target's log-probabilities).
    #[arg(long, default_value_t = 0.8)]
    drafter_noise: f64,
    /// Sampling temperature applied to target and drafter alike (0 = greedy).
    #[arg(long, default_value_t = 1.0)]
    temperature: f32,
    /// Keep only the k most probable tokens (target and drafter alike).
    #[arg(long)]
    top_k: Option<usize>,
    /// Keep the smallest set of most probable tokens with this much mass, in (0, 1].
    #[arg(long, default_value_t = 1.0)]
    top_p: f32,
    /// Random seed for the models and the sampling.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

/// One row of the report.
#[derive(Debug, Serialize)]
struct MethodReport {
    method: String,
    rule: &'static str,
    gamma: usize,
    theory_alpha: f64,
    measured_alpha: f64,
    theory_tokens_per_step: f64,
    measured_tokens_per_step: f64,
    mean_accepted_length: f64,
    steps: u64,
    tokens: u64,
}

#[derive(Debug, Serialize)]
struct Report {
    target_vocab: usize,
    drafter_vocab: usize,
    shared_tokens: usize,
    temperature: f32,
    seed: u64,
    methods: Vec<MethodReport>,
}

/// How a scenario's drafter turns its own distribution into the one it drafts from.
struct Scenario {
    method: String,
    rule: &'static str,
    drafter: Option<MarkovDrafter>,
    deterministic_rule: DeterministicRule,
}

/// The largest `--vocab`. Every toy model is a dense `vocab × vocab` table of f32 (a row per
/// context token), and the run holds three of them (the target, its drafter, the drafter over
/// another vocabulary): 4096 costs 3 × 64 MiB; memory and set-up time grow with the square.
const MAX_VOCAB: usize = 4096;

pub(crate) fn run(args: Args, progress: &dyn Progress) -> anyhow::Result<()> {
    if !(2..=MAX_VOCAB).contains(&args.vocab) {
        anyhow::bail!(
            "--vocab must be in 2..={MAX_VOCAB}, got {}: the toy models are dense vocab × vocab tables, so memory \
             grows with its square",
            args.vocab
        );
    }
    if args.tokens == 0 {
        anyhow::bail!("--tokens must be at least 1");
    }
    if !(args.overlap > 0.0 && args.overlap <= 1.0) {
        anyhow::bail!("--overlap must be in (0, 1], got {}", args.overlap);
    }
    if !(args.drafter_noise.is_finite() && args.drafter_noise >= 0.0) {
        anyhow::bail!("--drafter-noise must be a finite number ≥ 0, got {}", args.drafter_noise);
    }
    let sampling = SamplingConfig::new(args.temperature, args.top_k, args.top_p).map_err(flag_error)?;
    let config = GenerationConfig {
        gamma: args.gamma,
        max_new_tokens: args.tokens,
        sampling: sampling.clone(),
        ..Default::default()
    };
    config.validate().map_err(flag_error)?;

    let mut rng = StdRng::seed_from_u64(args.seed);
    let target = MarkovChain::random(args.vocab, args.vocab, 2.0, &mut rng);
    let same = target.perturbed(args.drafter_noise, &mut rng);
    let (map, other) = other_vocabulary_drafter(&target, args.overlap, args.drafter_noise, &mut rng)?;
    let affinity = neighbour_affinity(&target)?;

    let scenarios = vec![
        Scenario {
            method: "autoregressive".into(),
            rule: "none",
            drafter: None,
            deterministic_rule: Default::default(),
        },
        Scenario {
            method: "same vocabulary, sampled drafter".into(),
            rule: "speculative sampling",
            drafter: Some(MarkovDrafter::new(same.clone(), Bridge::Same, DraftMode::Sample)?),
            deterministic_rule: Default::default(),
        },
        Scenario {
            method: "same vocabulary, greedy drafter".into(),
            rule: "point mass",
            drafter: Some(MarkovDrafter::new(same.clone(), Bridge::Same, DraftMode::Greedy)?),
            deterministic_rule: DeterministicRule::PointMass,
        },
        Scenario {
            method: "same vocabulary, greedy drafter".into(),
            rule: "exact match",
            drafter: Some(MarkovDrafter::new(same, Bridge::Same, DraftMode::Greedy)?),
            deterministic_rule: DeterministicRule::ExactMatch,
        },
        Scenario {
            method: "other vocabulary, union (Alg 1)".into(),
            rule: "speculative sampling",
            drafter: Some(MarkovDrafter::new(other.clone(), Bridge::Union(map.clone()), DraftMode::Sample)?),
            deterministic_rule: Default::default(),
        },
        Scenario {
            method: "other vocabulary, TLI (Alg 4)".into(),
            rule: "speculative sampling",
            drafter: Some(MarkovDrafter::new(other.clone(), Bridge::Tli(map.clone()), DraftMode::Sample)?),
            deterministic_rule: Default::default(),
        },
        Scenario {
            method: "other vocabulary, RDK (TLI + affinity)".into(),
            rule: "speculative sampling",
            drafter: Some(MarkovDrafter::new(other, Bridge::Rdk(map.clone(), affinity.clone()), DraftMode::Sample)?),
            deterministic_rule: Default::default(),
        },
    ];

    let stationary = stationary_distribution(&target.transformed(&sampling)?);
    progress.start("simulating", Some((scenarios.len() * args.tokens) as u64), ProgressUnit::Items);
    let mut methods = Vec::new();
    for mut scenario in scenarios {
        let theory_alpha = match &scenario.drafter {
            Some(drafter) => mean_alpha(&target, drafter, &stationary, &sampling)?,
            None => 0.0,
        };
        let config = GenerationConfig { deterministic_rule: scenario.deterministic_rule, ..config.clone() };
        let stats = simulate(&target, scenario.drafter.as_mut(), &config, &mut rng, progress)?;
        let theory_tokens_per_step =
            if scenario.drafter.is_some() { expected_tokens_per_step(theory_alpha.min(1.0), args.gamma)? } else { 1.0 };
        methods.push(MethodReport {
            method: scenario.method,
            rule: scenario.rule,
            gamma: if scenario.drafter.is_some() { args.gamma } else { 0 },
            theory_alpha,
            measured_alpha: stats.per_token_acceptance(),
            theory_tokens_per_step,
            measured_tokens_per_step: stats.tokens_per_step(),
            mean_accepted_length: stats.mean_accepted_length(),
            steps: stats.steps,
            tokens: stats.generated,
        });
    }
    progress.finish();

    let report = Report {
        target_vocab: args.vocab,
        drafter_vocab: map.drafter_size(),
        shared_tokens: map.intersection_size(),
        temperature: args.temperature,
        seed: args.seed,
        methods,
    };
    if args.json {
        return print_json(&report);
    }
    print_text(&render(&report))
}

/// Generates `config.max_new_tokens` tokens, restarting from a fresh random prompt token when a
/// generation ends early, and returns the summed statistics.
fn simulate(
    target: &MarkovChain,
    mut drafter: Option<&mut MarkovDrafter>,
    config: &GenerationConfig,
    rng: &mut StdRng,
    progress: &dyn Progress,
) -> anyhow::Result<Stats> {
    let mut target = MarkovTarget::new(target.clone())?;
    let mut total = Stats::default();
    let chunk = 1_000;
    while (total.generated as usize) < config.max_new_tokens {
        let budget = chunk.min(config.max_new_tokens - total.generated as usize);
        let prompt = [rng.random_range(0..target.chain().vocab_size() as u32)];
        let config = GenerationConfig { max_new_tokens: budget, ..config.clone() };
        let generation = generate(
            &mut target,
            drafter.as_mut().map(|d| &mut **d as &mut dyn Drafter),
            &prompt,
            &config,
            rng,
            &mut |_| ControlFlow::Continue(()),
        )?;
        progress.advance(generation.stats.generated);
        total.merge(&generation.stats);
    }
    Ok(total)
}

/// A chain over a drafter vocabulary of the same size as the target's, of which a share
/// `overlap` maps to target tokens (in a shuffled order); the rest are drafter-only tokens. Its
/// rows follow the target where the vocabularies meet, plus noise.
fn other_vocabulary_drafter(
    target: &MarkovChain,
    overlap: f64,
    noise: f64,
    rng: &mut StdRng,
) -> anyhow::Result<(IdMap, MarkovChain)> {
    let n = target.vocab_size();
    let shared = ((n as f64 * overlap).round() as usize).clamp(1, n);
    let mut targets: Vec<u32> = (0..n as u32).collect();
    for i in (1..n).rev() {
        targets.swap(i, rng.random_range(0..=i));
    }
    let drafter_to_target: Vec<u32> = (0..n).map(|d| if d < shared { targets[d] } else { ABSENT }).collect();
    let map = IdMap::new(drafter_to_target, n)?;
    let rows = (0..n as u32)
        .map(|c| {
            let p = target.next(c)?;
            let logits: Vec<f32> = map
                .drafter_to_target()
                .iter()
                .map(|&t| {
                    let base = if t == ABSENT { 1.0 / n as f32 } else { p[t as usize] };
                    base.max(1e-9).ln() + (noise * gaussian(rng)) as f32
                })
                .collect();
            logits_to_probs(&logits, &SamplingConfig::default())
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok((map, MarkovChain::new(rows)?))
}

/// Affinity for RDK: each target token keeps 80% of its mass and spreads 20% over the tokens the
/// target itself most often emits next, a co-occurrence prior of the kind Eq. 2 estimates.
fn neighbour_affinity(target: &MarkovChain) -> anyhow::Result<AffinityMatrix> {
    let n = target.vocab_size();
    let (mut offsets, mut columns, mut values) = (vec![0], Vec::new(), Vec::new());
    for c in 0..n as u32 {
        let row = target.next(c)?;
        let mut order: Vec<u32> = (0..n as u32).filter(|&t| t != c).collect();
        order.sort_by(|a, b| row[*b as usize].total_cmp(&row[*a as usize]));
        columns.push(c);
        values.push(0.8);
        for &t in order.iter().take(4) {
            columns.push(t);
            values.push(0.05);
        }
        offsets.push(columns.len());
    }
    Ok(AffinityMatrix::from_csr(n, offsets, columns, values)?)
}

/// `Σ_c π(c) Σ_x min(p_c(x), q_c(x))` with `p` after the sampling transform.
fn mean_alpha(
    target: &MarkovChain,
    drafter: &MarkovDrafter,
    stationary: &[f64],
    sampling: &SamplingConfig,
) -> anyhow::Result<f64> {
    let target = target.transformed(sampling)?;
    let mut alpha = 0.0;
    for (c, &weight) in stationary.iter().enumerate() {
        let q = drafter.proposal_distribution(c as u32, sampling)?;
        alpha += weight * anyspec_core::theory::acceptance_rate(target.next(c as u32)?, &q)?;
    }
    Ok(alpha)
}

/// The stationary distribution of a chain, by power iteration.
fn stationary_distribution(chain: &MarkovChain) -> Vec<f64> {
    let n = chain.vocab_size();
    let mut pi = vec![1.0 / n as f64; n];
    for _ in 0..500 {
        let mut next = vec![0.0; n];
        for (c, &weight) in pi.iter().enumerate() {
            if let Ok(row) = chain.next(c as u32) {
                for (t, &p) in row.iter().enumerate() {
                    next[t] += weight * f64::from(p);
                }
            }
        }
        pi = next;
    }
    pi
}

fn gaussian(rng: &mut StdRng) -> f64 {
    let (u1, u2): (f64, f64) = (1.0 - rng.random::<f64>(), rng.random::<f64>());
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

fn render(report: &Report) -> String {
    let rows: Vec<Vec<String>> = report
        .methods
        .iter()
        .map(|m| {
            vec![
                m.method.clone(),
                m.rule.to_string(),
                m.gamma.to_string(),
                format!("{:.3}", m.theory_alpha),
                format!("{:.3}", m.measured_alpha),
                format!("{:.3}", m.theory_tokens_per_step),
                format!("{:.3}", m.measured_tokens_per_step),
                format!("{:.3}", m.mean_accepted_length),
            ]
        })
        .collect();
    let mut out = format!(
        "Toy Markov models: target vocabulary {}, drafter vocabulary {} ({} shared), temperature {}, seed {}\n\n",
        report.target_vocab, report.drafter_vocab, report.shared_tokens, report.temperature, report.seed
    );
    out.push_str(&table(
        &[
            "method",
            "rule",
            "γ",
            "α theory",
            "α measured",
            "tokens/step theory",
            "tokens/step measured",
            "mean accepted",
        ],
        &rows,
    ));
    out.push_str(
        "\nα theory averages Σ min(p, q) over the target's stationary distribution; tokens/step theory is\n\
         (1 − α^{γ+1}) / (1 − α) (speculative-decoding.txt Eq. 1), exact only when α is the same in every context.\n",
    );
    out
}
