//! Measured acceptance matches theory: α = Σ min(p, q) per projection, and the engine's tokens
//! per step match (1 − α^{γ+1}) / (1 − α) when α is the same at every position.

use std::ops::ControlFlow;

use anyspec_core::projection::{ABSENT, IdMap, rdk_exact, tli_projection, union_projection};
use anyspec_core::sampling::sample;
use anyspec_core::theory::{acceptance_rate, expected_tokens_per_step};
use anyspec_core::toy::{Bridge, DraftMode, MarkovChain, MarkovDrafter, MarkovTarget};
use anyspec_core::verify::speculative_sampling;
use anyspec_core::{GenerationConfig, SamplingConfig, generate};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::lossless::affinity;

const TRIALS: usize = 200_000;

fn random_distribution(n: usize, rng: &mut StdRng) -> Vec<f32> {
    MarkovChain::random(1, n, 1.5, rng).next(0).unwrap().to_vec()
}

/// Asserts that `successes / TRIALS` lies within 5 standard errors of `alpha`.
fn assert_rate(name: &str, successes: usize, alpha: f64) {
    let measured = successes as f64 / TRIALS as f64;
    let sigma = (alpha * (1.0 - alpha) / TRIALS as f64).sqrt().max(1e-9);
    assert!(
        (measured - alpha).abs() < 5.0 * sigma,
        "{name}: measured acceptance {measured:.5}, theory α = {alpha:.5} (σ = {sigma:.5})"
    );
}

/// One drafted token per trial: counts how often the target accepts it.
fn measure(
    p: &[f32],
    q_on_target: &[f32],
    draw: &mut dyn FnMut(&mut StdRng) -> Option<u32>,
    rng: &mut StdRng,
) -> usize {
    let rows = [p.to_vec(), p.to_vec()];
    (0..TRIALS)
        .filter(|_| match draw(rng) {
            Some(t) => speculative_sampling(&rows, &[t], &[q_on_target], rng).unwrap().accepted == 1,
            None => false, // a drafted token outside the target vocabulary is always rejected
        })
        .count()
}

#[test]
fn acceptance_matches_alpha_for_every_projection() {
    let mut rng = StdRng::seed_from_u64(42);
    let target_size = 6;
    let p = random_distribution(target_size, &mut rng);
    let map = IdMap::new(vec![0, ABSENT, 2, 5, 1, ABSENT, ABSENT], target_size).unwrap();
    let q = random_distribution(map.drafter_size(), &mut rng);

    // Same vocabulary.
    let q_same = random_distribution(target_size, &mut rng);
    let hits = measure(&p, &q_same, &mut |r| Some(sample(&q_same, r).unwrap()), &mut rng);
    assert_rate("same vocabulary", hits, acceptance_rate(&p, &q_same).unwrap());

    // Union: sample in the drafter vocabulary; α = Σ_{T∩D} min(p, q).
    let union = union_projection(&q, &map).unwrap();
    let hits = measure(&p, &union.on_target, &mut |r| map.target_of(sample(&q, r).unwrap()), &mut rng);
    assert_rate("union", hits, acceptance_rate(&p, &union.on_target).unwrap());

    // TLI: the renormalized restriction, which accepts more than union.
    let tli = tli_projection(&q, &map).unwrap();
    let hits = measure(&p, &tli, &mut |r| Some(sample(&tli, r).unwrap()), &mut rng);
    let alpha_tli = acceptance_rate(&p, &tli).unwrap();
    assert_rate("TLI", hits, alpha_tli);
    assert!(alpha_tli >= acceptance_rate(&p, &union.on_target).unwrap());

    // RDK over a 4-token target (the shared affinity fixture).
    let p4 = random_distribution(4, &mut rng);
    let map4 = IdMap::new(vec![2, ABSENT, 0, 3, ABSENT], 4).unwrap();
    let q5 = random_distribution(5, &mut rng);
    let rdk = rdk_exact(&tli_projection(&q5, &map4).unwrap(), &affinity()).unwrap();
    assert!(rdk[1] > 0.0, "RDK must reach target token 1, which the drafter lacks");
    let hits = measure(&p4, &rdk, &mut |r| Some(sample(&rdk, r).unwrap()), &mut rng);
    assert_rate("RDK", hits, acceptance_rate(&p4, &rdk).unwrap());
}

