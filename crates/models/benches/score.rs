//! Cost of scoring k = 1..8 new positions in one forward pass (after a cached prefix), the number
//! that decides whether verifying a γ-token draft can be cheaper than γ autoregressive steps.
//! Two prefixes: 64 positions (`score_k_positions`, the weights' share of a pass) and 512
//! (`score_k_positions_after_512`, about the demo's longer prompts with their answers, where
//! each new position's attention over the cache is a cost of its own, paid again per position).
//!
//! Uses the checkpoint in `ANYSPEC_BENCH_MODEL` when set (for example the one
//! `xtask/python/bench_vs_transformers.py` writes), else the tiny conformance fixture.
//! `cargo bench -p anyspec-models --bench score`; compare each k with k = 1.

use std::hint::black_box;
use std::path::PathBuf;

use anyspec_kernels::readback::read_f32;
use anyspec_models::{Checkpoint, DeviceChoice, Session};
use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};

/// The prefixes scored after: a short prompt, and a long one.
const PREFIXES: [(usize, &str); 2] = [(64, "score_k_positions"), (512, "score_k_positions_after_512")];

#[allow(clippy::print_stderr)] // The note on a skipped prefix is for whoever runs the benchmark.
fn score_k(c: &mut Criterion) {
    let dir = std::env::var_os("ANYSPEC_BENCH_MODEL")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/llama3-gqa"));
    let device = DeviceChoice::Cpu.device().expect("the CPU device is always compiled");
    let model = Checkpoint::open(&dir).and_then(|c| c.load_model(&device)).expect("a loadable checkpoint");
    let vocab = model.config().vocab_size as u32;
    let room = model.config().max_position_embeddings;
    let longest = PREFIXES.iter().map(|&(p, _)| p + 8).filter(|&n| n <= room).max().unwrap_or(0);
    let sequence: Vec<u32> = (0..longest as u32).map(|i| (i * 7 + 3) % vocab.min(300)).collect();
    let mut session = Session::new(model);
    for (prefix, name) in PREFIXES {
        if prefix + 8 > room {
            eprintln!("{name}: skipped, the model takes {room} positions (the tiny fixture; set ANYSPEC_BENCH_MODEL)");
            continue;
        }
        session.truncate(0);
        session.logits(&sequence[..prefix], 1).expect("prefill");
        let mut group = c.benchmark_group(name);
        for k in 1..=8 {
            group.bench_with_input(BenchmarkId::from_parameter(k), &k, |b, &k| {
                b.iter(|| {
                    session.truncate(prefix);
                    let logits = session.logits(black_box(&sequence[..prefix + k]), k).expect("forward");
                    // Read one number back so the pass has really run.
                    black_box(read_f32(logits.narrow(0, 0, 1).narrow(1, 0, 1)).expect("readback"))
                })
            });
        }
        group.finish();
    }
}

criterion_group!(benches, score_k);
criterion_main!(benches);
