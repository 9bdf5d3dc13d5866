//! # anyspec-vocab-map
//!
//! Vocabularies of Hugging Face tokenizers, the maps between two of them, and the vocabulary
//! statistics of Timor et al., "Accelerating LLM Inference with Lossless Speculative Decoding
//! Algorithms for Heterogeneous Vocabularies" (ICML 2025; `hetero-vocab-sd.txt`).
//!
//! - [`Vocabulary`]: a loaded `tokenizer.json`, its id → token table, each token's byte
//!   surface (see [`SurfaceStyle`]) and its [`Fingerprint`] (SHA-256 of the canonical table).
//! - [`VocabMap`]: a one-to-one pairing of target and drafter tokens by equal strings
//!   ([`MatchMode::Raw`], the paper's definition) or equal byte surfaces ([`MatchMode::Bytes`]),
//!   as two plain id arrays with [`ABSENT`] for "no counterpart" — the input of
//!   `anyspec_core::projection` (token-level intersection, union, RDK) via [`VocabMap::id_map`].
//!   It is saved as a checksummed, versioned artifact ([`artifact`]) that refuses to load
//!   against other tokenizers.
//! - [`stats`]: |T|, |D|, |T∩D| (Tables 4–5), the overlap on a corpus (Table 6), exact
//!   decomposition counts and `n_max` (Appendix D, Table 8), injectivity (Table 9) and
//!   fertility (dictspec Table 3).
//!
//! ```
//! use std::path::Path;
//! use anyspec_vocab_map::{MatchMode, VocabMap, Vocabulary};
//!
//! # fn main() -> Result<(), anyspec_vocab_map::Error> {
//! let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
//! let target = Vocabulary::from_file(&data.join("tiny_bytelevel.json"))?;
//! let drafter = Vocabulary::from_file(&data.join("tiny_sentencepiece.json"))?;
//! // `Ġab` and `▁ab` are different strings but the same bytes, " ab".
//! assert_eq!(VocabMap::build(&target, &drafter, MatchMode::Raw).intersection(), 2);
//! let map = VocabMap::build(&target, &drafter, MatchMode::Bytes);
//! assert_eq!(map.intersection(), 5);
//! let path = std::env::temp_dir().join(format!("doc-{}.asvm", std::process::id()));
//! map.save(&path)?;
//! assert_eq!(VocabMap::load(&path, &target, &drafter)?, map);
//! # std::fs::remove_file(&path).ok();
//! # Ok(())
//! # }
//! ```
//!
//! ## Quirks
//!
//! - Surfaces follow each style's decoder: SentencePiece `▁the` and WordPiece word-initial
//!   `the` both surface as ` the`, although a decoder strips the space at the very start of a
//!   text. Added and special tokens surface as their content.
//! - Where one vocabulary has several tokens with the same key (`▁` and `<0x20>`), one is
//!   paired (ordinary before byte-fallback before added before special, then lowest id) and
//!   the others are counted as collisions: maps stay one-to-one.
//! - Decomposition counts give each drafter token its own sequence, so a surface that two
//!   drafter tokens share counts twice, as it does in ψ(t).
//! - Tables 6, 8 and 9 and `n_max` are reconstructions: the paper's exact definitions are not
//!   available to this project; each function documents the definition it uses.

#![deny(missing_docs)]

pub mod artifact;
mod error;
mod fingerprint;
mod map;
pub mod stats;
mod surface;
mod vocabulary;

pub use error::Error;
pub use fingerprint::Fingerprint;
pub use map::{ABSENT, MapSide, MatchMode, VocabMap};
pub use surface::{SurfaceStyle, byte_of_char, char_of_byte};
pub use vocabulary::{Token, TokenKind, Vocabulary};
