//! GGUF files as model checkpoints: the llama (and qwen2) architecture's metadata as a
//! [`LlamaConfig`], its tensor names mapped to Hugging Face names, and the row permutation
//! llama.cpp's converter applies to queries and keys undone.
//!
//! # The query/key permutation
//! `convert_hf_to_gguf.py` stores the `q_proj`/`k_proj` rows of llama-architecture models
//! permuted for ggml's RoPE, which rotates adjacent pairs `(2j, 2j+1)` of a head where Hugging
//! Face rotates `(j, j + d/2)` (`rotate_half`): within each head of `d` rows, Hugging Face row
//! `s·d/2 + j` (`s` ∈ {0, 1}, `j` < d/2) is stored at row `2j + s`. We read row `2j + s` back
//! into place `s·d/2 + j`. A row permutation moves whole rows, so it is exact for every
//! quantized format, and the model computed is the file's model with Hugging Face's rotation.
//! qwen2 files use the "neox" rotation, which is Hugging Face's: no permutation.

use std::borrow::Cow;
use std::path::Path;

use anyspec_cpu_kernels::WeightFormat;
use anyspec_gguf::{GgmlType, GgufFile};
use serde_json::{Value, json};

use crate::config::LlamaConfig;
use crate::error::{Error, Result};
use crate::source::{RawMatrix, WeightSource, refuse_unused_layers};

/// Architectures (`general.architecture`) this loader maps.
pub const SUPPORTED_ARCHITECTURES: [&str; 2] = ["llama", "qwen2"];

/// The configuration a GGUF file's metadata describes, validated as a `config.json` would be.
pub(crate) fn config_from_gguf(file: &GgufFile, path: &Path) -> Result<LlamaConfig> {
    let gguf_error = |message: String| Error::Config { path: path.to_owned(), message };
    let arch = file.get_str("general.architecture").map_err(|e| gguf_error(e.to_string()))?.to_owned();
    if !SUPPORTED_ARCHITECTURES.contains(&arch.as_str()) {
        return Err(Error::UnsupportedArchitecture {
            path: path.to_owned(),
            architecture: arch,
            supported: SUPPORTED_ARCHITECTURES.join(", "),
        });
    }
    let key = |name: &str| format!("{arch}.{name}");
    let required = |name: &str| -> Result<u64> { file.get_u64(&key(name)).map_err(|e| gguf_error(e.to_string())) };
    // An absent key takes its default; a present key of the wrong type is an error, never a
    // silent default.
    let optional_u64 = |name: &str| -> Result<Option<u64>> {
        file.get(&key(name)).map(|_| file.get_u64(&key(name)).map_err(|e| gguf_error(e.to_string()))).transpose()
    };
    let optional_f32 = |name: &str| -> Result<Option<f32>> {
        file.get(&key(name)).map(|_| file.get_f32(&key(name)).map_err(|e| gguf_error(e.to_string()))).transpose()
    };

    let hidden = required("embedding_length")?;
    let heads = required("attention.head_count")?;
    let embeddings = file
        .tensor("token_embd.weight")
        .ok_or_else(|| gguf_error("the tensor token_embd.weight (the embedding matrix) is missing".into()))?;
    let vocab = match (optional_u64("vocab_size")?, embeddings.dims.get(1)) {
        (Some(v), _) => v,
        (None, Some(&rows)) => rows,
        (None, None) => return Err(gguf_error("token_embd.weight is not a matrix".into())),
    };
    if file.get(&key("rope.scaling.type")).is_some() || file.tensor("rope_freqs.weight").is_some() {
        let kind = file.get_str(&key("rope.scaling.type")).unwrap_or("llama3 (rope_freqs.weight)");
        if kind != "none" {
            return Err(Error::UnsupportedConfig {
                field: "rope.scaling.type",
                value: kind.to_owned(),
                reason: "RoPE scaling from GGUF metadata is not implemented yet; use the Hugging Face checkpoint",
            });
        }
    }
    if let Some(dims) = optional_u64("rope.dimension_count")?
        // Checked: both come from the file, and a product past u64 is not the head width either.
        && dims.checked_mul(heads) != Some(hidden)
        && file.get(&key("attention.key_length")).is_none()
    {
        return Err(Error::UnsupportedConfig {
            field: "rope.dimension_count",
            value: dims.to_string(),
            reason: "partial rotary embeddings (fewer rotated dimensions than the head width) are not implemented",
        });
    }
    let eos = file.get_u64("tokenizer.ggml.eos_token_id").ok();
    if eos.is_none() {
        tracing::warn!(
            "{}: the metadata names no end-of-sequence token (tokenizer.ggml.eos_token_id); generation stops \
             only at the token limit",
            path.display()
        );
    }
    let bos = file.get_u64("tokenizer.ggml.bos_token_id").ok();
    let mut config = json!({
        "model_type": arch,
        "vocab_size": vocab,
        "hidden_size": hidden,
        "intermediate_size": required("feed_forward_length")?,
        "num_hidden_layers": required("block_count")?,
        "num_attention_heads": heads,
        "num_key_value_heads": optional_u64("attention.head_count_kv")?.unwrap_or(heads),
        "rms_norm_eps": optional_f32("attention.layer_norm_rms_epsilon")?.map_or(1e-5, f64::from),
        "rope_theta": optional_f32("rope.freq_base")?.map_or(10_000.0, f64::from),
        "max_position_embeddings": required("context_length")?,
        "tie_word_embeddings": file.tensor("output.weight").is_none(),
        "eos_token_id": eos,
        "bos_token_id": bos,
    });
    if let Some(head_dim) = optional_u64("attention.key_length")? {
        config["head_dim"] = Value::from(head_dim);
    }
    let config = LlamaConfig::from_json(&config.to_string()).map_err(|err| match err {
        Error::Config { message, .. } => Error::Config { path: path.to_owned(), message },
        other => other,
    })?;
    refuse_unused_layers(file.tensors().iter().map(|t| t.name.as_str()), &["blk."], config.num_layers, path)?;
    Ok(config)
}

