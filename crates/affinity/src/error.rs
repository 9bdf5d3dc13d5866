//! The one error type of `anyspec-affinity`.

use std::path::PathBuf;

/// Everything that can go wrong while counting, building, saving or loading affinity matrices
/// and shortlists.
///
/// Every message names the offending file or value and, where there is one, the fix.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file could not be read or written.
    #[error("cannot {action} {path}")]
    Io {
        /// What was being done (`read`, `write`).
        action: &'static str,
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// Reading the corpus failed (unreadable file, invalid UTF-8, bad JSONL line).
    #[error("reading the corpus failed")]
    Corpus(#[source] anyspec_dict_builder::Error),
    /// The tokenizer failed on a piece of text.
    #[error("the tokenizer failed on {text:?}: {message}")]
    Tokenizer {
        /// The text (shortened).
        text: String,
        /// The tokenizer's message.
        message: String,
    },
    /// A parameter is outside its allowed range.
    #[error(transparent)]
    InvalidParameter(#[from] anyspec_core::InvalidParameter),
    /// A file is not the kind of artifact it was loaded as.
    #[error("{path} is not {expected}: it holds {found}; check the path")]
    NotAnArtifact {
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
        found: String,
    },
    /// An artifact is truncated, fails its checksum or holds inconsistent arrays.
    #[error("{path} is corrupt: {problem}; rebuild it")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        problem: String,
    },
    /// An artifact was built for another tokenizer than the one it is used with.
    #[error(
        "{path} was built for the {role} tokenizer with fingerprint {built_for}, but the {role} tokenizer \
         given has fingerprint {given}; rebuild it with this tokenizer or pass the one it was built with"
    )]
    WrongTokenizer {
        /// The artifact file.
        path: PathBuf,
        /// `target` (affinity matrices) or `drafter` (shortlists).
        role: &'static str,
        /// Fingerprint recorded in the artifact.
        built_for: String,
        /// Fingerprint of the tokenizer given.
        given: String,
    },
    /// The arrays of an affinity matrix do not form a row-stochastic matrix.
    #[error("{path}: the affinity matrix is not a valid row-stochastic matrix; rebuild it")]
    InvalidMatrix {
        /// The file (or `<memory>` for a matrix being built).
        path: PathBuf,
        /// What anyspec-core found wrong.
        #[source]
        source: anyspec_core::Error,
    },
    /// No end-of-sequence token could be identified for a shortlist.
    #[error(
        "cannot tell which token of {tokenizer} ends a sequence (none of its special tokens has a known \
         end-of-sequence name); name it with --eos TOKEN"
    )]
    NoEndOfSequence {
        /// The tokenizer.
        tokenizer: String,
    },
    /// A token named on the command line is not in the vocabulary.
    #[error("{token:?} is not a token of {tokenizer}; give the token's exact string")]
    UnknownToken {
        /// The token string.
        token: String,
        /// The tokenizer.
        tokenizer: String,
    },
    /// A shortlist is too small for the tokens it must keep.
    #[error(
        "a shortlist of {size} tokens cannot hold the {forced} tokens it must keep ({what}); \
         raise --size to at least {forced}"
    )]
    ShortlistTooSmall {
        /// The requested size.
        size: usize,
        /// How many tokens are forced in.
        forced: usize,
        /// Which tokens are forced in.
        what: String,
    },
    /// A loaded shortlist lacks the end-of-sequence token it recorded.
    #[error("{path}: the shortlist drops the end-of-sequence token {token}; rebuild it")]
    DropsEndOfSequence {
        /// The file.
        path: PathBuf,
        /// The token id.
        token: u32,
    },
    /// The corpus held no token at all.
    #[error("the corpus has no tokens ({files}); give a non-empty corpus")]
    EmptyCorpus {
        /// The corpus files.
        files: String,
    },
}

impl Error {
    /// Shorthand for [`Error::InvalidParameter`].
    pub(crate) fn invalid(name: &'static str, expected: &'static str, value: impl ToString) -> Self {
        Error::InvalidParameter(anyspec_core::InvalidParameter { name, expected, value: value.to_string() })
    }

    pub(crate) fn io(action: &'static str, path: &std::path::Path) -> impl FnOnce(std::io::Error) -> Error {
        let path = path.to_path_buf();
        move |source| Error::Io { action, path, source }
    }

    pub(crate) fn corrupt(path: &std::path::Path, problem: impl Into<String>) -> Error {
        Error::Corrupt { path: path.to_path_buf(), problem: problem.into() }
    }
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
