//! The AVX-512 kernel of the panel layout ([`crate::panels`]): per panel of sixteen weight rows
//! and column, one load (f16 or bf16, widened in the register) and one multiply-add per
//! activation row, whose value of the column is broadcast from memory as the instruction's
//! operand. `M ≤ 8` activation rows keep two accumulators each (even and odd columns) in
//! registers, sixteen outputs per register.
//!
//! Bit for bit the portable kernel's sums ([`crate::panels::dot_panels`]: fused multiply-adds
//! in column order into the even and odd accumulators, then their sum), whatever `M` (tested).
//!
//! Compiled for AVX-512 F (plus F16C for the f16 widening) and reached only through
//! [`crate::Kernel::reads_panels`] kernels after run-time detection.

// The loops index the accumulators and the activation rows with one index.
#![allow(clippy::needless_range_loop)]

use core::arch::x86_64::*;
use std::ops::Range;

use crate::panels::{Element, PANEL, panel_bytes};

/// How far ahead of the column being multiplied the panel is prefetched, in bytes: the f32 row
/// kernel's 4 KB ([`super::avx512_f32`]), which kept the weight stream ahead of several
/// activation rows' multiply-adds (8 and 16 KB measured the same here).
const PREFETCH_BYTES: usize = 4096;

/// How far ahead the panel is also prefetched into L2 (see
/// [`super::avx512_q8_groups::L2_PREFETCH_BYTES`] for why). SmolLM2-135M widened to f16 at
/// load, 2 threads, `cargo xtask bench-cpu` with the binaries taking turns (after, before,
/// after, before): decoding 96.8 and 95.4 tokens/s against 91.7 and 88.0.
const L2_PREFETCH_BYTES: usize = 16384;

/// [`crate::panels::dot_panels`] on AVX-512. Returns `false`, having written nothing, when the
/// CPU lacks AVX-512 F/F16C, `M` is not 1..=8 or a length does not fit.
pub(crate) fn dot_panels(
    element: Element,
    data: &[u8],
    cols: usize,
    range: Range<usize>,
    x: &[f32],
    outs: &mut [&mut [f32]],
) -> bool {
    let m = outs.len();
    let fits = (1..=8).contains(&m)
        && range.start <= range.end
        && data.len() >= range.end.div_ceil(PANEL) * panel_bytes(cols)
        && x.len() >= m * cols
        && outs.iter().all(|o| o.len() >= range.len());
    if !fits || !supported() {
        return false;
    }
    if range.is_empty() {
        return true;
    }
    // SAFETY: features and lengths checked just above.
    unsafe {
        match element {
            Element::F16 => dispatch::<F16>(data, cols, range, x, outs),
            Element::BF16 => dispatch::<BF16>(data, cols, range, x, outs),
        }
    }
    true
}

pub(crate) fn supported() -> bool {
    std::arch::is_x86_feature_detected!("avx512f") && std::arch::is_x86_feature_detected!("f16c")
}

const F16: u8 = 0;
const BF16: u8 = 1;

/// # Safety
/// As for [`panels_of`].
#[target_feature(enable = "avx512f,f16c,fma,avx2")]
unsafe fn dispatch<const F: u8>(data: &[u8], cols: usize, range: Range<usize>, x: &[f32], outs: &mut [&mut [f32]]) {
    // SAFETY (every arm): as for this function.
    unsafe { super::for_row_count!(outs.len(), panels_of::<F>(data, cols, range, x, outs)) }
}

/// Column `k` of the panel at `panel`, widened to f32.
///
/// # Safety
/// AVX-512 F and F16C available; the column lies inside the panel.
#[inline]
#[target_feature(enable = "avx512f,f16c,fma,avx2")]
unsafe fn column<const F: u8>(panel: *const u8, k: usize) -> __m512 {
    // SAFETY: as for this function.
    unsafe {
        match F {
            F16 => _mm512_cvtph_ps(_mm256_loadu_si256(panel.add(k * PANEL * 2).cast())),
            _ => _mm512_castsi512_ps(_mm512_slli_epi32::<16>(_mm512_cvtepu16_epi32(_mm256_loadu_si256(
                panel.add(k * PANEL * 2).cast(),
            )))),
        }
    }
}

