//! # anyspec-train
//!
//! Trains the small models that `anyspec demo` ships with, in pure Rust on a CPU: no model can be
//! downloaded where the project runs, so it grows its own.
//!
//! - [`train_byte_level_bpe`], [`train_metaspace_bpe`], [`byte_tokenizer`]: three tokenizers of
//!   different families (GPT-2 byte-level BPE; SentencePiece-style `▁` BPE with byte fallback;
//!   one token per byte), so that drafters and target disagree on vocabularies the way real
//!   model pairs do.
//! - [`ModelSpec`] + [`TrainableLlama`]: the Llama architecture that `anyspec-models` loads
//!   (RMSNorm, RoPE, grouped-query attention, SwiGLU, tied embeddings), batched for training
//!   over burn tensors with autodiff. Its blocks are `anyspec_models::blocks`, the ones the
//!   burn inference engine runs, so a trained model and its reloaded checkpoint agree.
//! - [`train`]: random windows of a token stream, next-token cross-entropy, AdamW with warm-up and
//!   cosine decay, global-norm clipping; progress through [`anyspec_core::Progress`] and a
//!   per-step callback for logs.
//! - [`train_router`]: DynaSpec's cluster router (a two-layer MLP, multi-label BCE over
//!   clusters), for `anyspec-dynaspec`.
//! - [`train_eagle`]: an EAGLE feature drafter (one Llama layer over `[E(x_{i+1}); f_i]`
//!   predicting the target's next final-norm feature; SmoothL1 + shortlist cross-entropy), with
//!   [`eagle_forward_host`] as a reference forward for runtimes.
//! - [`save_checkpoint`]: a Hugging Face checkpoint directory (`config.json`,
//!   `model.safetensors`, `tokenizer.json`) that `anyspec_models::Checkpoint` and Python
//!   `transformers` load.
//!
//! ```no_run
//! use anyspec_core::NoProgress;
//! use anyspec_train::{ModelSpec, StoredDtype, TrainConfig, TrainableLlama, save_checkpoint, train};
//!
//! # fn main() -> Result<(), anyspec_train::Error> {
//! let texts = ["It is a truth universally acknowledged, ..."];
//! let tokenizer = anyspec_train::train_byte_level_bpe(&texts, 512)?;
//! let stream = anyspec_train::encode_stream(&tokenizer, &texts, 0)?;
//! let spec = ModelSpec {
//!     vocab_size: tokenizer.get_vocab_size(true),
//!     hidden_size: 64,
//!     intermediate_size: 192,
//!     num_layers: 2,
//!     num_heads: 4,
//!     num_kv_heads: 2,
//!     max_position_embeddings: 512,
//!     rope_theta: 10_000.0,
//!     rms_norm_eps: 1e-5,
//!     eos_token_id: 0,
//! };
//! let device = burn::tensor::Device::flex();
//! let mut model = TrainableLlama::new(spec, 0, &device)?;
//! let report = train(&mut model, &stream, &stream, &TrainConfig::default(), &NoProgress, &mut |_| {})?;
//! save_checkpoint(&model, &tokenizer, "out/model".as_ref(), StoredDtype::F16, &[])?;
//! # let _ = report;
//! # Ok(())
//! # }
//! ```
//!
//! ## Quirks
//! - Embeddings are always tied to the LM head (the embedding table dominates small models).
//! - Training uses burn's `autodiff` feature; cargo unifies it into every workspace build, which
//!   costs inference nothing because inference devices never enable autodiff.
//! - Batches are independent windows that may straddle document boundaries; the end-of-document
//!   token between documents teaches the model where one ends.

#![deny(missing_docs)]

mod adamw;
mod eagle;
mod error;
mod export;
mod model;
mod router;
mod spec;
mod tokenizer_training;
mod trainer;

pub use eagle::{
    EAGLE_TENSORS, EagleFrozen, EagleShape, EagleTrainConfig, EagleWeights, FeatureData, FeatureSequence,
    eagle_forward_host, train_eagle,
};
pub use error::{Error, Result};
pub use export::{StoredDtype, save_checkpoint};
pub use model::TrainableLlama;
pub use router::{RouterData, RouterTrainConfig, RouterWeights, train_router};
pub use spec::ModelSpec;
pub use tokenizer_training::{
    BYTE_LEVEL_EOS, METASPACE_EOS, byte_tokenizer, encode_stream, train_byte_level_bpe, train_metaspace_bpe,
};
pub use trainer::{StepLog, TrainConfig, TrainReport, train};
