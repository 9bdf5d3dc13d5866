//! The AVX-512 forms of the AVX2 kernels' elementwise maths: [`exp16`], `exp8` in sixteen
//! lanes, and SwiGLU over it, giving the AVX2 code's bits (every lane gets the same
//! operations in the same order), so that a model's outputs do not depend on which of the two
//! a CPU runs.
//!
//! Compiled for AVX-512 F and reached only after run-time detection ([`supported`]).

use core::arch::x86_64::*;

/// Whether this CPU has AVX-512 F and the AVX2/FMA/F16C that the tails fall back on.
pub(crate) fn supported() -> bool {
    std::arch::is_x86_feature_detected!("avx512f") && super::avx2::supported()
}

/// `exp(x)` in sixteen lanes: `exp8`'s operations and constants, lane for lane (the same
/// clamp, rounding, reduction and polynomial), so the same bits.
#[inline]
#[target_feature(enable = "avx512f")]
pub(crate) fn exp16(x: __m512) -> __m512 {
    use super::avx2::{EXP_HIGH, EXP_LN2, EXP_LOW, EXP_POLY};
    let x = _mm512_max_ps(_mm512_set1_ps(EXP_LOW), _mm512_min_ps(_mm512_set1_ps(EXP_HIGH), x));
    let n = _mm512_roundscale_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(_mm512_mul_ps(
        x,
        _mm512_set1_ps(core::f32::consts::LOG2_E),
    ));
    let r = _mm512_fnmadd_ps(n, _mm512_set1_ps(EXP_LN2[0]), x);
    let r = _mm512_fnmadd_ps(n, _mm512_set1_ps(EXP_LN2[1]), r);
    let mut p = _mm512_set1_ps(EXP_POLY[0]);
    for c in &EXP_POLY[1..] {
        p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(*c));
    }
    let p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), r);
    let p = _mm512_add_ps(p, _mm512_set1_ps(1.0));
    let two_n = _mm512_slli_epi32::<23>(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)));
    _mm512_mul_ps(p, _mm512_castsi512_ps(two_n))
}

/// [`super::avx2::swiglu`] sixteen lanes at a time: `silu(g) · u = g / (1 + exp(−g)) · u` with
/// [`exp16`] and the same division and product per lane, so the same bits; under sixteen
/// elements left go to the AVX2 code. With eight lanes, the SwiGLU of a SmolLM2 layer's four
/// rows took 9 µs (1.4 ns per element, in cache): 0.28 ms of a 4-position pass's 9 ms on two
/// threads (`cargo xtask bench-cpu --sections`).
///
/// # Panics
/// When the CPU lacks AVX-512 F or AVX2/FMA/F16C, or `gate` and `up` differ in length.
pub(crate) fn swiglu(gate: &mut [f32], up: &[f32]) {
    assert!(supported() && gate.len() == up.len(), "avx512 swiglu: unchecked call");
    // SAFETY: AVX-512 F and AVX2/FMA/F16C checked just above.
    unsafe { swiglu_impl(gate, up) }
}

/// # Safety
/// AVX-512 F and AVX2/FMA/F16C available; `gate.len() == up.len()`.
#[target_feature(enable = "avx512f,avx2,fma,f16c")]
unsafe fn swiglu_impl(gate: &mut [f32], up: &[f32]) {
    let one = _mm512_set1_ps(1.0);
    let zero = _mm512_setzero_ps();
    let mut gates = gate.chunks_exact_mut(16);
    let mut ups = up.chunks_exact(16);
    for (g, u) in (&mut gates).zip(&mut ups) {
        // SAFETY: both chunks hold sixteen floats.
        unsafe {
            let gv = _mm512_loadu_ps(g.as_ptr());
            let denominator = _mm512_add_ps(one, exp16(_mm512_sub_ps(zero, gv)));
            let y = _mm512_mul_ps(_mm512_div_ps(gv, denominator), _mm512_loadu_ps(u.as_ptr()));
            _mm512_storeu_ps(g.as_mut_ptr(), y);
        }
    }
    let rest = gates.into_remainder();
    // A paired gate/up product applies SwiGLU to runs of 64: nothing left over, no call.
    if !rest.is_empty() {
        super::avx2::swiglu(rest, ups.remainder());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn swiglu_is_the_avx2_swiglu_bit_for_bit() {
        if !supported() {
            return;
        }
        let mut seed = 17u64;
        let mut next = move || {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((seed >> 33) as f32 / (1u64 << 31) as f32) * 2.0 - 1.0
        };
        // Lengths around multiples of 8 and 16, gates wide enough to reach exp's clamp.
        for len in (0..50).chain([1536, 1537, 1551]) {
            for spread in [1.0f32, 12.0, 150.0] {
                let gate: Vec<f32> = (0..len).map(|_| next() * spread).collect();
                let up: Vec<f32> = (0..len).map(|_| next() * 3.0).collect();
                let (mut wide, mut narrow) = (gate.clone(), gate.clone());
                swiglu(&mut wide, &up);
                super::super::avx2::swiglu(&mut narrow, &up);
                assert!(wide.iter().zip(&narrow).all(|(a, b)| a.to_bits() == b.to_bits()), "length {len}");
            }
        }
        let special = [f32::NAN, f32::INFINITY, f32::NEG_INFINITY, -0.0, 0.0, 1e-40, -1e30, 88.5, -90.0];
        let mut gate: Vec<f32> = special.iter().copied().cycle().take(40).collect();
        let up = vec![1.5f32; gate.len()];
        let mut narrow = gate.clone();
        swiglu(&mut gate, &up);
        super::super::avx2::swiglu(&mut narrow, &up);
        assert!(gate.iter().zip(&narrow).all(|(a, b)| a.to_bits() == b.to_bits()));
    }

    #[test]
    fn a_swiglu_through_the_reciprocal_would_differ_in_its_last_bits() {
        // The test above can fail: g · (1 / (1 + e^−g)) · u, the same function by another
        // route, rounds differently for some inputs.
        let differs = (0..2000).any(|i| {
            let (g, u) = (i as f32 * 0.0137 - 13.0, 1.37f32);
            let d = 1.0 + (-g).exp();
            (g / d * u).to_bits() != (g * (1.0 / d) * u).to_bits()
        });
        assert!(differs);
    }
}
