//! A smaller model that shares the target's tokenizer drafts by sampling its own distribution.

use anyspec_core::sampling::{argmax, logits_to_probs, sample};
use anyspec_core::{Draft, Drafter, SamplingConfig};
use anyspec_models::{Llama, Session};
use rand::RngCore;

/// The homogeneous model drafter of speculative-decoding.txt: a small model over the target's
/// vocabulary proposes γ tokens autoregressively.
///
/// At temperature 0 the draft is the drafter's greedy continuation, returned as a deterministic
/// draft; otherwise each token is drawn from the drafter's distribution after the same
/// [`SamplingConfig`] transform the target uses, and the draft carries those distributions
/// (over the target's vocabulary) for speculative sampling.
///
/// The drafter keeps its own KV cache: each call compares the context with the tokens it has
/// cached and reuses the common prefix, so a rejected suffix is dropped and an accepted one is
/// reused without being told which happened.
#[derive(Clone, Debug)]
pub struct ModelDrafter {
    session: Session,
    target_vocab_size: usize,
}

impl ModelDrafter {
    /// Wraps a loaded model that drafts for a target with `target_vocab_size` ids.
    ///
    /// The two vocabularies must be the same tokenizer (check with
    /// `TextTokenizer::vocabulary_fingerprint` before building one); only the size of the
    /// embedding matrices may differ (checkpoints pad them). Drafter ids at or beyond the target's
    /// vocabulary are never proposed; target ids beyond the drafter's get probability 0.
    pub fn new(model: Llama, target_vocab_size: usize) -> Self {
        ModelDrafter { session: Session::new(model), target_vocab_size }
    }

    /// The drafter's model.
    pub fn model(&self) -> &Llama {
        self.session.model()
    }

    /// The drafter's logits for the next token after `sequence`, as a row over the target's
    /// vocabulary: ids past the drafter's vocabulary are masked (−∞).
    fn next_logits(&mut self, sequence: &[u32]) -> anyspec_core::Result<Vec<f32>> {
        let mut row = self
            .session
            .logits_on_host(sequence, 1)
            .map_err(|e| anyspec_core::Error::Drafter(Box::new(e)))?
            .pop()
            .unwrap_or_default();
        row.resize(self.target_vocab_size, f32::NEG_INFINITY);
        Ok(row)
    }
}

impl Drafter for ModelDrafter {
    fn propose(
        &mut self,
        context: &[u32],
        max_tokens: usize,
        sampling: &SamplingConfig,
        rng: &mut dyn RngCore,
    ) -> anyspec_core::Result<Draft> {
        let drafter_vocab = self.model().config().vocab_size;
        // Context ids the drafter cannot embed mean the tokenizers differ: no guess this step.
        if context.is_empty() || context.iter().any(|&t| t as usize >= drafter_vocab) {
            return Ok(Draft::empty());
        }
        let room = self.model().config().max_position_embeddings.saturating_sub(context.len());
        // The last drafted token is sampled, never fed, so a full window still allows one more.
        let count = max_tokens.min(room + 1);
        let mut sequence = context.to_vec();
        let mut tokens = Vec::with_capacity(count);
        let mut distributions = Vec::with_capacity(count);
        for _ in 0..count {
            if sequence.len() > self.model().config().max_position_embeddings {
                break;
            }
            let logits = self.next_logits(&sequence)?;
            let token = if sampling.is_greedy() {
                // The greedy token straight from the logits: no softmax over the vocabulary.
                argmax(&logits)
            } else {
                let probs = logits_to_probs(&logits, sampling)?;
                let token = sample(&probs, rng)?;
                distributions.push(probs);
                token
            };
            tokens.push(token);
            sequence.push(token);
        }
        Ok(if sampling.is_greedy() { Draft::deterministic(tokens) } else { Draft::sampled(tokens, distributions) })
    }
}

#[cfg(test)]
mod tests {
    use std::ops::ControlFlow;
    use std::path::PathBuf;

    use anyspec_core::{DraftOrigin, GenerationConfig, generate};
    use anyspec_models::{Checkpoint, DeviceChoice, LlamaTarget};
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    use super::*;

    /// The conformance fixtures of anyspec-models share one 320-token tokenizer.
    fn load(name: &str) -> Llama {
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../models/tests/data").join(name);
        Checkpoint::open(dir).unwrap().load_model(&DeviceChoice::Cpu.device().unwrap()).unwrap()
    }

