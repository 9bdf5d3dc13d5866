//! Verification rules: which drafted tokens the target keeps, and the token it adds.
//!
//! Every rule takes the target's probabilities at the γ + 1 positions of a draft (row `j` is the
//! distribution of the token after `context + draft[..j]`) and returns a [`Verdict`]: how many
//! drafted tokens were accepted and the one token sampled after them. The emitted tokens
//! `draft[..accepted] + [next_token]` follow the target distribution exactly.
//!
//! Acceptance costs O(1) per drafted token; only a rejection (or the bonus token) scans the
//! vocabulary once.

use rand::Rng;

use crate::draft::{Draft, DraftOrigin};
use crate::error::{Error, Result};
use crate::sampling::{SamplingConfig, checked_argmax, logits_to_probs, sample, sample_weighted};

/// The outcome of verifying one draft.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Verdict {
    /// How many drafted tokens were accepted (a prefix of the draft).
    pub accepted: usize,
    /// The token emitted after the accepted prefix: a correction drawn from the residual
    /// distribution after a rejection, or a bonus token drawn from the target when every drafted
    /// token was accepted.
    pub next_token: u32,
    /// Whether `next_token` is a bonus token (every drafted token was accepted).
    pub bonus: bool,
}

/// How deterministic drafts (a point mass on each token) are verified.
///
/// Both rules are lossless and give the same joint distribution of accepted length and next
/// token: exact match accepts `d` when a sample `x ~ p` equals `d`, which happens with probability
/// `p(d)`, and otherwise emits `x ~ p(· | x ≠ d)`; the point-mass rule accepts with probability
/// `min(1, p(d)/1)` and otherwise samples `max(p − δ_d, 0)`, the same distribution.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DeterministicRule {
    /// Speculative sampling with a point-mass draft distribution: O(1) per accepted token.
    #[default]
    PointMass,
    /// Sample from the target at each position and compare (O(|V|) per position).
    ExactMatch,
}

/// Verifies any [`Draft`] with the rule its origin calls for.
pub fn verify_draft<P: AsRef<[f32]>, R: Rng + ?Sized>(
    target_probs: &[P],
    draft: &Draft,
    deterministic_rule: DeterministicRule,
    rng: &mut R,
) -> Result<Verdict> {
    match &draft.origin {
        DraftOrigin::Deterministic => match deterministic_rule {
            DeterministicRule::PointMass => speculative_sampling_point_mass(target_probs, &draft.tokens, rng),
            DeterministicRule::ExactMatch => exact_match(target_probs, &draft.tokens, rng),
        },
        DraftOrigin::Sampled { distributions, outside_target: None } => {
            speculative_sampling(target_probs, &draft.tokens, distributions, rng)
        }
        DraftOrigin::Sampled { distributions, outside_target: Some(outside) } => {
            speculative_sampling_union(target_probs, &draft.tokens, distributions, outside, rng)
        }
    }
}

/// Applies `sampling` to the target's logit rows (γ + 1 of them) and verifies `draft` with
/// [`verify_draft`]: the host-side verification every [`crate::Target`] can fall back to.
pub fn verify_logits<L: AsRef<[f32]>, R: Rng + ?Sized>(
    logits: &[L],
    draft: &Draft,
    sampling: &SamplingConfig,
    deterministic_rule: DeterministicRule,
    rng: &mut R,
) -> Result<Verdict> {
    if sampling.is_greedy() || sampling.top_k == Some(1) {
        sampling.validate()?;
        if let Some(verdict) = verify_greedy(logits, draft)? {
            return Ok(verdict);
        }
    }
    let probs = logits.iter().map(|row| logits_to_probs(row.as_ref(), sampling)).collect::<Result<Vec<_>>>()?;
    verify_draft(&probs, draft, deterministic_rule, rng)
}

