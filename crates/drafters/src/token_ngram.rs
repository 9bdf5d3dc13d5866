//! A token-level n-gram model of text the target wrote before, drafting by greedy chaining.
//!
//! DictSpec's dictionary ([`crate::DictionaryDrafter`]) keys on *word* n-grams of at most three
//! words, and a key's stored continuation almost always just finishes the key's last word
//! (dictspec.txt §3.1), so on open-ended chat its drafts are one or two tokens long. This model
//! counts *token* n-grams of the target's own earlier answers instead — the static n-gram cache
//! of llama.cpp's `llama-lookup` and the corpus half of SuffixDecoding do the same — and drafts
//! by chaining: the longest context suffix seen in the corpus (at most [`TokenNgramConfig::max_order`]
//! tokens) proposes its most frequent next token, which joins the context for the next lookup,
//! while the proposal's share of its suffix's continuations stays at least
//! [`TokenNgramConfig::min_prob`].
//!
//! A draft is deterministic ([`anyspec_core::Draft::deterministic`]), so exact-match
//! verification keeps any temperature lossless, whatever the model proposes. Its confidence
//! class says how long a suffix matched and how sure the first token was
//! ([`TokenNgramDrafter::confidence_class`]), so the γ tuner learns each one's acceptance.
//!
//! N-grams are keyed by a 64-bit hash of their tokens, not the tokens: two n-grams that collide
//! share a prediction, which can only make a draft wrong — and verification rejects a wrong
//! draft — never make the output differ.

use std::collections::HashMap;
use std::sync::Arc;

use anyspec_core::Draft;
use rustc_hash::FxBuildHasher;

use crate::error::{Error, Result};
use crate::prompt_lookup::hash_ngram;

/// The longest n-gram order a model may count.
pub const MAX_ORDER_LIMIT: usize = 8;

/// Confidence classes of this drafter start here, apart from prompt lookup's (1..=16) and the
/// dictionary's (256..), so that a hybrid's sources keep separate acceptance estimates.
const CLASS_BASE: u16 = 512;
/// Buckets of the first token's probability in a confidence class.
const PROB_BUCKETS: usize = 4;

/// How the model is counted and how far a draft chains.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TokenNgramConfig {
    /// Longest context suffix looked up, in tokens (1..=[`MAX_ORDER_LIMIT`]).
    pub max_order: usize,
    /// A suffix seen fewer times than this in the corpus proposes nothing (a shorter one is
    /// tried instead).
    pub min_count: u32,
    /// A draft stops at the first token whose share of its suffix's continuations is below this.
    pub min_prob: f32,
}

impl Default for TokenNgramConfig {
    /// Orders up to 4, every suffix seen once, no probability floor: replaying the SmolLM2 demo's
    /// greedy outputs against the 172k tokens of `assets/demo/target-outputs.txt.gz` (`cargo
    /// xtask drafting-ceiling --ngram-corpus`, the demo's γ tuner under modelled costs), the
    /// hybrid with prompt lookup made 1.65 tokens per step (1.40× modelled); orders up to 3, 5
    /// or 8 gave 1.63–1.65, `min_count` 2 gave 1.61 and `min_prob` 0.2 gave 1.64: the tuner's
    /// per-class cut already drops the unsure drafts that a floor would.
    fn default() -> Self {
        TokenNgramConfig { max_order: 4, min_count: 1, min_prob: 0.0 }
    }
}

/// The most frequent continuation of one n-gram.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Next {
    token: u32,
    count: u32,
    total: u32,
}

/// What the model predicts after a context.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Prediction {
    /// The proposed next token.
    pub token: u32,
    /// Length of the context suffix it was found under.
    pub order: usize,
    /// Times the token followed that suffix in the corpus.
    pub count: u32,
    /// Times the suffix was followed by anything.
    pub total: u32,
}

impl Prediction {
    /// The token's share of its suffix's continuations.
    pub fn probability(&self) -> f32 {
        self.count as f32 / self.total.max(1) as f32
    }
}

/// Token n-gram counts of a corpus: for each order 1..=`max_order`, each n-gram's most frequent
/// next token.
#[derive(Clone, Debug)]
pub struct TokenNgramModel {
    config: TokenNgramConfig,
    /// Index `n − 1`: n-gram hash → its most frequent continuation.
    orders: Vec<HashMap<u64, Next, FxBuildHasher>>,
    tokens: usize,
}

