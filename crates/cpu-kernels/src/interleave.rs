//! The interleaved layout of a [`Matrix`](crate::Matrix): weight rows in groups of eight, the
//! blocks of the eight rows that cover the same 32 columns stored together, so that one SIMD
//! register holds four weights of each of eight rows.
//!
//! # Why
//!
//! With rows stored one after the other, a kernel reduces each (weight row, 32-block,
//! activation row) product to a scalar on its own: an integer dot product, a conversion to
//! float, a scale multiply and a multiply-add, per 32 multiply-adds. Scoring a draft of k
//! tokens is then bound by these instructions, not by the weights read from memory: every
//! extra position cost about 0.45 of a single step on SmolLM2 Q4_1 (the same as llama.cpp's
//! row kernels). Interleaved, the eight rows' products of a 32-block finish in the eight lanes
//! of one register: the conversion, scale and multiply-adds are shared by eight rows, and the
//! integer sums of a block are added in 16-bit lanes before they are widened. The design is
//! llama.cpp's repacked `Q4_0` 8×8 layout (`ggml-cpu/repack.cpp`), written here for `Q4_0`,
//! `Q4_1` and `Q8_0` with our own nibble order.
//!
//! # Layout
//!
//! Group `g` holds rows `8g..8g+8` (padded with all-zero rows to a whole pair of groups). The
//! groups follow each other in one of two [`Order`]s, chosen for the kernel that will read
//! them, so that it reads its weights in one sequential stream:
//!
//! - [`Order::Groups`], group after group, each group's blocks in column order, for kernels
//!   that take eight rows at a time (AVX2);
//! - [`Order::Pairs`], pairs of groups block by block (the group block of group `2p` for the
//!   32-column block index `b`, then that of group `2p + 1`, then both for `b + 1`), for
//!   kernels that take sixteen rows at a time (AVX-512).
//!
//! Measured on this project's 2-core AMD EPYC (Zen 5), `Q4_1` 1536×576 from memory: the
//! AVX-512 kernel reading two groups stored one after the other (two streams) was 1.4× slower
//! at one activation row than in pairs; the AVX2 kernel reading pairs (every other group block)
//! was 1.3× slower at one row and 1.6× at six than group after group, and the `Q8_0` LM head
//! 1.75× at six rows. Every kernel reads either order (the results do not depend on it).
//!
//! The 8 blocks of one group and block index `b` (`8 · block_bytes` bytes) are stored as:
//!
//! - the block headers' 16-bit fields, field by field, eight lanes each: `d` of rows 0..8 (16
//!   bytes), then (`Q4_1`) `m` of rows 0..8;
//! - the payload in 4-byte chunks, chunk by chunk, eight lanes each: chunk `t` of rows 0..8 is
//!   32 bytes, lane `r` holding bytes `4t..4t+4` of row `r`'s payload.
//!
//! For `Q4_0`/`Q4_1` payload byte `j` holds weight `j` in its low nibble and weight `j + 16` in
//! its high nibble (ggml's order), so chunk `t`'s low nibbles are weights `4t..4t+4` of each row
//! and its high nibbles weights `16+4t..16+4t+4`. Every byte of the file is kept: the layout is
//! a permutation of the bytes, exact, and the same size as the rows (plus the padding rows).

use crate::format::WeightFormat;
use crate::sys::weight_memory::WeightBuf;

/// Rows per group.
pub(crate) const GROUP: usize = 8;

/// Groups in a pair.
const PAIR: usize = 2;

/// How the groups follow each other in memory (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Order {
    /// Group after group.
    Groups,
    /// Pairs of groups, block by block.
    Pairs,
}

impl Order {
    /// Group blocks from one of a group's blocks to its next.
    fn step(self) -> usize {
        match self {
            Order::Groups => 1,
            Order::Pairs => PAIR,
        }
    }

    /// Bytes from one of a group's blocks to its next.
    pub(crate) fn stride(self, format: WeightFormat) -> usize {
        self.step() * GROUP * format.block_bytes()
    }

    /// Where group `g`'s block `b` starts (rows of `blocks` blocks).
    #[inline]
    pub(crate) fn block_offset(self, format: WeightFormat, blocks: usize, g: usize, b: usize) -> usize {
        let step = self.step();
        ((g / step * blocks + b) * step + g % step) * GROUP * format.block_bytes()
    }
}

/// Interleaved weights and the order of their groups.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Grouped<'a> {
    pub(crate) data: &'a [u8],
    pub(crate) order: Order,
}

/// Bytes of the interleaved data that holds groups `0..groups` (padded to whole pairs in
/// either order, so that the data does not depend on the order in size).
pub(crate) fn stored_bytes(format: WeightFormat, blocks: usize, groups: usize) -> usize {
    groups.div_ceil(PAIR) * PAIR * group_bytes(format, blocks)
}

/// Whether `format` has an interleaved layout (and a kernel that reads it).
pub(crate) fn supports(format: WeightFormat) -> bool {
    matches!(format, WeightFormat::Q8_0 | WeightFormat::Q4_0 | WeightFormat::Q4_1)
}

/// Bytes of a block's header (its 16-bit scale fields) in `format`.
fn header_bytes(format: WeightFormat) -> usize {
    match format {
        WeightFormat::Q4_1 => 4,
        _ => 2,
    }
}

