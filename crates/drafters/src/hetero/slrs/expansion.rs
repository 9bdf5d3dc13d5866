//! One SLRS walk and the exact distribution ψ of what it proposes, computed together.
//!
//! The tree of drafter-token sequences that spell prefixes of target surfaces is expanded
//! breadth first, one [`TokenTreeModel::next_logits`] call per depth level. Each sequence `x`
//! carries its probability `P(x) = Π q(d_i | context, d_<i)`, its trie node and `last(x)`, the
//! longest target token it spelled at a drafter-token boundary. Probability leaves the tree in
//! two ways, and both end the walk with proposal `last(x)`:
//!
//! - at a scored node, the drafter draws a token that leaves the trie: mass
//!   `P(x) · Σ_{d ∉ moves} q(d | x)`;
//! - a node is not scored (the lookahead is used up, or no target token is reachable below it):
//!   mass `P(x)`.
//!
//! So `ψ(t) = Σ_{x ends the walk, last(x) = t} mass(x)`, and the mass with `last(x)` undefined is
//! the probability of no proposal. The walk itself samples one path of the same tree, from the
//! same rows, while the tree is expanded: it costs no extra drafter call.
//!
//! With [`ProposalRule::FirstTargetToken`] (hetero-vocab-sd.txt Algorithm 3 with Thm 3.2's ψ)
//! the same tree is expanded, but a sequence's proposal is the first target token of the string
//! it spells (the longest target surface that is a prefix of it, [`StringSpace::first_token`]),
//! wherever that surface ends, and a node is scored while that first token is not determined
//! (some target surface extends the string) and the lookahead allows. A drafter token that
//! leaves the trie is followed byte by byte to find the first token of the string it makes
//! ([`StringSpace::step`]): this costs one pass over the drafter tokens of non-zero probability
//! per scored node.

use anyspec_core::SamplingConfig;
use anyspec_core::sampling::{logits_to_probs_into, sample};
use rand::RngCore;

use super::ProposalRule;
use super::space::{ROOT, Step, StringSpace};
use super::tree_model::TokenTreeModel;
use crate::error::Error;

/// The outcome of one walk with its ψ row.
#[derive(Clone, Debug)]
pub(crate) struct Expansion {
    /// The proposed target token, `None` when the walk spelled no target token at a boundary.
    pub(crate) proposal: Option<u32>,
    /// `ψ(t)` for every target token (sums to one minus `no_proposal`).
    pub(crate) psi: Vec<f64>,
    /// Probability of no proposal.
    pub(crate) no_proposal: f64,
    /// Drafter positions scored.
    pub(crate) scored: u64,
    /// Drafter calls made (depth levels).
    pub(crate) calls: u64,
}

/// One node of the frontier: a drafter-token sequence.
struct Node {
    tokens: Vec<u32>,
    probability: f64,
    trie_node: u32,
    last: Option<u32>,
}

/// Limits of one expansion.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Limits {
    /// Most drafter tokens per walk.
    pub(crate) lookahead: usize,
    /// Most positions scored.
    pub(crate) budget: u64,
    /// Which target token a walk proposes.
    pub(crate) rule: ProposalRule,
}

