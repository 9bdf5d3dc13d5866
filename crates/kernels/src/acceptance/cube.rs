//! The acceptance step as one CubeCL kernel launch (wgpu, CUDA).
//!
//! One cube per row `j` of `p`; its `T` units split the vocabulary into `T` contiguous chunks.
//! - Pass 1: each unit sums its chunk of the residual weights `w` and of `p` (for the fallback),
//!   and finds its last index with positive weight.
//! - Unit 0 scans the `T` chunk sums in order (an exclusive prefix sum in shared memory), picks
//!   `w` or the fallback `p`, and sets the threshold `u · Σw`.
//! - Pass 2: each unit walks its chunk again from its prefix, counting indices whose inclusive
//!   cumulative weight is ≤ the threshold; unit 0 adds the counts and caps the result at the last
//!   positive index, as [`super::acceptance_reference`] does.
//!
//! The result equals the reference's except for summation order: `Σw` is summed chunk by chunk
//! here and in the backend's own order there. Both sums of `V` non-negative terms are within
//! `(V − 1)·ε·Σw` of the exact one (ε = 2⁻²⁴), so the totals agree to `2(V − 1)ε` relative, and a
//! sample can differ only when `u · Σw` lies within that distance of a cumulative boundary; the
//! acceptance flags and `q(d)` use the same f32 operations and agree exactly.
//!
//! Inputs are read through their strides, so transposed or sliced tensors need no copy.

use burn::backend::cubecl::dtype_to_storage_type;
use burn::backend::tensor::{FloatTensor, IntTensor};
use burn::backend::{Backend, Dispatch, DispatchDevice, backend_extension};
use burn::tensor::{DType, Int, Tensor, TensorData};
use burn_cubecl::cubecl::prelude::{CubeCount, CubeDim};
use burn_cubecl::ops::numeric::empty_device_contiguous_dtype;
use burn_cubecl::{CubeBackend, tensor::CubeTensor};

use super::{AcceptanceInputs, COLUMNS};
use crate::error::{Error, Result};

/// Units per cube. 256 keeps the sequential scan of unit 0 short and fits every WebGPU device
/// (the WebGPU minimum for `maxComputeInvocationsPerWorkgroup` is 256).
const UNITS: u32 = 256;

/// The fused acceptance step, dispatched to burn's CubeCL backend.
#[backend_extension(Cube, Fusion: cfg(feature = "fusion"))]
pub(crate) trait AcceptanceBackend: Backend {
    /// `target` `[γ + 1, V]`, `draft` `[γ, V]` (the target itself when `point_mass`), `tokens`
    /// `[max(γ, 1)]`, `uniforms` `[γ + 1]` → the packed `[γ + 1, 4]` result.
    #[fusion(dtype = target, shape = { burn::tensor::Shape::new([target[0], COLUMNS]) })]
    fn fused_acceptance(
        target: FloatTensor<Self>,
        draft: FloatTensor<Self>,
        tokens: IntTensor<Self>,
        uniforms: FloatTensor<Self>,
        point_mass: bool,
    ) -> FloatTensor<Self>;
}

impl AcceptanceBackend for CubeBackend {
    fn fused_acceptance(
        target: CubeTensor,
        draft: CubeTensor,
        tokens: CubeTensor,
        uniforms: CubeTensor,
        point_mass: bool,
    ) -> CubeTensor {
        let shape = target.meta.shape();
        let (rows, vocab) = (shape[0], shape[1]);
        let client = target.client.clone();
        let out = empty_device_contiguous_dtype(
            client.clone(),
            target.device.clone(),
            burn::tensor::Shape::new([rows, COLUMNS]),
            DType::F32,
        );
        let units = UNITS.min(client.properties().hardware.max_cube_dim.0);
        let token_dtype = dtype_to_storage_type(tokens.dtype);
        kernel::acceptance_kernel::launch(
            &client,
            CubeCount::Static(rows as u32, 1, 1),
            CubeDim::new_1d(units),
            target.into_tensor_arg(),
            draft.into_tensor_arg(),
            tokens.into_tensor_arg(),
            uniforms.into_tensor_arg(),
            out.clone().into_tensor_arg(),
            (rows - 1) as u32,
            vocab as u32,
            u32::from(point_mass),
            units as usize,
            token_dtype,
        );
        out
    }
}

