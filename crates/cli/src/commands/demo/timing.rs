//! Measuring: one timed generation, and the calibration of the target's verification cost per
//! width that starts every method's γ tuner.

use std::time::{Duration, Instant};

use anyspec_core::{
    AcceptanceAudit, AuditedTarget, Drafter, GammaPolicy, GammaTuner, GenerationConfig, Target as _, generate_tuned,
};
use anyspec_models::{Llama, LlamaTarget};
use rand::SeedableRng;
use rand::rngs::StdRng;

use super::assets::Assets;

/// Layer counts tried for the self-speculative drafter (those below the target's depth).
pub(super) const FIRST_LAYER_CANDIDATES: &[usize] = &[1, 2, 3, 4, 6, 8];

/// How much slower than the fastest trial a depth may be and still be kept because its
/// DynaSpec router is cached: each trial is one 32-token generation, and two trials of one
/// depth differ by a few percent on a busy machine, while building a router for another depth
/// takes minutes (and the previous run chose the cached depth by the same measurement).
pub(super) const DEPTH_TIE: f64 = 0.05;

/// The self-speculative drafter's depth from the `(layers, tokens/s)` trials: the fastest, or
/// the fastest of the depths whose DynaSpec router is `cached` when it is within [`DEPTH_TIE`]
/// of it. `None` without trials.
pub(super) fn choose_depth(trials: &[(usize, f64)], cached: impl Fn(usize) -> bool) -> Option<usize> {
    let fastest = |among: &mut dyn Iterator<Item = &(usize, f64)>| {
        among.fold(None, |best: Option<(usize, f64)>, &(l, s)| match best {
            Some((_, b)) if b >= s => best,
            _ => Some((l, s)),
        })
    };
    let (best, speed) = fastest(&mut trials.iter())?;
    match fastest(&mut trials.iter().filter(|(l, _)| cached(*l))) {
        Some((l, s)) if s >= speed * (1.0 - DEPTH_TIE) => Some(l),
        _ => Some(best),
    }
}

/// What the demo runs on, beyond the loaded assets.
pub(super) struct Setup {
    pub(super) assets: Assets,
    /// The self-speculative drafter and its layer count, when the target allows one.
    pub(super) first_layers: Option<(usize, Llama)>,
    /// Seconds of a target pass over k = 1, 2, … positions (calibration for the γ tuner).
    pub(super) verify_seconds: Vec<f64>,
    /// The DynaSpec shortlister of the self-speculative drafter, when its row runs, and the
    /// drafter's head ordered by its clusters (made once, shared by the row's drafters).
    pub(super) dynaspec: Option<(anyspec_dynaspec::DynamicShortlister, anyspec_models::HeadBlocks)>,
    /// The EAGLE rows' head policy and the target's head ordered by its blocks, when one runs.
    pub(super) eagle_head: Option<(anyspec_dynaspec::HeadPolicy, anyspec_models::HeadBlocks)>,
}

impl Setup {
    /// A γ tuner for one method's run, when γ is adaptive: it starts from the calibrated
    /// verification times, and keeps what it learns across that method's prompts.
    pub(super) fn tuner(&self, config: &GenerationConfig) -> Option<GammaTuner> {
        (config.gamma_policy == GammaPolicy::Adaptive).then(|| {
            let mut tuner = GammaTuner::new(config.gamma);
            for (i, &secs) in self.verify_seconds.iter().enumerate() {
                tuner.observe_verify_time(i + 1, Duration::from_secs_f64(secs));
            }
            tuner
        })
    }
}

/// One timed generation: what [`run_one`] measured.
pub(super) struct Timed {
    pub(super) generation: anyspec_core::Generation,
    /// Wall-clock time of the generation (both models had read the prompt before it started).
    pub(super) elapsed: Duration,
    /// The drafter's reading of the prompt, before the clock started (zero without a drafter).
    pub(super) drafter_prefill: Duration,
    /// When sampling, the acceptance tests against what the target's logits promised.
    pub(super) audit: Option<AcceptanceAudit>,
}

/// Generates from one prompt, timing the decoding only: the target reads the prompt (its
/// prefill) and so does the drafter, both before the clock starts, as `anyspec generate` and
/// llama.cpp's `llama-bench -n` time decoding. The drafter reads it by drafting one token after
/// it, with its own RNG (the generation's draws are unchanged), and that time is returned apart.
/// When sampling, every draft is verified through an [`AuditedTarget`] (the host rule the CPU
/// target runs anyway) and the audit of its acceptance tests comes back too.
pub(super) fn run_one(
    target: &mut LlamaTarget,
    mut drafter: Option<&mut dyn Drafter>,
    prompt: &[u32],
    config: &GenerationConfig,
    tuner: Option<&mut GammaTuner>,
    seed: u64,
) -> anyhow::Result<Timed> {
    target.reset();
    target.score(prompt, 0)?;
    let drafter_prefill = match drafter.as_deref_mut() {
        // A drafter with a cache (a model, EAGLE's feature layer) fills it here; one without
        // (prompt lookup, a dictionary) costs next to nothing. Its next `propose` sees the same
        // context and reuses what it read.
        Some(drafter) => {
            let started = Instant::now();
            let mut own = StdRng::seed_from_u64(seed ^ DRAFTER_PREFILL_SEED);
            drafter.propose(prompt, 1, &config.sampling, &mut own)?;
            started.elapsed()
        }
        None => Duration::ZERO,
    };
    let mut rng = StdRng::seed_from_u64(seed);
    let keep_going = &mut |_| std::ops::ControlFlow::Continue(());
    let started = Instant::now();
    if config.sampling.is_greedy() {
        let generation = generate_tuned(target, drafter, prompt, config, tuner, &mut rng, keep_going)?;
        return Ok(Timed { generation, elapsed: started.elapsed(), drafter_prefill, audit: None });
    }
    let mut audited = AuditedTarget::new(target);
    let generation = generate_tuned(&mut audited, drafter, prompt, config, tuner, &mut rng, keep_going)?;
    Ok(Timed { generation, elapsed: started.elapsed(), drafter_prefill, audit: Some(*audited.audit()) })
}

