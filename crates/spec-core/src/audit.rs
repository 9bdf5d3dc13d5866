//! Checking, on any target, that the acceptance a run measured is the acceptance the rule
//! promises.
//!
//! Every verification rule of [`crate::verify`] accepts the drafted token at a position with a
//! probability fixed by the target's distribution `p` there and what the drafter reported:
//!
//! - a draft sampled from `q` (speculative sampling, speculative-decoding.txt Algorithm 1; the
//!   union rule, hetero-vocab-sd.txt Algorithm 1, with `q` over the target's ids): `Σ_x min(p(x),
//!   q(x))` — the `β` of speculative-decoding.txt Definition 3.1, `1 − D_LK(p, q)`;
//! - a deterministic draft `d` (the point-mass rule, or exact match): `p(d)`;
//! - a token the union rule's drafter drew outside the target's vocabulary: 0 for the token, so
//!   `Σ_{x ∈ T} min(p(x), q(x))` before it was drawn.
//!
//! That probability holds conditionally on everything before the test (the earlier tokens and
//! their coins), so over a run the number of tests passed minus the sum of these expectations is
//! a martingale with variance `Σ e(1 − e)`: [`AuditedTarget`] wraps a [`Target`], verifies each
//! draft on the host with the rule of [`crate::verify::verify_draft`] (or a rule given to it),
//! and keeps both sums, so [`AcceptanceAudit::z`] says in standard deviations how far the
//! measured acceptance lies from the rule's promise. On a real model this is the check that the
//! sampled path runs the rule the statistical suite proved: the suite proves the rules on toy
//! models whose exact distributions are known; the audit needs only the logits the target
//! computes anyway.

use rand::RngCore;

use crate::draft::{Draft, DraftOrigin};
use crate::engine::Target;
use crate::error::Result;
use crate::sampling::{SamplingConfig, logits_to_probs};
use crate::verify::{DeterministicRule, Verdict, verify_draft};

/// A verification rule over host probabilities: the `γ + 1` target rows, the draft, the rule for
/// deterministic drafts, the randomness. [`verify_draft`] is the one anyspec proves.
pub type HostRule = fn(&[Vec<f32>], &Draft, DeterministicRule, &mut dyn RngCore) -> Result<Verdict>;

/// The acceptance tests of a run, against their expectations.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct AcceptanceAudit {
    /// Acceptance tests taken (one per accepted token, one per rejection).
    pub tests: u64,
    /// Tests passed (tokens accepted).
    pub passed: u64,
    /// The sum of the tests' acceptance probabilities, from the target's distributions.
    pub expected: f64,
    /// The sum of `e(1 − e)` over the tests: the variance of `passed` around `expected`.
    pub variance: f64,
}

impl AcceptanceAudit {
    /// The measured acceptance rate, passed ÷ tests (0 before any test).
    pub fn measured_rate(&self) -> f64 {
        if self.tests == 0 { 0.0 } else { self.passed as f64 / self.tests as f64 }
    }

    /// The rate the rule promises for the same tests, the mean expectation (0 before any test).
    pub fn expected_rate(&self) -> f64 {
        if self.tests == 0 { 0.0 } else { self.expected / self.tests as f64 }
    }

    /// How many standard deviations the tests passed lie from their expectation: `(passed −
    /// expected) / √variance`; 0 when there is no variance (every test certain).
    pub fn z(&self) -> f64 {
        if self.variance <= 0.0 { 0.0 } else { (self.passed as f64 - self.expected) / self.variance.sqrt() }
    }

    /// The half-width of the interval, in acceptance rate, that the measured rate falls in with
    /// `z_limit` standard deviations: `z_limit · √variance ÷ tests`.
    pub fn half_width(&self, z_limit: f64) -> f64 {
        if self.tests == 0 { 0.0 } else { z_limit * self.variance.sqrt() / self.tests as f64 }
    }

    /// Adds another run's tests.
    pub fn merge(&mut self, other: &AcceptanceAudit) {
        self.tests += other.tests;
        self.passed += other.passed;
        self.expected += other.expected;
        self.variance += other.variance;
    }

