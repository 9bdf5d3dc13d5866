//! From n-gram counts to prefix → best-continuation entries: dictspec.txt §3.1 and the six steps
//! of its Table 1 (extract n-grams with counts, tokenize them with the target's tokenizer, take
//! each token prefix, count its candidate continuations, keep the most probable one, store the
//! entry as ids), with the paper's two filters (only the most frequent n-grams; a minimum
//! continuation probability).
//!
//! 1. Keep the n-grams of the chosen orders seen at least `min_count` times, the `max_ngrams`
//!    most frequent ([`TokenizedNgrams::new`]; the paper's first filter. `min_count` is ours, the
//!    paper has no count floor; the cap's size is ours too, the paper gives none).
//! 2. Tokenize each in its running-text form ([`crate::running_text`]) (Table 1, step 2).
//! 3. For every split of every tokenized n-gram `t₁…t_k` into a prefix `t₁…t_i` and a
//!    continuation `t_{i+1}…t_k` (`1 ≤ i < k`), add the n-gram's count to that (prefix,
//!    continuation) pair (steps 3–4); prefixes keep their last `max_prefix` tokens and
//!    continuations their first `max_continuation` ([`ContinuationTable::build`]; 8 each by
//!    default, the context and γ of the paper's emulator, §4.5).
//! 4. For each prefix, the continuation with the largest count is its best one, with probability
//!    count / (sum over the prefix's continuations); keep it when that is at least `min_prob` (the
//!    paper's second filter, `p_min`), and keep the `max_entries` prefixes whose best
//!    continuation is the most frequent ([`ContinuationTable::select`]; steps 5–6).
//!
//! Every sort breaks ties on the token sequences, so equal counts always give the same bytes.

use anyspec_core::Progress;
use tokenizers::Tokenizer;

use crate::counts::NgramCounts;
use crate::error::Result;
use crate::params::BuildParams;
use crate::running_text::RunningTextEncoder;

/// The kept n-grams, tokenized, in one flat arena.
#[derive(Clone, Debug, Default)]
pub struct TokenizedNgrams {
    tokens: Vec<u32>,
    /// `(start, len)` in `tokens`, one per n-gram.
    spans: Vec<(u32, u32)>,
    counts: Vec<u64>,
    orders: Vec<u8>,
}

impl TokenizedNgrams {
    /// Selects and tokenizes the n-grams that `params` asks for (steps 1–2 of the module docs).
    ///
    /// # Errors
    /// [`crate::Error::Tokenizer`] when the tokenizer fails.
    pub fn new(
        counts: &NgramCounts,
        tokenizer: &Tokenizer,
        params: &BuildParams,
        threads: usize,
        progress: &dyn Progress,
    ) -> Result<Self> {
        params.validate()?;
        let mut kept: Vec<(u64, u8, &str)> = Vec::new();
        for &order in &params.orders {
            kept.extend(
                counts.iter_order(order).filter(|&(_, c)| c >= params.min_count).map(|(s, c)| (c, order as u8, s)),
            );
        }
        kept.sort_unstable_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)).then(a.2.cmp(b.2)));
        kept.truncate(params.max_ngrams);
        let surfaces: Vec<&str> = kept.iter().map(|k| k.2).collect();
        let encoder = RunningTextEncoder::new(tokenizer)?;
        let encoded = encoder.encode_all(&surfaces, threads, progress)?;
        let mut out = TokenizedNgrams::default();
        for ((count, order, _), ids) in kept.iter().zip(encoded) {
            out.push(&ids, *count, *order);
        }
        Ok(out)
    }

    /// Builds from already tokenized n-grams `(ids, count, order)` (tests and custom pipelines).
    pub fn from_tokenized<'a>(ngrams: impl IntoIterator<Item = (&'a [u32], u64, usize)>) -> Self {
        let mut out = TokenizedNgrams::default();
        for (ids, count, order) in ngrams {
            out.push(ids, count, order.min(u8::MAX as usize) as u8);
        }
        out
    }

    fn push(&mut self, ids: &[u32], count: u64, order: u8) {
        self.spans.push((self.tokens.len() as u32, ids.len() as u32));
        self.tokens.extend_from_slice(ids);
        self.counts.push(count);
        self.orders.push(order);
    }

    /// Number of n-grams.
    pub fn len(&self) -> usize {
        self.spans.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    /// Total tokens over all n-grams (for fertility-style statistics).
    pub fn total_tokens(&self) -> usize {
        self.tokens.len()
    }

    fn ids(&self, i: usize) -> &[u32] {
        let (start, len) = self.spans[i];
        &self.tokens[start as usize..(start + len) as usize]
    }
}

