//! Metadata values and their GGUF type ids.

/// One metadata value. GGUF arrays hold values of one type; arrays of arrays are allowed.
#[derive(Clone, Debug, PartialEq)]
pub enum MetadataValue {
    /// `uint8` (type id 0).
    U8(u8),
    /// `int8` (type id 1).
    I8(i8),
    /// `uint16` (type id 2).
    U16(u16),
    /// `int16` (type id 3).
    I16(i16),
    /// `uint32` (type id 4).
    U32(u32),
    /// `int32` (type id 5).
    I32(i32),
    /// `uint64` (type id 10).
    U64(u64),
    /// `int64` (type id 11).
    I64(i64),
    /// `float32` (type id 6).
    F32(f32),
    /// `float64` (type id 12).
    F64(f64),
    /// `bool` (type id 7), one byte that is 0 or 1.
    Bool(bool),
    /// `string` (type id 8): a u64 length and UTF-8 bytes.
    String(String),
    /// `array` (type id 9): an element type id, a u64 count, the elements.
    Array(Vec<MetadataValue>),
}

/// The GGUF value type ids (`enum gguf_type` in ggml's `gguf.h`).
pub(crate) mod type_id {
    pub(crate) const U8: u32 = 0;
    pub(crate) const I8: u32 = 1;
    pub(crate) const U16: u32 = 2;
    pub(crate) const I16: u32 = 3;
    pub(crate) const U32: u32 = 4;
    pub(crate) const I32: u32 = 5;
    pub(crate) const F32: u32 = 6;
    pub(crate) const BOOL: u32 = 7;
    pub(crate) const STRING: u32 = 8;
    pub(crate) const ARRAY: u32 = 9;
    pub(crate) const U64: u32 = 10;
    pub(crate) const I64: u32 = 11;
    pub(crate) const F64: u32 = 12;
}

/// The deepest nesting of arrays the reader and the writer accept. Real files nest at most once
/// (none of llama.cpp's keys nests); the limit keeps recursion on hostile input shallow.
pub const MAX_ARRAY_DEPTH: usize = 8;

impl MetadataValue {
    /// The GGUF type id of this value.
    pub fn type_id(&self) -> u32 {
        match self {
            MetadataValue::U8(_) => type_id::U8,
            MetadataValue::I8(_) => type_id::I8,
            MetadataValue::U16(_) => type_id::U16,
            MetadataValue::I16(_) => type_id::I16,
            MetadataValue::U32(_) => type_id::U32,
            MetadataValue::I32(_) => type_id::I32,
            MetadataValue::U64(_) => type_id::U64,
            MetadataValue::I64(_) => type_id::I64,
            MetadataValue::F32(_) => type_id::F32,
            MetadataValue::F64(_) => type_id::F64,
            MetadataValue::Bool(_) => type_id::BOOL,
            MetadataValue::String(_) => type_id::STRING,
            MetadataValue::Array(_) => type_id::ARRAY,
        }
    }

    /// The name of this value's type as error messages print it (`"u32"`, `"array of string"`).
    pub fn type_name(&self) -> String {
        match self {
            MetadataValue::Array(items) => match items.first() {
                Some(first) => format!("array of {}", first.type_name()),
                None => "empty array".to_string(),
            },
            other => type_name(other.type_id()).to_string(),
        }
    }

    /// The value as an unsigned integer, when it is an integer of any width that is not negative.
    pub fn as_u64(&self) -> Option<u64> {
        match *self {
            MetadataValue::U8(v) => Some(v.into()),
            MetadataValue::U16(v) => Some(v.into()),
            MetadataValue::U32(v) => Some(v.into()),
            MetadataValue::U64(v) => Some(v),
            MetadataValue::I8(v) => u64::try_from(v).ok(),
            MetadataValue::I16(v) => u64::try_from(v).ok(),
            MetadataValue::I32(v) => u64::try_from(v).ok(),
            MetadataValue::I64(v) => u64::try_from(v).ok(),
            _ => None,
        }
    }

    /// The value as a signed integer, when it is an integer of any width that fits in an `i64`.
    pub fn as_i64(&self) -> Option<i64> {
        match *self {
            MetadataValue::I8(v) => Some(v.into()),
            MetadataValue::I16(v) => Some(v.into()),
            MetadataValue::I32(v) => Some(v.into()),
            MetadataValue::I64(v) => Some(v),
            MetadataValue::U8(v) => Some(v.into()),
            MetadataValue::U16(v) => Some(v.into()),
            MetadataValue::U32(v) => Some(v.into()),
            MetadataValue::U64(v) => i64::try_from(v).ok(),
            _ => None,
        }
    }