/// Runs one walk from `context` and computes ψ over the whole tree.
pub(crate) fn expand(
    space: &StringSpace,
    model: &mut dyn TokenTreeModel,
    context: &[u32],
    sampling: &SamplingConfig,
    limits: Limits,
    rng: &mut dyn RngCore,
) -> anyspec_core::Result<Expansion> {
    let mut psi = vec![0.0f64; space.target_vocab_size()];
    let mut no_proposal = 0.0f64;
    let mut deposit = |last: Option<u32>, mass: f64| match last {
        Some(t) => psi[t as usize] += mass,
        None => no_proposal += mass,
    };
    let mut frontier = vec![Node { tokens: Vec::new(), probability: 1.0, trie_node: ROOT, last: None }];
    // Index of the walk's node in `frontier`; `Err(proposal)` once the walk has stopped.
    let mut walk: Result<usize, Option<u32>> = Ok(0);
    let (mut scored, mut calls) = (0u64, 0u64);
    let mut probs = Vec::new();

    for depth in 0.. {
        if frontier.is_empty() {
            break;
        }
        // Nodes that end the walk without being scored.
        let mut live = Vec::with_capacity(frontier.len());
        for (i, node) in frontier.into_iter().enumerate() {
            let is_walk = walk == Ok(i);
            let open = match limits.rule {
                ProposalRule::LongestAtBoundary => space.reachable(node.trie_node),
                ProposalRule::FirstTargetToken => space.extendable(node.trie_node),
            };
            if depth < limits.lookahead && open {
                if is_walk {
                    walk = Ok(live.len());
                }
                live.push(node);
            } else {
                if is_walk {
                    walk = Err(node.last);
                }
                deposit(node.last, node.probability);
            }
        }
        if live.is_empty() {
            break;
        }
        scored += live.len() as u64;
        if scored > limits.budget {
            return Err(Error::SlrsBudgetExceeded { positions: scored, budget: limits.budget }.into());
        }
        let continuations: Vec<Vec<u32>> = live.iter().map(|n| n.tokens.clone()).collect();
        let rows = model.next_logits(context, &continuations)?;
        calls += 1;
        if rows.len() != live.len() {
            return Err(model_output("drafter rows (one per continuation)", live.len(), rows.len()));
        }

        let mut next = Vec::new();
        // Where the walk goes at the next level: decided while this level is scanned, applied
        // after it (indices of the two levels must not be confused).
        let walking = walk;
        let mut walk_next = walk;
        for (i, (node, logits)) in live.into_iter().zip(rows).enumerate() {
            if logits.len() < space.drafter_ids_needed() {
                return Err(model_output("a drafter logit row", space.drafter_ids_needed(), logits.len()));
            }
            logits_to_probs_into(&logits, sampling, &mut probs)?;
            let total: f64 = probs.iter().map(|&p| f64::from(p)).sum();
            // The walk draws its next drafter token from the very row ψ is computed from.
            let drawn = if walking == Ok(i) { Some(sample(&probs, rng)?) } else { None };
            if let Some(d) = drawn {
                // Overwritten below when `d` is one of the node's moves.
                walk_next = Err(match limits.rule {
                    ProposalRule::LongestAtBoundary => node.last,
                    ProposalRule::FirstTargetToken => match space.step(node.trie_node, d) {
                        Step::Leaves(t) => t,
                        Step::Move => None,
                    },
                });
            }
            let mut stay = 0.0f64;
            for (d, v) in space.moves(node.trie_node) {
                let q = f64::from(probs[d as usize]) / total;
                if q <= 0.0 {
                    continue;
                }
                stay += q;
                if drawn == Some(d) {
                    walk_next = Ok(next.len());
                }
                let mut tokens = Vec::with_capacity(node.tokens.len() + 1);
                tokens.extend_from_slice(&node.tokens);
                tokens.push(d);
                let last = match limits.rule {
                    ProposalRule::LongestAtBoundary => space.token(v).or(node.last),
                    ProposalRule::FirstTargetToken => space.first_token(v),
                };
                next.push(Node { tokens, probability: node.probability * q, trie_node: v, last });
            }
            match limits.rule {
                ProposalRule::LongestAtBoundary => deposit(node.last, node.probability * (1.0 - stay).max(0.0)),
                ProposalRule::FirstTargetToken => {
                    // Each leaving token's mass goes to the first token of the string it makes.
                    for (d, &p) in probs.iter().enumerate() {
                        let q = f64::from(p) / total;
                        if q > 0.0
                            && let Step::Leaves(t) = space.step(node.trie_node, d as u32)
                        {
                            deposit(t, node.probability * q);
                        }
                    }
                }
            }
        }
        walk = walk_next;
        frontier = next;
    }
    let proposal = match walk {
        Err(proposal) => proposal,
        // Unreachable: every frontier node is either scored or deposited, and the loop only
        // ends with an empty frontier. Kept total rather than asserting.
        Ok(_) => None,
    };
    Ok(Expansion { proposal, psi, no_proposal, scored, calls })
}

fn model_output(what: &'static str, expected: usize, got: usize) -> anyspec_core::Error {
    Error::ModelOutput { what, expected, got }.into()
}

#[cfg(test)]
mod tests {
    use anyspec_core::toy::MarkovChain;
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    use super::*;
    use crate::hetero::slrs::tree_model::MarkovTreeModel;

    fn space(target: &[&str], drafter: &[&str]) -> StringSpace {
        let t: Vec<Option<&[u8]>> = target.iter().map(|s| Some(s.as_bytes())).collect();
        let d: Vec<Option<&[u8]>> = drafter.iter().map(|s| Some(s.as_bytes())).collect();
        StringSpace::new(&t, t.len(), &d, d.len()).unwrap()
    }

    fn uniform(rows: usize, n: usize) -> MarkovChain {
        MarkovChain::new(vec![vec![1.0 / n as f32; n]; rows]).unwrap()
    }

    const UNLIMITED: Limits = Limits { lookahead: usize::MAX, budget: u64::MAX, rule: ProposalRule::LongestAtBoundary };
    const PAPER: Limits = Limits { rule: ProposalRule::FirstTargetToken, ..UNLIMITED };

