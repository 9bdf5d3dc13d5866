//! The one error type of `anyspec-kernels`.

/// Everything that can go wrong in device-side verification.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Reading a result back from the device failed.
    #[error("reading a tensor back from the device failed: {message}")]
    Readback {
        /// The backend's message.
        message: String,
    },
    /// Shapes or lengths of the inputs do not fit together.
    #[error("{what}: expected {expected}, got {got}")]
    Shape {
        /// What was compared.
        what: &'static str,
        /// What was needed, in words.
        expected: String,
        /// What was given.
        got: String,
    },
    /// A drafted token id is outside the vocabulary.
    #[error("drafted token id {token} is outside the vocabulary of {vocab_size} tokens")]
    TokenOutOfRange {
        /// The token id.
        token: u32,
        /// The vocabulary size.
        vocab_size: usize,
    },
    /// A drafted token has probability 0 under the draft distribution it was said to come from.
    #[error(
        "drafted token {token} at draft position {position} has probability 0 under its draft \
         distribution; the drafter reported the wrong distribution"
    )]
    DraftTokenImpossible {
        /// Position in the draft.
        position: usize,
        /// The token id.
        token: u32,
    },
    /// The sampling transform cannot run on the device; verify on the host instead.
    #[error("{0} is not implemented on the device; verify on the host")]
    Unsupported(&'static str),
    /// A rule of `anyspec-core` rejected its input.
    #[error(transparent)]
    Core(#[from] anyspec_core::Error),
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
