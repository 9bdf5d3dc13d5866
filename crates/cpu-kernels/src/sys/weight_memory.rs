//! Memory for weight matrices, on transparent huge pages where the OS offers them.
//!
//! # Why
//!
//! Decoding streams every weight once per step: SmolLM2-135M reads 98 MB (Q4_1) or 538 MB (f32)
//! per token, 4 KB page after 4 KB page. On 4 KB pages that is a TLB miss, and a page walk,
//! every 4 KB, and the hardware prefetchers stop at each page boundary; on 2 MB pages both go
//! away. Linux backs anonymous memory with 2 MB pages only where the process asks
//! (`madvise(MADV_HUGEPAGE)`, when `/sys/kernel/mm/transparent_hugepage/enabled` is `madvise`,
//! the common default), and only for whole aligned 2 MB ranges. So the weights are not left to
//! the allocator, which spreads them over unaligned blocks (most matrices of a small model are
//! under 2 MB): they are packed one after the other into 2 MB-aligned slabs of
//! [`SLAB_BYTES`], each advised before its first byte is written.
//!
//! Measured on SmolLM2-135M-Instruct Q4_1, 2 threads, against the binary before this module
//! (weights in `Vec`s), alternating runs on this noisy 2-core VM:
//! - `anyspec demo --methods prompt,hybrid-ngram`, three pairs: autoregressive 118.0 / 110.0 /
//!   112.2 → 124.7 / 143.7 / 136.4 tokens/s (+6 / +31 / +22%), the speculative rows alike;
//! - `cargo xtask bench-cpu`, four pairs: a single-position pass 7.42 → 6.58 ms (mean),
//!   decoding after 768 tokens of context 88 → 105 tokens/s; the model converted to f32, one
//!   thread, three pairs: decoding 19.6 → 23.6 tokens/s.
//!
//! (This binary run with `GLIBC_TUNABLES=glibc.malloc.hugetlb=1`, which advises all of the
//! allocator's memory, KV cache and activations too, gained little more: a single-position
//! pass 6.58 → 6.31 ms, mean of four alternating pairs, inside the noise.)
//!
//! # Memory
//!
//! Slabs are bump-allocated and not reused in part (but for the latest buffer, which gives its
//! bytes back when dropped): a slab is returned to the allocator when the last matrix in it is
//! dropped. Only written pages are resident, so a slab's unused tail
//! costs address space, not memory (at most the rest of one 2 MB page). A matrix of more than a
//! quarter of a slab gets a slab of its own, of its own size.
//!
//! Elsewhere (another OS, or THP disabled) the advice is a no-op and the weights are laid out
//! the same way on ordinary pages.

use std::alloc::{Layout, alloc, dealloc, handle_alloc_error};
use std::ptr::NonNull;
use std::sync::{Arc, Mutex, PoisonError, Weak};

/// A transparent huge page on x86-64 and most aarch64 kernels.
const HUGE_PAGE: usize = 2 << 20;

/// Bytes of one shared slab: sixteen huge pages, a few layers of a small model.
const SLAB_BYTES: usize = 32 << 20;

/// Alignment of every buffer: a cache line, and more than any kernel's loads need.
const ALIGN: usize = 64;

/// One allocation, 2 MB-aligned, that buffers are carved from.
struct Slab {
    ptr: NonNull<u8>,
    layout: Layout,
}

// SAFETY: a slab is plain memory; the buffers carved from it are disjoint ranges, and each is
// reached only through its own `WeightBuf` (shared `&` or exclusive `&mut` as Rust's rules give).
unsafe impl Send for Slab {}
// SAFETY: as above.
unsafe impl Sync for Slab {}

impl Slab {
    fn new(bytes: usize) -> Slab {
        let layout =
            Layout::from_size_align(bytes.max(ALIGN), HUGE_PAGE).expect("a weight buffer's size fits a Layout");
        // SAFETY: the layout's size is non-zero.
        let ptr = unsafe { alloc(layout) };
        let Some(ptr) = NonNull::new(ptr) else { handle_alloc_error(layout) };
        advise_huge_pages(ptr.as_ptr(), layout.size());
        Slab { ptr, layout }
    }
}

impl Drop for Slab {
    fn drop(&mut self) {
        // SAFETY: allocated in `Slab::new` with this layout, freed once.
        unsafe { dealloc(self.ptr.as_ptr(), self.layout) }
    }
}

/// Asks the kernel to back `[ptr, ptr + len)` with huge pages. Advisory: an error (THP
/// compiled out or disabled) leaves ordinary pages, which are correct, only slower.
#[cfg(target_os = "linux")]
fn advise_huge_pages(ptr: *mut u8, len: usize) {
    const MADV_HUGEPAGE: i32 = 14;
    unsafe extern "C" {
        fn madvise(addr: *mut std::ffi::c_void, len: usize, advice: i32) -> i32;
    }
    // SAFETY: the range is one live allocation of ours, page-aligned at its start (2 MB); the
    // call changes only how the kernel backs it, never its contents.
    let _ = unsafe { madvise(ptr.cast(), len, MADV_HUGEPAGE) };
}

