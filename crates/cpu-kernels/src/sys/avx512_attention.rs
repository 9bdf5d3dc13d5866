//! The AVX-512 attention kernels: scores from transposed key tiles, the softmax's numerators,
//! and the weighted sum of values ([`super::avx2::attention_sum_multi`]'s computation with 16 lanes per instruction and
//! up to four queries sharing each value load).
//!
//! # Scores
//!
//! [`attention_scores_tiled`] reads the keys in [`crate::KeyTiles`]' layout, where dimension `d`
//! of 16 consecutive positions is one vector: a query element broadcast and multiply-added into
//! that vector advances 16 scores, and no lane ever has to be added across a register. Two
//! queries share each tile load, two tiles share each broadcast of a query element.
//!
//! The sums are the AVX2 kernel's, bit for bit. That kernel keeps, per key, eight chains of
//! fused multiply-adds `c_l = Σ_m q[8m + l] · k[8m + l]` (from zero, `m` in order), one per
//! lane, and reduces them as `((c0 + c1) + (c2 + c3)) + ((c4 + c5) + (c6 + c7))` before the
//! scale. Here the same eight chains run for 16 positions at once (four at a time, which with
//! two queries and two tiles is sixteen independent chains, enough to hide the latency) and
//! are added in the same order. So a model's logits are the same bits with the AVX-512 kernel
//! as with the AVX2 one (`Kernel::Avx512Q8` is bit-identical to `Kernel::Avx2Q8`), and a
//! query's scores do not depend on which others it is computed with.
//!
//! # Sums
//!
//! After the softmax, each query of a span adds `w_j · v_j` over the span's positions. With
//! 64-wide heads that is four 16-lane multiply-adds per position and query against eight
//! 8-lane ones, and a value vector loaded once serves the three query heads that share a
//! key-value head (and the rows of a draft) instead of a pair of them. `perf` on
//! `cargo xtask bench-cpu` had the AVX2 sum at 12% of the run, half again the scores' share.
//!
//! # Softmax
//!
//! [`softmax_numerators`] computes the exponentials sixteen lanes at a time with `exp16`
//! (`super::avx512_activation`), the AVX2 `exp8`'s operations lane for lane, and adds each
//! sixteen to the AVX2 code's eight running lane sums as two halves, in its order.
//!
//! # The same bits as the AVX2 kernel
//!
//! Every output lane is one chain of fused multiply-adds over the positions in order, starting
//! from zero: exactly the AVX2 kernel's chain for that lane (it too keeps one accumulator lane
//! per output lane and adds the positions in order). Lanes are independent, so grouping 16 of
//! them in a register, or four queries in a pass, changes no rounding: a model's attention is
//! the same bits on a CPU with AVX-512 as on one without, and a query's result does not depend
//! on which others it is computed with.
//!
//! Compiled for AVX-512 F and reached only after run-time detection ([`supported`]).

// The loops index several arrays (accumulators, value vectors, outputs) with one index.
#![allow(clippy::needless_range_loop)]

use core::arch::x86_64::*;

use super::avx512_activation::exp16;

/// Lanes of a register.
const LANES: usize = 16;
/// Columns of one pass: four registers per query, so that four queries (16 accumulators) and
/// the four value vectors fit the 32 registers.
const CHUNK: usize = 4 * LANES;

/// Whether this CPU has AVX-512 F.
pub(crate) fn supported() -> bool {
    std::arch::is_x86_feature_detected!("avx512f")
}

/// Positions ahead of the one being summed whose values are prefetched into L1. With this and
/// the key tiles' prefetch in [`attention_scores_tiled`], SmolLM2-135M Q4_1 on the 2-core Xeon,
/// 2 threads, `cargo xtask bench-cpu --quantized-only` with the binaries taking turns (after,
/// before, three times): decoding after 768 tokens of context 142.8, 135.9 and 142.4 tokens/s
/// against 125.2, 130.2 and 125.1; a single-position pass there 6.88–7.12 ms against
/// 7.25–7.56.
const VALUE_PREFETCH: usize = 8;

/// Tiles of scores computed together for a pair of queries.
const TILES: usize = 2;