/// A GGUF file's tensors under Hugging Face names.
///
/// Weight matrices are read with positioned reads (`pread`) rather than through the memory map:
/// the engines keep their own repacked copy, and pages touched through a map would count in the
/// process's resident memory on top of it until the map is dropped (the peak of a load would be
/// twice the file).
pub(crate) struct GgufWeights<'a> {
    file: &'a GgufFile,
    reader: std::fs::File,
    path: &'a Path,
    config: &'a LlamaConfig,
    /// Whether query/key rows are stored permuted (llama architecture).
    permuted: bool,
}

impl<'a> GgufWeights<'a> {
    pub(crate) fn open(file: &'a GgufFile, path: &'a Path, config: &'a LlamaConfig) -> Result<Self> {
        let reader = std::fs::File::open(path).map_err(|source| Error::Io { path: path.to_owned(), source })?;
        Ok(GgufWeights { file, reader, path, config, permuted: config.model_type == "llama" })
    }

    /// The GGUF name of a Hugging Face tensor name, and whether its rows are permuted (with the
    /// head count of the permutation).
    fn gguf_name(&self, name: &str) -> Option<(String, Option<usize>)> {
        let name = name.strip_prefix("model.").unwrap_or(name);
        let simple = match name {
            "embed_tokens.weight" => Some("token_embd.weight"),
            "norm.weight" => Some("output_norm.weight"),
            "lm_head.weight" => Some("output.weight"),
            _ => None,
        };
        if let Some(simple) = simple {
            return Some((simple.to_owned(), None));
        }
        let rest = name.strip_prefix("layers.")?;
        let (layer, tensor) = rest.split_once('.')?;
        let layer: usize = layer.parse().ok()?;
        let (gguf, heads) = match tensor {
            "input_layernorm.weight" => ("attn_norm.weight", None),
            "post_attention_layernorm.weight" => ("ffn_norm.weight", None),
            "self_attn.q_proj.weight" => ("attn_q.weight", Some(self.config.num_heads)),
            "self_attn.k_proj.weight" => ("attn_k.weight", Some(self.config.num_kv_heads)),
            "self_attn.v_proj.weight" => ("attn_v.weight", None),
            "self_attn.o_proj.weight" => ("attn_output.weight", None),
            "self_attn.q_proj.bias" => ("attn_q.bias", Some(self.config.num_heads)),
            "self_attn.k_proj.bias" => ("attn_k.bias", Some(self.config.num_kv_heads)),
            "self_attn.v_proj.bias" => ("attn_v.bias", None),
            "self_attn.o_proj.bias" => ("attn_output.bias", None),
            "mlp.gate_proj.weight" => ("ffn_gate.weight", None),
            "mlp.up_proj.weight" => ("ffn_up.weight", None),
            "mlp.down_proj.weight" => ("ffn_down.weight", None),
            _ => return None,
        };
        let heads = if self.permuted { heads } else { None };
        Some((format!("blk.{layer}.{gguf}"), heads))
    }

    fn lookup(&self, name: &str, shape: &[usize]) -> Result<(&'a anyspec_gguf::TensorInfo, Option<usize>)> {
        let missing = || Error::MissingTensor { tensor: name.to_owned(), expected: shape.to_vec() };
        let (gguf, heads) = self.gguf_name(name).ok_or_else(missing)?;
        let info = self.file.tensor(&gguf).ok_or_else(|| Error::MissingTensor {
            tensor: format!("{gguf} (Hugging Face {name})"),
            expected: shape.to_vec(),
        })?;
        // GGUF lists dimensions fastest first: a [rows, cols] matrix is [cols, rows].
        let found: Vec<usize> = info.dims.iter().rev().map(|&d| d as usize).collect();
        if found != shape {
            return Err(Error::ShapeMismatch {
                tensor: format!("{gguf} in {}", self.path.display()),
                expected: shape.to_vec(),
                found,
            });
        }
        Ok((info, heads))
    }

