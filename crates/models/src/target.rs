//! The burn model as the `anyspec-core` [`Target`]: one forward pass scores a whole draft.

use anyspec_core::engine::Target;
use anyspec_core::verify::verify_logits;
use anyspec_core::{DeterministicRule, Draft, DraftOrigin, SamplingConfig, Verdict};
use anyspec_kernels::{Uniforms, device_probs, is_host_device, supports, verify_on_device};
use burn::tensor::{Tensor, TensorData};
use rand::RngCore;

use crate::error::Result;
use crate::model::Llama;
use crate::session::Session;

/// Where a draft is verified.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Verification {
    /// [`Verification::Device`] on an accelerator, [`Verification::Host`] when the model runs on
    /// the CPU (flex), where the logits already sit in host memory and the host rule is the
    /// cheaper of the two (`anyspec_kernels::is_host_device`).
    #[default]
    Auto,
    /// On the model's device with `anyspec-kernels` (O(γ) numbers to the host) whenever the
    /// sampling transform allows it (temperature / greedy, no top-k or top-p truncation) and
    /// the rule is the point-mass one; on the host otherwise.
    Device,
    /// Always read γ + 1 logit rows back and apply the `anyspec-core` rule on the host.
    Host,
}

impl Verification {
    /// The names `--verify` accepts: auto, device, host.
    pub fn name(self) -> &'static str {
        match self {
            Verification::Auto => "auto",
            Verification::Device => "device",
            Verification::Host => "host",
        }
    }
}

impl std::str::FromStr for Verification {
    type Err = crate::error::Error;

    fn from_str(name: &str) -> Result<Self> {
        match name.to_ascii_lowercase().as_str() {
            "auto" => Ok(Verification::Auto),
            "device" => Ok(Verification::Device),
            "host" => Ok(Verification::Host),
            _ => Err(crate::error::Error::InvalidArgument(format!(
                "unknown verification place {name:?}; use auto, device or host"
            ))),
        }
    }
}

/// A Llama-family model that scores drafts: `score` runs the new positions of a sequence in one
/// forward pass; `rollback` truncates the KV cache.
#[derive(Clone, Debug)]
pub struct LlamaTarget {
    session: Session,
    verification: Verification,
}

impl LlamaTarget {
    /// Wraps a loaded model.
    pub fn new(model: Llama) -> Self {
        LlamaTarget { session: Session::new(model), verification: Verification::default() }
    }

    /// Chooses where drafts are verified.
    pub fn with_verification(mut self, verification: Verification) -> Self {
        self.verification = verification;
        self
    }

    /// The model.
    pub fn model(&self) -> &Llama {
        self.session.model()
    }

    /// Forgets the cached sequence (for a new prompt).
    pub fn reset(&mut self) {
        self.session.reset();
    }

    fn score_rows(&mut self, sequence: &[u32], draft_len: usize) -> Result<Vec<Vec<f32>>> {
        self.session.logits_on_host(sequence, draft_len + 1)
    }

    fn verify_on_device(
        &mut self,
        sequence: &[u32],
        draft: &Draft,
        sampling: &SamplingConfig,
        rng: &mut dyn RngCore,
    ) -> Result<Verdict> {
        let logits = self.session.logits(sequence, draft.len() + 1)?;
        let target_probs = device_probs(logits, sampling)?;
        let draft_probs = match &draft.origin {
            DraftOrigin::Deterministic => None,
            DraftOrigin::Sampled { distributions, .. } => {
                let vocab = self.model().config().vocab_size;
                let mut flat = Vec::with_capacity(distributions.len() * vocab);
                for row in distributions {
                    if row.len() != vocab {
                        return Err(anyspec_core::Error::LengthMismatch {
                            what: "a draft distribution (target vocabulary size)",
                            expected: vocab,
                            got: row.len(),
                        }
                        .into());
                    }
                    flat.extend_from_slice(row);
                }
                if distributions.len() != draft.len() {
                    return Err(anyspec_core::Error::LengthMismatch {
                        what: "draft distributions (one per drafted token)",
                        expected: draft.len(),
                        got: distributions.len(),
                    }
                    .into());
                }
                let device = self.model().device().clone();
                Some(Tensor::<2>::from_data(TensorData::new(flat, [draft.len(), vocab]), &device))
            }
        };
        let uniforms = Uniforms::draw(draft.len(), rng);
        Ok(verify_on_device(target_probs, &draft.tokens, draft_probs, &uniforms)?)
    }
}

impl Target for LlamaTarget {
    fn vocab_size(&self) -> usize {
        self.model().config().vocab_size
    }

    fn max_sequence_len(&self) -> Option<usize> {
        Some(self.model().config().max_position_embeddings)
    }

    fn score(&mut self, sequence: &[u32], draft_len: usize) -> anyspec_core::Result<Vec<Vec<f32>>> {
        Ok(self.score_rows(sequence, draft_len)?)
    }

    fn rollback(&mut self, len: usize) -> anyspec_core::Result<()> {
        self.session.truncate(len);
        Ok(())
    }

    fn verify(
        &mut self,
        sequence: &[u32],
        draft: &Draft,
        sampling: &SamplingConfig,
        rule: DeterministicRule,
        rng: &mut dyn RngCore,
    ) -> anyspec_core::Result<Verdict> {
        let device_wanted = match self.verification {
            Verification::Auto => !is_host_device(self.model().device()),
            Verification::Device => true,
            Verification::Host => false,
        };
        let on_device = device_wanted
            && supports(sampling, self.vocab_size())
            && rule == DeterministicRule::PointMass
            && matches!(draft.origin, DraftOrigin::Deterministic | DraftOrigin::Sampled { outside_target: None, .. });
        if on_device {
            return Ok(self.verify_on_device(sequence, draft, sampling, rng)?);
        }
        let logits = self.score_rows(sequence, draft.len())?;
        verify_logits(&logits, draft, sampling, rule, rng)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verification_names_round_trip_and_unknown_names_are_errors() {
        for v in [Verification::Auto, Verification::Device, Verification::Host] {
            assert_eq!(v.name().parse::<Verification>().unwrap(), v);
        }
        let err = "gpu".parse::<Verification>().unwrap_err().to_string();
        assert!(err.contains("\"gpu\"") && err.contains("auto, device or host"), "{err}");
    }

    #[test]
    fn the_cpu_backend_counts_as_the_host() {
        assert!(is_host_device(&burn::tensor::Device::flex()));
    }
}
