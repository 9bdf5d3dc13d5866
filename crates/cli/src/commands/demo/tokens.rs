//! `--save-tokens FILE`: every method's generated token ids, the prompts' ids, the measured
//! verification costs and speedups, as JSON. `cargo xtask drafting-ceiling` replays the n-gram
//! drafters against them offline (at temperature 0 every method's output is the target's
//! greedy output, so the tokens say exactly what any deterministic draft would have had
//! accepted) to show how far each drafter is from its best possible γ.

use std::io::Write;
use std::path::Path;

use anyhow::{Context, bail};
use serde::Serialize;

use super::assets::Artifact;
use super::methods::Method;
use super::prompts::Prompt;
use super::report::{Outcome, Row};

/// The value of the file's `format` field, by which an existing file is recognised as one of
/// these (and may be replaced).
pub(super) const FORMAT: &str = "anyspec-demo-tokens/1";

#[derive(Serialize)]
struct Saved<'a> {
    format: &'static str,
    target: &'a str,
    temperature: f32,
    /// Cost of scoring k = 1, 2, … positions in one pass ÷ one position (measured by the run).
    verify_cost: &'a [f64],
    /// The n-gram dictionary the dictionary and hybrid rows drafted from.
    dictionary: Option<&'a Path>,
    prompts: Vec<SavedPrompt<'a>>,
    methods: Vec<SavedMethod<'a>>,
}

#[derive(Serialize)]
struct SavedPrompt<'a> {
    category: &'a str,
    group: &'a str,
    ids: &'a [u32],
}

#[derive(Serialize)]
struct SavedMethod<'a> {
    key: &'a str,
    method: &'a str,
    speedup: f64,
    tokens_per_step: f64,
    /// Generated ids, one list per prompt (stop token included when the model stopped).
    outputs: &'a [Vec<u32>],
}

/// Refuses, before the run, a path that is a directory or an existing file that is not one
/// of these (so that a typo cannot replace a model or a report).
pub(super) fn check_path(path: &Path) -> anyhow::Result<()> {
    let Ok(metadata) = std::fs::metadata(path) else { return Ok(()) };
    if metadata.is_dir() {
        bail!(
            "--save-tokens {} is a directory; name the file to write, e.g. {}/tokens.json",
            path.display(),
            path.display()
        );
    }
    let mut head = vec![0u8; 64];
    let read = std::fs::File::open(path)
        .and_then(|mut f| std::io::Read::read(&mut f, &mut head))
        .with_context(|| format!("--save-tokens {}: reading the existing file", path.display()))?;
    let head = String::from_utf8_lossy(&head[..read]);
    if !head.starts_with(&format!("{{\"format\":\"{FORMAT}\"")) {
        bail!(
            "--save-tokens {} already exists and is not a token file of `anyspec demo`; choose another path (or \
             remove the file)",
            path.display()
        );
    }
    Ok(())
}

/// Writes the file atomically (a finished temporary file renamed over `path`).
#[allow(clippy::too_many_arguments)]
pub(super) fn save(
    path: &Path,
    target: &str,
    temperature: f32,
    verify_cost: &[f64],
    artifacts: &[Artifact],
    prompts: &[Prompt],
    results: &[(&Method, Outcome)],
    rows: &[Row],
) -> anyhow::Result<()> {
    let saved = Saved {
        format: FORMAT,
        target,
        temperature,
        verify_cost,
        dictionary: artifacts.iter().find(|a| a.name.starts_with("n-gram dictionary")).map(|a| a.path.as_path()),
        prompts: prompts.iter().map(|p| SavedPrompt { category: &p.category, group: &p.group, ids: &p.ids }).collect(),
        methods: results
            .iter()
            .filter_map(|(method, outcome)| {
                let row = rows.iter().find(|r| r.key == method.key)?;
                Some(SavedMethod {
                    key: method.key,
                    method: &row.method,
                    speedup: row.speedup,
                    tokens_per_step: row.tokens_per_step,
                    outputs: &outcome.outputs,
                })
            })
            .collect(),
    };
    let json = serde_json::to_vec(&saved)?;
    anyspec_core::artifact::write_atomically(path, |w| w.write_all(&json))
        .with_context(|| format!("writing --save-tokens {}", path.display()))
}
