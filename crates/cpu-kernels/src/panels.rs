//! The panel layout of a half-precision [`Matrix`](crate::Matrix) (f16 and bf16 weights): rows
//! in panels of sixteen, each panel stored column by column at two bytes a value, so that one
//! load widened to a 16-lane f32 register holds one column of sixteen rows.
//!
//! # Why
//!
//! Before this layout, f16 and bf16 weights were widened to f32 at load: a half-precision
//! checkpoint then read four bytes per weight per token, twice its own size, and the f32 row
//! kernel computed each (weight row, activation row) output as a dot product ending in a
//! horizontal sum. In panels the weights stay at two bytes (widened in registers as they are
//! loaded), and a column of sixteen weights, loaded once, meets each activation row's value of
//! that column in one multiply-add (the value broadcast from memory as the instruction's
//! operand): sixteen outputs per instruction, no horizontal sums.
//!
//! Measured on SmolLM2-135M converted to f16 at load (`examples`-style timing of the model's
//! k-position pass, best of 12, alternating processes with and without panels on the 2-core
//! Xeon): one position 34–35 → 20 ms on one thread and 17–18 → 10.5–11 ms on two; six
//! positions 44–45 → 23 ms and 23 → 13 ms, i.e. k = 6 costs 1.14–1.24 of one position
//! instead of 1.29–1.37.
//!
//! f32 weights stay in rows: the same panels at four bytes a value measured no faster than the
//! f32 row kernel (one position 19–26 ms either way on two threads, six positions 1.34–1.41 of
//! one in panels against 1.18–1.34 in rows): both layouts are bound by the memory stream, and the
//! f32 row kernel ([`crate::sys`]'s `avx512_f32`) already overlaps its multiply-adds with it.
//!
//! # Layout
//!
//! Panel `p` holds rows `16p..16p+16` (the last padded with zero rows): column `k`'s sixteen
//! values, row by row, then column `k + 1`'s. Values are stored exactly as the source gave them
//! (f16 or bf16, little-endian), so the layout is a permutation of the file's values plus the
//! padding.
//!
//! # The same sums whatever M
//!
//! Each output is summed in two accumulators, the even columns in one and the odd ones in the
//! other, each with fused multiply-adds in column order, then the two added. Nothing in that
//! order depends on the number of activation rows or on which thread computes the panel, so a
//! position's logits are bit for bit the same scored alone or inside a draft, as greedy
//! verification needs. The portable kernel here ([`dot_panels`]) follows the same order with
//! [`f32::mul_add`], and the AVX-512 one (`sys::avx512_panels`) equals it bit for bit (tested).

use std::ops::Range;

use half::{bf16, f16};

use crate::format::WeightFormat;
use crate::sys::weight_memory::WeightBuf;

/// Rows per panel (one 512-bit register of f32 lanes).
pub(crate) const PANEL: usize = 16;

/// Bytes per stored value (f16 and bf16 alike).
const VALUE_BYTES: usize = 2;

/// How the values of a panel are stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Element {
    F16,
    BF16,
}

impl Element {
    /// The element of a half-precision weight format (`None` for the others).
    pub(crate) fn of(format: WeightFormat) -> Option<Element> {
        match format {
            WeightFormat::F16 => Some(Element::F16),
            WeightFormat::BF16 => Some(Element::BF16),
            _ => None,
        }
    }

    /// The value stored at `bytes` (one value's two bytes).
    #[inline]
    fn read(self, bytes: &[u8]) -> f32 {
        match self {
            Element::F16 => f16::from_le_bytes([bytes[0], bytes[1]]).to_f32(),
            Element::BF16 => bf16::from_le_bytes([bytes[0], bytes[1]]).to_f32(),
        }
    }

    /// `value` in this element's bytes, into `out`. Exact for values that came from this
    /// element (the only ones the matrix holds).
    fn write(self, value: f32, out: &mut [u8]) {
        match self {
            Element::F16 => out.copy_from_slice(&f16::from_f32(value).to_le_bytes()),
            Element::BF16 => out.copy_from_slice(&bf16::from_f32(value).to_le_bytes()),
        }
    }
}

/// Bytes of a panel of `cols` columns.
pub(crate) fn panel_bytes(cols: usize) -> usize {
    PANEL * cols * VALUE_BYTES
}

/// Panel `p` of the panels in `data`.
fn panel(data: &[u8], cols: usize, p: usize) -> &[u8] {
    &data[p * panel_bytes(cols)..(p + 1) * panel_bytes(cols)]
}

/// The bytes of column `k`, lane `lane` of a panel.
fn at(k: usize, lane: usize) -> std::ops::Range<usize> {
    let start = (k * PANEL + lane) * VALUE_BYTES;
    start..start + VALUE_BYTES
}

