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

/// Cache lines [`tile`] prefetches per block of format `f` (a const format parameter): as many
/// as cover one group block (eight blocks of the format: 272, 144 and 160 bytes for `Q8_0`,
/// `Q4_0` and `Q4_1`), so that consecutive blocks' prefetches cover the whole stream of the
/// group.
///
/// Why a constant: the loop over the block's stride in steps of 64 bytes that this replaced
/// had a trip count known only at run time, and the compiler made it a loop of its own, with
/// its branches and alignment padding, on every block. Measured on this project's 2-core AMD
/// EPYC (Zen 3, AVX2), `cargo bench -p anyspec-cpu-kernels --bench matmul -- interleaved/t`
/// before (`--save-baseline`) and after (`--baseline`): the 80 cases (four Q4_1 layer shapes and
/// the Q8_0 LM head, M = 1..8, 1 and 2 threads) took 0.90 of the time (geometric mean; faster in
/// 61), M = 1 and 2 0.87 and 0.85. On the whole model (`cargo xtask bench-cpu --quantized-only
/// --threads 2`, eight alternating runs of each binary) the passes of k = 1..8 positions were
/// the same within this machine's noise (a few percent either way): the saving is real but
/// small beside a pass's memory traffic and the extra rows' integer products. A test checks
/// the counts against the formats.
pub(super) const fn prefetch_lines(f: u8) -> usize {
    (GROUP * format_of(f).block_bytes()).div_ceil(64)
}

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

/// Splits the `outs.len()` activation rows into one or two tiles of at most [`TILE`] rows
/// (as even as they go: 5 = 3 + 2, 7 = 4 + 3) and runs [`groups_of`] on them.
///
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
    // SAFETY (every arm): as for this function; each arm's tiles add up to outs.len().
    unsafe {
        match outs.len() {
            1 => groups_of::<1, 0, F>(groups, range, xq, first, outs),
            2 => groups_of::<2, 0, F>(groups, range, xq, first, outs),
            3 => groups_of::<3, 0, F>(groups, range, xq, first, outs),
            4 => groups_of::<4, 0, F>(groups, range, xq, first, outs),
            5 => groups_of::<3, 2, F>(groups, range, xq, first, outs),
            6 => groups_of::<3, 3, F>(groups, range, xq, first, outs),
            7 => groups_of::<4, 3, F>(groups, range, xq, first, outs),
            _ => groups_of::<4, 4, F>(groups, range, xq, first, outs),
        }
    }
}

/// The most activation rows whose accumulators [`tile`] keeps in registers.
const TILE: usize = 4;

