//! The emitted tokens follow the target distribution exactly, for every rule and projection.
//!
//! Each test generates short sequences from a toy Markov target many times and compares the
//! histogram of whole sequences with the exact probabilities (a product of table entries) by a
//! G-test. Seeds are fixed, so the tests never flake; `power.rs` shows the same harness rejects
//! deliberately broken rules.

use std::ops::ControlFlow;

use anyspec_core::projection::{ABSENT, AffinityMatrix, IdMap};
use anyspec_core::toy::{Bridge, DraftMode, MarkovChain, MarkovDrafter, MarkovTarget};
use anyspec_core::{
    DeterministicRule, Draft, Drafter, GammaPolicy, GammaTuner, GenerationConfig, SamplingConfig, Target, generate,
    generate_tuned,
};
use rand::RngCore;
use rand::SeedableRng;
use rand::rngs::StdRng;

use crate::stats::{GTest, PASS_P_VALUE, g_test};

/// Target vocabulary size and generated length: 4³ = 64 possible sequences.
pub(crate) const VOCAB: usize = 4;
pub(crate) const LENGTH: usize = 3;
/// Sequences per test.
pub(crate) const SAMPLES: usize = 60_000;
/// The prompt: a single token, so the first generated token comes from row `PROMPT`.
pub(crate) const PROMPT: u32 = 1;

/// Histogram of generated sequences, indexed by `Σ token_i · VOCAB^i`.
pub(crate) fn histogram(
    target: &mut dyn Target,
    mut drafter: Option<&mut dyn Drafter>,
    config: &GenerationConfig,
    seed: u64,
) -> Vec<u64> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut counts = vec![0u64; VOCAB.pow(LENGTH as u32)];
    for _ in 0..SAMPLES {
        let generation = generate(
            target,
            drafter.as_mut().map(|d| &mut **d as &mut dyn Drafter),
            &[PROMPT],
            config,
            &mut rng,
            &mut |_| ControlFlow::Continue(()),
        )
        .expect("generation succeeds");
        assert_eq!(generation.tokens.len(), LENGTH);
        counts[index(&generation.tokens)] += 1;
    }
    counts
}

fn index(tokens: &[u32]) -> usize {
    tokens.iter().rev().fold(0, |acc, &t| acc * VOCAB + t as usize)
}

/// Exact probability of every sequence under the target chain after the sampling transform.
pub(crate) fn exact(target: &MarkovChain, sampling: &SamplingConfig) -> Vec<f64> {
    let chain = target.transformed(sampling).unwrap();
    let mut probs = vec![0.0; VOCAB.pow(LENGTH as u32)];
    for (i, p) in probs.iter_mut().enumerate() {
        let tokens: Vec<u32> = (0..LENGTH).map(|k| ((i / VOCAB.pow(k as u32)) % VOCAB) as u32).collect();
        *p = chain.sequence_probability(PROMPT, &tokens).unwrap();
    }
    probs
}

/// Runs one scenario and returns its G-test against the exact distribution.
pub(crate) fn check(
    target_chain: &MarkovChain,
    drafter: Option<MarkovDrafter>,
    config: &GenerationConfig,
    seed: u64,
) -> GTest {
    let mut target = MarkovTarget::new(target_chain.clone()).unwrap();
    let mut drafter = drafter;
    let counts = histogram(&mut target, drafter.as_mut().map(|d| d as &mut dyn Drafter), config, seed);
    g_test(&counts, &exact(target_chain, &config.sampling))
}

pub(crate) fn assert_lossless(
    name: &str,
    target_chain: &MarkovChain,
    drafter: Option<MarkovDrafter>,
    config: &GenerationConfig,
    seed: u64,
) {
    let result = check(target_chain, drafter, config, seed);
    assert!(result.p_value > PASS_P_VALUE, "{name}: the output does not follow the target distribution: {result:?}");
}

pub(crate) fn target_chain(seed: u64) -> MarkovChain {
    MarkovChain::random(VOCAB, VOCAB, 1.5, &mut StdRng::seed_from_u64(seed))
}

