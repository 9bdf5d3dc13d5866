//! How many clusters (DynaSpec) or tokens (FR) the drafter's head may use at draft position `t`
//! (`t = 0` is the first drafted token of a cycle).

use crate::error::{Error, Result};

/// The cluster budget `k_c(t)` of a DynaSpec shortlist.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClusterBudget {
    /// DynaSpec-F: the same `k` clusters at every position (the paper's Figure 3 baseline).
    Fixed {
        /// Clusters per position.
        k: usize,
    },
    /// DynaSpec-PA, Eq. 3: `k_c(0) = k₀`, `k_c(1) = k₁`, `k_c(t) = ⌊(k₁ + t) / 2t⌋` for `t ≥ 2`,
    /// never below one cluster (the paper's `k_c(t) ∈ {k_min, …, k_max}` with `k_min = 1`: Eq. 3
    /// alone reaches 0 once `t > k₁`).
    ///
    /// (App. A's Algorithm 1 writes the `t ≥ 2` case as `k_second // 2t`; it differs from Eq. 3 by
    /// at most one cluster. We follow Eq. 3.)
    PositionAware {
        /// `k₀`, the budget of the first drafted token.
        k0: usize,
        /// `k₁`, the budget of the second, from which later budgets decay.
        k1: usize,
    },
}

impl ClusterBudget {
    /// Checks the budget against `m` clusters: every `k` in `1..=m`, and `k₀ ≥ k₁` (the paper
    /// has `k₀ > k₁`; equal is allowed as the limit).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming the bad value and the range it must be in.
    pub fn validate(self, m: usize) -> Result<Self> {
        let check = |name: &str, k: usize| {
            if k == 0 || k > m {
                Err(Error::invalid(format!(
                    "the cluster budget {name} = {k} is out of range; with {m} clusters use 1..={m}"
                )))
            } else {
                Ok(())
            }
        };
        match self {
            ClusterBudget::Fixed { k } => check("k", k)?,
            ClusterBudget::PositionAware { k0, k1 } => {
                check("k0", k0)?;
                check("k1", k1)?;
                if k0 < k1 {
                    return Err(Error::invalid(format!(
                        "k0 = {k0} is smaller than k1 = {k1}; Eq. 3 gives the first drafted token the larger \
                         budget, so swap them or raise k0"
                    )));
                }
            }
        }
        Ok(self)
    }

    /// `k_c(t)`, clusters at draft position `t`.
    pub fn clusters_at(self, t: usize) -> usize {
        match self {
            ClusterBudget::Fixed { k } => k,
            ClusterBudget::PositionAware { k0, k1 } => match t {
                0 => k0,
                1 => k1,
                t => ((k1 + t) / (2 * t)).max(1),
            },
        }
    }
}

/// The token budget of a frequency-ranked (FR-Spec) shortlist: the `K` most frequent tokens.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TokenBudget {
    /// FR-Spec: the same `K` at every position.
    Fixed {
        /// Tokens per position.
        k: usize,
    },
    /// PA-FR, App. A.3: `K_fr(t) = k_max` for `t ∈ {0, 1}`, `⌊k_max / (t + 1)⌋` for `t ≥ 2`
    /// (never below one token).
    PositionAware {
        /// `k_max`.
        k_max: usize,
    },
}

impl TokenBudget {
    /// Checks the budget against a ranking of `ranked` tokens: `K` in `1..=ranked`.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming the bad value and the range.
    pub fn validate(self, ranked: usize) -> Result<Self> {
        let k = match self {
            TokenBudget::Fixed { k } | TokenBudget::PositionAware { k_max: k } => k,
        };
        if k == 0 || k > ranked {
            return Err(Error::invalid(format!(
                "a frequency-ranked budget of {k} tokens is out of range; the ranking holds {ranked}, use 1..={ranked}"
            )));
        }
        Ok(self)
    }

    /// `K_fr(t)`, tokens at draft position `t`.
    pub fn tokens_at(self, t: usize) -> usize {
        match self {
            TokenBudget::Fixed { k } => k,
            TokenBudget::PositionAware { k_max } => match t {
                0 | 1 => k_max,
                t => (k_max / (t + 1)).max(1),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eq3_as_printed() {
        let b = ClusterBudget::PositionAware { k0: 64, k1: 32 };
        let got: Vec<usize> = (0..8).map(|t| b.clusters_at(t)).collect();
        // ⌊34/4⌋ = 8, ⌊35/6⌋ = 5, ⌊36/8⌋ = 4, ⌊37/10⌋ = 3, ⌊38/12⌋ = 3, ⌊39/14⌋ = 2.
        assert_eq!(got, vec![64, 32, 8, 5, 4, 3, 3, 2]);
        // Past t = k₁ Eq. 3 reaches 0; the floor is one cluster.
        assert_eq!(ClusterBudget::PositionAware { k0: 4, k1: 2 }.clusters_at(5), 1);
        assert_eq!(ClusterBudget::Fixed { k: 9 }.clusters_at(7), 9);
    }

    #[test]
    fn pa_fr_as_printed() {
        let b = TokenBudget::PositionAware { k_max: 32_768 };
        let got: Vec<usize> = (0..5).map(|t| b.tokens_at(t)).collect();
        assert_eq!(got, vec![32_768, 32_768, 10_922, 8192, 6553]);
        assert_eq!(TokenBudget::Fixed { k: 100 }.tokens_at(3), 100);
    }

    #[test]
    fn budgets_out_of_range_or_inverted_are_refused() {
        let m = 16;
        assert!(ClusterBudget::PositionAware { k0: 8, k1: 4 }.validate(m).is_ok());
        let inverted = ClusterBudget::PositionAware { k0: 2, k1: 4 }.validate(m).unwrap_err().to_string();
        assert!(inverted.contains("k0 = 2 is smaller than k1 = 4"), "{inverted}");
        let big = ClusterBudget::PositionAware { k0: 17, k1: 4 }.validate(m).unwrap_err().to_string();
        assert!(big.contains("1..=16"), "{big}");
        assert!(ClusterBudget::Fixed { k: 0 }.validate(m).is_err());
        assert!(TokenBudget::Fixed { k: 11 }.validate(10).is_err());
        assert!(TokenBudget::PositionAware { k_max: 0 }.validate(10).is_err());
        assert!(TokenBudget::PositionAware { k_max: 10 }.validate(10).is_ok());
    }
}
