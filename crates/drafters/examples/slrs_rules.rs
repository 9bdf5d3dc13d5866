//! Which SLRS proposal rule accepts more: ours (`LongestAtBoundary`) or the paper's
//! (`FirstTargetToken`, hetero-vocab-sd.txt Algorithm 3 with Thm 3.2's ψ).
//!
//! For random Markov target/drafter pairs over the string vocabularies of the SLRS tests, prints
//! the exact probability that one drafted token is accepted, `Σ_t min(p(t), ψ(t))` (the paper's
//! Table 2 row for Alg 3), averaged over every context and 50 pairs, and the drafter positions
//! scored per drafted token. Run: `cargo run --release -p anyspec-drafters --example slrs_rules`.

#![allow(clippy::print_stdout)]

use anyspec_core::SamplingConfig;
use anyspec_core::toy::MarkovChain;
use anyspec_drafters::slrs::{MarkovTreeModel, ProposalRule, SlrsConfig, SlrsDrafter, StringSpace};
use rand::SeedableRng;
use rand::rngs::StdRng;

const TARGET: [&str; 10] = ["a", "b", "c", "ab", "bc", "ca", "abc", "cab", "bca", "aa"];
const DRAFTER: [&str; 6] = ["a", "b", "c", "ab", "bc", "x"];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let surfaces = |v: &[&'static str]| v.iter().map(|s| Some(s.as_bytes())).collect::<Vec<Option<&[u8]>>>();
    let (t, d) = (surfaces(&TARGET), surfaces(&DRAFTER));
    println!(
        "| drafter sharpness | lookahead | rule | acceptance Σ min(p, ψ) | P(no proposal) | positions per token |"
    );
    println!("|---:|---|---|---:|---:|---:|");
    for sharpness in [0.5, 1.0, 2.0] {
        for lookahead in [None, Some(2)] {
            for rule in [ProposalRule::LongestAtBoundary, ProposalRule::FirstTargetToken] {
                let (mut acceptance, mut none, mut positions, mut n) = (0.0, 0.0, 0.0, 0.0);
                for seed in 0..50u64 {
                    let mut rng = StdRng::seed_from_u64(seed);
                    let target = MarkovChain::random(TARGET.len(), TARGET.len(), 1.0, &mut rng);
                    let after_target = MarkovChain::random(TARGET.len(), DRAFTER.len(), sharpness, &mut rng);
                    let after_drafter = MarkovChain::random(DRAFTER.len(), DRAFTER.len(), sharpness, &mut rng);
                    let model = MarkovTreeModel::new(after_target, after_drafter)?;
                    let space = StringSpace::new(&t, t.len(), &d, d.len())?;
                    let mut drafter =
                        SlrsDrafter::new(model, space, SlrsConfig { lookahead, rule, ..SlrsConfig::default() })?;
                    for last in 0..TARGET.len() as u32 {
                        let before = drafter.last_cost().positions;
                        let walk = drafter.walk(&[last], &SamplingConfig::default(), &mut rng)?;
                        for (token, &psi) in walk.psi.iter().enumerate() {
                            acceptance += target.sequence_probability(last, &[token as u32])?.min(psi);
                        }
                        none += walk.no_proposal;
                        positions += (drafter.last_cost().positions - before) as f64;
                        n += 1.0;
                    }
                }
                println!(
                    "| {sharpness} | {} | {rule:?} | {:.4} | {:.4} | {:.2} |",
                    lookahead.map_or("none".to_string(), |l| l.to_string()),
                    acceptance / n,
                    none / n,
                    positions / n
                );
            }
        }
    }
    Ok(())
}
