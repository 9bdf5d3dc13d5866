//! # anyspec-drafters
//!
//! Every draft source behind [`anyspec_core::Drafter`], the half of speculative decoding that
//! proposes tokens for the target to verify:
//!
//! - [`DictionaryDrafter`]: DictSpec's static n-gram dictionary — the longest suffix of the
//!   context that is a key proposes its stored continuation.
//! - [`PromptLookup`]: match the last n tokens against earlier context (prompt and generated
//!   text) and propose what followed.
//! - [`TokenNgramDrafter`]: a token-level n-gram model of the target's own earlier answers,
//!   drafting by chaining its most frequent continuations (llama.cpp's static lookup cache).
//! - [`Hybrid`]: one of prompt lookup and a static source first, the other as fallback
//!   (DictSpec's hybrid with the dictionary; ours with the n-gram model).
//! - [`ModelDrafter`]: a smaller model sharing the target's tokenizer, sampling its own
//!   distribution (or greedy at temperature 0).
//! - [`hetero`]: model drafters with *another* tokenizer, all made by one factory,
//!   [`hetero::build`]: [`HeteroModelDrafter`] with the union, TLI and RDK bridges,
//!   [`SlemDrafter`] (string-level exact match), [`slrs::SlrsDrafter`] (string-level rejection
//!   sampling against ψ, the exact probability of each proposal) and the automatic choice
//!   among them ([`hetero::AlgoRequest::Auto`]).
//!
//! The first four are deterministic: they return [`anyspec_core::Draft::deterministic`] (or an
//! empty draft when nothing matches), so verification by exact match keeps any temperature
//! lossless. Model drafters report the distribution each token was drawn from, over the target's
//! vocabulary, and are verified by speculative sampling.
//!
//! # The pipeline, with a drafter of another tokenizer
//!
//! ```text
//! target checkpoint ─► LlamaTarget ──────────────────────────────┐
//! drafter checkpoint ─► Llama ─┐                                  ├─► anyspec_core::generate
//! both tokenizers ─► Vocabulary ×2 ─► VocabMap ─► hetero::Pair ─┴─► hetero::build ─► Box<dyn Drafter>
//! ```
//!
//! ```no_run
//! use anyspec_core::{Drafter, GenerationConfig, generate};
//! use anyspec_drafters::hetero::{self, AlgoRequest, Options, Pair};
//! use anyspec_models::{Checkpoint, DeviceChoice, LlamaTarget};
//! use anyspec_vocab_map::{MatchMode, VocabMap, Vocabulary};
//! use rand::SeedableRng;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let device = DeviceChoice::Cpu.device()?;
//! let (target, drafter) = (Checkpoint::open("target")?, Checkpoint::open("drafter")?);
//! let (t_tok, d_tok) = (target.tokenizer()?, drafter.tokenizer()?);
//! let t_vocab = Vocabulary::from_tokenizer(t_tok.inner().clone(), "target")?;
//! let d_vocab = Vocabulary::from_tokenizer(d_tok.inner().clone(), "drafter")?;
//! let map = VocabMap::build(&t_vocab, &d_vocab, MatchMode::Bytes);
//! let pair = Pair {
//!     target_vocab: &t_vocab,
//!     drafter_vocab: &d_vocab,
//!     target_tokenizer: &t_tok,
//!     drafter_tokenizer: &d_tok,
//!     map: &map,
//!     target_rows: target.config().vocab_size,
//! };
//! let mut built = hetero::build(AlgoRequest::Auto, &pair, drafter.load_model(&device)?, Options::default())?;
//! let mut target = LlamaTarget::new(target.load_model(&device)?);
//! let prompt = t_tok.encode("Once upon a time")?;
//! let mut rng = rand::rngs::StdRng::seed_from_u64(0);
//! let drafter: Option<&mut dyn Drafter> = Some(built.drafter.as_mut());
//! let config = GenerationConfig::default();
//! let out = generate(&mut target, drafter, &prompt, &config, &mut rng, &mut |_| std::ops::ControlFlow::Continue(()))?;
//! println!("{} ({}): {}", built.choice.algo, built.choice.reason, t_tok.decode(&out.tokens)?);
//! # Ok(())
//! # }
//! ```
//!
//! `examples/hetero_generate.rs` runs the same on the small fixture models of the tests.

#![deny(missing_docs)]

/// `anyspec_core::Drafter` for drafters whose inherent `draft(context, max_tokens)` needs nothing
/// else (no sampling settings, no randomness): deterministic drafts, verified by exact match.
macro_rules! context_only_drafter {
    ($($drafter:ty),* $(,)?) => {$(
        impl anyspec_core::Drafter for $drafter {
            fn propose(
                &mut self,
                context: &[u32],
                max_tokens: usize,
                _sampling: &anyspec_core::SamplingConfig,
                _rng: &mut dyn rand::RngCore,
            ) -> anyspec_core::Result<anyspec_core::Draft> {
                Ok(self.draft(context, max_tokens))
            }
        }
    )*};
}

context_only_drafter!(DictionaryDrafter, PromptLookup, TokenNgramDrafter);

mod dictionary;
mod error;
pub mod hetero;
mod hybrid;
mod lookup_first;
mod model;
mod prompt_lookup;
mod token_ngram;

/// SLRS, string-level rejection sampling: [`hetero::slrs`] under its short path.
pub use hetero::slrs;

pub use dictionary::DictionaryDrafter;
pub use error::{Error, Result};
pub use hetero::auto::{Algo, AutoChoice};
pub use hetero::{AlgoRequest, Bridge, HeteroConfig, HeteroModelDrafter, RdkForm, SlemDrafter};
pub use hybrid::{Hybrid, HybridOrder, StaticSource};
pub use lookup_first::{FALLBACK_CLASS, LookupFirst};
pub use model::ModelDrafter;
pub use prompt_lookup::{MAX_NGRAM_LIMIT, PromptLookup, PromptLookupConfig};
pub use token_ngram::{MAX_ORDER_LIMIT, Prediction, TokenNgramConfig, TokenNgramDrafter, TokenNgramModel};
