//! DynaSpec is lossless: the shortlist only changes what the drafter proposes, and the target
//! verifies over the full vocabulary. A G-test on whole generated sequences against their exact
//! probabilities, with a real (small) model drafting through a toy router whose shortlists vary
//! with the context and often miss tokens the target wants; greedy decoding gives the target's
//! own output.

use std::ops::ControlFlow;
use std::path::PathBuf;

use anyspec_core::goodness_of_fit::{PASS_P_VALUE, POWER_P_VALUE, g_test};
use anyspec_core::toy::{MarkovChain, MarkovTarget};
use anyspec_core::{Drafter, GenerationConfig, SamplingConfig, generate};
use anyspec_dynaspec::{
    ClusterBudget, Clusters, DynamicShortlister, FrequencyShortlister, HeadPolicy, Router, ShortlistDrafter,
    TokenBudget,
};
use anyspec_models::{Checkpoint, DeviceChoice, Llama, LoadOptions};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const VOCAB: usize = 320;
const LENGTH: usize = 3;
const SAMPLES: usize = 6_000;
const EOS: u32 = 2;

fn model() -> Llama {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../models/tests/data/llama3-gqa");
    let device = DeviceChoice::Cpu.device().unwrap();
    Checkpoint::open(dir).unwrap().load_model_with(&device, &LoadOptions::default()).unwrap()
}

/// The target's support: six tokens, in six different clusters of the toy partition.
fn support() -> Vec<u32> {
    vec![10, 21, 32, 43, 54, 65]
}

fn target_chain(seed: u64) -> MarkovChain {
    let mut rng = StdRng::seed_from_u64(seed);
    let rows = (0..VOCAB)
        .map(|_| {
            let w: Vec<f64> = support().iter().map(|_| 0.2 + rng.random::<f64>()).collect();
            let total: f64 = w.iter().sum();
            let mut row = vec![0.0f32; VOCAB];
            for (&t, w) in support().iter().zip(&w) {
                row[t as usize] = (w / total) as f32;
            }
            row
        })
        .collect();
    MarkovChain::new(rows).unwrap()
}

/// 8 clusters: one per support token, one for EOS, one for everything else; a random router.
/// At k₀ = 4, k₁ = 2 the shortlist holds a context-dependent part of the support, and sometimes
/// the big cluster of tokens the target never emits.
fn toy_dynamic(seed: u64, model: &Llama) -> DynamicShortlister {
    let m = 8;
    let s = support();
    let assignment = (0..VOCAB as u32)
        .map(|t| match s.iter().position(|&x| x == t) {
            Some(i) => i as u32,
            None if t == EOS => 6,
            None => 7,
        })
        .collect();
    let clusters = Clusters::from_assignment(assignment, m).unwrap();
    let d = 2 * model.config().hidden_size;
    let h = 8;
    let mut rng = StdRng::seed_from_u64(seed);
    let mut random = |n: usize| (0..n).map(|_| rng.random::<f32>() - 0.5).collect::<Vec<f32>>();
    let router = Router::new(d, h, m, random(h * d), random(h), random(m * h), random(m)).unwrap();
    DynamicShortlister::new(clusters, router, ClusterBudget::PositionAware { k0: 4, k1: 2 }, &[EOS]).unwrap()
}

fn histogram(
    drafter: &mut dyn Drafter,
    chain: &MarkovChain,
    sampling: &SamplingConfig,
    seed: u64,
) -> (Vec<u64>, anyspec_core::Stats) {
    let mut target = MarkovTarget::new(chain.clone()).unwrap();
    let config = GenerationConfig {
        gamma: 3,
        max_new_tokens: LENGTH,
        sampling: sampling.clone(),
        ..GenerationConfig::default()
    };
    let s = support();
    let mut counts = vec![0u64; s.len().pow(LENGTH as u32)];
    let mut rng = StdRng::seed_from_u64(seed);
    let mut stats = anyspec_core::Stats::default();
    let prompt = [1u32, 54, 260, 10];
    for _ in 0..SAMPLES {
        let out =
            generate(&mut target, Some(&mut *drafter), &prompt, &config, &mut rng, &mut |_| ControlFlow::Continue(()))
                .unwrap();
        stats.merge(&out.stats);
        let cell = out.tokens.iter().rev().fold(0, |acc, t| acc * s.len() + s.iter().position(|x| x == t).unwrap());
        counts[cell] += 1;
    }
    (counts, stats)
}

fn exact(chain: &MarkovChain, sampling: &SamplingConfig) -> Vec<f64> {
    let s = support();
    let transformed = chain.transformed(sampling).unwrap();
    (0..s.len().pow(LENGTH as u32))
        .map(|i| {
            let tokens: Vec<u32> = (0..LENGTH).map(|k| s[(i / s.len().pow(k as u32)) % s.len()]).collect();
            transformed.sequence_probability(10, &tokens).unwrap()
        })
        .collect()
}

