//! Reading a dictionary: memory-mapped (or in-memory) bytes, validated once, then lock-free
//! longest-suffix lookups.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyspec_core::artifact::{ArtifactKind, MAX_PLAUSIBLE_VERSION};
use anyspec_vocab_map::Fingerprint;
use fst::Streamer;
use memmap2::Mmap;

use crate::error::{Error, Result};
use crate::format::{DictionaryInfo, FIXED_HEADER, FORMAT_VERSION, MAGIC, push_key};
use crate::params::MAX_PREFIX_LIMIT;
use crate::varint;

/// Where a dictionary's bytes live.
#[derive(Debug)]
enum Storage {
    Mapped(Mmap),
    Owned(Vec<u8>),
}

impl AsRef<[u8]> for Storage {
    fn as_ref(&self) -> &[u8] {
        match self {
            Storage::Mapped(map) => map,
            Storage::Owned(bytes) => bytes,
        }
    }
}

/// A range of the shared storage: what the FST reads.
#[derive(Clone, Debug)]
struct Section {
    storage: Arc<Storage>,
    start: usize,
    end: usize,
}

impl AsRef<[u8]> for Section {
    #[inline]
    fn as_ref(&self) -> &[u8] {
        &(*self.storage).as_ref()[self.start..self.end]
    }
}

/// A loaded n-gram dictionary: prefix → best continuation, with longest-suffix lookup.
///
/// Cheap to clone (the bytes are shared) and `Sync`: one dictionary serves every drafter and
/// thread.
#[derive(Clone)]
pub struct Dictionary {
    storage: Arc<Storage>,
    map: fst::Map<Section>,
    blob_start: usize,
    blob_end: usize,
    info: DictionaryInfo,
    fingerprint: Fingerprint,
    path: PathBuf,
}

impl std::fmt::Debug for Dictionary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dictionary")
            .field("path", &self.path)
            .field("entries", &self.map.len())
            .field("fingerprint", &self.fingerprint)
            .finish_non_exhaustive()
    }
}

/// Maps a file read-only.
#[allow(unsafe_code)]
fn map_file(path: &Path) -> Result<Mmap> {
    let file = File::open(path).map_err(Error::io("open", path))?;
    // A directory opens, and then fails to map with "No such device": say what is wrong instead.
    if file.metadata().is_ok_and(|m| m.is_dir()) {
        let err = std::io::Error::new(std::io::ErrorKind::IsADirectory, "it is a directory, not a dictionary file");
        return Err(Error::io("open", path)(err));
    }
    // SAFETY: the map is read-only and private to this process. The one hazard is another
    // process truncating or rewriting the file while it is mapped; our writers never do that
    // (`write_atomically` replaces a file by renaming a new one over it, which leaves existing
    // maps of the old inode intact). The bytes are validated (magic, version, checksum, every
    // entry) before any lookup uses them.
    unsafe { Mmap::map(&file) }.map_err(Error::io("memory-map", path))
}

impl Dictionary {
    /// Memory-maps a dictionary and checks that it was built for the tokenizer with fingerprint
    /// `tokenizer`.
    ///
    /// # Errors
    /// [`Error::Io`]; [`Error::BadMagic`], [`Error::Version`], [`Error::Corrupt`] for a file that
    /// is not an intact dictionary of this version; [`Error::WrongTokenizer`] naming both
    /// fingerprints.
    pub fn open(path: &Path, tokenizer: &Fingerprint) -> Result<Dictionary> {
        let dictionary = Dictionary::open_unverified(path)?;
        dictionary.check_tokenizer(tokenizer)?;
        Ok(dictionary)
    }

    /// Memory-maps a dictionary without checking its tokenizer, for inspection (`dict info`).
    /// Use [`Dictionary::open`] to draft with it.
    ///
    /// # Errors
    /// As [`Dictionary::open`], without the tokenizer check.
    pub fn open_unverified(path: &Path) -> Result<Dictionary> {
        Dictionary::parse(Storage::Mapped(map_file(path)?), path)
    }

    /// Loads a dictionary from bytes already in memory; `name` identifies it in errors.
    ///
    /// # Errors
    /// As [`Dictionary::open`].
    pub fn from_bytes(bytes: Vec<u8>, name: &Path, tokenizer: &Fingerprint) -> Result<Dictionary> {
        let dictionary = Dictionary::parse(Storage::Owned(bytes), name)?;
        dictionary.check_tokenizer(tokenizer)?;
        Ok(dictionary)
    }

    /// Refuses a tokenizer other than the one the dictionary was built for.
    ///
    /// # Errors
    /// [`Error::WrongTokenizer`] naming both fingerprints.
    pub fn check_tokenizer(&self, tokenizer: &Fingerprint) -> Result<()> {
        if *tokenizer == self.fingerprint {
            Ok(())
        } else {
            Err(Error::WrongTokenizer {
                path: self.path.clone(),
                built_for: self.fingerprint.to_string(),
                given: tokenizer.to_string(),
            })
        }
    }

