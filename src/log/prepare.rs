//! The next log segment, zero-filled ahead of time on a thread of its own.
//!
//! A segment preallocated with fallocate holds unwritten extents: the first
//! write to each block must convert it, a metadata change the filesystem
//! journals, so that write's sync waits for a journal commit too. Writing
//! real zeros first turns every later log write into a plain overwrite.
//! Measured here with one client doing sync creates: p90 0.3-0.45 ms
//! instead of 0.75-4 ms, p99 0.5-1.4 ms instead of 3.6-6.6 ms
//! (tuning/fsync.md). Writing 64 MiB of zeros takes far too long to do on
//! the core at a roll, so one file is prepared in the background, and a
//! roll that finds it not ready yet falls back to fallocate.
//!
//! The file starts with the segment header (see [`super::header`]), made
//! durable with the zeros, so a segment adopted from it has its header
//! before any record goes in.
//!
//! With the log written direct (`ringkeeper.logWrite=direct`, the
//! default) the zeros are written direct too (`aligned::ChunkWriter`):
//! through the page cache they cost a copy of every byte into the cache,
//! the writeback of it, and then the invalidation of those pages by the
//! log's own direct writes, all of it on a thread beside the serving ones,
//! at the log's own rate (a 64 MiB segment every second or so under
//! 250k creates/s). The other write modes read the segment back through
//! the cache (a mapped segment faults its pages in), so there the zeros go
//! through the cache as before, and so do they on a filesystem that
//! refuses O_DIRECT.
//!
//! The file's name is not a segment name, so recovery, purge and the
//! inspection tools never see it; a leftover from a crash is overwritten
//! (startup checks first that it is ours: see `startup::foreign`).
//!
//! One job writes the file at a time: each waits for the one started
//! before it on the same file. A log replaced while its job runs (after a
//! TRUNC, a SNAP or a reload the runner builds a new one, and the new one
//! is built before the old one is dropped) leaves that job running;
//! without the wait both would write the same file, the new one could
//! finish first and its file become a live segment, and the old one's
//! zeros (and its final length) would then land on records already synced
//! and acked.

use std::fs::OpenOptions;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

use crate::aligned::ChunkWriter;

pub const PREPARED_NAME: &str = "log.prepared";

type Job = JoinHandle<io::Result<()>>;

/// Set once a job has stopped writing its file (done, failed, panicked,
/// or never started).
#[derive(Default)]
struct Stopped {
    yes: Mutex<bool>,
    changed: Condvar,
}

impl Stopped {
    fn set(&self) {
        *self.yes.lock().unwrap_or_else(|e| e.into_inner()) = true;
        self.changed.notify_all();
    }

    fn wait(&self) {
        let mut yes = self.yes.lock().unwrap_or_else(|e| e.into_inner());
        while !*yes {
            yes = self.changed.wait(yes).unwrap_or_else(|e| e.into_inner());
        }
    }
}

/// Sets its [`Stopped`] when dropped: at the end of a job's thread,
/// however it ends.
struct SetOnDrop(Arc<Stopped>);

impl Drop for SetOnDrop {
    fn drop(&mut self) {
        self.0.set();
    }
}

/// The newest job started on each file: the next one waits for it. One
/// entry per log directory.
static NEWEST: Mutex<Vec<(PathBuf, Arc<Stopped>)>> = Mutex::new(Vec::new());

/// Makes `mine` the newest job on `path`; returns the one it replaces.
fn follow(path: &Path, mine: Arc<Stopped>) -> Option<Arc<Stopped>> {
    let mut newest = NEWEST.lock().unwrap_or_else(|e| e.into_inner());
    match newest.iter_mut().find(|(p, _)| p == path) {
        Some((_, last)) => Some(std::mem::replace(last, mine)),
        None => {
            newest.push((path.to_path_buf(), mine));
            None
        }
    }
}

pub struct Preparer {
    path: PathBuf,
    bytes: usize,
    /// Zero-fill with O_DIRECT (the log is written direct).
    direct: bool,
    job: Option<Job>,
}

impl Preparer {
    /// Starts preparing a `bytes`-long zero-filled file in `dir`, written
    /// with O_DIRECT when `direct` (and the filesystem allows it).
    pub fn new(dir: &Path, bytes: usize, direct: bool) -> Preparer {
        let mut p = Preparer {
            path: dir.join(PREPARED_NAME),
            bytes,
            direct,
            job: None,
        };
        p.start();
        p
    }

    /// Starts a job unless one is running.
    pub fn start(&mut self) {
        if self.job.is_some() {
            return;
        }
        let path = self.path.clone();
        let (bytes, direct) = (self.bytes, self.direct);
        let stopped = Arc::new(Stopped::default());
        let before = follow(&path, stopped.clone());
        let on_exit = SetOnDrop(stopped.clone());
        let spawned = std::thread::Builder::new()
            .name("rk-log-prepare".into())
            .spawn(move || {
                let _on_exit = on_exit;
                if let Some(before) = before {
                    before.wait();
                }
                if direct && zero_fill_direct(&path, bytes)? {
                    return Ok(());
                }
                zero_fill(&path, bytes)
            });
        match spawned {
            Ok(h) => self.job = Some(h),
            Err(e) => tracing::warn!("cannot start the log segment preparer: {e}"),
        }
    }

