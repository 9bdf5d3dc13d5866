//! [`AlgoRequest::Auto`](crate::hetero::AlgoRequest::Auto) (`anyspec generate --algo auto`):
//! which bridge to use for a drafter–target pair.
//!
//! **The paper's rule** (hetero-vocab-sd.txt Tables 1 and 7: "all the heterogeneous pairs with
//! zero temperature run with Algorithm 2, the remaining heterogeneous pairs run with
//! Algorithm 4"): SLEM at temperature 0, TLI at any temperature above 0 (the paper's 1e-07 runs
//! are TLI runs).
//!
//! **Our refinements**, each a case the paper's experiments do not cover, grounded in its
//! Table 3 (informal constraints on the drafter: SLEM "accurate"; SLRS "accurate, short
//! tokens"; TLI "accurate, large intersection of vocabs") and not measured against the plain
//! rule in this repository:
//!
//! 1. **Empty intersection** → SLEM at any temperature: TLI (and RDK) can draft nothing.
//! 2. **Short-token drafter** (mean ≤ [`SHORT_TOKEN_BYTES`] bytes per token, a byte- or
//!    character-level model) at temperature > 0, when SLRS is available → SLRS: Theorem 3.1
//!    puts its acceptance `Σ min(p, ψ)` above SLEM's, and its cost (up to 2^(L−1) segmentations
//!    of an L-byte token, §3.4 and App. D) is small only for such drafters.
//! 3. **Temperature > 0, an affinity matrix given and a small intersection** (below
//!    [`LOW_TARGET_COVERAGE`] of the target vocabulary) → RDK (oov-sampling-rdk.txt): TLI
//!    leaves most target tokens with q = 0, which RDK's redistribution reaches.
//!
//! Until the first issues had the paper, the rule also picked TLI at temperature 0 when
//! ≥ 90% of the drafter's vocabulary was shared; the paper runs SLEM there, and so does this
//! rule now.

use std::fmt;
use std::str::FromStr;

use serde::Serialize;

/// Mean drafter token length, in bytes, at or below which a drafter counts as short-token
/// (our threshold for Table 3's "short tokens"; see the module documentation).
pub const SHORT_TOKEN_BYTES: f64 = 1.5;

/// Share of the target vocabulary in the intersection below which RDK's redistribution is
/// preferred to TLI when an affinity matrix is at hand (our threshold; see the module
/// documentation).
pub const LOW_TARGET_COVERAGE: f64 = 0.5;

/// A way to draft with a model whose tokenizer differs from the target's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Algo {
    /// hetero-vocab-sd.txt Algorithm 1, the baseline.
    Union,
    /// Token-level intersection, Algorithm 4.
    Tli,
    /// Token-level intersection + redistribution (oov-sampling-rdk.txt).
    Rdk,
    /// String-level exact match, Algorithm 2.
    Slem,
    /// String-level rejection sampling, Algorithm 3 (built in `slrs`).
    Slrs,
}

impl Algo {
    /// The algorithm's name, as [`FromStr`] reads it (and `anyspec generate --algo`).
    pub fn name(self) -> &'static str {
        match self {
            Algo::Union => "union",
            Algo::Tli => "tli",
            Algo::Rdk => "rdk",
            Algo::Slem => "slem",
            Algo::Slrs => "slrs",
        }
    }
}

impl fmt::Display for Algo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Algo {
    type Err = crate::Error;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s {
            "union" => Algo::Union,
            "tli" => Algo::Tli,
            "rdk" => Algo::Rdk,
            "slem" => Algo::Slem,
            "slrs" => Algo::Slrs,
            other => {
                return Err(crate::Error::InvalidParameter(anyspec_core::InvalidParameter {
                    name: "algorithm",
                    expected: "one of tli, slem, slrs, rdk, union",
                    value: other.to_owned(),
                }));
            }
        })
    }
}

/// What [`choose`] looks at.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PairFacts {
    /// `|T ∩ D|`.
    pub intersection: usize,
    /// `|T|`.
    pub target_vocab: usize,
    /// `|D|`.
    pub drafter_vocab: usize,
    /// Sampling temperature (0 = greedy).
    pub temperature: f32,
    /// Mean length of the drafter's tokens on text, in bytes (the CLI measures it on the prompt).
    pub drafter_mean_token_bytes: f64,
    /// Whether an affinity matrix was given (RDK needs one).
    pub has_affinity: bool,
    /// Whether SLRS can be built in this binary.
    pub slrs_available: bool,
}

/// The choice and the reason, for stderr and `--json`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AutoChoice {
    /// The chosen algorithm.
    pub algo: Algo,
    /// Why, in one sentence.
    pub reason: String,
}

