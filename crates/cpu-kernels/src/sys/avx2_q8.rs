//! AVX2 kernels with 8-bit activations (design (b) of the crate docs, llama.cpp's): the
//! activations are quantized once per product to 8 bits per 32-block, the way llama.cpp's AVX2
//! `quantize_row_q8_0`/`q8_1` do, and each weight block meets each activation block in an
//! integer dot product (`vpmaddubsw` + `vpmaddwd`), scaled once per block pair.
//!
//! For `Q4_0`, `Q4_1` and `Q8_0` weights only. Not bit-exact to the f32 reference: the
//! activations carry about 8 bits per block, as in llama.cpp.
//!
//! Like [`super::avx2`], everything here is compiled for AVX2, FMA and F16C and is reached only
//! through `Kernel::Avx2Q8`, which the crate hands out after run-time detection.

use core::arch::x86_64::*;

use crate::format::{QK, WeightFormat};
use crate::matrix::{RowRef, Rows};

/// The activation rows of one product, quantized per 32-block.
pub(crate) struct QuantizedX {
    /// `[m, cols]` quantized values.
    pub(super) qs: Vec<i8>,
    /// `[m, blocks]` block scales (rounded to f16 and back, as llama.cpp stores them).
    pub(super) d: Vec<f32>,
    /// `[m, blocks]`: the block's scale times the sum of its quantized values (for the
    /// `Q4_0`/`Q4_1` offset term).
    pub(super) s: Vec<f32>,
    /// `[m, blocks]`: the sum of the block's quantized values (for the AVX-512 `Q8_0` kernel,
    /// whose unsigned weights carry an offset of 128).
    pub(super) sums: Vec<i32>,
    pub(super) cols: usize,
}

/// Whether this module handles `format`.
pub(crate) fn handles(format: WeightFormat) -> bool {
    matches!(format, WeightFormat::Q8_0 | WeightFormat::Q4_0 | WeightFormat::Q4_1)
}

impl QuantizedX {
    /// Zeroed room for `m` rows of `cols` activations, or `None` when `cols` is not a multiple
    /// of 32 or `x` holds fewer than `m·cols` values.
    pub(super) fn for_rows(x: &[f32], m: usize, cols: usize) -> Option<QuantizedX> {
        if !cols.is_multiple_of(QK) || x.len() < m * cols {
            return None;
        }
        let blocks = m * cols / QK;
        Some(QuantizedX {
            qs: vec![0; m * cols],
            d: vec![0.0; blocks],
            s: vec![0.0; blocks],
            sums: vec![0; blocks],
            cols,
        })
    }
}

/// Quantizes `m` rows of `cols` activations (`cols` a multiple of 32, `x.len() ≥ m·cols`).
pub(crate) fn quantize_x(format: WeightFormat, x: &[f32], m: usize, cols: usize) -> Option<QuantizedX> {
    if !crate::Kernel::Avx2Q8.is_supported() {
        return None;
    }
    let mut q = QuantizedX::for_rows(x, m, cols)?;
    // SAFETY: AVX2/FMA/F16C checked above; `quantize_blocks` reads `m·cols / 32` blocks of 32
    // from `x` (`for_rows` checked its length) and writes as many into `q`, sized for them.
    unsafe { quantize_blocks(&x[..m * cols], &mut q, format == WeightFormat::Q4_1) };
    Some(q)
}

