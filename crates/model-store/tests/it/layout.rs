//! Listing and clearing the cache by area, and unpacking bundles into it.

use std::path::Path;
use std::sync::Barrier;

use anyspec_model_store::layout::{self, DEMO_ARTIFACTS, DEMO_ASSETS, MODELS};
use anyspec_model_store::{AREAS, BundleFile, Error, bundle_digest, unpack_bundle};

use crate::support::TempDir;

fn write(path: &Path, bytes: &[u8]) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, bytes).unwrap();
}

#[test]
fn usage_counts_files_and_bytes_per_area_and_lists_foreign_entries() {
    let dir = TempDir::new("usage");
    let root = dir.path();
    write(&root.join("models/a.gguf"), &[0; 1000]);
    write(&root.join("demo/x/y.dict"), &[0; 30]);
    write(&root.join("demo/z.vmap"), &[0; 12]);
    write(&root.join("my-notes.txt"), b"not anyspec's");
    let usage = layout::usage(root).unwrap();
    assert!(usage.exists);
    let of = |name: &str| usage.areas.iter().find(|a| a.area.name == name).unwrap().clone();
    assert_eq!((of("models").files, of("models").bytes), (1, 1000));
    assert_eq!((of("demo").files, of("demo").bytes), (2, 42));
    assert!(!of("downloads").exists);
    assert_eq!(of("downloads").bytes, 0);
    assert_eq!(usage.total_bytes(), 1042);
    assert_eq!(usage.others, vec![root.join("my-notes.txt")]);
    assert_eq!(usage.areas.len(), AREAS.len());
}

#[test]
fn a_missing_root_is_an_empty_cache() {
    let dir = TempDir::new("missing");
    let usage = layout::usage(&dir.path().join("never-made")).unwrap();
    assert!(!usage.exists);
    assert_eq!(usage.total_bytes(), 0);
    assert!(usage.others.is_empty());
}

#[test]
fn clear_removes_only_the_named_areas_never_the_root_or_foreign_files() {
    let dir = TempDir::new("clear");
    let root = dir.path();
    write(&root.join("models/a.gguf"), &[1; 10]);
    write(&root.join("demo/b.dict"), &[2; 20]);
    write(&root.join("demo-assets/0123/target/config.json"), b"{}");
    write(&root.join("mine.txt"), b"keep me");
    let removed = layout::clear(root, &[DEMO_ARTIFACTS, DEMO_ASSETS]).unwrap();
    assert_eq!(removed.iter().map(|a| (a.area.name, a.bytes)).collect::<Vec<_>>(), [("demo", 20), ("demo-assets", 2)]);
    assert!(root.join("models/a.gguf").is_file());
    assert!(!root.join("demo").exists() && !root.join("demo-assets").exists());
    assert_eq!(std::fs::read(root.join("mine.txt")).unwrap(), b"keep me");
    // Clearing everything still keeps the root and the foreign file.
    layout::clear(root, AREAS).unwrap();
    assert!(!root.join("models").exists());
    assert_eq!(std::fs::read(root.join("mine.txt")).unwrap(), b"keep me");
}

#[cfg(unix)]
#[test]
fn clear_removes_a_link_to_a_model_kept_elsewhere_not_the_model() {
    let dir = TempDir::new("link");
    let elsewhere = dir.path().join("elsewhere.gguf");
    std::fs::write(&elsewhere, [7; 64]).unwrap();
    let root = dir.path().join("cache");
    std::fs::create_dir_all(root.join("models")).unwrap();
    std::os::unix::fs::symlink(&elsewhere, root.join("models/m.gguf")).unwrap();
    let usage = layout::usage(&root).unwrap();
    // The link is counted as the link, not as the 64-byte file it points to.
    let models = usage.areas.iter().find(|a| a.area == MODELS).unwrap();
    assert_eq!(models.files, 1);
    assert!(models.bytes < 64, "{models:?}");
    layout::clear(&root, &[MODELS]).unwrap();
    assert_eq!(std::fs::read(&elsewhere).unwrap(), [7; 64]);
}

