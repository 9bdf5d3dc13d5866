//! The model as an anyspec-core Target: greedy decoding equals transformers' `generate`, and
//! device-side verification agrees with the host rule.

use std::ops::ControlFlow;

use anyspec_core::engine::Target;
use anyspec_core::{Draft, GenerationConfig, SamplingConfig, generate};
use anyspec_models::{LlamaTarget, Verification};
use rand::SeedableRng;
use rand::rngs::StdRng;

use crate::common::{FIXTURES, load, reference};

#[test]
fn greedy_generation_equals_transformers_generate() {
    for name in FIXTURES {
        let reference = reference(name);
        for verification in [Verification::Auto, Verification::Device, Verification::Host] {
            let mut target = LlamaTarget::new(load(name)).with_verification(verification);
            let config = GenerationConfig {
                max_new_tokens: reference.greedy.len(),
                sampling: SamplingConfig::greedy(),
                ..GenerationConfig::default()
            };
            let mut rng = StdRng::seed_from_u64(0);
            let out =
                generate(
                    &mut target,
                    None,
                    &reference.input_ids,
                    &config,
                    &mut rng,
                    &mut |_| ControlFlow::Continue(()),
                )
                .unwrap();
            assert_eq!(out.tokens, reference.greedy, "{name} ({verification:?})");
        }
    }
}

#[test]
fn score_returns_the_last_draft_len_plus_one_rows() {
    let reference = reference("llama3-gqa");
    let mut target = LlamaTarget::new(load("llama3-gqa"));
    let ids = &reference.input_ids;
    let rows = target.score(&ids[..10], 3).unwrap();
    assert_eq!(rows.len(), 4);
    assert!(crate::common::max_abs_diff(&rows, &reference.logits[6..10]) <= 1e-4);
    // Roll back to 8 tokens and continue with a different suffix: rows for positions 8..12.
    target.rollback(8).unwrap();
    let rows = target.score(&ids[..12], 3).unwrap();
    assert!(crate::common::max_abs_diff(&rows, &reference.logits[8..12]) <= 1e-4);
    assert_eq!(target.max_sequence_len(), Some(128));
}

#[test]
fn device_and_host_verification_agree_on_sampled_steps() {
    // Same seed, same draft: with temperature 1 both paths consume uniforms differently, so
    // compare the distribution of accepted lengths instead of individual verdicts.
    let reference = reference("qwen2-tied-bf16");
    let ids = &reference.input_ids[..12];
    let draft = Draft::deterministic(reference.input_ids[12..15].to_vec());
    let sampling = SamplingConfig::default();
    let mut counts = [[0u32; 4]; 2];
    for (k, verification) in [Verification::Device, Verification::Host].into_iter().enumerate() {
        let mut target = LlamaTarget::new(load("qwen2-tied-bf16")).with_verification(verification);
        let mut rng = StdRng::seed_from_u64(42);
        let mut sequence = ids.to_vec();
        sequence.extend_from_slice(&draft.tokens);
        for _ in 0..400 {
            let verdict = target
                .verify(&sequence, &draft, &sampling, anyspec_core::DeterministicRule::PointMass, &mut rng)
                .unwrap();
            counts[k][verdict.accepted] += 1;
            target.rollback(ids.len()).unwrap();
        }
    }
    // 400 draws per path: a count's standard deviation is at most 10, so 60 is a 4σ bound on
    // the difference of two counts from the same distribution.
    for j in 0..4 {
        let (a, b) = (f64::from(counts[0][j]), f64::from(counts[1][j]));
        assert!((a - b).abs() <= 60.0, "accepted length {j}: device {a}, host {b} (counts {counts:?})");
    }
}
