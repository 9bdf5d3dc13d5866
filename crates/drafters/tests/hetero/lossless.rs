//! Every bridge emits the target's distribution: G-tests on histograms of whole generated
//! sequences against their exact probabilities, with fixed seeds, and the same harness
//! rejecting a drafter that misreports its distribution.
//!
//! Most tests use a closed-form target (a Markov chain over the 320 target ids whose support is
//! eight tokens chosen to exercise every case: shared tokens, target-only tokens, tokens the
//! drafter splits) and a closed-form drafter model, so tens of thousands of sequences go
//! through the real bridge code in seconds. One test runs real burn models on both sides.

use std::ops::ControlFlow;

use anyspec_core::toy::{MarkovChain, MarkovTarget};
use anyspec_core::{Draft, DraftOrigin, Drafter, GenerationConfig, SamplingConfig, Target, generate};
use anyspec_drafters::hetero::{DEFAULT_LOOKBEHIND, DrafterModel};
use anyspec_drafters::{Bridge, HeteroConfig, HeteroModelDrafter, RdkForm, SlemDrafter};
use anyspec_models::{Session, TextTokenizer};
use rand::rngs::StdRng;
use rand::{RngCore, SeedableRng};

use crate::fixtures::{MarkovDrafterModel, affinity, drafter_dir, id_map, load, prompt, target_dir, tokenizer};
use crate::stats::{GTest, PASS_P_VALUE, POWER_P_VALUE, g_test};

/// Target tokens the closed-form target emits: `Ġthe`, `e`, `s`, `Ġt` and `oding` are shared
/// with the drafter; `Ġmodel`, `poses` and `Ġtoken` are target-only (the drafter spells them
/// with several tokens).
const SUPPORT: [&str; 8] = ["Ġthe", "e", "s", "Ġt", "Ġmodel", "oding", "poses", "Ġtoken"];
const LENGTH: usize = 3;
const SAMPLES: usize = 12_000;

fn target_id(tokenizer: &TextTokenizer, token: &str) -> u32 {
    tokenizer.inner().token_to_id(token).unwrap()
}

/// A target chain over 320 ids, every row random on [`SUPPORT`].
fn target_chain(seed: u64) -> (MarkovChain, Vec<u32>) {
    let tok = tokenizer(&target_dir());
    let support: Vec<u32> = SUPPORT.iter().map(|s| target_id(&tok, s)).collect();
    let mut rng = StdRng::seed_from_u64(seed);
    let rows = (0..320)
        .map(|_| {
            let weights: Vec<f64> = support.iter().map(|_| 0.2 + f64::from(rng.next_u32() % 1000) / 1000.0).collect();
            let total: f64 = weights.iter().sum();
            let mut row = vec![0.0f32; 320];
            for (&t, w) in support.iter().zip(&weights) {
                row[t as usize] = (w / total) as f32;
            }
            row
        })
        .collect();
    (MarkovChain::new(rows).unwrap(), support)
}

/// A closed-form drafter: random logits on the drafter tokens that spell the support, two
/// tokens of its own (`Ġfox`, `qu`: outside the target vocabulary) and pieces of target-only
/// tokens.
fn drafter_model(seed: u64) -> MarkovDrafterModel {
    let tok = tokenizer(&drafter_dir());
    let support: Vec<u32> =
        ["Ġthe", "e", "s", "Ġt", "Ġ", "m", "odel", "oding", "pos", "es", "Ġto", "ken", "Ġfox", "qu"]
            .iter()
            .map(|s| tok.inner().token_to_id(s).unwrap())
            .collect();
    MarkovDrafterModel::new(322, &support, seed)
}

fn token_level_mock(bridge: Bridge) -> HeteroModelDrafter<MarkovDrafterModel> {
    HeteroModelDrafter::with_model(
        drafter_model(5),
        HeteroConfig::new(bridge),
        id_map(),
        tokenizer(&target_dir()),
        tokenizer(&drafter_dir()),
        320,
    )
    .unwrap()
}

