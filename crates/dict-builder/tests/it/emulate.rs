//! The emulator on a crafted text whose answer is worked out by hand.

use anyspec_core::theory::EmulationCounts;
use anyspec_core::{Draft, Drafter, NoProgress, SamplingConfig};
use anyspec_dict_builder::{Dictionary, EmulationConfig, emulate, emulate_sequence};
use rand::RngCore;

use crate::common::crafted;

/// The dictionary drafter, written out here because `anyspec-drafters` depends on this crate.
struct Lookup(Dictionary);

impl Drafter for Lookup {
    fn propose(
        &mut self,
        context: &[u32],
        max_tokens: usize,
        _: &SamplingConfig,
        _: &mut dyn RngCore,
    ) -> anyspec_core::Result<Draft> {
        let mut out = Vec::new();
        Ok(match self.0.longest_suffix_match(context, max_tokens, &mut out) {
            Some(_) => Draft::deterministic(out),
            None => Draft::empty(),
        })
    }
}

#[test]
fn known_answer() {
    let mut drafter = Lookup(crafted(&[(&[1], &[2, 3]), (&[3], &[9])]));
    let reference = [1, 2, 3, 4, 1, 2, 5];
    let mut counts = EmulationCounts::default();
    emulate_sequence(&mut drafter, &reference, &EmulationConfig { gamma: 8, prompt_tokens: 0 }, &mut counts).unwrap();
    // pos 0: empty context, no draft, emit 1.        → pos 1
    // pos 1: [1] → [2, 3], both match, emit 3.       → pos 4
    // pos 4: context ends in 4, no draft, emit 1.    → pos 5
    // pos 5: [1] → [2] (one token left to draft), matches, emit 2. → pos 7
    assert_eq!(counts, EmulationCounts { tokens: 7, steps: 4, steps_with_draft: 2, drafted: 3, accepted: 3 });
    assert!((counts.speedup() - 1.75).abs() < 1e-12);
    assert!((counts.coverage() - 0.5).abs() < 1e-12);
    assert!((counts.mean_accepted_length() - 1.5).abs() < 1e-12);
    assert!((counts.acceptance_rate() - 1.0).abs() < 1e-12);

    // A wrong guess: after 3 the dictionary says 9 but the text says 4.
    let mut counts = EmulationCounts::default();
    emulate_sequence(&mut drafter, &[3, 4], &EmulationConfig { gamma: 2, prompt_tokens: 1 }, &mut counts).unwrap();
    // pos 1: one token left, nothing may be drafted.
    assert_eq!(counts, EmulationCounts { tokens: 1, steps: 1, steps_with_draft: 0, drafted: 0, accepted: 0 });
    let counts =
        emulate(&mut drafter, &[vec![3, 4, 4]], &EmulationConfig { gamma: 2, prompt_tokens: 1 }, &NoProgress).unwrap();
    // pos 1: [3] → [9] rejected, emit 1; pos 2: no draft allowed, emit 1.
    assert_eq!(counts, EmulationCounts { tokens: 2, steps: 2, steps_with_draft: 1, drafted: 1, accepted: 0 });
    assert_eq!(counts.speedup(), 1.0);
}

#[test]
fn gamma_zero_is_refused() {
    let mut drafter = Lookup(crafted(&[(&[1], &[2])]));
    let err = emulate_sequence(
        &mut drafter,
        &[1, 2],
        &EmulationConfig { gamma: 0, prompt_tokens: 0 },
        &mut Default::default(),
    )
    .unwrap_err();
    assert!(err.to_string().contains("gamma"));
}