/// The faster of the round kept so far and round `round` (0-based) of `method` on one prompt.
/// Rounds are greedy runs of the same prompt: their tokens must be the same, whatever the γ
/// tuner chose from the timings of each, so a difference is an error, not a measurement.
pub(super) fn faster_round(kept: Option<Timed>, new: Timed, method: &str, round: usize) -> anyhow::Result<Timed> {
    let Some(kept) = kept else { return Ok(new) };
    if kept.generation.tokens != new.generation.tokens {
        anyhow::bail!(
            "{method}: round {} of a prompt wrote other tokens than round 1 at temperature 0, which must not \
             happen (greedy speculative decoding is lossless whatever γ a step takes); please report it",
            round + 1
        );
    }
    Ok(if new.elapsed < kept.elapsed { new } else { kept })
}

/// Mixed into the seed of the RNG the drafter reads the prompt with, so that it never repeats
/// the generation's draws.
const DRAFTER_PREFILL_SEED: u64 = 0x0d4a_f7e4_9b1c_2e35;

/// Seconds of a target pass over k = 1..=`widest` positions after `prompt` (the median of
/// [`CALIBRATION_ROUNDS`] passes each).
pub(super) fn verify_times(model: &Llama, prompt: &[u32], widest: usize) -> anyhow::Result<Vec<f64>> {
    let mut cache = model.new_cache();
    model.forward_on_host(prompt, &mut cache, 1, None)?;
    let filler: Vec<u32> = prompt.iter().copied().cycle().take(widest).collect();
    // Rounds over every width in turn, the first discarded as a warm-up: a slow stretch of the
    // machine then costs every width alike. (Five passes per width, one width after another,
    // once gave v = 1.00 1.41 0.77 0.88 …: a slow start inflated k = 1 and k = 2, and the γ
    // tuner started from a curve that said six positions cost less than two.)
    //
    // Each timed pass follows an untimed single-position pass, as most passes of a generation
    // do: a pass costs more the longer since the last one touched the weights, and so right
    // after a wide one (ARCHITECTURE.md, "Two engines behind one `Llama`"). On SmolLM2 Q4_1 (2
    // threads, 40 tokens of context) a single position took 2.33–2.43 ms after another and
    // 2.6–2.8 ms right after an 8-wide pass; in another run 2.6–2.85 ms after another and 2.7,
    // 3.0, 3.4 and 3.8 ms after sleeping 0.5, 3, 6 and 12 ms. Timed in turn 1, 2, …, 8, 1, …,
    // k = 1 always came after k = 8, and the curve read v(4) = 1.30–1.38 where passes after a
    // single position give 1.48–1.50: the theory column promised more than a wide pass delivers.
    let mut times = vec![Vec::with_capacity(CALIBRATION_ROUNDS); widest];
    for round in 0..=CALIBRATION_ROUNDS {
        for (k, samples) in (1..=widest).zip(&mut times) {
            cache.truncate(prompt.len());
            model.forward_on_host(&filler[..1], &mut cache, 1, None)?;
            cache.truncate(prompt.len());
            let started = Instant::now();
            model.forward_on_host(&filler[..k], &mut cache, k, None)?;
            if round > 0 {
                samples.push(started.elapsed().as_secs_f64());
            }
        }
    }
    Ok(times
        .into_iter()
        .map(|mut samples| {
            samples.sort_by(f64::total_cmp);
            samples[samples.len() / 2]
        })
        .collect())
}

/// Timed rounds of the verification-cost calibration (each one pass per width).
pub(super) const CALIBRATION_ROUNDS: usize = 9;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fastest_depth_is_kept_unless_a_cached_one_is_within_the_tie() {
        let trials = [(1, 100.0), (2, 120.0), (3, 118.0), (4, 90.0)];
        // Nothing cached: the fastest; equal speeds go to the first tried.
        assert_eq!(choose_depth(&trials, |_| false), Some(2));
        assert_eq!(choose_depth(&[(1, 5.0), (2, 5.0)], |_| false), Some(1));
        // 118 is within 5% of 120: the cached depth is kept.
        assert_eq!(choose_depth(&trials, |l| l == 3), Some(3));
        // 100 is not: the fastest wins and gets its own router.
        assert_eq!(choose_depth(&trials, |l| l == 1), Some(2));
        // Of several cached depths, the fastest of them.
        assert_eq!(choose_depth(&trials, |l| l != 2), Some(3));
        assert_eq!(choose_depth(&trials, |l| l == 2 || l == 3), Some(2));
        assert_eq!(choose_depth(&[], |_| true), None);
    }
}
