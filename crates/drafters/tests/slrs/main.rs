//! SLRS end to end on toy models with string-valued tokens: ψ against a brute-force enumeration,
//! the walk against ψ, the emitted tokens against the target's distribution (and the power of
//! that test against a ψ summed over every segmentation, and against the other rule's ψ), greedy
//! decoding, the budget. Both proposal rules are checked: ours (`LongestAtBoundary`) and the
//! paper's (`FirstTargetToken`, hetero-vocab-sd.txt Algorithm 3 with Thm 3.2's ψ).

mod real_model;
mod stats;

use std::ops::ControlFlow;

use anyspec_core::toy::{MarkovChain, MarkovTarget};
use anyspec_core::{Draft, DraftOrigin, Drafter, GenerationConfig, SamplingConfig, generate};
use anyspec_drafters::Error;
use anyspec_drafters::slrs::{
    MarkovTreeModel, ProposalRule, SlrsConfig, SlrsDrafter, StringSpace, TokenTreeModel, Walk,
};
use rand::rngs::StdRng;
use rand::{RngCore, SeedableRng};

use stats::{PASS_P_VALUE, POWER_P_VALUE, g_test};

/// Target tokens: characters, pairs, triples — prefixes of one another, so walks pass through
/// shorter tokens on their way to longer ones.
const TARGET: [&str; 10] = ["a", "b", "c", "ab", "bc", "ca", "abc", "cab", "bca", "aa"];
/// Drafter tokens: characters and two short strings, so most target tokens have several
/// spellings ("abc" = a·b·c = ab·c = a·bc), and "x", which spells nothing in the target: a walk
/// that starts with it proposes nothing.
const DRAFTER: [&str; 6] = ["a", "b", "c", "ab", "bc", "x"];

/// Our proposal rule (`LongestAtBoundary`), which most tests here are about; the paper's rule is
/// the default.
fn ours() -> SlrsConfig {
    SlrsConfig { rule: ProposalRule::LongestAtBoundary, ..SlrsConfig::default() }
}

fn surfaces<'a>(strings: &[&'a str]) -> Vec<Option<&'a [u8]>> {
    strings.iter().map(|s| Some(s.as_bytes())).collect()
}

fn space() -> StringSpace {
    let (t, d) = (surfaces(&TARGET), surfaces(&DRAFTER));
    StringSpace::new(&t, t.len(), &d, d.len()).unwrap()
}

struct Pair {
    target: MarkovChain,
    model: MarkovTreeModel,
}

/// A random target chain and a drafter that agrees with it only roughly. `sharpness` > 1 makes
/// the drafter likelier to continue past short tokens, which makes ψ's correction larger.
fn pair(seed: u64, sharpness: f64) -> Pair {
    let mut rng = StdRng::seed_from_u64(seed);
    let target = MarkovChain::random(TARGET.len(), TARGET.len(), 1.0, &mut rng);
    let after_target = MarkovChain::random(TARGET.len(), DRAFTER.len(), sharpness, &mut rng);
    let after_drafter = MarkovChain::random(DRAFTER.len(), DRAFTER.len(), sharpness, &mut rng);
    Pair { target, model: MarkovTreeModel::new(after_target, after_drafter).unwrap() }
}

fn drafter(model: MarkovTreeModel, lookahead: Option<usize>) -> SlrsDrafter<MarkovTreeModel> {
    SlrsDrafter::new(model, space(), SlrsConfig { lookahead, ..ours() }).unwrap()
}

fn paper_drafter(model: MarkovTreeModel, lookahead: Option<usize>) -> SlrsDrafter<MarkovTreeModel> {
    let config = SlrsConfig { lookahead, rule: ProposalRule::FirstTargetToken, ..SlrsConfig::default() };
    SlrsDrafter::new(model, space(), config).unwrap()
}

