//! SLRS: string-level rejection sampling (hetero-vocab-sd.txt Algorithm 3, Thm 3.2), exact.
//!
//! A drafter with another vocabulary proposes target tokens by spelling them: it samples drafter
//! tokens, and the byte string they spell is read in the target's vocabulary. The target verifies
//! each proposal `t` against `ψ(t)`, the probability that the drafter proposes `t` — accept with
//! probability `min(1, p(t)/ψ(t))`, otherwise draw from the normalized `max(p − ψ, 0)`.
//!
//! # The walk, its proposal and its ψ: two rules
//!
//! Both rules draw drafter tokens `d_1, d_2, …` from the context and follow the string they
//! spell down the byte trie of target surfaces ([`StringSpace`]); `lookahead` is Algorithm 3's
//! threshold `n` on the number of drafter tokens. They differ in what is proposed
//! ([`ProposalRule`]):
//!
//! - [`ProposalRule::FirstTargetToken`], the paper's (hetero-vocab-sd.txt Algorithm 3 lines 4–5,
//!   §3.3's lookahead indicator `S_1`): stop when `i > n` or when `t_1 = T(d_1 ⊕ … ⊕ d_i)_1` is
//!   determined (no longer string can change it), and propose `t_1`. The paper tokenizes with the
//!   target's tokenizer `T`; a [`StringSpace`] holds surfaces only, so `T(s)_1` here is the
//!   longest target surface that is a prefix of `s` (longest-prefix tokenization), and it is
//!   determined once no target surface has `s` as a proper prefix. `t_1` may end inside a
//!   drafter token.
//! - [`ProposalRule::LongestAtBoundary`], ours: stop when the next drafter
//!   token leaves the trie, at the lookahead, or when no target token can be reached below the
//!   current string at a drafter-token boundary; propose the *last* target token whose surface
//!   ended exactly at a drafter-token boundary on the way (none if there was none).
//!
//! Under either rule `ψ(t) = Σ_x P(x)` over the drafter-token sequences `x` at which the walk
//! stops with proposal `t`. These stopped sequences are a prefix-free set, so this is exactly
//! Thm 3.2's ψ, "the sum over `d_1 … d_i` with `T(d_1 ⊕ … ⊕ d_i)_1 = t` of `Π q(d_j)`", read over
//! the sequences Algorithm 3 samples — and it is the probability of proposing `t`, which is all
//! losslessness needs: both rules are lossless (the tests check both against the target's
//! distribution). What is *not* lossless is a sum over every segmentation of `t` regardless of
//! the stopping rule: a segmentation of `"he"` is also the start of a walk that goes on to
//! propose `"hey"`, and the test `a_sum_over_all_segmentations_is_caught` rejects it.
//!
//! Which accepts more (`cargo run --release -p anyspec-drafters --example slrs_rules`: exact
//! `Σ_t min(p(t), ψ(t))`, the paper's Table 2 acceptance of Alg 3, over 50 random Markov pairs
//! on the test vocabularies, every context): the paper's rule, by 1.0–1.6 points (0.5075 vs
//! 0.4916, 0.4437 vs 0.4303, 0.3234 vs 0.3129 at drafter sharpness 0.5, 1, 2, no lookahead),
//! at the same number of scored positions. So the paper's rule is the default (issue 14: ours
//! would stay only if it measured better). On SmolLM2 with the demo's byte-level drafter
//! (`anyspec demo --methods slrs --prompts 6`, two runs alternating the binaries) the two are
//! indistinguishable: α 0.031/0.034 ours against 0.053/0.017 the paper's, 0.91–0.93× against
//! 0.86–0.94×, greedy output unchanged; the paper's rule also follows every leaving drafter
//! token byte by byte and scores nodes ours prunes, a cost that did not show there.
//!
//! # Why a sub-distribution is enough
//!
//! `Σ_t ψ(t) = 1 − P(no proposal) ≤ 1`. Treat "no proposal" as a draft that is always rejected
//! (an out-of-vocabulary draft, [`anyspec_core::DraftOrigin::Sampled`]'s `outside_target`). Token
//! `t` is emitted either because it was proposed and accepted — probability
//! `ψ(t)·min(1, p(t)/ψ(t)) = min(p(t), ψ(t))` — or after a rejection, whose probability is
//! `Σ_t (ψ(t) − min(p(t), ψ(t))) + P(no proposal) = 1 − Σ_t min(p(t), ψ(t))`, followed by a draw
//! from `max(p − ψ, 0) / (1 − Σ min(p, ψ))`. In total
//! `min(p, ψ) + (1 − Σ min(p, ψ))·max(p − ψ, 0)/(1 − Σ min(p, ψ)) = min(p, ψ) + max(p − ψ, 0) = p`.
//!
//! # Cost
//!
//! ψ is needed for every target token (the residual needs all of it after a rejection), so each
//! drafted token expands the whole tree of drafter-token sequences spelling live prefixes of
//! target surfaces, breadth first, one batched drafter call per depth level
//! ([`TokenTreeModel`]; for a burn drafter, [`TextTreeModel`] makes it one tree-attention pass
//! over the level's new nodes). The walk samples its path from the same rows. The number of scored
//! positions is known before generation from the two vocabularies ([`ExpansionPlan`]): about the
//! number of trie nodes for a character-level drafter, and up to `2^(L−1)` per prefix of `L` bytes
//! when the drafter has every substring as a token. [`SlrsConfig::budget`] caps it, and
//! [`SlrsDrafter::new`] refuses a pair whose worst case exceeds it, naming the largest lookahead
//! that fits. Zero-probability branches are pruned, so at temperature 0 (or with a small top-k)
//! the tree collapses to the walk's own path.
//!
//! Measured worst cases (`cargo bench -p anyspec-drafters --bench slrs`): a drafter restricted to
//! single bytes scores 187,823 positions per drafted token against the Llama-3 vocabulary (one
//! per live trie node), while GPT-2's full vocabulary as the drafter has more than 2^64 spellings
//! of Llama-3's prefixes and fits the default budget only up to a lookahead of 4. Duplicate
//! surfaces multiply spellings too: Llama-2's byte-fallback tokens `<0x41>` and `A` spell the
//! same byte, so even its single-byte tokens give 2^L spellings of an L-byte prefix.

