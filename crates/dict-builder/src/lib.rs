//! # anyspec-dict-builder
//!
//! DictSpec (Syvokon, UNLP 2026; `dictspec.txt`): a static dictionary from token prefixes to
//! their most likely continuation, built offline from an unlabeled corpus for one tokenizer,
//! and drafted from by longest-suffix lookup. No model and no GPU are involved.
//!
//! The pipeline, one module per stage:
//!
//! - [`for_each_chunk`]: stream plain-text or JSONL corpora, gzip or not.
//! - [`NgramCounts`]: count word n-grams on every core ([`words`] defines the segmentation);
//!   counts are tokenizer-independent and shardable ([`shard`]: write, read, merge).
//! - [`TokenizedNgrams`] and [`ContinuationTable`]: tokenize the most frequent n-grams in their
//!   running-text form and keep, per token prefix, the most probable continuation.
//! - [`encode_dictionary`] / [`build_dictionary`]: an `fst::Map` plus a continuation blob in one
//!   checksummed file ([`format`](mod@format) documents the layout).
//! - [`Dictionary`]: the memory-mapped reader with [`Dictionary::longest_suffix_match`].
//! - [`emulate`]: replay reference text through any [`anyspec_core::Drafter`] and report
//!   emulated speedup, coverage, mean accepted length and acceptance rate.
//!
//! ```no_run
//! use std::path::{Path, PathBuf};
//! use anyspec_core::NoProgress;
//! use anyspec_dict_builder::{BuildParams, CorpusOptions, Dictionary, NgramCounts, build_dictionary, write_dictionary};
//! use anyspec_vocab_map::Vocabulary;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let vocabulary = Vocabulary::from_file(Path::new("tokenizer.json"))?;
//! let params = BuildParams::default();
//! let counts = NgramCounts::count_files(&[PathBuf::from("corpus.txt")], &CorpusOptions::default(),
//!     params.max_order(), 0, &NoProgress)?;
//! let bytes = build_dictionary(&counts, &vocabulary, &params, 0, &NoProgress)?;
//! write_dictionary(Path::new("uk.dict"), &bytes)?;
//! let dictionary = Dictionary::open(Path::new("uk.dict"), &vocabulary.fingerprint())?;
//! let mut continuation = Vec::new();
//! let matched = dictionary.longest_suffix_match(&[464, 3290], 8, &mut continuation);
//! # let _ = matched;
//! # Ok(())
//! # }
//! ```
//!
//! ## What follows the paper, and what is ours
//!
//! The construction follows dictspec.txt §3.1 (every split of every tokenized n-gram, the most
//! frequent continuation per prefix, [`table`]) and §4.4 (prefixes and continuations of at most
//! 8 tokens; [`BuildParams::default`] is the deployed n1+n2+n3, 200k entries, p_min 0.8). Ours,
//! documented where they live: the segmentation into words ([`words`]), the running-text
//! tokenization ([`running_text`]), `min_count` and the cap on tokenized n-grams
//! ([`BuildParams`]), and [`ContinuationRule::Chained`], continuations extended across word ends
//! (the paper does not say how it forms its multi-word drafts; §3.1's rule is the default).
//!
//! ## Quirks
//!
//! A dictionary is validated when it is opened (checksum and every entry), so lookups never fail;
//! the checksum is a CRC-32, which catches damage, not deliberate tampering.

#![deny(missing_docs)]

mod build;
mod corpus;
mod counts;
mod dictionary;
mod emulate;
mod error;
pub mod format;
mod params;
pub mod running_text;
pub mod shard;
pub mod table;
mod varint;
pub mod words;

pub use build::{build_dictionary, write_dictionary};
pub use corpus::{CHUNK_BYTES, CorpusOptions, Record, for_each_chunk, for_each_record, total_size};
pub use counts::{MAX_ORDER, NgramCounts};
pub use dictionary::Dictionary;
pub use emulate::{EmulationConfig, emulate, emulate_sequence};
pub use error::{Error, Result};
pub use format::{DictionaryInfo, FORMAT_VERSION, encode_dictionary};
pub use params::{BuildParams, ContinuationRule, MAX_CONTINUATION_LIMIT, MAX_PREFIX_LIMIT};
pub use table::{ContinuationTable, TableEntry, TokenizedNgrams};
