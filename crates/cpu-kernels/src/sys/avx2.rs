//! AVX2 + FMA kernels with f32 activations (design (a) of the crate docs): each weight block
//! is dequantized once into four 8-lane registers, exactly as [`crate::format::dequantize`]
//! does (same products and sums, no fused rounding), and multiply-added into the
//! accumulators of every activation row.
//!
//! Every function here is compiled for AVX2, FMA and F16C and may only run on a CPU that has
//! them; the only way in is [`dot_row`], reached through `Kernel::Avx2`, which the crate hands
//! out only after `is_x86_feature_detected!` said yes (`Kernel::best`,
//! `Matrix::set_kernel`).

use core::arch::x86_64::*;

use crate::format::{QK, QK_K, WeightFormat, scale_min_k4};
use crate::matrix::{RowRef, Rows};

/// For every output `j` of `rows`: `outs[i][j - rows.start] = Σ_k W[row j, k] · x[i*cols + k]`,
/// `outs.len()` ≤ 8 (see [`crate::Kernel::dot_rows`]).
pub(crate) fn dot_rows(format: WeightFormat, rows: Rows<'_>, x: &[f32], cols: usize, outs: &mut [&mut [f32]]) {
    let m = outs.len();
    if x.len() < m * cols || m > 8 || !crate::Kernel::Avx2.is_supported() {
        scalar_rows(format, rows, x, cols, outs);
        return;
    }
    // SAFETY: the CPU has AVX2, FMA and F16C and x holds m rows (checked just above).
    unsafe {
        match m {
            0 => {}
            1 => rows_impl::<1, 1>(format, rows, x, cols, outs),
            2 => rows_impl::<2, 1>(format, rows, x, cols, outs),
            3 => rows_impl::<3, 1>(format, rows, x, cols, outs),
            4 => rows_impl::<4, 1>(format, rows, x, cols, outs),
            5 => rows_impl::<5, 1>(format, rows, x, cols, outs),
            6 => rows_impl::<6, 1>(format, rows, x, cols, outs),
            7 => rows_impl::<7, 1>(format, rows, x, cols, outs),
            _ => rows_impl::<8, 1>(format, rows, x, cols, outs),
        }
    }
}

fn scalar_rows(format: WeightFormat, rows: Rows<'_>, x: &[f32], cols: usize, outs: &mut [&mut [f32]]) {
    let mut out = [0.0f32; 8];
    let out = &mut out[..outs.len().min(8)];
    for j in rows.start..rows.end {
        crate::scalar::dot_row(format, rows.get(j), x, cols, out);
        for (o, &v) in outs.iter_mut().zip(out.iter()) {
            o[j - rows.start] = v;
        }
    }
}

/// # Safety
/// AVX2, FMA and F16C available; `x.len() ≥ M·cols`; `outs.len() == M`.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn rows_impl<const M: usize, const A: usize>(
    format: WeightFormat,
    rows: Rows<'_>,
    x: &[f32],
    cols: usize,
    outs: &mut [&mut [f32]],
) {
    let mut out = [0.0f32; M];
    for j in rows.start..rows.end {
        let row = rows.get(j);
        let row_ok = match row {
            RowRef::F32(w) => w.len() >= cols,
            RowRef::Blocks(b) => {
                cols.is_multiple_of(format.block_len()) && b.len() >= cols / format.block_len() * format.block_bytes()
            }
        };
        if row_ok {
            // SAFETY: features and x checked by the caller, the row's length just above.
            unsafe { dot::<M, A>(format, row, x, cols, &mut out) };
        } else {
            crate::scalar::dot_row(format, row, x, cols, &mut out);
        }
        for (o, &v) in outs.iter_mut().zip(out.iter()) {
            o[j - rows.start] = v;
        }
    }
}

/// How far ahead of the columns being multiplied an f32 weight row is prefetched, in floats (4
/// KB, as in the AVX-512 f32 kernel). Measured with `cargo xtask bench-cpu` on SmolLM2-135M
/// converted to f32, the AVX2 kernel's rows, two runs each way alternating on the 2-core Xeon:
/// a single position 55–66 → 46–49 ms on one thread and 35–38 → 24–25 ms on two; k = 6 cost
/// 1.48–1.64 → 1.22–1.37 of that on one thread, 1.43–1.53 → 1.22–1.23 on two.
const F32_PREFETCH_FLOATS: usize = 1024;

