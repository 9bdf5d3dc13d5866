//! [`Matrix`]: a weight matrix repacked once for the kernels, and its products.

use std::sync::Arc;

use half::{bf16, f16};

use crate::format::{WeightFormat, dequantize_unchecked};
use crate::interleave::{Grouped, Order};
use crate::kernel::Kernel;
use crate::panels::Element;
use crate::sys::weight_memory::WeightBuf;
use crate::{Error, Result, Threads};

/// The most activation rows one pass of a kernel handles; more are done in groups of this
/// many while the weight row is still in the L1 cache.
pub(crate) const MAX_M: usize = 8;

/// Below this many multiply-adds a product runs on the calling thread alone: waking the
/// workers would cost more than it saves.
const PARALLEL_MIN_MACS: usize = 32 * 1024;

thread_local! {
    /// The products of one chunk of [`Matrix::matmul_paired`] before they are combined, kept
    /// between calls on each thread (a decoding step makes one call per layer).
    static PAIRED_SCRATCH: std::cell::RefCell<Vec<f32>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// The greatest common divisor of `a` and `b`.
const fn gcd(mut a: usize, mut b: usize) -> usize {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// How the weights are held.
enum Data {
    /// Row-major f32 (from f32, f16 and bf16 sources).
    F32(WeightBuf),
    /// Rows of ggml blocks, byte for byte as in the file (row order possibly permuted).
    Blocks(WeightBuf),
    /// Rows of ggml blocks read in place from `owner.as_ref()[start..start + len]` (a memory
    /// map of the model file): no copy.
    Shared { owner: Arc<dyn AsRef<[u8]> + Send + Sync>, start: usize, len: usize },
    /// The blocks of rows in groups of eight, interleaved ([`crate::interleave`]), the groups
    /// in the order that the kernel set when they were interleaved reads best.
    Interleaved(WeightBuf, Order),
    /// f16 or bf16 rows in panels of sixteen, column by column, at two bytes a value
    /// ([`crate::panels`]).
    Panels(WeightBuf, Element),
}

impl Data {
    /// The block rows, if the matrix holds blocks.
    #[inline]
    fn blocks(&self) -> Option<&[u8]> {
        match self {
            Data::F32(_) | Data::Interleaved(..) | Data::Panels(..) => None,
            Data::Blocks(b) => Some(b),
            Data::Shared { owner, start, len } => Some(&(**owner).as_ref()[*start..*start + *len]),
        }
    }

    /// The interleaved weights, if the rows are stored so.
    fn grouped(&self) -> Option<Grouped<'_>> {
        match self {
            Data::Interleaved(data, order) => Some(Grouped { data, order: *order }),
            _ => None,
        }
    }
}

/// The weight rows of one chunk of outputs: output `j` (in `start..end`) is weight row `j`, or
/// `select[j]` for a gathered product.
#[derive(Clone, Copy)]
pub(crate) struct Rows<'a> {
    /// The matrix's storage, resolved once per chunk (not once per row: a shared owner is
    /// reached through a virtual call).
    data: RowData<'a>,
    select: Option<&'a [u32]>,
    pub(crate) start: usize,
    pub(crate) end: usize,
}

/// A matrix's rows as the kernels read them: f32 rows of `usize` values, or block rows of
/// `usize` bytes.
#[derive(Clone, Copy)]
enum RowData<'a> {
    F32(&'a [f32], usize),
    Blocks(&'a [u8], usize),
}

impl<'a> Rows<'a> {
    /// The weight row of output `j`.
    #[inline]
    pub(crate) fn get(&self, j: usize) -> RowRef<'a> {
        let row = self.select.map_or(j, |s| s[j] as usize);
        match self.data {
            RowData::F32(v, cols) => RowRef::F32(v.get(row * cols..(row + 1) * cols).unwrap_or(&[])),
            RowData::Blocks(b, len) => RowRef::Blocks(b.get(row * len..(row + 1) * len).unwrap_or(&[])),
        }
    }
}

/// One stored row, as a kernel reads it.
#[derive(Clone, Copy)]
pub(crate) enum RowRef<'a> {
    /// `cols` f32 weights.
    F32(&'a [f32]),
    /// `cols / block_len` ggml blocks.
    Blocks(&'a [u8]),
}

/// A weight matrix of `rows` outputs × `cols` inputs (the PyTorch `Linear.weight` `[out, in]`
/// layout; in GGUF terms `ne0 = cols`, `ne1 = rows`), repacked once at construction into the
/// layout the kernels stream.
///
/// Quantized formats stay quantized in memory, as rows of ggml blocks (no f32 blow-up); f16
/// and bf16 are widened to f32 at construction (exactly: every half value is an f32 value), so
/// they take twice their file size. See the crate docs for why.
pub struct Matrix {
    format: WeightFormat,
    rows: usize,
    cols: usize,
    row_bytes: usize,
    data: Data,
    kernel: Kernel,
}

impl std::fmt::Debug for Matrix {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Matrix")
            .field("format", &self.format)
            .field("rows", &self.rows)
            .field("cols", &self.cols)
            .field("memory_bytes", &self.memory_bytes())
            .field("kernel", &self.kernel)
            .finish()
    }
}