#[test]
fn dynaspec_sampling_emits_the_target_distribution() {
    let model = model().first_layers(1).unwrap();
    let chain = target_chain(3);
    let sampling = SamplingConfig::new(0.9, None, 1.0).unwrap();
    let policy = HeadPolicy::Dynamic(Box::new(toy_dynamic(5, &model)));
    let mut drafter = ShortlistDrafter::new(model, policy, VOCAB).unwrap();
    let (counts, stats) = histogram(&mut drafter, &chain, &sampling, 11);
    let test = g_test(&counts, &exact(&chain, &sampling)).unwrap();
    assert!(test.p_value > PASS_P_VALUE, "{test:?}");
    // Not vacuous: drafts were accepted and rejected, and the shortlist was a real subset.
    assert!(stats.accepted > 200 && stats.rejected > 200, "{stats:?}");
    let s = drafter.stats();
    assert!(s.mean_shortlist() < VOCAB as f64 * 0.5 && s.positions > 0, "{s:?}");
    // The same harness has power: the histogram against another chain's probabilities fails.
    let other = target_chain(4);
    let wrong = g_test(&counts, &exact(&other, &sampling)).unwrap();
    assert!(wrong.p_value < POWER_P_VALUE, "{wrong:?}");
}

#[test]
fn greedy_decoding_with_any_head_policy_is_the_targets_own() {
    let model = model();
    let drafter_model = model.first_layers(1).unwrap();
    let greedy = SamplingConfig::greedy();
    let config = GenerationConfig { gamma: 4, max_new_tokens: 40, sampling: greedy, ..GenerationConfig::default() };
    let prompt = [1u32, 54, 260, 223, 83, 87, 75, 69, 77, 278];
    let mut rng = StdRng::seed_from_u64(0);
    let mut target = anyspec_models::LlamaTarget::new(model.clone());
    let plain = generate(&mut target, None, &prompt, &config, &mut rng, &mut |_| ControlFlow::Continue(())).unwrap();
    let ranking: Vec<u32> = (0..VOCAB as u32).rev().collect();
    let policies = [
        HeadPolicy::Full,
        HeadPolicy::Frequency(
            FrequencyShortlister::new(&ranking, VOCAB, TokenBudget::Fixed { k: 100 }, &[EOS]).unwrap(),
        ),
        HeadPolicy::Frequency(
            FrequencyShortlister::new(&ranking, VOCAB, TokenBudget::PositionAware { k_max: 200 }, &[EOS]).unwrap(),
        ),
        HeadPolicy::Dynamic(Box::new(toy_dynamic(1, &drafter_model))),
    ];
    let mut accepted = Vec::new();
    for policy in policies {
        let mut drafter = ShortlistDrafter::new(drafter_model.clone(), policy, VOCAB).unwrap();
        let mut target = anyspec_models::LlamaTarget::new(model.clone());
        let out =
            generate(&mut target, Some(&mut drafter), &prompt, &config, &mut rng, &mut |_| ControlFlow::Continue(()))
                .unwrap();
        assert_eq!(out.tokens, plain.tokens);
        accepted.push(out.stats.accepted);
    }
    // The full head of the first layer gets some drafts accepted.
    assert!(accepted[0] > 0, "{accepted:?}");
}

#[test]
fn a_router_for_another_model_is_refused() {
    let model = model();
    // Hidden size 64: a router reading 2·32 values belongs to another model.
    let clusters = Clusters::from_assignment((0..VOCAB as u32).map(|t| t % 4).collect(), 4).unwrap();
    let router = Router::new(64, 2, 4, vec![0.0; 128], vec![0.0; 2], vec![0.0; 8], vec![0.0; 4]).unwrap();
    let d = DynamicShortlister::new(clusters, router, ClusterBudget::Fixed { k: 1 }, &[EOS]).unwrap();
    let e = ShortlistDrafter::new(model, HeadPolicy::Dynamic(Box::new(d)), VOCAB).unwrap_err().to_string();
    assert!(e.contains("build the router for this model"), "{e}");
}

#[test]
fn head_blocks_of_another_policy_are_refused_and_shared_ones_draft_alike() {
    let model = model();
    let drafter_model = model.first_layers(1).unwrap();
    let dynamic = HeadPolicy::Dynamic(Box::new(toy_dynamic(1, &drafter_model)));
    let ranking: Vec<u32> = (0..VOCAB as u32).rev().collect();
    let frequency = HeadPolicy::Frequency(
        FrequencyShortlister::new(&ranking, VOCAB, TokenBudget::Fixed { k: 100 }, &[EOS]).unwrap(),
    );
    let wrong = model.head_blocks(frequency.blocks().unwrap()).unwrap();
    let e = ShortlistDrafter::with_head_blocks(drafter_model.clone(), dynamic.clone(), VOCAB, wrong)
        .unwrap_err()
        .to_string();
    assert!(e.contains("another shortlist policy"), "{e}");
    // Blocks made once from the full model (sharing its head with the drafter) draft exactly as
    // the drafter's own.
    let shared = model.head_blocks(dynamic.blocks().unwrap()).unwrap();
    let mut a = ShortlistDrafter::with_head_blocks(drafter_model.clone(), dynamic.clone(), VOCAB, shared).unwrap();
    let mut b = ShortlistDrafter::new(drafter_model, dynamic, VOCAB).unwrap();
    let context = [1u32, 54, 260, 223, 83, 87];
    let greedy = SamplingConfig::greedy();
    let mut rng = StdRng::seed_from_u64(0);
    let da = a.propose(&context, 5, &greedy, &mut rng).unwrap();
    let db = b.propose(&context, 5, &greedy, &mut rng).unwrap();
    assert_eq!(da.tokens.len(), 5);
    assert_eq!(da.tokens, db.tokens);
    assert_eq!(a.stats().shortlist_tokens, b.stats().shortlist_tokens);
}
