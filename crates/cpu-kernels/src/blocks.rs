//! [`RowBlocks`]: a matrix's rows copied in the order of a partition into blocks, each block
//! starting on a boundary of the kernels' row groups, so that a product over a few whole
//! blocks reads those blocks' rows and nothing else.
//!
//! # Why
//!
//! A drafter whose LM head is evaluated on a shortlist (DynaSpec's union of routed token
//! clusters, FR-Spec's most frequent tokens) gains only when the shortlisted product costs
//! less than the whole one. On the interleaved layout ([`Matrix::interleave_rows`]: rows in
//! groups of eight, the layout the 8-bit kernels score several positions in) a gathered
//! product ([`Matrix::matmul_rows`]) computes every group its rows touch: a union of clusters
//! scattered over the vocabulary touches most groups (13.6% of SmolLM2's 49,152 ids in 256
//! clusters touched about 70% of its groups) and cost more than the whole head. Copied cluster
//! by cluster, each cluster padded with zero rows to a multiple of sixteen rows (a pair of
//! groups, and a panel of the f16 layout), the same shortlist is a handful of contiguous
//! ranges that the whole-group kernel computes at the cost of their own rows
//! ([`Matrix::matmul_ranges`]).
//!
//! The copy costs the matrix's size again plus the padding (under sixteen rows per block);
//! the outputs are bit for bit those of the source matrix's products.

use crate::{Error, Matrix, Result, Threads};

/// Blocks start on multiples of this many rows: a pair of the interleaved layout's groups of
/// eight (what the AVX-512 kernel reads at once) and one f16/bf16 panel.
pub const BLOCK_ALIGN: usize = 16;

/// A matrix's rows ordered block by block (see the module docs).
#[derive(Debug)]
pub struct RowBlocks {
    matrix: Matrix,
    /// The source rows of each block, in the order they are stored (and output).
    members: Vec<Vec<u32>>,
    /// The first row of each block in `matrix`.
    starts: Vec<usize>,
    source_rows: usize,
}

impl RowBlocks {
    /// The rows of `source` in `blocks` order: block `b`'s rows are `blocks[b]` (source row
    /// indices, in the order their outputs are wanted). Blocks may be empty; a row may be in
    /// several blocks or none.
    ///
    /// # Errors
    /// When a block names a row outside `source`.
    pub fn new(source: &Matrix, blocks: Vec<Vec<u32>>) -> Result<Self> {
        let mut order: Vec<Option<u32>> = Vec::new();
        let mut starts = Vec::with_capacity(blocks.len());
        for block in &blocks {
            if let Some(&bad) = block.iter().find(|&&r| r as usize >= source.rows()) {
                return Err(Error::IndexOutOfRange { what: "block row", index: bad as usize, len: source.rows() });
            }
            starts.push(order.len());
            order.extend(block.iter().map(|&r| Some(r)));
            order.resize(order.len().next_multiple_of(BLOCK_ALIGN), None);
        }
        if order.is_empty() {
            // A matrix needs a row; a partition of nothing still gets one (of zeros).
            order.push(None);
        }
        let matrix = source.gather_rows(&order)?;
        Ok(RowBlocks { matrix, members: blocks, starts, source_rows: source.rows() })
    }

    /// The number of blocks.
    pub fn len(&self) -> usize {
        self.members.len()
    }

    /// Whether there is no block.
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// The source rows of block `b`, in output order (`None` past the last block).
    pub fn members(&self, b: usize) -> Option<&[u32]> {
        self.members.get(b).map(Vec::as_slice)
    }

    /// The rows of the matrix the blocks were copied from.
    pub fn source_rows(&self) -> usize {
        self.source_rows
    }

    /// The input width (`K`).
    pub fn cols(&self) -> usize {
        self.matrix.cols()
    }

    /// Bytes of weights the copy holds, padding included.
    pub fn memory_bytes(&self) -> usize {
        self.matrix.memory_bytes()
    }

    /// The outputs of the rows of the blocks `selected`, concatenated in that order:
    /// `y[m*n + o + j] = Σ_k x[m*cols + k] · W[members(selected[s])[j], k]` where `o` counts the
    /// rows of the blocks before `selected[s]` and `n` all of them
    /// ([`selected_rows`](Self::selected_rows) lists them). Each output equals the source
    /// matrix's, bit for bit.
    ///
    /// # Errors
    /// When a block index is out of range, or `x` or `y` has the wrong length.
    pub fn matmul_blocks(&self, x: &[f32], selected: &[u32], y: &mut [f32], threads: &Threads) -> Result<()> {
        let ranges = selected
            .iter()
            .map(|&b| {
                let b = b as usize;
                match (self.starts.get(b), self.members.get(b)) {
                    (Some(&start), Some(members)) => Ok(start..start + members.len()),
                    _ => Err(Error::IndexOutOfRange { what: "block", index: b, len: self.members.len() }),
                }
            })
            .collect::<Result<Vec<_>>>()?;
        self.matrix.matmul_ranges(x, &ranges, y, threads)
    }

    /// The source rows of the blocks `selected`, concatenated in that order: the row of each
    /// output of [`matmul_blocks`](Self::matmul_blocks). Block indices out of range are skipped.
    pub fn selected_rows(&self, selected: &[u32]) -> Vec<u32> {
        selected.iter().filter_map(|&b| self.members(b as usize)).flatten().copied().collect()
    }
}
