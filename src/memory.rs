//! Whether the kernel may back the server's heap with transparent huge
//! pages (THP).
//!
//! With THP on for a region (the kernel's `always` mode, the default of
//! several distributions, or `madvise` mode and an allocator that asks, as
//! mimalloc v3 does for each 1 GiB arena), every 2 MiB of heap the server
//! touches becomes resident whole. The tree fills its pages densely, but
//! the rest of the heap (buffers, per-batch copies of index nodes, each
//! size class's partly used pages) does not, and a huge page cannot give
//! back the part of it that is free. Measured (`tuning/scale.md`, session
//! of 2026-11-26), RSS after loading 1M znodes of 100 bytes over 100
//! parents: with mimalloc v3 in `madvise` mode 290 MiB with THP, 278-282
//! without (an idle server held 12 MiB as 6 huge pages); with mimalloc v2
//! (the allocator now, which does not ask) in `always` mode 274 MiB (peak
//! 281) with THP, 266 (peak 272) without. The same reasons (memory held,
//! and stalls while the kernel compacts memory to find huge pages) are why
//! Redis and MongoDB tell operators to turn THP off.
//!
//! What THP buys is TLB reach on a tree far bigger than the cache: with
//! mimalloc v3, `cargo bench --bench tree_scale -- create_growing` ran
//! 3-5% faster with it at 10k and at 5M znodes in two alternations
//! (criterion called neither difference significant). So the server turns
//! THP off for itself by default
//! (`prctl(PR_SET_THP_DISABLE)`, which the kernel checks at each page
//! fault, so it holds for memory mapped before the call too), and
//! `ringkeeper.transparentHugePages=true` leaves the system's setting in
//! force.

use std::io;

/// Allows (`true`) or forbids (`false`) transparent huge pages for this
/// process from here on.
pub fn allow_transparent_huge_pages(allow: bool) -> io::Result<()> {
    // SAFETY: PR_SET_THP_DISABLE takes a flag by value and no memory.
    let r = unsafe {
        libc::prctl(
            libc::PR_SET_THP_DISABLE,
            libc::c_ulong::from(!allow),
            0,
            0,
            0,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the kernel reports for this process ("THP_enabled" in
    /// /proc/self/status, Linux 5.0 on), or None on an older kernel.
    fn thp_enabled() -> Option<bool> {
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let line = status.lines().find(|l| l.starts_with("THP_enabled:"))?;
        Some(line.split_whitespace().nth(1)? == "1")
    }

    #[test]
    fn the_kernel_sees_the_setting() {
        allow_transparent_huge_pages(false).unwrap();
        if let Some(on) = thp_enabled() {
            assert!(!on);
        }
        allow_transparent_huge_pages(true).unwrap();
        if let Some(on) = thp_enabled() {
            assert!(on);
        }
    }
}
