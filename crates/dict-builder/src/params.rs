//! Build parameters of a dictionary, recorded in its header.

use serde::{Deserialize, Serialize};

use crate::counts::MAX_ORDER;
use crate::error::{Error, Result};

/// Most tokens in a dictionary key (the context suffix that is looked up).
pub const MAX_PREFIX_LIMIT: usize = 8;
/// Most tokens in a stored continuation.
pub const MAX_CONTINUATION_LIMIT: usize = 8;

/// How a dictionary is built from n-gram counts (dictspec.txt §3.1, §4.4).
///
/// The defaults are the paper's deployment configuration (§4.5.3 and §4.6: "n123, 200k entries,
/// p_min = 0.8", prefixes and continuations truncated to at most 8 tokens, §4.4). `max_ngrams`
/// and `min_count` are ours (the paper gives neither), documented on each field.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BuildParams {
    /// Word n-gram orders that contribute (for example `[1, 2, 3]`).
    pub orders: Vec<usize>,
    /// Most frequent n-grams kept before tokenizing, over all orders together (dictspec.txt §3.1's
    /// first filter, "retain only the most frequent n-grams"; the size of the cap is ours, the
    /// paper gives none).
    pub max_ngrams: usize,
    /// N-grams seen fewer times are dropped before tokenizing (ours, not in dictspec.txt:
    /// singletons are mostly noise and half of all distinct n-grams).
    pub min_count: u64,
    /// Most entries (prefixes) kept, the most frequent first (dictspec.txt §4.4 sweeps 10k, 50k,
    /// 100k, 200k, 500k and 1M; the default is its deployed 200k).
    pub max_entries: usize,
    /// A prefix keeps its most probable continuation only when that continuation's share of the
    /// prefix's count is at least this: the paper's p_min (§4.4 sweeps 0.2, 0.5, 0.8, 0.9 and
    /// 1.0; the default is its deployed 0.8). Values below 0.2 are outside the paper's grid and
    /// reported apart in `reports/dict.md`.
    pub min_prob: f64,
    /// Prefixes longer than this keep their last `max_prefix` tokens (≤ 8).
    pub max_prefix: usize,
    /// Continuations longer than this keep their first `max_continuation` tokens (≤ 8).
    pub max_continuation: usize,
    /// Which continuation a prefix stores: the most frequent exact one (§3.1), or that one
    /// extended by chaining. Dictionaries written before this field existed read as
    /// [`ContinuationRule::MostFrequent`], the rule they were built with.
    #[serde(default)]
    pub continuations: ContinuationRule,
}

/// How the stored continuation of a prefix is chosen.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ContinuationRule {
    /// dictspec.txt §3.1 as written: over every split of every tokenized n-gram, the exact
    /// continuation counted most often after the prefix. Shorter n-grams are counted at least
    /// as often as their extensions, so it almost always ends where the prefix's word ends.
    #[default]
    MostFrequent,
    /// Ours: the most frequent continuation, then extended while the longest-suffix entry at its
    /// end has a best continuation of probability ≥ p_min, up to `max_continuation` tokens
    /// ([`ContinuationTable::chained`](crate::ContinuationTable::chained)). The paper drafts
    /// 2.6–6.3 tokens per draft and does not say how it forms continuations across words; this
    /// is one rule that reaches that length.
    Chained,
}

impl ContinuationRule {
    /// The name used on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            ContinuationRule::MostFrequent => "most-frequent",
            ContinuationRule::Chained => "chained",
        }
    }
}

impl Default for BuildParams {
    fn default() -> Self {
        BuildParams {
            orders: vec![1, 2, 3],
            max_ngrams: 2_000_000,
            min_count: 2,
            max_entries: 200_000,
            min_prob: 0.8,
            max_prefix: 8,
            max_continuation: 8,
            continuations: ContinuationRule::MostFrequent,
        }
    }
}

impl BuildParams {
    /// The highest order used.
    pub fn max_order(&self) -> usize {
        self.orders.iter().copied().max().unwrap_or(0)
    }

    /// Checks every field against its allowed range.
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] naming the first bad field.
    pub fn validate(&self) -> Result<()> {
        if self.orders.is_empty() || self.orders.iter().any(|&o| !(1..=MAX_ORDER).contains(&o)) {
            return Err(Error::invalid("orders", "a non-empty list of orders in 1..=8", format!("{:?}", self.orders)));
        }
        if self.max_ngrams == 0 {
            return Err(Error::invalid("max_ngrams", "≥ 1", 0));
        }
        if self.max_entries == 0 {
            return Err(Error::invalid("max_entries", "≥ 1", 0));
        }
        if !(self.min_prob.is_finite() && (0.0..=1.0).contains(&self.min_prob)) {
            return Err(Error::invalid("min_prob", "in [0, 1]", self.min_prob));
        }
        if !(1..=MAX_PREFIX_LIMIT).contains(&self.max_prefix) {
            return Err(Error::invalid("max_prefix", "in 1..=8", self.max_prefix));
        }
        if !(1..=MAX_CONTINUATION_LIMIT).contains(&self.max_continuation) {
            return Err(Error::invalid("max_continuation", "in 1..=8", self.max_continuation));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters_recorded_before_the_continuation_rule_read_as_most_frequent() {
        let mut json =
            serde_json::to_value(BuildParams { continuations: ContinuationRule::Chained, ..BuildParams::default() })
                .unwrap();
        assert_eq!(json["continuations"], "chained");
        json.as_object_mut().unwrap().remove("continuations");
        let old: BuildParams = serde_json::from_value(json).unwrap();
        assert_eq!(old.continuations, ContinuationRule::MostFrequent);
    }
}