/// `M` activation rows, `A` accumulators per row (more independent FMA chains when `M` is
/// small, so that the FMA latency is hidden).
///
/// # Safety
/// AVX2, FMA and F16C available; `x.len() ≥ M·cols`; the row holds `cols` weights;
/// `out.len() == M`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn dot<const M: usize, const A: usize>(
    format: WeightFormat,
    row: RowRef<'_>,
    x: &[f32],
    cols: usize,
    out: &mut [f32],
) {
    let mut acc = [[_mm256_setzero_ps(); A]; M];
    let xp = x.as_ptr();
    let mut tail = [0.0f32; 8];
    match row {
        RowRef::F32(w) => {
            let wp = w.as_ptr();
            let mut k = 0;
            while k + 32 <= cols {
                // The two lines F32_PREFETCH_FLOATS ahead (see there; past the row's end the
                // next rows', or beyond the matrix, which a prefetch ignores).
                _mm_prefetch::<_MM_HINT_T0>(wp.wrapping_add(k + F32_PREFETCH_FLOATS).cast::<i8>());
                _mm_prefetch::<_MM_HINT_T0>(wp.wrapping_add(k + F32_PREFETCH_FLOATS + 16).cast::<i8>());
                // SAFETY: k + 32 ≤ cols weights and columns.
                unsafe {
                    let v = [
                        _mm256_loadu_ps(wp.add(k)),
                        _mm256_loadu_ps(wp.add(k + 8)),
                        _mm256_loadu_ps(wp.add(k + 16)),
                        _mm256_loadu_ps(wp.add(k + 24)),
                    ];
                    fma_block::<M, A, 4>(&mut acc, &v, xp.add(k), cols);
                }
                k += 32;
            }
            while k + 8 <= cols {
                // SAFETY: k + 8 ≤ cols.
                unsafe {
                    let v = [_mm256_loadu_ps(wp.add(k))];
                    fma_block::<M, A, 1>(&mut acc, &v, xp.add(k), cols);
                }
                k += 8;
            }
            for kk in k..cols {
                for (i, t) in tail.iter_mut().enumerate().take(M) {
                    *t += w[kk] * x[i * cols + kk];
                }
            }
        }
        RowRef::Blocks(bytes) => {
            let bp = bytes.as_ptr();
            let bb = format.block_bytes();
            let blocks = cols / format.block_len();
            // SAFETY (all arms): block `b` lies at bp + b·bb, inside the row (b < blocks), and
            // its columns b·block_len .. (b+1)·block_len are below cols.
            match format {
                WeightFormat::Q8_0 => (0..blocks).for_each(|b| unsafe {
                    let v = decode_q8_0(bp.add(b * bb));
                    fma_block::<M, A, 4>(&mut acc, &v, xp.add(b * QK), cols);
                }),
                WeightFormat::Q4_0 => (0..blocks).for_each(|b| unsafe {
                    let v = decode_q4_0(bp.add(b * bb));
                    fma_block::<M, A, 4>(&mut acc, &v, xp.add(b * QK), cols);
                }),
                WeightFormat::Q4_1 => (0..blocks).for_each(|b| unsafe {
                    let v = decode_q4_1(bp.add(b * bb));
                    fma_block::<M, A, 4>(&mut acc, &v, xp.add(b * QK), cols);
                }),
                WeightFormat::Q4_K => (0..blocks).for_each(|b| unsafe {
                    q4_k_block::<M, A>(&mut acc, bp.add(b * bb), xp.add(b * QK_K), cols);
                }),
                WeightFormat::Q6_K => (0..blocks).for_each(|b| unsafe {
                    q6_k_block::<M, A>(&mut acc, bp.add(b * bb), xp.add(b * QK_K), cols);
                }),
                // Float matrices are held as f32 rows; nothing else reaches here.
                WeightFormat::F32 | WeightFormat::F16 | WeightFormat::BF16 => {}
            }
        }
    }
    for i in 0..M {
        out[i] = hsum(&acc[i]) + tail[i];
    }
}

/// `acc[i][j % A] += v[j] · x[i·cols + 8j ..]` for every activation row `i`.
///
/// # Safety
/// AVX2 and FMA available; `x` points at `8·N` readable columns of each of `M` rows `cols`
/// apart.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn fma_block<const M: usize, const A: usize, const N: usize>(
    acc: &mut [[__m256; A]; M],
    v: &[__m256; N],
    x: *const f32,
    cols: usize,
) {
    for (i, acc) in acc.iter_mut().enumerate() {
        // SAFETY: per the function's contract.
        let xv = |j: usize| unsafe { _mm256_loadu_ps(x.add(i * cols + 8 * j)) };
        if A == 1 && N > 1 {
            // One accumulator per row: sum the block on the side and add it once, so that the
            // loop-carried chain is one addition per block, not N multiply-adds.
            let mut t = _mm256_mul_ps(v[0], xv(0));
            for (j, &w) in v.iter().enumerate().skip(1) {
                t = _mm256_fmadd_ps(w, xv(j), t);
            }
            acc[0] = _mm256_add_ps(acc[0], t);
        } else {
            for (j, &w) in v.iter().enumerate() {
                acc[j % A] = _mm256_fmadd_ps(w, xv(j), acc[j % A]);
            }
        }
    }
}

#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn hsum<const A: usize>(acc: &[__m256; A]) -> f32 {
    let mut v = acc[0];
    for &a in &acc[1..] {
        v = _mm256_add_ps(v, a);
    }
    let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
    let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    let s = _mm_add_ss(s, _mm_shuffle_ps::<1>(s, s));
    _mm_cvtss_f32(s)
}

/// The f16 at `p` (little-endian), converted exactly and broadcast to 8 lanes.
///
/// # Safety
/// F16C available; two readable bytes at `p`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn f16_splat(p: *const u8) -> __m256 {
    // SAFETY: two readable bytes, per the contract.
    let bits = unsafe { p.cast::<u16>().read_unaligned() };
    // Broadcast the bits, then convert all lanes: `_mm_cvtsi32_si128` invites the compiler to
    // insert the bits into a live register (a false dependency that serialised blocks).
    _mm256_cvtph_ps(_mm_set1_epi16(bits as i16))
}

/// f32 of the scalar at `p`.
///
/// # Safety
/// F16C available; two readable bytes at `p`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn f16_scalar(p: *const u8) -> f32 {
    // SAFETY: per the contract.
    _mm256_cvtss_f32(unsafe { f16_splat(p) })
}

/// Eight 32-bit integers of 8 bytes to f32 (signed or unsigned by `SIGNED`).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn bytes8_to_ps<const SIGNED: bool>(v: __m128i) -> __m256 {
    if SIGNED { _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(v)) } else { _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(v)) }
}