/// The law of the paper's walk written out independently (hetero-vocab-sd.txt Algorithm 3 with
/// longest-prefix tokenization): recurse over every drafter-token sequence; stop when `lookahead`
/// tokens were drawn or no target string has the spelled string as a proper prefix, and credit
/// the longest target string that prefixes the spelled string.
fn paper_brute_force(model: &MarkovTreeModel, context: &[u32], lookahead: usize) -> (Vec<f64>, f64) {
    fn visit(
        model: &MarkovTreeModel,
        context: &[u32],
        lookahead: usize,
        sequence: &mut Vec<u32>,
        spelled: &str,
        probability: f64,
        law: &mut (Vec<f64>, f64),
    ) {
        let open = TARGET.iter().any(|t| t.len() > spelled.len() && t.starts_with(spelled));
        if sequence.len() == lookahead || !open {
            let first = TARGET.iter().enumerate().filter(|(_, t)| spelled.starts_with(*t)).max_by_key(|(_, t)| t.len());
            match first {
                Some((t, _)) => law.0[t] += probability,
                None => law.1 += probability,
            }
            return;
        }
        for (d, piece) in DRAFTER.iter().enumerate() {
            let q = model.probability(context, sequence, d as u32).unwrap();
            sequence.push(d as u32);
            visit(model, context, lookahead, sequence, &format!("{spelled}{piece}"), probability * q, law);
            sequence.pop();
        }
    }
    let mut law = (vec![0.0; TARGET.len()], 0.0);
    visit(model, context, lookahead, &mut Vec::new(), "", 1.0, &mut law);
    law
}

/// The walk's law written out independently: recurse over every drafter-token sequence (no
/// trie, no early stop) and credit each stopping sequence to the longest target string it spelled
/// at a boundary. Also returns the literal reading of the paper, `Σ_{x spells t} P(x)`.
struct BruteForce<'a> {
    model: &'a MarkovTreeModel,
    context: &'a [u32],
    lookahead: usize,
    psi: Vec<f64>,
    none: f64,
    literal: Vec<f64>,
}

impl BruteForce<'_> {
    fn run(model: &MarkovTreeModel, context: &[u32], lookahead: usize) -> (Vec<f64>, f64, Vec<f64>) {
        let mut b =
            BruteForce { model, context, lookahead, psi: vec![0.0; TARGET.len()], none: 0.0, literal: vec![0.0; 10] };
        b.visit(&mut Vec::new(), String::new(), 1.0, None);
        (b.psi, b.none, b.literal)
    }

    fn credit(&mut self, last: Option<usize>, mass: f64) {
        match last {
            Some(t) => self.psi[t] += mass,
            None => self.none += mass,
        }
    }

    fn visit(&mut self, sequence: &mut Vec<u32>, spelled: String, probability: f64, last: Option<usize>) {
        if sequence.len() == self.lookahead {
            return self.credit(last, probability);
        }
        for (d, piece) in DRAFTER.iter().enumerate() {
            let q = self.model.probability(self.context, sequence, d as u32).unwrap();
            let next = format!("{spelled}{piece}");
            if !TARGET.iter().any(|t| t.starts_with(&next)) {
                self.credit(last, probability * q);
                continue;
            }
            let token = TARGET.iter().position(|t| *t == next);
            if let Some(t) = token {
                self.literal[t] += probability * q;
            }
            sequence.push(d as u32);
            self.visit(sequence, next, probability * q, token.or(last));
            sequence.pop();
        }
    }
}

#[test]
fn psi_equals_the_brute_force_law_of_the_walk() {
    for (seed, lookahead) in [(1, None), (2, Some(2)), (3, Some(1)), (4, None)] {
        let p = pair(seed, 1.5);
        let brute_model = p.model.clone();
        let mut d = drafter(p.model, lookahead);
        let mut rng = StdRng::seed_from_u64(seed);
        for last in 0..TARGET.len() as u32 {
            let context = [last];
            let Walk { psi, no_proposal: none, .. } = d.walk(&context, &SamplingConfig::default(), &mut rng).unwrap();
            let (want, want_none, _) = BruteForce::run(&brute_model, &context, lookahead.unwrap_or(usize::MAX));
            for (t, (got, want)) in psi.iter().zip(&want).enumerate() {
                assert!((got - want).abs() < 1e-6, "seed {seed} context {last} token {t}: ψ {got} vs {want}");
            }
            assert!((none - want_none).abs() < 1e-6, "no proposal: {none} vs {want_none}");
            assert!((psi.iter().sum::<f64>() + none - 1.0).abs() < 1e-6);
        }
    }
}

