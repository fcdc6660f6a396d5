//! A snapshot file written past the page cache (`O_DIRECT`), one aligned
//! chunk at a time.
//!
//! Why: a background snapshot written through the page cache costs the
//! machine twice for every byte. The snapshot thread copies each byte into
//! the cache (`copy_folio_from_iter_atomic`, about half of that thread's
//! samples at 5M znodes), and the kernel's writeback workers then copy it
//! to the disk and reclaim the pages; all of it runs next to the serving
//! threads, and at 5M znodes (a 1 GB snapshot, paced over half a minute) a
//! snapshot is running most of the time. Written direct, the disk reads
//! each chunk straight from this buffer, a write returns when the disk has
//! it (so at most one chunk is ever queued ahead of the txn log's writes),
//! and the snapshot leaves no dirty pages behind for the log's fdatasync
//! to wait on.
//!
//! Durability is unchanged: the caller still fsyncs the file (the disk's
//! volatile cache, and the file's size and extents) before the rename.
//!
//! Filesystems without `O_DIRECT` (tmpfs) refuse it at open with EINVAL:
//! [`DirectWriter::create`] then answers None and the caller writes
//! through the cache. A device whose logical blocks are larger than
//! [`ALIGN_BYTES`](crate::aligned::ALIGN_BYTES) refuses an aligned write with EINVAL: the file then
//! drops `O_DIRECT` and the same chunk is written through the cache.

use std::fs::File;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::os::unix::io::AsRawFd;
use std::path::Path;

use super::Pace;
use crate::aligned::{self, AlignedBuf, ALIGN_BYTES};

/// Bytes per direct write: one chunk of the pace.
pub(super) const CHUNK_BYTES: usize = 1 << 20;
const _: () = assert!(CHUNK_BYTES.is_multiple_of(ALIGN_BYTES));

/// Buffers what is written into whole chunks and writes each with one
/// direct write, waiting for the pace after each.
pub(super) struct DirectWriter {
    file: File,
    chunk: AlignedBuf,
    /// Bytes of `chunk` filled.
    filled: usize,
    /// Bytes written to the file (whole chunks).
    written: u64,
    /// Still `O_DIRECT` (false after a device refused an aligned write).
    direct: bool,
    pace: Option<Pace>,
}

impl DirectWriter {
    /// Creates (truncates) `path` for direct writes; None if its
    /// filesystem does not support them.
    pub(super) fn create(path: &Path, pace: Option<Pace>) -> std::io::Result<Option<DirectWriter>> {
        let Some(file) = aligned::create_direct(path)? else {
            tracing::debug!(path = %path.display(), "no O_DIRECT here; snapshot written through the page cache");
            return Ok(None);
        };
        Ok(Some(DirectWriter {
            file,
            chunk: AlignedBuf::zeroed(CHUNK_BYTES),
            filled: 0,
            written: 0,
            direct: true,
            pace,
        }))
    }

    /// Writes the first `len` bytes of the chunk (a multiple of
    /// [`ALIGN_BYTES`]) at offset `written`, the end of the whole chunks.
    fn write_chunk(&mut self, len: usize) -> std::io::Result<()> {
        debug_assert!(len.is_multiple_of(ALIGN_BYTES) && len <= CHUNK_BYTES);
        let at = self.written;
        match self.file.write_all_at(&self.chunk.bytes()[..len], at) {
            Err(e) if aligned::refused(&e) && self.direct => {
                // The device wants a larger alignment: go on through the
                // cache, the same chunk at the same offset.
                tracing::warn!("the disk refused an aligned direct write; snapshot goes on through the page cache");
                self.drop_direct()?;
                self.file.write_all_at(&self.chunk.bytes()[..len], at)
            }
            other => other,
        }
    }

    fn drop_direct(&mut self) -> std::io::Result<()> {
        let fd = self.file.as_raw_fd();
        // SAFETY: fcntl on our own descriptor, no memory passed.
        let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
        // SAFETY: as above.
        if flags < 0 || unsafe { libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_DIRECT) } < 0 {
            return Err(std::io::Error::last_os_error());
        }
        self.direct = false;
        Ok(())
    }

    /// Writes what is buffered (the last chunk padded to the alignment,
    /// then the file cut back to its length) and hands the file back, not
    /// yet fsynced.
    pub(super) fn finish(mut self) -> std::io::Result<File> {
        let len = self.written + self.filled as u64;
        if self.filled > 0 {
            let padded = self.filled.next_multiple_of(ALIGN_BYTES);
            self.chunk.bytes_mut()[self.filled..padded].fill(0);
            self.write_chunk(padded)?;
        }
        self.file.set_len(len)?;
        Ok(self.file)
    }
}

impl Write for DirectWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = buf.len().min(CHUNK_BYTES - self.filled);
        self.chunk.bytes_mut()[self.filled..self.filled + n].copy_from_slice(&buf[..n]);
        self.filled += n;
        if self.filled == CHUNK_BYTES {
            self.write_chunk(CHUNK_BYTES)?;
            self.filled = 0;
            self.written += CHUNK_BYTES as u64;
            if let Some(pace) = &self.pace {
                pace.wait_for(self.written);
            }
        }
        Ok(n)
    }

    /// Whole chunks only go to the disk; the rest waits for `finish`.
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Lengths around the chunk and alignment edges read back exactly: the
    /// padding of the last chunk is cut off again.
    #[test]
    fn any_length_reads_back_exactly() {
        let dir = tempfile::tempdir().unwrap();
        for len in [
            0,
            1,
            4095,
            4096,
            4097,
            CHUNK_BYTES - 1,
            CHUNK_BYTES,
            CHUNK_BYTES + 5000,
            3 * CHUNK_BYTES + 1,
        ] {
            let data: Vec<u8> = (0..len).map(|i| (i * 31 % 251) as u8).collect();
            let path = dir.path().join(format!("f{len}"));
            let file = match DirectWriter::create(&path, None).unwrap() {
                Some(mut w) => {
                    // In odd pieces, as an encoder writes.
                    for piece in data.chunks(7919) {
                        w.write_all(piece).unwrap();
                    }
                    w.finish().unwrap()
                }
                None => return, // a filesystem without O_DIRECT: nothing to test here
            };
            file.sync_all().unwrap();
            drop(file);
            assert_eq!(std::fs::read(&path).unwrap(), data, "length {len}");
        }
    }

    /// After dropping O_DIRECT (as when a disk refuses an aligned write),
    /// the rest of the file is written through the cache, unchanged.
    #[test]
    fn a_file_that_drops_direct_midway_reads_back_exactly() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let Some(mut w) = DirectWriter::create(&path, None).unwrap() else {
            return;
        };
        let data: Vec<u8> = (0..CHUNK_BYTES * 2 + 123)
            .map(|i| (i % 253) as u8)
            .collect();
        w.write_all(&data[..CHUNK_BYTES + 10]).unwrap();
        w.drop_direct().unwrap();
        w.write_all(&data[CHUNK_BYTES + 10..]).unwrap();
        w.finish().unwrap().sync_all().unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), data);
    }
}
