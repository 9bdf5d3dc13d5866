//! The one error type of `anyspec-dynaspec`.

use std::path::PathBuf;

/// Everything that can go wrong while clustering, routing, saving or loading a DynaSpec router.
///
/// Every message names the offending file or value and, where there is one, the fix.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A parameter or an input is outside its allowed range; the message says which and what to
    /// do.
    #[error("{0}")]
    InvalidArgument(String),
    /// A file could not be read or written.
    #[error("cannot {action} {path}")]
    Io {
        /// What was being done (`read`, `write`).
        action: &'static str,
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A file is not a DynaSpec router.
    #[error("{path} is not a DynaSpec router: it holds {found}; check the path")]
    NotAnArtifact {
        /// The file.
        path: PathBuf,
        /// What it is.
        found: &'static str,
    },
    /// A router was written by another format version.
    #[error("{path} has format version {found}, this build reads version {expected}; rebuild it with this version")]
    Version {
        /// The file.
        path: PathBuf,
        /// The version this code reads.
        expected: u32,
        /// The version in the file.
        found: String,
    },
    /// A router or EAGLE drafter file is truncated, fails its checksum or holds inconsistent arrays.
    #[error("{path} is corrupt: {problem}; rebuild it")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        problem: String,
    },
    /// A router or EAGLE drafter was built for another model than the one it is used with.
    #[error(
        "{path} was built for the model with fingerprint {built_for}, but the model given has fingerprint \
         {given}; rebuild it for this model (`anyspec dynaspec build --model <this model>`, or `anyspec dynaspec eagle` \
         for an EAGLE drafter) or pass the model it was built for"
    )]
    WrongModel {
        /// The router file.
        path: PathBuf,
        /// Fingerprint recorded in the router.
        built_for: String,
        /// Fingerprint of the model given.
        given: String,
    },
}

impl Error {
    pub(crate) fn io(action: &'static str, path: &std::path::Path) -> impl FnOnce(std::io::Error) -> Error {
        let path = path.to_path_buf();
        move |source| Error::Io { action, path, source }
    }

    pub(crate) fn invalid(message: impl Into<String>) -> Error {
        Error::InvalidArgument(message.into())
    }
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A shortlist failure inside a drafting step is the drafter's error.
impl From<Error> for anyspec_core::Error {
    fn from(err: Error) -> Self {
        anyspec_core::Error::Drafter(Box::new(err))
    }
}
