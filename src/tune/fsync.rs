//! Measured fdatasync latency on dataLogDir, as fio's fsync test measures
//! it: sequential 4 KiB writes, each followed by fdatasync, into a file
//! laid out beforehand (the server's log segments are preallocated, so a
//! batch overwrites rather than extends). O_DIRECT where the filesystem
//! has it. Bounded: at most [`MAX_SYNCS`] syncs and [`MAX_TIME`].
//!
//! What group commit makes of it: one fdatasync covers a whole batch, and
//! the next starts when it completes, so a server with enough writes in
//! flight does about `batch / latency` writes per second, and a single
//! write waits at least one sync.

use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;
use std::time::{Duration, Instant};

use super::logdir::TempFile;
use super::{Check, Context, Status, Value};
use crate::aligned::{AlignedBuf, ALIGN_BYTES};

pub const NAME: &str = "fdatasync_latency";
pub const TITLE: &str = "fdatasync latency on dataLogDir";
pub const MAX_SYNCS: usize = 1000;
pub const MAX_TIME: Duration = Duration::from_secs(2);
/// Writes before the timed ones (allocation, first-touch effects).
const WARMUP: usize = 3;

/// Judgement thresholds (µs).
const WARN_P50_US: f64 = 2_000.0;
const WARN_P99_US: f64 = 20_000.0;
const FAIL_P50_US: f64 = 50_000.0;
/// Apache ZooKeeper's fsync.warningthresholdms.
const FAIL_P99_US: f64 = 1_000_000.0;
/// A consensus core's write rate to plan batches for (the 2-core
/// development VM, CPU-bound, did 138k writes/s; one core alone ~250k).
pub const PLAN_WRITES_PER_S: f64 = 250_000.0;

