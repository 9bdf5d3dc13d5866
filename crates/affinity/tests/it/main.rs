//! Integration tests of `anyspec-affinity`, compiled as one binary.

mod affinity;
mod shortlist;

use std::path::{Path, PathBuf};

pub(crate) fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data").join(name)
}

/// A fresh directory for one test's files.
pub(crate) fn temp_dir(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("anyspec-affinity-it-{test}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The vocab-map fixture tokenizers, which differ from the one the artifacts are built with.
pub(crate) fn other_tokenizer() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../vocab-map/tests/data/tiny_bytelevel.json")
}