/// `scores[i·row + j] = scale · (query_i · key_j)` for `j < counts[i]` (nothing else is
/// written), the keys read from tiles: tile `t`'s dimension `d` at `tiles[base + t·tile_stride +
/// d·16..][..16]`, lanes the positions `16t..16t + 16`. The same bits as
/// [`super::avx2::attention_scores_multi`] (see the module docs).
///
/// # Panics
/// When the CPU lacks AVX-512 F, `width` is not a multiple of 16, or a query, score or tile
/// lies outside its slice.
#[allow(clippy::too_many_arguments)]
pub(crate) fn attention_scores_tiled(
    queries: &[f32],
    width: usize,
    counts: &[usize],
    tiles: &[f32],
    base: usize,
    tile_stride: usize,
    scale: f32,
    scores: &mut [f32],
    row: usize,
) {
    let n = counts.len();
    let most = counts.iter().copied().max().unwrap_or(0);
    assert!(width.is_multiple_of(LANES) && supported(), "avx512 attention_scores_tiled: unchecked call");
    assert!(queries.len() >= n * width && most <= row && scores.len() >= n * row, "scores or queries too short");
    let last_tile = most.div_ceil(LANES);
    assert!(most == 0 || base + (last_tile - 1) * tile_stride + width * LANES <= tiles.len(), "key tiles out of range");
    // Tiles outside, queries inside: a pair of tiles (8 KB at 64-wide heads) is read from the
    // L2 cache once and then from L1 by every pair of queries. With the queries outside, each
    // pair of queries streamed the whole span's tiles from L2 again: 0.67-0.84 of the time
    // with the tiles outside (12 and 24 queries over 768 positions, one thread, in-process).
    for t0 in (0..last_tile).step_by(TILES) {
        // The next pair of tiles into L1 while this one is scored (each tile of a head is a
        // 4 KB page of its own, where the hardware prefetchers start cold).
        for k in t0 + TILES..(t0 + 2 * TILES).min(last_tile) {
            let next = tiles[base + k * tile_stride..].as_ptr();
            for line in (0..width * LANES).step_by(16) {
                // SAFETY: SSE is part of x86-64; a prefetch reads nothing.
                unsafe { _mm_prefetch::<_MM_HINT_T0>(next.wrapping_add(line).cast::<i8>()) };
            }
        }
        let mut first = 0;
        while first < n {
            let group = (n - first).min(2);
            // SAFETY: AVX-512 F available; the queries, their score rows and every tile below
            // the largest count are in bounds (asserted above).
            unsafe {
                if group == 2 {
                    scores_group::<2>(queries, width, counts, tiles, base, tile_stride, scale, scores, row, first, t0);
                } else {
                    scores_group::<1>(queries, width, counts, tiles, base, tile_stride, scale, scores, row, first, t0);
                }
            }
            first += group;
        }
    }
}

/// Queries `first..first + G` of [`attention_scores_tiled`] over tiles `t0..t0 + TILES` (those
/// that one of them sees).
///
/// # Safety
/// The checks of [`attention_scores_tiled`], and `first + G ≤ counts.len()`.
#[allow(clippy::too_many_arguments)]
#[target_feature(enable = "avx512f")]
unsafe fn scores_group<const G: usize>(
    queries: &[f32],
    width: usize,
    counts: &[usize],
    tiles: &[f32],
    base: usize,
    tile_stride: usize,
    scale: f32,
    scores: &mut [f32],
    row: usize,
    first: usize,
    t0: usize,
) {
    let counts: [usize; G] = core::array::from_fn(|g| counts[first + g]);
    let q: [*const f32; G] = core::array::from_fn(|g| queries[(first + g) * width..].as_ptr());
    let needed = counts.iter().copied().max().unwrap_or(0).div_ceil(LANES);
    let scale = _mm512_set1_ps(scale);
    if t0 < needed {
        let in_flight = (needed - t0).min(TILES);
        // SAFETY (the block): tiles t0..t0 + in_flight lie inside `tiles` and the query
        // elements inside `queries` (the contract).
        let t = unsafe { tiles.as_ptr().add(base + t0 * tile_stride) };
        // The chains of dimensions ≡ 0..4 (mod 8), reduced to ((c0 + c1) + (c2 + c3)), then
        // those of 4..8, reduced likewise: sixteen accumulators at a time.
        // SAFETY: as above.
        let low = unsafe { half_chains::<G, 0>(q, t, tile_stride, width, in_flight) };
        let high = unsafe { half_chains::<G, 4>(q, t, tile_stride, width, in_flight) };
        for g in 0..G {
            for k in 0..in_flight {
                let start = (t0 + k) * LANES;
                let valid = counts[g].saturating_sub(start).min(LANES);
                if valid > 0 {
                    let mask: __mmask16 = if valid == LANES { !0 } else { (1u16 << valid) - 1 };
                    let score = _mm512_mul_ps(_mm512_add_ps(low[g][k], high[g][k]), scale);
                    // SAFETY: the masked lanes are positions below query g's count, inside its
                    // score row.
                    unsafe { _mm512_mask_storeu_ps(scores.as_mut_ptr().add((first + g) * row + start), mask, score) };
                }
            }
        }
    }
}

