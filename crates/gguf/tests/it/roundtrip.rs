//! Writer → reader round trips.

use anyspec_gguf::{Error, GgmlType, GgufFile, GgufWriter, MetadataValue};

use crate::fixtures::{small_file, small_writer, temp_path};

fn every_value() -> Vec<(&'static str, MetadataValue)> {
    use MetadataValue as V;
    vec![
        ("u8", V::U8(255)),
        ("i8", V::I8(-128)),
        ("u16", V::U16(65535)),
        ("i16", V::I16(-32768)),
        ("u32", V::U32(u32::MAX)),
        ("i32", V::I32(i32::MIN)),
        ("u64", V::U64(u64::MAX)),
        ("i64", V::I64(i64::MIN)),
        ("f32", V::F32(-1.5e-7)),
        ("f64", V::F64(f64::INFINITY)),
        ("bool.true", V::Bool(true)),
        ("bool.false", V::Bool(false)),
        ("string", V::String("héllo ✓ 😀\n\0".into())),
        ("string.empty", V::String(String::new())),
        ("array.empty", V::Array(vec![])),
        ("array.f64", V::Array(vec![V::F64(1.0), V::F64(-0.25)])),
        ("array.i16", V::Array(vec![V::I16(-1), V::I16(2)])),
        ("array.bool", V::Array(vec![V::Bool(false), V::Bool(true)])),
        ("array.string", vec!["a", "", "ü"].into()),
        ("array.array", V::Array(vec![V::Array(vec![V::U8(1), V::U8(2)]), V::Array(vec![]), V::Array(vec![V::U8(3)])])),
        ("array.array.array", V::Array(vec![V::Array(vec![V::Array(vec!["deep".into()])])])),
    ]
}

#[test]
fn every_metadata_type_round_trips_in_order() {
    let mut w = GgufWriter::new();
    for (key, value) in every_value() {
        w.metadata(key, value);
    }
    let file = GgufFile::from_bytes(w.try_to_bytes().unwrap()).unwrap();
    assert_eq!(file.version(), 3);
    assert_eq!(file.path(), None);
    assert!(file.tensors().is_empty());
    let expected: Vec<(String, MetadataValue)> = every_value().into_iter().map(|(k, v)| (k.to_string(), v)).collect();
    assert_eq!(file.metadata(), expected.as_slice());
    for (key, value) in every_value() {
        assert_eq!(file.get(key), Some(&value), "{key}");
    }
}

#[test]
fn typed_getters_convert_and_name_the_key_and_types() {
    let mut w = GgufWriter::new();
    for (key, value) in every_value() {
        w.metadata(key, value);
    }
    let file = GgufFile::from_bytes(w.to_bytes()).unwrap();
    assert_eq!(file.get_u64("u8").unwrap(), 255);
    assert_eq!(file.get_u64("u64").unwrap(), u64::MAX);
    assert_eq!(file.get_u32("u16").unwrap(), 65535);
    assert_eq!(file.get_i64("i8").unwrap(), -128);
    assert_eq!(file.get_f32("f32").unwrap(), -1.5e-7);
    assert_eq!(file.get_f32("f64").unwrap(), f32::INFINITY);
    assert!(file.get_bool("bool.true").unwrap());
    assert_eq!(file.get_str("string").unwrap(), "héllo ✓ 😀\n\0");
    assert_eq!(file.get_array("array.string").unwrap().len(), 3);

    let err = file.get_u64("i32").unwrap_err().to_string();
    assert_eq!(err, "the GGUF bytes: metadata key 'i32' should be a non-negative integer, found i32 -2147483648");
    let err = file.get_u32("u64").unwrap_err().to_string();
    assert!(err.contains("found u64 18446744073709551615"), "{err}");
    let err = file.get_str("array.string").unwrap_err().to_string();
    assert!(err.contains("'array.string' should be a string, found array of string"), "{err}");
    let err = file.get_f32("u8").unwrap_err().to_string();
    assert!(err.contains("should be a float, found u8"), "{err}");
    let err = file.get_bool("missing.key").unwrap_err();
    assert!(matches!(&err, Error::MissingKey { key, .. } if key == "missing.key"), "{err}");
}