/// The kernel, in its own module: `#[cube]` code names CubeCL's `Tensor`, not burn's.
mod kernel {
    use burn_cubecl::cubecl;
    use burn_cubecl::cubecl::prelude::*;

    /// One cube per row; see the module documentation for the two passes.
    #[cube(launch)]
    pub(super) fn acceptance_kernel<I: Numeric>(
        target: &Tensor<f32>,
        draft: &Tensor<f32>,
        tokens: &Tensor<I>,
        uniforms: &Tensor<f32>,
        out: &mut Tensor<f32>,
        gamma: u32,
        vocab: u32,
        point_mass: u32,
        #[comptime] units: usize,
        #[define(I)] _dtype: ElemType,
    ) {
        let row = CUBE_POS_X as usize;
        let unit = UNIT_POS_X as usize;
        let v = vocab as usize;
        let g = gamma as usize;
        let chunk = v.div_ceil(units);
        let start = unit * chunk;
        let mut end = start + chunk;
        if end > v {
            end = v;
        }

        let p_base = row * target.stride(0);
        let p_step = target.stride(1);
        let q_base = row * draft.stride(0);
        let q_step = draft.stride(1);

        // `token == v` (no index) in the bonus row.
        let mut token = v;
        if row < g {
            token = u32::cast_from(tokens[row * tokens.stride(0)]) as usize;
        }
        let sampled = row < g && point_mass == 0;

        // Pass 1: chunk sums of w and p, last positive index of each.
        let mut sum_w = 0.0f32;
        let mut sum_p = 0.0f32;
        let mut last_w = 0u32;
        let mut last_p = 0u32;
        let mut i = start;
        while i < end {
            let p = target[p_base + i * p_step];
            let mut w = p;
            if sampled {
                let d = p - draft[q_base + i * q_step];
                w = select(d > 0.0f32, d, 0.0f32);
            } else if i == token {
                w = 0.0f32;
            }
            sum_w += w;
            sum_p += p;
            if w > 0.0f32 {
                last_w = i as u32;
            }
            if p > 0.0f32 {
                last_p = i as u32;
            }
            i += 1;
        }

        let mut sums_w = Shared::<[f32]>::new_slice(units);
        let mut sums_p = Shared::<[f32]>::new_slice(units);
        let mut lasts_w = Shared::<[u32]>::new_slice(units);
        let mut lasts_p = Shared::<[u32]>::new_slice(units);
        // [use p instead of w (0/1), threshold, total, last positive index]
        let mut state = Shared::<[f32]>::new_slice(4usize);
        let mut last_state = Shared::<[u32]>::new_slice(1usize);
        sums_w[unit] = sum_w;
        sums_p[unit] = sum_p;
        lasts_w[unit] = last_w;
        lasts_p[unit] = last_p;
        sync_cube();

        // Unit 0: totals in chunk order, the fallback decision and the threshold; then the exclusive
        // prefix of the chosen weights, written over the chunk sums.
        if unit == 0 {
            let mut total_w = 0.0f32;
            let mut total_p = 0.0f32;
            let mut max_w = 0u32;
            let mut max_p = 0u32;
            for t in 0..units {
                total_w += sums_w[t];
                total_p += sums_p[t];
                if lasts_w[t] > max_w {
                    max_w = lasts_w[t];
                }
                if lasts_p[t] > max_p {
                    max_p = lasts_p[t];
                }
            }
            let use_p = total_w <= 0.0f32;
            let mut total = total_w;
            let mut last = max_w;
            if use_p {
                total = total_p;
                last = max_p;
            }
            let mut running = 0.0f32;
            for t in 0..units {
                let s = select(use_p, sums_p[t], sums_w[t]);
                sums_w[t] = running;
                running += s;
            }
            state[0] = select(use_p, 1.0f32, 0.0f32);
            state[1] = total * uniforms[g * uniforms.stride(0)];
            state[2] = total;
            last_state[0] = last;
        }
        sync_cube();

        // Pass 2: count indices whose inclusive cumulative weight is ≤ the threshold.
        let use_p = state[0] > 0.5f32;
        let threshold = state[1];
        let mut cumulative = sums_w[unit];
        let mut count = 0u32;
        let mut i = start;
        while i < end {
            let p = target[p_base + i * p_step];
            let mut w = p;
            if !use_p {
                if sampled {
                    let d = p - draft[q_base + i * q_step];
                    w = select(d > 0.0f32, d, 0.0f32);
                } else if i == token {
                    w = 0.0f32;
                }
            }
            cumulative += w;
            if cumulative <= threshold {
                count += 1;
            }
            i += 1;
        }
        lasts_p[unit] = count;
        sync_cube();

        if unit == 0 {
            let mut first_above = 0u32;
            for t in 0..units {
                first_above += lasts_p[t];
            }
            let mut sample = first_above;
            if last_state[0] < sample {
                sample = last_state[0];
            }
            let mut accept = 1.0f32;
            let mut q_at = 1.0f32;
            if row < g {
                let p_at = target[p_base + token * p_step];
                if sampled {
                    q_at = draft[q_base + token * q_step];
                }
                let u = uniforms[row * uniforms.stride(0)];
                accept = select(u * q_at < p_at || p_at >= q_at, 1.0f32, 0.0f32);
            }
            let o = row * 4;
            out[o] = state[2];
            out[o + 1] = f32::cast_from(sample);
            out[o + 2] = accept;
            out[o + 3] = q_at;
        }
    }
}

