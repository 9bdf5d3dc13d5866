//! Where the cache lives.
//!
//! The resolution follows the XDG Base Directory Specification
//! (<https://specifications.freedesktop.org/basedir-spec/latest/>) for `XDG_CACHE_HOME`: an
//! empty or relative value is ignored. Without it, the platform's own cache directory: `$HOME/.cache`
//! on Linux and other Unix systems, `$HOME/Library/Caches` on macOS, `%LOCALAPPDATA%` on Windows
//! (the directories Apple's and Microsoft's guidelines name, as the `directories` crate returns
//! them; four variables do not justify a dependency). `ANYSPEC_CACHE` comes first so that one
//! variable moves anyspec's cache alone.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// The variable that names anyspec's cache directory directly.
pub const CACHE_ENV: &str = "ANYSPEC_CACHE";

/// The cache root: `override_dir` if given, else `$ANYSPEC_CACHE`, else
/// `$XDG_CACHE_HOME/anyspec`, else the platform's cache directory's `anyspec`:
/// `$HOME/.cache/anyspec` (Linux, other Unix), `$HOME/Library/Caches/anyspec` (macOS),
/// `%LOCALAPPDATA%\anyspec` (Windows).
///
/// This is the one place that decides it; a command-line flag passes its value as
/// `override_dir`. Empty variables count as unset, and a relative `XDG_CACHE_HOME` is ignored as
/// the XDG specification requires. Nothing is created.
///
/// # Errors
///
/// [`Error::NoCacheDir`] when no override is given and none of the variables is usable.
pub fn cache_root(override_dir: Option<&Path>) -> Result<PathBuf> {
    resolve_on(Platform::current(), override_dir, |name| std::env::var_os(name))
}

/// Which convention places the cache when no variable does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Platform {
    /// `$HOME/.cache` (XDG's default): Linux and the other Unix systems.
    Xdg,
    /// `$HOME/Library/Caches`.
    MacOs,
    /// `%LOCALAPPDATA%`.
    Windows,
}

impl Platform {
    pub(crate) fn current() -> Self {
        if cfg!(target_os = "macos") {
            Self::MacOs
        } else if cfg!(windows) {
            Self::Windows
        } else {
            Self::Xdg
        }
    }
}

/// [`cache_root`] on this platform with the environment as a function, so that tests need not
/// touch the process's environment (which other threads read concurrently).
#[cfg(test)]
pub(crate) fn resolve(override_dir: Option<&Path>, env: impl Fn(&str) -> Option<OsString>) -> Result<PathBuf> {
    resolve_on(Platform::Xdg, override_dir, env)
}

/// [`cache_root`] for `platform`, with the environment as a function.
pub(crate) fn resolve_on(
    platform: Platform,
    override_dir: Option<&Path>,
    env: impl Fn(&str) -> Option<OsString>,
) -> Result<PathBuf> {
    if let Some(dir) = override_dir {
        return Ok(dir.to_path_buf());
    }
    let non_empty = |name: &str| env(name).filter(|value| !value.is_empty()).map(PathBuf::from);
    if let Some(dir) = non_empty(CACHE_ENV) {
        return Ok(dir);
    }
    if let Some(dir) = non_empty("XDG_CACHE_HOME").filter(|dir| dir.is_absolute()) {
        return Ok(dir.join("anyspec"));
    }
    let platform_dir = match platform {
        Platform::Xdg => non_empty("HOME").map(|home| home.join(".cache")),
        Platform::MacOs => non_empty("HOME").map(|home| home.join("Library").join("Caches")),
        Platform::Windows => non_empty("LOCALAPPDATA"),
    };
    platform_dir.map(|dir| dir.join("anyspec")).ok_or(Error::NoCacheDir)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env_of(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<OsString> {
        move |name| pairs.iter().find(|(key, _)| *key == name).map(|(_, value)| OsString::from(value))
    }

    const ALL: &[(&str, &str)] = &[("ANYSPEC_CACHE", "/a"), ("XDG_CACHE_HOME", "/x"), ("HOME", "/h")];

    #[test]
    fn the_override_wins_over_every_variable() {
        let root = resolve(Some(Path::new("/flag")), env_of(ALL)).unwrap();
        assert_eq!(root, PathBuf::from("/flag"));
    }

    #[test]
    fn anyspec_cache_wins_over_xdg_and_home_and_is_used_as_is() {
        assert_eq!(resolve(None, env_of(ALL)).unwrap(), PathBuf::from("/a"));
    }

    #[test]
    fn xdg_cache_home_gets_an_anyspec_subdirectory() {
        let env = env_of(&[("XDG_CACHE_HOME", "/x"), ("HOME", "/h")]);
        assert_eq!(resolve(None, env).unwrap(), PathBuf::from("/x/anyspec"));
    }

    #[test]
    fn home_is_the_last_resort() {
        let env = env_of(&[("HOME", "/h")]);
        assert_eq!(resolve(None, env).unwrap(), PathBuf::from("/h/.cache/anyspec"));
    }

    #[test]
    fn empty_values_count_as_unset() {
        let env = env_of(&[("ANYSPEC_CACHE", ""), ("XDG_CACHE_HOME", ""), ("HOME", "/h")]);
        assert_eq!(resolve(None, env).unwrap(), PathBuf::from("/h/.cache/anyspec"));
    }

    #[test]
    fn a_relative_xdg_cache_home_is_ignored() {
        let env = env_of(&[("XDG_CACHE_HOME", "relative/cache"), ("HOME", "/h")]);
        assert_eq!(resolve(None, env).unwrap(), PathBuf::from("/h/.cache/anyspec"));
    }

    #[test]
    fn nothing_set_is_an_error_naming_the_variable() {
        let err = resolve(None, env_of(&[])).unwrap_err();
        assert!(matches!(err, Error::NoCacheDir));
        assert!(err.to_string().contains("ANYSPEC_CACHE"));
    }

    #[test]
    fn macos_and_windows_use_their_own_cache_directories_unless_xdg_is_set() {
        let mac = env_of(&[("HOME", "/Users/u")]);
        assert_eq!(resolve_on(Platform::MacOs, None, mac).unwrap(), PathBuf::from("/Users/u/Library/Caches/anyspec"));
        let windows = env_of(&[("LOCALAPPDATA", "C:/Users/u/AppData/Local"), ("HOME", "/h")]);
        assert_eq!(
            resolve_on(Platform::Windows, None, windows).unwrap(),
            PathBuf::from("C:/Users/u/AppData/Local/anyspec")
        );
        // Windows has no $HOME fallback: without LOCALAPPDATA it says which variable to set.
        assert!(matches!(resolve_on(Platform::Windows, None, env_of(&[("HOME", "/h")])), Err(Error::NoCacheDir)));
        // An explicit XDG_CACHE_HOME or ANYSPEC_CACHE wins on every platform.
        let xdg = env_of(&[("XDG_CACHE_HOME", "/x"), ("HOME", "/Users/u")]);
        assert_eq!(resolve_on(Platform::MacOs, None, xdg).unwrap(), PathBuf::from("/x/anyspec"));
        assert_eq!(resolve_on(Platform::Windows, None, env_of(ALL)).unwrap(), PathBuf::from("/a"));
    }

    #[test]
    fn the_public_function_honours_its_override() {
        let root = cache_root(Some(Path::new("/somewhere/else"))).unwrap();
        assert_eq!(root, PathBuf::from("/somewhere/else"));
    }
}
