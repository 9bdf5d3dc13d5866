//! The burn model as the `anyspec-core` [`Target`]: one forward pass scores a whole draft.

use anyspec_core::engine::Target;
use anyspec_core::verify::verify_logits;
use anyspec_core::{DeterministicRule, Draft, DraftOrigin, SamplingConfig, Verdict};
use anyspec_kernels::{Uniforms, device_probs, is_host_device, supports, verify_on_device};
use burn::tensor::{Tensor, TensorData};
use rand::RngCore;
use std::sync::{Arc, Mutex};

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
    tap: Option<FeatureTap>,
}

/// The target's final-norm hidden state at every position it has scored and kept, shared with
/// a feature (EAGLE) drafter: [`LlamaTarget::with_feature_tap`] records them as the target runs,
/// rollback forgets the rejected ones, and the drafter reads what it has not seen yet.
///
/// Position `i`'s feature is the one the target's head turned into the logits that chose token
/// `i + 1`. Cheap to clone: clones share the record.
#[derive(Clone, Debug, Default)]
pub struct FeatureTap {
    record: Arc<Mutex<TapRecord>>,
}

#[derive(Debug, Default)]
struct TapRecord {
    hidden: usize,
    /// `[len, hidden]` flat.
    features: Vec<f32>,
}

impl FeatureTap {
    /// An empty record.
    pub fn new() -> Self {
        FeatureTap::default()
    }

    /// Number of positions recorded (`0..len`).
    pub fn len(&self) -> usize {
        let record = self.lock();
        record.features.len().checked_div(record.hidden).unwrap_or(0)
    }

    /// Whether nothing is recorded.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The features of positions `range` (`[range.len(), hidden]` flat), `None` when some of
    /// them are not recorded.
    pub fn features(&self, range: std::ops::Range<usize>) -> Option<Vec<f32>> {
        let record = self.lock();
        let h = record.hidden;
        (range.end * h <= record.features.len() && range.start <= range.end)
            .then(|| record.features[range.start * h..range.end * h].to_vec())
    }

    /// Forgets the positions from `len` on.
    pub fn truncate(&self, len: usize) {
        let mut record = self.lock();
        let h = record.hidden;
        record.features.truncate(len * h);
    }

    /// Records `features` (`[n, hidden]`) as positions `start..start + n`, forgetting any from
    /// `start` on. A gap before `start` (positions never recorded) or another width clears the
    /// record, and then only a record from position 0 is kept. [`LlamaTarget`] calls it on every
    /// pass; another target that has features can too.
    pub fn record(&self, start: usize, hidden: usize, features: &[f32]) {
        let mut record = self.lock();
        if hidden == 0 || !features.len().is_multiple_of(hidden) {
            record.features.clear();
            return;
        }
        if record.hidden != hidden || record.features.len() < start * hidden {
            record.features.clear();
            record.hidden = hidden;
            if start > 0 {
                return;
            }
        }
        record.features.truncate(start * hidden);
        record.features.extend_from_slice(features);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, TapRecord> {
        // A panic while recording leaves whole rows behind: the record stays usable.
        self.record.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl LlamaTarget {
    /// Wraps a loaded model.
    pub fn new(model: Llama) -> Self {
        LlamaTarget { session: Session::new(model), verification: Verification::default(), tap: None }
    }

    /// Records the final-norm hidden state of every position scored into `tap` (for a feature
    /// drafter). Verification then runs on the host: the features are read there anyway.
    pub fn with_feature_tap(mut self, tap: FeatureTap) -> Self {
        self.tap = Some(tap);
        self
    }

    /// [`LlamaTarget::with_feature_tap`] on a target in use (`None` stops recording).
    pub fn set_feature_tap(&mut self, tap: Option<FeatureTap>) {
        self.tap = tap;
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
        if let Some(tap) = &self.tap {
            tap.truncate(0);
        }
    }

    fn score_rows(&mut self, sequence: &[u32], draft_len: usize) -> Result<Vec<Vec<f32>>> {
        let Some(tap) = &self.tap else {
            return self.session.logits_on_host(sequence, draft_len + 1);
        };
        let run = self.session.logits_and_features_on_host(sequence, draft_len + 1)?;
        tap.record(run.start, self.model().config().hidden_size, &run.features);
        Ok(run.logits)
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
        if let Some(tap) = &self.tap {
            tap.truncate(len);
        }
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
        let device_wanted = self.tap.is_none()
            && match self.verification {
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
    fn a_feature_tap_keeps_whole_positions_and_forgets_what_is_rolled_back() {
        let tap = FeatureTap::new();
        let clone = tap.clone();
        assert!(tap.is_empty() && tap.features(0..0) == Some(vec![]));
        tap.record(0, 2, &[0.0, 0.1, 1.0, 1.1, 2.0, 2.1]);
        assert_eq!(clone.len(), 3, "clones share the record");
        assert_eq!(tap.features(1..3), Some(vec![1.0, 1.1, 2.0, 2.1]));
        assert_eq!(tap.features(2..4), None, "position 3 was never recorded");
        // A verification pass from position 2 replaces what followed.
        tap.record(2, 2, &[9.0, 9.1, 3.0, 3.1]);
        assert_eq!(tap.features(0..4), Some(vec![0.0, 0.1, 1.0, 1.1, 9.0, 9.1, 3.0, 3.1]));
        tap.truncate(1);
        assert_eq!(tap.len(), 1);
        // A gap (positions 1..5 unknown) clears the record instead of misplacing rows.
        tap.record(5, 2, &[5.0, 5.1]);
        assert!(tap.is_empty());
        tap.record(0, 2, &[0.0, 0.1]);
        tap.record(1, 3, &[1.0, 1.1, 1.2]);
        assert!(tap.is_empty(), "another width clears the record");
        tap.record(0, 3, &[0.0, 0.1]);
        assert!(tap.is_empty(), "rows that are not whole are refused");
    }

    #[test]
    fn the_cpu_backend_counts_as_the_host() {
        assert!(is_host_device(&burn::tensor::Device::flex()));
    }
}