/// [`verify_logits`] when the target's distribution at every position is a point mass on its
/// arg-max (temperature 0, or top-k = 1): each rule above then reduces to "accept drafted tokens
/// while they equal the arg-max; emit the arg-max of the first position that differs, or of the
/// last one". Speculative sampling accepts `d` with probability `min(1, p(d)/q(d))`, 1 when
/// `d` is the arg-max and 0 otherwise, and its residual `max(p − q, 0)` is a point mass on the
/// arg-max; the point-mass rule and exact match likewise; the union rule's out-of-vocabulary
/// last token is always rejected. Computed on the logits: one arg-max per row, no probability
/// vectors (the general path builds γ + 1 of them, a vocabulary each, and scans one to sample
/// the next token: about 0.25 ms per row on a 49k vocabulary, 4% of a SmolLM2 step).
///
/// Errors as the general path does (shapes, tokens out of range, non-finite logits in any row,
/// a drafted token its own distribution calls impossible). `None` in the one case it leaves to
/// the general path: a rejected token's draft distribution holding all the mass on the arg-max
/// (a malformed distribution, whose residual is empty).
fn verify_greedy<L: AsRef<[f32]>>(logits: &[L], draft: &Draft) -> Result<Option<Verdict>> {
    let tokens = &draft.tokens;
    let vocab = check_shapes(logits, tokens)?;
    let best = logits.iter().map(|row| checked_argmax(row.as_ref())).collect::<Result<Vec<_>>>()?;
    let distributions = match &draft.origin {
        DraftOrigin::Deterministic => None,
        DraftOrigin::Sampled { distributions, outside_target } => {
            check_rows("draft distributions", distributions, tokens.len(), vocab)?;
            if let Some(outside) = outside_target {
                check_len("outside-target draft distribution", outside.len(), vocab)?;
            }
            Some(distributions)
        }
    };
    for (j, &token) in tokens.iter().enumerate() {
        if let Some(q) = distributions.map(|d| d[j].as_slice()) {
            let q_token = q[token as usize];
            if !(q_token > 0.0 && q_token.is_finite()) {
                return Err(Error::DraftTokenImpossible { position: j, token });
            }
            if token as usize != best[j] && q[best[j]] >= 1.0 {
                return Ok(None);
            }
        }
        if token as usize != best[j] {
            return Ok(Some(Verdict { accepted: j, next_token: best[j] as u32, bonus: false }));
        }
    }
    let last = best[tokens.len()];
    match &draft.origin {
        DraftOrigin::Sampled { outside_target: Some(outside), .. } if outside[last] >= 1.0 => Ok(None),
        DraftOrigin::Sampled { outside_target: Some(_), .. } => {
            Ok(Some(Verdict { accepted: tokens.len(), next_token: last as u32, bonus: false }))
        }
        _ => Ok(Some(Verdict { accepted: tokens.len(), next_token: last as u32, bonus: true })),
    }
}

/// Speculative sampling with full draft distributions (speculative-decoding.txt Algorithm 1;
/// hetero-vocab-sd.txt Algorithm 5).
///
/// For j = 1..γ: accept `d_j` with probability `min(1, p_j(d_j) / q_j(d_j))`; at the first
/// rejection emit a token from the normalized residual `max(p_j − q_j, 0)`. When all γ tokens are
/// accepted, emit a bonus token from `p_{γ+1}`.
///
/// `target_probs` has γ + 1 rows, `draft_probs` γ rows, all over the same vocabulary.
pub fn speculative_sampling<P: AsRef<[f32]>, Q: AsRef<[f32]>, R: Rng + ?Sized>(
    target_probs: &[P],
    draft_tokens: &[u32],
    draft_probs: &[Q],
    rng: &mut R,
) -> Result<Verdict> {
    let vocab = check_shapes(target_probs, draft_tokens)?;
    check_rows("draft distributions", draft_probs, draft_tokens.len(), vocab)?;
    for (j, &token) in draft_tokens.iter().enumerate() {
        let p = target_probs[j].as_ref();
        let q = draft_probs[j].as_ref();
        if !accept(p, q[token as usize], j, token, rng)? {
            return Ok(Verdict { accepted: j, next_token: sample_residual(p, q, rng)?, bonus: false });
        }
    }
    bonus(target_probs, draft_tokens.len(), rng)
}

