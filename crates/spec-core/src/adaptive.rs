//! Choosing γ while generating, from what the last steps measured.
//!
//! speculative-decoding.txt §3.5 picks the γ that maximises Theorem 3.8's walltime improvement
//! `(1 − α^{γ+1}) / ((1 − α)(γc + 1))` for known α and c, and §6 notes that "varying them during
//! inference could yield additional improvements". [`GammaTuner`] does that with three estimates
//! kept up to date as generation runs:
//!
//! - **α**, the per-token acceptance probability: acceptance tests passed ÷ taken, with older
//!   steps decayed so that the estimate follows the text (a code block, a quoted passage);
//! - **the drafter's cost** per drafted token, in seconds;
//! - **the verification pass's cost** `v(k)` for each width `k = γ + 1` it has seen, in seconds,
//!   each scaled by how much a one-position pass's cost has moved since that width was last
//!   timed, so that a longer prompt makes every width dearer, not only the widths in use.
//!   Theorem 3.8 assumes `v(k) = v(1)` ("enough compute resources", §3.4); on a CPU it is not
//!   (see [`crate::theory::improvement_factor_with_verify_cost`]), and the tuner uses what it
//!   measured.
//!
//! Each step then asks the drafter for the `γ ∈ 0..=max` maximising expected tokens per second,
//! `E[tokens | α, γ] / (γ · draft + v(γ + 1))` ([`GammaTuner::next_gamma`]), and verifies at most
//! the `γ` maximising `E[tokens | α, γ] / v(γ + 1)` of what was drafted, the drafting being paid
//! by then ([`GammaTuner::verify_len`]). A deterministic draft that carries a confidence class
//! ([`crate::Draft::confidence_class`]: how long a context the drafter matched) is cut with the
//! α measured for its class instead ([`GammaTuner::verify_len_for`]): one α for every draft
//! verifies a 1-token match as deep as an 8-token one, wasting passes on the first and
//! stopping short on the second. `γ = 0` (a plain step) wins when drafting does not pay.
//! A drafter whose cost is negligible (prompt lookup, a dictionary) is always asked for the
//! whole budget, since asking is free and its drafts exist only where it found a match; what is
//! verified is still cut to what pays. A drafter that knows before drafting which class its
//! next draft comes under ([`crate::Drafter::source_class`]: a hybrid of prompt lookup and a
//! model says whether lookup matched) is asked for what that class's own α and drafting cost
//! pay ([`GammaTuner::next_gamma_for`]), so the model is not asked for drafts on the strength
//! of prompt lookup's acceptance. After [`PROBE_INTERVAL`] steps without an acceptance test,
//! one token is verified to keep α measured, so the tuner comes back when the text turns
//! predictable. Each probe that fails doubles the wait before the next (up to
//! [`MAX_PROBE_INTERVAL`]) and one accepted token resets it: a probe costs a wider pass (and a
//! model drafter's step), and where a drafter has nothing to offer (the dictionary on a RAG
//! passage, a drafter of another tokenizer at α ≈ 0.05) a probe every 8 steps paid them for
//! little: SLEM's row of `anyspec demo` verified 192 drafted tokens over 1,638 generated, 9 of
//! them accepted, and 41 with the backoff.
//!
//! Changing γ between steps keeps decoding lossless: each step's verification preserves the
//! target's distribution whatever the draft length, and the choice depends only on the past.

use std::time::Duration;

/// Weight kept by the acceptance counts per step: older steps fade with a half-life of about
/// 6.6 steps, so α tracks the current stretch of text.
const ALPHA_DECAY: f64 = 0.9;

/// Weight of a new timing in the running mean of its width (an exponential moving average).
const TIMING_WEIGHT: f64 = 0.25;

/// After this many steps in a row without an acceptance test, one step drafts (or verifies) a
/// single token to re-measure α; the wait doubles after each failed probe ([`Probing`]).
pub const PROBE_INTERVAL: usize = 8;

/// The longest wait between two probes, reached after three failed probes in a row.
pub const MAX_PROBE_INTERVAL: usize = 64;

/// When the next probe is due: steps in a row without an acceptance test, and the wait, which
/// starts at [`PROBE_INTERVAL`], doubles with each failed probe up to [`MAX_PROBE_INTERVAL`] and
/// returns to the start when a test passes.
#[derive(Clone, Copy, Debug)]
struct Probing {
    untested: usize,
    interval: usize,
}

impl Default for Probing {
    fn default() -> Self {
        Probing { untested: 0, interval: PROBE_INTERVAL }
    }
}

impl Probing {
    /// Whether a step now should test one token even though the estimates say it does not pay.
    fn due(&self) -> bool {
        self.untested + 1 >= self.interval
    }

    /// Learns from a step that took `tests` acceptance tests (0: nothing verified) and passed
    /// `passed` of them.
    fn observe(&mut self, tests: usize, passed: usize) {
        if tests == 0 {
            self.untested += 1;
            return;
        }
        if passed > 0 {
            self.interval = PROBE_INTERVAL;
        } else if self.due() {
            // This step was (or could have been) the probe, and it failed.
            self.interval = (2 * self.interval).min(MAX_PROBE_INTERVAL);
        }
        self.untested = 0;
    }
}

