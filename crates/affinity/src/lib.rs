//! # anyspec-affinity
//!
//! The offline artifacts behind out-of-vocabulary sampling (RDK, Timor et al. 2025,
//! `oov-sampling-rdk.txt`) and vocabulary pruning (FR-Spec-style frequency-ranked shortlists):
//!
//! - [`CooccurrenceCounts`]: windowed co-occurrence counts of target tokens over a corpus,
//!   streamed (plain text, JSONL, gzip) and counted on every core, sparse and memory-bounded.
//! - [`build_affinity`]: counts → scores (positive PMI) → the row-stochastic, top-k sparse `M`
//!   ([`Affinity`]), saved as safetensors with the target tokenizer's fingerprint and the build
//!   parameters, and loaded back as [`anyspec_core::projection::AffinityMatrix`] (for
//!   [`anyspec_core::projection::rdk_exact`]) plus the raw scores and `τ` (for
//!   [`anyspec_core::projection::rdk_dense_kernel_first_order`]). [`Affinity::restricted_to_drafter`] narrows it
//!   to a given drafter: rows spread a drafter token's mass only to target tokens the drafter
//!   lacks.
//! - [`Shortlist`]: the `m` most frequent drafter tokens of a corpus, end-of-sequence forced in,
//!   in a checksummed file that refuses other drafter tokenizers.
//!
//! ```
//! use std::path::{Path, PathBuf};
//! use anyspec_affinity::{Affinity, AffinityParams, CooccurrenceCounts, build_affinity};
//! use anyspec_core::{NoProgress, projection::rdk_exact};
//! use anyspec_dict_builder::CorpusOptions;
//! use anyspec_vocab_map::Vocabulary;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
//! let target = Vocabulary::from_file(&data.join("tokenizer.json"))?;
//! let params = AffinityParams { min_count: 2, ..AffinityParams::default() };
//! let counts = CooccurrenceCounts::count_files(&[data.join("corpus.txt")], &CorpusOptions::default(),
//!     &target, params.window, params.max_pairs, 1, &NoProgress)?;
//! let affinity = build_affinity(&counts, target.fingerprint(), &params, "corpus.txt")?;
//! let path = std::env::temp_dir().join(format!("doc-{}.safetensors", std::process::id()));
//! affinity.save(&path)?;
//! let loaded = Affinity::load(&path, &target.fingerprint())?;
//! // All drafter mass on token 337 (" the"), spread along its row of M.
//! let mut q = vec![0.0f32; target.len()];
//! q[337] = 1.0;
//! let spread = rdk_exact(&q, loaded.matrix())?;
//! assert!((spread.iter().sum::<f32>() - 1.0).abs() < 1e-4);
//! # std::fs::remove_file(&path).ok();
//! # Ok(())
//! # }
//! ```
//!
//! ## What follows the paper, and what is ours
//!
//! [`build`] offers the paper's Eq. 2 score, a normalized covariance `Ω` estimated from windowed
//! co-occurrence ([`AffinityScore::Covariance`]), beside ours (positive PMI with a self-score
//! equal to the row's best, [`AffinityScore::Ppmi`], the default); both keep the top k entries
//! per row and take a softmax at temperature `τ`. [`shortlist`] documents the pruning rule
//! (top-m by corpus frequency, the end-of-sequence token forced in).
//!
//! ## Quirks
//!
//! - Windows never span two lines (or two JSONL documents); pairs of equal tokens are not counted.
//! - An empty row of `M` is the identity: tokens never seen keep their mass.
//! - With a memory budget too small for the corpus, counts become approximate (lossy counting);
//!   the file records the floor below which pairs may be missing ([`AffinityInfo::prune_floor`]).

#![deny(missing_docs)]

mod affinity;
pub mod build;
mod cooccurrence;
mod error;
pub mod shortlist;
mod tokenized;

pub use affinity::{AFFINITY_FORMAT, AFFINITY_FORMAT_VERSION, Affinity, AffinityInfo};
pub use build::{AffinityParams, AffinityScore, build_affinity};
pub use cooccurrence::CooccurrenceCounts;
pub use error::{Error, Result};
pub use shortlist::{EOS_NAMES, EosRule, MAX_DRAFTER_VOCAB, Shortlist, ShortlistParams, TokenFrequencies};
pub use tokenized::describe_corpus;
