//! A real drafter model with another tokenizer as a [`TokenTreeModel`].

use anyspec_models::{Llama, TextTokenizer};

use super::tree_model::TokenTreeModel;
use crate::error::{Error, Result};
use crate::hetero::{BurnDrafterModel, DrafterModel};

/// A [`DrafterModel`] (a burn model by default) reading the target's context through text.
///
/// The target's context is converted to drafter ids as a whole — decoded with the target's
/// tokenizer, encoded with the drafter's (with its own special tokens) — so the drafter's
/// conditionals are a function of the context alone, and each continuation of a level is scored
/// after it. The conversion is cached for the levels of one walk. The model's session reuses the
/// longest common prefix of successive calls, so the shared context is run once and each
/// continuation costs its last one or two positions. (The incremental, look-behind conversion
/// of the token-level bridges would save re-encoding long contexts; it is private to
/// `hetero` today.)
///
/// Not batched yet: a level of `n` continuations is `n` model calls of one position each, where
/// a tree-attention forward pass could score the level in one call; the `TokenTreeModel`
/// interface already hands over whole levels for that.
#[derive(Clone, Debug)]
pub struct TextTreeModel<M = BurnDrafterModel> {
    model: M,
    target_tokenizer: TextTokenizer,
    drafter_tokenizer: TextTokenizer,
    /// The last context converted, and its drafter ids.
    converted: Option<(Vec<u32>, Vec<u32>)>,
}

impl TextTreeModel<BurnDrafterModel> {
    /// A burn model drafting for the target whose tokenizer is `target_tokenizer`.
    pub fn new(model: Llama, target_tokenizer: TextTokenizer, drafter_tokenizer: TextTokenizer) -> Result<Self> {
        Self::with_model(BurnDrafterModel::new(model), target_tokenizer, drafter_tokenizer)
    }
}

impl<M: DrafterModel> TextTreeModel<M> {
    /// [`TextTreeModel::new`] over any [`DrafterModel`].
    pub fn with_model(mut model: M, target_tokenizer: TextTokenizer, drafter_tokenizer: TextTokenizer) -> Result<Self> {
        // ψ needs the full distribution: no pruned head.
        model.keep_rows(None)?;
        Ok(TextTreeModel { model, target_tokenizer, drafter_tokenizer, converted: None })
    }

    /// The drafter ids of `context` (target ids).
    fn drafter_ids(&mut self, context: &[u32]) -> Result<Vec<u32>> {
        if let Some((target, drafter)) = &self.converted
            && target == context
        {
            return Ok(drafter.clone());
        }
        let text = self.target_tokenizer.decode(context)?;
        let ids = self.drafter_tokenizer.encode(&text)?;
        self.converted = Some((context.to_vec(), ids.clone()));
        Ok(ids)
    }

    /// The drafter model.
    pub fn model(&self) -> &M {
        &self.model
    }
}

impl<M: DrafterModel> TokenTreeModel for TextTreeModel<M> {
    fn next_logits(&mut self, context: &[u32], continuations: &[Vec<u32>]) -> anyspec_core::Result<Vec<Vec<f32>>> {
        let wrap = |e: Error| anyspec_core::Error::Drafter(Box::new(e));
        let ids = self.drafter_ids(context).map_err(wrap)?;
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
                    expected: "within the drafter's context window (shorten the prompt or lower --slrs-lookahead)",
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