#[test]
fn the_walk_proposes_each_token_with_probability_psi() {
    let p = pair(5, 1.5);
    let mut d = drafter(p.model, None);
    let mut rng = StdRng::seed_from_u64(50);
    let context = [2u32];
    let Walk { psi, no_proposal: none, .. } = d.walk(&context, &SamplingConfig::default(), &mut rng).unwrap();
    let mut counts = vec![0u64; TARGET.len() + 1];
    for _ in 0..40_000 {
        let proposal = d.walk(&context, &SamplingConfig::default(), &mut rng).unwrap().proposal;
        counts[proposal.map_or(TARGET.len(), |t| t as usize)] += 1;
    }
    let mut expected = psi.clone();
    expected.push(none);
    let g = g_test(&counts, &expected);
    assert!(g.p_value > PASS_P_VALUE, "{g:?} counts {counts:?} expected {expected:?}");
}

/// Emits `runs` sequences of `length` tokens after `prompt` and counts each one.
fn emitted_counts(
    target: &MarkovChain,
    drafter: &mut dyn Drafter,
    prompt: u32,
    length: usize,
    runs: usize,
    seed: u64,
) -> Vec<u64> {
    let mut target = MarkovTarget::new(target.clone()).unwrap();
    let config = GenerationConfig { gamma: 2, max_new_tokens: length, ..GenerationConfig::default() };
    let mut rng = StdRng::seed_from_u64(seed);
    let mut counts = vec![0u64; TARGET.len().pow(length as u32)];
    for _ in 0..runs {
        let out =
            generate(&mut target, Some(drafter), &[prompt], &config, &mut rng, &mut |_| ControlFlow::Continue(()))
                .unwrap();
        let cell = out.tokens.iter().fold(0usize, |cell, &t| cell * TARGET.len() + t as usize);
        counts[cell] += 1;
    }
    counts
}

fn sequence_probabilities(target: &MarkovChain, prompt: u32, length: usize) -> Vec<f64> {
    (0..TARGET.len().pow(length as u32))
        .map(|cell| {
            let mut tokens = vec![0u32; length];
            let mut rest = cell;
            for slot in tokens.iter_mut().rev() {
                *slot = (rest % TARGET.len()) as u32;
                rest /= TARGET.len();
            }
            target.sequence_probability(prompt, &tokens).unwrap()
        })
        .collect()
}

#[test]
fn emitted_sequences_follow_the_target_distribution() {
    // Three tokens with γ = 2: proposals, acceptances, corrections and bonus tokens all occur,
    // and drafting resumes from a context that ends in a corrected token.
    let p = pair(6, 1.5);
    let target = p.target.clone();
    let mut d = drafter(p.model, None);
    let counts = emitted_counts(&target, &mut d, 3, 3, 60_000, 60);
    let g = g_test(&counts, &sequence_probabilities(&target, 3, 3));
    assert!(g.p_value > PASS_P_VALUE, "{g:?}");
}