    /// Records one verified draft: the tests `verdict` took and their expectations under the
    /// target's probability rows `target_probs` (`γ + 1` of them).
    pub fn record(&mut self, target_probs: &[Vec<f32>], draft: &Draft, verdict: &Verdict) {
        let expectation = |j: usize| -> f64 {
            let p = &target_probs[j];
            match &draft.origin {
                DraftOrigin::Deterministic => f64::from(p[draft.tokens[j] as usize]),
                DraftOrigin::Sampled { distributions, outside_target } => {
                    let q = distributions.get(j).or(outside_target.as_ref());
                    q.map_or(0.0, |q| p.iter().zip(q).map(|(&a, &b)| f64::from(a.min(b))).sum())
                }
            }
        };
        let mut take = |j: usize, passed: bool| {
            let e = expectation(j).clamp(0.0, 1.0);
            self.tests += 1;
            self.passed += u64::from(passed);
            self.expected += e;
            self.variance += e * (1.0 - e);
        };
        for j in 0..verdict.accepted.min(draft.len()) {
            take(j, true);
        }
        // A rejection: of a drafted token, or of the union rule's out-of-vocabulary one after
        // them (whose expectation is the mass its distribution puts inside the target's ids).
        let rejected_at = verdict.accepted;
        let union_tail = matches!(draft.origin, DraftOrigin::Sampled { outside_target: Some(_), .. });
        if !verdict.bonus && (rejected_at < draft.len() || (rejected_at == draft.len() && union_tail)) {
            take(rejected_at, false);
        }
    }
}

/// A [`Target`] whose drafts are verified on the host and audited: each step's acceptance
/// tests and their expectations go into an [`AcceptanceAudit`].
#[derive(Debug)]
pub struct AuditedTarget<T> {
    inner: T,
    rule: HostRule,
    audit: AcceptanceAudit,
}

impl<T: Target> AuditedTarget<T> {
    /// Audits `inner`, verifying with [`verify_draft`].
    pub fn new(inner: T) -> Self {
        AuditedTarget::with_rule(inner, |p, draft, rule, rng| verify_draft(p, draft, rule, rng))
    }

    /// Audits `inner`, verifying with `rule` (a test's deliberately wrong rule, to show the audit
    /// catches one).
    pub fn with_rule(inner: T, rule: HostRule) -> Self {
        AuditedTarget { inner, rule, audit: AcceptanceAudit::default() }
    }

    /// The tests so far.
    pub fn audit(&self) -> &AcceptanceAudit {
        &self.audit
    }

    /// The wrapped target.
    pub fn into_inner(self) -> T {
        self.inner
    }
}

impl<T: Target> Target for AuditedTarget<T> {
    fn vocab_size(&self) -> usize {
        self.inner.vocab_size()
    }

    fn max_sequence_len(&self) -> Option<usize> {
        self.inner.max_sequence_len()
    }

    fn score(&mut self, sequence: &[u32], draft_len: usize) -> Result<Vec<Vec<f32>>> {
        self.inner.score(sequence, draft_len)
    }

    fn rollback(&mut self, len: usize) -> Result<()> {
        self.inner.rollback(len)
    }

    fn verify(
        &mut self,
        sequence: &[u32],
        draft: &Draft,
        sampling: &SamplingConfig,
        rule: DeterministicRule,
        rng: &mut dyn RngCore,
    ) -> Result<Verdict> {
        let logits = self.inner.score(sequence, draft.len())?;
        let probs = logits.iter().map(|row| logits_to_probs(row, sampling)).collect::<Result<Vec<_>>>()?;
        let verdict = (self.rule)(&probs, draft, rule, rng)?;
        self.audit.record(&probs, draft, &verdict);
        Ok(verdict)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{GenerationConfig, generate};
    use crate::sampling::sample;
    use crate::toy::{Bridge, DraftMode, MarkovChain, MarkovDrafter, MarkovTarget};
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};
    use std::ops::ControlFlow;

    /// A run of `steps` new tokens from a random 12-token chain and a perturbed drafter.
    fn run(mode: DraftMode, rule: HostRule, seed: u64) -> AcceptanceAudit {
        let mut rng = StdRng::seed_from_u64(seed);
        let chain = MarkovChain::random(12, 12, 1.0, &mut rng);
        let draft_chain = chain.perturbed(0.6, &mut rng);
        let mut target = AuditedTarget::with_rule(MarkovTarget::new(chain).unwrap(), rule);
        let mut drafter = MarkovDrafter::new(draft_chain, Bridge::Same, mode).unwrap();
        let config = GenerationConfig {
            gamma: 4,
            max_new_tokens: 4000,
            sampling: SamplingConfig::new(0.8, None, 1.0).unwrap(),
            ..GenerationConfig::default()
        };
        generate(&mut target, Some(&mut drafter), &[0], &config, &mut rng, &mut |_| ControlFlow::Continue(())).unwrap();
        *target.audit()
    }

