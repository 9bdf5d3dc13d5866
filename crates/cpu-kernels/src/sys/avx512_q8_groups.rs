//! The AVX-512 VNNI kernel of the interleaved layout ([`crate::interleave`]) with 8-bit
//! activations: [`super::avx2_q8_groups`]'s computation, two groups (sixteen weight rows) per
//! 512-bit register and one `vpdpbusd` per 4-byte chunk instead of a `vpmaddubsw`/`vpmaddwd`
//! pair.
//!
//! # Why
//!
//! Scoring a draft of k positions is bound by instructions, not by the weights read: on
//! SmolLM2-135M Q4_1 the AVX2 kernel spends about 28 instructions per group, block and
//! activation row, most of them integer products and the 16-bit sums that follow. `vpdpbusd`
//! multiplies four unsigned bytes by four signed bytes and adds the four products to a 32-bit
//! lane in one instruction, and a 512-bit register holds the same 4-byte chunk of two groups
//! (the activation chunk they meet is the same broadcast value). Per 16 rows, block and
//! activation row: eight `vpdpbusd`, one addition, one conversion and two multiply-adds.
//!
//! # Same results, bit for bit
//!
//! Every lane computes what the AVX2 kernel computes for its row: the block's integer dot
//! product is exact either way (no 16-bit saturation can happen in the AVX2 kernel, see its
//! docs, and none in 32-bit lanes here), and the float operations that follow (conversion,
//! `d_w · d_x`, the multiply-add into the accumulator, then the offset's multiply-add) are the
//! same operations in the same order. So the outputs equal [`super::avx2_q8_groups`]'s bit for
//! bit (tested), and a model gives the same logits on a CPU with AVX-512 as on one without.
//!
//! `Q8_0`: `vpdpbusd` needs one unsigned operand, and `Q8_0` weights and activations are both
//! signed. The weights are flipped to `w + 128` (an XOR of the sign bit, once per block for all
//! rows), and `128 · Σ x` (the activation block's integer sum, computed when the activations
//! are quantized) is subtracted per row: `Σ (w + 128) · x − 128 · Σ x = Σ w · x`, exactly.
//!
//! A lone last group (an odd number of groups in a chunk) is computed in both halves of the
//! register and its upper half discarded.
//!
//! Compiled for AVX-512 F/BW and VNNI (plus AVX2, FMA and F16C) and reached only through
//! `Kernel::Avx512Q8`, which the crate hands out after run-time detection.

use core::arch::x86_64::*;
use std::ops::Range;

use super::avx2_q8::QuantizedX;
use super::avx2_q8_groups::{Q4_0, Q4_1, Q8_0, fits, format_of};
use crate::format::{QK, WeightFormat};
use crate::interleave::{GROUP, Grouped};

/// How far ahead of the block being multiplied the weight stream is prefetched, in bytes (four
/// `Q4_1` blocks of a pair of groups). Measured with `cargo xtask bench-cpu --quantized-only` on SmolLM2-135M
/// Q4_1, alternating runs on the 2-core Xeon: k = 6 cost 1.44–1.45 → 1.29–1.31 of a
/// single-position pass on one thread, 1.58–1.61 → 1.41–1.48 on two, and the single position
/// itself faster; 2560 bytes gained less and 640 nothing. The AVX2 kernel
/// ([`super::avx2_q8_groups`]) prefetches as far ahead in its own stream: on the same machine
/// its single position went from 17.9–18.7 to 12.5–13.8 ms on one thread (7.9–11.2 → 6.1–7.9
/// ms on two), and its k = 6 pass on one thread from 1.65–1.74 to 1.51 of that. Without it the `vpdpbusd` work of several
/// activation rows keeps the core busy and the hardware prefetchers fall behind the stream.
/// Past the last block the address lies beyond the group (or the matrix), which a prefetch
/// ignores.
pub(crate) const PREFETCH_BYTES: usize = 1280;

