//! The building blocks of the Llama architecture over burn tensors: RMSNorm, rotary position
//! embeddings, SwiGLU, scaled-dot-product attention and its causal mask.
//!
//! One definition serves inference and training: the burn engine of [`Llama`](crate::Llama)
//! runs `[positions, width]` activations of one sequence against a KV cache, `anyspec-train`'s
//! `TrainableLlama` runs `[batch, heads, seq, head_dim]` windows under autodiff, and both call
//! these functions, so a checkpoint saved by the trainer reloads to the logits it was trained
//! to give. The blocks are generic over the tensor rank where the two callers differ; the
//! feature axis is always the last one. The native CPU engine (`native/`) keeps its own
//! host-slice versions: they run on packed and quantized weights, and its conformance tests
//! hold it to these.
//!
//! ```
//! use anyspec_models::blocks::{Rope, apply_rope, causal_mask, rms_norm};
//! use anyspec_models::{DeviceChoice, RopeScaling};
//! use burn::tensor::{Tensor, TensorData};
//!
//! # fn main() -> Result<(), anyspec_models::Error> {
//! let device = DeviceChoice::Cpu.device()?;
//! let x = Tensor::<2>::from_data(TensorData::new(vec![1.0f32, 2.0, 3.0, 4.0], [1, 4]), &device);
//! let gain = Tensor::<2>::ones([1, 4], &device);
//! let normed = rms_norm(x, &gain, 1e-5);
//! // Position 0 is not rotated.
//! let (cos, sin) = Rope::new(4, 10_000.0, &RopeScaling::None)?.tensors_at::<2>(0..1, &device);
//! let rotated = apply_rope(normed.clone(), &cos, &sin);
//! # let _ = (rotated, causal_mask(0, 3, None));
//! # Ok(())
//! # }
//! ```

use burn::tensor::Tensor;
use burn::tensor::activation::{silu, softmax};

pub use crate::rope::Rope;

/// `x · rsqrt(mean(x²) + ε) · w` over the last axis, as transformers' `LlamaRMSNorm`.
///
/// `weight` is the gain, shaped to broadcast over `x` (`[1, width]` for `[positions, width]`
/// activations).
pub fn rms_norm<const D: usize>(x: Tensor<D>, weight: &Tensor<D>, eps: f64) -> Tensor<D> {
    let scale = x.clone().square().mean_dim(D - 1).add_scalar(eps).sqrt().recip();
    x * scale * weight.clone()
}

/// `x · cos + rotate_half(x) · sin`, with transformers' `rotate_half([a, b]) = [−b, a]`: rotary
/// position embeddings on the last axis of `x`, which is `head_dim` wide.
///
/// `cos` and `sin` are the tables of [`Rope::tensors_at`] for the positions of `x`, shaped to
/// broadcast over it (`[1, positions, head_dim]` for `[heads, positions, head_dim]`, or
/// `[1, 1, seq, head_dim]` for `[batch, heads, seq, head_dim]`).
pub fn apply_rope<const D: usize>(x: Tensor<D>, cos: &Tensor<D>, sin: &Tensor<D>) -> Tensor<D> {
    x.clone() * cos.clone() + rotate_half(x) * sin.clone()
}

/// `[a, b] → [−b, a]` over the halves of the last axis (transformers' `rotate_half`).
fn rotate_half<const D: usize>(x: Tensor<D>) -> Tensor<D> {
    let half = x.dims()[D - 1] / 2;
    let first = x.clone().narrow(D - 1, 0, half);
    let second = x.narrow(D - 1, half, half);
    Tensor::cat(vec![second.neg(), first], D - 1)
}

/// `silu(gate) · up`: the gated activation of the SwiGLU MLP (transformers' `LlamaMLP` computes
/// `down_proj(act_fn(gate_proj(x)) * up_proj(x))`).
pub fn swiglu<const D: usize>(gate: Tensor<D>, up: Tensor<D>) -> Tensor<D> {
    silu(gate) * up
}

/// `softmax(q · kᵀ / √head_dim + mask) · v` over the last two axes: queries
/// `[…, queries, head_dim]`, keys and values `[…, keys, head_dim]`, `mask` additive (0 or −∞)
/// and broadcasting to `[…, queries, keys]`.
///
/// Grouped-query attention is the caller's layout: either repeat each key/value head for the
/// query heads it serves (transformers' `repeat_kv`), or stack those query heads along the
/// query axis and the mask with them, which reads each key once.
pub fn attention<const D: usize>(q: Tensor<D>, k: Tensor<D>, v: Tensor<D>, mask: &Tensor<D>) -> Tensor<D> {
    let head_dim = q.dims()[D - 1];
    let scores = q.matmul(k.swap_dims(D - 2, D - 1)).mul_scalar(1.0 / (head_dim as f64).sqrt());
    softmax(scores + mask.clone(), D - 1).matmul(v)
}

