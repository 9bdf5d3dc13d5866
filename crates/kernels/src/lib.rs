//! # anyspec-kernels
//!
//! Speculative verification on the device that holds the logits, so that a step moves O(γ)
//! numbers to the host instead of γ × |V| floats.
//!
//! - [`device_probs`]: logits → the sampled distribution (temperature, greedy) with tensor ops.
//! - [`verify_on_device`]: probabilities at the drafted tokens, acceptance decisions and the
//!   residual sample in one batch of tensor ops, with [`Uniforms`] drawn up front on the host.
//! - [`readback`]: small device → host copies that return errors instead of panicking.
//!
//! Every operation is written with burn's tensor API, so it runs on every backend (flex on the
//! CPU, wgpu, CUDA). The tests check it against the host rule of `anyspec-core` driven by the
//! same uniforms: the verdicts are identical.
//!
//! ## Quirks
//! - There is no hand-written CubeCL kernel yet: on a GPU the steps above are a handful of
//!   small launches (gather, compare, cumulative sum, reductions) rather than one fused kernel.
//!   A fused kernel would sit behind a `#[backend_extension]` trait with this implementation as
//!   its default body and reference.
//! - Top-k and top-p need a sort with the host's tie-breaking; [`device_probs`] refuses them and
//!   callers verify on the host.
//!
//! ```
//! use anyspec_kernels::{Uniforms, verify_on_device};
//! use burn::tensor::{Device, Tensor};
//!
//! # fn main() -> Result<(), anyspec_kernels::Error> {
//! let device = Device::flex();
//! // Target distributions at γ + 1 = 2 positions over a vocabulary of 3 tokens.
//! let p = Tensor::<2>::from_floats([[0.2, 0.7, 0.1], [0.3, 0.3, 0.4]], &device);
//! let uniforms = Uniforms { accept: vec![0.5], residual: 0.9 };
//! // A deterministic draft of token 1: accepted because 0.5 · 1 < 0.7; the bonus comes from row 1.
//! let verdict = verify_on_device(p, &[1], None, &uniforms)?;
//! assert_eq!((verdict.accepted, verdict.next_token, verdict.bonus), (1, 2, true));
//! # Ok(())
//! # }
//! ```

#![deny(missing_docs)]

mod error;
mod probs;
pub mod readback;
mod verify;

pub use error::{Error, Result};
pub use probs::{device_probs, supports};
pub use verify::{Uniforms, verify_on_device};