    /// The value as an `f32`, when it is an `f32` or an `f64` (rounded to the nearest `f32`).
    pub fn as_f32(&self) -> Option<f32> {
        match *self {
            MetadataValue::F32(v) => Some(v),
            #[allow(clippy::cast_possible_truncation)]
            MetadataValue::F64(v) => Some(v as f32),
            _ => None,
        }
    }

    /// The value as a string slice.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            MetadataValue::String(s) => Some(s),
            _ => None,
        }
    }

    /// The value as a bool.
    pub fn as_bool(&self) -> Option<bool> {
        match *self {
            MetadataValue::Bool(b) => Some(b),
            _ => None,
        }
    }

    /// The elements of an array.
    pub fn as_array(&self) -> Option<&[MetadataValue]> {
        match self {
            MetadataValue::Array(items) => Some(items),
            _ => None,
        }
    }

    /// The depth of array nesting: 0 for a scalar, 1 for an array of scalars.
    pub(crate) fn depth(&self) -> usize {
        match self {
            MetadataValue::Array(items) => 1 + items.iter().map(Self::depth).max().unwrap_or(0),
            _ => 0,
        }
    }

    /// Whether every array in the value holds elements of one type, as GGUF requires.
    pub(crate) fn is_homogeneous(&self) -> bool {
        match self {
            MetadataValue::Array(items) => {
                let Some(first) = items.first() else {
                    return true;
                };
                items.iter().all(|item| item.type_id() == first.type_id() && item.is_homogeneous())
            }
            _ => true,
        }
    }
}

/// The name of GGUF value type `id`, or `"unknown"`.
pub(crate) fn type_name(id: u32) -> &'static str {
    match id {
        type_id::U8 => "u8",
        type_id::I8 => "i8",
        type_id::U16 => "u16",
        type_id::I16 => "i16",
        type_id::U32 => "u32",
        type_id::I32 => "i32",
        type_id::F32 => "f32",
        type_id::BOOL => "bool",
        type_id::STRING => "string",
        type_id::ARRAY => "array",
        type_id::U64 => "u64",
        type_id::I64 => "i64",
        type_id::F64 => "f64",
        _ => "unknown",
    }
}

/// The fewest bytes one value of type `id` can take in a file (a string is at least its length,
/// an array at least its element type and count), or `None` for an unknown id.
pub(crate) fn min_encoded_len(id: u32) -> Option<u64> {
    Some(match id {
        type_id::U8 | type_id::I8 | type_id::BOOL => 1,
        type_id::U16 | type_id::I16 => 2,
        type_id::U32 | type_id::I32 | type_id::F32 => 4,
        type_id::U64 | type_id::I64 | type_id::F64 | type_id::STRING => 8,
        type_id::ARRAY => 12,
        _ => return None,
    })
}

impl From<&str> for MetadataValue {
    fn from(s: &str) -> Self {
        MetadataValue::String(s.to_string())
    }
}

impl From<String> for MetadataValue {
    fn from(s: String) -> Self {
        MetadataValue::String(s)
    }
}

impl From<u32> for MetadataValue {
    fn from(v: u32) -> Self {
        MetadataValue::U32(v)
    }
}

impl From<u64> for MetadataValue {
    fn from(v: u64) -> Self {
        MetadataValue::U64(v)
    }
}

impl From<i32> for MetadataValue {
    fn from(v: i32) -> Self {
        MetadataValue::I32(v)
    }
}

impl From<f32> for MetadataValue {
    fn from(v: f32) -> Self {
        MetadataValue::F32(v)
    }
}

impl From<bool> for MetadataValue {
    fn from(v: bool) -> Self {
        MetadataValue::Bool(v)
    }
}

impl<T: Into<MetadataValue>> From<Vec<T>> for MetadataValue {
    fn from(items: Vec<T>) -> Self {
        MetadataValue::Array(items.into_iter().map(Into::into).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_convert_only_when_they_fit() {
        assert_eq!(MetadataValue::I32(-1).as_u64(), None);
        assert_eq!(MetadataValue::I32(7).as_u64(), Some(7));
        assert_eq!(MetadataValue::U64(u64::MAX).as_i64(), None);
        assert_eq!(MetadataValue::U8(200).as_i64(), Some(200));
        assert_eq!(MetadataValue::F32(1.0).as_u64(), None);
        assert_eq!(MetadataValue::F64(0.5).as_f32(), Some(0.5));
    }

    #[test]
    fn type_names_describe_arrays() {
        let v: MetadataValue = vec!["a", "b"].into();
        assert_eq!(v.type_name(), "array of string");
        assert_eq!(MetadataValue::Array(vec![]).type_name(), "empty array");
        let nested = MetadataValue::Array(vec![MetadataValue::Array(vec![1u32.into()])]);
        assert_eq!(nested.depth(), 2);
        let mixed = MetadataValue::Array(vec![1u32.into(), "x".into()]);
        assert!(!mixed.is_homogeneous());
    }
}