/// The additive causal mask `[len, start + len]`, row-major, of `len` new positions after
/// `start` earlier ones: 0 where query `start + i` may see key `j`, −∞ elsewhere. With a
/// sliding window (Mistral), keys with `query − key ≥ window` are masked too, as transformers
/// does.
pub fn causal_mask(start: usize, len: usize, sliding_window: Option<usize>) -> Vec<f32> {
    let total = start + len;
    let window = sliding_window.unwrap_or(usize::MAX);
    let mut mask = vec![f32::NEG_INFINITY; len * total];
    for i in 0..len {
        let query = start + i;
        for key in 0..=query {
            if query - key < window {
                mask[i * total + key] = 0.0;
            }
        }
    }
    mask
}

#[cfg(test)]
mod tests {
    use burn::tensor::{Device, TensorData};

    use super::*;
    use crate::config::RopeScaling;

    fn device() -> Device {
        Device::flex()
    }

    fn values<const D: usize>(t: Tensor<D>) -> Vec<f32> {
        t.into_data().convert::<f32>().try_into_vec::<f32>().expect("f32 data")
    }

    fn close(got: &[f32], want: &[f32]) -> bool {
        got.len() == want.len() && got.iter().zip(want).all(|(a, b)| (a - b).abs() < 1e-5)
    }

    #[test]
    fn rms_norm_gives_unit_root_mean_square_before_the_gain() {
        let x = Tensor::<2>::from_data(TensorData::new(vec![3.0f32, -4.0, 0.0, 0.0, 2.0, 2.0], [2, 3]), &device());
        let gain = Tensor::<2>::from_data(TensorData::new(vec![1.0f32, 2.0, 1.0], [1, 3]), &device());
        let got = values(rms_norm(x, &gain, 0.0));
        let (a, b) = (1.0 / (25.0f32 / 3.0).sqrt(), 1.0 / (8.0f32 / 3.0).sqrt());
        assert!(close(&got, &[3.0 * a, -8.0 * a, 0.0, 0.0, 4.0 * b, 2.0 * b]), "{got:?}");
    }

    #[test]
    fn a_quarter_turn_maps_each_pair_to_its_rotation() {
        // cos 0, sin 1: (a, b) → (−b, a) for the pairs (x[j], x[j + half]).
        let x = Tensor::<3>::from_data(TensorData::new(vec![1.0f32, 2.0, 10.0, 20.0], [1, 1, 4]), &device());
        let cos = Tensor::<3>::zeros([1, 1, 4], &device());
        let sin = Tensor::<3>::ones([1, 1, 4], &device());
        assert_eq!(values(apply_rope(x, &cos, &sin)), [-10.0, -20.0, 1.0, 2.0]);
    }

    #[test]
    fn rope_preserves_norms_and_moves_later_positions() {
        let rope = Rope::new(4, 100.0, &RopeScaling::None).unwrap();
        let (cos, sin) = rope.tensors_at::<4>(0..3, &device());
        assert_eq!(cos.dims(), [1, 1, 3, 4]);
        let x = Tensor::<4>::from_data(TensorData::new([0.5f32, -1.0, 2.0, 0.25].repeat(3), [1, 1, 3, 4]), &device());
        let got = values(apply_rope(x, &cos, &sin));
        let norm = |row: &[f32]| row.iter().map(|v| v * v).sum::<f32>();
        for row in got.chunks_exact(4) {
            assert!((norm(row) - norm(&got[..4])).abs() < 1e-5);
        }
        assert_eq!(&got[..4], &[0.5, -1.0, 2.0, 0.25]);
        assert!(!close(&got[4..8], &got[..4]));
    }

    #[test]
    fn swiglu_gates_up_by_silu() {
        let gate = Tensor::<1>::from_data(TensorData::new(vec![0.0f32, 1.0], [2]), &device());
        let up = Tensor::<1>::from_data(TensorData::new(vec![5.0f32, 2.0], [2]), &device());
        let silu_one = 1.0 / (1.0 + (-1.0f32).exp());
        assert!(close(&values(swiglu(gate, up)), &[0.0, 2.0 * silu_one]));
    }

    #[test]
    fn attention_under_a_causal_mask_averages_the_visible_values() {
        // Zero queries give equal scores: each position averages the values it may see.
        let q = Tensor::<2>::zeros([3, 2], &device());
        let k = Tensor::<2>::ones([3, 2], &device());
        let v = Tensor::<2>::from_data(TensorData::new(vec![3.0f32, 0.0, 6.0, 3.0, 0.0, 6.0], [3, 2]), &device());
        let mask = Tensor::<2>::from_data(TensorData::new(causal_mask(0, 3, None), [3, 3]), &device());
        assert!(close(&values(attention(q, k, v, &mask)), &[3.0, 0.0, 4.5, 1.5, 3.0, 3.0]));
    }

    #[test]
    fn the_causal_mask_hides_the_future_and_keys_beyond_the_window() {
        let inf = f32::NEG_INFINITY;
        assert_eq!(causal_mask(1, 2, None), [0.0, 0.0, inf, 0.0, 0.0, 0.0]);
        assert_eq!(causal_mask(1, 2, Some(2)), [0.0, 0.0, inf, inf, 0.0, 0.0]);
    }
}
