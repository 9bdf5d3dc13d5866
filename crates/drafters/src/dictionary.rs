//! The DictSpec dictionary drafter.

use std::sync::Arc;

use anyspec_core::Draft;
use anyspec_dict_builder::Dictionary;

/// The first confidence class of dictionary drafts, above prompt lookup's 1..=16.
const CLASS_BASE: u16 = 256;

/// Proposes the continuation of the longest context suffix (at most the dictionary's prefix
/// length, 8 tokens by default) that is a dictionary key; proposes nothing when no suffix is.
#[derive(Clone, Debug)]
pub struct DictionaryDrafter {
    dictionary: Arc<Dictionary>,
    scratch: Vec<u32>,
}

impl DictionaryDrafter {
    /// A drafter over a loaded dictionary (shared, so many drafters can use one map).
    pub fn new(dictionary: Arc<Dictionary>) -> Self {
        DictionaryDrafter { dictionary, scratch: Vec::with_capacity(16) }
    }

    /// The dictionary drafted from.
    pub fn dictionary(&self) -> &Dictionary {
        &self.dictionary
    }

    /// The confidence class of a draft found under a `matched`-token prefix: 256 + the length,
    /// apart from prompt lookup's classes (1..=16) so that a hybrid's two sources keep separate
    /// acceptance estimates in the γ tuner ([`anyspec_core::Draft::confidence_class`]).
    pub fn confidence_class(matched: usize) -> u16 {
        CLASS_BASE + matched.min(255) as u16
    }

    /// The draft for `context`, at most `max_tokens` long, without the trait's ceremony,
    /// labelled with [`DictionaryDrafter::confidence_class`].
    pub fn draft(&mut self, context: &[u32], max_tokens: usize) -> Draft {
        match self.dictionary.longest_suffix_match(context, max_tokens, &mut self.scratch) {
            Some(matched) => {
                Draft::deterministic(self.scratch.clone()).with_confidence_class(Self::confidence_class(matched))
            }
            None => Draft::empty(),
        }
    }
}
