//! The AVX-512 kernel of f32 weight rows (f32 checkpoints, and f16/bf16 ones, which are widened
//! to f32 at load): two weight rows at a time against all `M` activation rows, 16 lanes per
//! instruction.
//!
//! # Why
//!
//! Scoring a draft of k positions on an f32 model reads the weights once (4 bytes each, memory
//! bound at k = 1) and does k multiply-adds per weight. [`super::avx2`]'s row kernel applies each
//! 8-lane weight vector to the k activation rows in turn: one load of an activation vector per
//! multiply-add, eight lanes each. Here a 16-lane activation vector, once loaded, meets the same
//! columns of two weight rows (two multiply-adds per load), and each instruction does twice the
//! lanes. Measured on SmolLM2-135M converted to f32 (`cargo xtask bench-cpu`, which on such a CPU
//! runs the AVX2 kernel beside it in the same run), one thread: a single position 54.0 → 41.5 ms
//! (memory bound: 10 → 13 GB/s) and six positions 87.5 → 74.6 ms.
//!
//! # The same sums whatever M
//!
//! Every output (weight row `j`, activation row `i`) is accumulated in two 16-lane registers, one
//! for the even and one for the odd 16-column chunk of each 32 columns, the last partial chunk
//! masked, and reduced the same way at the end. Nothing in that order depends on `M` or on which
//! row a weight row is paired with, so a position's logits are bit for bit the same whether it
//! is scored alone or inside a draft: greedy verification then accepts exactly the tokens that
//! plain decoding would have produced. (The order differs from the AVX2 kernel's, so an f32 model
//! rounds differently, in its last bits, on a CPU with AVX-512 than on one without.)
//!
//! Compiled for AVX-512 F and reached only through `Kernel::Avx512Q8`, which the crate hands
//! out after run-time detection.

// The loops index several arrays (accumulators, weight vectors, outputs) with one index.
#![allow(clippy::needless_range_loop)]

use core::arch::x86_64::*;

use crate::matrix::{RowRef, Rows};

/// Lanes of a register.
const LANES: usize = 16;

/// For every output `j` of `rows`: `outs[i][j - rows.start] = Σ_k W[row j, k] · x[i*cols + k]`
/// (`outs.len()` ≤ 8). Returns `false`, having written nothing, unless the rows are f32 rows of
/// `cols` values, `x` holds the activation rows and the CPU has AVX-512 F.
pub(crate) fn dot_rows(rows: Rows<'_>, x: &[f32], cols: usize, outs: &mut [&mut [f32]]) -> bool {
    let m = outs.len();
    let rows_ok = (rows.start..rows.end).all(|j| matches!(rows.get(j), RowRef::F32(w) if w.len() >= cols));
    let outs_ok = outs.iter().all(|o| o.len() >= rows.end - rows.start);
    if m == 0 || m > 8 || x.len() < m * cols || !rows_ok || !outs_ok || !supported() {
        return false;
    }
    // SAFETY: AVX-512 F available, every row holds `cols` weights, x holds m rows and every
    // output slice the range (all checked just above).
    unsafe {
        match m {
            1 => pairs::<1, 2>(rows, x, cols, outs),
            2 => pairs::<2, 2>(rows, x, cols, outs),
            3 => pairs::<3, 2>(rows, x, cols, outs),
            4 => pairs::<4, 2>(rows, x, cols, outs),
            5 => pairs::<5, 2>(rows, x, cols, outs),
            6 => pairs::<6, 2>(rows, x, cols, outs),
            // Two weight rows against 7 or 8 activation rows would need more accumulators than
            // the 32 registers: the pair meets the first four rows, then (from L1) the others.
            7 => split::<3>(rows, x, cols, outs),
            _ => split::<4>(rows, x, cols, outs),
        }
    }
    true
}

pub(crate) fn supported() -> bool {
    std::arch::is_x86_feature_detected!("avx512f")
}