/// Sixteen bytes to two vectors of 8 f32.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn bytes16_to_ps<const SIGNED: bool>(v: __m128i) -> [__m256; 2] {
    [bytes8_to_ps::<SIGNED>(v), bytes8_to_ps::<SIGNED>(_mm_srli_si128::<8>(v))]
}

/// A `Q8_0` block: `qs[i] · d`.
///
/// # Safety
/// AVX2/F16C; 34 readable bytes at `p`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn decode_q8_0(p: *const u8) -> [__m256; 4] {
    // SAFETY: the block's 34 bytes are readable.
    let (d, lo, hi) = unsafe { (f16_splat(p), _mm_loadu_si128(p.add(2).cast()), _mm_loadu_si128(p.add(18).cast())) };
    let [a, b] = bytes16_to_ps::<true>(lo);
    let [c, e] = bytes16_to_ps::<true>(hi);
    [a, b, c, e].map(|v| _mm256_mul_ps(v, d))
}

/// The 32 nibbles of a 16-byte `qs`: elements 0..16 (low nibbles) then 16..32 (high).
///
/// # Safety
/// 16 readable bytes at `p`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn nibbles(p: *const u8) -> (__m128i, __m128i) {
    // SAFETY: per the contract.
    let raw = unsafe { _mm_loadu_si128(p.cast()) };
    let mask = _mm_set1_epi8(0x0F);
    (_mm_and_si128(raw, mask), _mm_and_si128(_mm_srli_epi16::<4>(raw), mask))
}

/// A `Q4_0` block: `(nibble - 8) · d`.
///
/// # Safety
/// AVX2/F16C; 18 readable bytes at `p`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn decode_q4_0(p: *const u8) -> [__m256; 4] {
    // SAFETY: the block's 18 bytes are readable.
    let (d, (lo, hi)) = unsafe { (f16_splat(p), nibbles(p.add(2))) };
    let eight = _mm_set1_epi8(8);
    let [a, b] = bytes16_to_ps::<true>(_mm_sub_epi8(lo, eight));
    let [c, e] = bytes16_to_ps::<true>(_mm_sub_epi8(hi, eight));
    [a, b, c, e].map(|v| _mm256_mul_ps(v, d))
}

/// A `Q4_1` block: `nibble · d + m` (a product and a sum, rounded separately like ggml's).
///
/// # Safety
/// AVX2/F16C; 20 readable bytes at `p`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn decode_q4_1(p: *const u8) -> [__m256; 4] {
    // SAFETY: the block's 20 bytes are readable.
    let (d, m, (lo, hi)) = unsafe { (f16_splat(p), f16_splat(p.add(2)), nibbles(p.add(4))) };
    let [a, b] = bytes16_to_ps::<false>(lo);
    let [c, e] = bytes16_to_ps::<false>(hi);
    [a, b, c, e].map(|v| _mm256_add_ps(_mm256_mul_ps(v, d), m))
}

/// One `Q4_K` super-block (256 weights) into the accumulators.
///
/// # Safety
/// AVX2/FMA/F16C; 144 readable bytes at `p`; `x` as for [`fma_block`] with 256 columns.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q4_k_block<const M: usize, const A: usize>(
    acc: &mut [[__m256; A]; M],
    p: *const u8,
    x: *const f32,
    cols: usize,
) {
    // SAFETY: the 144 bytes of the block are readable, and x has 256 columns.
    unsafe {
        let d = f16_scalar(p);
        let dmin = f16_scalar(p.add(2));
        let scales = core::slice::from_raw_parts(p.add(4), 12);
        for chunk in 0..4 {
            let raw = _mm256_loadu_si256(p.add(16 + 32 * chunk).cast());
            let mask = _mm256_set1_epi8(0x0F);
            let lo = _mm256_and_si256(raw, mask);
            let hi = _mm256_and_si256(_mm256_srli_epi16::<4>(raw), mask);
            for (half, q) in [lo, hi].into_iter().enumerate() {
                let (sc, mn) = scale_min_k4(2 * chunk + half, scales);
                let d1 = _mm256_set1_ps(d * f32::from(sc));
                let m1 = _mm256_set1_ps(dmin * f32::from(mn));
                let [a, b] = bytes16_to_ps::<false>(_mm256_castsi256_si128(q));
                let [c, e] = bytes16_to_ps::<false>(_mm256_extracti128_si256::<1>(q));
                let v = [a, b, c, e].map(|v| _mm256_sub_ps(_mm256_mul_ps(v, d1), m1));
                fma_block::<M, A, 4>(acc, &v, x.add(64 * chunk + 32 * half), cols);
            }
        }
    }
}

