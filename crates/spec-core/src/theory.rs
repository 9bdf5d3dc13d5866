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
/// token; the right-hand side of dynaspec.txt Theorem 5.3, Eq. 6, see
/// [`dynaspec_accepted_length_lower_bound`]).
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

/// The expected accepted length of dynaspec.txt Theorem 5.3 (Eq. 6), as the paper states it: a
/// **lower bound**. For a block of `b` drafted tokens whose step `i` is accepted, given it was
/// reached, with probability at least `A_i` (the overlap of Eq. 4 at that step's context),
///
/// `E[L] ≥ Σ_{i=1}^{b} Π_{j=1}^{i} A_j`.
///
/// The right-hand side is [`expected_accepted_length`]'s sum; it is an equality when the
/// acceptance probabilities are exactly the `A_j`, and a bound when each `A_j` is a floor over the
/// contexts that step can see (the proof in App. A.2 uses only `Pr(accept j | E_{j−1}) ≥ A_j`).
/// Floors from [`dynaspec_overlap_lower_bound`] may be negative (the paper's Table 3 has
/// −0.0325); clip them at 0 before passing them here, since an acceptance probability is ≥ 0.
pub fn dynaspec_accepted_length_lower_bound(overlaps: &[f64]) -> Result<f64> {
    for &overlap in overlaps {
        if !(0.0..=1.0).contains(&overlap) {
            return Err(Error::invalid(
                "overlaps",
                "each in [0, 1] (per-step acceptance floors; clip a negative Theorem 5.1 bound at 0)",
                overlap,
            ));
        }
    }
    expected_accepted_length(overlaps)
}

/// The two quantities of dynaspec.txt Theorem 5.1 at one context, computed from a full target
/// distribution `p`, the drafter's full-vocabulary distribution `q` and a shortlist `S`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct ShortlistOverlapTerms {
    /// `p(S) = Σ_{x∈S} p(x)`, the target mass the shortlist keeps.
    pub target_mass_in_shortlist: f64,
    /// `q(S) = Σ_{x∈S} q(x)`, the drafter mass the shortlist keeps.
    pub draft_mass_in_shortlist: f64,
    /// `TV(p(·|S), q(·|S))` (Eq. 5 on the conditionals `p(x|S) = p(x)/p(S)`, `q(x|S) =
    /// q(x)/q(S)` for `x ∈ S`).
    pub conditional_tv: f64,
}

/// Computes `p(S)`, `q(S)` and `TV(p(·|S), q(·|S))` (dynaspec.txt §5, the definitions before
/// Theorem 5.1). `shortlist` holds token ids, each at most once. Both `p(S)` and `q(S)` must be
/// positive, or a conditional is undefined.
pub fn shortlist_overlap_terms(target: &[f32], draft: &[f32], shortlist: &[u32]) -> Result<ShortlistOverlapTerms> {
    if target.len() != draft.len() {
        return Err(Error::LengthMismatch {
            what: "draft distribution (vocabulary size)",
            expected: target.len(),
            got: draft.len(),
        });
    }
    let mut seen = vec![false; target.len()];
    for &token in shortlist {
        let Some(slot) = seen.get_mut(token as usize) else {
            return Err(Error::invalid("shortlist", "token ids below the vocabulary size", token));
        };
        if *slot {
            return Err(Error::invalid("shortlist", "each token id at most once", token));
        }
        *slot = true;
    }
    let mass = |probs: &[f32]| -> f64 { shortlist.iter().map(|&t| f64::from(probs[t as usize])).sum() };
    let (p_s, q_s) = (mass(target), mass(draft));
    if p_s.is_nan() || p_s <= 0.0 {
        return Err(Error::invalid("shortlist", "a set with positive target mass p(S) (p(·|S) is undefined)", p_s));
    }
    if q_s.is_nan() || q_s <= 0.0 {
        return Err(Error::invalid("shortlist", "a set with positive draft mass q(S) (q(·|S) is undefined)", q_s));
    }
    let tv = 0.5
        * shortlist
            .iter()
            .map(|&t| (f64::from(target[t as usize]) / p_s - f64::from(draft[t as usize]) / q_s).abs())
            .sum::<f64>();
    // Masses of f32 distributions can exceed 1 by rounding; the theorem's terms are in [0, 1].
    Ok(ShortlistOverlapTerms {
        target_mass_in_shortlist: p_s.min(1.0),
        draft_mass_in_shortlist: q_s.min(1.0),
        conditional_tv: tv.min(1.0),
    })
}

