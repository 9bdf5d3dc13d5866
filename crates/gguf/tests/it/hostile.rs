//! Hostile and corrupt input: errors that say what is wrong, never a panic.

use anyspec_gguf::{Error, GgufFile, GgufWriter, MetadataValue, check_bytes};
use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed};

use crate::fixtures::{find, put_u32, put_u64, small_file, small_writer, temp_path, tensor_info_fields};

fn parse_err(bytes: Vec<u8>) -> Error {
    match GgufFile::from_bytes(bytes) {
        Ok(_) => panic!("corrupt bytes were accepted"),
        Err(e) => e,
    }
}

/// The end of the last tensor's data: every shorter prefix of the file is incomplete.
fn data_end(bytes: &[u8]) -> usize {
    let file = GgufFile::from_bytes(bytes.to_vec()).unwrap();
    file.tensors().iter().map(|t| (t.offset + t.byte_len()) as usize).max().unwrap()
}

#[test]
fn every_truncation_is_an_error_naming_the_offset() {
    let bytes = small_file();
    let file = GgufFile::from_bytes(bytes.clone()).unwrap();
    let header_end = file.data_offset() as usize;
    for cut in 0..data_end(&bytes) {
        let err = parse_err(bytes[..cut].to_vec());
        match &err {
            Error::Truncated { offset, .. } => {
                assert_eq!(*offset, cut as u64, "{err}");
                assert!(cut < header_end, "cut {cut} in the data: {err}");
            }
            Error::TensorOutOfBounds { file_len, .. } => assert_eq!(*file_len, cut as u64),
            other => panic!("cut at {cut}: unexpected error {other}"),
        }
    }
}

#[test]
fn truncated_files_on_disk_name_the_path_the_offset_and_the_fix() {
    let bytes = small_file();
    let at = find(&bytes, b"general.name") + "general.name".len() + 4 + 8 + 2;
    let path = temp_path("truncated");
    std::fs::write(&path, &bytes[..at]).unwrap();
    let err = GgufFile::open(&path).unwrap_err().to_string();
    std::fs::remove_file(&path).unwrap();
    assert_eq!(
        err,
        format!(
            "{} is truncated at byte {at} while reading the metadata value of 'general.name'; the file is incomplete, download it again",
            path.display()
        )
    );
}

#[test]
fn missing_files_name_the_path_and_keep_the_os_error_as_source() {
    let err = GgufFile::open("/nonexistent-anyspec/model.gguf").unwrap_err();
    assert_eq!(err.to_string(), "cannot read /nonexistent-anyspec/model.gguf");
    assert!(std::error::Error::source(&err).is_some());
}

#[test]
fn other_formats_are_recognised() {
    let mut safetensors = 12u64.to_le_bytes().to_vec();
    safetensors.extend_from_slice(b"{\"w\":{}}    ");
    let cases: [(&[u8], &str); 6] = [
        (&safetensors, "safetensors"),
        (b"PK\x03\x04rest", "zip archive"),
        (b"version https://git-lfs.github.com/spec/v1\n", "Git LFS pointer"),
        (b"<!DOCTYPE html><html>", "HTML page"),
        (b"tjggxxxx", "pre-GGUF"),
        (b"\x00\x01\x02\x03\x04", "is not a GGUF file"),
    ];
    for (bytes, expected) in cases {
        let err = parse_err(bytes.to_vec());
        assert!(matches!(err, Error::BadMagic { .. }), "{err}");
        assert!(err.to_string().contains(expected), "{err}");
    }
    let err = parse_err(Vec::new());
    assert!(matches!(err, Error::Truncated { offset: 0, .. }), "{err}");
}

#[test]
fn versions_other_than_2_and_3_are_refused() {
    let mut bytes = small_file();
    put_u32(&mut bytes, 4, 2);
    assert_eq!(GgufFile::from_bytes(bytes.clone()).unwrap().version(), 2);
    put_u32(&mut bytes, 4, 1);
    let err = parse_err(bytes.clone()).to_string();
    assert!(err.contains("GGUF version 1") && err.contains("convert the model again"), "{err}");
    bytes[4..8].copy_from_slice(&3u32.to_be_bytes());
    let err = parse_err(bytes.clone()).to_string();
    assert!(err.contains("version 3, in big-endian byte order"), "{err}");
    put_u32(&mut bytes, 4, 99);
    assert!(parse_err(bytes).to_string().contains("version 99"));
}