#[test]
fn emitted_sequences_follow_the_target_distribution_with_a_lookahead_and_top_k() {
    // A lookahead cuts walks short and top-k zeroes drafter tokens: ψ must follow both.
    let p = pair(7, 1.5);
    let sampling = SamplingConfig::new(0.9, Some(3), 1.0).unwrap();
    let target_chain = p.target.transformed(&sampling).unwrap();
    let mut target = MarkovTarget::new(p.target.clone()).unwrap();
    let mut d = drafter(p.model, Some(2));
    let config = GenerationConfig { gamma: 2, max_new_tokens: 2, sampling, ..GenerationConfig::default() };
    let mut rng = StdRng::seed_from_u64(70);
    let mut counts = vec![0u64; 100];
    for _ in 0..40_000 {
        let out =
            generate(&mut target, Some(&mut d), &[1], &config, &mut rng, &mut |_| ControlFlow::Continue(())).unwrap();
        counts[out.tokens[0] as usize * 10 + out.tokens[1] as usize] += 1;
    }
    let g = g_test(&counts, &sequence_probabilities(&target_chain, 1, 2));
    assert!(g.p_value > PASS_P_VALUE, "{g:?}");
}

/// The law a broken variant verifies against.
enum Law {
    /// `ψ(t) = Σ_{x spells t} P(x)` over every segmentation of `t`, ignoring that a walk through
    /// `t` may go on to a longer token (no stopping rule).
    AllSegmentations,
    /// Our rule's law for walks of at most `n` drafter tokens.
    Boundary(usize),
    /// The paper's rule's law for walks of at most `n` drafter tokens.
    Paper(usize),
}

/// A broken variant: the same walks, verified against another ψ — a sum over every
/// segmentation, the right rule's law for another lookahead than the walk used, or the other
/// rule's law.
struct WrongPsi {
    inner: SlrsDrafter<MarkovTreeModel>,
    model: MarkovTreeModel,
    law: Law,
}

impl WrongPsi {
    fn row(&self, context: &[u32]) -> Vec<f32> {
        let row = match self.law {
            Law::AllSegmentations => BruteForce::run(&self.model, context, usize::MAX).2,
            Law::Boundary(n) => BruteForce::run(&self.model, context, n).0,
            Law::Paper(n) => paper_brute_force(&self.model, context, n).0,
        };
        row.iter().map(|&x| x as f32).collect()
    }
}

impl Drafter for WrongPsi {
    fn propose(
        &mut self,
        context: &[u32],
        max_tokens: usize,
        sampling: &SamplingConfig,
        rng: &mut dyn RngCore,
    ) -> anyspec_core::Result<Draft> {
        let mut draft = self.inner.propose(context, max_tokens, sampling, rng)?;
        let mut sequence = context.to_vec();
        let mut rows = Vec::new();
        for &token in &draft.tokens {
            rows.push(self.row(&sequence));
            sequence.push(token);
        }
        let last = self.row(&sequence);
        if let DraftOrigin::Sampled { distributions, outside_target } = &mut draft.origin {
            // A wrong law may give a proposed token no mass at all: keep it barely possible so
            // the verifier runs (the emitted distribution is what is tested).
            for ((row, new), &token) in distributions.iter_mut().zip(rows).zip(&draft.tokens) {
                *row = new;
                row[token as usize] = row[token as usize].max(1e-6);
            }
            if let Some(row) = outside_target {
                *row = last;
            }
        }
        Ok(draft)
    }
}

#[test]
fn a_sum_over_all_segmentations_is_caught() {
    // Thm 3.2's ψ sums over the sequences Algorithm 3 samples (stopped by S_1); summing over
    // every segmentation of t, stopped or not, is not the law of any walk and is not lossless.
    let p = pair(6, 1.5);
    let target = p.target.clone();
    let mut broken = WrongPsi { model: p.model.clone(), inner: drafter(p.model, None), law: Law::AllSegmentations };
    let counts = emitted_counts(&target, &mut broken, 3, 3, 20_000, 60);
    let g = g_test(&counts, &sequence_probabilities(&target, 3, 3));
    assert!(g.p_value < POWER_P_VALUE, "{g:?}");
}

