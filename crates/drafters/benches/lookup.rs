//! Per-proposal latency of the drafters: prompt lookup over a long context (its incremental
//! index keeps this flat as the context grows) and the dictionary drafter.

use std::path::Path;
use std::sync::Arc;

use anyspec_dict_builder::{BuildParams, Dictionary, TableEntry, encode_dictionary};
use anyspec_drafters::{DictionaryDrafter, PromptLookup, PromptLookupConfig};
use anyspec_vocab_map::Fingerprint;
use criterion::{Criterion, criterion_group, criterion_main};

/// A pseudo-random token stream with repeats, like text: ids drawn from a skewed range.
fn tokens(n: usize) -> Vec<u32> {
    let mut state = 0x2545_f491_4f6c_dd1du64;
    (0..n)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let r = (state % 1000) as u32;
            (r * r) / 100 // skewed towards small ids
        })
        .collect()
}

fn benches(c: &mut Criterion) {
    let text = tokens(100_000);
    let mut group = c.benchmark_group("prompt_lookup");
    group.bench_function("append_one_token_and_propose", |b| {
        let mut drafter = PromptLookup::new(PromptLookupConfig::default()).expect("valid config");
        let mut len = 50_000;
        drafter.draft(&text[..len], 8);
        b.iter(|| {
            len = if len + 1 >= text.len() { 50_001 } else { len + 1 };
            std::hint::black_box(drafter.draft(&text[..len], 8))
        })
    });
    group.finish();

    // A dictionary of every 1..3-token window of the stream, continuation = the next 4 tokens.
    let mut entries: Vec<(Vec<u32>, Vec<u32>)> = Vec::new();
    for n in 1..=3 {
        for start in (0..20_000).step_by(3) {
            entries.push((text[start..start + n].to_vec(), text[start + n..start + n + 4].to_vec()));
        }
    }
    entries.sort();
    entries.dedup_by(|a, b| a.0 == b.0);
    let table: Vec<TableEntry<'_>> =
        entries.iter().map(|(p, c)| TableEntry { prefix: p, continuation: c, count: 1, total: 1 }).collect();
    let fingerprint = Fingerprint([0; 32]);
    let bytes = encode_dictionary(&table, &fingerprint, &BuildParams::default(), 0, 0).expect("encodes");
    let dictionary = Arc::new(Dictionary::from_bytes(bytes, Path::new("bench"), &fingerprint).expect("loads"));
    let mut drafter = DictionaryDrafter::new(dictionary);
    let mut pos = 10;
    c.bench_function("dictionary_drafter/propose", |b| {
        b.iter(|| {
            pos = if pos + 1 >= 30_000 { 10 } else { pos + 1 };
            std::hint::black_box(drafter.draft(&text[..pos], 8))
        })
    });
}

criterion_group!(drafters, benches);
criterion_main!(drafters);
