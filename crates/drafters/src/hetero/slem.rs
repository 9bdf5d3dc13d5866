//! SLEM (hetero-vocab-sd.txt Algorithm 2): string-level exact match.

use anyspec_core::sampling::{argmax, logits_to_probs, sample};
use anyspec_core::{Draft, Drafter, SamplingConfig};
use anyspec_models::{Llama, TextTokenizer};
use rand::RngCore;

use crate::error::Result;
use crate::hetero::context::ContextSync;
use crate::hetero::source::{BurnDrafterModel, DrafterModel};
use crate::hetero::text::{DEFAULT_LOOKBEHIND, encode_after, text_after};

/// Most drafter tokens drafted per target token asked for. A drafter with shorter tokens needs
/// several of its tokens per target token; past this budget the step verifies what it has.
pub const SLEM_DRAFTER_TOKENS_PER_TARGET_TOKEN: usize = 3;

/// A model drafter with another tokenizer whose drafts are carried over as *text*.
///
/// Each step the drafter continues its own context (the target's, re-tokenized through text:
/// see `ContextSync`) by up to `γ ·` [`SLEM_DRAFTER_TOKENS_PER_TARGET_TOKEN`] tokens of its own,
/// greedily at temperature 0 and by sampling its distribution otherwise. The new text is
/// re-tokenized with the target tokenizer as a continuation of the context (look-behind window,
/// no special tokens) and proposed as a deterministic draft, which the target verifies by exact
/// match (or its point-mass equivalent): the output is the target's own, token for token at
/// temperature 0 and in distribution otherwise, whatever the drafter does.
///
/// - A final partial word is held back: the last target token of the re-tokenized text is
///   dropped, because more text could still merge into it (`Ġdec` + `oding` → `Ġdecoding`).
///   It is kept only when the drafter ended its text with one of its special tokens.
/// - A special token the drafter samples (its end of sequence) ends the draft; it is never
///   carried into the target's stream.
/// - Where the target's draft tokens and the drafter's tokens end on the same character,
///   the pair is recorded as aligned, so an accepted prefix keeps the drafter's KV cache
///   (rolled back to the agreed prefix); the rest is re-tokenized at the next step.
#[derive(Clone, Debug)]
pub struct SlemDrafter<M = BurnDrafterModel> {
    model: M,
    target_tokenizer: TextTokenizer,
    drafter_tokenizer: TextTokenizer,
    /// Whether each drafter id is a special token.
    special: Vec<bool>,
    context: ContextSync,
    lookbehind: usize,
}

impl SlemDrafter<BurnDrafterModel> {
    /// A burn model drafting through text for the target whose tokenizer is `target_tokenizer`.
    pub fn new(model: Llama, target_tokenizer: TextTokenizer, drafter_tokenizer: TextTokenizer) -> Result<Self> {
        Self::with_model(BurnDrafterModel::new(model), target_tokenizer, drafter_tokenizer, DEFAULT_LOOKBEHIND)
    }
}

impl<M: DrafterModel> SlemDrafter<M> {
    /// [`SlemDrafter::new`] over any [`DrafterModel`], with a look-behind window of
    /// `lookbehind` tokens (≥ 1).
    pub fn with_model(
        mut model: M,
        target_tokenizer: TextTokenizer,
        drafter_tokenizer: TextTokenizer,
        lookbehind: usize,
    ) -> Result<Self> {
        model.keep_rows(None)?;
        let mut special = vec![false; drafter_tokenizer.vocab_size().max(model.vocab_size())];
        for (&id, token) in drafter_tokenizer.inner().get_added_tokens_decoder().iter() {
            if token.special
                && let Some(slot) = special.get_mut(id as usize)
            {
                *slot = true;
            }
        }
        // Rows past the tokenizer (padding of the embedding matrix) decode to nothing either.
        for slot in special.iter_mut().skip(drafter_tokenizer.vocab_size()) {
            *slot = true;
        }
        Ok(SlemDrafter {
            model,
            target_tokenizer,
            drafter_tokenizer,
            special,
            context: ContextSync::new(lookbehind)?,
            lookbehind,
        })
    }

    /// The drafter model.
    pub fn model(&self) -> &M {
        &self.model
    }

    fn propose_inner(
        &mut self,
        context: &[u32],
        max_tokens: usize,
        sampling: &SamplingConfig,
        rng: &mut dyn RngCore,
    ) -> Result<Draft> {
        let mut sequence = self.context.sync(context, &self.target_tokenizer, &self.drafter_tokenizer)?.to_vec();
        if sequence.is_empty() || self.context.target().len() != context.len() || max_tokens == 0 {
            return Ok(Draft::empty());
        }
        let base = sequence.len();
        let budget = max_tokens.saturating_mul(SLEM_DRAFTER_TOKENS_PER_TARGET_TOKEN);
        let max_len = self.model.max_sequence_len();
        let mut ended = false;
        let mut targets = Vec::new();
        while sequence.len() - base < budget && sequence.len() <= max_len {
            let probs = logits_to_probs(&self.model.next_logits(&sequence)?, sampling)?;
            let d = if sampling.is_greedy() { argmax(&probs) } else { sample(&probs, &mut *rng)? };
            if self.special.get(d as usize).copied().unwrap_or(true) {
                ended = true;
                break;
            }
            sequence.push(d);
            // Re-tokenize everything drafted so far; one more target token than asked for lets
            // the held-back last token go and still fill the draft.
            targets = self.retokenize(context, &sequence, base)?;
            if targets.len() > max_tokens {
                break;
            }
        }
        if !ended {
            targets.pop();
        }
        targets.truncate(max_tokens);
        self.record_alignment(context, &targets, &sequence, base)?;
        Ok(Draft::deterministic(targets))
    }

    /// The target tokens of the text `sequence[base..]` adds, as a continuation of `context`.
    fn retokenize(&self, context: &[u32], sequence: &[u32], base: usize) -> Result<Vec<u32>> {
        let text = text_after(&self.drafter_tokenizer, sequence, base, self.lookbehind)?;
        encode_after(&self.target_tokenizer, context, &text, self.lookbehind)
    }

    /// Records the places where the draft's target tokens and the drafter's tokens end on the
    /// same byte of text, so that an accepted prefix keeps the drafter's ids (and KV cache).
    fn record_alignment(&mut self, context: &[u32], targets: &[u32], sequence: &[u32], base: usize) -> Result<()> {
        let mut drafter_ends = Vec::new();
        for i in base + 1..=sequence.len() {
            drafter_ends.push(text_after(&self.drafter_tokenizer, &sequence[..i], base, self.lookbehind)?.len());
        }
        let mut joint = context.to_vec();
        let (mut last_target, mut last_drafter) = (0, base);
        for (m, &t) in targets.iter().enumerate() {
            joint.push(t);
            let end = text_after(&self.target_tokenizer, &joint, context.len(), self.lookbehind)?.len();
            if let Some(i) = drafter_ends.iter().position(|&e| e == end) {
                let drafter_end = base + i + 1;
                if drafter_end > last_drafter {
                    self.context.push_aligned(&targets[last_target..=m], &sequence[last_drafter..drafter_end]);
                    last_target = m + 1;
                    last_drafter = drafter_end;
                }
            }
        }
        Ok(())
    }
}

impl<M: DrafterModel> Drafter for SlemDrafter<M> {
    fn propose(
        &mut self,
        context: &[u32],
        max_tokens: usize,
        sampling: &SamplingConfig,
        rng: &mut dyn RngCore,
    ) -> anyspec_core::Result<Draft> {
        self.propose_inner(context, max_tokens, sampling, rng).map_err(Into::into)
    }
}