impl TokenNgramModel {
    /// Counts every n-gram of orders 1..=`config.max_order` in `sequences` (each one a run of
    /// tokens; no n-gram spans two).
    pub fn build<'a>(sequences: impl IntoIterator<Item = &'a [u32]>, config: TokenNgramConfig) -> Result<Self> {
        if config.max_order == 0 || config.max_order > MAX_ORDER_LIMIT {
            return Err(invalid("max_order", "between 1 and 8", config.max_order.to_string()));
        }
        if config.min_count == 0 {
            return Err(invalid("min_count", "≥ 1", config.min_count.to_string()));
        }
        if !(0.0..=1.0).contains(&config.min_prob) {
            return Err(invalid("min_prob", "between 0 and 1", config.min_prob.to_string()));
        }
        let sequences: Vec<&[u32]> = sequences.into_iter().collect();
        let tokens = sequences.iter().map(|s| s.len()).sum();
        // One order at a time: the (n-gram, next token) counts of a single order are what is
        // held at once (tens of MB for a million tokens), not those of every order.
        let orders = (1..=config.max_order)
            .map(|n| {
                let mut counts: HashMap<(u64, u32), u32, FxBuildHasher> = HashMap::default();
                for sequence in &sequences {
                    for end in n..sequence.len() {
                        *counts.entry((hash_ngram(&sequence[end - n..end]), sequence[end])).or_insert(0) += 1;
                    }
                }
                let mut best: HashMap<u64, Next, FxBuildHasher> = HashMap::default();
                for ((key, token), count) in counts {
                    let entry = best.entry(key).or_insert(Next { token, count: 0, total: 0 });
                    entry.total += count;
                    // Ties go to the smaller token id, so the model does not depend on the
                    // map's iteration order.
                    if count > entry.count || (count == entry.count && token < entry.token) {
                        entry.token = token;
                        entry.count = count;
                    }
                }
                best
            })
            .collect();
        Ok(TokenNgramModel { config, orders, tokens })
    }

    /// Counts the text of corpus files (plain text or JSONL, gzip accepted: read as
    /// `anyspec dict build` reads its `--corpus`) with [`TokenNgramModel::from_text`].
    pub fn from_corpus(
        paths: &[std::path::PathBuf],
        tokenizer: &anyspec_models::TextTokenizer,
        config: TokenNgramConfig,
    ) -> Result<Self> {
        let mut text = String::new();
        anyspec_dict_builder::for_each_chunk(
            paths,
            &anyspec_dict_builder::CorpusOptions::default(),
            &anyspec_core::NoProgress,
            |chunk| {
                text.push_str(&chunk);
                Ok(())
            },
        )?;
        Self::from_text(&text, tokenizer, config)
    }

    /// Counts `text` tokenized by `tokenizer`, paragraph by paragraph (blank-line separated;
    /// the target's answers in `assets/demo/target-outputs.txt.gz` are whole paragraphs or
    /// runs of them), without special tokens.
    pub fn from_text(text: &str, tokenizer: &anyspec_models::TextTokenizer, config: TokenNgramConfig) -> Result<Self> {
        let paragraphs: Vec<&str> = text.split("\n\n").map(str::trim).filter(|p| !p.is_empty()).collect();
        let encoded = tokenizer
            .inner()
            .encode_batch(paragraphs, false)
            .map_err(|e| anyspec_models::Error::Tokenization { message: e.to_string() })?;
        Self::build(encoded.iter().map(|e| e.get_ids()), config)
    }

    /// The configuration it was built with.
    pub fn config(&self) -> TokenNgramConfig {
        self.config
    }

    /// Tokens counted.
    pub fn tokens(&self) -> usize {
        self.tokens
    }

    /// Distinct n-grams kept, over all orders.
    pub fn len(&self) -> usize {
        self.orders.iter().map(HashMap::len).sum()
    }

    /// Whether nothing was counted.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The prediction after `context`: under its longest suffix (at most `max_order` tokens)
    /// seen at least `min_count` times, or `None` when no suffix was.
    pub fn predict(&self, context: &[u32]) -> Option<Prediction> {
        let longest = self.config.max_order.min(context.len());
        (1..=longest).rev().find_map(|n| {
            let next = self.orders[n - 1].get(&hash_ngram(&context[context.len() - n..]))?;
            (next.total >= self.config.min_count).then_some(Prediction {
                token: next.token,
                order: n,
                count: next.count,
                total: next.total,
            })
        })
    }
}

fn invalid(name: &'static str, expected: &'static str, value: String) -> Error {
    Error::InvalidParameter(anyspec_core::InvalidParameter { name, expected, value })
}

/// Drafts by chaining a [`TokenNgramModel`]'s predictions.
#[derive(Clone, Debug)]
pub struct TokenNgramDrafter {
    model: Arc<TokenNgramModel>,
    window: Vec<u32>,
}

impl TokenNgramDrafter {
    /// A drafter over a model (shared, so many drafters can use one).
    pub fn new(model: Arc<TokenNgramModel>) -> Self {
        TokenNgramDrafter { model, window: Vec::with_capacity(2 * MAX_ORDER_LIMIT + 16) }
    }

    /// The model drafted from.
    pub fn model(&self) -> &TokenNgramModel {
        &self.model
    }

    /// The confidence class of a draft whose first token was found under an `order`-token
    /// suffix with probability `probability`: 512 + 4 · order + the probability's quarter.
    pub fn confidence_class(order: usize, probability: f32) -> u16 {
        let bucket = ((probability * PROB_BUCKETS as f32) as usize).min(PROB_BUCKETS - 1);
        CLASS_BASE + (order.min(MAX_ORDER_LIMIT) * PROB_BUCKETS + bucket) as u16
    }

