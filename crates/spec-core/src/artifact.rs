//! Writing artifacts so that a crash never leaves a half-written file behind, and recognising
//! the kind of an existing artifact by its first bytes.
//!
//! [`write_atomically`] writes `NAME.<pid>.tmp` beside `NAME` and renames it over `NAME` once it
//! is complete and on disk. Three things keep those temporary files from piling up:
//!
//! - a write that fails removes its own temporary file;
//! - a process that is being ended by a signal calls [`remove_temporaries_in_flight`] (the
//!   library installs no signal handler: that is the binary's choice), which removes the
//!   temporary files of every write still under way and refuses new ones;
//! - every write first removes the `NAME.<pid>.tmp` files of the same `NAME` whose process is
//!   gone (a `kill -9`, a power cut). Whether a process is alive is read from `/proc`; where
//!   there is no `/proc` (not Linux), nothing is removed, since a live writer's file must never be.

mod json;
mod kind;
mod safetensors;

pub use json::JsonSyntax;
pub use kind::ArtifactKind;
pub use safetensors::{SafetensorsVector, artifact_checksum, serialize_safetensors};

use std::ffi::OsStr;
use std::fs::{self, File};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

/// The highest format version that an artifact's version field can plausibly hold. Versions grow
/// by one per format change, so a larger number was not written by any anyspec (past or future
/// within reason): the field is damaged, and a loader should report the file as corrupt rather
/// than ask for a rebuild "with this version".
pub const MAX_PLAUSIBLE_VERSION: u32 = 1000;

/// Writes `path` atomically: the content goes to a temporary file in the same directory, is
/// flushed to disk, and only then renamed over `path`. Readers see the old file or the new one,
/// never a prefix. On error the temporary file is removed; stale temporary files of `path` left
/// by dead processes are removed first (see the [module docs](self)).
///
/// # Errors
/// Whatever the file system or `write` reports; [`io::ErrorKind::Interrupted`] once
/// [`remove_temporaries_in_flight`] has been called (the process is ending).
pub fn write_atomically(path: &Path, write: impl FnOnce(&mut BufWriter<File>) -> io::Result<()>) -> io::Result<()> {
    write_registered(&IN_FLIGHT, path, write)
}

/// [`write_atomically`], with the temporary file listed in `registry`.
fn write_registered(
    registry: &Registry,
    path: &Path,
    write: impl FnOnce(&mut BufWriter<File>) -> io::Result<()>,
) -> io::Result<()> {
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let file_name = path
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, format!("{} is not a file path", path.display())))?;
    remove_stale_temporaries(&dir, file_name);
    let temp = dir.join(temporary_name(file_name, std::process::id()));

    let registration = InFlight::register(registry, &temp)?;
    let result = (|| {
        let mut writer = BufWriter::new(File::create(&temp)?);
        write(&mut writer)?;
        writer.flush()?;
        writer.into_inner().map_err(|e| e.into_error())?.sync_all()?;
        fs::rename(&temp, path)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&temp);
    }
    drop(registration);
    result
}

/// Removes the temporary file of every [`write_atomically`] under way in this process, and makes
/// later calls fail instead of creating new ones. For a signal handler that is about to end the
/// process: the artifacts being replaced stay as they were, since a temporary file is only ever
/// renamed over its artifact once complete. Returns the files removed.
///
/// A write whose temporary file is being created at the very moment of the call may still leave
/// it behind; the next write to the same path removes it (its process is then gone).
pub fn remove_temporaries_in_flight() -> Vec<PathBuf> {
    remove_registered(&IN_FLIGHT)
}

fn remove_registered(registry: &Registry) -> Vec<PathBuf> {
    let mut state = lock(registry);
    state.closed = true;
    state.paths.drain(..).filter(|temp| fs::remove_file(temp).is_ok()).collect()
}

/// `NAME.<pid>.tmp`.
fn temporary_name(file_name: &OsStr, pid: u32) -> std::ffi::OsString {
    let mut name = file_name.to_os_string();
    name.push(format!(".{pid}.tmp"));
    name
}

/// Removes `dir/NAME.<pid>.tmp` for every `pid` that is not a live process (other than this one,
/// whose own temporary file is about to be truncated anyway). Errors are ignored: cleaning up is
/// a courtesy, and the write itself reports any real problem with the directory.
fn remove_stale_temporaries(dir: &Path, file_name: &OsStr) {
    let Some(file_name) = file_name.to_str() else { return };
    if !Path::new("/proc/self").exists() {
        return;
    }
    let Ok(entries) = fs::read_dir(dir) else { return };
    let own = std::process::id();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|n| stale_pid(n, file_name)) else { continue };
        if pid != own && !Path::new("/proc").join(pid.to_string()).exists() {
            let _ = fs::remove_file(entry.path());
        }
    }
}

