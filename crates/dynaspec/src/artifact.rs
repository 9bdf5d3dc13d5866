//! The router artifact: the clusters and the router of one model in one safetensors file.
//!
//! | tensor | dtype | shape | content |
//! |---|---|---|---|
//! | `assignment` | U32 | `[vocab]` | the cluster of each token |
//! | `w1` | F32 | `[hidden · input]` | first layer, row-major `[hidden, input]` |
//! | `b1` | F32 | `[hidden]` | |
//! | `w2` | F32 | `[clusters · hidden]` | second layer, row-major `[clusters, hidden]` |
//! | `b2` | F32 | `[clusters]` | |
//!
//! The metadata holds `format` (`anyspec-dynaspec`), `format_version`, `model_fingerprint`
//! ([`model_fingerprint`]), the sizes, how it was built (k-means seed and iterations, label top-k,
//! drafter layers, corpus, `data_digest` of the training tokens, positions, epochs), the
//! `loss_log` and the held-out `recall` (JSON arrays), and `checksum`, the SHA-256 of every other
//! entry and every tensor's bytes. The header is written in a fixed order, so two builds of the
//! same router are byte-identical; files are written atomically.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

use anyspec_core::artifact::{MAX_PLAUSIBLE_VERSION, SafetensorsVector, artifact_checksum, serialize_safetensors};
use safetensors::{Dtype, SafeTensors};
use sha2::{Digest, Sha256};

use crate::clusters::Clusters;
use crate::error::{Error, Result};
use crate::router::Router;

/// The `format` metadata value of every router file.
pub const ROUTER_FORMAT: &str = "anyspec-dynaspec";
/// The format version this build writes and reads.
pub const ROUTER_FORMAT_VERSION: u32 = 1;

/// How a router was built, as recorded in its file.
#[derive(Clone, Debug, PartialEq)]
pub struct RouterInfo {
    /// [`model_fingerprint`] of the model whose head was clustered and whose drafter was read.
    pub model_fingerprint: String,
    /// `|V|`.
    pub vocab_size: usize,
    /// The model's hidden size `d` (the router reads `2d` values).
    pub hidden_size: usize,
    /// Layers of the self-speculative drafter whose hidden state the router reads.
    pub drafter_layers: usize,
    /// Seed of the k-means initialisation.
    pub kmeans_seed: u64,
    /// Lloyd iterations at most.
    pub kmeans_iterations: usize,
    /// Labels: the clusters of the target's `label_top_k` most likely next tokens.
    pub label_top_k: usize,
    /// The corpus files read.
    pub corpus: String,
    /// SHA-256 of the training positions' token ids (see [`data_digest`]).
    pub data_digest: String,
    /// Training positions.
    pub positions: usize,
    /// Training epochs.
    pub epochs: usize,
    /// Mean BCE loss per epoch (the paper's `L_r`, averaged over clusters).
    pub loss_log: Vec<f32>,
    /// Held-out recall of the target's probability mass: `(clusters kept, mean shortlist size,
    /// mean target mass inside)` per budget.
    pub recall: Vec<(usize, f32, f32)>,
}

/// A built DynaSpec router: clusters, router, and how they were made.
#[derive(Clone, Debug, PartialEq)]
pub struct RouterFile {
    /// Build record.
    pub info: RouterInfo,
    /// The vocabulary partition.
    pub clusters: Clusters,
    /// The router MLP.
    pub router: Router,
}

/// The fingerprint of a model as far as a router depends on it: its vocabulary size, hidden size
/// and LM-head rows (`[vocab, hidden]` f32, as `anyspec_models`' `lm_head_rows` returns),
/// SHA-256, 64 hex digits. Another model (or another quantization of it) gets another one.
pub fn model_fingerprint(vocab: usize, hidden: usize, head_rows: &[f32]) -> String {
    let mut h = Sha256::new();
    h.update(b"anyspec-dynaspec-model-v1\0");
    h.update((vocab as u64).to_le_bytes());
    h.update((hidden as u64).to_le_bytes());
    for chunk in head_rows.chunks(1 << 16) {
        let bytes: Vec<u8> = chunk.iter().flat_map(|v| v.to_le_bytes()).collect();
        h.update(&bytes);
    }
    hex(&h.finalize())
}