    /// The draft for `context`, at most `max_tokens` long, without the trait's ceremony,
    /// labelled with [`TokenNgramDrafter::confidence_class`].
    pub fn draft(&mut self, context: &[u32], max_tokens: usize) -> Draft {
        let order = self.model.config.max_order;
        self.window.clear();
        self.window.extend_from_slice(&context[context.len().saturating_sub(order)..]);
        let mut tokens = Vec::new();
        let mut class = None;
        while tokens.len() < max_tokens {
            let Some(prediction) = self.model.predict(&self.window) else { break };
            if prediction.probability() < self.model.config.min_prob {
                break;
            }
            class.get_or_insert_with(|| Self::confidence_class(prediction.order, prediction.probability()));
            tokens.push(prediction.token);
            self.window.push(prediction.token);
            if self.window.len() > order {
                self.window.remove(0);
            }
        }
        match class {
            Some(class) => Draft::deterministic(tokens).with_confidence_class(class),
            None => Draft::empty(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model(sequences: &[&[u32]], config: TokenNgramConfig) -> TokenNgramModel {
        TokenNgramModel::build(sequences.iter().copied(), config).unwrap()
    }

    #[test]
    fn the_longest_seen_suffix_decides() {
        // After 1 comes 2 twice and 3 once; after (5, 1) only 3.
        let m = model(&[&[1, 2, 9, 1, 2, 9, 5, 1, 3]], TokenNgramConfig::default());
        let short = m.predict(&[7, 1]).unwrap();
        assert_eq!((short.token, short.order, short.count, short.total), (2, 1, 2, 3));
        let long = m.predict(&[5, 1]).unwrap();
        assert_eq!((long.token, long.order, long.count, long.total), (3, 2, 1, 1));
        assert_eq!(m.predict(&[42]), None);
    }

    #[test]
    fn min_count_backs_off_to_a_shorter_suffix() {
        let config = TokenNgramConfig { min_count: 2, ..TokenNgramConfig::default() };
        let m = model(&[&[1, 2, 9, 1, 2, 9, 5, 1, 3]], config);
        // (5, 1) was seen once: the suffix (1) speaks instead.
        assert_eq!(m.predict(&[5, 1]).map(|p| (p.token, p.order)), Some((2, 1)));
    }

    #[test]
    fn no_ngram_spans_two_sequences() {
        let m = model(&[&[1, 2], &[3, 4]], TokenNgramConfig::default());
        assert_eq!(m.predict(&[2]), None, "2 ends a sequence: nothing follows it");
        assert_eq!(m.predict(&[3]).map(|p| p.token), Some(4));
    }

    #[test]
    fn drafts_chain_predictions_and_stop_at_min_prob() {
        let corpus: &[u32] = &[10, 11, 12, 13, 14, 10, 11, 12, 20, 21];
        let mut free = TokenNgramDrafter::new(Arc::new(model(&[corpus], TokenNgramConfig::default())));
        // After (10, 11, 12): 13 and 20 tie once each, the smaller id wins, then the chain runs on.
        let draft = free.draft(&[10, 11, 12], 4);
        assert_eq!(draft.tokens, vec![13, 14, 10, 11]);
        assert_eq!(free.draft(&[10, 11, 12], 2).tokens, vec![13, 14], "max_tokens caps the chain");
        // With min_prob 0.6, the 50/50 split after 12 stops the draft before it starts.
        let strict = TokenNgramConfig { min_prob: 0.6, ..TokenNgramConfig::default() };
        let mut strict = TokenNgramDrafter::new(Arc::new(model(&[corpus], strict)));
        assert!(strict.draft(&[10, 11, 12], 4).is_empty());
        assert_eq!(
            strict.draft(&[13], 3).tokens,
            vec![14, 10, 11],
            "sure steps chain; 11 → 12 is sure too, cut by max"
        );
        assert!(free.draft(&[99], 4).is_empty(), "an unseen token drafts nothing");
    }

    #[test]
    fn the_class_separates_orders_and_certainty() {
        let sure = TokenNgramDrafter::confidence_class(3, 1.0);
        let unsure = TokenNgramDrafter::confidence_class(3, 0.2);
        let short = TokenNgramDrafter::confidence_class(1, 1.0);
        assert!(sure != unsure && sure != short && unsure != short);
        assert!(sure >= CLASS_BASE && TokenNgramDrafter::confidence_class(MAX_ORDER_LIMIT, 1.0) < CLASS_BASE + 64);
    }

    #[test]
    fn bad_parameters_are_refused() {
        for config in [
            TokenNgramConfig { max_order: 0, ..TokenNgramConfig::default() },
            TokenNgramConfig { max_order: 9, ..TokenNgramConfig::default() },
            TokenNgramConfig { min_count: 0, ..TokenNgramConfig::default() },
            TokenNgramConfig { min_prob: 1.5, ..TokenNgramConfig::default() },
        ] {
            let err = TokenNgramModel::build([&[1u32, 2][..]], config).unwrap_err();
            assert!(matches!(err, Error::InvalidParameter(_)), "{config:?}: {err}");
        }
    }
}