#[test]
fn psi_for_another_lookahead_than_the_walk_is_caught() {
    // Walks of one drafter token, verified with the law of unlimited walks: n_max must be the
    // same on both sides.
    let p = pair(6, 1.5);
    let target = p.target.clone();
    let mut broken =
        WrongPsi { model: p.model.clone(), inner: drafter(p.model, Some(1)), law: Law::Boundary(usize::MAX) };
    let counts = emitted_counts(&target, &mut broken, 3, 3, 20_000, 61);
    let g = g_test(&counts, &sequence_probabilities(&target, 3, 3));
    assert!(g.p_value < POWER_P_VALUE, "{g:?}");
}

/// A drafter whose context window leaves room for `room` drafter tokens per walk.
struct Windowed {
    inner: MarkovTreeModel,
    room: usize,
}

impl TokenTreeModel for Windowed {
    fn next_logits(&mut self, context: &[u32], continuations: &[Vec<u32>]) -> anyspec_core::Result<Vec<Vec<f32>>> {
        assert!(continuations.iter().all(|x| x.len() < self.room), "scored past the window");
        self.inner.next_logits(context, continuations)
    }

    fn room(&mut self, _context: &[u32]) -> anyspec_core::Result<usize> {
        Ok(self.room)
    }
}

#[test]
fn a_full_drafter_window_shortens_walks_and_psi_follows() {
    for room in [0, 1, 2] {
        let p = pair(12, 1.5);
        let model = Windowed { inner: p.model.clone(), room };
        let mut d = SlrsDrafter::new(model, space(), ours()).unwrap();
        let mut rng = StdRng::seed_from_u64(12);
        let Walk { psi, no_proposal: none, .. } = d.walk(&[5], &SamplingConfig::default(), &mut rng).unwrap();
        let (want, want_none, _) = BruteForce::run(&p.model, &[5], room);
        for (got, want) in psi.iter().zip(&want) {
            assert!((got - want).abs() < 1e-6, "room {room}: ψ {psi:?} vs {want:?}");
        }
        assert!((none - want_none).abs() < 1e-6);
        // No room at all: nothing is drafted, and the step is plain sampling.
        let draft = d.propose(&[5], 3, &SamplingConfig::default(), &mut rng).unwrap();
        assert!(
            room > 0
                || draft
                    == Draft {
                        tokens: vec![],
                        origin: DraftOrigin::Sampled { distributions: vec![], outside_target: None },
                        confidence_class: None,
                    }
        );
    }
}

#[test]
fn greedy_slrs_reproduces_autoregressive_decoding() {
    for seed in 0..6 {
        let p = pair(seed, 2.0);
        let config =
            GenerationConfig { gamma: 3, max_new_tokens: 30, sampling: SamplingConfig::greedy(), ..Default::default() };
        let mut rng = StdRng::seed_from_u64(seed);
        let mut target = MarkovTarget::new(p.target.clone()).unwrap();
        let plain = generate(&mut target, None, &[0], &config, &mut rng, &mut |_| ControlFlow::Continue(())).unwrap();
        let mut d = drafter(p.model, None);
        let spec =
            generate(&mut target, Some(&mut d), &[0], &config, &mut rng, &mut |_| ControlFlow::Continue(())).unwrap();
        assert_eq!(spec.tokens, plain.tokens, "seed {seed}");
        assert!(spec.stats.drafted > 0);
    }
}

#[test]
fn greedy_expansion_follows_one_path() {
    // A point-mass drafter prunes every other branch: the positions scored are the walk's own.
    let p = pair(8, 1.0);
    let mut d = drafter(p.model, None);
    let mut rng = StdRng::seed_from_u64(0);
    let draft = d.propose(&[0], 1, &SamplingConfig::greedy(), &mut rng).unwrap();
    assert!(matches!(draft.origin, DraftOrigin::Deterministic));
    let cost = d.last_cost();
    assert!(cost.positions <= 3 && cost.positions == cost.calls, "{cost:?}");
}

