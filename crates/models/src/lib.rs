//! # anyspec-models
//!
//! Llama-family decoders (Llama 2 and 3, TinyLlama, Mistral, Qwen2, SmolLM2) loaded from Hugging
//! Face checkpoint directories or GGUF files, with a KV cache that rolls back and the
//! verification primitive of speculative decoding: the logits of k new positions from one
//! forward pass.
//!
//! - [`Checkpoint`]: a directory (`config.json` validated into a [`LlamaConfig`], safetensors
//!   weights in f32/f16/bf16, `tokenizer.json`) or a `.gguf` file (configuration, tensors,
//!   tokenizer and chat template from its metadata; F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q4_K, Q6_K).
//! - [`Llama`]: the model, over two [`Engine`]s chosen at load ([`LoadOptions`]): the **native**
//!   CPU engine (matrix products by `anyspec-cpu-kernels` on weights repacked once, quantized
//!   weights kept quantized, a KV cache written in place) and **burn** (any burn device; f32).
//!   [`Llama::forward`] runs new tokens against a [`KvCache`]; [`Llama::forward_tree`] and
//!   [`Llama::extend_tree`] score a whole tree of continuations in one pass (tree attention).
//! - [`Session`]: model + cache + the cached tokens; reuses the longest common prefix.
//! - [`LlamaTarget`]: the [`anyspec_core::Target`] (scores the last γ + 1 positions, rolls back
//!   by truncating the cache, verifies where the logits are).
//! - [`DeviceChoice`]: `cpu`, `wgpu`, `cuda`, chosen at run time.
//! - [`blocks`]: RMSNorm, RoPE, SwiGLU and attention over burn tensors, the one definition of
//!   the architecture that the burn engine and `anyspec-train`'s training model both run.
//!
//! ```no_run
//! use anyspec_models::{Checkpoint, DeviceChoice, LlamaTarget, Session};
//!
//! # fn main() -> Result<(), anyspec_models::Error> {
//! let checkpoint = Checkpoint::open("SmolLM2-135M-Instruct.Q4_1.gguf")?;
//! let model = checkpoint.load_model(&DeviceChoice::Cpu.device()?)?;
//! let tokenizer = checkpoint.tokenizer()?;
//! let prompt = tokenizer.encode(&checkpoint.chat_prompt(None, "What is the capital of France?")?)?;
//! // The logits of the prompt's last position, on the host.
//! let mut session = Session::new(model.clone());
//! let logits = session.logits_on_host(&prompt, 1)?;
//! # let _ = (logits, LlamaTarget::new(model));
//! # Ok(())
//! # }
//! ```
//!
//! ## Quirks
//! - The burn engine converts weights to f32 whatever their stored dtype; the native engine
//!   keeps GGML-quantized weights quantized and widens f16/bf16 to f32 at load.
//! - Batch size is one: speculative decoding verifies one sequence at a time.
//! - Sliding-window attention (Mistral) is applied through the mask; the cache keeps every
//!   position.
//! - GGUF files with RoPE scaling metadata (Llama 3.1's `rope_freqs`) are refused for now.

#![deny(missing_docs)]

pub mod blocks;
mod cache;
mod checkpoint;
mod config;
mod device;
mod error;
mod feature;
mod gguf;
mod head_blocks;
mod llama;
mod model;
mod native;
mod rope;
pub mod sections;
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
pub use feature::{FeatureModel, FeatureTensors};
pub use gguf::SUPPORTED_ARCHITECTURES;
pub use head_blocks::HeadBlocks;
pub use llama::{PrunedHead, TreeNode};
pub use model::{Engine, HiddenRows, KvCache, Llama, LoadOptions, TreeCache};
pub use session::{RunFeatures, Session};
pub use target::{FeatureTap, LlamaTarget, Verification};
pub use tokenizer::TextTokenizer;
