//! [`Kernel`]: which implementation computes the products, and its dispatch.

use crate::format::WeightFormat;
use crate::matrix::Rows;
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
    /// x86-64 AVX2 + FMA with 8-bit activations, llama.cpp's design: the activations are
    /// quantized per 32-block once per product (as llama.cpp's `quantize_row_q8_0`/`q8_1` do)
    /// and meet `Q4_0`/`Q4_1`/`Q8_0` weight blocks in integer dot products. Cheaper per weight,
    /// not bit-exact to the f32 reference. Other formats use [`Kernel::Avx2`].
    Avx2Q8,
    /// x86-64 AVX-512 (F, BW) with VNNI: [`Kernel::Avx2Q8`]'s computation, with the
    /// interleaved layout's products ([`Matrix::interleave_rows`](crate::Matrix::interleave_rows))
    /// done by `vpdpbusd` on sixteen weight rows per instruction. Bit-identical to
    /// [`Kernel::Avx2Q8`]; cheaper when several activation rows are scored at once (a draft's
    /// positions). f32 rows (and f16/bf16, widened at load) get an AVX-512 kernel of their own
    /// (two weight rows per pass over the activations; same sums whatever the number of rows,
    /// not bit-identical to [`Kernel::Avx2`]'s). Other row-layout matrices and formats use
    /// [`Kernel::Avx2Q8`]'s kernels.
    Avx512Q8,
}

impl Kernel {
    /// The fastest kernel this CPU supports (detected at run time): [`Kernel::Avx512Q8`] on
    /// x86-64 with AVX-512 VNNI, else [`Kernel::Avx2Q8`] on x86-64 with AVX2, FMA and F16C
    /// (both are [`Kernel::Avx2`] for the formats they do not handle), else
    /// [`Kernel::Scalar`].
    pub fn best() -> Kernel {
        [Kernel::Avx512Q8, Kernel::Avx2Q8].into_iter().find(|k| k.is_supported()).unwrap_or(Kernel::Scalar)
    }

    /// Every kernel, in the order [`Kernel::best`] prefers them (the portable one last).
    pub const ALL: [Kernel; 4] = [Kernel::Avx512Q8, Kernel::Avx2Q8, Kernel::Avx2, Kernel::Scalar];

    /// Whether the kernel rounds the activations to 8 bits per 32-block (llama.cpp's design)
    /// for the quantized formats, rather than computing with the file's weights and f32
    /// activations exactly.
    pub fn quantizes_activations(self) -> bool {
        matches!(self, Kernel::Avx2Q8 | Kernel::Avx512Q8)
    }

    /// Whether the kernel has products for the interleaved layout
    /// ([`Matrix::interleave_rows`](crate::Matrix::interleave_rows)); the others read an
    /// interleaved matrix back row by row, for no gain.
    pub fn reads_interleaved(self) -> bool {
        self.quantizes_activations()
    }

    /// Whether the kernel has products for the panel layout of half-precision matrices
    /// ([`Matrix::interleave_rows`](crate::Matrix::interleave_rows) on f16 and bf16 weights):
    /// [`Kernel::Avx512Q8`] on a CPU with AVX-512 F and F16C. The others compute a panel
    /// matrix with the portable kernel, slowly: leave their matrices in rows.
    pub fn reads_panels(self) -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            self == Kernel::Avx512Q8 && crate::sys::avx512_panels::supported()
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            false
        }
    }

    /// The order of the interleaved groups this kernel reads as one sequential stream.
    pub(crate) fn group_order(self) -> crate::interleave::Order {
        match self {
            Kernel::Avx512Q8 => crate::interleave::Order::Pairs,
            _ => crate::interleave::Order::Groups,
        }
    }

    /// Whether this CPU has the kernel's instructions.
    pub fn is_supported(self) -> bool {
        match self {
            Kernel::Scalar => true,
            Kernel::Avx2 | Kernel::Avx2Q8 => avx2_supported(),
            Kernel::Avx512Q8 => avx2_supported() && avx512_vnni_supported(),
        }
    }

    pub(crate) fn check_supported(self) -> Result<()> {
        if self.is_supported() { Ok(()) } else { Err(Error::UnsupportedKernel { kernel: self }) }
    }

    /// Work done once per product before the rows are shared out: the quantized activations
    /// of [`Kernel::Avx2Q8`] and [`Kernel::Avx512Q8`] (the latter quantizes with AVX-512: the
    /// same values, see `sys/avx512_quantize.rs`).
    pub(crate) fn prepare(self, format: WeightFormat, x: &[f32], m: usize, cols: usize) -> Prepared {
        match self {
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx512Q8 if crate::sys::avx2_q8::handles(format) => Prepared(
                crate::sys::avx512_quantize::quantize_x(format, x, m, cols)
                    .or_else(|| crate::sys::avx2_q8::quantize_x(format, x, m, cols)),
            ),
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx2Q8 if crate::sys::avx2_q8::handles(format) => {
                Prepared(crate::sys::avx2_q8::quantize_x(format, x, m, cols))
            }
            _ => {
                let _ = (format, x, m, cols);
                Prepared(None)
            }
        }
    }

    /// For every output `j` of `rows`: `outs[i][j - rows.start] = Σ_k W[row j, k] · x[i*cols + k]`
    /// for the `outs.len()` ≤ [`MAX_M`](crate::matrix::MAX_M) activation rows of `x`. `first` is
    /// the index of `x`'s first row among all activation rows of the product.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn dot_rows(
        self,
        format: WeightFormat,
        rows: Rows<'_>,
        prepared: &Prepared,
        x: &[f32],
        first: usize,
        cols: usize,
        outs: &mut [&mut [f32]],
    ) {
        match (self, &prepared.0) {
            #[cfg(target_arch = "x86_64")]
            (Kernel::Avx2Q8 | Kernel::Avx512Q8, Some(xq)) => {
                crate::sys::avx2_q8::dot_rows(format, rows, xq, first, outs)
            }
            #[cfg(target_arch = "x86_64")]
            (Kernel::Avx512Q8, _) if format == WeightFormat::F32 => {
                if !crate::sys::avx512_f32::dot_rows(rows, x, cols, outs) {
                    crate::sys::avx2::dot_rows(format, rows, x, cols, outs)
                }
            }
            #[cfg(target_arch = "x86_64")]
            (Kernel::Avx2 | Kernel::Avx2Q8 | Kernel::Avx512Q8, _) => {
                crate::sys::avx2::dot_rows(format, rows, x, cols, outs)
            }
            _ => {
                let _ = first;
                let mut out = [0.0f32; crate::matrix::MAX_M];
                let out = &mut out[..outs.len()];
                for j in rows.start..rows.end {
                    crate::scalar::dot_row(format, rows.get(j), x, cols, out);
                    for (o, &v) in outs.iter_mut().zip(out.iter()) {
                        o[j - rows.start] = v;
                    }
                }
            }
        }
    }
}

