//! The checks every artifact-writing command makes before it writes `-o PATH`: never over one of
//! its own inputs, and never over a file that is not an artifact of the kind it writes unless
//! `--force` says so.
//!
//! A build replaces its output by renaming a finished file over it, so an output that is one of
//! the inputs (the corpus, the tokenizer, a shard) destroys that input. "Is" means resolves to the
//! same file: through symbolic links and `..` (both paths canonicalized, the output's parent
//! directory when the output does not exist yet) and through hard links (same device and inode).

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::bail;
use anyspec_core::artifact::ArtifactKind;

/// The output a command is about to write.
pub(crate) struct Output<'a> {
    /// The flag that named it, as the user typed it: `-o` or `--out`.
    pub(crate) flag: &'a str,
    pub(crate) path: &'a Path,
    pub(crate) kind: ArtifactKind,
    /// `--force`: replace an existing file that is not of `kind`.
    pub(crate) force: bool,
}

/// Refuses `output` if it resolves to any of `inputs` (each named by its flag, e.g. `--corpus`),
/// or if it is an existing file other than an artifact of `output.kind` and `--force` was not
/// given. Inputs that do not exist are skipped: loading them reports that better.
pub(crate) fn check_output(output: &Output<'_>, inputs: &[(&str, &Path)]) -> anyhow::Result<()> {
    let Output { flag, path, kind, force } = *output;
    for &(input_flag, input) in inputs {
        if same_file(path, input) {
            bail!(
                "{flag} {} is the same file as the input {input_flag} {}: writing it would destroy that input; choose \
                 another output path",
                path.display(),
                input.display(),
            );
        }
    }
    let Ok(metadata) = fs::metadata(path) else { return Ok(()) };
    if metadata.is_dir() {
        bail!(
            "{flag} {} is a directory; name the file to write, e.g. {flag} {}",
            path.display(),
            example(path, kind).display()
        );
    }
    if force {
        return Ok(());
    }
    let found = match ArtifactKind::of_file(path) {
        Ok(Some(found)) if found == kind => return Ok(()),
        Ok(Some(found)) => found.description().to_string(),
        Ok(None) if metadata.len() == 0 => "an empty file".to_string(),
        Ok(None) => "not an anyspec artifact".to_string(),
        Err(_) => "unreadable, so what it holds is unknown".to_string(),
    };
    bail!(
        "{flag} {} already exists and is {found}, not {kind}; pass --force to replace it, or choose another output \
         path",
        path.display(),
    )
}

/// Refuses two of `inputs` that name the same file (the same path, a link to it, or a hard link):
/// counting a corpus or merging a shard twice would silently double its counts.
pub(crate) fn check_counted_once(inputs: &[(&str, &Path)]) -> anyhow::Result<()> {
    for (i, &(first_flag, first)) in inputs.iter().enumerate() {
        for &(second_flag, second) in &inputs[i + 1..] {
            if same_file(first, second) {
                bail!(
                    "{first_flag} {} and {second_flag} {} are the same file: its counts would be added twice; give \
                     each input once",
                    first.display(),
                    second.display(),
                );
            }
        }
    }
    Ok(())
}

/// An example output path inside the directory `dir`.
fn example(dir: &Path, kind: ArtifactKind) -> PathBuf {
    dir.join(match kind {
        ArtifactKind::Dictionary => "target.dict",
        ArtifactKind::CountShard => "part.counts",
        ArtifactKind::VocabMap => "target-drafter.vmap",
        ArtifactKind::Shortlist => "drafter.shortlist",
        ArtifactKind::Router => "router.safetensors",
        ArtifactKind::FeatureDrafter => "eagle.safetensors",
        _ => "affinity.safetensors",
    })
}

/// Whether `a` and `b` name the same file.
fn same_file(a: &Path, b: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        if let (Ok(a), Ok(b)) = (fs::metadata(a), fs::metadata(b)) {
            return a.dev() == b.dev() && a.ino() == b.ino();
        }
    }
    matches!((resolve(a), resolve(b)), (Some(a), Some(b)) if a == b)
}

/// `path` with every symbolic link and `..` resolved; for a file that does not exist yet, its
/// canonical parent directory joined with its name.
fn resolve(path: &Path) -> Option<PathBuf> {
    if let Ok(resolved) = fs::canonicalize(path) {
        return Some(resolved);
    }
    let name = path.file_name()?;
    let parent = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    Some(fs::canonicalize(parent).ok()?.join(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(test: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("anyspec-output-guard-{test}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(dir.join("sub")).unwrap();
        dir
    }

    fn output(path: &Path, force: bool) -> Output<'_> {
        Output { flag: "-o", path, kind: ArtifactKind::Dictionary, force }
    }

    #[test]
    fn an_output_reached_through_dot_dot_is_its_input() {
        let dir = dir("dotdot");
        let corpus = dir.join("corpus.txt");
        fs::write(&corpus, "text").unwrap();
        let through = dir.join("sub/../corpus.txt");
        let err = check_output(&output(&through, true), &[("--corpus", &corpus)]).unwrap_err().to_string();
        assert!(err.contains("is the same file as the input --corpus"), "{err}");
        let fresh = dir.join("sub/../fresh.dict");
        check_output(&output(&fresh, false), &[("--corpus", &corpus)]).unwrap();
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn resolve_joins_a_missing_file_to_its_canonical_parent() {
        let dir = dir("resolve");
        let canonical = fs::canonicalize(&dir).unwrap();
        assert_eq!(resolve(&dir.join("sub/../new.dict")), Some(canonical.join("new.dict")));
        assert_eq!(resolve(&dir.join("missing/new.dict")), None);
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_directory_is_refused_even_with_force() {
        let dir = dir("directory");
        let err = check_output(&output(&dir, true), &[]).unwrap_err().to_string();
        assert!(err.contains("is a directory") && err.contains("target.dict"), "{err}");
        fs::remove_dir_all(&dir).unwrap();
    }
}