pub(crate) fn config(gamma: usize, sampling: SamplingConfig) -> GenerationConfig {
    GenerationConfig { gamma, max_new_tokens: LENGTH, sampling, ..GenerationConfig::default() }
}

/// A drafter over `drafter_vocab` tokens, rows indexed by the last target token.
pub(crate) fn other_vocab_drafter(drafter_vocab: usize, seed: u64, bridge: Bridge, mode: DraftMode) -> MarkovDrafter {
    let chain = MarkovChain::random(VOCAB, drafter_vocab, 1.5, &mut StdRng::seed_from_u64(seed));
    MarkovDrafter::new(chain, bridge, mode).unwrap()
}

/// Partial overlap: drafter tokens 0, 2, 3 are target tokens 2, 0, 3; drafter tokens 1 and 4 and
/// target token 1 have no counterpart.
pub(crate) fn partial_map() -> IdMap {
    IdMap::new(vec![2, ABSENT, 0, 3, ABSENT], VOCAB).unwrap()
}

/// A fixed sparse affinity matrix over the target vocabulary: each token keeps most of its mass
/// and leaks some to a neighbour, including to target token 1, which the drafter cannot produce.
pub(crate) fn affinity() -> AffinityMatrix {
    AffinityMatrix::from_csr(
        VOCAB,
        vec![0, 2, 3, 5, 7],
        vec![0, 1, 1, 2, 1, 3, 0],
        vec![0.7, 0.3, 1.0, 0.6, 0.4, 0.8, 0.2],
    )
    .unwrap()
}

fn t(temperature: f32) -> SamplingConfig {
    SamplingConfig::new(temperature, None, 1.0).unwrap()
}

#[test]
fn autoregressive_baseline() {
    assert_lossless("autoregressive", &target_chain(1), None, &config(1, t(1.0)), 101);
}

#[test]
fn speculative_sampling_same_vocabulary_for_every_gamma() {
    let target = target_chain(2);
    for (gamma, seed) in [(1, 201), (2, 202), (3, 203), (5, 204), (8, 205)] {
        let drafter = MarkovDrafter::new(
            target.perturbed(1.0, &mut StdRng::seed_from_u64(seed)),
            Bridge::Same,
            DraftMode::Sample,
        )
        .unwrap();
        assert_lossless(
            &format!("speculative sampling γ={gamma}"),
            &target,
            Some(drafter),
            &config(gamma, t(1.0)),
            seed,
        );
    }
}

#[test]
fn adaptive_gamma_is_lossless() {
    // γ changes from step to step with the measured acceptance and timings; each step's
    // verification must still give the target's distribution.
    let target = target_chain(6);
    let drafter =
        MarkovDrafter::new(target.perturbed(0.8, &mut StdRng::seed_from_u64(601)), Bridge::Same, DraftMode::Sample)
            .unwrap();
    let config = GenerationConfig { gamma_policy: GammaPolicy::Adaptive, ..config(4, t(1.0)) };
    assert_lossless("adaptive γ ≤ 4", &target, Some(drafter), &config, 602);
}

/// A drafter that announces a source class before drafting, from the context alone (1 after an
/// even token, 2 after an odd one), as a hybrid of prompt lookup and a model does.
struct Announcing(MarkovDrafter);

impl Drafter for Announcing {
    fn propose(
        &mut self,
        context: &[u32],
        max_tokens: usize,
        sampling: &SamplingConfig,
        rng: &mut dyn RngCore,
    ) -> anyspec_core::Result<Draft> {
        self.0.propose(context, max_tokens, sampling, rng)
    }

    fn source_class(&mut self, context: &[u32]) -> Option<u16> {
        context.last().map(|&t| 1 + (t % 2) as u16)
    }
}

