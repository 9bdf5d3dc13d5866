//! How many drafter positions a full ψ expansion scores, known before generation starts.

use super::ProposalRule;
use super::space::{ROOT, StringSpace};

/// The worst-case size of one ψ expansion, level by level.
///
/// A node of the drafter-token tree is scored (one drafter position) when it has fewer than
/// `lookahead` tokens and a target token can still be reached below it at a drafter-token
/// boundary ([`ProposalRule::LongestAtBoundary`]), or some target surface still extends its
/// string ([`ProposalRule::FirstTargetToken`]). Pruning zero-probability
/// branches only removes nodes, so the count with every drafter probability positive is an exact
/// upper bound, and it depends on the two vocabularies alone. It is the number of ways to spell
/// each live prefix of a target surface with drafter tokens — the decomposition counts of
/// hetero-vocab-sd Appendix D summed over prefixes — and grows like `2^(L−1)` in the surface
/// length `L` for a drafter that has every substring as a token, linearly for a byte-level one.
/// Counts saturate at `u64::MAX` ("more than can be counted"), which real multi-byte drafters
/// reach.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExpansionPlan {
    /// `per_level[k]`: positions scored at depth `k` (continuations of `k` drafter tokens),
    /// without a lookahead limit. The last entry is the deepest level that scores anything.
    pub per_level: Vec<u64>,
}

impl ExpansionPlan {
    /// Counts the positions level by level until no live node remains, for the default rule.
    pub fn new(space: &StringSpace) -> ExpansionPlan {
        ExpansionPlan::with_rule(space, ProposalRule::default())
    }

    /// Counts the positions level by level until no live node remains, for `rule`.
    pub fn with_rule(space: &StringSpace, rule: ProposalRule) -> ExpansionPlan {
        let nodes = space.node_count();
        let mut frontier = vec![0u64; nodes];
        frontier[ROOT as usize] = 1;
        let mut live: Vec<u32> = vec![ROOT];
        let mut per_level = Vec::new();
        while !live.is_empty() {
            let mut next = vec![0u64; nodes];
            let mut next_live = Vec::new();
            let mut scored = 0u64;
            for &u in &live {
                let count = frontier[u as usize];
                let open = match rule {
                    ProposalRule::LongestAtBoundary => space.reachable(u),
                    ProposalRule::FirstTargetToken => space.extendable(u),
                };
                if count == 0 || !open {
                    continue;
                }
                scored = scored.saturating_add(count);
                for (_, v) in space.moves(u) {
                    if next[v as usize] == 0 {
                        next_live.push(v);
                    }
                    next[v as usize] = next[v as usize].saturating_add(count);
                }
            }
            if scored == 0 {
                break;
            }
            per_level.push(scored);
            frontier = next;
            live = next_live;
        }
        ExpansionPlan { per_level }
    }

    /// Positions scored per drafted token with at most `lookahead` drafter tokens per walk
    /// (`None`: no limit).
    pub fn worst_case(&self, lookahead: Option<usize>) -> u64 {
        let levels = lookahead.unwrap_or(usize::MAX).min(self.per_level.len());
        self.per_level[..levels].iter().fold(0u64, |a, &b| a.saturating_add(b))
    }

    /// The lookahead beyond which nothing more is scored: walks never draw more drafter tokens.
    pub fn natural_lookahead(&self) -> usize {
        self.per_level.len()
    }

    /// The largest lookahead whose worst case fits in `budget` positions (`None` if not even one
    /// drafter token does).
    pub fn largest_lookahead_within(&self, budget: u64) -> Option<usize> {
        let mut total = 0u64;
        let mut fits = None;
        for (k, &n) in self.per_level.iter().enumerate() {
            total = total.saturating_add(n);
            if total > budget {
                break;
            }
            fits = Some(k + 1);
        }
        fits
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn space(target: &[&str], drafter: &[&str]) -> StringSpace {
        let t: Vec<Option<&[u8]>> = target.iter().map(|s| Some(s.as_bytes())).collect();
        let d: Vec<Option<&[u8]>> = drafter.iter().map(|s| Some(s.as_bytes())).collect();
        StringSpace::new(&t, t.len(), &d, d.len()).unwrap()
    }

    #[test]
    fn a_character_drafter_scores_every_live_prefix_once() {
        // Target "abcd" (and "a"); drafter "a".."d": the live prefixes are "", "a", "ab", "abc".
        let s = space(&["a", "abcd"], &["a", "b", "c", "d"]);
        let plan = ExpansionPlan::new(&s);
        assert_eq!(plan.per_level, vec![1, 1, 1, 1]);
        assert_eq!(plan.worst_case(None), 4);
        assert_eq!(plan.worst_case(Some(2)), 2);
    }

    #[test]
    fn every_substring_as_a_token_doubles_the_work_per_byte() {
        // Drafter tokens: every substring of "abcd". Prefix of length L has 2^(L−1) spellings;
        // prefixes "", "a", "ab", "abc" are live: 1 + 1 + 2 + 4 = 8 positions.
        let mut subs = Vec::new();
        for i in 0..4 {
            for j in i + 1..=4 {
                subs.push(&"abcd"[i..j]);
            }
        }
        let s = space(&["abcd"], &subs);
        let plan = ExpansionPlan::new(&s);
        assert_eq!(plan.worst_case(None), 8);
        // By depth: () | a, ab, abc | a·b, a·bc, ab·c | a·b·c.
        assert_eq!(plan.per_level, vec![1, 3, 3, 1]);
        assert_eq!(plan.largest_lookahead_within(4), Some(2));
        assert_eq!(plan.largest_lookahead_within(0), None);
        assert_eq!(plan.natural_lookahead(), 4);
    }
}