/// llama.cpp's AVX2 `quantize_row_q8_0` (and `q8_1` when `with_sum`): `d = max|x| / 127`,
/// `q = round_half_even(x · 127 / max|x|)`.
///
/// # Safety
/// AVX2/FMA/F16C available; `x.len()` a multiple of 32 equal to `q.qs.len()`, and `q.d`,
/// `q.s` hold `x.len() / 32` values.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn quantize_blocks(x: &[f32], q: &mut QuantizedX, with_sum: bool) {
    let sign_bit = _mm256_set1_ps(-0.0);
    let perm = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    for (b, (xs, qs)) in x.chunks_exact(QK).zip(q.qs.chunks_exact_mut(QK)).enumerate() {
        // SAFETY: xs has 32 values and qs 32 bytes.
        unsafe {
            let p = xs.as_ptr();
            let v =
                [_mm256_loadu_ps(p), _mm256_loadu_ps(p.add(8)), _mm256_loadu_ps(p.add(16)), _mm256_loadu_ps(p.add(24))];
            let mut amax = _mm256_andnot_ps(sign_bit, v[0]);
            for &vi in &v[1..] {
                amax = _mm256_max_ps(amax, _mm256_andnot_ps(sign_bit, vi));
            }
            let m4 = _mm_max_ps(_mm256_extractf128_ps::<1>(amax), _mm256_castps256_ps128(amax));
            let m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
            let m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
            let max = _mm_cvtss_f32(m4);
            let d = max / 127.0;
            let id = _mm256_set1_ps(if max != 0.0 { 127.0 / max } else { 0.0 });
            let i = v.map(|vi| {
                _mm256_cvtps_epi32(_mm256_round_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(_mm256_mul_ps(
                    vi, id,
                )))
            });
            let sum = _mm256_add_epi32(_mm256_add_epi32(i[0], i[1]), _mm256_add_epi32(i[2], i[3]));
            let packed = _mm256_packs_epi16(_mm256_packs_epi32(i[0], i[1]), _mm256_packs_epi32(i[2], i[3]));
            let packed = _mm256_permutevar8x32_epi32(packed, perm);
            _mm256_storeu_si256(qs.as_mut_ptr().cast(), packed);
            q.d[b] = round_f16(d);
            q.sums[b] = hsum_i32(sum);
            let total = q.sums[b] as f32;
            q.s[b] = if with_sum { round_f16(d * total) } else { q.d[b] * total };
        }
    }
}

/// `v` rounded to the nearest f16 and back (F16C; `half` would do it in software).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn round_f16(v: f32) -> f32 {
    _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(_mm_set_ss(v))))
}

#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn hsum_i32(v: __m256i) -> i32 {
    let s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256::<1>(v));
    let s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
    let s = _mm_add_epi32(s, _mm_shuffle_epi32::<0b01>(s));
    _mm_cvtsi128_si32(s)
}

#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn hsum_ps(v: __m256) -> f32 {
    let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
    let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    let s = _mm_add_ss(s, _mm_shuffle_ps::<1>(s, s));
    _mm_cvtss_f32(s)
}

/// For every output `j` of `rows`:
/// `outs[i][j - rows.start] ≈ Σ_k W[row j, k] · x[(first + i)·cols + k]`, with `x` as quantized
/// in `xq` and `outs.len()` ≤ 8.
pub(crate) fn dot_rows(format: WeightFormat, rows: Rows<'_>, xq: &QuantizedX, first: usize, outs: &mut [&mut [f32]]) {
    let m = outs.len();
    let cols = xq.cols;
    let blocks = cols / QK;
    // The kernels read the activation rows first..first+m through raw pointers; these checks
    // (and the row length checked per row) make that sound.
    let ok = handles(format)
        && xq.qs.len() >= (first + m) * cols
        && xq.d.len() >= (first + m) * blocks
        && xq.s.len() >= (first + m) * blocks
        && m <= 8
        && crate::Kernel::Avx2Q8.is_supported();
    if !ok {
        outs.iter_mut().for_each(|o| o.fill(f32::NAN));
        return;
    }
    // SAFETY: features and lengths checked just above.
    unsafe {
        match m {
            0 => {}
            1 => rows_impl::<1, 1>(format, rows, xq, first, outs),
            2 => rows_impl::<2, 1>(format, rows, xq, first, outs),
            3 => rows_impl::<3, 1>(format, rows, xq, first, outs),
            4 => rows_impl::<4, 1>(format, rows, xq, first, outs),
            5 => rows_impl::<5, 1>(format, rows, xq, first, outs),
            6 => rows_impl::<6, 1>(format, rows, xq, first, outs),
            7 => rows_impl::<7, 1>(format, rows, xq, first, outs),
            _ => rows_impl::<8, 1>(format, rows, xq, first, outs),
        }
    }
}

/// Per-row scratch: the scales of a segment of blocks.
struct Scratch {
    dw: [f32; SEGMENT],
    mw: [f32; SEGMENT],
}

