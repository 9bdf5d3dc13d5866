//! The tokenizer built from metadata: synthetic vocabularies, and the real SmolLM2 file
//! against the reference ids in `tests/data/smollm2_tokenizer_ids.json`.

use anyspec_gguf::tokenizer::{apply_chat_template, tokenizer_from_gguf, tokenizer_from_gguf_checked};
use anyspec_gguf::{Error, GgufFile, GgufWriter, MetadataValue};

use crate::real_model::model_path;

fn strings(items: &[&str]) -> MetadataValue {
    MetadataValue::Array(items.iter().map(|s| MetadataValue::from(*s)).collect())
}

fn ints(items: &[i32]) -> MetadataValue {
    MetadataValue::Array(items.iter().map(|&v| MetadataValue::I32(v)).collect())
}

/// A byte-level BPE vocabulary small enough to check by hand.
fn tiny_gpt2(pre: &str) -> GgufWriter {
    let mut w = GgufWriter::new();
    w.metadata("tokenizer.ggml.model", "gpt2".into())
        .metadata("tokenizer.ggml.pre", pre.into())
        .metadata(
            "tokenizer.ggml.tokens",
            strings(&["<|endoftext|>", "<|im_start|>", "a", "b", "Ġ", "1", "2", "ab", "Ġab", "12"]),
        )
        .metadata("tokenizer.ggml.token_type", ints(&[3, 3, 1, 1, 1, 1, 1, 1, 1, 1]))
        .metadata("tokenizer.ggml.merges", strings(&["a b", "Ġ ab", "1 2"]))
        .metadata("tokenizer.ggml.bos_token_id", MetadataValue::U32(0))
        .metadata("tokenizer.ggml.eos_token_id", MetadataValue::U32(0));
    w
}

fn open(w: &GgufWriter) -> GgufFile {
    GgufFile::from_bytes(w.try_to_bytes().unwrap()).unwrap()
}

fn encode(tok: &tokenizers::Tokenizer, text: &str) -> Vec<u32> {
    tok.encode(text, false).unwrap().get_ids().to_vec()
}

#[test]
fn byte_level_bpe_merges_and_splits_special_tokens() {
    let file = open(&tiny_gpt2("gpt2"));
    let tok = tokenizer_from_gguf(&file).unwrap();
    assert_eq!((tok.bos, tok.eos, tok.eot, tok.add_bos), (Some(0), Some(0), None, false));
    assert_eq!(encode(&tok.tokenizer, "ab ab"), [7, 8]);
    assert_eq!(encode(&tok.tokenizer, "<|im_start|>ab"), [1, 7]);
    // GPT-2's pre-tokenizer keeps digit runs together, so "12" merges.
    assert_eq!(encode(&tok.tokenizer, "12"), [9]);
    let ids = encode(&tok.tokenizer, "ab ab");
    assert_eq!(tok.tokenizer.decode(&ids, false).unwrap(), "ab ab");
}

#[test]
fn smollm_pre_type_splits_digits() {
    let file = open(&tiny_gpt2("smollm"));
    let tok = tokenizer_from_gguf(&file).unwrap();
    assert_eq!(encode(&tok.tokenizer, "12"), [5, 6]);
    assert_eq!(encode(&tok.tokenizer, "ab ab"), [7, 8]);
}

#[test]
fn add_bos_prepends_bos_when_asked() {
    let mut w = tiny_gpt2("gpt2");
    w.metadata("tokenizer.ggml.add_bos_token", true.into())
        .metadata("tokenizer.ggml.eot_token_id", MetadataValue::U32(1));
    let tok = tokenizer_from_gguf(&open(&w)).unwrap();
    assert!(tok.add_bos);
    assert_eq!(tok.eot, Some(1));
    assert_eq!(tok.tokenizer.encode("ab", true).unwrap().get_ids(), [0, 7]);
    assert_eq!(tok.tokenizer.encode("ab", false).unwrap().get_ids(), [7]);
}

fn tokenizer_error(w: &GgufWriter) -> String {
    let err = tokenizer_from_gguf(&open(w)).unwrap_err();
    err.to_string()
}

