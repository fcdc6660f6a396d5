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
//! instructions of an idle write). Only the bytes a write sends past the
//! batch's end, to its last block's boundary, must be zero: `Kept`
//! remembers which bytes it already holds as zeros, and a write clears
//! the rest of that short run (less than one block), never more. Clearing
//! everything a larger earlier batch left, as far as the buffer went, cost
//! a saturated server 4% of its CPU at 50% reads.

use std::cell::Cell;
use std::io;
use std::ops::Range;
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
    /// Bytes known to be zero (what the last write sent past its batch);
    /// the rest hold anything.
    zeros: Range<usize>,
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
    /// `Kept::zeros` once it has run.
    zeros: Range<usize>,
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

    /// A buffer of at least `len` bytes, with what it holds as zeros.
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
                // The allocator's memory is not cleared: nothing is known
                // to be zero.
                Kept {
                    buf: self.file.alloc_dma_buffer(capacity),
                    zeros: 0..0,
                }
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
        let Kept { mut buf, zeros } = self.take_buffer(len);
        buf.set_len(len);
        let bytes = buf.as_bytes_mut();
        bytes[..self.tail.len()].copy_from_slice(&self.tail);
        bytes[self.tail.len()..used].copy_from_slice(framed);
        // The write sends `used..len` as the clean end of the segment: clear
        // what of it is not known to be zero (at most one block).
        let (cleared, zeros) = clear_past_end(bytes, used, zeros);
        debug_assert!(bytes[used..].iter().all(|&b| b == 0));
        debug_assert!(cleared < self.align, "cleared {cleared} bytes past the end");
        let new_end = end + framed.len();
        let new_start = new_end - new_end % self.align;
        self.tail.clear();
        self.tail
            .extend_from_slice(&bytes[new_start - start..new_end - start]);
        DirectWrite {
            file: self.file.clone(),
            offset: start as u64,
            buf: Rc::new(buf),
            zeros,
            spare: self.spare.clone(),
        }
    }
}

/// Zeroes `bytes[used..]` (a write's run from its batch's end to its last
/// block's boundary) where `zeros` does not already cover it. Returns how
/// many bytes it cleared and the run of zeros the buffer holds afterwards:
/// `used..` joined with what of `zeros` continues it.
fn clear_past_end(bytes: &mut [u8], used: usize, zeros: Range<usize>) -> (usize, Range<usize>) {
    let len = bytes.len();
    debug_assert!(used <= len);
    let mut cleared = 0;
    // Before the known zeros, and after them.
    for gap in [
        used..zeros.start.clamp(used, len),
        zeros.end.clamp(used, len)..len,
    ] {
        cleared += gap.len();
        bytes[gap].fill(0);
    }
    let after = if zeros.start <= len && zeros.end > len {
        // The known run goes on past this write: it still holds.
        zeros.end
    } else {
        len
    };
    (cleared, used..after)
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
                    zeros: self.zeros,
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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Whatever a buffer held, a write's run past its batch ends up
        /// zero, only that run (less than a block) is cleared, and the run
        /// reported as zeros is zero across the buffer's whole capacity.
        #[test]
        fn a_write_clears_only_its_run_past_the_end(
            capacity_blocks in 1usize..4,
            zeros_start in 0usize..4 * 512,
            zeros_len in 0usize..4 * 512,
            used in 0usize..4 * 512,
            fill in 1u8..=255,
        ) {
            const ALIGN: usize = 512;
            let capacity = capacity_blocks * ALIGN;
            let used = used % (capacity + 1);
            let len = used.div_ceil(ALIGN) * ALIGN;
            let zeros_start = zeros_start % (capacity + 1);
            let zeros = zeros_start..(zeros_start + zeros_len).min(capacity);
            // Garbage everywhere but the known zeros; the batch itself.
            let mut buf = vec![fill; capacity];
            buf[zeros.clone()].fill(0);
            buf[..used].fill(fill);
            let (cleared, after) = clear_past_end(&mut buf[..len], used, zeros);
            prop_assert!(buf[used..len].iter().all(|&b| b == 0));
            prop_assert!(buf[..used].iter().all(|&b| b == fill));
            prop_assert!(cleared <= len - used);
            prop_assert!(cleared < ALIGN);
            prop_assert_eq!(after.start, used);
            prop_assert!(after.end >= len && after.end <= capacity);
            prop_assert!(buf[after].iter().all(|&b| b == 0));
        }
    }
}
