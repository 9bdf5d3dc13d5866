//! A distribution summary in the shape of pandas' `describe()`, which Table 8 follows.

use serde::{Deserialize, Serialize};

/// Count, mean, sample standard deviation, min, quartiles (linear interpolation) and max.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Describe {
    /// Number of values.
    pub count: usize,
    /// Arithmetic mean.
    pub mean: f64,
    /// Sample standard deviation (divisor n − 1; 0 for a single value).
    pub std: f64,
    /// Smallest value.
    pub min: f64,
    /// First quartile.
    pub q1: f64,
    /// Median.
    pub median: f64,
    /// Third quartile.
    pub q3: f64,
    /// Largest value.
    pub max: f64,
}

impl Describe {
    /// Summarizes `values`; `None` when there are none.
    pub fn of(values: &[f64]) -> Option<Describe> {
        if values.is_empty() {
            return None;
        }
        let mut sorted = values.to_vec();
        sorted.sort_by(f64::total_cmp);
        let n = sorted.len();
        let mean = sorted.iter().sum::<f64>() / n as f64;
        let std = if n > 1 {
            (sorted.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / (n - 1) as f64).sqrt()
        } else {
            0.0
        };
        let quantile = |p: f64| {
            let position = p * (n - 1) as f64;
            let low = position.floor() as usize;
            let high = position.ceil() as usize;
            sorted[low] + (sorted[high] - sorted[low]) * (position - low as f64)
        };
        Some(Describe {
            count: n,
            mean,
            std,
            min: sorted[0],
            q1: quantile(0.25),
            median: quantile(0.5),
            q3: quantile(0.75),
            max: sorted[n - 1],
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_pandas_describe_on_a_small_sample() {
        // pandas.Series([1, 2, 3, 4, 10]).describe(): mean 4, std 3.535534, 25% 2, 50% 3, 75% 4.
        let d = Describe::of(&[10.0, 1.0, 3.0, 2.0, 4.0]).unwrap();
        assert_eq!(d.count, 5);
        assert!((d.mean - 4.0).abs() < 1e-12);
        assert!((d.std - 3.535_533_9).abs() < 1e-6);
        assert_eq!((d.min, d.q1, d.median, d.q3, d.max), (1.0, 2.0, 3.0, 4.0, 10.0));
        // Interpolation between ranks: [1, 2, 3, 4] has quartiles 1.75, 2.5, 3.25.
        let d = Describe::of(&[1.0, 2.0, 3.0, 4.0]).unwrap();
        assert_eq!((d.q1, d.median, d.q3), (1.75, 2.5, 3.25));
        assert!(Describe::of(&[]).is_none());
    }
}
