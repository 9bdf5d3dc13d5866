//! Corrupt, truncated and wrong-tokenizer dictionaries are clear errors.

use std::path::Path;

use anyspec_dict_builder::{Dictionary, Error};
use anyspec_vocab_map::Fingerprint;

use crate::common::{FINGERPRINT, crafted, temp_dir};

fn bytes() -> Vec<u8> {
    let dictionary = crafted(&[(&[1, 2], &[3]), (&[2], &[4, 5])]);
    let dir = temp_dir("errors-src");
    let path = dir.join("d.dict");
    // Round-trip through a file so the test also covers the memory-mapped path.
    let entries = dictionary.entries();
    assert_eq!(entries.len(), 2);
    let raw = {
        let sorted: Vec<anyspec_dict_builder::TableEntry<'_>> = entries
            .iter()
            .map(|(p, c)| anyspec_dict_builder::TableEntry { prefix: p, continuation: c, count: 1, total: 1 })
            .collect();
        anyspec_dict_builder::encode_dictionary(&sorted, &FINGERPRINT, &Default::default(), 0, 0).unwrap()
    };
    anyspec_dict_builder::write_dictionary(&path, &raw).unwrap();
    let mapped = Dictionary::open(&path, &FINGERPRINT).unwrap();
    assert_eq!(mapped.entries(), entries);
    std::fs::remove_dir_all(&dir).unwrap();
    raw
}

fn load(bytes: Vec<u8>) -> Result<Dictionary, Error> {
    Dictionary::from_bytes(bytes, Path::new("test.dict"), &FINGERPRINT)
}

#[test]
fn truncated_files_are_corrupt_at_every_length() {
    let bytes = bytes();
    for cut in 0..bytes.len() {
        let err = load(bytes[..cut].to_vec()).unwrap_err();
        assert!(matches!(err, Error::Corrupt { .. } | Error::BadMagic { .. }), "cut at {cut}: {err}");
        assert!(err.to_string().contains("test.dict"), "{err}");
    }
}

#[test]
fn any_flipped_byte_is_detected() {
    let bytes = bytes();
    for at in 0..bytes.len() {
        let mut damaged = bytes.clone();
        damaged[at] ^= 0x20;
        assert!(load(damaged).is_err(), "flipping byte {at} went unnoticed");
    }
}

#[test]
fn another_tokenizer_is_refused_naming_both_fingerprints() {
    let other = Fingerprint([9; 32]);
    let err = Dictionary::from_bytes(bytes(), Path::new("uk.dict"), &other).unwrap_err();
    let message = err.to_string();
    assert!(matches!(err, Error::WrongTokenizer { .. }));
    assert!(message.contains(&FINGERPRINT.to_string()) && message.contains(&other.to_string()), "{message}");
}

#[test]
fn other_files_and_versions_are_named() {
    assert!(matches!(load(b"{\"not\": \"a dictionary\"}".to_vec()), Err(Error::BadMagic { .. })));
    let mut future = bytes();
    future[8] = 2;
    assert!(matches!(load(future), Err(Error::Version { found: 2, .. })));
    let mut damaged = bytes();
    damaged[8..12].copy_from_slice(&16_711_681u32.to_le_bytes());
    assert!(matches!(load(damaged), Err(Error::Corrupt { .. })));
    let mut shard = b"ASNGRCNT".to_vec();
    shard.extend_from_slice(&[1; 100]);
    let err = load(shard).unwrap_err().to_string();
    assert!(err.contains("it holds an n-gram count shard"), "{err}");
    let directory = Dictionary::open(&std::env::temp_dir(), &FINGERPRINT).unwrap_err();
    let message = anyhow_like(&directory);
    assert!(message.contains("is a directory") && !message.contains("No such device"), "{message}");
    let missing = Dictionary::open(Path::new("/nonexistent/x.dict"), &FINGERPRINT).unwrap_err().to_string();
    assert!(missing.contains("/nonexistent/x.dict"), "{missing}");
}

