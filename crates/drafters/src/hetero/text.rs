//! Moving text between two tokenizers in the middle of a stream, with a look-behind window.
//!
//! Tokenizers are not injective and not compositional: `decode(a ⧺ b)` need not equal
//! `decode(a) ⧺ decode(b)` (a SentencePiece decoder strips the space of `▁the` at the start of a
//! text but not after other tokens), and `encode(x ⧺ y)` need not start with `encode(x)`.
//! hetero-vocab-sd.txt §3.2 ("Algorithm 2 Supports Non-Injective Tokenizers") handles this by
//! re-encoding a *known* tail together with the new piece and realigning: "we look for the
//! longest stretch of matched tokens between the tokens we already accepted [...] and the newly
//! proposed tokens re-encoded [...]. We then only take the suffix of the new tokens that falls
//! beyond that overlap." Its reference implementation (Hugging Face Transformers,
//! `AssistedCandidateGeneratorDifferentTokenizers._get_tokens_diag`) looks behind 10 tokens
//! (`target_lookbehind`, `assistant_lookbehind`) and takes the longest common run of ids,
//! [`longest_overlap`] and [`after_overlap`] here, with [`DEFAULT_LOOKBEHIND`] = 10.
//!
//! [`encode_after`] applies that rule first. Ours on top: its result is kept only when it spells
//! the new text (the reference's rule drops text when the new piece merges into the last known
//! token, `Ġdec` + `oding` → `Ġdecoding`); otherwise the known tail's own re-encoding is
//! stripped when it comes out as a prefix, and failing that the piece is encoded alone.
//! [`text_after`] works on text, where the same look-behind is a prefix strip.

use anyspec_models::TextTokenizer;

use crate::error::Result;

/// Tokens of known context decoded or encoded together with a new piece: 10, the look-behind of
/// hetero-vocab-sd.txt's reference implementation (`target_lookbehind` and
/// `assistant_lookbehind` in Hugging Face Transformers' generation config). The rule before the
/// paper was at hand used 4.
pub const DEFAULT_LOOKBEHIND: usize = 10;

/// The longest run of ids that `old` and `new` share, as `(start in new, start in old, length)`,
/// or `None` when they share no id: the longest diagonal of the match matrix `new[i] == old[j]`
/// of the reference implementation (`_get_longest_diag_index`), whose ties go to the smallest
/// `i`, then the smallest `j`.
pub fn longest_overlap(old: &[u32], new: &[u32]) -> Option<(usize, usize, usize)> {
    // run[i][j]: length of the common run starting at new[i], old[j].
    let mut run = vec![vec![0usize; old.len() + 1]; new.len() + 1];
    for i in (0..new.len()).rev() {
        for j in (0..old.len()).rev() {
            run[i][j] = if new[i] == old[j] { run[i + 1][j + 1] + 1 } else { 0 };
        }
    }
    let mut best: Option<(usize, usize, usize)> = None;
    for (i, row) in run.iter().enumerate().take(new.len()) {
        for (j, &length) in row.iter().enumerate().take(old.len()) {
            // Only the start of a run counts (the reference marks a run's later cells visited),
            // and a later run must be strictly longer (its argmax keeps the first maximum).
            let starts_here = i == 0 || j == 0 || new[i - 1] != old[j - 1];
            if length > 0 && starts_here && best.is_none_or(|(_, _, l)| length > l) {
                best = Some((i, j, length));
            }
        }
    }
    best
}