/// How far ahead the weight stream is also prefetched into the core's L2 (`prefetcht1`), in
/// bytes: beside [`PREFETCH_BYTES`]'s L1 prefetch, which brings each line in just before use.
///
/// # Why
///
/// A line prefetched into L1 holds one of the core's few line-fill buffers (16 on recent Intel
/// cores) until it arrives, so at most about 1 KB of the stream is in flight per core: with
/// ~100 ns to the next level that caps a core near 10–13 GB/s, which is what a single-position
/// pass of SmolLM2 reached (25 GB/s on two cores). Prefetches into L2 wait in the L2's own
/// queue (32–48 entries), so 8 KB ahead keeps several times more of the stream in flight and
/// the L1 prefetch then finds the line in L2. Measured on the 2-core Xeon (AVX-512 VNNI, 2 MB
/// L2 per core, a 480 MB L3 that holds the whole model) with a throw-away probe of the native
/// engine's sections, three rounds of five distances taking turns (0, 3, 4, 6 and 8 KB): a
/// single-position pass after 160 tokens took 4.1–4.8 ms without this prefetch and 3.0–3.1 ms
/// at 6–8 KB (3.4 ms at 4 KB, 3.6–3.9 ms at 3 KB); 12 and 16 KB gained no more. On the whole
/// model, `cargo xtask bench-cpu --quantized-only --threads 2` with the binaries before and
/// after taking turns (before, after, before, after): decoding 234 and 241 → 333 and 337
/// tokens/s with this kernel, 214 and 210 → 312 and 309 with the AVX2 one (which prefetches
/// the same way, forced on the same machine); after 768 tokens of context 145 and 147 → 172
/// and 161. The extra rows of a wide pass gain less than the first (their cost is the core's
/// integer products, not the stream), so a pass over k positions costs more *relative* to one
/// position (k = 4: 1.25 and 1.26 → 1.33 and 1.31 after 64 tokens), while every width costs
/// less in milliseconds. Not measured on AMD cores, where the prefetch hints differ. Past the
/// last block the address lies beyond the group (or the matrix), which a prefetch ignores.
pub(crate) const L2_PREFETCH_BYTES: usize = 8192;

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
    if !(fits(format, groups, &range, xq, first, outs) && crate::Kernel::Avx512Q8.is_supported()) {
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

/// # Safety
/// As for [`groups_of`].
#[target_feature(enable = "avx512f,avx512bw,avx512vnni,avx2,fma,f16c")]
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

/// Two groups at a time: the weights of a block are loaded (and for `Q4_*` unpacked) once and
/// applied to all `M` activation rows, whose accumulators (`M` registers of 16 lanes) stay in
/// registers: AVX-512 has 32 of them.
///
/// # Safety
/// AVX-512 F/BW/VNNI, AVX2, FMA and F16C available; the lengths checked in [`dot_groups`], and
/// `outs.len() == M`.
#[allow(clippy::needless_range_loop)] // `i` indexes the accumulators and the activation rows
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vnni,avx2,fma,f16c")]
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
    // From one of a group's blocks to its next (in Order::Pairs, the layout this kernel asks
    // for, an even group and the next are then read as one sequential stream).
    let (data, order) = (groups.data, groups.order);
    let stride = order.stride(format);
    // The header fields (d, and m for Q4_1), eight f16 lanes each.
    let header = if F == Q4_1 { 4 * GROUP } else { 2 * GROUP };
    let mask = _mm512_set1_epi8(0x0F);
    let sign = _mm512_set1_epi8(i8::MIN);
    let end_group = range.end.div_ceil(GROUP);
    // SAFETY (whole body): group g's block b lies at data + order.block_offset(g, 0) + b·stride
    // for the groups of `range` (checked by the caller; the upper half reads group g + 1 only when it
    // is one of them, else group g again); activation row i < M has its values at
    // qp + i·cols and its scales and sums at dp/sp/np + i·blocks; outs[i] holds range.len()
    // values.
    unsafe {
        let qp = xq.qs.as_ptr().add(first * cols);
        let dp = xq.d.as_ptr().add(first * blocks);
        let sp = xq.s.as_ptr().add(first * blocks);
        let np = xq.sums.as_ptr().add(first * blocks);
        let mut g = range.start / GROUP;
        while g < end_group {
            let pair = g + 1 < end_group;
            let mut acc = [_mm512_setzero_ps(); M];
            let low = data.as_ptr().add(order.block_offset(format, blocks, g, 0));
            let high = if pair { data.as_ptr().add(order.block_offset(format, blocks, g + 1, 0)) } else { low };
            for b in 0..blocks {
                let (p, q) = (low.add(b * stride), high.add(b * stride));
                // The lines PREFETCH_BYTES ahead in the stream into L1, and those
                // L2_PREFETCH_BYTES ahead into L2 (see there).
                for line in (0..stride).step_by(64) {
                    _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(PREFETCH_BYTES + line).cast::<i8>());
                    _mm_prefetch::<_MM_HINT_T1>(p.wrapping_add(L2_PREFETCH_BYTES + line).cast::<i8>());
                }
                // The 32 bytes at `offset` of both groups' block, group g in the low half.
                let both = |offset: usize| -> __m512i {
                    _mm512_inserti64x4::<1>(
                        _mm512_castsi256_si512(_mm256_loadu_si256(p.add(offset).cast())),
                        _mm256_loadu_si256(q.add(offset).cast()),
                    )
                };
                // Sixteen f16 header fields at `offset`: eight of group g, then eight of g + 1.
                let halves = |offset: usize| -> __m512 {
                    _mm512_cvtph_ps(_mm256_inserti128_si256::<1>(
                        _mm256_castsi128_si256(_mm_loadu_si128(p.add(offset).cast())),
                        _mm_loadu_si128(q.add(offset).cast()),
                    ))
                };
                let d = halves(0);
                // The activation block's 4-byte chunk `c`, in every lane.
                let chunk = |i: usize, c: usize| -> __m512i {
                    _mm512_set1_epi32(qp.add(i * cols + b * QK + 4 * c).cast::<i32>().read_unaligned())
                };
                if F == Q8_0 {
                    // w + 128 as unsigned bytes.
                    let wt: [__m512i; 8] = core::array::from_fn(|t| _mm512_xor_si512(both(header + 32 * t), sign));
                    for i in 0..M {
                        let mut s0 = _mm512_setzero_si512();
                        let mut s1 = _mm512_setzero_si512();
                        for t in 0..4 {
                            s0 = _mm512_dpbusd_epi32(s0, wt[t], chunk(i, t));
                            s1 = _mm512_dpbusd_epi32(s1, wt[t + 4], chunk(i, t + 4));
                        }
                        let shift = _mm512_set1_epi32(128 * *np.add(i * blocks + b));
                        let isum = _mm512_sub_epi32(_mm512_add_epi32(s0, s1), shift);
                        let scale = _mm512_mul_ps(d, _mm512_set1_ps(*dp.add(i * blocks + b)));
                        acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), scale, acc[i]);
                    }
                } else {
                    let v: [__m512i; 4] = core::array::from_fn(|t| both(header + 32 * t));
                    let lo = v.map(|v| _mm512_and_si512(v, mask));
                    let hi = v.map(|v| _mm512_and_si512(_mm512_srli_epi16::<4>(v), mask));
                    // Q4_0's `(n - 8)·d` is `n·d + (-8·d)`: Q4_1's offset with m = -8d.
                    let offset = if F == Q4_1 { halves(2 * GROUP) } else { _mm512_mul_ps(d, _mm512_set1_ps(-8.0)) };
                    for i in 0..M {
                        let mut s0 = _mm512_setzero_si512();
                        let mut s1 = _mm512_setzero_si512();
                        for t in 0..4 {
                            s0 = _mm512_dpbusd_epi32(s0, lo[t], chunk(i, t));
                            s1 = _mm512_dpbusd_epi32(s1, hi[t], chunk(i, t + 4));
                        }
                        let isum = _mm512_add_epi32(s0, s1);
                        let scale = _mm512_mul_ps(d, _mm512_set1_ps(*dp.add(i * blocks + b)));
                        acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), scale, acc[i]);
                        acc[i] = _mm512_fmadd_ps(offset, _mm512_set1_ps(*sp.add(i * blocks + b)), acc[i]);
                    }
                }
            }
            let j = g * GROUP - range.start;
            let n = (range.end - g * GROUP).min(if pair { 2 * GROUP } else { GROUP });
            for i in 0..M {
                if n == 2 * GROUP {
                    _mm512_storeu_ps(outs[i].as_mut_ptr().add(j), acc[i]);
                } else {
                    let mut lanes = [0.0f32; 2 * GROUP];
                    _mm512_storeu_ps(lanes.as_mut_ptr(), acc[i]);
                    outs[i].get_unchecked_mut(j..j + n).copy_from_slice(&lanes[..n]);
                }
            }
            g += if pair { 2 } else { 1 };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::avx2_q8::quantize_x;
    use crate::format::{WeightFormat, quantize};
    use crate::interleave::{GROUP, Grouped, Order, interleave};

    /// Both kernels on the same interleaved weights and quantized activations: bit for bit
    /// the same outputs, for every supported format, both orders of the groups, 1 to 8
    /// activation rows, whole and odd numbers of groups, and ranges that start at a later
    /// group (an odd one too) or end inside one.
    #[test]
    fn equals_the_avx2_kernel_bit_for_bit() {
        if !crate::Kernel::Avx512Q8.is_supported() {
            return; // no AVX-512 VNNI on this CPU: nothing to compare
        }
        let mut unit = crate::test_rng::unit(0x9E37_79B9_7F4A_7C15);
        let mut next = move || unit() * 2.0 - 1.0;
        for format in [WeightFormat::Q8_0, WeightFormat::Q4_0, WeightFormat::Q4_1] {
            let (rows, cols) = (5 * GROUP + 3, 96);
            let w: Vec<f32> = (0..rows * cols).map(|_| next()).collect();
            let bytes = quantize(format, &w).unwrap();
            for (m, order) in (1..=8).flat_map(|m| [(m, Order::Pairs), (m, Order::Groups)]) {
                let data = interleave(format, rows, cols / 32, &bytes, order);
                let groups = Grouped { data: &data, order };
                // Activations with a wide range per block, one block all zero.
                let mut x: Vec<f32> = (0..m * cols).map(|_| 3.0 * next()).collect();
                x[..32].fill(0.0);
                let xq = quantize_x(format, &x, m, cols).unwrap();
                for range in
                    [0..rows, GROUP..rows, 0..3 * GROUP, 2 * GROUP..4 * GROUP - 5, 0..GROUP - 1, 3 * GROUP..rows]
                {
                    let mut a = vec![vec![f32::NAN; range.len()]; m];
                    let mut b = vec![vec![f32::NAN; range.len()]; m];
                    let mut outs_a: Vec<&mut [f32]> = a.iter_mut().map(|v| v.as_mut_slice()).collect();
                    let mut outs_b: Vec<&mut [f32]> = b.iter_mut().map(|v| v.as_mut_slice()).collect();
                    assert!(super::super::avx2_q8_groups::dot_groups(
                        format,
                        groups,
                        range.clone(),
                        &xq,
                        0,
                        &mut outs_a
                    ));
                    assert!(super::dot_groups(format, groups, range.clone(), &xq, 0, &mut outs_b));
                    for i in 0..m {
                        for (j, (p, q)) in a[i].iter().zip(&b[i]).enumerate() {
                            assert!(p.is_finite(), "{format} {order:?} m={m} {range:?}: row {i} output {j} unwritten");
                            assert_eq!(
                                p.to_bits(),
                                q.to_bits(),
                                "{format} {order:?} m={m} {range:?}: row {i} output {j}"
                            );
                        }
                    }
                }
            }
        }
    }
}