fn check_shape(format: WeightFormat, rows: usize, cols: usize) -> Result<usize> {
    if cols == 0 {
        return Err(Error::Shape { rows, cols, reason: "a matrix needs at least one column" });
    }
    let row_bytes = format.row_bytes(cols)?;
    // Four bytes per value: the size of the f32 copy that f16/bf16 weights are widened to.
    if rows.checked_mul(row_bytes).is_none() || rows.checked_mul(cols).and_then(|n| n.checked_mul(4)).is_none() {
        return Err(Error::Shape { rows, cols, reason: "its size overflows usize" });
    }
    Ok(row_bytes)
}

/// `values[k] = decode(the k-th W-byte value of row)`: a stored row of f32, f16 or bf16 as f32.
fn widen<const W: usize>(row: &[u8], values: &mut [f32], decode: impl Fn([u8; W]) -> f32) {
    for (v, bytes) in values.iter_mut().zip(row.chunks_exact(W)) {
        *v = decode(bytes.try_into().expect("chunks of W bytes"));
    }
}

impl Matrix {
    /// A matrix from row-major `[rows, cols]` f32 values.
    pub fn from_f32(rows: usize, cols: usize, values: &[f32]) -> Result<Self> {
        check_shape(WeightFormat::F32, rows, cols)?;
        if values.len() != rows * cols {
            return Err(Error::Length { what: "values", expected: rows * cols, got: values.len() });
        }
        Ok(Matrix {
            format: WeightFormat::F32,
            rows,
            cols,
            row_bytes: cols * 4,
            data: Data::F32(WeightBuf::copy_of_f32(values)),
            kernel: Kernel::best(),
        })
    }

    /// A matrix from `rows` rows of `format.row_bytes(cols)` bytes each (GGUF tensor data;
    /// f16/bf16/f32 little-endian).
    pub fn from_bytes(format: WeightFormat, rows: usize, cols: usize, bytes: &[u8]) -> Result<Self> {
        Self::build(format, rows, cols, bytes, None)
    }

    /// Same as [`from_bytes`](Self::from_bytes), but the `i`-th stored row is source row
    /// `order[i]` (a row permutation, exact for every format: the loader uses it to undo
    /// llama.cpp's Q/K permutation). `order` must have `rows` entries, each below `rows`
    /// (repeats are allowed: the result is then a gather).
    pub fn from_bytes_permuted(
        format: WeightFormat,
        rows: usize,
        cols: usize,
        bytes: &[u8],
        order: &[usize],
    ) -> Result<Self> {
        Self::build(format, rows, cols, bytes, Some(order))
    }

    /// Same as [`from_bytes`](Self::from_bytes) without copying the weights: the matrix keeps
    /// `owner` (a memory map of the GGUF file, say `Arc::new(mmap)`) alive and reads its rows in
    /// place from `owner.as_ref()[offset..offset + rows · row_bytes]`. Quantized formats only
    /// stay in place; f32, f16 and bf16 are converted into an owned f32 copy as by
    /// `from_bytes`. With every quantized tensor shared, a loaded model costs its file's pages
    /// once, not twice (the pages of the map plus a copy).
    pub fn from_shared_bytes(
        format: WeightFormat,
        rows: usize,
        cols: usize,
        owner: Arc<dyn AsRef<[u8]> + Send + Sync>,
        offset: usize,
    ) -> Result<Self> {
        let row_bytes = check_shape(format, rows, cols)?;
        let len = rows * row_bytes;
        let all = (*owner).as_ref();
        let Some(bytes) = offset.checked_add(len).and_then(|end| all.get(offset..end)) else {
            return Err(Error::Length {
                what: "shared bytes after the offset",
                expected: len,
                got: all.len().saturating_sub(offset),
            });
        };
        if matches!(format, WeightFormat::F32 | WeightFormat::F16 | WeightFormat::BF16) {
            return Self::from_bytes(format, rows, cols, bytes);
        }
        Ok(Matrix {
            format,
            rows,
            cols,
            row_bytes,
            data: Data::Shared { owner, start: offset, len },
            kernel: Kernel::best(),
        })
    }

    fn build(format: WeightFormat, rows: usize, cols: usize, bytes: &[u8], order: Option<&[usize]>) -> Result<Self> {
        let row_bytes = check_shape(format, rows, cols)?;
        if bytes.len() != rows * row_bytes {
            return Err(Error::Length { what: "weight bytes", expected: rows * row_bytes, got: bytes.len() });
        }
        if let Some(order) = order {
            if order.len() != rows {
                return Err(Error::Length { what: "order", expected: rows, got: order.len() });
            }
            if let Some(&bad) = order.iter().find(|&&r| r >= rows) {
                return Err(Error::IndexOutOfRange { what: "order", index: bad, len: rows });
            }
        }
        let source_row = |i: usize| {
            let r = order.map_or(i, |o| o[i]);
            &bytes[r * row_bytes..(r + 1) * row_bytes]
        };
        let data = match format {
            WeightFormat::F32 | WeightFormat::F16 | WeightFormat::BF16 => {
                let mut buf = WeightBuf::zeroed(rows * cols * 4);
                for (i, values) in buf.f32s_mut().chunks_exact_mut(cols).enumerate() {
                    let row = source_row(i);
                    match format {
                        WeightFormat::F32 => widen(row, values, f32::from_le_bytes),
                        WeightFormat::F16 => widen(row, values, |b| f16::from_le_bytes(b).to_f32()),
                        _ => widen(row, values, |b| bf16::from_le_bytes(b).to_f32()),
                    }
                }
                Data::F32(buf)
            }
            _ => match order {
                None => Data::Blocks(WeightBuf::copy_of(bytes)),
                Some(_) => {
                    let mut out = WeightBuf::zeroed(bytes.len());
                    for (i, row) in out.chunks_exact_mut(row_bytes).enumerate() {
                        row.copy_from_slice(source_row(i));
                    }
                    Data::Blocks(out)
                }
            },
        };
        let stored = if matches!(data, Data::F32(_)) { WeightFormat::F32 } else { format };
        Ok(Matrix { format, rows, cols, row_bytes: stored.row_bytes(cols)?, data, kernel: Kernel::best() })
    }

