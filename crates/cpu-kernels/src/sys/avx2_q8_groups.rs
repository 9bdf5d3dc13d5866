//! The AVX2 kernel of the interleaved layout ([`crate::interleave`]) with 8-bit activations:
//! the activations are quantized per 32-block as for [`super::avx2_q8`] (llama.cpp's
//! `quantize_row_q8_0`/`q8_1`), and one 32-block of eight weight rows meets one activation
//! block in eight (`Q4_0`/`Q4_1`) or sixteen (`Q8_0`) integer instructions whose lanes are the
//! eight rows, so that the conversion to float, the scale and the multiply-adds that follow
//! are shared by the eight rows.
//!
//! `Q4_0`/`Q4_1`: the eight `vpmaddubsw` products of a block (nibble × activation, pairs of
//! products in 16-bit lanes, at most 2 · 15 · 128 = 3,840 in magnitude) are summed in 16-bit
//! lanes (at most 30,720: no overflow), widened once (`vpmaddwd`), converted and scaled by
//! `d_w · d_x` (`Q4_1` then adds `m_w · s_x`, `Q4_0` `-8 d_w · s_x`, where `s_x` is the
//! activation block's scale times its sum, as in llama.cpp's `ggml_vec_dot_q4_1_q8_1`).
//! `Q8_0`: products of two signed bytes can reach 2 · 127 · 128 in a pair, so each is widened
//! before it is summed.
//!
//! Each output is computed by the same instructions in the same order whatever the number of
//! activation rows or the output's place in its chunk, like every kernel of the crate.
//!
//! Compiled for AVX2, FMA and F16C and reached only through `Kernel::Avx2Q8`, which the crate
//! hands out after run-time detection.

use core::arch::x86_64::*;
use std::ops::Range;

use super::avx2_q8::QuantizedX;
use crate::format::{QK, WeightFormat};
use crate::interleave::{GROUP, Grouped, stored_bytes};

/// For every output `j` of `range` (`range.start` a multiple of [`GROUP`]):
/// `outs[i][j - range.start] ≈ Σ_k W[j, k] · x[(first + i)·cols + k]`, with the interleaved
/// weights `data` and the activations as quantized in `xq` (`outs.len()` ≤ 8). Returns `false`,
/// having written nothing, when the format, a length or the CPU does not fit.
pub(crate) fn dot_groups(
    format: WeightFormat,
    groups: Grouped<'_>,
    range: Range<usize>,
    xq: &QuantizedX,
    first: usize,
    outs: &mut [&mut [f32]],
) -> bool {
    let m = outs.len();
    if !(fits(format, groups, &range, xq, first, outs) && crate::Kernel::Avx2Q8.is_supported()) {
        return false;
    }
    // SAFETY: features and lengths checked just above.
    unsafe {
        match (format, m) {
            (_, 0) => {}
            (WeightFormat::Q8_0, _) => dispatch_m::<Q8_0>(groups, range, xq, first, outs),
            (WeightFormat::Q4_0, _) => dispatch_m::<Q4_0>(groups, range, xq, first, outs),
            _ => dispatch_m::<Q4_1>(groups, range, xq, first, outs),
        }
    }
    true
}

/// The formats as const parameters, so that the inner loops carry no format test.
pub(super) const Q8_0: u8 = 0;
pub(super) const Q4_0: u8 = 1;
pub(super) const Q4_1: u8 = 2;

/// The format of a const format parameter.
pub(super) const fn format_of(f: u8) -> WeightFormat {
    match f {
        Q8_0 => WeightFormat::Q8_0,
        Q4_0 => WeightFormat::Q4_0,
        _ => WeightFormat::Q4_1,
    }
}

