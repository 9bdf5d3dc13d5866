//! # anyspec-vocab-map
//!
//! Vocabularies of Hugging Face tokenizers, the maps between two of them, and the statistics
//! of Timor et al., "Accelerating LLM Inference with Lossless Speculative Decoding Algorithms for
//! Heterogeneous Vocabularies" (ICML 2025).
//!
//! - [`Vocabulary`]: a loaded `tokenizer.json`, its id → token table and its [`Fingerprint`].

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
