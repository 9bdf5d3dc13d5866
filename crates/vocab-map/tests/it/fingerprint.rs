use anyspec_vocab_map::{Error, Vocabulary};

use crate::{fixture, fixture_path, scratch_dir};

#[test]
fn reformatting_a_tokenizer_keeps_its_fingerprint() {
    let original = fixture("sentencepiece.json");
    // serde_json's `Value` sorts object keys, and pretty-printing changes every byte offset.
    let text = std::fs::read_to_string(fixture_path("sentencepiece.json")).unwrap();
    let value: serde_json::Value = serde_json::from_str(&text).unwrap();
    let dir = scratch_dir("reformat");
    let path = dir.join("pretty.json");
    std::fs::write(&path, serde_json::to_string_pretty(&value).unwrap()).unwrap();
    assert_ne!(std::fs::read(&path).unwrap(), text.as_bytes());
    let reloaded = Vocabulary::from_file(&path).unwrap();
    assert_eq!(reloaded.fingerprint(), original.fingerprint());
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn changing_one_token_or_one_flag_changes_the_fingerprint() {
    let original = fixture("tiny_bytelevel.json");
    let text = std::fs::read_to_string(fixture_path("tiny_bytelevel.json")).unwrap();
    let dir = scratch_dir("change");

    // Swapping the ids of `a` and `b` keeps the merges valid and the set of strings equal.
    let swapped = text.replace("\"a\": 0", "\"a\": 1").replace("\"b\": 1", "\"b\": 0");
    assert_ne!(swapped, text);
    let path = dir.join("swapped.json");
    std::fs::write(&path, swapped).unwrap();
    let swapped = Vocabulary::from_file(&path).unwrap();
    assert_eq!(swapped.token(0).unwrap().raw, "b");
    assert_ne!(swapped.fingerprint(), original.fingerprint());

    let not_special = text.replace("\"special\": true", "\"special\": false");
    assert_ne!(not_special, text);
    std::fs::write(&path, not_special).unwrap();
    let not_special = Vocabulary::from_file(&path).unwrap();
    assert_ne!(not_special.fingerprint(), original.fingerprint());
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn different_fixtures_have_different_fingerprints() {
    let names = ["bytelevel.json", "sentencepiece.json", "metaspace.json", "wordpiece.json"];
    let prints: Vec<_> = names.iter().map(|n| fixture(n).fingerprint()).collect();
    for i in 0..prints.len() {
        for j in i + 1..prints.len() {
            assert_ne!(prints[i], prints[j], "{} and {}", names[i], names[j]);
        }
    }
}

#[test]
fn a_missing_or_malformed_tokenizer_is_an_error_naming_the_file() {
    let missing = fixture_path("no-such-tokenizer.json");
    let err = Vocabulary::from_file(&missing).unwrap_err();
    assert!(matches!(err, Error::Io { .. }), "{err:?}");
    assert!(err.to_string().contains("no-such-tokenizer.json"), "{err}");

    let dir = scratch_dir("malformed");
    let path = dir.join("broken.json");
    std::fs::write(&path, "{\"model\": 3}").unwrap();
    let err = Vocabulary::from_file(&path).unwrap_err();
    assert!(matches!(err, Error::Tokenizer { .. }), "{err:?}");
    assert!(err.to_string().contains("broken.json"), "{err}");
    std::fs::remove_dir_all(dir).unwrap();
}
