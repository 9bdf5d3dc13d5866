//! Broken checkpoints give errors that name the tensor, the shapes and the fix.

use std::path::{Path, PathBuf};

use anyspec_models::{Checkpoint, DeviceChoice, Error, TextTokenizer};

/// Copies a fixture to a fresh temporary directory and edits its config.json.
fn edited_copy(name: &str, edit: impl Fn(&mut serde_json::Value)) -> PathBuf {
    let source = crate::common::fixture_dir(name);
    let dir = std::env::temp_dir().join(format!(
        "anyspec-models-{name}-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    for entry in std::fs::read_dir(&source).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), dir.join(entry.file_name())).unwrap();
    }
    let config_path = dir.join("config.json");
    let mut config: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&config_path).unwrap()).unwrap();
    edit(&mut config);
    std::fs::write(&config_path, config.to_string()).unwrap();
    dir
}

fn load_err(dir: &Path) -> Error {
    let device = DeviceChoice::Cpu.device().unwrap();
    match Checkpoint::open(dir).and_then(|c| c.load_model(&device)) {
        Ok(_) => panic!("loading {} should fail", dir.display()),
        Err(e) => e,
    }
}

#[test]
fn a_shape_mismatch_names_the_tensor_and_both_shapes() {
    let dir = edited_copy("llama3-gqa", |c| c["intermediate_size"] = 130.into());
    let err = load_err(&dir);
    let text = err.to_string();
    assert!(matches!(err, Error::ShapeMismatch { .. }), "{text}");
    assert!(text.contains("model.layers.0.mlp.gate_proj.weight"), "{text}");
    assert!(text.contains("[128, 64]") && text.contains("[130, 64]"), "{text}");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_missing_lm_head_is_named() {
    // The Qwen2 fixture ties its embeddings, so its file has no lm_head.weight.
    let dir = edited_copy("qwen2-tied-bf16", |c| c["tie_word_embeddings"] = false.into());
    let text = load_err(&dir).to_string();
    assert!(text.contains("lm_head.weight") && text.contains("missing"), "{text}");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn an_unsupported_model_type_is_named() {
    let dir = edited_copy("llama3-gqa", |c| c["model_type"] = "gpt_neox".into());
    let text = load_err(&dir).to_string();
    assert!(text.contains("gpt_neox"), "{text}");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn truncated_weights_are_an_error_not_a_panic() {
    let dir = edited_copy("llama3-gqa", |_| {});
    let weights = dir.join("model.safetensors");
    let bytes = std::fs::read(&weights).unwrap();
    std::fs::write(&weights, &bytes[..bytes.len() / 2]).unwrap();
    let err = load_err(&dir);
    assert!(matches!(err, Error::Safetensors { .. }), "{err}");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_directory_without_config_is_explained() {
    let err = Checkpoint::open(std::env::temp_dir().join("anyspec-no-such-checkpoint")).unwrap_err();
    assert!(err.to_string().contains("config.json"), "{err}");
}

#[test]
fn tokens_outside_the_vocabulary_and_context_are_errors() {
    let model = crate::common::load("llama3-gqa");
    let mut cache = model.new_cache();
    assert!(matches!(model.forward(&[320], &mut cache, 1), Err(Error::TokenOutOfRange { token: 320, .. })));
    let long = vec![5u32; 129];
    assert!(matches!(model.forward(&long, &mut cache, 1), Err(Error::ContextFull { needed: 129, max: 128 })));
    assert!(model.forward(&[], &mut cache, 1).is_err());
    assert_eq!(cache.len(), 0, "failed passes leave the cache alone");
}

#[test]
fn a_configuration_with_fewer_layers_than_the_file_is_refused_naming_the_unused_tensors() {
    let dir = edited_copy("llama3-gqa", |c| c["num_hidden_layers"] = 1.into());
    let err = load_err(&dir);
    let text = err.to_string();
    assert!(matches!(err, Error::UnusedTensors { num_layers: 1, .. }), "{text}");
    assert!(text.contains("model.layers.1.") && text.contains("num_hidden_layers = 1"), "{text}");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_tokenizer_with_ids_beyond_the_embedding_rows_is_refused() {
    // The fixture tokenizer has ids 0..320; a model of 300 rows cannot embed the last 20.
    let dir = edited_copy("llama3-gqa", |c| c["vocab_size"] = 300.into());
    let err = Checkpoint::open(&dir).unwrap().tokenizer().unwrap_err().to_string();
    assert!(err.contains("ids up to 319") && err.contains("300 embedding rows"), "{err}");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn an_id_the_tokenizer_cannot_decode_is_an_error_not_dropped_text() {
    let tokenizer = TextTokenizer::from_file(&crate::common::fixture_dir("llama3-gqa").join("tokenizer.json")).unwrap();
    assert_eq!(tokenizer.id_end(), 320);
    assert!(tokenizer.decode(&[60, 61]).is_ok());
    let err = tokenizer.decode(&[60, 400, 61]).unwrap_err();
    assert!(matches!(err, Error::UndecodableToken { token: 400, id_end: 320, .. }), "{err}");
}

#[test]
fn eos_outside_the_vocabulary_is_refused() {
    let dir = edited_copy("llama3-gqa", |c| c["eos_token_id"] = 50_256.into());
    let err = Checkpoint::open(&dir).unwrap_err().to_string();
    assert!(err.contains("eos_token_id 50256") && err.contains("vocab_size 320"), "{err}");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_missing_eos_falls_back_to_the_tokenizers_end_of_sequence_token() {
    let dir = edited_copy("llama3-gqa", |c| {
        c.as_object_mut().unwrap().remove("eos_token_id");
    });
    // Without tokenizer_config.json there is nothing to fall back to (and a warning says so).
    assert_eq!(Checkpoint::open(&dir).unwrap().config().eos_token_ids, Vec::<u32>::new());
    std::fs::write(dir.join("tokenizer_config.json"), r#"{"eos_token": {"content": "</s>"}}"#).unwrap();
    assert_eq!(Checkpoint::open(&dir).unwrap().config().eos_token_ids, vec![2]);
    std::fs::write(dir.join("tokenizer_config.json"), r#"{"eos_token": "<s>"}"#).unwrap();
    assert_eq!(Checkpoint::open(&dir).unwrap().config().eos_token_ids, vec![1]);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn non_positive_rope_theta_and_rms_norm_eps_are_refused_when_the_checkpoint_opens() {
    for (field, value) in [("rope_theta", -1.0), ("rms_norm_eps", 0.0)] {
        let dir = edited_copy("llama3-gqa", |c| c[field] = value.into());
        let err = Checkpoint::open(&dir).unwrap_err().to_string();
        assert!(err.contains(field) && err.contains("positive"), "{err}");
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// Found by `cargo xtask fuzz` (tokenizer-json target): malformed JSON inside the `decoder`
/// section (here a lone surrogate escape) made the `tokenizers` crate panic while loading; the
/// syntax is now checked first, and the error names the file and the position.
#[test]
fn a_tokenizer_with_malformed_json_is_an_error_not_a_panic() {
    let source = crate::common::fixture_dir("llama3-gqa").join("tokenizer.json");
    let text = std::fs::read_to_string(source).unwrap();
    // The decoder's type, "ByteLevel", with a lone surrogate escape in the middle.
    let decoder = text.find("\"decoder\"").unwrap();
    let level = decoder + text[decoder..].find("ByteLevel").unwrap();
    let bad = format!("{}Byte\\udc00Level{}", &text[..level], &text[level + "ByteLevel".len()..]);
    let dir = std::env::temp_dir().join(format!("anyspec-models-bad-tokenizer-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("tokenizer.json");
    std::fs::write(&path, bad).unwrap();
    let err = TextTokenizer::from_file(&path).unwrap_err();
    let message = err.to_string();
    assert!(matches!(err, Error::Tokenizer { .. }), "{err:?}");
    assert!(
        message.contains("tokenizer.json") && message.contains("not valid JSON (lone leading surrogate"),
        "{message}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Found by `cargo xtask fuzz` (tokenizer-json target): a `TemplateProcessing` post-processor
/// whose template adds `<s>` while its `special_tokens` table lacks it loads, then panics in the
/// `tokenizers` crate ("no entry found for key") on every encode that adds special tokens. It is
/// now refused at load, naming the token.
#[test]
fn a_post_processor_template_with_an_undefined_special_token_is_refused() {
    let source = crate::common::fixture_dir("llama3-gqa").join("tokenizer.json");
    let mut json: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(source).unwrap()).unwrap();
    json["post_processor"]["special_tokens"] = serde_json::json!({});
    let bytes = serde_json::to_vec(&json).unwrap();
    // The third-party panic this guards against.
    let loaded = tokenizers::Tokenizer::from_bytes(&bytes).unwrap();
    assert!(std::panic::catch_unwind(|| loaded.encode("Hello", true).is_ok()).is_err());
    let dir = std::env::temp_dir().join(format!("anyspec-models-bad-template-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("tokenizer.json");
    std::fs::write(&path, &bytes).unwrap();
    let message = TextTokenizer::from_file(&path).unwrap_err().to_string();
    assert!(message.contains("single template adds the special token \"<s>\""), "{message}");
    std::fs::remove_dir_all(&dir).unwrap();
}