mod expansion;
mod plan;
mod space;
mod text_model;
mod tree_model;

use anyspec_core::{Draft, DraftOrigin, Drafter, SamplingConfig};
use rand::RngCore;

use crate::error::{Error, Result};
use expansion::{Limits, expand};
pub use plan::ExpansionPlan;
pub use space::StringSpace;
pub use text_model::TextTreeModel;
pub use tree_model::{MarkovTreeModel, TokenTreeModel};

/// Default cap on drafter positions scored per drafted token.
pub const DEFAULT_SLRS_BUDGET: u64 = 1 << 20;

/// Which target token an SLRS walk proposes (see the module documentation).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ProposalRule {
    /// Ours: the longest target token whose surface ends at a drafter-token boundary.
    LongestAtBoundary,
    /// The paper's (hetero-vocab-sd.txt Algorithm 3, Thm 3.2): `t_1 = T(d_1 ⊕ … ⊕ d_i)_1`, the
    /// first target token of the spelled string, sampling until it is determined or `i > n`.
    #[default]
    FirstTargetToken,
}

/// Limits of SLRS drafting.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlrsConfig {
    /// Most drafter tokens one walk draws (Algorithm 3's threshold `n ≤ n_max`); `None` lets
    /// walks run until the proposal is determined, which bounds them by the longest target
    /// surface.
    pub lookahead: Option<usize>,
    /// Most drafter positions scored to draft one target token.
    pub budget: u64,
    /// Which target token a walk proposes.
    pub rule: ProposalRule,
}

impl Default for SlrsConfig {
    fn default() -> Self {
        SlrsConfig { lookahead: None, budget: DEFAULT_SLRS_BUDGET, rule: ProposalRule::default() }
    }
}

/// Counters of the last [`Drafter::propose`] call, for cost measurements.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SlrsCost {
    /// Target tokens drafted (walks that proposed something).
    pub proposals: u64,
    /// Walks run (proposals plus at most one walk that proposed nothing).
    pub walks: u64,
    /// Drafter positions scored over all walks.
    pub positions: u64,
    /// Drafter calls (one per depth level of each walk's tree).
    pub calls: u64,
}

/// A drafter with another vocabulary, drafting target tokens by SLRS.
///
/// Each drafted token is one walk (see the module documentation) from the context extended by
/// the tokens drafted before it, so γ tokens cost γ tree expansions. The draft carries the ψ row
/// of every token as its "distribution" for speculative sampling (exact, because the rule
/// `min(1, p/ψ)` with residual `max(p − ψ, 0)` is the same as for a full distribution); a walk
/// that proposes nothing ends the draft as an always-rejected out-of-vocabulary draft carrying
/// its ψ. At temperature 0 the walk is deterministic and the draft is returned as deterministic.
#[derive(Debug)]
pub struct SlrsDrafter<M> {
    model: M,
    space: StringSpace,
    config: SlrsConfig,
    plan: ExpansionPlan,
    cost: SlrsCost,
}

