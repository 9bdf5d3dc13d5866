//! The activations of a quantized product, quantized with AVX-512: [`super::avx2_q8`]'s
//! `quantize_row_q8_0`/`q8_1` computation, the same bytes, scales and sums for finite inputs.
//!
//! # Why
//!
//! A product quantizes its activations on the calling thread before the weight rows are
//! shared out, so that time is serial. On SmolLM2-135M Q4_1 a pass quantizes four inputs per
//! layer (576, 576, 576 and 1536 wide) and the head's; the AVX2 routine took about 0.56 µs per
//! 1536-wide row on the 2-core Xeon (some 40 cycles per 32-block), about 37 µs of every extra
//! row of a draft: 8% of what a row costs on two threads. The AVX2 code spends most of a block
//! on scalar tails: two rounds through f16 and two horizontal sums. Here a block is two
//! 16-lane registers (one product, one conversion and one saturating narrowing to bytes each),
//! and the scales' divisions and f16 roundings run afterwards as vector operations over
//! sixteen blocks' maxima and sums.
//!
//! Measured on that Xeon (2026-12-02), the routines taking turns in one run: a product of 8
//! rows of 1536 activations with 16 outputs, nearly all quantization, 5.7 → 4.0 µs (1 row: 1.07
//! → 0.85 µs); `cargo bench -p anyspec-cpu-kernels --bench matmul` on the 1536 × 576 Q4_1
//! layer, two threads, 8 rows 32.3 → 30.8 µs and 4 rows 19.6 → 18.5 µs. A whole pass of
//! `cargo xtask bench-cpu --quantized-only --threads 2` (five rounds each) moved within the
//! run-to-run noise of 2–4%: the saving is about 1% of a 4-wide pass.
//!
//! # The same results
//!
//! Every value is computed by the same IEEE operations as in the AVX2 routine: `max|x|` (the
//! largest magnitude, exact in any order for finite inputs), `127 / max`, the product rounded
//! to the nearest integer (ties to even), the integer sum (exact), `max / 127` and the f16
//! roundings lane for lane. The bytes are the rounded values narrowed with saturation, as the
//! AVX2 code's two saturating packs give them. So a model's logits do not depend on which
//! routine quantized its activations (tested bit for bit); with a NaN in a block the two may
//! differ in which NaN or bound they produce, as the order of the maxima differs.
//!
//! Compiled for AVX-512 F and BW (plus F16C) and reached only through `Kernel::Avx512Q8`, which
//! the crate hands out after run-time detection.

use core::arch::x86_64::*;

use super::avx2_q8::QuantizedX;
use crate::format::{QK, WeightFormat};

/// Blocks whose scalar tails run together in one vector.
const LANES: usize = 16;

/// [`super::avx2_q8::quantize_x`] with AVX-512: `None` where that returns `None`, or when the
/// CPU cannot run `Kernel::Avx512Q8` (the only caller; its features include AVX-512 F/BW and
/// F16C).
pub(crate) fn quantize_x(format: WeightFormat, x: &[f32], m: usize, cols: usize) -> Option<QuantizedX> {
    if !super::avx2_q8::handles(format) || !crate::Kernel::Avx512Q8.is_supported() {
        return None;
    }
    let mut q = QuantizedX::for_rows(x, m, cols)?;
    // SAFETY: AVX-512 F/BW and F16C checked above (`Kernel::Avx512Q8`'s features); `x[..m·cols]` (its length checked by
    // `for_rows`) is `m·cols / 32` blocks of 32, and `q` holds as many.
    unsafe { quantize_blocks(&x[..m * cols], &mut q, format == WeightFormat::Q4_1) };
    Some(q)
}