/// Group by group, the activation rows in a first tile of `A` rows and a second of `B` (0 for
/// none), each tile's accumulators in registers ([`tile`]); the second tile reads the group's
/// weights again, from the L1 cache where the first left them, and unpacks them again.
///
/// Why tiles: with all `M` rows in one pass (the kernel before this one) the weights of a block
/// are unpacked once, but for `M` > 3 the accumulators no longer fit in the 16 registers and
/// every row's block ends in a load and a store of its accumulator. Measured on this project's
/// 2-core AMD EPYC (Zen 3, AVX2, no AVX-512), `cargo bench -p anyspec-cpu-kernels --bench
/// matmul`, one thread, medians of four alternating runs of both binaries: `Q4_1` 576×1536
/// went from 46.2 / 56.3 / 68.6 / 81.7 / 94.6 / 107.4 / 119.0 µs at M = 2..8 to 43.2 / 45.4 /
/// 58.2 / 71.5 / 84.9 / 96.7 / 116.4 µs (6–19% less at M = 2..7), M = 1 unchanged (34.7 and
/// 33.0 µs); the `Q8_0` LM head (576×49,152) within this machine's noise at every M (M = 1:
/// 1.86 and 1.81 ms, M = 8: 5.04 and 5.12 ms). The rows' sums are the same, bit for bit: the
/// 16-bit sums of a block are exact in any order, and each row's float operations are those of
/// [`tile`] whatever the tile.
///
/// # Safety
/// AVX2/FMA/F16C available; the lengths checked in [`dot_groups`], and
/// `outs.len() == A + B`, `A`, `B` ≤ [`TILE`].
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn groups_of<const A: usize, const B: usize, const F: u8>(
    groups: Grouped<'_>,
    range: Range<usize>,
    xq: &QuantizedX,
    first: usize,
    outs: &mut [&mut [f32]],
) {
    const { assert!(A >= 1 && A <= TILE && B <= TILE) };
    let format = format_of(F);
    let blocks = xq.cols / QK;
    let stride = groups.order.stride(format);
    for g in range.start / GROUP..range.end.div_ceil(GROUP) {
        // SAFETY: group g's blocks lie at gp + b·stride (the groups of `range`, checked by the
        // caller); the tiles' rows first..first + A and first + A..first + A + B are rows of xq.
        let (a, b) = unsafe {
            let gp = groups.data.as_ptr().add(groups.order.block_offset(format, blocks, g, 0));
            let a = tile::<A, F, true>(gp, stride, xq, first);
            let b = tile::<B, F, false>(gp, stride, xq, first + A);
            (a, b)
        };
        let j = g * GROUP - range.start;
        let n = (range.end - g * GROUP).min(GROUP);
        for (out, acc) in outs.iter_mut().zip(a.iter().chain(b.iter())) {
            if n == GROUP {
                // A whole group straight into the output: through `lanes` below, every group
                // was a `memmove` call (`copy_from_slice` of a length not known at compile
                // time; `perf`: 1.5% of a demo run).
                let dst = &mut out[j..j + GROUP];
                // SAFETY: AVX available; `dst` holds eight floats.
                unsafe { _mm256_storeu_ps(dst.as_mut_ptr(), *acc) };
            } else {
                let mut lanes = [0.0f32; GROUP];
                // SAFETY: AVX available; `lanes` holds eight floats.
                unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), *acc) };
                out[j..j + n].copy_from_slice(&lanes[..n]);
            }
        }
    }
}

