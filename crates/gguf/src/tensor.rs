//! Tensor infos.

use crate::ggml_type::GgmlType;

/// Where one tensor lives in a GGUF file and what it holds.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TensorInfo {
    /// The tensor's name (`"blk.0.attn_q.weight"`).
    pub name: String,
    /// ggml order: `dims[0]` is the contiguous (row) length, so a PyTorch `[out, in]` weight is
    /// stored as `[in, out]`.
    pub dims: Vec<u64>,
    /// The element type.
    pub ggml_type: GgmlType,
    /// Offset of the data from the start of the file (not from the start of the data section,
    /// as the file stores it).
    pub offset: u64,
}

impl TensorInfo {
    /// The number of elements (the product of the dims; 1 for a tensor without dims), saturated
    /// at `u64::MAX` (the reader refuses tensors whose count overflows).
    pub fn element_count(&self) -> u64 {
        self.dims.iter().fold(1u64, |acc, &d| acc.saturating_mul(d))
    }

    /// The bytes of the tensor's data: whole blocks of its type. Saturates at `u64::MAX` for
    /// shapes the reader refuses (rows that are not whole blocks round up).
    pub fn byte_len(&self) -> u64 {
        let blocks = self.element_count().div_ceil(self.ggml_type.block_len());
        blocks.saturating_mul(self.ggml_type.block_bytes())
    }

    /// The number of rows (the product of every dim but the first).
    pub fn rows(&self) -> u64 {
        self.dims.iter().skip(1).fold(1u64, |acc, &d| acc.saturating_mul(d))
    }

    /// The bytes of one row (`dims[0]` elements).
    pub fn row_bytes(&self) -> u64 {
        let row = self.dims.first().copied().unwrap_or(1);
        row.div_ceil(self.ggml_type.block_len()).saturating_mul(self.ggml_type.block_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_follow_the_block_geometry() {
        let t = TensorInfo { name: "w".into(), dims: vec![576, 1536], ggml_type: GgmlType::Q4_1, offset: 0 };
        assert_eq!(t.element_count(), 576 * 1536);
        assert_eq!(t.row_bytes(), 576 / 32 * 20);
        assert_eq!(t.rows(), 1536);
        assert_eq!(t.byte_len(), 576 * 1536 / 32 * 20);
        let scalar = TensorInfo { dims: vec![], ggml_type: GgmlType::F32, ..t.clone() };
        assert_eq!(scalar.byte_len(), 4);
        let huge = TensorInfo { dims: vec![u64::MAX, 3], ggml_type: GgmlType::F32, ..t };
        assert_eq!(huge.byte_len(), u64::MAX);
    }
}
