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

use std::io;
use std::path::Path;
use std::rc::Rc;

use glommio::io::{DmaBuffer, DmaFile, OpenOptions};

/// Writes are aligned to at least this, whatever the device reports.
const ALIGN_MIN: usize = 4096;

pub struct DirectWriter {
    file: Rc<DmaFile>,
    align: usize,
    /// The log's bytes from the last aligned boundary up to its end.
    tail: Vec<u8>,
}

/// One batch's aligned write, ready to run.
pub struct DirectWrite {
    file: Rc<DmaFile>,
    offset: u64,
    buf: DmaBuffer,
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
        })
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
        let mut buf = self.file.alloc_dma_buffer(len);
        let bytes = buf.as_bytes_mut();
        bytes[..self.tail.len()].copy_from_slice(&self.tail);
        bytes[self.tail.len()..used].copy_from_slice(framed);
        bytes[used..].fill(0);
        let new_end = end + framed.len();
        let new_start = new_end - new_end % self.align;
        self.tail.clear();
        self.tail
            .extend_from_slice(&bytes[new_start - start..new_end - start]);
        DirectWrite {
            file: self.file.clone(),
            offset: start as u64,
            buf,
        }
    }
}

impl DirectWrite {
    pub async fn run(self) -> io::Result<()> {
        let len = self.buf.len();
        let written = self.file.write_at(self.buf, self.offset).await?;
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