/// The eight outputs of one group (weights at `gp`, block `b` at `gp + b·stride`) for the
/// `R` activation rows `row..row + R` of `xq`, one register of eight lanes each. The weights
/// of a block are unpacked 32 bytes at a time and met by every row of the tile before the
/// next 32, so that the tile's integer sums and its accumulators stay in registers (2R + 6 of
/// the 16). `PREFETCH`: whether to prefetch the group's stream (the first tile of a group).
///
/// # Safety
/// AVX2/FMA/F16C available; the group's `blocks` blocks readable from `gp`; `row + R` rows in
/// `xq`.
#[allow(clippy::needless_range_loop)] // `i` indexes the sums, accumulators and rows
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn tile<const R: usize, const F: u8, const PREFETCH: bool>(
    gp: *const u8,
    stride: usize,
    xq: &QuantizedX,
    row: usize,
) -> [__m256; R] {
    let mut acc = [_mm256_setzero_ps(); R];
    if R == 0 {
        return acc;
    }
    let cols = xq.cols;
    let blocks = cols / QK;
    // The header fields (d, and m for Q4_1), eight f16 lanes each.
    let header = if F == Q4_1 { 4 * GROUP } else { 2 * GROUP };
    // SAFETY (whole body): block b of the group lies at gp + b·stride; activation row i < R of
    // the tile has its values at qp + i·cols and its scales at dp/sp + i·blocks.
    unsafe {
        let mask = _mm256_set1_epi8(0x0F);
        let ones = _mm256_set1_epi16(1);
        let qp = xq.qs.as_ptr().add(row * cols);
        let dp = xq.d.as_ptr().add(row * blocks);
        let sp = xq.s.as_ptr().add(row * blocks);
        for b in 0..blocks {
            let p = gp.add(b * stride);
            if PREFETCH {
                // The lines PREFETCH_BYTES ahead in the group's stream into L1 and those
                // L2_PREFETCH_BYTES ahead into L2 (as in the AVX-512 kernel, see there; past
                // the group's end, the next group's, or nothing): as many as cover one group
                // block, a count known at compile time (see `prefetch_lines`).
                for line in 0..const { prefetch_lines(F) } {
                    _mm_prefetch::<_MM_HINT_T0>(
                        p.wrapping_add(super::avx512_q8_groups::PREFETCH_BYTES + 64 * line).cast::<i8>(),
                    );
                    _mm_prefetch::<_MM_HINT_T1>(
                        p.wrapping_add(super::avx512_q8_groups::L2_PREFETCH_BYTES + 64 * line).cast::<i8>(),
                    );
                }
            }
            let d = _mm256_cvtph_ps(_mm_loadu_si128(p.cast()));
            let w = p.add(header);
            // The activation block's 4-byte chunk `c` of the tile's row `i`, in every lane.
            let chunk = |i: usize, c: usize| -> __m256i {
                _mm256_set1_epi32(qp.add(i * cols + b * QK + 4 * c).cast::<i32>().read_unaligned())
            };
            let isum: [__m256i; R] = if F == Q8_0 {
                let mut isum = [_mm256_setzero_si256(); R];
                for t in 0..8 {
                    let wt = _mm256_loadu_si256(w.add(32 * t).cast());
                    let aw = _mm256_sign_epi8(wt, wt);
                    for i in 0..R {
                        let x = _mm256_sign_epi8(chunk(i, t), wt);
                        isum[i] = _mm256_add_epi32(isum[i], _mm256_madd_epi16(_mm256_maddubs_epi16(aw, x), ones));
                    }
                }
                isum
            } else {
                // Sums of at most eight products of pairs, each at most 2 · 15 · 128 in
                // magnitude: exact in 16-bit lanes whatever their order.
                let mut sum = [_mm256_setzero_si256(); R];
                for t in 0..4 {
                    let v = _mm256_loadu_si256(w.add(32 * t).cast());
                    let lo = _mm256_and_si256(v, mask);
                    for i in 0..R {
                        sum[i] = _mm256_add_epi16(sum[i], _mm256_maddubs_epi16(lo, chunk(i, t)));
                    }
                    let hi = _mm256_and_si256(_mm256_srli_epi16::<4>(v), mask);
                    for i in 0..R {
                        sum[i] = _mm256_add_epi16(sum[i], _mm256_maddubs_epi16(hi, chunk(i, t + 4)));
                    }
                }
                sum.map(|s| _mm256_madd_epi16(s, ones))
            };
            for i in 0..R {
                let scale = _mm256_mul_ps(d, _mm256_set1_ps(*dp.add(i * blocks + b)));
                acc[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[i]), scale, acc[i]);
            }
            if F != Q8_0 {
                // Q4_0's `(n - 8)·d` is `n·d + (-8·d)`: Q4_1's offset with m = -8d.
                let offset = if F == Q4_1 {
                    _mm256_cvtph_ps(_mm_loadu_si128(p.add(2 * GROUP).cast()))
                } else {
                    _mm256_mul_ps(d, _mm256_set1_ps(-8.0))
                };
                for i in 0..R {
                    acc[i] = _mm256_fmadd_ps(offset, _mm256_set1_ps(*sp.add(i * blocks + b)), acc[i]);
                }
            }
        }
    }
    acc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_format_prefetches_the_fewest_lines_that_cover_a_group_block() {
        for f in [Q8_0, Q4_0, Q4_1] {
            let bytes = GROUP * format_of(f).block_bytes();
            let lines = prefetch_lines(f);
            assert!(64 * lines >= bytes, "{:?}: {lines} lines miss part of a {bytes}-byte group block", format_of(f));
            assert!(
                64 * (lines - 1) < bytes,
                "{:?}: {lines} lines, one more than a {bytes}-byte group block needs",
                format_of(f)
            );
        }
    }
}
