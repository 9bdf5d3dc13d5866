//! A model drafter whose LM head is evaluated only on a shortlist chosen per draft position:
//! the full head, FR-Spec or PA-FR (static frequency-ranked lists), or DynaSpec-F / DynaSpec-PA
//! (the router's clusters for the context, App. A's Algorithm 1 with a single beam).
//!
//! Verification is the target's, over the full vocabulary; the drafter reports the distribution
//! it sampled from (zero outside the shortlist), so speculative sampling stays exact and greedy
//! decoding gives the target's own output.

use std::time::{Duration, Instant};

use anyspec_core::{Draft, DraftBuilder, Drafter, SamplingConfig};
use anyspec_models::{FeatureModel, FeatureTap, HeadBlocks, KvCache, Llama, PrunedHead};
use rand::RngCore;

use crate::error::Error;
use crate::shortlist::{DynamicShortlister, FrequencyShortlister};

/// Which ids the drafter's head is evaluated on at each draft position.
#[derive(Clone, Debug)]
pub enum HeadPolicy {
    /// Every id: the plain drafter.
    Full,
    /// A frequency-ranked list (FR-Spec with a fixed budget, PA-FR with a position-aware one).
    Frequency(FrequencyShortlister),
    /// DynaSpec: routed clusters (DynaSpec-F or -PA by the budget).
    Dynamic(Box<DynamicShortlister>),
}

impl HeadPolicy {
    /// The partition of the vocabulary the policy's shortlists are made of, whole blocks at a
    /// time (with EOS besides): DynaSpec's clusters, or the frequency ranking cut at its
    /// budgets; `None` for the full head.
    pub fn blocks(&self) -> Option<Vec<Vec<u32>>> {
        match self {
            HeadPolicy::Full => None,
            HeadPolicy::Frequency(f) => Some(f.blocks()),
            HeadPolicy::Dynamic(d) => Some(d.clusters().all_members().to_vec()),
        }
    }
}

/// What the drafter did so far.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ShortlistStats {
    /// Draft positions evaluated.
    pub positions: u64,
    /// Sum of the shortlist sizes over those positions (the vocabulary size for the full head).
    pub shortlist_tokens: u64,
    /// Time in the router (scoring and building the shortlist).
    pub router_time: Duration,
    /// Time in the drafter's forward passes of draft positions (layers and head).
    pub forward_time: Duration,
}

impl ShortlistStats {
    /// Mean shortlist size.
    pub fn mean_shortlist(&self) -> f64 {
        self.shortlist_tokens as f64 / self.positions.max(1) as f64
    }
}

/// A model drafter under a [`HeadPolicy`]: the target's first layers or a smaller model with the
/// target's tokenizer ([`ShortlistDrafter::new`]), or an EAGLE-style feature drafter that runs
/// on the target's own hidden states and shares its head ([`ShortlistDrafter::features`], the
/// backbone of the paper's experiments).
#[derive(Debug)]
pub struct ShortlistDrafter {
    /// The model whose head (and embeddings, and configuration) drafts: the drafting model, or
    /// the target for a feature drafter.
    model: Llama,
    /// `Some` for a feature drafter: its layers, and the target's features as verification
    /// records them. Its cache pairs `(x_{i+1}, f_i)` for `i` in `base..base + fed.len()`.
    features: Option<(FeatureModel, FeatureTap)>,
    /// A feature drafter's first pair in its cache (0 unless its attention window slid).
    base: usize,
    policy: HeadPolicy,
    /// The policy's shortlists as whole blocks of the vocabulary (DynaSpec's clusters, the
    /// frequency ranking cut at its budgets), with the head ordered block by block on the
    /// native engine: a shortlist then costs its own rows (`None` for the full head).
    blocks: Option<HeadBlocks>,
    target_vocab: usize,
    cache: KvCache,
    /// Tokens in `cache`, and the final hidden state after each.
    fed: Vec<u32>,
    hidden: Vec<Vec<f32>>,
    stats: ShortlistStats,
}

/// The drafting model's failures are the drafter's (`anyspec_models`' own conversion would call
/// them the target's).
fn model_error(e: anyspec_models::Error) -> anyspec_core::Error {
    anyspec_core::Error::Drafter(Box::new(e))
}

