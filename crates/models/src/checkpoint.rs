//! A model checkpoint: a Hugging Face directory (`config.json`, safetensors weights,
//! `tokenizer.json`) or a single GGUF file (metadata, tensors and tokenizer in one).

use std::path::{Path, PathBuf};

use anyspec_gguf::GgufFile;
use burn::tensor::Device;

use crate::config::LlamaConfig;
use crate::error::{Error, Result};
use crate::gguf::{GgufWeights, config_from_gguf};
use crate::model::{Llama, LoadOptions};
use crate::source::refuse_unused_layers;
use crate::tokenizer::TextTokenizer;
use crate::weights::WeightFiles;

/// How the checkpoint is stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CheckpointFormat {
    /// A Hugging Face directory with `config.json` and safetensors weights.
    HuggingFace,
    /// A GGUF file (llama.cpp's format): quantized weights stay quantized on the native engine.
    Gguf,
}

/// A checkpoint whose configuration has been read and validated.
#[derive(Clone, Debug)]
pub struct Checkpoint {
    path: PathBuf,
    format: CheckpointFormat,
    config: LlamaConfig,
    /// The GGUF chat template (`tokenizer.chat_template`), if any.
    chat_template: Option<String>,
}

impl Checkpoint {
    /// Reads the configuration of a checkpoint directory (`DIR/config.json`) or of a `.gguf`
    /// file; weights are read by [`Checkpoint::load_model`].
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref().to_owned();
        if path.is_file() {
            if !is_gguf(&path)? {
                return Err(Error::NotAModel { path });
            }
            let file = GgufFile::open(&path)?;
            let config = config_from_gguf(&file, &path)?;
            let chat_template = file.get_str("tokenizer.chat_template").ok().map(str::to_owned);
            return Ok(Checkpoint { path, format: CheckpointFormat::Gguf, config, chat_template });
        }
        let config_path = path.join("config.json");
        if !config_path.is_file() {
            return Err(Error::Io {
                path: config_path,
                source: std::io::Error::new(
                    std::io::ErrorKind::NotFound,
                    "not a Hugging Face checkpoint directory (config.json is missing) nor a .gguf file",
                ),
            });
        }
        let mut config = LlamaConfig::from_file(&config_path)?;
        if config.eos_token_ids.is_empty() {
            config.eos_token_ids = tokenizer_eos(&path, config.vocab_size).into_iter().collect();
        }
        Ok(Checkpoint { path, format: CheckpointFormat::HuggingFace, config, chat_template: None })
    }

    /// The directory or GGUF file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The directory or GGUF file (kept for callers written before GGUF support).
    pub fn dir(&self) -> &Path {
        &self.path
    }

    /// How the checkpoint is stored.
    pub fn format(&self) -> CheckpointFormat {
        self.format
    }

    /// The validated configuration.
    pub fn config(&self) -> &LlamaConfig {
        &self.config
    }

    /// The chat template stored in a GGUF file, if any.
    pub fn chat_template(&self) -> Option<&str> {
        self.chat_template.as_deref()
    }

    /// `user` (and `system`) rendered with the checkpoint's chat template, ending where the
    /// assistant's reply begins: the GGUF file's `tokenizer.chat_template`, or a directory's
    /// `tokenizer_config.json` `chat_template`. ChatML, Llama 3 and Llama 2 templates are
    /// recognised; others are refused by name.
    pub fn chat_prompt(&self, system: Option<&str>, user: &str) -> Result<String> {
        let template = match self.format {
            CheckpointFormat::Gguf => self.chat_template.clone(),
            CheckpointFormat::HuggingFace => {
                let path = self.path.join("tokenizer_config.json");
                std::fs::read_to_string(&path).ok().and_then(|text| {
                    serde_json::from_str::<serde_json::Value>(&text)
                        .ok()?
                        .get("chat_template")?
                        .as_str()
                        .map(str::to_owned)
                })
            }
        };
        let template = template.ok_or_else(|| {
            Error::InvalidArgument(format!(
                "{} has no chat template (in its GGUF metadata or tokenizer_config.json); use a chat model, \
                 or give the text as it is, without a template",
                self.path.display()
            ))
        })?;
        anyspec_gguf::tokenizer::apply_chat_template(&template, system, user)
            .map_err(|e| Error::InvalidArgument(format!("{}: {e}", self.path.display())))
    }

    /// Loads the weights onto `device` with the default [`LoadOptions`] (the native engine on
    /// the CPU).
    pub fn load_model(&self, device: &Device) -> Result<Llama> {
        self.load_model_with(device, &LoadOptions::default())
    }

    /// Loads the weights onto `device` with the chosen engine, kernel and threads.
    pub fn load_model_with(&self, device: &Device, options: &LoadOptions) -> Result<Llama> {
        match self.format {
            CheckpointFormat::HuggingFace => {
                let mut weights = WeightFiles::open(&self.path)?;
                refuse_unused_layers(weights.names(), &["model.layers."], self.config.num_layers, &self.path)?;
                Llama::load_from(&mut weights, self.config.clone(), device, options)
            }
            CheckpointFormat::Gguf => {
                // The map lives only while the weights are read: the engines hold their own
                // (repacked) copies, so the file's pages are released after loading.
                let file = GgufFile::open(&self.path)?;
                let mut weights = GgufWeights::open(&file, &self.path, &self.config)?;
                Llama::load_from(&mut weights, self.config.clone(), device, options)
            }
        }
    }

    /// One tensor by its Hugging Face name (`model.layers.0.self_attn.q_proj.weight`), as `f32`
    /// in the Hugging Face layout, checked to have `shape`: quantized GGUF tensors are
    /// dequantized and the query/key permutation undone, exactly as the burn engine loads them.
    pub fn tensor_f32(&self, name: &str, shape: &[usize]) -> Result<Vec<f32>> {
        use crate::source::WeightSource;
        match self.format {
            CheckpointFormat::HuggingFace => WeightFiles::open(&self.path)?.read_f32(name, shape),
            CheckpointFormat::Gguf => {
                let file = GgufFile::open(&self.path)?;
                GgufWeights::open(&file, &self.path, &self.config)?.read_f32(name, shape)
            }
        }
    }

    /// Loads the tokenizer: `tokenizer.json` of a directory, or the one a GGUF file's metadata
    /// describes. Either is refused when it has ids beyond the model's embedding rows; one with
    /// fewer ids is accepted, and an id it cannot decode is refused when decoded (see
    /// [`TextTokenizer::decode`] for why).
    pub fn tokenizer(&self) -> Result<TextTokenizer> {
        match self.format {
            CheckpointFormat::HuggingFace => {
                let tokenizer = TextTokenizer::from_file(&self.path.join("tokenizer.json"))?;
                tokenizer.check_fits(self.config.vocab_size)?;
                Ok(tokenizer)
            }
            CheckpointFormat::Gguf => {
                let file = GgufFile::open(&self.path)?;
                TextTokenizer::from_gguf(&file, &self.path, self.config.vocab_size)
            }
        }
    }
}

