//! Reading tensors from a safetensors checkpoint (one file or a sharded index), converted to
//! `f32` on the host.
//!
//! We read safetensors ourselves rather than through `burn-store` so that every failure names
//! the checkpoint tensor and both shapes, and so that sharded checkpoints need no remapping.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use safetensors::{Dtype, SafeTensors};
use serde::Deserialize;

use anyspec_cpu_kernels::WeightFormat;
use std::borrow::Cow;

use crate::error::{Error, Result};
use crate::source::{RawMatrix, WeightSource};

/// The safetensors files of a checkpoint and which file holds each tensor.
#[derive(Debug)]
pub(crate) struct WeightFiles {
    files: Vec<PathBuf>,
    /// Tensor name → index into `files`.
    index: HashMap<String, usize>,
    /// The shard read last: tensors are requested layer by layer, so this avoids rereading.
    open: Option<(usize, Vec<u8>)>,
}

#[derive(Deserialize)]
struct ShardIndex {
    weight_map: HashMap<String, String>,
}

impl WeightFiles {
    /// Finds `model.safetensors` or `model.safetensors.index.json` in `dir`.
    pub(crate) fn open(dir: &Path) -> Result<Self> {
        let single = dir.join("model.safetensors");
        let sharded = dir.join("model.safetensors.index.json");
        if sharded.is_file() {
            let text = read_to_string(&sharded)?;
            let parsed: ShardIndex = serde_json::from_str(&text)
                .map_err(|e| Error::Config { path: sharded.clone(), message: e.to_string() })?;
            let mut files: Vec<PathBuf> = Vec::new();
            let mut index = HashMap::new();
            for (tensor, file) in parsed.weight_map {
                let path = dir.join(&file);
                let position = match files.iter().position(|f| *f == path) {
                    Some(p) => p,
                    None => {
                        files.push(path);
                        files.len() - 1
                    }
                };
                index.insert(tensor, position);
            }
            Ok(WeightFiles { files, index, open: None })
        } else if single.is_file() {
            let bytes = read(&single)?;
            let names = SafeTensors::deserialize(&bytes)
                .map_err(|e| Error::Safetensors { path: single.clone(), message: e.to_string() })?
                .names()
                .into_iter()
                .map(|n| (n.to_owned(), 0))
                .collect();
            Ok(WeightFiles { files: vec![single], index: names, open: Some((0, bytes)) })
        } else {
            Err(Error::NoWeights { dir: dir.to_owned() })
        }
    }

    /// Every tensor name in the checkpoint.
    pub(crate) fn names(&self) -> impl Iterator<Item = &str> {
        self.index.keys().map(String::as_str)
    }

    /// Whether the checkpoint holds a tensor of this name.
    pub(crate) fn contains(&self, name: &str) -> bool {
        self.index.contains_key(name)
    }

    /// Reads tensor `name` as `f32`, checking that its shape is `expected`.
    pub(crate) fn read_f32(&mut self, name: &str, expected: &[usize]) -> Result<Vec<f32>> {
        let (dtype, data) = self.read_stored(name, expected)?;
        let values: Vec<f32> = match dtype {
            Dtype::F32 => data.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect(),
            Dtype::F16 => data.chunks_exact(2).map(|b| half::f16::from_le_bytes([b[0], b[1]]).to_f32()).collect(),
            Dtype::BF16 => data.chunks_exact(2).map(|b| half::bf16::from_le_bytes([b[0], b[1]]).to_f32()).collect(),
            other => return Err(Error::UnsupportedDtype { tensor: name.to_owned(), dtype: format!("{other:?}") }),
        };
        Ok(values)
    }

    /// Tensor `name` as stored (dtype and little-endian bytes), checking that its shape is
    /// `expected`.
    fn read_stored(&mut self, name: &str, expected: &[usize]) -> Result<(Dtype, &[u8])> {
        let Some(&file) = self.index.get(name) else {
            return Err(Error::MissingTensor { tensor: name.to_owned(), expected: expected.to_vec() });
        };
        if self.open.as_ref().is_none_or(|(open, _)| *open != file) {
            self.open = Some((file, read(&self.files[file])?));
        }
        let (_, bytes) = self.open.as_ref().expect("a shard was opened just above");
        let path = &self.files[file];
        let tensors = SafeTensors::deserialize(bytes)
            .map_err(|e| Error::Safetensors { path: path.clone(), message: e.to_string() })?;
        let view = tensors.tensor(name).map_err(|e| match e {
            safetensors::SafeTensorError::TensorNotFound(_) => {
                Error::MissingTensor { tensor: name.to_owned(), expected: expected.to_vec() }
            }
            other => Error::Safetensors { path: path.clone(), message: other.to_string() },
        })?;
        if view.shape() != expected {
            return Err(Error::ShapeMismatch {
                tensor: name.to_owned(),
                expected: expected.to_vec(),
                found: view.shape().to_vec(),
            });
        }
        // The view borrows `bytes`; hand out the same range of the shard with its lifetime.
        let data = view.data();
        let offset = data.as_ptr() as usize - bytes.as_ptr() as usize;
        Ok((view.dtype(), &bytes[offset..offset + data.len()]))
    }
}

impl WeightSource for WeightFiles {
    fn contains(&self, name: &str) -> bool {
        WeightFiles::contains(self, name)
    }

    fn read_f32(&mut self, name: &str, shape: &[usize]) -> Result<Vec<f32>> {
        WeightFiles::read_f32(self, name, shape)
    }

    fn read_raw(&mut self, name: &str, rows: usize, cols: usize) -> Result<RawMatrix<'_>> {
        let (dtype, data) = self.read_stored(name, &[rows, cols])?;
        let format = match dtype {
            Dtype::F32 => WeightFormat::F32,
            Dtype::F16 => WeightFormat::F16,
            Dtype::BF16 => WeightFormat::BF16,
            other => return Err(Error::UnsupportedDtype { tensor: name.to_owned(), dtype: format!("{other:?}") }),
        };
        Ok(RawMatrix { format, rows, cols, bytes: Cow::Borrowed(data), permutation: None })
    }
}

fn read(path: &Path) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(|source| Error::Io { path: path.to_owned(), source })
}

fn read_to_string(path: &Path) -> Result<String> {
    std::fs::read_to_string(path).map_err(|source| Error::Io { path: path.to_owned(), source })
}

/// Transposes a row-major `[rows, cols]` matrix, turning a PyTorch `Linear` weight `[out, in]`
/// into the `[in, out]` layout that `x.matmul(w)` wants.
pub(crate) fn transpose(values: &[f32], rows: usize, cols: usize) -> Vec<f32> {
    let mut out = vec![0.0; values.len()];
    for r in 0..rows {
        for c in 0..cols {
            out[c * rows + r] = values[r * cols + c];
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transpose_swaps_rows_and_columns() {
        assert_eq!(transpose(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], 2, 3), vec![1.0, 4.0, 2.0, 5.0, 3.0, 6.0]);
    }
}