/// The `pid` of `NAME.<pid>.tmp`, if `name` has that form for this `NAME`.
fn stale_pid(name: &str, file_name: &str) -> Option<u32> {
    let digits = name.strip_prefix(file_name)?.strip_prefix('.')?.strip_suffix(".tmp")?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// The temporary files being written by this process.
#[derive(Default)]
struct InFlightState {
    paths: Vec<PathBuf>,
    /// Set by [`remove_temporaries_in_flight`]: the process is ending, write nothing more.
    closed: bool,
}

type Registry = Mutex<InFlightState>;

/// The process's temporary files (tests use registries of their own, so that closing one does not
/// stop the other tests' writes).
static IN_FLIGHT: Registry = Mutex::new(InFlightState { paths: Vec::new(), closed: false });

fn lock(registry: &Registry) -> MutexGuard<'_, InFlightState> {
    // A panic while holding the lock cannot leave the list inconsistent (one push or one remove).
    registry.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// One temporary file listed in a registry until dropped. The file is created after it is
/// listed, outside the lock, so that a signal handler never waits for a slow `open`.
struct InFlight<'a> {
    registry: &'a Registry,
    temp: PathBuf,
}

impl<'a> InFlight<'a> {
    fn register(registry: &'a Registry, temp: &Path) -> io::Result<InFlight<'a>> {
        let mut state = lock(registry);
        if state.closed {
            return Err(io::Error::new(io::ErrorKind::Interrupted, "the process is ending; nothing more is written"));
        }
        state.paths.push(temp.to_path_buf());
        Ok(InFlight { registry, temp: temp.to_path_buf() })
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        let mut state = lock(self.registry);
        if let Some(i) = state.paths.iter().position(|p| *p == self.temp) {
            state.paths.swap_remove(i);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fresh_dir(test: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("anyspec-atomic-{test}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn names(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> =
            fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        names.sort();
        names
    }

    #[test]
    fn a_failed_write_leaves_the_old_file_and_no_temporary() {
        let dir = fresh_dir("failed");
        let path = dir.join("artifact.bin");
        write_atomically(&path, |w| w.write_all(b"old")).unwrap();
        let err = write_atomically(&path, |w| {
            w.write_all(b"partial")?;
            Err(io::Error::other("disk full"))
        });
        assert!(err.is_err());
        assert_eq!(fs::read(&path).unwrap(), b"old");
        assert_eq!(fs::read_dir(&dir).unwrap().count(), 1, "the temporary file was left behind");
        write_atomically(&path, |w| w.write_all(b"new")).unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"new");
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    #[allow(clippy::print_stderr)]
    fn stale_temporaries_of_dead_processes_are_removed_and_others_kept() {
        if !Path::new("/proc/self").exists() {
            eprintln!("SKIPPED: no /proc here, so stale temporary files are never removed");
            return;
        }
        let dir = fresh_dir("stale");
        let path = dir.join("artifact.bin");
        // 4,194,305 is above the largest pid Linux can hand out (pid_max ≤ 2^22).
        let keep = ["artifact.bin.1.tmp", "artifact.bin.x1.tmp", "other.bin.4194305.tmp", "artifact.bin.4194305"];
        for name in keep.iter().chain(["artifact.bin.4194305.tmp", "artifact.bin.4194306.tmp"].iter()) {
            fs::write(dir.join(name), b"x").unwrap();
        }
        write_atomically(&path, |w| w.write_all(b"new")).unwrap();
        let mut expected: Vec<String> = keep.iter().map(|s| s.to_string()).collect();
        expected.push("artifact.bin".into());
        expected.sort();
        // pid 1 is alive; the others do not match `artifact.bin.<pid>.tmp`.
        assert_eq!(names(&dir), expected);
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn stale_pid_reads_only_the_exact_form() {
        assert_eq!(stale_pid("a.dict.123.tmp", "a.dict"), Some(123));
        assert_eq!(stale_pid("a.dict.tmp", "a.dict"), None);
        assert_eq!(stale_pid("a.dict..tmp", "a.dict"), None);
        assert_eq!(stale_pid("a.dict.12a.tmp", "a.dict"), None);
        assert_eq!(stale_pid("b.dict.123.tmp", "a.dict"), None);
        assert_eq!(stale_pid("a.dict.99999999999.tmp", "a.dict"), None);
    }

    #[test]
    fn a_write_interrupted_by_the_signal_cleanup_leaves_the_old_file_and_no_temporary() {
        let dir = fresh_dir("signal");
        let path = dir.join("artifact.bin");
        write_atomically(&path, |w| w.write_all(b"old")).unwrap();
        // A registry of this test's own: closing the process's one would stop the other tests.
        let registry = Registry::default();
        let mut removed = Vec::new();
        let err = write_registered(&registry, &path, |w| {
            w.write_all(b"partial")?;
            w.flush()?;
            // What the signal handler's thread does while this write is under way.
            removed = remove_registered(&registry);
            Ok(())
        });
        // The rename finds its temporary file gone.
        assert!(err.is_err());
        assert_eq!(removed, vec![dir.join(temporary_name(OsStr::new("artifact.bin"), std::process::id()))]);
        assert_eq!(fs::read(&path).unwrap(), b"old");
        assert_eq!(names(&dir), vec!["artifact.bin".to_string()]);
        let refused = write_registered(&registry, &dir.join("later.bin"), |w| w.write_all(b"x")).unwrap_err();
        assert_eq!(refused.kind(), io::ErrorKind::Interrupted);
        assert_eq!(names(&dir), vec!["artifact.bin".to_string()]);
        fs::remove_dir_all(&dir).unwrap();
    }
}
