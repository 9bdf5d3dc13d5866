//! The GGUF parser: header, metadata and tensor infos, checked against the file's length.
//!
//! The layout (ggml's `docs/gguf.md`): the magic `GGUF`, a u32 version, a u64 tensor count, a
//! u64 metadata count, the metadata key-value pairs, the tensor infos, padding to the alignment,
//! then the tensor data. Version 1 stored the counts and string lengths as u32 and is refused;
//! versions 2 and 3 share the little-endian layout (3 added big-endian files, which are refused).
//!
//! Every count and length is checked against the bytes left before anything is allocated for
//! it, so hostile input can make the parser allocate at most a small multiple of its length.

use std::collections::HashMap;

use crate::error::{Error, Result};
use crate::ggml_type::GgmlType;
use crate::tensor::TensorInfo;
use crate::value::{MAX_ARRAY_DEPTH, MetadataValue, min_encoded_len, type_id};

/// The magic at the start of every GGUF file.
pub(crate) const MAGIC: &[u8; 4] = b"GGUF";
/// The alignment of tensor data when `general.alignment` is absent.
pub const DEFAULT_ALIGNMENT: u64 = 32;
/// The most dims a ggml tensor has (`GGML_MAX_DIMS`).
pub const MAX_DIMS: usize = 4;
/// Needing more bytes than this for one count is reported as corruption rather than truncation:
/// no real file holds a single 4 GiB string or array.
const PLAUSIBLE_BYTES: u64 = 1 << 32;

/// A parsed header.
#[derive(Debug)]
pub(crate) struct Parsed {
    pub(crate) version: u32,
    pub(crate) metadata: Vec<(String, MetadataValue)>,
    pub(crate) key_index: HashMap<String, usize>,
    pub(crate) tensors: Vec<TensorInfo>,
    pub(crate) tensor_index: HashMap<String, usize>,
    pub(crate) alignment: u64,
    pub(crate) data_start: u64,
}

struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
    file: &'a str,
    /// What is being read, for error messages ("the metadata value of 'general.name'").
    ctx: String,
}

impl<'a> Cursor<'a> {
    fn remaining(&self) -> u64 {
        (self.bytes.len() - self.pos) as u64
    }

    fn truncated(&self, what: &str) -> Error {
        Error::Truncated { file: self.file.to_string(), offset: self.bytes.len() as u64, what: what.to_string() }
    }

