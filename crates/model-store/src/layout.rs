//! What lives in the cache directory, and clearing it.
//!
//! The cache root holds one directory per [`Area`]. Listing and clearing go by area, never by
//! walking up or deleting the root itself: `ANYSPEC_CACHE` may point at a directory that also
//! holds the user's own files, and those are listed as [`CacheUsage::others`] and never removed.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::temporary::io_error;

/// One directory of the cache root, owned by one part of anyspec.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Area {
    /// The directory's name under the root, and what `anyspec cache clear` calls it.
    pub name: &'static str,
    /// What it holds, in a short phrase.
    pub about: &'static str,
}

/// Fetched model files: `<root>/models/<file_name>` ([`ModelStore`](crate::ModelStore)).
pub const MODELS: Area = Area { name: "models", about: "fetched model files, checked by sha256" };
/// Wheels while a fetch runs, and what an interrupted fetch left behind.
pub const DOWNLOADS: Area =
    Area { name: "downloads", about: "wheels while a fetch runs (leftovers of an interrupted fetch)" };
/// The artifacts `anyspec demo` builds (dictionaries, vocabulary maps, affinity matrices).
pub const DEMO_ARTIFACTS: Area =
    Area { name: "demo", about: "artifacts the demo built: n-gram dictionaries, vocabulary maps, affinity matrices" };
/// The demo's small models and prompts, unpacked from the binary ([`unpack_bundle`](crate::unpack_bundle)).
pub const DEMO_ASSETS: Area =
    Area { name: "demo-assets", about: "the demo's small models and prompts, unpacked from the binary" };

/// Every area, in the order `anyspec cache list` prints them.
pub const AREAS: &[Area] = &[MODELS, DOWNLOADS, DEMO_ARTIFACTS, DEMO_ASSETS];

/// How much one area holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AreaUsage {
    /// Which area.
    pub area: Area,
    /// `<root>/<area.name>`, whether or not it exists.
    pub path: PathBuf,
    /// Whether the directory exists.
    pub exists: bool,
    /// Regular files under it (symbolic links count as files of their own size, never followed).
    pub files: u64,
    /// Their total size in bytes.
    pub bytes: u64,
}

/// What the cache root holds: every area, and the entries that belong to none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheUsage {
    /// The root that was read.
    pub root: PathBuf,
    /// Whether the root exists (nothing has been cached yet when it does not).
    pub exists: bool,
    /// One entry per [`AREAS`] element, in that order.
    pub areas: Vec<AreaUsage>,
    /// Entries of the root that are no area: never anyspec's to remove.
    pub others: Vec<PathBuf>,
}

impl CacheUsage {
    /// Bytes in every area together.
    pub fn total_bytes(&self) -> u64 {
        self.areas.iter().map(|area| area.bytes).sum()
    }
}

/// The area called `name`.
///
/// # Errors
///
/// [`Error::UnknownArea`] naming the known areas.
pub fn find_area(name: &str) -> Result<Area> {
    AREAS.iter().copied().find(|area| area.name == name).ok_or_else(|| Error::UnknownArea {
        name: name.to_owned(),
        known: AREAS.iter().map(|area| area.name).collect::<Vec<_>>().join(", "),
    })
}

/// Sizes of every area under `root`. A missing root or area is empty, not an error.
///
/// # Errors
///
/// [`Error::Io`] when a directory that exists cannot be read.
pub fn usage(root: &Path) -> Result<CacheUsage> {
    let exists = root.is_dir();
    let mut areas = Vec::with_capacity(AREAS.len());
    for &area in AREAS {
        areas.push(area_usage(root, area)?);
    }
    let mut others = Vec::new();
    if exists {
        for entry in std::fs::read_dir(root).map_err(io_error("list", root))? {
            let entry = entry.map_err(io_error("list", root))?;
            let name = entry.file_name();
            if !AREAS.iter().any(|area| name == area.name) {
                others.push(entry.path());
            }
        }
        others.sort();
    }
    Ok(CacheUsage { root: root.to_path_buf(), exists, areas, others })
}

/// Removes the named areas' directories under `root` and returns what they held.
///
/// Only `<root>/<area>` directories are removed: never the root, never an entry of the root that
/// is no area. Symbolic links inside an area are removed, not followed. A missing area is
/// reported with zero files.
///
/// # Errors
///
/// [`Error::Io`] when a directory cannot be read or removed (the areas before it are gone).
pub fn clear(root: &Path, areas: &[Area]) -> Result<Vec<AreaUsage>> {
    let mut removed = Vec::with_capacity(areas.len());
    for &area in areas {
        let before = area_usage(root, area)?;
        let meta = std::fs::symlink_metadata(&before.path);
        match meta {
            Ok(meta) if meta.is_dir() => {
                std::fs::remove_dir_all(&before.path).map_err(io_error("remove", &before.path))?;
            }
            // A file or a link where an area's directory belongs is removed as such (never followed).
            Ok(_) => std::fs::remove_file(&before.path).map_err(io_error("remove", &before.path))?,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
            Err(source) => return Err(Error::Io { action: "inspect", path: before.path, source }),
        }
        removed.push(before);
    }
    Ok(removed)
}

fn area_usage(root: &Path, area: Area) -> Result<AreaUsage> {
    let path = root.join(area.name);
    let (mut files, mut bytes) = (0, 0);
    let exists = std::fs::symlink_metadata(&path).map(|m| m.is_dir()).unwrap_or(false);
    if exists {
        let mut stack = vec![path.clone()];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).map_err(io_error("list", &dir))? {
                let entry = entry.map_err(io_error("list", &dir))?;
                // `file_type` and `symlink_metadata` do not follow links: a link to a model kept
                // elsewhere counts as the link, and a link to a directory is not walked.
                let meta = std::fs::symlink_metadata(entry.path()).map_err(io_error("inspect", &entry.path()))?;
                if meta.is_dir() {
                    stack.push(entry.path());
                } else {
                    files += 1;
                    bytes += meta.len();
                }
            }
        }
    }
    Ok(AreaUsage { area, path, exists, files, bytes })
}
