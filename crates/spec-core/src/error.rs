//! The one error type of `anyspec-core`.

use std::error::Error as StdError;

/// Everything that can go wrong in `anyspec-core`.
///
/// Every message names the offending value and, where there is one, the fix.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A parameter is outside its allowed range.
    #[error(transparent)]
    InvalidParameter(#[from] InvalidParameter),
    /// Logits contain NaN or +∞: the model produced numbers that cannot be a distribution.
    #[error(
        "logits contain {value} at token {index}; the model produced invalid numbers \
         (check the checkpoint's weights and dtype)"
    )]
    NonFiniteLogits {
        /// Token index of the first bad value.
        index: usize,
        /// `NaN` or `+inf`.
        value: &'static str,
    },
    /// A probability vector has no usable mass.
    #[error("{what} has no probability mass (sum {sum}); nothing can be sampled from it")]
    EmptyDistribution {
        /// Which distribution.
        what: &'static str,
        /// Its sum.
        sum: f64,
    },
    /// A probability is negative or not finite.
    #[error("{what} holds an invalid probability {value} at token {index}")]
    InvalidProbability {
        /// Which distribution.
        what: &'static str,
        /// Token index.
        index: usize,
        /// The value.
        value: f32,
    },
    /// Two things that must have the same length do not.
    #[error("{what}: expected length {expected}, got {got}")]
    LengthMismatch {
        /// What was compared.
        what: &'static str,
        /// The length that was needed.
        expected: usize,
        /// The length that was given.
        got: usize,
    },
    /// A token id is not in the vocabulary it is used with.
    #[error("token id {token} is outside the vocabulary of {vocab_size} tokens")]
    TokenOutOfRange {
        /// The token id.
        token: u32,
        /// The vocabulary size.
        vocab_size: usize,
    },
    /// A drafted token has zero probability under the distribution it was said to be drawn from.
    ///
    /// Verifying such a draft would divide by zero; it means the drafter reported the wrong
    /// distribution, which would silently break losslessness.
    #[error(
        "drafted token {token} at draft position {position} has probability 0 under the draft \
         distribution it was drawn from; the drafter reported the wrong distribution"
    )]
    DraftTokenImpossible {
        /// Position in the draft.
        position: usize,
        /// The token id.
        token: u32,
    },
    /// The prompt has no tokens.
    #[error("the prompt is empty; give at least one token (for text, a non-empty prompt)")]
    EmptyPrompt,
    /// The prompt does not fit the target's context window.
    #[error(
        "the prompt has {prompt_len} tokens but the target's context window holds {max_len}, and one \
         position is needed for each new token; shorten the prompt to at most {} tokens",
        .max_len.saturating_sub(1)
    )]
    PromptTooLong {
        /// Prompt length in tokens.
        prompt_len: usize,
        /// The target's context window.
        max_len: usize,
    },
    /// The drafter failed.
    #[error("the drafter failed")]
    Drafter(#[source] Box<dyn StdError + Send + Sync>),
    /// The target failed.
    #[error("the target model failed")]
    Target(#[source] Box<dyn StdError + Send + Sync>),
}

impl Error {
    /// Shorthand for [`Error::InvalidParameter`].
    pub fn invalid(name: &'static str, expected: &'static str, value: impl ToString) -> Self {
        Error::InvalidParameter(InvalidParameter { name, expected, value: value.to_string() })
    }
}

/// A parameter outside its allowed range: the one shape in which every anyspec crate reports it
/// (each crate's `Error::InvalidParameter` wraps it), so that a front end can name the flag or
/// field behind `name` in one place.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{name} must be {expected}, got {value}")]
pub struct InvalidParameter {
    /// The parameter, as a user would name it (for example `top_p`).
    pub name: &'static str,
    /// The allowed range, in words (for example `in (0, 1]`).
    pub expected: &'static str,
    /// The value that was given.
    pub value: String,
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
