//! The SwiGLU activation of a Llama MLP, `silu(gate) · up`, with AVX-512 or AVX2 where the CPU
//! has them.

#[cfg(target_arch = "x86_64")]
use crate::sys::{avx2, avx512_activation};

/// `silu(g) · u = g / (1 + exp(−g)) · u` element-wise, into `gate`: sixteen at a time where
/// the CPU has AVX-512 F, eight where it has AVX2 (the same bits either way), with a vector
/// `exp` (relative error under 4·10⁻⁷), the portable loop otherwise. An element's result does
/// not depend on its position or on the slice's length, so one row of a batch gets what it
/// gets alone.
///
/// # Panics
/// When `gate` and `up` differ in length (the caller's shapes are wrong).
pub fn swiglu(gate: &mut [f32], up: &[f32]) {
    assert_eq!(gate.len(), up.len(), "swiglu: gate and up differ in length");
    #[cfg(target_arch = "x86_64")]
    if avx512_activation::supported() {
        avx512_activation::swiglu(gate, up);
        return;
    }
    #[cfg(target_arch = "x86_64")]
    if avx2::supported() {
        avx2::swiglu(gate, up);
        return;
    }
    for (g, &u) in gate.iter_mut().zip(up) {
        *g = *g / (1.0 + (-*g).exp()) * u;
    }
}