#[test]
fn tensors_round_trip_aligned() {
    let bytes = small_file();
    let file = GgufFile::from_bytes(bytes).unwrap();
    assert_eq!(file.alignment(), 32);
    let names: Vec<&str> = file.tensors().iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["t0", "t1", "t2"]);
    for t in file.tensors() {
        assert_eq!(t.offset % 32, 0, "{}", t.name);
        assert!(t.offset >= file.data_offset());
        assert_eq!(file.tensor_data(t).len() as u64, t.byte_len());
    }
    let t0 = file.tensor("t0").unwrap();
    assert_eq!((t0.dims.as_slice(), t0.ggml_type), (&[8u64, 2][..], GgmlType::F32));
    assert_eq!(&file.tensor_data(t0)[4 * 15..], &15f32.to_le_bytes());
    let t1 = file.tensor("t1").unwrap();
    assert_eq!(file.tensor_data(t1), (0..68u8).collect::<Vec<_>>().as_slice());
    assert_eq!(file.tensor("nope"), None);
}

#[test]
fn custom_alignment_is_honoured() {
    let mut w = small_writer();
    w.metadata("general.alignment", MetadataValue::U32(256));
    let file = GgufFile::from_bytes(w.to_bytes()).unwrap();
    assert_eq!(file.alignment(), 256);
    for t in file.tensors() {
        assert_eq!(t.offset % 256, 0, "{}", t.name);
    }
    assert_eq!(file.tensor_data(file.tensor("t2").unwrap()), &[1; 8]);
}

#[test]
fn the_writer_refuses_what_gguf_cannot_hold() {
    let mut w = GgufWriter::new();
    let err = w.tensor("t", &[8, 2], GgmlType::F32, vec![0; 63]).unwrap_err().to_string();
    assert!(err.contains("63 bytes of data given, a F32 tensor of dims [8, 2] has 64"), "{err}");
    let err = w.tensor("q", &[16], GgmlType::Q4_0, vec![0; 9]).unwrap_err().to_string();
    assert!(err.contains("not whole Q4_0 blocks of 32"), "{err}");
    w.tensor("t", &[1], GgmlType::F32, vec![0; 4]).unwrap();
    let err = w.tensor("t", &[1], GgmlType::F32, vec![0; 4]).unwrap_err().to_string();
    assert!(err.contains("already added"), "{err}");
    let err = w.tensor("big", &[1, 1, 1, 1, 1], GgmlType::F32, vec![0; 4]).unwrap_err().to_string();
    assert!(err.contains("at most 4 dims"), "{err}");

    w.metadata("mixed", MetadataValue::Array(vec![1u32.into(), "x".into()]));
    let err = w.try_to_bytes().unwrap_err().to_string();
    assert!(err.contains("'mixed'") && err.contains("mixes types"), "{err}");
    // to_bytes leaves the refused value out and stays readable.
    let file = GgufFile::from_bytes(w.to_bytes()).unwrap();
    assert_eq!(file.get("mixed"), None);
}

#[test]
fn metadata_set_twice_keeps_the_last_value_in_the_first_place() {
    let mut w = GgufWriter::new();
    w.metadata("a", 1u32.into()).metadata("b", 2u32.into()).metadata("a", 3u32.into());
    let file = GgufFile::from_bytes(w.to_bytes()).unwrap();
    let keys: Vec<&str> = file.metadata().iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(keys, ["a", "b"]);
    assert_eq!(file.get_u64("a").unwrap(), 3);
}

#[test]
fn written_files_open_from_disk_and_leave_no_temporary_file() {
    let path = temp_path("write");
    small_writer().write(&path).unwrap();
    let file = GgufFile::open(&path).unwrap();
    assert_eq!(file.path(), Some(path.as_path()));
    assert_eq!(file.bytes(), small_file().as_slice());
    assert_eq!(file.get_str("general.name").unwrap(), "tiny");
    let dir = path.parent().unwrap();
    let stem = path.file_name().unwrap().to_string_lossy().to_string();
    let leftovers = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| {
            let name = e.file_name().to_string_lossy().to_string();
            name.starts_with(&stem) && name.ends_with(".tmp")
        })
        .count();
    assert_eq!(leftovers, 0);
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn write_errors_name_the_path() {
    let path = std::path::Path::new("/nonexistent-anyspec-dir/x.gguf");
    let err = small_writer().write(path).unwrap_err();
    assert!(matches!(&err, Error::Write { .. }));
    assert_eq!(err.to_string(), "cannot write /nonexistent-anyspec-dir/x.gguf");
    assert!(std::error::Error::source(&err).is_some());
}