/// The blocks' bytes and sums, with their maxima parked in `q.d`; then the scales from the
/// maxima and sums, sixteen blocks at a time.
///
/// # Safety
/// AVX-512 F/BW and F16C available; `x.len()` a multiple of 32 equal to `q.qs.len()`, and
/// `q.d`, `q.s`, `q.sums` hold `x.len() / 32` values.
#[target_feature(enable = "avx512f,avx512bw,f16c")]
unsafe fn quantize_blocks(x: &[f32], q: &mut QuantizedX, with_sum: bool) {
    let magnitude = _mm512_set1_epi32(0x7FFF_FFFF);
    for (b, (xs, qs)) in x.chunks_exact(QK).zip(q.qs.chunks_exact_mut(QK)).enumerate() {
        // SAFETY: xs has 32 values and qs 32 bytes.
        unsafe {
            let p = xs.as_ptr();
            let (v0, v1) = (_mm512_loadu_ps(p), _mm512_loadu_ps(p.add(16)));
            let abs = |v: __m512| _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(v), magnitude));
            let max = _mm512_reduce_max_ps(_mm512_max_ps(abs(v0), abs(v1)));
            let id = _mm512_set1_ps(if max != 0.0 { 127.0 / max } else { 0.0 });
            let round = |v: __m512| {
                _mm512_cvt_roundps_epi32::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(_mm512_mul_ps(v, id))
            };
            let (i0, i1) = (round(v0), round(v1));
            let out = qs.as_mut_ptr().cast::<__m128i>();
            _mm_storeu_si128(out, _mm512_cvtsepi32_epi8(i0));
            _mm_storeu_si128(out.add(1), _mm512_cvtsepi32_epi8(i1));
            q.sums[b] = _mm512_reduce_add_epi32(_mm512_add_epi32(i0, i1));
            q.d[b] = max;
        }
    }
    let round_f16 = |v: __m512| _mm512_cvtph_ps(_mm512_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(v));
    let by127 = _mm512_set1_ps(127.0);
    let blocks = q.d.len();
    let mut b = 0;
    while b < blocks {
        let lanes = (blocks - b).min(LANES);
        let mask: __mmask16 = if lanes == LANES { !0 } else { (1u16 << lanes) - 1 };
        // SAFETY: lanes b..b + lanes of q.d, q.s and q.sums exist; the masked lanes are left alone.
        unsafe {
            let max = _mm512_maskz_loadu_ps(mask, q.d.as_ptr().add(b));
            let total = _mm512_cvtepi32_ps(_mm512_maskz_loadu_epi32(mask, q.sums.as_ptr().add(b)));
            let d = _mm512_div_ps(max, by127);
            let rounded = round_f16(d);
            let s = if with_sum { round_f16(_mm512_mul_ps(d, total)) } else { _mm512_mul_ps(rounded, total) };
            _mm512_mask_storeu_ps(q.d.as_mut_ptr().add(b), mask, rounded);
            _mm512_mask_storeu_ps(q.s.as_mut_ptr().add(b), mask, s);
        }
        b += lanes;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Both routines on the same activations: the same bytes, scales and sums, bit for bit, for
    /// every format, 1 to 8 rows, widths of one to many blocks (a tail of fewer than sixteen
    /// blocks too), with blocks of zeros, of tiny and of huge values, and values that fall on
    /// a rounding tie.
    #[test]
    fn equals_the_avx2_routine_bit_for_bit() {
        // The routine's kernel implies the AVX2 one's features.
        if !crate::Kernel::Avx512Q8.is_supported() {
            return; // nothing to compare on this CPU
        }
        let mut unit = crate::test_rng::unit(0x2545_F491_4F6C_DD1D);
        let mut next = move || unit() * 2.0 - 1.0;
        for format in [WeightFormat::Q8_0, WeightFormat::Q4_0, WeightFormat::Q4_1] {
            for m in 1..=8 {
                for cols in [32, 96, 576, 1536] {
                    let mut x: Vec<f32> =
                        (0..m * cols).map(|i| next() * [1.0, 1e-3, 40.0, 1e-30][i / 32 % 4]).collect();
                    x[..32].fill(0.0);
                    // A block whose values land on ties of the rounding: max 127, halves.
                    if x.len() >= 64 {
                        for (j, v) in x[32..64].iter_mut().enumerate() {
                            *v = if j == 0 { 127.0 } else { j as f32 + 0.5 - 16.0 };
                        }
                    }
                    let a = super::super::avx2_q8::quantize_x(format, &x, m, cols).unwrap();
                    let b = quantize_x(format, &x, m, cols).unwrap();
                    assert_eq!(a.qs, b.qs, "{format} m={m} cols={cols}: bytes");
                    assert_eq!(a.sums, b.sums, "{format} m={m} cols={cols}: sums");
                    let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
                    assert_eq!(bits(&a.d), bits(&b.d), "{format} m={m} cols={cols}: scales");
                    assert_eq!(bits(&a.s), bits(&b.s), "{format} m={m} cols={cols}: offsets");
                }
            }
        }
    }
}
