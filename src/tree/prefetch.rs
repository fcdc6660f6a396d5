//! Prefetching the blocks a copy or a drop of an index node, or a walk
//! over a parent's children, is about to touch.
//!
//! Copying a leaf for a new tree version bumps the reference count of each
//! of its (up to 64) children, and dropping the old copy a batch later
//! takes them back. On a big tree those counts sit in 64 cold cache lines,
//! and each bump is a locked read-modify-write, which on x86 waits for its
//! line before the next one can start: 64 misses in a row. Asking for all
//! the lines first lets the misses overlap (the prefetches are in flight
//! together), so the bumps that follow mostly hit.
//!
//! A walk in ZooKeeper's child order (a snapshot, getChildren) reads each
//! child's node and then its name and data, in hash order, i.e. at random:
//! the walk asks for them some children ahead ([`node`], [`name_data`]).

/// Asks for the cache line at `p`. A hint only: never faults, whatever the
/// address, and does nothing on other architectures.
#[inline(always)]
fn line<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: PREFETCHT0 reads nothing architecturally and cannot fault;
    // SSE is part of the x86-64 baseline.
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>(p.cast::<i8>());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// Asks for the reference count of every block `arcs` points to.
#[inline]
pub(super) fn counts<'a, T: 'a>(arcs: impl IntoIterator<Item = &'a triomphe::Arc<T>>) {
    for a in arcs {
        line(triomphe::Arc::heap_ptr(a));
    }
}

/// Asks for the two lines a node's fields take (88 bytes, not aligned).
#[inline]
pub(super) fn node(n: &super::Node) {
    let p: *const super::Node = n;
    line(p);
    line(p.cast::<u8>().wrapping_add(64));
}

/// Asks for the first two lines of a node's name-and-data block. Reads
/// the node's pointer to it: ask for the node first.
#[inline]
pub(super) fn name_data(n: &super::Node) {
    let p = n.name_data.ptr().cast::<u8>();
    line(p);
    line(p.wrapping_add(64));
}
