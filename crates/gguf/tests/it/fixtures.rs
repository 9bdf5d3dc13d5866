//! Small GGUF files built with the writer, and helpers to patch their bytes.

use anyspec_gguf::{GgmlType, GgufWriter, MetadataValue};

/// A small valid file: a few metadata entries (with a tiny tokenizer) and three tensors
/// named `t0`, `t1`, `t2` (F32 [8, 2], Q8_0 [32, 2], F16 [4]).
pub(crate) fn small_writer() -> GgufWriter {
    let mut w = GgufWriter::new();
    w.metadata("general.architecture", "llama".into())
        .metadata("general.name", "tiny".into())
        .metadata("k0", MetadataValue::U32(7))
        .metadata("k1", MetadataValue::Bool(true))
        .metadata("tokenizer.ggml.model", "gpt2".into())
        .metadata("tokenizer.ggml.pre", "smollm".into())
        .metadata("tokenizer.ggml.tokens", vec!["<|im_start|>", "a", "b", "ab", "Ġ"].into())
        .metadata("tokenizer.ggml.token_type", MetadataValue::Array([3, 1, 1, 1, 1].map(MetadataValue::I32).to_vec()))
        .metadata("tokenizer.ggml.merges", vec!["a b"].into())
        .metadata("tokenizer.ggml.bos_token_id", MetadataValue::U32(0));
    let f32s: Vec<u8> = (0..16).flat_map(|i| (i as f32).to_le_bytes()).collect();
    w.tensor("t0", &[8, 2], GgmlType::F32, f32s).unwrap();
    let q8: Vec<u8> = (0..68u8).collect();
    w.tensor("t1", &[32, 2], GgmlType::Q8_0, q8).unwrap();
    w.tensor("t2", &[4], GgmlType::F16, vec![1; 8]).unwrap();
    w
}

pub(crate) fn small_file() -> Vec<u8> {
    small_writer().try_to_bytes().unwrap()
}

/// The position of the first occurrence of `needle` in `haystack`.
pub(crate) fn find(haystack: &[u8], needle: &[u8]) -> usize {
    haystack
        .windows(needle.len())
        .position(|w| w == needle)
        .unwrap_or_else(|| panic!("{:?} not found", String::from_utf8_lossy(needle)))
}

/// Where the fields of tensor info `name` (a 2-byte name) are: (n_dims, first dim, type id,
/// offset). The name is preceded by its u64 length.
pub(crate) fn tensor_info_fields(bytes: &[u8], name: &str) -> (usize, usize, usize, usize) {
    let mut pattern = (name.len() as u64).to_le_bytes().to_vec();
    pattern.extend_from_slice(name.as_bytes());
    let at = find(bytes, &pattern) + pattern.len();
    let n_dims = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
    let type_at = at + 4 + 8 * n_dims;
    (at, at + 4, type_at, type_at + 4)
}

pub(crate) fn put_u32(bytes: &mut [u8], at: usize, v: u32) {
    bytes[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

pub(crate) fn put_u64(bytes: &mut [u8], at: usize, v: u64) {
    bytes[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

/// A unique path in the temporary directory.
pub(crate) fn temp_path(tag: &str) -> std::path::PathBuf {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    std::env::temp_dir().join(format!("anyspec-gguf-{}-{n}-{tag}.gguf", std::process::id()))
}