/// # Safety
/// AVX2/FMA/F16C available; the lengths checked in [`dot_rows`].
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn rows_impl<const M: usize, const A: usize>(
    format: WeightFormat,
    rows: Rows<'_>,
    xq: &QuantizedX,
    first: usize,
    outs: &mut [&mut [f32]],
) {
    let mut scratch = Scratch { dw: [0.0; SEGMENT], mw: [0.0; SEGMENT] };
    match format {
        // SAFETY (all arms): as for this function.
        WeightFormat::Q8_0 => unsafe { rows_of::<M, A, Q8_0>(rows, xq, first, outs, &mut scratch) },
        WeightFormat::Q4_0 => unsafe { rows_of::<M, A, Q4_0>(rows, xq, first, outs, &mut scratch) },
        WeightFormat::Q4_1 => unsafe { rows_of::<M, A, Q4_1>(rows, xq, first, outs, &mut scratch) },
        _ => outs.iter_mut().for_each(|o| o.fill(f32::NAN)),
    }
}

/// The formats as const parameters, so that the inner loops carry no format test.
const Q8_0: u8 = 0;
const Q4_0: u8 = 1;
const Q4_1: u8 = 2;

const fn format_of(f: u8) -> WeightFormat {
    match f {
        Q8_0 => WeightFormat::Q8_0,
        Q4_0 => WeightFormat::Q4_0,
        _ => WeightFormat::Q4_1,
    }
}

/// # Safety
/// AVX2/FMA/F16C available; the lengths checked in [`dot_rows`].
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn rows_of<const M: usize, const A: usize, const F: u8>(
    rows: Rows<'_>,
    xq: &QuantizedX,
    first: usize,
    outs: &mut [&mut [f32]],
    scratch: &mut Scratch,
) {
    let mut out = [0.0f32; M];
    let need = xq.cols / QK * format_of(F).block_bytes();
    for j in rows.start..rows.end {
        // Measured: it speeds up the Q8_0 head at M = 1 (by about 8%), slows down Q4_1 rows
        // and every format at M > 1.
        if M == 1
            && F == Q8_0
            && j + PREFETCH_AHEAD < rows.end
            && let RowRef::Blocks(ahead) = rows.get(j + PREFETCH_AHEAD)
        {
            for line in (0..ahead.len()).step_by(64) {
                // SAFETY: the address lies inside `ahead`; a prefetch reads nothing anyway.
                unsafe { _mm_prefetch::<_MM_HINT_T0>(ahead.as_ptr().add(line).cast()) };
            }
        }
        match rows.get(j) {
            RowRef::Blocks(row) if row.len() >= need => {
                // SAFETY: features and activations checked by the caller, the row just above.
                unsafe { dot::<M, A, F>(row, xq, first, &mut out, scratch) };
            }
            _ => out.fill(f32::NAN),
        }
        for (o, &v) in outs.iter_mut().zip(out.iter()) {
            o[j - rows.start] = v;
        }
    }
}

/// Rows ahead whose blocks are prefetched (Q8_0 at M = 1 only; see [`rows_of`]).
const PREFETCH_AHEAD: usize = 4;

/// Blocks whose scales are converted together (f16 → f32, eight at a time) before their
/// quantized values are multiplied; it bounds the stack buffers.
const SEGMENT: usize = 64;

/// One block of one activation row into an accumulator:
/// `acc += f32(Σ w·q) · (dw · dx)`, with `w` already unpacked to unsigned bytes (and `q`'s
/// signs fixed up for `Q8_0`).
macro_rules! block_dot {
    ($w:expr, $sign:expr, $qy:expr, $dwv:expr, $dx:expr, $acc:expr, $ones:expr) => {{
        let qy = $qy;
        let qy = match $sign {
            Some(w) => _mm256_sign_epi8(qy, w),
            None => qy,
        };
        let dot = _mm256_madd_epi16(_mm256_maddubs_epi16($w, qy), $ones);
        let scale = _mm256_mul_ps($dwv, _mm256_set1_ps($dx));
        $acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), scale, $acc);
    }};
}