/// One `Q6_K` super-block (256 weights) into the accumulators.
///
/// # Safety
/// AVX2/FMA/F16C; 210 readable bytes at `p`; `x` as for [`fma_block`] with 256 columns.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q6_k_block<const M: usize, const A: usize>(
    acc: &mut [[__m256; A]; M],
    p: *const u8,
    x: *const f32,
    cols: usize,
) {
    // SAFETY: the 210 bytes of the block are readable, and x has 256 columns.
    unsafe {
        let d = f16_scalar(p.add(208));
        let sc = p.add(192).cast::<i8>();
        let m4 = _mm256_set1_epi8(0x0F);
        let m2 = _mm256_set1_epi8(0x03);
        let off = _mm256_set1_epi8(32);
        for half in 0..2 {
            let ql0 = _mm256_loadu_si256(p.add(64 * half).cast());
            let ql1 = _mm256_loadu_si256(p.add(64 * half + 32).cast());
            let qh = _mm256_loadu_si256(p.add(128 + 32 * half).cast());
            let high = |shift: __m128i| _mm256_slli_epi16::<4>(_mm256_and_si256(_mm256_srl_epi16(qh, shift), m2));
            let quarters = [
                _mm256_or_si256(_mm256_and_si256(ql0, m4), high(_mm_cvtsi32_si128(0))),
                _mm256_or_si256(_mm256_and_si256(ql1, m4), high(_mm_cvtsi32_si128(2))),
                _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16::<4>(ql0), m4), high(_mm_cvtsi32_si128(4))),
                _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16::<4>(ql1), m4), high(_mm_cvtsi32_si128(6))),
            ];
            for (t, q) in quarters.into_iter().enumerate() {
                let q = _mm256_sub_epi8(q, off);
                // Elements l = 0..16 use scale 2t, l = 16..32 scale 2t + 1 (of this half).
                let s0 = _mm256_set1_ps(d * f32::from(*sc.add(8 * half + 2 * t)));
                let s1 = _mm256_set1_ps(d * f32::from(*sc.add(8 * half + 2 * t + 1)));
                let [a, b] = bytes16_to_ps::<true>(_mm256_castsi256_si128(q));
                let [c, e] = bytes16_to_ps::<true>(_mm256_extracti128_si256::<1>(q));
                let v = [_mm256_mul_ps(s0, a), _mm256_mul_ps(s0, b), _mm256_mul_ps(s1, c), _mm256_mul_ps(s1, e)];
                fma_block::<M, A, 4>(acc, &v, x.add(128 * half + 32 * t), cols);
            }
        }
    }
}

/// Whether this CPU has the instructions every function here is compiled for (AVX2, FMA and
/// F16C): the kernels, the attention passes, the softmax and SwiGLU.
pub(crate) fn supported() -> bool {
    std::arch::is_x86_feature_detected!("avx2")
        && std::arch::is_x86_feature_detected!("fma")
        && std::arch::is_x86_feature_detected!("f16c")
}

/// `scale · (q · k_l)` for the eight keys `keys[l]` over `width` lanes, in the eight lanes of
/// the result: the one computation of an attention score, shared by every query of
/// [`attention_scores_multi`]. Each key's products are summed in eight lanes, chunk by chunk
/// in order, then the lanes as `((p0 + p1) + (p2 + p3)) + ((p4 + p5) + (p6 + p7))` for every
/// key alike (a transposing `hadd` tree), so a key's score does not depend on its place among
/// the eight. One transposed reduction for eight keys instead of one horizontal sum per key:
/// the horizontal sums were most of the scores' instructions.
///
/// # Safety
/// AVX2/FMA available; `width` a multiple of 8; `q` and every `keys[l]` point at `width`
/// readable values.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn scores_of_eight(q: *const f32, keys: &[*const f32; 8], width: usize, scale: f32) -> __m256 {
    let mut acc = [_mm256_setzero_ps(); 8];
    for c in (0..width).step_by(8) {
        // SAFETY: lanes `c..c + 8` lie inside the query and every key (`width` a multiple of 8).
        unsafe {
            let qc = _mm256_loadu_ps(q.add(c));
            for (a, &k) in acc.iter_mut().zip(keys) {
                *a = _mm256_fmadd_ps(qc, _mm256_loadu_ps(k.add(c)), *a);
            }
        }
    }
    let t01 = _mm256_hadd_ps(acc[0], acc[1]);
    let t23 = _mm256_hadd_ps(acc[2], acc[3]);
    let t45 = _mm256_hadd_ps(acc[4], acc[5]);
    let t67 = _mm256_hadd_ps(acc[6], acc[7]);
    let u0 = _mm256_hadd_ps(t01, t23);
    let u1 = _mm256_hadd_ps(t45, t67);
    // Lane l of `low` sums key l's lanes 0..4, of `high` its lanes 4..8.
    let low = _mm256_permute2f128_ps::<0x20>(u0, u1);
    let high = _mm256_permute2f128_ps::<0x31>(u0, u1);
    _mm256_mul_ps(_mm256_add_ps(low, high), _mm256_set1_ps(scale))
}

/// Attention scores of several queries over the same keys, each key read from memory once for
/// all of them: `scores[i·row + j] = scale · (query_i · key_j)` for `j < counts[i]` (and
/// possibly beyond, up to the largest count), query `i` being `queries[i·width..][..width]`.
/// Keys go eight at a time through [`scores_of_eight`], whose result for a key depends on
/// nothing else, so a query gets the same scores alone or in a group.
///
/// The caller checked [`supported`], that `width` is a multiple of 8, and that every
/// key below the largest count lies inside `keys`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn attention_scores_multi(
    queries: &[f32],
    width: usize,
    counts: &[usize],
    keys: &[f32],
    offset: usize,
    stride: usize,
    scale: f32,
    scores: &mut [f32],
    row: usize,
) {
    let n = counts.len();
    let most = counts.iter().copied().max().unwrap_or(0);
    assert!(width.is_multiple_of(8) && supported(), "attention_scores_multi: unchecked call");
    assert!(queries.len() >= n * width && most <= row && scores.len() >= n * row, "scores or queries too short");
    assert!(most == 0 || offset + (most - 1) * stride + width <= keys.len(), "keys out of range");
    // SAFETY: AVX2/FMA are available and every read and write is in bounds (asserted above).
    unsafe { scores_multi_impl(queries, width, counts, keys, offset, stride, scale, scores, row, most) }
}

