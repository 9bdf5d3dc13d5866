//! Speculative verification on the device: only O(γ) numbers come back to the host.
//!
//! The host rule ([`anyspec_core::verify`]) walks the draft and stops at the first rejection,
//! drawing a uniform only where it needs one. On a device that walk would cost one round trip
//! per drafted token, so here every decision is made at once from uniforms drawn up front
//! ([`Uniforms`]): the acceptance test of every drafted token, and a residual sample for every
//! possible stopping point (a correction after a rejection at position j, or the bonus token
//! after a full acceptance). The host then reads back γ decisions and γ + 1 candidate tokens and
//! keeps the candidate at the first rejection. Given the same uniforms the result is exactly
//! the host rule's (tests drive both with the same numbers).

use anyspec_core::Verdict;
use burn::tensor::{Int, Tensor, TensorData};
use rand::{Rng, RngCore};

use crate::error::{Error, Result};
use crate::probs::one_hot_mask;
use crate::readback::{read_f32, read_i64};

/// The uniform numbers one verification consumes.
#[derive(Clone, Debug, PartialEq)]
pub struct Uniforms {
    /// `u_j` for the acceptance test `u_j · q_j(d_j) < p_j(d_j)` of each drafted token.
    pub accept: Vec<f64>,
    /// The uniform that picks the residual (or bonus) token by inverse-CDF sampling.
    pub residual: f64,
}

impl Uniforms {
    /// Draws γ + 1 uniforms in `[0, 1)`: the acceptance tests in order, then the residual.
    pub fn draw(gamma: usize, rng: &mut dyn RngCore) -> Self {
        let accept = (0..gamma).map(|_| rng.random::<f64>()).collect();
        Uniforms { accept, residual: rng.random::<f64>() }
    }
}

