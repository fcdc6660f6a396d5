//! What `O_DIRECT` writes need: a file opened for them (where the
//! filesystem allows it), and a zeroed buffer aligned to the device's
//! logical block, as their memory, offsets and lengths must be.

use std::alloc::Layout;
use std::fs::File;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::ptr::NonNull;

/// Alignment of every buffer here: the largest logical block size of
/// common disks (a device with larger blocks refuses the write with
/// EINVAL, and callers fall back to the page cache).
pub const ALIGN_BYTES: usize = 4096;

/// Whether `e` is a refusal of `O_DIRECT` or of its alignment (EINVAL):
/// the caller writes through the page cache instead.
pub fn refused(e: &std::io::Error) -> bool {
    e.raw_os_error() == Some(libc::EINVAL)
}

/// Creates (truncates) `path` for writing with `O_DIRECT`; None when its
/// filesystem does not support it (tmpfs, say).
pub fn create_direct(path: &Path) -> std::io::Result<Option<File>> {
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
}
