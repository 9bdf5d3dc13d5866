//! The xtask binary's global allocator: the system allocator, which in a fuzz worker refuses any
//! request that would take the memory held past a cap.
//!
//! A loader that trusts a size field (`vec![0; n]` with `n` read from the file) asks for
//! gigabytes; refused, the allocation fails, the standard library prints "memory allocation of N
//! bytes failed" and aborts, and the supervising process reports the input as a finding instead
//! of the machine swapping. Outside `cargo xtask fuzz` the cap is off and every call goes
//! straight to the system allocator after one relaxed load.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, AtomicUsize, Ordering::Relaxed};

/// No cap: the allocator only forwards.
const UNCAPPED: usize = usize::MAX;

static LIMIT: AtomicUsize = AtomicUsize::new(UNCAPPED);
/// Bytes allocated since the cap was set, less those freed (negative when memory allocated
/// before is freed).
static LIVE: AtomicIsize = AtomicIsize::new(0);

/// The system allocator with an optional cap on the memory held.
pub(crate) struct CappedAllocator;

/// Caps the memory this process may hold from now on (counted from zero now) at `bytes`.
pub(crate) fn set_limit(bytes: usize) {
    LIVE.store(0, Relaxed);
    LIMIT.store(bytes.min(isize::MAX as usize), Relaxed);
}

/// Counts `size` more bytes, or refuses them (counting nothing) when that passes the cap.
#[inline]
fn admit(size: usize) -> bool {
    let limit = LIMIT.load(Relaxed);
    if limit == UNCAPPED {
        return true;
    }
    // `Layout` sizes never exceed isize::MAX.
    let size = size as isize;
    let live = LIVE.fetch_add(size, Relaxed).saturating_add(size);
    if live > limit as isize {
        LIVE.fetch_sub(size, Relaxed);
        return false;
    }
    true
}

#[inline]
fn release(size: usize) {
    if LIMIT.load(Relaxed) != UNCAPPED {
        LIVE.fetch_sub(size as isize, Relaxed);
    }
}

// SAFETY: every method forwards to `System` with the caller's arguments unchanged, and returns
// null (an allowed answer: allocation failure) only without calling it; the bookkeeping touches
// atomics only, never allocates and never unwinds.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for CappedAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if !admit(layout.size()) {
            return std::ptr::null_mut();
        }
        // SAFETY: the caller's layout, as `GlobalAlloc::alloc` requires.
        let ptr = unsafe { System.alloc(layout) };
        if ptr.is_null() {
            release(layout.size());
        }
        ptr
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if !admit(layout.size()) {
            return std::ptr::null_mut();
        }
        // SAFETY: as in `alloc`.
        let ptr = unsafe { System.alloc_zeroed(layout) };
        if ptr.is_null() {
            release(layout.size());
        }
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` was allocated by `System` (through this allocator) with `layout`.
        unsafe { System.dealloc(ptr, layout) };
        release(layout.size());
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let old = layout.size();
        if new_size > old && !admit(new_size - old) {
            return std::ptr::null_mut();
        }
        // SAFETY: the caller's pointer, layout and size, as `GlobalAlloc::realloc` requires.
        let new = unsafe { System.realloc(ptr, layout, new_size) };
        if new.is_null() {
            if new_size > old {
                release(new_size - old);
            }
        } else if new_size < old {
            release(old - new_size);
        }
        new
    }
}
