//! The one error type of `anyspec-dict-builder`.

use std::path::PathBuf;

/// Everything that can go wrong while counting, building, loading or emulating.
///
/// Every message names the offending file or value and, where there is one, the fix.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file could not be opened, read or written.
    #[error("cannot {action} {path}")]
    Io {
        /// What was being done (`read`, `write`, `open`, `memory-map`).
        action: &'static str,
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A corpus file holds bytes that are not UTF-8.
    #[error(
        "{path} is not valid UTF-8 at byte offset {offset} (of the decompressed text); \
         convert the corpus to UTF-8 first (for example with iconv)"
    )]
    InvalidUtf8 {
        /// The corpus file.
        path: PathBuf,
        /// Offset of the first invalid byte in the (decompressed) stream.
        offset: u64,
    },
    /// A JSONL corpus line is not a JSON object with the expected text field.
    #[error("{path} line {line}: {problem}; each line must be a JSON object with a string field \"{field}\"")]
    InvalidJsonl {
        /// The corpus file.
        path: PathBuf,
        /// 1-based line number.
        line: u64,
        /// The text field that was looked for.
        field: String,
        /// What is wrong with the line.
        problem: String,
    },
    /// A file of records (see [`crate::for_each_record`]) is not named as JSONL.
    #[error(
        "{path} is not a JSONL file: records with the fields \"{fields}\" are read from files named \
         *.jsonl or *.jsonl.gz, one JSON object per line; convert the file, or rename it if it is JSONL"
    )]
    NotJsonl {
        /// The file.
        path: PathBuf,
        /// The fields that were to be read, quoted and joined.
        fields: String,
    },
    /// A parameter is outside its allowed range.
    #[error(transparent)]
    InvalidParameter(#[from] anyspec_core::InvalidParameter),
    /// A file is not the kind of artifact it was loaded as.
    #[error("{path} is not {expected}: it holds {found}; check the path")]
    BadMagic {
        /// The file.
        path: PathBuf,
        /// What it was expected to be.
        expected: &'static str,
        /// What it is ([`anyspec_core::artifact::ArtifactKind::describe`]).
        found: &'static str,
    },
    /// An artifact was written by another format version.
    #[error("{path} has format version {found}, this build reads version {expected}; rebuild it with this version")]
    Version {
        /// The file.
        path: PathBuf,
        /// The version this code reads.
        expected: u32,
        /// The version in the file.
        found: u32,
    },
    /// An artifact is truncated or its content does not match its checksum.
    #[error("{path} is corrupt: {problem}; rebuild it")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        problem: String,
    },
    /// A dictionary was built for another tokenizer than the one it is used with.
    #[error(
        "{path} was built for the tokenizer with fingerprint {built_for}, but the tokenizer given \
         has fingerprint {given}; rebuild the dictionary with this tokenizer or pass the one it was built with"
    )]
    WrongTokenizer {
        /// The dictionary file.
        path: PathBuf,
        /// Fingerprint recorded in the dictionary.
        built_for: String,
        /// Fingerprint of the tokenizer given.
        given: String,
    },
    /// The counts hold no text: a dictionary built from them would have no entries.
    #[error(
        "the corpus holds no text ({text_bytes} bytes counted, no n-grams): a dictionary built from it would be \
         empty; give a non-empty corpus (for JSON Lines, check that the text field is the right one)"
    )]
    EmptyCorpus {
        /// Bytes of text counted.
        text_bytes: u64,
    },
    /// Count shards cannot be merged because they were counted differently.
    #[error("cannot merge {path}: {problem}; count every shard with the same settings")]
    IncompatibleShards {
        /// The shard that differs from the first one.
        path: PathBuf,
        /// How it differs.
        problem: String,
    },
    /// The tokenizer failed on a piece of text.
    #[error("the tokenizer failed on {text:?}: {message}")]
    Tokenizer {
        /// The text (shortened).
        text: String,
        /// The tokenizer's message.
        message: String,
    },
    /// Building the FST failed (keys out of order, or an I/O error inside `fst`).
    #[error("building the dictionary's FST failed")]
    Fst(#[source] fst::Error),
    /// A drafter failed during emulation.
    #[error("the drafter failed during emulation")]
    Drafter(#[source] anyspec_core::Error),
    /// A drafter broke its contract during emulation.
    #[error("the drafter proposed {got} tokens when at most {max} were asked for")]
    DraftTooLong {
        /// Tokens asked for.
        max: usize,
        /// Tokens proposed.
        got: usize,
    },
}

impl Error {
    /// Shorthand for [`Error::InvalidParameter`].
    pub(crate) fn invalid(name: &'static str, expected: &'static str, value: impl ToString) -> Self {
        Error::InvalidParameter(anyspec_core::InvalidParameter { name, expected, value: value.to_string() })
    }

    pub(crate) fn io(action: &'static str, path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> Error {
        let path = path.into();
        move |source| Error::Io { action, path, source }
    }

    pub(crate) fn corrupt(path: impl Into<PathBuf>, problem: impl Into<String>) -> Error {
        Error::Corrupt { path: path.into(), problem: problem.into() }
    }
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