/// Histogram of `LENGTH`-token generations indexed by the support positions, and the exact
/// probabilities of the same cells.
fn histogram_and_exact(
    target: &mut dyn Target,
    drafter: &mut dyn Drafter,
    chain: &MarkovChain,
    support: &[u32],
    sampling: SamplingConfig,
    samples: usize,
    seed: u64,
) -> (Vec<u64>, Vec<f64>, anyspec_core::Stats) {
    let prompt = prompt();
    let config = GenerationConfig {
        gamma: 3,
        max_new_tokens: LENGTH,
        sampling: sampling.clone(),
        ..GenerationConfig::default()
    };
    let cells = support.len().pow(LENGTH as u32);
    let position = |t: u32| support.iter().position(|&s| s == t).expect("a token of the support");
    let mut counts = vec![0u64; cells];
    let mut rng = StdRng::seed_from_u64(seed);
    let mut stats = anyspec_core::Stats::default();
    for _ in 0..samples {
        let out = generate(target, Some(drafter), &prompt, &config, &mut rng, &mut |_| ControlFlow::Continue(()))
            .expect("generation succeeds");
        stats.merge(&out.stats);
        counts[out.tokens.iter().rev().fold(0, |acc, &t| acc * support.len() + position(t))] += 1;
    }
    let transformed = chain.transformed(&sampling).unwrap();
    let last = *prompt.last().unwrap();
    let exact = (0..cells)
        .map(|i| {
            let tokens: Vec<u32> =
                (0..LENGTH).map(|k| support[(i / support.len().pow(k as u32)) % support.len()]).collect();
            transformed.sequence_probability(last, &tokens).unwrap()
        })
        .collect();
    (counts, exact, stats)
}

fn mock_test(drafter: &mut dyn Drafter, sampling: SamplingConfig, seed: u64) -> (GTest, anyspec_core::Stats) {
    let (chain, support) = target_chain(3);
    let mut target = MarkovTarget::new(chain.clone()).unwrap();
    let (counts, exact, stats) = histogram_and_exact(&mut target, drafter, &chain, &support, sampling, SAMPLES, seed);
    (g_test(&counts, &exact), stats)
}

fn assert_lossless(name: &str, drafter: &mut dyn Drafter, sampling: SamplingConfig) {
    let (test, stats) = mock_test(drafter, sampling, 11);
    assert!(test.p_value > PASS_P_VALUE, "{name}: {test:?}");
    // Not vacuous: drafts were proposed and accepted, and also rejected.
    assert!(stats.accepted > 1000 && stats.rejected > 1000, "{name}: {stats:?}");
}

#[test]
fn union_is_lossless() {
    let mut drafter = token_level_mock(Bridge::Union);
    assert_lossless("union", &mut drafter, SamplingConfig::new(1.0, None, 1.0).unwrap());
}

#[test]
fn tli_is_lossless_at_several_temperatures() {
    for temperature in [1.0, 0.6] {
        let mut drafter = token_level_mock(Bridge::Tli);
        assert_lossless("tli", &mut drafter, SamplingConfig::new(temperature, None, 1.0).unwrap());
    }
}

#[test]
fn tli_with_shared_ids_context_is_lossless() {
    let mut config = HeteroConfig::new(Bridge::Tli);
    config.context = anyspec_drafters::hetero::ContextMapping::SharedIds;
    let mut drafter = HeteroModelDrafter::with_model(
        drafter_model(5),
        config,
        id_map(),
        tokenizer(&target_dir()),
        tokenizer(&drafter_dir()),
        320,
    )
    .unwrap();
    assert_lossless("tli shared ids", &mut drafter, SamplingConfig::new(1.0, None, 1.0).unwrap());
}

#[test]
fn tli_with_top_k_and_an_unpruned_head_is_lossless() {
    let mut config = HeteroConfig::new(Bridge::Tli);
    config.prune_head = false;
    let mut drafter = HeteroModelDrafter::with_model(
        drafter_model(5),
        config,
        id_map(),
        tokenizer(&target_dir()),
        tokenizer(&drafter_dir()),
        320,
    )
    .unwrap();
    assert_lossless("tli full head", &mut drafter, SamplingConfig::new(0.9, Some(5), 1.0).unwrap());
}

#[test]
fn rdk_exact_and_taylor_are_lossless() {
    let mut exact = token_level_mock(Bridge::Rdk(RdkForm::Exact(affinity())));
    assert_lossless("rdk exact", &mut exact, SamplingConfig::new(1.0, None, 1.0).unwrap());
    let matrix = affinity();
    let (offsets, columns, values) = matrix.csr();
    let scores = anyspec_core::projection::SparseScores::from_csr(
        320,
        offsets.to_vec(),
        columns.to_vec(),
        values.iter().map(|v| v * 0.5).collect(),
    )
    .unwrap();
    let mut taylor = token_level_mock(Bridge::Rdk(RdkForm::Taylor { scores, tau: 1.0 }));
    let (test, _) = mock_test(&mut taylor, SamplingConfig::new(1.0, None, 1.0).unwrap(), 12);
    assert!(test.p_value > PASS_P_VALUE, "rdk taylor: {test:?}");
}