    /// Whether a job is still writing its file.
    pub fn is_running(&self) -> bool {
        self.job.as_ref().is_some_and(|h| !h.is_finished())
    }

    /// The prepared file, when one is ready and whole; the caller renames
    /// it into place. None while the job runs, or when it failed (logged).
    pub fn take_ready(&mut self) -> Option<PathBuf> {
        if !self.job.as_ref().is_some_and(|h| h.is_finished()) {
            return None;
        }
        match self.job.take().expect("a finished job").join() {
            Ok(Ok(())) => Some(self.path.clone()),
            Ok(Err(e)) => {
                tracing::warn!(
                    path = %self.path.display(),
                    "zero-filling the next log segment failed ({e}): using fallocate"
                );
                None
            }
            Err(_) => {
                tracing::warn!("the log segment preparer panicked: using fallocate");
                None
            }
        }
    }
}

/// As [`zero_fill`], past the page cache ([`ChunkWriter`]). Ok(false)
/// when the filesystem refuses O_DIRECT: the caller then fills the file
/// through the cache.
fn zero_fill_direct(path: &Path, bytes: usize) -> io::Result<bool> {
    let Some(mut f) = ChunkWriter::create(path, |_| {})? else {
        return Ok(false);
    };
    let head = super::header::encode();
    f.write_all(&head)?;
    f.write_zeros(bytes.saturating_sub(head.len()) as u64)?;
    f.finish()?.sync_all()?;
    Ok(true)
}

/// Writes the segment header and zeros up to `bytes` (at least the header)
/// to `path` (created or truncated) and makes them and the length durable.
fn zero_fill(path: &Path, bytes: usize) -> io::Result<()> {
    let mut f = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)?;
    write_header_and_zeros(&mut f, bytes)?;
    f.sync_all()
}

/// The segment header, then zeros up to `bytes` in all, in writes of up
/// to 1 MiB.
fn write_header_and_zeros(out: &mut impl Write, bytes: usize) -> io::Result<()> {
    const ZEROS_BYTES: usize = 1 << 20;
    let head = super::header::encode();
    out.write_all(&head)?;
    let mut left = bytes.saturating_sub(head.len());
    let zeros = vec![0u8; ZEROS_BYTES.min(left)];
    while left > 0 {
        let n = left.min(zeros.len());
        out.write_all(&zeros[..n])?;
        left -= n;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Through the cache and direct, at lengths that end inside a chunk,
    /// inside a block, and inside the first chunk.
    #[test]
    fn prepares_a_whole_zero_file_with_its_header_and_hands_it_over_once() {
        for direct in [false, true] {
            for bytes in [3 << 20 | 123, 10_000, 2 << 20] {
                prepares(direct, bytes);
            }
        }
    }

    fn prepares(direct: bool, len: usize) {
        let dir = tempfile::tempdir().unwrap();
        let mut p = Preparer::new(dir.path(), len, direct);
        let path = loop {
            if let Some(path) = p.take_ready() {
                break path;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        };
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(bytes.len(), len, "direct: {direct}");
        let head = crate::log::header::encode();
        assert_eq!(&bytes[..head.len()], &head[..]);
        assert!(bytes[head.len()..].iter().all(|b| *b == 0));
        assert_eq!(
            crate::log::header::identify(&path).unwrap(),
            Ok(crate::log::header::Kind::Ours)
        );
        assert!(p.take_ready().is_none(), "handed over twice");
        assert!(crate::log::segment::first_zxid_of(&path).is_none());
    }

    /// A log replaced while its preparer runs: the new preparer's file,
    /// once handed over (and renamed into a live segment), is written by
    /// nobody else. The replaced one fills 64 MiB, the new one 8 KiB: if
    /// the first were still writing, the live segment would grow to 64 MiB
    /// and lose the record written into it.
    #[test]
    fn a_preparer_left_behind_never_writes_the_next_ones_file() {
        for direct in [false, true] {
            let dir = tempfile::tempdir().unwrap();
            // As the runner replaces its log: the new one is built before
            // the old one is dropped.
            let mut logs = [Preparer::new(dir.path(), 64 << 20, direct)];
            logs[0] = Preparer::new(dir.path(), 8192, direct);
            let next = &mut logs[0];
            let ready = loop {
                if let Some(path) = next.take_ready() {
                    break path;
                }
                std::thread::sleep(std::time::Duration::from_millis(1));
            };
            let live = dir.path().join("log.live");
            std::fs::rename(&ready, &live).unwrap();
            let record = b"a record, synced and acked";
            {
                use std::os::unix::fs::FileExt;
                let f = OpenOptions::new().write(true).open(&live).unwrap();
                f.write_all_at(record, 4096).unwrap();
                f.sync_all().unwrap();
            }
            // Long enough for a 64 MiB fill still running to land.
            std::thread::sleep(std::time::Duration::from_secs(1));
            let bytes = std::fs::read(&live).unwrap();
            assert_eq!(bytes.len(), 8192, "direct: {direct}");
            assert_eq!(
                &bytes[4096..4096 + record.len()],
                record,
                "direct: {direct}"
            );
        }
    }
}