#[cfg(not(target_os = "linux"))]
fn advise_huge_pages(_ptr: *mut u8, _len: usize) {}

/// The slab that small buffers are being packed into, and how much of it is taken.
struct Current {
    slab: Weak<Slab>,
    used: usize,
}

static CURRENT: Mutex<Current> = Mutex::new(Current { slab: Weak::new(), used: 0 });

/// An owned, zero-initialised, 64-byte-aligned byte buffer holding one matrix's weights.
pub(crate) struct WeightBuf {
    /// `None` for an empty buffer, which takes no memory.
    slab: Option<Arc<Slab>>,
    offset: usize,
    len: usize,
}

impl WeightBuf {
    /// `len` zero bytes.
    pub(crate) fn zeroed(len: usize) -> WeightBuf {
        if len == 0 {
            return WeightBuf { slab: None, offset: 0, len: 0 };
        }
        let (slab, offset) = if len > SLAB_BYTES / 4 {
            (Arc::new(Slab::new(len)), 0)
        } else {
            let mut current = CURRENT.lock().unwrap_or_else(PoisonError::into_inner);
            let start = current.used.next_multiple_of(ALIGN);
            match current.slab.upgrade() {
                Some(slab) if start + len <= SLAB_BYTES => {
                    current.used = start + len;
                    (slab, start)
                }
                _ => {
                    let slab = Arc::new(Slab::new(SLAB_BYTES));
                    *current = Current { slab: Arc::downgrade(&slab), used: len };
                    (slab, 0)
                }
            }
        };
        // SAFETY: offset + len lies inside the slab (checked above, or a slab of its own), and
        // no other buffer covers these bytes: the range was just taken from the bump pointer.
        unsafe { slab.ptr.as_ptr().add(offset).write_bytes(0, len) };
        WeightBuf { slab: Some(slab), offset, len }
    }

    /// A copy of `bytes`.
    pub(crate) fn copy_of(bytes: &[u8]) -> WeightBuf {
        let mut buf = WeightBuf::zeroed(bytes.len());
        buf.copy_from_slice(bytes);
        buf
    }

    /// A copy of `values`, as f32 ([`WeightBuf::f32s`] reads them back).
    pub(crate) fn copy_of_f32(values: &[f32]) -> WeightBuf {
        let mut buf = WeightBuf::zeroed(values.len() * 4);
        buf.f32s_mut().copy_from_slice(values);
        buf
    }

    /// The bytes as f32 values (`len / 4` of them; the start is 64-byte aligned).
    pub(crate) fn f32s(&self) -> &[f32] {
        // SAFETY: the start is 64-byte aligned, the len / 4 floats lie inside the buffer, which
        // was initialised (every bit pattern is an f32), and `&self` keeps them from being
        // written while the slice lives.
        unsafe { std::slice::from_raw_parts(self.start().cast::<f32>(), self.len / 4) }
    }

    /// The bytes as f32 values, to write.
    pub(crate) fn f32s_mut(&mut self) -> &mut [f32] {
        // SAFETY: as in `f32s`, with `&mut self` making the access exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.start().cast::<f32>(), self.len / 4) }
    }

