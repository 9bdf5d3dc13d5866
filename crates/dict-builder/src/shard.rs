//! Count shards: n-gram counts of part of a corpus, written by `anyspec dict count` and
//! combined by `anyspec dict merge`, so that any batch scheduler can count a corpus too big for
//! one machine.
//!
//! # Format (version 1, little-endian)
//!
//! | bytes | content |
//! |---|---|
//! | 8 | magic `ASNGRCNT` |
//! | 4 | format version |
//! | 4 | segmentation version ([`crate::words::SEGMENTATION_VERSION`]) |
//! | 4 | highest order counted |
//! | 8 | text bytes counted |
//! | per order | entry count (8 bytes), then entries sorted by surface bytes: LEB128 length, UTF-8 surface, LEB128 count |
//! | 4 | CRC-32 of everything before it |
//!
//! Entries are sorted so that the same counts always give the same bytes.

use std::io::Write;
use std::path::Path;

use anyspec_core::artifact::{ArtifactKind, MAX_PLAUSIBLE_VERSION, write_atomically};

use crate::counts::{MAX_ORDER, NgramCounts};
use crate::error::{Error, Result};
use crate::varint;
use crate::words::SEGMENTATION_VERSION;

const MAGIC: &[u8; 8] = b"ASNGRCNT";
/// Version of the shard format this code writes and reads.
pub const SHARD_VERSION: u32 = 1;
const FIXED_HEADER: usize = 8 + 4 + 4 + 4 + 8;