/// Whether an interleaved kernel may read `groups` for the outputs `range` and the activation
/// rows `first..first + outs.len()` of `xq` through raw pointers: the format has an interleaved
/// layout, `range` starts a group, at most 8 rows, and every length fits (`xq.sums` too, which
/// the AVX-512 kernel reads). The CPU's features are the caller's to check.
pub(super) fn fits(
    format: WeightFormat,
    groups: Grouped<'_>,
    range: &Range<usize>,
    xq: &QuantizedX,
    first: usize,
    outs: &[&mut [f32]],
) -> bool {
    let m = outs.len();
    let cols = xq.cols;
    let blocks = cols / QK;
    crate::interleave::supports(format)
        && range.start.is_multiple_of(GROUP)
        && range.start <= range.end
        && groups.data.len() >= stored_bytes(format, blocks, range.end.div_ceil(GROUP))
        && xq.qs.len() >= (first + m) * cols
        && xq.d.len() >= (first + m) * blocks
        && xq.s.len() >= (first + m) * blocks
        && xq.sums.len() >= (first + m) * blocks
        && m <= 8
        && outs.iter().all(|o| o.len() >= range.len())
}

/// # Safety
/// As for [`groups_of`].
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn dispatch_m<const F: u8>(
    groups: Grouped<'_>,
    range: Range<usize>,
    xq: &QuantizedX,
    first: usize,
    outs: &mut [&mut [f32]],
) {
    // SAFETY (every arm): as for this function.
    unsafe { super::for_row_count!(outs.len(), groups_of::<F>(groups, range, xq, first, outs)) }
}

