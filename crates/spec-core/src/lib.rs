//! # anyspec-core
//!
//! The algorithms of lossless speculative decoding, on plain slices: no tensor library, no
//! tokenizer, randomness from an RNG you pass in. Anyone can embed it.
//!
//! - [`sampling`]: logits → the probabilities that are sampled (temperature, top-k, top-p).
//! - [`verify`]: the verification rules — speculative sampling with full or point-mass draft
//!   distributions, exact match, the union rule, string-level rejection (SLRS).
//! - [`projection`]: carrying a drafter's distribution over another vocabulary onto the
//!   target's: union, token-level intersection (TLI) and RDK's redistribution.
//! - [`theory`]: α, expected tokens per step, the walltime improvement factor and the best γ,
//!   DynaSpec's overlap and accepted-length bounds (Theorems 5.1, 5.3) beside our own shortlist
//!   bound, and the DictSpec emulation metrics.
//! - [`engine`]: the [`Drafter`] and [`Target`] traits and the [`generate`] loop;
//!   [`adaptive`]: the γ tuner it can run with; [`audit`]: the acceptance tests of a run
//!   against what the target's logits promised.
//! - [`toy`]: Markov-chain targets and drafters whose exact output distribution is known, for
//!   tests and `anyspec simulate`.
//!
//! Every rule cites the paper and equation it implements; the papers are listed in the
//! repository's `ARCHITECTURE.md`.
//!
//! ```
//! use anyspec_core::{Draft, verify::speculative_sampling};
//! use rand::SeedableRng;
//!
//! # fn main() -> Result<(), anyspec_core::Error> {
//! let mut rng = rand::rngs::StdRng::seed_from_u64(0);
//! // Target distributions at the γ + 1 = 3 positions, and the drafter's at the 2 drafted ones.
//! let target = [vec![0.6, 0.4], vec![0.1, 0.9], vec![0.5, 0.5]];
//! let draft_probs = [vec![0.5, 0.5], vec![0.2, 0.8]];
//! let verdict = speculative_sampling(&target, &[0, 1], &draft_probs, &mut rng)?;
//! assert!(verdict.accepted <= 2);
//! # let _ = Draft::empty();
//! # Ok(())
//! # }
//! ```

#![deny(missing_docs)]

pub mod adaptive;
pub mod artifact;
pub mod audit;
mod draft;
pub mod engine;
mod error;
pub mod goodness_of_fit;
pub mod progress;
pub mod projection;
pub mod sampling;
pub mod theory;
pub mod toy;
pub mod verify;

pub use adaptive::GammaTuner;
pub use audit::{AcceptanceAudit, AuditedTarget};
pub use draft::{Draft, DraftBuilder, DraftOrigin};
pub use engine::{
    Drafter, GammaPolicy, Generation, GenerationConfig, Stats, StopReason, Target, generate, generate_tuned,
};
pub use error::{Error, InvalidParameter, Result};
pub use progress::{NoProgress, Progress, ProgressUnit};
pub use sampling::SamplingConfig;
pub use verify::{DeterministicRule, Verdict};
