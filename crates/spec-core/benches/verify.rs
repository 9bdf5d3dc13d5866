//! Cost of verifying a γ = 5 draft against a Llama-3-sized (128,256-token) target distribution.
//!
//! Acceptance costs O(1) per drafted token; one pass over the vocabulary is needed to emit the
//! next token (the residual after a rejection, or the bonus token after full acceptance). The
//! baseline in the same run is that single pass alone (`sample` of one row), so the reported
//! ratio says how close verification is to the unavoidable minimum.

use std::hint::black_box;

use anyspec_core::sampling::{SamplingConfig, logits_to_probs, sample};
use anyspec_core::verify::{exact_match, speculative_sampling, speculative_sampling_point_mass};
use criterion::{Criterion, criterion_group, criterion_main};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const VOCAB: usize = 128_256;
const GAMMA: usize = 5;

/// Logits shaped like a language model's: Gaussian with a wide spread, so a few hundred tokens
/// hold most of the mass.
fn random_logits(rng: &mut StdRng) -> Vec<f32> {
    (0..VOCAB)
        .map(|_| {
            let (u1, u2) = (1.0 - rng.random::<f32>(), rng.random::<f32>());
            3.0 * (-2.0 * u1.ln()).sqrt() * (std::f32::consts::TAU * u2).cos()
        })
        .collect()
}

fn random_probs(rng: &mut StdRng) -> Vec<f32> {
    logits_to_probs(&random_logits(rng), &SamplingConfig::default()).unwrap()
}

fn bench(c: &mut Criterion) {
    let mut rng = StdRng::seed_from_u64(0);
    let target: Vec<Vec<f32>> = (0..=GAMMA).map(|_| random_probs(&mut rng)).collect();
    let draft_probs: Vec<Vec<f32>> = (0..GAMMA).map(|_| random_probs(&mut rng)).collect();

    // Drafts the target accepts for certain (p(d) ≥ q(d)) and drafts it rejects at once.
    let accepted: Vec<u32> =
        (0..GAMMA).map(|j| (0..VOCAB).find(|&i| target[j][i] >= draft_probs[j][i]).unwrap() as u32).collect();
    let mut rejected = accepted.clone();
    rejected[0] = (0..VOCAB).find(|&i| target[0][i] < 0.01 * draft_probs[0][i]).unwrap() as u32;

    let mut group = c.benchmark_group("verify γ=5, |V|=128256");
    group.bench_function("baseline: one sample from one row", |b| {
        b.iter(|| sample(black_box(&target[0]), &mut rng).unwrap())
    });
    group.bench_function("speculative sampling, all accepted (+bonus)", |b| {
        b.iter(|| speculative_sampling(black_box(&target), &accepted, &draft_probs, &mut rng).unwrap())
    });
    group.bench_function("speculative sampling, first rejected (+residual)", |b| {
        b.iter(|| speculative_sampling(black_box(&target), &rejected, &draft_probs, &mut rng).unwrap())
    });
    group.bench_function("point mass, deterministic draft", |b| {
        b.iter(|| speculative_sampling_point_mass(black_box(&target), &accepted, &mut rng).unwrap())
    });
    group.bench_function("exact match (samples every position)", |b| {
        b.iter(|| exact_match(black_box(&target), &accepted, &mut rng).unwrap())
    });
    group.bench_function("logits → probs, one row, T=0.8 top-p=0.9", |b| {
        let logits = random_logits(&mut rng);
        let config = SamplingConfig::new(0.8, None, 0.9).unwrap();
        b.iter(|| logits_to_probs(black_box(&logits), &config).unwrap())
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