/// Where byte `k` of lane `lane`'s block lands inside an interleaved group block.
#[inline]
fn position(format: WeightFormat, lane: usize, k: usize) -> usize {
    let header = header_bytes(format);
    if k < header {
        (k / 2) * 2 * GROUP + lane * 2 + k % 2
    } else {
        let payload = k - header;
        header * GROUP + (payload / 4) * 4 * GROUP + lane * 4 + payload % 4
    }
}

/// Bytes of one group of `blocks` blocks per row.
pub(crate) fn group_bytes(format: WeightFormat, blocks: usize) -> usize {
    GROUP * blocks * format.block_bytes()
}

/// `rows` rows of `blocks` blocks each (`data`, row-major ggml blocks) in the interleaved
/// layout. `format` must be one that [`supports`] accepts.
pub(crate) fn interleave(format: WeightFormat, rows: usize, blocks: usize, data: &[u8], order: Order) -> WeightBuf {
    let bb = format.block_bytes();
    let row_bytes = blocks * bb;
    let mut out = WeightBuf::zeroed(stored_bytes(format, blocks, rows.div_ceil(GROUP)));
    let header = header_bytes(format);
    for (r, row) in data.chunks_exact(row_bytes).take(rows).enumerate() {
        let (g, lane) = (r / GROUP, r % GROUP);
        for (b, block) in row.chunks_exact(bb).enumerate() {
            let base = order.block_offset(format, blocks, g, b);
            // Two bytes per header field and four per payload chunk, as `position` places them
            // (the byte-by-byte loop took half a second for SmolLM2's 96 MB).
            for k in (0..header).step_by(2) {
                let at = base + position(format, lane, k);
                out[at..at + 2].copy_from_slice(&block[k..k + 2]);
            }
            for k in (header..bb).step_by(4) {
                let at = base + position(format, lane, k);
                out[at..at + 4].copy_from_slice(&block[k..k + 4]);
            }
        }
    }
    out
}

/// Row `row`'s blocks, as they lay in the file, read back from the interleaved `data` into
/// `out` (`blocks · block_bytes` bytes).
pub(crate) fn row_blocks(format: WeightFormat, blocks: usize, groups: Grouped<'_>, row: usize, out: &mut [u8]) {
    let (data, order) = (groups.data, groups.order);
    let bb = format.block_bytes();
    let (g, lane) = (row / GROUP, row % GROUP);
    for (b, block) in out.chunks_exact_mut(bb).take(blocks).enumerate() {
        let base = order.block_offset(format, blocks, g, b);
        for (k, byte) in block.iter_mut().enumerate() {
            *byte = data[base + position(format, lane, k)];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_are_a_permutation_of_the_group_block() {
        for format in [WeightFormat::Q8_0, WeightFormat::Q4_0, WeightFormat::Q4_1] {
            let size = GROUP * format.block_bytes();
            let mut seen = vec![false; size];
            for lane in 0..GROUP {
                for k in 0..format.block_bytes() {
                    let p = position(format, lane, k);
                    assert!(p < size && !seen[p], "{format} lane {lane} byte {k} -> {p}");
                    seen[p] = true;
                }
            }
            assert!(seen.iter().all(|&s| s), "{format}");
        }
    }

    #[test]
    fn rows_read_back_equal_the_rows_written() {
        for (format, order) in [WeightFormat::Q8_0, WeightFormat::Q4_0, WeightFormat::Q4_1]
            .into_iter()
            .flat_map(|f| [(f, Order::Groups), (f, Order::Pairs)])
        {
            let (rows, blocks) = (13, 3);
            let row_bytes = blocks * format.block_bytes();
            let data: Vec<u8> = (0..rows * row_bytes).map(|i| (i * 7 + i / 13) as u8).collect();
            let packed = interleave(format, rows, blocks, &data, order);
            let grouped = Grouped { data: &packed, order };
            // 13 rows: two groups, one pair.
            assert_eq!(packed.len(), 2 * group_bytes(format, blocks));
            assert_eq!(stored_bytes(format, blocks, 3), 4 * group_bytes(format, blocks));
            let mut row = vec![0u8; row_bytes];
            for r in 0..rows {
                row_blocks(format, blocks, grouped, r, &mut row);
                assert_eq!(row, &data[r * row_bytes..(r + 1) * row_bytes], "{format} {order:?} row {r}");
            }
            // The padding rows are zero.
            row_blocks(format, blocks, grouped, 15, &mut row);
            assert!(row.iter().all(|&b| b == 0));
            // The first lane's first chunk: bytes 0..4 of row 0's payload.
            let h = header_bytes(format);
            assert_eq!(&packed[h * GROUP..h * GROUP + 4], &data[h..h + 4], "{format}");
            // Row 8's first block (group 1): right after group 0's first block in pairs,
            // after all of group 0's blocks otherwise.
            let second = match order {
                Order::Pairs => group_bytes(format, 1),
                Order::Groups => group_bytes(format, blocks),
            };
            assert_eq!(&packed[second + h * GROUP..second + h * GROUP + 4], &data[8 * row_bytes + h..][..4]);
        }
    }
}
