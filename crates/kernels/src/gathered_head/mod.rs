//! A drafter's LM head over a shortlist of vocabulary ids, without copying the shortlisted rows.
//!
//! DynaSpec (dynaspec.txt §4.3) evaluates the drafter's head only on the union of the clusters
//! the router selects, a shortlist that changes at every drafting step. Gathering the
//! shortlisted rows of the head into a new matrix and multiplying it copies `n · d` floats per
//! step before doing `m · n · d` multiply-adds with them; the gathered product reads each kept
//! row where it lies. The native CPU engine has its own kernels
//! (`anyspec_cpu_kernels::Matrix::matmul_rows`, and `RowBlocks` for shortlists made of whole
//! clusters); this module does it on a burn device.
//!
//! Two bodies compute `out[i, j] = Σ_k hidden[i, k] · head[k, ids[j]]`:
//! - [`gathered_head_reference`]: plain burn tensor ops (a `select` of the kept columns, then a
//!   matmul), on every backend; flex runs it.
//! - `gathered_head_fused` (features `wgpu` / `cuda`): one CubeCL kernel launch, one unit per
//!   output, reading the kept columns through the head's strides (no copy), reached through a
//!   `#[backend_extension]` trait on burn's CubeCL backend.
//!
//! [`gathered_head`] picks the kernel on CubeCL devices and the reference elsewhere. The head is
//! given as `[d, V]` (vocabulary along columns, as the burn engine holds its LM head); a
//! `[V, d]` matrix passes as its transpose, a strided view that costs nothing.
//!
//! The kernel sums each output over `k` in order; the reference's matmul in the backend's own
//! order. Both are within `d · ε · Σ_k |hidden[i, k] · head[k, ids[j]]|` of the exact sum (ε =
//! 2⁻²⁴), which bounds their difference (tested).

#[cfg(feature = "cubecl")]
mod cube;

use burn::tensor::{Int, Tensor, TensorData};

use crate::error::{Error, Result};

#[cfg(feature = "cubecl")]
pub use cube::gathered_head_fused;

/// Checks the shapes, ids and devices of a gathered head product.
pub(crate) fn check(hidden: &Tensor<2>, head: &Tensor<2>, ids: &[u32]) -> Result<()> {
    let [_, d] = hidden.dims();
    let [head_d, vocab] = head.dims();
    if head_d != d {
        return Err(Error::Shape {
            what: "rows of the head `[d, V]` (the hidden width d)",
            expected: d.to_string(),
            got: head_d.to_string(),
        });
    }
    if ids.is_empty() {
        return Err(Error::Shape {
            what: "shortlist of vocabulary ids",
            expected: "at least one id".into(),
            got: "none".into(),
        });
    }
    if let Some(&token) = ids.iter().find(|&&t| t as usize >= vocab) {
        return Err(Error::TokenOutOfRange { token, vocab_size: vocab });
    }
    if hidden.device() != head.device() {
        return Err(Error::Shape {
            what: "device of the head",
            expected: format!("{:?} (the hidden rows')", hidden.device()),
            got: format!("{:?}", head.device()),
        });
    }
    Ok(())
}

/// `[m, n]` logits of the hidden rows `hidden` (`[m, d]`) over the vocabulary ids `ids` of
/// `head` (`[d, V]`), in plain burn tensor ops: the kept columns selected, then multiplied.
pub fn gathered_head_reference(hidden: Tensor<2>, head: Tensor<2>, ids: &[u32]) -> Result<Tensor<2>> {
    check(&hidden, &head, ids)?;
    let index: Vec<i64> = ids.iter().map(|&t| i64::from(t)).collect();
    let index = Tensor::<1, Int>::from_data(TensorData::new(index, [ids.len()]), &hidden.device());
    Ok(hidden.matmul(head.select(1, index)))
}

/// [`gathered_head_reference`]'s result on the inputs' device: the CubeCL kernel where one is
/// compiled in and the device runs CubeCL with f32 inputs, the reference otherwise.
pub fn gathered_head(hidden: Tensor<2>, head: Tensor<2>, ids: &[u32]) -> Result<Tensor<2>> {
    #[cfg(feature = "cubecl")]
    if cube::supports(&hidden, &head) {
        check(&hidden, &head, ids)?;
        return Ok(cube::fused(hidden, head, ids));
    }
    gathered_head_reference(hidden, head, ids)
}

/// Whether [`gathered_head`] runs the CubeCL kernel for inputs on `device` (f32): a CubeCL
/// device (wgpu, CUDA) compiled in. Where it does, a shortlist needs no gathered copy of the
/// head.
pub fn gathered_head_is_fused(device: &burn::tensor::Device) -> bool {
    #[cfg(feature = "cubecl")]
    {
        matches!(device.as_dispatch(), burn::backend::DispatchDevice::Cube(_))
    }
    #[cfg(not(feature = "cubecl"))]
    {
        let _ = device;
        false
    }
}
