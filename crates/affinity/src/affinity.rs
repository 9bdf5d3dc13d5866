//! The affinity-matrix artifact: a row-stochastic sparse `M` and the scores it came from, in one
//! safetensors file.
//!
//! | tensor | dtype | shape | content |
//! |---|---|---|---|
//! | `row_offsets` | U64 | `[N + 1]` | CSR row offsets |
//! | `columns` | U32 | `[nnz]` | column (target token) ids, ascending within a row |
//! | `values` | F32 | `[nnz]` | `M_ij`; each non-empty row sums to 1 |
//! | `scores` | F32 | `[nnz]` | the raw scores `s_ij` (for the first-order RDK form) |
//!
//! An empty row means the identity (the token keeps its mass), as in
//! [`anyspec_core::projection::AffinityMatrix`]. The safetensors metadata holds `format`
//! (`anyspec-affinity`), `format_version`, `target_fingerprint` (64 hex digits, see
//! [`Fingerprint`]), the build parameters (`window`, `tau`, `top_k`, `min_count`, `score`), what was
//! counted (`corpus`, `tokens`, `distinct_pairs`, `prune_floor`) and `checksum`, the SHA-256 of
//! every other metadata entry and every tensor's bytes. Loading checks, in order: safetensors
//! framing, format name, version, checksum, shapes, row-stochasticity, and (with
//! [`Affinity::load`]) the target tokenizer's fingerprint.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyspec_core::artifact::{
    ArtifactKind, MAX_PLAUSIBLE_VERSION, SafetensorsVector, artifact_checksum, serialize_safetensors,
};
use anyspec_core::projection::{AffinityMatrix, SparseScores};
use anyspec_vocab_map::Fingerprint;
use safetensors::{Dtype, SafeTensors};
use serde::Serialize;

use crate::error::{Error, Result};

/// The `format` metadata value of every affinity file.
pub const AFFINITY_FORMAT: &str = "anyspec-affinity";
/// The format version this build writes and reads.
pub const AFFINITY_FORMAT_VERSION: u32 = 1;

/// How an affinity matrix was built, as recorded in its file.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AffinityInfo {
    /// Fingerprint of the target tokenizer the matrix indexes.
    #[serde(serialize_with = "serialize_display")]
    pub target_fingerprint: Fingerprint,
    /// `N`, the target vocabulary's id-space size.
    pub vocab_size: usize,
    /// Co-occurrence window `W` in tokens.
    pub window: usize,
    /// Softmax temperature `τ` turning scores into rows.
    pub tau: f64,
    /// Most entries per row, the token itself included.
    pub top_k: usize,
    /// Pairs seen fewer times than this got no entry.
    pub min_count: u64,
    /// Which score `s_ij` the rows use (`ppmi`, or `synthetic` for matrices made in code).
    pub score: String,
    /// The corpus files counted.
    pub corpus: String,
    /// Tokens counted.
    pub tokens: u64,
    /// Distinct co-occurring pairs counted.
    pub distinct_pairs: u64,
    /// 0 if the counts were exact; otherwise the count at or below which pairs may have been
    /// dropped to stay within the memory budget.
    pub prune_floor: u64,
}

fn serialize_display<S: serde::Serializer>(value: &Fingerprint, s: S) -> std::result::Result<S::Ok, S::Error> {
    s.collect_str(value)
}

/// A loaded (or freshly built) affinity matrix: `M` for exact RDK, the scores and `τ` for the
/// first-order form, and the build record.
#[derive(Clone, Debug, PartialEq)]
pub struct Affinity {
    matrix: AffinityMatrix,
    scores: SparseScores,
    info: AffinityInfo,
}

pub(crate) const MEMORY: &str = "<memory>";

impl Affinity {
    /// Makes the matrix from scores: `M = softmax_τ` of each row's stored scores
    /// ([`AffinityMatrix::from_scores`]); an empty row stays the identity.
    ///
    /// # Errors
    /// [`Error::InvalidMatrix`] for scores that are not a valid CSR matrix of `info.vocab_size`
    /// rows, or a bad `τ`.
    pub fn from_scores(scores: SparseScores, info: AffinityInfo) -> Result<Affinity> {
        let invalid = |source| Error::InvalidMatrix { path: PathBuf::from(MEMORY), source };
        if scores.size() != info.vocab_size {
            return Err(invalid(anyspec_core::Error::LengthMismatch {
                what: "score matrix (vocabulary size)",
                expected: info.vocab_size,
                got: scores.size(),
            }));
        }
        let matrix = AffinityMatrix::from_scores(&scores, info.tau).map_err(invalid)?;
        Ok(Affinity { matrix, scores, info })
    }

