//! Direct, synchronous appends (`ringkeeper.logWrite=direct`, the default):
//! each batch reaches the disk as one O_DIRECT|O_DSYNC write through
//! io_uring. The write is durable when it completes, so no fdatasync
//! follows; and the kernel issues it to the device straight from the ring,
//! where an fdatasync is handed to an io-wq worker thread first (one more
//! thread to wake per batch). It also skips the page cache, whose writeback
//! of a mapped segment costs 2-3x the disk time for large batches
//! (tuning/fsync.md).
//!
//! O_DIRECT writes whole aligned blocks, so each write starts at the block
//! holding the end of the log: it carries that block's earlier bytes again
//! (`tail`), then the batch, then zeros to the next block boundary. Zeros
//! past the end are what recovery reads as the clean end of a segment.
//!
//! A write's buffer comes back when it completes and carries the next one
//! (an aligned allocation, its zero fill and its free were about 3k
//! instructions of an idle write): `Kept` remembers from where on it holds
//! zeros, so only what the last write left past the new end is cleared.

use std::cell::Cell;
use std::io;
use std::path::Path;
use std::rc::Rc;

use glommio::io::{DmaBuffer, DmaFile, OpenOptions};

/// Writes are aligned to at least this, whatever the device reports.
const ALIGN_MIN: usize = 4096;

/// A buffer larger than this (a rare large batch) is freed after its write
/// rather than kept.
const KEPT_BYTES_MAX: usize = 1 << 20;

/// A write buffer between writes.
struct Kept {
    buf: DmaBuffer,
    /// Every byte from here to the buffer's capacity is zero: the end of
    /// the last write's bytes.
    zero_from: usize,
}

pub struct DirectWriter {
    file: Rc<DmaFile>,
    align: usize,
    /// The log's bytes from the last aligned boundary up to its end.
    tail: Vec<u8>,
    /// The buffer the next write takes, when the last one has come back
    /// (staged writes not yet run each hold their own).
    spare: Rc<Cell<Option<Kept>>>,
}

/// One batch's aligned write, ready to run.
pub struct DirectWrite {
    file: Rc<DmaFile>,
    offset: u64,
    buf: Rc<DmaBuffer>,
    /// `Kept::zero_from` once it has run.
    zero_from: usize,
    spare: Rc<Cell<Option<Kept>>>,
}

impl DirectWriter {
    /// Opens a new segment for direct writes; `head` is what it already
    /// holds (its header, durable), so the log's end is `head.len()`. Fails
    /// (EINVAL) on a filesystem without O_DIRECT; the caller falls back to
    /// buffered writes.
    pub async fn open(path: &Path, head: &[u8]) -> io::Result<DirectWriter> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_DSYNC)
            .dma_open(path)
            .await?;
        let align = (file.alignment() as usize).max(ALIGN_MIN);
        assert!(align.is_power_of_two());
        // The header fills a 4096-byte block, so with the usual alignment
        // there is nothing to carry; a larger block carries the header
        // bytes like any tail (rewriting them unchanged).
        let mut tail = Vec::with_capacity(align);
        tail.extend_from_slice(&head[head.len() - head.len() % align..]);
        Ok(DirectWriter {
            file: Rc::new(file),
            align,
            tail,
            spare: Rc::new(Cell::new(None)),
        })
    }

    /// A buffer of at least `len` bytes, zero from `zero_from` on.
    fn take_buffer(&mut self, len: usize) -> Kept {
        match self.spare.take() {
            Some(kept) if kept.buf.capacity() >= len => kept,
            _ => {
                // Room to grow into while batches stay under the bound.
                let capacity = if len <= KEPT_BYTES_MAX {
                    len.next_power_of_two().min(KEPT_BYTES_MAX)
                } else {
                    len
                };
                let mut buf = self.file.alloc_dma_buffer(capacity);
                // The allocator's memory is not cleared.
                buf.as_bytes_mut().fill(0);
                Kept { buf, zero_from: 0 }
            }
        }
    }

    /// The write that puts `framed` at `end`, the segment's current end.
    pub fn stage(&mut self, end: usize, framed: &[u8]) -> DirectWrite {
        let start = end - end % self.align;
        assert_eq!(
            self.tail.len(),
            end - start,
            "tail out of step with the log end"
        );
        let used = self.tail.len() + framed.len();
        let len = used.div_ceil(self.align) * self.align;
        let Kept { mut buf, zero_from } = self.take_buffer(len);
        // Work over the whole buffer: what an earlier write left past this
        // one's end is cleared now, once, so that every byte from `used`
        // on is zero again.
        buf.set_len(buf.capacity());
        let bytes = buf.as_bytes_mut();
        bytes[..self.tail.len()].copy_from_slice(&self.tail);
        bytes[self.tail.len()..used].copy_from_slice(framed);
        if zero_from > used {
            bytes[used..zero_from].fill(0);
        }
        debug_assert!(bytes[used..].iter().all(|&b| b == 0));
        let zero_from = used;
        let new_end = end + framed.len();
        let new_start = new_end - new_end % self.align;
        self.tail.clear();
        self.tail
            .extend_from_slice(&bytes[new_start - start..new_end - start]);
        buf.set_len(len);
        DirectWrite {
            file: self.file.clone(),
            offset: start as u64,
            buf: Rc::new(buf),
            zero_from,
            spare: self.spare.clone(),
        }
    }
}

impl DirectWrite {
    pub async fn run(self) -> io::Result<()> {
        let len = self.buf.len();
        let result = self.file.write_rc_at(self.buf.clone(), self.offset).await;
        // The ring is done with the buffer: the next write may take it.
        if let Ok(buf) = Rc::try_unwrap(self.buf) {
            if buf.capacity() <= KEPT_BYTES_MAX {
                let kept = Kept {
                    buf,
                    zero_from: self.zero_from,
                };
                // Keep the larger of two (staged writes each hold one).
                match self.spare.take() {
                    Some(other) if other.buf.capacity() > kept.buf.capacity() => {
                        self.spare.set(Some(other))
                    }
                    _ => self.spare.set(Some(kept)),
                }
            }
        }
        let written = result?;
        if written != len {
            // O_DIRECT does not write part of a block; a short write means
            // the disk is full or failing, and the batch is not durable.
            return Err(io::Error::other(format!(
                "short direct write: {written} of {len} bytes at offset {}",
                self.offset
            )));
        }
        Ok(())
    }
}
