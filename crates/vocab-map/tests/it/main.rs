//! Integration tests of anyspec-vocab-map, compiled as one binary.

mod artifact;
mod fingerprint;
mod hostile;
mod maps;
mod shared;
mod stats;
mod surfaces;

use std::path::PathBuf;

use anyspec_vocab_map::Vocabulary;

/// A committed fixture under `tests/data/`.
pub(crate) fn fixture_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data").join(name)
}

pub(crate) fn fixture(name: &str) -> Vocabulary {
    Vocabulary::from_file(&fixture_path(name)).unwrap_or_else(|err| panic!("fixture {name}: {err}"))
}

/// A fresh directory for one test's files.
pub(crate) fn scratch_dir(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("anyspec-vocab-map-{}-{test}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