    #[test]
    fn hand_computed_psi_for_a_uniform_drafter() {
        // Target: "h" (0), "he" (1), "hey" (2); drafter uniform over "h", "e", "y", "ey", "x".
        // From the root: "h" w.p. 1/5, otherwise the walk leaves the trie (no proposal).
        // From "h": "e" → "he"; "ey" → "hey" (leaf: stop, propose "hey"); others leave → "h".
        // From "h·e": "y" → "hey"; others leave → "he".
        // ψ(h) = 1/5 · 3/5, ψ(he) = 1/5 · 1/5 · 4/5, ψ(hey) = 1/5 · (1/5 + 1/5 · 1/5).
        let s = space(&["h", "he", "hey"], &["h", "e", "y", "ey", "x"]);
        let mut model = MarkovTreeModel::new(uniform(3, 5), uniform(5, 5)).unwrap();
        let mut rng = StdRng::seed_from_u64(0);
        let e = expand(&s, &mut model, &[0], &SamplingConfig::default(), UNLIMITED, &mut rng).unwrap();
        let expected = [0.2 * 0.6, 0.2 * 0.2 * 0.8, 0.2 * (0.2 + 0.04)];
        for (got, want) in e.psi.iter().zip(expected) {
            assert!((got - want).abs() < 1e-6, "{:?} vs {expected:?}", e.psi);
        }
        assert!((e.no_proposal - 0.8).abs() < 1e-6);
        // Scored: root, "h", "h·e".
        assert_eq!((e.scored, e.calls), (3, 3));
    }

    #[test]
    fn the_lookahead_truncates_the_walk_and_moves_mass_to_shorter_tokens() {
        let s = space(&["h", "he", "hey"], &["h", "e", "y", "ey", "x"]);
        let mut model = MarkovTreeModel::new(uniform(3, 5), uniform(5, 5)).unwrap();
        let mut rng = StdRng::seed_from_u64(0);
        let limits = Limits { lookahead: 2, ..UNLIMITED };
        let e = expand(&s, &mut model, &[0], &SamplingConfig::default(), limits, &mut rng).unwrap();
        // "h·e" is not scored: all of its mass 1/25 goes to "he".
        assert!((e.psi[1] - 0.04).abs() < 1e-6 && (e.psi[2] - 0.04).abs() < 1e-6, "{:?}", e.psi);
        assert_eq!(e.scored, 2);
    }

    #[test]
    fn exceeding_the_budget_is_a_clear_error() {
        let s = space(&["h", "he", "hey"], &["h", "e", "y", "ey", "x"]);
        let mut model = MarkovTreeModel::new(uniform(3, 5), uniform(5, 5)).unwrap();
        let mut rng = StdRng::seed_from_u64(0);
        let limits = Limits { budget: 2, ..UNLIMITED };
        let err = expand(&s, &mut model, &[0], &SamplingConfig::default(), limits, &mut rng).unwrap_err();
        assert!(format!("{err:?}").contains("SlrsBudgetExceeded { positions: 3, budget: 2 }"), "{err:?}");
    }

    #[test]
    fn the_papers_rule_proposes_the_first_target_token_wherever_it_ends() {
        // Target: "h" (0), "he" (1), "hey" (2); drafter uniform over "h", "e", "y", "ey", "x",
        // "hex". Algorithm 3 with longest-prefix tokenization: stop once no target surface
        // extends the string, propose the longest target surface that prefixes it.
        // Root: "h" (1/6) goes on; "hex" (1/6) leaves after "he" → "he"; the rest → nothing.
        // "h": "e" goes on; "ey" → "hey" (a leaf); "h", "y", "x", "hex" → "h" (4/6).
        // "h·e": "y" → "hey"; "ey" leaves at "he" ("hee" is no prefix), and so do "h", "e",
        // "x", "hex": → "he" (5/6 in all).
        let s = space(&["h", "he", "hey"], &["h", "e", "y", "ey", "x", "hex"]);
        let mut model = MarkovTreeModel::new(uniform(3, 6), uniform(6, 6)).unwrap();
        let mut rng = StdRng::seed_from_u64(0);
        let sixth = 1.0 / 6.0;
        let e = expand(&s, &mut model, &[0], &SamplingConfig::default(), PAPER, &mut rng).unwrap();
        let expected = [sixth * 4.0 * sixth, sixth + sixth * sixth * 5.0 * sixth, sixth * (sixth + sixth * sixth)];
        for (got, want) in e.psi.iter().zip(expected) {
            assert!((got - want).abs() < 1e-9, "{:?} vs {expected:?}", e.psi);
        }
        assert!((e.no_proposal - 4.0 * sixth).abs() < 1e-9);
        // Ours never proposes "he" from "hex" (it ends inside a drafter token): ψ(he) differs.
        let ours = expand(&s, &mut model, &[0], &SamplingConfig::default(), UNLIMITED, &mut rng).unwrap();
        assert!((ours.psi[1] - sixth * sixth * 5.0 * sixth).abs() < 1e-9, "{:?}", ours.psi);
        assert!((ours.no_proposal - 5.0 * sixth).abs() < 1e-9);
    }
}
