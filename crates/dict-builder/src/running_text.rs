//! Tokenizing a word n-gram in the form it takes inside running text.
//!
//! Tokenizers treat the start of a string specially: SentencePiece-style tokenizers prepend `▁`,
//! byte-level BPE gives no space to the first word. Encoding `" мила"` alone is therefore not how
//! the same words are tokenized mid-sentence. We encode the n-gram after an *anchor* (a newline,
//! which no tokenizer merges with a following word or space) and drop the anchor's tokens; when
//! the anchor's tokens are not a prefix of the result (a tokenizer that merges across it), the
//! n-gram is encoded on its own.

use anyspec_core::{Progress, ProgressUnit};
use tokenizers::Tokenizer;

use crate::error::{Error, Result};

const ANCHOR: &str = "\n";

/// Encodes n-gram surfaces in their running-text form.
pub struct RunningTextEncoder<'a> {
    tokenizer: &'a Tokenizer,
    anchor_ids: Vec<u32>,
}

impl<'a> RunningTextEncoder<'a> {
    /// Prepares an encoder for `tokenizer`.
    ///
    /// # Errors
    /// [`Error::Tokenizer`] when the tokenizer cannot encode the anchor.
    pub fn new(tokenizer: &'a Tokenizer) -> Result<Self> {
        let anchor_ids = encode_plain(tokenizer, ANCHOR)?;
        Ok(RunningTextEncoder { tokenizer, anchor_ids })
    }

    /// The ids of `surface` as they appear inside running text.
    ///
    /// # Errors
    /// [`Error::Tokenizer`] when the tokenizer fails.
    pub fn encode(&self, surface: &str) -> Result<Vec<u32>> {
        let mut anchored = String::with_capacity(ANCHOR.len() + surface.len());
        anchored.push_str(ANCHOR);
        anchored.push_str(surface);
        let ids = encode_plain(self.tokenizer, &anchored)?;
        match ids.strip_prefix(self.anchor_ids.as_slice()) {
            Some(rest) if !self.anchor_ids.is_empty() => Ok(rest.to_vec()),
            _ => encode_plain(self.tokenizer, surface),
        }
    }

    /// Encodes every surface on `threads` threads (0 = every core), in order, reporting progress
    /// in items under the stage name `"tokenizing n-grams"`.
    ///
    /// # Errors
    /// The first [`Error::Tokenizer`] met.
    pub fn encode_all(&self, surfaces: &[&str], threads: usize, progress: &dyn Progress) -> Result<Vec<Vec<u32>>> {
        progress.start("tokenizing n-grams", Some(surfaces.len() as u64), ProgressUnit::Items);
        let threads = if threads == 0 { std::thread::available_parallelism().map_or(1, |n| n.get()) } else { threads };
        let per_thread = surfaces.len().div_ceil(threads.max(1)).max(1);
        let parts: Vec<Result<Vec<Vec<u32>>>> = std::thread::scope(|scope| {
            let handles: Vec<_> = surfaces
                .chunks(per_thread)
                .map(|chunk| {
                    scope.spawn(move || {
                        let mut out = Vec::with_capacity(chunk.len());
                        for (i, surface) in chunk.iter().enumerate() {
                            out.push(self.encode(surface)?);
                            if i % 4096 == 4095 {
                                progress.advance(4096);
                            }
                        }
                        progress.advance((chunk.len() % 4096) as u64);
                        Ok(out)
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join().unwrap_or_else(|_| {
                        Err(Error::Tokenizer { text: String::new(), message: "a tokenizer thread panicked".into() })
                    })
                })
                .collect()
        });
        let mut all = Vec::with_capacity(surfaces.len());
        for part in parts {
            all.extend(part?);
        }
        progress.finish();
        Ok(all)
    }
}

/// Encodes `text` without special tokens (no BOS/EOS): dictionary entries and reference text
/// are ordinary text.
///
/// # Errors
/// [`Error::Tokenizer`] naming the (shortened) text.
pub fn encode_plain(tokenizer: &Tokenizer, text: &str) -> Result<Vec<u32>> {
    tokenizer
        .encode_fast(text, false)
        .map(|e| e.get_ids().to_vec())
        .map_err(|err| Error::Tokenizer { text: text.chars().take(40).collect(), message: err.to_string() })
}
