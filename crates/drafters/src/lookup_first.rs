//! Prompt lookup first, any other drafter when it has nothing: the cheap exact copy where the
//! output repeats the input, a model (an EAGLE feature drafter, a small model) elsewhere.

use anyspec_core::{Draft, Drafter, SamplingConfig};
use rand::RngCore;

use crate::prompt_lookup::PromptLookup;

/// The confidence class that [`LookupFirst::source_class`] announces when the fallback will
/// draft, apart from every other drafter's classes: the γ tuner learns the fallback's acceptance
/// and cost under it, apart from prompt lookup's.
pub const FALLBACK_CLASS: u16 = 2048;

/// [`PromptLookup`]'s draft when it has one, else `fallback`'s.
///
/// Prompt lookup costs microseconds and, where it matches, is right far more often than a
/// model; a model drafts everywhere else. Drafters that keep a cache (model and feature
/// drafters) catch up with the context when they are next asked, so skipping them for some
/// steps costs nothing. Each draft carries its own origin (lookup's is deterministic, a
/// sampling drafter's carries its distributions), so verification stays exact either way.
#[derive(Clone, Debug)]
pub struct LookupFirst<D> {
    prompt: PromptLookup,
    fallback: D,
    from_prompt: u64,
    from_fallback: u64,
}

impl<D: Drafter> LookupFirst<D> {
    /// Prompt lookup, then `fallback`.
    pub fn new(prompt: PromptLookup, fallback: D) -> Self {
        LookupFirst { prompt, fallback, from_prompt: 0, from_fallback: 0 }
    }

    /// How many drafts came from prompt lookup and from the fallback so far.
    pub fn sources(&self) -> (u64, u64) {
        (self.from_prompt, self.from_fallback)
    }

    /// The fallback drafter.
    pub fn fallback(&self) -> &D {
        &self.fallback
    }
}

impl<D: Drafter> Drafter for LookupFirst<D> {
    fn propose(
        &mut self,
        context: &[u32],
        max_tokens: usize,
        sampling: &SamplingConfig,
        rng: &mut dyn RngCore,
    ) -> anyspec_core::Result<Draft> {
        let prompt = self.prompt.draft(context, max_tokens);
        if !prompt.is_empty() {
            self.from_prompt += 1;
            return Ok(prompt);
        }
        let draft = self.fallback.propose(context, max_tokens, sampling, rng)?;
        if !draft.is_empty() {
            self.from_fallback += 1;
        }
        Ok(draft)
    }

    /// Prompt lookup's class (the length of the match) when it has a draft for `context`, else
    /// [`FALLBACK_CLASS`]: the two sources' acceptance and cost differ by far (prompt lookup
    /// costs microseconds, an EAGLE drafter about a tenth of a target step per token), so the γ
    /// tuner asks each for what its own figures pay (`GammaTuner::next_gamma_for`). Prompt
    /// lookup runs again in `propose`; it costs microseconds.
    fn source_class(&mut self, context: &[u32]) -> Option<u16> {
        let prompt = self.prompt.draft(context, 1);
        if prompt.is_empty() { Some(FALLBACK_CLASS) } else { prompt.cut_class() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::PromptLookupConfig;
    use rand::SeedableRng;

    /// Proposes `[7, 7]` and counts its calls.
    struct Sevens(u32);

    impl Drafter for Sevens {
        fn propose(
            &mut self,
            _: &[u32],
            max_tokens: usize,
            _: &SamplingConfig,
            _: &mut dyn RngCore,
        ) -> anyspec_core::Result<Draft> {
            self.0 += 1;
            Ok(Draft::deterministic(vec![7; max_tokens.min(2)]))
        }
    }

    #[test]
    fn lookup_drafts_where_the_context_repeats_and_the_fallback_elsewhere() {
        let mut d = LookupFirst::new(PromptLookup::new(PromptLookupConfig::default()).unwrap(), Sevens(0));
        let mut rng = rand::rngs::StdRng::seed_from_u64(0);
        let greedy = SamplingConfig::greedy();
        // "1 2 3 4 … 1 2" repeats: lookup copies "3 4".
        let draft = d.propose(&[1, 2, 3, 4, 5, 1, 2], 2, &greedy, &mut rng).unwrap();
        assert_eq!(draft.tokens, vec![3, 4]);
        assert_eq!(d.fallback().0, 0, "the fallback was not asked");
        // Nothing repeats: the fallback drafts.
        let draft = d.propose(&[10, 11, 12], 3, &greedy, &mut rng).unwrap();
        assert_eq!(draft.tokens, vec![7, 7]);
        assert_eq!(d.sources(), (1, 1));
    }

    #[test]
    fn the_source_is_announced_before_drafting_without_asking_the_fallback() {
        let mut d = LookupFirst::new(PromptLookup::new(PromptLookupConfig::default()).unwrap(), Sevens(0));
        let mut rng = rand::rngs::StdRng::seed_from_u64(0);
        let greedy = SamplingConfig::greedy();
        // A match: the class of lookup's draft (its match length), as `propose` then labels it.
        let context = [1, 2, 3, 4, 5, 1, 2];
        let announced = d.source_class(&context);
        let draft = d.propose(&context, 2, &greedy, &mut rng).unwrap();
        assert!(announced.is_some_and(|c| c < FALLBACK_CLASS), "{announced:?}");
        assert_eq!(announced, draft.cut_class());
        // No match: the fallback's class, and the fallback itself is not run to say so.
        assert_eq!(d.source_class(&[10, 11, 12]), Some(FALLBACK_CLASS));
        assert_eq!(d.fallback().0, 0);
    }
}