/// # Safety
/// AVX-512 F, F16C and FMA available; `data` holds the panels of `range` (`cols` columns of
/// element `F`), `x` holds `M` rows of `cols` values and each `outs[i]` `range.len()` values;
/// `outs.len() == M`.
#[inline]
#[target_feature(enable = "avx512f,f16c,fma,avx2")]
unsafe fn panels_of<const M: usize, const F: u8>(
    data: &[u8],
    cols: usize,
    range: Range<usize>,
    x: &[f32],
    outs: &mut [&mut [f32]],
) {
    // Two bytes a value (f16 or bf16).
    let size = 2;
    let bytes = PANEL * cols * size;
    // Columns per 64-byte line of the panel: one prefetch per line.
    let per_line = 64 / (PANEL * size);
    // SAFETY (whole body): panel p's columns lie at data + p·bytes + k·16·size for k < cols
    // (checked by the caller); x row i's values at xp + i·cols; outs[i] holds range.len()
    // values and lanes are written only for outputs inside the range.
    unsafe {
        let xp = x.as_ptr();
        for p in range.start / PANEL..range.end.div_ceil(PANEL) {
            let panel = data.as_ptr().add(p * bytes);
            let mut even = [_mm512_setzero_ps(); M];
            let mut odd = [_mm512_setzero_ps(); M];
            let mut k = 0;
            while k + 1 < cols {
                if k % per_line.max(1) == 0 {
                    _mm_prefetch::<_MM_HINT_T0>(panel.wrapping_add(k * PANEL * size + PREFETCH_BYTES).cast::<i8>());
                    _mm_prefetch::<_MM_HINT_T1>(panel.wrapping_add(k * PANEL * size + L2_PREFETCH_BYTES).cast::<i8>());
                }
                let w0 = column::<F>(panel, k);
                let w1 = column::<F>(panel, k + 1);
                for i in 0..M {
                    even[i] = _mm512_fmadd_ps(w0, _mm512_set1_ps(*xp.add(i * cols + k)), even[i]);
                    odd[i] = _mm512_fmadd_ps(w1, _mm512_set1_ps(*xp.add(i * cols + k + 1)), odd[i]);
                }
                k += 2;
            }
            if k < cols {
                let w0 = column::<F>(panel, k);
                for i in 0..M {
                    even[i] = _mm512_fmadd_ps(w0, _mm512_set1_ps(*xp.add(i * cols + k)), even[i]);
                }
            }
            // The lanes of this panel inside the range, at outs[i][first − range.start..].
            let first = (p * PANEL).max(range.start);
            let last = ((p + 1) * PANEL).min(range.end);
            for i in 0..M {
                let sum = _mm512_add_ps(even[i], odd[i]);
                let out = outs[i].as_mut_ptr().add(first - range.start);
                if last - first == PANEL {
                    _mm512_storeu_ps(out, sum);
                } else {
                    let mut lanes = [0.0f32; PANEL];
                    _mm512_storeu_ps(lanes.as_mut_ptr(), sum);
                    let lanes = &lanes[first - p * PANEL..last - p * PANEL];
                    core::ptr::copy_nonoverlapping(lanes.as_ptr(), out, lanes.len());
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::panels::{Element, pack};

    /// Against the portable kernel: bit for bit, every element, 1 to 8 rows, ranges that start
    /// and end inside a panel, odd and even column counts.
    #[test]
    fn equals_the_portable_kernel_bit_for_bit() {
        if !super::supported() {
            return; // no AVX-512 on this CPU: nothing to compare
        }
        let mut unit = crate::test_rng::unit(0x2545_F491_4F6C_DD1D);
        let mut next = move || unit() - 0.5;
        for element in [Element::F16, Element::BF16] {
            for cols in [33, 64] {
                let rows = 53;
                let w: Vec<f32> = (0..rows * cols)
                    .map(|_| {
                        let v = next();
                        match element {
                            Element::F16 => half::f16::from_f32(v).to_f32(),
                            Element::BF16 => half::bf16::from_f32(v).to_f32(),
                        }
                    })
                    .collect();
                let buf = pack(element, rows, cols, &w);
                for m in 1..=8 {
                    let x: Vec<f32> = (0..m * cols).map(|_| 4.0 * next()).collect();
                    for range in [0..rows, 16..48, 5..rows, 3..13, 0..1, 20..20] {
                        let mut a = vec![vec![f32::NAN; range.len()]; m];
                        let mut b = vec![vec![f32::NAN; range.len()]; m];
                        let mut outs_a: Vec<&mut [f32]> = a.iter_mut().map(|v| v.as_mut_slice()).collect();
                        let mut outs_b: Vec<&mut [f32]> = b.iter_mut().map(|v| v.as_mut_slice()).collect();
                        crate::panels::dot_panels(element, &buf, cols, range.clone(), &x, &mut outs_a);
                        assert!(super::dot_panels(element, &buf, cols, range.clone(), &x, &mut outs_b));
                        for i in 0..m {
                            for (j, (p, q)) in a[i].iter().zip(&b[i]).enumerate() {
                                assert_eq!(
                                    p.to_bits(),
                                    q.to_bits(),
                                    "{element:?} cols {cols} m={m} {range:?}: row {i} output {j}"
                                );
                            }
                        }
                    }
                }
            }
        }
    }
}
