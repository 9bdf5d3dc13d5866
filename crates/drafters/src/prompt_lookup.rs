//! Prompt lookup: propose what followed the last occurrence of the context's final n-gram.
//!
//! The context (prompt plus generated text) often repeats itself — names, code, quoted
//! passages. The drafter indexes every n-gram of the context once, incrementally, so a proposal
//! costs a few hash lookups however long the context grows; that keeps the emulator linear in
//! the text length.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};

use anyspec_core::Draft;
use rustc_hash::FxBuildHasher;

use crate::error::{Error, Result};

/// Largest n-gram size prompt lookup matches.
pub const MAX_NGRAM_LIMIT: usize = 16;
/// Context tokens compared at each end to recognise that a context extends the last one.
const SYNC_CHECK: usize = 32;

/// Which n-gram sizes are matched.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PromptLookupConfig {
    /// Smallest n tried (≥ 1).
    pub min_ngram: usize,
    /// Largest n tried first (≥ `min_ngram`, ≤ 16).
    pub max_ngram: usize,
}

impl Default for PromptLookupConfig {
    /// n from 3 down to 1, as common prompt-lookup implementations do.
    fn default() -> Self {
        PromptLookupConfig { min_ngram: 1, max_ngram: 3 }
    }
}

/// Prompt-lookup drafter: for n from `max_ngram` down to `min_ngram`, finds the most recent
/// earlier occurrence of the context's last n tokens and proposes the tokens that followed it.
#[derive(Clone, Debug)]
pub struct PromptLookup {
    config: PromptLookupConfig,
    /// The context indexed so far.
    seen: Vec<u32>,
    /// `index[n − min_ngram]`: hash of an n-gram → end (exclusive) of its latest occurrence that
    /// is followed by at least one token.
    index: Vec<HashMap<u64, u32, FxBuildHasher>>,
    /// N-grams ending before this position are indexed.
    indexed_until: usize,
}

/// The 64-bit key of an n-gram of tokens, shared with [`crate::TokenNgramModel`].
pub(crate) fn hash_ngram(tokens: &[u32]) -> u64 {
    let mut hasher = FxBuildHasher.build_hasher();
    for &t in tokens {
        hasher.write_u32(t);
    }
    hasher.finish()
}

impl PromptLookup {
    /// A drafter with an empty index.
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] unless `1 ≤ min_ngram ≤ max_ngram ≤ 16`.
    pub fn new(config: PromptLookupConfig) -> Result<Self> {
        if config.min_ngram == 0 {
            return Err(Error::InvalidParameter(anyspec_core::InvalidParameter {
                name: "min_ngram",
                expected: "≥ 1",
                value: config.min_ngram.to_string(),
            }));
        }
        if config.max_ngram < config.min_ngram || config.max_ngram > MAX_NGRAM_LIMIT {
            return Err(Error::InvalidParameter(anyspec_core::InvalidParameter {
                name: "max_ngram",
                expected: "between min_ngram and 16",
                value: config.max_ngram.to_string(),
            }));
        }
        let sizes = config.max_ngram - config.min_ngram + 1;
        Ok(PromptLookup { config, seen: Vec::new(), index: vec![HashMap::default(); sizes], indexed_until: 0 })
    }

    /// Forgets everything indexed (a new, unrelated context follows).
    pub fn reset(&mut self) {
        self.seen.clear();
        self.index.iter_mut().for_each(HashMap::clear);
        self.indexed_until = 0;
    }

    /// Whether `context` extends what was indexed. Per the [`Drafter`] contract a context only
    /// grows between calls; comparing the first and last tokens of the indexed part (rather than
    /// all of it) keeps this O(1). A context that differs only in its middle would keep a stale
    /// index, which can only make drafts worse, never verification wrong.
    fn extends_seen(&self, context: &[u32]) -> bool {
        let n = self.seen.len();
        if context.len() < n {
            return false;
        }
        let head = n.min(SYNC_CHECK);
        let tail = n.saturating_sub(SYNC_CHECK);
        context[..head] == self.seen[..head] && context[tail..n] == self.seen[tail..]
    }

    /// Brings the index up to date with `context`.
    fn sync(&mut self, context: &[u32]) {
        if !self.extends_seen(context) {
            self.reset();
        }
        self.seen.extend_from_slice(&context[self.seen.len()..]);
        // An n-gram ending at `end` is useful only if a token follows it: end ≤ len − 1.
        let last_end = self.seen.len().saturating_sub(1);
        for end in self.indexed_until.max(1)..=last_end {
            for (slot, n) in (self.config.min_ngram..=self.config.max_ngram).enumerate() {
                if end >= n {
                    let h = hash_ngram(&self.seen[end - n..end]);
                    self.index[slot].insert(h, end as u32);
                }
            }
        }
        self.indexed_until = self.indexed_until.max(last_end + 1);
    }

    /// The draft for `context`, at most `max_tokens` long, labelled with the length of the
    /// context it copies after ([`PromptLookup::confidence_class`]): the matched n-gram, grown
    /// backwards while the two contexts still agree, up to [`MAX_NGRAM_LIMIT`] tokens.
    pub fn draft(&mut self, context: &[u32], max_tokens: usize) -> Draft {
        self.sync(context);
        if max_tokens == 0 {
            return Draft::empty();
        }
        let len = self.seen.len();
        for n in (self.config.min_ngram..=self.config.max_ngram).rev() {
            let slot = n - self.config.min_ngram;
            if len < n {
                continue;
            }
            let suffix = &self.seen[len - n..];
            if let Some(&end) = self.index[slot].get(&hash_ngram(suffix)) {
                let end = end as usize;
                // A hash collision would propose unrelated tokens: check the match.
                if &self.seen[end - n..end] == suffix {
                    let mut matched = n;
                    while matched < MAX_NGRAM_LIMIT
                        && matched < end
                        && self.seen[end - matched - 1] == self.seen[len - matched - 1]
                    {
                        matched += 1;
                    }
                    return Draft::deterministic(self.seen[end..len.min(end + max_tokens)].to_vec())
                        .with_confidence_class(Self::confidence_class(matched));
                }
            }
        }
        Draft::empty()
    }
}