/// A drafter costing at most this share of a one-position target pass per drafted token counts
/// as free: it is always asked for the whole budget.
const FREE_DRAFT: f64 = 0.01;

/// Prior weight, in acceptance tests, of the overall α in a confidence class's estimate: a class
/// seen a few times leans on the overall rate until its own tests outweigh it.
const CLASS_PRIOR_TESTS: f64 = 2.0;

/// What one draft → verify step did, as the tuner learns from it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StepObservation {
    /// Tokens the drafter proposed (may be fewer than asked).
    pub drafted: usize,
    /// Drafted tokens accepted.
    pub accepted: usize,
    /// Whether the step ended with a bonus token after a fully accepted draft (no rejection).
    pub bonus: bool,
    /// Time the drafter took.
    pub draft_time: Duration,
    /// Time of the target's pass over `drafted + 1` positions and its verification.
    pub verify_time: Duration,
    /// The confidence class the draft was cut by ([`crate::Draft::cut_class`]), if any.
    pub class: Option<u16>,
    /// The class the drafter announced before drafting ([`crate::Drafter::source_class`]), if
    /// any: its acceptance and drafting cost decide how much to ask for next time
    /// ([`GammaTuner::next_gamma_for`]).
    pub source: Option<u16>,
}

/// What the tuner learns of a set of steps (all of them, or one confidence class's): decayed
/// acceptance tests passed and taken, the running mean cost of drafting per drafted token, and
/// when the next probe is due.
#[derive(Clone, Copy, Debug, Default)]
struct ClassCounts {
    passed: f64,
    tests: f64,
    probing: Probing,
    /// Running mean seconds of drafting per drafted token, in these steps.
    draft_per_token: Option<f64>,
}

impl ClassCounts {
    /// Learns from a finished step (`step.drafted` counts the tokens verified).
    fn observe(&mut self, step: &StepObservation) {
        self.probing.observe(step.drafted, step.accepted);
        if step.drafted > 0 {
            // Acceptance tests taken: one per accepted token, plus the failed one unless the
            // whole draft was accepted.
            let tests = step.accepted + usize::from(!step.bonus);
            self.passed = ALPHA_DECAY * self.passed + step.accepted as f64;
            self.tests = ALPHA_DECAY * self.tests + tests as f64;
            let per_token = step.draft_time.as_secs_f64() / step.drafted as f64;
            self.draft_per_token = Some(blend(self.draft_per_token, per_token));
        }
    }
}

/// Picks γ for the next step from measured acceptance and costs (see the module docs).
#[derive(Clone, Debug)]
pub struct GammaTuner {
    max_gamma: usize,
    /// Every step's acceptance (the prior: one test passed of two, α = 0.5), drafting cost and
    /// probing (steps without an acceptance test: nothing drafted or nothing verified).
    overall: ClassCounts,
    /// The cost of a pass over `k` positions, by width.
    verify: VerifyCosts,
    /// Acceptance per confidence class, by class (few classes: a short list beats a map).
    classes: Vec<(u16, ClassCounts)>,
}

impl GammaTuner {
    /// A tuner choosing γ in `0..=max_gamma`, starting from α = 0.5 and no timings.
    pub fn new(max_gamma: usize) -> Self {
        GammaTuner {
            max_gamma,
            overall: ClassCounts { passed: 1.0, tests: 2.0, ..ClassCounts::default() },
            verify: VerifyCosts::new(max_gamma + 1),
            classes: Vec::new(),
        }
    }

    /// The most tokens a step may draft.
    pub fn max_gamma(&self) -> usize {
        self.max_gamma
    }

    /// The current estimate of the per-token acceptance probability α.
    pub fn alpha(&self) -> f64 {
        self.overall.passed / self.overall.tests
    }

    /// The acceptance estimate of drafts of confidence class `class`: its own decayed counts,
    /// with two tests' weight of the overall α as a prior; the overall α for
    /// `None` or a class not seen yet.
    pub fn class_alpha(&self, class: Option<u16>) -> f64 {
        match class.and_then(|c| self.class_counts(c)) {
            Some(counts) => (counts.passed + CLASS_PRIOR_TESTS * self.alpha()) / (counts.tests + CLASS_PRIOR_TESTS),
            None => self.alpha(),
        }
    }

    fn class_counts(&self, class: u16) -> Option<&ClassCounts> {
        self.classes.iter().find(|(c, _)| *c == class).map(|(_, counts)| counts)
    }

    fn class_counts_mut(&mut self, class: u16) -> &mut ClassCounts {
        let index = match self.classes.iter().position(|(c, _)| *c == class) {
            Some(i) => i,
            None => {
                self.classes.push((class, ClassCounts::default()));
                self.classes.len() - 1
            }
        };
        &mut self.classes[index].1
    }