    fn take(&mut self, n: u64) -> Result<&'a [u8]> {
        if n > self.remaining() {
            return Err(self.truncated(&self.ctx));
        }
        let n = n as usize; // n <= remaining, which is a usize
        let out = &self.bytes[self.pos..self.pos + n];
        self.pos += n;
        Ok(out)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N]> {
        let bytes = self.take(N as u64)?;
        let mut out = [0; N];
        out.copy_from_slice(bytes);
        Ok(out)
    }

    fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_le_bytes(self.array()?))
    }

    fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_le_bytes(self.array()?))
    }

    /// Checks a count of items of at least `min_len` bytes each, stored at offset `at`, and
    /// returns how many of them to allocate room for.
    ///
    /// A count that needs more bytes than the file has left is refused as corrupt when the
    /// shortfall is absurd (more than [`PLAUSIBLE_BYTES`]); otherwise parsing goes on, so that a
    /// truncated file is reported where its bytes run out, with what was being read. Either way
    /// the room allocated is bounded by the bytes left.
    fn check_count(&self, count: u64, min_len: u64, what: &str, at: usize) -> Result<usize> {
        let needed = count.saturating_mul(min_len);
        if needed > self.remaining() && needed > PLAUSIBLE_BYTES {
            return Err(Error::AbsurdCount {
                file: self.file.to_string(),
                offset: at as u64,
                what: what.to_string(),
                count,
                remaining: self.remaining(),
            });
        }
        // Both bounds fit a usize: the second is at most the length of a slice.
        Ok(count.min(self.remaining() / min_len.max(1)) as usize)
    }

    fn string(&mut self) -> Result<String> {
        let at = self.pos;
        let len = self.u64()?;
        self.check_count(len, 1, "bytes of string", at)?;
        let start = self.pos;
        let bytes = self.take(len)?;
        match std::str::from_utf8(bytes) {
            Ok(s) => Ok(s.to_string()),
            Err(_) => {
                Err(Error::InvalidUtf8 { file: self.file.to_string(), offset: start as u64, what: self.ctx.clone() })
            }
        }
    }

    fn value(&mut self, ty: u32, depth: usize) -> Result<MetadataValue> {
        use MetadataValue as V;
        Ok(match ty {
            type_id::U8 => V::U8(self.array::<1>()?[0]),
            type_id::I8 => V::I8(i8::from_le_bytes(self.array()?)),
            type_id::U16 => V::U16(u16::from_le_bytes(self.array()?)),
            type_id::I16 => V::I16(i16::from_le_bytes(self.array()?)),
            type_id::U32 => V::U32(self.u32()?),
            type_id::I32 => V::I32(i32::from_le_bytes(self.array()?)),
            type_id::U64 => V::U64(self.u64()?),
            type_id::I64 => V::I64(i64::from_le_bytes(self.array()?)),
            type_id::F32 => V::F32(f32::from_le_bytes(self.array()?)),
            type_id::F64 => V::F64(f64::from_le_bytes(self.array()?)),
            type_id::BOOL => {
                let at = self.pos;
                match self.array::<1>()?[0] {
                    0 => V::Bool(false),
                    1 => V::Bool(true),
                    other => return Err(self.invalid(at, "bool byte", other.into())),
                }
            }
            type_id::STRING => V::String(self.string()?),
            type_id::ARRAY => {
                let at = self.pos;
                if depth >= MAX_ARRAY_DEPTH {
                    return Err(Error::NestingTooDeep {
                        file: self.file.to_string(),
                        offset: at as u64,
                        what: self.ctx.clone(),
                        max: MAX_ARRAY_DEPTH,
                    });
                }
                let elem_ty = self.u32()?;
                let Some(min_len) = min_encoded_len(elem_ty) else {
                    return Err(self.invalid(at, "array element type id", elem_ty.into()));
                };
                let count_at = self.pos;
                let count = self.u64()?;
                let room = self.check_count(count, min_len, "array elements", count_at)?;
                let mut items = Vec::with_capacity(room);
                for _ in 0..count {
                    items.push(self.value(elem_ty, depth + 1)?);
                }
                V::Array(items)
            }
            other => {
                return Err(self.invalid(self.pos - 4, "metadata value type id", other.into()));
            }
        })
    }

    fn invalid(&self, at: usize, kind: &str, value: u64) -> Error {
        Error::InvalidValue {
            file: self.file.to_string(),
            offset: at as u64,
            what: format!("{kind} in {}", self.ctx),
            value,
        }
    }
}

/// What a file that is not GGUF seems to be, as a clause for [`Error::BadMagic`].
fn looks_like(bytes: &[u8]) -> String {
    let starts = |prefix: &[u8]| bytes.starts_with(prefix);
    let what = if bytes.len() >= 9 && bytes[8] == b'{' {
        "it looks like a safetensors file (a u64 header length, then JSON); convert it to GGUF with llama.cpp's convert_hf_to_gguf.py"
    } else if starts(b"PK\x03\x04") {
        "it looks like a zip archive (a Python wheel or a PyTorch checkpoint); unpack the .gguf file from it first"
    } else if starts(b"lmgg") || starts(b"fmgg") || starts(b"tjgg") {
        "it looks like a pre-GGUF ggml/ggjt model; convert it with llama.cpp's convert_llama_ggml_to_gguf.py"
    } else if starts(b"version https://git-lfs") {
        "it is a Git LFS pointer, not the model; fetch the real file with `git lfs pull`"
    } else if starts(b"<!") || starts(b"<html") || starts(b"<HTML") {
        "it looks like an HTML page, probably an error page saved in place of the download"
    } else if starts(b"\x93NUMPY") {
        "it looks like a NumPy .npy file"
    } else if starts(b"\x80") {
        "it looks like a Python pickle (a PyTorch .bin checkpoint)"
    } else if starts(b"{") || starts(b"[") {
        "it looks like JSON (a config or tokenizer file?)"
    } else {
        ""
    };
    if what.is_empty() { String::new() } else { format!("; {what}") }
}

