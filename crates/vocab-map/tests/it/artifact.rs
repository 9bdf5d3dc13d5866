use anyspec_vocab_map::artifact::{FORMAT_VERSION, MAGIC};
use anyspec_vocab_map::{Error, MatchMode, VocabMap};

use crate::{fixture, scratch_dir};

fn saved_map(test: &str) -> (std::path::PathBuf, VocabMap) {
    let dir = scratch_dir(test);
    let path = dir.join("map.asvm");
    let map = VocabMap::build(&fixture("bytelevel.json"), &fixture("metaspace.json"), MatchMode::Bytes);
    map.save(&path).unwrap();
    (path, map)
}

#[test]
fn a_saved_map_loads_back_equal() {
    let (path, map) = saved_map("roundtrip");
    let loaded = VocabMap::load(&path, &fixture("bytelevel.json"), &fixture("metaspace.json")).unwrap();
    assert_eq!(loaded, map);
    assert!(loaded.intersection() > 0);
    std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
}

#[test]
fn a_truncated_file_is_reported_as_truncated_at_every_length() {
    let (path, _) = saved_map("truncated");
    let bytes = std::fs::read(&path).unwrap();
    for len in [0, 3, 8, 12, 19, 20, bytes.len() / 2, bytes.len() - 1] {
        let err = VocabMap::from_bytes(&bytes[..len], &path).unwrap_err();
        assert!(matches!(err, Error::Truncated { .. }), "length {len}: {err:?}");
        assert!(err.to_string().contains("truncated"), "{err}");
    }
    std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
}

#[test]
fn every_flipped_payload_byte_is_caught() {
    let (path, _) = saved_map("flipped");
    let bytes = std::fs::read(&path).unwrap();
    // Every byte after the header; a flip in the length field shows up as truncation or trailing
    // bytes, and is checked separately below.
    for at in (20..bytes.len()).step_by(7) {
        let mut damaged = bytes.clone();
        damaged[at] ^= 0x10;
        let err = VocabMap::from_bytes(&damaged, &path).unwrap_err();
        assert!(matches!(err, Error::Checksum { .. }), "byte {at}: {err:?}");
    }
    let mut damaged = bytes.clone();
    damaged[12] ^= 0x01;
    assert!(VocabMap::from_bytes(&damaged, &path).is_err());
    std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
}

#[test]
fn another_version_is_named_as_such() {
    let (path, _) = saved_map("version");
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[8..12].copy_from_slice(&(FORMAT_VERSION + 1).to_le_bytes());
    let err = VocabMap::from_bytes(&bytes, &path).unwrap_err();
    assert!(
        matches!(err, Error::Version { found, expected, .. } if found == FORMAT_VERSION + 1 && expected == FORMAT_VERSION)
    );
    assert!(err.to_string().contains("rebuild"), "{err}");
    // A damaged version field is not a version: the file is reported damaged.
    bytes[8..12].copy_from_slice(&16_711_681u32.to_le_bytes());
    let err = VocabMap::from_bytes(&bytes, &path).unwrap_err();
    assert!(matches!(err, Error::InvalidMap { .. }) && err.to_string().contains("damaged"), "{err}");
    std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
}

#[test]
fn a_foreign_file_is_not_a_map() {
    let (path, _) = saved_map("magic");
    let err = VocabMap::from_bytes(b"{\"model\": {}} and more bytes than a header", &path).unwrap_err();
    assert!(matches!(err, Error::BadMagic { .. }), "{err:?}");
    assert_eq!(&MAGIC, b"ASVOCMAP");
    let err = VocabMap::from_bytes(b"ANYSPDIC\x01\0\0\0 and the rest of a dictionary", &path).unwrap_err();
    assert!(err.to_string().contains("it holds an n-gram dictionary"), "{err}");
    std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
}

#[test]
fn loading_against_another_tokenizer_names_both_fingerprints() {
    let (path, _) = saved_map("wrong");
    let target = fixture("bytelevel.json");
    let wrong_drafter = fixture("sentencepiece.json");
    let err = VocabMap::load(&path, &target, &wrong_drafter).unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, Error::WrongTokenizer { role: "drafter", .. }), "{err:?}");
    assert!(text.contains(&fixture("metaspace.json").fingerprint().to_string()), "{text}");
    assert!(text.contains(&wrong_drafter.fingerprint().to_string()), "{text}");
    let err = VocabMap::load(&path, &wrong_drafter, &fixture("metaspace.json")).unwrap_err();
    assert!(matches!(err, Error::WrongTokenizer { role: "target", .. }), "{err:?}");
    std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
}
