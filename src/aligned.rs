//! Writing a file past the page cache (`O_DIRECT`): a file opened for it
//! (where the filesystem allows it), a zeroed buffer aligned to the
//! device's logical block, as the writes' memory, offsets and lengths must
//! be, and [`ChunkWriter`], which writes a stream through such a buffer.
//! Snapshots (`snapshot::write`) and the log's prepared segment
//! (`log::prepare`) are written with it.

use std::alloc::Layout;
use std::fs::File;
use std::io::{self, Write};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::os::unix::io::AsRawFd;
use std::path::Path;
use std::ptr::NonNull;

/// Alignment of every buffer here: the largest logical block size of
/// common disks (a device with larger blocks refuses the write with
/// EINVAL, and callers fall back to the page cache).
pub const ALIGN_BYTES: usize = 4096;

/// Whether `e` is a refusal of `O_DIRECT` or of its alignment (EINVAL):
/// the caller writes through the page cache instead.
pub fn refused(e: &io::Error) -> bool {
    e.raw_os_error() == Some(libc::EINVAL)
}

/// Creates (truncates) `path` for writing with `O_DIRECT`; None when its
/// filesystem does not support it (tmpfs, say).
pub fn create_direct(path: &Path) -> io::Result<Option<File>> {
    let opened = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .custom_flags(libc::O_DIRECT)
        .open(path);
    match opened {
        Ok(f) => Ok(Some(f)),
        Err(e) if refused(&e) => Ok(None),
        Err(e) => Err(e),
    }
}

/// `len` zeroed bytes at an [`ALIGN_BYTES`]-aligned address.
pub struct AlignedBuf {
    ptr: NonNull<u8>,
    len: usize,
}

impl AlignedBuf {
    fn layout(len: usize) -> Layout {
        Layout::from_size_align(len, ALIGN_BYTES).expect("a valid layout")
    }

    /// Panics unless `len` is a positive multiple of [`ALIGN_BYTES`].
    pub fn zeroed(len: usize) -> AlignedBuf {
        assert!(len > 0 && len.is_multiple_of(ALIGN_BYTES), "whole blocks");
        // SAFETY: the layout has a non-zero size.
        let raw = unsafe { std::alloc::alloc_zeroed(Self::layout(len)) };
        let ptr =
            NonNull::new(raw).unwrap_or_else(|| std::alloc::handle_alloc_error(Self::layout(len)));
        AlignedBuf { ptr, len }
    }

    pub fn bytes(&self) -> &[u8] {
        // SAFETY: ptr holds len initialized (zeroed, then written) bytes we own.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    pub fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `bytes`; &mut self makes the borrow unique.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // SAFETY: allocated in `zeroed` with this layout, freed once.
        unsafe { std::alloc::dealloc(self.ptr.as_ptr(), Self::layout(self.len)) }
    }
}

// SAFETY: plain bytes owned by this value alone.
unsafe impl Send for AlignedBuf {}

/// Bytes per direct write of a [`ChunkWriter`].
pub const CHUNK_BYTES: usize = 1 << 20;
const _: () = assert!(CHUNK_BYTES.is_multiple_of(ALIGN_BYTES));

/// A file written past the page cache: buffers what is written into
/// aligned [`CHUNK_BYTES`] chunks and writes each with one `O_DIRECT`
/// write, then calls `after_chunk` with the bytes written so far (a pace
/// waits there). [`ChunkWriter::finish`] writes the last chunk padded to
/// the alignment and cuts the file back to its length.
///
/// A device whose logical blocks are larger than [`ALIGN_BYTES`] refuses
/// an aligned write with EINVAL: the file then drops `O_DIRECT` and the
/// same chunk is written through the cache, and so is the rest.
pub struct ChunkWriter<F: FnMut(u64)> {
    file: File,
    chunk: AlignedBuf,
    /// Bytes of `chunk` filled.
    filled: usize,
    /// Bytes at the start of `chunk` that may not be zero (past them it
    /// is all zeros), so that [`ChunkWriter::write_zeros`] clears only
    /// what an earlier write left.
    dirty: usize,
    /// Bytes written to the file (whole chunks).
    written: u64,
    /// Still `O_DIRECT` (false after a device refused an aligned write).
    direct: bool,
    after_chunk: F,
}

impl<F: FnMut(u64)> ChunkWriter<F> {
    /// Creates (truncates) `path` for direct writes; None if its
    /// filesystem does not support them.
    pub fn create(path: &Path, after_chunk: F) -> io::Result<Option<ChunkWriter<F>>> {
        let Some(file) = create_direct(path)? else {
            tracing::debug!(path = %path.display(), "no O_DIRECT here; written through the page cache");
            return Ok(None);
        };
        Ok(Some(ChunkWriter {
            file,
            chunk: AlignedBuf::zeroed(CHUNK_BYTES),
            filled: 0,
            dirty: 0,
            written: 0,
            direct: true,
            after_chunk,
        }))
    }

    /// Writes the first `len` bytes of the chunk (a multiple of
    /// [`ALIGN_BYTES`]) at offset `written`, the end of the whole chunks.
    fn write_chunk(&mut self, len: usize) -> io::Result<()> {
        debug_assert!(len.is_multiple_of(ALIGN_BYTES) && len <= CHUNK_BYTES);
        let at = self.written;
        match self.file.write_all_at(&self.chunk.bytes()[..len], at) {
            Err(e) if refused(&e) && self.direct => {
                // The device wants a larger alignment: go on through the
                // cache, the same chunk at the same offset.
                tracing::warn!(
                    "the disk refused an aligned direct write; going on through the page cache"
                );
                self.drop_direct()?;
                self.file.write_all_at(&self.chunk.bytes()[..len], at)
            }
            other => other,
        }
    }