#[test]
fn slem_is_lossless_when_sampling() {
    let mut drafter = SlemDrafter::with_model(
        drafter_model(5),
        tokenizer(&target_dir()),
        tokenizer(&drafter_dir()),
        DEFAULT_LOOKBEHIND,
    )
    .unwrap();
    assert_lossless("slem", &mut drafter, SamplingConfig::new(1.0, None, 1.0).unwrap());
}

/// TLI, but the draft reports the drafter's distribution *before* renormalization on the
/// intersection (the unprojected q): the bug a missing projection step would be.
struct Unprojected<D>(D, f32);

impl<D: Drafter> Drafter for Unprojected<D> {
    fn propose(
        &mut self,
        context: &[u32],
        max_tokens: usize,
        sampling: &SamplingConfig,
        rng: &mut dyn RngCore,
    ) -> anyspec_core::Result<Draft> {
        let mut draft = self.0.propose(context, max_tokens, sampling, rng)?;
        if let DraftOrigin::Sampled { distributions, .. } = &mut draft.origin {
            for q in distributions {
                q.iter_mut().for_each(|x| *x *= self.1);
            }
        }
        Ok(draft)
    }
}

#[test]
fn the_harness_rejects_a_drafter_that_reports_the_unprojected_distribution() {
    let mut broken = Unprojected(token_level_mock(Bridge::Tli), 0.5);
    let (test, _) = mock_test(&mut broken, SamplingConfig::new(1.0, None, 1.0).unwrap(), 11);
    assert!(test.p_value < POWER_P_VALUE, "{test:?}");
}

/// Real burn models on both sides: the target's exact two-token distribution from its own
/// forward passes, against a histogram of TLI generations.
#[test]
fn tli_through_burn_models_follows_the_target_distribution() {
    let sampling = SamplingConfig::new(0.5, None, 1.0).unwrap();
    let target_model = load(&target_dir());
    let prompt = prompt();
    let mut session = Session::new(target_model.clone());
    let first =
        anyspec_core::sampling::logits_to_probs(&session.logits_on_host(&prompt, 1).unwrap()[0], &sampling).unwrap();
    // Cells: the 12 likeliest first tokens × every second token, plus one cell for the rest.
    let mut order: Vec<u32> = (0..320).collect();
    order.sort_by(|&a, &b| first[b as usize].total_cmp(&first[a as usize]));
    let heads = &order[..12];
    let mut exact = Vec::new();
    for &t1 in heads {
        let second = anyspec_core::sampling::logits_to_probs(
            &session.logits_on_host(&[prompt.clone(), vec![t1]].concat(), 1).unwrap()[0],
            &sampling,
        )
        .unwrap();
        exact.extend(second.iter().map(|&p| f64::from(first[t1 as usize]) * f64::from(p)));
    }
    exact.push(1.0 - exact.iter().sum::<f64>());

    let mut target = anyspec_models::LlamaTarget::new(target_model);
    let mut drafter = crate::greedy::token_level(Bridge::Tli);
    let config =
        GenerationConfig { gamma: 2, max_new_tokens: 2, sampling: sampling.clone(), ..GenerationConfig::default() };
    let mut rng = StdRng::seed_from_u64(21);
    let mut counts = vec![0u64; exact.len()];
    let mut stats = anyspec_core::Stats::default();
    for _ in 0..1500 {
        let out =
            generate(&mut target, Some(&mut drafter), &prompt, &config, &mut rng, &mut |_| ControlFlow::Continue(()))
                .unwrap();
        stats.merge(&out.stats);
        let cell = match heads.iter().position(|&h| h == out.tokens[0]) {
            Some(i) => i * 320 + out.tokens[1] as usize,
            None => exact.len() - 1,
        };
        counts[cell] += 1;
    }
    let test = g_test(&counts, &exact);
    assert!(test.p_value > PASS_P_VALUE, "{test:?}");
    assert!(stats.accepted > 100, "{stats:?}");
}

#[allow(dead_code)]
fn _uses(_: &dyn DrafterModel) {}