    fn format(&self, info: &anyspec_gguf::TensorInfo) -> Result<WeightFormat> {
        weight_format(info.ggml_type).ok_or_else(|| Error::UnsupportedDtype {
            tensor: format!("{} in {}", info.name, self.path.display()),
            dtype: format!(
                "GGML type {}; supported: {}",
                info.ggml_type.name(),
                SUPPORTED_TYPES.iter().map(|t| t.name()).collect::<Vec<_>>().join(", ")
            ),
        })
    }
}

/// The GGML types the kernels compute with.
const SUPPORTED_TYPES: [GgmlType; 8] = [
    GgmlType::F32,
    GgmlType::F16,
    GgmlType::Bf16,
    GgmlType::Q8_0,
    GgmlType::Q4_0,
    GgmlType::Q4_1,
    GgmlType::Q4K,
    GgmlType::Q6K,
];

fn weight_format(ggml: GgmlType) -> Option<WeightFormat> {
    Some(match ggml {
        GgmlType::F32 => WeightFormat::F32,
        GgmlType::F16 => WeightFormat::F16,
        GgmlType::Bf16 => WeightFormat::BF16,
        GgmlType::Q8_0 => WeightFormat::Q8_0,
        GgmlType::Q4_0 => WeightFormat::Q4_0,
        GgmlType::Q4_1 => WeightFormat::Q4_1,
        GgmlType::Q4K => WeightFormat::Q4_K,
        GgmlType::Q6K => WeightFormat::Q6_K,
        _ => return None,
    })
}

/// The stored row of each Hugging Face row of a permuted query/key matrix (`rows` = heads · d).
pub(crate) fn unpermute_order(rows: usize, heads: usize) -> Vec<usize> {
    let head_dim = rows / heads;
    let half = head_dim / 2;
    (0..rows)
        .map(|i| {
            let (head, within) = (i / head_dim, i % head_dim);
            let (s, j) = (within / half, within % half);
            head * head_dim + 2 * j + s
        })
        .collect()
}

impl WeightSource for GgufWeights<'_> {
    fn contains(&self, name: &str) -> bool {
        self.gguf_name(name).is_some_and(|(gguf, _)| self.file.tensor(&gguf).is_some())
    }

    fn read_f32(&mut self, name: &str, shape: &[usize]) -> Result<Vec<f32>> {
        let (info, heads) = self.lookup(name, shape)?;
        let format = self.format(info)?;
        let count: usize = shape.iter().product();
        let mut values = vec![0.0f32; count];
        anyspec_cpu_kernels::dequantize(format, self.file.tensor_data(info), &mut values)?;
        Ok(match heads {
            None => values,
            Some(heads) => {
                let rows = shape[0];
                let cols = count / rows;
                let order = unpermute_order(rows, heads);
                order.iter().flat_map(|&source| values[source * cols..(source + 1) * cols].iter().copied()).collect()
            }
        })
    }

    fn read_raw(&mut self, name: &str, rows: usize, cols: usize) -> Result<RawMatrix<'_>> {
        use std::os::unix::fs::FileExt;
        let (info, heads) = self.lookup(name, &[rows, cols])?;
        let format = self.format(info)?;
        // The parser checked that the tensor lies inside the file.
        let mut bytes = vec![0u8; info.byte_len() as usize];
        self.reader
            .read_exact_at(&mut bytes, info.offset)
            .map_err(|source| Error::Io { path: self.path.to_owned(), source })?;
        Ok(RawMatrix {
            format,
            rows,
            cols,
            bytes: Cow::Owned(bytes),
            permutation: heads.map(|heads| unpermute_order(rows, heads)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unpermuting_inverts_the_converters_permutation() {
        // convert_hf_to_gguf.py: w.reshape(heads, 2, d/2, …).swapaxes(1, 2).reshape(…).
        let (heads, head_dim) = (3, 8);
        let rows = heads * head_dim;
        let hf: Vec<usize> = (0..rows).collect();
        let mut stored = vec![0; rows];
        for h in 0..heads {
            for s in 0..2 {
                for j in 0..head_dim / 2 {
                    stored[h * head_dim + j * 2 + s] = hf[h * head_dim + s * head_dim / 2 + j];
                }
            }
        }
        let order = unpermute_order(rows, heads);
        let back: Vec<usize> = order.iter().map(|&i| stored[i]).collect();
        assert_eq!(back, hf);
        assert_ne!(stored, hf, "the permutation must move rows for the test to mean anything");
    }
}
