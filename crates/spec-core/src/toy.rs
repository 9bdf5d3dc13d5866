//! Toy Markov-chain "models" whose output distribution is known exactly.
//!
//! A first-order chain gives the next token's distribution from the last token alone, so the
//! probability of any generated sequence is a product of table entries. That makes them the
//! ground truth for the statistical tests of every rule, and the workload of `anyspec simulate`.
//! A drafter chain may have its own vocabulary (rows indexed by the last *target* token, columns
//! over drafter tokens) and reaches the target through a [`Bridge`].

use rand::{Rng, RngCore};

use crate::draft::{Draft, DraftOrigin};
use crate::engine::{Drafter, Target};
use crate::error::{Error, Result};
use crate::projection::{AffinityMatrix, IdMap, rdk_exact, tli_projection, union_projection};
use crate::sampling::{SamplingConfig, argmax, logits_to_probs, sample};

/// A table of next-token distributions: row `c` is the distribution after token `c`.
#[derive(Clone, Debug, PartialEq)]
pub struct MarkovChain {
    rows: Vec<Vec<f32>>,
    vocab_size: usize,
}

impl MarkovChain {
    /// Builds a chain from its rows; every row must be a probability vector of one length.
    pub fn new(rows: Vec<Vec<f32>>) -> Result<Self> {
        let vocab_size = rows.first().map_or(0, Vec::len);
        for row in &rows {
            if row.len() != vocab_size {
                return Err(Error::LengthMismatch { what: "Markov chain row", expected: vocab_size, got: row.len() });
            }
            if let Some((index, &value)) = row.iter().enumerate().find(|(_, p)| !(**p >= 0.0 && p.is_finite())) {
                return Err(Error::InvalidProbability { what: "a Markov chain row", index, value });
            }
            let sum: f64 = row.iter().map(|&p| f64::from(p)).sum();
            if (sum - 1.0).abs() > 1e-4 {
                return Err(Error::invalid("Markov chain rows", "probability vectors summing to 1", sum));
            }
        }
        if rows.is_empty() || vocab_size == 0 {
            return Err(Error::invalid("Markov chain", "at least one row and one token", "an empty table"));
        }
        Ok(MarkovChain { rows, vocab_size })
    }

    /// A random chain with `contexts` rows over `vocab_size` tokens: each row is a softmax of
    /// Gaussian logits scaled by `sharpness` (0 = uniform; larger = peakier).
    pub fn random<R: Rng + ?Sized>(contexts: usize, vocab_size: usize, sharpness: f64, rng: &mut R) -> Self {
        let rows = (0..contexts).map(|_| softmax((0..vocab_size).map(|_| gaussian(rng) * sharpness))).collect();
        MarkovChain { rows, vocab_size }
    }

    /// A chain close to `self`: each row's logits `ln p` plus Gaussian noise of scale `noise`.
    /// The result is a drafter that agrees with the target more or less, as real drafters do.
    pub fn perturbed<R: Rng + ?Sized>(&self, noise: f64, rng: &mut R) -> Self {
        let rows = self
            .rows
            .iter()
            .map(|row| softmax(row.iter().map(|&p| f64::from(p).max(1e-12).ln() + gaussian(rng) * noise)))
            .collect();
        MarkovChain { rows, vocab_size: self.vocab_size }
    }

    /// Number of rows (contexts).
    pub fn contexts(&self) -> usize {
        self.rows.len()
    }

    /// Number of tokens each row is over.
    pub fn vocab_size(&self) -> usize {
        self.vocab_size
    }

    /// The distribution after token `last`.
    pub fn next(&self, last: u32) -> Result<&[f32]> {
        self.rows
            .get(last as usize)
            .map(Vec::as_slice)
            .ok_or(Error::TokenOutOfRange { token: last, vocab_size: self.rows.len() })
    }

    /// The distribution after token `last` as logits (`ln p`, `-inf` for impossible tokens).
    pub fn logits(&self, last: u32) -> Result<Vec<f32>> {
        Ok(self.next(last)?.iter().map(|&p| if p > 0.0 { p.ln() } else { f32::NEG_INFINITY }).collect())
    }

    /// The chain after applying a sampling transform to every row (what generation with that
    /// configuration actually samples from).
    pub fn transformed(&self, sampling: &SamplingConfig) -> Result<Self> {
        let rows = (0..self.rows.len() as u32)
            .map(|c| logits_to_probs(&self.logits(c)?, sampling))
            .collect::<Result<Vec<_>>>()?;
        Ok(MarkovChain { rows, vocab_size: self.vocab_size })
    }