/// One prefix with its best continuation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TableEntry<'a> {
    /// The token prefix (the dictionary key).
    pub prefix: &'a [u32],
    /// Its most frequent continuation.
    pub continuation: &'a [u32],
    /// The count of that continuation after this prefix.
    pub count: u64,
    /// The count of all continuations after this prefix.
    pub total: u64,
}

impl TableEntry<'_> {
    /// The continuation's probability given the prefix.
    pub fn probability(&self) -> f64 {
        if self.total == 0 { 0.0 } else { self.count as f64 / self.total as f64 }
    }
}

/// Every prefix with its best continuation and counts, before `min_prob` and `max_entries`.
#[derive(Clone, Debug, Default)]
pub struct ContinuationTable {
    tokens: Vec<u32>,
    /// Per entry: prefix `(start, len)`, continuation `(start, len)`, count, total.
    entries: Vec<RawEntry>,
}

#[derive(Clone, Copy, Debug)]
struct RawEntry {
    prefix: (u32, u8),
    continuation: (u32, u8),
    count: u64,
    total: u64,
}

impl ContinuationTable {
    /// Aggregates continuation counts per prefix (step 3 of the module docs), using only the
    /// n-grams of `orders`.
    pub fn build(ngrams: &TokenizedNgrams, orders: &[usize], max_prefix: usize, max_continuation: usize) -> Self {
        let max_prefix = max_prefix.max(1);
        let max_continuation = max_continuation.max(1);
        // One item per (n-gram, split point).
        let mut items: Vec<(u32, u32)> = Vec::new();
        for i in 0..ngrams.len() {
            if !orders.contains(&usize::from(ngrams.orders[i])) {
                continue;
            }
            let len = ngrams.spans[i].1;
            items.extend((1..len).map(|split| (i as u32, split)));
        }
        let parts = |&(i, split): &(u32, u32)| {
            let ids = ngrams.ids(i as usize);
            let split = split as usize;
            (&ids[split.saturating_sub(max_prefix)..split], &ids[split..ids.len().min(split + max_continuation)])
        };
        items.sort_unstable_by(|a, b| parts(a).cmp(&parts(b)));

        let mut table = ContinuationTable::default();
        let mut start = 0;
        while start < items.len() {
            let (prefix, _) = parts(&items[start]);
            let mut end = start;
            let mut total = 0u64;
            let mut best: Option<(&[u32], u64)> = None;
            while end < items.len() && parts(&items[end]).0 == prefix {
                let continuation = parts(&items[end]).1;
                let mut count = 0u64;
                while end < items.len() && parts(&items[end]) == (prefix, continuation) {
                    count += ngrams.counts[items[end].0 as usize];
                    end += 1;
                }
                total += count;
                if best.is_none_or(|(_, c)| count > c) {
                    best = Some((continuation, count));
                }
            }
            if let Some((continuation, count)) = best {
                let prefix_at = table.tokens.len() as u32;
                table.tokens.extend_from_slice(prefix);
                let continuation_at = table.tokens.len() as u32;
                table.tokens.extend_from_slice(continuation);
                table.entries.push(RawEntry {
                    prefix: (prefix_at, prefix.len() as u8),
                    continuation: (continuation_at, continuation.len() as u8),
                    count,
                    total,
                });
            }
            start = end;
        }
        table
    }

