//! The acceptance step in plain burn tensor ops: the reference for the fused kernel, and the body
//! every non-CubeCL backend (flex) runs.

use burn::tensor::{Int, Tensor, TensorData};

use super::AcceptanceInputs;
use crate::probs::one_hot_mask;

/// Computes the packed `[γ + 1, 4]` acceptance result (see [`super::Column`]) with burn tensor ops
/// on the inputs' device.
///
/// Row `j < γ`: `accept = u_j · q_j(d_j) < p_j(d_j) ∨ p_j(d_j) ≥ q_j(d_j)`; residual weights
/// `w = max(p_j − q_j, 0)` (`p_j` with `d_j` zeroed for a point mass). Row γ: `w = p_γ`. A row
/// whose weights sum to ≤ 0 (rounding) falls back to `w = p_j`, as the host rule does. The
/// sample is `min(#{i : W_i ≤ u · Σw}, max{i : w_i > 0})` with `W` the inclusive cumulative sum:
/// the first index whose cumulative weight exceeds the threshold, capped at the last index with
/// positive weight (rounding can leave the threshold past the end).
pub fn acceptance_reference(inputs: AcceptanceInputs) -> Tensor<2> {
    let AcceptanceInputs { target_probs, draft_probs, tokens, uniforms, vocab } = inputs;
    let gamma = tokens.len();
    let rows = gamma + 1;
    let device = target_probs.device();

    // Acceptance tests and the residual rows, one per possible stopping point.
    let (accept_column, q_column, residual_rows) = if gamma == 0 {
        let one = Tensor::<2>::ones([1, 1], &device);
        (one.clone(), one, target_probs.clone())
    } else {
        let ids: Vec<i64> = tokens.iter().map(|&t| i64::from(t)).collect();
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
        let one = Tensor::<2>::ones([1, 1], &device);
        let bonus_row = target_probs.clone().narrow(0, gamma, 1);
        (
            Tensor::cat(vec![accept.float(), one.clone()], 0),
            Tensor::cat(vec![q_at, one], 0),
            Tensor::cat(vec![residual, bonus_row], 0),
        )
    };

    // A residual without mass falls back to the target row.
    let totals = residual_rows.clone().sum_dim(1);
    let empty = totals.lower_equal_elem(0.0).expand([rows, vocab]);
    let weights = residual_rows.mask_where(empty, target_probs);
    let totals = weights.clone().sum_dim(1);

    // Inverse-CDF sampling, capped at the last index with positive weight.
    let threshold = totals.clone().mul_scalar(uniforms.residual as f32).expand([rows, vocab]);
    let cumulative = weights.clone().cumsum(1);
    let first_above = cumulative.lower_equal(threshold).int().sum_dim(1);
    let ids = Tensor::<1, Int>::arange(0..vocab as i64, &device).reshape([1, vocab]).expand([rows, vocab]);
    let last_positive = weights.greater_elem(0.0).int().mul(ids).max_dim(1);
    let samples = first_above.min_pair(last_positive).float();

    Tensor::cat(vec![totals, samples, accept_column, q_column], 1)
}
