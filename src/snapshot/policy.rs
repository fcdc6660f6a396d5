//! When to snapshot and what to purge: every snapCount txns (randomized per
//! server between snapCount/2 and snapCount, as ZooKeeper does so that an
//! ensemble's servers do not all snapshot at once) once the log written
//! since the last snapshot is at least half the size of the next one.
//!
//! The second condition is ours. With snapCount alone, a big tree is
//! rewritten whole every snapCount small txns: at 1M znodes of 100 bytes a
//! ~190 MB snapshot per ~20 MB of log, which on one disk made the log's
//! fdatasync wait behind the snapshot's writeback (mean sync 8 -> 26 ms,
//! creates/s halved for seconds). Bounding snapshot bytes to twice the log
//! bytes keeps that amplification fixed, and recovery replays at most about
//! half a snapshot's worth of log on top of loading one. Written on a background
//! thread from an O(1) clone of the durable tree; then, with autopurge on,
//! old snapshots beyond snapRetainCount and the log segments only they need
//! are removed, holding [`Policy::files_lock`] so that an ensemble member
//! cutting its log or installing a leader's snapshot never races a purge.

use std::path::PathBuf;
use std::sync::Arc;
use std::thread::JoinHandle;

use super::SessionEntry;
use crate::admin::javafmt::wall_ms;
use crate::admin::metrics::group_commit::CoreMetrics;
use crate::config::Config;
use crate::tree::Tree;

/// Where a snapshot's session table comes from (the consensus core's
/// session tracker), asked only when a snapshot starts. A trait, so that
/// snapshot, below the consensus core, does not name it.
pub trait Sessions {
    fn session_entries(&self) -> Vec<SessionEntry>;
}

pub struct Policy {
    threshold: u64,
    since_last: u64,
    /// Log bytes written since the last snapshot started.
    log_bytes_since_last: u64,
    data_dir: PathBuf,
    log_dir: PathBuf,
    retain: usize,
    purge: bool,
    /// The snapshot writer's pace (0: unpaced).
    write_bytes_per_s: u64,
    running: Option<JoinHandle<()>>,
    /// Held while a purge removes files, and by whoever else removes or
    /// cuts snapshots and log segments.
    files: Arc<std::sync::Mutex<()>>,
    /// Where the time each snapshot took goes (ZooKeeper's snapshottime),
    /// when metrics are on.
    metrics: Option<Arc<CoreMetrics>>,
}

/// What a snapshot of `tree` takes on disk, roughly: paths and data, plus
/// ~64 bytes of stat and framing per node (the ACL is a few bytes more).
fn estimated_snapshot_bytes(tree: &Tree) -> u64 {
    tree.approximate_data_size() + tree.znode_count() as u64 * 64
}

impl Policy {
    pub fn new(config: &Config, metrics: Option<Arc<CoreMetrics>>) -> Policy {
        let half = (config.snap_count / 2).max(1);
        let jitter = wall_ms(std::time::SystemTime::now()).unsigned_abs() % half;
        Policy {
            threshold: half + jitter,
            since_last: 0,
            log_bytes_since_last: 0,
            data_dir: config.data_dir.clone(),
            log_dir: config.data_log_dir.clone(),
            retain: config.snap_retain_count.max(3),
            purge: config.purge_interval_hours > 0,
            write_bytes_per_s: config.snapshot_write_mbps.saturating_mul(1_000_000),
            running: None,
            files: Arc::new(std::sync::Mutex::new(())),
            metrics,
        }
    }

    /// The lock a purge holds while it removes snapshots and segments.
    pub fn files_lock(&self) -> Arc<std::sync::Mutex<()>> {
        self.files.clone()
    }

    /// `bytes` more bytes are in the txn log.
    pub fn logged(&mut self, bytes: usize) {
        self.log_bytes_since_last += bytes as u64;
    }

