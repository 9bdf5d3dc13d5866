//! Where a file's bytes live: a read-only memory map, or a vector for bytes given in memory.
//!
//! This is the crate's one module with `unsafe` code: mapping a file is `unsafe` in `memmap2`
//! because Rust cannot stop another process from changing the file while it is mapped.
#![allow(unsafe_code)]

use std::fs::File;
use std::path::Path;

use memmap2::Mmap;

use crate::error::{Error, Result};

/// The bytes of a GGUF file.
pub(crate) enum Storage {
    /// A read-only map of the whole file.
    Mapped(Mmap),
    /// Bytes owned in memory.
    Owned(Vec<u8>),
}

impl Storage {
    /// Maps `path` read-only.
    pub(crate) fn map(path: &Path) -> Result<Self> {
        let io_err = |source| Error::Io { path: path.to_path_buf(), source };
        let file = File::open(path).map_err(io_err)?;
        let len = file.metadata().map_err(io_err)?.len();
        if len == 0 {
            // Nothing to map; the parser reports the empty file as truncated.
            return Ok(Storage::Owned(Vec::new()));
        }
        // SAFETY: the map is read-only and private to this process. Its contents can still change
        // if another process writes the file while it is mapped, which Rust's aliasing rules do
        // not allow for; like every memory-mapped model loader (safetensors, candle, llama.cpp)
        // we require that model files are not modified in place while they are open, and say so
        // in `GgufFile::open`'s documentation. Truncating the file while it is mapped would make
        // reads fault (SIGBUS) rather than read stale data.
        let map = unsafe { Mmap::map(&file) }.map_err(io_err)?;
        Ok(Storage::Mapped(map))
    }

    /// The bytes.
    pub(crate) fn bytes(&self) -> &[u8] {
        match self {
            Storage::Mapped(map) => map,
            Storage::Owned(bytes) => bytes,
        }
    }
}

impl std::fmt::Debug for Storage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Storage::Mapped(map) => write!(f, "Mapped({} bytes)", map.len()),
            Storage::Owned(bytes) => write!(f, "Owned({} bytes)", bytes.len()),
        }
    }
}
