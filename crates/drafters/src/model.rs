//! A smaller model that shares the target's tokenizer drafts by sampling its own distribution.

use anyspec_core::sampling::{argmax, logits_to_probs, sample};
use anyspec_core::{Draft, Drafter, SamplingConfig};
use anyspec_models::{Llama, Session};
use rand::RngCore;

/// The homogeneous model drafter of speculative-decoding.txt: a small model over the target's
/// vocabulary proposes γ tokens autoregressively.
///
/// At temperature 0 the draft is the drafter's greedy continuation, returned as a deterministic
/// draft; otherwise each token is drawn from the drafter's distribution after the same
/// [`SamplingConfig`] transform the target uses, and the draft carries those distributions
/// (over the target's vocabulary) for speculative sampling.
///
/// The drafter keeps its own KV cache: each call compares the context with the tokens it has
/// cached and reuses the common prefix, so a rejected suffix is dropped and an accepted one is
/// reused without being told which happened.
#[derive(Clone, Debug)]
pub struct ModelDrafter {
    session: Session,
    target_vocab_size: usize,
}

impl ModelDrafter {
    /// Wraps a loaded model that drafts for a target with `target_vocab_size` ids.
    ///
    /// The two vocabularies must be the same tokenizer (check with
    /// `TextTokenizer::vocabulary_fingerprint` before building one); only the size of the
    /// embedding matrices may differ (checkpoints pad them). Drafter ids at or beyond the target's
    /// vocabulary are never proposed; target ids beyond the drafter's get probability 0.
    pub fn new(model: Llama, target_vocab_size: usize) -> Self {
        ModelDrafter { session: Session::new(model), target_vocab_size }
    }

    /// The drafter's model.
    pub fn model(&self) -> &Llama {
        self.session.model()
    }

    /// The drafter's logits for the next token after `sequence`, as a row over the target's
    /// vocabulary: ids past the drafter's vocabulary are masked (−∞).
    fn next_logits(&mut self, sequence: &[u32]) -> anyspec_core::Result<Vec<f32>> {
        let mut row = self
            .session
            .logits_on_host(sequence, 1)
            .map_err(|e| anyspec_core::Error::Drafter(Box::new(e)))?
            .pop()
            .unwrap_or_default();
        row.resize(self.target_vocab_size, f32::NEG_INFINITY);
        Ok(row)
    }
}

impl Drafter for ModelDrafter {
    fn propose(
        &mut self,
        context: &[u32],
        max_tokens: usize,
        sampling: &SamplingConfig,
        rng: &mut dyn RngCore,
    ) -> anyspec_core::Result<Draft> {
        let drafter_vocab = self.model().config().vocab_size;
        // Context ids the drafter cannot embed mean the tokenizers differ: no guess this step.
        if context.is_empty() || context.iter().any(|&t| t as usize >= drafter_vocab) {
            return Ok(Draft::empty());
        }
        let room = self.model().config().max_position_embeddings.saturating_sub(context.len());
        // The last drafted token is sampled, never fed, so a full window still allows one more.
        let count = max_tokens.min(room + 1);
        let mut sequence = context.to_vec();
        let mut tokens = Vec::with_capacity(count);
        let mut distributions = Vec::with_capacity(count);
        for _ in 0..count {
            if sequence.len() > self.model().config().max_position_embeddings {
                break;
            }
            let logits = self.next_logits(&sequence)?;
            let probs = logits_to_probs(&logits, sampling)?;
            let token = if sampling.is_greedy() { argmax(&probs) } else { sample(&probs, rng)? };
            tokens.push(token);
            sequence.push(token);
            if !sampling.is_greedy() {
                distributions.push(probs);
            }
        }
        Ok(if sampling.is_greedy() { Draft::deterministic(tokens) } else { Draft::sampled(tokens, distributions) })
    }
}