impl PromptLookup {
    /// The confidence class of a draft copied after a `matched`-token agreement of the two
    /// contexts (the class is the length itself, 1..=16): the γ tuner learns an acceptance rate
    /// per class, and a copy after a long agreement is right far more often than after one token.
    pub fn confidence_class(matched: usize) -> u16 {
        matched.clamp(1, MAX_NGRAM_LIMIT) as u16
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lookup() -> PromptLookup {
        PromptLookup::new(PromptLookupConfig::default()).unwrap()
    }

    #[test]
    fn proposes_what_followed_the_latest_longest_match() {
        let mut drafter = lookup();
        // "5 6 7" occurred twice; the latest is followed by 9 9.
        let context = [1, 5, 6, 7, 8, 2, 5, 6, 7, 9, 9, 3, 6, 7];
        assert_eq!(drafter.draft(&context, 4).tokens, vec![9, 9, 3, 6]);
        // The trigram "3 6 7" is new, so the bigram "6 7" decided; with max 1 only the first token.
        assert_eq!(drafter.draft(&context, 1).tokens, vec![9]);
    }

    #[test]
    fn falls_back_to_shorter_ngrams_and_to_nothing() {
        let mut drafter = lookup();
        assert!(drafter.draft(&[1, 2, 3, 4], 3).is_empty());
        // Only the unigram 2 recurs.
        assert_eq!(drafter.draft(&[1, 2, 3, 4, 2], 3).tokens, vec![3, 4, 2]);
    }

    #[test]
    fn incremental_and_fresh_indexes_agree() {
        let text: Vec<u32> = (0..400u32).map(|i| (i * 7 + i / 13) % 23).collect();
        let mut incremental = lookup();
        for len in 1..text.len() {
            let mut fresh = lookup();
            assert_eq!(incremental.draft(&text[..len], 5), fresh.draft(&text[..len], 5), "at length {len}");
        }
    }

    #[test]
    fn a_new_context_resets_the_index() {
        let mut drafter = lookup();
        assert_eq!(drafter.draft(&[1, 2, 3, 1, 2], 2).tokens, vec![3, 1]);
        // Unrelated context: nothing from the old one may leak in.
        assert!(drafter.draft(&[9, 8, 7, 1, 2], 2).is_empty());
    }

    #[test]
    fn bad_sizes_are_refused() {
        assert!(PromptLookup::new(PromptLookupConfig { min_ngram: 0, max_ngram: 2 }).is_err());
        assert!(PromptLookup::new(PromptLookupConfig { min_ngram: 3, max_ngram: 2 }).is_err());
        assert!(PromptLookup::new(PromptLookupConfig { min_ngram: 1, max_ngram: 17 }).is_err());
    }
}