    /// Probability that the chain, after token `last`, emits exactly `sequence`.
    pub fn sequence_probability(&self, mut last: u32, sequence: &[u32]) -> Result<f64> {
        let mut probability = 1.0;
        for &token in sequence {
            let row = self.next(last)?;
            probability *= f64::from(
                *row.get(token as usize).ok_or(Error::TokenOutOfRange { token, vocab_size: self.vocab_size })?,
            );
            last = token;
        }
        Ok(probability)
    }
}

/// A [`Target`] backed by a [`MarkovChain`] over the target vocabulary.
#[derive(Clone, Debug)]
pub struct MarkovTarget {
    chain: MarkovChain,
    /// Number of [`Target::score`] calls, to check that a step costs one call.
    pub score_calls: u64,
}

impl MarkovTarget {
    /// Wraps a chain whose rows are indexed by, and range over, the target vocabulary.
    pub fn new(chain: MarkovChain) -> Result<Self> {
        if chain.contexts() != chain.vocab_size() {
            return Err(Error::LengthMismatch {
                what: "target chain rows (one per target token)",
                expected: chain.vocab_size(),
                got: chain.contexts(),
            });
        }
        Ok(MarkovTarget { chain, score_calls: 0 })
    }

    /// The chain.
    pub fn chain(&self) -> &MarkovChain {
        &self.chain
    }
}

impl Target for MarkovTarget {
    fn vocab_size(&self) -> usize {
        self.chain.vocab_size()
    }

    fn score(&mut self, sequence: &[u32], draft_len: usize) -> Result<Vec<Vec<f32>>> {
        self.score_calls += 1;
        let first = sequence.len().checked_sub(draft_len + 1).ok_or(Error::LengthMismatch {
            what: "scored sequence (context + draft)",
            expected: draft_len + 1,
            got: sequence.len(),
        })?;
        sequence[first..].iter().map(|&last| self.chain.logits(last)).collect()
    }

    fn rollback(&mut self, _len: usize) -> Result<()> {
        Ok(())
    }
}

/// How a toy drafter's distribution over its own vocabulary reaches the target's.
#[derive(Clone, Debug)]
pub enum Bridge {
    /// Same vocabulary (homogeneous speculative decoding).
    Same,
    /// Union of vocabularies (hetero-vocab-sd.txt Alg 1).
    Union(IdMap),
    /// Token-level intersection (hetero-vocab-sd.txt Alg 4).
    Tli(IdMap),
    /// TLI then redistribution through an affinity matrix (oov-sampling-rdk.txt Alg 1).
    Rdk(IdMap, AffinityMatrix),
}

/// How a toy drafter picks its tokens.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DraftMode {
    /// Sample each token and report the distribution it was drawn from.
    Sample,
    /// Take the arg-max: a deterministic draft.
    Greedy,
}

/// A [`Drafter`] backed by a [`MarkovChain`] whose rows are indexed by the last target token.
#[derive(Clone, Debug)]
pub struct MarkovDrafter {
    chain: MarkovChain,
    bridge: Bridge,
    mode: DraftMode,
}

impl MarkovDrafter {
    /// A drafter over `chain`'s vocabulary, reaching the target through `bridge`.
    pub fn new(chain: MarkovChain, bridge: Bridge, mode: DraftMode) -> Result<Self> {
        let expected = match &bridge {
            Bridge::Same => chain.vocab_size(),
            Bridge::Union(map) | Bridge::Tli(map) | Bridge::Rdk(map, _) => map.drafter_size(),
        };
        if expected != chain.vocab_size() {
            return Err(Error::LengthMismatch {
                what: "drafter chain vocabulary (id map)",
                expected,
                got: chain.vocab_size(),
            });
        }
        Ok(MarkovDrafter { chain, bridge, mode })
    }

    /// The drafter's chain (rows by last target token, columns over drafter tokens).
    pub fn chain(&self) -> &MarkovChain {
        &self.chain
    }

