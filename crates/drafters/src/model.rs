//! A smaller model that shares the target's tokenizer drafts by sampling its own distribution.

use anyspec_core::{Draft, DraftBuilder, Drafter, SamplingConfig};
use anyspec_models::{Llama, Session};
use rand::RngCore;

use crate::error::Error;

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
///
/// A drafter whose context window is shorter than the context slides over it: it sees only the
/// most recent tokens, from an offset that is kept while the window allows, so the cache is
/// rebuilt once per half window rather than at every step. Its drafts are worse than with the
/// whole context, and still verified by the target, so the output is unchanged.
#[derive(Clone, Debug)]
pub struct ModelDrafter {
    session: Session,
    target_vocab_size: usize,
    /// Where the window starts in the context once the context outgrows it (0 while it fits).
    window_start: usize,
}

impl ModelDrafter {
    /// Wraps a loaded model that drafts for a target with `target_vocab_size` ids.
    ///
    /// The two vocabularies must be the same tokenizer (check with
    /// `TextTokenizer::vocabulary_fingerprint` before building one); only the size of the
    /// embedding matrices may differ (checkpoints pad them). Drafter ids at or beyond the target's
    /// vocabulary are never proposed; target ids beyond the drafter's get probability 0.
    pub fn new(model: Llama, target_vocab_size: usize) -> Self {
        ModelDrafter { session: Session::new(model), target_vocab_size, window_start: 0 }
    }

    /// The drafter's model.
    pub fn model(&self) -> &Llama {
        self.session.model()
    }

    /// The first context position the drafter feeds, for a context of `len` tokens of which at
    /// most `fits` can be fed: 0 while the whole context fits; once it does not, the offset of
    /// the last half window, kept (so the drafter's cache stays valid) until the context outgrows
    /// it again.
    fn window_start(&mut self, len: usize, fits: usize) -> usize {
        if len <= fits {
            self.window_start = 0;
        } else if self.window_start > len || len - self.window_start > fits {
            self.window_start = len - (fits / 2).max(1);
        }
        self.window_start
    }

    /// The drafter's logits for the next token after `sequence`, as a row over the target's
    /// vocabulary: ids past the drafter's vocabulary are masked (−∞).
    fn next_logits(&mut self, sequence: &[u32]) -> anyspec_core::Result<Vec<f32>> {
        let mut row = self.session.logits_on_host(sequence, 1).map_err(Error::Model)?.pop().unwrap_or_default();
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
        let window = self.model().config().max_position_embeddings;
        if window == 0 || max_tokens == 0 {
            return Ok(Draft::empty());
        }
        // The last drafted token is sampled, never fed: `count` tokens need `count - 1` positions
        // beyond the context, so at most `fits` context tokens can be fed.
        let count = max_tokens.min(window);
        let fits = window + 1 - count;
        let start = self.window_start(context.len(), fits);
        let mut sequence = context[start..].to_vec();
        let mut draft = DraftBuilder::new(sampling, count);
        for _ in 0..count {
            let logits = self.next_logits(&sequence)?;
            sequence.push(draft.push_from_logits(&logits, rng)?);
        }
        Ok(draft.finish())
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

    /// The fixture `name` with its context window cut to `window` positions (its files copied
    /// into a temporary directory with an edited config.json).
    fn load_with_window(name: &str, window: usize) -> Llama {
        let source = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../models/tests/data").join(name);
        let dir = std::env::temp_dir().join(format!("anyspec-drafter-window-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for file in ["model.safetensors", "tokenizer.json"] {
            std::fs::copy(source.join(file), dir.join(file)).unwrap();
        }
        let config = std::fs::read_to_string(source.join("config.json")).unwrap();
        let edited =
            config.replace("\"max_position_embeddings\": 128", &format!("\"max_position_embeddings\": {window}"));
        assert_ne!(edited, config, "the fixture's window is no longer 128");
        std::fs::write(dir.join("config.json"), edited).unwrap();
        let model = Checkpoint::open(&dir).unwrap().load_model(&DeviceChoice::Cpu.device().unwrap()).unwrap();
        std::fs::remove_dir_all(&dir).ok();
        model
    }

    #[test]
    fn a_drafter_with_a_short_window_slides_over_the_context() {
        let greedy = SamplingConfig::greedy();
        let mut rng = StdRng::seed_from_u64(0);
        let mut short = ModelDrafter::new(load_with_window("llama3-gqa", 16), 320);
        // A 30-token context in a 16-position window: the drafter used to propose nothing here.
        let context: Vec<u32> = (0..30).map(|i| 40 + (i * 7) % 200).collect();
        let draft = short.propose(&context, 4, &greedy, &mut rng).unwrap();
        assert_eq!(draft.len(), 4);
        // It drafts from the most recent tokens: a drafter with the whole window sees the same
        // tail and proposes the same tokens.
        let tail = &context[context.len() - 6..];
        let mut whole = ModelDrafter::new(load("llama3-gqa"), 320);
        assert_eq!(whole.propose(tail, 4, &greedy, &mut rng).unwrap(), draft);
        // Speculative decoding with it, far past its window, still gives the target's output.
        let plain = run(None, greedy.clone(), 0);
        let mut short = ModelDrafter::new(load_with_window("llama3-gqa", 16), 320);
        let out = run(Some(&mut short), greedy, 0);
        assert_eq!(out.tokens, plain.tokens);
        assert!(out.stats.accepted > 0, "{:?}", out.stats);
        assert!(out.stats.drafted >= 4 * (out.stats.steps - 2), "it stopped drafting: {:?}", out.stats);
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