    /// Accepts a deterministic token with probability √p(d) and a sampled one with
    /// `min(1, p/q)²`: plausible-looking, and wrong.
    fn skewed_rule(p: &[Vec<f32>], draft: &Draft, _: DeterministicRule, rng: &mut dyn RngCore) -> Result<Verdict> {
        for (j, &d) in draft.tokens.iter().enumerate() {
            let pd = f64::from(p[j][d as usize]);
            let chance = match &draft.origin {
                DraftOrigin::Deterministic => pd.sqrt(),
                DraftOrigin::Sampled { distributions, .. } => {
                    (pd / f64::from(distributions[j][d as usize]).max(1e-12)).min(1.0).powi(2)
                }
            };
            if rng.random::<f64>() >= chance {
                return Ok(Verdict { accepted: j, next_token: sample(&p[j], rng)?, bonus: false });
            }
        }
        Ok(Verdict { accepted: draft.len(), next_token: sample(&p[draft.len()], rng)?, bonus: true })
    }

    #[test]
    fn the_proved_rules_accept_as_often_as_the_logits_promise() {
        for (mode, seed) in [(DraftMode::Sample, 1), (DraftMode::Greedy, 2)] {
            let audit = run(mode, |p, d, r, rng| verify_draft(p, d, r, rng), seed);
            assert!(audit.tests > 1000, "{mode:?}: only {} tests", audit.tests);
            assert!(audit.z().abs() < 4.0, "{mode:?}: {audit:?}, z = {:.2}", audit.z());
            assert!(
                (audit.measured_rate() - audit.expected_rate()).abs() <= audit.half_width(4.0),
                "{mode:?}: {audit:?}"
            );
        }
    }

    #[test]
    fn a_wrong_rule_is_caught() {
        for (mode, seed) in [(DraftMode::Sample, 1), (DraftMode::Greedy, 2)] {
            let audit = run(mode, skewed_rule, seed);
            assert!(audit.tests > 1000, "{mode:?}: only {} tests", audit.tests);
            assert!(audit.z().abs() > 6.0, "{mode:?}: the skewed rule passed the audit, z = {:.2}", audit.z());
        }
    }

    #[test]
    fn a_rejection_counts_one_test_and_the_union_tail_counts_its_inside_mass() {
        let p = vec![vec![0.5, 0.5, 0.0], vec![0.2, 0.8, 0.0], vec![1.0, 0.0, 0.0]];
        let mut audit = AcceptanceAudit::default();
        // Deterministic draft [1, 0]: first accepted (p = 0.5), second rejected (p = 0.2).
        audit.record(&p, &Draft::deterministic(vec![1, 0]), &Verdict { accepted: 1, next_token: 1, bonus: false });
        assert_eq!((audit.tests, audit.passed), (2, 1));
        assert!((audit.expected - 0.7).abs() < 1e-6 && (audit.variance - (0.25 + 0.16)).abs() < 1e-6, "{audit:?}");
        // A fully accepted draft takes no test beyond its tokens.
        let mut full = AcceptanceAudit::default();
        full.record(&p, &Draft::deterministic(vec![1]), &Verdict { accepted: 1, next_token: 0, bonus: true });
        assert_eq!((full.tests, full.passed), (1, 1));
        // The union rule: one accepted token, then the out-of-vocabulary draw rejected; its
        // expectation is Σ min(p, q) over the target ids of the distribution it came from.
        let mut union = Draft::sampled(vec![0], vec![vec![0.5, 0.25, 0.0]]);
        union.origin = DraftOrigin::Sampled {
            distributions: vec![vec![0.5, 0.25, 0.0]],
            outside_target: Some(vec![0.1, 0.3, 0.0]),
        };
        let mut audit = AcceptanceAudit::default();
        audit.record(&p, &union, &Verdict { accepted: 1, next_token: 0, bonus: false });
        assert_eq!((audit.tests, audit.passed), (2, 1));
        assert!((audit.expected - (0.75 + 0.4)).abs() < 1e-6, "{audit:?}");
    }
}
