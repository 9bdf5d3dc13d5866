//! [`GgufFile`]: a parsed GGUF file whose tensor data stays in place.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::parse::{Parsed, parse};
use crate::storage::Storage;
use crate::tensor::TensorInfo;
use crate::value::MetadataValue;

/// How errors name bytes that did not come from a file.
pub(crate) const IN_MEMORY: &str = "the GGUF bytes";

/// A GGUF file: its metadata and tensor infos, parsed and checked, and its bytes, memory-mapped
/// (or owned, for [`from_bytes`](Self::from_bytes)).
///
/// Opening checks every structure against the file's length: the tensor data of every
/// [`TensorInfo`] lies inside the file, aligned, without overlaps, so
/// [`tensor_data`](Self::tensor_data) cannot fail for the file's own infos.
#[derive(Debug)]
pub struct GgufFile {
    storage: Storage,
    path: Option<PathBuf>,
    parsed: Parsed,
}

impl GgufFile {
    /// Memory-maps `path` and parses the header, metadata and tensor infos (GGUF v2 and v3;
    /// v1 and big-endian files are refused with an error that says so).
    ///
    /// Nothing is copied but the metadata: tensor data is read through the map when asked for.
    /// Like every memory-mapped loader, this assumes the file is not modified in place while it
    /// is open (replace model files by renaming, as [`GgufWriter::write`](crate::GgufWriter::write)
    /// does).
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let storage = Storage::map(path)?;
        let parsed = parse(storage.bytes(), &path.display().to_string())?;
        Ok(GgufFile { storage, path: Some(path.to_path_buf()), parsed })
    }

    /// Parses GGUF bytes held in memory (tests, fuzzing, files fetched into memory).
    pub fn from_bytes(bytes: Vec<u8>) -> Result<Self> {
        let parsed = parse(&bytes, IN_MEMORY)?;
        Ok(GgufFile { storage: Storage::Owned(bytes), path: None, parsed })
    }

    /// The file's path, or `None` for bytes given to [`from_bytes`](Self::from_bytes).
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// How errors name this file: its path, or "the GGUF bytes".
    pub fn label(&self) -> String {
        match &self.path {
            Some(p) => p.display().to_string(),
            None => IN_MEMORY.to_string(),
        }
    }

    /// The GGUF version (2 or 3).
    pub fn version(&self) -> u32 {
        self.parsed.version
    }

    /// The alignment of tensor data (`general.alignment`, 32 when absent).
    pub fn alignment(&self) -> u64 {
        self.parsed.alignment
    }

    /// The offset of the data section from the start of the file.
    pub fn data_offset(&self) -> u64 {
        self.parsed.data_start
    }

    /// The whole file's bytes.
    pub fn bytes(&self) -> &[u8] {
        self.storage.bytes()
    }

    /// The metadata key-value pairs, in file order.
    pub fn metadata(&self) -> &[(String, MetadataValue)] {
        &self.parsed.metadata
    }

    /// The value of metadata key `key`.
    pub fn get(&self, key: &str) -> Option<&MetadataValue> {
        self.parsed.key_index.get(key).map(|&i| &self.parsed.metadata[i].1)
    }

    fn require(&self, key: &str) -> Result<&MetadataValue> {
        self.get(key).ok_or_else(|| Error::MissingKey { file: self.label(), key: key.to_string() })
    }

    fn wrong_type(&self, key: &str, expected: &'static str, found: String) -> Error {
        Error::WrongType { file: self.label(), key: key.to_string(), expected, found }
    }

    /// The string value of `key`.
    pub fn get_str(&self, key: &str) -> Result<&str> {
        let value = self.require(key)?;
        value.as_str().ok_or_else(|| self.wrong_type(key, "a string", value.type_name()))
    }

    /// The value of `key` as a u64: any integer type whose value is not negative.
    pub fn get_u64(&self, key: &str) -> Result<u64> {
        let value = self.require(key)?;
        value.as_u64().ok_or_else(|| self.wrong_type(key, "a non-negative integer", found(value)))
    }

    /// The value of `key` as a u32: any integer type whose value fits.
    pub fn get_u32(&self, key: &str) -> Result<u32> {
        let value = self.require(key)?;
        value
            .as_u64()
            .and_then(|v| u32::try_from(v).ok())
            .ok_or_else(|| self.wrong_type(key, "an integer in 0..=u32::MAX", found(value)))
    }

    /// The value of `key` as a usize: any integer type whose value fits.
    pub fn get_usize(&self, key: &str) -> Result<usize> {
        let value = self.require(key)?;
        value
            .as_u64()
            .and_then(|v| usize::try_from(v).ok())
            .ok_or_else(|| self.wrong_type(key, "an integer in 0..=usize::MAX", found(value)))
    }

    /// The value of `key` as an i64: any integer type whose value fits.
    pub fn get_i64(&self, key: &str) -> Result<i64> {
        let value = self.require(key)?;
        value.as_i64().ok_or_else(|| self.wrong_type(key, "an integer in i64's range", found(value)))
    }

    /// The value of `key` as an f32: an f32, or an f64 rounded to the nearest f32.
    pub fn get_f32(&self, key: &str) -> Result<f32> {
        let value = self.require(key)?;
        value.as_f32().ok_or_else(|| self.wrong_type(key, "a float", value.type_name()))
    }

    /// The bool value of `key`.
    pub fn get_bool(&self, key: &str) -> Result<bool> {
        let value = self.require(key)?;
        value.as_bool().ok_or_else(|| self.wrong_type(key, "a bool", value.type_name()))
    }

    /// The elements of the array value of `key`.
    pub fn get_array(&self, key: &str) -> Result<&[MetadataValue]> {
        let value = self.require(key)?;
        value.as_array().ok_or_else(|| self.wrong_type(key, "an array", value.type_name()))
    }

    /// `general.architecture` (`"llama"`, `"qwen2"`): the prefix of the model's own keys.
    pub fn architecture(&self) -> Result<&str> {
        self.get_str("general.architecture")
    }

    /// The tensor infos, in file order.
    pub fn tensors(&self) -> &[TensorInfo] {
        &self.parsed.tensors
    }

    /// The info of the tensor named `name`.
    pub fn tensor(&self, name: &str) -> Option<&TensorInfo> {
        self.parsed.tensor_index.get(name).map(|&i| &self.parsed.tensors[i])
    }

    /// The tensor's bytes inside the map: exactly `info.byte_len()` bytes for the file's own
    /// infos, which opening checked. An info that does not fit this file (one from another
    /// file, or edited) gives an empty slice.
    pub fn tensor_data(&self, info: &TensorInfo) -> &[u8] {
        let bytes = self.storage.bytes();
        let range = usize::try_from(info.offset).ok().and_then(|start| {
            let len = usize::try_from(info.byte_len()).ok()?;
            Some(start..start.checked_add(len)?)
        });
        range.and_then(|r| bytes.get(r)).unwrap_or(&[])
    }
}

/// A value's type, and its value when it is a number (for out-of-range errors).
fn found(value: &MetadataValue) -> String {
    match value.as_i64() {
        Some(v) => format!("{} {v}", value.type_name()),
        None => match value {
            MetadataValue::U64(v) => format!("u64 {v}"),
            other => other.type_name(),
        },
    }
}