    fn prompt() -> Vec<u32> {
        vec![1, 54, 260, 223, 83, 87, 75, 69, 77, 278]
    }

    fn run(drafter: Option<&mut ModelDrafter>, sampling: SamplingConfig, seed: u64) -> anyspec_core::Generation {
        let mut target = LlamaTarget::new(load("llama3-gqa"));
        let config = GenerationConfig { gamma: 4, max_new_tokens: 40, sampling, ..GenerationConfig::default() };
        let mut rng = StdRng::seed_from_u64(seed);
        let drafter = drafter.map(|d| d as &mut dyn Drafter);
        generate(&mut target, drafter, &prompt(), &config, &mut rng, &mut |_| ControlFlow::Continue(())).unwrap()
    }

    #[test]
    fn greedy_speculative_decoding_equals_autoregressive_decoding() {
        let plain = run(None, SamplingConfig::greedy(), 0);
        let mut drafter = ModelDrafter::new(load("qwen2-tied-bf16"), 320);
        let speculative = run(Some(&mut drafter), SamplingConfig::greedy(), 0);
        assert_eq!(speculative.tokens, plain.tokens);
        assert!(speculative.stats.steps < plain.stats.steps || speculative.stats.accepted == 0);
        assert!(speculative.stats.drafted > 0);
    }

    #[test]
    fn the_target_drafting_for_itself_is_always_accepted() {
        // p = q at every position (up to float rounding between one- and k-token passes), so
        // speculative sampling accepts every drafted token: this checks that the drafter reports
        // exactly the distributions it sampled from, after the same transform as the target.
        let mut drafter = ModelDrafter::new(load("llama3-gqa"), 320);
        let out = run(Some(&mut drafter), SamplingConfig::new(0.8, None, 1.0).unwrap(), 7);
        assert!(out.stats.acceptance_rate() > 0.97, "{:?}", out.stats);
    }

    #[test]
    fn sampled_drafts_carry_normalized_distributions_that_contain_the_tokens() {
        let mut drafter = ModelDrafter::new(load("mistral-window-f16"), 320);
        let mut rng = StdRng::seed_from_u64(3);
        let draft = drafter.propose(&prompt(), 5, &SamplingConfig::default(), &mut rng).unwrap();
        let DraftOrigin::Sampled { distributions, outside_target: None } = &draft.origin else {
            panic!("expected a sampled draft, got {:?}", draft.origin);
        };
        assert_eq!((draft.len(), distributions.len()), (5, 5));
        for (token, q) in draft.tokens.iter().zip(distributions) {
            let sum: f64 = q.iter().map(|&x| f64::from(x)).sum();
            assert!((sum - 1.0).abs() < 1e-4 && q.len() == 320 && q[*token as usize] > 0.0);
        }
    }

    #[test]
    fn a_changed_context_rolls_the_cache_back() {
        let mut reused = ModelDrafter::new(load("mistral-window-f16"), 320);
        let greedy = SamplingConfig::greedy();
        let mut rng = StdRng::seed_from_u64(0);
        let first = reused.propose(&prompt(), 4, &greedy, &mut rng).unwrap();
        // The target rejected everything after the first drafted token and corrected it.
        let mut context = prompt();
        context.push(first.tokens[0]);
        context.push((first.tokens[1] + 1) % 320);
        let again = reused.propose(&context, 4, &greedy, &mut rng).unwrap();
        let fresh = ModelDrafter::new(load("mistral-window-f16"), 320).propose(&context, 4, &greedy, &mut rng).unwrap();
        assert_eq!(again, fresh);
    }

    #[test]
    fn a_larger_target_vocabulary_gets_zero_probability_beyond_the_drafter() {
        let mut drafter = ModelDrafter::new(load("mistral-window-f16"), 400);
        let mut rng = StdRng::seed_from_u64(1);
        let draft = drafter.propose(&prompt(), 2, &SamplingConfig::default(), &mut rng).unwrap();
        let DraftOrigin::Sampled { distributions, .. } = &draft.origin else { panic!() };
        assert!(distributions.iter().all(|q| q.len() == 400 && q[320..].iter().all(|&x| x == 0.0)));
    }
}