#[test]
fn malformed_tokenizers_are_refused_with_reasons() {
    let mut w = tiny_gpt2("gpt2");
    w.metadata("tokenizer.ggml.merges", strings(&["a b", "a c"]));
    let err = tokenizer_error(&w);
    assert!(err.contains("merge 1 (\"a c\") names \"c\""), "{err}");

    let mut w = tiny_gpt2("gpt2");
    w.metadata("tokenizer.ggml.merges", strings(&["ab"]));
    assert!(tokenizer_error(&w).contains("not two tokens"));

    let mut w = tiny_gpt2("gpt2");
    w.metadata("tokenizer.ggml.merges", strings(&["b a"]));
    assert!(tokenizer_error(&w).contains("makes \"ba\""));

    let mut w = tiny_gpt2("gpt2");
    w.metadata("tokenizer.ggml.eos_token_id", MetadataValue::U32(10));
    let err = tokenizer_error(&w);
    assert!(err.contains("eos_token_id is 10 but the vocabulary has 10 tokens"), "{err}");

    let mut w = tiny_gpt2("gpt2");
    w.metadata("tokenizer.ggml.token_type", ints(&[3, 1]));
    assert!(tokenizer_error(&w).contains("token_type has 2 entries for 10 tokens"));

    let mut w = tiny_gpt2("gpt2");
    w.metadata("tokenizer.ggml.model", "bert".into());
    assert!(tokenizer_error(&w).contains("tokenizer.ggml.model is 'bert'"));

    let mut w = tiny_gpt2("gpt2");
    w.metadata("tokenizer.ggml.tokens", MetadataValue::Array(vec![1u32.into()]));
    let err = tokenizer_from_gguf(&open(&w)).unwrap_err();
    assert!(matches!(err, Error::WrongType { .. }), "{err}");
}

#[test]
fn vocabulary_size_is_checked_against_the_embedding() {
    let file = open(&tiny_gpt2("gpt2"));
    assert!(tokenizer_from_gguf_checked(&file, 10).is_ok());
    let err = tokenizer_from_gguf_checked(&file, 12).unwrap_err().to_string();
    assert!(err.contains("10 tokens but the model's embedding has 12 rows"), "{err}");
}

/// A SentencePiece vocabulary: merges come from the scores.
fn tiny_spm() -> GgufWriter {
    let mut w = GgufWriter::new();
    let tokens = ["<unk>", "<s>", "</s>", "▁", "a", "b", "▁a", "ab", "▁ab", "<0x00>", "<0x21>", "<0xFF>"];
    let scores = [0.0, 0.0, 0.0, -1.0, -2.0, -3.0, -5.0, -4.0, -0.5, 0.0, 0.0, 0.0];
    let types = [2, 3, 3, 1, 1, 1, 1, 1, 1, 6, 6, 6];
    w.metadata("tokenizer.ggml.model", "llama".into())
        .metadata("tokenizer.ggml.tokens", strings(&tokens))
        .metadata(
            "tokenizer.ggml.scores",
            MetadataValue::Array(scores.iter().map(|&s| MetadataValue::F32(s)).collect()),
        )
        .metadata("tokenizer.ggml.token_type", ints(&types))
        .metadata("tokenizer.ggml.bos_token_id", MetadataValue::U32(1))
        .metadata("tokenizer.ggml.eos_token_id", MetadataValue::U32(2))
        .metadata("tokenizer.ggml.unknown_token_id", MetadataValue::U32(0));
    w
}

#[test]
fn sentencepiece_vocabulary_merges_by_score() {
    let tok = tokenizer_from_gguf(&open(&tiny_spm())).unwrap();
    // llama vocabularies add BOS unless the file says otherwise.
    assert!(tok.add_bos);
    assert_eq!(tok.tokenizer.encode("ab ab", true).unwrap().get_ids(), [1, 8, 8]);
    // "ba": no merge applies; a space is prepended.
    assert_eq!(encode(&tok.tokenizer, "ba"), [3, 5, 4]);
    // "!" is not a piece: it falls back to its byte.
    assert_eq!(encode(&tok.tokenizer, "a!"), [6, 10]);
    let ids = encode(&tok.tokenizer, "ab ab!");
    assert_eq!(tok.tokenizer.decode(&ids, false).unwrap(), "ab ab!");
}

#[test]
fn sentencepiece_scores_must_match_the_tokens() {
    let mut w = tiny_spm();
    w.metadata("tokenizer.ggml.scores", MetadataValue::Array(vec![MetadataValue::F32(0.0)]));
    assert!(tokenizer_error(&w).contains("scores has 1 entries for 12 tokens"));
}