/// dynaspec.txt Theorem 5.1 (distribution overlap lower bound), as printed:
///
/// `A(c) ≥ (1 − β)(p_c(S) − TV(p_c(·|S), q_c(·|S)))`,
///
/// where `A(c) = Σ_x min(p_c(x), q̃_c(x))` (Eq. 4) is the acceptance rate of the proposal
/// `q̃_c = (1 − β) q_{S,c} + β ω_c`: the drafter restricted to the shortlist `S` and renormalized
/// there (`q_{S,c} = q_c(·|S)`), mixed with weight `β` with a tail distribution `ω_c` supported
/// off `S`. β is the paper's "escape" probability; β = 0 is a drafter that never leaves the
/// shortlist. The value is not clipped: the paper's Table 3 reports negative bounds (−0.0325 for
/// FR-Spec, −0.0001 for DynaSpec on HumanEval).
pub fn dynaspec_overlap_lower_bound(beta: f64, target_mass_in_shortlist: f64, conditional_tv: f64) -> Result<f64> {
    if !(0.0..1.0).contains(&beta) {
        return Err(Error::invalid("beta", "in [0, 1) (the tail's share of the proposal)", beta));
    }
    if !(0.0..=1.0).contains(&target_mass_in_shortlist) {
        return Err(Error::invalid("target_mass_in_shortlist", "in [0, 1]", target_mass_in_shortlist));
    }
    if !(0.0..=1.0).contains(&conditional_tv) {
        return Err(Error::invalid("conditional_tv", "in [0, 1] (a total variation distance)", conditional_tv));
    }
    Ok((1.0 - beta) * (target_mass_in_shortlist - conditional_tv))
}