/// The ids of `new` past its longest overlap with `old` ([`longest_overlap`]), as the reference
/// implementation takes them: after the matched run, skip as many ids as `old` has after it
/// (its "discrepancy"), and keep the rest. `None` when the two share no id.
pub fn after_overlap<'a>(old: &[u32], new: &'a [u32]) -> Option<&'a [u32]> {
    let (i, j, length) = longest_overlap(old, new)?;
    let discrepancy = old.len() - (j + length);
    Some(new.get(i + length + discrepancy..).unwrap_or(&[]))
}

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
/// Encodes the text of `known`'s last `window` tokens followed by `text`, then, in order:
///
/// 1. the paper's realignment: the ids past the longest overlap with `known`'s tail
///    ([`after_overlap`]), when they spell `text` after the tail;
/// 2. the ids past the tail's own re-encoding, when it comes out as a prefix (a non-canonical
///    tail, or a merge that the overlap's skip cannot express);
/// 3. `text` encoded alone (a merge across the seam, a normalizer that rewrote the joint).
///
/// Either way the result decodes to `text` after `known` for the byte-level and SentencePiece
/// tokenizers of the supported models.
pub fn encode_after(tokenizer: &TextTokenizer, known: &[u32], text: &str, window: usize) -> Result<Vec<u32>> {
    if text.is_empty() {
        return Ok(Vec::new());
    }
    let tail = &known[known.len().saturating_sub(window)..];
    if !tail.is_empty() {
        let known_text = tokenizer.decode(tail)?;
        if !known_text.is_empty() {
            let joint_text = format!("{known_text}{text}");
            let joint = tokenizer.encode_continuation(&joint_text)?;
            if let Some(new) = after_overlap(tail, &joint)
                && !new.is_empty()
                && tokenizer.decode(&[tail, new].concat())? == joint_text
            {
                return Ok(new.to_vec());
            }
            let known_ids = tokenizer.encode_continuation(&known_text)?;
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
    fn the_longest_overlap_realigns_where_a_prefix_strip_cannot() {
        // The window re-encodes as the known tail: the overlap is the whole tail, the rest is new.
        assert_eq!(after_overlap(&[1, 2, 3], &[1, 2, 3, 4, 5]), Some(&[4, 5][..]));
        // The window's first tokens came out segmented differently ([a, bc] → [ab, c]): no prefix
        // matches, the run [d] still does, and only x is new.
        let (a, bc, d, ab, c, x) = (10, 11, 12, 13, 14, 15);
        assert_eq!(longest_overlap(&[a, bc, d], &[ab, c, d, x]), Some((2, 2, 1)));
        assert_eq!(after_overlap(&[a, bc, d], &[ab, c, d, x]), Some(&[x][..]));
        // The reference's discrepancy: the known tail has one id past the matched run, so one id
        // of the new encoding past the run is skipped as its counterpart.
        assert_eq!(after_overlap(&[1, 2, 3, 9], &[1, 2, 3, 8, 4]), Some(&[4][..]));
        // The longest run wins over an earlier shorter one; equal runs go to the earliest.
        assert_eq!(longest_overlap(&[5, 1, 2, 3], &[5, 7, 1, 2, 3, 4]), Some((2, 1, 3)));
        assert_eq!(longest_overlap(&[1, 1], &[1, 1, 1]), Some((0, 0, 2)));
        // Nothing shared: no realignment.
        assert_eq!(after_overlap(&[1, 2], &[3, 4]), None);
        assert_eq!(longest_overlap(&[], &[1]), None);
        // A new encoding that ends inside the overlap adds nothing.
        assert_eq!(after_overlap(&[1, 2, 3], &[2]), Some(&[][..]));
    }

    #[test]
    fn encode_after_keeps_the_text_where_the_overlap_would_drop_it() {
        // Every split of a sentence on a byte-level tokenizer: the continuation always spells
        // the rest of the text, including the cuts inside a word,
        // where the new piece merges into the last known token and the reference's skip of the
        // "discrepancy" would drop that token's text.
        let text = "the quick brown fox jumps over the lazy dog, then decoding goes on";
        for name in ["bytelevel"] {
            let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("../vocab-map/tests/data/{name}.json"));
            let tok = TextTokenizer::from_file(&path).unwrap();
            let mut merged = 0;
            for cut in 1..text.len() {
                let known = tok.encode_continuation(&text[..cut]).unwrap();
                let ids = encode_after(&tok, &known, &text[cut..], DEFAULT_LOOKBEHIND).unwrap();
                assert_eq!(tok.decode(&[known.clone(), ids].concat()).unwrap(), text, "{name}, cut at {cut}");
                let joint = tok.encode_continuation(text).unwrap();
                merged += usize::from(!joint.starts_with(&known));
            }
            assert!(merged > 10, "{name}: the sentence should have cuts inside tokens, {merged}");
        }
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