#[test]
fn absurd_counts_are_refused_before_allocating() {
    let bytes = small_file();
    for (at, what) in [(8, "tensor infos"), (16, "metadata entries")] {
        let mut b = bytes.clone();
        put_u64(&mut b, at, u64::MAX / 2);
        let err = parse_err(b);
        match &err {
            Error::AbsurdCount { what: w, offset, .. } => {
                assert_eq!((w.as_str(), *offset), (what, at as u64), "{err}");
            }
            other => panic!("{other}"),
        }
    }
    // A string length larger than the file.
    let mut b = bytes.clone();
    let key_len_at = find(&b, b"general.name") - 8;
    put_u64(&mut b, key_len_at, 1 << 40);
    let err = parse_err(b);
    assert!(matches!(err, Error::AbsurdCount { .. }), "{err}");
    assert!(err.to_string().contains("1099511627776 bytes of string"), "{err}");
    // An array count larger than the file.
    let mut b = bytes;
    let count_at = find(&b, b"tokenizer.ggml.tokens") + "tokenizer.ggml.tokens".len() + 4 + 4;
    put_u64(&mut b, count_at, u64::MAX);
    let err = parse_err(b);
    assert!(err.to_string().contains("array elements"), "{err}");
}

#[test]
fn deeply_nested_arrays_are_refused() {
    // Build 40 levels of nesting by hand (the writer refuses to).
    let mut bytes = b"GGUF".to_vec();
    bytes.extend_from_slice(&3u32.to_le_bytes());
    bytes.extend_from_slice(&0u64.to_le_bytes());
    bytes.extend_from_slice(&1u64.to_le_bytes());
    bytes.extend_from_slice(&1u64.to_le_bytes());
    bytes.push(b'k');
    bytes.extend_from_slice(&9u32.to_le_bytes());
    for _ in 0..40 {
        bytes.extend_from_slice(&9u32.to_le_bytes());
        bytes.extend_from_slice(&1u64.to_le_bytes());
    }
    bytes.extend_from_slice(&[0; 64]);
    let err = parse_err(bytes);
    assert!(matches!(err, Error::NestingTooDeep { max: 8, .. }), "{err}");
    let mut w = GgufWriter::new();
    let mut v = MetadataValue::U8(0);
    for _ in 0..9 {
        v = MetadataValue::Array(vec![v]);
    }
    w.metadata("deep", v);
    assert!(w.try_to_bytes().is_err());
}

#[test]
fn unknown_type_ids_name_the_tensor_or_key() {
    let bytes = small_file();
    let (_, _, type_at, _) = tensor_info_fields(&bytes, "t1");
    let mut b = bytes.clone();
    put_u32(&mut b, type_at, 31);
    let err = parse_err(b);
    assert_eq!(
        err.to_string(),
        "the GGUF bytes: tensor 't1' has unknown ggml type id 31; the file needs a newer reader, or is corrupt"
    );
    let mut b = bytes.clone();
    let value_type_at = find(&b, b"k0") + 2;
    put_u32(&mut b, value_type_at, 13);
    let err = parse_err(b).to_string();
    assert!(err.contains("metadata value type id in the metadata value of 'k0'"), "{err}");
    assert!(err.contains(": 13;"), "{err}");
    let mut b = bytes;
    let bool_at = find(&b, b"k1") + 2 + 4;
    b[bool_at] = 2;
    let err = parse_err(b).to_string();
    assert!(err.contains("invalid bool byte"), "{err}");
}

#[test]
fn tensor_offsets_are_checked() {
    let bytes = small_file();
    let (_, _, _, t1_offset) = tensor_info_fields(&bytes, "t1");
    let mut b = bytes.clone();
    put_u64(&mut b, t1_offset, 1 << 20);
    let err = parse_err(b);
    assert!(matches!(&err, Error::TensorOutOfBounds { tensor, .. } if tensor == "t1"), "{err}");
    let mut b = bytes.clone();
    put_u64(&mut b, t1_offset, u64::MAX - 31);
    let err = parse_err(b);
    assert!(matches!(err, Error::TensorOutOfBounds { .. }), "{err}");
    let mut b = bytes.clone();
    put_u64(&mut b, t1_offset, 4);
    let err = parse_err(b).to_string();
    assert!(err.contains("'t1' starts at data offset 4, which is not a multiple of the alignment 32"), "{err}");
    let mut b = bytes;
    put_u64(&mut b, t1_offset, 32);
    let err = parse_err(b);
    assert!(matches!(&err, Error::TensorsOverlap { first, second, .. } if first == "t0" && second == "t1"), "{err}");
}

#[test]
fn impossible_shapes_are_refused() {
    let bytes = small_file();
    let (n_dims_at, dim0_at, _, _) = tensor_info_fields(&bytes, "t1");
    let mut b = bytes.clone();
    put_u64(&mut b, dim0_at, 16);
    let err = parse_err(b).to_string();
    assert!(err.contains("rows of 16 elements are not whole Q8_0 blocks of 32"), "{err}");
    let mut b = bytes.clone();
    put_u64(&mut b, dim0_at, 1 << 62);
    put_u64(&mut b, dim0_at + 8, 1 << 62);
    let err = parse_err(b).to_string();
    assert!(err.contains("overflows"), "{err}");
    let mut b = bytes;
    put_u32(&mut b, n_dims_at, 5);
    let err = parse_err(b).to_string();
    assert!(err.contains("dim count"), "{err}");
}

