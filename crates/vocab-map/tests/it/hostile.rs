//! Inputs found by `cargo xtask fuzz` (tokenizer-json target) that panicked or aborted the
//! process: each is now an error that names the problem.

use std::path::Path;

use anyspec_vocab_map::{Error, Vocabulary};

use crate::fixture_path;

/// A lone surrogate escape inside the `decoder` section: the `tokenizers` crate panics on it
/// ("Helper: Error(\"invalid unicode code point\", …)", an `expect` in its decoder
/// deserializer), so the syntax is now checked before the crate sees the bytes.
#[test]
fn malformed_json_inside_the_decoder_is_an_error_not_a_panic() {
    let text = std::fs::read_to_string(fixture_path("tiny_bytelevel.json")).unwrap();
    // The decoder's type, "ByteLevel", with a lone surrogate escape in the middle.
    let decoder = text.find("\"decoder\"").unwrap();
    let level = decoder + text[decoder..].find("ByteLevel").unwrap();
    let bad = format!("{}Byte\\ud800Level{}", &text[..level], &text[level + "ByteLevel".len()..]);
    // The third-party panic this guards against (if the crate stops panicking, this wrapper may go).
    let direct = std::panic::catch_unwind(|| tokenizers::Tokenizer::from_bytes(bad.as_bytes()).is_ok());
    assert!(direct.is_err(), "tokenizers no longer panics on a lone surrogate in its decoder section");
    let err = Vocabulary::from_bytes(bad.as_bytes(), Path::new("bad/tokenizer.json")).unwrap_err();
    assert!(matches!(err, Error::Tokenizer { .. }), "{err:?}");
    assert!(err.to_string().contains("not valid JSON (unexpected end of hex escape"), "{err}");
    // A syntax error elsewhere is caught the same way, and the file is named.
    let cut = &text[..text.len() / 2];
    let err = Vocabulary::from_bytes(cut.as_bytes(), Path::new("cut/tokenizer.json")).unwrap_err();
    assert!(err.to_string().contains("cut/tokenizer.json") && err.to_string().contains("not valid JSON"), "{err}");
}

/// A token id of 4,294,967,295 in a ten-token vocabulary: the id table (one slot per id) asked
/// for 128 GiB and aborted the process.
#[test]
fn an_id_far_beyond_the_token_count_is_refused() {
    let text = std::fs::read_to_string(fixture_path("tiny_bytelevel.json")).unwrap();
    let mut json: serde_json::Value = serde_json::from_str(&text).unwrap();
    let vocab = json["model"]["vocab"].as_object_mut().unwrap();
    let tokens = vocab.len();
    let first = vocab.keys().next().unwrap().clone();
    vocab.insert(first, serde_json::Value::from(u32::MAX));
    let bytes = serde_json::to_vec(&json).unwrap();
    let err = Vocabulary::from_bytes(&bytes, Path::new("sparse/tokenizer.json")).unwrap_err();
    let Error::SparseIds { max_id, tokens: counted, .. } = &err else { panic!("{err:?}") };
    assert_eq!((*max_id, *counted >= tokens), (u32::MAX, true));
    let message = err.to_string();
    assert!(message.contains("sparse/tokenizer.json") && message.contains("id 4294967295"), "{message}");
    // Holes of ordinary size are still accepted.
    let vocab = json["model"]["vocab"].as_object_mut().unwrap();
    let first = vocab.keys().next().unwrap().clone();
    vocab.insert(first, serde_json::Value::from(1000));
    let holey = Vocabulary::from_bytes(&serde_json::to_vec(&json).unwrap(), Path::new("holey.json")).unwrap();
    assert_eq!(holey.len(), 1001);
}