impl NgramCounts {
    /// The shard bytes of these counts (see the [module docs](crate::shard)).
    pub fn to_shard_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&SHARD_VERSION.to_le_bytes());
        out.extend_from_slice(&SEGMENTATION_VERSION.to_le_bytes());
        out.extend_from_slice(&(self.max_order() as u32).to_le_bytes());
        out.extend_from_slice(&self.text_bytes().to_le_bytes());
        for order in 1..=self.max_order() {
            let mut entries: Vec<(&str, u64)> = self.iter_order(order).collect();
            entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
            out.extend_from_slice(&(entries.len() as u64).to_le_bytes());
            for (surface, count) in entries {
                varint::write(&mut out, surface.len() as u64);
                out.extend_from_slice(surface.as_bytes());
                varint::write(&mut out, count);
            }
        }
        let checksum = crc32fast::hash(&out);
        out.extend_from_slice(&checksum.to_le_bytes());
        out
    }

    /// Writes these counts as a shard file, atomically.
    ///
    /// # Errors
    /// [`Error::Io`] when the file cannot be written.
    pub fn write_shard(&self, path: &Path) -> Result<()> {
        let bytes = self.to_shard_bytes();
        write_atomically(path, |w| w.write_all(&bytes)).map_err(Error::io("write", path))
    }

    /// Reads a shard file.
    ///
    /// # Errors
    /// [`Error::Io`], and [`Error::BadMagic`], [`Error::Version`] or [`Error::Corrupt`] for a file
    /// that is not an intact shard of this version.
    pub fn read_shard(path: &Path) -> Result<NgramCounts> {
        let bytes = std::fs::read(path).map_err(Error::io("read", path))?;
        NgramCounts::from_shard_bytes(&bytes, path)
    }

    /// Parses shard bytes; `path` only names the source in errors.
    ///
    /// # Errors
    /// As [`NgramCounts::read_shard`].
    pub fn from_shard_bytes(bytes: &[u8], path: &Path) -> Result<NgramCounts> {
        if bytes.len() < 8 || &bytes[..8] != MAGIC {
            return Err(Error::BadMagic {
                path: path.to_path_buf(),
                expected: "an n-gram count shard",
                found: ArtifactKind::describe(bytes),
            });
        }
        if bytes.len() < FIXED_HEADER + 4 {
            return Err(Error::corrupt(path, format!("truncated: {} bytes is shorter than the header", bytes.len())));
        }
        let u32_at = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap_or([0; 4]));
        let version = u32_at(8);
        if version > MAX_PLAUSIBLE_VERSION {
            return Err(Error::corrupt(
                path,
                format!("its format version field reads {version}, which no anyspec writes"),
            ));
        }
        if version != SHARD_VERSION {
            return Err(Error::Version { path: path.to_path_buf(), expected: SHARD_VERSION, found: version });
        }
        let (body, tail) = bytes.split_at(bytes.len() - 4);
        let stored = u32::from_le_bytes(tail.try_into().unwrap_or([0; 4]));
        let actual = crc32fast::hash(body);
        if stored != actual {
            return Err(Error::corrupt(
                path,
                format!("checksum mismatch (stored {stored:08x}, computed {actual:08x}): truncated or damaged"),
            ));
        }
        let segmentation = u32_at(12);
        if segmentation != SEGMENTATION_VERSION {
            return Err(Error::IncompatibleShards {
                path: path.to_path_buf(),
                problem: format!(
                    "it was counted with word segmentation v{segmentation}, this build uses v{SEGMENTATION_VERSION}"
                ),
            });
        }
        let max_order = u32_at(16) as usize;
        if !(1..=MAX_ORDER).contains(&max_order) {
            return Err(Error::corrupt(path, format!("highest order {max_order} is outside 1..=8")));
        }
        let mut counts = NgramCounts::new(max_order)?;
        counts.set_text_bytes(u64::from_le_bytes(bytes[20..28].try_into().unwrap_or([0; 8])));
        let mut pos = FIXED_HEADER;
        let bad = |what: &str, at: usize| Error::corrupt(path, format!("{what} at byte {at}"));
        for order in 1..=max_order {
            let n = body.get(pos..pos + 8).ok_or_else(|| bad("entry count cut short", pos))?;
            let n = u64::from_le_bytes(n.try_into().unwrap_or([0; 8]));
            pos += 8;
            let mut previous: Option<&str> = None;
            for _ in 0..n {
                let len = varint::read(body, &mut pos).ok_or_else(|| bad("bad surface length", pos))? as usize;
                let surface = body.get(pos..pos.saturating_add(len)).ok_or_else(|| bad("surface cut short", pos))?;
                let surface = std::str::from_utf8(surface).map_err(|_| bad("surface is not UTF-8", pos))?;
                // Written sorted and unique: a repeat would add its count twice (and could
                // overflow it).
                if previous.is_some_and(|p| p >= surface) {
                    return Err(bad(&format!("order-{order} n-gram repeated or out of order"), pos));
                }
                previous = Some(surface);
                pos += len;
                let count = varint::read(body, &mut pos).ok_or_else(|| bad("bad count", pos))?;
                counts.add(order, surface, count);
            }
        }
        if pos != body.len() {
            return Err(Error::corrupt(path, format!("{} unexpected bytes after the last entry", body.len() - pos)));
        }
        Ok(counts)
    }

    /// Reads and merges shard files (`anyspec dict merge`).
    ///
    /// # Errors
    /// As [`NgramCounts::read_shard`], and [`Error::IncompatibleShards`] when the shards were
    /// counted up to different orders.
    pub fn merge_shards(paths: &[impl AsRef<Path>]) -> Result<NgramCounts> {
        let mut merged: Option<NgramCounts> = None;
        for path in paths {
            let path = path.as_ref();
            let counts = NgramCounts::read_shard(path)?;
            match &mut merged {
                None => merged = Some(counts),
                Some(total) => {
                    if total.max_order() != counts.max_order() {
                        return Err(Error::IncompatibleShards {
                            path: path.to_path_buf(),
                            problem: format!(
                                "it counts orders up to {}, the first shard up to {}",
                                counts.max_order(),
                                total.max_order()
                            ),
                        });
                    }
                    total.merge(counts)?;
                }
            }
        }
        merged.ok_or_else(|| Error::invalid("shards", "at least one shard file", "none"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::words::NgramSegmenter;

    fn sample() -> NgramCounts {
        let mut counts = NgramCounts::new(3).unwrap();
        counts.count_text(&mut NgramSegmenter::new(), "Мама мила раму.\nМама мила раму, а тато ні.\n");
        counts
    }

    #[test]
    fn shard_round_trips_and_is_deterministic() {
        let counts = sample();
        let bytes = counts.to_shard_bytes();
        let back = NgramCounts::from_shard_bytes(&bytes, Path::new("x")).unwrap();
        assert_eq!(back, counts);
        assert_eq!(back.to_shard_bytes(), bytes);
    }

    #[test]
    fn damaged_shards_are_clear_errors() {
        let bytes = sample().to_shard_bytes();
        let path = Path::new("part.counts");
        let truncated = NgramCounts::from_shard_bytes(&bytes[..bytes.len() - 7], path).unwrap_err();
        assert!(matches!(truncated, Error::Corrupt { .. }), "{truncated}");
        let mut flipped = bytes.clone();
        flipped[40] ^= 0x55;
        assert!(matches!(NgramCounts::from_shard_bytes(&flipped, path), Err(Error::Corrupt { .. })));
        assert!(matches!(NgramCounts::from_shard_bytes(b"not a shard at all", path), Err(Error::BadMagic { .. })));
        let mut damaged = bytes.clone();
        damaged[8..12].copy_from_slice(&16_711_681u32.to_le_bytes());
        assert!(matches!(NgramCounts::from_shard_bytes(&damaged, path), Err(Error::Corrupt { .. })));
        let mut future = bytes.clone();
        future[8] = 9;
        assert!(matches!(NgramCounts::from_shard_bytes(&future, path), Err(Error::Version { found: 9, .. })));
        for cut in [0, 5, 12, 30] {
            assert!(NgramCounts::from_shard_bytes(&bytes[..cut], path).is_err());
        }
    }
}