    fn parse(storage: Storage, path: &Path) -> Result<Dictionary> {
        let bytes = storage.as_ref();
        if bytes.len() < MAGIC.len() || &bytes[..MAGIC.len()] != MAGIC {
            return Err(Error::BadMagic {
                path: path.to_path_buf(),
                expected: "an anyspec n-gram dictionary",
                found: ArtifactKind::describe(bytes),
            });
        }
        if bytes.len() < FIXED_HEADER + 4 {
            return Err(Error::corrupt(path, format!("truncated: {} bytes is shorter than the header", bytes.len())));
        }
        let le_u32 = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap_or([0; 4]));
        let le_u64 = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap_or([0; 8]));
        let version = le_u32(8);
        if version > MAX_PLAUSIBLE_VERSION {
            return Err(Error::corrupt(
                path,
                format!("its format version field reads {version}, which no anyspec writes"),
            ));
        }
        if version != FORMAT_VERSION {
            return Err(Error::Version { path: path.to_path_buf(), expected: FORMAT_VERSION, found: version });
        }
        let mut fingerprint = [0u8; 32];
        fingerprint.copy_from_slice(&bytes[12..44]);
        let info_len = le_u32(44) as u64;
        let fst_len = le_u64(48);
        let blob_len = le_u64(56);
        let expected_len = (FIXED_HEADER as u64)
            .checked_add(info_len)
            .and_then(|n| n.checked_add(fst_len))
            .and_then(|n| n.checked_add(blob_len))
            .and_then(|n| n.checked_add(4));
        if expected_len != Some(bytes.len() as u64) {
            return Err(Error::corrupt(
                path,
                format!(
                    "the header announces {} bytes but the file has {} (truncated or damaged)",
                    expected_len.map_or_else(|| "an impossible number of".to_string(), |n| n.to_string()),
                    bytes.len()
                ),
            ));
        }
        let body_len = bytes.len() - 4;
        let stored = le_u32(body_len);
        let actual = crc32fast::hash(&bytes[..body_len]);
        if stored != actual {
            return Err(Error::corrupt(
                path,
                format!("checksum mismatch (stored {stored:08x}, computed {actual:08x})"),
            ));
        }
        let info_start = FIXED_HEADER;
        let fst_start = info_start + info_len as usize;
        let blob_start = fst_start + fst_len as usize;
        let info: DictionaryInfo = serde_json::from_slice(&bytes[info_start..fst_start])
            .map_err(|e| Error::corrupt(path, format!("the info block is not valid ({e})")))?;
        if !(1..=4).contains(&info.key_width) || !(1..=MAX_PREFIX_LIMIT).contains(&info.params.max_prefix) {
            return Err(Error::corrupt(path, "the info block has an impossible key width or prefix length"));
        }
        let storage = Arc::new(storage);
        let section = Section { storage: Arc::clone(&storage), start: fst_start, end: blob_start };
        let map = fst::Map::new(section).map_err(|e| Error::corrupt(path, format!("the FST is invalid ({e})")))?;
        // The fst crate trusts its node encoding and panics (indexes out of bounds, overflows)
        // when walking damaged nodes; its own CRC-32C over the FST bytes catches the damage
        // before any walk. (The file's CRC-32 does not: a file rewritten with a fresh one passes.)
        map.as_fst()
            .verify()
            .map_err(|e| Error::corrupt(path, format!("the FST section is damaged ({e}); rebuild the dictionary")))?;
        let dictionary = Dictionary {
            storage,
            map,
            blob_start,
            blob_end: body_len,
            info,
            fingerprint: Fingerprint(fingerprint),
            path: path.to_path_buf(),
        };
        dictionary.validate_entries()?;
        Ok(dictionary)
    }

    /// Checks every key and continuation once, so that lookups never meet malformed data.
    fn validate_entries(&self) -> Result<()> {
        let width = usize::from(self.info.key_width);
        let mut stream = self.map.stream();
        let mut count = 0u64;
        let mut scratch = Vec::new();
        while let Some((key, offset)) = stream.next() {
            count += 1;
            if count > self.info.entries {
                return Err(Error::corrupt(
                    &self.path,
                    format!("the FST holds more entries than the {} the header announces", self.info.entries),
                ));
            }
            let tokens = key.len() / width;
            if key.is_empty() || key.len() % width != 0 || tokens > self.info.params.max_prefix {
                return Err(Error::corrupt(&self.path, format!("entry {count} has a malformed key")));
            }
            if !self.decode(offset, usize::MAX, &mut scratch) || scratch.is_empty() {
                return Err(Error::corrupt(&self.path, format!("entry {count} points at a malformed continuation")));
            }
        }
        if count != self.info.entries {
            return Err(Error::corrupt(
                &self.path,
                format!("the header announces {} entries but the FST holds {count}", self.info.entries),
            ));
        }
        Ok(())
    }

    /// Decodes the continuation at `offset` into `out` (cleared first), at most `max_tokens` of
    /// it; false when the record is malformed.
    #[inline]
    fn decode(&self, offset: u64, max_tokens: usize, out: &mut Vec<u32>) -> bool {
        out.clear();
        let blob = &(*self.storage).as_ref()[self.blob_start..self.blob_end];
        let Ok(mut pos) = usize::try_from(offset) else { return false };
        let Some(&len) = blob.get(pos) else { return false };
        pos += 1;
        for _ in 0..usize::from(len).min(max_tokens) {
            match varint::read(blob, &mut pos) {
                Some(id) if id <= u64::from(u32::MAX) => out.push(id as u32),
                _ => return false,
            }
        }
        true
    }

    /// How it was built.
    pub fn info(&self) -> &DictionaryInfo {
        &self.info
    }

    /// The fingerprint of the tokenizer it was built for.
    pub fn fingerprint(&self) -> Fingerprint {
        self.fingerprint
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether it has no entries.
    pub fn is_empty(&self) -> bool {
        self.map.len() == 0
    }

    /// Size of the dictionary's bytes (the file size).
    pub fn size_bytes(&self) -> usize {
        (*self.storage).as_ref().len()
    }

    /// The continuation stored for exactly this prefix.
    pub fn get(&self, prefix: &[u32]) -> Option<Vec<u32>> {
        if prefix.is_empty() || prefix.len() > MAX_PREFIX_LIMIT || !self.fits(prefix) {
            return None;
        }
        let mut key = Vec::with_capacity(prefix.len() * 4);
        push_key(&mut key, prefix, self.info.key_width);
        let offset = self.map.get(&key)?;
        let mut out = Vec::new();
        self.decode(offset, usize::MAX, &mut out).then_some(out)
    }

    fn fits(&self, ids: &[u32]) -> bool {
        let width = u32::from(self.info.key_width);
        width >= 4 || ids.iter().all(|&id| id >> (8 * width) == 0)
    }

    /// The longest suffix of `context` (at most `max_prefix` tokens, the build parameter) that is
    /// a key: writes the first `max_tokens` tokens of its continuation into `out` and returns the
    /// suffix length, or returns `None` (and leaves `out` empty) when no suffix is a key.
    ///
    /// The most specific context wins (dictspec.txt §3.1). Keys are stored last token first
    /// ([`crate::format`]), so one walk that reads the context backwards passes through every
    /// key that is a suffix of it; the last one passed is the longest.
    #[inline]
    pub fn longest_suffix_match(&self, context: &[u32], max_tokens: usize, out: &mut Vec<u32>) -> Option<usize> {
        out.clear();
        if max_tokens == 0 {
            return None;
        }
        let width = usize::from(self.info.key_width);
        let fst = self.map.as_fst();
        let mut node = fst.root();
        let mut output = fst::raw::Output::zero();
        let mut best: Option<(usize, u64)> = None;
        for (length, &id) in context.iter().rev().take(self.info.params.max_prefix).enumerate() {
            if width < 4 && id >> (8 * width) != 0 {
                break;
            }
            for &byte in &id.to_be_bytes()[4 - width..] {
                let Some(i) = node.find_input(byte) else {
                    return best.and_then(|(len, offset)| self.decode(offset, max_tokens, out).then_some(len));
                };
                let transition = node.transition(i);
                output = output.cat(transition.out);
                node = fst.node(transition.addr);
            }
            if node.is_final() {
                best = Some((length + 1, output.cat(node.final_output()).value()));
            }
        }
        best.and_then(|(len, offset)| self.decode(offset, max_tokens, out).then_some(len))
    }

    /// Every entry as (prefix, continuation), in key order — sorted by the prefix's last token,
    /// then the one before — for inspection and tests.
    pub fn entries(&self) -> Vec<(Vec<u32>, Vec<u32>)> {
        let width = usize::from(self.info.key_width);
        let mut out = Vec::with_capacity(self.len());
        let mut stream = self.map.stream();
        while let Some((key, offset)) = stream.next() {
            let mut prefix = key
                .chunks(width)
                .map(|c| c.iter().fold(0u32, |acc, &b| (acc << 8) | u32::from(b)))
                .collect::<Vec<u32>>();
            prefix.reverse();
            let mut continuation = Vec::new();
            self.decode(offset, usize::MAX, &mut continuation);
            out.push((prefix, continuation));
        }
        out
    }
}