    /// The estimated time of a pass over `positions` positions when that width has been
    /// measured: its running mean, scaled by how much a one-position pass's cost has moved
    /// since that width was last timed ([`VerifyCosts`]).
    pub fn verify_time(&self, positions: usize) -> Option<f64> {
        self.verify.measured(positions)
    }

    /// The estimated time of a pass over `positions` (≥ 1) positions: as
    /// [`GammaTuner::verify_time`] when seen; between two measured widths, the straight line
    /// through them; past the widest measured width, the slope of the last two measured widths
    /// (flat with only one); below the narrowest, proportional to the width. Both guesses are
    /// optimistic, so an unmeasured width gets tried and measured. `None` before any timing.
    pub fn estimated_verify_time(&self, positions: usize) -> Option<f64> {
        self.verify.estimate(positions)
    }

    /// Expected tokens per second of a step drafting `gamma` tokens under the current
    /// estimates, or `None` before the first timing.
    pub fn expected_rate(&self, gamma: usize) -> Option<f64> {
        self.rate_of(self.alpha(), self.overall.draft_per_token, gamma)
    }

    /// Expected tokens per second of a step drafting `gamma` tokens of acceptance `alpha` at
    /// `draft_per_token` seconds each, or `None` before the first timing.
    fn rate_of(&self, alpha: f64, draft_per_token: Option<f64>, gamma: usize) -> Option<f64> {
        let verify = self.estimated_verify_time(gamma + 1)?;
        let draft = if gamma == 0 { 0.0 } else { gamma as f64 * draft_per_token.unwrap_or(0.0) };
        Some(expected_tokens(alpha, gamma) / (draft + verify).max(1e-12))
    }

    /// Expected tokens per second of verifying `gamma` drafted tokens of acceptance `alpha`,
    /// drafting not counted.
    fn expected_verify_rate(&self, alpha: f64, gamma: usize) -> Option<f64> {
        let verify = self.estimated_verify_time(gamma + 1)?;
        Some(expected_tokens(alpha, gamma) / verify.max(1e-12))
    }

    /// The γ the next step should ask the drafter for.
    pub fn next_gamma(&self) -> usize {
        if self.drafting_is_free(self.overall.draft_per_token) {
            return self.max_gamma;
        }
        self.best(self.max_gamma, true)
    }

    /// [`GammaTuner::next_gamma`] for a draft that the drafter has announced will come under
    /// `source` ([`crate::Drafter::source_class`]): the γ with the most expected tokens per
    /// second under that class's own α and drafting cost (each the overall one until the class
    /// has been seen), probing on the class's own schedule. `None` is
    /// [`GammaTuner::next_gamma`].
    ///
    /// A hybrid of a free and a costly drafter (prompt lookup, then an EAGLE drafter where the
    /// prompt has no match) has two acceptance rates and two costs; one α and one mean cost
    /// for both asked the model for drafts whenever prompt lookup's high acceptance made
    /// drafting look worthwhile, and the model's cost was paid for drafts then cut to nothing.
    pub fn next_gamma_for(&self, source: Option<u16>) -> usize {
        let Some(source) = source else { return self.next_gamma() };
        let counts = self.class_counts(source);
        let draft = counts.and_then(|c| c.draft_per_token).or(self.overall.draft_per_token);
        if self.drafting_is_free(draft) {
            return self.max_gamma;
        }
        let alpha = self.class_alpha(Some(source));
        let probing = counts.map_or_else(Probing::default, |c| c.probing);
        self.best_of(self.max_gamma, &|gamma| self.rate_of(alpha, draft, gamma), probing)
    }

    /// How many of the tokens drafted for a request of `asked` to verify: the γ ≤ `asked` with
    /// the most expected tokens per second of verification (the drafting is paid by then).
    /// Depends on `asked` only, never on the drafted tokens, so cutting a sampled draft to it
    /// keeps verification lossless ([`crate::Draft::truncate`]).
    pub fn verify_len(&self, asked: usize) -> usize {
        self.best(asked.min(self.max_gamma), false)
    }

    /// [`GammaTuner::verify_len`] for a draft of `drafted` tokens of confidence class `class`
    /// ([`crate::Draft::cut_class`]): the γ ≤ `drafted` with the most expected tokens per second
    /// of verification under the class's own α ([`GammaTuner::class_alpha`]). A class whose
    /// drafts have gone untested for its probe interval ([`PROBE_INTERVAL`], doubled by each
    /// failed probe) gets one token verified, so its estimate recovers when the text changes.
    /// `None` is [`GammaTuner::verify_len`].
    pub fn verify_len_for(&self, drafted: usize, class: Option<u16>) -> usize {
        let Some(class) = class else { return self.verify_len(drafted) };
        let alpha = self.class_alpha(Some(class));
        let probing = self.class_counts(class).map_or_else(Probing::default, |c| c.probing);
        self.best_of(drafted.min(self.max_gamma), &|gamma| self.expected_verify_rate(alpha, gamma), probing)
    }

