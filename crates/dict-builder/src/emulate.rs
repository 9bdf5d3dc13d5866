//! The emulator of dictspec.txt §4.5 ("an exact speculative-decoding emulator that replays
//! pre-tokenized reference text"): replay reference tokens through any drafter as greedy
//! verification would, and count steps. The dictionary drafter it is run with looks up the
//! longest matching suffix of up to 8 tokens and proposes up to γ = 8, as §4.5 states.
//!
//! At each position the drafter sees the reference up to that position and proposes up to γ
//! tokens; the longest prefix of the proposal that equals the reference is accepted, and the
//! position advances by `accepted + 1` (the target's own token comes for free with every
//! verification step). No model runs: the reference text stands in for the target's greedy
//! output, so the numbers are exactly what a greedy target that produces this text would see.
//! Metrics come from [`EmulationCounts`], as §4.5.1 defines them: speedup = tokens / steps,
//! coverage, mean accepted length and acceptance rate.

use anyspec_core::theory::EmulationCounts;
use anyspec_core::{Drafter, Progress, ProgressUnit, SamplingConfig};
use rand::SeedableRng;
use rand::rngs::StdRng;

use crate::error::{Error, Result};

/// How reference text is replayed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EmulationConfig {
    /// Most tokens drafted per step (γ ≥ 1).
    pub gamma: usize,
    /// Leading tokens of each sequence given as context only (the "prompt"), not replayed.
    pub prompt_tokens: usize,
}

impl Default for EmulationConfig {
    fn default() -> Self {
        EmulationConfig { gamma: 8, prompt_tokens: 0 }
    }
}

/// Replays one reference sequence, adding its steps to `counts`.
///
/// The drafter is asked with greedy sampling settings and a fixed-seed RNG; deterministic
/// drafters ignore both.
///
/// # Errors
/// [`Error::InvalidParameter`] for γ = 0, [`Error::Drafter`] when the drafter fails and
/// [`Error::DraftTooLong`] when it proposes more than it was asked for.
pub fn emulate_sequence(
    drafter: &mut dyn Drafter,
    reference: &[u32],
    config: &EmulationConfig,
    counts: &mut EmulationCounts,
) -> Result<()> {
    if config.gamma == 0 {
        return Err(Error::invalid("gamma", "≥ 1 (the most tokens drafted per step)", 0));
    }
    let sampling = SamplingConfig::greedy();
    let mut rng = StdRng::seed_from_u64(0);
    let mut pos = config.prompt_tokens.min(reference.len());
    while pos < reference.len() {
        // A step emits up to γ + 1 tokens; never draft past the end of the reference.
        let max_tokens = config.gamma.min(reference.len() - pos - 1);
        let (drafted, accepted) = if max_tokens == 0 {
            (0, 0)
        } else {
            let draft = drafter.propose(&reference[..pos], max_tokens, &sampling, &mut rng).map_err(Error::Drafter)?;
            if draft.len() > max_tokens {
                return Err(Error::DraftTooLong { max: max_tokens, got: draft.len() });
            }
            let accepted = draft.tokens.iter().zip(&reference[pos..]).take_while(|(d, r)| d == r).count();
            (draft.len(), accepted)
        };
        counts.record_step(drafted, accepted, accepted + 1);
        pos += accepted + 1;
    }
    Ok(())
}

/// Replays every sequence in turn (each starts from an empty context) and returns the totals,
/// reporting progress in tokens under the stage name `"emulating"`.
///
/// # Errors
/// As [`emulate_sequence`].
pub fn emulate<S: AsRef<[u32]>>(
    drafter: &mut dyn Drafter,
    sequences: &[S],
    config: &EmulationConfig,
    progress: &dyn Progress,
) -> Result<EmulationCounts> {
    let total: usize = sequences.iter().map(|s| s.as_ref().len()).sum();
    progress.start("emulating", Some(total as u64), ProgressUnit::Items);
    let mut counts = EmulationCounts::default();
    for sequence in sequences {
        emulate_sequence(drafter, sequence.as_ref(), config, &mut counts)?;
        progress.advance(sequence.as_ref().len() as u64);
    }
    progress.finish();
    Ok(counts)
}

#[cfg(test)]
mod tests {
    use anyspec_core::Draft;
    use rand::RngCore;

    use super::*;

    /// Always proposes the fixed tokens that follow in a known script, with one planted mistake.
    struct Scripted {
        script: Vec<u32>,
        wrong_at: usize,
    }

    impl Drafter for Scripted {
        fn propose(
            &mut self,
            context: &[u32],
            max_tokens: usize,
            _: &SamplingConfig,
            _: &mut dyn RngCore,
        ) -> anyspec_core::Result<Draft> {
            let mut tokens: Vec<u32> =
                self.script[context.len()..].iter().copied().take(max_tokens).collect::<Vec<u32>>();
            for (i, t) in tokens.iter_mut().enumerate() {
                if context.len() + i == self.wrong_at {
                    *t += 1000;
                }
            }
            Ok(Draft::deterministic(tokens))
        }
    }

    #[test]
    fn a_perfect_drafter_emits_gamma_plus_one_per_step() {
        let reference: Vec<u32> = (0..10).collect();
        let mut drafter = Scripted { script: reference.clone(), wrong_at: usize::MAX };
        let mut counts = EmulationCounts::default();
        emulate_sequence(&mut drafter, &reference, &EmulationConfig { gamma: 3, prompt_tokens: 0 }, &mut counts)
            .unwrap();
        // Steps: pos 0 → 4 → 8 → (max_tokens 1) 10.
        assert_eq!(counts.steps, 3);
        assert_eq!(counts.tokens, 10);
        assert_eq!(counts.drafted, 3 + 3 + 1);
        assert_eq!(counts.accepted, 7);
        assert!((counts.speedup() - 10.0 / 3.0).abs() < 1e-12);
    }

    #[test]
    fn a_mistake_cuts_the_accepted_prefix() {
        let reference: Vec<u32> = (0..6).collect();
        let mut drafter = Scripted { script: reference.clone(), wrong_at: 2 };
        let mut counts = EmulationCounts::default();
        emulate_sequence(&mut drafter, &reference, &EmulationConfig { gamma: 4, prompt_tokens: 1 }, &mut counts)
            .unwrap();
        // pos 1: draft [1, 1002, 3, 4] accepts 1 → pos 3; draft [3, 4] (2 left) accepts 2 → pos 6.
        assert_eq!((counts.steps, counts.tokens, counts.drafted, counts.accepted), (2, 5, 6, 3));
        assert!((counts.acceptance_rate() - 0.5).abs() < 1e-12);
        assert!((counts.mean_accepted_length() - 1.5).abs() < 1e-12);
        assert!((counts.coverage() - 1.0).abs() < 1e-12);
    }

    #[test]
    fn an_overlong_draft_is_an_error() {
        struct Greedy;
        impl Drafter for Greedy {
            fn propose(
                &mut self,
                _: &[u32],
                max_tokens: usize,
                _: &SamplingConfig,
                _: &mut dyn RngCore,
            ) -> anyspec_core::Result<Draft> {
                Ok(Draft::deterministic(vec![0; max_tokens + 1]))
            }
        }
        let err =
            emulate_sequence(&mut Greedy, &[1, 2, 3], &EmulationConfig::default(), &mut EmulationCounts::default());
        assert!(matches!(err, Err(Error::DraftTooLong { .. })));
    }
}