/// Whether the fused kernel runs these inputs: a CubeCL device and f32 distributions.
pub(super) fn supports(inputs: &AcceptanceInputs) -> bool {
    let f32_inputs = inputs.target_probs.dtype() == DType::F32
        && inputs.draft_probs.as_ref().is_none_or(|q| q.dtype() == DType::F32);
    f32_inputs && matches!(inputs.target_probs.device().as_dispatch(), DispatchDevice::Cube(_))
}

/// The packed acceptance result from the fused kernel; an error on a device that is not a CubeCL
/// one (flex) or with non-f32 distributions, where [`super::acceptance_reference`] is the body.
pub fn acceptance_fused(inputs: AcceptanceInputs) -> Result<Tensor<2>> {
    if !supports(&inputs) {
        return Err(Error::Unsupported("the fused acceptance kernel on a non-CubeCL device or non-f32 input"));
    }
    Ok(fused(inputs))
}

/// Launches the kernel; the caller checked [`supports`].
pub(super) fn fused(inputs: AcceptanceInputs) -> Tensor<2> {
    let AcceptanceInputs { target_probs, draft_probs, tokens, uniforms, .. } = inputs;
    let device = target_probs.device();
    let gamma = tokens.len();
    // Never upload an empty tensor: with γ = 0 the token is a placeholder the kernel never reads.
    let ids: Vec<i32> = if gamma == 0 { vec![0] } else { tokens.iter().map(|&t| t as i32).collect() };
    let ids = Tensor::<1, Int>::from_data(TensorData::new(ids.clone(), [ids.len()]), &device);
    let mut u: Vec<f32> = uniforms.accept.iter().map(|&u| u as f32).collect();
    u.push(uniforms.residual as f32);
    let u = Tensor::<1>::from_data(TensorData::new(u, [gamma + 1]), &device);
    let point_mass = draft_probs.is_none();
    let draft = draft_probs.unwrap_or_else(|| target_probs.clone());
    Tensor::from_dispatch(<Dispatch as AcceptanceBackend>::fused_acceptance(
        target_probs.into_dispatch(),
        draft.into_dispatch(),
        ids.into_dispatch(),
        u.into_dispatch(),
        point_mass,
    ))
}