    /// Whether a measured drafting cost per token (`None`: not measured) is negligible beside a
    /// target pass.
    fn drafting_is_free(&self, draft_per_token: Option<f64>) -> bool {
        match (draft_per_token, self.estimated_verify_time(1)) {
            (Some(draft), Some(step)) => draft <= FREE_DRAFT * step,
            // Nothing measured yet: ask for everything, and measure.
            _ => true,
        }
    }

    /// The γ in `0..=limit` with the highest expected rate (with or without the drafting cost),
    /// or 1 when that is 0 and a probe is due.
    fn best(&self, limit: usize, with_draft_cost: bool) -> usize {
        let rate = |gamma: usize| {
            if with_draft_cost { self.expected_rate(gamma) } else { self.expected_verify_rate(self.alpha(), gamma) }
        };
        self.best_of(limit, &rate, self.overall.probing)
    }

    /// The γ in `0..=limit` with the highest `rate`, or 1 when that is 0 and a probe is due.
    fn best_of(&self, limit: usize, rate: &dyn Fn(usize) -> Option<f64>, probing: Probing) -> usize {
        if limit == 0 {
            return 0;
        }
        // Before any timing every width looks free: start at the top and measure.
        let Some(mut best) = rate(0).map(|r| (0, r)) else { return limit };
        for gamma in 1..=limit {
            let r = rate(gamma).unwrap_or(0.0);
            if r > best.1 * (1.0 + 1e-9) {
                best = (gamma, r);
            }
        }
        if best.0 == 0 && probing.due() { 1 } else { best.0 }
    }

    /// Records a timing of a target pass over `positions` positions measured elsewhere (a
    /// calibration before generation), so the first steps need not explore the widths.
    pub fn observe_verify_time(&mut self, positions: usize, time: Duration) {
        self.verify.observe(positions, time.as_secs_f64());
    }

    /// Learns from a finished step (`step.drafted` counts the tokens verified).
    pub fn observe(&mut self, step: &StepObservation) {
        self.overall.observe(step);
        // The class the draft was cut by, and the one announced before drafting when that is
        // another (a hybrid's model source, whose drafts carry classes of their own).
        let source = step.source.filter(|&s| step.class != Some(s));
        for class in [step.class, source].into_iter().flatten() {
            self.class_counts_mut(class).observe(step);
        }
        self.verify.observe(step.drafted + 1, step.verify_time.as_secs_f64());
    }
}

/// The cost of a target pass over `k` positions: a running mean per width, each remembering
/// the one-position pass's cost when it was last updated, and scaled by how much that cost has
/// moved since.
///
/// Why: a pass's cost grows with the context it attends over (SmolLM2 Q4_1 on 2 cores: 6.3 ms
/// after 64 tokens, 11.7 ms after 768, `reports/cpu-runtime.md`) while the ratio of one width's
/// cost to another's moves little. A plain mean per width follows the context only at the widths
/// the steps happen to use: moving from a 780-token prompt to a 53-token one, a width last used
/// on the long prompt kept its long-prompt cost beside the short prompt's one-position cost,
/// looked twice as dear as it was, and was never chosen again to be re-measured. A width in
/// regular use is updated at about the current one-position cost, so its estimate is its plain
/// running mean, as before. (Moving every width's estimate with every pass through a shared
/// scale measured worse: 0.02–0.05 lower speedups on the demo's rows in one same-run A/B, as a
/// noisy calibration's shape then stuck.)
#[derive(Clone, Debug)]
struct VerifyCosts {
    /// At index `k − 1`: running mean seconds of a pass over `k` positions, and the running mean
    /// of a one-position pass when it was last updated (`None` when none had been timed yet).
    widths: Vec<Option<(f64, Option<f64>)>>,
}

impl VerifyCosts {
    fn new(widths: usize) -> Self {
        VerifyCosts { widths: vec![None; widths] }
    }

    /// The running mean seconds of a one-position pass, if timed.
    fn plain(&self) -> Option<f64> {
        self.widths.first().copied().flatten().map(|(t, _)| t)
    }

    /// Learns from a pass over `positions` positions that took `seconds`.
    fn observe(&mut self, positions: usize, seconds: f64) {
        let Some(index) = positions.checked_sub(1).filter(|&i| i < self.widths.len()) else { return };
        let first_plain = index == 0 && self.plain().is_none();
        let mean = blend(self.widths[index].map(|(t, _)| t), seconds);
        self.widths[index] = Some((mean, if index == 0 { Some(mean) } else { self.plain() }));
        if first_plain {
            // Widths timed before any one-position pass are related to the first one.
            for (_, anchor) in self.widths.iter_mut().flatten() {
                anchor.get_or_insert(mean);
            }
        }
    }

    /// The estimate for a width that has been measured: its running mean, times the
    /// one-position cost now ÷ the one-position cost when that mean was last updated.
    fn measured(&self, positions: usize) -> Option<f64> {
        let (time, anchor) = self.widths.get(positions.checked_sub(1)?).copied().flatten()?;
        Some(match (anchor, self.plain()) {
            (Some(then), Some(now)) if then > 0.0 => time * now / then,
            _ => time,
        })
    }