/// Speculative sampling over the union of two vocabularies (hetero-vocab-sd.txt Algorithm 1).
///
/// Like [`speculative_sampling`], but after the last drafted token the drafter drew a token
/// outside the target vocabulary from `outside_probs`. The target assigns it probability 0, so
/// it is rejected with certainty and the emitted token comes from `max(p_{γ+1} − q_{γ+1}, 0)`.
pub fn speculative_sampling_union<P: AsRef<[f32]>, Q: AsRef<[f32]>, R: Rng + ?Sized>(
    target_probs: &[P],
    draft_tokens: &[u32],
    draft_probs: &[Q],
    outside_probs: &[f32],
    rng: &mut R,
) -> Result<Verdict> {
    let verdict = speculative_sampling(target_probs, draft_tokens, draft_probs, rng)?;
    if !verdict.bonus {
        return Ok(verdict);
    }
    // Every in-vocabulary token was accepted, and the bonus drawn above is discarded: the next
    // position holds the out-of-vocabulary draft, which is always rejected.
    let p = target_probs[draft_tokens.len()].as_ref();
    check_len("outside-target draft distribution", outside_probs.len(), p.len())?;
    Ok(Verdict { accepted: draft_tokens.len(), next_token: sample_residual(p, outside_probs, rng)?, bonus: false })
}

/// Speculative sampling for a deterministic drafter: `q_j` is a point mass on `d_j`, so `d_j` is
/// accepted with probability `p_j(d_j)` and a rejection samples `p_j` with `d_j` removed.
pub fn speculative_sampling_point_mass<P: AsRef<[f32]>, R: Rng + ?Sized>(
    target_probs: &[P],
    draft_tokens: &[u32],
    rng: &mut R,
) -> Result<Verdict> {
    check_shapes(target_probs, draft_tokens)?;
    for (j, &token) in draft_tokens.iter().enumerate() {
        let p = target_probs[j].as_ref();
        if !accept(p, 1.0, j, token, rng)? {
            let d = token as usize;
            let next = sample_weighted(
                p.len(),
                |i| if i == d { 0.0 } else { f64::from(p[i]) },
                "the residual distribution",
                rng,
            );
            // A rejection with nothing else to sample means p(d) was 1 up to rounding.
            let next_token = next.or_else(|_| sample(p, rng))?;
            return Ok(Verdict { accepted: j, next_token, bonus: false });
        }
    }
    bonus(target_probs, draft_tokens.len(), rng)
}

/// Exact match: sample `x_j ~ p_j` and keep `d_j` while `x_j = d_j`; the first mismatch `x_j` is
/// the emitted token. Under greedy decoding `p_j` is a point mass, so this is the arg-max check
/// used by SLEM (hetero-vocab-sd.txt Algorithm 2), dictionary and prompt-lookup drafters.
pub fn exact_match<P: AsRef<[f32]>, R: Rng + ?Sized>(
    target_probs: &[P],
    draft_tokens: &[u32],
    rng: &mut R,
) -> Result<Verdict> {
    check_shapes(target_probs, draft_tokens)?;
    for (j, &token) in draft_tokens.iter().enumerate() {
        let x = sample(target_probs[j].as_ref(), rng)?;
        if x != token {
            return Ok(Verdict { accepted: j, next_token: x, bonus: false });
        }
    }
    bonus(target_probs, draft_tokens.len(), rng)
}

/// One step of string-level rejection sampling (hetero-vocab-sd.txt Algorithm 3, lines 6–8).
///
/// The drafter proposed target token `t` with probability `ψ(t)` — the total probability of the
/// drafter-token sequences whose concatenation is `t` — given as a vector over target tokens.
/// Accept `t` with probability `min(1, p(t)/ψ(t))`; otherwise return a token drawn from the
/// normalized `max(p − ψ, 0)`. Returns `Ok(None)` when `t` is accepted.
pub fn string_level_rejection<R: Rng + ?Sized>(
    target_probs: &[f32],
    token: u32,
    psi: &[f32],
    rng: &mut R,
) -> Result<Option<u32>> {
    check_len("ψ over target tokens", psi.len(), target_probs.len())?;
    check_token(token, target_probs.len())?;
    if accept(target_probs, psi[token as usize], 0, token, rng)? {
        Ok(None)
    } else {
        sample_residual(target_probs, psi, rng).map(Some)
    }
}

