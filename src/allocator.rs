//! The server's global allocator: mimalloc v2, entered through its plain
//! `mi_malloc` family whenever the layout allows.
//!
//! The `mimalloc` crate's `GlobalAlloc` calls `mi_malloc_aligned` for every
//! layout. That path checks the alignment, looks for a block that happens
//! to be aligned, and for blocks above 1 KiB goes through its generic
//! aligned allocation: counted with `tuning/saturated-instructions.sh`,
//! about 54 instructions per allocation and 143 per 1 KiB write in the
//! generic part alone, where `mi_malloc` pops a free list. A saturated write
//! allocates about four times (its path, its data, a reply, log buffers).
//!
//! mimalloc places every block of up to 64 KiB at a multiple of its size
//! class, so a block is aligned to any power of two up to 16 that is not
//! larger than the size asked for (`mi_malloc_is_naturally_aligned` in
//! mimalloc's alloc-aligned.c). Layouts that meet that (the condition std's
//! `System` allocator uses for `malloc`) take the plain functions; any other
//! takes the aligned ones, as before.

use std::alloc::{GlobalAlloc, Layout};
use std::ffi::c_void;

use libmimalloc_sys as mi;

/// mimalloc's `MI_MAX_ALIGN_SIZE`: the alignment its plain functions give
/// any block at least this large.
const PLAIN_ALIGN_MAX: usize = 16;

/// mimalloc as the global allocator (`#[global_allocator]` in main.rs).
pub struct Mimalloc;

/// Whether mimalloc's plain functions return blocks aligned for `layout`.
fn plain(align: usize, size: usize) -> bool {
    align <= PLAIN_ALIGN_MAX && align <= size
}

// SAFETY: every block comes from mimalloc, aligned as `layout` asks (see
// the module doc for the plain functions' alignment), and is freed with
// mi_free, which takes blocks from either family.
unsafe impl GlobalAlloc for Mimalloc {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: mimalloc allocates for any size; the alignment is a
        // power of two (Layout's invariant).
        unsafe {
            if plain(layout.align(), layout.size()) {
                mi::mi_malloc(layout.size()) as *mut u8
            } else {
                mi::mi_malloc_aligned(layout.size(), layout.align()) as *mut u8
            }
        }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as in alloc.
        unsafe {
            if plain(layout.align(), layout.size()) {
                mi::mi_zalloc(layout.size()) as *mut u8
            } else {
                mi::mi_zalloc_aligned(layout.size(), layout.align()) as *mut u8
            }
        }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, _layout: Layout) {
        // SAFETY: `ptr` came from this allocator (GlobalAlloc's contract).
        unsafe { mi::mi_free(ptr as *mut c_void) }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: `ptr` came from this allocator with `layout`; the new
        // block must be aligned as `layout` for `new_size` bytes.
        unsafe {
            if plain(layout.align(), new_size) {
                mi::mi_realloc(ptr as *mut c_void, new_size) as *mut u8
            } else {
                mi::mi_realloc_aligned(ptr as *mut c_void, new_size, layout.align()) as *mut u8
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every alignment from 1 to 4 KiB with sizes around each size class
    /// up to 70 KiB: blocks are aligned as asked, hold what was written,
    /// keep it through a realloc up and down, and zeroed ones are zero.
    #[test]
    fn blocks_are_aligned_and_keep_their_bytes() {
        let a = Mimalloc;
        let mut sizes: Vec<usize> = (1..=130).collect();
        for base in [256, 1000, 1024, 4096, 8192, 65536, 70000] {
            sizes.extend([base - 1, base, base + 1, base + 8]);
        }
        for align in (0..=12).map(|s| 1usize << s) {
            for &size in &sizes {
                let layout = Layout::from_size_align(size, align).unwrap();
                // SAFETY: non-zero sizes; every block freed once, with the
                // layout it has at the time.
                unsafe {
                    let p = a.alloc(layout);
                    assert!(!p.is_null());
                    assert_eq!(p as usize % align, 0, "size {size} align {align}");
                    for i in 0..size {
                        *p.add(i) = i as u8;
                    }
                    let bigger = size * 3 + 5;
                    let q = a.realloc(p, layout, bigger);
                    assert_eq!(q as usize % align, 0, "realloc up {size} align {align}");
                    assert!((0..size).all(|i| *q.add(i) == i as u8));
                    let smaller = size.div_ceil(2);
                    let big_layout = Layout::from_size_align(bigger, align).unwrap();
                    let r = a.realloc(q, big_layout, smaller);
                    assert_eq!(r as usize % align, 0, "realloc down {size} align {align}");
                    assert!((0..smaller).all(|i| *r.add(i) == i as u8));
                    a.dealloc(r, Layout::from_size_align(smaller, align).unwrap());
                    let z = a.alloc_zeroed(layout);
                    assert_eq!(z as usize % align, 0, "zeroed {size} align {align}");
                    assert!((0..size).all(|i| *z.add(i) == 0));
                    a.dealloc(z, layout);
                }
            }
        }
    }

    #[test]
    fn plain_only_where_mimalloc_aligns_naturally() {
        assert!(plain(8, 8));
        assert!(plain(16, 16));
        assert!(plain(16, 24));
        assert!(plain(1, 1));
        assert!(!plain(16, 8));
        assert!(!plain(32, 64));
        assert!(!plain(8, 4));
    }
}
