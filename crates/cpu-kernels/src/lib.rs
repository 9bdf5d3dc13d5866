//! CPU matrix kernels for decoding: a weight matrix in f32, f16, bf16 or a GGML quantized
//! format (`Q8_0`, `Q4_0`, `Q4_1`, `Q4_K`, `Q6_K`), multiplied by 1 to 8 activation rows in one
//! pass over the weights, with SIMD where the CPU has it and on every core.
//!
//! This is the linear layer of the native CPU runtime (`anyspec-models`): every projection of
//! a Llama block and the LM head. Pure Rust, no tensor library.
//!
//! # Example
//!
//! ```
//! use anyspec_cpu_kernels::{Kernel, Matrix, Threads, WeightFormat, quantize};
//! # fn main() -> anyspec_cpu_kernels::Result<()> {
//! let (rows, cols) = (4, 64); // 4 outputs, 64 inputs: PyTorch's Linear.weight [out, in]
//! let w: Vec<f32> = (0..rows * cols).map(|i| (i % 7) as f32 - 3.0).collect();
//! let bytes = quantize(WeightFormat::Q4_1, &w)?; // what a GGUF file would hold
//! let mut matrix = Matrix::from_bytes(WeightFormat::Q4_1, rows, cols, &bytes)?;
//! let threads = Threads::new(2)?; // build once, share with every matrix
//!
//! let x = vec![0.5f32; 3 * cols]; // three activation rows: a draft of two tokens + one
//! let mut y = vec![0.0f32; 3 * rows];
//! matrix.matmul(&x, &mut y, &threads)?; // y[m * rows + n] = Σ_k x[m * cols + k] · W[n, k]
//!
//! // The exact-weights kernel agrees with the dequantized matrix to f32 rounding (the default
//! // one rounds the activations to 8 bits, like llama.cpp).
//! matrix.set_kernel(Kernel::Avx2).or_else(|_| matrix.set_kernel(Kernel::Scalar))?;
//! matrix.matmul(&x, &mut y, &threads)?;
//! let exact: f32 = matrix.to_f32()[..cols].iter().map(|w| 0.5 * w).sum();
//! assert!((y[0] - exact).abs() <= 1e-4 * exact.abs().max(1.0));
//!
//! // A shortlist of output rows (a pruned LM head), gathered in place.
//! let mut top = vec![0.0f32; 3 * 2];
//! matrix.matmul_rows(&x, &[3, 0], &mut top, &threads)?;
//! assert_eq!(top[1], y[0]);
//! # Ok(())
//! # }
//! ```
//!
//! # Formats
//!
//! [`WeightFormat`] names ggml's block layouts byte for byte (`ggml-common.h`): a GGUF tensor's
//! data is handed to [`Matrix::from_bytes`] as it lies in the file. [`dequantize`] is the
//! reference: scalar code that follows ggml's `dequantize_row_*` operation by operation (f32
//! products and sums, rounded separately, no fused multiply-add), which is also what gguf-py
//! (and transformers loading a GGUF) computes. [`quantize`] is ggml's `quantize_row_*_ref` for
//! `Q8_0`, `Q4_0` and `Q4_1`, for building test models.
//!
//! # Layout, and why repack
//!
//! A [`Matrix`] keeps quantized weights quantized (peak memory stays near the file size), and
//! [`Matrix::from_shared_bytes`] reads them in place from a shared owner (a memory map of the
//! GGUF file) so that a loaded model costs the file's pages once: rows of ggml blocks, each
//! row contiguous, so a kernel streams a row front to back and the
//! hardware prefetcher sees a few sequential streams. [`Matrix::from_bytes_permuted`] reorders
//! whole rows at load (exact for every format; the loader undoes llama.cpp's Q/K row
//! permutation with it), and [`Matrix::matmul_rows`] reads any subset of rows without copying
//! them. f16 and bf16 are widened to f32 at load (exact), and [`Matrix::interleave_rows`] narrows
//! them back into panels (below) where the kernel reads those.
//!
//! f32 rows stay row-major: with the outputs of one weight row accumulated in M registers,
//! every weight is loaded once and used for all M activation rows, while a row stays
//! gatherable for `matmul_rows`; column panels of f32 measured no faster on SmolLM2 (both are
//! bound by the memory stream). f16 and bf16 are another matter: in rows they had to be widened
//! to four bytes, in panels they keep their two (next paragraph but one).
//!
//! [`Matrix::interleave_rows`] (`Q8_0`, `Q4_0`, `Q4_1`) stores the rows in groups of eight
//! instead, the eight rows' blocks of the same 32 columns side by side (llama.cpp's repacked
//! 8×8 design; the layout is documented in the private `interleave` module): one register then
//! holds four weights of each of eight rows, and the 8-bit kernel finishes eight outputs of a
//! block with one conversion, one scale and one multiply-add instead of eight. Measured on
//! SmolLM2-135M Q4_1 (`cargo xtask bench-cpu`, 2 threads): scoring 6 positions went from 3.17
//! to 1.89 single steps, and a single step from 6.15 to 4.77 ms. The native engine
//! interleaves every quantized layer and its LM head; a matrix used through `matmul_rows` on
//! scattered rows is better left in rows (a gathered product computes each whole group it
//! touches). A shortlist made of whole blocks of a partition (DynaSpec's token clusters) has
//! its own answer: [`RowBlocks`] copies the rows block by block, each block starting on a
//! multiple of sixteen rows, and [`RowBlocks::matmul_blocks`] computes the selected blocks'
//! rows and no others ([`Matrix::matmul_ranges`]). Measured on SmolLM2's Q8_0 head, one thread,
//! 32 of 256 random clusters: 0.17 ms against 1.29 ms for the whole head and 2.98 ms gathered
//! (`cargo bench -p anyspec-cpu-kernels --bench matmul -- shortlist32of256`).
//!
//! On f16 and bf16 matrices, [`Matrix::interleave_rows`] (with [`Kernel::Avx512Q8`] on AVX-512)
//! stores the rows in panels of sixteen instead, column by column at two bytes a weight (the
//! private `panels` module documents it): a column of sixteen weights is loaded and widened
//! once and meets every activation row's value of that column in one multiply-add, sixteen
//! outputs per instruction, with no horizontal sums. Measured on SmolLM2-135M converted to
//! f16: a single position 34–35 → 20 ms on one thread (half the bytes read), six positions
//! 1.29–1.37 → 1.14–1.24 of one.
//!
//! Every matrix's weights are held in 2 MB-aligned slabs that the OS is asked to back with
//! transparent huge pages (`madvise(MADV_HUGEPAGE)` on Linux; the private `weight_memory`
//! module says why): a product streams its weights once, and on 4 KB pages each 4 KB of them
//! cost a TLB miss and a pause of the hardware prefetcher.
//!
//! # Kernels
//!
//! [`Kernel::best`] picks at run time (`is_x86_feature_detected!`); [`Matrix::set_kernel`]
//! overrides it. All of them read each weight block once per product and apply it to all
//! M ≤ 8 activation rows (more rows go in groups of 8 while the weight row is in L1).
//!
//! - [`Kernel::Avx512Q8`] (the default on x86-64 with AVX-512 F/BW and VNNI):
//!   [`Kernel::Avx2Q8`]'s computation, with the interleaved layout's products done by
//!   `vpdpbusd` (four byte products summed into a 32-bit lane in one instruction) on sixteen
//!   weight rows per 512-bit register. Bit-identical to [`Kernel::Avx2Q8`] (the integer block
//!   sums are exact either way and the float operations that follow are the same), so a model
//!   decodes the same tokens on either CPU; the gain is in scoring several positions at once.
//!   f32 rows get an AVX-512 row kernel, f16/bf16 panels an AVX-512 panel kernel
//!   ([`Kernel::reads_panels`]).
//! - [`Kernel::Avx2Q8`] (the default on x86-64 with AVX2/FMA/F16C but no AVX-512 VNNI),
//!   llama.cpp's design: the activations are quantized once per product to 8 bits per
//!   32-block (as llama.cpp's AVX2 `quantize_row_q8_0`/`q8_1` do), and each `Q4_0`/`Q4_1`/`Q8_0` block meets each activation
//!   block in an integer dot product (`vpmaddubsw`/`vpmaddwd`), one float scale per block
//!   pair; a block's nibbles are unpacked once for all rows. Cheapest per weight; not
//!   bit-exact to the f32 reference, but what llama.cpp computes on the same file. On an
//!   interleaved matrix the eight rows of a group share the instructions after the integer
//!   products (see above). Other formats fall through to `Avx2`.
//! - [`Kernel::Avx2`]: f32 activations; each block is dequantized in registers exactly as
//!   [`dequantize`] does and multiply-added into every row. Exact with respect to the file's
//!   weights (up to the order of the f32 additions).
//! - [`Kernel::Scalar`]: portable Rust for any CPU, and the reference of the tests.
//!
//! Every kernel computes an output with the same operations whatever M, the thread count, the
//! output's position in its chunk, or whether it was gathered: scoring a draft of k tokens
//! gives bit-identical logits to scoring them one at a time, so greedy decoding with a
//! drafter equals greedy decoding without one.
//!
//! # Threading
//!
//! [`Threads`] is a persistent pool (no thread is started per product: a decoding step makes
//! a couple of hundred products of a few microseconds each). The caller's thread and the
//! workers split the output rows in chunks (about two per thread, taken from a shared
//! counter so that a thread slowed by another process does not hold the others up); idle
//! workers spin for 200 µs, then sleep. Products under 32K multiply-adds run on the caller
//! alone. The 8-bit kernels quantize the activations on the caller's thread before the rows
//! are shared out (with AVX-512 where `Kernel::Avx512Q8` runs: the same bytes as the AVX2
//! routine, faster).
//!
//! # Roofline
//!
//! [`roofline`] measures what this CPU allows: one core's peak FMA and `vpdpbusd` rates and
//! the rate of streaming a buffer the way the quantized kernels stream their weights.
//! `cargo xtask bench-cpu` prints its kernels' speed as shares of those, measured in the same
//! run.
//!
//! # GPU backends
//!
//! The same operations (a `[rows, cols]` matrix times 1..8 rows, a gathered subset of rows,
//! one row for an embedding) map onto a GPU backend by dequantizing at load: wgpu/CUDA
//! backends dequantize each tensor to f16 (or f32) once with [`dequantize`] (or
//! [`Matrix::to_f32`]) and upload it, and use their own matmul. Quantized GPU kernels can come
//! later and be tested against the same reference.
//!
//! # Quirks
//!
//! - `y` may be longer than `M · rows`; only that prefix is written.
//! - `Avx2Q8` (and `Avx512Q8`, bit for bit the same) results differ from `Avx2`/`Scalar` by the 8-bit rounding of the activations
//!   (relative error around 1e-2 of a row's magnitude, like llama.cpp).
//! - Unsafe code (intrinsics, the pool's lending of a borrowed closure) lives in one private
//!   module, `sys`.

mod activation;
mod attention;
mod blocks;
mod error;
mod format;
mod interleave;
mod kernel;
mod matrix;
mod panels;
pub mod roofline;
mod scalar;
mod sys;
#[cfg(test)]
mod test_rng;
mod threads;

pub use activation::swiglu;
pub use attention::{
    ATTENTION_SPAN, HeadLayout, KEY_TILE, KeyTiles, attend_head, attend_queries, attend_queries_with, attend_span,
    attend_span_with, key_tiles_len, merge_spans, span_partial_len, spans_for, write_key_tiles,
};
pub use blocks::{BLOCK_ALIGN, RowBlocks};
pub use error::{Error, Result};
pub use format::{WeightFormat, dequantize, quantize};
pub use kernel::Kernel;
pub use matrix::Matrix;
pub use threads::Threads;
