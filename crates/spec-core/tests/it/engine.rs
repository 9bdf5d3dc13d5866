//! The draft → verify loop: stop conditions, streaming, statistics and contract checks.

use std::ops::ControlFlow;

use anyspec_core::toy::{Bridge, DraftMode, MarkovChain, MarkovDrafter, MarkovTarget};
use anyspec_core::{Draft, Drafter, Error, GenerationConfig, Result, SamplingConfig, StopReason, Target, generate};
use rand::rngs::StdRng;
use rand::{RngCore, SeedableRng};

fn pair(seed: u64) -> (MarkovTarget, MarkovDrafter) {
    let mut rng = StdRng::seed_from_u64(seed);
    let chain = MarkovChain::random(6, 6, 2.0, &mut rng);
    let drafter = MarkovDrafter::new(chain.perturbed(0.5, &mut rng), Bridge::Same, DraftMode::Sample).unwrap();
    (MarkovTarget::new(chain).unwrap(), drafter)
}

fn run(
    target: &mut dyn Target,
    drafter: Option<&mut dyn Drafter>,
    config: &GenerationConfig,
) -> Result<anyspec_core::Generation> {
    generate(target, drafter, &[0, 1], config, &mut StdRng::seed_from_u64(1), &mut |_| ControlFlow::Continue(()))
}

#[test]
fn each_step_is_one_target_call_and_the_counters_add_up() {
    let (mut target, mut drafter) = pair(1);
    let config = GenerationConfig { gamma: 4, max_new_tokens: 200, ..GenerationConfig::default() };
    let g = run(&mut target, Some(&mut drafter), &config).unwrap();
    assert_eq!(g.tokens.len(), 200);
    assert_eq!(g.stop_reason, StopReason::MaxTokens);
    assert_eq!(target.score_calls, g.stats.steps);
    // Without stop tokens every step emits its accepted tokens plus one.
    assert_eq!(g.stats.generated, g.stats.accepted + g.stats.steps);
    assert!(g.stats.steps < 200, "a close drafter must save target calls");
    assert!(g.stats.drafted <= 4 * g.stats.steps);
}

#[test]
fn without_a_drafter_each_step_is_one_token() {
    let (mut target, _) = pair(2);
    let config = GenerationConfig { max_new_tokens: 17, ..GenerationConfig::default() };
    let g = run(&mut target, None, &config).unwrap();
    assert_eq!((g.stats.steps, g.stats.generated, g.stats.drafted), (17, 17, 0));
    assert_eq!(g.stats.tokens_per_step(), 1.0);
}

#[test]
fn a_stop_token_ends_generation_even_inside_an_accepted_draft() {
    let (mut target, mut drafter) = pair(3);
    let free =
        run(&mut target, Some(&mut drafter), &GenerationConfig { max_new_tokens: 60, ..Default::default() }).unwrap();
    let stop = free.tokens[10];
    let first = free.tokens.iter().position(|&t| t == stop).unwrap();
    let (mut target, mut drafter) = pair(3);
    let config = GenerationConfig { max_new_tokens: 60, stop_tokens: vec![stop], ..Default::default() };
    let g = run(&mut target, Some(&mut drafter), &config).unwrap();
    assert_eq!(g.stop_reason, StopReason::StopToken(stop));
    assert_eq!(g.tokens, free.tokens[..=first].to_vec(), "same seed, same tokens, cut at the stop token");
}

#[test]
fn the_callback_streams_every_token_and_can_stop() {
    let (mut target, mut drafter) = pair(4);
    let mut streamed = Vec::new();
    let config = GenerationConfig { max_new_tokens: 50, ..Default::default() };
    let g = generate(&mut target, Some(&mut drafter), &[0], &config, &mut StdRng::seed_from_u64(5), &mut |t| {
        streamed.push(t);
        if streamed.len() == 7 { ControlFlow::Break(()) } else { ControlFlow::Continue(()) }
    })
    .unwrap();
    assert_eq!(g.stop_reason, StopReason::Callback);
    assert_eq!(streamed, g.tokens);
    assert_eq!(g.tokens.len(), 7);
}

/// A target with a small context window.
struct Windowed(MarkovTarget, usize);

impl Target for Windowed {
    fn vocab_size(&self) -> usize {
        self.0.vocab_size()
    }
    fn max_sequence_len(&self) -> Option<usize> {
        Some(self.1)
    }
    fn score(&mut self, sequence: &[u32], draft_len: usize) -> Result<Vec<Vec<f32>>> {
        assert!(sequence.len() <= self.1, "scored {} tokens in a window of {}", sequence.len(), self.1);
        self.0.score(sequence, draft_len)
    }
    fn rollback(&mut self, len: usize) -> Result<()> {
        self.0.rollback(len)
    }
}

