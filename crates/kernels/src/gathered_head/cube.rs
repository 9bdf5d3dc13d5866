//! The gathered head product as one CubeCL kernel launch (wgpu, CUDA).
//!
//! One unit per output `(i, j)`: cubes of [`UNITS`] units along the shortlist, one row of
//! cubes per hidden row. Each unit reads its id, then sums `hidden[i, k] · head[k, id]` over
//! `k` in order, reading both through their strides: the kept head columns are never copied.

use burn::backend::cubecl::dtype_to_storage_type;
use burn::backend::tensor::{FloatTensor, IntTensor};
use burn::backend::{Backend, Dispatch, backend_extension};
use burn::tensor::{DType, Int, Tensor, TensorData};
use burn_cubecl::cubecl::prelude::{CubeCount, CubeDim};
use burn_cubecl::ops::numeric::empty_device_contiguous_dtype;
use burn_cubecl::{CubeBackend, tensor::CubeTensor};

use crate::error::{Error, Result};

/// Units per cube (the WebGPU minimum for `maxComputeInvocationsPerWorkgroup` is 256).
const UNITS: u32 = 256;

/// The gathered head product, dispatched to burn's CubeCL backend.
#[backend_extension(Cube, Fusion: cfg(feature = "fusion"))]
pub(crate) trait GatheredHeadBackend: Backend {
    /// `hidden` `[m, d]`, `head` `[d, V]`, `ids` `[n]` → `[m, n]`.
    #[fusion(dtype = hidden, shape = { burn::tensor::Shape::new([hidden[0], ids[0]]) })]
    fn gathered_head_product(
        hidden: FloatTensor<Self>,
        head: FloatTensor<Self>,
        ids: IntTensor<Self>,
    ) -> FloatTensor<Self>;
}

impl GatheredHeadBackend for CubeBackend {
    fn gathered_head_product(hidden: CubeTensor, head: CubeTensor, ids: CubeTensor) -> CubeTensor {
        let rows = hidden.meta.shape()[0];
        let width = hidden.meta.shape()[1];
        let kept = ids.meta.shape()[0];
        let client = hidden.client.clone();
        let out = empty_device_contiguous_dtype(
            client.clone(),
            hidden.device.clone(),
            burn::tensor::Shape::new([rows, kept]),
            DType::F32,
        );
        let units = UNITS.min(client.properties().hardware.max_cube_dim.0);
        let id_dtype = dtype_to_storage_type(ids.dtype);
        kernel::gathered_head_kernel::launch(
            &client,
            CubeCount::Static((kept as u32).div_ceil(units), rows as u32, 1),
            CubeDim::new_1d(units),
            hidden.into_tensor_arg(),
            head.into_tensor_arg(),
            ids.into_tensor_arg(),
            out.clone().into_tensor_arg(),
            width as u32,
            kept as u32,
            units as usize,
            id_dtype,
        );
        out
    }
}

/// The kernel, in its own module: `#[cube]` code names CubeCL's `Tensor`, not burn's.
mod kernel {
    use burn_cubecl::cubecl;
    use burn_cubecl::cubecl::prelude::*;

    /// One unit per output; see the module documentation.
    #[cube(launch)]
    pub(super) fn gathered_head_kernel<I: Numeric>(
        hidden: &Tensor<f32>,
        head: &Tensor<f32>,
        ids: &Tensor<I>,
        out: &mut Tensor<f32>,
        width: u32,
        kept: u32,
        #[comptime] units: usize,
        #[define(I)] _dtype: ElemType,
    ) {
        let j = CUBE_POS_X as usize * units + UNIT_POS_X as usize;
        let i = CUBE_POS_Y as usize;
        if j < kept as usize {
            let token = u32::cast_from(ids[j * ids.stride(0)]) as usize;
            let h_base = i * hidden.stride(0);
            let h_step = hidden.stride(1);
            let w_base = token * head.stride(1);
            let w_step = head.stride(0);
            let mut sum = 0.0f32;
            let mut k = 0usize;
            while k < width as usize {
                sum += hidden[h_base + k * h_step] * head[w_base + k * w_step];
                k += 1;
            }
            let at = i * out.stride(0) + j * out.stride(1);
            out[at] = sum;
        }
    }
}

/// Whether the kernel runs these inputs: a CubeCL device and f32 tensors.
pub(super) fn supports(hidden: &Tensor<2>, head: &Tensor<2>) -> bool {
    hidden.dtype() == DType::F32 && head.dtype() == DType::F32 && super::gathered_head_is_fused(&hidden.device())
}

/// The gathered head product from the kernel; an error on a device that is not a CubeCL one
/// (flex), with non-f32 inputs, or with shapes and ids that do not fit (see
/// [`super::gathered_head_reference`]).
pub fn gathered_head_fused(hidden: Tensor<2>, head: Tensor<2>, ids: &[u32]) -> Result<Tensor<2>> {
    super::check(&hidden, &head, ids)?;
    if !supports(&hidden, &head) {
        return Err(Error::Unsupported("the gathered head kernel on a non-CubeCL device or non-f32 input"));
    }
    Ok(fused(hidden, head, ids))
}

/// Launches the kernel; the caller checked the inputs and [`supports`].
pub(super) fn fused(hidden: Tensor<2>, head: Tensor<2>, ids: &[u32]) -> Tensor<2> {
    let device = hidden.device();
    let index: Vec<i32> = ids.iter().map(|&t| t as i32).collect();
    let index = Tensor::<1, Int>::from_data(TensorData::new(index, [ids.len()]), &device);
    Tensor::from_dispatch(<Dispatch as GatheredHeadBackend>::gathered_head_product(
        hidden.into_dispatch(),
        head.into_dispatch(),
        index.into_dispatch(),
    ))
}
