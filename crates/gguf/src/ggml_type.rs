//! The ggml tensor types: ids, names and block geometry.
//!
//! The table follows `enum ggml_type` in ggml's `ggml/include/ggml.h` and the block structs in
//! `ggml/src/ggml-common.h`. Every type, even one anyspec cannot compute with, carries its block
//! length and block size so that the byte length of every tensor of a file can be checked against
//! the file's length before any data is touched.

/// A ggml tensor type, as stored in a GGUF tensor info.
///
/// A quantized type stores its values in blocks of [`block_len`](Self::block_len) elements,
/// each [`block_bytes`](Self::block_bytes) bytes long; a plain type has blocks of one element.
/// Ids 4, 5 (the removed `Q4_2`, `Q4_3`), 31 to 33 and 36 to 38 (the removed repacked
/// `Q4_0_4_4`… and `IQ4_NL_4_4`… layouts, which ggml no longer accepts in GGUF files) have no
/// variant.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum GgmlType {
    /// 32-bit IEEE float.
    F32,
    /// 16-bit IEEE float.
    F16,
    /// 4-bit, 32 per block, one f16 scale.
    Q4_0,
    /// 4-bit, 32 per block, f16 scale and f16 minimum.
    Q4_1,
    /// 5-bit, 32 per block, one f16 scale.
    Q5_0,
    /// 5-bit, 32 per block, f16 scale and f16 minimum.
    Q5_1,
    /// 8-bit, 32 per block, one f16 scale.
    Q8_0,
    /// 8-bit, 32 per block, f16 scale and f16 sum (an activation format).
    Q8_1,
    /// 2-bit k-quant, 256 per super-block.
    Q2K,
    /// 3-bit k-quant, 256 per super-block.
    Q3K,
    /// 4-bit k-quant, 256 per super-block.
    Q4K,
    /// 5-bit k-quant, 256 per super-block.
    Q5K,
    /// 6-bit k-quant, 256 per super-block.
    Q6K,
    /// 8-bit k-quant, 256 per super-block (an activation format).
    Q8K,
    /// 2.0625-bit i-quant.
    Iq2Xxs,
    /// 2.3125-bit i-quant.
    Iq2Xs,
    /// 3.0625-bit i-quant.
    Iq3Xxs,
    /// 1.5625-bit i-quant.
    Iq1S,
    /// 4.5-bit non-linear quant, 32 per block.
    Iq4Nl,
    /// 3.4375-bit i-quant.
    Iq3S,
    /// 2.5-bit i-quant.
    Iq2S,
    /// 4.25-bit non-linear quant, 256 per super-block.
    Iq4Xs,
    /// 8-bit signed integer.
    I8,
    /// 16-bit signed integer.
    I16,
    /// 32-bit signed integer.
    I32,
    /// 64-bit signed integer.
    I64,
    /// 64-bit IEEE float.
    F64,
    /// 1.75-bit i-quant.
    Iq1M,
    /// bfloat16.
    Bf16,
    /// Ternary quant, 1.6875 bits.
    Tq1_0,
    /// Ternary quant, 2.0625 bits.
    Tq2_0,
    /// OCP microscaling FP4: 32 e2m1 values and one e8m0 scale.
    Mxfp4,
    /// NVIDIA FP4: 64 e2m1 values with four e4m3 scales.
    Nvfp4,
    /// 1-bit sign quant, 128 per block, one f16 scale.
    Q1_0,
}

/// (type, id, name, block length, block bytes), in id order.
const TABLE: &[(GgmlType, u32, &str, u64, u64)] = &[
    (GgmlType::F32, 0, "F32", 1, 4),
    (GgmlType::F16, 1, "F16", 1, 2),
    (GgmlType::Q4_0, 2, "Q4_0", 32, 18),
    (GgmlType::Q4_1, 3, "Q4_1", 32, 20),
    (GgmlType::Q5_0, 6, "Q5_0", 32, 22),
    (GgmlType::Q5_1, 7, "Q5_1", 32, 24),
    (GgmlType::Q8_0, 8, "Q8_0", 32, 34),
    (GgmlType::Q8_1, 9, "Q8_1", 32, 36),
    (GgmlType::Q2K, 10, "Q2_K", 256, 84),
    (GgmlType::Q3K, 11, "Q3_K", 256, 110),
    (GgmlType::Q4K, 12, "Q4_K", 256, 144),
    (GgmlType::Q5K, 13, "Q5_K", 256, 176),
    (GgmlType::Q6K, 14, "Q6_K", 256, 210),
    (GgmlType::Q8K, 15, "Q8_K", 256, 292),
    (GgmlType::Iq2Xxs, 16, "IQ2_XXS", 256, 66),
    (GgmlType::Iq2Xs, 17, "IQ2_XS", 256, 74),
    (GgmlType::Iq3Xxs, 18, "IQ3_XXS", 256, 98),
    (GgmlType::Iq1S, 19, "IQ1_S", 256, 50),
    (GgmlType::Iq4Nl, 20, "IQ4_NL", 32, 18),
    (GgmlType::Iq3S, 21, "IQ3_S", 256, 110),
    (GgmlType::Iq2S, 22, "IQ2_S", 256, 82),
    (GgmlType::Iq4Xs, 23, "IQ4_XS", 256, 136),
    (GgmlType::I8, 24, "I8", 1, 1),
    (GgmlType::I16, 25, "I16", 1, 2),
    (GgmlType::I32, 26, "I32", 1, 4),
    (GgmlType::I64, 27, "I64", 1, 8),
    (GgmlType::F64, 28, "F64", 1, 8),
    (GgmlType::Iq1M, 29, "IQ1_M", 256, 56),
    (GgmlType::Bf16, 30, "BF16", 1, 2),
    (GgmlType::Tq1_0, 34, "TQ1_0", 256, 54),
    (GgmlType::Tq2_0, 35, "TQ2_0", 256, 66),
    (GgmlType::Mxfp4, 39, "MXFP4", 32, 17),
    (GgmlType::Nvfp4, 40, "NVFP4", 64, 36),
    (GgmlType::Q1_0, 41, "Q1_0", 128, 18),
];

