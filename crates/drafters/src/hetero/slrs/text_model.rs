//! A real drafter model with another tokenizer as a [`TokenTreeModel`].

use std::collections::HashMap;

use anyspec_models::{Llama, TextTokenizer, TreeNode};

use super::tree_model::TokenTreeModel;
use crate::error::{Error, Result};
use crate::hetero::context::ContextSync;
use crate::hetero::{BurnDrafterModel, DEFAULT_LOOKBEHIND, DrafterModel};

/// A [`DrafterModel`] (a burn model by default) reading the target's context through text.
///
/// The target's context is converted to drafter ids incrementally, the way the token-level
/// bridges and SLEM do it (decoded with the target's tokenizer, encoded with the drafter's as a
/// continuation with a look-behind window, a trailing partial character held back).
///
/// A level of continuations is scored in one batched call: the continuations are merged into a
/// token tree (shared prefixes become shared nodes) and handed to
/// [`DrafterModel::tree_logits`], which for a burn model is one forward pass with a
/// tree-attention mask over the cached context ([`anyspec_models::Llama::forward_tree`]). The
/// tree is rebuilt per level, so a level of depth `d` re-runs the nodes of the levels above it:
/// a pass over every node of the tree so far instead of one call per continuation.
/// [`TextTreeModel::set_tree_batching`] turns this off (one call per continuation) for
/// comparison.
///
/// The conversion depends on the contexts seen before (where its alignment points fall), never
/// on the walk: within one walk every level reads the same drafter ids, so ψ and the walk use one
/// distribution and SLRS stays exact.
#[derive(Clone, Debug)]
pub struct TextTreeModel<M = BurnDrafterModel> {
    model: M,
    target_tokenizer: TextTokenizer,
    drafter_tokenizer: TextTokenizer,
    context: ContextSync,
    tree_batching: bool,
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
        // ψ needs the full distribution: no pruned head.
        model.keep_rows(None)?;
        Ok(TextTreeModel {
            model,
            target_tokenizer,
            drafter_tokenizer,
            context: ContextSync::new(lookbehind)?,
            tree_batching: true,
        })
    }

    /// The drafter model.
    pub fn model(&self) -> &M {
        &self.model
    }

    /// Whether a level is scored as one token tree (`true`, the default) or one model call per
    /// continuation (`false`). The logits are the same either way, within float rounding.
    pub fn set_tree_batching(&mut self, on: bool) {
        self.tree_batching = on;
    }
}

impl<M: DrafterModel> TokenTreeModel for TextTreeModel<M> {
    fn room(&mut self, context: &[u32]) -> anyspec_core::Result<usize> {
        let ids = self.context.sync(context, &self.target_tokenizer, &self.drafter_tokenizer)?;
        // Scored sequences are the context plus at most `room − 1` drafter tokens.
        Ok((self.model.max_sequence_len() + 1).saturating_sub(ids.len()))
    }

    fn next_logits(&mut self, context: &[u32], continuations: &[Vec<u32>]) -> anyspec_core::Result<Vec<Vec<f32>>> {
        let ids = self.context.sync(context, &self.target_tokenizer, &self.drafter_tokenizer)?.to_vec();
        if ids.is_empty() {
            return Err(Error::InvalidParameter(anyspec_core::InvalidParameter {
                name: "slrs drafter context",
                expected: "at least one drafter token (a prompt with whole characters)",
                value: "none".into(),
            })
            .into());
        }
        let limit = self.model.max_sequence_len();
        if let Some(longest) = continuations.iter().map(Vec::len).max().filter(|&n| ids.len() + n > limit) {
            return Err(Error::InvalidParameter(anyspec_core::InvalidParameter {
                name: "slrs drafter context",
                expected: "within the drafter's context window (ask `room` first)",
                value: format!("{} + {longest} tokens for a window of {limit}", ids.len()),
            })
            .into());
        }
        if !self.tree_batching {
            let mut sequence = ids.clone();
            let mut rows = Vec::with_capacity(continuations.len());
            for continuation in continuations {
                sequence.truncate(ids.len());
                sequence.extend_from_slice(continuation);
                rows.push(self.model.next_logits(&sequence)?);
            }
            return Ok(rows);
        }

        // Merge the continuations into one tree; `ends[i]` is the node that ends continuation
        // `i` (`None` for the empty continuation: the row after the context itself).
        let mut nodes: Vec<TreeNode> = Vec::new();
        let mut children: HashMap<(Option<usize>, u32), usize> = HashMap::new();
        let mut ends = Vec::with_capacity(continuations.len());
        for continuation in continuations {
            let mut at = None;
            for &token in continuation {
                let node = *children.entry((at, token)).or_insert_with(|| {
                    nodes.push(TreeNode { token, parent: at });
                    nodes.len() - 1
                });
                at = Some(node);
            }
            ends.push(at);
        }
        let after_context = match ends.contains(&None) {
            true => Some(self.model.next_logits(&ids)?),
            false => None,
        };
        let wanted: Vec<usize> = ends.iter().flatten().copied().collect();
        let tree_rows = match wanted.is_empty() {
            true => Vec::new(),
            false => self.model.tree_logits(&ids, &nodes, &wanted)?,
        };
        if tree_rows.len() != wanted.len() {
            let (expected, got) = (wanted.len(), tree_rows.len());
            return Err(Error::ModelOutput { what: "token-tree rows (one per continuation)", expected, got }.into());
        }
        let mut tree_rows = tree_rows.into_iter();
        Ok(ends.iter().filter_map(|end| if end.is_some() { tree_rows.next() } else { after_context.clone() }).collect())
    }
}