/// How far ahead of the columns being multiplied each weight row is prefetched, in floats
/// (4 KB: a row and a half of a 576-wide layer, so the next pair's rows are on their way while
/// this pair is summed). Measured with `cargo xtask bench-cpu` on SmolLM2-135M converted to f32
/// (2 threads; 538 MB of weights, more than the L3 cache): k = 6 cost 1.52 → 1.11 of a
/// single-position pass, f16 (widened at load) 1.54 → 1.26. Without it a pass of several rows
/// keeps the core busy with multiply-adds and the hardware prefetchers fall behind the stream.
const PREFETCH_FLOATS: usize = 1024;

/// How far ahead each weight row is also prefetched into L2, in floats (see
/// [`super::avx512_q8_groups::L2_PREFETCH_BYTES`] for why). SmolLM2-135M converted to f32
/// (538 MB, more than the L3), 2 threads, `cargo xtask bench-cpu` with the binaries taking
/// turns (after, before, after, before): decoding 51.2 and 52.6 tokens/s against 49.9 and 50.5.
const L2_PREFETCH_FLOATS: usize = 4096;

/// The weights of output `j`, which [`dot_rows`] checked to be an f32 row of `cols` values.
fn row_ptr(rows: &Rows<'_>, j: usize) -> *const f32 {
    match rows.get(j) {
        RowRef::F32(w) => w.as_ptr(),
        RowRef::Blocks(_) => unreachable!("f32 kernel given a block row"),
    }
}

/// `R` weight rows at a time (the last one alone when the range is odd), each against the `M`
/// activation rows.
///
/// # Safety
/// AVX-512 F available; every row of `rows` holds at least `cols` f32 weights; `x.len() ≥ M·cols`;
/// `outs.len() == M`, each holding `rows.end − rows.start` values.
#[target_feature(enable = "avx512f")]
unsafe fn pairs<const M: usize, const R: usize>(rows: Rows<'_>, x: &[f32], cols: usize, outs: &mut [&mut [f32]]) {
    let weights = |j: usize| row_ptr(&rows, j);
    let mut j = rows.start;
    while j < rows.end {
        let n = R.min(rows.end - j);
        // A lone last row is computed twice (in both halves of the pair) and kept once.
        let mut w = [weights(j); R];
        for (r, w) in w.iter_mut().enumerate().take(n).skip(1) {
            *w = weights(j + r);
        }
        // SAFETY: per the function's contract (w[r] holds cols weights, x M rows of cols).
        let sums = unsafe { block::<M, R>(&w, x.as_ptr(), cols) };
        for (r, sums) in sums.iter().enumerate().take(n) {
            for (out, &s) in outs.iter_mut().zip(sums.iter()) {
                out[j + r - rows.start] = s;
            }
        }
        j += n;
    }
}

/// [`pairs`] for `4 + REST` activation rows: each pair of weight rows against rows 0..4, then
/// against the `REST` others while the pair is still in L1.
///
/// # Safety
/// As for [`pairs`] with `M = 4 + REST`.
#[target_feature(enable = "avx512f")]
unsafe fn split<const REST: usize>(rows: Rows<'_>, x: &[f32], cols: usize, outs: &mut [&mut [f32]]) {
    let weights = |j: usize| row_ptr(&rows, j);
    let (head, tail) = outs.split_at_mut(4);
    let mut j = rows.start;
    while j < rows.end {
        let n = 2.min(rows.end - j);
        let w = [weights(j), weights(j + n - 1)];
        // SAFETY: per the function's contract: x holds 4 + REST rows of cols values.
        let (first, rest) =
            unsafe { (block::<4, 2>(&w, x.as_ptr(), cols), block::<REST, 2>(&w, x.as_ptr().add(4 * cols), cols)) };
        for r in 0..n {
            for (out, &s) in head.iter_mut().zip(first[r].iter()) {
                out[j + r - rows.start] = s;
            }
            for (out, &s) in tail.iter_mut().zip(rest[r].iter()) {
                out[j + r - rows.start] = s;
            }
        }
        j += n;
    }
}