/// # Safety
/// The checks of [`attention_scores_multi`].
#[allow(clippy::too_many_arguments)]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn scores_multi_impl(
    queries: &[f32],
    width: usize,
    counts: &[usize],
    keys: &[f32],
    offset: usize,
    stride: usize,
    scale: f32,
    scores: &mut [f32],
    row: usize,
    most: usize,
) {
    for first in (0..most).step_by(8) {
        let block = (most - first).min(8);
        // Keys first..first + block; the lanes past the last key repeat it (their scores are
        // dropped). SAFETY: `offset + j·stride + width ≤ keys.len()` for j < most.
        let k: [*const f32; 8] =
            core::array::from_fn(|l| unsafe { keys.as_ptr().add(offset + (first + l.min(block - 1)) * stride) });
        for (i, &count) in counts.iter().enumerate() {
            if first >= count {
                continue;
            }
            // SAFETY: query i lies inside `queries` (n·width ≤ len), the keys inside `keys`.
            let eight = unsafe { scores_of_eight(queries.as_ptr().add(i * width), &k, width, scale) };
            let out = &mut scores[i * row + first..i * row + first + block];
            if block == 8 {
                // SAFETY: `out` holds eight floats.
                unsafe { _mm256_storeu_ps(out.as_mut_ptr(), eight) };
            } else {
                let mut lanes = [0.0f32; 8];
                // SAFETY: `lanes` holds eight floats.
                unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), eight) };
                out.copy_from_slice(&lanes[..block]);
            }
        }
    }
}

/// The weighted sums of values of several weight rows over the same values, two queries per
/// pass so that each value vector is loaded once for both: `out[i·width..][..width] =
/// Σ_{j < counts[i]} weights[i·row + j] · value_j`, in 32-column chunks, `j` in order. A
/// query's operations do not depend on the other queries.
///
/// The caller checked [`supported`], that `width` is a multiple of 8, and that every
/// value below the largest count lies inside `values`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn attention_sum_multi(
    weights: &[f32],
    row: usize,
    counts: &[usize],
    values: &[f32],
    offset: usize,
    stride: usize,
    width: usize,
    out: &mut [f32],
) {
    let n = counts.len();
    let most = counts.iter().copied().max().unwrap_or(0);
    assert!(width.is_multiple_of(8) && supported(), "attention_sum_multi: unchecked call");
    assert!(out.len() >= n * width && most <= row && weights.len() >= n * row, "weights or output too short");
    assert!(most == 0 || offset + (most - 1) * stride + width <= values.len(), "values out of range");
    // SAFETY: AVX2/FMA are available and every read and write is in bounds (asserted above).
    unsafe { sum_multi_impl(weights, row, counts, values, offset, stride, width, out) }
}

/// # Safety
/// The checks of [`attention_sum_multi`].
#[allow(clippy::too_many_arguments)]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn sum_multi_impl(
    weights: &[f32],
    row: usize,
    counts: &[usize],
    values: &[f32],
    offset: usize,
    stride: usize,
    width: usize,
    out: &mut [f32],
) {
    let n = counts.len();
    for a in (0..n).step_by(2) {
        // A pair of queries, or the last one alone when n is odd.
        let wa = &weights[a * row..a * row + counts[a]];
        for chunk in (0..width).step_by(32) {
            let lanes = (width - chunk).min(32) / 8;
            // SAFETY: `offset + chunk` starts value 0's lanes of this chunk; every value below
            // the largest count lies inside `values` (checked by the caller).
            let v = unsafe { values.as_ptr().add(offset + chunk) };
            // SAFETY (both arms): lanes `chunk + 8l .. + 8` of query a's (and a + 1's) outputs
            // lie inside `out`; the values as above.
            unsafe {
                if a + 1 < n {
                    let wb = &weights[(a + 1) * row..(a + 1) * row + counts[a + 1]];
                    let (acc_a, acc_b) = sum_chunk::<true>(wa, wb, v, stride, lanes);
                    for l in 0..lanes {
                        _mm256_storeu_ps(out.as_mut_ptr().add(a * width + chunk + 8 * l), acc_a[l]);
                        _mm256_storeu_ps(out.as_mut_ptr().add((a + 1) * width + chunk + 8 * l), acc_b[l]);
                    }
                } else if chunk.is_multiple_of(64) && width - chunk >= 64 {
                    // A lone query takes 64 columns at a time: eight independent multiply-add
                    // chains keep both FMA units busy where four would wait on their latency.
                    // Each lane still adds its products in the order of `j`, so the result is
                    // the same bits as in 32-column chunks (and as in a pair).
                    let acc = sum_wide(wa, v, stride);
                    for (l, acc) in acc.iter().enumerate() {
                        _mm256_storeu_ps(out.as_mut_ptr().add(a * width + chunk + 8 * l), *acc);
                    }
                } else if !covered_by_wide(chunk, width) {
                    // Columns no 64-wide pass covers (the end of a width that is not a
                    // multiple of 64).
                    let (acc_a, _) = sum_chunk::<false>(wa, &[], v, stride, lanes);
                    for (l, acc) in acc_a.iter().enumerate().take(lanes) {
                        _mm256_storeu_ps(out.as_mut_ptr().add(a * width + chunk + 8 * l), *acc);
                    }
                }
            }
        }
    }
}

/// Whether the 32-column chunk at `chunk` lies inside a 64-column pass of [`sum_wide`] (the
/// passes start at multiples of 64 and need 64 columns).
fn covered_by_wide(chunk: usize, width: usize) -> bool {
    let pass = chunk - chunk % 64;
    width - pass >= 64
}

