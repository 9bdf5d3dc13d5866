//! AVX2 + FMA kernels (placeholder: the scalar kernel until the intrinsics land).

use crate::format::WeightFormat;
use crate::matrix::RowRef;

/// See [`crate::scalar::dot_row`]; callers check `Kernel::Avx2.is_supported()` first.
pub(crate) fn dot_row(format: WeightFormat, row: RowRef<'_>, x: &[f32], cols: usize, out: &mut [f32]) {
    crate::scalar::dot_row(format, row, x, cols, out);
}
