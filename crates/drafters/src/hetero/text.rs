//! Moving text between two tokenizers in the middle of a stream, with a look-behind window.
//!
//! Tokenizers are not injective and not compositional: `decode(a ⧺ b)` need not equal
//! `decode(a) ⧺ decode(b)` (a SentencePiece decoder strips the space of `▁the` at the start of a
//! text but not after other tokens), and `encode(x ⧺ y)` need not start with `encode(x)`.
//! hetero-vocab-sd.txt §3.2 handles this with a look-behind heuristic,
//! `c₂ ⧺ s = untokenize(tokenize(c₁ ⧺ c₂ ⧺ s))`: work on a *known* tail followed by the new
//! piece, then strip the known part. The paper's exact window sizes were not available to this
//! project (NOT FOUND in its notes), so the window here is a documented choice,
//! [`DEFAULT_LOOKBEHIND`] tokens, and every function falls back to the piece on its own when the
//! known part does not come out as a prefix.

use anyspec_models::TextTokenizer;

use crate::error::Result;

/// Tokens of known context decoded or encoded together with a new piece (reconstruction: the
/// paper's window sizes are not available). Four tokens cover a word or two of context, which
/// is what prefix-space and merge rules look at; longer windows only cost time.
pub const DEFAULT_LOOKBEHIND: usize = 4;

/// The text that `ids[start..]` adds after `ids[..start]`.
///
/// Decodes the last `window` tokens before `start` together with the new ones and strips the
/// decoding of the window alone; falls back to decoding `ids[start..]` alone when the window's
/// text is not a prefix of the joint text. Special tokens decode to nothing.
pub(crate) fn text_after(tokenizer: &TextTokenizer, ids: &[u32], start: usize, window: usize) -> Result<String> {
    let start = start.min(ids.len());
    if start == ids.len() {
        return Ok(String::new());
    }
    let from = start.saturating_sub(window);
    if from < start {
        let joint = tokenizer.decode(&ids[from..])?;
        let known = tokenizer.decode(&ids[from..start])?;
        if let Some(rest) = joint.strip_prefix(known.as_str()) {
            return Ok(rest.to_owned());
        }
    }
    Ok(tokenizer.decode(&ids[start..])?)
}

/// Ids that continue a stream whose last tokens are `known` with `text`, no special tokens.
///
/// Encodes the text of `known` (at most `window` tokens) followed by `text` and strips the ids
/// of `known`'s text when they come out as a prefix; otherwise (a merge across the seam, a
/// normalizer that rewrote the joint) encodes `text` alone. Either way the result decodes to
/// `text` after `known` for the byte-level and SentencePiece tokenizers of the supported models.
pub(crate) fn encode_after(tokenizer: &TextTokenizer, known: &[u32], text: &str, window: usize) -> Result<Vec<u32>> {
    if text.is_empty() {
        return Ok(Vec::new());
    }
    let tail = &known[known.len().saturating_sub(window)..];
    if !tail.is_empty() {
        let known_text = tokenizer.decode(tail)?;
        if !known_text.is_empty() {
            let known_ids = tokenizer.encode_continuation(&known_text)?;
            let joint = tokenizer.encode_continuation(&format!("{known_text}{text}"))?;
            if joint.len() > known_ids.len() && joint.starts_with(&known_ids) {
                return Ok(joint[known_ids.len()..].to_vec());
            }
        }
    }
    Ok(tokenizer.encode_continuation(text)?)
}

/// Whether decoded text ends inside a character: byte-level tokens can split a multi-byte
/// character, and the decoder then shows U+FFFD until the rest arrives.
pub(crate) fn ends_mid_character(text: &str) -> bool {
    text.ends_with('\u{FFFD}')
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    /// anyspec-vocab-map's tiny SentencePiece-style tokenizer: a `▁` is prepended to every
    /// text and the decoder strips the leading space, so pieces do not compose.
    fn sentencepiece() -> TextTokenizer {
        let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../vocab-map/tests/data/tiny_sentencepiece.json");
        TextTokenizer::from_file(&path).unwrap()
    }

    #[test]
    fn the_look_behind_keeps_the_space_a_lone_decode_strips() {
        let tok = sentencepiece();
        let ids = tok.encode_continuation("ab ab").unwrap();
        assert_eq!(ids.len(), 2, "{ids:?}");
        // Decoded alone, the second `▁ab` loses its space; after the first, it keeps it.
        assert_eq!(text_after(&tok, &ids, 1, 0).unwrap(), "ab");
        assert_eq!(text_after(&tok, &ids, 1, DEFAULT_LOOKBEHIND).unwrap(), " ab");
        assert_eq!(text_after(&tok, &ids, 2, DEFAULT_LOOKBEHIND).unwrap(), "");
    }

    #[test]
    fn the_look_behind_encodes_a_continuation_without_a_second_prefix_space() {
        let tok = sentencepiece();
        let first = tok.encode_continuation("ab").unwrap();
        // Alone, " ab" gets the prepended `▁` too: two spaces.
        let alone = encode_after(&tok, &first, " ab", 0).unwrap();
        assert_eq!(tok.decode(&[first.clone(), alone].concat()).unwrap(), "ab  ab");
        let after = encode_after(&tok, &first, " ab", DEFAULT_LOOKBEHIND).unwrap();
        assert_eq!(after, first, "the continuation is the same `▁ab` token");
        assert_eq!(tok.decode(&[first.clone(), after].concat()).unwrap(), "ab ab");
        assert!(encode_after(&tok, &first, "", DEFAULT_LOOKBEHIND).unwrap().is_empty());
    }
}
