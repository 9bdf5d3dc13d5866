//! The errors of training and exporting.

use std::path::PathBuf;

/// Everything that can go wrong while training tokenizers or models and writing checkpoints.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A file could not be read or written.
    #[error("cannot read or write {}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A model or training setting is out of range.
    #[error("invalid {field} = {value}: {reason}")]
    InvalidSetting {
        /// The setting.
        field: &'static str,
        /// Its value.
        value: String,
        /// Why it is refused and what to pick instead.
        reason: &'static str,
    },
    /// The token stream is too short for one training window.
    #[error(
        "the token stream has {tokens} tokens but one training window needs {needed}; give more text or a shorter seq_len"
    )]
    NotEnoughTokens {
        /// Tokens in the stream.
        tokens: usize,
        /// `seq_len + 1`.
        needed: usize,
    },
    /// A token id is not below the model's vocabulary size.
    #[error(
        "token id {token} is outside the model's vocabulary of {vocab_size}; train the model with the tokenizer that produced the stream"
    )]
    TokenOutOfRange {
        /// The id.
        token: u32,
        /// The model's vocabulary size.
        vocab_size: usize,
    },
    /// The loss became NaN or infinite.
    #[error("the training loss diverged ({loss}) at step {step}; lower the learning rate")]
    Diverged {
        /// The step.
        step: usize,
        /// The loss.
        loss: f32,
    },
    /// The `tokenizers` crate failed (training, building or saving a tokenizer).
    #[error("tokenizer {what}: {message}")]
    Tokenizer {
        /// What was being done.
        what: &'static str,
        /// The message of `tokenizers`.
        message: String,
    },
    /// Serialising a checkpoint failed.
    #[error("writing {}: {message}", path.display())]
    Serialize {
        /// The file.
        path: PathBuf,
        /// What failed.
        message: String,
    },
    /// `anyspec-models` refused the architecture (its RoPE tables, for instance).
    #[error(transparent)]
    Model(#[from] anyspec_models::Error),
    /// A tensor could not be read back from the device.
    #[error("reading tensor {tensor} from the device: {message}")]
    Device {
        /// The tensor.
        tensor: String,
        /// The backend's message.
        message: String,
    },
}

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub(crate) fn io(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> Error {
        let path = path.into();
        move |source| Error::Io { path, source }
    }

    pub(crate) fn tokenizer(what: &'static str) -> impl FnOnce(tokenizers::Error) -> Error {
        move |e| Error::Tokenizer { what, message: e.to_string() }
    }
}