    /// The row-stochastic matrix `M`, for [`anyspec_core::projection::rdk_exact`].
    pub fn matrix(&self) -> &AffinityMatrix {
        &self.matrix
    }

    /// The raw scores, for [`anyspec_core::projection::rdk_dense_kernel_first_order`] (with [`Affinity::tau`]).
    pub fn scores(&self) -> &SparseScores {
        &self.scores
    }

    /// The temperature `τ` the rows were made with.
    pub fn tau(&self) -> f64 {
        self.info.tau
    }

    /// How the matrix was built.
    pub fn info(&self) -> &AffinityInfo {
        &self.info
    }

    /// The matrix, the scores and the build record.
    pub fn into_parts(self) -> (AffinityMatrix, SparseScores, AffinityInfo) {
        (self.matrix, self.scores, self.info)
    }

    /// The matrix for a drafter that can produce only some target tokens (`in_drafter[t]`: the
    /// drafter has target token `t`, after a vocabulary map and/or a shortlist).
    ///
    /// After TLI, the drafter's mass sits on its own tokens, which verification already sees
    /// directly; moving some of it to *other tokens the drafter has* only blurs it. This keeps, in
    /// each row of a drafter token, the token itself and the target tokens the drafter lacks,
    /// and re-normalizes with the same `τ` (softmax of the kept scores). Rows of tokens the
    /// drafter lacks carry no mass after TLI and become empty (identity), and so do rows left
    /// with the token alone. With `in_drafter` all true the result is the identity. This is the
    /// out-of-vocabulary reading of RDK used by `cargo xtask repro rdk`; it is our construction,
    /// not taken from the paper.
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] when `in_drafter` does not have one entry per target token.
    pub fn restricted_to_drafter(&self, in_drafter: &[bool]) -> Result<Affinity> {
        let n = self.info.vocab_size;
        if in_drafter.len() != n {
            return Err(Error::invalid(
                "drafter token mask",
                "one entry per target token",
                format!("{} entries for {n} target tokens", in_drafter.len()),
            ));
        }
        let (offsets, all_columns, all_values) = self.scores.csr();
        let (mut row_offsets, mut columns, mut values) = (vec![0usize], Vec::new(), Vec::new());
        for row in 0..n {
            let range = offsets[row]..offsets[row + 1];
            if in_drafter[row] {
                let kept: Vec<usize> =
                    range.filter(|&k| all_columns[k] as usize == row || !in_drafter[all_columns[k] as usize]).collect();
                if kept.len() > 1 {
                    columns.extend(kept.iter().map(|&k| all_columns[k]));
                    values.extend(kept.iter().map(|&k| all_values[k]));
                }
            }
            row_offsets.push(columns.len());
        }
        let invalid = |source| Error::InvalidMatrix { path: PathBuf::from(MEMORY), source };
        let scores = SparseScores::from_csr(n, row_offsets, columns, values).map_err(invalid)?;
        Affinity::from_scores(scores, self.info.clone())
    }

    /// Rows that move mass (at least one stored entry); the others are the identity.
    pub fn rows_with_entries(&self) -> usize {
        let (offsets, _, _) = self.matrix.csr();
        offsets.windows(2).filter(|w| w[1] > w[0]).count()
    }

    /// The file's bytes (safetensors).
    ///
    /// # Errors
    /// [`Error::Corrupt`] if safetensors refuses to serialize (it does not for matrices this
    /// crate builds).
    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        let (offsets, columns, values) = self.matrix.csr();
        let offsets: Vec<u8> = offsets.iter().flat_map(|&o| (o as u64).to_le_bytes()).collect();
        let columns: Vec<u8> = columns.iter().flat_map(|c| c.to_le_bytes()).collect();
        let values: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        let scores: Vec<u8> = self.scores.csr().2.iter().flat_map(|v| v.to_le_bytes()).collect();
        let nnz = self.matrix.nnz();
        let n = self.info.vocab_size;
        let tensors: [SafetensorsVector<'_>; 4] = [
            ("row_offsets", "U64", n + 1, &offsets),
            ("columns", "U32", nnz, &columns),
            ("values", "F32", nnz, &values),
            ("scores", "F32", nnz, &scores),
        ];
        let mut metadata = metadata_of(&self.info);
        let checksum = artifact_checksum(&metadata, tensors.iter().map(|&(name, _, _, data)| (name, data)));
        metadata.insert("checksum".to_string(), checksum);
        Ok(serialize_safetensors(&tensors, &metadata))
    }

    /// Writes the matrix to `path` atomically (a crash leaves the old file or the new one).
    ///
    /// # Errors
    /// [`Error::Io`] when the file cannot be written.
    pub fn save(&self, path: &Path) -> Result<()> {
        let bytes = self.to_bytes()?;
        anyspec_core::artifact::write_atomically(path, |w| w.write_all(&bytes)).map_err(Error::io("write", path))
    }

    /// Reads a matrix written by [`Affinity::save`] and checks that it was built for the target
    /// tokenizer with fingerprint `expected_target`.
    ///
    /// # Errors
    /// [`Error::Io`], [`Error::NotAnArtifact`], [`Error::Version`], [`Error::Corrupt`] (truncated,
    /// checksum, shapes) or [`Error::InvalidMatrix`] (a row that does not sum to 1) for a file
    /// that is not a sound matrix, and [`Error::WrongTokenizer`] when it was built for another
    /// target tokenizer.
    pub fn load(path: &Path, expected_target: &Fingerprint) -> Result<Affinity> {
        let affinity = Affinity::load_unchecked(path)?;
        if affinity.info.target_fingerprint != *expected_target {
            return Err(Error::WrongTokenizer {
                path: path.to_path_buf(),
                role: "target",
                built_for: affinity.info.target_fingerprint.to_string(),
                given: expected_target.to_string(),
            });
        }
        Ok(affinity)
    }

    /// Reads a matrix without comparing it with a tokenizer, to inspect it.
    ///
    /// # Errors
    /// As [`Affinity::load`], except [`Error::WrongTokenizer`].
    pub fn load_unchecked(path: &Path) -> Result<Affinity> {
        let bytes = std::fs::read(path).map_err(Error::io("read", path))?;
        Affinity::from_bytes(&bytes, path)
    }

    /// Parses a file's bytes; `path` only names the source in errors.
    ///
    /// # Errors
    /// As [`Affinity::load_unchecked`].
    pub fn from_bytes(bytes: &[u8], path: &Path) -> Result<Affinity> {
        let corrupt = |problem: String| Error::corrupt(path, problem);
        // Another anyspec artifact, or a file that is not safetensors at all (whose header starts
        // with `{` after the 8-byte length), is named as such rather than called corrupt.
        let other_kind = ArtifactKind::recognise(bytes).is_some_and(|kind| kind != ArtifactKind::Affinity);
        if other_kind || (bytes.len() > 8 && bytes[8] != b'{') {
            return Err(Error::NotAnArtifact {
                path: path.to_path_buf(),
                expected: "an anyspec affinity matrix",
                found: ArtifactKind::describe(bytes),
            });
        }
        let (_, header) = SafeTensors::read_metadata(bytes).map_err(|e| {
            if bytes.len() < 8 {
                corrupt(format!("{} bytes are too few for a safetensors file", bytes.len()))
            } else {
                corrupt(format!("not a complete safetensors file ({e})"))
            }
        })?;
        let metadata: BTreeMap<String, String> =
            header.metadata().clone().unwrap_or_default().into_iter().collect::<BTreeMap<_, _>>();
        if metadata.get("format").map(String::as_str) != Some(AFFINITY_FORMAT) {
            return Err(Error::NotAnArtifact {
                path: path.to_path_buf(),
                expected: "an anyspec affinity matrix",
                found: "a safetensors file of another format",
            });
        }
        let version = metadata.get("format_version").cloned().unwrap_or_default();
        if version.parse::<u32>().is_ok_and(|v| v > MAX_PLAUSIBLE_VERSION) || version.parse::<u32>().is_err() {
            return Err(corrupt(format!("its format_version reads {version:?}, which no anyspec writes")));
        }
        if version != AFFINITY_FORMAT_VERSION.to_string() {
            return Err(Error::Version { path: path.to_path_buf(), expected: AFFINITY_FORMAT_VERSION, found: version });
        }
        let tensors = SafeTensors::deserialize(bytes).map_err(|e| corrupt(format!("truncated or malformed ({e})")))?;
        let tensor = |name: &str, dtype: Dtype| -> Result<&[u8]> {
            let view = tensors.tensor(name).map_err(|_| corrupt(format!("tensor {name} is missing")))?;
            if view.dtype() != dtype || view.shape().len() != 1 {
                return Err(corrupt(format!(
                    "tensor {name} is {:?} {:?}, expected a vector of {dtype:?}",
                    view.dtype(),
                    view.shape()
                )));
            }
            Ok(view.data())
        };
        let names = ["row_offsets", "columns", "values", "scores"];
        let dtypes = [Dtype::U64, Dtype::U32, Dtype::F32, Dtype::F32];
        let data = names.iter().zip(dtypes).map(|(&n, d)| tensor(n, d)).collect::<Result<Vec<_>>>()?;
        let mut unsigned = metadata.clone();
        let stored = unsigned.remove("checksum").unwrap_or_default();
        let computed = artifact_checksum(&unsigned, names.iter().copied().zip(data.iter().copied()));
        if stored != computed {
            return Err(corrupt(format!("checksum mismatch (stored {stored:?}, computed {computed})")));
        }
        let info = info_of(&metadata).map_err(corrupt)?;
        let row_offsets: Vec<usize> = data[0]
            .chunks_exact(8)
            .map(|b| usize::try_from(u64::from_le_bytes(b.try_into().unwrap_or_default())).unwrap_or(usize::MAX))
            .collect();
        let columns: Vec<u32> =
            data[1].chunks_exact(4).map(|b| u32::from_le_bytes(b.try_into().unwrap_or_default())).collect();
        let values: Vec<f32> =
            data[2].chunks_exact(4).map(|b| f32::from_le_bytes(b.try_into().unwrap_or_default())).collect();
        let scores: Vec<f32> =
            data[3].chunks_exact(4).map(|b| f32::from_le_bytes(b.try_into().unwrap_or_default())).collect();
        if row_offsets.len() != info.vocab_size + 1 || values.len() != columns.len() || scores.len() != columns.len() {
            return Err(corrupt(format!(
                "shapes disagree: {} row offsets for a vocabulary of {}, {} columns, {} values, {} scores",
                row_offsets.len(),
                info.vocab_size,
                columns.len(),
                values.len(),
                scores.len()
            )));
        }
        let matrix = AffinityMatrix::from_csr(info.vocab_size, row_offsets.clone(), columns.clone(), values)
            .map_err(|source| Error::InvalidMatrix { path: path.to_path_buf(), source })?;
        if let Some(i) = scores.iter().position(|v| !v.is_finite()) {
            return Err(corrupt(format!("score {i} is {}", scores[i])));
        }
        let scores = SparseScores::from_csr(info.vocab_size, row_offsets, columns, scores)
            .map_err(|source| Error::InvalidMatrix { path: path.to_path_buf(), source })?;
        Ok(Affinity { matrix, scores, info })
    }
}

