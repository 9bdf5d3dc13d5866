//! # anyspec-kernels
//!
//! Speculative verification on the device that holds the logits, so that a step moves O(γ)
//! numbers to the host instead of γ × |V| floats.
//!
//! - [`device_probs`]: logits → the sampled distribution (temperature, greedy) with tensor ops.
//! - [`verify_on_device`]: probabilities at the drafted tokens, acceptance decisions and the
//!   residual sample in one step, with [`Uniforms`] drawn up front on the host.
//! - [`acceptance`](mod@acceptance): that step, packed into a `[γ + 1, 4]` result. Two bodies:
//!   [`acceptance_reference`] in plain burn tensor ops (every backend; flex runs it), and with the
//!   `wgpu` or `cuda` feature a hand-written CubeCL kernel (`acceptance_fused`, one launch,
//!   reached through a `#[backend_extension]` trait) that [`acceptance()`] picks on CubeCL
//!   devices.
//! - [`gathered_head`](mod@gathered_head): a drafter's LM head over a shortlist of vocabulary ids
//!   (DynaSpec's dynamic shortlists) without a gathered copy of the kept rows: a CubeCL kernel
//!   on wgpu/CUDA, [`gathered_head_reference`] in plain tensor ops elsewhere.
//! - [`readback`]: small device → host copies that return errors instead of panicking.
//!
//! The tests check the reference against the host rule of `anyspec-core` driven by the same
//! uniforms (identical verdicts), and, under the `wgpu` feature, the kernel against the
//! reference on wgpu (Mesa's lavapipe in CI); likewise the gathered head kernel against its
//! reference and a host f64 sum.
//!
//! ## Quirks
//! - The kernel and the reference sum the residual in different orders, so their totals may
//!   differ in the last bits and, in principle, a sample whose threshold falls within that
//!   rounding of a cumulative boundary; see the `acceptance` module for the bound.
//! - Vocabularies up to 2²⁴ tokens (sampled ids travel as exact f32 integers).
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

pub mod acceptance;
mod error;
pub mod gathered_head;
mod probs;
pub mod readback;
mod verify;

#[cfg(feature = "cubecl")]
pub use acceptance::acceptance_fused;
pub use acceptance::{AcceptanceInputs, Uniforms, acceptance, acceptance_reference, read_acceptance};
pub use error::{Error, Result};
#[cfg(feature = "cubecl")]
pub use gathered_head::gathered_head_fused;
pub use gathered_head::{gathered_head, gathered_head_is_fused, gathered_head_reference};
pub use probs::{device_probs, is_host_device, supports};
pub use verify::{verdict_from_rows, verify_on_device};