impl Kernel {
    /// The interleaved layout's products ([`crate::interleave`]): for every output `j` of
    /// `range` (`range.start` a multiple of 8), `outs[i][j - range.start]` from the weights'
    /// groups in `data`. Returns `false`, having written nothing, when this kernel has no
    /// interleaved implementation for `format`; the caller then reads the rows back and uses
    /// [`dot_rows`](Self::dot_rows).
    pub(crate) fn dot_groups(
        self,
        format: WeightFormat,
        groups: crate::interleave::Grouped<'_>,
        range: std::ops::Range<usize>,
        prepared: &Prepared,
        first: usize,
        outs: &mut [&mut [f32]],
    ) -> bool {
        match (self, &prepared.0) {
            #[cfg(target_arch = "x86_64")]
            (Kernel::Avx2Q8, Some(xq)) => {
                crate::sys::avx2_q8_groups::dot_groups(format, groups, range, xq, first, outs)
            }
            #[cfg(target_arch = "x86_64")]
            (Kernel::Avx512Q8, Some(xq)) => {
                crate::sys::avx512_q8_groups::dot_groups(format, groups, range, xq, first, outs)
            }
            _ => {
                let _ = (format, groups, range, first, outs);
                false
            }
        }
    }
}

impl Kernel {
    /// The panel layout's products ([`crate::panels`]): for every output `j` of `range`,
    /// `outs[i][j - range.start]` for the `outs.len()` ≤ [`MAX_M`](crate::matrix::MAX_M)
    /// activation rows of `x`, with the AVX-512 kernel where this kernel reads panels
    /// ([`Kernel::reads_panels`]) and the portable one otherwise (the same sums, bit for bit).
    pub(crate) fn dot_panels(
        self,
        element: crate::panels::Element,
        data: &[u8],
        cols: usize,
        range: std::ops::Range<usize>,
        x: &[f32],
        outs: &mut [&mut [f32]],
    ) {
        #[cfg(target_arch = "x86_64")]
        if self.reads_panels() && crate::sys::avx512_panels::dot_panels(element, data, cols, range.clone(), x, outs) {
            return;
        }
        crate::panels::dot_panels(element, data, cols, range, x, outs);
    }
}

/// Per-product data computed before the rows are shared out.
pub(crate) struct Prepared(
    #[cfg(target_arch = "x86_64")] Option<crate::sys::avx2_q8::QuantizedX>,
    #[cfg(not(target_arch = "x86_64"))] Option<()>,
);

#[cfg(target_arch = "x86_64")]
fn avx2_supported() -> bool {
    crate::sys::avx2::supported()
}

#[cfg(not(target_arch = "x86_64"))]
fn avx2_supported() -> bool {
    false
}

#[cfg(target_arch = "x86_64")]
fn avx512_vnni_supported() -> bool {
    std::arch::is_x86_feature_detected!("avx512f")
        && std::arch::is_x86_feature_detected!("avx512bw")
        && std::arch::is_x86_feature_detected!("avx512vnni")
}

#[cfg(not(target_arch = "x86_64"))]
fn avx512_vnni_supported() -> bool {
    false
}
