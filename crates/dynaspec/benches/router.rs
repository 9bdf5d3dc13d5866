//! The router's cost per draft position at SmolLM2's shape (input 2 × 576, hidden 256, 256
//! clusters), in one run: `Router::scores` with its default `Q8_0` kernel matrices (0.37 MB),
//! with f32 kernel matrices (`Router::with_f32_kernels`, 1.4 MB), and the plain loops the
//! kernels replaced; the ratios are the gains. Each is timed with the weights in the cache and
//! from memory, which is what happens between draft positions. Run with
//! `cargo bench -p anyspec-dynaspec --bench router`.

use anyspec_dynaspec::Router;
use criterion::{Criterion, criterion_group, criterion_main};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::hint::black_box;
use std::time::Duration;

const INPUT: usize = 2 * 576;
const HIDDEN: usize = 256;
const CLUSTERS: usize = 256;

/// The loops `Router::scores` ran before: 8-lane partial sums, which the default x86-64 target
/// compiles to SSE.
fn plain_scores(router: &Router, x: &[f32]) -> Vec<f32> {
    let (w1, b1, w2, b2) = router.weights();
    let dot = |a: &[f32], b: &[f32]| {
        let mut lanes = [0f32; 8];
        for (p, q) in a.chunks_exact(8).zip(b.chunks_exact(8)) {
            for k in 0..8 {
                lanes[k] += p[k] * q[k];
            }
        }
        lanes.iter().sum::<f32>()
    };
    let h: Vec<f32> = (0..HIDDEN).map(|j| (b1[j] + dot(&w1[j * INPUT..(j + 1) * INPUT], x)).max(0.0)).collect();
    (0..CLUSTERS).map(|m| b2[m] + dot(&w2[m * HIDDEN..(m + 1) * HIDDEN], &h)).collect()
}

/// A router with its own copy of every weight (`Clone` shares the kernel matrices).
trait CloneWeights {
    fn clone_weights(&self) -> Router;
}

impl CloneWeights for Router {
    fn clone_weights(&self) -> Router {
        let (w1, b1, w2, b2) = self.weights();
        let copy = Router::new(INPUT, HIDDEN, CLUSTERS, w1.to_vec(), b1.to_vec(), w2.to_vec(), b2.to_vec()).unwrap();
        if self.quantized() { copy } else { copy.with_f32_kernels().unwrap() }
    }
}

fn benches(c: &mut Criterion) {
    let mut rng = StdRng::seed_from_u64(0);
    let mut random = |n: usize| (0..n).map(|_| rng.random_range(-0.1f32..0.1)).collect::<Vec<f32>>();
    let router = Router::new(
        INPUT,
        HIDDEN,
        CLUSTERS,
        random(HIDDEN * INPUT),
        random(HIDDEN),
        random(CLUSTERS * HIDDEN),
        random(CLUSTERS),
    )
    .unwrap();
    let f32_router = router.clone().with_f32_kernels().unwrap();
    let x = random(INPUT);
    let (embedding, hidden) = x.split_at(INPUT / 2);
    let (a, b) = (f32_router.scores(embedding, hidden).unwrap(), plain_scores(&router, &x));
    let diff = a.iter().zip(&b).fold(0.0f32, |m, (p, q)| m.max((p - q).abs()));
    assert!(diff < 1e-4, "the f32 kernels and the plain loops disagree by {diff}");
    let mut group = c.benchmark_group("router/1152x256x256");
    group.bench_function("q8_0 kernels", |bench| bench.iter(|| router.scores(black_box(embedding), hidden).unwrap()));
    group
        .bench_function("f32 kernels", |bench| bench.iter(|| f32_router.scores(black_box(embedding), hidden).unwrap()));
    group.bench_function("plain loops", |bench| bench.iter(|| plain_scores(&router, black_box(&x))));
    // Between two draft positions the drafter's pass streams its layers and head through the
    // cache, so the router's weights come from memory: 24 copies (34 MB at f32) in turn.
    for (name, base) in [("q8_0 kernels, from memory", &router), ("f32 kernels, from memory", &f32_router)] {
        let copies: Vec<Router> = (0..24).map(|_| base.clone_weights()).collect();
        let mut turn = 0;
        group.bench_function(name, |bench| {
            bench.iter(|| {
                turn = (turn + 1) % copies.len();
                copies[turn].scores(black_box(embedding), hidden).unwrap()
            })
        });
    }
    let copies: Vec<Router> = (0..24).map(|_| router.clone_weights()).collect();
    let mut turn = 0;
    group.bench_function("plain loops, from memory", |bench| {
        bench.iter(|| {
            turn = (turn + 1) % copies.len();
            plain_scores(&copies[turn], black_box(&x))
        })
    });
    group.finish();
}

fn config() -> Criterion {
    Criterion::default()
        .sample_size(30)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(1))
}

criterion_group! { name = router; config = config(); targets = benches }
criterion_main!(router);