/// For each query `g` and tile `k < in_flight`: the chains `c_l = Σ_m q[8m + l] · key[8m + l]`
/// (fused multiply-adds in order of `m`, from zero) for `l = L..L + 4`, 16 positions per
/// register, reduced to `(c_L + c_{L+1}) + (c_{L+2} + c_{L+3})`.
///
/// # Safety
/// AVX-512 F available; `q[g] + width` readable, and `t + k·tile_stride + width·16` for every
/// `k < in_flight`.
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn half_chains<const G: usize, const L: usize>(
    q: [*const f32; G],
    t: *const f32,
    tile_stride: usize,
    width: usize,
    in_flight: usize,
) -> [[__m512; TILES]; G] {
    let mut acc = [[[_mm512_setzero_ps(); 4]; TILES]; G];
    for m in (0..width).step_by(8) {
        for l in 0..4 {
            let d = m + L + l;
            // SAFETY: d < width, inside the query and every tile in flight (the contract).
            unsafe {
                let qd: [__m512; G] = core::array::from_fn(|g| _mm512_set1_ps(*q[g].add(d)));
                for k in 0..TILES {
                    if k < in_flight {
                        let keys = _mm512_loadu_ps(t.add(k * tile_stride + d * LANES));
                        for g in 0..G {
                            acc[g][k][l] = _mm512_fmadd_ps(qd[g], keys, acc[g][k][l]);
                        }
                    }
                }
            }
        }
    }
    core::array::from_fn(|g| {
        core::array::from_fn(|k| {
            let [c0, c1, c2, c3] = acc[g][k];
            _mm512_add_ps(_mm512_add_ps(c0, c1), _mm512_add_ps(c2, c3))
        })
    })
}

/// `out[i·width..][..width] = Σ_{j < counts[i]} weights[i·row + j] · value_j`, value `j` being
/// `values[offset + j·stride..][..width]`: [`super::avx2::attention_sum_multi`]'s contract and
/// bits, four queries per pass over the values.
///
/// # Panics
/// When the CPU lacks AVX-512 F, `width` is not a multiple of 16, or a weight, output or value
/// lies outside its slice (the caller's shapes are wrong).
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
    assert!(width.is_multiple_of(LANES) && supported(), "avx512 attention_sum_multi: unchecked call");
    assert!(out.len() >= n * width && most <= row && weights.len() >= n * row, "weights or output too short");
    assert!(most == 0 || offset + (most - 1) * stride + width <= values.len(), "values out of range");
    let mut first = 0;
    while first < n {
        let group = (n - first).min(4);
        // SAFETY: AVX-512 F available; every read and write is in bounds (asserted above:
        // query `first + g`'s weights lie inside `weights`, its output inside `out`, and every
        // value below the largest count inside `values`).
        unsafe {
            match group {
                1 => sum_group::<1>(weights, row, counts, values, offset, stride, width, out, first),
                2 => sum_group::<2>(weights, row, counts, values, offset, stride, width, out, first),
                3 => sum_group::<3>(weights, row, counts, values, offset, stride, width, out, first),
                _ => sum_group::<4>(weights, row, counts, values, offset, stride, width, out, first),
            }
        }
        first += group;
    }
}