/// `[r][i] = Σ_k w[r][k] · x[i·cols + k]`.
///
/// # Safety
/// AVX-512 F available; each `w[r]` points at `cols` readable f32; `x` at `M·cols`.
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn block<const M: usize, const R: usize>(w: &[*const f32; R], x: *const f32, cols: usize) -> [[f32; M]; R] {
    // [r][i][u]: u = 0 takes the even 16-column chunks, u = 1 the odd ones.
    let mut acc = [[[_mm512_setzero_ps(); 2]; M]; R];
    let mut k = 0;
    // SAFETY (whole body): every load reads columns k..k + 16 (or the masked ones below cols)
    // of a weight row or an activation row, inside the lengths of the contract.
    unsafe {
        while k + 2 * LANES <= cols {
            for u in 0..2 {
                let c = k + u * LANES;
                // One 64-byte line per row and chunk: the line PREFETCH_FLOATS ahead (past the
                // row's end it is the next rows', or beyond the matrix, which a prefetch
                // ignores; wrapping_add keeps that address out of pointer arithmetic's rules).
                for r in 0..R {
                    _mm_prefetch::<_MM_HINT_T0>(w[r].wrapping_add(c + PREFETCH_FLOATS).cast::<i8>());
                    _mm_prefetch::<_MM_HINT_T1>(w[r].wrapping_add(c + L2_PREFETCH_FLOATS).cast::<i8>());
                }
                let wv: [__m512; R] = core::array::from_fn(|r| _mm512_loadu_ps(w[r].add(c)));
                for i in 0..M {
                    let xv = _mm512_loadu_ps(x.add(i * cols + c));
                    for r in 0..R {
                        acc[r][i][u] = _mm512_fmadd_ps(wv[r], xv, acc[r][i][u]);
                    }
                }
            }
            k += 2 * LANES;
        }
        // The last columns: at most one full chunk (an even one) and one partial chunk, masked
        // (written out twice with a constant `u`: a variable index would keep the
        // accumulators in memory, a store after every multiply-add of the main loop).
        if k < cols {
            let take = (cols - k).min(LANES);
            masked::<M, R, 0>(&mut acc, w, x, cols, k, take);
            k += take;
        }
        if k < cols {
            masked::<M, R, 1>(&mut acc, w, x, cols, k, cols - k);
        }
    }
    let mut sums = [[0.0f32; M]; R];
    for r in 0..R {
        for i in 0..M {
            sums[r][i] = _mm512_reduce_add_ps(_mm512_add_ps(acc[r][i][0], acc[r][i][1]));
        }
    }
    sums
}

/// `acc[r][i][U] += w[r][k..k + take] · x[i·cols + k..][..take]`, the other lanes zero.
///
/// # Safety
/// AVX-512 F available; `take ≤ 16`; columns `k..k + take` readable in each `w[r]` and each of
/// the `M` rows of `x`.
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn masked<const M: usize, const R: usize, const U: usize>(
    acc: &mut [[[__m512; 2]; M]; R],
    w: &[*const f32; R],
    x: *const f32,
    cols: usize,
    k: usize,
    take: usize,
) {
    let mask: __mmask16 = if take >= LANES { u16::MAX } else { (1u16 << take) - 1 };
    // SAFETY: the masked loads read columns k..k + take only, inside the contract's lengths.
    unsafe {
        let wv: [__m512; R] = core::array::from_fn(|r| _mm512_maskz_loadu_ps(mask, w[r].add(k)));
        for i in 0..M {
            let xv = _mm512_maskz_loadu_ps(mask, x.add(i * cols + k));
            for r in 0..R {
                acc[r][i][U] = _mm512_fmadd_ps(wv[r], xv, acc[r][i][U]);
            }
        }
    }
}