/// SHA-256 of token-id sequences (each length-prefixed), 64 hex digits: the training data digest.
pub fn data_digest<'a>(sequences: impl IntoIterator<Item = &'a [u32]>) -> String {
    let mut h = Sha256::new();
    h.update(b"anyspec-dynaspec-data-v1\0");
    for seq in sequences {
        h.update((seq.len() as u64).to_le_bytes());
        for t in seq {
            h.update(t.to_le_bytes());
        }
    }
    hex(&h.finalize())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

impl RouterFile {
    /// Checks that the parts agree (router width `2 · hidden`, `M` clusters, the vocabulary).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming the disagreement.
    pub fn new(info: RouterInfo, clusters: Clusters, router: Router) -> Result<RouterFile> {
        if clusters.vocab_size() != info.vocab_size {
            return Err(Error::invalid(format!(
                "the clusters cover {} tokens but the model's vocabulary has {}",
                clusters.vocab_size(),
                info.vocab_size
            )));
        }
        if router.clusters() != clusters.len() {
            return Err(Error::invalid(format!(
                "the router scores {} clusters but there are {}",
                router.clusters(),
                clusters.len()
            )));
        }
        if router.input_size() != 2 * info.hidden_size {
            return Err(Error::invalid(format!(
                "the router reads {} values but [E(x_t), H̃_(t−1)] of a model of hidden size {} has {}",
                router.input_size(),
                info.hidden_size,
                2 * info.hidden_size
            )));
        }
        Ok(RouterFile { info, clusters, router })
    }

    /// The file's bytes (safetensors, fixed header order).
    pub fn to_bytes(&self) -> Vec<u8> {
        let le = |v: &[f32]| -> Vec<u8> { v.iter().flat_map(|x| x.to_le_bytes()).collect() };
        let assignment: Vec<u8> = self.clusters.assignment().iter().flat_map(|x| x.to_le_bytes()).collect();
        let (w1, b1, w2, b2) = self.router.weights();
        let (w1, b1, w2, b2) = (le(w1), le(b1), le(w2), le(b2));
        // Every tensor is of 4-byte elements.
        let tensors: [SafetensorsVector<'_>; 5] = [
            ("assignment", "U32", assignment.len() / 4, &assignment),
            ("w1", "F32", w1.len() / 4, &w1),
            ("b1", "F32", b1.len() / 4, &b1),
            ("w2", "F32", w2.len() / 4, &w2),
            ("b2", "F32", b2.len() / 4, &b2),
        ];
        let mut metadata = self.metadata();
        let sum = artifact_checksum(&metadata, tensors.iter().map(|&(n, _, _, d)| (n, d)));
        metadata.insert("checksum".into(), sum);
        serialize_safetensors(&tensors, &metadata)
    }

    /// Writes the router to `path` atomically (a crash leaves the old file or the new one).
    ///
    /// # Errors
    /// [`Error::Io`].
    pub fn save(&self, path: &Path) -> Result<()> {
        save_bytes(path, &self.to_bytes())
    }

    /// Reads a router and checks it was built for the model of fingerprint `expected_model`.
    ///
    /// # Errors
    /// [`Error::Io`], [`Error::NotAnArtifact`], [`Error::Version`], [`Error::Corrupt`] for a file
    /// that is not a sound router, [`Error::WrongModel`] for a router of another model.
    pub fn load(path: &Path, expected_model: &str) -> Result<RouterFile> {
        let file = RouterFile::load_unchecked(path)?;
        if file.info.model_fingerprint != expected_model {
            return Err(Error::WrongModel {
                path: path.to_path_buf(),
                built_for: file.info.model_fingerprint,
                given: expected_model.to_string(),
            });
        }
        Ok(file)
    }

    /// Reads a router without comparing it with a model, to inspect it.
    ///
    /// # Errors
    /// As [`RouterFile::load`] except [`Error::WrongModel`].
    pub fn load_unchecked(path: &Path) -> Result<RouterFile> {
        let bytes = std::fs::read(path).map_err(Error::io("read", path))?;
        RouterFile::from_bytes(&bytes, path)
    }

    /// Parses a file's bytes; `path` only names the source in errors.
    ///
    /// # Errors
    /// As [`RouterFile::load_unchecked`].
    pub fn from_bytes(bytes: &[u8], path: &Path) -> Result<RouterFile> {
        let corrupt = |problem: String| Error::Corrupt { path: path.to_path_buf(), problem };
        let not_router = |found| Error::NotAnArtifact { path: path.to_path_buf(), found };
        let kind = anyspec_core::artifact::ArtifactKind::recognise(bytes);
        if kind.is_some_and(|k| k != anyspec_core::artifact::ArtifactKind::Router)
            || (bytes.len() > 8 && bytes[8] != b'{')
        {
            return Err(not_router(anyspec_core::artifact::ArtifactKind::describe(bytes)));
        }
        let metadata = checked_metadata(bytes, path, ROUTER_FORMAT, ROUTER_FORMAT_VERSION)?;
        let tensors = SafeTensors::deserialize(bytes).map_err(|e| corrupt(format!("truncated or malformed ({e})")))?;
        let names = ["assignment", "w1", "b1", "w2", "b2"];
        let mut data = Vec::new();
        for (i, name) in names.iter().enumerate() {
            let view = tensors.tensor(name).map_err(|_| corrupt(format!("tensor {name} is missing")))?;
            let dtype = if i == 0 { Dtype::U32 } else { Dtype::F32 };
            if view.dtype() != dtype || view.shape().len() != 1 {
                return Err(corrupt(format!(
                    "tensor {name} is {:?} {:?}, expected a vector of {dtype:?}",
                    view.dtype(),
                    view.shape()
                )));
            }
            data.push(view.data());
        }
        verify_checksum(&metadata, names.iter().copied().zip(data.iter().copied()), path)?;
        let info = info_of(&metadata).map_err(&corrupt)?;
        let u32s = |b: &[u8]| -> Vec<u32> {
            b.chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
        };
        let f32s = |b: &[u8]| -> Vec<f32> {
            b.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
        };
        let field = |key: &str| -> Result<usize> {
            metadata
                .get(key)
                .and_then(|v| v.parse().ok())
                .ok_or_else(|| corrupt(format!("metadata entry {key} is missing or not a number")))
        };
        let (m, hidden) = (field("clusters")?, field("router_hidden")?);
        let clusters = Clusters::from_assignment(u32s(data[0]), m).map_err(|e| corrupt(e.to_string()))?;
        let router =
            Router::new(2 * info.hidden_size, hidden, m, f32s(data[1]), f32s(data[2]), f32s(data[3]), f32s(data[4]))
                .map_err(|e| corrupt(e.to_string()))?;
        RouterFile::new(info, clusters, router).map_err(|e| corrupt(e.to_string()))
    }

    fn metadata(&self) -> BTreeMap<String, String> {
        let i = &self.info;
        let loss = format!("[{}]", i.loss_log.iter().map(|l| format!("{l}")).collect::<Vec<_>>().join(","));
        let recall = format!(
            "[{}]",
            i.recall.iter().map(|(k, size, mass)| format!("[{k},{size},{mass}]")).collect::<Vec<_>>().join(",")
        );
        [
            ("format", ROUTER_FORMAT.to_string()),
            ("format_version", ROUTER_FORMAT_VERSION.to_string()),
            ("model_fingerprint", i.model_fingerprint.clone()),
            ("vocab_size", i.vocab_size.to_string()),
            ("hidden_size", i.hidden_size.to_string()),
            ("drafter_layers", i.drafter_layers.to_string()),
            ("clusters", self.clusters.len().to_string()),
            ("router_hidden", self.router.hidden_size().to_string()),
            ("kmeans_seed", i.kmeans_seed.to_string()),
            ("kmeans_iterations", i.kmeans_iterations.to_string()),
            ("label_top_k", i.label_top_k.to_string()),
            ("corpus", i.corpus.clone()),
            ("data_digest", i.data_digest.clone()),
            ("positions", i.positions.to_string()),
            ("epochs", i.epochs.to_string()),
            ("loss_log", loss),
            ("recall", recall),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect()
    }
}

/// Writes an artifact's bytes to `path` atomically (a crash leaves the old file or the new one).
pub(crate) fn save_bytes(path: &Path, bytes: &[u8]) -> Result<()> {
    anyspec_core::artifact::write_atomically(path, |w| w.write_all(bytes)).map_err(Error::io("write", path))
}

/// The metadata of a safetensors file whose `format` entry must be `format` and whose
/// `format_version` must be `version`: [`Error::NotAnArtifact`] for another format,
/// [`Error::Version`] for another plausible version, [`Error::Corrupt`] for an unreadable header
/// or an implausible version. The caller has checked the file's first bytes.
pub(crate) fn checked_metadata(
    bytes: &[u8],
    path: &Path,
    format: &str,
    version: u32,
) -> Result<BTreeMap<String, String>> {
    let corrupt = |problem: String| Error::Corrupt { path: path.to_path_buf(), problem };
    let (_, header) =
        SafeTensors::read_metadata(bytes).map_err(|e| corrupt(format!("not a complete safetensors file ({e})")))?;
    let metadata: BTreeMap<String, String> = header.metadata().clone().unwrap_or_default().into_iter().collect();
    if metadata.get("format").map(String::as_str) != Some(format) {
        return Err(Error::NotAnArtifact { path: path.to_path_buf(), found: "a safetensors file of another format" });
    }
    let found = metadata.get("format_version").cloned().unwrap_or_default();
    match found.parse::<u32>() {
        Ok(v) if v == version => Ok(metadata),
        Ok(v) if v <= MAX_PLAUSIBLE_VERSION => {
            Err(Error::Version { path: path.to_path_buf(), expected: version, found })
        }
        _ => Err(corrupt(format!("its format_version reads {found:?}, which no anyspec writes"))),
    }
}

/// Checks the `checksum` entry of `metadata` against every other entry and `tensors` (name and
/// bytes, in the order the writer hashed them): [`Error::Corrupt`] on a mismatch.
pub(crate) fn verify_checksum<'a>(
    metadata: &BTreeMap<String, String>,
    tensors: impl Iterator<Item = (&'a str, &'a [u8])>,
    path: &Path,
) -> Result<()> {
    let mut unsigned = metadata.clone();
    let stored = unsigned.remove("checksum").unwrap_or_default();
    let computed = artifact_checksum(&unsigned, tensors);
    if stored != computed {
        return Err(Error::Corrupt {
            path: path.to_path_buf(),
            problem: format!("checksum mismatch (stored {stored:?}, computed {computed})"),
        });
    }
    Ok(())
}

fn info_of(m: &BTreeMap<String, String>) -> std::result::Result<RouterInfo, String> {
    fn field<T: std::str::FromStr>(m: &BTreeMap<String, String>, key: &str) -> std::result::Result<T, String> {
        let raw = m.get(key).ok_or_else(|| format!("metadata entry {key} is missing"))?;
        raw.parse().map_err(|_| format!("metadata entry {key} = {raw:?} does not parse"))
    }
    let list = |key: &str| -> std::result::Result<Vec<f32>, String> {
        let raw: String = field(m, key)?;
        let inner = raw.trim().trim_start_matches('[').trim_end_matches(']').replace(['[', ']'], "");
        inner
            .split(',')
            .filter(|s| !s.trim().is_empty())
            .map(|s| s.trim().parse::<f32>().map_err(|_| format!("metadata entry {key} = {raw:?} does not parse")))
            .collect()
    };
    let recall_flat = list("recall")?;
    if !recall_flat.len().is_multiple_of(3) {
        return Err("metadata entry recall is not a list of triples".into());
    }
    Ok(RouterInfo {
        model_fingerprint: field(m, "model_fingerprint")?,
        vocab_size: field(m, "vocab_size")?,
        hidden_size: field(m, "hidden_size")?,
        drafter_layers: field(m, "drafter_layers")?,
        kmeans_seed: field(m, "kmeans_seed")?,
        kmeans_iterations: field(m, "kmeans_iterations")?,
        label_top_k: field(m, "label_top_k")?,
        corpus: field(m, "corpus")?,
        data_digest: field(m, "data_digest")?,
        positions: field(m, "positions")?,
        epochs: field(m, "epochs")?,
        loss_log: list("loss_log")?,
        recall: recall_flat.chunks_exact(3).map(|c| (c[0] as usize, c[1], c[2])).collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> RouterFile {
        let clusters = Clusters::from_assignment(vec![0, 1, 1, 2, 0, 2], 3).unwrap();
        let router = Router::new(
            4,
            2,
            3,
            (0..8).map(|i| i as f32 * 0.1).collect(),
            vec![0.1, -0.2],
            (0..6).map(|i| i as f32).collect(),
            vec![0.0; 3],
        )
        .unwrap();
        let info = RouterInfo {
            model_fingerprint: model_fingerprint(6, 2, &[0.5; 12]),
            vocab_size: 6,
            hidden_size: 2,
            drafter_layers: 4,
            kmeans_seed: 1,
            kmeans_iterations: 20,
            label_top_k: 4,
            corpus: "a \"quoted\" file.txt".into(),
            data_digest: data_digest([&[1u32, 2][..], &[3][..]]),
            positions: 3,
            epochs: 2,
            loss_log: vec![0.5, 0.25],
            recall: vec![(1, 2.0, 0.5), (2, 4.0, 0.75)],
        };
        RouterFile::new(info, clusters, router).unwrap()
    }

    #[test]
    fn round_trips_byte_identically() {
        let file = sample();
        let bytes = file.to_bytes();
        let back = RouterFile::from_bytes(&bytes, Path::new("r.safetensors")).unwrap();
        assert_eq!(back, file);
        assert_eq!(back.to_bytes(), bytes);
    }

    #[test]
    fn a_flipped_byte_a_wrong_model_and_other_files_are_refused() {
        let file = sample();
        let mut bytes = file.to_bytes();
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        let e = RouterFile::from_bytes(&bytes, Path::new("r")).unwrap_err().to_string();
        assert!(e.contains("checksum mismatch"), "{e}");
        let e = RouterFile::from_bytes(b"ASVOCMAP\x01\0\0\0", Path::new("r")).unwrap_err().to_string();
        assert!(e.contains("a vocabulary map"), "{e}");

        let dir = std::env::temp_dir().join(format!("anyspec-dynaspec-art-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("router.safetensors");
        file.save(&path).unwrap();
        assert!(RouterFile::load(&path, &file.info.model_fingerprint).is_ok());
        let other = model_fingerprint(6, 2, &[0.25; 12]);
        assert_ne!(other, file.info.model_fingerprint);
        let e = RouterFile::load(&path, &other).unwrap_err().to_string();
        assert!(e.contains("built for the model with fingerprint") && e.contains("rebuild it"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn inconsistent_parts_are_refused() {
        let file = sample();
        let wrong_vocab = RouterInfo { vocab_size: 7, ..file.info.clone() };
        assert!(RouterFile::new(wrong_vocab, file.clusters.clone(), file.router.clone()).is_err());
        let wrong_hidden = RouterInfo { hidden_size: 3, ..file.info.clone() };
        assert!(RouterFile::new(wrong_hidden, file.clusters.clone(), file.router.clone()).is_err());
    }
}
