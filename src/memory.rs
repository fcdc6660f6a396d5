//! Whether the kernel may back the server's heap with transparent huge
//! pages (THP).
//!
//! mimalloc asks for them (`madvise(MADV_HUGEPAGE)` on each 1 GiB arena),
//! so on a kernel in THP's common `madvise` mode every 2 MiB of heap the
//! server touches becomes resident whole. The tree fills its pages densely,
//! but the rest of the heap (buffers, per-batch copies of index nodes,
//! each size class's partly used pages) does not, and a huge page cannot
//! give back the part of it that is free. Measured (`tuning/scale.md`,
//! session of 2026-11-26): an idle server held 12 MiB of anonymous memory
//! as 6 huge pages; at 1M znodes of 100 bytes the RSS was 290 MiB spread
//! over 100 parents and 297 MiB under one parent with THP, 278 and 287 MiB
//! without. The same reasons (memory held, and stalls while the kernel
//! compacts memory to find huge pages) are why Redis and MongoDB tell
//! operators to turn THP off.
//!
//! What THP buys is fewer TLB misses on a tree far bigger than the cache:
//! 3-5% in `cargo bench --bench tree_scale -- create_growing` at 10k and
//! 5M znodes. So the server turns THP off for itself by default
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
