//! [`AlgoRequest::Auto`](crate::hetero::AlgoRequest::Auto) (`anyspec generate --algo auto`):
//! which bridge to use for a drafter–target pair.
//!
//! hetero-vocab-sd.txt has a table of which algorithm to use when (its Table 3), but its text
//! was not available to this project (NOT FOUND in the notes). The rule below is a
//! reconstruction from what the algorithms guarantee, and says so in every reason it gives:
//!
//! 1. **Empty intersection** → SLEM: no token-level bridge can draft anything.
//! 2. **Short-token drafter** (mean ≤ [`SHORT_TOKEN_BYTES`] bytes per token, a byte- or
//!    character-level model) at temperature > 0, when SLRS is available → SLRS: its ψ(t) sums
//!    every drafter tokenization of a target token, the highest acceptance of the lossless
//!    string-level methods, and its cost (up to 2^(L−1) segmentations of an L-byte token) is
//!    small only for such drafters.
//! 3. **Temperature 0** → TLI when the drafter's vocabulary is almost all shared
//!    (≥ [`HIGH_COVERAGE`] of `D` in `T ∩ D`): the cheapest bridge, and a greedy draft loses
//!    nearly nothing; otherwise SLEM: exact match on re-tokenized text can propose any target
//!    token, which at temperature 0 is what acceptance depends on.
//! 4. **Temperature > 0** → RDK when an affinity matrix is given and the intersection covers
//!    less than [`LOW_TARGET_COVERAGE`] of the target vocabulary (TLI would leave most target
//!    tokens with q = 0); otherwise TLI. SLEM at temperature > 0 verifies a point mass, whose
//!    acceptance `Σ p(t) ψ(t)` is below TLI's `Σ min(p, q')` whenever the distributions are
//!    not near-deterministic.

use std::fmt;
use std::str::FromStr;

use serde::Serialize;

/// Mean drafter token length, in bytes, at or below which a drafter counts as short-token
/// (reconstruction; see the module documentation).
pub const SHORT_TOKEN_BYTES: f64 = 1.5;

/// Share of the drafter vocabulary in the intersection above which TLI drafts greedily as
/// well as SLEM (reconstruction).
pub const HIGH_COVERAGE: f64 = 0.9;

/// Share of the target vocabulary in the intersection below which RDK's redistribution is
/// preferred to TLI when an affinity matrix is at hand (reconstruction).
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

/// Picks a bridge for the pair (the rule of the module documentation).
pub fn choose(facts: &PairFacts) -> AutoChoice {
    let drafter_coverage = share(facts.intersection, facts.drafter_vocab);
    let target_coverage = share(facts.intersection, facts.target_vocab);
    let tag = "(rule reconstructed; the paper's Table 3 was not available)";
    let (algo, why) = if facts.intersection == 0 {
        (Algo::Slem, "the vocabularies share no token, so only string-level verification can draft".to_owned())
    } else if facts.temperature > 0.0 && facts.slrs_available && facts.drafter_mean_token_bytes <= SHORT_TOKEN_BYTES {
        (
            Algo::Slrs,
            format!(
                "the drafter's tokens are short ({:.2} bytes on average, ≤ {SHORT_TOKEN_BYTES}), so string-level \
                 rejection sampling is affordable and accepts the most at temperature {}",
                facts.drafter_mean_token_bytes, facts.temperature
            ),
        )
    } else if facts.temperature == 0.0 {
        if drafter_coverage >= HIGH_COVERAGE {
            (
                Algo::Tli,
                format!(
                    "greedy decoding and {:.1}% of the drafter vocabulary is shared (≥ {:.0}%): TLI is the \
                     cheapest and loses almost nothing",
                    100.0 * drafter_coverage,
                    100.0 * HIGH_COVERAGE
                ),
            )
        } else {
            (
                Algo::Slem,
                format!(
                    "greedy decoding and only {:.1}% of the drafter vocabulary is shared: exact match on \
                     re-tokenized text can propose any target token",
                    100.0 * drafter_coverage
                ),
            )
        }
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
        )
    } else {
        (
            Algo::Tli,
            format!(
                "sampling at temperature {}: TLI's speculative sampling accepts more than exact match on a \
                 sampled string ({:.1}% of the target vocabulary shared)",
                facts.temperature,
                100.0 * target_coverage
            ),
        )
    };
    AutoChoice { algo, reason: format!("{why} {tag}") }
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
    fn each_branch_of_the_rule() {
        let empty = PairFacts { intersection: 0, ..facts() };
        assert_eq!(choose(&empty).algo, Algo::Slem);
        // 30 000 / 32 000 = 93.75% of the drafter shared, greedy: TLI.
        assert_eq!(choose(&facts()).algo, Algo::Tli);
        let narrow = PairFacts { intersection: 10_000, ..facts() };
        assert_eq!(choose(&narrow).algo, Algo::Slem);
        let sampled = PairFacts { temperature: 0.7, ..facts() };
        assert_eq!(choose(&sampled).algo, Algo::Tli);
        // 20% of the target shared, an affinity matrix at hand: RDK.
        let rdk = PairFacts { has_affinity: true, ..sampled.clone() };
        assert_eq!(choose(&rdk).algo, Algo::Rdk);
        let bytes = PairFacts { drafter_mean_token_bytes: 1.1, ..sampled.clone() };
        assert_eq!(choose(&bytes).algo, Algo::Slrs);
        // Without SLRS, or greedy, a byte-level drafter falls through to the other branches.
        assert_eq!(choose(&PairFacts { slrs_available: false, ..bytes.clone() }).algo, Algo::Tli);
        assert_eq!(choose(&PairFacts { temperature: 0.0, ..bytes }).algo, Algo::Tli);
        for f in [empty, facts(), narrow, sampled, rdk] {
            assert!(choose(&f).reason.contains("reconstructed"));
        }
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
