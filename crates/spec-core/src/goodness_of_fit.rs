//! Goodness of fit: the G-test with a chi-square p-value, the tool every statistical test of
//! losslessness in this workspace uses (and that an embedder can use to check a drafter of their
//! own): draw many sequences through `generate`, histogram them, and compare with the target's
//! exact distribution.

use crate::error::{Error, Result};

/// p-value threshold below which a correct rule would be called wrong. Seeds are fixed, so a
/// passing test passes forever; the threshold only says how surprising the sample may be.
pub const PASS_P_VALUE: f64 = 1e-4;

/// A broken rule must be rejected far more decisively than a correct one ever is.
pub const POWER_P_VALUE: f64 = 1e-8;

/// Result of a G-test.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GTest {
    /// `G = 2 Σ o ln(o/e)` over the (pooled) cells.
    pub statistic: f64,
    /// Cells after pooling, minus one.
    pub degrees_of_freedom: usize,
    /// `P(χ²(dof) ≥ G)`; 0 when an outcome of probability 0 was observed.
    pub p_value: f64,
}

/// G-test of observed counts against expected probabilities. Cells with an expected count below 5
/// are pooled (into one cell) so the chi-square approximation holds. Observations in cells of
/// probability 0 make the p-value 0: an impossible outcome happened.
///
/// # Errors
/// [`Error::LengthMismatch`] when the two slices differ in length; [`Error::InvalidProbability`]
/// for a negative or non-finite probability or an all-zero expectation.
pub fn g_test(observed: &[u64], expected_probs: &[f64]) -> Result<GTest> {
    if observed.len() != expected_probs.len() {
        return Err(Error::LengthMismatch {
            what: "expected probabilities (one per observed cell)",
            expected: observed.len(),
            got: expected_probs.len(),
        });
    }
    if let Some((i, &p)) = expected_probs.iter().enumerate().find(|(_, p)| !(p.is_finite() && **p >= 0.0)) {
        return Err(Error::InvalidProbability { what: "expected probabilities", index: i, value: p as f32 });
    }
    let n: u64 = observed.iter().sum();
    let total_prob: f64 = expected_probs.iter().sum();
    if total_prob <= 0.0 {
        return Err(Error::InvalidProbability { what: "expected probabilities (sum)", index: 0, value: 0.0 });
    }
    let mut cells: Vec<(f64, f64)> = Vec::new();
    let mut pooled = (0.0, 0.0);
    for (&o, &p) in observed.iter().zip(expected_probs) {
        let e = p / total_prob * n as f64;
        if p == 0.0 && o > 0 {
            return Ok(GTest { statistic: f64::INFINITY, degrees_of_freedom: 0, p_value: 0.0 });
        }
        if e < 5.0 {
            pooled.0 += o as f64;
            pooled.1 += e;
        } else {
            cells.push((o as f64, e));
        }
    }
    if pooled.1 > 0.0 {
        cells.push(pooled);
    }
    let statistic: f64 = 2.0 * cells.iter().filter(|(o, _)| *o > 0.0).map(|(o, e)| o * (o / e).ln()).sum::<f64>();
    let degrees_of_freedom = cells.len().saturating_sub(1).max(1);
    Ok(GTest { statistic, degrees_of_freedom, p_value: chi_square_survival(statistic, degrees_of_freedom) })
}

/// P(X ≥ x) for X ~ χ²(k): the regularized upper incomplete gamma Q(k/2, x/2).
pub fn chi_square_survival(x: f64, k: usize) -> f64 {
    if x <= 0.0 {
        return 1.0;
    }
    upper_regularized_gamma(k as f64 / 2.0, x / 2.0)
}

fn upper_regularized_gamma(a: f64, x: f64) -> f64 {
    if x < a + 1.0 {
        // Series for the lower function P(a, x).
        let mut term = 1.0 / a;
        let mut sum = term;
        let mut ap = a;
        for _ in 0..10_000 {
            ap += 1.0;
            term *= x / ap;
            sum += term;
            if term.abs() < sum.abs() * 1e-15 {
                break;
            }
        }
        1.0 - sum * (-x + a * x.ln() - ln_gamma(a)).exp()
    } else {
        // Continued fraction for Q(a, x) (modified Lentz).
        let tiny = 1e-300;
        let mut b = x + 1.0 - a;
        let mut c = 1.0 / tiny;
        let mut d = 1.0 / b;
        let mut h = d;
        for i in 1..10_000 {
            let an = -(i as f64) * (i as f64 - a);
            b += 2.0;
            d = an * d + b;
            if d.abs() < tiny {
                d = tiny;
            }
            c = b + an / c;
            if c.abs() < tiny {
                c = tiny;
            }
            d = 1.0 / d;
            let delta = d * c;
            h *= delta;
            if (delta - 1.0).abs() < 1e-15 {
                break;
            }
        }
        (-x + a * x.ln() - ln_gamma(a)).exp() * h
    }
}

/// ln Γ(x) for x > 0 (Lanczos, g = 7, n = 9).
fn ln_gamma(x: f64) -> f64 {
    const G: f64 = 7.0;
    const COEFFICIENTS: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    if x < 0.5 {
        return (std::f64::consts::PI / (std::f64::consts::PI * x).sin()).ln() - ln_gamma(1.0 - x);
    }
    let x = x - 1.0;
    let mut sum = COEFFICIENTS[0];
    for (i, &c) in COEFFICIENTS.iter().enumerate().skip(1) {
        sum += c / (x + i as f64);
    }
    let t = x + G + 0.5;
    0.5 * (2.0 * std::f64::consts::PI).ln() + (x + 0.5) * t.ln() - t + sum.ln()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chi_square_survival_matches_tables() {
        // Critical values from standard tables: P(χ²(1) ≥ 3.841) = 0.05, P(χ²(10) ≥ 23.209) = 0.01,
        // P(χ²(63) ≥ 82.529) = 0.05; and Q(1, x) = e^{-x} for k = 2.
        assert!((chi_square_survival(3.841_459, 1) - 0.05).abs() < 1e-5);
        assert!((chi_square_survival(23.209_25, 10) - 0.01).abs() < 1e-5);
        assert!((chi_square_survival(82.528_72, 63) - 0.05).abs() < 1e-4);
        assert!((chi_square_survival(7.0, 2) - (-3.5f64).exp()).abs() < 1e-12);
    }

    #[test]
    fn g_test_accepts_a_fair_sample_and_rejects_a_biased_one() {
        let fair = g_test(&[2_510, 2_490, 5_000], &[0.25, 0.25, 0.5]).unwrap();
        assert!(fair.p_value > 0.5, "{fair:?}");
        let biased = g_test(&[2_800, 2_200, 5_000], &[0.25, 0.25, 0.5]).unwrap();
        assert!(biased.p_value < 1e-8, "{biased:?}");
        let impossible = g_test(&[1, 9], &[0.0, 1.0]).unwrap();
        assert_eq!(impossible.p_value, 0.0);
    }
}
