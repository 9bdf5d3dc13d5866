//! The drafter as SLRS needs it: next-token logits for many drafter-token continuations of one
//! context at once.

use anyspec_core::toy::MarkovChain;

/// A drafter model that scores a whole level of a drafter-token tree in one call.
///
/// SLRS needs the drafter's conditional `q(· | context, x)` at every drafter-token sequence `x`
/// that spells a prefix of some target token. Those sequences form a tree, expanded breadth
/// first: every sequence of one call has the same length, so a model can run them as one batch
/// (one forward pass per depth level) sharing the cached context.
///
/// `context` is the committed sequence in the *target's* vocabulary (prompt and accepted
/// tokens); how the drafter reads it (re-tokenizing its text, say) is the implementation's
/// business. Exactness does not depend on it: SLRS is lossless for any drafter, as long as the
/// logits returned here are the ones the walk samples from — which holds because both are
/// computed from this one call.
pub trait TokenTreeModel {
    /// Logits over the drafter's vocabulary of the token after `context` followed by each
    /// continuation (drafter ids), one row per continuation, in order.
    fn next_logits(&mut self, context: &[u32], continuations: &[Vec<u32>]) -> anyspec_core::Result<Vec<Vec<f32>>>;

    /// Most drafter tokens a walk from `context` may draw: a model with a context window
    /// answers how many more positions fit (a walk of `n` tokens scores continuations of up to
    /// `n − 1`). Walks are cut to this length, with ψ computed for the cut walk, so a full window
    /// shortens drafts instead of failing generation.
    fn room(&mut self, context: &[u32]) -> anyspec_core::Result<usize> {
        let _ = context;
        Ok(usize::MAX)
    }
}

impl<M: TokenTreeModel + ?Sized> TokenTreeModel for &mut M {
    fn next_logits(&mut self, context: &[u32], continuations: &[Vec<u32>]) -> anyspec_core::Result<Vec<Vec<f32>>> {
        (**self).next_logits(context, continuations)
    }
    fn room(&mut self, context: &[u32]) -> anyspec_core::Result<usize> {
        (**self).room(context)
    }
}

impl<M: TokenTreeModel + ?Sized> TokenTreeModel for Box<M> {
    fn next_logits(&mut self, context: &[u32], continuations: &[Vec<u32>]) -> anyspec_core::Result<Vec<Vec<f32>>> {
        (**self).next_logits(context, continuations)
    }
    fn room(&mut self, context: &[u32]) -> anyspec_core::Result<usize> {
        (**self).room(context)
    }
}

/// A toy drafter with its own vocabulary, for tests, benchmarks and simulations: a first-order
/// Markov chain over drafter tokens, started from a row chosen by the last target token of the
/// context.
///
/// `q(· | context, ())` is row `last target token` of `after_target`; `q(· | context, x·d)` is row
/// `d` of `after_drafter`. The conditional depends on how a string was segmented (through the
/// last drafter token), as a real drafter's does, so ψ's sum over segmentations is exercised.
#[derive(Clone, Debug)]
pub struct MarkovTreeModel {
    after_target: MarkovChain,
    after_drafter: MarkovChain,
    /// Rows scored so far (one per continuation), to measure expansion cost.
    pub rows_scored: u64,
    /// Calls to [`TokenTreeModel::next_logits`] so far (one per depth level).
    pub calls: u64,
}

impl MarkovTreeModel {
    /// `after_target` has one row per target token, `after_drafter` one per drafter token; both
    /// range over the drafter's vocabulary.
    pub fn new(after_target: MarkovChain, after_drafter: MarkovChain) -> crate::Result<Self> {
        let drafter = after_drafter.vocab_size();
        if after_target.vocab_size() != drafter || after_drafter.contexts() != drafter {
            return Err(crate::Error::InvalidParameter(anyspec_core::InvalidParameter {
                name: "toy drafter chains",
                expected: "rows over the drafter vocabulary, and one row per drafter token in `after_drafter`",
                value: format!(
                    "{}×{} after target, {}×{} after drafter",
                    after_target.contexts(),
                    after_target.vocab_size(),
                    after_drafter.contexts(),
                    drafter
                ),
            }));
        }
        Ok(MarkovTreeModel { after_target, after_drafter, rows_scored: 0, calls: 0 })
    }

    /// The probability the model gives drafter token `next` after `context` and `continuation`.
    pub fn probability(&self, context: &[u32], continuation: &[u32], next: u32) -> anyspec_core::Result<f64> {
        let row = self.row(context, continuation)?;
        Ok(row.get(next as usize).map_or(0.0, |&p| f64::from(p)))
    }

    fn row(&self, context: &[u32], continuation: &[u32]) -> anyspec_core::Result<&[f32]> {
        match continuation.last() {
            Some(&d) => self.after_drafter.next(d),
            None => self.after_target.next(*context.last().ok_or(anyspec_core::Error::EmptyPrompt)?),
        }
    }
}

impl TokenTreeModel for MarkovTreeModel {
    fn next_logits(&mut self, context: &[u32], continuations: &[Vec<u32>]) -> anyspec_core::Result<Vec<Vec<f32>>> {
        self.calls += 1;
        self.rows_scored += continuations.len() as u64;
        continuations
            .iter()
            .map(|x| {
                let row = self.row(context, x)?;
                Ok(row.iter().map(|&p| if p > 0.0 { p.ln() } else { f32::NEG_INFINITY }).collect())
            })
            .collect()
    }
}