    /// The distribution over target tokens of the token this drafter proposes after `last`: the
    /// `q` of `α = Σ min(p, q)`. Greedy drafters give a point mass; union gives the mass on shared
    /// tokens only (the rest is drafted outside the target and always rejected); a bridge that
    /// leaves no mass gives all zeros (nothing is drafted).
    pub fn proposal_distribution(&self, last: u32, sampling: &SamplingConfig) -> Result<Vec<f32>> {
        let drafter_probs = logits_to_probs(&self.chain.logits(last)?, sampling)?;
        let target_size = match &self.bridge {
            Bridge::Same => drafter_probs.len(),
            Bridge::Union(map) | Bridge::Tli(map) | Bridge::Rdk(map, _) => map.target_size(),
        };
        let q = self.target_distribution(&drafter_probs)?.unwrap_or_else(|| vec![0.0; target_size]);
        Ok(match self.mode {
            DraftMode::Sample => q,
            DraftMode::Greedy if q.iter().all(|&p| p == 0.0) => q,
            DraftMode::Greedy => {
                let mut point = vec![0.0; q.len()];
                point[argmax(&q) as usize] = 1.0;
                point
            }
        })
    }

    /// The distribution over target ids the drafter samples from after `last`, or `None` when
    /// the bridge leaves it no mass (TLI with nothing on the intersection).
    fn target_distribution(&self, drafter_probs: &[f32]) -> Result<Option<Vec<f32>>> {
        let projected = match &self.bridge {
            Bridge::Same => Ok(drafter_probs.to_vec()),
            Bridge::Union(map) => Ok(union_projection(drafter_probs, map)?.on_target),
            Bridge::Tli(map) => tli_projection(drafter_probs, map),
            Bridge::Rdk(map, affinity) => tli_projection(drafter_probs, map).and_then(|q| rdk_exact(&q, affinity)),
        };
        match projected {
            Ok(q) => Ok(Some(q)),
            Err(Error::EmptyDistribution { .. }) => Ok(None),
            Err(other) => Err(other),
        }
    }
}

impl Drafter for MarkovDrafter {
    fn propose(
        &mut self,
        context: &[u32],
        max_tokens: usize,
        sampling: &SamplingConfig,
        rng: &mut dyn RngCore,
    ) -> Result<Draft> {
        let mut last = *context.last().ok_or(Error::EmptyPrompt)?;
        let mut tokens = Vec::new();
        let mut distributions = Vec::new();
        let mut outside_target = None;
        while tokens.len() < max_tokens {
            let drafter_probs = logits_to_probs(&self.chain.logits(last)?, sampling)?;
            let token = match (self.mode, &self.bridge) {
                // Union samples in the drafter's own vocabulary; a token the target lacks ends
                // the draft and is rejected for certain.
                (DraftMode::Sample, Bridge::Union(map)) => {
                    let on_target = union_projection(&drafter_probs, map)?.on_target;
                    let drafted = sample(&drafter_probs, rng)?;
                    match map.target_of(drafted) {
                        Some(t) => {
                            distributions.push(on_target);
                            t
                        }
                        None => {
                            outside_target = Some(on_target);
                            break;
                        }
                    }
                }
                (DraftMode::Sample, _) => {
                    let Some(q) = self.target_distribution(&drafter_probs)? else { break };
                    let t = sample(&q, rng)?;
                    distributions.push(q);
                    t
                }
                (DraftMode::Greedy, _) => {
                    let Some(q) = self.target_distribution(&drafter_probs)? else { break };
                    if q.iter().all(|&p| p == 0.0) {
                        break;
                    }
                    argmax(&q)
                }
            };
            tokens.push(token);
            last = token;
        }
        Ok(match self.mode {
            DraftMode::Greedy => Draft::deterministic(tokens),
            DraftMode::Sample => {
                Draft { tokens, origin: DraftOrigin::Sampled { distributions, outside_target }, confidence_class: None }
            }
        })
    }
}

fn softmax(logits: impl Iterator<Item = f64>) -> Vec<f32> {
    let logits: Vec<f64> = logits.collect();
    let max = logits.iter().fold(f64::NEG_INFINITY, |m, &v| m.max(v));
    let weights: Vec<f64> = logits.iter().map(|&l| (l - max).exp()).collect();
    let total: f64 = weights.iter().sum();
    weights.iter().map(|w| (w / total) as f32).collect()
}

/// A standard normal sample (Box–Muller), so the crate needs no distribution library.
fn gaussian<R: Rng + ?Sized>(rng: &mut R) -> f64 {
    let u1: f64 = 1.0 - rng.random::<f64>();
    let u2: f64 = rng.random::<f64>();
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}
