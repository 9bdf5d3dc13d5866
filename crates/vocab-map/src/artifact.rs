//! The on-disk vocabulary map: magic, format version, length, bincode payload, checksum.
//!
//! ```text
//! offset  size  field
//! 0       8     magic  b"ASVOCMAP"
//! 8       4     format version, u32 little-endian
//! 12      8     payload length n, u64 little-endian
//! 20      n     payload: the VocabMap (mode, both fingerprints and sizes, both id arrays),
//!               bincode 2 standard configuration through serde
//! 20 + n  32    SHA-256 of bytes 0 .. 20 + n
//! ```
//!
//! The version is checked before the checksum, so a file from another version of this crate is
//! reported as such rather than as corrupt. The fingerprints of both tokenizers are inside the
//! payload and are compared with the tokenizers a caller passes to [`VocabMap::load`].

use std::io::Write;
use std::path::Path;

use sha2::{Digest, Sha256};

use crate::{Error, VocabMap, Vocabulary};

/// The first bytes of every vocabulary-map file.
pub const MAGIC: [u8; 8] = *b"ASVOCMAP";
/// The format version this build writes and reads.
pub const FORMAT_VERSION: u32 = 1;

const HEADER_LEN: usize = 8 + 4 + 8;
const CHECKSUM_LEN: usize = 32;

impl VocabMap {
    /// Serializes the map into the on-disk format.
    ///
    /// # Errors
    /// [`Error::Encode`] if bincode fails (it does not for maps this crate builds).
    pub fn to_bytes(&self) -> Result<Vec<u8>, Error> {
        let payload = bincode::serde::encode_to_vec(self, bincode::config::standard())
            .map_err(|err| Error::Encode { message: err.to_string() })?;
        let mut bytes = Vec::with_capacity(HEADER_LEN + payload.len() + CHECKSUM_LEN);
        bytes.extend_from_slice(&MAGIC);
        bytes.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
        bytes.extend_from_slice(&(payload.len() as u64).to_le_bytes());
        bytes.extend_from_slice(&payload);
        let checksum = Sha256::digest(&bytes);
        bytes.extend_from_slice(&checksum);
        Ok(bytes)
    }

    /// Writes the map to `path` atomically (a crash leaves the old file or the new one).
    ///
    /// # Errors
    /// [`Error::Io`] when the file cannot be written.
    pub fn save(&self, path: &Path) -> Result<(), Error> {
        let bytes = self.to_bytes()?;
        anyspec_core::artifact::write_atomically(path, |w| w.write_all(&bytes))
            .map_err(|source| Error::Io { path: path.to_path_buf(), source })
    }

    /// Reads a map written by [`VocabMap::save`] and checks that it was built for `target` and
    /// `drafter`.
    ///
    /// # Errors
    /// [`Error::Io`], [`Error::Truncated`], [`Error::BadMagic`], [`Error::Version`],
    /// [`Error::Checksum`] or [`Error::InvalidMap`] for a file that is not a sound map, and
    /// [`Error::WrongTokenizer`] (naming both fingerprints) when either tokenizer differs from
    /// the one the map was built for.
    pub fn load(path: &Path, target: &Vocabulary, drafter: &Vocabulary) -> Result<VocabMap, Error> {
        let map = VocabMap::load_unchecked(path)?;
        for (role, in_file, given) in [("target", &map.target, target), ("drafter", &map.drafter, drafter)] {
            if in_file.fingerprint != given.fingerprint() {
                return Err(Error::WrongTokenizer {
                    path: path.to_path_buf(),
                    role,
                    in_file: Box::new(in_file.fingerprint),
                    given: Box::new(given.fingerprint()),
                    name: given.name().to_string(),
                });
            }
        }
        Ok(map)
    }

    /// Reads a map without comparing it with tokenizers, to inspect it.
    ///
    /// # Errors
    /// As [`VocabMap::load`], except [`Error::WrongTokenizer`].
    pub fn load_unchecked(path: &Path) -> Result<VocabMap, Error> {
        let bytes = std::fs::read(path).map_err(|source| Error::Io { path: path.to_path_buf(), source })?;
        VocabMap::from_bytes(&bytes, path)
    }

    /// Parses the on-disk format; `path` only names the source in errors.
    ///
    /// # Errors
    /// As [`VocabMap::load_unchecked`].
    pub fn from_bytes(bytes: &[u8], path: &Path) -> Result<VocabMap, Error> {
        let path_buf = || path.to_path_buf();
        if bytes.len() < MAGIC.len() || bytes[..MAGIC.len()] != MAGIC {
            if bytes.len() < MAGIC.len() && MAGIC.starts_with(bytes) {
                return Err(Error::Truncated { path: path_buf(), len: bytes.len(), needed: HEADER_LEN + CHECKSUM_LEN });
            }
            return Err(Error::BadMagic {
                path: path_buf(),
                found: bytes[..bytes.len().min(MAGIC.len())].to_vec(),
                expected: MAGIC.to_vec(),
                kind: anyspec_core::artifact::ArtifactKind::describe(bytes),
            });
        }
        if bytes.len() < HEADER_LEN {
            return Err(Error::Truncated { path: path_buf(), len: bytes.len(), needed: HEADER_LEN + CHECKSUM_LEN });
        }
        let version = u32::from_le_bytes(bytes[8..12].try_into().unwrap_or_default());
        if version > anyspec_core::artifact::MAX_PLAUSIBLE_VERSION {
            return Err(Error::InvalidMap {
                path: path_buf(),
                reason: format!(
                    "its format version field reads {version}, which no anyspec writes: the file is damaged; rebuild it"
                ),
            });
        }
        if version != FORMAT_VERSION {
            return Err(Error::Version { path: path_buf(), expected: FORMAT_VERSION, found: version });
        }
        let payload_len = u64::from_le_bytes(bytes[12..20].try_into().unwrap_or_default());
        let needed = usize::try_from(payload_len)
            .ok()
            .and_then(|n| n.checked_add(HEADER_LEN + CHECKSUM_LEN))
            .unwrap_or(usize::MAX);
        if bytes.len() < needed {
            return Err(Error::Truncated { path: path_buf(), len: bytes.len(), needed });
        }
        if bytes.len() > needed {
            return Err(Error::InvalidMap {
                path: path_buf(),
                reason: format!("{} bytes follow the checksum", bytes.len() - needed),
            });
        }
        let (content, stored) = bytes.split_at(needed - CHECKSUM_LEN);
        let computed = Sha256::digest(content);
        if computed.as_slice() != stored {
            return Err(Error::Checksum { path: path_buf(), stored: hex(stored), computed: hex(&computed) });
        }
        let (map, used): (VocabMap, usize) =
            bincode::serde::decode_from_slice(&content[HEADER_LEN..], bincode::config::standard())
                .map_err(|err| Error::InvalidMap { path: path_buf(), reason: err.to_string() })?;
        if used != content.len() - HEADER_LEN {
            return Err(Error::InvalidMap {
                path: path_buf(),
                reason: format!("the payload has {} unused bytes", content.len() - HEADER_LEN - used),
            });
        }
        map.check().map_err(|reason| Error::InvalidMap { path: path_buf(), reason })?;
        Ok(map)
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
