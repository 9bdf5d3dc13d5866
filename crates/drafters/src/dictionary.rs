//! The DictSpec dictionary drafter.

use std::sync::Arc;

use anyspec_core::{Draft, Drafter, SamplingConfig};
use anyspec_dict_builder::Dictionary;
use rand::RngCore;

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

    /// The draft for `context`, at most `max_tokens` long, without the trait's ceremony.
    pub fn draft(&mut self, context: &[u32], max_tokens: usize) -> Draft {
        match self.dictionary.longest_suffix_match(context, max_tokens, &mut self.scratch) {
            Some(_) => Draft::deterministic(self.scratch.clone()),
            None => Draft::empty(),
        }
    }
}

impl Drafter for DictionaryDrafter {
    fn propose(
        &mut self,
        context: &[u32],
        max_tokens: usize,
        _sampling: &SamplingConfig,
        _rng: &mut dyn RngCore,
    ) -> anyspec_core::Result<Draft> {
        Ok(self.draft(context, max_tokens))
    }
}
