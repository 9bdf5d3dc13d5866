//! # anyspec-vocab-map
//!
//! Vocabularies of Hugging Face tokenizers, the maps between two of them, and the statistics
//! of Timor et al., "Accelerating LLM Inference with Lossless Speculative Decoding Algorithms for
//! Heterogeneous Vocabularies" (ICML 2025).
//!
//! - [`Vocabulary`]: a loaded `tokenizer.json`, its id → token table and its [`Fingerprint`].

#![deny(missing_docs)]

mod error;
mod fingerprint;
mod vocabulary;

pub use error::Error;
pub use fingerprint::Fingerprint;
pub use vocabulary::{Token, TokenKind, Vocabulary};
