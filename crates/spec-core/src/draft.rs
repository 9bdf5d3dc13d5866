//! What a drafter proposes, in the target's vocabulary.

use rand::Rng;

use crate::error::{Error, Result};
use crate::sampling::{SamplingConfig, argmax, logits_to_probs, sample};

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
    /// How sure a deterministic drafter is of these tokens, as a label of its own (prompt
    /// lookup: the length of the context it matched; a dictionary: the length of the prefix it
    /// matched), or `None`.
    ///
    /// [`crate::GammaTuner`] keeps one acceptance estimate per label, so that a draft found by a
    /// long match is verified deeper than one found by a single token, and a doubtful draft is
    /// not verified at all when that does not pay. Only deterministic drafts are cut by it: the
    /// label is a function of the context, like the draft itself, so any cut it decides keeps
    /// the point-mass rule lossless. A sampled draft's cut must not depend on how its tokens
    /// were drawn, and the engine ignores a label on one.
    pub confidence_class: Option<u16>,
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
        Draft { tokens: Vec::new(), origin: DraftOrigin::Deterministic, confidence_class: None }
    }

    /// A deterministic draft.
    pub fn deterministic(tokens: Vec<u32>) -> Self {
        Draft { tokens, origin: DraftOrigin::Deterministic, confidence_class: None }
    }

    /// A sampled draft with one distribution per token.
    pub fn sampled(tokens: Vec<u32>, distributions: Vec<Vec<f32>>) -> Self {
        Draft { tokens, origin: DraftOrigin::Sampled { distributions, outside_target: None }, confidence_class: None }
    }

    /// This draft labelled with the drafter's confidence class (see [`Draft::confidence_class`]).
    pub fn with_confidence_class(mut self, class: u16) -> Self {
        self.confidence_class = Some(class);
        self
    }

    /// The confidence class a γ tuner may cut this draft by: the label of a deterministic draft,
    /// never one of a sampled draft.
    pub fn cut_class(&self) -> Option<u16> {
        match self.origin {
            DraftOrigin::Deterministic => self.confidence_class,
            DraftOrigin::Sampled { .. } => None,
        }
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

/// A draft drawn one token at a time from a model's logits, as a model drafter does: the
/// argmax when sampling is greedy (no softmax over the vocabulary), otherwise a draw from the
/// sampling transform of the logits, whose distribution is kept for speculative sampling.
#[derive(Debug)]
pub struct DraftBuilder<'a> {
    sampling: &'a SamplingConfig,
    tokens: Vec<u32>,
    distributions: Vec<Vec<f32>>,
}

impl<'a> DraftBuilder<'a> {
    /// An empty draft under `sampling`, with room for `capacity` tokens.
    pub fn new(sampling: &'a SamplingConfig, capacity: usize) -> Self {
        let distributions = if sampling.is_greedy() { Vec::new() } else { Vec::with_capacity(capacity) };
        DraftBuilder { sampling, tokens: Vec::with_capacity(capacity), distributions }
    }

    /// Picks the next token from `logits` (over the target's vocabulary), appends it and
    /// returns it.
    ///
    /// # Errors
    /// When the sampling transform or the draw fails ([`logits_to_probs`], [`sample`]).
    pub fn push_from_logits<R: Rng + ?Sized>(&mut self, logits: &[f32], rng: &mut R) -> Result<u32> {
        let token = if self.sampling.is_greedy() {
            argmax(logits)
        } else {
            let probs = logits_to_probs(logits, self.sampling)?;
            let token = sample(&probs, rng)?;
            self.distributions.push(probs);
            token
        };
        self.tokens.push(token);
        Ok(token)
    }

    /// Picks the next token from logits given only for `ids` (a drafter's head evaluated on a
    /// shortlist; every other id of the target's `vocab` ids has logit −∞), appends it and
    /// returns it: the token [`DraftBuilder::push_from_logits`] picks from the full row.
    ///
    /// Greedy, it is the argmax over the given pairs (ties to the lowest id), with no row over
    /// the vocabulary: for SmolLM2's 49,152 ids that row cost a 192 KiB fill and a scan per
    /// drafted token (about 0.4% of the samples of a profiled EAGLE `anyspec dynaspec bench`
    /// run). Sampled, the full row is made: speculative sampling needs the whole distribution
    /// `q`.
    ///
    /// # Errors
    /// When `ids` and `logits` differ in length or an id is not below `vocab`; otherwise as
    /// [`DraftBuilder::push_from_logits`].
    pub fn push_from_sparse_logits<R: Rng + ?Sized>(
        &mut self,
        ids: &[u32],
        logits: &[f32],
        vocab: usize,
        rng: &mut R,
    ) -> Result<u32> {
        if ids.len() != logits.len() {
            return Err(Error::LengthMismatch {
                what: "the shortlisted logits and their ids",
                expected: ids.len(),
                got: logits.len(),
            });
        }
        if let Some(&token) = ids.iter().find(|&&id| id as usize >= vocab) {
            return Err(Error::TokenOutOfRange { token, vocab_size: vocab });
        }
        if !self.sampling.is_greedy() || ids.is_empty() {
            let mut row = vec![f32::NEG_INFINITY; vocab];
            ids.iter().zip(logits).for_each(|(&id, &l)| row[id as usize] = l);
            return self.push_from_logits(&row, rng);
        }
        // The dense row's argmax: the largest value, the lowest id among equals; id 0 (outside
        // or not) when no given logit is above −∞ or comparable, as a row of −∞ and NaN gives.
        let mut best: Option<(u32, f32)> = None;
        for (&id, &l) in ids.iter().zip(logits) {
            let better = match best {
                None => l > f32::NEG_INFINITY,
                Some((b, bl)) => l > bl || (l == bl && id < b),
            };
            if better {
                best = Some((id, l));
            }
        }
        let token = best.map_or(0, |(id, _)| id);
        self.tokens.push(token);
        Ok(token)
    }

