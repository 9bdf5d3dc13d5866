//! CPU matrix kernels for decoding: a weight matrix in f32, f16, bf16 or a GGML quantized
//! format, multiplied by 1 to 8 activation rows in one pass over the weights.
//!
//! (The full guide is being written.)
//!
//! ```
//! use anyspec_cpu_kernels::{Matrix, Threads, WeightFormat, quantize};
//! # fn main() -> anyspec_cpu_kernels::Result<()> {
//! let (rows, cols) = (4, 64);
//! let w: Vec<f32> = (0..rows * cols).map(|i| (i % 7) as f32 - 3.0).collect();
//! let matrix = Matrix::from_bytes(WeightFormat::Q8_0, rows, cols, &quantize(WeightFormat::Q8_0, &w)?)?;
//! let x = vec![1.0f32; 2 * cols]; // two activation rows
//! let mut y = vec![0.0f32; 2 * rows];
//! matrix.matmul(&x, &mut y, &Threads::new(2)?)?;
//! let exact: f32 = matrix.to_f32()[..cols].iter().sum();
//! assert!((y[0] - exact).abs() < 1e-4);
//! # Ok(())
//! # }
//! ```

mod error;
mod format;
mod kernel;
mod matrix;
mod scalar;
mod sys;
mod threads;

pub use error::{Error, Result};
pub use format::{WeightFormat, dequantize, quantize};
pub use kernel::Kernel;
pub use matrix::Matrix;
pub use threads::Threads;
