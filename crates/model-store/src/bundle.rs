//! Files compiled into a binary, unpacked once into the cache.
//!
//! `anyspec demo` carries its small models and prompts inside the binary (`include_bytes!`), so
//! an installed binary needs no source tree; the code that reads them wants paths, so they are
//! unpacked to `<root>/<area>/<digest>/` on first use. The digest covers every name and byte,
//! so a binary with other files gets another directory and never reads a stale one.

use std::io::Write;
use std::path::{Component, Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::error::{Error, Result};
use crate::layout::Area;
use crate::temporary::{Removal, io_error, unique_suffix};

/// One file of a bundle: its path relative to the bundle's directory (`/`-separated), and its
/// bytes.
pub type BundleFile = (&'static str, &'static [u8]);

/// Where a bundle was found or unpacked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unpacked {
    /// The directory holding the files: `<root>/<area>/<digest>`.
    pub path: PathBuf,
    /// True when this call wrote the files, false when a complete copy was already there.
    pub unpacked: bool,
}

/// The first 16 hex digits of the sha256 of every file's name and bytes, lengths included.
pub fn bundle_digest(files: &[BundleFile]) -> String {
    let mut hasher = Sha256::new();
    for (name, bytes) in files {
        hasher.update((name.len() as u64).to_le_bytes());
        hasher.update(name.as_bytes());
        hasher.update((bytes.len() as u64).to_le_bytes());
        hasher.update(bytes);
    }
    hasher.finalize()[..8].iter().map(|byte| format!("{byte:02x}")).collect()
}

/// `files` as a directory `<root>/<area>/<digest>`: reused when every file is there with its
/// length, else written anew.
///
/// The files are written into a temporary directory unique to the process and the call, flushed
/// to disk, and the directory is renamed into place in one step, so a reader never sees half a
/// bundle and two processes unpacking at once cannot corrupt it: the first rename wins and the
/// other copy is removed. A damaged copy (a file missing or of another length) is removed and
/// replaced. Lengths, not digests, are checked on reuse: that is cheap enough for every start,
/// and the directory's name already pins the contents.
///
/// # Errors
///
/// [`Error::BundleName`] for a name that is empty, absolute or climbs out with `..`;
/// [`Error::Io`] when the cache cannot be written.
pub fn unpack_bundle(root: &Path, area: Area, files: &[BundleFile]) -> Result<Unpacked> {
    for (name, _) in files {
        let path = Path::new(name);
        if name.is_empty() || !path.components().all(|c| matches!(c, Component::Normal(_))) {
            return Err(Error::BundleName { name: (*name).to_owned() });
        }
    }
    let area_dir = root.join(area.name);
    let path = area_dir.join(bundle_digest(files));
    if is_complete(&path, files) {
        return Ok(Unpacked { path, unpacked: false });
    }
    if std::fs::symlink_metadata(&path).is_ok() {
        std::fs::remove_dir_all(&path).map_err(io_error("remove the damaged copy", &path))?;
    }
    std::fs::create_dir_all(&area_dir).map_err(io_error("create directory", &area_dir))?;
    let unique = unique_suffix();
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let temporary = Removal::dir(area_dir.join(format!(".{name}.{unique}.tmp")));
    for (name, bytes) in files {
        let file_path = temporary.path.join(name);
        if let Some(parent) = file_path.parent() {
            std::fs::create_dir_all(parent).map_err(io_error("create directory", parent))?;
        }
        let mut file = std::fs::File::create_new(&file_path).map_err(io_error("create", &file_path))?;
        file.write_all(bytes).map_err(io_error("write", &file_path))?;
        file.sync_all().map_err(io_error("flush to disk", &file_path))?;
    }
    match std::fs::rename(&temporary.path, &path) {
        Ok(()) => {
            temporary.disarm();
            Ok(Unpacked { path, unpacked: true })
        }
        // Another process renamed its complete copy into place first: use that one (ours goes
        // when `temporary` drops).
        Err(_) if is_complete(&path, files) => Ok(Unpacked { path, unpacked: false }),
        Err(source) => Err(Error::Io { action: "rename into place", path, source }),
    }
}

/// Whether `dir` holds every file with its length.
fn is_complete(dir: &Path, files: &[BundleFile]) -> bool {
    files.iter().all(|(name, bytes)| {
        std::fs::metadata(dir.join(name)).is_ok_and(|meta| meta.is_file() && meta.len() == bytes.len() as u64)
    })
}
