//! Temporary names in the cache, and removing them on every early return.
//!
//! Every file or directory the store writes first appears under a name unique to the process
//! and the call, and takes its final name by one rename; [`Removal`] deletes it when the work
//! fails before that.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::Error;

/// Distinguishes the temporary names of concurrent calls inside one process.
static COUNTER: AtomicU64 = AtomicU64::new(0);

/// `<pid>-<n>`, unique to this process and this call.
pub(crate) fn unique_suffix() -> String {
    format!("{}-{}", std::process::id(), COUNTER.fetch_add(1, Ordering::Relaxed))
}

/// An [`Error::Io`] for `action` on `path`, for `map_err`.
pub(crate) fn io_error(action: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> Error {
    let path = path.to_path_buf();
    move |source| Error::Io { action, path, source }
}

/// Removes a temporary file or directory when dropped, unless disarmed: every early return
/// cleans up after itself.
pub(crate) struct Removal {
    pub(crate) path: PathBuf,
    is_dir: bool,
    armed: bool,
}

impl Removal {
    pub(crate) fn file(path: PathBuf) -> Self {
        Self { path, is_dir: false, armed: true }
    }

    pub(crate) fn dir(path: PathBuf) -> Self {
        Self { path, is_dir: true, armed: true }
    }

    /// Keeps the file: it has been renamed into place.
    pub(crate) fn disarm(mut self) {
        self.armed = false;
    }
}

impl Drop for Removal {
    fn drop(&mut self) {
        if self.armed {
            // Best effort: a leftover temporary name is never read, and the caller's own result
            // (or error) matters more than a failed clean-up.
            let _ = if self.is_dir { std::fs::remove_dir_all(&self.path) } else { std::fs::remove_file(&self.path) };
        }
    }
}
