//! Dictionary benchmarks: lookup latency, counting throughput and emulation speed.
//!
//! `cargo bench -p anyspec-dict-builder` builds a realistic dictionary first — n1+n2+n3, 200k
//! entries, from the Ukrainian corpora in `../shared/corpora` with the Llama 3 tokenizer — and
//! prints its size; set `ANYSPEC_SHARED` to another `shared` directory, or
//! `ANYSPEC_BENCH_TOKENIZER` to another `tokenizer.json`. Without `../shared`, and in the smoke
//! run (`cargo test --benches`), the committed fixture corpus and tokenizer stand in.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyspec_core::NoProgress;
use anyspec_core::theory::EmulationCounts;
use anyspec_dict_builder::running_text::encode_plain;
use anyspec_dict_builder::words::NgramSegmenter;
use anyspec_dict_builder::{
    BuildParams, CorpusOptions, Dictionary, EmulationConfig, NgramCounts, build_dictionary, emulate_sequence,
};
use anyspec_vocab_map::Vocabulary;
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};

struct Setup {
    dictionary: Dictionary,
    /// Held-out reference text, tokenized.
    reference: Vec<u32>,
    /// About 1 MB of corpus text for the counting benchmark.
    text: String,
}

fn full_run() -> bool {
    std::env::args().any(|a| a == "--bench")
}

fn shared_dir() -> PathBuf {
    std::env::var_os("ANYSPEC_SHARED")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared"))
}

#[allow(clippy::print_stderr)]
fn setup() -> Setup {
    let shared = shared_dir();
    let corpora = shared.join("corpora");
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let (tokenizer, corpus, reference_file, params) = if full_run() && corpora.join("uk-brown").exists() {
        let tokenizer = std::env::var_os("ANYSPEC_BENCH_TOKENIZER")
            .map(PathBuf::from)
            .unwrap_or_else(|| shared.join("tokenizers/llama3/tokenizer.json"));
        let corpus = vec![
            corpora.join("uk-brown/brown_uk.txt"),
            corpora.join("uk-gec/ua_gec_train_target.txt"),
            corpora.join("crh-qirimtatartili/uk.txt"),
        ];
        (tokenizer, corpus, corpora.join("flores200-dev/ukr_Cyrl.dev"), BuildParams::default())
    } else {
        let params = BuildParams { min_count: 1, ..BuildParams::default() };
        (fixture.join("tokenizer.json"), vec![fixture.join("corpus.txt")], fixture.join("corpus.txt"), params)
    };
    let vocabulary = Vocabulary::from_file(&tokenizer).expect("the benchmark tokenizer loads");
    let started = Instant::now();
    let counts = NgramCounts::count_files(&corpus, &CorpusOptions::default(), 3, 0, &NoProgress).expect("counting");
    let counted = started.elapsed();
    let bytes = build_dictionary(&counts, &vocabulary, &params, 0, &NoProgress).expect("building");
    let built = started.elapsed();
    eprintln!(
        "dictionary: {} entries (n{:?}), {} bytes = {:.2} MB, from {:.1} MB of text; count {:.1} s, \
         count + build {:.1} s ({:.2} MB/s)",
        Dictionary::from_bytes(bytes.clone(), Path::new("bench"), &vocabulary.fingerprint()).map_or(0, |d| d.len()),
        params.orders,
        bytes.len(),
        bytes.len() as f64 / 1e6,
        counts.text_bytes() as f64 / 1e6,
        counted.as_secs_f64(),
        built.as_secs_f64(),
        counts.text_bytes() as f64 / 1e6 / built.as_secs_f64()
    );
    let dictionary =
        Dictionary::from_bytes(bytes, Path::new("bench.dict"), &vocabulary.fingerprint()).expect("loading");
    let reference_text = std::fs::read_to_string(&reference_file).expect("reference text");
    let reference = encode_plain(vocabulary.tokenizer(), &reference_text).expect("tokenizing");
    let mut text = std::fs::read_to_string(&corpus[0]).expect("corpus");
    let mut cut = text.len().min(1 << 20);
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    text.truncate(cut);
    Setup { dictionary, reference, text }
}

/// A drafter over the dictionary, as `anyspec-drafters` defines it (that crate depends on this one).
struct Lookup<'a>(&'a Dictionary, Vec<u32>);

impl anyspec_core::Drafter for Lookup<'_> {
    fn propose(
        &mut self,
        context: &[u32],
        max_tokens: usize,
        _: &anyspec_core::SamplingConfig,
        _: &mut dyn rand::RngCore,
    ) -> anyspec_core::Result<anyspec_core::Draft> {
        Ok(match self.0.longest_suffix_match(context, max_tokens, &mut self.1) {
            Some(_) => anyspec_core::Draft::deterministic(self.1.clone()),
            None => anyspec_core::Draft::empty(),
        })
    }
}

fn benches(c: &mut Criterion) {
    let setup = setup();
    let positions: Vec<usize> = (1..setup.reference.len()).step_by(7).take(4096).collect();

    let mut group = c.benchmark_group("lookup");
    group.throughput(Throughput::Elements(1));
    let mut out = Vec::with_capacity(8);
    let mut i = 0;
    group.bench_function("longest_suffix_match", |b| {
        b.iter(|| {
            let pos = positions[i % positions.len()];
            i += 1;
            std::hint::black_box(setup.dictionary.longest_suffix_match(&setup.reference[..pos], 8, &mut out))
        })
    });
    group.finish();

    let mut group = c.benchmark_group("count");
    group.throughput(Throughput::Bytes(setup.text.len() as u64));
    group.sample_size(10);
    group.bench_with_input(BenchmarkId::new("orders_1_to_3", setup.text.len()), &setup.text, |b, text| {
        b.iter(|| {
            let mut counts = NgramCounts::new(3).expect("order 3");
            counts.count_text(&mut NgramSegmenter::new(), text);
            counts.distinct(3)
        })
    });
    group.finish();

    let mut group = c.benchmark_group("emulate");
    group.throughput(Throughput::Elements(setup.reference.len() as u64));
    group.sample_size(10);
    group.bench_function("dictionary_gamma_8", |b| {
        b.iter(|| {
            let mut counts = EmulationCounts::default();
            let mut drafter = Lookup(&setup.dictionary, Vec::new());
            emulate_sequence(&mut drafter, &setup.reference, &EmulationConfig::default(), &mut counts)
                .expect("emulation");
            counts.steps
        })
    });
    group.finish();
}

criterion_group!(dictionary, benches);
criterion_main!(dictionary);
