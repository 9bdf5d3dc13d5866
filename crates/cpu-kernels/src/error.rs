//! The crate's error type.

use crate::WeightFormat;

/// Everything that can go wrong when building a [`Matrix`](crate::Matrix) or calling a kernel.
///
/// Every variant names the offending value; none of them is ever turned into a panic.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A buffer has the wrong number of elements (or bytes).
    #[error("{what} has length {got}, expected {expected}")]
    Length {
        /// Which buffer: `"weight bytes"`, `"values"`, `"y"`, ...
        what: &'static str,
        /// The length the shape calls for.
        expected: usize,
        /// The length that was passed.
        got: usize,
    },
    /// A length must be a multiple of another (activations of `cols`, columns of a block).
    #[error("{what} is {value}, not a multiple of {multiple}")]
    NotMultiple {
        /// What was measured: `"x length"`, `"cols of a q4_1 matrix"`, ...
        what: &'static str,
        /// The offending value.
        value: usize,
        /// What it must be a multiple of.
        multiple: usize,
    },
    /// A matrix with zero columns, or a shape whose size overflows `usize`.
    #[error("invalid matrix shape {rows}x{cols}: {reason}")]
    Shape {
        /// Output rows.
        rows: usize,
        /// Input columns.
        cols: usize,
        /// Why the shape is refused.
        reason: &'static str,
    },
    /// A row index (a `row_f32` row, a `select` entry, a permutation entry) past the end.
    #[error("{what} index {index} is out of range for {len} rows")]
    IndexOutOfRange {
        /// Which index: `"row"`, `"select"`, `"order"`.
        what: &'static str,
        /// The offending index.
        index: usize,
        /// The number of rows.
        len: usize,
    },
    /// The operation is not implemented for this weight format.
    #[error("{operation} is not supported for {} weights; use one of {supported}", format.name())]
    Unsupported {
        /// The format asked for.
        format: WeightFormat,
        /// What was asked: `"quantize"`.
        operation: &'static str,
        /// The formats that do support it.
        supported: &'static str,
    },
    /// The kernel needs instructions this CPU lacks.
    #[error("the {kernel:?} kernel needs instructions this CPU lacks; use Kernel::best()")]
    UnsupportedKernel {
        /// The kernel asked for.
        kernel: crate::Kernel,
    },
    /// `Threads::new(0)`.
    #[error("thread count must be at least 1, got 0")]
    ZeroThreads,
    /// The operating system refused to start a worker thread.
    #[error("could not start kernel worker thread {index}")]
    Spawn {
        /// Which worker (1-based; the caller's thread is 0).
        index: usize,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

/// The crate's result type.
pub type Result<T> = std::result::Result<T, Error>;
