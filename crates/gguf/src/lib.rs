//! GGUF files read in place: metadata, tensor infos and tensor bytes from a memory map, the
//! tokenizer built from the metadata, and a writer for test fixtures.
//!
//! GGUF is the single-file model format of llama.cpp and ggml (specification:
//! <https://github.com/ggml-org/ggml/blob/master/docs/gguf.md>). A file holds a header,
//! key-value metadata (the architecture's hyper-parameters, the tokenizer's vocabulary), a table
//! of tensor infos (name, dims, [`GgmlType`], offset), then the tensor data, aligned.
//!
//! # Types
//!
//! - [`GgufFile`] opens a file ([`GgufFile::open`], memory-mapped) or bytes
//!   ([`GgufFile::from_bytes`]), checks every structure against the file's length, and hands
//!   out metadata ([`GgufFile::get`] and the typed getters such as [`GgufFile::get_u64`]),
//!   [`TensorInfo`]s and tensor bytes ([`GgufFile::tensor_data`], a slice of the map: no copy).
//! - [`GgmlType`] knows the id, name and block geometry of every ggml type, so the size of every
//!   tensor is checked even when anyspec cannot compute with its type.
//! - [`MetadataValue`] is one metadata value.
//! - [`GgufWriter`] writes GGUF v3 files for tests and fixtures.
//! - [`tokenizer::tokenizer_from_gguf`] builds the model's tokenizer (a Hugging Face
//!   [`tokenizers::Tokenizer`]) from the `tokenizer.*` metadata, and
//!   [`tokenizer::apply_chat_template`] renders a one-turn chat prompt.
//! - [`check_bytes`] parses and validates everything without a file: the entry point for fuzzing.
//!
//! # Example
//!
//! ```
//! use anyspec_gguf::{GgmlType, GgufFile, GgufWriter, MetadataValue};
//!
//! # fn main() -> anyspec_gguf::Result<()> {
//! let mut writer = GgufWriter::new();
//! writer
//!     .metadata("general.architecture", "llama".into())
//!     .metadata("llama.block_count", MetadataValue::U32(2));
//! // A 2 x 3 f32 matrix: ggml order puts the row length (3) first.
//! let values: Vec<u8> = (0..6).flat_map(|i| (i as f32).to_le_bytes()).collect();
//! writer.tensor("w", &[3, 2], GgmlType::F32, values)?;
//!
//! let file = GgufFile::from_bytes(writer.to_bytes())?;
//! assert_eq!(file.version(), 3);
//! assert_eq!(file.architecture()?, "llama");
//! assert_eq!(file.get_u64("llama.block_count")?, 2);
//! let w = file.tensor("w").expect("written above");
//! assert_eq!((w.dims.as_slice(), w.byte_len()), (&[3, 2][..], 24));
//! assert_eq!(&file.tensor_data(w)[4..8], &1f32.to_le_bytes());
//! // Errors name the key and the types.
//! let err = file.get_str("llama.block_count").unwrap_err();
//! assert!(err.to_string().contains("should be a string, found u32"));
//! # Ok(())
//! # }
//! ```
//!
//! # The tokenizer
//!
//! ```
//! use anyspec_gguf::tokenizer::tokenizer_from_gguf;
//! use anyspec_gguf::{GgufFile, GgufWriter, MetadataValue};
//!
//! # fn main() -> anyspec_gguf::Result<()> {
//! let mut writer = GgufWriter::new();
//! writer
//!     .metadata("tokenizer.ggml.model", "gpt2".into())
//!     .metadata("tokenizer.ggml.pre", "smollm".into())
//!     .metadata("tokenizer.ggml.tokens", vec!["<|im_start|>", "h", "i", "hi"].into())
//!     // Token type 3 (control) makes "<|im_start|>" one token wherever it appears.
//!     .metadata("tokenizer.ggml.token_type", MetadataValue::Array(
//!         [3, 1, 1, 1].map(MetadataValue::I32).to_vec(),
//!     ))
//!     .metadata("tokenizer.ggml.merges", vec!["h i"].into());
//! let file = GgufFile::from_bytes(writer.to_bytes())?;
//! let tok = tokenizer_from_gguf(&file)?;
//! let ids = tok.tokenizer.encode("<|im_start|>hi", false).expect("encodes");
//! assert_eq!(ids.get_ids(), [0, 3]);
//! # Ok(())
//! # }
//! ```
//!
//! # Quirks
//!
//! - Versions 2 and 3 are read; version 1 (u32 counts) and big-endian files are refused.
//! - Tensor offsets in [`TensorInfo`] count from the start of the file, not from the start of
//!   the data section as the file stores them.
//! - Hostile input cannot make the parser panic or allocate without bound: every count and
//!   length is checked against the bytes left before anything is allocated, and arrays nest at
//!   most [`MAX_ARRAY_DEPTH`] deep. Parsed metadata takes at most about 32 bytes of memory per
//!   byte of file (a one-byte array element becomes a [`MetadataValue`]); tensor data is never
//!   copied.
//! - The tokenizer of a `gpt2` vocabulary depends on `tokenizer.ggml.pre`, a name llama.cpp
//!   maps to regular expressions; [`tokenizer::pre_tokenizer_for`] lists the names this crate
//!   knows. An unknown name gets llama.cpp's default, which may split text differently from the
//!   model's own tokenizer.
//! - A mapped file must not be modified in place while open (see [`GgufFile::open`]).

mod error;
mod file;
mod ggml_type;
mod parse;
mod storage;
mod tensor;
pub mod tokenizer;
mod value;
mod writer;

pub use error::{Error, Result};
pub use file::GgufFile;
pub use ggml_type::GgmlType;
pub use parse::{DEFAULT_ALIGNMENT, MAX_DIMS};
pub use tensor::TensorInfo;
pub use value::{MAX_ARRAY_DEPTH, MetadataValue};
pub use writer::GgufWriter;

/// Parses and validates GGUF bytes without a file: the header, the metadata, the tensor infos
/// and the bounds of every tensor's data. The entry point for fuzzing.
///
/// When the metadata describes a tokenizer (`tokenizer.ggml.model`), the tokenizer is built
/// too, which checks the vocabulary, the merges and the special-token ids.
pub fn check_bytes(bytes: &[u8]) -> Result<()> {
    let parsed = parse::parse(bytes, file::IN_MEMORY)?;
    if parsed.key_index.contains_key("tokenizer.ggml.model") {
        // Only the tokenizer check needs a `GgufFile`, which owns its bytes.
        let file = GgufFile::from_bytes(bytes.to_vec())?;
        tokenizer::tokenizer_from_gguf(&file)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    /// The loader shares one file between threads.
    #[test]
    fn gguf_file_is_send_and_sync() {
        fn check<T: Send + Sync>() {}
        check::<super::GgufFile>();
        check::<super::tokenizer::GgufTokenizer>();
    }
}
