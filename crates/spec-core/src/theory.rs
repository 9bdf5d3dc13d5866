//! Closed-form expectations: acceptance rate, tokens per step, walltime improvement and the best γ.
//!
//! These are the numbers a user compares measurements against (`anyspec theory`, `anyspec
//! simulate`), and what a scheduler uses to pick γ.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// The acceptance rate of one position, `α = Σ_x min(p(x), q(x))` (speculative-decoding.txt
/// Definition 3.1 and Corollary 3.6: `β = 1 − D_LK(p, q)`), accumulated in `f64`.
pub fn acceptance_rate(target_probs: &[f32], draft_probs: &[f32]) -> Result<f64> {
    if target_probs.len() != draft_probs.len() {
        return Err(Error::LengthMismatch {
            what: "draft distribution (vocabulary size)",
            expected: target_probs.len(),
            got: draft_probs.len(),
        });
    }
    Ok(target_probs.iter().zip(draft_probs).map(|(&p, &q)| f64::from(p.min(q))).sum())
}

/// Expected tokens emitted per verification step, `(1 − α^{γ+1}) / (1 − α)`
/// (speculative-decoding.txt Equation 1); `γ + 1` when `α = 1`.
pub fn expected_tokens_per_step(alpha: f64, gamma: usize) -> Result<f64> {
    check_alpha(alpha)?;
    check_gamma(gamma)?;
    Ok(expected_tokens_unchecked(alpha, gamma))
}

fn expected_tokens_unchecked(alpha: f64, gamma: usize) -> f64 {
    if (1.0 - alpha).abs() < 1e-12 { gamma as f64 + 1.0 } else { (1.0 - alpha.powi(gamma as i32 + 1)) / (1.0 - alpha) }
}

/// Expected walltime improvement factor, `(1 − α^{γ+1}) / ((1 − α)(γc + 1))`
/// (speculative-decoding.txt Theorem 3.8), where `c` is the cost of one drafter step relative to
/// one target step.
pub fn improvement_factor(alpha: f64, gamma: usize, cost: f64) -> Result<f64> {
    check_alpha(alpha)?;
    check_gamma(gamma)?;
    check_cost(cost)?;
    Ok(expected_tokens_unchecked(alpha, gamma) / (gamma as f64 * cost + 1.0))
}

/// Theorem 3.8 with the verification pass's real cost:
/// `(1 − α^{γ+1}) / ((1 − α)(γc + v))`, where `v` is the time of one target pass over the γ + 1
/// positions of a step divided by the time of a one-position pass.
///
/// speculative-decoding.txt §3.3 assumes "enough compute resources" to run γ + 1 target
/// evaluations "without increasing the walltime", i.e. `v = 1`; with that, this is
/// [`improvement_factor`]. On a CPU a quantized model's wider pass is far from free (a 6-position
/// pass costs about three one-position passes on SmolLM2 Q4_1 here), and `v` is what decides
/// whether a draft pays. `γ = 0` is allowed: plain decoding, factor `1 / v(1)` = 1 when `v = 1`.
pub fn improvement_factor_with_verify_cost(alpha: f64, gamma: usize, cost: f64, verify_cost: f64) -> Result<f64> {
    check_alpha(alpha)?;
    check_cost(cost)?;
    if !(verify_cost.is_finite() && verify_cost > 0.0) {
        return Err(Error::invalid(
            "verify_cost",
            "a finite number > 0 (a (γ+1)-position pass's time / a one-position pass's time)",
            verify_cost,
        ));
    }
    Ok(expected_tokens_unchecked(alpha, gamma) / (gamma as f64 * cost + verify_cost))
}

/// The γ in `1..=max_gamma` with the largest [`improvement_factor`], and that factor.
///
/// The factor is unimodal in γ for fixed α and c, but a scan is cheap and needs no proof.
pub fn best_gamma(alpha: f64, cost: f64, max_gamma: usize) -> Result<(usize, f64)> {
    check_alpha(alpha)?;
    check_cost(cost)?;
    check_gamma(max_gamma)?;
    let mut best = (1, f64::MIN);
    for gamma in 1..=max_gamma {
        let factor = expected_tokens_unchecked(alpha, gamma) / (gamma as f64 * cost + 1.0);
        if factor > best.1 + 1e-15 {
            best = (gamma, factor);
        }
    }
    Ok(best)
}

