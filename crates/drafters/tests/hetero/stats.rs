//! The G-test of `anyspec_core::goodness_of_fit`, unwrapped for tests (a length mismatch is a bug
//! in the test itself).

#[allow(unused_imports)]
pub(crate) use anyspec_core::goodness_of_fit::{GTest, PASS_P_VALUE, POWER_P_VALUE, chi_square_survival};

/// [`anyspec_core::goodness_of_fit::g_test`], panicking on malformed input.
pub(crate) fn g_test(observed: &[u64], expected_probs: &[f64]) -> GTest {
    anyspec_core::goodness_of_fit::g_test(observed, expected_probs).expect("one expected probability per cell")
}