/// Verifies a draft on the device.
///
/// - `target_probs`: `[γ + 1, vocab]`, row `j` the target distribution after `draft[..j]`.
/// - `draft_tokens`: the γ drafted ids.
/// - `draft_probs`: `[γ, vocab]` draft distributions for a sampled draft, or `None` for a
///   deterministic draft (a point mass on each token, speculative-decoding.txt with `q = δ_d`).
///
/// Accepts `d_j` when `p_j(d_j) ≥ q_j(d_j)` or `u_j · q_j(d_j) < p_j(d_j)`; the emitted token
/// comes from the normalized residual `max(p_j − q_j, 0)` at the first rejection (`p_j` with
/// `d_j` removed for a point mass), or from `p_γ` when everything was accepted. A residual with
/// no mass (rounding) falls back to `p_j`, as the host rule does.
pub fn verify_on_device(
    target_probs: Tensor<2>,
    draft_tokens: &[u32],
    draft_probs: Option<Tensor<2>>,
    uniforms: &Uniforms,
) -> Result<Verdict> {
    let gamma = draft_tokens.len();
    let [rows, vocab] = target_probs.dims();
    if rows != gamma + 1 {
        return Err(shape("target rows (γ + 1)", gamma + 1, rows));
    }
    if uniforms.accept.len() != gamma {
        return Err(shape("acceptance uniforms (γ)", gamma, uniforms.accept.len()));
    }
    if let Some(&token) = draft_tokens.iter().find(|&&t| t as usize >= vocab) {
        return Err(Error::TokenOutOfRange { token, vocab_size: vocab });
    }
    // With nothing drafted the draft distributions play no part (and an empty upload may
    // not even know the vocabulary size).
    let draft_probs = draft_probs.filter(|_| gamma > 0);
    if let Some(q) = &draft_probs
        && q.dims() != [gamma, vocab]
    {
        return Err(Error::Shape {
            what: "draft distributions",
            expected: format!("[{gamma}, {vocab}]"),
            got: format!("{:?}", q.dims()),
        });
    }
    let device = target_probs.device();

    // Acceptance tests and the residual rows, one per possible stopping point.
    let (accepted_flags, q_at_tokens, residual_rows) = if gamma == 0 {
        (None, None, target_probs.clone())
    } else {
        let ids: Vec<i64> = draft_tokens.iter().map(|&t| i64::from(t)).collect();
        let ids = Tensor::<2, Int>::from_data(TensorData::new(ids, [gamma, 1]), &device);
        let p_head = target_probs.clone().narrow(0, 0, gamma);
        let p_at = p_head.clone().gather(1, ids.clone());
        let (q_at, residual) = match draft_probs {
            Some(q) => (q.clone().gather(1, ids), (p_head - q).clamp_min(0.0)),
            None => {
                let mask = one_hot_mask(ids, gamma, vocab);
                (Tensor::<2>::ones([gamma, 1], &device), p_head.mask_fill(mask, 0.0))
            }
        };
        let u: Vec<f32> = uniforms.accept.iter().map(|&u| u as f32).collect();
        let u = Tensor::<2>::from_data(TensorData::new(u, [gamma, 1]), &device);
        let accept = u.mul(q_at.clone()).lower(p_at.clone()).bool_or(p_at.greater_equal(q_at.clone()));
        let bonus_row = target_probs.clone().narrow(0, gamma, 1);
        (Some(accept.float()), Some(q_at), Tensor::cat(vec![residual, bonus_row], 0))
    };

    // A residual without mass falls back to the target row.
    let totals = residual_rows.clone().sum_dim(1);
    let empty = totals.lower_equal_elem(0.0).expand([rows, vocab]);
    let weights = residual_rows.mask_where(empty, target_probs);
    let totals = weights.clone().sum_dim(1);

    // Inverse-CDF sampling: the first index whose cumulative weight exceeds u · total, capped
    // at the last index with positive weight (rounding can leave u · total past the end).
    let threshold = totals.clone().mul_scalar(uniforms.residual as f32).expand([rows, vocab]);
    let cumulative = weights.clone().cumsum(1);
    let first_above = cumulative.lower_equal(threshold).int().sum_dim(1);
    let ids = Tensor::<1, Int>::arange(0..vocab as i64, &device).reshape([1, vocab]).expand([rows, vocab]);
    let last_positive = weights.greater_elem(0.0).int().mul(ids).max_dim(1);
    let samples = first_above.min_pair(last_positive);

    // One float readback (decisions, q at the drafted tokens, row totals) and one integer one.
    let mut floats = vec![totals.reshape([rows])];
    if let (Some(accept), Some(q_at)) = (accepted_flags, q_at_tokens) {
        floats.push(accept.reshape([gamma]));
        floats.push(q_at.reshape([gamma]));
    }
    let floats = read_f32(Tensor::cat(floats, 0))?;
    let samples = read_i64(samples.reshape([rows]))?;
    let (totals, rest) = floats.split_at(rows);
    if let Some(row) = totals.iter().position(|t| !t.is_finite()) {
        return Err(Error::Core(anyspec_core::Error::EmptyDistribution {
            what: "a target row on the device (non-finite mass: NaN or +inf logits)",
            sum: f64::from(totals[row]),
        }));
    }
    let (accept, q_at) = rest.split_at(gamma);
    let mut accepted = gamma;
    for (j, (&flag, &q)) in accept.iter().zip(q_at).enumerate() {
        if !(q > 0.0 && q.is_finite()) {
            return Err(Error::DraftTokenImpossible { position: j, token: draft_tokens[j] });
        }
        if flag < 0.5 {
            accepted = j;
            break;
        }
    }
    let next_token = u32::try_from(samples[accepted])
        .map_err(|_| Error::Readback { message: format!("sampled index {} is not a token id", samples[accepted]) })?;
    Ok(Verdict { accepted, next_token, bonus: accepted == gamma })
}

fn shape(what: &'static str, expected: usize, got: usize) -> Error {
    Error::Shape { what, expected: expected.to_string(), got: got.to_string() }
}
