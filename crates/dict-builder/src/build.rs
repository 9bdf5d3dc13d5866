//! The whole build: counts → tokenized n-grams → continuation table → dictionary bytes.

use std::io::Write;
use std::path::Path;

use anyspec_core::Progress;
use anyspec_core::artifact::write_atomically;
use anyspec_vocab_map::Vocabulary;

use crate::counts::NgramCounts;
use crate::error::{Error, Result};
use crate::format::encode_dictionary;
use crate::params::{BuildParams, ContinuationRule};
use crate::table::{ContinuationTable, TokenizedNgrams};

/// Builds dictionary bytes from n-gram counts for `vocabulary`'s tokenizer, on `threads` threads
/// (0 = every core).
///
/// # Errors
/// [`Error::InvalidParameter`] for bad parameters (including orders above those counted),
/// [`Error::EmptyCorpus`] when the counts hold no n-gram, [`Error::Tokenizer`], [`Error::Fst`].
pub fn build_dictionary(
    counts: &NgramCounts,
    vocabulary: &Vocabulary,
    params: &BuildParams,
    threads: usize,
    progress: &dyn Progress,
) -> Result<Vec<u8>> {
    params.validate()?;
    if params.max_order() > counts.max_order() {
        return Err(Error::invalid(
            "orders",
            "at most the highest order counted (count again with a higher --max-order)",
            format!("{:?} with counts up to order {}", params.orders, counts.max_order()),
        ));
    }
    if counts.distinct(1) == 0 {
        return Err(Error::EmptyCorpus { text_bytes: counts.text_bytes() });
    }
    let ngrams = TokenizedNgrams::new(counts, vocabulary.tokenizer(), params, threads, progress)?;
    let mut table = ContinuationTable::build(&ngrams, &params.orders, params.max_prefix, params.max_continuation);
    if params.continuations == ContinuationRule::Chained {
        table = table.chained(params.min_prob, params.max_prefix, params.max_continuation);
    }
    let entries = table.select(params.min_prob, params.max_entries);
    encode_dictionary(&entries, &vocabulary.fingerprint(), params, ngrams.len() as u64, counts.text_bytes())
}

/// Writes dictionary bytes atomically.
///
/// # Errors
/// [`Error::Io`].
pub fn write_dictionary(path: &Path, bytes: &[u8]) -> Result<()> {
    write_atomically(path, |w| w.write_all(bytes)).map_err(Error::io("write", path))
}
