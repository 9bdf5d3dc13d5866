//! The target's context, kept as drafter ids: converted through text once, then extended.

use anyspec_core::projection::ABSENT;
use anyspec_models::TextTokenizer;

use crate::error::{Error, Result};
use crate::hetero::text::{encode_after, ends_mid_character, text_after};

/// The drafter's view of the target's context.
///
/// A drafter with another tokenizer must read the target's tokens (the prompt, and every token
/// the target emits) as its own ids. Converting the whole context through text at every step
/// would re-tokenize tokens the drafter proposed itself and lose its KV cache wherever the
/// canonical tokenization differs, so the conversion is incremental: *alignment points*
/// `(target length, drafter length)` mark places where both sequences spell the same text.
///
/// - The prompt is decoded with the target tokenizer and encoded with the drafter's, with the
///   drafter's own special tokens (its BOS) — never the target's.
/// - Tokens the drafter proposed are recorded with the drafter ids they came from
///   ([`ContextSync::push_aligned`]); when the target accepts them they are reused as they are.
/// - Anything else (a correction, a bonus token, tokens past the last alignment point) is
///   decoded from the last alignment point on and encoded as a continuation
///   ([`encode_after`], no special tokens).
/// - A context that ends inside a character (a byte-level token that splits a UTF-8 sequence)
///   is converted up to the last whole character; the rest waits for the next call.
///
/// With [`ContextSync::with_shared_ids`], new target tokens that all have a counterpart in the
/// drafter vocabulary are mapped one for one instead (see `ContextMapping::SharedIds`).
///
/// After a rejection the context departs from what was recorded: everything after the last
/// alignment point inside the common prefix is dropped, and the drafter's session, which
/// reuses the longest common prefix of the ids it is given, rolls its KV cache back with it.
#[derive(Clone, Debug, Default)]
pub(crate) struct ContextSync {
    target: Vec<u32>,
    drafter: Vec<u32>,
    points: Vec<(usize, usize)>,
    window: usize,
    /// Target → drafter ids (`ABSENT` where unmatched) when shared tokens map one for one.
    shared: Option<Vec<u32>>,
}

impl ContextSync {
    /// A conversion with a look-behind window of `window` drafter tokens; 0 is refused (there
    /// would be nothing to re-align a non-injective tokenizer's output against).
    pub(crate) fn new(window: usize) -> Result<Self> {
        if window == 0 {
            return Err(Error::InvalidParameter(anyspec_core::InvalidParameter {
                name: "lookbehind",
                expected: "≥ 1 token",
                value: "0".into(),
            }));
        }
        Ok(ContextSync { window, ..ContextSync::default() })
    }

    /// Maps new target tokens through `target_to_drafter` when every one of them has a
    /// counterpart, falling back to text otherwise.
    pub(crate) fn with_shared_ids(mut self, target_to_drafter: Vec<u32>) -> Self {
        self.shared = Some(target_to_drafter);
        self
    }

    /// The target ids the drafter ids stand for (a prefix of the last context, plus the last
    /// draft's aligned tokens).
    pub(crate) fn target(&self) -> &[u32] {
        &self.target
    }

    /// The drafter ids.
    pub(crate) fn drafter(&self) -> &[u32] {
        &self.drafter
    }

    /// Brings the drafter ids up to date with `context` (target ids) and returns them.
    pub(crate) fn sync(&mut self, context: &[u32], target: &TextTokenizer, drafter: &TextTokenizer) -> Result<&[u32]> {
        let common = self.target.iter().zip(context).take_while(|(a, b)| a == b).count();
        while self.points.last().is_some_and(|&(t, _)| t > common) {
            self.points.pop();
        }
        match self.points.last().copied() {
            None => {
                let covered = whole_characters(context, 0, |end| Ok(target.decode(&context[..end])?))?;
                let text = target.decode(&context[..covered])?;
                self.drafter = drafter.encode(&text)?;
                self.target = context[..covered].to_vec();
                self.points.push((covered, self.drafter.len()));
            }
            Some((t, d)) => {
                self.target.truncate(t);
                self.drafter.truncate(d);
                if let Some(ids) = self.shared_ids(&context[t..]) {
                    self.push_aligned(&context[t..], &ids);
                } else if t < context.len() {
                    let window = self.window;
                    let covered = whole_characters(context, t, |end| text_after(target, &context[..end], t, window))?;
                    if covered > t {
                        let text = text_after(target, &context[..covered], t, window)?;
                        let ids = encode_after(drafter, &self.drafter, &text, window)?;
                        self.drafter.extend_from_slice(&ids);
                        self.target.extend_from_slice(&context[t..covered]);
                        self.points.push((covered, self.drafter.len()));
                    }
                }
            }
        }
        Ok(&self.drafter)
    }