#[test]
fn sampled_drafts_carry_sub_distributions_that_contain_the_tokens() {
    let p = pair(9, 1.5);
    let mut d = drafter(p.model, None);
    let mut rng = StdRng::seed_from_u64(9);
    let mut saw_outside = false;
    for _ in 0..200 {
        let draft = d.propose(&[4], 3, &SamplingConfig::default(), &mut rng).unwrap();
        let DraftOrigin::Sampled { distributions, outside_target } = &draft.origin else { panic!("{draft:?}") };
        assert_eq!(distributions.len(), draft.len());
        for (row, &t) in distributions.iter().zip(&draft.tokens) {
            let sum: f64 = row.iter().map(|&x| f64::from(x)).sum();
            assert!(sum <= 1.0 + 1e-6 && row[t as usize] > 0.0 && row.len() == TARGET.len());
        }
        saw_outside |= outside_target.is_some();
        assert!(outside_target.is_none() || draft.len() < 3);
    }
    assert!(saw_outside, "no walk ever proposed nothing: the test does not cover that path");
}

#[test]
fn an_expansion_over_budget_is_refused_before_generation_with_a_lookahead_that_fits() {
    let p = pair(10, 1.0);
    let worst = SlrsDrafter::new(p.model.clone(), space(), ours()).unwrap().plan().worst_case(None);
    let err = SlrsDrafter::new(p.model.clone(), space(), SlrsConfig { lookahead: None, budget: worst - 1, ..ours() })
        .unwrap_err();
    let Error::SlrsBudget { positions, advice, .. } = &err else { panic!("{err:?}") };
    assert_eq!(*positions, worst);
    // In library terms: the lookahead that fits, no command-line flag (the CLI adds its own).
    assert!(err.to_string().contains("lookahead to 2") && !err.to_string().contains("--"), "{err}");
    assert!(advice.contains("lower the lookahead to 2"), "{advice}");
    SlrsDrafter::new(p.model, space(), SlrsConfig { lookahead: Some(2), budget: worst - 1, ..ours() }).unwrap();
}

#[test]
fn drafter_positions_never_exceed_the_predicted_worst_case() {
    let p = pair(11, 0.5);
    let mut d = drafter(p.model, None);
    let worst = d.plan().worst_case(None);
    let mut rng = StdRng::seed_from_u64(11);
    let mut most = 0;
    for last in 0..TARGET.len() as u32 {
        d.propose(&[last], 1, &SamplingConfig::default(), &mut rng).unwrap();
        most = most.max(d.last_cost().positions);
    }
    // Every drafter probability is positive, so the worst case is reached exactly.
    assert_eq!(most, worst);
}

#[test]
fn psi_of_the_papers_rule_equals_its_brute_force_law_and_differs_from_ours() {
    let mut differs = false;
    for (seed, lookahead) in [(1, None), (2, Some(2)), (3, Some(1)), (4, None)] {
        let p = pair(seed, 1.5);
        let brute_model = p.model.clone();
        let mut d = paper_drafter(p.model, lookahead);
        let mut rng = StdRng::seed_from_u64(seed);
        for last in 0..TARGET.len() as u32 {
            let context = [last];
            let Walk { psi, no_proposal: none, .. } = d.walk(&context, &SamplingConfig::default(), &mut rng).unwrap();
            let (want, want_none) = paper_brute_force(&brute_model, &context, lookahead.unwrap_or(usize::MAX));
            for (t, (got, want)) in psi.iter().zip(&want).enumerate() {
                assert!((got - want).abs() < 1e-6, "seed {seed} context {last} token {t}: ψ {got} vs {want}");
            }
            assert!((none - want_none).abs() < 1e-6, "no proposal: {none} vs {want_none}");
            let (ours, _, _) = BruteForce::run(&brute_model, &context, lookahead.unwrap_or(usize::MAX));
            differs |= ours.iter().zip(&psi).any(|(a, b)| (a - b).abs() > 1e-3);
        }
    }
    assert!(differs, "the two rules gave the same ψ everywhere: this test cannot tell them apart");
}

