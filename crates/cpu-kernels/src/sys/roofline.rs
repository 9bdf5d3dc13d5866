//! The loops of [`crate::roofline`]: independent chains of one instruction ([`FMA8_CHAINS`],
//! else [`CHAINS`]), `rounds` times, each entry point checking its CPU features first (`None`
//! without them).

use core::arch::x86_64::*;

/// Chains of the 16-lane loops: with the two operands, 18 of AVX-512's 32 registers.
pub(crate) const CHAINS: usize = 16;
/// Chains of the 8-lane FMA loop: its encoding has 16 registers, and sixteen chains plus the
/// two operands spilled to the stack every round. Twelve still cover a 4-cycle latency on three
/// ports.
pub(crate) const FMA8_CHAINS: usize = 12;

/// `FMA8_CHAINS · rounds` 8-lane FMAs: `acc ← acc · 0.999 + 0.001` converges to 1, never
/// overflowing or going denormal.
pub(crate) fn fma8(rounds: u64) -> Option<f64> {
    if !(std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")) {
        return None;
    }
    // SAFETY: AVX2 and FMA checked above.
    Some(unsafe { fma8_loop(rounds) })
}

#[target_feature(enable = "avx2,fma")]
fn fma8_loop(rounds: u64) -> f64 {
    // Operands the compiler cannot see (an FMA is never folded away without fast-math, and
    // these keep it from precomputing anything).
    let (a, b) = std::hint::black_box((_mm256_set1_ps(0.999), _mm256_set1_ps(0.001)));
    let mut acc = [_mm256_set1_ps(0.5); FMA8_CHAINS];
    for _ in 0..rounds {
        for chain in &mut acc {
            *chain = _mm256_fmadd_ps(*chain, a, b);
        }
    }
    let mut lanes = [0.0f32; 8];
    let sum = acc.iter().fold(_mm256_setzero_ps(), |s, &v| _mm256_add_ps(s, v));
    // SAFETY: `lanes` holds eight floats.
    unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), sum) };
    lanes.iter().map(|&v| f64::from(v)).sum()
}

/// `CHAINS · rounds` 16-lane FMAs, as [`fma8`].
pub(crate) fn fma16(rounds: u64) -> Option<f64> {
    if !std::arch::is_x86_feature_detected!("avx512f") {
        return None;
    }
    // SAFETY: AVX-512 F checked above.
    Some(unsafe { fma16_loop(rounds) })
}

#[target_feature(enable = "avx512f")]
fn fma16_loop(rounds: u64) -> f64 {
    let (a, b) = std::hint::black_box((_mm512_set1_ps(0.999), _mm512_set1_ps(0.001)));
    let mut acc = [_mm512_set1_ps(0.5); CHAINS];
    for _ in 0..rounds {
        for chain in &mut acc {
            *chain = _mm512_fmadd_ps(*chain, a, b);
        }
    }
    f64::from(_mm512_reduce_add_ps(acc.iter().fold(_mm512_setzero_ps(), |s, &v| _mm512_add_ps(s, v))))
}

/// `CHAINS · rounds` 16-lane `vpdpbusd` of bytes 1 by 1 (each lane gains 4 a round; the sums wrap
/// after billions of rounds, harmlessly).
pub(crate) fn dpbusd16(rounds: u64) -> Option<f64> {
    if !(std::arch::is_x86_feature_detected!("avx512f") && std::arch::is_x86_feature_detected!("avx512vnni")) {
        return None;
    }
    // SAFETY: AVX-512 F and VNNI checked above.
    Some(unsafe { dpbusd16_loop(rounds) })
}

#[target_feature(enable = "avx512f,avx512vnni")]
fn dpbusd16_loop(rounds: u64) -> f64 {
    let ones = std::hint::black_box(_mm512_set1_epi8(1));
    let mut acc = [_mm512_setzero_si512(); CHAINS];
    for _ in 0..rounds {
        for chain in &mut acc {
            *chain = _mm512_dpbusd_epi32(*chain, ones, ones);
        }
    }
    f64::from(_mm512_reduce_add_epi32(acc.iter().fold(_mm512_setzero_si512(), |s, &v| _mm512_add_epi32(s, v))))
}

/// The wrapping sum of `data` as 64-bit lanes, read the way the quantized kernels stream their
/// weights: each 64-byte line prefetched into L1 [`super::avx512_q8_groups::PREFETCH_BYTES`]
/// ahead and into L2 [`super::avx512_q8_groups::L2_PREFETCH_BYTES`] ahead (`None` without AVX2).
pub(crate) fn streamed_sum(data: &[u64]) -> Option<u64> {
    if !std::arch::is_x86_feature_detected!("avx2") {
        return None;
    }
    // SAFETY: AVX2 checked above.
    Some(unsafe { streamed_sum_avx2(data) })
}

#[target_feature(enable = "avx2")]
fn streamed_sum_avx2(data: &[u64]) -> u64 {
    use super::avx512_q8_groups::{L2_PREFETCH_BYTES, PREFETCH_BYTES};
    let mut acc = [_mm256_setzero_si256(); 4];
    let lines = data.chunks_exact(8);
    let tail: u64 = lines.remainder().iter().fold(0, |s, &v| s.wrapping_add(v));
    for line in lines {
        let p = line.as_ptr().cast::<u8>();
        // SAFETY: the line holds 64 bytes; a prefetch past the end reads nothing.
        unsafe {
            _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(PREFETCH_BYTES).cast::<i8>());
            _mm_prefetch::<_MM_HINT_T1>(p.wrapping_add(L2_PREFETCH_BYTES).cast::<i8>());
            let (a, b) = (_mm256_loadu_si256(p.cast()), _mm256_loadu_si256(p.add(32).cast()));
            acc[0] = _mm256_add_epi64(acc[0], a);
            acc[1] = _mm256_add_epi64(acc[1], b);
        }
        acc.swap(0, 2);
        acc.swap(1, 3);
    }
    let mut lanes = [0u64; 4];
    let sum = acc.iter().fold(_mm256_setzero_si256(), |s, &v| _mm256_add_epi64(s, v));
    // SAFETY: `lanes` holds four 64-bit values.
    unsafe { _mm256_storeu_si256(lanes.as_mut_ptr().cast(), sum) };
    lanes.iter().fold(tail, |s, &v| s.wrapping_add(v))
}
