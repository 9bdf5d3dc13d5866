//! Logits → the sampled distribution, on the device.

use anyspec_core::SamplingConfig;
use burn::tensor::activation::softmax;
use burn::tensor::{Int, Tensor};

use crate::error::{Error, Result};

/// Applies `sampling` to `[rows, vocab]` logits on the device, as
/// [`anyspec_core::sampling::logits_to_probs`] does on the host.
///
/// Temperature 0 (or top-k 1) gives a point mass on the arg-max. Top-k below the vocabulary size
/// and top-p below 1 need a sort with the host's tie-breaking and return
/// [`Error::Unsupported`]: callers then verify on the host. NaN logits are not checked here;
/// [`crate::verify_on_device`] reports them through the row totals it reads back.
pub fn device_probs(logits: Tensor<2>, sampling: &SamplingConfig) -> Result<Tensor<2>> {
    sampling.validate()?;
    let [rows, vocab] = logits.dims();
    if sampling.is_greedy() || sampling.top_k == Some(1) {
        return Ok(one_hot_rows(logits.argmax(1), rows, vocab));
    }
    if sampling.top_k.is_some_and(|k| k < vocab) || sampling.top_p < 1.0 {
        return Err(Error::Unsupported("top-k / top-p truncation"));
    }
    Ok(softmax(logits.div_scalar(sampling.temperature), 1))
}

/// Whether `device` is the host itself (burn's flex CPU backend). There the γ + 1 logit rows
/// cost nothing to move, and the host rule of `anyspec-core` (one pass over the rows) is cheaper
/// than the same step as a dozen tensor operations: device verification pays off only across a
/// bus.
pub fn is_host_device(device: &burn::tensor::Device) -> bool {
    matches!(device.as_dispatch(), burn::backend::DispatchDevice::Flex(_))
}

/// Whether [`device_probs`] supports `sampling` for a vocabulary of `vocab` tokens.
pub fn supports(sampling: &SamplingConfig, vocab: usize) -> bool {
    sampling.is_greedy()
        || sampling.top_k == Some(1)
        || (sampling.top_k.is_none_or(|k| k >= vocab) && sampling.top_p >= 1.0)
}

/// `[rows, vocab]` with a 1 at `indices[r]` in row `r` (`indices` is `[rows, 1]`).
pub(crate) fn one_hot_rows(indices: Tensor<2, Int>, rows: usize, vocab: usize) -> Tensor<2> {
    one_hot_mask(indices, rows, vocab).float()
}

/// Boolean `[rows, vocab]`, true at `indices[r]` in row `r`.
pub(crate) fn one_hot_mask(indices: Tensor<2, Int>, rows: usize, vocab: usize) -> Tensor<2, burn::tensor::Bool> {
    let device = indices.device();
    let ids = Tensor::<1, Int>::arange(0..vocab as i64, &device).reshape([1, vocab]).expand([rows, vocab]);
    ids.equal(indices.expand([rows, vocab]))
}
