//! What a drafter proposes, in the target's vocabulary.

/// A drafter's proposal for the next tokens, as target-vocabulary ids.
///
/// The verification rule follows from [`DraftOrigin`]: drafts that come with the distributions
/// they were drawn from are verified by speculative sampling against those distributions;
/// deterministic drafts are verified by exact match (or the equivalent point-mass rule).
#[derive(Clone, Debug, PartialEq)]
pub struct Draft {
    /// Proposed target-vocabulary ids, in order; may be empty ("no guess this step").
    pub tokens: Vec<u32>,
    /// How the tokens were chosen.
    pub origin: DraftOrigin,
}

/// How a [`Draft`]'s tokens were chosen.
#[derive(Clone, Debug, PartialEq)]
pub enum DraftOrigin {
    /// A deterministic choice: dictionary, prompt lookup, greedy model, SLEM re-tokenization.
    /// The draft distribution is a point mass on each token.
    Deterministic,
    /// `tokens[j]` was drawn from `distributions[j]`, a probability vector over the *target*
    /// vocabulary produced with the same sampling transform as the target's.
    Sampled {
        /// One distribution per drafted token.
        distributions: Vec<Vec<f32>>,
        /// Union projection only (hetero-vocab-sd.txt Alg 1): after the last token the drafter
        /// drew a token that the target vocabulary does not contain, from this distribution
        /// (restricted to target ids, not renormalized). The target gives such a token
        /// probability 0, so it is rejected for certain and the correction is drawn from
        /// `max(p − q, 0)` instead of `p`.
        outside_target: Option<Vec<f32>>,
    },
}

impl Draft {
    /// An empty draft: the step degenerates to one autoregressive token.
    pub fn empty() -> Self {
        Draft { tokens: Vec::new(), origin: DraftOrigin::Deterministic }
    }

    /// A deterministic draft.
    pub fn deterministic(tokens: Vec<u32>) -> Self {
        Draft { tokens, origin: DraftOrigin::Deterministic }
    }

    /// A sampled draft with one distribution per token.
    pub fn sampled(tokens: Vec<u32>, distributions: Vec<Vec<f32>>) -> Self {
        Draft { tokens, origin: DraftOrigin::Sampled { distributions, outside_target: None } }
    }

    /// Keeps the first `len` tokens (and their distributions); a `len` at or past the end
    /// changes nothing. Cutting a sampled draft drops the union projection's out-of-vocabulary
    /// token, which was drawn after the last token.
    ///
    /// A prefix of a draft is itself a valid draft for the same rules, provided the cut does
    /// not depend on the drafted tokens (for sampled drafts: decide `len` before looking at
    /// them), so verification stays lossless.
    pub fn truncate(&mut self, len: usize) {
        if len >= self.tokens.len() {
            return;
        }
        self.tokens.truncate(len);
        if let DraftOrigin::Sampled { distributions, outside_target } = &mut self.origin {
            distributions.truncate(len);
            *outside_target = None;
        }
    }

    /// Number of proposed tokens (γ for this step).
    pub fn len(&self) -> usize {
        self.tokens.len()
    }

    /// Whether nothing is proposed.
    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }
}
