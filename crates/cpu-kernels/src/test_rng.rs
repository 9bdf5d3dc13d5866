//! The tests' repeatable random numbers: a xorshift64 generator, so that a failing case is the
//! same case on every run and every machine.

/// Floats in `[0, 1)` (24 random bits each) from the xorshift64 state `seed` (not 0).
pub(crate) fn unit(mut seed: u64) -> impl FnMut() -> f32 {
    move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed >> 40) as f32 / (1u64 << 24) as f32
    }
}
