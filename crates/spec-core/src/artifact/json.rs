//! [`JsonSyntax`]: a check that bytes are well-formed JSON, without building a tree.

use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};

/// Deserializes from any well-formed JSON value and keeps nothing: `serde_json::from_slice::<
/// JsonSyntax>(bytes)` checks a whole document's syntax, strings included (escapes and
/// surrogates; `serde::de::IgnoredAny` skips over invalid ones), in constant memory.
///
/// Loaders run it before handing bytes to a parser that panics on some malformed JSON (the
/// `tokenizers` crate does, in its `decoder` section).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct JsonSyntax;

impl<'de> Deserialize<'de> for JsonSyntax {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(Checker)
    }
}

struct Checker;

impl<'de> Visitor<'de> for Checker {
    type Value = JsonSyntax;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<JsonSyntax, E> {
        Ok(JsonSyntax)
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<JsonSyntax, E> {
        Ok(JsonSyntax)
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<JsonSyntax, E> {
        Ok(JsonSyntax)
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<JsonSyntax, E> {
        Ok(JsonSyntax)
    }

    fn visit_str<E: de::Error>(self, _: &str) -> Result<JsonSyntax, E> {
        Ok(JsonSyntax)
    }

    fn visit_unit<E: de::Error>(self) -> Result<JsonSyntax, E> {
        Ok(JsonSyntax)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<JsonSyntax, A::Error> {
        while seq.next_element::<JsonSyntax>()?.is_some() {}
        Ok(JsonSyntax)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<JsonSyntax, A::Error> {
        while map.next_entry::<JsonSyntax, JsonSyntax>()?.is_some() {}
        Ok(JsonSyntax)
    }
}