#[test]
fn duplicates_are_refused() {
    let bytes = small_file();
    let mut b = bytes.clone();
    let k1 = find(&b, b"k1");
    b[k1 + 1] = b'0';
    let err = parse_err(b);
    assert_eq!(err.to_string(), "the GGUF bytes has the metadata key 'k0' twice; the file is corrupt");
    let mut b = bytes;
    let (t1, ..) = tensor_info_fields(&b, "t1");
    b[t1 - 1] = b'0';
    let err = parse_err(b);
    assert!(matches!(&err, Error::DuplicateTensor { name, .. } if name == "t0"), "{err}");
}

#[test]
fn bad_alignment_and_strings_are_refused() {
    for value in [MetadataValue::U32(24), MetadataValue::U32(0), MetadataValue::U64(32)] {
        let mut w = small_writer();
        w.metadata("general.alignment", value);
        let err = parse_err(w.to_bytes());
        assert!(matches!(err, Error::BadAlignment { .. }), "{err}");
    }
    let mut b = small_file();
    let at = find(&b, b"tiny");
    b[at] = 0xff;
    let err = parse_err(b);
    assert!(matches!(err, Error::InvalidUtf8 { .. }), "{err}");
}

#[test]
fn check_bytes_also_checks_the_tokenizer() {
    assert!(check_bytes(&small_file()).is_ok());
    let mut w = small_writer();
    w.metadata("tokenizer.ggml.bos_token_id", MetadataValue::U32(5));
    let err = check_bytes(&w.to_bytes()).unwrap_err().to_string();
    assert!(err.contains("bos_token_id is 5 but the vocabulary has 5 tokens"), "{err}");
}

#[test]
fn every_single_byte_flip_in_the_header_is_handled() {
    let bytes = small_file();
    let header_end = GgufFile::from_bytes(bytes.clone()).unwrap().data_offset() as usize;
    for at in 0..header_end {
        for mask in [0x01, 0x80, 0xff] {
            let mut b = bytes.clone();
            b[at] ^= mask;
            // Either outcome is fine; the point is that neither panics.
            let _ = check_bytes(&b);
        }
    }
}

/// A mutation of the small file.
#[derive(Clone, Debug)]
enum Mutation {
    Set(usize, u8),
    Insert(usize, Vec<u8>),
    Remove(usize, usize),
    /// Overwrite 8 bytes with a large little-endian number (a count or length).
    Huge(usize, u64),
}

fn apply(bytes: &mut Vec<u8>, m: &Mutation) {
    let len = bytes.len();
    match m {
        Mutation::Set(at, v) => bytes[at % len] = *v,
        Mutation::Insert(at, v) => {
            let at = at % (len + 1);
            bytes.splice(at..at, v.iter().copied());
        }
        Mutation::Remove(at, n) => {
            let at = at % len;
            let end = (at + n).min(len);
            bytes.drain(at..end);
        }
        Mutation::Huge(at, v) => {
            if len >= 8 {
                let at = at % (len - 7);
                bytes[at..at + 8].copy_from_slice(&v.to_le_bytes());
            }
        }
    }
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        4 => (any::<usize>(), any::<u8>()).prop_map(|(a, v)| Mutation::Set(a, v)),
        1 => (any::<usize>(), proptest::collection::vec(any::<u8>(), 1..16))
            .prop_map(|(a, v)| Mutation::Insert(a, v)),
        1 => (any::<usize>(), 1usize..32).prop_map(|(a, n)| Mutation::Remove(a, n)),
        1 => (any::<usize>(), prop_oneof![Just(u64::MAX), Just(1u64 << 32), Just(1u64 << 62), any::<u64>()])
            .prop_map(|(a, v)| Mutation::Huge(a, v)),
    ]
}

proptest! {
    #![proptest_config(Config {
        cases: 3000,
        rng_seed: RngSeed::Fixed(0x6767_7566),
        failure_persistence: None,
        ..Config::default()
    })]

    /// Random mutations of a valid file (with a tokenizer) never panic; whatever parses has
    /// tensor data inside the file.
    #[test]
    fn mutated_files_never_panic(mutations in proptest::collection::vec(mutation(), 1..6)) {
        let mut bytes = small_file();
        for m in &mutations {
            apply(&mut bytes, m);
        }
        let _ = check_bytes(&bytes);
        if let Ok(file) = GgufFile::from_bytes(bytes.clone()) {
            for t in file.tensors() {
                prop_assert_eq!(file.tensor_data(t).len() as u64, t.byte_len());
                prop_assert!(t.offset + t.byte_len() <= bytes.len() as u64);
            }
        }
    }
}
