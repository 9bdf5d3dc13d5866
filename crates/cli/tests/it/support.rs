//! Helpers shared by the integration tests: run the binary, read its JSON, a fresh directory.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Runs `anyspec` with `args`.
pub(crate) fn anyspec(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_anyspec")).args(args).output().expect("the binary runs")
}

/// The JSON a successful run printed (fails the test, showing stderr, if the run failed).
pub(crate) fn json(out: &Output) -> serde_json::Value {
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// A file of anyspec-affinity's committed test data.
pub(crate) fn affinity_fixture(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../affinity/tests/data").join(name).display().to_string()
}

/// A fresh directory per test (tests run in parallel in one process).
pub(crate) fn temp_dir(command: &str, test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("anyspec-cli-{command}-{test}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