    /// Whether dropping this buffer would give its bytes back to the current slab (it is the
    /// latest buffer taken from it); a buffer with a slab of its own frees the slab instead.
    pub(crate) fn is_latest(&self) -> bool {
        self.is_top_of(&CURRENT.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// Whether this buffer ends where `current`'s bump pointer stands, in its slab.
    fn is_top_of(&self, current: &Current) -> bool {
        self.slab
            .as_ref()
            .is_some_and(|slab| current.slab.as_ptr() == Arc::as_ptr(slab) && current.used == self.offset + self.len)
    }

    fn start(&self) -> *mut u8 {
        match &self.slab {
            // SAFETY: offset ≤ the slab's size (see `zeroed`).
            Some(slab) => unsafe { slab.ptr.as_ptr().add(self.offset) },
            // Empty: any aligned, non-null address serves a zero-length slice.
            None => std::ptr::without_provenance_mut(ALIGN),
        }
    }
}

impl Drop for WeightBuf {
    /// The latest buffer of the current slab gives its bytes back to the bump pointer, so that
    /// a matrix repacked right after it was read (copied, then interleaved into a new buffer)
    /// does not leave its first copy behind: [`crate::Matrix::interleave_rows`] moves the rows
    /// out to the heap, drops their buffer, and takes the same bytes for the new layout.
    /// Any other buffer's bytes stay taken until its whole slab is freed.
    fn drop(&mut self) {
        if self.slab.is_none() {
            return;
        }
        let mut current = CURRENT.lock().unwrap_or_else(PoisonError::into_inner);
        if self.is_top_of(&current) {
            current.used = self.offset;
        }
    }
}

impl std::ops::Deref for WeightBuf {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        // SAFETY: the buffer's own initialised range; `&self` keeps it from being written.
        unsafe { std::slice::from_raw_parts(self.start(), self.len) }
    }
}

impl std::ops::DerefMut for WeightBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: the buffer's own range, exclusive through `&mut self`.
        unsafe { std::slice::from_raw_parts_mut(self.start(), self.len) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_are_aligned_disjoint_and_keep_their_contents() {
        // Sizes that share slabs, spill into a new one and get one of their own.
        let sizes = [100usize, 1, 0, 3 << 20, 7 << 20, 9 << 20, 5000, 40 << 20, 64];
        let bufs: Vec<WeightBuf> = sizes
            .iter()
            .enumerate()
            .map(|(i, &n)| WeightBuf::copy_of(&(0..n).map(|k| (k * 31 + i) as u8).collect::<Vec<_>>()))
            .collect();
        for (i, (buf, &n)) in bufs.iter().zip(&sizes).enumerate() {
            assert_eq!(buf.len(), n);
            assert_eq!(buf.as_ptr() as usize % ALIGN, 0, "buffer {i} misaligned");
            assert!(buf.iter().enumerate().all(|(k, &b)| b == (k * 31 + i) as u8), "buffer {i} overwritten");
        }
        let mut ranges: Vec<(usize, usize)> = bufs
            .iter()
            .filter(|b| !b.is_empty())
            .map(|b| (b.as_ptr() as usize, b.as_ptr() as usize + b.len()))
            .collect();
        ranges.sort_unstable();
        assert!(ranges.windows(2).all(|w| w[0].1 <= w[1].0), "two buffers overlap");
    }

    #[test]
    fn f32_view_round_trips() {
        let values: Vec<f32> = (0..1000).map(|i| i as f32 * 0.5 - 7.0).collect();
        let buf = WeightBuf::copy_of_f32(&values);
        assert_eq!(buf.f32s(), values.as_slice());
        assert_eq!(buf.len(), 4000);
    }

    /// The kernel's flags of the mapping that holds `addr` (`/proc/self/smaps`' `VmFlags`).
    #[cfg(target_os = "linux")]
    fn mapping_flags(addr: usize) -> Option<String> {
        let smaps = std::fs::read_to_string("/proc/self/smaps").ok()?;
        let mut inside = false;
        for line in smaps.lines() {
            let range = line.split_whitespace().next().and_then(|r| r.split_once('-'));
            if let Some((start, end)) =
                range.and_then(|(s, e)| Some((usize::from_str_radix(s, 16).ok()?, usize::from_str_radix(e, 16).ok()?)))
            {
                inside = (start..end).contains(&addr);
            } else if inside && let Some(flags) = line.strip_prefix("VmFlags:") {
                return Some(flags.trim().to_string());
            }
        }
        None
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn slabs_are_advised_to_use_huge_pages() {
        if !std::path::Path::new("/sys/kernel/mm/transparent_hugepage/enabled").exists() {
            return; // A kernel without transparent huge pages: the advice is a no-op.
        }
        let small = WeightBuf::copy_of(&[7u8; 4096]);
        let large = WeightBuf::zeroed(SLAB_BYTES);
        for buf in [&small, &large] {
            let flags = mapping_flags(buf.as_ptr() as usize).expect("the buffer lies in a mapping of smaps");
            // `hg`: the mapping was given MADV_HUGEPAGE.
            assert!(flags.split_whitespace().any(|f| f == "hg"), "no huge-page advice on the weights: {flags}");
        }
    }

    #[test]
    fn the_latest_buffer_gives_its_bytes_back() {
        // Other tests allocate concurrently from the same slab, so retry until no buffer was
        // taken between the two allocations.
        let reused = (0..100).any(|_| {
            let first = WeightBuf::copy_of(&[1u8; 1000]);
            let at = first.as_ptr();
            drop(first);
            let second = WeightBuf::copy_of(&[2u8; 1000]);
            second.as_ptr() == at && second.iter().all(|&b| b == 2)
        });
        assert!(reused, "a dropped latest buffer's bytes were never handed out again");
        let keep = WeightBuf::copy_of(&[3u8; 1000]);
        let middle = WeightBuf::copy_of(&[4u8; 1000]);
        let top = WeightBuf::copy_of(&[5u8; 1000]);
        let middle_at = middle.as_ptr();
        drop(middle);
        let next = WeightBuf::copy_of(&[6u8; 1000]);
        assert_ne!(next.as_ptr(), middle_at, "a buffer below the top was handed out again while its neighbour lives");
        assert!(keep.iter().all(|&b| b == 3) && top.iter().all(|&b| b == 5) && next.iter().all(|&b| b == 6));
    }

    #[test]
    fn a_slab_outlives_its_first_buffer() {
        let first = WeightBuf::copy_of(&[1u8; 1000]);
        let second = WeightBuf::copy_of(&[2u8; 1000]);
        drop(first);
        let third = WeightBuf::copy_of(&[3u8; 1000]);
        assert!(second.iter().all(|&b| b == 2));
        assert!(third.iter().all(|&b| b == 3));
    }
}