/// The `[rows, cols]` row-major `values` in panels of `element` (see the module docs). The
/// values must be representable in `element` exactly (they were widened from it).
pub(crate) fn pack(element: Element, rows: usize, cols: usize, values: &[f32]) -> WeightBuf {
    let mut buf = WeightBuf::zeroed(rows.div_ceil(PANEL) * panel_bytes(cols));
    for (p, panel) in buf.chunks_exact_mut(panel_bytes(cols)).enumerate() {
        for r in 0..PANEL.min(rows - p * PANEL) {
            let row = &values[(p * PANEL + r) * cols..(p * PANEL + r + 1) * cols];
            for (k, &v) in row.iter().enumerate() {
                element.write(v, &mut panel[at(k, r)]);
            }
        }
    }
    buf
}

/// Row `row` of a panel matrix into `out` (`cols` values).
pub(crate) fn read_row(element: Element, data: &[u8], cols: usize, row: usize, out: &mut [f32]) {
    let (panel, lane) = (panel(data, cols, row / PANEL), row % PANEL);
    for (k, o) in out.iter_mut().enumerate() {
        *o = element.read(&panel[at(k, lane)]);
    }
}

/// For every output `j` of `range`: `outs[i][j - range.start] = Σ_k W[j, k] · x[i·cols + k]`,
/// summed in the order of the module docs. Portable: the reference of the SIMD kernel, and
/// the products on CPUs without it ([`crate::Kernel::dot_panels`] picks).
pub(crate) fn dot_panels(
    element: Element,
    data: &[u8],
    cols: usize,
    range: Range<usize>,
    x: &[f32],
    outs: &mut [&mut [f32]],
) {
    for j in range.clone() {
        let (panel, lane) = (panel(data, cols, j / PANEL), j % PANEL);
        for (i, out) in outs.iter_mut().enumerate() {
            let xs = &x[i * cols..(i + 1) * cols];
            let (mut even, mut odd) = (0.0f32, 0.0f32);
            for (k, &xv) in xs.iter().enumerate() {
                let w = element.read(&panel[at(k, lane)]);
                if k % 2 == 0 {
                    even = w.mul_add(xv, even);
                } else {
                    odd = w.mul_add(xv, odd);
                }
            }
            out[j - range.start] = even + odd;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(rows: usize, cols: usize, seed: u64) -> Vec<f32> {
        let mut unit = crate::test_rng::unit(seed);
        (0..rows * cols).map(|_| unit() - 0.5).collect()
    }

    /// Values rounded through `element`, as a checkpoint of that precision holds them.
    fn in_precision(element: Element, v: &[f32]) -> Vec<f32> {
        v.iter()
            .map(|&x| match element {
                Element::F16 => f16::from_f32(x).to_f32(),
                Element::BF16 => bf16::from_f32(x).to_f32(),
            })
            .collect()
    }

    #[test]
    fn rows_read_back_exactly_and_the_padding_is_zero() {
        for element in [Element::F16, Element::BF16] {
            let (rows, cols) = (37, 24);
            let w = in_precision(element, &values(rows, cols, 7));
            let buf = pack(element, rows, cols, &w);
            assert_eq!(buf.len(), 3 * panel_bytes(cols));
            let mut row = vec![0.0; cols];
            for r in 0..rows {
                read_row(element, &buf, cols, r, &mut row);
                assert_eq!(row, w[r * cols..(r + 1) * cols], "{element:?} row {r}");
            }
            for r in rows..48 {
                read_row(element, &buf, cols, r, &mut row);
                assert!(row.iter().all(|&v| v == 0.0), "{element:?} padding row {r}");
            }
        }
    }

    #[test]
    fn products_match_the_f64_reference_and_do_not_depend_on_the_row_count() {
        for element in [Element::F16, Element::BF16] {
            let (rows, cols) = (40, 33);
            let w = in_precision(element, &values(rows, cols, 3));
            let x = values(8, cols, 5);
            let buf = pack(element, rows, cols, &w);
            let mut all = vec![vec![0.0f32; rows]; 8];
            let mut outs: Vec<&mut [f32]> = all.iter_mut().map(|v| v.as_mut_slice()).collect();
            dot_panels(element, &buf, cols, 0..rows, &x, &mut outs);
            for i in 0..8 {
                for j in 0..rows {
                    let exact: f64 = (0..cols).map(|k| f64::from(w[j * cols + k]) * f64::from(x[i * cols + k])).sum();
                    assert!((f64::from(all[i][j]) - exact).abs() < 1e-5, "{element:?} ({i}, {j})");
                }
            }
            // Row 3 alone, over a range that starts inside a panel: the same bits.
            let mut alone = vec![0.0f32; rows - 5];
            dot_panels(element, &buf, cols, 5..rows, &x[3 * cols..4 * cols], &mut [&mut alone[..]]);
            assert_eq!(alone, all[3][5..]);
        }
    }
}
