//! Goodness-of-fit machinery: the G-test with a chi-square p-value (as in anyspec-core's tests).

/// p-value threshold below which a correct rule would be called wrong. Seeds are fixed, so a
/// passing test passes forever; the threshold only says how surprising the sample may be.
pub(crate) const PASS_P_VALUE: f64 = 1e-4;

/// A broken rule must be rejected far more decisively than a correct one ever is.
pub(crate) const POWER_P_VALUE: f64 = 1e-8;

/// Result of a G-test (the statistic and degrees of freedom are read through `Debug` in failure
/// messages).
#[allow(dead_code)]
#[derive(Debug, Clone, Copy)]
pub(crate) struct GTest {
    pub(crate) statistic: f64,
    pub(crate) degrees_of_freedom: usize,
    pub(crate) p_value: f64,
}

/// G-test of observed counts against expected probabilities. Cells with an expected count below 5
/// are pooled (into one cell) so the chi-square approximation holds. Observations in cells of
/// probability 0 make the p-value 0: an impossible outcome happened.
pub(crate) fn g_test(observed: &[u64], expected_probs: &[f64]) -> GTest {
    assert_eq!(observed.len(), expected_probs.len());
    let n: u64 = observed.iter().sum();
    let total_prob: f64 = expected_probs.iter().sum();
    let mut cells: Vec<(f64, f64)> = Vec::new();
    let mut pooled = (0.0, 0.0);
    for (&o, &p) in observed.iter().zip(expected_probs) {
        let e = p / total_prob * n as f64;
        if p == 0.0 && o > 0 {
            return GTest { statistic: f64::INFINITY, degrees_of_freedom: 0, p_value: 0.0 };
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
    GTest { statistic, degrees_of_freedom, p_value: chi_square_survival(statistic, degrees_of_freedom) }
}

/// P(X ≥ x) for X ~ χ²(k): the regularized upper incomplete gamma Q(k/2, x/2).
pub(crate) fn chi_square_survival(x: f64, k: usize) -> f64 {
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
