//! The one error type of `anyspec-drafters`.

/// Everything that can go wrong while setting up a drafter.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A parameter is outside its allowed range.
    #[error(transparent)]
    InvalidParameter(#[from] anyspec_core::InvalidParameter),
    /// Loading a dictionary failed.
    #[error(transparent)]
    Dictionary(#[from] anyspec_dict_builder::Error),
    /// The drafter model or a tokenizer failed.
    #[error(transparent)]
    Model(#[from] anyspec_models::Error),
    /// A projection between the two vocabularies was refused (mismatched sizes, no mass left).
    #[error(transparent)]
    Core(#[from] anyspec_core::Error),
    /// The vocabulary map between target and drafter could not give its id map.
    #[error(transparent)]
    VocabMap(#[from] anyspec_vocab_map::Error),
    /// An algorithm was asked for without an input it needs, or with one it does not use.
    #[error("{algo} {problem}")]
    AlgoInput {
        /// The algorithm, as [`crate::Algo::name`] spells it.
        algo: &'static str,
        /// What is missing or unused, and what to do.
        problem: String,
    },
    /// A bridge between two vocabularies cannot work for this drafter–target pair.
    #[error("the {bridge} bridge cannot work for this pair: {reason}")]
    UnusableBridge {
        /// The bridge, as [`crate::Algo::name`] spells it.
        bridge: &'static str,
        /// Why, and what to do instead.
        reason: String,
    },
    /// An SLRS ψ expansion would score more drafter positions than allowed; known from the
    /// vocabularies before any generation starts.
    #[error(
        "slrs would score up to {} drafter positions per drafted token with lookahead {lookahead}, \
         over the budget of {budget}: {advice}",
        positions_in_words(*positions)
    )]
    SlrsBudget {
        /// The worst-case positions per drafted token.
        positions: u64,
        /// The configured budget.
        budget: u64,
        /// The configured lookahead (most drafter tokens per walk), in words.
        lookahead: String,
        /// What to change: the largest lookahead that fits, or the budget to raise.
        advice: String,
    },
    /// An SLRS ψ expansion scored more drafter positions than allowed while drafting.
    #[error(
        "slrs scored {positions} drafter positions for one drafted token, over the budget of {budget}: \
         lower the lookahead or raise the budget (SlrsConfig)"
    )]
    SlrsBudgetExceeded {
        /// Positions scored when the expansion stopped.
        positions: u64,
        /// The configured budget.
        budget: u64,
    },
    /// A drafter model returned rows of the wrong number or length.
    #[error("the drafter model returned {got} {what}, expected {expected}")]
    ModelOutput {
        /// What was counted.
        what: &'static str,
        /// The expected count.
        expected: usize,
        /// The count returned.
        got: usize,
    },
}

/// A drafter's error as the generation loop reports it ([`anyspec_core::Error::Drafter`]), so
/// that `?` works inside [`anyspec_core::Drafter::propose`].
impl From<Error> for anyspec_core::Error {
    fn from(err: Error) -> Self {
        anyspec_core::Error::Drafter(Box::new(err))
    }
}

/// A position count for messages: plan counts saturate at `u64::MAX`, which means "too many to
/// count".
fn positions_in_words(positions: u64) -> String {
    if positions == u64::MAX { "more than 2^64".to_string() } else { positions.to_string() }
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
