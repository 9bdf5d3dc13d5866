//! DictSpec's hybrid: the static dictionary and prompt lookup, one as the other's fallback —
//! or, as our variant, a [`crate::TokenNgramDrafter`] of the target's earlier answers in the
//! dictionary's place.

use anyspec_core::{Draft, Drafter, SamplingConfig};
use rand::RngCore;

use crate::dictionary::DictionaryDrafter;
use crate::prompt_lookup::PromptLookup;
use crate::token_ngram::TokenNgramDrafter;

/// A deterministic drafter that needs nothing but the context: the static half of a
/// [`Hybrid`].
pub trait StaticSource {
    /// The draft for `context`, at most `max_tokens` long (empty when it has none).
    fn draft(&mut self, context: &[u32], max_tokens: usize) -> Draft;
}

impl StaticSource for DictionaryDrafter {
    fn draft(&mut self, context: &[u32], max_tokens: usize) -> Draft {
        DictionaryDrafter::draft(self, context, max_tokens)
    }
}

impl StaticSource for TokenNgramDrafter {
    fn draft(&mut self, context: &[u32], max_tokens: usize) -> Draft {
        TokenNgramDrafter::draft(self, context, max_tokens)
    }
}

/// Which source is asked first.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum HybridOrder {
    /// The dictionary first, prompt lookup when it has nothing (the DictSpec hybrid).
    #[default]
    DictionaryFirst,
    /// Prompt lookup first, the dictionary when it has nothing.
    PromptFirst,
}

/// Asks one drafter and falls back to the other when the first proposes nothing. The static
/// source is DictSpec's dictionary unless another [`StaticSource`] is given.
#[derive(Clone, Debug)]
pub struct Hybrid<S = DictionaryDrafter> {
    dictionary: S,
    prompt: PromptLookup,
    order: HybridOrder,
    from_dictionary: u64,
    from_prompt: u64,
}

impl<S: StaticSource> Hybrid<S> {
    /// Combines the two drafters in `order` (the static one is called "the dictionary" below,
    /// whichever it is).
    pub fn new(dictionary: S, prompt: PromptLookup, order: HybridOrder) -> Self {
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

impl<S: StaticSource> Drafter for Hybrid<S> {
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