    /// Output rows (`N`).
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Input columns (`K`).
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// The format the matrix was built from (f16 and bf16 report themselves whether they are
    /// held as f32 rows or, after [`interleave_rows`](Self::interleave_rows), at two bytes in
    /// panels).
    pub fn format(&self) -> WeightFormat {
        self.format
    }

    /// Bytes of weights the products read: held by the matrix, or, for
    /// [`from_shared_bytes`](Self::from_shared_bytes), its range of the shared owner.
    pub fn memory_bytes(&self) -> usize {
        match &self.data {
            Data::F32(v) => v.len(),
            Data::Blocks(b) => b.len(),
            Data::Shared { len, .. } => *len,
            Data::Interleaved(b, _) | Data::Panels(b, _) => b.len(),
        }
    }

    /// Stores the rows in groups of eight, interleaved, the layout in which the 8-bit kernels
    /// ([`Kernel::Avx2Q8`], [`Kernel::Avx512Q8`]) score several activation rows at a fraction
    /// of the instructions per weight (see the crate docs); f16 and bf16 matrices go into
    /// panels of sixteen rows instead, at two bytes a weight (see the crate docs), for the
    /// kernels that read them ([`Kernel::reads_panels`]). Returns whether the matrix is now
    /// interleaved (or in panels): `false`, with nothing changed, for the formats without such
    /// a kernel (`Q8_0`, `Q4_0` and `Q4_1` have one; f16 and bf16 with [`Kernel::Avx512Q8`]
    /// on AVX-512; f32 rows stay as they are).
    ///
    /// Exact: the bytes are only reordered, and every kernel computes the same products as
    /// before (the 8-bit kernels round their sums in another order, so their results differ
    /// from the row layout's in the last bits, like any two summation orders). The weights
    /// become an owned copy (a [`from_shared_bytes`](Self::from_shared_bytes) matrix stops
    /// reading the shared owner), plus up to fifteen all-zero padding rows (a whole pair of
    /// groups). Products over a subset of
    /// rows ([`matmul_rows`](Self::matmul_rows)) compute every row of each group they touch:
    /// up to eight times the work of the row layout for a scattered selection, so interleave
    /// the matrices that are always multiplied whole (a model's layers), not a shortlisted LM
    /// head.
    ///
    /// The groups are ordered for the kernel set at the time of the call (set the kernel
    /// first): [`Kernel::Avx512Q8`] reads pairs of groups at once and the others one group, and
    /// each reads its own order as one sequential stream. Any kernel reads either order, with
    /// the same results.
    pub fn interleave_rows(&mut self) -> bool {
        if self.is_interleaved() {
            return true;
        }
        if let (Some(element), true) = (Element::of(self.format), self.kernel.reads_panels()) {
            let Data::F32(buf) = &self.data else { return false };
            let panels = if buf.is_latest() {
                // As for the blocks below: the rows leave the weight memory first, so that the
                // panels take the bytes they held.
                let rows = buf.f32s().to_vec();
                self.data = Data::F32(WeightBuf::zeroed(0));
                crate::panels::pack(element, self.rows, self.cols, &rows)
            } else {
                crate::panels::pack(element, self.rows, self.cols, buf.f32s())
            };
            self.data = Data::Panels(panels, element);
            return true;
        }
        if !crate::interleave::supports(self.format) {
            return false;
        }
        let blocks = self.cols / self.format.block_len();
        let order = self.kernel.group_order();
        let interleaved = match &self.data {
            Data::Blocks(buf) if buf.is_latest() => {
                // The rows move out to the heap and their buffer is dropped first, so that the
                // interleaved copy takes the bytes they held (the latest buffer of the weight
                // memory gives them back): a model loaded and interleaved matrix by matrix
                // holds each matrix once, not twice. (A matrix with a slab of its own frees it
                // when dropped below, and needs no detour.)
                let rows = buf.to_vec();
                self.data = Data::Blocks(WeightBuf::zeroed(0));
                crate::interleave::interleave(self.format, self.rows, blocks, &rows, order)
            }
            data => match data.blocks() {
                Some(rows) => crate::interleave::interleave(self.format, self.rows, blocks, rows, order),
                None => return false,
            },
        };
        self.data = Data::Interleaved(interleaved, order);
        true
    }