#[test]
fn asking_and_cutting_by_announced_sources_is_lossless() {
    // One tuner across every generation, so that what it learned per source decides how much
    // is asked and how much of each sampled draft is verified.
    let chain = target_chain(8);
    let perturbed = chain.perturbed(1.2, &mut StdRng::seed_from_u64(801));
    let mut drafter = Announcing(MarkovDrafter::new(perturbed, Bridge::Same, DraftMode::Sample).unwrap());
    let mut target = MarkovTarget::new(chain.clone()).unwrap();
    let config = GenerationConfig { gamma_policy: GammaPolicy::Adaptive, ..config(4, t(1.0)) };
    let mut tuner = GammaTuner::new(config.gamma);
    let mut rng = StdRng::seed_from_u64(802);
    let mut counts = vec![0u64; VOCAB.pow(LENGTH as u32)];
    for _ in 0..SAMPLES {
        let generation = generate_tuned(
            &mut target,
            Some(&mut drafter),
            &[PROMPT],
            &config,
            Some(&mut tuner),
            &mut rng,
            &mut |_| ControlFlow::Continue(()),
        )
        .expect("generation succeeds");
        counts[index(&generation.tokens)] += 1;
    }
    let result = g_test(&counts, &exact(&chain, &config.sampling));
    assert!(result.p_value > PASS_P_VALUE, "the output does not follow the target distribution: {result:?}");
    // Both sources were learned apart from the pooled estimate.
    for source in [1, 2] {
        assert_ne!(tuner.class_alpha(Some(source)), tuner.alpha(), "source {source} was never observed");
    }
}

#[test]
fn speculative_sampling_with_temperature_top_k_and_top_p() {
    let target = target_chain(3);
    let samplings = [
        SamplingConfig::new(0.7, None, 1.0).unwrap(),
        SamplingConfig::new(1.3, Some(3), 1.0).unwrap(),
        SamplingConfig::new(1.0, None, 0.8).unwrap(),
    ];
    for (i, sampling) in samplings.into_iter().enumerate() {
        let seed = 300 + i as u64;
        let drafter = MarkovDrafter::new(
            target.perturbed(1.5, &mut StdRng::seed_from_u64(seed)),
            Bridge::Same,
            DraftMode::Sample,
        )
        .unwrap();
        assert_lossless(&format!("sampling {sampling:?}"), &target, Some(drafter), &config(4, sampling), seed);
    }
}

#[test]
fn an_unrelated_drafter_is_still_lossless() {
    // A drafter that knows nothing about the target: most drafts are rejected.
    let target = target_chain(4);
    let drafter = MarkovDrafter::new(target_chain(44), Bridge::Same, DraftMode::Sample).unwrap();
    assert_lossless("unrelated drafter", &target, Some(drafter), &config(3, t(1.0)), 401);
}

#[test]
fn deterministic_drafts_point_mass_and_exact_match() {
    let target = target_chain(5);
    for (rule, gamma, seed) in [
        (DeterministicRule::PointMass, 2, 501),
        (DeterministicRule::PointMass, 6, 502),
        (DeterministicRule::ExactMatch, 3, 503),
    ] {
        let drafter = MarkovDrafter::new(
            target.perturbed(1.0, &mut StdRng::seed_from_u64(seed)),
            Bridge::Same,
            DraftMode::Greedy,
        )
        .unwrap();
        let config = GenerationConfig { deterministic_rule: rule, ..config(gamma, t(1.0)) };
        assert_lossless(&format!("deterministic {rule:?} γ={gamma}"), &target, Some(drafter), &config, seed);
    }
}

#[test]
fn greedy_decoding_emits_exactly_the_argmax_sequence() {
    let target = target_chain(6);
    let drafter = MarkovDrafter::new(target_chain(66), Bridge::Same, DraftMode::Sample).unwrap();
    let result = check(&target, Some(drafter), &config(3, SamplingConfig::greedy()), 601);
    // Under greedy decoding one sequence has probability 1: any other outcome gives p = 0.
    assert!(result.p_value > PASS_P_VALUE, "{result:?}");
}