impl ShortlistDrafter {
    /// # Errors
    /// When the policy's vocabulary or the router's width disagree with the model, or the model
    /// has more ids than the target.
    pub fn new(model: Llama, policy: HeadPolicy, target_vocab: usize) -> crate::Result<Self> {
        Self::check(&model, &policy, target_vocab)?;
        let blocks =
            policy.blocks().map(|b| model.head_blocks(b)).transpose().map_err(|e| {
                Error::invalid(format!("cannot order the drafter's head by the shortlist's blocks: {e}"))
            })?;
        Self::build(model, policy, target_vocab, blocks)
    }

    /// [`ShortlistDrafter::new`] with the head ordered by the policy's blocks made once
    /// beforehand (`model.head_blocks(policy.blocks())`, a copy of the head): drafters made
    /// for one prompt after another then share it.
    ///
    /// # Errors
    /// As [`ShortlistDrafter::new`], and when `blocks` are not the policy's.
    pub fn with_head_blocks(
        model: Llama,
        policy: HeadPolicy,
        target_vocab: usize,
        blocks: HeadBlocks,
    ) -> crate::Result<Self> {
        let expected = policy.blocks().unwrap_or_default();
        let same = blocks.len() == expected.len()
            && expected.iter().enumerate().all(|(b, members)| blocks.members(b) == Some(members.as_slice()));
        if !same {
            return Err(Error::invalid(
                "the head blocks were made for another shortlist policy; make them from this policy's blocks()",
            ));
        }
        Self::check(&model, &policy, target_vocab)?;
        Self::build(model, policy, target_vocab, Some(blocks))
    }

    fn check(model: &Llama, policy: &HeadPolicy, target_vocab: usize) -> crate::Result<()> {
        let c = model.config();
        if c.vocab_size > target_vocab {
            return Err(Error::invalid(format!(
                "the drafter has {} ids but the target {target_vocab}; a shortlist drafter needs the target's tokenizer",
                c.vocab_size
            )));
        }
        if let HeadPolicy::Dynamic(d) = &policy
            && (d.clusters().vocab_size() != c.vocab_size || d.router().input_size() != 2 * c.hidden_size)
        {
            return Err(Error::invalid(format!(
                "the router was built for a vocabulary of {} and inputs of {}, the drafter has {} ids and hidden \
                 size {}; build the router for this model",
                d.clusters().vocab_size(),
                d.router().input_size(),
                c.vocab_size,
                c.hidden_size
            )));
        }
        Ok(())
    }

    /// An EAGLE-style feature drafter (`anyspec_models::FeatureModel`) under `policy`, reading
    /// the target's features from `tap` (give the same tap to the target,
    /// `LlamaTarget::with_feature_tap`). Its head is the target's: `blocks`, when given, are
    /// `feature.target().head_blocks(policy.blocks())`, made once and shared.
    ///
    /// It drafts nothing until the target has scored the context (the first step of a prompt is
    /// then a plain target step). When `feature` declares the attention window it was trained
    /// with ([`FeatureModel::with_attention_window`]), its cache holds at most that many pairs:
    /// once a draft would pass the window, the cache restarts from the last half-window of true
    /// pairs (the training windows' conditions, and a shorter attention per drafted token).
    ///
    /// # Errors
    /// As [`ShortlistDrafter::with_head_blocks`].
    pub fn features(
        feature: FeatureModel,
        tap: FeatureTap,
        policy: HeadPolicy,
        blocks: Option<HeadBlocks>,
    ) -> crate::Result<Self> {
        let target = feature.target().clone();
        let target_vocab = target.config().vocab_size;
        let mut drafter = match blocks {
            Some(blocks) => Self::with_head_blocks(target, policy, target_vocab, blocks)?,
            None => Self::new(target, policy, target_vocab)?,
        };
        drafter.cache = feature.new_cache();
        drafter.features = Some((feature, tap));
        Ok(drafter)
    }

    fn build(model: Llama, policy: HeadPolicy, target_vocab: usize, blocks: Option<HeadBlocks>) -> crate::Result<Self> {
        let cache = model.new_cache();
        Ok(ShortlistDrafter {
            model,
            features: None,
            base: 0,
            policy,
            blocks,
            target_vocab,
            cache,
            fed: Vec::new(),
            hidden: Vec::new(),
            stats: ShortlistStats::default(),
        })
    }

    /// What the drafter did so far.
    pub fn stats(&self) -> ShortlistStats {
        self.stats
    }