    /// The estimate for any width: measured, else interpolated or extrapolated from the
    /// measured widths' estimates (see [`GammaTuner::estimated_verify_time`]).
    fn estimate(&self, positions: usize) -> Option<f64> {
        let figures: Vec<Option<f64>> = (1..=self.widths.len()).map(|k| self.measured(k)).collect();
        interpolate(&figures, positions)
    }
}

/// `figures[k − 1]` for `k = positions` when known; between two known widths, the straight line
/// through them; past the widest known width, the slope of the last two (flat with only one);
/// below the narrowest, proportional to the width. `None` when nothing is known.
fn interpolate(figures: &[Option<f64>], positions: usize) -> Option<f64> {
    let index = positions.checked_sub(1)?;
    if let Some(Some(t)) = figures.get(index) {
        return Some(*t);
    }
    let known: Vec<(usize, f64)> = figures.iter().enumerate().filter_map(|(i, t)| t.map(|t| (i + 1, t))).collect();
    let below = known.iter().rev().find(|(k, _)| *k < positions).copied();
    let above = known.iter().find(|(k, _)| *k > positions).copied();
    let line = |(k0, t0): (usize, f64), (k1, t1): (usize, f64)| {
        t0 + (t1 - t0) * (positions as f64 - k0 as f64) / (k1 as f64 - k0 as f64)
    };
    match (below, above) {
        (Some(a), Some(b)) => Some(line(a, b)),
        (Some(a), None) => {
            let before = known.iter().rev().find(|(k, _)| *k < a.0).copied();
            Some(before.map_or(a.1, |b| line(b, a).max(a.1)))
        }
        // Narrower than anything measured: proportional to the width, an optimistic guess
        // that gets the narrow widths tried (and measured) when drafts are poor.
        (None, Some(b)) => Some(b.1 * positions as f64 / b.0 as f64),
        (None, None) => None,
    }
}

/// Eq. 1 of speculative-decoding.txt: `(1 − α^{γ+1}) / (1 − α)`.
fn expected_tokens(alpha: f64, gamma: usize) -> f64 {
    if (1.0 - alpha).abs() < 1e-12 { gamma as f64 + 1.0 } else { (1.0 - alpha.powi(gamma as i32 + 1)) / (1.0 - alpha) }
}

