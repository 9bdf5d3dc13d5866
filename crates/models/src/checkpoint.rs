//! A Hugging Face checkpoint directory: `config.json`, safetensors weights, `tokenizer.json`.

use std::path::{Path, PathBuf};

use burn::tensor::Device;

use crate::config::LlamaConfig;
use crate::error::{Error, Result};
use crate::llama::Llama;
use crate::tokenizer::TextTokenizer;

/// A checkpoint directory whose configuration has been read and validated.
#[derive(Clone, Debug)]
pub struct Checkpoint {
    dir: PathBuf,
    config: LlamaConfig,
}

impl Checkpoint {
    /// Reads `dir/config.json`; weights are read by [`Checkpoint::load_model`].
    pub fn open(dir: impl AsRef<Path>) -> Result<Self> {
        let dir = dir.as_ref().to_owned();
        let config_path = dir.join("config.json");
        if !config_path.is_file() {
            return Err(Error::Io {
                path: config_path,
                source: std::io::Error::new(
                    std::io::ErrorKind::NotFound,
                    "not a Hugging Face checkpoint directory (config.json is missing)",
                ),
            });
        }
        let config = LlamaConfig::from_file(&config_path)?;
        Ok(Checkpoint { dir, config })
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The validated configuration.
    pub fn config(&self) -> &LlamaConfig {
        &self.config
    }

    /// Loads the weights onto `device`.
    pub fn load_model(&self, device: &Device) -> Result<Llama> {
        Llama::load(&self.dir, self.config.clone(), device)
    }

    /// Loads `tokenizer.json`.
    pub fn tokenizer(&self) -> Result<TextTokenizer> {
        TextTokenizer::from_file(&self.dir.join("tokenizer.json"))
    }
}