impl GgmlType {
    /// Every type this crate knows, in id order.
    pub fn all() -> impl Iterator<Item = GgmlType> {
        TABLE.iter().map(|row| row.0)
    }

    /// The type with ggml id `id`, or `None` for an id that is unknown or was removed from ggml.
    pub fn from_id(id: u32) -> Option<Self> {
        TABLE.iter().find(|row| row.1 == id).map(|row| row.0)
    }

    fn row(self) -> &'static (GgmlType, u32, &'static str, u64, u64) {
        // The table has one row per variant (a unit test checks it), so the search always
        // succeeds; the fallback row keeps this function total without a panic.
        TABLE.iter().find(|row| row.0 == self).unwrap_or(&TABLE[0])
    }

    /// The ggml id stored in GGUF files.
    pub fn id(self) -> u32 {
        self.row().1
    }

    /// ggml's name for the type (`"Q4_1"`, `"BF16"`).
    pub fn name(self) -> &'static str {
        self.row().2
    }

    /// Elements per block (1 for plain types).
    pub fn block_len(self) -> u64 {
        self.row().3
    }

    /// Bytes per block.
    pub fn block_bytes(self) -> u64 {
        self.row().4
    }

    /// Whether the type stores its values in blocks of more than one element.
    pub fn is_quantized(self) -> bool {
        self.block_len() > 1
    }

    /// The bytes of `elements` values, or `None` when `elements` is not a whole number of
    /// blocks or the size overflows.
    pub fn bytes_for(self, elements: u64) -> Option<u64> {
        if !elements.is_multiple_of(self.block_len()) {
            return None;
        }
        (elements / self.block_len()).checked_mul(self.block_bytes())
    }
}

impl std::fmt::Display for GgmlType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_consistent() {
        let mut last = None;
        for &(ty, id, name, len, bytes) in TABLE {
            assert_eq!(GgmlType::from_id(id), Some(ty), "{name}");
            assert_eq!(ty.id(), id);
            assert_eq!(ty.name(), name);
            assert_eq!(ty.block_len(), len);
            assert_eq!(ty.block_bytes(), bytes);
            assert!(last < Some(id), "ids ascend");
            last = Some(id);
        }
        let distinct: std::collections::HashSet<_> = GgmlType::all().collect();
        assert_eq!(distinct.len(), TABLE.len());
    }

    #[test]
    fn removed_and_unknown_ids_are_none() {
        for id in [4, 5, 31, 32, 33, 36, 37, 38, 42, 1000, u32::MAX] {
            assert_eq!(GgmlType::from_id(id), None, "{id}");
        }
    }

    #[test]
    fn block_sizes_match_ggml_structs() {
        // block_q4_1: f16 d, f16 m, 16 bytes of nibbles.
        assert_eq!(GgmlType::Q4_1.block_bytes(), 2 + 2 + 16);
        // block_q8_0: f16 d, 32 i8.
        assert_eq!(GgmlType::Q8_0.block_bytes(), 2 + 32);
        // block_q6_K: ql[128], qh[64], scales[16], f16 d.
        assert_eq!(GgmlType::Q6K.block_bytes(), 128 + 64 + 16 + 2);
        assert_eq!(GgmlType::Q4_1.bytes_for(64), Some(40));
        assert_eq!(GgmlType::Q4_1.bytes_for(33), None);
        assert_eq!(GgmlType::F32.bytes_for(u64::MAX), None);
    }
}