/// Parses and checks everything before the tensor data. `file` names the bytes in errors.
pub(crate) fn parse(bytes: &[u8], file: &str) -> Result<Parsed> {
    let mut cur = Cursor { bytes, pos: 0, file, ctx: "the magic".to_string() };
    if bytes.len() < MAGIC.len() || &bytes[..4] != MAGIC {
        if bytes.len() < MAGIC.len() && MAGIC.starts_with(bytes) {
            return Err(cur.truncated("the magic"));
        }
        let head = &bytes[..bytes.len().min(8)];
        return Err(Error::BadMagic {
            file: file.to_string(),
            found: head.escape_ascii().to_string(),
            looks_like: looks_like(bytes),
        });
    }
    cur.pos = 4;
    cur.ctx = "the version".to_string();
    let version = cur.u32()?;
    match version {
        2 | 3 => {}
        1 => {
            return Err(Error::UnsupportedVersion {
                file: file.to_string(),
                version,
                why: "which llama.cpp no longer reads either; convert the model again with a current llama.cpp",
            });
        }
        v if v & 0xffff == 0 && matches!(v.swap_bytes(), 1..=3) => {
            return Err(Error::UnsupportedVersion {
                file: file.to_string(),
                version: v.swap_bytes(),
                why: "in big-endian byte order, which anyspec does not read; use a little-endian file",
            });
        }
        _ => {
            return Err(Error::UnsupportedVersion {
                file: file.to_string(),
                version,
                why: "which anyspec does not know (it reads versions 2 and 3)",
            });
        }
    }
    cur.ctx = "the tensor count".to_string();
    let tensor_count_at = cur.pos;
    let tensor_count = cur.u64()?;
    cur.ctx = "the metadata count".to_string();
    let kv_count_at = cur.pos;
    let kv_count = cur.u64()?;
    // A key-value pair takes at least a key length, a type id and one byte; a tensor info at
    // least a name length, a dim count, a type id and an offset.
    let kv_room = cur.check_count(kv_count, 8 + 4 + 1, "metadata entries", kv_count_at)?;
    let tensor_room = cur.check_count(tensor_count, 8 + 4 + 4 + 8, "tensor infos", tensor_count_at)?;

    let mut metadata = Vec::with_capacity(kv_room);
    let mut key_index = HashMap::with_capacity(kv_room);
    for i in 0..kv_count {
        cur.ctx = format!("the key of metadata entry {i}");
        let key = cur.string()?;
        cur.ctx = format!("the metadata value of '{key}'");
        let ty = cur.u32()?;
        let value = cur.value(ty, 0)?;
        if key_index.insert(key.clone(), metadata.len()).is_some() {
            return Err(Error::DuplicateKey { file: file.to_string(), key });
        }
        metadata.push((key, value));
    }

    let alignment = match key_index.get("general.alignment").map(|&i| &metadata[i].1) {
        None => DEFAULT_ALIGNMENT,
        Some(MetadataValue::U32(a)) if a.is_power_of_two() => u64::from(*a),
        Some(other) => {
            return Err(Error::BadAlignment { file: file.to_string(), value: format!("{other:?}") });
        }
    };

    let mut infos = Vec::with_capacity(tensor_room);
    let mut tensor_index = HashMap::with_capacity(tensor_room);
    let mut relative = Vec::with_capacity(tensor_room);
    for i in 0..tensor_count {
        cur.ctx = format!("the name of tensor info {i}");
        let name = cur.string()?;
        cur.ctx = format!("the tensor info of '{name}'");
        let n_dims_at = cur.pos;
        let n_dims = cur.u32()?;
        if n_dims as usize > MAX_DIMS {
            return Err(cur.invalid(n_dims_at, "dim count", n_dims.into()));
        }
        let mut dims = Vec::with_capacity(n_dims as usize);
        for _ in 0..n_dims {
            dims.push(cur.u64()?);
        }
        let type_id = cur.u32()?;
        let offset = cur.u64()?;
        let Some(ggml_type) = GgmlType::from_id(type_id) else {
            return Err(Error::UnknownGgmlType { file: file.to_string(), tensor: name, type_id });
        };
        check_shape(file, &name, &dims, ggml_type)?;
        if !offset.is_multiple_of(alignment) {
            return Err(Error::MisalignedTensor { file: file.to_string(), tensor: name, offset, alignment });
        }
        if tensor_index.insert(name.clone(), infos.len()).is_some() {
            return Err(Error::DuplicateTensor { file: file.to_string(), name });
        }
        relative.push(offset);
        infos.push(TensorInfo { name, dims, ggml_type, offset: 0 });
    }

    // The data section starts at the first aligned offset after the tensor infos.
    let data_start = (cur.pos as u64).next_multiple_of(alignment);
    let file_len = bytes.len() as u64;
    for (info, rel) in infos.iter_mut().zip(relative) {
        let start = data_start.saturating_add(rel);
        let end = start.saturating_add(info.byte_len());
        if end > file_len || start == u64::MAX {
            return Err(Error::TensorOutOfBounds {
                file: file.to_string(),
                tensor: info.name.clone(),
                start,
                end,
                file_len,
            });
        }
        info.offset = start;
    }
    check_overlaps(file, &infos)?;
    Ok(Parsed { version, metadata, key_index, tensors: infos, tensor_index, alignment, data_start })
}

