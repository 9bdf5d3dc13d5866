//! A real drafter model with another tokenizer as a [`TokenTreeModel`].

use anyspec_models::{Llama, TextTokenizer};

use super::tree_model::TokenTreeModel;
use crate::error::{Error, Result};
use crate::hetero::context::ContextSync;
use crate::hetero::{BurnDrafterModel, DEFAULT_LOOKBEHIND, DrafterModel};

/// A [`DrafterModel`] (a burn model by default) reading the target's context through text.
///
/// The target's context is converted to drafter ids incrementally, the way the token-level
/// bridges and SLEM do it (decoded with the target's tokenizer, encoded with the drafter's as a
/// continuation with a look-behind window, a trailing partial character held back), and each
/// continuation of a level is scored after it. The model's session reuses the longest common
/// prefix of successive calls, so the shared context is run once and each continuation costs
/// its last one or two positions.
///
/// The conversion depends on the contexts seen before (where its alignment points fall), never
/// on the walk: within one walk every level reads the same drafter ids, so ψ and the walk use one
/// distribution and SLRS stays exact.
///
/// Not batched yet: a level of `n` continuations is `n` model calls of one position each, where
/// a tree-attention forward pass could score the level in one call; the `TokenTreeModel`
/// interface already hands over whole levels for that.
#[derive(Clone, Debug)]
pub struct TextTreeModel<M = BurnDrafterModel> {
    model: M,
    target_tokenizer: TextTokenizer,
    drafter_tokenizer: TextTokenizer,
    context: ContextSync,
}

impl TextTreeModel<BurnDrafterModel> {
    /// A burn model drafting for the target whose tokenizer is `target_tokenizer`.
    pub fn new(model: Llama, target_tokenizer: TextTokenizer, drafter_tokenizer: TextTokenizer) -> Result<Self> {
        Self::with_model(BurnDrafterModel::new(model), target_tokenizer, drafter_tokenizer, DEFAULT_LOOKBEHIND)
    }
}

impl<M: DrafterModel> TextTreeModel<M> {
    /// [`TextTreeModel::new`] over any [`DrafterModel`], with a look-behind window of
    /// `lookbehind` tokens (≥ 1) for the context conversion.
    pub fn with_model(
        mut model: M,
        target_tokenizer: TextTokenizer,
        drafter_tokenizer: TextTokenizer,
        lookbehind: usize,
    ) -> Result<Self> {
        if lookbehind == 0 {
            return Err(Error::InvalidParameter { name: "lookbehind", expected: "≥ 1 token", value: "0".into() });
        }
        // ψ needs the full distribution: no pruned head.
        model.keep_rows(None)?;
        Ok(TextTreeModel { model, target_tokenizer, drafter_tokenizer, context: ContextSync::new(lookbehind) })
    }

    /// The drafter model.
    pub fn model(&self) -> &M {
        &self.model
    }
}

impl<M: DrafterModel> TokenTreeModel for TextTreeModel<M> {
    fn room(&mut self, context: &[u32]) -> anyspec_core::Result<usize> {
        let wrap = |e: Error| anyspec_core::Error::Drafter(Box::new(e));
        let ids = self.context.sync(context, &self.target_tokenizer, &self.drafter_tokenizer).map_err(wrap)?;
        // Scored sequences are the context plus at most `room − 1` drafter tokens.
        Ok((self.model.max_sequence_len() + 1).saturating_sub(ids.len()))
    }

    fn next_logits(&mut self, context: &[u32], continuations: &[Vec<u32>]) -> anyspec_core::Result<Vec<Vec<f32>>> {
        let wrap = |e: Error| anyspec_core::Error::Drafter(Box::new(e));
        let ids = self.context.sync(context, &self.target_tokenizer, &self.drafter_tokenizer).map_err(wrap)?.to_vec();
        if ids.is_empty() {
            return Err(wrap(Error::InvalidParameter {
                name: "slrs drafter context",
                expected: "at least one drafter token (a prompt with whole characters)",
                value: "none".into(),
            }));
        }
        let limit = self.model.max_sequence_len();
        let mut sequence = ids.clone();
        let mut rows = Vec::with_capacity(continuations.len());
        for continuation in continuations {
            if ids.len() + continuation.len() > limit {
                return Err(wrap(Error::InvalidParameter {
                    name: "slrs drafter context",
                    expected: "within the drafter's context window (ask `room` first)",
                    value: format!("{} + {} tokens for a window of {limit}", ids.len(), continuation.len()),
                }));
            }
            sequence.truncate(ids.len());
            sequence.extend_from_slice(continuation);
            rows.push(self.model.next_logits(&sequence).map_err(wrap)?);
        }
        Ok(rows)
    }
}
