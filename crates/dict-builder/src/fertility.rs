//! Tokenizer fertility: tokens per word of running text (dictspec.txt Table 3).
//!
//! DictSpec relates its gains to fertility: the more tokens a tokenizer spends per word, the more
//! there is for a dictionary to complete. Words are counted with the same segmentation as the
//! dictionary builder ([`crate::words`]): pieces containing a letter or digit, so punctuation is
//! not a word. The paper's exact word definition is not in our notes; this is a reconstruction.

use serde::{Deserialize, Serialize};
use tokenizers::Tokenizer;

use crate::error::Result;
use crate::running_text::encode_plain;
use crate::words::NgramSegmenter;

/// Token and word counts of a text.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fertility {
    /// Words in the text.
    pub words: u64,
    /// Tokens the tokenizer produced for it (no special tokens).
    pub tokens: u64,
}

impl Fertility {
    /// Tokens per word (0 for a text without words).
    pub fn tokens_per_word(&self) -> f64 {
        if self.words == 0 { 0.0 } else { self.tokens as f64 / self.words as f64 }
    }
}

/// Measures fertility over `text`, tokenizing it one line at a time (lines are independent in
/// every corpus we use, and it keeps memory flat on large files).
///
/// # Errors
/// [`crate::Error::Tokenizer`] when the tokenizer fails.
pub fn measure_fertility(tokenizer: &Tokenizer, text: &str) -> Result<Fertility> {
    let mut segmenter = NgramSegmenter::new();
    let mut fertility = Fertility::default();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        fertility.words += segmenter.count_words(line);
        fertility.tokens += encode_plain(tokenizer, line)?.len() as u64;
    }
    Ok(fertility)
}
