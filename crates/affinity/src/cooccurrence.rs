//! Windowed co-occurrence counts of target tokens, sparse and with a memory bound.
//!
//! Two positions `a < b` of one tokenized line co-occur when `b − a ≤ W` (the window). For two
//! different tokens `i ≠ j`, `c_ij = c_ji` is the number of co-occurring position pairs holding
//! `i` and `j` (in either order). Pairs of equal tokens are not counted: RDK's self-affinity is
//! set when the scores are made (see [`crate::build`]), not estimated from repetitions.
//!
//! Counts live in one hash map keyed by the unordered pair, so memory grows with the number of
//! distinct pairs seen, never with `N²`. When the map would exceed its budget, the rarest pairs
//! are dropped (lossy counting: every pair counted at most `floor` times so far is removed and the
//! floor rises), and the floor is recorded so that the artifact says how approximate it is.

use std::path::PathBuf;

use anyspec_core::Progress;
use anyspec_dict_builder::CorpusOptions;
use anyspec_vocab_map::Vocabulary;
use rustc_hash::FxHashMap;

use crate::error::{Error, Result};
use crate::tokenized::{fold_tokenized, resolve_threads};

/// Sparse windowed co-occurrence counts over a vocabulary of `N` target tokens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CooccurrenceCounts {
    vocab_size: usize,
    window: usize,
    /// Unordered pair `(min << 32) | max` → count.
    pairs: FxHashMap<u64, u64>,
    /// Occurrences of each token.
    unigrams: Vec<u64>,
    /// Tokens counted.
    tokens: u64,
    /// Largest count at which pairs were ever dropped to stay within the budget (0: exact).
    prune_floor: u64,
    /// Distinct pairs above which the rarest are dropped.
    max_pairs: usize,
}

fn key(i: u32, j: u32) -> u64 {
    let (lo, hi) = if i < j { (i, j) } else { (j, i) };
    (u64::from(lo) << 32) | u64::from(hi)
}

