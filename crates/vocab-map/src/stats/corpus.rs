//! The vocabulary intersection restricted to the tokens a corpus uses (the paper's Table 6).

use anyspec_core::Progress;
use serde::{Deserialize, Serialize};

use super::overlap::ratio;
use super::text::encode_lines;
use crate::{ABSENT, Error, VocabMap, Vocabulary};

/// How much of one side's use of a corpus falls in the intersection.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SideUsage {
    /// Distinct tokens that occur when this side's tokenizer encodes the corpus.
    pub distinct_tokens: usize,
    /// Of those, the ones paired with a token of the other vocabulary.
    pub distinct_shared: usize,
    /// `distinct_shared / distinct_tokens`.
    pub distinct_ratio: f64,
    /// Token occurrences in the encoded corpus.
    pub occurrences: u64,
    /// Occurrences of paired tokens.
    pub occurrences_shared: u64,
    /// `occurrences_shared / occurrences`: the share of this side's tokens on the corpus that
    /// the other side could propose or verify directly, an upper bound on what TLI can accept.
    pub occurrence_ratio: f64,
}

/// The intersection restricted to tokens that occur in a corpus, seen from both sides.
///
/// The paper's Table 6 is not available; this is a reconstruction that reports both the
/// distinct-token share and the occurrence-weighted share.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CorpusOverlap {
    /// Bytes of corpus text.
    pub corpus_bytes: usize,
    /// The target tokenizer on the corpus.
    pub target: SideUsage,
    /// The drafter tokenizer on the corpus.
    pub drafter: SideUsage,
}

/// Encodes `text` with both tokenizers and measures how much of what each uses is in `map`.
///
/// # Errors
/// [`Error::Codec`] when a tokenizer fails to encode.
pub fn corpus_overlap(
    map: &VocabMap,
    target: &Vocabulary,
    drafter: &Vocabulary,
    text: &str,
    progress: &dyn Progress,
) -> Result<CorpusOverlap, Error> {
    let target_counts = token_counts(target, text, progress)?;
    let drafter_counts = token_counts(drafter, text, progress)?;
    Ok(CorpusOverlap::from_counts(map, &target_counts, &drafter_counts, text.len()))
}

impl CorpusOverlap {
    /// The same statistics from per-id occurrence counts computed once per tokenizer with
    /// [`token_counts`], to compare one tokenizer with many others without re-encoding.
    pub fn from_counts(map: &VocabMap, target_counts: &[u64], drafter_counts: &[u64], corpus_bytes: usize) -> Self {
        CorpusOverlap {
            corpus_bytes,
            target: usage(target_counts, map.target_to_drafter()),
            drafter: usage(drafter_counts, map.drafter_to_target()),
        }
    }
}

/// How often each id of `vocab` occurs when it encodes `text` line by line, without special
/// tokens; indexed by id.
///
/// # Errors
/// [`Error::Codec`] when the tokenizer fails to encode.
pub fn token_counts(vocab: &Vocabulary, text: &str, progress: &dyn Progress) -> Result<Vec<u64>, Error> {
    let mut counts = vec![0u64; vocab.len()];
    encode_lines(vocab, text, progress, |_, ids| {
        for &id in ids {
            if let Some(slot) = counts.get_mut(id as usize) {
                *slot += 1;
            }
        }
    })?;
    Ok(counts)
}

fn usage(counts: &[u64], partner: &[u32]) -> SideUsage {
    let mut usage = SideUsage {
        distinct_tokens: 0,
        distinct_shared: 0,
        distinct_ratio: 0.0,
        occurrences: 0,
        occurrences_shared: 0,
        occurrence_ratio: 0.0,
    };
    for (id, &count) in counts.iter().enumerate() {
        if count == 0 {
            continue;
        }
        let shared = partner.get(id).is_some_and(|&p| p != ABSENT);
        usage.distinct_tokens += 1;
        usage.occurrences += count;
        if shared {
            usage.distinct_shared += 1;
            usage.occurrences_shared += count;
        }
    }
    usage.distinct_ratio = ratio(usage.distinct_shared, usage.distinct_tokens);
    usage.occurrence_ratio =
        if usage.occurrences == 0 { 0.0 } else { usage.occurrences_shared as f64 / usage.occurrences as f64 };
    usage
}
