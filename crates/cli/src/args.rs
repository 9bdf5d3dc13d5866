//! What several commands read from their flags the same way: the device, a tokenizer's
//! vocabulary, and library parameter errors turned into errors that name the flag.

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

/// `--tokenizer PATH`: the vocabulary of a `tokenizer.json`, or of the tokenizer that a GGUF
/// file or a checkpoint directory carries (the same vocabulary, and fingerprint, that `generate`
/// and `demo` use for that model, so the artifacts built from it fit the model).
pub(crate) fn load_vocabulary(path: &Path) -> anyhow::Result<Vocabulary> {
    if path.is_dir() || is_gguf(path) {
        let checkpoint = Checkpoint::open(path)
            .with_context(|| format!("--tokenizer {}: cannot open the model to read its tokenizer", path.display()))?;
        let tokenizer = checkpoint
            .tokenizer()
            .with_context(|| format!("--tokenizer {}: cannot load the model's tokenizer", path.display()))?;
        return vocabulary_of(&checkpoint, &tokenizer, "--tokenizer");
    }
    Vocabulary::from_file(path).with_context(|| {
        format!(
            "--tokenizer {}: cannot load the tokenizer (pass a tokenizer.json, a GGUF file or a checkpoint directory)",
            path.display()
        )
    })
}

/// Whether `path` starts with GGUF's magic bytes.
fn is_gguf(path: &Path) -> bool {
    let mut magic = [0u8; 4];
    std::fs::File::open(path).and_then(|mut f| std::io::Read::read_exact(&mut f, &mut magic)).is_ok()
        && &magic == b"GGUF"
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

/// A library error whose parameter errors name the parameter as a user would (`top_p`,
/// `min_prob`), which [`flag_error`] turns into the flag (`--top-p`).
pub(crate) trait ParameterError: std::error::Error + Send + Sync + 'static {
    /// The parameter, its allowed range and the value given, when this is a parameter error.
    fn invalid_parameter(&self) -> Option<&anyspec_core::InvalidParameter>;
}

macro_rules! parameter_error {
    ($($error:ty),*) => {$(
        impl ParameterError for $error {
            fn invalid_parameter(&self) -> Option<&anyspec_core::InvalidParameter> {
                match self {
                    Self::InvalidParameter(invalid) => Some(invalid),
                    _ => None,
                }
            }
        }
    )*};
}

parameter_error!(anyspec_core::Error, anyspec_dict_builder::Error, anyspec_affinity::Error, anyspec_drafters::Error);

/// Turns a parameter error into one that names the command-line flag (`top_p` → `--top-p`);
/// a parameter with a space in its name has no flag of its own and is reported as it is.
pub(crate) fn flag_error<E: ParameterError>(err: E) -> anyhow::Error {
    match err.invalid_parameter() {
        Some(invalid) if !invalid.name.contains(' ') => {
            anyhow::anyhow!("--{} must be {}, got {}", invalid.name.replace('_', "-"), invalid.expected, invalid.value)
        }
        _ => err.into(),
    }
}
