//! Puts the git commit and the compiled-in backends into `anyspec --version`.
//!
//! The commit comes from `git` at build time; a build from a source tree without git (an
//! unpacked tarball) says `commit unknown`. The script reruns when HEAD moves, so a rebuild after
//! a commit never shows the previous one.

// A build script speaks to cargo through stdout.
#![allow(clippy::print_stdout)]

use std::path::PathBuf;
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    (out.status.success() && !text.trim().is_empty()).then(|| text.trim().to_owned())
}

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let commit = git(&["rev-parse", "--short=12", "HEAD"]);
    // Rerun when HEAD or the branch it names moves. Only paths that exist are named: cargo
    // reruns on every build for a missing one.
    if let Some(git_dir) = git(&["rev-parse", "--absolute-git-dir"]) {
        let mut watched = vec![PathBuf::from(&git_dir).join("HEAD")];
        if let Some(common) = git(&["rev-parse", "--path-format=absolute", "--git-common-dir"]) {
            watched.push(PathBuf::from(&common).join("packed-refs"));
            if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
                watched.push(PathBuf::from(&common).join(branch));
            }
        }
        for path in watched.iter().filter(|path| path.exists()) {
            println!("cargo:rerun-if-changed={}", path.display());
        }
    }
    let mut backends = vec!["cpu"];
    if std::env::var_os("CARGO_FEATURE_WGPU").is_some() {
        backends.push("wgpu");
    }
    if std::env::var_os("CARGO_FEATURE_CUDA").is_some() {
        backends.push("cuda");
    }
    let version = std::env::var("CARGO_PKG_VERSION").unwrap_or_default();
    println!(
        "cargo:rustc-env=ANYSPEC_VERSION={version} (commit {}; backends: {})",
        commit.as_deref().unwrap_or("unknown"),
        backends.join(", ")
    );
}
