//! The crate's error type.

use std::path::PathBuf;

/// Everything that can go wrong while loading tokenizers, building or reading vocabulary maps
/// and computing statistics.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A file could not be read or written.
    #[error("cannot access {}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The operating-system error.
        #[source]
        source: std::io::Error,
    },
    /// A `tokenizer.json` could not be parsed by the `tokenizers` crate.
    #[error("cannot load tokenizer {}: {message} (is it a Hugging Face tokenizer.json?)", path.display())]
    Tokenizer {
        /// The file.
        path: PathBuf,
        /// What the `tokenizers` crate reported.
        message: String,
    },
    /// A tokenizer has no tokens at all.
    #[error("tokenizer {} has an empty vocabulary", path.display())]
    EmptyVocabulary {
        /// The file.
        path: PathBuf,
    },
}

impl Error {
    /// Names `path` in an error that was raised before the file name was known.
    pub(crate) fn with_path(self, path: PathBuf) -> Error {
        match self {
            Error::EmptyVocabulary { .. } => Error::EmptyVocabulary { path },
            other => other,
        }
    }
}
