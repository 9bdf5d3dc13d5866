//! The crate's error type.

use std::path::PathBuf;

use crate::Fingerprint;

/// Everything that can go wrong while loading tokenizers, building or reading vocabulary maps
/// and computing statistics.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A file could not be read or written.
    #[error("cannot access {}", path.display())]
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
    /// A tokenizer whose largest id is far beyond its number of tokens: the id table would be
    /// mostly holes (and, for an id near 2^32, would need over 100 GB).
    #[error(
        "tokenizer {} has a token with id {max_id} but only {tokens} tokens: ids must stay below {limit} \
         (four times the token count, plus 65,536); the file is damaged or not a real tokenizer",
        path.display()
    )]
    SparseIds {
        /// The file.
        path: PathBuf,
        /// The largest id.
        max_id: u32,
        /// How many tokens it has.
        tokens: usize,
        /// The largest id allowed plus one.
        limit: usize,
    },
    /// Encoding or decoding text failed inside the `tokenizers` crate.
    #[error("tokenizer {name} failed to {action} text: {message}")]
    Codec {
        /// The tokenizer's name (its path).
        name: String,
        /// `encode` or `decode`.
        action: &'static str,
        /// What the `tokenizers` crate reported.
        message: String,
    },
    /// A match mode other than `raw` or `bytes`.
    #[error("unknown match mode {value:?}: use `raw` (equal token strings) or `bytes` (equal byte surfaces)")]
    UnknownMatchMode {
        /// The rejected value.
        value: String,
    },
    /// The file is shorter than its header or than the length the header announces.
    #[error("{} is truncated: {len} bytes, at least {needed} expected; rebuild it", path.display())]
    Truncated {
        /// The file.
        path: PathBuf,
        /// Its length.
        len: usize,
        /// The length it should have at least.
        needed: usize,
    },
    /// The file does not start with the magic of a vocabulary map.
    #[error(
        "{} is not an anyspec vocabulary map: it holds {kind} (it starts with {found:02x?}, expected {expected:02x?}); \
         check the path",
        path.display()
    )]
    BadMagic {
        /// The file.
        path: PathBuf,
        /// Its first bytes.
        found: Vec<u8>,
        /// The magic.
        expected: Vec<u8>,
        /// What it is ([`anyspec_core::artifact::ArtifactKind::describe`]).
        kind: &'static str,
    },
    /// The file was written in another format version.
    #[error(
        "{} has vocabulary-map format version {found}, this build reads version {expected}; rebuild it with `anyspec vocab build`",
        path.display()
    )]
    Version {
        /// The file.
        path: PathBuf,
        /// The version this build reads.
        expected: u32,
        /// The version in the file.
        found: u32,
    },
    /// The checksum does not match: the file was damaged after it was written.
    #[error("{} is corrupt: its checksum does not match its content (stored {stored}, computed {computed}); rebuild it", path.display())]
    Checksum {
        /// The file.
        path: PathBuf,
        /// The checksum stored in the file, hex.
        stored: String,
        /// The checksum of the content, hex.
        computed: String,
    },
    /// The payload passed the checksum but could not be decoded or is inconsistent.
    #[error("{} is not a valid vocabulary map: {reason}", path.display())]
    InvalidMap {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// The map was built for another tokenizer.
    #[error(
        "{} was built for a {role} tokenizer with fingerprint {in_file}, but the {role} tokenizer {name} has fingerprint {given}; \
         pass the tokenizer the map was built for, or rebuild the map with `anyspec vocab build`",
        path.display()
    )]
    WrongTokenizer {
        /// The map file.
        path: PathBuf,
        /// `target` or `drafter`.
        role: &'static str,
        /// The fingerprint recorded in the file (boxed to keep `Error` small).
        in_file: Box<Fingerprint>,
        /// The fingerprint of the tokenizer given.
        given: Box<Fingerprint>,
        /// The name (path) of the tokenizer given.
        name: String,
    },
    /// The map could not be serialized.
    #[error("cannot serialize the vocabulary map: {message}")]
    Encode {
        /// What bincode reported.
        message: String,
    },
    /// A parameter is out of its valid range.
    #[error(transparent)]
    InvalidParameter(#[from] anyspec_core::InvalidParameter),
}

impl Error {
    /// Names `path` in an error that was raised before the file name was known.
    pub(crate) fn with_path(self, path: PathBuf) -> Error {
        match self {
            Error::EmptyVocabulary { .. } => Error::EmptyVocabulary { path },
            Error::SparseIds { max_id, tokens, limit, .. } => Error::SparseIds { path, max_id, tokens, limit },
            other => other,
        }
    }
}
