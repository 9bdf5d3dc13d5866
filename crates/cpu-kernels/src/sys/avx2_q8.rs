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

use half::f16;

use crate::format::{QK, WeightFormat};

/// The activation rows of one product, quantized per 32-block.
pub(crate) struct QuantizedX {
    /// `[m, cols]` quantized values.
    qs: Vec<i8>,
    /// `[m, blocks]` block scales (rounded to f16 and back, as llama.cpp stores them).
    d: Vec<f32>,
    /// `[m, blocks]`: the block's scale times the sum of its quantized values (for the
    /// `Q4_0`/`Q4_1` offset term).
    s: Vec<f32>,
    cols: usize,
}

/// Whether this module handles `format`.
pub(crate) fn handles(format: WeightFormat) -> bool {
    matches!(format, WeightFormat::Q8_0 | WeightFormat::Q4_0 | WeightFormat::Q4_1)
}

/// Quantizes `m` rows of `cols` activations (`cols` a multiple of 32, `x.len() ≥ m·cols`).
pub(crate) fn quantize_x(format: WeightFormat, x: &[f32], m: usize, cols: usize) -> Option<QuantizedX> {
    if !cols.is_multiple_of(QK) || x.len() < m * cols || !crate::Kernel::Avx2Q8.is_supported() {
        return None;
    }
    let blocks = m * cols / QK;
    let mut q = QuantizedX { qs: vec![0; m * cols], d: vec![0.0; blocks], s: vec![0.0; blocks], cols };
    // SAFETY: AVX2/FMA/F16C checked above; `quantize_blocks` reads `blocks` blocks of 32 from
    // `x` (x.len() ≥ m·cols checked above) and writes as many into `q`, sized for them.
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
            q.d[b] = f16::from_f32(d).to_f32();
            let total = hsum_i32(sum) as f32;
            q.s[b] = if with_sum { f16::from_f32(d * total).to_f32() } else { q.d[b] * total };
        }
    }
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

/// `out[i] ≈ Σ_k row[k] · x[(first + i)·cols + k]` with `x` as quantized in `xq`.
pub(crate) fn dot_row(format: WeightFormat, row: &[u8], xq: &QuantizedX, first: usize, out: &mut [f32]) {
    let m = out.len();
    let cols = xq.cols;
    let blocks = cols / QK;
    // The kernels read `blocks` blocks of the row and of activation rows first..first+m
    // through raw pointers; these checks make that sound.
    let ok = handles(format)
        && row.len() >= blocks * format.block_bytes()
        && xq.qs.len() >= (first + m) * cols
        && xq.d.len() >= (first + m) * blocks
        && xq.s.len() >= (first + m) * blocks
        && m <= 8
        && crate::Kernel::Avx2Q8.is_supported();
    if !ok {
        out.fill(f32::NAN);
        return;
    }
    // SAFETY: features and lengths checked just above.
    unsafe {
        match m {
            0 => {}
            1 => dot::<1>(format, row, xq, first, out),
            2 => dot::<2>(format, row, xq, first, out),
            3 => dot::<3>(format, row, xq, first, out),
            4 => dot::<4>(format, row, xq, first, out),
            5 => dot::<5>(format, row, xq, first, out),
            6 => dot::<6>(format, row, xq, first, out),
            7 => dot::<7>(format, row, xq, first, out),
            _ => dot::<8>(format, row, xq, first, out),
        }
    }
}

/// # Safety
/// AVX2/FMA/F16C available; the lengths checked in [`dot_row`].
#[allow(clippy::needless_range_loop)] // `i` indexes the accumulators and the activation rows
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn dot<const M: usize>(format: WeightFormat, row: &[u8], xq: &QuantizedX, first: usize, out: &mut [f32]) {
    let cols = xq.cols;
    let blocks = cols / QK;
    let bb = format.block_bytes();
    let mut acc = [_mm256_setzero_ps(); M];
    let mut offset = [0.0f32; M];
    let ones = _mm256_set1_epi16(1);
    let mask = _mm_set1_epi8(0x0F);
    let rp = row.as_ptr();
    let qp = xq.qs.as_ptr().wrapping_add(first * cols);
    let dp = xq.d.as_ptr().wrapping_add(first * blocks);
    let sp = xq.s.as_ptr().wrapping_add(first * blocks);
    // SAFETY (whole body): block b of the row lies at rp + b·bb (b < blocks); activation row i
    // has its values at qp + i·cols and its scales at dp/sp + i·blocks, i < M.
    unsafe {
        match format {
            WeightFormat::Q8_0 => {
                for b in 0..blocks {
                    let p = rp.add(b * bb);
                    let dw = _mm256_set1_ps(f16_to_f32(p));
                    let w = _mm256_loadu_si256(p.add(2).cast());
                    let aw = _mm256_sign_epi8(w, w);
                    for i in 0..M {
                        let qy = _mm256_loadu_si256(qp.add(i * cols + b * QK).cast());
                        let sy = _mm256_sign_epi8(qy, w);
                        let dot = _mm256_madd_epi16(_mm256_maddubs_epi16(aw, sy), ones);
                        let scale = _mm256_mul_ps(dw, _mm256_set1_ps(*dp.add(i * blocks + b)));
                        acc[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), scale, acc[i]);
                    }
                }
            }
            WeightFormat::Q4_0 | WeightFormat::Q4_1 => {
                let q4_1 = format == WeightFormat::Q4_1;
                let qs_at = if q4_1 { 4 } else { 2 };
                for b in 0..blocks {
                    let p = rp.add(b * bb);
                    let d = f16_to_f32(p);
                    // Q4_0's `(n - 8)·d` is `n·d + (-8·d)`: the offset of Q4_1 with m = -8d.
                    let min = if q4_1 { f16_to_f32(p.add(2)) } else { -8.0 * d };
                    let dw = _mm256_set1_ps(d);
                    let raw = _mm_loadu_si128(p.add(qs_at).cast());
                    let lo = _mm_and_si128(raw, mask);
                    let hi = _mm_and_si128(_mm_srli_epi16::<4>(raw), mask);
                    let w = _mm256_set_m128i(hi, lo);
                    for i in 0..M {
                        let qy = _mm256_loadu_si256(qp.add(i * cols + b * QK).cast());
                        let dot = _mm256_madd_epi16(_mm256_maddubs_epi16(w, qy), ones);
                        let scale = _mm256_mul_ps(dw, _mm256_set1_ps(*dp.add(i * blocks + b)));
                        acc[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), scale, acc[i]);
                        offset[i] = min.mul_add(*sp.add(i * blocks + b), offset[i]);
                    }
                }
            }
            _ => {}
        }
    }
    for i in 0..M {
        out[i] = hsum_ps(acc[i]) + offset[i];
    }
}

/// # Safety
/// F16C available; two readable bytes at `p`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn f16_to_f32(p: *const u8) -> f32 {
    // SAFETY: per the contract.
    let bits = unsafe { p.cast::<u16>().read_unaligned() };
    _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(i32::from(bits))))
}