/// The nearest-rank percentile `p` (0-100) of `sorted` (ascending).
pub fn percentile(sorted: &[f64], p: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = (p / 100.0 * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

/// What was measured.
#[derive(Debug, Clone)]
pub struct SyncStats {
    pub count: usize,
    pub p50_us: f64,
    pub p99_us: f64,
    pub max_us: f64,
    pub mean_us: f64,
    /// O_DIRECT writes (false: the filesystem refused, buffered writes).
    pub direct: bool,
    pub elapsed: Duration,
}

/// Times up to `max_syncs` 4 KiB writes + fdatasync in a temporary file in
/// `dir`, stopping after `max_time`.
pub fn measure(dir: &Path, max_syncs: usize, max_time: Duration) -> Result<SyncStats, String> {
    let blocks = max_syncs.max(1) + WARMUP;
    let tmp = TempFile::name_in(dir, "fsync");
    // Lay the file out first, with data (not fallocate: unwritten extents
    // would make each timed write a metadata change too).
    {
        let f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp.path)
            .map_err(|e| format!("create {}: {e}", tmp.path.display()))?;
        let chunk = vec![0x5au8; 256 * ALIGN_BYTES];
        let mut off = 0u64;
        let total = (blocks * ALIGN_BYTES) as u64;
        while off < total {
            let n = chunk.len().min((total - off) as usize);
            f.write_all_at(&chunk[..n], off)
                .map_err(|e| format!("lay out {}: {e}", tmp.path.display()))?;
            off += n as u64;
        }
        f.sync_all()
            .map_err(|e| format!("sync {}: {e}", tmp.path.display()))?;
    }
    let open = |flags| {
        std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(flags)
            .open(&tmp.path)
    };
    let (f, direct) = match open(libc::O_DIRECT) {
        Ok(f) => (f, true),
        Err(e) if crate::aligned::refused(&e) => (
            open(0).map_err(|e| format!("open {}: {e}", tmp.path.display()))?,
            false,
        ),
        Err(e) => return Err(format!("open {}: {e}", tmp.path.display())),
    };
    let mut buf = AlignedBuf::zeroed(ALIGN_BYTES);
    // Not zeros: some virtual disks and SSDs shortcut zero blocks.
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for b in buf.bytes_mut().chunks_mut(8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        b.copy_from_slice(&x.to_le_bytes());
    }
    let mut samples = Vec::with_capacity(max_syncs);
    let start = Instant::now();
    for i in 0..blocks {
        if i >= WARMUP && (samples.len() >= max_syncs || start.elapsed() >= max_time) {
            break;
        }
        buf.bytes_mut()[..8].copy_from_slice(&(i as u64).to_le_bytes());
        let t = Instant::now();
        f.write_all_at(buf.bytes(), (i * ALIGN_BYTES) as u64)
            .map_err(|e| format!("write {}: {e}", tmp.path.display()))?;
        f.sync_data()
            .map_err(|e| format!("fdatasync {}: {e}", tmp.path.display()))?;
        let us = t.elapsed().as_nanos() as f64 / 1000.0;
        if i >= WARMUP {
            samples.push(us);
        }
    }
    let elapsed = start.elapsed();
    if samples.is_empty() {
        return Err("no sync completed within the time bound".into());
    }
    let mean_us = samples.iter().sum::<f64>() / samples.len() as f64;
    samples.sort_by(f64::total_cmp);
    Ok(SyncStats {
        count: samples.len(),
        p50_us: percentile(&samples, 50.0).unwrap_or(0.0),
        p99_us: percentile(&samples, 99.0).unwrap_or(0.0),
        max_us: *samples.last().unwrap_or(&0.0),
        mean_us,
        direct,
        elapsed,
    })
}

/// "1.2 ms" / "85 µs".
pub fn us_text(us: f64) -> String {
    if us >= 1000.0 {
        format!("{:.2} ms", us / 1000.0)
    } else {
        format!("{us:.0} us")
    }
}

pub fn check(ctx: &Context) -> Check {
    let c = Check::new(NAME, TITLE).why(format!(
        "Every acknowledged write waits for an fdatasync of its batch. Group commit \
         issues one sync per batch and starts the next when it completes, so a single \
         write costs at least one sync, and throughput is about batch size / sync \
         latency: at p99 latency L the consensus core's ~{}k writes/s need batches of \
         {} x L(ms) txns (ringkeeper.fsyncBatchTxnsMax bounds them, 10000 by default).",
        PLAN_WRITES_PER_S as u64 / 1000,
        PLAN_WRITES_PER_S as u64 / 1000
    ));
    let s = match measure(&ctx.log_dir, ctx.max_syncs, ctx.max_sync_time) {
        Ok(s) => s,
        Err(e) => {
            return c
                .status(Status::Fail)
                .found(format!("{}: {e}", ctx.log_dir.display()))
                .fix("make dataLogDir writable with room for a few MiB, then check again")
        }
    };
    let per_s = 1e6 / s.p50_us.max(0.001);
    let batch_needed = (PLAN_WRITES_PER_S * s.p99_us / 1e6).ceil();
    let cap = ctx.config.fsync_batch_txns_max as f64;
    let found = format!(
        "{} {} KiB writes+fdatasync ({}) in {:.2} s: p50 {}, p99 {}, max {}, mean {}; \
         one write at a time gets at most ~{:.0} syncs/s; to keep up with {}k writes/s a \
         batch needs ~{} txns at p99 (ringkeeper.fsyncBatchTxnsMax={}{})",
        s.count,
        ALIGN_BYTES / 1024,
        if s.direct {
            "O_DIRECT"
        } else {
            "buffered: no O_DIRECT here"
        },
        s.elapsed.as_secs_f64(),
        us_text(s.p50_us),
        us_text(s.p99_us),
        us_text(s.max_us),
        us_text(s.mean_us),
        per_s,
        PLAN_WRITES_PER_S as u64 / 1000,
        batch_needed as u64,
        ctx.config.fsync_batch_txns_max,
        if batch_needed > cap {
            ": too small, throughput caps at batch / latency"
        } else {
            ": enough"
        }
    );
    let c = c
        .found(found)
        .value("syncs", Value::Int(s.count as i64))
        .value("p50_us", Value::Num(s.p50_us))
        .value("p99_us", Value::Num(s.p99_us))
        .value("max_us", Value::Num(s.max_us))
        .value("mean_us", Value::Num(s.mean_us))
        .value("direct", Value::Text(s.direct.to_string()))
        .value("batch_needed_at_p99", Value::Int(batch_needed as i64));
    if s.p50_us > FAIL_P50_US || s.p99_us > FAIL_P99_US {
        c.status(Status::Fail).fix(
            "this device cannot carry a coordination service's log: every write waits \
             tens of milliseconds or more. Move dataLogDir to a local SSD/NVMe of its own \
             (ideally with power-loss protection)",
        )
    } else if s.p50_us > WARN_P50_US || s.p99_us > WARN_P99_US || batch_needed > cap {
        c.status(Status::Warn).fix(
            "a faster log device (local NVMe, power-loss protected); a device of its own \
             for dataLogDir; and a batch bound that covers the latency (`ringkeeper tune \
             suggest`)",
        )
    } else {
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_nearest_rank() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&v, 50.0), Some(50.0));
        assert_eq!(percentile(&v, 99.0), Some(99.0));
        assert_eq!(percentile(&v, 100.0), Some(100.0));
        assert_eq!(percentile(&v, 0.0), Some(1.0));
        assert_eq!(percentile(&[7.0], 99.0), Some(7.0));
        assert_eq!(percentile(&[1.0, 2.0, 3.0], 50.0), Some(2.0));
        assert_eq!(percentile(&[], 50.0), None);
    }

    #[test]
    fn a_measurement_is_bounded_and_positive() {
        let dir = tempfile::tempdir().unwrap();
        let s = measure(dir.path(), 20, Duration::from_secs(2)).unwrap();
        assert!(s.count >= 1 && s.count <= 20, "{s:?}");
        assert!(s.p50_us > 0.0 && s.p50_us <= s.p99_us && s.p99_us <= s.max_us);
        // The temporary file is gone.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
