//! Where a heterogeneous drafter's logits come from: a burn model, or anything else that can
//! score the next token of a sequence of drafter ids.

use anyspec_models::{Llama, PrunedHead, Session};

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
        rows.into_iter().next().ok_or(Error::InvalidParameter {
            name: "drafter logits",
            expected: "one row per call",
            value: "none".into(),
        })
    }
}
