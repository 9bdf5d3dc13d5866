//! Statistics of a tokenizer on text: injectivity (the paper's Table 9) and fertility
//! (dictspec.txt Table 3).

use anyspec_core::{Progress, ProgressUnit};
use serde::{Deserialize, Serialize};

use super::overlap::ratio;
use crate::{Error, Vocabulary};

/// How many pieces of text go to the tokenizer at once (it encodes a batch in parallel).
const BATCH: usize = 2048;

/// Encodes `text` line by line (each line with its newline) without special tokens, calling
/// `each` with the ids of every line in order. Encoding line by line keeps memory flat on large
/// corpora and differs from encoding the whole text only at line boundaries.
pub(crate) fn encode_lines(
    vocab: &Vocabulary,
    text: &str,
    progress: &dyn Progress,
    mut each: impl FnMut(&str, &[u32]),
) -> Result<(), Error> {
    progress.start(&format!("encoding with {}", vocab.name()), Some(text.len() as u64), ProgressUnit::Bytes);
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    for batch in lines.chunks(BATCH) {
        let encodings = vocab.tokenizer().encode_batch(batch.to_vec(), false).map_err(|err| Error::Codec {
            name: vocab.name().to_string(),
            action: "encode",
            message: err.to_string(),
        })?;
        for (line, encoding) in batch.iter().zip(&encodings) {
            each(line, encoding.get_ids());
        }
        progress.advance(batch.iter().map(|l| l.len() as u64).sum());
    }
    progress.finish();
    Ok(())
}

/// Tokens per whitespace-separated word: how many tokens a tokenizer spends on a word of this
/// text. DictSpec (dictspec.txt Table 3) reports it per tokenizer and language.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Fertility {
    /// Tokens of the text, encoded line by line without special tokens.
    pub tokens: u64,
    /// Whitespace-separated words.
    pub words: u64,
    /// `tokens / words`.
    pub fertility: f64,
    /// Bytes of text per token.
    pub bytes_per_token: f64,
}

/// Measures the fertility of `vocab` on `text`.
///
/// # Errors
/// [`Error::Codec`] when the tokenizer fails to encode.
pub fn fertility(vocab: &Vocabulary, text: &str, progress: &dyn Progress) -> Result<Fertility, Error> {
    let mut tokens = 0u64;
    encode_lines(vocab, text, progress, |_, ids| tokens += ids.len() as u64)?;
    let words = text.split_whitespace().count() as u64;
    Ok(Fertility {
        tokens,
        words,
        fertility: ratio(tokens as usize, words as usize),
        bytes_per_token: ratio(text.len(), tokens as usize),
    })
}

/// One snippet that does not survive `decode(encode(s))`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mismatch {
    /// The snippet.
    pub original: String,
    /// What decoding its tokens gave.
    pub decoded: String,
}

/// The share of snippets `s` with `decode(encode(s)) ≠ s` (hetero-vocab-sd §3.2, Table 9).
///
/// Snippets are the non-empty lines of the text, without their newline. Encoding adds no special
/// tokens and decoding skips none, so a mismatch comes from normalization (Unicode NFC, squashed
/// or stripped spaces, lowercasing) or unknown tokens, which is what makes SLEM's re-tokenization
/// non-trivial. The paper's corpus and snippet length are not available: this is a
/// reconstruction with lines as snippets.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Injectivity {
    /// Snippets tested.
    pub snippets: u64,
    /// Snippets that did not round-trip.
    pub mismatched: u64,
    /// `mismatched / snippets`.
    pub share: f64,
    /// The first few mismatches, for the reader.
    pub examples: Vec<Mismatch>,
}

/// How many mismatches [`injectivity`] keeps as examples.
const EXAMPLES: usize = 3;

/// Measures how often `vocab` fails to round-trip the lines of `text`.
///
/// # Errors
/// [`Error::Codec`] when the tokenizer fails to encode or decode.
pub fn injectivity(vocab: &Vocabulary, text: &str, progress: &dyn Progress) -> Result<Injectivity, Error> {
    let mut snippets = 0u64;
    let mut mismatched = 0u64;
    let mut examples = Vec::new();
    let lines: Vec<&str> = text.lines().filter(|l| !l.is_empty()).collect();
    progress.start(&format!("round-tripping with {}", vocab.name()), Some(lines.len() as u64), ProgressUnit::Items);
    let codec_error = |action, err: tokenizers::Error| Error::Codec {
        name: vocab.name().to_string(),
        action,
        message: err.to_string(),
    };
    for batch in lines.chunks(BATCH) {
        let encodings =
            vocab.tokenizer().encode_batch(batch.to_vec(), false).map_err(|err| codec_error("encode", err))?;
        let ids: Vec<&[u32]> = encodings.iter().map(|e| e.get_ids()).collect();
        let decoded = vocab.tokenizer().decode_batch(&ids, false).map_err(|err| codec_error("decode", err))?;
        for (original, decoded) in batch.iter().zip(decoded) {
            snippets += 1;
            if *original != decoded {
                mismatched += 1;
                if examples.len() < EXAMPLES {
                    examples.push(Mismatch { original: original.to_string(), decoded });
                }
            }
        }
        progress.advance(batch.len() as u64);
    }
    progress.finish();
    Ok(Injectivity { snippets, mismatched, share: ratio(mismatched as usize, snippets as usize), examples })
}
