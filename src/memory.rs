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
use std::time::Duration;

/// How often each executor looks whether it went quiet.
pub const COLLECT_EVERY: Duration = Duration::from_secs(1);

/// Less time running tasks than this over [`COLLECT_EVERY`] is quiet.
const QUIET_RUNTIME: Duration = Duration::from_millis(2);

/// Runs on every executor, for good. mimalloc gives a block another
/// thread frees back to the thread that owns its page only when that
/// thread next allocates from the page or collects: a 1 MB value received
/// on one shard and dropped on another (the core's copy, a commit batch's
/// txn, the old value of a node) stays with an executor that went quiet
/// after a burst, for as long as it stays quiet (56 MiB after 48 sets of
/// 1 MB on three shards, `tests/client_ring.rs`).
///
/// A busy executor allocates all the time and takes such blocks back
/// itself, so nothing is done while it is busy. Once it goes quiet, the
/// first quiet second collects with force (empty pages and cached
/// segments go back to the OS: a plain collect still left 18 MiB in that
/// test), and every later one collects plainly, for blocks freed since.
/// Measured with 1M znodes of 100 bytes on two shards, while loading them:
/// a plain collect took 43 us (median; at most 0.8 ms), a forced one
/// 209 us (at most 2.2 ms), which is why a busy executor gets neither.
pub async fn collect_foreign_frees() {
    let mut forced_while_quiet = false;
    let mut collecting = Duration::ZERO;
    loop {
        glommio::timer::sleep(COLLECT_EVERY).await;
        // Taken (and reset) here only: nothing else reads these stats. The
        // last collect ran inside this period's count: a forced one on a
        // large heap takes milliseconds, and would make a quiet executor
        // look busy and force again every other second.
        let ran = glommio::executor().executor_stats().executor_runtime();
        if ran.saturating_sub(collecting) >= QUIET_RUNTIME {
            forced_while_quiet = false;
            collecting = Duration::ZERO;
            continue;
        }
        let started = std::time::Instant::now();
        // SAFETY: mi_collect takes no pointers; it tidies the calling
        // thread's heap, which nothing else touches meanwhile.
        unsafe { libmimalloc_sys::mi_collect(!forced_while_quiet) };
        collecting = started.elapsed();
        forced_while_quiet = true;
    }
}

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
