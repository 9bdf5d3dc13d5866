//! The crate's error type.

use std::path::PathBuf;

/// The result type of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong reading, checking or writing a GGUF file.
///
/// `file` fields hold the path of the file, or `"the GGUF bytes"` for bytes given in memory;
/// `offset` fields count bytes from the start of the file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The file could not be opened, measured or mapped.
    #[error("cannot read {}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The file ends in the middle of a structure.
    #[error("{file} is truncated at byte {offset} while reading {what}; the file is incomplete, download it again")]
    Truncated {
        /// The file.
        file: String,
        /// Where the missing bytes were expected.
        offset: u64,
        /// What was being read.
        what: String,
    },
    /// The file does not start with `GGUF`.
    #[error("{file} is not a GGUF file: it starts with {found:?} instead of \"GGUF\"{looks_like}")]
    BadMagic {
        /// The file.
        file: String,
        /// The first bytes, printed escaped.
        found: String,
        /// What the file seems to be instead, as a clause starting with "; " (or empty).
        looks_like: String,
    },
    /// A version this crate does not read.
    #[error("{file} is GGUF version {version}, {why}")]
    UnsupportedVersion {
        /// The file.
        file: String,
        /// The version as stored.
        version: u32,
        /// Why it is refused and what to do.
        why: &'static str,
    },
    /// A count or length larger than the rest of the file can hold.
    #[error(
        "{file} claims {count} {what} at byte {offset}, more than the {remaining} bytes left in the file can hold; the file is corrupt"
    )]
    AbsurdCount {
        /// The file.
        file: String,
        /// Where the count is stored.
        offset: u64,
        /// What is counted.
        what: String,
        /// The count found.
        count: u64,
        /// The bytes left after the count.
        remaining: u64,
    },
    /// A string that is not UTF-8.
    #[error("{file} has a string that is not UTF-8 at byte {offset} ({what}); the file is corrupt")]
    InvalidUtf8 {
        /// The file.
        file: String,
        /// Where the string's bytes start.
        offset: u64,
        /// Which string.
        what: String,
    },
    /// A metadata value type id outside GGUF's 0..=12, or a bool byte other than 0 or 1.
    #[error("{file} has an invalid {what} at byte {offset}: {value}; the file is corrupt")]
    InvalidValue {
        /// The file.
        file: String,
        /// Where the value is stored.
        offset: u64,
        /// What was being read.
        what: String,
        /// The offending value.
        value: u64,
    },
    /// Arrays nested deeper than [`MAX_ARRAY_DEPTH`](crate::MAX_ARRAY_DEPTH).
    #[error("{file} nests arrays more than {max} deep at byte {offset} ({what}); the file is corrupt")]
    NestingTooDeep {
        /// The file.
        file: String,
        /// Where the too-deep array starts.
        offset: u64,
        /// Which value.
        what: String,
        /// The limit.
        max: usize,
    },
    /// A metadata key that appears twice.
    #[error("{file} has the metadata key '{key}' twice; the file is corrupt")]
    DuplicateKey {
        /// The file.
        file: String,
        /// The key.
        key: String,
    },
    /// A tensor name that appears twice.
    #[error("{file} has two tensors named '{name}'; the file is corrupt")]
    DuplicateTensor {
        /// The file.
        file: String,
        /// The tensor name.
        name: String,
    },
    /// A tensor whose ggml type id this crate does not know.
    #[error(
        "{file}: tensor '{tensor}' has unknown ggml type id {type_id}; the file needs a newer reader, or is corrupt"
    )]
    UnknownGgmlType {
        /// The file.
        file: String,
        /// The tensor.
        tensor: String,
        /// The id found.
        type_id: u32,
    },
    /// A tensor whose shape is impossible.
    #[error("{file}: tensor '{tensor}' has dims {dims:?}: {why}")]
    BadShape {
        /// The file.
        file: String,
        /// The tensor.
        tensor: String,
        /// The dims found (ggml order).
        dims: Vec<u64>,
        /// What is wrong.
        why: String,
    },
    /// `general.alignment` that is not a power of two `u32`.
    #[error("{file}: general.alignment is {value}, it must be a u32 power of two; the file is corrupt")]
    BadAlignment {
        /// The file.
        file: String,
        /// The value found, printed.
        value: String,
    },
    /// A tensor offset that is not a multiple of the alignment.
    #[error(
        "{file}: tensor '{tensor}' starts at data offset {offset}, which is not a multiple of the alignment {alignment}; the file is corrupt"
    )]
    MisalignedTensor {
        /// The file.
        file: String,
        /// The tensor.
        tensor: String,
        /// Its offset from the start of the data section.
        offset: u64,
        /// The alignment.
        alignment: u64,
    },
    /// Tensor data that extends past the end of the file.
    #[error(
        "{file}: the data of tensor '{tensor}' spans bytes {start}..{end} but the file has {file_len} bytes; the file is truncated or corrupt, download it again"
    )]
    TensorOutOfBounds {
        /// The file.
        file: String,
        /// The tensor.
        tensor: String,
        /// Its first byte.
        start: u64,
        /// One past its last byte (saturated at `u64::MAX`).
        end: u64,
        /// The file's length.
        file_len: u64,
    },
    /// Two tensors whose data overlap.
    #[error("{file}: the data of tensors '{first}' and '{second}' overlap; the file is corrupt")]
    TensorsOverlap {
        /// The file.
        file: String,
        /// The tensor that starts first.
        first: String,
        /// The tensor that starts inside it.
        second: String,
    },
    /// A metadata key that is absent.
    #[error("{file} has no metadata key '{key}'")]
    MissingKey {
        /// The file.
        file: String,
        /// The key.
        key: String,
    },
    /// A metadata value of the wrong type, or one out of the range asked for.
    #[error("{file}: metadata key '{key}' should be {expected}, found {found}")]
    WrongType {
        /// The file.
        file: String,
        /// The key.
        key: String,
        /// The type asked for.
        expected: &'static str,
        /// The type (and, for out-of-range integers, the value) found.
        found: String,
    },
    /// A tensor given to [`GgufWriter`](crate::GgufWriter) that cannot be written.
    #[error("cannot write tensor '{tensor}': {why}")]
    WriterTensor {
        /// The tensor.
        tensor: String,
        /// What is wrong.
        why: String,
    },
    /// A metadata value given to [`GgufWriter`](crate::GgufWriter) that cannot be written.
    #[error("cannot write metadata key '{key}': {why}")]
    WriterValue {
        /// The key.
        key: String,
        /// What is wrong.
        why: String,
    },
    /// Writing a file failed.
    #[error("cannot write {}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The tokenizer metadata is missing something or inconsistent.
    #[error("{file}: the tokenizer metadata is unusable: {why}")]
    Tokenizer {
        /// The file.
        file: String,
        /// What is wrong and, where known, what to do.
        why: String,
    },
    /// The `tokenizers` crate refused the tokenizer built from the metadata.
    #[error("{file}: cannot build the tokenizer from the metadata ({what})")]
    TokenizerBuild {
        /// The file.
        file: String,
        /// Which step failed.
        what: String,
        /// The error of the `tokenizers` crate.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A chat template this crate does not recognise.
    #[error(
        "unsupported chat template starting with {first_line:?}: anyspec renders ChatML (<|im_start|>), Llama-3 and Llama-2 ([INST]) templates"
    )]
    UnsupportedChatTemplate {
        /// The template's first non-empty line (cut at 120 characters).
        first_line: String,
    },
}
