//! Speed of loading tokenizers, building vocabulary maps and counting decompositions.
//!
//! Uses Llama-3.1 and Qwen2 from `../shared/tokenizers` when present (the issue's targets:
//! building the map in either mode well under a second once both are loaded, the full Table 8
//! count in seconds), and the committed fixtures otherwise, so that `cargo test --benches` works
//! on a fresh clone.
//!
//! ```text
//! cargo bench -p anyspec-vocab-map --bench vocab
//! ```

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyspec_core::NoProgress;
use anyspec_vocab_map::stats::{DrafterTrie, count_decompositions, shortest_tokens};
use anyspec_vocab_map::{MatchMode, VocabMap, Vocabulary};
use criterion::{Criterion, criterion_group, criterion_main};

fn paths() -> (PathBuf, PathBuf, usize) {
    let shared = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/tokenizers");
    let llama = shared.join("llama3.1/tokenizer.json");
    let qwen = shared.join("qwen2/tokenizer.json");
    if llama.exists() && qwen.exists() {
        (llama, qwen, 150_000)
    } else {
        let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
        (data.join("bytelevel.json"), data.join("metaspace.json"), 600)
    }
}

fn benches(c: &mut Criterion) {
    let (target_path, drafter_path, shortest) = paths();
    let mut group = c.benchmark_group("vocab");
    group.sample_size(10).measurement_time(Duration::from_secs(10));

    group.bench_function("load_target", |b| b.iter(|| Vocabulary::from_file(&target_path).unwrap()));
    group.bench_function("load_drafter", |b| b.iter(|| Vocabulary::from_file(&drafter_path).unwrap()));

    let target = Vocabulary::from_file(&target_path).unwrap();
    let drafter = Vocabulary::from_file(&drafter_path).unwrap();
    for mode in [MatchMode::Raw, MatchMode::Bytes] {
        group.bench_function(format!("build_{mode}"), |b| b.iter(|| VocabMap::build(&target, &drafter, mode)));
    }

    // Table 8: every drafter token against the trie of the drafter's own shortest tokens.
    let keep = shortest_tokens(&drafter, shortest);
    group.bench_function("decompositions_trie", |b| b.iter(|| DrafterTrie::build(&drafter, Some(&keep))));
    let trie = DrafterTrie::build(&drafter, Some(&keep));
    group.bench_function("decompositions_count", |b| b.iter(|| count_decompositions(&drafter, &trie, &NoProgress)));
    group.finish();
}

criterion_group!(vocab, benches);
criterion_main!(vocab);
