//! Where the cache lives.
//!
//! The resolution follows the XDG Base Directory Specification
//! (<https://specifications.freedesktop.org/basedir-spec/latest/>) for `XDG_CACHE_HOME`: an
//! empty or relative value is ignored, and the fallback is `$HOME/.cache`. `ANYSPEC_CACHE` comes
//! first so that one variable moves anyspec's cache alone.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// The variable that names anyspec's cache directory directly.
pub const CACHE_ENV: &str = "ANYSPEC_CACHE";

/// The cache root: `override_dir` if given, else `$ANYSPEC_CACHE`, else
/// `$XDG_CACHE_HOME/anyspec`, else `$HOME/.cache/anyspec`.
///
/// This is the one place that decides it; a command-line flag passes its value as
/// `override_dir`. Empty variables count as unset, and a relative `XDG_CACHE_HOME` is ignored as
/// the XDG specification requires. Nothing is created.
///
/// # Errors
///
/// [`Error::NoCacheDir`] when no override is given and none of the variables is usable.
pub fn cache_root(override_dir: Option<&Path>) -> Result<PathBuf> {
    resolve(override_dir, |name| std::env::var_os(name))
}

/// [`cache_root`] with the environment as a function, so that tests need not touch the
/// process's environment (which other threads read concurrently).
pub(crate) fn resolve(override_dir: Option<&Path>, env: impl Fn(&str) -> Option<OsString>) -> Result<PathBuf> {
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
    if let Some(home) = non_empty("HOME") {
        return Ok(home.join(".cache").join("anyspec"));
    }
    Err(Error::NoCacheDir)
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
    fn the_public_function_honours_its_override() {
        let root = cache_root(Some(Path::new("/somewhere/else"))).unwrap();
        assert_eq!(root, PathBuf::from("/somewhere/else"));
    }
}
