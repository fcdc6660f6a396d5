//! The header that opens every log segment, and how a file named like a
//! segment is identified as ours before anything reads, cuts or reuses it.
//!
//! ```text
//! offset 0     8 bytes  magic b"RKTXNLOG"
//! offset 8     u32 BE   format version (1)
//! offset 12    zeros up to BYTES (4096); the first record starts at BYTES
//! ```
//!
//! The header fills a whole 4096-byte block of its own, written and made
//! durable when the file is created (by [`super::segment::Segment::create`],
//! or by the preparer before the file is renamed into place), before any
//! record can go in. So:
//! - no record write ever touches the header's block: a torn write (page
//!   cache writeback or an O_DIRECT block) cannot destroy the magic of a
//!   segment that holds acknowledged records, and direct writes start at an
//!   aligned offset with nothing to carry over (where the device's block is
//!   larger than 4096, the writer carries the header bytes like any tail);
//! - a file named like a segment without the magic holds no record of ours.
//!   The only such file ringkeeper can leave is one a crash caught between
//!   creating the name and the header's fsync: empty, or zeros (preallocated
//!   or zero-filled), and always the newest segment, since nothing is
//!   written after it. Recovery takes that one (see
//!   [`super::recovery::check_ours`]) and the next roll, for the same first
//!   zxid, truncates and reuses it. Anything else is not ours: startup
//!   stops, naming it, and nothing modifies it.
//!
//! The header does not carry the first zxid: the preparer zero-fills the
//! next segment before its zxid is known, and stamping it at the roll would
//! put a write and a sync on the core. The name gives the first zxid, and
//! recovery checks record zxids run on across segments.

use std::io::{self, Read};
use std::path::Path;

pub const MAGIC: &[u8; 8] = b"RKTXNLOG";
pub const VERSION: u32 = 1;
/// The header's size: where the first record starts.
pub const BYTES: usize = 4096;
/// Bytes that identify the header (magic and version).
const IDENT_BYTES: usize = 12;
const ZOOKEEPER_LOG_MAGIC: &[u8; 4] = b"ZKLG";

/// The header block as written at the start of every segment.
pub fn encode() -> Vec<u8> {
    let mut b = vec![0u8; BYTES];
    b[..8].copy_from_slice(MAGIC);
    b[8..12].copy_from_slice(&VERSION.to_be_bytes());
    b
}

/// What a file named like a segment turned out to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Our header: records start at [`BYTES`].
    Ours,
    /// No header, nothing but zeros (or empty): a segment a crash caught
    /// before its header was durable, if it is the newest one.
    Fresh,
}

/// Where records start in a segment whose bytes begin with `head`.
pub fn records_start(head: &[u8], file_len: usize) -> usize {
    if head.starts_with(MAGIC) {
        BYTES.min(file_len)
    } else {
        0
    }
}

/// Identifies the file at `path`; `Err(reason)` says why it is not ours.
/// Reads only; the whole file only when it has no header (to tell zeros
/// from data).
pub fn identify(path: &Path) -> io::Result<Result<Kind, String>> {
    let mut f = std::fs::File::open(path)?;
    let mut head = Vec::with_capacity(IDENT_BYTES);
    (&mut f).take(IDENT_BYTES as u64).read_to_end(&mut head)?;
    if head.starts_with(MAGIC) {
        if head.len() < IDENT_BYTES {
            return Ok(Err("its ringkeeper log header is cut short".into()));
        }
        let version = u32::from_be_bytes(head[8..12].try_into().expect("4 bytes"));
        return Ok(if version == VERSION {
            Ok(Kind::Ours)
        } else {
            Err(format!(
                "it is a ringkeeper log segment of format version {version}, which this \
                 ringkeeper (format version {VERSION}) does not read"
            ))
        });
    }
    if head.starts_with(ZOOKEEPER_LOG_MAGIC) {
        return Ok(Err(
            "it is an Apache ZooKeeper txn log (magic \"ZKLG\"): this is an Apache ZooKeeper \
             dataDir"
                .into(),
        ));
    }
    let mut zeros = head.iter().all(|b| *b == 0);
    let mut buf = vec![0u8; 1 << 20];
    while zeros {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        zeros = buf[..n].iter().all(|b| *b == 0);
    }
    Ok(if zeros {
        Ok(Kind::Fresh)
    } else {
        Err(format!(
            "it does not start with ringkeeper's log segment magic {:?} (format version {VERSION})",
            String::from_utf8_lossy(MAGIC)
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifies_ours_fresh_and_foreign() {
        let dir = tempfile::tempdir().unwrap();
        let at = |name: &str, bytes: &[u8]| {
            let p = dir.path().join(name);
            std::fs::write(&p, bytes).unwrap();
            identify(&p).unwrap()
        };
        let mut ours = encode();
        ours.extend_from_slice(&[7u8; 100]);
        assert_eq!(at("a", &ours), Ok(Kind::Ours));
        assert_eq!(at("b", b""), Ok(Kind::Fresh));
        assert_eq!(at("c", &[0u8; 3 << 20]), Ok(Kind::Fresh));
        let mut late = vec![0u8; 2 << 20];
        late[(1 << 20) + 5] = 1;
        assert!(at("d", &late).unwrap_err().contains("magic"));
        assert!(at("e", b"ZKLG\0\0\0\x02")
            .unwrap_err()
            .contains("Apache ZooKeeper"));
        let mut newer = encode();
        newer[8..12].copy_from_slice(&2u32.to_be_bytes());
        assert!(at("f", &newer).unwrap_err().contains("format version 2"));
        assert!(at("g", &MAGIC[..]).unwrap_err().contains("cut short"));
        assert!(at("h", b"RKTXNLO").unwrap_err().contains("magic"));
    }
}