    /// The draft: deterministic when greedy, sampled with its distributions otherwise.
    pub fn finish(self) -> Draft {
        if self.sampling.is_greedy() {
            Draft::deterministic(self.tokens)
        } else {
            Draft::sampled(self.tokens, self.distributions)
        }
    }
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    use super::*;

    #[test]
    fn a_built_draft_is_greedy_or_sampled_as_the_sampling_says() {
        let logits = [[0.1f32, 2.0, -1.0], [3.0, 0.0, 0.5]];
        let greedy = SamplingConfig::greedy();
        let mut builder = DraftBuilder::new(&greedy, 2);
        let mut rng = StdRng::seed_from_u64(7);
        for row in &logits {
            builder.push_from_logits(row, &mut rng).unwrap();
        }
        assert_eq!(builder.finish(), Draft::deterministic(vec![1, 0]));

        // Sampled: each token is the draw a replayed generator makes from the row's transform,
        // and the draft carries those distributions.
        let warm = SamplingConfig::new(1.0, None, 1.0).unwrap();
        let mut builder = DraftBuilder::new(&warm, 2);
        let (mut rng, mut replay) = (StdRng::seed_from_u64(7), StdRng::seed_from_u64(7));
        let (mut tokens, mut distributions) = (Vec::new(), Vec::new());
        for row in &logits {
            let token = builder.push_from_logits(row, &mut rng).unwrap();
            let probs = logits_to_probs(row, &warm).unwrap();
            assert_eq!(token, sample(&probs, &mut replay).unwrap());
            tokens.push(token);
            distributions.push(probs);
        }
        assert_eq!(builder.finish(), Draft::sampled(tokens, distributions));
    }

    proptest::proptest! {
        /// Greedy, the sparse path picks the dense row's argmax: ties (values from a small set)
        /// go to the lowest id whatever order the ids come in, and a shortlist of −∞ gives id 0.
        #[test]
        fn sparse_logits_pick_what_the_dense_row_picks(
            vocab in 1usize..40,
            picks in proptest::collection::vec((0usize..1000, 0usize..4), 1..30),
        ) {
            let values = [f32::NEG_INFINITY, -1.0, 0.5, 2.0];
            let mut ids: Vec<u32> = Vec::new();
            let mut logits = Vec::new();
            for (id, v) in picks {
                let id = (id % vocab) as u32;
                if !ids.contains(&id) {
                    ids.push(id);
                    logits.push(values[v]);
                }
            }
            let mut dense = vec![f32::NEG_INFINITY; vocab];
            ids.iter().zip(&logits).for_each(|(&id, &l)| dense[id as usize] = l);
            let (greedy, mut rng) = (SamplingConfig::greedy(), StdRng::seed_from_u64(1));
            let mut sparse = DraftBuilder::new(&greedy, 1);
            let mut full = DraftBuilder::new(&greedy, 1);
            proptest::prop_assert_eq!(
                sparse.push_from_sparse_logits(&ids, &logits, vocab, &mut rng).unwrap(),
                full.push_from_logits(&dense, &mut rng).unwrap()
            );
            proptest::prop_assert_eq!(sparse.finish(), full.finish());
        }
    }

    #[test]
    fn sparse_logits_are_sampled_from_the_dense_row_and_bad_ids_are_refused() {
        let warm = SamplingConfig::new(1.0, None, 1.0).unwrap();
        let (ids, logits) = ([4u32, 1], [0.3f32, 1.2]);
        let mut dense = vec![f32::NEG_INFINITY; 6];
        dense[4] = 0.3;
        dense[1] = 1.2;
        let (mut sparse, mut full) = (DraftBuilder::new(&warm, 8), DraftBuilder::new(&warm, 8));
        let (mut rng, mut replay) = (StdRng::seed_from_u64(3), StdRng::seed_from_u64(3));
        for _ in 0..8 {
            sparse.push_from_sparse_logits(&ids, &logits, 6, &mut rng).unwrap();
            full.push_from_logits(&dense, &mut replay).unwrap();
        }
        assert_eq!(sparse.finish(), full.finish());
        let greedy = SamplingConfig::greedy();
        let mut builder = DraftBuilder::new(&greedy, 1);
        let err = builder.push_from_sparse_logits(&[6], &[1.0], 6, &mut rng).unwrap_err();
        assert!(err.to_string().contains("token id 6 is outside the vocabulary of 6"), "{err}");
        let err = builder.push_from_sparse_logits(&[1, 2], &[1.0], 6, &mut rng).unwrap_err();
        assert!(err.to_string().contains("expected length 2, got 1"), "{err}");
    }

    #[test]
    fn only_a_deterministic_draft_is_cut_by_its_confidence_class() {
        let deterministic = Draft::deterministic(vec![1, 2]).with_confidence_class(3);
        assert_eq!(deterministic.cut_class(), Some(3));
        // A label on a sampled draft would let its cut depend on how its tokens were drawn.
        let sampled = Draft::sampled(vec![1], vec![vec![0.5, 0.5]]).with_confidence_class(3);
        assert_eq!(sampled.cut_class(), None);
        assert_eq!(Draft::deterministic(vec![1]).cut_class(), None);
    }
}
