//! Model drafters whose tokenizer differs from the target's (hetero-vocab-sd.txt,
//! oov-sampling-rdk.txt). [`build`] makes any of them from a [`Pair`] and an [`AlgoRequest`];
//! the types below are what it builds.
//!
//! | drafter | bridge | verification |
//! |---|---|---|
//! | [`HeteroModelDrafter`] + [`Bridge::Union`] | Alg 1: full drafter distribution, drafts outside `T` rejected | speculative sampling over `T ∪ D` |
//! | [`HeteroModelDrafter`] + [`Bridge::Tli`] | Alg 4: restricted to `T ∩ D`, LM head pruned | speculative sampling |
//! | [`HeteroModelDrafter`] + [`Bridge::Rdk`] | TLI, then `Mᵀ q'` (exact, or App. B.2's first-order dense kernel) | speculative sampling |
//! | [`SlemDrafter`] | Alg 2: text re-tokenized with the target tokenizer | exact match |
//! | [`slrs::SlrsDrafter`] | Alg 3: drafter tokens spell target tokens | rejection sampling against ψ |
//!
//! Both keep the drafter's context in its own ids, converted through text with a look-behind
//! window ([`DEFAULT_LOOKBEHIND`]) and extended with the drafter's own tokens where they were
//! accepted, so the drafter's KV cache survives across steps. [`auto::choose`] picks an
//! algorithm for [`AlgoRequest::Auto`].

pub mod auto;
mod bridge;
pub(crate) mod context;
mod factory;
mod model_drafter;
mod slem;
pub mod slrs;
pub(crate) mod source;
pub(crate) mod text;

pub use bridge::{Bridge, ContextMapping, HeteroConfig, RdkForm};
pub use factory::{AlgoRequest, Built, DEFAULT_SAMPLE_TEXT, Options, Pair, build};
pub use model_drafter::HeteroModelDrafter;
pub use slem::{SLEM_DRAFTER_TOKENS_PER_TARGET_TOKEN, SlemDrafter};
pub use source::{BurnDrafterModel, DrafterModel};
pub use text::{DEFAULT_LOOKBEHIND, after_overlap, encode_after, longest_overlap};