    /// Whether the rows are stored interleaved, or in panels
    /// ([`interleave_rows`](Self::interleave_rows)).
    pub fn is_interleaved(&self) -> bool {
        self.data.grouped().is_some() || matches!(self.data, Data::Panels(..))
    }

    /// The kernel the products use (by default [`Kernel::best`]).
    pub fn kernel(&self) -> Kernel {
        self.kernel
    }

    /// Chooses the kernel of the products; an error if this CPU lacks its instructions.
    pub fn set_kernel(&mut self, kernel: Kernel) -> Result<()> {
        kernel.check_supported()?;
        self.kernel = kernel;
        Ok(())
    }

    /// The storage format of the held rows.
    fn stored_format(&self) -> WeightFormat {
        match self.data {
            Data::F32(_) => WeightFormat::F32,
            Data::Blocks(_) | Data::Shared { .. } | Data::Interleaved(..) | Data::Panels(..) => self.format,
        }
    }

    /// Row `row` of an interleaved matrix, as the file stored it, into `out` (`row_bytes`).
    fn interleaved_row(&self, groups: Grouped<'_>, row: usize, out: &mut [u8]) {
        let blocks = self.cols / self.format.block_len();
        crate::interleave::row_blocks(self.format, blocks, groups, row, out);
    }

