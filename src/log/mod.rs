//! The txn log: append-only segment files in dataLogDir, preallocated. The
//! consensus core frames a batch of records and hands it to the log; one
//! durable write per batch, issued through io_uring, covers the whole batch
//! (group commit). By default (`ringkeeper.logWrite=direct`) that is one
//! O_DIRECT|O_DSYNC write; `buffered` and `mmap` copy the batch into the page
//! cache (by write, or into a map of the file) and issue one fdatasync.
//! Segments roll at a size bound, only between batches; a new segment's
//! directory entry is fsynced before any of its records can be acknowledged.
//!
//! On disk (dataLogDir):
//!
//! ```text
//! log.<first zxid, 16 hex digits>   one segment:
//!   0     .. 4096   header: magic b"RKTXNLOG", u32 BE format version (1),
//!                   zeros (header.rs); durable before any record goes in
//!   4096  ..        records, back to back, each 8-byte aligned (record.rs):
//!                   u32 len | u32 crc32c | i64 zxid | i64 durable_zxid |
//!                   payload | zero pad
//!   then            zeros to the end of the preallocation: the clean end
//! log.prepared                      the next segment being zero-filled
//!                                   (header already in place; prepare.rs)
//! ```
//!
//! Recovery, `log verify` and `log dump` check the header before anything
//! else: a file named like a segment without it is not ours and is never
//! modified (the one exception, an all-zero newest segment a crash caught
//! before its header was durable, is explained in header.rs).

pub mod direct;
pub mod header;
pub mod prepare;
pub mod range;
pub mod record;
pub mod recovery;
pub mod segment;
pub mod txn_codec;

use std::io;
use std::path::PathBuf;
use std::rc::Rc;

use glommio::io::BufferedFile;

use direct::{DirectWrite, DirectWriter};
use segment::Segment;

/// `ringkeeper.logWrite`: how a batch reaches the disk.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LogWrite {
    /// One O_DIRECT|O_DSYNC write per batch, no fdatasync.
    #[default]
    Direct,
    /// write(2) into the page cache, then fdatasync.
    Buffered,
    /// A copy into a memory map of the segment, then fdatasync.
    Mmap,
}

#[derive(Clone, Debug)]
pub struct LogSettings {
    pub dir: PathBuf,
    /// preAllocSize: disk reserved per step, in bytes.
    pub preallocate_bytes: usize,
    /// A segment rolls once it holds this much.
    pub segment_bytes_max: usize,
    /// forceSync=no skips fdatasync: for benchmarks only.
    pub force_sync: bool,
    pub write: LogWrite,
}

/// How the current segment is written and made durable.
enum SegmentIo {
    /// Appends land in the page cache; an fdatasync makes them durable.
    Cached(Rc<BufferedFile>),
    Direct(DirectWriter),
}

/// One step of a sync job.
enum SyncStep {
    Fdatasync(Rc<BufferedFile>),
    Write(DirectWrite),
}

pub struct TxnLog {
    settings: LogSettings,
    /// The mode in use: `direct` falls back to `buffered` where the
    /// filesystem refuses O_DIRECT, and forceSync=no writes `buffered`.
    write: LogWrite,
    current: Option<(Segment, SegmentIo)>,
    /// Whether the current segment has appends its next sync must cover.
    current_dirty: bool,
    /// What the next sync job does, in order: direct writes, and
    /// fdatasyncs of rolled segments appended to since the last sync.
    steps: Vec<SyncStep>,
    /// Zero-fills the next segment in the background (with forceSync only).
    preparer: Option<prepare::Preparer>,
    /// Rolls that found a prepared segment ready.
    prepared_used: u64,
    appended_zxid: i64,
}

impl TxnLog {
    pub fn new(settings: LogSettings, last_zxid: i64) -> TxnLog {
        let write = match settings.write {
            LogWrite::Direct if !settings.force_sync => LogWrite::Buffered,
            w => w,
        };
        let preparer = settings.force_sync.then(|| {
            prepare::Preparer::new(
                &settings.dir,
                settings.preallocate_bytes,
                write == LogWrite::Direct,
            )
        });
        TxnLog {
            settings,
            write,
            current: None,
            current_dirty: false,
            steps: Vec::new(),
            preparer,
            prepared_used: 0,
            appended_zxid: last_zxid,
        }
    }

    /// Where the log writes now: the current segment, or the log
    /// directory before the first (for error messages).
    pub fn location(&self) -> &std::path::Path {
        self.current
            .as_ref()
            .map_or(self.settings.dir.as_path(), |(seg, _)| seg.path.as_path())
    }

    pub fn force_sync(&self) -> bool {
        self.settings.force_sync
    }

    /// The write mode in use (after any fallback).
    pub fn write_mode(&self) -> LogWrite {
        self.write
    }