/// Everything `anyspec theory` prints for one (α, γ, c).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TheoryReport {
    /// Acceptance rate α.
    pub alpha: f64,
    /// Draft length γ.
    pub gamma: usize,
    /// Drafter cost per step relative to the target, c.
    pub cost: f64,
    /// `(1 − α^{γ+1}) / (1 − α)`.
    pub expected_tokens_per_step: f64,
    /// `(1 − α^{γ+1}) / ((1 − α)(γc + 1))`.
    pub improvement_factor: f64,
    /// The γ that maximises the improvement factor for this α and c.
    pub best_gamma: usize,
    /// The improvement factor at `best_gamma`.
    pub best_improvement_factor: f64,
}

/// Largest γ [`TheoryReport::new`] searches for the best γ.
pub const MAX_SEARCHED_GAMMA: usize = 64;

impl TheoryReport {
    /// Computes every figure, validating the inputs.
    pub fn new(alpha: f64, gamma: usize, cost: f64) -> Result<Self> {
        let (best_gamma, best_improvement_factor) = best_gamma(alpha, cost, MAX_SEARCHED_GAMMA)?;
        Ok(TheoryReport {
            alpha,
            gamma,
            cost,
            expected_tokens_per_step: expected_tokens_per_step(alpha, gamma)?,
            improvement_factor: improvement_factor(alpha, gamma, cost)?,
            best_gamma,
            best_improvement_factor,
        })
    }
}

/// Expected number of accepted drafted tokens per step when position `i` of the draft is
/// accepted with probability `alphas[i]` given that all earlier ones were:
/// `E[L] = Σ_{k=1}^{γ} Π_{i≤k} α_i` (the position-wise generalisation of Eq. 1 minus the bonus
/// token, as used by dynaspec.txt §5 for position-dependent shortlists).
pub fn expected_accepted_length(alphas: &[f64]) -> Result<f64> {
    let mut product = 1.0;
    let mut total = 0.0;
    for &alpha in alphas {
        check_alpha(alpha)?;
        product *= alpha;
        total += product;
    }
    Ok(total)
}

/// Bounds on the acceptance rate of a drafter restricted to a shortlist `S` and renormalized
/// there, `q_S = q·1_S / q(S)` (dynaspec.txt Thm 5.3, restated; the paper's text was not available
/// when this was written, so the statement and proof here are ours):
///
/// `α − (1 − q(S)) ≤ α_S ≤ p(S)`, where `α = Σ min(p, q)` is the full-vocabulary rate.
///
/// Proof. On `S`, `q_S ≥ q`, so `Σ_{x∈S} min(p, q_S) ≥ Σ_{x∈S} min(p, q) = α − Σ_{x∉S} min(p, q)
/// ≥ α − q(S^c)`. And `min(p, q_S) ≤ p` on `S` while `q_S = 0` off it, so `α_S ≤ p(S)`. ∎
///
/// Returns `(lower, upper)`, the lower bound clipped at 0. Feeding the lower bounds of each
/// position to [`expected_accepted_length`] bounds the mean accepted length of a shortlisted
/// drafter from below, which is how a position-aware budget (a larger shortlist early in the
/// draft, where acceptance compounds) is chosen.
pub fn shortlist_acceptance_bounds(
    alpha: f64,
    draft_mass_in_shortlist: f64,
    target_mass_in_shortlist: f64,
) -> Result<(f64, f64)> {
    check_alpha(alpha)?;
    if !(0.0..=1.0).contains(&draft_mass_in_shortlist) || draft_mass_in_shortlist == 0.0 {
        return Err(Error::invalid("draft_mass_in_shortlist", "in (0, 1]", draft_mass_in_shortlist));
    }
    if !(0.0..=1.0).contains(&target_mass_in_shortlist) {
        return Err(Error::invalid("target_mass_in_shortlist", "in [0, 1]", target_mass_in_shortlist));
    }
    Ok(((alpha - (1.0 - draft_mass_in_shortlist)).max(0.0), target_mass_in_shortlist))
}