/// Queries `first..first + G` of [`attention_sum_multi`], `CHUNK` columns at a time (the last
/// chunk of a width that is not a multiple of 64 with fewer registers).
///
/// # Safety
/// The checks of [`attention_sum_multi`], and `first + G ≤ counts.len()`.
#[allow(clippy::too_many_arguments)]
#[target_feature(enable = "avx512f")]
unsafe fn sum_group<const G: usize>(
    weights: &[f32],
    row: usize,
    counts: &[usize],
    values: &[f32],
    offset: usize,
    stride: usize,
    width: usize,
    out: &mut [f32],
    first: usize,
) {
    let counts: [usize; G] = core::array::from_fn(|g| counts[first + g]);
    let w: [*const f32; G] = core::array::from_fn(|g| weights[(first + g) * row..].as_ptr());
    let most = counts.iter().copied().max().unwrap_or(0);
    // Positions every query of the group sees (all but a draft's last few rows' extra ones).
    let shared = counts.iter().copied().min().unwrap_or(0);
    for chunk in (0..width).step_by(CHUNK) {
        let regs = ((width - chunk) / LANES).min(4);
        // SAFETY (the block): value j's columns `chunk .. chunk + 16·regs` lie inside `values`
        // for j < most, and the weights of query g below counts[g] inside `weights` (the
        // contract); the outputs below lie inside `out`.
        unsafe {
            let v = values.as_ptr().add(offset + chunk);
            let zero = [[_mm512_setzero_ps(); 4]; G];
            let acc = match regs {
                // A whole chunk: the positions every query sees without a test per position
                // and query (the tests and the loops over a register count known only at run
                // time had this kernel at 40% of a 12-query span's time), then the rest.
                4 => {
                    let acc = add_weighted::<G, 4, false>(zero, v, stride, w, counts, 0..shared);
                    add_weighted::<G, 4, true>(acc, v, stride, w, counts, shared..most)
                }
                3 => add_weighted::<G, 3, true>(zero, v, stride, w, counts, 0..most),
                2 => add_weighted::<G, 2, true>(zero, v, stride, w, counts, 0..most),
                _ => add_weighted::<G, 1, true>(zero, v, stride, w, counts, 0..most),
            };
            for g in 0..G {
                let o = out.as_mut_ptr().add((first + g) * width + chunk);
                for l in 0..regs {
                    _mm512_storeu_ps(o.add(l * LANES), acc[g][l]);
                }
            }
        }
    }
}

/// `acc[g][l] += w_g[j] · v_j[16l..16l + 16]` for `l < R` and every position `j` of
/// `positions` in order, one fused multiply-add per lane, value `j` at `v + j·stride`; with
/// `CHECKED`, only for the queries `g` with `j < counts[g]` (without, every query sees every
/// position of the range). Registers `R..4` are left alone.
///
/// # Safety
/// AVX-512 F available; `v + j·stride + 16·R` readable for every `j` of the range, and
/// `w[g] + j` for every query that the range's positions are added to.
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn add_weighted<const G: usize, const R: usize, const CHECKED: bool>(
    mut acc: [[__m512; 4]; G],
    v: *const f32,
    stride: usize,
    w: [*const f32; G],
    counts: [usize; G],
    positions: std::ops::Range<usize>,
) -> [[__m512; 4]; G] {
    for j in positions {
        // SAFETY: inside `values` and the weights (the contract); a prefetch reads nothing.
        unsafe {
            for l in 0..R {
                _mm_prefetch::<_MM_HINT_T0>(v.wrapping_add((j + VALUE_PREFETCH) * stride + l * LANES).cast::<i8>());
            }
            let vs: [__m512; R] = core::array::from_fn(|l| _mm512_loadu_ps(v.add(j * stride + l * LANES)));
            for g in 0..G {
                if !CHECKED || j < counts[g] {
                    let wj = _mm512_set1_ps(*w[g].add(j));
                    for l in 0..R {
                        acc[g][l] = _mm512_fmadd_ps(wj, vs[l], acc[g][l]);
                    }
                }
            }
        }
    }
    acc
}