/// `M` activation rows; `A` accumulator sets (2 when `M` is small, so that consecutive
/// blocks do not wait on each other's multiply-add).
///
/// # Safety
/// AVX2/FMA/F16C available; the lengths checked in [`dot_rows`].
#[allow(clippy::needless_range_loop)] // `i` indexes the accumulators and the activation rows
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn dot<const M: usize, const A: usize, const F: u8>(
    row: &[u8],
    xq: &QuantizedX,
    first: usize,
    out: &mut [f32; M],
    scratch: &mut Scratch,
) {
    let cols = xq.cols;
    let blocks = cols / QK;
    let bb = format_of(F).block_bytes();
    let (q8, q4_1) = (F == Q8_0, F == Q4_1);
    let qs_at = if q4_1 { 4 } else { 2 };
    let mut acc = [[_mm256_setzero_ps(); M]; A];
    let mut offset = [_mm256_setzero_ps(); M];
    let mut offset_tail = [0.0f32; M];
    let ones = _mm256_set1_epi16(1);
    let mask = _mm256_set1_epi8(0x0F);
    let rp = row.as_ptr();
    let qp = xq.qs.as_ptr().wrapping_add(first * cols);
    let dp = xq.d.as_ptr().wrapping_add(first * blocks);
    let sp = xq.s.as_ptr().wrapping_add(first * blocks);
    let Scratch { dw, mw } = scratch;
    // SAFETY (whole body): block b of the row lies at rp + b·bb (b < blocks); activation row i
    // (i < M) has its values at qp + i·cols and its scales at dp/sp + i·blocks; the stack
    // buffers hold SEGMENT values and are indexed below n ≤ SEGMENT (rounded down to 8 for
    // vector reads).
    unsafe {
        for seg in (0..blocks).step_by(SEGMENT) {
            let n = (blocks - seg).min(SEGMENT);
            // The scales of the segment's blocks, converted eight at a time. They are gathered
            // into a register (not through a buffer of u16s: a store per block and scale
            // cost more than the blocks' arithmetic on short rows).
            for c in (0..n).step_by(8) {
                let k = (n - c).min(8);
                let at = |j: usize| rp.add((seg + c + j) * bb);
                let (d, m) = if q4_1 {
                    // d and m are adjacent: one u32 per block, then d to the low half and m to
                    // the high half of each 128-bit lane.
                    let mut v = [0u32; 8];
                    if k == 8 {
                        // A full group: a loop of constant length, unrolled.
                        for (j, v) in v.iter_mut().enumerate() {
                            *v = at(j).cast::<u32>().read_unaligned();
                        }
                    } else {
                        for (j, v) in v.iter_mut().enumerate().take(k) {
                            *v = at(j).cast::<u32>().read_unaligned();
                        }
                    }
                    let v = _mm256_loadu_si256(v.as_ptr().cast());
                    let split = _mm256_setr_epi8(
                        0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15, 0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10,
                        11, 14, 15,
                    );
                    let v = _mm256_permute4x64_epi64::<0b11_01_10_00>(_mm256_shuffle_epi8(v, split));
                    (_mm256_cvtph_ps(_mm256_castsi256_si128(v)), _mm256_cvtph_ps(_mm256_extracti128_si256::<1>(v)))
                } else {
                    let mut v = [0u16; 8];
                    if k == 8 {
                        for (j, v) in v.iter_mut().enumerate() {
                            *v = at(j).cast::<u16>().read_unaligned();
                        }
                    } else {
                        for (j, v) in v.iter_mut().enumerate().take(k) {
                            *v = at(j).cast::<u16>().read_unaligned();
                        }
                    }
                    let d = _mm256_cvtph_ps(_mm_loadu_si128(v.as_ptr().cast()));
                    // Q4_0's `(n - 8)·d` is `n·d + (-8·d)`: Q4_1's offset with m = -8d.
                    (d, _mm256_mul_ps(d, _mm256_set1_ps(-8.0)))
                };
                _mm256_storeu_ps(dw.as_mut_ptr().add(c), d);
                if !q8 {
                    _mm256_storeu_ps(mw.as_mut_ptr().add(c), m);
                }
            }
            // The quantized values, block by block: A blocks per step (into A accumulator
            // sets, a constant index each), then the remaining ones into the first set.
            macro_rules! one_block {
                ($j:expr, $a:expr) => {{
                    let b = seg + $j;
                    let p = rp.add(b * bb);
                    let dwv = _mm256_set1_ps(dw[$j]);
                    if q8 {
                        let w = _mm256_loadu_si256(p.add(2).cast());
                        let aw = _mm256_sign_epi8(w, w);
                        for i in 0..M {
                            let qy = _mm256_loadu_si256(qp.add(i * cols + b * QK).cast());
                            block_dot!(aw, Some(w), qy, dwv, *dp.add(i * blocks + b), acc[$a][i], ones);
                        }
                    } else {
                        let raw = _mm_loadu_si128(p.add(qs_at).cast());
                        let both = _mm256_set_m128i(_mm_srli_epi16::<4>(raw), raw);
                        let w = _mm256_and_si256(both, mask);
                        for i in 0..M {
                            let qy = _mm256_loadu_si256(qp.add(i * cols + b * QK).cast());
                            block_dot!(w, None::<__m256i>, qy, dwv, *dp.add(i * blocks + b), acc[$a][i], ones);
                        }
                    }
                }};
            }
            let mut j = 0;
            while j + A <= n {
                for a in 0..A {
                    one_block!(j + a, a);
                }
                j += A;
            }
            while j < n {
                one_block!(j, 0);
                j += 1;
            }
            // The offsets: Σ_b m_b · s_b per activation row, eight blocks at a time.
            if !q8 {
                let full = n / 8 * 8;
                for i in 0..M {
                    let s_row = sp.add(i * blocks + seg);
                    for c in (0..full).step_by(8) {
                        let m = _mm256_loadu_ps(mw.as_ptr().add(c));
                        offset[i] = _mm256_fmadd_ps(m, _mm256_loadu_ps(s_row.add(c)), offset[i]);
                    }
                    for c in full..n {
                        offset_tail[i] = mw[c].mul_add(*s_row.add(c), offset_tail[i]);
                    }
                }
            }
        }
    }
    for i in 0..M {
        let mut v = _mm256_add_ps(acc[0][i], offset[i]);
        for set in &acc[1..] {
            v = _mm256_add_ps(v, set[i]);
        }
        out[i] = hsum_ps(v) + offset_tail[i];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// llama.cpp's AVX2 `quantize_row_q8_1`, written out in scalar code.
    fn reference(x: &[f32]) -> (Vec<i8>, f32, f32) {
        let max = x.iter().fold(0.0f32, |a, v| a.max(v.abs()));
        let d = max / 127.0;
        let id = if max != 0.0 { 127.0 / max } else { 0.0 };
        let q: Vec<i8> = x.iter().map(|v| (v * id).round_ties_even() as i8).collect();
        let sum: i32 = q.iter().map(|&v| i32::from(v)).sum();
        let d16 = half::f16::from_f32(d).to_f32();
        let s16 = half::f16::from_f32(d * sum as f32).to_f32();
        (q, d16, s16)
    }

    #[test]
    fn activations_are_quantized_like_llama_cpp() {
        if !crate::Kernel::Avx2Q8.is_supported() {
            return;
        }
        // Values that land on .5 after scaling test the rounding to even.
        let mut x: Vec<f32> = (0..64).map(|i| (i as f32 - 31.0) * 0.37).collect();
        x[5] = 127.0;
        x[6] = 0.5;
        x[7] = 1.5;
        x[8] = -2.5;
        x[32..].iter_mut().for_each(|v| *v = 0.0); // an all-zero block
        let q = quantize_x(WeightFormat::Q4_1, &x, 2, 32).unwrap();
        for b in 0..2 {
            let (qs, d, s) = reference(&x[32 * b..32 * b + 32]);
            assert_eq!(&q.qs[32 * b..32 * b + 32], &qs[..], "block {b}");
            assert_eq!(q.d[b], d, "block {b}");
            assert_eq!(q.s[b], s, "block {b}");
        }
        assert_eq!(q.qs[6], 0); // 0.5 · 127/127 rounds to even 0
        assert_eq!(q.qs[7], 2);
        assert_eq!(q.qs[8], -2);
    }
}