/// [`sum_chunk`] for a lone query over 64 columns: `Σ_j w[j] · v[j·stride ..][..64]`, `j` in
/// order.
///
/// # Safety
/// AVX2/FMA available; `v + j·stride + 64` readable for every `j < w.len()`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn sum_wide(w: &[f32], v: *const f32, stride: usize) -> [__m256; 8] {
    let mut acc = [_mm256_setzero_ps(); 8];
    for (j, &wj) in w.iter().enumerate() {
        let wj = _mm256_set1_ps(wj);
        for (l, acc) in acc.iter_mut().enumerate() {
            // SAFETY: lanes `8l .. 8l + 8` of value j lie inside `values` (the contract).
            *acc = _mm256_fmadd_ps(wj, unsafe { _mm256_loadu_ps(v.add(j * stride + 8 * l)) }, *acc);
        }
    }
    acc
}

/// One 32-column chunk of [`sum_multi_impl`] for query a (weights `wa`) and, when `PAIR`,
/// query a + 1 (`wb`): `Σ_j w[j] · v[j·stride ..][..8·lanes]`, `j` in order, each value vector
/// loaded once for both. A const parameter, so that a lone query carries no test of the other.
///
/// # Safety
/// AVX2/FMA available; `v + j·stride + 8·lanes` readable for every `j` below both lengths.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn sum_chunk<const PAIR: bool>(
    wa: &[f32],
    wb: &[f32],
    v: *const f32,
    stride: usize,
    lanes: usize,
) -> ([__m256; 4], [__m256; 4]) {
    // SAFETY (every arm): the contract, with `lanes` as the chunk's width.
    unsafe {
        match lanes {
            4 => sum_lanes::<PAIR, 4>(wa, wb, v, stride),
            3 => sum_lanes::<PAIR, 3>(wa, wb, v, stride),
            2 => sum_lanes::<PAIR, 2>(wa, wb, v, stride),
            _ => sum_lanes::<PAIR, 1>(wa, wb, v, stride),
        }
    }
}

/// [`sum_chunk`] with the chunk's width `L` (vectors of eight) known at compile time, and the
/// positions both queries see (`j` below both lengths) in a loop of their own, then each
/// query's remaining positions: a loop with no test per position or lane, where one that
/// tested `l < lanes` and `j < len` for every value was branches more than multiply-adds
/// (`perf annotate`, 43% of a three-query attention call). Each accumulator still adds its
/// products in the order of `j`: the same bits as one position at a time.
///
/// # Safety
/// As [`sum_chunk`], with `L` for `lanes` (at most 4).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn sum_lanes<const PAIR: bool, const L: usize>(
    wa: &[f32],
    wb: &[f32],
    v: *const f32,
    stride: usize,
) -> ([__m256; 4], [__m256; 4]) {
    let mut acc_a = [_mm256_setzero_ps(); 4];
    let mut acc_b = [_mm256_setzero_ps(); 4];
    let both = if PAIR { wa.len().min(wb.len()) } else { 0 };
    for (j, (&x, &y)) in wa[..both].iter().zip(&wb[..both]).enumerate() {
        let (x, y) = (_mm256_set1_ps(x), _mm256_set1_ps(y));
        for l in 0..L {
            // SAFETY: lanes `8l .. 8l + 8` of value j lie inside `values` (the contract).
            let value = unsafe { _mm256_loadu_ps(v.add(j * stride + 8 * l)) };
            acc_a[l] = _mm256_fmadd_ps(x, value, acc_a[l]);
            acc_b[l] = _mm256_fmadd_ps(y, value, acc_b[l]);
        }
    }
    let rest = |w: &[f32], acc: &mut [__m256; 4]| {
        for (j, &x) in w.iter().enumerate().skip(both) {
            let x = _mm256_set1_ps(x);
            for (l, acc) in acc.iter_mut().enumerate().take(L) {
                // SAFETY: as above.
                *acc = _mm256_fmadd_ps(x, unsafe { _mm256_loadu_ps(v.add(j * stride + 8 * l)) }, *acc);
            }
        }
    };
    rest(wa, &mut acc_a);
    if PAIR {
        rest(wb, &mut acc_b);
    }
    (acc_a, acc_b)
}

/// [`exp8`]'s clamp of its argument (see there).
pub(crate) const EXP_LOW: f32 = -87.336_54;
/// [`exp8`]'s clamp of its argument (see there).
pub(crate) const EXP_HIGH: f32 = 88.0;
/// `ln 2` in two parts, high (exact in `n · ln2_hi`) and low, for [`exp8`]'s reduction.
pub(crate) const EXP_LN2: [f32; 2] = [0.693_359_4, -2.121_944_4e-4];
/// [`exp8`]'s polynomial coefficients, highest degree first (Horner order).
pub(crate) const EXP_POLY: [f32; 6] =
    [1.987_569_1e-4, 1.398_199_9e-3, 8.333_452e-3, 4.166_579_6e-2, 1.666_666_5e-1, 0.5];