#[test]
fn a_full_context_window_stops_generation_without_overflowing_it() {
    let (target, mut drafter) = pair(5);
    let mut windowed = Windowed(target, 12);
    let g = run(&mut windowed, Some(&mut drafter), &GenerationConfig { max_new_tokens: 100, ..Default::default() })
        .unwrap();
    assert_eq!(g.stop_reason, StopReason::ContextFull);
    assert_eq!(g.tokens.len(), 10, "a 2-token prompt leaves 10 places");
    let err = generate(
        &mut windowed,
        None,
        &[0; 12],
        &GenerationConfig::default(),
        &mut StdRng::seed_from_u64(0),
        &mut |_| ControlFlow::Continue(()),
    )
    .unwrap_err();
    assert!(matches!(err, Error::PromptTooLong { prompt_len: 12, max_len: 12 }), "{err}");
}

#[test]
fn bad_inputs_are_clear_errors() {
    let (mut target, _) = pair(6);
    let config = GenerationConfig::default();
    let mut rng = StdRng::seed_from_u64(0);
    let mut cont = |_| ControlFlow::Continue(());
    let err = generate(&mut target, None, &[], &config, &mut rng, &mut cont).unwrap_err();
    assert!(matches!(err, Error::EmptyPrompt));
    let err = generate(&mut target, None, &[99], &config, &mut rng, &mut cont).unwrap_err();
    assert!(matches!(err, Error::TokenOutOfRange { token: 99, vocab_size: 6 }));
    let zero_gamma = GenerationConfig { gamma: 0, ..GenerationConfig::default() };
    assert!(
        generate(&mut target, None, &[1], &zero_gamma, &mut rng, &mut cont).unwrap_err().to_string().contains("gamma")
    );
    let bad_top_p =
        GenerationConfig { sampling: SamplingConfig { top_p: 0.0, ..Default::default() }, ..Default::default() };
    assert!(
        generate(&mut target, None, &[1], &bad_top_p, &mut rng, &mut cont).unwrap_err().to_string().contains("top_p")
    );
}

/// Breaks the drafter contract in one of several ways.
struct Rogue(u8);

impl Drafter for Rogue {
    fn propose(&mut self, _: &[u32], max: usize, _: &SamplingConfig, _: &mut dyn RngCore) -> Result<Draft> {
        Ok(match self.0 {
            0 => Draft::deterministic(vec![0; max + 1]),
            1 => Draft::deterministic(vec![1000]),
            _ => Draft::sampled(vec![1, 2], vec![vec![1.0 / 6.0; 6]]),
        })
    }
}

#[test]
fn drafters_that_break_the_contract_are_refused() {
    let config = GenerationConfig { gamma: 3, max_new_tokens: 10, ..Default::default() };
    for (kind, needle) in [(0, "at most the γ"), (1, "1000"), (2, "expected length 2")] {
        let (mut target, _) = pair(7);
        let err = run(&mut target, Some(&mut Rogue(kind)), &config).unwrap_err().to_string();
        assert!(err.contains(needle), "rogue drafter {kind}: {err}");
    }
}

/// Drafts one token (after a pause) at the calls its schedule marks, nothing at the others.
struct Scheduled(Vec<bool>, usize);

impl Drafter for Scheduled {
    fn propose(&mut self, _: &[u32], _: usize, _: &SamplingConfig, _: &mut dyn RngCore) -> Result<Draft> {
        let drafts = self.0.get(self.1).copied().unwrap_or(false);
        self.1 += 1;
        if !drafts {
            return Ok(Draft::empty());
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
        Ok(Draft::deterministic(vec![3]))
    }
}

#[test]
fn steady_drafting_counts_only_steps_that_follow_a_drafting_step() {
    // Steps 2, 7 and 8 follow a step that drafted; steps 1, 4 and 6 follow none (or nothing).
    let schedule = vec![true, true, false, true, false, true, true, true];
    let config = GenerationConfig { gamma: 2, max_new_tokens: 100, ..GenerationConfig::default() };
    let (mut target, _) = pair(3);
    let g = run(&mut target, Some(&mut Scheduled(schedule.clone(), 0)), &config).unwrap();
    assert!(g.stats.steps as usize > schedule.len());
    assert_eq!(g.stats.drafted, 6);
    assert_eq!(g.stats.steady_drafted, 3);
    // Each drafting call pauses 2 ms, so the steady time holds three pauses and the total six.
    assert!(g.stats.steady_draft_time >= std::time::Duration::from_millis(6));
    assert!(g.stats.draft_time >= g.stats.steady_draft_time + std::time::Duration::from_millis(6));
    let cost = g.stats.steady_draft_cost().unwrap();
    assert!((cost - g.stats.steady_draft_time.as_secs_f64() / 3.0).abs() < 1e-12);
    // Merging adds the steady counters too.
    let mut sum = g.stats.clone();
    sum.merge(&g.stats);
    assert_eq!((sum.steady_drafted, sum.steady_draft_time), (6, 2 * g.stats.steady_draft_time));
    // Never two drafting steps in a row: no steady cost to report.
    let (mut target, _) = pair(3);
    let alternate = vec![true, false, true, false];
    let g = run(&mut target, Some(&mut Scheduled(alternate, 0)), &config).unwrap();
    assert_eq!((g.stats.drafted, g.stats.steady_drafted, g.stats.steady_draft_cost()), (2, 0, None));
}