/// Checks that the element count and byte length of a tensor are representable and that its
/// rows are whole blocks, as ggml requires of every tensor.
pub(crate) fn check_shape(file: &str, name: &str, dims: &[u64], ty: GgmlType) -> Result<()> {
    let bad =
        |why: String| Error::BadShape { file: file.to_string(), tensor: name.to_string(), dims: dims.to_vec(), why };
    if dims.len() > MAX_DIMS {
        return Err(bad(format!("ggml tensors have at most {MAX_DIMS} dims")));
    }
    let mut elements: u64 = 1;
    for &d in dims {
        elements = elements
            .checked_mul(d)
            .filter(|&e| e <= i64::MAX as u64)
            .ok_or_else(|| bad("the element count overflows".to_string()))?;
    }
    let row = dims.first().copied().unwrap_or(1);
    if !row.is_multiple_of(ty.block_len()) {
        return Err(bad(format!("its rows of {row} elements are not whole {ty} blocks of {}", ty.block_len())));
    }
    if ty.bytes_for(elements).is_none() {
        return Err(bad("the byte length overflows".to_string()));
    }
    Ok(())
}

fn check_overlaps(file: &str, infos: &[TensorInfo]) -> Result<()> {
    let mut spans: Vec<(u64, u64, usize)> = infos
        .iter()
        .enumerate()
        .filter(|(_, t)| t.byte_len() > 0)
        .map(|(i, t)| (t.offset, t.offset + t.byte_len(), i))
        .collect();
    spans.sort_unstable();
    for pair in spans.windows(2) {
        let (_, end, a) = pair[0];
        let (start, _, b) = pair[1];
        if start < end {
            return Err(Error::TensorsOverlap {
                file: file.to_string(),
                first: infos[a].name.clone(),
                second: infos[b].name.clone(),
            });
        }
    }
    Ok(())
}