    /// `tokens` as drafter ids when shared ids are on and every token has one.
    fn shared_ids(&self, tokens: &[u32]) -> Option<Vec<u32>> {
        let map = self.shared.as_ref()?;
        if tokens.is_empty() {
            return None;
        }
        tokens.iter().map(|&t| map.get(t as usize).copied().filter(|&d| d != ABSENT)).collect()
    }

    /// Records that `target_tokens` follow the current target ids and spell the same text as
    /// `drafter_tokens` after the current drafter ids.
    pub(crate) fn push_aligned(&mut self, target_tokens: &[u32], drafter_tokens: &[u32]) {
        self.target.extend_from_slice(target_tokens);
        self.drafter.extend_from_slice(drafter_tokens);
        self.points.push((self.target.len(), self.drafter.len()));
    }
}

/// The longest end in `start..=context.len()` whose text (from `text_of(end)`) does not stop
/// inside a character; `start` when there is none.
fn whole_characters(context: &[u32], start: usize, mut text_of: impl FnMut(usize) -> Result<String>) -> Result<usize> {
    let mut end = context.len();
    while end > start {
        if !ends_mid_character(&text_of(end)?) {
            return Ok(end);
        }
        end -= 1;
    }
    Ok(start)
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;
    use crate::hetero::DEFAULT_LOOKBEHIND;

    fn tokenizers() -> (TextTokenizer, TextTokenizer) {
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
        let target = TextTokenizer::from_file(&root.join("../models/tests/data/tokenizer.json")).unwrap();
        let drafter = TextTokenizer::from_file(&root.join("tests/data/hetero-drafter/tokenizer.json")).unwrap();
        (target, drafter)
    }

    #[test]
    fn a_rejection_rolls_back_to_the_last_alignment_point_inside_the_kept_prefix() {
        let (target, drafter) = tokenizers();
        let prompt = target.encode("The quick brown").unwrap();
        let mut sync = ContextSync::new(DEFAULT_LOOKBEHIND).unwrap();
        let base = sync.sync(&prompt, &target, &drafter).unwrap().to_vec();
        assert_eq!(base, drafter.encode("The quick brown").unwrap());
        // The drafter proposed " fox" as its own token `Ġfox`; the target spells it ` fo` `x`.
        let (fo, x) = (target.inner().token_to_id("Ġfo").unwrap(), target.inner().token_to_id("x").unwrap());
        let own_fox = drafter.inner().token_to_id("Ġfox").unwrap();
        sync.push_aligned(&[fo, x], &[own_fox]);
        // Accepted whole, followed by a target token: the drafter keeps `Ġfox` (and its cache).
        let the = target.inner().token_to_id("Ġthe").unwrap();
        let accepted = [prompt.clone(), vec![fo, x, the]].concat();
        let ids = sync.sync(&accepted, &target, &drafter).unwrap().to_vec();
        assert_eq!(ids[..base.len() + 1], [base.clone(), vec![own_fox]].concat()[..]);
        assert_eq!(drafter.decode(&ids).unwrap(), "The quick brown fox the");
        // Rejected after ` fo`: the alignment point after `Ġfox` is gone, so the drafter falls
        // back to the prompt and re-tokenizes ` fo` + the correction through text.
        let rejected = [prompt.clone(), vec![fo, the]].concat();
        let ids = sync.sync(&rejected, &target, &drafter).unwrap().to_vec();
        assert_eq!(ids[..base.len()], base[..]);
        assert!(!ids.contains(&own_fox));
        assert_eq!(drafter.decode(&ids).unwrap(), "The quick brown fo the");
        assert_eq!(sync.target(), &rejected[..]);
    }

    #[test]
    fn shared_ids_map_target_tokens_one_for_one() {
        let (target, drafter) = tokenizers();
        let mut target_to_drafter = vec![ABSENT; target.vocab_size()];
        let the_t = target.inner().token_to_id("Ġthe").unwrap();
        let the_d = drafter.inner().token_to_id("Ġthe").unwrap();
        target_to_drafter[the_t as usize] = the_d;
        let prompt = target.encode("The").unwrap();
        let mut sync = ContextSync::new(DEFAULT_LOOKBEHIND).unwrap().with_shared_ids(target_to_drafter);
        let base = sync.sync(&prompt, &target, &drafter).unwrap().to_vec();
        let ids = sync.sync(&[prompt.clone(), vec![the_t, the_t]].concat(), &target, &drafter).unwrap().to_vec();
        assert_eq!(ids, [base, vec![the_d, the_d]].concat());
    }
}