    /// Bytes of `chunk` filled since the last whole chunk went out; a full
    /// chunk goes to the disk.
    fn filled_by(&mut self, n: usize) -> io::Result<()> {
        self.filled += n;
        if self.filled == CHUNK_BYTES {
            self.write_chunk(CHUNK_BYTES)?;
            self.filled = 0;
            self.written += CHUNK_BYTES as u64;
            (self.after_chunk)(self.written);
        }
        Ok(())
    }

    /// Writes `n` zero bytes. The chunk is cleared only where an earlier
    /// write left bytes, so a long run of zeros (a log segment's
    /// preallocation) writes the same zeroed chunk again and again without
    /// copying anything.
    pub fn write_zeros(&mut self, mut n: u64) -> io::Result<()> {
        while n > 0 {
            let k = n.min((CHUNK_BYTES - self.filled) as u64) as usize;
            let end = self.filled + k;
            if self.filled < self.dirty {
                let clear_to = end.min(self.dirty);
                self.chunk.bytes_mut()[self.filled..clear_to].fill(0);
                if clear_to == self.dirty {
                    self.dirty = self.filled;
                }
            }
            self.filled_by(k)?;
            n -= k as u64;
        }
        Ok(())
    }

    fn drop_direct(&mut self) -> io::Result<()> {
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
    pub fn finish(mut self) -> io::Result<File> {
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

impl<F: FnMut(u64)> Write for ChunkWriter<F> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = buf.len().min(CHUNK_BYTES - self.filled);
        self.chunk.bytes_mut()[self.filled..self.filled + n].copy_from_slice(&buf[..n]);
        self.dirty = self.dirty.max(self.filled + n);
        self.filled_by(n)?;
        Ok(n)
    }

    /// Whole chunks only go to the disk; the rest waits for `finish`.
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_zeroed_and_writable() {
        let mut b = AlignedBuf::zeroed(3 * ALIGN_BYTES);
        assert_eq!(b.bytes().as_ptr() as usize % ALIGN_BYTES, 0);
        assert!(b.bytes().iter().all(|&x| x == 0));
        b.bytes_mut()[5] = 9;
        assert_eq!(b.bytes()[5], 9);
        assert_eq!(b.bytes().len(), 3 * ALIGN_BYTES);
    }

    #[test]
    #[should_panic(expected = "whole blocks")]
    fn refuses_a_partial_block() {
        AlignedBuf::zeroed(100);
    }

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
            let file = match ChunkWriter::create(&path, |_| {}).unwrap() {
                Some(mut w) => {
                    // In odd pieces, as an encoder writes.
                    for piece in data.chunks(7919) {
                        w.write_all(piece).unwrap();
                    }
                    w.finish().unwrap()
                }
                None => panic!(
                    "{} refuses O_DIRECT: the test needs a disk that takes it",
                    dir.path().display()
                ),
            };
            file.sync_all().unwrap();
            drop(file);
            assert_eq!(std::fs::read(&path).unwrap(), data, "length {len}");
        }
    }

    /// Runs of zeros between written bytes, across chunk edges, read back
    /// as written: a chunk a write dirtied is cleared where zeros follow.
    #[test]
    fn zeros_between_writes_read_back_exactly() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("z");
        let Some(mut w) = ChunkWriter::create(&path, |_| {}).unwrap() else {
            panic!(
                "{} refuses O_DIRECT: the test needs a disk that takes it",
                dir.path().display()
            );
        };
        let mut want = Vec::new();
        let pieces: [(bool, usize); 8] = [
            (true, 5000),
            (false, CHUNK_BYTES + 3),
            (true, CHUNK_BYTES - 100),
            (false, 50),
            (true, 7000),
            (false, 2 * CHUNK_BYTES),
            (true, 1),
            (false, 4095),
        ];
        for (i, (data, len)) in pieces.into_iter().enumerate() {
            if data {
                let bytes: Vec<u8> = (0..len).map(|j| (j % 251) as u8 | 1).collect();
                w.write_all(&bytes).unwrap();
                want.extend_from_slice(&bytes);
            } else {
                w.write_zeros(len as u64).unwrap();
                want.resize(want.len() + len, 0);
            }
            assert_eq!(
                w.written + w.filled as u64,
                want.len() as u64,
                "after piece {i}"
            );
        }
        w.finish().unwrap().sync_all().unwrap();
        let got = std::fs::read(&path).unwrap();
        assert_eq!(got.len(), want.len());
        let first_diff = got.iter().zip(&want).position(|(a, b)| a != b);
        assert_eq!(first_diff, None, "the file differs from what was written");
    }

    /// After dropping O_DIRECT (as when a disk refuses an aligned write),
    /// the rest of the file is written through the cache, unchanged.
    #[test]
    fn a_file_that_drops_direct_midway_reads_back_exactly() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let Some(mut w) = ChunkWriter::create(&path, |_| {}).unwrap() else {
            panic!(
                "{} refuses O_DIRECT: the test needs a disk that takes it",
                dir.path().display()
            );
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