    /// Hands one batch of framed records (zxids `first_zxid..=last_zxid`)
    /// to the log, rolling to a new segment first when the current one is
    /// full. The next [`TxnLog::sync_job`] makes it durable.
    pub async fn append_batch(
        &mut self,
        framed: &[u8],
        first_zxid: i64,
        last_zxid: i64,
    ) -> io::Result<()> {
        assert!(
            crate::zab::zxid::follows(self.appended_zxid, first_zxid),
            "log append out of zxid order: {:#x} after {:#x}",
            first_zxid,
            self.appended_zxid
        );
        assert!(last_zxid >= first_zxid);
        // Roll at the size bound, and also rather than grow a segment past
        // its preallocation (a synchronous fallocate and fsync on the core,
        // and blocks that are not zero-filled); a batch larger than a whole
        // preallocation still grows the fresh segment it starts.
        let full = self.current.as_ref().is_none_or(|(s, _)| {
            s.len() >= self.settings.segment_bytes_max
                || (!s.is_empty() && s.len() + framed.len() > s.allocated())
        });
        if full {
            self.roll(first_zxid).await?;
        }
        let (seg, io) = self.current.as_mut().expect("a segment after roll");
        match io {
            SegmentIo::Cached(_) => {
                seg.append_framed(framed)?;
                self.current_dirty = true;
            }
            SegmentIo::Direct(writer) => {
                seg.reserve(framed.len())?;
                self.steps
                    .push(SyncStep::Write(writer.stage(seg.len(), framed)));
                seg.advance(framed.len());
            }
        }
        self.appended_zxid = last_zxid;
        Ok(())
    }