#[test]
fn an_unknown_area_is_named_with_the_known_ones() {
    let err = layout::find_area("modles").unwrap_err();
    assert!(matches!(err, Error::UnknownArea { .. }));
    let message = err.to_string();
    assert!(message.contains("`modles`") && message.contains("models, downloads, demo, demo-assets"), "{message}");
    assert_eq!(layout::find_area("demo").unwrap(), DEMO_ARTIFACTS);
}

const BUNDLE: &[BundleFile] = &[("a.json", b"{\"x\": 1}"), ("sub/b.bin", &[9; 4096])];

#[test]
fn a_bundle_is_unpacked_once_and_reused() {
    let dir = TempDir::new("bundle");
    let first = unpack_bundle(dir.path(), DEMO_ASSETS, BUNDLE).unwrap();
    assert!(first.unpacked);
    assert_eq!(first.path, dir.path().join("demo-assets").join(bundle_digest(BUNDLE)));
    assert_eq!(std::fs::read(first.path.join("sub/b.bin")).unwrap(), [9; 4096]);
    let second = unpack_bundle(dir.path(), DEMO_ASSETS, BUNDLE).unwrap();
    assert_eq!(second, anyspec_model_store::Unpacked { path: first.path.clone(), unpacked: false });
    // Nothing but the bundle's directory is left in the area (no temporary directories).
    let entries: Vec<_> =
        std::fs::read_dir(dir.path().join("demo-assets")).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(entries, vec![first.path]);
}

#[test]
fn a_damaged_bundle_is_replaced() {
    let dir = TempDir::new("damaged");
    let path = unpack_bundle(dir.path(), DEMO_ASSETS, BUNDLE).unwrap().path;
    std::fs::write(path.join("sub/b.bin"), [9; 100]).unwrap();
    let again = unpack_bundle(dir.path(), DEMO_ASSETS, BUNDLE).unwrap();
    assert!(again.unpacked);
    assert_eq!(std::fs::read(path.join("sub/b.bin")).unwrap(), [9; 4096]);
    std::fs::remove_file(path.join("a.json")).unwrap();
    assert!(unpack_bundle(dir.path(), DEMO_ASSETS, BUNDLE).unwrap().unpacked);
    assert!(path.join("a.json").is_file());
}

#[test]
fn other_contents_get_another_directory() {
    let other: &[BundleFile] = &[("a.json", b"{\"x\": 2}"), ("sub/b.bin", &[9; 4096])];
    assert_ne!(bundle_digest(BUNDLE), bundle_digest(other));
    // A name moved into the bytes is another bundle too (lengths are part of the digest).
    assert_ne!(bundle_digest(&[("ab", b"c")]), bundle_digest(&[("a", b"bc")]));
}

#[test]
fn concurrent_unpackings_leave_one_complete_copy() {
    let dir = TempDir::new("concurrent");
    let barrier = Barrier::new(4);
    let results: Vec<_> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..4)
            .map(|_| {
                scope.spawn(|| {
                    barrier.wait();
                    unpack_bundle(dir.path(), DEMO_ASSETS, BUNDLE)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap().unwrap()).collect()
    });
    assert!(results.iter().all(|r| r.path == results[0].path));
    assert!(results.iter().any(|r| r.unpacked));
    assert_eq!(std::fs::read(results[0].path.join("sub/b.bin")).unwrap(), [9; 4096]);
    let entries = std::fs::read_dir(dir.path().join("demo-assets")).unwrap().count();
    assert_eq!(entries, 1, "temporary directories were left behind");
}

#[test]
fn names_that_escape_the_bundle_are_refused() {
    let dir = TempDir::new("escape");
    for name in ["../evil", "/etc/passwd", "", "a/../../b"] {
        let files: Vec<BundleFile> = vec![(Box::leak(name.to_owned().into_boxed_str()), b"x")];
        let err = unpack_bundle(dir.path(), DEMO_ASSETS, &files).unwrap_err();
        assert!(matches!(err, Error::BundleName { .. }), "{name}: {err}");
    }
    assert!(!dir.path().join("demo-assets").exists());
}
