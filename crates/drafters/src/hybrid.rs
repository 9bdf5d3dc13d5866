//! DictSpec's hybrid: the static dictionary and prompt lookup, one as the other's fallback.

use anyspec_core::{Draft, Drafter, SamplingConfig};
use rand::RngCore;

use crate::dictionary::DictionaryDrafter;
use crate::prompt_lookup::PromptLookup;

/// Which source is asked first.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum HybridOrder {
    /// The dictionary first, prompt lookup when it has nothing (the DictSpec hybrid).
    #[default]
    DictionaryFirst,
    /// Prompt lookup first, the dictionary when it has nothing.
    PromptFirst,
}

/// Asks one drafter and falls back to the other when the first proposes nothing.
#[derive(Clone, Debug)]
pub struct Hybrid {
    dictionary: DictionaryDrafter,
    prompt: PromptLookup,
    order: HybridOrder,
    from_dictionary: u64,
    from_prompt: u64,
}

impl Hybrid {
    /// Combines the two drafters in `order`.
    pub fn new(dictionary: DictionaryDrafter, prompt: PromptLookup, order: HybridOrder) -> Self {
        Hybrid { dictionary, prompt, order, from_dictionary: 0, from_prompt: 0 }
    }

    /// How many drafts came from the dictionary and from prompt lookup so far.
    pub fn sources(&self) -> (u64, u64) {
        (self.from_dictionary, self.from_prompt)
    }

    /// The draft for `context`, at most `max_tokens` long.
    pub fn draft(&mut self, context: &[u32], max_tokens: usize) -> Draft {
        // Prompt lookup is always asked (it keeps its index in step with the context), but its
        // draft is used only when its turn comes.
        let prompt = self.prompt.draft(context, max_tokens);
        let (first_is_dictionary, first) = match self.order {
            HybridOrder::DictionaryFirst => (true, self.dictionary.draft(context, max_tokens)),
            HybridOrder::PromptFirst => (false, prompt.clone()),
        };
        let (from_dictionary, draft) = if !first.is_empty() {
            (first_is_dictionary, first)
        } else if first_is_dictionary {
            (false, prompt)
        } else {
            (true, self.dictionary.draft(context, max_tokens))
        };
        if !draft.is_empty() {
            if from_dictionary {
                self.from_dictionary += 1;
            } else {
                self.from_prompt += 1;
            }
        }
        draft
    }
}

impl Drafter for Hybrid {
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