/// Bounds on the acceptance rate `α_S` of a drafter restricted to a shortlist `S` and renormalized
/// there, `q_S = q·1_S / q(S)`, in terms of the full-vocabulary rate `α = Σ min(p, q)` and the
/// drafter's mass on the shortlist. **Our own bound, not a paper's**: dynaspec.txt bounds the
/// same `α_S` (its `A(c)` at β = 0) through `p(S)` and the conditionals' TV instead, see
/// [`dynaspec_overlap_lower_bound`]; this form needs only `α` and `q(S)`, which a drafter knows
/// without the conditionals.
///
/// `α − (1 − q(S)) ≤ α_S ≤ p(S)`.
///
/// Proof. On `S`, `q_S ≥ q`, so `Σ_{x∈S} min(p, q_S) ≥ Σ_{x∈S} min(p, q) = α − Σ_{x∉S} min(p, q)
/// ≥ α − q(S^c)`. And `min(p, q_S) ≤ p` on `S` while `q_S = 0` off it, so `α_S ≤ p(S)`. ∎
///
/// Returns `(lower, upper)`, the lower bound clipped at 0. Feeding the lower bounds of each
/// position to [`dynaspec_accepted_length_lower_bound`] (Theorem 5.3) bounds the mean accepted
/// length of a shortlisted drafter from below, which is how a position-aware budget (a larger
/// shortlist early in the draft, where acceptance compounds) is chosen.
pub fn renormalized_shortlist_acceptance_bounds(
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
    fn paper_table_1_speeds() {
        // speculative-decoding.txt Table 1: the speed-up over the baseline at c = 0 for six
        // (α, γ), printed to two decimals.
        for &(alpha, gamma, speed) in
            &[(0.6, 2, 1.96), (0.7, 3, 2.53), (0.8, 2, 2.44), (0.8, 5, 3.69), (0.9, 2, 2.71), (0.9, 10, 6.86)]
        {
            let factor = improvement_factor(alpha, gamma, 0.0).unwrap();
            assert!((factor - speed).abs() < 0.005, "α {alpha} γ {gamma}: {factor} vs the paper's {speed}");
            assert_eq!(factor, expected_tokens_per_step(alpha, gamma).unwrap());
        }
        // With c > 0 Theorem 3.8 divides by γc + 1 (our check of the formula, not a paper number).
        let tokens = expected_tokens_per_step(0.8, 5).unwrap();
        assert!((improvement_factor(0.8, 5, 0.05).unwrap() - tokens / 1.25).abs() < 1e-12);
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
            let (lower, upper) =
                renormalized_shortlist_acceptance_bounds(alpha.min(1.0), q_mass.min(1.0), p_mass.min(1.0)).unwrap();
            assert!(lower <= alpha_s + 1e-9 && alpha_s <= upper + 1e-9, "{lower} ≤ {alpha_s} ≤ {upper}");
        }
        // The lower bound is attained: q entirely off the shortlist except a sliver.
        let (lower, _) = renormalized_shortlist_acceptance_bounds(0.9, 0.2, 0.5).unwrap();
        assert!((lower - 0.1).abs() < 1e-12);
    }

    /// A random distribution over `n` tokens with uneven masses (and some near-zero ones).
    fn random_distribution(rng: &mut impl rand::Rng, n: usize) -> Vec<f64> {
        let mut v: Vec<f64> = (0..n).map(|_| rng.random::<f64>().powi(3)).collect();
        let sum: f64 = v.iter().sum();
        v.iter_mut().for_each(|x| *x /= sum);
        v
    }

    fn to_f32(v: &[f64]) -> Vec<f32> {
        v.iter().map(|&x| x as f32).collect()
    }

    #[test]
    fn theorem_5_1_holds_against_the_exact_overlap() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(51);
        let n = 8;
        let mut slack_min = f64::MAX;
        for _ in 0..3_000 {
            let p = random_distribution(&mut rng, n);
            let q = random_distribution(&mut rng, n);
            let shortlist: Vec<u32> = (0..n as u32).filter(|&i| i == 0 || rng.random::<f64>() < 0.6).collect();
            let in_s = |i: usize| shortlist.contains(&(i as u32));
            let beta = if rng.random::<f64>() < 0.3 { 0.0 } else { 0.3 * rng.random::<f64>() };
            // The proposal q̃ = (1 − β) q(·|S) + β ω, ω uniform off S (all on S when S = V).
            let off: Vec<usize> = (0..n).filter(|&i| !in_s(i)).collect();
            let q_s: f64 = shortlist.iter().map(|&t| q[t as usize]).sum();
            let proposal: Vec<f64> = (0..n)
                .map(|i| {
                    if in_s(i) {
                        let renormalized = (1.0 - beta) * q[i] / q_s;
                        if off.is_empty() { q[i] / q_s } else { renormalized }
                    } else {
                        beta / off.len() as f64
                    }
                })
                .collect();
            let exact = acceptance_rate(&to_f32(&p), &to_f32(&proposal)).unwrap();
            let terms = shortlist_overlap_terms(&to_f32(&p), &to_f32(&q), &shortlist).unwrap();
            let beta_used = if off.is_empty() { 0.0 } else { beta };
            let bound =
                dynaspec_overlap_lower_bound(beta_used, terms.target_mass_in_shortlist, terms.conditional_tv).unwrap();
            assert!(bound <= exact + 1e-6, "Theorem 5.1 violated: {bound} > {exact}");
            slack_min = slack_min.min(exact - bound);
        }
        assert!(slack_min < 0.02, "the random cases should come near the bound, closest {slack_min}");
    }

    #[test]
    fn theorem_5_1_is_attained_and_its_terms_are_the_papers() {
        // S = {0, 1, 2} holds all the target mass; q puts half of its shortlist mass on token 2,
        // where p has none. p(S) = 1, TV(p(·|S), q(·|S)) = 0.5, and with β = 0.2 and ω on
        // token 3 the exact overlap is Σ_S min(p, 0.8 q(·|S)) = 0.2 + 0.2 = 0.4 = 0.8 · (1 − 0.5).
        let p = [0.5f32, 0.5, 0.0, 0.0];
        let q = [0.1f32, 0.1, 0.2, 0.6];
        let terms = shortlist_overlap_terms(&p, &q, &[0, 1, 2]).unwrap();
        assert!((terms.target_mass_in_shortlist - 1.0).abs() < 1e-7);
        assert!((terms.draft_mass_in_shortlist - 0.4).abs() < 1e-7);
        assert!((terms.conditional_tv - 0.5).abs() < 1e-7);
        let bound = dynaspec_overlap_lower_bound(0.2, terms.target_mass_in_shortlist, terms.conditional_tv).unwrap();
        let proposal = [0.2f32, 0.2, 0.4, 0.2];
        let exact = acceptance_rate(&p, &proposal).unwrap();
        assert!((exact - 0.4).abs() < 1e-6 && (bound - exact).abs() < 1e-6, "bound {bound}, exact {exact}");
        // p(S) enters once, unsquared and unmultiplied: p(S) = 0.8, TV = 0.3, β = 0.1.
        assert!((dynaspec_overlap_lower_bound(0.1, 0.8, 0.3).unwrap() - 0.45).abs() < 1e-12);
        // The paper's Table 3 differences are negative and are kept as such.
        assert!(dynaspec_overlap_lower_bound(0.0, 0.8544, 0.88697).unwrap() < 0.0);
    }

    #[test]
    fn theorem_5_1_inputs_are_checked() {
        assert!(dynaspec_overlap_lower_bound(1.0, 0.5, 0.1).unwrap_err().to_string().contains("beta"));
        assert!(dynaspec_overlap_lower_bound(0.1, 1.5, 0.1).unwrap_err().to_string().contains("target_mass"));
        assert!(dynaspec_overlap_lower_bound(0.1, 0.5, -0.1).unwrap_err().to_string().contains("conditional_tv"));
        let (p, q) = ([0.5f32, 0.5, 0.0], [0.0f32, 0.5, 0.5]);
        assert!(shortlist_overlap_terms(&p, &q, &[3]).unwrap_err().to_string().contains("below the vocabulary"));
        assert!(shortlist_overlap_terms(&p, &q, &[1, 1]).unwrap_err().to_string().contains("at most once"));
        assert!(shortlist_overlap_terms(&p, &q, &[2]).unwrap_err().to_string().contains("p(S)"));
        assert!(shortlist_overlap_terms(&p, &q, &[0]).unwrap_err().to_string().contains("q(S)"));
        assert!(shortlist_overlap_terms(&p, &q[..2], &[0]).is_err());
    }

    /// The exact expected number of accepted tokens of speculative sampling over a draft of
    /// `depth` tokens, where the target and drafter distributions at each context are
    /// `dists(context)`: a drafted `x` is accepted with probability `min(1, p(x)/q(x))`, so it is
    /// drafted and accepted with probability `min(p(x), q(x))`.
    fn exact_accepted_length(
        context: &mut Vec<usize>,
        depth: usize,
        dists: &mut impl FnMut(&[usize]) -> (Vec<f64>, Vec<f64>),
    ) -> f64 {
        if depth == 0 {
            return 0.0;
        }
        let (p, q) = dists(context);
        let mut total = 0.0;
        for x in 0..p.len() {
            let accept = p[x].min(q[x]);
            if accept > 0.0 {
                context.push(x);
                total += accept * (1.0 + exact_accepted_length(context, depth - 1, dists));
                context.pop();
            }
        }
        total
    }

    #[test]
    fn theorem_5_3_bounds_the_exact_accepted_length() {
        use rand::SeedableRng;
        use std::collections::HashMap;
        let mut rng = rand::rngs::StdRng::seed_from_u64(53);
        let (n, b) = (3, 4);
        for _ in 0..50 {
            // Context-dependent distributions: every prefix gets its own random (p, q).
            let mut table: HashMap<Vec<usize>, (Vec<f64>, Vec<f64>)> = HashMap::new();
            let mut dists = |c: &[usize]| {
                table
                    .entry(c.to_vec())
                    .or_insert_with(|| (random_distribution(&mut rng, n), random_distribution(&mut rng, n)))
                    .clone()
            };
            let exact = exact_accepted_length(&mut Vec::new(), b, &mut dists);
            // A_j: the least overlap over every context step j can see.
            let mut floors = vec![1.0f64; b];
            for (context, (p, q)) in &table {
                let overlap: f64 = p.iter().zip(q).map(|(a, b)| a.min(*b)).sum();
                floors[context.len()] = floors[context.len()].min(overlap);
            }
            let bound = dynaspec_accepted_length_lower_bound(&floors).unwrap();
            assert!(bound <= exact + 1e-9, "Theorem 5.3 violated: {bound} > {exact}");
        }
    }

    #[test]
    fn theorem_5_3_is_attained_when_the_overlap_is_the_same_at_every_context() {
        // Per depth one (p, q) for every context: A_1 = 0.7, A_2 = 0.4, A_3 = 0.9, and then
        // E[L] = 0.7 + 0.7·0.4 + 0.7·0.4·0.9 = 1.232 exactly.
        let levels = [
            (vec![0.5, 0.5, 0.0], vec![0.2, 0.5, 0.3]),
            (vec![0.6, 0.4, 0.0], vec![0.0, 0.4, 0.6]),
            (vec![0.3, 0.3, 0.4], vec![0.3, 0.4, 0.3]),
        ];
        let mut dists = |c: &[usize]| levels[c.len()].clone();
        let exact = exact_accepted_length(&mut Vec::new(), 3, &mut dists);
        let bound = dynaspec_accepted_length_lower_bound(&[0.7, 0.4, 0.9]).unwrap();
        assert!((exact - 1.232).abs() < 1e-12 && (bound - exact).abs() < 1e-12, "bound {bound}, exact {exact}");
        assert!(dynaspec_accepted_length_lower_bound(&[0.5, -0.03]).unwrap_err().to_string().contains("clip"));
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
