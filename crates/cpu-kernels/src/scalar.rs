//! The portable kernel: plain Rust, any CPU. It is also the reference the SIMD kernels are
//! tested against (through the f64 reference of the tests).

use crate::format::{WeightFormat, dequantize_block};
use crate::matrix::RowRef;

/// `out[i] = Σ_k row[k] · x[i*cols + k]` for the `out.len()` activation rows in `x`.
///
/// Each block is dequantized once into a small buffer and applied to every activation row.
pub(crate) fn dot_row(format: WeightFormat, row: RowRef<'_>, x: &[f32], cols: usize, out: &mut [f32]) {
    out.fill(0.0);
    match row {
        RowRef::F32(w) => {
            for (i, o) in out.iter_mut().enumerate() {
                let xs = &x[i * cols..(i + 1) * cols];
                *o = w.iter().zip(xs).map(|(a, b)| a * b).sum();
            }
        }
        RowRef::Blocks(bytes) => {
            let bl = format.block_len();
            let mut buf = [0.0f32; 256];
            let w = &mut buf[..bl];
            for (b, block) in bytes.chunks_exact(format.block_bytes()).enumerate() {
                dequantize_block(format, block, w);
                for (i, o) in out.iter_mut().enumerate() {
                    let xs = &x[i * cols + b * bl..i * cols + (b + 1) * bl];
                    *o += w.iter().zip(xs).map(|(a, b)| a * b).sum::<f32>();
                }
            }
        }
    }
}
