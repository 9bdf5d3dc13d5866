//! The one error type of `anyspec-drafters`.

/// Everything that can go wrong while setting up a drafter.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A parameter is outside its allowed range.
    #[error("{name} must be {expected}, got {value}")]
    InvalidParameter {
        /// The parameter, as a user would name it.
        name: &'static str,
        /// The allowed range, in words.
        expected: &'static str,
        /// The value that was given.
        value: String,
    },
    /// Loading a dictionary failed.
    #[error(transparent)]
    Dictionary(#[from] anyspec_dict_builder::Error),
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
