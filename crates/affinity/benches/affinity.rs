//! Affinity benchmarks: build throughput (corpus → co-occurrence counts → M) and the cost of
//! RDK's two forms against token-level intersection (TLI) as the baseline, in the same run.
//!
//! `cargo bench -p anyspec-affinity` counts `../shared/corpora/en-wikitext2` (1.2 MB) with the
//! Llama 3 tokenizer when `../shared` is there (set `ANYSPEC_SHARED` to another directory), and
//! otherwise the committed fixture corpus repeated to about 1 MB with the fixture tokenizer. The
//! projection benchmarks use synthetic matrices at |V| = 8k and 128k with 32 entries per row and
//! a drafter pruned to a quarter of the vocabulary. The smoke run (`cargo test --benches`) uses
//! the fixture and |V| = 8k only.

use std::path::{Path, PathBuf};

use anyspec_affinity::{AffinityParams, CooccurrenceCounts, build_affinity};
use anyspec_core::NoProgress;
use anyspec_core::projection::{
    ABSENT, AffinityMatrix, IdMap, SparseScores, rdk_dense_kernel_first_order, rdk_exact, rdk_taylor_eq3,
    tli_projection,
};
use anyspec_dict_builder::CorpusOptions;
use anyspec_vocab_map::Vocabulary;
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Entries per row of the synthetic matrices (the default `--top-k` of `anyspec affinity build`).
const TOP_K: usize = 32;

fn full_run() -> bool {
    std::env::args().any(|a| a == "--bench")
}

fn shared_dir() -> PathBuf {
    std::env::var_os("ANYSPEC_SHARED")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared"))
}

/// The corpus file and tokenizer to count, and the corpus size in bytes.
fn build_inputs() -> (PathBuf, Vocabulary, u64) {
    let shared = shared_dir();
    let corpus = shared.join("corpora/en-wikitext2/wikitext2_raw_test_part.txt");
    let tokenizer = shared.join("tokenizers/llama3/tokenizer.json");
    if full_run() && corpus.is_file() && tokenizer.is_file() {
        let vocab = Vocabulary::from_file(&tokenizer).expect("the shared Llama 3 tokenizer loads");
        let size = std::fs::metadata(&corpus).map(|m| m.len()).unwrap_or(0);
        return (corpus, vocab, size);
    }
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let text = std::fs::read_to_string(data.join("corpus.txt")).expect("the fixture corpus is committed");
    let repeats = if full_run() { (1 << 20) / text.len().max(1) + 1 } else { 4 };
    let path = std::env::temp_dir().join(format!("anyspec-affinity-bench-{}.txt", std::process::id()));
    std::fs::write(&path, text.repeat(repeats)).expect("the temporary corpus can be written");
    let vocab = Vocabulary::from_file(&data.join("tokenizer.json")).expect("the fixture tokenizer loads");
    (path, vocab, (text.len() * repeats) as u64)
}

fn bench_build(c: &mut Criterion) {
    let (corpus, vocab, bytes) = build_inputs();
    let params = AffinityParams::default();
    let mut group = c.benchmark_group("affinity_build");
    group.sample_size(10);
    group.throughput(Throughput::Bytes(bytes));
    for threads in [1usize, 2] {
        group.bench_with_input(BenchmarkId::new("count_and_build_threads", threads), &threads, |b, &threads| {
            b.iter(|| {
                let counts = CooccurrenceCounts::count_files(
                    std::slice::from_ref(&corpus),
                    &CorpusOptions::default(),
                    &vocab,
                    params.window,
                    params.max_pairs,
                    threads,
                    &NoProgress,
                )
                .expect("the corpus counts");
                build_affinity(&counts, vocab.fingerprint(), &params, "bench").expect("the matrix builds")
            })
        });
    }
    group.finish();
}

/// Random scores with `TOP_K` entries per row (the row's own token among them), in [0, 4).
fn synthetic_scores(n: usize, rng: &mut StdRng) -> SparseScores {
    let mut row_offsets = vec![0usize];
    let (mut columns, mut values) = (Vec::with_capacity(n * TOP_K), Vec::with_capacity(n * TOP_K));
    for row in 0..n {
        let mut cols: Vec<u32> = (0..TOP_K - 1).map(|_| rng.random_range(0..n as u32)).collect();
        cols.push(row as u32);
        cols.sort_unstable();
        cols.dedup();
        values.extend(cols.iter().map(|_| rng.random_range(0.0f32..4.0)));
        columns.extend(cols);
        row_offsets.push(columns.len());
    }
    SparseScores::from_csr(n, row_offsets, columns, values).expect("well-formed synthetic scores")
}

fn bench_projections(c: &mut Criterion) {
    let sizes: &[usize] = if full_run() { &[8 << 10, 128 << 10] } else { &[8 << 10] };
    let mut group = c.benchmark_group("rdk_projection");
    for &n in sizes {
        let mut rng = StdRng::seed_from_u64(7);
        let scores = synthetic_scores(n, &mut rng);
        let matrix = AffinityMatrix::from_scores(&scores, 1.0).expect("synthetic rows are valid");
        // The drafter shares (keeps) every fourth target token, as after FR pruning to 25%.
        let drafter_to_target: Vec<u32> = (0..n as u32).map(|t| if t % 4 == 0 { t } else { ABSENT }).collect();
        let map = IdMap::new(drafter_to_target, n).expect("the map is one-to-one");
        let mut q: Vec<f32> = (0..n).map(|_| rng.random_range(0.0f32..1.0).powi(8)).collect();
        let total: f32 = q.iter().sum();
        q.iter_mut().for_each(|v| *v /= total);
        group.throughput(Throughput::Elements(n as u64));
        group.bench_with_input(BenchmarkId::new("tli", n), &n, |b, _| b.iter(|| tli_projection(&q, &map).unwrap()));
        group.bench_with_input(BenchmarkId::new("tli_then_rdk_exact", n), &n, |b, _| {
            b.iter(|| rdk_exact(&tli_projection(&q, &map).unwrap(), &matrix).unwrap())
        });
        group.bench_with_input(BenchmarkId::new("tli_then_rdk_dense_kernel_first_order", n), &n, |b, _| {
            b.iter(|| rdk_dense_kernel_first_order(&tli_projection(&q, &map).unwrap(), &scores, 1.0).unwrap())
        });
        // Eq. 3 with the drafter's own distribution standing in for the target prior.
        group.bench_with_input(BenchmarkId::new("tli_then_rdk_taylor_eq3", n), &n, |b, _| {
            b.iter(|| rdk_taylor_eq3(&tli_projection(&q, &map).unwrap(), &q).unwrap())
        });
    }
    group.finish();
}

criterion_group!(benches, bench_build, bench_projections);
criterion_main!(benches);
