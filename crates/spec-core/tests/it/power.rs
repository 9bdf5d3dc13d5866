//! The lossless tests have power: the same harness, seeds and sample sizes reject deliberately
//! broken rules decisively. A test that cannot fail proves nothing.

use anyspec_core::sampling::{logits_to_probs, sample};
use anyspec_core::toy::{Bridge, DraftMode, MarkovChain, MarkovDrafter, MarkovTarget};
use anyspec_core::verify::verify_draft;
use anyspec_core::{
    DeterministicRule, Draft, DraftOrigin, Drafter, GenerationConfig, Result, SamplingConfig, Target, Verdict,
};
use rand::rngs::StdRng;
use rand::{Rng, RngCore, SeedableRng};

use crate::lossless::{config, exact, histogram, other_vocab_drafter, partial_map, target_chain};
use crate::stats::{POWER_P_VALUE, g_test};

#[derive(Clone, Copy, Debug)]
enum Broken {
    /// Accept every drafted token (a "trusting" verifier).
    AcceptAll,
    /// On rejection, resample from `p` instead of the residual `max(p − q, 0)`.
    ResampleFromTarget,
    /// Accept with probability `p/q` but forget the `min(1, ·)`-driven bonus: always stop after
    /// the first drafted token, even when everything was accepted.
    DropBonusAfterAccept,
}

struct BrokenTarget {
    inner: MarkovTarget,
    broken: Broken,
}

impl Target for BrokenTarget {
    fn vocab_size(&self) -> usize {
        self.inner.vocab_size()
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
        let p: Vec<Vec<f32>> = logits.iter().map(|l| logits_to_probs(l, sampling)).collect::<Result<_>>()?;
        let DraftOrigin::Sampled { distributions: q, .. } = &draft.origin else {
            return verify_draft(&p, draft, rule, rng);
        };
        match self.broken {
            Broken::AcceptAll => {
                Ok(Verdict { accepted: draft.len(), next_token: sample(&p[draft.len()], rng)?, bonus: true })
            }
            Broken::ResampleFromTarget | Broken::DropBonusAfterAccept => {
                for (j, &d) in draft.tokens.iter().enumerate() {
                    let (pj, qj) = (f64::from(p[j][d as usize]), f64::from(q[j][d as usize]));
                    if rng.random::<f64>() * qj >= pj {
                        return Ok(Verdict { accepted: j, next_token: sample(&p[j], rng)?, bonus: false });
                    }
                    if matches!(self.broken, Broken::DropBonusAfterAccept) {
                        // Keep d_j, then emit a fresh sample from p_j *again* at the same
                        // position's distribution instead of the next one.
                        return Ok(Verdict { accepted: j + 1, next_token: sample(&p[j], rng)?, bonus: false });
                    }
                }
                Ok(Verdict { accepted: draft.len(), next_token: sample(&p[draft.len()], rng)?, bonus: true })
            }
        }
    }
}

/// A drafter that samples correctly but reports a different distribution (uniform) than the one
/// it sampled from: the mistake a TLI drafter makes when it forgets to renormalize, in its
/// starkest form.
struct MisreportingDrafter(MarkovDrafter);

impl Drafter for MisreportingDrafter {
    fn propose(
        &mut self,
        context: &[u32],
        max: usize,
        sampling: &SamplingConfig,
        rng: &mut dyn RngCore,
    ) -> Result<Draft> {
        let mut draft = self.0.propose(context, max, sampling, rng)?;
        if let DraftOrigin::Sampled { distributions, .. } = &mut draft.origin {
            for row in distributions {
                let n = row.len() as f32;
                row.iter_mut().for_each(|p| *p = 1.0 / n);
            }
        }
        Ok(draft)
    }
}

fn broken_p_value(target: &MarkovChain, drafter: &mut dyn Drafter, broken: Broken, config: &GenerationConfig) -> f64 {
    let mut target_model = BrokenTarget { inner: MarkovTarget::new(target.clone()).unwrap(), broken };
    let counts = histogram(&mut target_model, Some(drafter), config, 77);
    g_test(&counts, &exact(target, &config.sampling)).p_value
}

fn drafter_for(target: &MarkovChain, seed: u64) -> MarkovDrafter {
    MarkovDrafter::new(target.perturbed(1.5, &mut StdRng::seed_from_u64(seed)), Bridge::Same, DraftMode::Sample)
        .unwrap()
}

#[test]
fn accepting_every_draft_is_caught() {
    let target = target_chain(2);
    let sampling = SamplingConfig::default();
    let p = broken_p_value(&target, &mut drafter_for(&target, 11), Broken::AcceptAll, &config(3, sampling));
    assert!(p < POWER_P_VALUE, "p = {p}");
}

#[test]
fn resampling_from_the_target_instead_of_the_residual_is_caught() {
    let target = target_chain(2);
    let p = broken_p_value(
        &target,
        &mut drafter_for(&target, 12),
        Broken::ResampleFromTarget,
        &config(3, SamplingConfig::default()),
    );
    assert!(p < POWER_P_VALUE, "p = {p}");
}

#[test]
fn emitting_from_the_wrong_position_after_an_accept_is_caught() {
    let target = target_chain(2);
    let p = broken_p_value(
        &target,
        &mut drafter_for(&target, 13),
        Broken::DropBonusAfterAccept,
        &config(3, SamplingConfig::default()),
    );
    assert!(p < POWER_P_VALUE, "p = {p}");
}

#[test]
fn a_drafter_reporting_the_wrong_distribution_is_caught() {
    let target = target_chain(8);
    let config = config(3, SamplingConfig::default());
    let drafter = other_vocab_drafter(5, 14, Bridge::Tli(partial_map()), DraftMode::Sample);
    let mut target_model = MarkovTarget::new(target.clone()).unwrap();
    let counts = histogram(&mut target_model, Some(&mut MisreportingDrafter(drafter)), &config, 77);
    let p = g_test(&counts, &exact(&target, &config.sampling)).p_value;
    assert!(p < POWER_P_VALUE, "p = {p}");
}
