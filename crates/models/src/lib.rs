//! # anyspec-models
//!
//! Llama-family decoders (Llama 2 and 3, TinyLlama, Mistral, Qwen2) in burn, loaded from
//! Hugging Face checkpoint directories, with a KV cache that rolls back and the verification
//! primitive of speculative decoding: the logits of k new positions from one forward pass.
//!
//! - [`Checkpoint`]: `config.json` (validated into a [`LlamaConfig`]), safetensors weights (one
//!   file or a sharded index; f32, f16 and bf16, computed in f32) and `tokenizer.json`.
//! - [`Llama`]: the model; [`Llama::forward`] runs new tokens against a [`KvCache`];
//!   [`Llama::forward_tree`] and [`Llama::extend_tree`] score a whole tree of continuations in
//!   one pass (tree attention), level by level with a [`TreeCache`].
//! - [`Session`]: model + cache + the cached tokens; reuses the longest common prefix.
//! - [`LlamaTarget`]: the [`anyspec_core::Target`] (scores the last γ + 1 positions, rolls back
//!   by truncating the cache, verifies on the device with `anyspec-kernels`).
//! - [`DeviceChoice`]: `cpu` (burn's flex backend), `wgpu`, `cuda`, chosen at run time.
//!
//! ```no_run
//! use anyspec_models::{Checkpoint, DeviceChoice, LlamaTarget};
//!
//! # fn main() -> Result<(), anyspec_models::Error> {
//! let checkpoint = Checkpoint::open("models/TinyLlama-1.1B")?;
//! let device = DeviceChoice::Cpu.device()?;
//! let target = LlamaTarget::new(checkpoint.load_model(&device)?);
//! # let _ = target;
//! # Ok(())
//! # }
//! ```
//!
//! ## Quirks
//! - Weights are converted to f32 on load whatever their stored dtype.
//! - Batch size is one: speculative decoding verifies one sequence at a time.
//! - Sliding-window attention (Mistral) is applied through the mask; the cache keeps every
//!   position.

#![deny(missing_docs)]

mod cache;
mod checkpoint;
mod config;
mod device;
mod error;
mod gguf;
mod llama;
mod model;
mod native;
mod rope;
mod session;
mod source;
mod target;
mod tokenizer;
mod weights;

pub use anyspec_cpu_kernels::{Kernel, WeightFormat};
pub use checkpoint::{Checkpoint, CheckpointFormat};
pub use config::{LlamaConfig, RopeScaling};
pub use device::DeviceChoice;
pub use error::{Error, Result};
pub use gguf::SUPPORTED_ARCHITECTURES;
pub use llama::{PrunedHead, TreeNode};
pub use model::{Engine, KvCache, Llama, LoadOptions, TreeCache};
pub use session::Session;
pub use target::{LlamaTarget, Verification};
pub use tokenizer::TextTokenizer;