    /// Feeds `tokens` after the cache, keeping their hidden states.
    fn feed(&mut self, tokens: &[u32], head: Option<&anyspec_models::PrunedHead>) -> anyspec_core::Result<Vec<f32>> {
        let rows = self.model.forward_with_hidden(tokens, &mut self.cache, tokens.len(), head).map_err(model_error)?;
        self.fed.extend_from_slice(tokens);
        let logits = rows.logits.last().cloned().unwrap_or_default();
        self.hidden.extend(rows.hidden);
        Ok(logits)
    }

    /// The blocks the head is evaluated on at draft position `t` for the current token `x_t`,
    /// and the EOS ids it keeps besides (`None`: every id).
    fn shortlist(
        &mut self,
        t: usize,
        token: u32,
        previous: Option<&[f32]>,
    ) -> anyspec_core::Result<Option<(Vec<u32>, Vec<u32>)>> {
        let started = Instant::now();
        let picked = match &self.policy {
            HeadPolicy::Full => None,
            HeadPolicy::Frequency(f) => Some((f.blocks_at(t), f.eos().to_vec())),
            HeadPolicy::Dynamic(d) => {
                let embedding = self.model.embedding(token).map_err(model_error)?;
                // H̃_{t−1}: the hidden state after the token before x_t (zeros at the very start).
                let zeros;
                let prev = match previous {
                    Some(h) => h,
                    None => {
                        zeros = vec![0.0; self.model.config().hidden_size];
                        &zeros
                    }
                };
                Some((d.selected(t, &embedding, prev)?, d.eos().to_vec()))
            }
        };
        self.stats.router_time += started.elapsed();
        Ok(picked)
    }
}

impl ShortlistDrafter {
    /// The head's shortlist for draft position `t` (router time counted as such) as a pruned
    /// head, its making counted as drafter time (`None`: the full head).
    fn head_at(&mut self, t: usize, token: u32, previous: Option<&[f32]>) -> anyspec_core::Result<Option<PrunedHead>> {
        let picked = self.shortlist(t, token, previous)?;
        let started = Instant::now();
        let head = match (&picked, &self.blocks) {
            (Some((selected, eos)), Some(blocks)) => {
                Some(self.model.pruned_head_blocks(blocks, selected, eos).map_err(model_error)?)
            }
            _ => None,
        };
        self.stats.forward_time += started.elapsed();
        Ok(head)
    }

    /// Counts one draft position whose forward pass started at `started`.
    fn count_position(&mut self, started: Instant, head: Option<&PrunedHead>) {
        self.stats.forward_time += started.elapsed();
        self.stats.positions += 1;
        self.stats.shortlist_tokens += head.map_or(self.model.config().vocab_size, PrunedHead::len) as u64;
    }

    /// EAGLE drafting (Li et al. 2024, §4.1): the pairs `(x_{i+1}, f_i)` of the context with the
    /// target's recorded features, then one pair per drafted token with the feature the drafter
    /// predicted. The drafted pairs leave the cache afterwards: the target's true features
    /// replace them once verified.
    fn propose_from_features(
        &mut self,
        context: &[u32],
        max_tokens: usize,
        sampling: &SamplingConfig,
        rng: &mut dyn RngCore,
    ) -> anyspec_core::Result<Draft> {
        let Some((feature, tap)) = self.features.clone() else { return Ok(Draft::empty()) };
        let n = context.len();
        // f_{n−2} predicts x_{n−1}, the last context token: without it there is no first pair.
        if n < 2 || tap.len() < n - 1 {
            return Ok(Draft::empty());
        }
        let true_pairs = n - 1;
        // A drafter trained with attention over windows of W pairs attends to at most W: once a
        // draft would pass that, the cache restarts from the last `keep` true pairs (one batched
        // pass over them, every W − keep tokens).
        if let Some(window) = feature.attention_window() {
            let keep = (window / 2).min(window.saturating_sub(max_tokens)).clamp(1, true_pairs);
            if true_pairs <= self.base || true_pairs - self.base + max_tokens > window {
                self.base = true_pairs - keep;
                self.cache.truncate(0);
                self.fed.clear();
            }
        }
        let base = self.base;
        // The last true pair, `(x_{n−1}, f_{n−2})`, is always run again: its output is the first
        // drafted feature. It runs in the same pass as the pairs verification added since the
        // last call (one pass over the layer's weights for all of them).
        let common =
            self.fed.iter().zip(&context[base + 1..]).take_while(|(a, b)| a == b).count().min(true_pairs - 1 - base);
        self.cache.truncate(common);
        self.fed.truncate(common);
        let recorded = tap.features(base + common..true_pairs).ok_or_else(|| missing_features(n))?;
        let started = Instant::now();
        let mut predicted =
            feature.forward(&context[base + common + 1..n], &recorded, &mut self.cache, 1).map_err(model_error)?;
        self.stats.forward_time += started.elapsed();
        self.fed.extend_from_slice(&context[base + common + 1..n]);
        // H̃_{t−1} of the router: the feature before x_t (the target's own f_{n−2} at t = 0).
        let mut previous = recorded[recorded.len() - feature.hidden_size()..].to_vec();
        let mut token = context[n - 1];
        let mut draft = DraftBuilder::new(sampling, max_tokens);
        let result = (|| {
            for t in 0..max_tokens {
                let head = self.head_at(t, token, Some(&previous))?;
                let started = Instant::now();
                let logits = self.model.logits_of_hidden(&predicted, head.as_ref()).map_err(model_error)?;
                self.count_position(started, head.as_ref());
                token = self.push(&mut draft, &logits, head.as_ref(), rng)?;
                if t + 1 < max_tokens {
                    let started = Instant::now();
                    let next = feature.forward(&[token], &predicted, &mut self.cache, 1).map_err(model_error)?;
                    self.stats.forward_time += started.elapsed();
                    self.fed.push(token);
                    previous = std::mem::replace(&mut predicted, next);
                }
            }
            Ok(())
        })();
        // Only pairs of the target's true features stay.
        self.cache.truncate(true_pairs - base);
        self.fed.truncate(true_pairs - base);
        result.map(|()| draft.finish())
    }