    /// `txns` more txns are durable, the last of them giving `tree`.
    pub fn committed(&mut self, txns: u64, tree: &Tree, core: &dyn Sessions) {
        self.since_last += txns;
        if self.since_last < self.threshold
            || self.log_bytes_since_last < estimated_snapshot_bytes(tree) / 2
        {
            return;
        }
        if self.running.as_ref().is_some_and(|h| !h.is_finished()) {
            return; // one at a time; the next commit asks again
        }
        self.since_last = 0;
        self.log_bytes_since_last = 0;
        let tree = tree.clone();
        let sessions = core.session_entries();
        let (data_dir, log_dir, retain, purge) = (
            self.data_dir.clone(),
            self.log_dir.clone(),
            self.retain,
            self.purge,
        );
        let metrics = self.metrics.clone();
        let files = self.files.clone();
        let pace = self.write_bytes_per_s;
        let spawned = std::thread::Builder::new()
            .name("rk-snapshot".into())
            .spawn(move || {
                lower_priority();
                let started = std::time::Instant::now();
                let znodes = tree.znode_count();
                // Start and end, with their times, are what
                // tuning/snapshot-impact.py lines throughput up against.
                tracing::info!(znodes, zxid = %format_args!("{:#x}", tree.last_zxid()), "snapshot started");
                match super::write(&data_dir, &tree, &sessions, pace) {
                    Ok(path) => {
                        let us = started.elapsed().as_micros() as u64;
                        if let Some(m) = &metrics {
                            m.snapshot_written(us);
                        }
                        tracing::info!(snapshot = %path.display(), znodes, ms = us / 1000, "snapshot written")
                    }
                    Err(e) => {
                        tracing::error!("snapshot failed: {e}");
                        return;
                    }
                }
                if purge {
                    let _files = files.lock().unwrap_or_else(|e| e.into_inner());
                    if let Err(e) = purge_old(&data_dir, &log_dir, retain) {
                        tracing::warn!("purge failed: {e}");
                    }
                }
            });
        match spawned {
            Ok(h) => self.running = Some(h),
            Err(e) => tracing::error!("cannot start the snapshot thread: {e}"),
        }
    }
}

/// Runs this (snapshot) thread at the lowest CPU priority (nice 19) and in
/// the idle I/O class: the serving threads and the log come first when they
/// share a core with it (as on small machines), and the log's writes go
/// ahead of the snapshot's in the block layer (its final fsync writes the
/// whole file back from this thread; I/O schedulers that honour classes,
/// mq-deadline and bfq, serve the log first, with aging against starvation).
fn lower_priority() {
    const IOPRIO_CLASS_IDLE: libc::c_long = 3;
    const IOPRIO_CLASS_SHIFT: u32 = 13;
    const IOPRIO_WHO_PROCESS: libc::c_long = 1;
    // SAFETY: gettid, setpriority and ioprio_set take no memory; on Linux a
    // thread id names one thread for both (PRIO_PROCESS, IOPRIO_WHO_PROCESS).
    let (nice, io) = unsafe {
        let tid = libc::gettid();
        (
            libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, 19),
            libc::syscall(
                libc::SYS_ioprio_set,
                IOPRIO_WHO_PROCESS,
                libc::c_long::from(tid),
                IOPRIO_CLASS_IDLE << IOPRIO_CLASS_SHIFT,
            ),
        )
    };
    if nice != 0 || io != 0 {
        tracing::debug!(
            "snapshot thread priority not lowered: {}",
            std::io::Error::last_os_error()
        );
    }
}

/// Keeps the `retain` newest snapshots and the log segments that hold txns
/// after the oldest of them; removes the rest.
pub fn purge_old(
    data_dir: &std::path::Path,
    log_dir: &std::path::Path,
    retain: usize,
) -> std::io::Result<()> {
    let snaps = super::list(data_dir)?;
    if snaps.len() <= retain {
        return Ok(());
    }
    for (_, path) in &snaps[retain..] {
        std::fs::remove_file(path)?;
    }
    let oldest_kept = snaps[retain - 1].0;
    let segments = crate::log::recovery::list_segments(log_dir)?;
    // Segment i holds zxids below the next one's first: removable when all
    // of them are in the oldest kept snapshot.
    for pair in segments.windows(2) {
        if pair[1].first_zxid <= oldest_kept + 1 {
            std::fs::remove_file(&pair[0].path)?;
        }
    }
    Ok(())
}