/// Picks a bridge for the pair: the paper's rule with our refinements (module documentation).
pub fn choose(facts: &PairFacts) -> AutoChoice {
    let target_coverage = share(facts.intersection, facts.target_vocab);
    let paper = "(hetero-vocab-sd.txt Tables 1 and 7)";
    let ours = "(our refinement of the paper's rule, after its Table 3)";
    let (algo, why, source) = if facts.intersection == 0 {
        (Algo::Slem, "the vocabularies share no token, so only string-level verification can draft".to_owned(), ours)
    } else if facts.temperature == 0.0 {
        (
            Algo::Slem,
            "greedy decoding: string-level exact match on re-tokenized text, which can propose any target token"
                .to_owned(),
            paper,
        )
    } else if facts.slrs_available && facts.drafter_mean_token_bytes <= SHORT_TOKEN_BYTES {
        (
            Algo::Slrs,
            format!(
                "the drafter's tokens are short ({:.2} bytes on average, ≤ {SHORT_TOKEN_BYTES}), so string-level \
                 rejection sampling is affordable and accepts the most at temperature {}",
                facts.drafter_mean_token_bytes, facts.temperature
            ),
            ours,
        )
    } else if facts.has_affinity && target_coverage < LOW_TARGET_COVERAGE {
        (
            Algo::Rdk,
            format!(
                "sampling at temperature {} with {:.1}% of the target vocabulary shared (< {:.0}%) and an affinity \
                 matrix given: RDK reaches target tokens the drafter lacks",
                facts.temperature,
                100.0 * target_coverage,
                100.0 * LOW_TARGET_COVERAGE
            ),
            ours,
        )
    } else {
        (
            Algo::Tli,
            format!(
                "sampling at temperature {}: token-level intersection with speculative sampling ({:.1}% of the \
                 target vocabulary shared)",
                facts.temperature,
                100.0 * target_coverage
            ),
            paper,
        )
    };
    AutoChoice { algo, reason: format!("{why} {source}") }
}

fn share(part: usize, whole: usize) -> f64 {
    if whole == 0 { 0.0 } else { part as f64 / whole as f64 }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts() -> PairFacts {
        PairFacts {
            intersection: 30_000,
            target_vocab: 150_000,
            drafter_vocab: 32_000,
            temperature: 0.0,
            drafter_mean_token_bytes: 3.5,
            has_affinity: false,
            slrs_available: true,
        }
    }

    #[test]
    fn the_papers_rule_slem_at_temperature_0_tli_above() {
        // 30 000 / 32 000 = 93.75% of the drafter shared: the paper still runs SLEM greedily
        // (the rule before it had the paper picked TLI here), whatever else is at hand.
        for f in [
            facts(),
            PairFacts { has_affinity: true, ..facts() },
            PairFacts { drafter_mean_token_bytes: 1.1, ..facts() },
            PairFacts { intersection: 10_000, ..facts() },
        ] {
            let choice = choose(&f);
            assert_eq!(choice.algo, Algo::Slem, "{f:?}");
            assert!(choice.reason.contains("Tables 1 and 7"), "{}", choice.reason);
        }
        // Any positive temperature is TLI, the paper's 1e-07 included.
        for temperature in [1e-7, 0.7, 1.0] {
            let choice = choose(&PairFacts { temperature, ..facts() });
            assert_eq!(choice.algo, Algo::Tli, "temperature {temperature}");
            assert!(choice.reason.contains("Tables 1 and 7"), "{}", choice.reason);
        }
    }

    #[test]
    fn our_refinements_and_where_they_stop() {
        let refined = |f: &PairFacts| {
            let choice = choose(f);
            assert!(choice.reason.contains("our refinement"), "{}", choice.reason);
            choice.algo
        };
        assert_eq!(refined(&PairFacts { intersection: 0, ..facts() }), Algo::Slem);
        assert_eq!(refined(&PairFacts { intersection: 0, temperature: 0.7, ..facts() }), Algo::Slem);
        let sampled = PairFacts { temperature: 0.7, ..facts() };
        // 20% of the target shared, an affinity matrix at hand: RDK.
        assert_eq!(refined(&PairFacts { has_affinity: true, ..sampled.clone() }), Algo::Rdk);
        // Half the target shared is enough for TLI.
        let wide = PairFacts { has_affinity: true, intersection: 75_000, drafter_vocab: 80_000, ..sampled.clone() };
        assert_eq!(choose(&wide).algo, Algo::Tli);
        let bytes = PairFacts { drafter_mean_token_bytes: 1.1, ..sampled.clone() };
        assert_eq!(refined(&bytes), Algo::Slrs);
        // Without SLRS, a byte-level drafter falls back to the paper's TLI.
        assert_eq!(choose(&PairFacts { slrs_available: false, ..bytes }).algo, Algo::Tli);
    }

    #[test]
    fn names_round_trip_and_unknown_names_are_errors() {
        for algo in [Algo::Union, Algo::Tli, Algo::Rdk, Algo::Slem, Algo::Slrs] {
            assert_eq!(algo.name().parse::<Algo>().unwrap(), algo);
        }
        let err = "tlii".parse::<Algo>().unwrap_err().to_string();
        assert!(err.contains("algorithm") && err.contains("tlii"), "{err}");
    }
}