/// Counts from replaying reference text through a drafter (dictspec.txt §4.5), and the metrics
/// DictSpec reports from them.
///
/// At each position the drafter proposes up to γ tokens; the longest prefix that equals the
/// reference is accepted and the position advances by `accepted + 1`, exactly as greedy
/// verification would. One such advance is one verification step.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EmulationCounts {
    /// Reference tokens replayed.
    pub tokens: u64,
    /// Verification steps needed to emit them.
    pub steps: u64,
    /// Steps at which the drafter proposed at least one token.
    pub steps_with_draft: u64,
    /// Tokens proposed over all steps.
    pub drafted: u64,
    /// Proposed tokens that matched the reference.
    pub accepted: u64,
}

impl EmulationCounts {
    /// Records one step: `drafted` tokens proposed, `accepted` of them matched, and
    /// `accepted + 1` tokens (fewer at the end of the text) emitted.
    pub fn record_step(&mut self, drafted: usize, accepted: usize, emitted: usize) {
        self.steps += 1;
        self.steps_with_draft += u64::from(drafted > 0);
        self.drafted += drafted as u64;
        self.accepted += accepted as u64;
        self.tokens += emitted as u64;
    }

    /// Adds another replay's counts.
    pub fn merge(&mut self, other: &EmulationCounts) {
        self.tokens += other.tokens;
        self.steps += other.steps;
        self.steps_with_draft += other.steps_with_draft;
        self.drafted += other.drafted;
        self.accepted += other.accepted;
    }

    /// Emulated speed-up: tokens per verification step (1 = no gain over autoregressive).
    pub fn speedup(&self) -> f64 {
        ratio(self.tokens, self.steps)
    }

    /// Share of steps at which the drafter had a proposal.
    pub fn coverage(&self) -> f64 {
        ratio(self.steps_with_draft, self.steps)
    }

    /// Mean accepted length: accepted tokens per step that had a proposal.
    pub fn mean_accepted_length(&self) -> f64 {
        ratio(self.accepted, self.steps_with_draft)
    }

    /// Share of proposed tokens that were accepted.
    pub fn acceptance_rate(&self) -> f64 {
        ratio(self.accepted, self.drafted)
    }
}

/// `numerator / denominator`, or 0 when nothing was counted.
pub(crate) fn ratio(numerator: u64, denominator: u64) -> f64 {
    if denominator == 0 { 0.0 } else { numerator as f64 / denominator as f64 }
}

fn check_alpha(alpha: f64) -> Result<()> {
    if (0.0..=1.0).contains(&alpha) { Ok(()) } else { Err(Error::invalid("alpha", "in [0, 1]", alpha)) }
}

fn check_gamma(gamma: usize) -> Result<()> {
    if gamma >= 1 { Ok(()) } else { Err(Error::invalid("gamma", "≥ 1", gamma)) }
}

