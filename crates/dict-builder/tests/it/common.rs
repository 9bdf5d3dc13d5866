//! Fixtures shared by the integration tests.

use std::path::{Path, PathBuf};

use anyspec_dict_builder::{BuildParams, Dictionary, TableEntry, encode_dictionary};
use anyspec_vocab_map::{Fingerprint, Vocabulary};

pub(crate) fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data").join(name)
}

pub(crate) fn vocabulary() -> Vocabulary {
    Vocabulary::from_file(&data("tokenizer.json")).expect("the fixture tokenizer loads")
}

/// Ids of `text` in running-text form (after a newline).
pub(crate) fn ids(vocabulary: &Vocabulary, text: &str) -> Vec<u32> {
    anyspec_dict_builder::running_text::RunningTextEncoder::new(vocabulary.tokenizer()).unwrap().encode(text).unwrap()
}

/// A fresh directory per call: tests run in parallel in one process.
pub(crate) fn temp_dir(name: &str) -> PathBuf {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("anyspec-dict-it-{name}-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

pub(crate) const FINGERPRINT: Fingerprint = Fingerprint([7; 32]);

/// A dictionary from hand-written (prefix, continuation) entries.
pub(crate) fn crafted(entries: &[(&[u32], &[u32])]) -> Dictionary {
    let mut sorted: Vec<TableEntry<'_>> =
        entries.iter().map(|&(prefix, continuation)| TableEntry { prefix, continuation, count: 1, total: 1 }).collect();
    sorted.sort_by(|a, b| a.prefix.cmp(b.prefix));
    let bytes = encode_dictionary(&sorted, &FINGERPRINT, &BuildParams::default(), 0, 0).unwrap();
    Dictionary::from_bytes(bytes, Path::new("crafted.dict"), &FINGERPRINT).unwrap()
}