/// [`super::avx2::softmax_numerators`] with the exponentials sixteen lanes at a time: the same
/// maximum, the same operations per lane ([`exp16`] is [`super::avx2`]'s `exp8` lane for
/// lane), and the same sum, each sixteen numerators added to the eight running lane sums as
/// its two halves of eight, in order, exactly where the AVX2 code adds two groups of eight.
/// So the weights, and the model's logits, keep the AVX2 kernel's bits. `perf` on
/// `cargo bench --bench attention` had the eight-lane softmax at 19% of a 12-query span.
///
/// # Panics
/// When the CPU lacks AVX-512 F or AVX2/FMA/F16C.
pub(crate) fn softmax_numerators(scores: &mut [f32]) -> (f32, f32) {
    assert!(super::avx512_activation::supported(), "avx512 softmax_numerators: unchecked call");
    // SAFETY: AVX-512 F and AVX2/FMA/F16C checked just above.
    unsafe { softmax_impl(scores) }
}

/// # Safety
/// AVX-512 F and AVX2/FMA/F16C available.
#[target_feature(enable = "avx512f,avx2,fma,f16c")]
unsafe fn softmax_impl(scores: &mut [f32]) -> (f32, f32) {
    // SAFETY: AVX2 available (the contract).
    let max = unsafe { super::avx2::largest(scores) };
    let m = _mm512_set1_ps(max);
    let mut acc = _mm256_setzero_ps();
    let mut sixteens = scores.chunks_exact_mut(2 * 8);
    for chunk in &mut sixteens {
        // SAFETY: `chunk` holds sixteen floats.
        unsafe {
            let e = exp16(_mm512_sub_ps(_mm512_loadu_ps(chunk.as_ptr()), m));
            _mm512_storeu_ps(chunk.as_mut_ptr(), e);
            acc = _mm256_add_ps(acc, _mm512_castps512_ps256(e));
            acc = _mm256_add_ps(acc, _mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(_mm512_castps_pd(e))));
        }
    }
    // SAFETY: AVX2/FMA/F16C available (the contract).
    let total = unsafe { super::avx2::numerators_from(sixteens.into_remainder(), max, acc) };
    (max, total)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A repeatable stream of floats in `[-1, 1)`.
    fn uniform(mut seed: u64) -> impl FnMut() -> f32 {
        move || {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((seed >> 33) as f32 / (1u64 << 31) as f32) * 2.0 - 1.0
        }
    }

    #[test]
    fn the_softmax_is_the_avx2_softmax_bit_for_bit() {
        if !supported() || !super::super::avx2::supported() {
            return;
        }
        let mut next = uniform(23);
        // Lengths around multiples of 8 and 16 (odd numbers of eights go to the AVX2 tail),
        // scores spread wide enough to reach the exponential's clamp, and special values.
        for len in (0..70).chain([127, 128, 129, 768, 769]) {
            for spread in [1.0f32, 30.0, 200.0] {
                let scores: Vec<f32> = (0..len).map(|_| next() * spread).collect();
                let (mut wide, mut narrow) = (scores.clone(), scores.clone());
                let (wm, wt) = softmax_numerators(&mut wide);
                let (nm, nt) = super::super::avx2::softmax_numerators(&mut narrow);
                assert_eq!((wm.to_bits(), wt.to_bits()), (nm.to_bits(), nt.to_bits()), "length {len}");
                assert!(wide.iter().zip(&narrow).all(|(a, b)| a.to_bits() == b.to_bits()), "length {len}");
            }
        }
        let mut special = vec![0.5f32, f32::NEG_INFINITY, -100.0, 3.0, f32::NAN, 1e-30, -0.0, 2.0];
        special.extend((0..20).map(|i| i as f32 * -9.0));
        let (mut wide, mut narrow) = (special.clone(), special.clone());
        let (wm, wt) = softmax_numerators(&mut wide);
        let (nm, nt) = super::super::avx2::softmax_numerators(&mut narrow);
        assert_eq!((wm.to_bits(), wt.to_bits()), (nm.to_bits(), nt.to_bits()));
        assert!(wide.iter().zip(&narrow).all(|(a, b)| a.to_bits() == b.to_bits()));
    }

    #[test]
    fn a_softmax_summed_sixteen_lanes_wide_would_differ_in_its_last_bits() {
        // The test above can fail: the same numerators summed in sixteen lanes (each lane one
        // chain over every other group of eight) round differently from the eight-lane order.
        let mut next = uniform(29);
        let differs = (0..20).any(|_| {
            let e: Vec<f32> = (0..768).map(|_| next().abs()).collect();
            let eight: f32 = (0..8).map(|l| e.iter().skip(l).step_by(8).fold(0.0f32, |a, &x| a + x)).sum();
            let sixteen: f32 = (0..16).map(|l| e.iter().skip(l).step_by(16).fold(0.0f32, |a, &x| a + x)).sum();
            eight.to_bits() != sixteen.to_bits()
        });
        assert!(differs);
    }

    #[test]
    fn the_sums_are_the_avx2_kernels_bits_for_any_grouping() {
        if !supported() || !super::super::avx2::supported() {
            return;
        }
        let mut next = uniform(41);
        // Query counts that make groups of 4, 3, 2 and 1; widths of one, four and five
        // registers (a chunk of 64 and a tail of 16); causal counts and equal ones.
        for (width, counts) in [
            (64, vec![100, 100, 100, 101, 101, 101, 102, 102, 102]),
            (64, vec![7]),
            (16, vec![3, 9]),
            (80, vec![30, 31, 32, 33, 34]),
            (64, (0..24).map(|i| 120 + i / 3).collect::<Vec<_>>()),
            (64, vec![0, 5, 0]),
        ] {
            let (n, stride, row) = (counts.len(), width * 3, 140);
            let most = counts.iter().copied().max().unwrap();
            let values: Vec<f32> = (0..stride * most.max(1)).map(|_| next()).collect();
            let weights: Vec<f32> = (0..n * row).map(|_| next().abs()).collect();
            let mut wide = vec![f32::NAN; n * width];
            attention_sum_multi(&weights, row, &counts, &values, width, stride, width, &mut wide);
            let mut narrow = vec![f32::NAN; n * width];
            super::super::avx2::attention_sum_multi(&weights, row, &counts, &values, width, stride, width, &mut narrow);
            assert!(
                wide.iter().zip(&narrow).all(|(a, b)| a.to_bits() == b.to_bits()),
                "width {width}, counts {counts:?}"
            );
            // Each query alone gives the same bits as in its group.
            for i in 0..n {
                let mut alone = vec![f32::NAN; width];
                let w = &weights[i * row..(i + 1) * row];
                attention_sum_multi(w, row, &counts[i..=i], &values, width, stride, width, &mut alone);
                assert!(alone.iter().zip(&wide[i * width..]).all(|(a, b)| a.to_bits() == b.to_bits()));
            }
        }
    }

    #[test]
    fn tiled_scores_are_the_avx2_kernels_bits_whatever_the_grouping() {
        if !supported() || !super::super::avx2::supported() {
            return;
        }
        let mut next = uniform(5);
        // Counts within a tile, on, across and well past tile boundaries, odd and even numbers
        // of queries, widths of one to four 16-lane registers.
        for (width, heads, head, counts) in [
            (64, 3, 1, vec![1, 2, 3]),
            (64, 3, 2, vec![16, 16, 17]),
            (16, 1, 0, vec![130, 129]),
            (64, 2, 0, (0..18).map(|i| 100 + i / 3).collect::<Vec<_>>()),
            (32, 3, 0, vec![0, 40, 0, 7, 200]),
            (48, 1, 0, vec![33]),
        ] {
            let n = counts.len();
            let most = counts.iter().copied().max().unwrap();
            let kv_width = heads * width;
            let keys: Vec<f32> = (0..most * kv_width).map(|_| next()).collect();
            let mut tiles = Vec::new();
            crate::write_key_tiles(&mut tiles, 0, &keys, heads, width);
            let queries: Vec<f32> = (0..n * width).map(|_| next()).collect();
            let (tile_stride, base, row) = (kv_width * LANES, head * width * LANES, most.max(1));
            let mut scores = vec![f32::NAN; n * row];
            attention_scores_tiled(&queries, width, &counts, &tiles, base, tile_stride, 0.125, &mut scores, row);
            let mut narrow = vec![f32::NAN; n * row];
            let offset = head * width;
            super::super::avx2::attention_scores_multi(
                &queries,
                width,
                &counts,
                &keys,
                offset,
                kv_width,
                0.125,
                &mut narrow,
                row,
            );
            for (i, &count) in counts.iter().enumerate() {
                let (got, want) = (&scores[i * row..(i + 1) * row], &narrow[i * row..(i + 1) * row]);
                for j in 0..count {
                    assert_eq!(got[j].to_bits(), want[j].to_bits(), "width {width}, query {i}, position {j}");
                }
                assert!(got[count..].iter().all(|s| s.is_nan()), "query {i}: a position past its count was written");
                // Alone, the same bits.
                let q = &queries[i * width..(i + 1) * width];
                let mut alone = vec![f32::NAN; row];
                attention_scores_tiled(q, width, &counts[i..=i], &tiles, base, tile_stride, 0.125, &mut alone, row);
                assert!(alone[..count].iter().zip(got).all(|(a, b)| a.to_bits() == b.to_bits()));
            }
        }
    }

    #[test]
    fn a_single_chain_per_score_would_differ_from_the_avx2_bits() {
        // The test above can fail: one chain over the dimensions in order (another correct
        // way to sum the same products) rounds differently from the eight-chain order.
        let mut next = uniform(11);
        let width = 64;
        let differs = (0..50).any(|_| {
            let q: Vec<f32> = (0..width).map(|_| next()).collect();
            let k: Vec<f32> = (0..width).map(|_| next()).collect();
            let single = q.iter().zip(&k).fold(0.0f32, |acc, (&a, &b)| a.mul_add(b, acc));
            let c: Vec<f32> =
                (0..8).map(|l| (l..width).step_by(8).fold(0.0f32, |acc, d| q[d].mul_add(k[d], acc))).collect();
            let eight = ((c[0] + c[1]) + (c[2] + c[3])) + ((c[4] + c[5]) + (c[6] + c[7]));
            single.to_bits() != eight.to_bits()
        });
        assert!(differs);
    }

    #[test]
    fn tiles_written_in_several_appends_equal_one_write() {
        let mut next = uniform(9);
        let (heads, width) = (3, 16);
        let keys: Vec<f32> = (0..37 * heads * width).map(|_| next()).collect();
        let mut once = Vec::new();
        crate::write_key_tiles(&mut once, 0, &keys, heads, width);
        let mut pieces = Vec::new();
        for (first, last) in [(0, 5), (5, 16), (16, 17), (17, 37)] {
            crate::write_key_tiles(
                &mut pieces,
                first,
                &keys[first * heads * width..last * heads * width],
                heads,
                width,
            );
        }
        assert_eq!(once, pieces);
        assert_eq!(once.len(), crate::key_tiles_len(37, heads, width));
        // Position 20 (tile 1, lane 4), head 2, dimension 5.
        let (position, tile, lane) = (20, 1, 4);
        assert_eq!(once[((tile * heads + 2) * width + 5) * 16 + lane], keys[(position * heads + 2) * width + 5]);
    }

    #[test]
    fn a_sum_in_another_order_would_differ_in_its_last_bits() {
        // The test above can fail: adding the positions in reverse order (same terms) rounds
        // differently, so bit equality is a real constraint and not a tautology.
        if !supported() {
            return;
        }
        let mut next = uniform(7);
        let (width, count) = (16, 200);
        let values: Vec<f32> = (0..width * count).map(|_| next()).collect();
        let weights: Vec<f32> = (0..count).map(|_| next().abs()).collect();
        let mut out = vec![0.0; width];
        attention_sum_multi(&weights, count, &[count], &values, 0, width, width, &mut out);
        let reversed: Vec<f32> = (0..width)
            .map(|l| (0..count).rev().fold(0.0f32, |acc, j| weights[j].mul_add(values[j * width + l], acc)))
            .collect();
        let forward: Vec<f32> = (0..width)
            .map(|l| (0..count).fold(0.0f32, |acc, j| weights[j].mul_add(values[j * width + l], acc)))
            .collect();
        assert!(out.iter().zip(&forward).all(|(a, b)| a.to_bits() == b.to_bits()), "the kernel is the ordered chain");
        assert!(out.iter().zip(&reversed).any(|(a, b)| a.to_bits() != b.to_bits()), "the order shows in the bits");
    }
}
