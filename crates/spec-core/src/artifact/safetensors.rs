//! The safetensors writer and checksum that anyspec's safetensors artifacts share (the RDK
//! affinity matrix, the DynaSpec router): byte-reproducible files, checked on load.

use std::collections::BTreeMap;

use sha2::{Digest, Sha256};

/// One 1-D tensor to write: its name, its safetensors dtype name (`"F32"`, `"U32"`, …), its
/// element count and its little-endian bytes.
pub type SafetensorsVector<'a> = (&'a str, &'a str, usize, &'a [u8]);

/// The safetensors bytes of `tensors` with the header in a fixed order: `__metadata__` first,
/// its keys sorted, then the tensors as given, the header padded to 8 bytes.
///
/// `safetensors::serialize` takes the metadata as a `HashMap` and writes it in that map's
/// per-instance random order, so two builds of the same artifact differed in their header bytes;
/// every anyspec artifact is byte-reproducible, so the header is written here.
pub fn serialize_safetensors(tensors: &[SafetensorsVector<'_>], metadata: &BTreeMap<String, String>) -> Vec<u8> {
    let mut header = String::from("{\"__metadata__\":{");
    for (i, (key, value)) in metadata.iter().enumerate() {
        if i > 0 {
            header.push(',');
        }
        header.push_str(&format!("{}:{}", json_string(key), json_string(value)));
    }
    header.push('}');
    let mut offset = 0usize;
    for &(name, dtype, len, data) in tensors {
        let end = offset + data.len();
        header.push_str(&format!(
            ",{}:{{\"dtype\":\"{dtype}\",\"shape\":[{len}],\"data_offsets\":[{offset},{end}]}}",
            json_string(name)
        ));
        offset = end;
    }
    header.push('}');
    while header.len() % 8 != 0 {
        header.push(' ');
    }
    let mut bytes = Vec::with_capacity(8 + header.len() + offset);
    bytes.extend_from_slice(&(header.len() as u64).to_le_bytes());
    bytes.extend_from_slice(header.as_bytes());
    for &(_, _, _, data) in tensors {
        bytes.extend_from_slice(data);
    }
    bytes
}

/// SHA-256 (lowercase hex) over the metadata entries (in key order) and the tensors (in the
/// given order), each piece length-prefixed so that no two different contents hash alike. The
/// writer stores it under the metadata key `checksum` (computed without that key), and the
/// loader recomputes it.
pub fn artifact_checksum<'a>(
    metadata: &BTreeMap<String, String>,
    tensors: impl Iterator<Item = (&'a str, &'a [u8])>,
) -> String {
    let mut hasher = Sha256::new();
    let mut piece = |bytes: &[u8]| {
        hasher.update((bytes.len() as u64).to_le_bytes());
        hasher.update(bytes);
    };
    for (k, v) in metadata {
        piece(k.as_bytes());
        piece(v.as_bytes());
    }
    for (name, data) in tensors {
        piece(name.as_bytes());
        piece(data);
    }
    hasher.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// `text` as a JSON string literal (RFC 8259 §7: quote, backslash and control characters
/// escaped).
fn json_string(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_strings_escape_quotes_backslashes_and_control_characters() {
        assert_eq!(json_string("plain"), "\"plain\"");
        assert_eq!(json_string("a\"b\\c"), "\"a\\\"b\\\\c\"");
        assert_eq!(json_string("tab\tnl\n"), "\"tab\\u0009nl\\u000a\"");
        assert_eq!(json_string("ünï"), "\"ünï\"");
    }

    #[test]
    fn the_header_is_sorted_padded_and_the_data_follows_in_order() {
        let metadata: BTreeMap<String, String> = [("b", "2"), ("a", "1")].map(|(k, v)| (k.into(), v.into())).into();
        let ones = 1.0f32.to_le_bytes();
        let bytes = serialize_safetensors(&[("x", "F32", 1, &ones)], &metadata);
        let len = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
        assert_eq!(len % 8, 0);
        let header = std::str::from_utf8(&bytes[8..8 + len]).unwrap().trim_end();
        assert_eq!(
            header,
            "{\"__metadata__\":{\"a\":\"1\",\"b\":\"2\"},\"x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}"
        );
        assert_eq!(&bytes[8 + len..], &ones);
    }

    #[test]
    fn the_checksum_changes_with_any_piece_and_with_where_pieces_split() {
        let meta = |v: &str| -> BTreeMap<String, String> { [("k".to_string(), v.to_string())].into() };
        let base = artifact_checksum(&meta("v"), [("t", &b"ab"[..])].into_iter());
        assert_eq!(base.len(), 64);
        assert_ne!(base, artifact_checksum(&meta("w"), [("t", &b"ab"[..])].into_iter()));
        assert_ne!(base, artifact_checksum(&meta("v"), [("t", &b"ac"[..])].into_iter()));
        // The same bytes cut differently between name and data hash differently.
        assert_ne!(base, artifact_checksum(&meta("v"), [("ta", &b"b"[..])].into_iter()));
    }
}