    /// Draws the next token from the drafter's logits (over the shortlist's ids, or the model's
    /// whole vocabulary); ids of the target's vocabulary outside them have logit −∞. Greedy
    /// with a shortlist, no row over the target's vocabulary is made
    /// ([`DraftBuilder::push_from_sparse_logits`]).
    fn push(
        &self,
        draft: &mut DraftBuilder<'_>,
        logits: &[f32],
        head: Option<&PrunedHead>,
        rng: &mut dyn RngCore,
    ) -> anyspec_core::Result<u32> {
        match head {
            Some(head) => draft.push_from_sparse_logits(head.ids(), logits, self.target_vocab, rng),
            None if logits.len() == self.target_vocab => draft.push_from_logits(logits, rng),
            None => {
                let mut row = vec![f32::NEG_INFINITY; self.target_vocab];
                row[..logits.len()].copy_from_slice(logits);
                draft.push_from_logits(&row, rng)
            }
        }
    }
}

fn missing_features(len: usize) -> anyspec_core::Error {
    anyspec_core::Error::Drafter(Box::new(Error::invalid(format!(
        "the target's features of a {len}-token context are not recorded; give the drafter's FeatureTap to the target"
    ))))
}

impl Drafter for ShortlistDrafter {
    fn propose(
        &mut self,
        context: &[u32],
        max_tokens: usize,
        sampling: &SamplingConfig,
        rng: &mut dyn RngCore,
    ) -> anyspec_core::Result<Draft> {
        let c = self.model.config().clone();
        if context.is_empty() || max_tokens == 0 || context.iter().any(|&t| t as usize >= c.vocab_size) {
            return Ok(Draft::empty());
        }
        if context.len() + max_tokens > c.max_position_embeddings {
            return Ok(Draft::empty());
        }
        if self.features.is_some() {
            return self.propose_from_features(context, max_tokens, sampling, rng);
        }
        // Reuse the common prefix of the cache; the last context token is always fed again, as
        // x_0 of the draft.
        let common = self.fed.iter().zip(context).take_while(|(a, b)| a == b).count().min(context.len() - 1);
        self.cache.truncate(common);
        self.fed.truncate(common);
        self.hidden.truncate(common);
        if common + 1 < context.len() {
            let one = self.model.pruned_head(&[0]).map_err(model_error)?;
            self.feed(&context[common..context.len() - 1], Some(&one))?;
        }
        let mut token = context[context.len() - 1];
        let mut draft = DraftBuilder::new(sampling, max_tokens);
        for t in 0..max_tokens {
            let previous = self.hidden.last().cloned();
            let head = self.head_at(t, token, previous.as_deref())?;
            let started = Instant::now();
            let logits = self.feed(&[token], head.as_ref())?;
            self.count_position(started, head.as_ref());
            token = self.push(&mut draft, &logits, head.as_ref(), rng)?;
        }
        Ok(draft.finish())
    }
}
