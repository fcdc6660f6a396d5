//! One log segment: a preallocated file, memory-mapped; appending is a copy
//! into the map. Durability comes from fdatasync on the file (the mapping is
//! the page cache), issued by the caller through io_uring.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

use memmap2::MmapMut;

use super::record;

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
    map: MmapMut,
    write_pos: usize,
    preallocate_bytes: usize,
}

impl Segment {
    /// Creates and preallocates a new segment. The caller makes the
    /// directory entry durable (fsync of the directory) before relying on it.
    ///
    /// A file of the same name may already exist: a crash between creating
    /// a segment and writing its first record leaves one, holding no record
    /// recovery kept (they would all be newer than the last recovered zxid).
    /// It is emptied and reused.
    pub fn create(dir: &Path, first_zxid: i64, preallocate_bytes: usize) -> io::Result<Segment> {
        let path = dir.join(file_name(first_zxid));
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)?;
        allocate(&file, preallocate_bytes)?;
        let map = unsafe { MmapMut::map_mut(&file)? };
        Ok(Segment {
            path,
            file,
            map,
            write_pos: 0,
            preallocate_bytes,
        })
    }

    pub fn len(&self) -> usize {
        self.write_pos
    }

    pub fn is_empty(&self) -> bool {
        self.write_pos == 0
    }

    /// Copies already-framed records into the map, growing the file by
    /// whole preallocation chunks when they do not fit.
    pub fn append_framed(&mut self, framed: &[u8]) -> io::Result<()> {
        let end = self.write_pos + framed.len();
        if end > self.map.len() {
            let chunks = (end - self.map.len()).div_ceil(self.preallocate_bytes);
            let new_len = self.map.len() + chunks * self.preallocate_bytes;
            allocate(&self.file, new_len)?;
            self.map = unsafe { MmapMut::map_mut(&self.file)? };
        }
        self.map[self.write_pos..end].copy_from_slice(framed);
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
/// writes through the map do not allocate blocks. Falls back to a sparse
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