fn blend(mean: Option<f64>, value: f64) -> f64 {
    mean.map_or(value, |m| m + TIMING_WEIGHT * (value - m))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(value: f64) -> Duration {
        Duration::from_secs_f64(value / 1e3)
    }

    /// Feeds `steps` steps drawn from a world where the pass over k positions takes
    /// `verify_ms(k)`, drafting costs `draft_ms` per token and every drafted token is accepted
    /// with probability `alpha` (deterministically: the first ⌊α·γ⌋ rounded tokens).
    fn train(tuner: &mut GammaTuner, alpha: f64, draft_ms: f64, verify_ms: &dyn Fn(usize) -> f64, steps: usize) {
        let mut debt = 0.0;
        for _ in 0..steps {
            // As the engine does: ask, draft that many, verify what pays.
            let gamma = tuner.verify_len(tuner.next_gamma());
            // Accept token by token with an error-diffusion coin so the empirical rate is α.
            let (accepted, bonus) = diffuse(&mut debt, alpha, gamma);
            let step = StepObservation {
                drafted: gamma,
                accepted,
                bonus,
                draft_time: ms(draft_ms * gamma as f64),
                verify_time: ms(verify_ms(gamma + 1)),
                class: None,
                source: None,
            };
            tuner.observe(&step);
        }
    }

    /// The γ maximising the same rate computed directly from the world's parameters.
    fn best_in_world(alpha: f64, draft_ms: f64, verify_ms: &dyn Fn(usize) -> f64, max: usize) -> usize {
        (0..=max)
            .map(|g| {
                let tokens = (1.0 - alpha.powi(g as i32 + 1)) / (1.0 - alpha);
                (g, tokens / (g as f64 * draft_ms + verify_ms(g + 1)))
            })
            .fold((0, f64::MIN), |best, (g, r)| if r > best.1 { (g, r) } else { best })
            .0
    }

    #[test]
    fn free_wide_passes_and_good_drafts_use_the_whole_budget() {
        let mut tuner = GammaTuner::new(6);
        train(&mut tuner, 0.9, 0.0, &|_| 10.0, 50);
        assert_eq!(tuner.next_gamma(), 6);
    }

    /// The gaps between successive probes (γ = 1 among zeros) in `choices`.
    fn probe_gaps(choices: &[usize]) -> Vec<usize> {
        let probes: Vec<usize> = choices.iter().enumerate().filter(|(_, g)| **g == 1).map(|(i, _)| i).collect();
        probes.windows(2).map(|w| w[1] - w[0]).collect()
    }

    #[test]
    fn costly_wide_passes_and_poor_drafts_stop_drafting_but_keep_probing_less_often() {
        // A CPU-like cost curve: each extra position costs 45% of a step.
        let verify = |k: usize| 10.0 * (1.0 + 0.45 * (k as f64 - 1.0));
        let mut tuner = GammaTuner::new(6);
        train(&mut tuner, 0.2, 0.0, &verify, 200);
        assert!(tuner.alpha() < 0.35, "α estimate {}", tuner.alpha());
        // From here on every drafted token is rejected.
        let mut step = |accepted: usize| {
            let gamma = tuner.verify_len(tuner.next_gamma());
            let accepted = accepted.min(gamma);
            let bonus = gamma == 0 || accepted == gamma;
            tuner.observe(&StepObservation {
                drafted: gamma,
                accepted,
                bonus,
                draft_time: Duration::ZERO,
                verify_time: ms(verify(gamma + 1)),
                class: None,
                source: None,
            });
            gamma
        };
        let choices: Vec<usize> = (0..300).map(|_| step(0)).collect();
        assert!(choices.iter().all(|&g| g <= 1), "{choices:?}");
        // Probes keep coming, each failure doubling the wait, up to the longest.
        let gaps = probe_gaps(&choices);
        assert!(gaps.len() >= 4, "{choices:?}");
        assert!(gaps.windows(2).all(|w| w[0] <= w[1]), "{gaps:?}");
        assert_eq!(gaps[gaps.len() - 2..], [MAX_PROBE_INTERVAL; 2], "{gaps:?}");
        // A probe that passes brings the short wait back.
        let until_probe = (0..=MAX_PROBE_INTERVAL).find(|_| step(1) == 1).expect("a probe within the longest wait");
        assert!(until_probe < MAX_PROBE_INTERVAL, "{until_probe}");
        let next: Vec<usize> = (0..PROBE_INTERVAL).map(|_| step(0)).collect();
        assert_eq!(next.iter().filter(|&&g| g == 1).count(), 1, "{next:?}");
    }

    #[test]
    fn the_choice_follows_the_measured_costs_to_the_world_optimum() {
        // Several worlds whose optimum is neither end of the range.
        let worlds: [(f64, f64, f64); 4] = [(0.8, 0.0, 0.45), (0.9, 0.5, 0.2), (0.6, 0.0, 0.1), (0.95, 1.0, 0.3)];
        for (alpha, draft_ms, slope) in worlds {
            let verify = move |k: usize| 10.0 * (1.0 + slope * (k as f64 - 1.0));
            let expected = best_in_world(alpha, draft_ms, &verify, 8);
            let mut tuner = GammaTuner::new(8);
            // Measure every width once so that the estimates are exact, then let it run.
            for g in 0..=8 {
                tuner.observe(&StepObservation {
                    drafted: g,
                    accepted: 0,
                    bonus: g == 0,
                    draft_time: ms(draft_ms * g as f64),
                    verify_time: ms(verify(g + 1)),
                    class: None,
                    source: None,
                });
            }
            train(&mut tuner, alpha, draft_ms, &verify, 400);
            let chosen = tuner.verify_len(tuner.next_gamma());
            assert!(
                chosen.abs_diff(expected) <= 1,
                "α {alpha}, draft {draft_ms} ms, slope {slope}: chose γ = {chosen}, the optimum is {expected} \
                 (α estimate {:.3})",
                tuner.alpha()
            );
        }
    }

    #[test]
    fn a_free_drafter_is_always_asked_but_only_what_pays_is_verified() {
        let verify = |k: usize| 10.0 * (1.0 + 0.45 * (k as f64 - 1.0));
        let mut free = GammaTuner::new(6);
        train(&mut free, 0.2, 0.0, &verify, 200);
        assert_eq!(free.next_gamma(), 6, "asking a free drafter costs nothing");
        assert!(free.verify_len(6) <= 1, "α 0.2 does not pay for verifying: {}", free.verify_len(6));
        // The same acceptance from a drafter costing half a step: not even asked.
        let mut costly = GammaTuner::new(6);
        train(&mut costly, 0.2, 5.0, &verify, 200);
        assert!(costly.next_gamma() <= 1, "{}", costly.next_gamma());
    }

    #[test]
    fn unmeasured_widths_are_interpolated_and_extrapolated() {
        let mut tuner = GammaTuner::new(8);
        assert_eq!(tuner.estimated_verify_time(3), None);
        let step = |drafted, t| StepObservation {
            drafted,
            accepted: 0,
            bonus: false,
            draft_time: Duration::ZERO,
            verify_time: ms(t),
            class: None,
            source: None,
        };
        tuner.observe(&step(0, 10.0));
        // One width: flat (optimistic) everywhere.
        assert!((tuner.estimated_verify_time(5).unwrap() - 0.010).abs() < 1e-9);
        tuner.observe(&step(2, 20.0));
        // Between 1 and 3 positions: on the line.
        assert!((tuner.estimated_verify_time(2).unwrap() - 0.015).abs() < 1e-9);
        // Past 3 positions: the same slope.
        assert!((tuner.estimated_verify_time(5).unwrap() - 0.030).abs() < 1e-9);
    }

    #[test]
    fn a_longer_context_makes_every_width_dearer_not_only_the_widths_in_use() {
        // Calibrated on a short prompt: a pass over k positions costs 5 ms · s(k).
        let shape = |k: usize| 1.0 + 0.2 * (k as f64 - 1.0);
        let mut tuner = GammaTuner::new(6);
        for k in 1..=7 {
            tuner.observe_verify_time(k, ms(5.0 * shape(k)));
        }
        assert!((tuner.estimated_verify_time(7).unwrap() - 0.005 * shape(7)).abs() < 1e-9);
        // Then a prompt three times as long doubles every pass, and only plain steps and
        // two-position passes are taken there.
        let step = |drafted: usize| StepObservation {
            drafted,
            accepted: 0,
            bonus: false,
            draft_time: Duration::ZERO,
            verify_time: ms(10.0 * shape(drafted + 1)),
            class: None,
            source: None,
        };
        for i in 0..24 {
            tuner.observe(&step(i % 2));
        }
        // The widths never used there follow: each within 5% of its cost at the new context.
        for k in 1..=7 {
            let (estimate, truth) = (tuner.estimated_verify_time(k).unwrap(), 0.010 * shape(k));
            assert!((estimate / truth - 1.0).abs() < 0.05, "k = {k}: {estimate} s estimated, {truth} s true");
        }
        // And back on a short prompt, nothing looks dearer than it is for long.
        for i in 0..24 {
            tuner.observe(&StepObservation { verify_time: ms(5.0 * shape(i % 2 + 1)), ..step(i % 2) });
        }
        let (estimate, truth) = (tuner.estimated_verify_time(7).unwrap(), 0.005 * shape(7));
        assert!((estimate / truth - 1.0).abs() < 0.05, "{estimate} s estimated, {truth} s true");
    }

    #[test]
    fn wide_passes_timed_before_any_plain_one_are_related_to_the_first() {
        let mut tuner = GammaTuner::new(6);
        tuner.observe_verify_time(7, ms(20.0));
        tuner.observe_verify_time(3, ms(12.0));
        // Seconds until a one-position pass is seen (the line through 3 and 7 positions).
        assert!((tuner.estimated_verify_time(5).unwrap() - 0.016).abs() < 1e-9);
        tuner.observe_verify_time(1, ms(10.0));
        assert!((tuner.verify_time(7).unwrap() - 0.020).abs() < 1e-9);
        // Twice as slow a plain pass: the wide ones follow, at their measured ratios to it.
        for _ in 0..40 {
            tuner.observe_verify_time(1, ms(20.0));
        }
        assert!((tuner.verify_time(7).unwrap() - 0.040).abs() < 1e-6);
        assert!((tuner.verify_time(3).unwrap() - 0.024).abs() < 1e-6);
    }

    /// Verifies `gamma` drafted tokens each accepted with probability `alpha`, by error
    /// diffusion on `debt` (deterministic, exact in the long run): tokens accepted, and whether
    /// all were.
    fn diffuse(debt: &mut f64, alpha: f64, gamma: usize) -> (usize, bool) {
        for accepted in 0..gamma {
            *debt += alpha;
            if *debt < 1.0 {
                return (accepted, false);
            }
            *debt -= 1.0;
        }
        (gamma, true)
    }

    /// Steps alternating between two confidence classes of a free drafter: class 1's drafts
    /// are accepted with probability `good`, class 2's with `poor` (error-diffusion coins).
    fn train_classes(tuner: &mut GammaTuner, good: f64, poor: f64, verify_ms: &dyn Fn(usize) -> f64, steps: usize) {
        let mut debts = [0.0, 0.0];
        for i in 0..steps {
            let (class, alpha) = if i % 2 == 0 { (1, good) } else { (2, poor) };
            let gamma = tuner.verify_len_for(tuner.next_gamma(), Some(class));
            let (accepted, bonus) = diffuse(&mut debts[usize::from(class) - 1], alpha, gamma);
            tuner.observe(&StepObservation {
                drafted: gamma,
                accepted,
                bonus,
                draft_time: Duration::ZERO,
                verify_time: ms(verify_ms(gamma + 1)),
                class: Some(class),
                source: None,
            });
        }
    }

    #[test]
    fn a_confident_class_is_verified_deeper_than_a_doubtful_one() {
        // The CPU's cost curve of SmolLM2: each extra position about 12% of a step.
        let verify = |k: usize| 10.0 * (1.0 + 0.12 * (k as f64 - 1.0));
        let mut tuner = GammaTuner::new(6);
        for g in 0..=6 {
            tuner.observe(&StepObservation {
                drafted: g,
                accepted: 0,
                bonus: g == 0,
                draft_time: Duration::ZERO,
                verify_time: ms(verify(g + 1)),
                class: None,
                source: None,
            });
        }
        train_classes(&mut tuner, 0.95, 0.1, &verify, 400);
        let (good, poor) = (tuner.class_alpha(Some(1)), tuner.class_alpha(Some(2)));
        // The poor class is mostly cut to nothing, so its few probes still lean on the prior.
        assert!(good > 0.85 && poor < 0.3, "class estimates {good:.3} and {poor:.3}");
        let deep = tuner.verify_len_for(6, Some(1));
        let shallow = tuner.verify_len_for(6, Some(2));
        let optimum = best_in_world(0.95, 0.0, &verify, 6);
        assert!(deep.abs_diff(optimum) <= 1 && deep >= 5, "a 95% class verified {deep} of 6, the optimum is {optimum}");
        assert!(shallow <= 1, "a 10% class verified {shallow} of 6");
        // The overall α, which the good class's many tests dominate, would verify the poor
        // class's drafts as deep as the good ones'.
        assert!(tuner.verify_len(6) > shallow, "overall {}", tuner.verify_len(6));
        // A class never seen leans on the overall α.
        assert!((tuner.class_alpha(Some(9)) - tuner.alpha()).abs() < 1e-12);
    }

    #[test]
    fn a_hybrids_costly_source_is_asked_only_for_what_its_own_figures_pay() {
        // A hybrid of a free source (class 1, α 0.9, as prompt lookup where it matches) and a
        // model (class 2, α 0.2, a fifth of a step per token), announced before drafting, on
        // the CPU's cost curve; the engine's loop: ask, draft, cut, observe.
        let verify = |k: usize| 10.0 * (1.0 + 0.12 * (k as f64 - 1.0));
        let mut tuner = GammaTuner::new(6);
        let (mut debts, mut model_asked, steps) = ([0.0, 0.0], 0, 600);
        for i in 0..steps {
            let (source, alpha, draft_ms) = if i % 2 == 0 { (1, 0.9, 0.0) } else { (2, 0.2, 2.0) };
            let asked = tuner.next_gamma_for(Some(source));
            // The model's last 128 turns: every other step of the last 256.
            model_asked += usize::from(source == 2 && i >= steps - 256 && asked > 0);
            let gamma = tuner.verify_len_for(asked, Some(source));
            let (accepted, bonus) = diffuse(&mut debts[usize::from(source) - 1], alpha, gamma);
            tuner.observe(&StepObservation {
                drafted: gamma,
                accepted,
                bonus,
                draft_time: ms(draft_ms * asked as f64),
                verify_time: ms(verify(gamma + 1)),
                class: Some(source),
                source: Some(source),
            });
        }
        assert_eq!(tuner.next_gamma_for(Some(1)), 6, "the free source is asked for everything");
        // α 0.2 at a fifth of a step per token never pays (1.2 tokens for 1.32 steps at γ = 1):
        // the model is not asked, but for a probe now and then (of its last 128 turns).
        assert!(tuner.next_gamma_for(Some(2)) <= 1, "the model is asked for {}", tuner.next_gamma_for(Some(2)));
        assert!(model_asked <= 128 / PROBE_INTERVAL, "the model drafted in {model_asked} of its last 128 turns");
        // One α and one mean cost for both sources, the free one's acceptance dominating, ask
        // the model for drafts it then pays for.
        assert!(tuner.next_gamma() >= 2, "the pooled figures ask for {}", tuner.next_gamma());
        assert!(tuner.next_gamma_for(None) == tuner.next_gamma());
    }

    #[test]
    fn a_class_cut_to_nothing_is_probed_again() {
        let verify = |k: usize| 10.0 * (1.0 + 0.45 * (k as f64 - 1.0));
        let mut tuner = GammaTuner::new(6);
        train_classes(&mut tuner, 0.9, 0.0, &verify, 400);
        // Class 2 is never accepted: cut to nothing, but one token verified every so often, at
        // the longest wait by now; the other class's probing is its own.
        let mut verified = Vec::new();
        for _ in 0..3 * MAX_PROBE_INTERVAL {
            let gamma = tuner.verify_len_for(6, Some(2));
            verified.push(gamma);
            tuner.observe(&StepObservation {
                drafted: gamma,
                accepted: 0,
                bonus: gamma == 0,
                draft_time: Duration::ZERO,
                verify_time: ms(verify(gamma + 1)),
                class: Some(2),
                source: None,
            });
        }
        assert!(verified.iter().all(|&g| g <= 1), "{verified:?}");
        assert_eq!(probe_gaps(&verified), [MAX_PROBE_INTERVAL; 2], "{verified:?}");
        assert!(tuner.verify_len_for(6, Some(1)) >= 1, "class 1 is still verified");
    }

    #[test]
    fn acceptance_counts_one_test_per_accepted_token_and_one_for_the_rejection() {
        let mut tuner = GammaTuner::new(4);
        for _ in 0..200 {
            // 3 of 4 accepted, then a rejection: 3 passed of 4 tests.
            let step = StepObservation {
                drafted: 4,
                accepted: 3,
                bonus: false,
                draft_time: Duration::ZERO,
                verify_time: ms(1.0),
                class: None,
                source: None,
            };
            tuner.observe(&step);
        }
        assert!((tuner.alpha() - 0.75).abs() < 1e-6, "{}", tuner.alpha());
    }
}