/// `exp(x)` in eight lanes: Cephes' `expf` in vector form, as ggml's `ggml_v_expf` and every
/// SIMD softmax do. `x = n·ln 2 + r` with `|r| ≤ ln 2 / 2`, a degree-7 polynomial for `exp(r)`,
/// and `2ⁿ` built in the exponent bits. Relative error under 2·10⁻⁷ (tested against f64).
/// Arguments are clamped to −87.34..=88: below, the smallest normal float (≈ 1.2·10⁻³⁸) rather
/// than a subnormal or zero; above, exp(88) ≈ 1.65·10³⁸ rather than infinity. A NaN stays NaN.
///
/// Why: a scalar `expf` call per attention score was 5% of a verification pass of six
/// positions on SmolLM2-135M (`perf`, 64 tokens of context), and one per SwiGLU activation
/// another 3%.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn exp8(x: __m256) -> __m256 {
    // min/max(bound, x) return x when x is NaN (the second operand wins), so NaN propagates.
    let x = _mm256_max_ps(_mm256_set1_ps(EXP_LOW), _mm256_min_ps(_mm256_set1_ps(EXP_HIGH), x));
    let n = _mm256_round_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(_mm256_mul_ps(
        x,
        _mm256_set1_ps(core::f32::consts::LOG2_E),
    ));
    // r = x − n·ln 2, with ln 2 split in two so that n·ln2_hi is exact.
    let r = _mm256_fnmadd_ps(n, _mm256_set1_ps(EXP_LN2[0]), x);
    let r = _mm256_fnmadd_ps(n, _mm256_set1_ps(EXP_LN2[1]), r);
    let mut p = _mm256_set1_ps(EXP_POLY[0]);
    for c in &EXP_POLY[1..] {
        p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(*c));
    }
    let p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), r);
    let p = _mm256_add_ps(p, _mm256_set1_ps(1.0));
    // 2ⁿ for n in −126..=127: the biased exponent n + 127 in the exponent bits.
    let two_n = _mm256_slli_epi32::<23>(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)));
    _mm256_mul_ps(p, _mm256_castsi256_ps(two_n))
}

/// `exp(s − max s)` in place, eight scores at a time; returns `max s` (−∞ for no score) and
/// the numerators' sum (the softmax's denominator), added in a fixed order (eight lanes, then the lanes in order, then the tail),
/// so that a row of scores gets the same numerators and sum whichever call it is part of.
pub(crate) fn softmax_numerators(scores: &mut [f32]) -> (f32, f32) {
    assert!(supported(), "softmax_numerators: unchecked call");
    // SAFETY: AVX2/FMA/F16C checked just above.
    unsafe { softmax_impl(scores) }
}

/// The largest of `scores`, NaNs skipped (−∞ when empty or all NaN): `fold(−∞, f32::max)`'s
/// value, eight lanes at a time instead of a chain of one dependent comparison per score. A
/// maximum is exact whatever the order; only the sign of a zero maximum can differ, and
/// `exp(x − max)` is the same for either. (Not measurable apart from the sums' change that came
/// with it on this machine: the softmax was 1.3% of a demo run's CPU time before, 1.2% after.)
///
/// # Safety
/// AVX2 available.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn max_of(scores: &[f32]) -> f32 {
    let mut acc = _mm256_set1_ps(f32::NEG_INFINITY);
    let mut chunks = scores.chunks_exact(8);
    for chunk in &mut chunks {
        // SAFETY: `chunk` holds eight floats. `max_ps(x, acc)` returns `acc` where x is NaN.
        acc = _mm256_max_ps(unsafe { _mm256_loadu_ps(chunk.as_ptr()) }, acc);
    }
    let mut lanes = [0.0f32; 8];
    // SAFETY: `lanes` holds eight floats.
    unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), acc) };
    lanes.iter().chain(chunks.remainder()).copied().fold(f32::NEG_INFINITY, f32::max)
}

/// # Safety
/// AVX2/FMA/F16C available.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn softmax_impl(scores: &mut [f32]) -> (f32, f32) {
    // SAFETY: AVX2 is available (this function's contract).
    let max = unsafe { max_of(scores) };
    // SAFETY: as above.
    let total = unsafe { numerators_from(scores, max, _mm256_setzero_ps()) };
    (max, total)
}

/// The largest of `scores` as [`softmax_numerators`] takes it (for the AVX-512 softmax, which
/// must find the same maximum).
///
/// # Safety
/// AVX2 available.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn largest(scores: &[f32]) -> f32 {
    // SAFETY: the contract.
    unsafe { max_of(scores) }
}

/// `exp(s − max)` in place over `scores`, eight at a time, each group of eight added to the
/// running lane sums `acc` in order, then a padded tail of under eight; returns the lanes
/// added in order, then the tail's numerators in order: [`softmax_numerators`]' sum when
/// `acc` starts at zero, and its continuation when `acc` holds the sums of earlier groups of
/// eight (the AVX-512 softmax computes those sixteen at a time and hands the rest here).
///
/// # Safety
/// AVX2/FMA/F16C available.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn numerators_from(scores: &mut [f32], max: f32, mut acc: __m256) -> f32 {
    let m = _mm256_set1_ps(max);
    let mut chunks = scores.chunks_exact_mut(8);
    for chunk in &mut chunks {
        // SAFETY: `chunk` holds eight floats.
        unsafe {
            let e = exp8(_mm256_sub_ps(_mm256_loadu_ps(chunk.as_ptr()), m));
            _mm256_storeu_ps(chunk.as_mut_ptr(), e);
            acc = _mm256_add_ps(acc, e);
        }
    }
    let tail = chunks.into_remainder();
    let mut lanes = [max; 8];
    lanes[..tail.len()].copy_from_slice(tail);
    // SAFETY: `lanes` holds eight floats.
    unsafe {
        let e = exp8(_mm256_sub_ps(_mm256_loadu_ps(lanes.as_ptr()), m));
        _mm256_storeu_ps(lanes.as_mut_ptr(), e);
    }
    tail.copy_from_slice(&lanes[..tail.len()]);
    let mut sums = [0.0f32; 8];
    // SAFETY: `sums` holds eight floats.
    unsafe { _mm256_storeu_ps(sums.as_mut_ptr(), acc) };
    sums.iter().sum::<f32>() + tail.iter().sum::<f32>()
}

