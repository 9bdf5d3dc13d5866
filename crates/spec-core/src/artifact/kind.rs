//! Which anyspec artifact a file holds, from its first bytes alone.
//!
//! Every artifact kind starts with its own eight-byte magic, except the affinity matrix and the
//! DynaSpec router, which are safetensors files (an eight-byte header length, then a JSON header)
//! whose metadata names the format (`anyspec-affinity`, `anyspec-dynaspec`, `anyspec-eagle`). Recognising the kind lets a builder refuse to replace a file that is
//! not what it writes, and lets a loader given the wrong artifact say which one it got.

use std::fs::File;
use std::io::{self, Read};
use std::path::Path;

/// The kinds of file anyspec writes. The magics are repeated here from the crates that own each
/// format (the CLI's tests build one of each and check they are recognised).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ArtifactKind {
    /// An n-gram dictionary (`anyspec-dict-builder`, magic `ANYSPDIC`).
    Dictionary,
    /// An n-gram count shard (`anyspec-dict-builder`, magic `ASNGRCNT`).
    CountShard,
    /// A target ↔ drafter vocabulary map (`anyspec-vocab-map`, magic `ASVOCMAP`).
    VocabMap,
    /// A drafter shortlist (`anyspec-affinity`, magic `ASSHORTL`).
    Shortlist,
    /// A token-affinity matrix (`anyspec-affinity`, safetensors with `format` = `anyspec-affinity`).
    Affinity,
    /// A DynaSpec router: clusters and router of one model (`anyspec-dynaspec`, safetensors with
    /// `format` = `anyspec-dynaspec`).
    Router,
    /// An EAGLE-style feature drafter of one target (`anyspec-dynaspec`, safetensors with
    /// `format` = `anyspec-eagle`).
    FeatureDrafter,
}

/// The `format` metadata value of affinity files, as `anyspec-affinity` writes it.
const AFFINITY_FORMAT_ENTRY: &[u8] = br#""format":"anyspec-affinity""#;
/// The `format` metadata value of DynaSpec routers, as `anyspec-dynaspec` writes it.
const ROUTER_FORMAT_ENTRY: &[u8] = br#""format":"anyspec-dynaspec""#;
/// The `format` metadata value of EAGLE feature drafters, as `anyspec-dynaspec` writes it.
const FEATURE_DRAFTER_FORMAT_ENTRY: &[u8] = br#""format":"anyspec-eagle""#;

/// The longest safetensors header read when recognising an affinity file: the metadata of ours
/// is a few hundred bytes plus the corpus file names.
const MAX_HEADER: u64 = 1 << 20;

impl ArtifactKind {
    /// Every kind.
    pub const ALL: [ArtifactKind; 7] = [
        ArtifactKind::Dictionary,
        ArtifactKind::CountShard,
        ArtifactKind::VocabMap,
        ArtifactKind::Shortlist,
        ArtifactKind::Affinity,
        ArtifactKind::Router,
        ArtifactKind::FeatureDrafter,
    ];

    /// What the kind is called in messages, with its article: "an n-gram dictionary".
    pub fn description(self) -> &'static str {
        match self {
            ArtifactKind::Dictionary => "an n-gram dictionary",
            ArtifactKind::CountShard => "an n-gram count shard",
            ArtifactKind::VocabMap => "a vocabulary map",
            ArtifactKind::Shortlist => "a drafter shortlist",
            ArtifactKind::Affinity => "an affinity matrix",
            ArtifactKind::Router => "a DynaSpec router",
            ArtifactKind::FeatureDrafter => "an EAGLE feature drafter",
        }
    }

    /// The eight bytes every file of this kind starts with; `None` for the affinity matrix, a
    /// safetensors file recognised by its metadata.
    pub fn magic(self) -> Option<&'static [u8; 8]> {
        match self {
            ArtifactKind::Dictionary => Some(b"ANYSPDIC"),
            ArtifactKind::CountShard => Some(b"ASNGRCNT"),
            ArtifactKind::VocabMap => Some(b"ASVOCMAP"),
            ArtifactKind::Shortlist => Some(b"ASSHORTL"),
            ArtifactKind::Affinity | ArtifactKind::Router | ArtifactKind::FeatureDrafter => None,
        }
    }

    /// The kind of artifact whose file starts with `bytes`, if any. For an affinity matrix,
    /// `bytes` must hold the whole safetensors header (as [`ArtifactKind::of_file`] reads).
    /// This is recognition, not validation: a damaged file of a kind is still that kind.
    pub fn recognise(bytes: &[u8]) -> Option<ArtifactKind> {
        if let Some(kind) = ArtifactKind::ALL.into_iter().find(|k| k.magic().is_some_and(|m| bytes.starts_with(m))) {
            return Some(kind);
        }
        let (length, rest) = bytes.split_first_chunk::<8>()?;
        let length = usize::try_from(u64::from_le_bytes(*length)).ok()?;
        let header = rest.get(..length).unwrap_or(rest);
        if header.first() != Some(&b'{') {
            return None;
        }
        let names = |entry: &[u8]| header.windows(entry.len()).any(|w| w == entry);
        if names(AFFINITY_FORMAT_ENTRY) {
            Some(ArtifactKind::Affinity)
        } else if names(ROUTER_FORMAT_ENTRY) {
            Some(ArtifactKind::Router)
        } else if names(FEATURE_DRAFTER_FORMAT_ENTRY) {
            Some(ArtifactKind::FeatureDrafter)
        } else {
            None
        }
    }

    /// What a file starting with `bytes` holds, for a loader that expected another kind: "a
    /// vocabulary map", or that it is no anyspec artifact at all.
    pub fn describe(bytes: &[u8]) -> &'static str {
        match ArtifactKind::recognise(bytes) {
            Some(kind) => kind.description(),
            None if bytes.starts_with(b"GGUF") => "a GGUF model file",
            None => "no anyspec artifact (its first bytes match no anyspec format)",
        }
    }

    /// The kind of artifact in the file at `path`, reading only its first bytes (and, for a
    /// safetensors file, its header of at most 1 MiB).
    ///
    /// # Errors
    /// When the file cannot be opened or read.
    pub fn of_file(path: &Path) -> io::Result<Option<ArtifactKind>> {
        let mut file = File::open(path)?;
        let mut start = Vec::with_capacity(8);
        (&mut file).take(8).read_to_end(&mut start)?;
        if start.len() < 8 {
            return Ok(None);
        }
        if let Some(kind) = ArtifactKind::recognise(&start) {
            return Ok(Some(kind));
        }
        let length = u64::from_le_bytes(start[..8].try_into().unwrap_or([0; 8]));
        if length > MAX_HEADER {
            return Ok(None);
        }
        file.take(length).read_to_end(&mut start)?;
        Ok(ArtifactKind::recognise(&start))
    }
}

