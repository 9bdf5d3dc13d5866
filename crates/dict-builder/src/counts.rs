//! Counting word n-grams over a corpus, on every core, and merging partial counts.
//!
//! Counts do not depend on any tokenizer: one set of counts (or of count shards, see
//! [`crate::shard`]) serves dictionaries for every tokenizer.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Mutex, mpsc};

use anyspec_core::Progress;
use rustc_hash::FxBuildHasher;

use crate::corpus::{CorpusOptions, for_each_chunk};
use crate::error::{Error, Result};
use crate::words::NgramSegmenter;

/// Highest n-gram order that can be counted (longer word n-grams rarely fit in 8 tokens).
pub const MAX_ORDER: usize = 8;

type CountMap = HashMap<Box<str>, u64, FxBuildHasher>;

/// Counts of word n-grams by order, keyed by their running-text surface (see [`crate::words`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NgramCounts {
    /// `by_order[n − 1]` holds the n-grams of order n.
    by_order: Vec<CountMap>,
    /// Bytes of text counted.
    text_bytes: u64,
}

impl NgramCounts {
    /// Empty counts for orders `1..=max_order`.
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] unless `1 ≤ max_order ≤ MAX_ORDER`.
    pub fn new(max_order: usize) -> Result<Self> {
        if !(1..=MAX_ORDER).contains(&max_order) {
            return Err(Error::invalid("max_order", "in 1..=8 (the highest word n-gram order counted)", max_order));
        }
        Ok(NgramCounts { by_order: vec![CountMap::default(); max_order], text_bytes: 0 })
    }

    /// The highest order counted.
    pub fn max_order(&self) -> usize {
        self.by_order.len()
    }

    /// Bytes of text counted (after decompression and JSONL extraction).
    pub fn text_bytes(&self) -> u64 {
        self.text_bytes
    }

    /// Distinct n-grams of this order (0 for an order that was not counted).
    pub fn distinct(&self, order: usize) -> usize {
        order.checked_sub(1).and_then(|i| self.by_order.get(i)).map_or(0, HashMap::len)
    }

    /// How often the n-gram with this surface occurred (0 when never, or for an order not counted).
    pub fn get(&self, order: usize, surface: &str) -> u64 {
        order.checked_sub(1).and_then(|i| self.by_order.get(i)).and_then(|m| m.get(surface)).copied().unwrap_or(0)
    }

    /// The n-grams of one order with their counts, in no particular order.
    pub fn iter_order(&self, order: usize) -> impl Iterator<Item = (&str, u64)> + '_ {
        order.checked_sub(1).and_then(|i| self.by_order.get(i)).into_iter().flatten().map(|(k, &v)| (&**k, v))
    }

    /// Adds one n-gram occurrence count directly (used when reading shards).
    pub(crate) fn add(&mut self, order: usize, surface: &str, count: u64) {
        let map = &mut self.by_order[order - 1];
        match map.get_mut(surface) {
            Some(c) => *c += count,
            None => {
                map.insert(surface.into(), count);
            }
        }
    }

    pub(crate) fn set_text_bytes(&mut self, bytes: u64) {
        self.text_bytes = bytes;
    }

    /// Counts every n-gram of `text`.
    pub fn count_text(&mut self, segmenter: &mut NgramSegmenter, text: &str) {
        let max_order = self.max_order();
        let by_order = &mut self.by_order;
        segmenter.for_each_ngram(text, max_order, |order, surface| {
            let map = &mut by_order[order - 1];
            match map.get_mut(surface) {
                Some(c) => *c += 1,
                None => {
                    map.insert(surface.into(), 1);
                }
            }
        });
        self.text_bytes += text.len() as u64;
    }

    /// Adds `other`'s counts to these.
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] when the two were counted up to different orders.
    pub fn merge(&mut self, other: NgramCounts) -> Result<()> {
        if other.max_order() != self.max_order() {
            return Err(Error::invalid(
                "max_order of merged counts",
                "the same for every part",
                format!("{} and {}", self.max_order(), other.max_order()),
            ));
        }
        for (mine, theirs) in self.by_order.iter_mut().zip(other.by_order) {
            // Walk the smaller map into the larger one.
            let (mut big, small) = if mine.len() >= theirs.len() {
                (std::mem::take(mine), theirs)
            } else {
                (theirs, std::mem::take(mine))
            };
            // Saturating: counts read from shard files can be anything up to u64::MAX.
            for (surface, count) in small {
                let total = big.entry(surface).or_insert(0);
                *total = total.saturating_add(count);
            }
            *mine = big;
        }
        self.text_bytes = self.text_bytes.saturating_add(other.text_bytes);
        Ok(())
    }

    /// Streams the corpus files and counts n-grams of orders `1..=max_order` on `threads` threads
    /// (0 = every available core) while the next chunk is read.
    ///
    /// # Errors
    /// Everything [`for_each_chunk`] reports, and [`Error::InvalidParameter`] for a bad order.
    pub fn count_files(
        paths: &[PathBuf],
        options: &CorpusOptions,
        max_order: usize,
        threads: usize,
        progress: &dyn Progress,
    ) -> Result<NgramCounts> {
        let mut total = NgramCounts::new(max_order)?;
        let threads = if threads == 0 { std::thread::available_parallelism().map_or(1, |n| n.get()) } else { threads };
        let (sender, receiver) = mpsc::sync_channel::<String>(threads * 2);
        let receiver = Mutex::new(receiver);
        let parts = std::thread::scope(|scope| {
            let workers: Vec<_> = (0..threads)
                .map(|_| {
                    let receiver = &receiver;
                    scope.spawn(move || {
                        let mut counts = NgramCounts { by_order: vec![CountMap::default(); max_order], text_bytes: 0 };
                        let mut segmenter = NgramSegmenter::new();
                        loop {
                            // The lock is held only while waiting for the next chunk.
                            let chunk = match receiver.lock() {
                                Ok(guard) => guard.recv(),
                                Err(_) => break,
                            };
                            match chunk {
                                Ok(text) => counts.count_text(&mut segmenter, &text),
                                Err(_) => break,
                            }
                        }
                        counts
                    })
                })
                .collect();
            let read = for_each_chunk(paths, options, progress, |chunk| {
                // A send fails only if every worker is gone, which cannot happen before the
                // channel is closed; keep reading so the error path stays simple.
                let _ = sender.send(chunk);
                Ok(())
            });
            drop(sender);
            let parts: Vec<NgramCounts> = workers.into_iter().filter_map(|w| w.join().ok()).collect();
            read.map(|()| parts)
        })?;
        for part in parts {
            total.merge(part)?;
        }
        Ok(total)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_orders_separately_and_merges_by_addition() {
        let mut seg = NgramSegmenter::new();
        let mut a = NgramCounts::new(2).unwrap();
        a.count_text(&mut seg, "x y x y\n");
        assert_eq!(a.get(1, "x"), 1);
        assert_eq!(a.get(1, " x"), 1);
        assert_eq!(a.get(1, " y"), 2);
        assert_eq!(a.get(2, " y x"), 1);
        assert_eq!(a.get(2, " x y"), 1);
        assert_eq!(a.get(3, " x y x"), 0);
        let mut b = NgramCounts::new(2).unwrap();
        b.count_text(&mut seg, "q x y\n");
        a.merge(b).unwrap();
        assert_eq!(a.get(2, " x y"), 2);
        assert_eq!(a.get(1, "q"), 1);
        assert_eq!(a.text_bytes(), 14);
        assert!(a.merge(NgramCounts::new(3).unwrap()).is_err());
    }

    #[test]
    fn order_out_of_range_is_refused() {
        assert!(NgramCounts::new(0).is_err());
        assert!(NgramCounts::new(MAX_ORDER + 1).unwrap_err().to_string().contains("max_order"));
    }
}