    async fn roll(&mut self, first_zxid: i64) -> io::Result<()> {
        let dir = &self.settings.dir;
        let mapped = self.write == LogWrite::Mmap;
        let bytes = self.settings.preallocate_bytes;
        if self.current.is_none() {
            self.await_first_prepared().await;
        }
        let prepared = self.preparer.as_mut().and_then(|p| p.take_ready());
        let seg = match prepared {
            Some(p) => {
                self.prepared_used += 1;
                Segment::adopt(&p, dir, first_zxid, bytes, mapped)?
            }
            None => Segment::create(dir, first_zxid, bytes, mapped)?,
        };
        if let Some(p) = self.preparer.as_mut() {
            p.start();
        }
        let io = match self.write {
            LogWrite::Direct => match DirectWriter::open(&seg.path, &header::encode()).await {
                Ok(w) => SegmentIo::Direct(w),
                Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                    tracing::warn!(
                        dir = %dir.display(),
                        "the log's filesystem refuses O_DIRECT: writing the log buffered instead"
                    );
                    self.write = LogWrite::Buffered;
                    SegmentIo::Cached(Rc::new(BufferedFile::open(&seg.path).await?))
                }
                Err(e) => return Err(e),
            },
            LogWrite::Buffered | LogWrite::Mmap => {
                SegmentIo::Cached(Rc::new(BufferedFile::open(&seg.path).await?))
            }
        };
        // The new file's name must survive a crash before its records count.
        glommio::io::Directory::open(dir).await?.sync().await?;
        tracing::debug!(segment = %seg.path.display(), "log segment started");
        if let Some((_, SegmentIo::Cached(old))) = self.current.replace((seg, io)) {
            if std::mem::take(&mut self.current_dirty) {
                self.steps.push(SyncStep::Fdatasync(old));
            }
        }
        Ok(())
    }

    /// The first segment after startup is wanted right away (the first
    /// session's txn), before the preparer can have finished: wait for it
    /// (zero-filling 64 MiB took 80-90 ms here), up to a bound, rather than
    /// run on a fallocated segment until the next roll.
    async fn await_first_prepared(&self) {
        const WAIT_MAX: std::time::Duration = std::time::Duration::from_secs(2);
        const POLL: std::time::Duration = std::time::Duration::from_millis(2);
        let Some(p) = &self.preparer else { return };
        let started = std::time::Instant::now();
        while p.is_running() && started.elapsed() < WAIT_MAX {
            glommio::timer::sleep(POLL).await;
        }
    }

    /// A future that makes everything appended so far durable. It owns what
    /// it needs, so the core keeps working (and appending) while it runs.
    pub fn sync_job(&mut self) -> impl std::future::Future<Output = io::Result<()>> + 'static {
        let mut steps = std::mem::take(&mut self.steps);
        if std::mem::take(&mut self.current_dirty) {
            if let Some((_, SegmentIo::Cached(f))) = &self.current {
                steps.push(SyncStep::Fdatasync(f.clone()));
            }
        }
        let force = self.settings.force_sync;
        async move {
            for step in steps {
                match step {
                    SyncStep::Fdatasync(f) if force => f.fdatasync().await?,
                    SyncStep::Fdatasync(_) => {}
                    SyncStep::Write(w) => w.run().await?,
                }
            }
            Ok(())
        }
    }

    /// How many segments were zero-filled ahead of time (the rest were
    /// preallocated with fallocate at the roll).
    pub fn prepared_segments_used(&self) -> u64 {
        self.prepared_used
    }

    pub fn appended_zxid(&self) -> i64 {
        self.appended_zxid
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::recovery::{list_segments, scan, ScanEnd};

    /// A payload whose bytes say which zxid they belong to.
    fn payload_of(zxid: i64) -> Vec<u8> {
        let len = (zxid as usize * 733) % 3001;
        (0..len).map(|i| (zxid as usize * 31 + i) as u8).collect()
    }

    /// Appends `batches` batches of varied sizes in `mode` (tiny segments and
    /// preallocation, so batches cross block boundaries, grow files and roll
    /// segments), syncing after most, then reads the log back.
    fn write_and_read_back(mode: LogWrite, batches: usize) -> (LogWrite, i64) {
        let dir = tempfile::tempdir().unwrap();
        write_and_read_back_in(dir.path().to_path_buf(), mode, batches)
    }

    fn write_and_read_back_in(
        dir: std::path::PathBuf,
        mode: LogWrite,
        batches: usize,
    ) -> (LogWrite, i64) {
        glommio::LocalExecutorBuilder::default()
            .spawn(move || async move {
                let settings = LogSettings {
                    dir: dir.clone(),
                    preallocate_bytes: 8 << 10,
                    segment_bytes_max: 40 << 10,
                    force_sync: true,
                    write: mode,
                };
                let mut log = TxnLog::new(settings, 0);
                let mut zxid = 0i64;
                for b in 0..batches {
                    if b % 20 == 0 {
                        // Give the preparer time, so some rolls adopt its
                        // file and others (right after) fall back.
                        glommio::timer::sleep(std::time::Duration::from_millis(20)).await;
                    }
                    let count = 1 + (b * 7) % 13;
                    let mut framed = Vec::new();
                    for z in zxid + 1..=zxid + count as i64 {
                        let p = payload_of(z);
                        let start = framed.len();
                        framed.resize(start + record::framed_len(p.len()), 0);
                        record::write(&mut framed[start..], z, zxid, &p);
                    }
                    let first = zxid + 1;
                    zxid += count as i64;
                    log.append_batch(&framed, first, zxid).await.unwrap();
                    // Every third batch shares its sync with the next one.
                    if b % 3 != 1 {
                        log.sync_job().await.unwrap();
                    }
                }
                log.sync_job().await.unwrap();
                let used = log.write_mode();
                assert!(log.prepared_segments_used() > 0);
                let segments = list_segments(&dir).unwrap();
                assert!(segments.len() > 3, "segments rolled: {}", segments.len());
                let mut next = 1i64;
                let end = scan(&segments, 0, |found| {
                    assert_eq!(found.header.zxid, next);
                    assert_eq!(found.payload, &payload_of(next)[..]);
                    next += 1;
                    Ok(())
                })
                .unwrap();
                assert!(matches!(end, ScanEnd::Clean { .. }), "{end:?}");
                (used, next - 1)
            })
            .unwrap()
            .join()
            .unwrap()
    }

    /// A scan after a zxid reads only the segments that can hold later
    /// records: damage in a segment all at or below it goes unseen (as
    /// ZooKeeper never reads the logs before its snapshot), and a full
    /// scan still finds it.
    #[test]
    fn a_scan_skips_segments_its_zxid_covers() {
        let dir = tempfile::tempdir().unwrap();
        write_and_read_back_in(dir.path().to_path_buf(), LogWrite::Buffered, 120);
        let segments = list_segments(dir.path()).unwrap();
        let first = &segments[0];
        let mut bytes = std::fs::read(&first.path).unwrap();
        let start = header::records_start(&bytes, bytes.len());
        bytes[start + record::HEADER_BYTES + 1] ^= 0xff;
        std::fs::write(&first.path, &bytes).unwrap();
        let covered = segments[1].first_zxid - 1;
        let mut seen = Vec::new();
        let end = scan(&segments, covered, |f| {
            seen.push(f.header.zxid);
            Ok(())
        })
        .unwrap();
        assert!(matches!(end, ScanEnd::Clean { .. }), "{end:?}");
        assert_eq!(seen.first(), Some(&segments[1].first_zxid));
        assert!(scan(&segments, i64::MIN, |_| Ok(())).is_err());
    }

    #[test]
    fn every_write_mode_reads_back_every_record() {
        for mode in [LogWrite::Direct, LogWrite::Buffered, LogWrite::Mmap] {
            let (used, last) = write_and_read_back(mode, 120);
            assert_eq!(
                last,
                (0..120).map(|b| 1 + (b * 7) % 13).sum::<usize>() as i64
            );
            // Direct falls back to buffered only where O_DIRECT is refused.
            assert!(used == mode || (mode, used) == (LogWrite::Direct, LogWrite::Buffered));
        }
    }
}
