//! [`Kernel`]: which implementation computes the products, and its dispatch.

use crate::format::WeightFormat;
use crate::matrix::RowRef;
use crate::{Error, Result};

/// Which implementation computes a [`Matrix`](crate::Matrix)'s products.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Kernel {
    /// Portable Rust, any CPU: each block dequantized to f32 once, applied to every row.
    Scalar,
    /// x86-64 AVX2 + FMA, f32 activations: each block dequantized to f32 once (in registers)
    /// and multiply-added into every activation row. Exact with respect to the file's weights
    /// (up to the order of f32 additions).
    Avx2,
}

impl Kernel {
    /// The fastest kernel this CPU supports (detected at run time).
    pub fn best() -> Kernel {
        if Kernel::Avx2.is_supported() { Kernel::Avx2 } else { Kernel::Scalar }
    }

    /// Whether this CPU has the kernel's instructions.
    pub fn is_supported(self) -> bool {
        match self {
            Kernel::Scalar => true,
            Kernel::Avx2 => avx2_supported(),
        }
    }

    pub(crate) fn check_supported(self) -> Result<()> {
        if self.is_supported() { Ok(()) } else { Err(Error::UnsupportedKernel { kernel: self }) }
    }

    /// Work done once per product before the rows are shared out (nothing yet).
    pub(crate) fn prepare(self, _format: WeightFormat, _x: &[f32], _m: usize, _cols: usize) -> Prepared {
        Prepared
    }

    /// `out[i] = Σ_k row[k] · x[i*cols + k]`, `out.len()` ≤ [`MAX_M`](crate::matrix::MAX_M).
    /// `first` is the index of `x`'s first row among all activation rows of the product.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn dot_row(
        self,
        format: WeightFormat,
        row: RowRef<'_>,
        _prepared: &Prepared,
        x: &[f32],
        _first: usize,
        cols: usize,
        out: &mut [f32],
    ) {
        match self {
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx2 => crate::sys::avx2::dot_row(format, row, x, cols, out),
            _ => crate::scalar::dot_row(format, row, x, cols, out),
        }
    }
}

/// Per-product data computed before the rows are shared out.
pub(crate) struct Prepared;

#[cfg(target_arch = "x86_64")]
fn avx2_supported() -> bool {
    std::arch::is_x86_feature_detected!("avx2")
        && std::arch::is_x86_feature_detected!("fma")
        && std::arch::is_x86_feature_detected!("f16c")
}

#[cfg(not(target_arch = "x86_64"))]
fn avx2_supported() -> bool {
    false
}
