//! [`GgufWriter`]: writes GGUF v3 files, for tests and fixtures.

use std::collections::HashSet;
use std::io::Write;
use std::path::Path;

use crate::error::{Error, Result};
use crate::ggml_type::GgmlType;
use crate::parse::{DEFAULT_ALIGNMENT, MAGIC, check_shape};
use crate::value::{MAX_ARRAY_DEPTH, MetadataValue, type_id};

/// Builds a GGUF v3 file: metadata in insertion order, then tensors, each aligned to
/// `general.alignment` (a `U32` metadata value; 32 when absent). A `general.alignment` that is
/// not a power-of-two `U32` is written as given, with the data aligned to 32, so that tests can
/// build files a reader must refuse.
///
/// The layout is the one llama.cpp writes: tensor data in the order the tensors were added,
/// each padded to the alignment, so files from this writer open in llama.cpp and gguf-py.
#[derive(Clone, Debug, Default)]
pub struct GgufWriter {
    metadata: Vec<(String, MetadataValue)>,
    tensors: Vec<(String, Vec<u64>, GgmlType, Vec<u8>)>,
    names: HashSet<String>,
    /// The first value [`metadata`](Self::metadata) refused, reported by the fallible methods.
    refused: Option<(String, String)>,
}

impl GgufWriter {
    /// An empty file: no metadata, no tensors.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets metadata key `key` (replacing an earlier value of the same key in its place).
    ///
    /// A value GGUF cannot store (an array whose elements differ in type, or arrays nested
    /// deeper than [`MAX_ARRAY_DEPTH`](crate::MAX_ARRAY_DEPTH)) is left out;
    /// [`try_to_bytes`](Self::try_to_bytes) and [`write`](Self::write) then report it, while
    /// [`to_bytes`](Self::to_bytes) writes the file without it.
    pub fn metadata(&mut self, key: &str, value: MetadataValue) -> &mut Self {
        if let Err(why) = check_value(&value) {
            if self.refused.is_none() {
                self.refused = Some((key.to_string(), why));
            }
            return self;
        }
        match self.metadata.iter_mut().find(|(k, _)| k == key) {
            Some(entry) => entry.1 = value,
            None => self.metadata.push((key.to_string(), value)),
        }
        self
    }

    /// Adds a tensor: `dims` in ggml order (`dims[0]` is the row length), `data` exactly its
    /// bytes. Refuses a duplicate name, a shape ggml cannot hold, and data of the wrong length.
    pub fn tensor(&mut self, name: &str, dims: &[u64], ggml_type: GgmlType, data: Vec<u8>) -> Result<&mut Self> {
        let refuse = |why: String| Error::WriterTensor { tensor: name.to_string(), why };
        check_shape("the writer", name, dims, ggml_type).map_err(|e| refuse(e.to_string()))?;
        let elements = dims.iter().product::<u64>();
        let expected = ggml_type.bytes_for(elements).unwrap_or(u64::MAX);
        if data.len() as u64 != expected {
            return Err(refuse(format!(
                "{} bytes of data given, a {ggml_type} tensor of dims {dims:?} has {expected}",
                data.len()
            )));
        }
        if !self.names.insert(name.to_string()) {
            return Err(refuse("a tensor of that name was already added".to_string()));
        }
        self.tensors.push((name.to_string(), dims.to_vec(), ggml_type, data));
        Ok(self)
    }

    fn alignment(&self) -> u64 {
        match self.metadata.iter().find(|(k, _)| k == "general.alignment") {
            Some((_, MetadataValue::U32(a))) if a.is_power_of_two() => u64::from(*a),
            _ => DEFAULT_ALIGNMENT,
        }
    }

