//! Where a loader reads weights from: a safetensors checkpoint or a GGUF file, behind one trait
//! that speaks Hugging Face tensor names, so each engine has one loader for both.

use std::borrow::Cow;
use std::path::Path;

use anyspec_cpu_kernels::{Matrix, WeightFormat};

use crate::error::{Error, Result};

/// A weight matrix as stored: `rows` rows of `cols` values in `format`, row `i` of the model's
/// (Hugging Face) layout being stored row `order[i]` when a permutation is given.
#[derive(Debug)]
pub(crate) struct RawMatrix<'a> {
    pub(crate) format: WeightFormat,
    pub(crate) rows: usize,
    pub(crate) cols: usize,
    pub(crate) bytes: Cow<'a, [u8]>,
    /// `Some(order)`: the model's row `i` is stored row `order[i]` (llama.cpp's converter
    /// permutes the query and key rows for its RoPE layout).
    pub(crate) permutation: Option<Vec<usize>>,
}

impl RawMatrix<'_> {
    /// The stored row of each of the model's rows.
    pub(crate) fn order(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.rows).map(|i| self.permutation.as_ref().map_or(i, |order| order[i]))
    }

    /// The same matrix owning its bytes, so that several can be held at once.
    pub(crate) fn into_owned(self) -> RawMatrix<'static> {
        RawMatrix { bytes: Cow::Owned(self.bytes.into_owned()), ..self }
    }

    /// The kernel matrix, repacked (and un-permuted) once.
    pub(crate) fn to_matrix(&self) -> Result<Matrix> {
        Ok(match &self.permutation {
            None => Matrix::from_bytes(self.format, self.rows, self.cols, &self.bytes)?,
            Some(order) => Matrix::from_bytes_permuted(self.format, self.rows, self.cols, &self.bytes, order)?,
        })
    }

    /// The same values stored as `format` (f32, f16 or bf16): dequantized and re-encoded, so
    /// that a quantized file can be run, or measured, as a float checkpoint.
    pub(crate) fn converted(self, format: WeightFormat) -> Result<RawMatrix<'static>> {
        if format == self.format {
            return Ok(self.into_owned());
        }
        let mut values = vec![0.0f32; self.rows * self.cols];
        anyspec_cpu_kernels::dequantize(self.format, &self.bytes, &mut values)?;
        let bytes: Vec<u8> = match format {
            WeightFormat::F32 => values.iter().flat_map(|v| v.to_le_bytes()).collect(),
            WeightFormat::F16 => values.iter().flat_map(|&v| half::f16::from_f32(v).to_le_bytes()).collect(),
            WeightFormat::BF16 => values.iter().flat_map(|&v| half::bf16::from_f32(v).to_le_bytes()).collect(),
            // Only float weights are quantized: re-quantizing a quantized file compounds errors.
            WeightFormat::Q8_0 if self.format == WeightFormat::F32 => anyspec_cpu_kernels::quantize(format, &values)?,
            other => {
                return Err(crate::error::Error::InvalidArgument(format!(
                    "weights can be converted at load to f32, f16 or bf16 (and f32 weights to q8_0), not {} to {}",
                    self.format.name(),
                    other.name()
                )));
            }
        };
        Ok(RawMatrix { format, bytes: Cow::Owned(bytes), ..self })
    }
}

/// Tensors by Hugging Face name (`model.layers.0.self_attn.q_proj.weight`, `lm_head.weight`…).
pub(crate) trait WeightSource {
    /// Whether a tensor of this name exists.
    fn contains(&self, name: &str) -> bool;
    /// The tensor as `f32`, row-major in the Hugging Face layout, checked to have `shape`.
    fn read_f32(&mut self, name: &str, shape: &[usize]) -> Result<Vec<f32>>;
    /// A `[rows, cols]` weight matrix in its stored format, checked to have that shape.
    fn read_raw(&mut self, name: &str, rows: usize, cols: usize) -> Result<RawMatrix<'_>>;
}

