//! One log segment: a preallocated file and its end. How bytes get in
//! depends on `ringkeeper.logWrite`: `mmap` copies into a map of the file,
//! `buffered` writes through the page cache (both made durable by an
//! fdatasync the caller issues through io_uring), and `direct` leaves the
//! writing to [`super::direct`] and only tracks the end and the allocation
//! here. Every segment opens with the header of [`super::header`], durable
//! before any record goes in; records follow from [`header::BYTES`].

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

use memmap2::MmapMut;

use super::{header, record};

pub const PREFIX: &str = "log.";

pub fn file_name(first_zxid: i64) -> String {
    format!("{PREFIX}{first_zxid:016x}")
}

/// The first zxid a segment file name announces, if it is one.
pub fn first_zxid_of(path: &Path) -> Option<i64> {
    let name = path.file_name()?.to_str()?;
    let hex = name.strip_prefix(PREFIX)?;
    u64::from_str_radix(hex, 16).ok().map(|v| v as i64)
}

pub struct Segment {
    pub path: PathBuf,
    file: File,
    /// Present in `mmap` mode only.
    map: Option<MmapMut>,
    /// Bytes reserved on disk (the file's length).
    allocated: usize,
    write_pos: usize,
    preallocate_bytes: usize,
}

impl Segment {
    /// Creates and preallocates a new segment. The caller makes the
    /// directory entry durable (fsync of the directory) before relying on it.
    ///
    /// A file of the same name may already exist: a crash between creating
    /// a segment and writing its first record leaves one, holding no record
    /// recovery kept (they would all be newer than the last recovered zxid),
    /// and recovery checked it is ours (see [`super::header`]). It is
    /// emptied and reused.
    pub fn create(
        dir: &Path,
        first_zxid: i64,
        preallocate_bytes: usize,
        mapped: bool,
    ) -> io::Result<Segment> {
        let path = dir.join(file_name(first_zxid));
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)?;
        let allocated = preallocate_bytes.max(header::BYTES);
        allocate(&file, allocated)?;
        file.write_all_at(&header::encode(), 0)?;
        // The length must be durable before writes that do not sync
        // metadata themselves (direct mode) can count, and the header
        // before any record: a file without it holds no record of ours.
        file.sync_all()?;
        Segment::empty(path, file, allocated, preallocate_bytes, mapped)
    }

    /// Takes a prepared zero-filled file (see [`super::prepare`]), whose
    /// header is already durable, as the new segment, renaming it into
    /// place. The caller fsyncs the directory.
    pub fn adopt(
        prepared: &Path,
        dir: &Path,
        first_zxid: i64,
        preallocate_bytes: usize,
        mapped: bool,
    ) -> io::Result<Segment> {
        let path = dir.join(file_name(first_zxid));
        std::fs::rename(prepared, &path)?;
        let file = OpenOptions::new().read(true).write(true).open(&path)?;
        let allocated = file.metadata()?.len() as usize;
        assert!(
            allocated >= header::BYTES,
            "a prepared segment without its header"
        );
        Segment::empty(path, file, allocated, preallocate_bytes, mapped)
    }

    /// A segment with nothing but its header written yet in `file`
    /// (`allocated` bytes long).
    fn empty(
        path: PathBuf,
        file: File,
        allocated: usize,
        preallocate_bytes: usize,
        mapped: bool,
    ) -> io::Result<Segment> {
        let map = if mapped {
            Some(unsafe { MmapMut::map_mut(&file)? })
        } else {
            None
        };
        Ok(Segment {
            path,
            file,
            map,
            allocated,
            write_pos: header::BYTES,
            preallocate_bytes,
        })
    }

    /// Bytes reserved on disk: appends past this grow the file.
    pub fn allocated(&self) -> usize {
        self.allocated
    }

    /// The end of the written part (header included).
    pub fn len(&self) -> usize {
        self.write_pos
    }

    /// Whether no record is in it yet.
    pub fn is_empty(&self) -> bool {
        self.write_pos == header::BYTES
    }

    /// Makes room on disk for `n` more bytes, growing the file by whole
    /// preallocation chunks when they do not fit.
    pub fn reserve(&mut self, n: usize) -> io::Result<()> {
        let end = self.write_pos + n;
        if end <= self.allocated {
            return Ok(());
        }
        let chunks = (end - self.allocated).div_ceil(self.preallocate_bytes);
        let new_len = self.allocated + chunks * self.preallocate_bytes;
        allocate(&self.file, new_len)?;
        self.file.sync_all()?;
        self.allocated = new_len;
        if self.map.is_some() {
            self.map = Some(unsafe { MmapMut::map_mut(&self.file)? });
        }
        Ok(())
    }

    /// Moves the end past `n` bytes written by someone else (direct mode),
    /// after [`Segment::reserve`] made room for them.
    pub fn advance(&mut self, n: usize) {
        assert!(
            self.write_pos + n <= self.allocated,
            "advance past the allocation"
        );
        self.write_pos += n;
    }

    /// Copies already-framed records to the end: into the map in `mmap`
    /// mode, else with one write into the page cache.
    pub fn append_framed(&mut self, framed: &[u8]) -> io::Result<()> {
        self.reserve(framed.len())?;
        let end = self.write_pos + framed.len();
        match &mut self.map {
            Some(map) => map[self.write_pos..end].copy_from_slice(framed),
            None => self.file.write_all_at(framed, self.write_pos as u64)?,
        }
        self.write_pos = end;
        Ok(())
    }

    /// Appends one record (framing it in place).
    pub fn append(&mut self, zxid: i64, durable_zxid: i64, payload: &[u8]) -> io::Result<()> {
        let n = record::framed_len(payload.len());
        let mut buf = vec![0u8; n];
        record::write(&mut buf, zxid, durable_zxid, payload);
        self.append_framed(&buf)
    }
}

/// Reserves `len` bytes of disk for the file (zero-filled), so that later
/// writes do not allocate blocks. Falls back to a sparse
/// extension where the filesystem cannot preallocate.
fn allocate(file: &File, len: usize) -> io::Result<()> {
    let rc = unsafe { libc::fallocate(file.as_raw_fd(), 0, 0, len as libc::off_t) };
    if rc == 0 {
        return Ok(());
    }
    let err = io::Error::last_os_error();
    match err.raw_os_error() {
        Some(libc::EOPNOTSUPP) => file.set_len(len as u64),
        _ => Err(err),
    }
}