fn metadata_of(info: &AffinityInfo) -> BTreeMap<String, String> {
    [
        ("format", AFFINITY_FORMAT.to_string()),
        ("format_version", AFFINITY_FORMAT_VERSION.to_string()),
        ("target_fingerprint", info.target_fingerprint.to_string()),
        ("vocab_size", info.vocab_size.to_string()),
        ("window", info.window.to_string()),
        ("tau", info.tau.to_string()),
        ("top_k", info.top_k.to_string()),
        ("min_count", info.min_count.to_string()),
        ("score", info.score.clone()),
        ("corpus", info.corpus.clone()),
        ("tokens", info.tokens.to_string()),
        ("distinct_pairs", info.distinct_pairs.to_string()),
        ("prune_floor", info.prune_floor.to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

fn info_of(metadata: &BTreeMap<String, String>) -> std::result::Result<AffinityInfo, String> {
    fn field<T: std::str::FromStr>(m: &BTreeMap<String, String>, key: &str) -> std::result::Result<T, String> {
        let raw = m.get(key).ok_or_else(|| format!("metadata entry {key} is missing"))?;
        raw.parse().map_err(|_| format!("metadata entry {key} = {raw:?} does not parse"))
    }
    Ok(AffinityInfo {
        target_fingerprint: field(metadata, "target_fingerprint")?,
        vocab_size: field(metadata, "vocab_size")?,
        window: field(metadata, "window")?,
        tau: field(metadata, "tau")?,
        top_k: field(metadata, "top_k")?,
        min_count: field(metadata, "min_count")?,
        score: field(metadata, "score")?,
        corpus: field(metadata, "corpus")?,
        tokens: field(metadata, "tokens")?,
        distinct_pairs: field(metadata, "distinct_pairs")?,
        prune_floor: field(metadata, "prune_floor")?,
    })
}
