//! The one error type of `anyspec-models`.

use std::path::PathBuf;

/// Everything that can go wrong while loading or running a model.
///
/// Messages are lowercase, name the offending file, tensor or value, and say how to fix it.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file could not be read.
    #[error("cannot read {path}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// `config.json` (or a shard index) is not valid JSON of the expected form.
    #[error("{path} is not a valid Hugging Face model configuration: {message}")]
    Config {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// The checkpoint's `model_type` is not a Llama-family decoder.
    #[error(
        "model_type {model_type:?} is not supported; supported: llama, mistral, qwen2 \
         (Llama 2/3, TinyLlama, Mistral, Qwen2)"
    )]
    UnsupportedModelType {
        /// The `model_type` from `config.json`.
        model_type: String,
    },
    /// A configuration value is outside what the architecture allows.
    #[error("config.json: {field} = {value} is not supported: {reason}")]
    UnsupportedConfig {
        /// The field, as spelled in `config.json`.
        field: &'static str,
        /// Its value.
        value: String,
        /// Why it cannot be used.
        reason: &'static str,
    },
    /// A file given as a model is neither kind of checkpoint.
    #[error(
        "{path} is neither a Hugging Face checkpoint directory (with config.json) nor a GGUF file \
         (.gguf, starting with the bytes GGUF); point to one of those"
    )]
    NotAModel {
        /// The file.
        path: PathBuf,
    },
    /// A GGUF file describes an architecture we do not map.
    #[error("{path}: architecture {architecture:?} is not supported; supported: {supported}")]
    UnsupportedArchitecture {
        /// The file.
        path: PathBuf,
        /// `general.architecture`.
        architecture: String,
        /// The architectures we map.
        supported: String,
    },
    /// A GGUF file could not be read.
    #[error(transparent)]
    Gguf(#[from] anyspec_gguf::Error),
    /// A CPU kernel refused its input (a weight matrix of the wrong size, say).
    #[error(transparent)]
    CpuKernels(#[from] anyspec_cpu_kernels::Error),
    /// No weights were found in the checkpoint directory.
    #[error(
        "no weights in {dir}: expected model.safetensors or model.safetensors.index.json \
         (PyTorch .bin checkpoints must be converted to safetensors first)"
    )]
    NoWeights {
        /// The checkpoint directory.
        dir: PathBuf,
    },
    /// A safetensors file is corrupt or truncated.
    #[error("{path} is not a valid safetensors file: {message}")]
    Safetensors {
        /// The file.
        path: PathBuf,
        /// The parser's message.
        message: String,
    },
    /// A tensor the architecture needs is absent from the checkpoint.
    #[error("tensor {tensor} is missing from the checkpoint (expected shape {expected:?})")]
    MissingTensor {
        /// The checkpoint name of the tensor.
        tensor: String,
        /// The shape the configuration implies.
        expected: Vec<usize>,
    },
    /// A tensor has another shape than the configuration implies.
    #[error(
        "tensor {tensor} has shape {found:?} but config.json implies {expected:?}; \
         the weights do not belong to this configuration"
    )]
    ShapeMismatch {
        /// The checkpoint name of the tensor.
        tensor: String,
        /// The shape the configuration implies.
        expected: Vec<usize>,
        /// The shape in the file.
        found: Vec<usize>,
    },
    /// A tensor is stored in a dtype we do not convert.
    #[error("tensor {tensor} is stored as {dtype}; supported: F32, F16, BF16")]
    UnsupportedDtype {
        /// The checkpoint name of the tensor.
        tensor: String,
        /// The dtype in the file.
        dtype: String,
    },
    /// `tokenizer.json` is missing or invalid.
    #[error("cannot load the tokenizer {path}: {message}")]
    Tokenizer {
        /// The file.
        path: PathBuf,
        /// The cause.
        message: String,
    },
    /// An id to decode has no token in the tokenizer (a model with more embedding rows than the
    /// tokenizer has tokens produced one of the extra ids).
    #[error(
        "token id {token} has no token in the tokenizer {path} (its ids end at {id_end}), so it cannot be \
         decoded into text; the model has more ids than the tokenizer: check that they belong together"
    )]
    UndecodableToken {
        /// The id.
        token: u32,
        /// The tokenizer's file.
        path: PathBuf,
        /// One past the tokenizer's largest id.
        id_end: usize,
    },
    /// A checkpoint's file holds tensors the configuration leaves unused (layers beyond
    /// `num_hidden_layers`): the configuration does not describe these weights.
    #[error(
        "{path} holds tensors that num_hidden_layers = {num_layers} leaves unused: {names}; the configuration \
         does not describe these weights (set num_hidden_layers to the number of layers in the file)"
    )]
    UnusedTensors {
        /// The weights file (or checkpoint directory).
        path: PathBuf,
        /// `num_hidden_layers`.
        num_layers: usize,
        /// The first unused tensor names, and how many more.
        names: String,
    },
    /// Encoding or decoding text failed.
    #[error("the tokenizer failed: {message}")]
    Tokenization {
        /// The cause.
        message: String,
    },
    /// The device name is unknown.
    #[error("unknown device {name:?}; choose cpu, wgpu or cuda")]
    UnknownDevice {
        /// What was asked for.
        name: String,
    },
    /// The device needs a cargo feature this build lacks.
    #[error(
        "device {name:?} is not compiled into this build; rebuild with `--features {feature}` \
         (or use --device cpu)"
    )]
    DeviceNotCompiled {
        /// The device that was asked for.
        name: &'static str,
        /// The cargo feature that provides it.
        feature: &'static str,
    },
    /// A token id is outside the model's vocabulary.
    #[error("token id {token} is outside the model's vocabulary of {vocab_size} tokens")]
    TokenOutOfRange {
        /// The token id.
        token: u32,
        /// The vocabulary size.
        vocab_size: usize,
    },
    /// A forward pass would run past the model's context window.
    #[error(
        "the sequence would reach {needed} tokens but the model's context window holds {max}; \
         shorten the prompt or generate fewer tokens"
    )]
    ContextFull {
        /// Tokens the pass needs.
        needed: usize,
        /// `max_position_embeddings`.
        max: usize,
    },
    /// A call violated the API's contract (for example an empty token slice).
    #[error("{0}")]
    InvalidArgument(String),
    /// The tensor backend failed (reading results back from a device).
    #[error("the {device} backend failed: {message}")]
    Backend {
        /// The device.
        device: String,
        /// The backend's message.
        message: String,
    },
    /// A speculative-decoding rule rejected its input.
    #[error(transparent)]
    Core(#[from] anyspec_core::Error),
    /// Device-side verification failed.
    #[error(transparent)]
    Kernels(#[from] anyspec_kernels::Error),
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl From<Error> for anyspec_core::Error {
    fn from(err: Error) -> Self {
        match err {
            Error::Core(inner) => inner,
            other => anyspec_core::Error::Target(Box::new(other)),
        }
    }
}
