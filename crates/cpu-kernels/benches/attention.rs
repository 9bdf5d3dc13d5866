//! Attention of one key-value head's queries over a KV cache at the shapes of SmolLM2-135M
//! (head width 64, three key-value heads, so a position's keys are 192 floats apart; three
//! query heads per key-value head): the queries of a k-position pass (3·k of them, k = 1..=8)
//! over a context of 128, 400 and 768 positions, on one thread.
//!
//! Throughput is reported in floating-point operations per call (`4 · queries · positions ·
//! 64`: a multiply-add for the score and one for the weighted sum per position and lane), so
//! criterion's "elements/s" is FLOP/s, to be read against the core's f32 peak (about 45 G
//! multiply-adds, 90 GFLOP/s, per core on 8-lane AVX2 FMA; the same with AVX-512 on the 2-core
//! Xeon here, whose cores retire one 16-lane FMA per cycle, and twice that on a CPU with two
//! 512-bit FMA units). Each layer's cache is small enough to stay in the L2 cache only
//! at short contexts, as in a real step, where the layers' weights pass between two visits.
//! The AVX-512 kernel reads the keys from their tiles (`KeyTiles`), as a model's cache keeps
//! them for it. Where the best kernel is the AVX-512 one, the AVX2 code runs each case beside it
//! (`.../Avx2Q8`), in the same run: the ratio is AVX-512's gain. Run with
//! `cargo bench -p anyspec-cpu-kernels --bench attention`.

use anyspec_cpu_kernels::{HeadLayout, Kernel, KeyTiles, attend_queries_with, write_key_tiles};
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::hint::black_box;
use std::time::Duration;

const WIDTH: usize = 64;
const KV_HEADS: usize = 3;
const GROUP: usize = 3;

fn config() -> Criterion {
    Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_millis(800))
}

fn benches(c: &mut Criterion) {
    let mut rng = StdRng::seed_from_u64(3);
    let stride = WIDTH * KV_HEADS;
    for context in [128, 400, 768] {
        let positions = context + 8;
        let keys: Vec<f32> = (0..positions * stride).map(|_| rng.random_range(-1.0f32..1.0)).collect();
        let values: Vec<f32> = (0..positions * stride).map(|_| rng.random_range(-1.0f32..1.0)).collect();
        let mut tiles = Vec::new();
        write_key_tiles(&mut tiles, 0, &keys, KV_HEADS, WIDTH);
        let mut group = c.benchmark_group(format!("attention/context{context}"));
        for k in 1..=8 {
            let n = GROUP * k;
            let queries: Vec<f32> = (0..n * WIDTH).map(|_| rng.random_range(-1.0f32..1.0)).collect();
            // A causal draft: row r of the pass sees the context and the rows up to itself.
            let counts: Vec<usize> = (0..n).map(|i| context + i / GROUP + 1).collect();
            let flops: usize = counts.iter().map(|&count| 4 * count * WIDTH).sum();
            group.throughput(Throughput::Elements(flops as u64));
            let mut out = vec![0.0f32; n * WIDTH];
            let layout = HeadLayout { offset: WIDTH, stride };
            let mut kernels = vec![Kernel::best()];
            if Kernel::best() == Kernel::Avx512Q8 {
                kernels.push(Kernel::Avx2Q8);
            }
            for kernel in kernels {
                let name = if kernel == Kernel::best() { "rows".to_string() } else { format!("rows/{kernel:?}") };
                // The tiles where the kernel reads them, as a model's cache keeps them.
                let tiles =
                    KeyTiles::used_by(kernel, WIDTH).then_some(KeyTiles { data: &tiles, heads: KV_HEADS, head: 1 });
                group.bench_function(BenchmarkId::new(name, k), |b| {
                    b.iter(|| {
                        let q = black_box(&queries);
                        attend_queries_with(kernel, q, &counts, &keys, tiles, &values, layout, 0.125, &mut out);
                    });
                });
            }
        }
        group.finish();
    }
}

criterion_group! { name = attention; config = config(); targets = benches }
criterion_main!(attention);