/// The weights of a block are unpacked once and applied to all `M` activation rows, whose
/// accumulators live in memory for `M` > 3 or so. Measured against passes of 2, 3 or 4 rows
/// with their accumulators in registers (each pass unpacking the weights again): as fast at
/// M ≤ 2, 15–25% faster at M ≥ 4 (576×1536 `Q4_1`, `cargo bench --bench matmul`).
///
/// # Safety
/// AVX2/FMA/F16C available; the lengths checked in [`dot_groups`], and `outs.len() == M`.
#[allow(clippy::needless_range_loop)] // `i` indexes the accumulators and the activation rows
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn groups_of<const M: usize, const F: u8>(
    groups: Grouped<'_>,
    range: Range<usize>,
    xq: &QuantizedX,
    first: usize,
    outs: &mut [&mut [f32]],
) {
    let cols = xq.cols;
    let blocks = cols / QK;
    let format = format_of(F);
    // From one of a group's blocks to its next (further than the next group block when the
    // groups are stored in pairs).
    let (data, order) = (groups.data, groups.order);
    let stride = order.stride(format);
    // The header fields (d, and m for Q4_1), eight f16 lanes each.
    let header = if F == Q4_1 { 4 * GROUP } else { 2 * GROUP };
    let mask = _mm256_set1_epi8(0x0F);
    let ones = _mm256_set1_epi16(1);
    // SAFETY (whole body): group g's block b lies at data + order.block_offset(g, 0) + b·stride
    // for the groups of `range` (checked by the caller); activation row i < M has its values at
    // qp + i·cols and its scales at dp/sp + i·blocks; outs[i] holds range.len() values.
    unsafe {
        let qp = xq.qs.as_ptr().add(first * cols);
        let dp = xq.d.as_ptr().add(first * blocks);
        let sp = xq.s.as_ptr().add(first * blocks);
        for g in range.start / GROUP..range.end.div_ceil(GROUP) {
            let mut acc = [_mm256_setzero_ps(); M];
            let gp = data.as_ptr().add(order.block_offset(format, blocks, g, 0));
            for b in 0..blocks {
                let p = gp.add(b * stride);
                // The lines PREFETCH_BYTES ahead in the group's stream (as in the AVX-512
                // kernel; past the group's end, the next group's, or nothing).
                for line in (0..stride).step_by(64) {
                    _mm_prefetch::<_MM_HINT_T0>(
                        p.wrapping_add(super::avx512_q8_groups::PREFETCH_BYTES + line).cast::<i8>(),
                    );
                }
                let d = _mm256_cvtph_ps(_mm_loadu_si128(p.cast()));
                let w = p.add(header);
                // The activation block's 4-byte chunk `c`, in every lane.
                let chunk = |i: usize, c: usize| -> __m256i {
                    _mm256_set1_epi32(qp.add(i * cols + b * QK + 4 * c).cast::<i32>().read_unaligned())
                };
                if F == Q8_0 {
                    let wt: [__m256i; 8] = core::array::from_fn(|t| _mm256_loadu_si256(w.add(32 * t).cast()));
                    let aw = wt.map(|v| _mm256_sign_epi8(v, v));
                    for i in 0..M {
                        let mut isum = _mm256_setzero_si256();
                        for t in 0..8 {
                            let x = _mm256_sign_epi8(chunk(i, t), wt[t]);
                            isum = _mm256_add_epi32(isum, _mm256_madd_epi16(_mm256_maddubs_epi16(aw[t], x), ones));
                        }
                        let scale = _mm256_mul_ps(d, _mm256_set1_ps(*dp.add(i * blocks + b)));
                        acc[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), scale, acc[i]);
                    }
                } else {
                    let v: [__m256i; 4] = core::array::from_fn(|t| _mm256_loadu_si256(w.add(32 * t).cast()));
                    let lo = v.map(|v| _mm256_and_si256(v, mask));
                    let hi = v.map(|v| _mm256_and_si256(_mm256_srli_epi16::<4>(v), mask));
                    // Q4_0's `(n - 8)·d` is `n·d + (-8·d)`: Q4_1's offset with m = -8d.
                    let offset = if F == Q4_1 {
                        _mm256_cvtph_ps(_mm_loadu_si128(p.add(2 * GROUP).cast()))
                    } else {
                        _mm256_mul_ps(d, _mm256_set1_ps(-8.0))
                    };
                    for i in 0..M {
                        let s0 = _mm256_add_epi16(
                            _mm256_maddubs_epi16(lo[0], chunk(i, 0)),
                            _mm256_maddubs_epi16(lo[1], chunk(i, 1)),
                        );
                        let s1 = _mm256_add_epi16(
                            _mm256_maddubs_epi16(lo[2], chunk(i, 2)),
                            _mm256_maddubs_epi16(lo[3], chunk(i, 3)),
                        );
                        let s2 = _mm256_add_epi16(
                            _mm256_maddubs_epi16(hi[0], chunk(i, 4)),
                            _mm256_maddubs_epi16(hi[1], chunk(i, 5)),
                        );
                        let s3 = _mm256_add_epi16(
                            _mm256_maddubs_epi16(hi[2], chunk(i, 6)),
                            _mm256_maddubs_epi16(hi[3], chunk(i, 7)),
                        );
                        let sum = _mm256_add_epi16(_mm256_add_epi16(s0, s1), _mm256_add_epi16(s2, s3));
                        let isum = _mm256_madd_epi16(sum, ones);
                        let scale = _mm256_mul_ps(d, _mm256_set1_ps(*dp.add(i * blocks + b)));
                        acc[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), scale, acc[i]);
                        acc[i] = _mm256_fmadd_ps(offset, _mm256_set1_ps(*sp.add(i * blocks + b)), acc[i]);
                    }
                }
            }
            let j = g * GROUP - range.start;
            let n = (range.end - g * GROUP).min(GROUP);
            for i in 0..M {
                if n == GROUP {
                    _mm256_storeu_ps(outs[i].as_mut_ptr().add(j), acc[i]);
                } else {
                    let mut lanes = [0.0f32; GROUP];
                    _mm256_storeu_ps(lanes.as_mut_ptr(), acc[i]);
                    outs[i].get_unchecked_mut(j..j + n).copy_from_slice(&lanes[..n]);
                }
            }
        }
    }
}