/// Draws from the normalized residual `max(p − q, 0)` (speculative-decoding.txt Alg 1, the
/// adjusted distribution `p'`).
///
/// If rounding left no residual mass (`p ≤ q` everywhere although a rejection happened, which
/// exact arithmetic rules out), `p` itself is sampled.
pub fn sample_residual<R: Rng + ?Sized>(p: &[f32], q: &[f32], rng: &mut R) -> Result<u32> {
    check_len("draft distribution", q.len(), p.len())?;
    let residual = |i: usize| (f64::from(p[i]) - f64::from(q[i])).max(0.0);
    match sample_weighted(p.len(), residual, "the residual distribution", rng) {
        Err(Error::EmptyDistribution { .. }) => sample(p, rng),
        other => other,
    }
}

/// The acceptance test `u < p(d)/q(d)`, written as `u·q < p` to avoid a division.
fn accept<R: Rng + ?Sized>(p: &[f32], q_of_token: f32, position: usize, token: u32, rng: &mut R) -> Result<bool> {
    let p_of_token = f64::from(p[token as usize]);
    let q_of_token = f64::from(q_of_token);
    if !(q_of_token > 0.0 && q_of_token.is_finite()) {
        return Err(Error::DraftTokenImpossible { position, token });
    }
    Ok(p_of_token >= q_of_token || rng.random::<f64>() * q_of_token < p_of_token)
}

fn bonus<P: AsRef<[f32]>, R: Rng + ?Sized>(target_probs: &[P], gamma: usize, rng: &mut R) -> Result<Verdict> {
    Ok(Verdict { accepted: gamma, next_token: sample(target_probs[gamma].as_ref(), rng)?, bonus: true })
}

/// Checks that there are γ + 1 target rows of one length and that every token is in range;
/// returns the vocabulary size.
fn check_shapes<P: AsRef<[f32]>>(target_probs: &[P], draft_tokens: &[u32]) -> Result<usize> {
    let first = target_probs.first().ok_or(Error::LengthMismatch {
        what: "target rows (γ + 1)",
        expected: draft_tokens.len() + 1,
        got: 0,
    })?;
    let vocab = first.as_ref().len();
    check_rows("target rows (γ + 1)", target_probs, draft_tokens.len() + 1, vocab)?;
    for &token in draft_tokens {
        check_token(token, vocab)?;
    }
    Ok(vocab)
}

fn check_rows<P: AsRef<[f32]>>(what: &'static str, rows: &[P], count: usize, vocab: usize) -> Result<()> {
    check_len(what, rows.len(), count)?;
    for row in rows {
        check_len("a probability row (vocabulary size)", row.as_ref().len(), vocab)?;
    }
    Ok(())
}

fn check_len(what: &'static str, got: usize, expected: usize) -> Result<()> {
    if got == expected { Ok(()) } else { Err(Error::LengthMismatch { what, expected, got }) }
}