/// The error and its sources, as the CLI prints them (`{:#}` of an anyhow error).
fn anyhow_like(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// Found by `cargo xtask fuzz` (dictionary target): a damaged byte inside the FST section, under
/// a recomputed file checksum, made the fst crate panic while walking nodes (index out of bounds,
/// subtraction overflow, "1 <= nbytes && nbytes <= 8") at six places. Every such byte is now
/// refused by the FST's own checksum.
#[test]
fn every_damaged_fst_byte_is_an_error_not_a_panic() {
    let entries: [(&[u32], &[u32]); 4] = [(&[1, 2], &[3]), (&[2], &[4, 5]), (&[7, 8, 9], &[10]), (&[300], &[70_000])];
    let sorted: Vec<anyspec_dict_builder::TableEntry<'_>> = entries
        .iter()
        .map(|&(prefix, continuation)| anyspec_dict_builder::TableEntry { prefix, continuation, count: 1, total: 1 })
        .collect();
    let original = anyspec_dict_builder::encode_dictionary(&sorted, &FINGERPRINT, &Default::default(), 0, 0).unwrap();
    let info_len = u32::from_le_bytes(original[44..48].try_into().unwrap()) as usize;
    let fst_len = u64::from_le_bytes(original[48..56].try_into().unwrap()) as usize;
    let fst_start = 64 + info_len;
    assert!(fst_len > 20);
    for at in fst_start..fst_start + fst_len {
        for value in [0x00, 0xFF, 0x80, original[at] ^ 0x01] {
            if value == original[at] {
                continue;
            }
            let mut bytes = original.clone();
            bytes[at] = value;
            let body = bytes.len() - 4;
            let crc = crc32fast::hash(&bytes[..body]);
            bytes[body..].copy_from_slice(&crc.to_le_bytes());
            let err = Dictionary::from_bytes(bytes, Path::new("damaged.dict"), &FINGERPRINT).unwrap_err();
            assert!(matches!(err, Error::Corrupt { .. }), "byte {at} = {value:#x}: {err}");
        }
    }
}

/// Found by reading while triaging the fuzz findings: a count shard that repeats an n-gram added
/// its counts together, which overflowed (a panic in debug builds, a wrong count in release).
/// Entries are written sorted and unique, so a repeat is refused as damage; merged shards
/// saturate instead of overflowing.
#[test]
fn a_repeated_shard_entry_is_refused_and_merges_saturate() {
    use anyspec_dict_builder::NgramCounts;
    let shard = |entries: &[(&str, u64)]| {
        let mut bytes = b"ASNGRCNT".to_vec();
        for field in [1u32, anyspec_dict_builder::words::SEGMENTATION_VERSION, 1] {
            bytes.extend_from_slice(&field.to_le_bytes());
        }
        bytes.extend_from_slice(&0u64.to_le_bytes());
        bytes.extend_from_slice(&(entries.len() as u64).to_le_bytes());
        for (surface, count) in entries {
            bytes.push(surface.len() as u8);
            bytes.extend_from_slice(surface.as_bytes());
            let mut count = *count;
            while count >= 0x80 {
                bytes.push(count as u8 | 0x80);
                count >>= 7;
            }
            bytes.push(count as u8);
        }
        let crc = crc32fast::hash(&bytes);
        bytes.extend_from_slice(&crc.to_le_bytes());
        bytes
    };
    let err =
        NgramCounts::from_shard_bytes(&shard(&[("a", u64::MAX), ("a", 1)]), Path::new("twice.counts")).unwrap_err();
    assert!(err.to_string().contains("order-1 n-gram repeated or out of order"), "{err}");
    let err = NgramCounts::from_shard_bytes(&shard(&[("b", 1), ("a", 1)]), Path::new("unsorted.counts")).unwrap_err();
    assert!(err.to_string().contains("repeated or out of order"), "{err}");
    let mut total = NgramCounts::from_shard_bytes(&shard(&[("a", u64::MAX)]), Path::new("one.counts")).unwrap();
    total.merge(NgramCounts::from_shard_bytes(&shard(&[("a", 5)]), Path::new("two.counts")).unwrap()).unwrap();
    assert_eq!(total.get(1, "a"), u64::MAX);
}