impl std::fmt::Display for ArtifactKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.description())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn safetensors_with_metadata(metadata: &str) -> Vec<u8> {
        let header = format!(r#"{{"__metadata__":{metadata},"t":{{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}}}"#);
        let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
        bytes.extend_from_slice(header.as_bytes());
        bytes.extend_from_slice(&[0; 4]);
        bytes
    }

    #[test]
    fn every_magic_is_recognised_and_nothing_else() {
        for kind in ArtifactKind::ALL {
            if let Some(magic) = kind.magic() {
                let mut bytes = magic.to_vec();
                bytes.extend_from_slice(&[1, 0, 0, 0, 9, 9]);
                assert_eq!(ArtifactKind::recognise(&bytes), Some(kind));
                assert_eq!(ArtifactKind::recognise(&magic[..7]), None, "a prefix of {kind:?}'s magic");
            }
        }
        assert_eq!(ArtifactKind::recognise(b""), None);
        assert_eq!(ArtifactKind::recognise(b"the quick brown fox jumps"), None);
        assert_eq!(ArtifactKind::recognise(b"GGUF\x03\0\0\0\0\0\0\0"), None);
        assert_eq!(ArtifactKind::describe(b"ASVOCMAP\x01"), "a vocabulary map");
        assert_eq!(ArtifactKind::describe(b"GGUF\x03\0\0\0"), "a GGUF model file");
        assert!(ArtifactKind::describe(b"hello").starts_with("no anyspec artifact"));
    }

    #[test]
    fn an_affinity_matrix_is_recognised_by_its_metadata_not_any_safetensors() {
        let affinity =
            safetensors_with_metadata(r#"{"checksum":"00","format":"anyspec-affinity","format_version":"1"}"#);
        assert_eq!(ArtifactKind::recognise(&affinity), Some(ArtifactKind::Affinity));
        let router = safetensors_with_metadata(r#"{"checksum":"00","format":"anyspec-dynaspec"}"#);
        assert_eq!(ArtifactKind::recognise(&router), Some(ArtifactKind::Router));
        let eagle = safetensors_with_metadata(r#"{"checksum":"00","format":"anyspec-eagle"}"#);
        assert_eq!(ArtifactKind::recognise(&eagle), Some(ArtifactKind::FeatureDrafter));
        let model = safetensors_with_metadata(r#"{"format":"pt"}"#);
        assert_eq!(ArtifactKind::recognise(&model), None);
        // The entry must be inside the header, not in the tensor data after it.
        let mut tail = safetensors_with_metadata(r#"{"format":"pt"}"#);
        tail.extend_from_slice(AFFINITY_FORMAT_ENTRY);
        assert_eq!(ArtifactKind::recognise(&tail), None);
    }

    #[test]
    fn of_file_reads_the_header_of_a_safetensors_file() {
        let dir = std::env::temp_dir().join(format!("anyspec-kind-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("m.safetensors");
        std::fs::write(&path, safetensors_with_metadata(r#"{"format":"anyspec-affinity"}"#)).unwrap();
        assert_eq!(ArtifactKind::of_file(&path).unwrap(), Some(ArtifactKind::Affinity));
        std::fs::write(&path, b"ASVOCMAP").unwrap();
        assert_eq!(ArtifactKind::of_file(&path).unwrap(), Some(ArtifactKind::VocabMap));
        std::fs::write(&path, b"short").unwrap();
        assert_eq!(ArtifactKind::of_file(&path).unwrap(), None);
        assert!(ArtifactKind::of_file(&dir.join("missing")).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