fn check_token(token: u32, vocab_size: usize) -> Result<()> {
    if (token as usize) < vocab_size { Ok(()) } else { Err(Error::TokenOutOfRange { token, vocab_size }) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    #[test]
    fn a_token_the_target_prefers_is_always_accepted() {
        let mut rng = StdRng::seed_from_u64(1);
        let p = [vec![0.1, 0.9], vec![0.5, 0.5]];
        let q = [vec![0.5, 0.5]];
        for _ in 0..1000 {
            assert_eq!(speculative_sampling(&p, &[1], &q, &mut rng).unwrap().accepted, 1);
        }
    }

    #[test]
    fn a_rejected_token_is_never_the_correction() {
        // p(0) < q(0): the residual max(p − q, 0) is zero at token 0.
        let mut rng = StdRng::seed_from_u64(2);
        let p = [vec![0.2, 0.8], vec![1.0, 0.0]];
        let q = [vec![0.9, 0.1]];
        for _ in 0..1000 {
            let v = speculative_sampling(&p, &[0], &q, &mut rng).unwrap();
            assert!(v.accepted == 1 || v.next_token == 1);
        }
    }

    #[test]
    fn greedy_point_mass_accepts_only_the_argmax() {
        let mut rng = StdRng::seed_from_u64(3);
        let p = [vec![0.0, 1.0, 0.0], vec![1.0, 0.0, 0.0], vec![0.0, 0.0, 1.0]];
        let v = speculative_sampling_point_mass(&p, &[1, 2], &mut rng).unwrap();
        assert_eq!(v, Verdict { accepted: 1, next_token: 0, bonus: false });
        let v = exact_match(&p, &[1, 0], &mut rng).unwrap();
        assert_eq!(v, Verdict { accepted: 2, next_token: 2, bonus: true });
    }

    /// Logits with ties (small integers), a masked token now and then.
    fn tied_logits(rng: &mut StdRng, rows: usize, vocab: usize) -> Vec<Vec<f32>> {
        (0..rows)
            .map(|_| {
                (0..vocab)
                    .map(|_| if rng.random_bool(0.05) { f32::NEG_INFINITY } else { rng.random_range(0..4) as f32 })
                    .collect()
            })
            .collect()
    }

    #[test]
    fn greedy_verification_on_logits_equals_every_rule_on_probabilities() {
        // The arg-max shortcut against the general path (softmax to a point mass, then the
        // rule), for each origin of draft: deterministic under both rules, sampled, and
        // sampled with an out-of-vocabulary last token.
        let mut rng = StdRng::seed_from_u64(21);
        let greedy = SamplingConfig::greedy();
        let top1 = SamplingConfig { top_k: Some(1), temperature: 0.7, ..SamplingConfig::default() };
        let (mut checked, mut accepted_some, mut all_accepted) = (0, 0, 0);
        for case in 0..3000 {
            let vocab = rng.random_range(2..7);
            let gamma = rng.random_range(0..4);
            let logits = tied_logits(&mut rng, gamma + 1, vocab);
            if logits.iter().any(|row| row.iter().all(|&l| l == f32::NEG_INFINITY)) {
                continue;
            }
            let config = if case % 2 == 0 { greedy.clone() } else { top1.clone() };
            let probs: Vec<Vec<f32>> = logits.iter().map(|row| logits_to_probs(row, &config).unwrap()).collect();
            let argmax: Vec<u32> = probs.iter().map(|p| p.iter().position(|&v| v == 1.0).unwrap() as u32).collect();
            // Drafted tokens: the arg-max more often than not, so that long acceptances occur.
            let tokens: Vec<u32> = (0..gamma)
                .map(|j| if rng.random_bool(0.7) { argmax[j] } else { rng.random_range(0..vocab as u32) })
                .collect();
            let q_row = |rng: &mut StdRng, token: u32| -> Vec<f32> {
                let mut q: Vec<f32> = (0..vocab).map(|_| rng.random_range(0.0f32..1.0)).collect();
                q[token as usize] += 0.5;
                let total: f32 = q.iter().sum();
                q.iter().map(|v| v / total).collect()
            };
            let distributions: Vec<Vec<f32>> = tokens.iter().map(|&t| q_row(&mut rng, t)).collect();
            let outside: Vec<f32> = (0..vocab).map(|_| rng.random_range(0.0f32..0.2)).collect();
            let drafts = [
                Draft::deterministic(tokens.clone()),
                Draft {
                    tokens: tokens.clone(),
                    origin: DraftOrigin::Sampled { distributions: distributions.clone(), outside_target: None },
                    confidence_class: None,
                },
                Draft {
                    tokens: tokens.clone(),
                    origin: DraftOrigin::Sampled { distributions, outside_target: Some(outside) },
                    confidence_class: None,
                },
            ];
            for draft in &drafts {
                for rule in [DeterministicRule::PointMass, DeterministicRule::ExactMatch] {
                    let fast = verify_logits(&logits, draft, &config, rule, &mut StdRng::seed_from_u64(case)).unwrap();
                    let general = verify_draft(&probs, draft, rule, &mut StdRng::seed_from_u64(case)).unwrap();
                    assert_eq!(fast, general, "case {case} {:?} {rule:?}: logits {logits:?}", draft.origin);
                    checked += 1;
                    accepted_some += usize::from(fast.accepted > 0);
                    all_accepted += usize::from(fast.accepted == gamma && gamma > 0);
                }
            }
        }
        // The comparison covered rejections, partial and full acceptances.
        assert!(
            checked > 10_000 && accepted_some > 1000 && all_accepted > 1000,
            "{checked} {accepted_some} {all_accepted}"
        );
    }

    #[test]
    fn greedy_verification_rejects_what_the_general_path_rejects() {
        let mut rng = StdRng::seed_from_u64(22);
        let greedy = SamplingConfig::greedy();
        let draft = Draft::deterministic(vec![1]);
        // A NaN in a row after the rejection is still an error, as it is for the general path.
        let nan_late = [vec![2.0, 1.0], vec![f32::NAN, 0.0]];
        assert!(matches!(
            verify_logits(&nan_late, &draft, &greedy, DeterministicRule::PointMass, &mut rng),
            Err(Error::NonFiniteLogits { .. })
        ));
        let short = [vec![2.0, 1.0]];
        assert!(matches!(
            verify_logits(&short, &draft, &greedy, DeterministicRule::PointMass, &mut rng),
            Err(Error::LengthMismatch { .. })
        ));
        let out_of_range = Draft::deterministic(vec![5]);
        let rows = [vec![2.0, 1.0], vec![0.0, 1.0]];
        assert!(matches!(
            verify_logits(&rows, &out_of_range, &greedy, DeterministicRule::PointMass, &mut rng),
            Err(Error::TokenOutOfRange { .. })
        ));
        let impossible = Draft {
            tokens: vec![1],
            origin: DraftOrigin::Sampled { distributions: vec![vec![1.0, 0.0]], outside_target: None },
            confidence_class: None,
        };
        assert!(matches!(
            verify_logits(&rows, &impossible, &greedy, DeterministicRule::PointMass, &mut rng),
            Err(Error::DraftTokenImpossible { position: 0, token: 1 })
        ));
    }

    #[test]
    fn malformed_drafts_are_errors_not_panics() {
        let mut rng = StdRng::seed_from_u64(4);
        let p = [vec![0.5, 0.5], vec![0.5, 0.5]];
        assert!(matches!(
            speculative_sampling(&p, &[0], &[vec![0.0, 1.0]], &mut rng),
            Err(Error::DraftTokenImpossible { position: 0, token: 0 })
        ));
        assert!(matches!(
            speculative_sampling_point_mass(&p, &[7], &mut rng),
            Err(Error::TokenOutOfRange { token: 7, vocab_size: 2 })
        ));
        assert!(matches!(
            speculative_sampling_point_mass(&p, &[0, 1], &mut rng),
            Err(Error::LengthMismatch { expected: 3, got: 2, .. })
        ));
        assert!(speculative_sampling(&p, &[0], &[vec![0.5, 0.25, 0.25]], &mut rng).is_err());
    }

    #[test]
    fn union_rejects_the_outside_token_and_samples_the_residual() {
        let mut rng = StdRng::seed_from_u64(5);
        let p = [vec![0.5, 0.5], vec![0.3, 0.7]];
        let q = [vec![0.5, 0.5]];
        // The drafter put 0.8 on target token 1 and drew an outside token: max(p − q, 0) is
        // [0.3, 0], so the correction is token 0.
        for _ in 0..200 {
            let v = speculative_sampling_union(&p, &[1], &q, &[0.0, 0.8], &mut rng).unwrap();
            assert!(!v.bonus);
            assert!(v.accepted < 1 || v.next_token == 0, "{v:?}");
        }
    }
}
