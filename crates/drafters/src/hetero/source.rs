//! Where a heterogeneous drafter's logits come from: a burn model, or anything else that can
//! score the next token of a sequence of drafter ids.

use anyspec_models::{Llama, PrunedHead, Session, TreeNode};

use crate::error::{Error, Result};

/// A language model over the drafter's vocabulary, as the bridges see it.
///
/// The bridges only ever ask for the next-token logits of a growing (or rolled back) sequence,
/// so a model with a KV cache can reuse the common prefix of successive calls. Implemented by
/// [`BurnDrafterModel`]; tests implement it with closed-form models whose output distribution is
/// known exactly.
pub trait DrafterModel {
    /// Number of rows of the full LM head.
    fn vocab_size(&self) -> usize;

    /// The longest sequence the model can score.
    fn max_sequence_len(&self) -> usize;

    /// Restricts later [`DrafterModel::next_logits`] calls to the vocabulary rows `ids` (in
    /// this order), or lifts the restriction with `None`. A model may compute only those rows
    /// (a pruned LM head), which is where pruning saves time.
    fn keep_rows(&mut self, ids: Option<&[u32]>) -> Result<()>;

    /// The logits of the token after `sequence`: one per kept row, or one per vocabulary row
    /// when no restriction is set.
    fn next_logits(&mut self, sequence: &[u32]) -> Result<Vec<f32>>;

    /// The logits after `sequence` followed by the path from the root to each node `rows[i]` of
    /// a token tree (`nodes`, parents before children, see [`TreeNode`]), one row per entry of
    /// `rows`, over the kept rows as [`DrafterModel::next_logits`].
    ///
    /// The default makes one [`DrafterModel::next_logits`] call per requested node. A model
    /// that can attend along a tree scores them all in one pass ([`BurnDrafterModel`] does).
    fn tree_logits(&mut self, sequence: &[u32], nodes: &[TreeNode], rows: &[usize]) -> Result<Vec<Vec<f32>>> {
        rows.iter()
            .map(|&row| {
                let mut path = Vec::new();
                let mut at = Some(row);
                while let Some(i) = at {
                    let node = nodes.get(i).filter(|n| n.parent.is_none_or(|p| p < i)).ok_or_else(|| {
                        Error::InvalidParameter(anyspec_core::InvalidParameter {
                            name: "token tree",
                            expected: "node indices within the tree, parents before children",
                            value: format!("node {i} of {}", nodes.len()),
                        })
                    })?;
                    path.push(node.token);
                    at = node.parent;
                }
                let mut extended = sequence.to_vec();
                extended.extend(path.iter().rev());
                self.next_logits(&extended)
            })
            .collect()
    }
}

/// A burn [`Llama`] with its KV cache ([`Session`]) and an optional pruned LM head.
#[derive(Clone, Debug)]
pub struct BurnDrafterModel {
    session: Session,
    head: Option<PrunedHead>,
}

impl BurnDrafterModel {
    /// Wraps a loaded model.
    pub fn new(model: Llama) -> Self {
        BurnDrafterModel { session: Session::new(model), head: None }
    }

    /// The model.
    pub fn model(&self) -> &Llama {
        self.session.model()
    }
}

impl DrafterModel for BurnDrafterModel {
    fn vocab_size(&self) -> usize {
        self.model().config().vocab_size
    }

    fn max_sequence_len(&self) -> usize {
        self.model().config().max_position_embeddings
    }

    fn keep_rows(&mut self, ids: Option<&[u32]>) -> Result<()> {
        self.head = ids.map(|ids| self.session.model().pruned_head(ids)).transpose()?;
        Ok(())
    }

    fn next_logits(&mut self, sequence: &[u32]) -> Result<Vec<f32>> {
        let rows = match &self.head {
            Some(head) => self.session.logits_pruned_on_host(sequence, 1, head)?,
            None => self.session.logits_on_host(sequence, 1)?,
        };
        rows.into_iter().next().ok_or(Error::InvalidParameter(anyspec_core::InvalidParameter {
            name: "drafter logits",
            expected: "one row per call",
            value: "none".into(),
        }))
    }

    fn tree_logits(&mut self, sequence: &[u32], nodes: &[TreeNode], rows: &[usize]) -> Result<Vec<Vec<f32>>> {
        Ok(self.session.tree_logits_on_host(sequence, nodes, rows, self.head.as_ref())?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A model whose "logits" are the sequence it was asked about, so a row names its path.
    struct Echo;

    impl DrafterModel for Echo {
        fn vocab_size(&self) -> usize {
            100
        }
        fn max_sequence_len(&self) -> usize {
            100
        }
        fn keep_rows(&mut self, _ids: Option<&[u32]>) -> Result<()> {
            Ok(())
        }
        fn next_logits(&mut self, sequence: &[u32]) -> Result<Vec<f32>> {
            Ok(sequence.iter().map(|&t| t as f32).collect())
        }
    }

    #[test]
    fn the_default_tree_scoring_follows_each_path_from_the_root() {
        // 0:7 ─ 1:8 ─ 3:9 ; 0:7 ─ 2:5 ; 4:6 (a second root)
        let node = |token, parent| TreeNode { token, parent };
        let nodes = [node(7, None), node(8, Some(0)), node(5, Some(0)), node(9, Some(1)), node(6, None)];
        let rows = Echo.tree_logits(&[1, 2], &nodes, &[3, 2, 4, 0]).unwrap();
        let expected: Vec<Vec<f32>> =
            vec![vec![1., 2., 7., 8., 9.], vec![1., 2., 7., 5.], vec![1., 2., 6.], vec![1., 2., 7.]];
        assert_eq!(rows, expected);
        let backwards = [node(7, Some(1)), node(8, None)];
        assert!(Echo.tree_logits(&[1], &backwards, &[0]).is_err());
        assert!(Echo.tree_logits(&[1], &nodes, &[5]).is_err());
    }
}