    /// The file's bytes, leaving out any metadata value [`metadata`](Self::metadata) refused.
    pub fn to_bytes(&self) -> Vec<u8> {
        let alignment = self.alignment();
        let mut out = Vec::new();
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&3u32.to_le_bytes());
        out.extend_from_slice(&(self.tensors.len() as u64).to_le_bytes());
        out.extend_from_slice(&(self.metadata.len() as u64).to_le_bytes());
        for (key, value) in &self.metadata {
            put_string(&mut out, key);
            out.extend_from_slice(&value.type_id().to_le_bytes());
            put_value(&mut out, value);
        }
        let mut offset = 0u64;
        let mut offsets = Vec::with_capacity(self.tensors.len());
        for (name, dims, ty, data) in &self.tensors {
            put_string(&mut out, name);
            out.extend_from_slice(&(dims.len() as u32).to_le_bytes());
            for d in dims {
                out.extend_from_slice(&d.to_le_bytes());
            }
            out.extend_from_slice(&ty.id().to_le_bytes());
            out.extend_from_slice(&offset.to_le_bytes());
            offsets.push(offset);
            offset = (offset + data.len() as u64).next_multiple_of(alignment);
        }
        if !self.tensors.is_empty() {
            pad_to(&mut out, alignment);
            let data_start = out.len() as u64;
            for ((_, _, _, data), rel) in self.tensors.iter().zip(offsets) {
                out.resize((data_start + rel) as usize, 0);
                out.extend_from_slice(data);
            }
            pad_to(&mut out, alignment);
        }
        out
    }

    /// The file's bytes, or the error of the first metadata value that was refused.
    pub fn try_to_bytes(&self) -> Result<Vec<u8>> {
        if let Some((key, why)) = &self.refused {
            return Err(Error::WriterValue { key: key.clone(), why: why.clone() });
        }
        Ok(self.to_bytes())
    }

    /// Writes the file atomically: to `PATH.<pid>.tmp` beside it, then renamed over `path`, so
    /// a reader never sees half a file.
    pub fn write(&self, path: &Path) -> Result<()> {
        let bytes = self.try_to_bytes()?;
        let mut tmp_name = path.as_os_str().to_owned();
        tmp_name.push(format!(".{}.tmp", std::process::id()));
        let tmp = std::path::PathBuf::from(tmp_name);
        let result = (|| {
            let mut file = std::fs::File::create(&tmp)?;
            file.write_all(&bytes)?;
            file.sync_all()?;
            std::fs::rename(&tmp, path)
        })();
        result.map_err(|source| {
            // Best effort: the temporary file is useless once writing failed.
            let _ = std::fs::remove_file(&tmp);
            Error::Write { path: path.to_path_buf(), source }
        })
    }
}

fn check_value(value: &MetadataValue) -> Result<(), String> {
    if value.depth() > MAX_ARRAY_DEPTH {
        return Err(format!("arrays nest {} deep, GGUF readers accept {MAX_ARRAY_DEPTH}", value.depth()));
    }
    if !value.is_homogeneous() {
        return Err("a GGUF array holds elements of one type, this one mixes types".to_string());
    }
    Ok(())
}

fn pad_to(out: &mut Vec<u8>, alignment: u64) {
    let len = (out.len() as u64).next_multiple_of(alignment);
    out.resize(len as usize, 0);
}

fn put_string(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u64).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

fn put_value(out: &mut Vec<u8>, value: &MetadataValue) {
    use MetadataValue as V;
    match value {
        V::U8(v) => out.push(*v),
        V::I8(v) => out.extend_from_slice(&v.to_le_bytes()),
        V::U16(v) => out.extend_from_slice(&v.to_le_bytes()),
        V::I16(v) => out.extend_from_slice(&v.to_le_bytes()),
        V::U32(v) => out.extend_from_slice(&v.to_le_bytes()),
        V::I32(v) => out.extend_from_slice(&v.to_le_bytes()),
        V::U64(v) => out.extend_from_slice(&v.to_le_bytes()),
        V::I64(v) => out.extend_from_slice(&v.to_le_bytes()),
        V::F32(v) => out.extend_from_slice(&v.to_le_bytes()),
        V::F64(v) => out.extend_from_slice(&v.to_le_bytes()),
        V::Bool(v) => out.push(u8::from(*v)),
        V::String(s) => put_string(out, s),
        V::Array(items) => {
            // An empty array has no element to take the type from; u8 is as good as any.
            let elem = items.first().map_or(type_id::U8, MetadataValue::type_id);
            out.extend_from_slice(&elem.to_le_bytes());
            out.extend_from_slice(&(items.len() as u64).to_le_bytes());
            for item in items {
                put_value(out, item);
            }
        }
    }
}