#[test]
fn tokens_per_step_match_the_closed_form_when_alpha_is_constant() {
    // Every row of each chain is the same distribution, so α is the same at every position and
    // (1 − α^{γ+1}) / (1 − α) is exact.
    let mut rng = StdRng::seed_from_u64(7);
    let vocab = 5;
    let p = random_distribution(vocab, &mut rng);
    let q = random_distribution(vocab, &mut rng);
    let target = MarkovTarget::new(MarkovChain::new(vec![p.clone(); vocab]).unwrap()).unwrap();
    let drafter =
        MarkovDrafter::new(MarkovChain::new(vec![q.clone(); vocab]).unwrap(), Bridge::Same, DraftMode::Sample).unwrap();
    let alpha = acceptance_rate(&p, &q).unwrap();
    for gamma in [1, 3, 6] {
        let (mut target, mut drafter) = (target.clone(), drafter.clone());
        let config = GenerationConfig {
            gamma,
            max_new_tokens: 1_000_000,
            sampling: SamplingConfig::default(),
            ..GenerationConfig::default()
        };
        // 400 generations of 100·(γ + 1) tokens; only the last step of each may be shortened by
        // the token limit, a bias far inside the tolerance.
        let generations = 400;
        let mut emitted = 0usize;
        let mut stats = anyspec_core::Stats::default();
        for _ in 0..generations {
            let config = GenerationConfig { max_new_tokens: 100 * (gamma + 1), ..config.clone() };
            let g =
                generate(&mut target, Some(&mut drafter), &[0], &config, &mut rng, &mut |_| ControlFlow::Continue(()))
                    .unwrap();
            emitted += g.tokens.len();
            stats.merge(&g.stats);
        }
        let expected = expected_tokens_per_step(alpha, gamma).unwrap();
        // Tokens per step is a mean of values in 1..=γ+1: its standard error is below
        // (γ + 1) / (2 √steps).
        let tolerance = 5.0 * (gamma as f64 + 1.0) / (2.0 * (stats.steps as f64).sqrt());
        assert_eq!(emitted as u64, stats.generated);
        assert!(
            (stats.tokens_per_step() - expected).abs() < tolerance,
            "γ = {gamma}: measured {:.4} tokens/step, theory {expected:.4} (α = {alpha:.4})",
            stats.tokens_per_step()
        );
        assert_rate_loose(stats.acceptance_rate(), alpha, gamma);
    }
}

/// Per-token acceptance over whole drafts is biased by stopping at the first rejection: the
/// accepted/drafted ratio equals (E[tokens] − 1) / γ, not α. Check that identity instead.
fn assert_rate_loose(measured: f64, alpha: f64, gamma: usize) {
    let expected = (expected_tokens_per_step(alpha, gamma).unwrap() - 1.0) / gamma as f64;
    assert!((measured - expected).abs() < 0.01, "accepted/drafted {measured:.4}, expected {expected:.4}");
}

#[test]
fn acceptance_of_a_wrong_rule_is_outside_the_interval() {
    // The interval check has power: a rule that accepts with probability p (ignoring q) measures
    // Σ q·p, not α.
    let mut rng = StdRng::seed_from_u64(3);
    let p = random_distribution(6, &mut rng);
    let q = random_distribution(6, &mut rng);
    let hits = (0..TRIALS)
        .filter(|_| {
            let d = sample(&q, &mut rng).unwrap() as usize;
            rng.random::<f64>() < f64::from(p[d])
        })
        .count();
    let alpha = acceptance_rate(&p, &q).unwrap();
    let measured = hits as f64 / TRIALS as f64;
    let sigma = (alpha * (1.0 - alpha) / TRIALS as f64).sqrt();
    assert!((measured - alpha).abs() > 5.0 * sigma, "a wrong rule measured {measured}, α = {alpha}");
}