#[test]
fn the_papers_walk_proposes_each_token_with_probability_psi() {
    let p = pair(5, 1.5);
    let mut d = paper_drafter(p.model, None);
    let mut rng = StdRng::seed_from_u64(51);
    let context = [2u32];
    let Walk { psi, no_proposal: none, .. } = d.walk(&context, &SamplingConfig::default(), &mut rng).unwrap();
    let mut counts = vec![0u64; TARGET.len() + 1];
    for _ in 0..40_000 {
        let proposal = d.walk(&context, &SamplingConfig::default(), &mut rng).unwrap().proposal;
        counts[proposal.map_or(TARGET.len(), |t| t as usize)] += 1;
    }
    let mut expected = psi.clone();
    expected.push(none);
    let g = g_test(&counts, &expected);
    assert!(g.p_value > PASS_P_VALUE, "{g:?} counts {counts:?} expected {expected:?}");
}

#[test]
fn emitted_sequences_follow_the_target_distribution_under_the_papers_rule() {
    for (lookahead, seed) in [(None, 62), (Some(2), 63)] {
        let p = pair(6, 1.5);
        let target = p.target.clone();
        let mut d = paper_drafter(p.model, lookahead);
        let counts = emitted_counts(&target, &mut d, 3, 3, 60_000, seed);
        let g = g_test(&counts, &sequence_probabilities(&target, 3, 3));
        assert!(g.p_value > PASS_P_VALUE, "lookahead {lookahead:?}: {g:?}");
    }
}

#[test]
fn the_papers_walks_verified_against_our_rules_psi_are_caught() {
    // The power check of the test above: same walks, the other rule's law.
    let p = pair(6, 1.5);
    let target = p.target.clone();
    let mut broken =
        WrongPsi { model: p.model.clone(), inner: paper_drafter(p.model, None), law: Law::Boundary(usize::MAX) };
    let counts = emitted_counts(&target, &mut broken, 3, 3, 20_000, 64);
    let g = g_test(&counts, &sequence_probabilities(&target, 3, 3));
    assert!(g.p_value < POWER_P_VALUE, "{g:?}");
}

#[test]
fn our_walks_verified_against_the_papers_psi_are_caught() {
    let p = pair(6, 1.5);
    let target = p.target.clone();
    let mut broken = WrongPsi { model: p.model.clone(), inner: drafter(p.model, None), law: Law::Paper(usize::MAX) };
    let counts = emitted_counts(&target, &mut broken, 3, 3, 20_000, 65);
    let g = g_test(&counts, &sequence_probabilities(&target, 3, 3));
    assert!(g.p_value < POWER_P_VALUE, "{g:?}");
}

#[test]
fn greedy_slrs_under_the_papers_rule_reproduces_autoregressive_decoding() {
    for seed in 0..6 {
        let p = pair(seed, 2.0);
        let config =
            GenerationConfig { gamma: 3, max_new_tokens: 30, sampling: SamplingConfig::greedy(), ..Default::default() };
        let mut rng = StdRng::seed_from_u64(seed);
        let mut target = MarkovTarget::new(p.target.clone()).unwrap();
        let plain = generate(&mut target, None, &[0], &config, &mut rng, &mut |_| ControlFlow::Continue(())).unwrap();
        let mut d = paper_drafter(p.model, None);
        let spec =
            generate(&mut target, Some(&mut d), &[0], &config, &mut rng, &mut |_| ControlFlow::Continue(())).unwrap();
        assert_eq!(spec.tokens, plain.tokens, "seed {seed}");
    }
}

#[test]
fn drafter_positions_under_the_papers_rule_never_exceed_its_predicted_worst_case() {
    let p = pair(11, 0.5);
    let mut d = paper_drafter(p.model, None);
    let worst = d.plan().worst_case(None);
    let mut rng = StdRng::seed_from_u64(11);
    let mut most = 0;
    for last in 0..TARGET.len() as u32 {
        d.propose(&[last], 1, &SamplingConfig::default(), &mut rng).unwrap();
        most = most.max(d.last_cost().positions);
    }
    assert_eq!(most, worst);
}