/// `silu(g)·u = g / (1 + exp(−g)) · u` in place over `gate`, eight at a time (the tail padded
/// to eight, so that every element gets the same operations wherever it lies).
pub(crate) fn swiglu(gate: &mut [f32], up: &[f32]) {
    assert!(supported() && gate.len() == up.len(), "swiglu: unchecked call");
    // SAFETY: AVX2/FMA/F16C checked just above.
    unsafe { swiglu_impl(gate, up) }
}

/// # Safety
/// AVX2/FMA/F16C available; `gate.len() == up.len()`.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn swiglu_impl(gate: &mut [f32], up: &[f32]) {
    let one = _mm256_set1_ps(1.0);
    let zero = _mm256_setzero_ps();
    let eight = |g: __m256, u: __m256| -> __m256 {
        let denominator = _mm256_add_ps(one, exp8(_mm256_sub_ps(zero, g)));
        _mm256_mul_ps(_mm256_div_ps(g, denominator), u)
    };
    let mut gates = gate.chunks_exact_mut(8);
    let mut ups = up.chunks_exact(8);
    for (g, u) in (&mut gates).zip(&mut ups) {
        // SAFETY: both chunks hold eight floats.
        unsafe {
            let y = eight(_mm256_loadu_ps(g.as_ptr()), _mm256_loadu_ps(u.as_ptr()));
            _mm256_storeu_ps(g.as_mut_ptr(), y);
        }
    }
    let (g, u) = (gates.into_remainder(), ups.remainder());
    let (mut gl, mut ul) = ([0.0f32; 8], [0.0f32; 8]);
    gl[..g.len()].copy_from_slice(g);
    ul[..u.len()].copy_from_slice(u);
    // SAFETY: the lane arrays hold eight floats.
    unsafe { _mm256_storeu_ps(gl.as_mut_ptr(), eight(_mm256_loadu_ps(gl.as_ptr()), _mm256_loadu_ps(ul.as_ptr()))) };
    g.copy_from_slice(&gl[..g.len()]);
}

#[cfg(test)]
mod tests {
    #[test]
    fn swiglu_is_within_float_rounding_of_f64_and_independent_of_position() {
        if !super::supported() {
            return; // no AVX2 on this CPU: nothing to test
        }
        let gate: Vec<f32> = (0..203).map(|i| (i as f32 - 101.0) * 0.37).chain([-100.0, 100.0, 0.0]).collect();
        let up: Vec<f32> = (0..gate.len()).map(|i| 1.0 + (i % 5) as f32 * 0.25).collect();
        let mut got = gate.clone();
        super::swiglu(&mut got, &up);
        for ((&g, &u), &y) in gate.iter().zip(&up).zip(&got) {
            let want = f64::from(g) / (1.0 + (-f64::from(g)).exp()) * f64::from(u);
            assert!((f64::from(y) - want).abs() <= 4e-7 * want.abs() + 1e-30, "silu({g})·{u} = {y}, want {want}");
        }
        // An element alone (in the tail) gets what it gets among others.
        for (i, (&g, &u)) in gate.iter().zip(&up).enumerate().step_by(17) {
            let mut one = [g];
            super::swiglu(&mut one, &[u]);
            assert_eq!(one[0].to_bits(), got[i].to_bits(), "element {i}");
        }
    }

    #[test]
    fn vector_exp_is_within_two_ulps_of_f64() {
        if !super::supported() {
            return; // no AVX2 on this CPU: nothing to test
        }
        // Two million points spread over -87.3..=0, and the edges, as softmax arguments.
        let mut xs: Vec<f32> = (0..=2_000_000u32).map(|i| -87.3 * (i as f32 / 2_000_000.0)).collect();
        xs.extend([0.0, -0.0, -1e-30, -0.346_573_6, -0.346_573_6 * 3.0, -87.336_54]);
        let mut scores = xs.clone();
        scores.push(0.0); // the max is 0: the numerators are exp(x)
        super::softmax_numerators(&mut scores);
        let mut worst = 0.0f64;
        for (&x, &e) in xs.iter().zip(&scores) {
            let want = f64::from(x).exp();
            worst = worst.max((f64::from(e) - want).abs() / want);
        }
        assert!(worst < 2e-7, "worst relative error {worst}");
        // A NaN score stays NaN; arguments far below the range give a tiny positive number.
        let mut odd = vec![0.0, f32::NAN, -1000.0];
        super::softmax_numerators(&mut odd);
        assert!(odd[1].is_nan(), "{odd:?}");
        assert!(odd[2] > 0.0 && odd[2] < 1.2e-38, "{odd:?}");
        assert_eq!(odd[0], 1.0);
    }

    #[test]
    fn numerators_and_sum_do_not_depend_on_the_length_mod_eight() {
        if !super::supported() {
            return;
        }
        // The same leading scores, rows of 1..=20: the numerators of the common part agree, and
        // each sum is the f64 sum of its numerators to float rounding.
        let base: Vec<f32> = (0..20).map(|i| (i as f32 * 0.37).sin() * 4.0).collect();
        for len in 1..=20 {
            let mut row = base[..len].to_vec();
            let (_, total) = super::softmax_numerators(&mut row);
            let max = base[..len].iter().copied().fold(f32::NEG_INFINITY, f32::max);
            for (j, (&e, &s)) in row.iter().zip(&base).enumerate() {
                let want = f64::from(s - max).exp();
                assert!((f64::from(e) - want).abs() <= 2e-7 * want, "len {len} j {j}: {e} vs {want}");
            }
            let exact: f64 = row.iter().map(|&e| f64::from(e)).sum();
            assert!((f64::from(total) - exact).abs() <= 1e-6 * exact, "len {len}: {total} vs {exact}");
        }
    }
}