    /// The same table with every continuation whose probability is at least `min_prob` extended
    /// by chaining ([`ContinuationRule::Chained`](crate::ContinuationRule::Chained)): while the
    /// continuation is shorter than `max_continuation`, find the longest suffix (at most
    /// `max_prefix` tokens) of prefix ⊕ continuation that is itself a prefix of the table whose
    /// best continuation has probability at least `min_prob` (the entry a drafter's
    /// longest-suffix lookup would find there), and append that continuation.
    /// An entry keeps its first hop's counts, so [`ContinuationTable::select`] filters and ranks
    /// exactly as without chaining; only the stored continuations grow.
    ///
    /// Why: §3.1 keeps, per prefix, the single most frequent exact continuation. Every shorter
    /// n-gram is counted at least as often as its extensions, so that continuation almost always
    /// ends at the end of the prefix's word (see `reports/dict.md`, "Why our drafts are shorter
    /// than the paper's"). Chaining continues into the next words only where each step is as
    /// confident as p_min demands of a first step — the lookup the drafter would make after the
    /// draft were accepted, made offline.
    pub fn chained(&self, min_prob: f64, max_prefix: usize, max_continuation: usize) -> Self {
        let max_prefix = max_prefix.max(1);
        let max_continuation = max_continuation.max(1);
        let index: std::collections::HashMap<&[u32], usize> =
            self.entries.iter().enumerate().map(|(i, raw)| (self.entry(raw).prefix, i)).collect();
        let mut out = ContinuationTable { tokens: Vec::with_capacity(self.tokens.len()), entries: Vec::new() };
        let mut sequence: Vec<u32> = Vec::new();
        for raw in &self.entries {
            let entry = self.entry(raw);
            sequence.clear();
            sequence.extend_from_slice(entry.prefix);
            sequence.extend_from_slice(entry.continuation);
            let mut length = entry.continuation.len().min(max_continuation);
            if entry.probability() >= min_prob {
                while length < max_continuation {
                    let end = entry.prefix.len() + length;
                    let next = (1..=max_prefix.min(end)).rev().find_map(|k| {
                        let next = self.entry(&self.entries[*index.get(&sequence[end - k..end])?]);
                        (next.probability() >= min_prob && !next.continuation.is_empty()).then_some(next)
                    });
                    let Some(next) = next else { break };
                    sequence.truncate(end);
                    let take = next.continuation.len().min(max_continuation - length);
                    sequence.extend_from_slice(&next.continuation[..take]);
                    length += take;
                }
            }
            let prefix_at = out.tokens.len() as u32;
            out.tokens.extend_from_slice(entry.prefix);
            let continuation_at = out.tokens.len() as u32;
            out.tokens.extend_from_slice(&sequence[entry.prefix.len()..entry.prefix.len() + length]);
            out.entries.push(RawEntry {
                prefix: (prefix_at, raw.prefix.1),
                continuation: (continuation_at, length as u8),
                count: raw.count,
                total: raw.total,
            });
        }
        out
    }