#[test]
fn union_with_partial_disjoint_and_full_overlap() {
    let target = target_chain(7);
    let full = IdMap::new(vec![3, 1, 0, 2], VOCAB).unwrap();
    let disjoint = IdMap::new(vec![ABSENT; 3], VOCAB).unwrap();
    for (name, map, seed) in [("partial", partial_map(), 701), ("full", full, 702), ("disjoint", disjoint, 703)] {
        let drafter = other_vocab_drafter(map.drafter_size(), seed, Bridge::Union(map), DraftMode::Sample);
        assert_lossless(&format!("union, {name} overlap"), &target, Some(drafter), &config(3, t(1.0)), seed);
    }
}

#[test]
fn tli_with_partial_and_full_overlap() {
    let target = target_chain(8);
    let full = IdMap::new(vec![3, 1, 0, 2], VOCAB).unwrap();
    for (name, map, gamma, seed) in
        [("partial", partial_map(), 2, 801), ("partial", partial_map(), 7, 802), ("full", full, 4, 803)]
    {
        let drafter = other_vocab_drafter(map.drafter_size(), seed, Bridge::Tli(map), DraftMode::Sample);
        assert_lossless(
            &format!("TLI, {name} overlap, γ={gamma}"),
            &target,
            Some(drafter),
            &config(gamma, t(1.0)),
            seed,
        );
    }
    // Disjoint vocabularies leave TLI nothing to draft: every step is autoregressive.
    let disjoint = IdMap::new(vec![ABSENT; 3], VOCAB).unwrap();
    let drafter = other_vocab_drafter(3, 804, Bridge::Tli(disjoint), DraftMode::Sample);
    assert_lossless("TLI, disjoint", &target, Some(drafter), &config(3, t(1.0)), 804);
}

#[test]
fn rdk_drafts_tokens_the_drafter_cannot_produce_and_stays_lossless() {
    let target = target_chain(9);
    for (gamma, seed) in [(1, 901), (4, 902)] {
        let drafter = other_vocab_drafter(5, seed, Bridge::Rdk(partial_map(), affinity()), DraftMode::Sample);
        assert_lossless(&format!("RDK γ={gamma}"), &target, Some(drafter), &config(gamma, t(1.0)), seed);
    }
}

#[test]
fn heterogeneous_greedy_drafters_are_lossless_under_sampling() {
    let target = target_chain(10);
    let drafter = other_vocab_drafter(5, 1001, Bridge::Tli(partial_map()), DraftMode::Greedy);
    assert_lossless("TLI greedy drafter", &target, Some(drafter), &config(3, t(0.9)), 1001);
}

/// SLRS (hetero-vocab-sd.txt Alg 3, lines 6–8): when the proposed target token `t` is distributed
/// as ψ, accepting with min(1, p/ψ) and otherwise drawing from max(p − ψ, 0) emits exactly `p`.
/// With a ψ that is not the distribution `t` was drawn from, the same test fails.
#[test]
fn string_level_rejection_emits_the_target_distribution() {
    use anyspec_core::sampling::sample;
    use anyspec_core::verify::string_level_rejection;

    let mut rng = StdRng::seed_from_u64(1201);
    let p = MarkovChain::random(1, 8, 1.5, &mut rng).next(0).unwrap().to_vec();
    let psi = MarkovChain::random(1, 8, 1.5, &mut rng).next(0).unwrap().to_vec();
    let wrong_psi = MarkovChain::random(1, 8, 1.5, &mut rng).next(0).unwrap().to_vec();
    let expected: Vec<f64> = p.iter().map(|&x| f64::from(x)).collect();
    for (claimed, should_pass) in [(&psi, true), (&wrong_psi, false)] {
        let mut counts = vec![0u64; 8];
        for _ in 0..SAMPLES {
            let t = sample(&psi, &mut rng).unwrap();
            let emitted = string_level_rejection(&p, t, claimed, &mut rng).unwrap().unwrap_or(t);
            counts[emitted as usize] += 1;
        }
        let result = g_test(&counts, &expected);
        if should_pass {
            assert!(result.p_value > PASS_P_VALUE, "SLRS with the true ψ: {result:?}");
        } else {
            assert!(result.p_value < crate::stats::POWER_P_VALUE, "SLRS with a wrong ψ went unnoticed: {result:?}");
        }
    }
}