fn check_cost(cost: f64) -> Result<()> {
    if cost.is_finite() && cost >= 0.0 {
        Ok(())
    } else {
        Err(Error::invalid("cost", "a finite number ≥ 0 (drafter step time / target step time)", cost))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expected_tokens_match_the_geometric_series() {
        for &alpha in &[0.0f64, 0.3, 0.8, 0.99] {
            for gamma in 1..8 {
                let series: f64 = (0..=gamma).map(|i| alpha.powi(i as i32)).sum();
                assert!((expected_tokens_per_step(alpha, gamma).unwrap() - series).abs() < 1e-12);
            }
        }
        assert_eq!(expected_tokens_per_step(1.0, 4).unwrap(), 5.0);
    }

    #[test]
    fn paper_example_values() {
        // speculative-decoding.txt: α = 0.8, γ = 5 gives about 3.69 tokens per step, and with
        // c = 0.05 the improvement factor is (1 − 0.8⁶)/(0.2 · 1.25) ≈ 2.95.
        assert!((expected_tokens_per_step(0.8, 5).unwrap() - 3.68928).abs() < 1e-5);
        assert!((improvement_factor(0.8, 5, 0.05).unwrap() - 2.951424).abs() < 1e-5);
    }

    #[test]
    fn best_gamma_is_a_maximum() {
        let (gamma, factor) = best_gamma(0.8, 0.05, 64).unwrap();
        for g in 1..=64 {
            assert!(improvement_factor(0.8, g, 0.05).unwrap() <= factor + 1e-12);
        }
        assert!((factor - improvement_factor(0.8, gamma, 0.05).unwrap()).abs() < 1e-12);
        // A free drafter with perfect acceptance wants the longest draft.
        assert_eq!(best_gamma(1.0, 0.0, 10).unwrap().0, 10);
    }

    #[test]
    fn acceptance_rate_is_one_minus_total_variation() {
        let p = [0.5, 0.3, 0.2];
        let q = [0.2, 0.3, 0.5];
        assert!((acceptance_rate(&p, &q).unwrap() - 0.7).abs() < 1e-7);
    }

    #[test]
    fn accepted_length_is_the_sum_of_prefix_products() {
        assert!((expected_accepted_length(&[0.5, 0.5, 0.5]).unwrap() - (0.5 + 0.25 + 0.125)).abs() < 1e-12);
        let alpha = 0.7;
        let gamma = 4;
        let expected = expected_tokens_per_step(alpha, gamma).unwrap() - 1.0;
        assert!((expected_accepted_length(&[alpha; 4]).unwrap() - expected).abs() < 1e-12);
        assert!(expected_accepted_length(&[0.5, 1.2]).is_err());
    }

    #[test]
    fn shortlist_bounds_hold_on_random_cases() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(9);
        for _ in 0..2_000 {
            let n = 8;
            let mut p: Vec<f64> = (0..n).map(|_| rng.random::<f64>().powi(3)).collect();
            let mut q: Vec<f64> = (0..n).map(|_| rng.random::<f64>().powi(3)).collect();
            let (sp, sq): (f64, f64) = (p.iter().sum(), q.iter().sum());
            p.iter_mut().for_each(|x| *x /= sp);
            q.iter_mut().for_each(|x| *x /= sq);
            let shortlist: Vec<bool> = (0..n).map(|i| i == 0 || rng.random::<f64>() < 0.5).collect();
            let q_mass: f64 = (0..n).filter(|&i| shortlist[i]).map(|i| q[i]).sum();
            let p_mass: f64 = (0..n).filter(|&i| shortlist[i]).map(|i| p[i]).sum();
            if q_mass == 0.0 {
                continue;
            }
            let alpha: f64 = (0..n).map(|i| p[i].min(q[i])).sum();
            let alpha_s: f64 = (0..n).filter(|&i| shortlist[i]).map(|i| p[i].min(q[i] / q_mass)).sum();
            let (lower, upper) = shortlist_acceptance_bounds(alpha.min(1.0), q_mass.min(1.0), p_mass.min(1.0)).unwrap();
            assert!(lower <= alpha_s + 1e-9 && alpha_s <= upper + 1e-9, "{lower} ≤ {alpha_s} ≤ {upper}");
        }
        // The lower bound is attained: q entirely off the shortlist except a sliver.
        let (lower, _) = shortlist_acceptance_bounds(0.9, 0.2, 0.5).unwrap();
        assert!((lower - 0.1).abs() < 1e-12);
    }

    #[test]
    fn emulation_metrics_follow_their_definitions() {
        let mut counts = EmulationCounts::default();
        counts.record_step(4, 2, 3); // proposed 4, matched 2, emitted 2 + 1
        counts.record_step(0, 0, 1); // no proposal: one autoregressive token
        counts.record_step(3, 3, 4);
        assert_eq!(counts.tokens, 8);
        assert!((counts.speedup() - 8.0 / 3.0).abs() < 1e-12);
        assert!((counts.coverage() - 2.0 / 3.0).abs() < 1e-12);
        assert!((counts.mean_accepted_length() - 2.5).abs() < 1e-12);
        assert!((counts.acceptance_rate() - 5.0 / 7.0).abs() < 1e-12);
    }

    #[test]
    fn out_of_range_inputs_name_the_parameter() {
        assert!(expected_tokens_per_step(1.5, 3).unwrap_err().to_string().contains("alpha"));
        assert!(expected_tokens_per_step(0.5, 0).unwrap_err().to_string().contains("gamma"));
        assert!(improvement_factor(0.5, 3, -1.0).unwrap_err().to_string().contains("cost"));
        assert!(improvement_factor(f64::NAN, 3, 0.1).is_err());
    }
}
