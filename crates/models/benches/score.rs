//! Cost of scoring k = 1..8 new positions in one forward pass (after a cached prefix), the number
//! that decides whether verifying a γ-token draft can be cheaper than γ autoregressive steps.
//!
//! Uses the checkpoint in `ANYSPEC_BENCH_MODEL` when set (for example the one
//! `xtask/python/bench_vs_transformers.py` writes), else the tiny conformance fixture.
//! `cargo bench -p anyspec-models --bench score`; compare each k with k = 1.

use std::hint::black_box;
use std::path::PathBuf;

use anyspec_kernels::readback::read_f32;
use anyspec_models::{Checkpoint, DeviceChoice, Session};
use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};

const PREFIX: usize = 64;

fn score_k(c: &mut Criterion) {
    let dir = std::env::var_os("ANYSPEC_BENCH_MODEL")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/llama3-gqa"));
    let device = DeviceChoice::Cpu.device().expect("the CPU device is always compiled");
    let model = Checkpoint::open(&dir).and_then(|c| c.load_model(&device)).expect("a loadable checkpoint");
    let vocab = model.config().vocab_size as u32;
    let sequence: Vec<u32> = (0..PREFIX as u32 + 8).map(|i| (i * 7 + 3) % vocab.min(300)).collect();
    let mut session = Session::new(model);
    session.logits(&sequence[..PREFIX], 1).expect("prefill");

    let mut group = c.benchmark_group("score_k_positions");
    for k in 1..=8 {
        group.bench_with_input(BenchmarkId::from_parameter(k), &k, |b, &k| {
            b.iter(|| {
                session.truncate(PREFIX);
                let logits = session.logits(black_box(&sequence[..PREFIX + k]), k).expect("forward");
                // Read one number back so the pass has really run.
                black_box(read_f32(logits.narrow(0, 0, 1).narrow(1, 0, 1)).expect("readback"))
            })
        });
    }
    group.finish();
}

criterion_group!(benches, score_k);
criterion_main!(benches);
