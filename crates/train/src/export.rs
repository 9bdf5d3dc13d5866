//! Writing a trained model as a Hugging Face checkpoint directory: `config.json`,
//! `model.safetensors` (PyTorch's `[out, in]` layout, HF tensor names) and `tokenizer.json`,
//! loadable by `anyspec_models::Checkpoint` and by `transformers.AutoModelForCausalLM`.

use std::collections::HashMap;
use std::io::Write;
use std::path::Path;

use anyspec_core::artifact::write_atomically;
use safetensors::{Dtype, tensor::TensorView};
use tokenizers::Tokenizer;

use crate::error::{Error, Result};
use crate::model::{Kind, TrainableLlama, host};

/// The dtype weights are stored in. The loaders convert to f32 on load; f16 halves the size of
/// the committed demo assets at a cost far below the models' own error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoredDtype {
    /// 32-bit floats: reloads bit for bit.
    F32,
    /// IEEE half precision.
    F16,
}

/// Writes `model` with `tokenizer` into `dir` (created if missing). `metadata` goes into the
/// safetensors header (training settings, corpus), next to `"format": "pt"` which transformers
/// expects.
pub fn save_checkpoint(
    model: &TrainableLlama,
    tokenizer: &Tokenizer,
    dir: &Path,
    dtype: StoredDtype,
    metadata: &[(&str, String)],
) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(Error::io(dir))?;
    let spec = model.spec();
    let tokenizer_vocab = tokenizer.get_vocab_size(true);
    if tokenizer_vocab > spec.vocab_size {
        return Err(Error::InvalidSetting {
            field: "vocab_size",
            value: spec.vocab_size.to_string(),
            reason: "the tokenizer has more ids than the model has embedding rows; build the model with the tokenizer's vocabulary size",
        });
    }

    let mut stored: Vec<(String, Vec<usize>, Vec<u8>)> = Vec::with_capacity(model.params.len());
    for param in &model.params {
        let [rows, cols] = param.value.dims();
        let values = host(param.value.clone(), &param.name)?;
        let (shape, values) = match param.kind {
            Kind::Embedding => (vec![rows, cols], values),
            Kind::Linear => (vec![cols, rows], transpose(&values, rows, cols)),
            Kind::Norm => (vec![rows * cols], values),
        };
        let bytes: Vec<u8> = match dtype {
            StoredDtype::F32 => values.iter().flat_map(|v| v.to_le_bytes()).collect(),
            StoredDtype::F16 => values.iter().flat_map(|&v| half::f16::from_f32(v).to_le_bytes()).collect(),
        };
        stored.push((param.name.clone(), shape, bytes));
    }
    let st_dtype = match dtype {
        StoredDtype::F32 => Dtype::F32,
        StoredDtype::F16 => Dtype::F16,
    };
    let weights_path = dir.join("model.safetensors");
    let views = stored
        .iter()
        .map(|(name, shape, bytes)| {
            TensorView::new(st_dtype, shape.clone(), bytes)
                .map(|view| (name.clone(), view))
                .map_err(|e| Error::Serialize { path: weights_path.clone(), message: e.to_string() })
        })
        .collect::<Result<Vec<_>>>()?;
    let mut info: HashMap<String, String> = metadata.iter().map(|(k, v)| ((*k).to_owned(), v.clone())).collect();
    info.insert("format".into(), "pt".into());
    let bytes = safetensors::serialize(views, Some(info))
        .map_err(|e| Error::Serialize { path: weights_path.clone(), message: e.to_string() })?;
    write_atomically(&weights_path, |w| w.write_all(&bytes)).map_err(Error::io(&weights_path))?;

    let mut config = spec.hf_config();
    config["torch_dtype"] = match dtype {
        StoredDtype::F32 => "float32",
        StoredDtype::F16 => "float16",
    }
    .into();
    write_json(&dir.join("config.json"), &config)?;

    let tokenizer_json = tokenizer.to_string(true).map_err(Error::tokenizer("serialising"))?;
    let tokenizer_path = dir.join("tokenizer.json");
    write_atomically(&tokenizer_path, |w| w.write_all(tokenizer_json.as_bytes()))
        .map_err(Error::io(&tokenizer_path))?;
    Ok(())
}

/// Writes pretty JSON atomically.
pub(crate) fn write_json(path: &Path, value: &serde_json::Value) -> Result<()> {
    let text = serde_json::to_string_pretty(value)
        .map_err(|e| Error::Serialize { path: path.to_owned(), message: e.to_string() })?;
    write_atomically(path, |w| w.write_all(text.as_bytes())).map_err(Error::io(path))
}

/// `[rows, cols]` row-major → `[cols, rows]` row-major.
pub(crate) fn transpose(values: &[f32], rows: usize, cols: usize) -> Vec<f32> {
    let mut out = vec![0.0; values.len()];
    for r in 0..rows {
        for c in 0..cols {
            out[c * rows + r] = values[r * cols + c];
        }
    }
    out
}