    /// Number of distinct prefixes.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the table is empty.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    fn entry(&self, raw: &RawEntry) -> TableEntry<'_> {
        let slice = |(start, len): (u32, u8)| &self.tokens[start as usize..start as usize + len as usize];
        TableEntry {
            prefix: slice(raw.prefix),
            continuation: slice(raw.continuation),
            count: raw.count,
            total: raw.total,
        }
    }

    /// Every entry, sorted by prefix.
    pub fn iter(&self) -> impl Iterator<Item = TableEntry<'_>> + '_ {
        self.entries.iter().map(|raw| self.entry(raw))
    }

    /// The entries whose best continuation has probability ≥ `min_prob`, at most `max_entries`
    /// of them (the most frequent continuations first, ties by larger prefix count, then by
    /// prefix), returned sorted by prefix — the order the FST needs (step 4 of the module docs).
    pub fn select(&self, min_prob: f64, max_entries: usize) -> Vec<TableEntry<'_>> {
        let mut kept: Vec<TableEntry<'_>> = self.iter().filter(|e| e.probability() >= min_prob).collect();
        if kept.len() > max_entries {
            kept.sort_unstable_by(|a, b| {
                b.count.cmp(&a.count).then(b.total.cmp(&a.total)).then(a.prefix.cmp(b.prefix))
            });
            kept.truncate(max_entries);
            kept.sort_unstable_by(|a, b| a.prefix.cmp(b.prefix));
        }
        kept
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aggregates_splits_and_picks_the_most_frequent_continuation() {
        // "1 2 3" ×5 and "1 2 4" ×3 and "1 5" ×1.
        let ngrams =
            TokenizedNgrams::from_tokenized([(&[1u32, 2, 3][..], 5, 2), (&[1, 2, 4][..], 3, 2), (&[1, 5][..], 1, 1)]);
        let table = ContinuationTable::build(&ngrams, &[1, 2], 8, 8);
        let entries: Vec<_> = table.iter().collect();
        assert_eq!(entries.len(), 2);
        assert_eq!(entries[0].prefix, &[1]);
        assert_eq!(entries[0].continuation, &[2, 3]);
        assert_eq!((entries[0].count, entries[0].total), (5, 9));
        assert_eq!(entries[1].prefix, &[1, 2]);
        assert_eq!(entries[1].continuation, &[3]);
        assert_eq!((entries[1].count, entries[1].total), (5, 8));
        // min_prob 0.6 keeps only [1, 2] (5/8 = 0.625; 5/9 ≈ 0.556).
        let kept = table.select(0.6, 10);
        assert_eq!(kept.len(), 1);
        assert_eq!(kept[0].prefix, &[1, 2]);
        // Order 1 alone: only "1 5".
        let unigrams = ContinuationTable::build(&ngrams, &[1], 8, 8);
        assert_eq!(unigrams.iter().map(|e| e.continuation.to_vec()).collect::<Vec<_>>(), vec![vec![5]]);
    }

    #[test]
    fn truncates_prefixes_from_the_left_and_continuations_from_the_right() {
        let ids: Vec<u32> = (1..=12).collect();
        let ngrams = TokenizedNgrams::from_tokenized([(&ids[..], 2, 1)]);
        let table = ContinuationTable::build(&ngrams, &[1], 3, 2);
        let at_ten = table.iter().find(|e| e.prefix == [8, 9, 10]).unwrap();
        assert_eq!(at_ten.continuation, &[11, 12]);
        let at_two = table.iter().find(|e| e.prefix == [1, 2]).unwrap();
        assert_eq!(at_two.continuation, &[3, 4]);
        assert!(table.iter().all(|e| e.prefix.len() <= 3 && e.continuation.len() <= 2));
    }

    /// Word A = tokens 1 2, word B = 3 4, word C = 7 8; the bigram "A B" is seen 9 times.
    fn two_words() -> TokenizedNgrams {
        TokenizedNgrams::from_tokenized([(&[1u32, 2][..], 10, 1), (&[3, 4][..], 10, 1), (&[1, 2, 3, 4][..], 9, 2)])
    }

    fn continuation_of(table: &ContinuationTable, prefix: &[u32]) -> Vec<u32> {
        table.iter().find(|e| e.prefix == prefix).map(|e| e.continuation.to_vec()).unwrap_or_default()
    }

    #[test]
    fn chaining_continues_past_the_word_end_where_each_step_is_confident() {
        let table = ContinuationTable::build(&two_words(), &[1, 2], 8, 8);
        // §3.1's rule: after [1] the rest of word A alone (10 of 19).
        assert_eq!(continuation_of(&table, &[1]), vec![2]);
        // Chained at p_min 0.5: [1 2] → [3 4] has probability 9/9, so word B follows.
        let chained = table.chained(0.5, 8, 8);
        assert_eq!(continuation_of(&chained, &[1]), vec![2, 3, 4]);
        // The first hop's counts are kept, so selection is unchanged.
        let first = chained.iter().find(|e| e.prefix == [1]).unwrap();
        assert_eq!((first.count, first.total), (10, 19));
        assert_eq!(chained.select(0.5, 10).len(), table.select(0.5, 10).len());
        // Capped at max_continuation.
        assert_eq!(continuation_of(&table.chained(0.5, 8, 2), &[1]), vec![2, 3]);
        // An entry below p_min is not extended (10/19 < 0.6).
        assert_eq!(continuation_of(&table.chained(0.6, 8, 8), &[1]), vec![2]);
    }

    #[test]
    fn chaining_stops_at_an_ambiguous_step() {
        // [1] → [2] is confident (20 of 28), but after word A, words B and C are equally likely:
        // no further hop reaches p_min 0.6.
        let mut ngrams: Vec<(&[u32], u64, usize)> =
            vec![(&[1, 2], 20, 1), (&[3, 4], 10, 1), (&[1, 2, 3, 4], 4, 2), (&[1, 2, 7, 8], 4, 2)];
        let table = ContinuationTable::build(&TokenizedNgrams::from_tokenized(ngrams.clone()), &[1, 2], 8, 8);
        assert_eq!(continuation_of(&table.chained(0.6, 8, 8), &[1]), vec![2]);
        // One more "A B" makes the step after A confident enough (5 of 9 ≥ p_min 0.55).
        ngrams[2].1 = 5;
        let table = ContinuationTable::build(&TokenizedNgrams::from_tokenized(ngrams), &[1, 2], 8, 8);
        assert_eq!(continuation_of(&table.chained(0.55, 8, 8), &[1]), vec![2, 3, 4]);
    }

    #[test]
    fn max_entries_keeps_the_most_frequent() {
        let ngrams =
            TokenizedNgrams::from_tokenized([(&[1u32, 2][..], 1, 1), (&[3, 4][..], 7, 1), (&[5, 6][..], 4, 1)]);
        let table = ContinuationTable::build(&ngrams, &[1], 8, 8);
        let kept: Vec<_> = table.select(0.0, 2).iter().map(|e| e.prefix[0]).collect();
        assert_eq!(kept, vec![3, 5]);
    }
}
