//! The policy test suites use to get a real model: one place, so that every crate's real-model
//! tests behave alike.
//!
//! In order: the file named by the environment variable the caller gives (e.g.
//! `ANYSPEC_SMOLLM2_GGUF`, when set and not empty); the model cache; a fetch into the cache,
//! unless `ANYSPEC_OFFLINE=1`. When none works, [`model_for_tests`] returns `None` after saying
//! why on stderr, so the tests pass with a loud skip on a machine without the model, unless
//! `ANYSPEC_REQUIRE_MODELS=1` (CI sets it), which turns a missing model into a panic.

use std::path::PathBuf;

use crate::known::KnownModel;
use crate::root::cache_root;
use crate::store::ModelStore;

/// The model's file for a test, or `None` (with a message on stderr) when it cannot be had.
///
/// # Panics
/// When `ANYSPEC_REQUIRE_MODELS=1` and the model cannot be had: a test suite that must run
/// against the real model fails rather than skip.
#[allow(clippy::print_stderr)]
pub fn model_for_tests(model: &KnownModel, path_variable: &str) -> Option<PathBuf> {
    let required = std::env::var_os("ANYSPEC_REQUIRE_MODELS").is_some_and(|v| v == "1");
    match find_or_fetch(model, path_variable) {
        Ok(path) => Some(path),
        Err(why) if required => panic!("ANYSPEC_REQUIRE_MODELS=1 but {} is unavailable: {why}", model.name),
        Err(why) => {
            eprintln!("SKIPPED: the {} real-model tests ({why})", model.name);
            None
        }
    }
}

#[allow(clippy::print_stderr)]
fn find_or_fetch(model: &KnownModel, path_variable: &str) -> Result<PathBuf, String> {
    if let Some(path) = std::env::var_os(path_variable).filter(|p| !p.is_empty()) {
        return Ok(PathBuf::from(path));
    }
    let store = ModelStore::new(cache_root(None).map_err(|e| e.to_string())?);
    if let Some(path) = store.locate(model) {
        return Ok(path);
    }
    if std::env::var_os("ANYSPEC_OFFLINE").is_some_and(|v| v == "1") {
        return Err(format!("not in the model cache {} and ANYSPEC_OFFLINE=1", store.root().display()));
    }
    eprintln!("fetching {} into {} (once)…", model.name, store.root().display());
    store.fetch(model, &mut |step: &str| eprintln!("  {step}")).map_err(|e| e.to_string())
}