impl CooccurrenceCounts {
    /// Empty counts for a vocabulary of `vocab_size` tokens, window `window`, keeping at most
    /// `max_pairs` distinct pairs in memory.
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] for a window of 0 or a budget below 1024 pairs.
    pub fn new(vocab_size: usize, window: usize, max_pairs: usize) -> Result<Self> {
        if window == 0 {
            return Err(Error::invalid("window", "at least 1 (the largest distance between co-occurring tokens)", 0));
        }
        if max_pairs < 1024 {
            return Err(Error::invalid("max_pairs", "at least 1024", max_pairs));
        }
        Ok(CooccurrenceCounts {
            vocab_size,
            window,
            pairs: FxHashMap::default(),
            unigrams: vec![0; vocab_size],
            tokens: 0,
            prune_floor: 0,
            max_pairs,
        })
    }

    /// Counts the co-occurrences within one sequence of token ids (one line of text).
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] for an id outside the vocabulary.
    pub fn count_sequence(&mut self, ids: &[u32]) -> Result<()> {
        if let Some(&bad) = ids.iter().find(|&&t| t as usize >= self.vocab_size) {
            return Err(Error::invalid(
                "token id",
                "below the vocabulary size (the tokenizer and the vocabulary disagree)",
                format!("{bad} (vocabulary of {})", self.vocab_size),
            ));
        }
        for (a, &i) in ids.iter().enumerate() {
            self.unigrams[i as usize] += 1;
            for &j in ids.iter().skip(a + 1).take(self.window) {
                if i != j {
                    *self.pairs.entry(key(i, j)).or_insert(0) += 1;
                }
            }
            if self.pairs.len() > self.max_pairs {
                self.prune();
            }
        }
        self.tokens += ids.len() as u64;
        Ok(())
    }

    /// Drops the rarest pairs until at most half the budget is used.
    fn prune(&mut self) {
        while self.pairs.len() > self.max_pairs / 2 {
            self.prune_floor += 1;
            let floor = self.prune_floor;
            self.pairs.retain(|_, c| *c > floor);
        }
    }

    /// Adds `other`'s counts (counted with the same vocabulary and window) to these.
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] when the vocabularies or windows differ.
    pub fn merge(&mut self, other: CooccurrenceCounts) -> Result<()> {
        if other.vocab_size != self.vocab_size || other.window != self.window {
            return Err(Error::invalid(
                "merged co-occurrence counts",
                "counted with the same vocabulary size and window",
                format!(
                    "vocabulary {} window {} and vocabulary {} window {}",
                    self.vocab_size, self.window, other.vocab_size, other.window
                ),
            ));
        }
        let (mut big, small) = if self.pairs.len() >= other.pairs.len() {
            (std::mem::take(&mut self.pairs), other.pairs)
        } else {
            (other.pairs, std::mem::take(&mut self.pairs))
        };
        for (k, c) in small {
            *big.entry(k).or_insert(0) += c;
        }
        self.pairs = big;
        for (mine, theirs) in self.unigrams.iter_mut().zip(other.unigrams) {
            *mine += theirs;
        }
        self.tokens += other.tokens;
        self.prune_floor = self.prune_floor.max(other.prune_floor);
        if self.pairs.len() > self.max_pairs {
            self.prune();
        }
        Ok(())
    }

    /// Streams the corpus, tokenizes it with the vocabulary's tokenizer and counts co-occurrences on `threads`
    /// threads (0 = every core). Each thread keeps `max_pairs / threads` pairs at most, and the
    /// merged counts `max_pairs`.
    ///
    /// # Errors
    /// Corpus and tokenizer errors, and [`Error::InvalidParameter`] for a bad window or budget.
    pub fn count_files(
        paths: &[PathBuf],
        options: &CorpusOptions,
        vocabulary: &Vocabulary,
        window: usize,
        max_pairs: usize,
        threads: usize,
        progress: &dyn Progress,
    ) -> Result<CooccurrenceCounts> {
        let vocab_size = vocabulary.len();
        let mut total = CooccurrenceCounts::new(vocab_size, window, max_pairs)?;
        let per_thread = (max_pairs / resolve_threads(threads)).max(1024);
        let parts = fold_tokenized(
            paths,
            options,
            vocabulary.tokenizer(),
            threads,
            progress,
            || CooccurrenceCounts::new(vocab_size, window, per_thread),
            |counts, ids| match counts {
                Ok(counts) => counts.count_sequence(ids),
                Err(_) => Ok(()),
            },
        )?;
        for part in parts {
            total.merge(part?)?;
        }
        Ok(total)
    }

    /// `c_ij`, the co-occurrence count of two different tokens (0 for `i == j`).
    pub fn get(&self, i: u32, j: u32) -> u64 {
        if i == j { 0 } else { self.pairs.get(&key(i, j)).copied().unwrap_or(0) }
    }

    /// How often token `i` occurred.
    pub fn unigram(&self, i: u32) -> u64 {
        self.unigrams.get(i as usize).copied().unwrap_or(0)
    }

    /// Tokens counted.
    pub fn tokens(&self) -> u64 {
        self.tokens
    }

    /// Distinct unordered pairs held.
    pub fn distinct_pairs(&self) -> usize {
        self.pairs.len()
    }

    /// The vocabulary size `N`.
    pub fn vocab_size(&self) -> usize {
        self.vocab_size
    }

    /// The window `W`.
    pub fn window(&self) -> usize {
        self.window
    }

    /// 0 when the counts are exact; otherwise pairs counted at most this many times may have been
    /// dropped (and counts of kept pairs may be short by as much).
    pub fn prune_floor(&self) -> u64 {
        self.prune_floor
    }

    /// Every stored pair `(i, j, c_ij)` with `i < j`, in no particular order.
    pub fn pairs(&self) -> impl Iterator<Item = (u32, u32, u64)> + '_ {
        self.pairs.iter().map(|(&k, &c)| ((k >> 32) as u32, k as u32, c))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_counts_match_hand_counts() {
        // Sequence a b a c with window 2: pairs (0,1) a-b, (0,2) a-a (skipped), (1,2) b-a,
        // (1,3) b-c, (2,3) a-c.
        let mut c = CooccurrenceCounts::new(4, 2, 1 << 20).unwrap();
        c.count_sequence(&[0, 1, 0, 2]).unwrap();
        assert_eq!(c.get(0, 1), 2);
        assert_eq!(c.get(1, 0), 2);
        assert_eq!(c.get(1, 2), 1);
        assert_eq!(c.get(0, 2), 1);
        assert_eq!(c.get(0, 0), 0);
        assert_eq!(c.get(0, 3), 0);
        assert_eq!((c.unigram(0), c.tokens(), c.distinct_pairs()), (2, 4, 3));
        assert!(c.count_sequence(&[4]).is_err());
    }

    #[test]
    fn pruning_drops_rare_pairs_and_records_the_floor() {
        let mut c = CooccurrenceCounts::new(5000, 1, 1024).unwrap();
        // One frequent pair and many singletons.
        for _ in 0..10 {
            c.count_sequence(&[0, 1]).unwrap();
        }
        let singletons: Vec<u32> = (2..4000).collect();
        c.count_sequence(&singletons).unwrap();
        assert!(c.distinct_pairs() <= 1024);
        assert!(c.prune_floor() >= 1);
        assert_eq!(c.get(0, 1), 10);
    }
}