/// The end-of-sequence id of a checkpoint directory's tokenizer, for a `config.json` without
/// `eos_token_id` (generation would otherwise run to the token limit past the real end): the
/// `eos_token` of `tokenizer_config.json`, looked up in `tokenizer.json`. Says on the log which
/// token it took, or that there is none.
fn tokenizer_eos(dir: &Path, vocab_size: usize) -> Option<u32> {
    let found = (|| {
        let text = std::fs::read_to_string(dir.join("tokenizer_config.json")).ok()?;
        let config: serde_json::Value = serde_json::from_str(&text).ok()?;
        let eos = config.get("eos_token")?;
        let name = eos.as_str().or_else(|| eos.get("content")?.as_str())?.to_owned();
        let tokenizer =
            crate::tokenizer::parse_tokenizer_json(&std::fs::read(dir.join("tokenizer.json")).ok()?).ok()?;
        let id = tokenizer.token_to_id(&name).filter(|&id| (id as usize) < vocab_size)?;
        Some((name, id))
    })();
    match &found {
        Some((name, id)) => tracing::warn!(
            "{}: config.json has no eos_token_id; generation stops at the tokenizer's end-of-sequence token \
             {name:?} (id {id}, the eos_token of tokenizer_config.json)",
            dir.display()
        ),
        None => tracing::warn!(
            "{}: config.json has no eos_token_id and tokenizer_config.json names no end-of-sequence token of the \
             model; generation stops only at the token limit",
            dir.display()
        ),
    }
    found.map(|(_, id)| id)
}

/// Whether `path` starts with the GGUF magic (so a renamed file is still recognised).
fn is_gguf(path: &Path) -> Result<bool> {
    use std::io::Read;
    let mut magic = [0u8; 4];
    let mut file = std::fs::File::open(path).map_err(|source| Error::Io { path: path.to_owned(), source })?;
    let read = file.read(&mut magic).map_err(|source| Error::Io { path: path.to_owned(), source })?;
    Ok(read == 4 && &magic == b"GGUF")
}
