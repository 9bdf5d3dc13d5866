//! # anyspec-drafters
//!
//! Draft sources behind [`anyspec_core::Drafter`]:
//!
//! - [`DictionaryDrafter`]: DictSpec's static n-gram dictionary — the longest suffix of the
//!   context that is a key proposes its stored continuation.
//! - [`PromptLookup`]: match the last n tokens against earlier context (prompt and generated
//!   text) and propose what followed.
//! - [`Hybrid`]: one of the two first, the other as fallback (DictSpec's hybrid).
//! - [`ModelDrafter`]: a smaller burn model sharing the target's tokenizer, sampling its own
//!   distribution (or greedy at temperature 0).
//! - [`hetero`]: model drafters with *another* tokenizer — [`HeteroModelDrafter`] with the
//!   union, TLI and RDK bridges, [`SlemDrafter`] (string-level exact match) and the
//!   `--algo auto` rule.
//! - [`slrs`]: string-level rejection sampling (`--algo slrs`) — a drafter with another
//!   tokenizer spells target tokens, verified against ψ, the exact probability of each proposal,
//!   computed by expanding the drafter's token tree.
//!
//! All three are deterministic: they return [`anyspec_core::Draft::deterministic`] (or an empty
//! draft when nothing matches), so verification by exact match keeps any temperature lossless.

#![deny(missing_docs)]

mod dictionary;
mod error;
pub mod hetero;
mod hybrid;
mod model;
mod prompt_lookup;
pub mod slrs;

pub use dictionary::DictionaryDrafter;
pub use error::{Error, Result};
pub use hetero::auto::Algo;
pub use hetero::{Bridge, HeteroConfig, HeteroModelDrafter, RdkForm, SlemDrafter};
pub use hybrid::{Hybrid, HybridOrder};
pub use model::ModelDrafter;
pub use prompt_lookup::{MAX_NGRAM_LIMIT, PromptLookup, PromptLookupConfig};