impl<M: TokenTreeModel> SlrsDrafter<M> {
    /// Prepares the drafter, refusing a pair whose worst-case expansion exceeds the budget.
    pub fn new(model: M, space: StringSpace, config: SlrsConfig) -> Result<Self> {
        if config.lookahead == Some(0) {
            return Err(Error::InvalidParameter(anyspec_core::InvalidParameter {
                name: "slrs lookahead",
                expected: "at least 1 drafter token (or unset for no limit)",
                value: "0".into(),
            }));
        }
        let plan = ExpansionPlan::with_rule(&space, config.rule);
        let positions = plan.worst_case(config.lookahead);
        if positions > config.budget {
            let advice = match plan.largest_lookahead_within(config.budget) {
                Some(fits) => {
                    let lower = format!(
                        "lower the lookahead to {fits} (proposing only target tokens spelled in at most \
                         {fits} drafter tokens)"
                    );
                    if positions == u64::MAX { lower } else { format!("{lower} or raise the budget to {positions}") }
                }
                None => format!(
                    "not even one drafter token fits; raise the budget to at least {}",
                    plan.worst_case(Some(1))
                ),
            };
            return Err(Error::SlrsBudget {
                positions,
                budget: config.budget,
                lookahead: config.lookahead.map_or_else(|| "unlimited".to_string(), |l| l.to_string()),
                advice,
            });
        }
        Ok(SlrsDrafter { model, space, config, plan, cost: SlrsCost::default() })
    }

    /// The drafter model.
    pub fn model(&self) -> &M {
        &self.model
    }

    /// The vocabulary pair.
    pub fn space(&self) -> &StringSpace {
        &self.space
    }

    /// The worst-case expansion of the pair.
    pub fn plan(&self) -> &ExpansionPlan {
        &self.plan
    }

    /// The cost of the last proposal.
    pub fn last_cost(&self) -> SlrsCost {
        self.cost
    }

    /// Runs one walk from `context`: its proposal, with the exact ψ row over target tokens.
    ///
    /// This is the building block of [`Drafter::propose`]; tests and tools use it to check ψ.
    pub fn walk(
        &mut self,
        context: &[u32],
        sampling: &SamplingConfig,
        rng: &mut dyn RngCore,
    ) -> anyspec_core::Result<Walk> {
        let room = self.model.room(context)?;
        let lookahead = self.config.lookahead.unwrap_or(usize::MAX).min(room);
        let limits = Limits { lookahead, budget: self.config.budget, rule: self.config.rule };
        let e = expand(&self.space, &mut self.model, context, sampling, limits, rng)?;
        self.cost.walks += 1;
        self.cost.positions += e.scored;
        self.cost.calls += e.calls;
        self.cost.proposals += u64::from(e.proposal.is_some());
        Ok(Walk { proposal: e.proposal, psi: e.psi, no_proposal: e.no_proposal })
    }
}

/// One SLRS walk: what it proposed and the law it was drawn from.
#[derive(Clone, Debug, PartialEq)]
pub struct Walk {
    /// The proposed target token; `None` when no target token was spelled at a drafter-token
    /// boundary.
    pub proposal: Option<u32>,
    /// `ψ(t)`, the probability of proposing `t`, for every target token.
    pub psi: Vec<f64>,
    /// The probability of proposing nothing: `1 − Σ ψ`.
    pub no_proposal: f64,
}

impl<M: TokenTreeModel> Drafter for SlrsDrafter<M> {
    fn propose(
        &mut self,
        context: &[u32],
        max_tokens: usize,
        sampling: &SamplingConfig,
        rng: &mut dyn RngCore,
    ) -> anyspec_core::Result<Draft> {
        self.cost = SlrsCost::default();
        let mut sequence = context.to_vec();
        let mut tokens = Vec::with_capacity(max_tokens);
        let mut distributions = Vec::new();
        let mut outside_target = None;
        while tokens.len() < max_tokens {
            let walk = self.walk(&sequence, sampling, rng)?;
            let mut row: Vec<f32> = walk.psi.iter().map(|&x| x as f32).collect();
            let Some(token) = walk.proposal else {
                // An always-rejected draft: only worth verifying when it carries mass (its ψ
                // shrinks the residual); with none the step is plain sampling from p.
                if row.iter().any(|&x| x > 0.0) && !sampling.is_greedy() {
                    outside_target = Some(row);
                }
                break;
            };
            // The proposal had positive probability; rounding to f32 must not make it look
            // impossible to the verifier. The smallest *normal* f32 (1.2e-38) survives devices
            // that flush subnormals; a token that improbable is practically never proposed.
            if row[token as usize] < f32::MIN_POSITIVE {
                row[token as usize] = f32::MIN_POSITIVE;
            }
            tokens.push(token);
            sequence.push(token);
            if !sampling.is_greedy() {
                distributions.push(row);
            }
        }
        Ok(if sampling.is_greedy() {
            Draft::deterministic(tokens)
        } else {
            Draft { tokens, origin: DraftOrigin::Sampled { distributions, outside_target }, confidence_class: None }
        })
    }
}