    pub(crate) fn row_ref(&self, row: usize) -> RowRef<'_> {
        match (&self.data, self.data.blocks()) {
            (Data::F32(v), _) => RowRef::F32(&v.f32s()[row * self.cols..(row + 1) * self.cols]),
            (_, Some(b)) => RowRef::Blocks(&b[row * self.row_bytes..(row + 1) * self.row_bytes]),
            (_, None) => RowRef::Blocks(&[]),
        }
    }

    /// Row `row` dequantized into `out` (`cols` values): embedding lookups.
    pub fn row_f32(&self, row: usize, out: &mut [f32]) -> Result<()> {
        if row >= self.rows {
            return Err(Error::IndexOutOfRange { what: "row", index: row, len: self.rows });
        }
        if out.len() != self.cols {
            return Err(Error::Length { what: "row output", expected: self.cols, got: out.len() });
        }
        if let Some(groups) = self.data.grouped() {
            let mut blocks = vec![0u8; self.row_bytes];
            self.interleaved_row(groups, row, &mut blocks);
            dequantize_unchecked(self.format, &blocks, out);
            return Ok(());
        }
        if let Data::Panels(data, element) = &self.data {
            crate::panels::read_row(*element, data, self.cols, row, out);
            return Ok(());
        }
        match self.row_ref(row) {
            RowRef::F32(w) => out.copy_from_slice(w),
            RowRef::Blocks(b) => dequantize_unchecked(self.format, b, out),
        }
        Ok(())
    }

    /// The whole matrix, row-major, exactly dequantized.
    pub fn to_f32(&self) -> Vec<f32> {
        match (&self.data, self.data.blocks(), self.data.grouped()) {
            (Data::F32(v), _, _) => v.f32s().to_vec(),
            (Data::Panels(data, element), _, _) => {
                let mut out = vec![0.0; self.rows * self.cols];
                for (row, values) in out.chunks_exact_mut(self.cols).enumerate() {
                    crate::panels::read_row(*element, data, self.cols, row, values);
                }
                out
            }
            (_, _, Some(groups)) => {
                let mut out = vec![0.0; self.rows * self.cols];
                let mut blocks = vec![0u8; self.row_bytes];
                for (row, values) in out.chunks_exact_mut(self.cols).enumerate() {
                    self.interleaved_row(groups, row, &mut blocks);
                    dequantize_unchecked(self.format, &blocks, values);
                }
                out
            }
            (_, b, None) => {
                let mut out = vec![0.0; self.rows * self.cols];
                dequantize_unchecked(self.format, b.unwrap_or(&[]), &mut out);
                out
            }
        }
    }

    /// `y[m*rows + n] = Σ_k x[m*cols + k] · W[n, k]` for every activation row
    /// `m < x.len() / cols`.
    ///
    /// Any number of activation rows; tuned for 1..=8 (the verification pass of a draft): each
    /// weight block is read and unpacked once and applied to all of them. `y` must hold at
    /// least `M · rows` values; only those are written.
    pub fn matmul(&self, x: &[f32], y: &mut [f32], threads: &Threads) -> Result<()> {
        let m = self.activation_rows(x)?;
        self.check_y(y, m * self.rows)?;
        self.run(x, m, self.rows, None, &mut y[..m * self.rows], threads);
        Ok(())
    }

    /// [`matmul`](Self::matmul) with each activation row's outputs in a slice of its own:
    /// `ys[i][n] = Σ_k x[i*cols + k] · W[n, k]` for the `ys.len()` rows of `x`, the same bits.
    ///
    /// Why: a caller that hands each row's logits on as a vector of its own (a verification
    /// pass's rows) would otherwise copy every row out of one `[m, rows]` buffer: 196 KB a row
    /// for a 49,152-token vocabulary.
    ///
    /// # Errors
    /// When `x` is not `ys.len()` rows of `cols`, or an output is shorter than `rows`.
    pub fn matmul_into_rows(&self, x: &[f32], ys: &mut [&mut [f32]], threads: &Threads) -> Result<()> {
        let m = self.activation_rows(x)?;
        if m != ys.len() {
            return Err(Error::Length { what: "output rows", expected: m, got: ys.len() });
        }
        for y in ys.iter() {
            self.check_y(y, self.rows)?;
        }
        let outs: Vec<&mut [f32]> = ys.iter_mut().map(|y| &mut y[..self.rows]).collect();
        self.run_rows(x, m, self.rows, None, outs, threads);
        Ok(())
    }

    /// Only the output rows `select` (a pruned LM head, a shortlist):
    /// `y[m*select.len() + j] = Σ_k x[m*cols + k] · W[select[j], k]`. One pass, gathered in
    /// place, no copy of the gathered matrix.
    pub fn matmul_rows(&self, x: &[f32], select: &[u32], y: &mut [f32], threads: &Threads) -> Result<()> {
        let m = self.activation_rows(x)?;
        if let Some(&bad) = select.iter().find(|&&r| r as usize >= self.rows) {
            return Err(Error::IndexOutOfRange { what: "select", index: bad as usize, len: self.rows });
        }
        let n = select.len();
        self.check_y(y, m * n)?;
        self.run(x, m, n, Some(select), &mut y[..m * n], threads);
        Ok(())
    }

    /// The outputs of the concatenated row ranges `ranges`:
    /// `y[m*n + o_r + j] = Σ_k x[m*cols + k] · W[ranges[r].start + j, k]`, where `n` is the
    /// ranges' total length and `o_r` the length of the ranges before range `r`.
    ///
    /// On an interleaved matrix ([`interleave_rows`](Self::interleave_rows)) a range that
    /// starts on a multiple of sixteen rows is computed by the layout's whole-group kernel, at
    /// the cost of its own rows only (plus the rest of its last group): the product of a
    /// shortlist made of whole blocks of a matrix ordered block by block ([`crate::RowBlocks`]),
    /// where [`matmul_rows`](Self::matmul_rows) on scattered rows computes every group it
    /// touches. Every output equals the same output of [`matmul`](Self::matmul), bit for bit.
    pub fn matmul_ranges(
        &self,
        x: &[f32],
        ranges: &[std::ops::Range<usize>],
        y: &mut [f32],
        threads: &Threads,
    ) -> Result<()> {
        let m = self.activation_rows(x)?;
        if let Some(bad) = ranges.iter().find(|r| r.start > r.end || r.end > self.rows) {
            return Err(Error::IndexOutOfRange { what: "range end", index: bad.end.max(bad.start), len: self.rows });
        }
        let n: usize = ranges.iter().map(|r| r.len()).sum();
        self.check_y(y, m * n)?;
        if m == 0 || n == 0 {
            return Ok(());
        }
        let y = &mut y[..m * n];
        let prepared = self.kernel.prepare(self.stored_format(), x, m, self.cols);
        let parallel = threads.count() > 1 && n.saturating_mul(self.cols).saturating_mul(m) >= PARALLEL_MIN_MACS;
        // Work items of about `chunk` outputs each (two per thread, as in `run`), made of whole
        // ranges and of pieces of long ones cut at multiples of sixteen rows from their start
        // (so a piece starts on a group pair when its range does).
        let chunk = if parallel { n.div_ceil(threads.count() * 2).max(16).next_multiple_of(16) } else { n };
        let mut items: Vec<Vec<std::ops::Range<usize>>> = vec![Vec::new()];
        let mut filled = 0;
        for range in ranges.iter().filter(|r| !r.is_empty()) {
            let mut start = range.start;
            while start < range.end {
                if filled >= chunk {
                    items.push(Vec::new());
                    filled = 0;
                }
                let end = range.end.min(start + (chunk - filled).next_multiple_of(16));
                items.last_mut().expect("one item at least").push(start..end);
                filled += end - start;
                start = end;
            }
        }
        let item_outputs: Vec<usize> = items.iter().map(|item| item.iter().map(|r| r.len()).sum()).collect();
        let mut parts: Vec<Vec<&mut [f32]>> = (0..items.len()).map(|_| Vec::with_capacity(m)).collect();
        for row in y.chunks_exact_mut(n) {
            let mut rest = row;
            for (part, &len) in parts.iter_mut().zip(&item_outputs) {
                let (head, tail) = rest.split_at_mut(len);
                part.push(head);
                rest = tail;
            }
        }
        let job = |c: usize, part: &mut [Vec<&mut [f32]>]| {
            let mut offset = 0;
            for range in &items[c] {
                let len = range.len();
                let mut outs: Vec<&mut [f32]> = part[0].iter_mut().map(|s| &mut s[offset..offset + len]).collect();
                self.compute(&prepared, x, m, range.clone(), None, &mut outs);
                offset += len;
            }
        };
        if parallel {
            threads.for_each_chunk_mut(&mut parts, 1, &job);
        } else {
            parts.chunks_mut(1).enumerate().for_each(|(c, part)| job(c, part));
        }
        Ok(())
    }

    /// The products of a matrix whose rows come in pairs of runs of `run` rows, combined run by
    /// run: stored rows `2r·run..(2r + 1)·run` are run `r` of a first matrix `A`, the next
    /// `run` rows run `r` of a second `B`. For every activation row `i` and run `r`,
    /// `combine(a, b)` gets the outputs of the two runs (`a` mutable) and leaves its results
    /// in `a`, which lands in `y[i·rows/2 + r·run..][..run]`. Every `a` and `b` is what
    /// [`matmul`](Self::matmul) gives for those rows, bit for bit.
    ///
    /// # Why
    ///
    /// A gated MLP uses its gate and up products only through `SwiGLU(gate, up)`. Stored as
    /// pairs of runs, each thread's share of the rows holds both halves of its outputs, so the
    /// thread applies the activation to its own products while they are in its cache. Without
    /// it, one thread made a second pass over `[m, 2·width]` outputs, half of them written by
    /// the other core.
    ///
    /// # Errors
    /// A `run` of 0 or rows not a whole number of pairs of runs; activations not whole rows
    /// of `cols`; `y` shorter than `m · rows / 2`.
    pub fn matmul_paired(
        &self,
        x: &[f32],
        y: &mut [f32],
        run: usize,
        threads: &Threads,
        combine: &(dyn Fn(&mut [f32], &[f32]) + Sync),
    ) -> Result<()> {
        let m = self.activation_rows(x)?;
        let pair = 2 * run;
        if run == 0 || !self.rows.is_multiple_of(pair) {
            return Err(Error::NotMultiple {
                what: "rows of a paired matrix",
                value: self.rows,
                multiple: pair.max(1),
            });
        }
        let (n, half) = (self.rows, self.rows / 2);
        self.check_y(y, m * half)?;
        if m == 0 || n == 0 {
            return Ok(());
        }
        let y = &mut y[..m * half];
        let prepared = self.kernel.prepare(self.stored_format(), x, m, self.cols);
        let parallel = threads.count() > 1 && n.saturating_mul(self.cols).saturating_mul(m) >= PARALLEL_MIN_MACS;
        // Chunks of whole pairs of runs, starting on multiples of 16 rows (a pair of groups of
        // the interleaved layout), about two per thread as in `run`.
        let unit = pair * 16 / gcd(pair, 16);
        let chunk = if parallel { n.div_ceil(threads.count() * 2).next_multiple_of(unit) } else { n };
        let chunks = n.div_ceil(chunk);
        let mut parts: Vec<Vec<&mut [f32]>> = (0..chunks).map(|_| Vec::with_capacity(m)).collect();
        for row in y.chunks_exact_mut(half) {
            for (c, part) in row.chunks_mut(chunk / 2).enumerate() {
                parts[c].push(part);
            }
        }
        let job = |c: usize, part: &mut [Vec<&mut [f32]>]| {
            let range = c * chunk..((c + 1) * chunk).min(n);
            let len = range.len();
            PAIRED_SCRATCH.with_borrow_mut(|scratch| {
                scratch.resize(m * len, 0.0);
                let mut outs: Vec<&mut [f32]> = scratch.chunks_exact_mut(len).collect();
                self.compute(&prepared, x, m, range, None, &mut outs);
                for (products, results) in outs.iter_mut().zip(part[0].iter_mut()) {
                    for (both, result) in products.chunks_exact_mut(pair).zip(results.chunks_exact_mut(run)) {
                        let (a, b) = both.split_at_mut(run);
                        combine(a, b);
                        result.copy_from_slice(a);
                    }
                }
            });
        };
        if parallel {
            threads.for_each_chunk_mut(&mut parts, 1, &job);
        } else {
            parts.chunks_mut(1).enumerate().for_each(|(c, part)| job(c, part));
        }
        Ok(())
    }

    /// A new matrix whose row `i` is this matrix's row `order[i]`, or a row of zeros for
    /// `None`, in the same format, with the same kernel, and interleaved (or in panels) when
    /// this one is. Exact: the rows' bytes are copied as stored. [`crate::RowBlocks`] orders an
    /// LM head by a partition of the vocabulary with it.
    pub fn gather_rows(&self, order: &[Option<u32>]) -> Result<Matrix> {
        if let Some(&bad) = order.iter().flatten().find(|&&r| r as usize >= self.rows) {
            return Err(Error::IndexOutOfRange { what: "gathered row", index: bad as usize, len: self.rows });
        }
        let rows = order.len();
        check_shape(self.format, rows, self.cols)?;
        let data = match (&self.data, self.data.grouped()) {
            (Data::F32(_) | Data::Panels(..), _) => {
                let mut buf = WeightBuf::zeroed(rows * self.cols * 4);
                for (values, source) in buf.f32s_mut().chunks_exact_mut(self.cols).zip(order) {
                    if let Some(r) = source {
                        self.row_f32(*r as usize, values)?;
                    }
                }
                match &self.data {
                    // The same layout as this matrix whatever the kernel now (a panel's
                    // outputs are summed in another order than a row's).
                    Data::Panels(_, element) => {
                        Data::Panels(crate::panels::pack(*element, rows, self.cols, buf.f32s()), *element)
                    }
                    _ => Data::F32(buf),
                }
            }
            (_, groups) => {
                let mut buf = WeightBuf::zeroed(rows * self.row_bytes);
                for (bytes, source) in buf.chunks_exact_mut(self.row_bytes).zip(order) {
                    let Some(r) = source.map(|r| r as usize) else { continue };
                    match (groups, self.row_ref(r)) {
                        (Some(groups), _) => self.interleaved_row(groups, r, bytes),
                        (None, RowRef::Blocks(b)) => bytes.copy_from_slice(b),
                        (None, RowRef::F32(_)) => unreachable!("f32 rows are gathered above"),
                    }
                }
                Data::Blocks(buf)
            }
        };
        let row_bytes = if matches!(data, Data::F32(_) | Data::Panels(..)) { self.cols * 4 } else { self.row_bytes };
        let mut out = Matrix { format: self.format, rows, cols: self.cols, row_bytes, data, kernel: self.kernel };
        if self.data.grouped().is_some() {
            out.interleave_rows();
        }
        Ok(out)
    }

    fn activation_rows(&self, x: &[f32]) -> Result<usize> {
        if !x.len().is_multiple_of(self.cols) {
            return Err(Error::NotMultiple { what: "x length", value: x.len(), multiple: self.cols });
        }
        Ok(x.len() / self.cols)
    }

    fn check_y(&self, y: &[f32], needed: usize) -> Result<()> {
        if y.len() < needed {
            return Err(Error::Length { what: "y", expected: needed, got: y.len() });
        }
        Ok(())
    }

    /// Computes outputs `0..n` (output `j` is weight row `j` or `select[j]`) for `m` activation rows
    /// into `y` (`[m, n]`), sharing output rows among the threads in chunks.
    fn run(&self, x: &[f32], m: usize, n: usize, select: Option<&[u32]>, y: &mut [f32], threads: &Threads) {
        if m == 0 || n == 0 {
            return;
        }
        self.run_rows(x, m, n, select, y.chunks_exact_mut(n).collect(), threads);
    }

    /// [`run`](Self::run) into one slice of `n` outputs per activation row.
    fn run_rows(
        &self,
        x: &[f32],
        m: usize,
        n: usize,
        select: Option<&[u32]>,
        mut rows: Vec<&mut [f32]>,
        threads: &Threads,
    ) {
        if m == 0 || n == 0 {
            return;
        }
        let prepared = self.kernel.prepare(self.stored_format(), x, m, self.cols);
        let macs = n.saturating_mul(self.cols).saturating_mul(m);
        if threads.count() == 1 || macs < PARALLEL_MIN_MACS {
            self.compute(&prepared, x, m, 0..n, select, &mut rows);
            return;
        }
        // About two chunks per thread, so that a thread slowed by another process does not
        // hold up the others for long (a worker that has not started costs nothing: the caller
        // takes its chunks). Four per thread measured slower on small products at M = 1 (576x192
        // on 2 threads: 5.7 vs 4.9 us), for the extra chunk hand-overs. A multiple of 16 rows:
        // a pair of groups of the interleaved layout, which the AVX-512 kernel computes at once.
        let chunk = n.div_ceil(threads.count() * 2).max(16).next_multiple_of(16);
        let chunks = n.div_ceil(chunk);
        let mut parts: Vec<Vec<&mut [f32]>> = (0..chunks).map(|_| Vec::with_capacity(m)).collect();
        for row in rows {
            for (c, part) in row.chunks_mut(chunk).enumerate() {
                parts[c].push(part);
            }
        }
        threads.for_each_chunk_mut(&mut parts, 1, &|c, part| {
            let start = c * chunk;
            let end = (start + chunk).min(n);
            self.compute(&prepared, x, m, start..end, select, &mut part[0]);
        });
    }

    /// One chunk of outputs: `outs[i][j - range.start]` for activation row `i`, output `j`.
    fn compute(
        &self,
        prepared: &crate::kernel::Prepared,
        x: &[f32],
        m: usize,
        range: std::ops::Range<usize>,
        select: Option<&[u32]>,
        outs: &mut [&mut [f32]],
    ) {
        if let Some(groups) = self.data.grouped() {
            self.compute_interleaved(groups, prepared, x, m, range, select, outs);
            return;
        }
        if let Data::Panels(data, element) = &self.data {
            self.compute_panels(*element, data, x, m, range, select, outs);
            return;
        }
        let data = match (&self.data, self.data.blocks()) {
            (Data::F32(v), _) => RowData::F32(v.f32s(), self.cols),
            (_, b) => RowData::Blocks(b.unwrap_or(&[]), self.row_bytes),
        };
        let rows = Rows { data, select, start: range.start, end: range.end };
        self.row_products(rows, prepared, x, m, outs);
    }

    /// The row kernel's products of `rows` for the `m` activation rows, `MAX_M` at a time.
    fn row_products(
        &self,
        rows: Rows<'_>,
        prepared: &crate::kernel::Prepared,
        x: &[f32],
        m: usize,
        outs: &mut [&mut [f32]],
    ) {
        let format = self.stored_format();
        for g in (0..m).step_by(MAX_M) {
            let group = (m - g).min(MAX_M);
            self.kernel.dot_rows(
                format,
                rows,
                prepared,
                &x[g * self.cols..(g + group) * self.cols],
                g,
                self.cols,
                &mut outs[g..g + group],
            );
        }
    }

    /// [`compute`](Self::compute) on the panel layout. A gathered product computes each panel
    /// it touches in full and keeps the outputs it needs: an output's sum does not depend on
    /// the range it is computed in, so it is the same gathered or not.
    #[allow(clippy::too_many_arguments)]
    fn compute_panels(
        &self,
        element: Element,
        data: &[u8],
        x: &[f32],
        m: usize,
        range: std::ops::Range<usize>,
        select: Option<&[u32]>,
        outs: &mut [&mut [f32]],
    ) {
        use crate::panels::PANEL;
        let Some(select) = select else {
            self.panel_products(element, data, x, m, range, outs);
            return;
        };
        // The outputs of one panel for all m activation rows: [m][PANEL].
        let mut lanes = vec![0.0f32; m * PANEL];
        let mut current = usize::MAX;
        for j in range.clone() {
            let row = select[j] as usize;
            let (p, lane) = (row / PANEL, row % PANEL);
            if p != current {
                current = p;
                let mut panel_outs: Vec<&mut [f32]> = lanes.chunks_exact_mut(PANEL).collect();
                let rows = p * PANEL..((p + 1) * PANEL).min(self.rows);
                self.panel_products(element, data, x, m, rows, &mut panel_outs);
            }
            for (i, out) in outs.iter_mut().enumerate() {
                out[j - range.start] = lanes[i * PANEL + lane];
            }
        }
    }

    /// The panel kernel's products of the output rows `range` for the `m` activation rows,
    /// `MAX_M` at a time.
    fn panel_products(
        &self,
        element: Element,
        data: &[u8],
        x: &[f32],
        m: usize,
        range: std::ops::Range<usize>,
        outs: &mut [&mut [f32]],
    ) {
        for g in (0..m).step_by(MAX_M) {
            let group = (m - g).min(MAX_M);
            let x = &x[g * self.cols..(g + group) * self.cols];
            self.kernel.dot_panels(element, data, self.cols, range.clone(), x, &mut outs[g..g + group]);
        }
    }

    /// The interleaved kernel's products of the output rows `range` (starting a group) for
    /// the `m` activation rows, `MAX_M` at a time; `false` when the kernel has none.
    fn group_products(
        &self,
        groups: Grouped<'_>,
        range: std::ops::Range<usize>,
        prepared: &crate::kernel::Prepared,
        m: usize,
        outs: &mut [&mut [f32]],
    ) -> bool {
        (0..m).step_by(MAX_M).all(|g| {
            let group = (m - g).min(MAX_M);
            self.kernel.dot_groups(self.format, groups, range.clone(), prepared, g, &mut outs[g..g + group])
        })
    }

    /// [`compute`](Self::compute) on the interleaved layout. Whole products go group by group
    /// through the kernel's interleaved implementation; gathered products, and kernels without
    /// one, compute each group they touch in full (its rows read back into the file's layout
    /// for the row kernels) and keep the outputs they need, so that every output is computed
    /// the same way whether gathered or not.
    #[allow(clippy::too_many_arguments)]
    fn compute_interleaved(
        &self,
        groups: Grouped<'_>,
        prepared: &crate::kernel::Prepared,
        x: &[f32],
        m: usize,
        range: std::ops::Range<usize>,
        select: Option<&[u32]>,
        outs: &mut [&mut [f32]],
    ) {
        use crate::interleave::GROUP;
        if select.is_none()
            && range.start.is_multiple_of(GROUP)
            && self.group_products(groups, range.clone(), prepared, m, outs)
        {
            return;
        }
        // The outputs of one group of rows for all m activation rows: [m][GROUP].
        let mut lanes = vec![0.0f32; m * GROUP];
        let mut rows = vec![0u8; GROUP * self.row_bytes];
        let mut current = usize::MAX;
        for j in range.clone() {
            let row = select.map_or(j, |s| s[j] as usize);
            let (g, lane) = (row / GROUP, row % GROUP);
            if g != current {
                current = g;
                self.group_outputs(groups, prepared, x, m, g, &mut rows, &mut lanes);
            }
            for (i, out) in outs.iter_mut().enumerate() {
                out[j - range.start] = lanes[i * GROUP + lane];
            }
        }
    }

    /// The outputs of rows `8g..8g+8` (those that exist) for all `m` activation rows, into
    /// `lanes[i * 8 + r]`; `rows` is scratch for eight rows of blocks.
    #[allow(clippy::too_many_arguments)]
    fn group_outputs(
        &self,
        groups: Grouped<'_>,
        prepared: &crate::kernel::Prepared,
        x: &[f32],
        m: usize,
        g: usize,
        rows: &mut [u8],
        lanes: &mut [f32],
    ) {
        use crate::interleave::GROUP;
        let range = g * GROUP..((g + 1) * GROUP).min(self.rows);
        let n = range.len();
        let mut outs: Vec<&mut [f32]> = lanes.chunks_exact_mut(GROUP).map(|l| &mut l[..n]).collect();
        if self.group_products(groups, range.clone(), prepared, m, &mut outs) {
            return;
        }
        for (r, row) in rows.chunks_exact_mut(self.row_bytes).take(n).enumerate() {
            self.interleaved_row(groups, range.start + r, row);
        }
        let rows = Rows { data: RowData::Blocks(rows, self.row_bytes), select: None, start: 0, end: n };
        self.row_products(rows, prepared, x, m, &mut outs);
    }
}
