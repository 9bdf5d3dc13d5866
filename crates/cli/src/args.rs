//! What several commands read from their flags the same way: the device and a tokenizer's
//! vocabulary.

use std::path::Path;

use anyhow::Context;
use anyspec_models::{Checkpoint, DeviceChoice, TextTokenizer};
use anyspec_vocab_map::Vocabulary;

/// `--device`: cpu, wgpu or cuda, refused at parse time when this build or machine lacks it.
pub(crate) fn parse_device(name: &str) -> Result<DeviceChoice, String> {
    let choice: DeviceChoice = name.parse().map_err(|e: anyspec_models::Error| e.to_string())?;
    choice.device().map_err(|e| e.to_string())?;
    Ok(choice)
}

/// `--tokenizer PATH`: the vocabulary of a `tokenizer.json`.
pub(crate) fn load_vocabulary(path: &Path) -> anyhow::Result<Vocabulary> {
    Vocabulary::from_file(path).with_context(|| format!("--tokenizer {}: cannot load the tokenizer", path.display()))
}

/// The vocabulary of a checkpoint whose tokenizer is loaded, named after the checkpoint, with
/// `flag` (`--target`, `--drafter`) in the error.
pub(crate) fn vocabulary_of(
    checkpoint: &Checkpoint,
    tokenizer: &TextTokenizer,
    flag: &str,
) -> anyhow::Result<Vocabulary> {
    let name = checkpoint.path().display().to_string();
    Vocabulary::from_tokenizer(tokenizer.inner().clone(), name)
        .with_context(|| format!("{flag} {}: reading its tokenizer", checkpoint.path().display()))
}
