//! A DictSpec dictionary from a corpus, then a lookup: count word n-grams, tokenize them for
//! one tokenizer, keep the most probable continuation of each prefix, write the checksummed
//! file, open it (checked against the tokenizer's fingerprint) and draft from a context.
//! Runs on the small Ukrainian corpus and tokenizer of the tests:
//! `cargo run -p anyspec-dict-builder --example build_and_lookup`.
#![allow(clippy::print_stdout)]

use std::path::PathBuf;

use anyspec_core::NoProgress;
use anyspec_dict_builder::running_text::RunningTextEncoder;
use anyspec_dict_builder::{BuildParams, CorpusOptions, Dictionary, NgramCounts, build_dictionary, write_dictionary};
use anyspec_vocab_map::Vocabulary;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let data = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let vocabulary = Vocabulary::from_file(&data.join("tokenizer.json"))?;
    let params = BuildParams { min_count: 1, ..BuildParams::default() };

    let corpus = [data.join("corpus.txt")];
    let counts = NgramCounts::count_files(&corpus, &CorpusOptions::default(), params.max_order(), 0, &NoProgress)?;
    let bytes = build_dictionary(&counts, &vocabulary, &params, 0, &NoProgress)?;
    let path = std::env::temp_dir().join(format!("anyspec-example-{}.dict", std::process::id()));
    write_dictionary(&path, &bytes)?;
    let dictionary = Dictionary::open(&path, &vocabulary.fingerprint())?;
    let bigrams = counts.distinct(2);
    println!(
        "{} entries from {bigrams} distinct word bigrams (and other orders), {} bytes",
        dictionary.len(),
        bytes.len()
    );

    // A context in running-text form (as it stands inside generated text), then the lookup.
    let context = RunningTextEncoder::new(vocabulary.tokenizer())?.encode("Сьогодні гарна погода, і ми")?;
    let mut continuation = Vec::new();
    let matched = dictionary.longest_suffix_match(&context, 8, &mut continuation);
    let text = vocabulary.tokenizer().decode(&continuation, false).map_err(|e| e.to_string())?;
    println!("context of {} tokens: suffix of {matched:?} matched, drafts {continuation:?} = {text:?}", context.len());
    std::fs::remove_file(&path)?;
    Ok(())
}