/// Tensors held in host memory as f32, by name: weights trained in this process, or read from
/// an artifact by its own crate.
pub(crate) struct HostTensors<'a> {
    pub(crate) tensors: &'a std::collections::HashMap<String, (Vec<usize>, Vec<f32>)>,
}

impl HostTensors<'_> {
    fn get(&self, name: &str, shape: &[usize]) -> Result<&[f32]> {
        let (stored, values) = self
            .tensors
            .get(name)
            .ok_or_else(|| Error::MissingTensor { tensor: name.to_owned(), expected: shape.to_vec() })?;
        if stored != shape || values.len() != shape.iter().product::<usize>() {
            return Err(Error::InvalidArgument(format!(
                "tensor {name} has shape {stored:?} ({} values); expected {shape:?}",
                values.len()
            )));
        }
        Ok(values)
    }
}

impl WeightSource for HostTensors<'_> {
    fn contains(&self, name: &str) -> bool {
        self.tensors.contains_key(name)
    }

    fn read_f32(&mut self, name: &str, shape: &[usize]) -> Result<Vec<f32>> {
        Ok(self.get(name, shape)?.to_vec())
    }

    fn read_raw(&mut self, name: &str, rows: usize, cols: usize) -> Result<RawMatrix<'_>> {
        let values = self.get(name, &[rows, cols])?;
        let bytes = values.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<u8>>();
        Ok(RawMatrix { format: WeightFormat::F32, rows, cols, bytes: Cow::Owned(bytes), permutation: None })
    }
}

/// Refuses a checkpoint whose file holds layers at or beyond `num_layers`: the loader reads
/// layers `0..num_layers` only, so a configuration with fewer layers than the file would silently
/// run a truncated model. `layer_prefixes` are the name prefixes before a layer index
/// (`model.layers.` for Hugging Face names, `blk.` for GGUF).
pub(crate) fn refuse_unused_layers<'a>(
    names: impl IntoIterator<Item = &'a str>,
    layer_prefixes: &[&str],
    num_layers: usize,
    path: &Path,
) -> Result<()> {
    let layer_of = |name: &str| -> Option<usize> {
        let rest = layer_prefixes.iter().find_map(|prefix| name.strip_prefix(prefix))?;
        rest.split_once('.')?.0.parse().ok()
    };
    let mut unused: Vec<(usize, &str)> =
        names.into_iter().filter_map(|name| layer_of(name).filter(|&l| l >= num_layers).map(|l| (l, name))).collect();
    if unused.is_empty() {
        return Ok(());
    }
    unused.sort_unstable();
    const SHOWN: usize = 4;
    let mut names = unused.iter().take(SHOWN).map(|(_, name)| *name).collect::<Vec<_>>().join(", ");
    if unused.len() > SHOWN {
        names.push_str(&format!(" and {} more", unused.len() - SHOWN));
    }
    let layers_in_file = unused.last().map_or(num_layers, |(layer, _)| layer + 1);
    names.push_str(&format!(" (the file has at least {layers_in_file} layers)"));
    Err(Error::UnusedTensors { path: path.to_owned(), num_layers, names })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layers_beyond_the_configuration_are_named_in_layer_order() {
        let names =
            ["model.layers.0.a", "model.layers.10.b", "model.layers.2.c", "model.norm.weight", "model.layers.x.d"];
        let path = Path::new("ckpt");
        refuse_unused_layers(names, &["model.layers."], 11, path).unwrap();
        let err = refuse_unused_layers(names, &["model.layers."], 2, path).unwrap_err().to_string();
        assert!(err.contains("num_hidden_layers = 2"), "{err}");
        assert!(err.contains("model.layers.2.c, model.layers.10.b (the file has at least 11 layers)"), "{err}");
        let many: Vec<String> = (0..9).map(|i| format!("blk.{i}.attn_q.weight")).collect();
        let err = refuse_unused_layers(many.iter().map(String::as_str), &["blk."], 3, path).unwrap_err().to_string();
        assert!(
            err.contains(
                "blk.3.attn_q.weight, blk.4.attn_q.weight, blk.5.attn_q.weight, blk.6.attn_q.weight and 2 more"
            ),
            "{err}"
        );
    }
}