#[test]
fn smollm2_matches_its_reference_tokenizer() {
    let Some(path) = model_path() else { return };
    let file = GgufFile::open(path).unwrap();
    let tok = tokenizer_from_gguf_checked(&file, 49152).unwrap();
    assert_eq!((tok.bos, tok.eos, tok.add_bos), (Some(1), Some(2), false));
    let fixture: serde_json::Value = serde_json::from_str(include_str!("../data/smollm2_tokenizer_ids.json")).unwrap();
    let cases = fixture["cases"].as_array().unwrap();
    assert!(cases.len() >= 6);
    for case in cases {
        let text = case["text"].as_str().unwrap();
        let expected: Vec<u32> = case["hf"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap() as u32).collect();
        let ids = encode(&tok.tokenizer, text);
        assert_eq!(ids, expected, "{text:?}");
        assert_eq!(tok.tokenizer.decode(&ids, false).unwrap(), text);
    }
    let template = tok.chat_template.as_deref().unwrap();
    let prompt = apply_chat_template(template, None, "Hi").unwrap();
    assert!(prompt.starts_with("<|im_start|>system\nYou are a helpful AI assistant named SmolLM"));
    let ids = encode(&tok.tokenizer, &prompt);
    assert_eq!(ids[0], 1, "<|im_start|> is one token");
    // The generation prompt "<|im_start|>assistant\n".
    assert!(ids.ends_with(&[1, 520, 9531, 198]), "{ids:?}");
}

mod fuzz {
    use anyspec_gguf::tokenizer::tokenizer_from_gguf;
    use anyspec_gguf::{GgufFile, GgufWriter, MetadataValue};
    use proptest::prelude::*;
    use proptest::test_runner::{Config, RngSeed};

    fn piece() -> impl Strategy<Value = String> {
        prop_oneof![
            Just(String::new()),
            Just(" ".to_string()),
            Just("▁".to_string()),
            Just("Ġ".to_string()),
            Just("<0x41>".to_string()),
            Just("$A".to_string()),
            "[ab1 ]{1,3}",
            ".{0,4}",
        ]
    }

    proptest! {
        #![proptest_config(Config {
            cases: 400,
            rng_seed: RngSeed::Fixed(0x746f6b),
            failure_persistence: None,
            ..Config::default()
        })]

        /// Random small vocabularies build a tokenizer or give an error; neither building nor
        /// encoding and decoding panics.
        #[test]
        fn random_vocabularies_never_panic(
            tokens in proptest::collection::vec(piece(), 1..12),
            types in proptest::collection::vec(0i32..8, 1..12),
            merges in proptest::collection::vec((piece(), piece()), 0..6),
            model in prop_oneof![Just("gpt2"), Just("llama")],
            pre in prop_oneof![Just("gpt2"), Just("smollm"), Just("llama-bpe"), Just("qwen2"), Just("x")],
            bos in 0u32..14,
            add_bos in any::<bool>(),
            text in ".{0,24}",
        ) {
            let n = tokens.len();
            let mut types = types;
            types.resize(n, 1);
            let mut w = GgufWriter::new();
            w.metadata("tokenizer.ggml.model", model.into())
                .metadata("tokenizer.ggml.pre", pre.into())
                .metadata("tokenizer.ggml.tokens", tokens.clone().into())
                .metadata(
                    "tokenizer.ggml.token_type",
                    MetadataValue::Array(types.iter().map(|&t| MetadataValue::I32(t)).collect()),
                )
                .metadata(
                    "tokenizer.ggml.merges",
                    merges.iter().map(|(a, b)| format!("{a} {b}")).collect::<Vec<_>>().into(),
                )
                .metadata(
                    "tokenizer.ggml.scores",
                    MetadataValue::Array((0..n).map(|i| MetadataValue::F32(-(i as f32))).collect()),
                )
                .metadata("tokenizer.ggml.bos_token_id", MetadataValue::U32(bos))
                .metadata("tokenizer.ggml.add_bos_token", add_bos.into());
            let file = GgufFile::from_bytes(w.try_to_bytes().unwrap()).unwrap();
            if let Ok(tok) = tokenizer_from_gguf(&file) {
                prop_assert!((bos as usize) < n);
                if let Ok(enc) = tok.tokenizer.encode(text.as_str(), true) {
                    for &id in enc.get_ids() {
                        prop_assert!((id as usize) < n, "id {} of {} tokens", id, n);
                    }
                    let _ = tok.tokenizer.decode(enc.get_ids(), false);
                }
            }
        }
    }
}
