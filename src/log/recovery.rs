//! Reading the log back at startup: every segment in zxid order, each record
//! checked, and the end of the log decided.
//!
//! The end of the log is the first place that is not a valid record with
//! the next zxid. What lies there decides what it means:
//! - a record written after the last completed fdatasync may have reached
//!   disk partly or not at all, in any page order: that is a torn tail,
//!   never acknowledged, and is cut off;
//! - if any valid record further on says (through its `durable_zxid`) that
//!   the missing zxid had been made durable, the damage is corruption of an
//!   acknowledged record: recovery refuses, naming the file and offset.

use std::fs::OpenOptions;
use std::io;
use std::path::{Path, PathBuf};

use super::header::{self, Kind};
use super::record::{self, Header, Read};
use super::segment;
use crate::zab::zxid;

/// A valid record found in a segment.
pub struct Found<'a> {
    pub header: Header,
    pub payload: &'a [u8],
    /// Index of its segment in the scanned list.
    pub segment: usize,
    /// Offset in the segment just past the record (its padding included).
    pub end: usize,
}

pub struct SegmentFile {
    pub path: PathBuf,
    pub first_zxid: i64,
}

/// Log segments in `dir`, in zxid order.
pub fn list_segments(dir: &Path) -> io::Result<Vec<SegmentFile>> {
    let mut v = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if let Some(first_zxid) = segment::first_zxid_of(&path) {
            v.push(SegmentFile { path, first_zxid });
        }
    }
    v.sort_by_key(|s| s.first_zxid);
    Ok(v)
}

#[derive(Debug)]
pub enum ScanEnd {
    /// Clean end (zeros from here on) at this segment index and offset.
    Clean { segment: usize, offset: usize },
    /// Torn tail cut at this segment index and offset.
    Torn {
        segment: usize,
        offset: usize,
        reason: String,
    },
}

#[derive(Debug)]
pub struct Corruption {
    pub path: PathBuf,
    pub offset: usize,
    pub reason: String,
}

/// A file named like a segment that is not one of ours.
#[derive(Debug)]
pub struct NotOurs {
    pub path: PathBuf,
    pub reason: String,
}

impl std::fmt::Display for NotOurs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} is named like a txn log segment but is not a ringkeeper one: {}; \
             ringkeeper never modifies a file it does not recognise (nothing was changed): \
             move it away",
            self.path.display(),
            self.reason
        )
    }
}

/// Why a scan stopped short of the end of the log.
#[derive(Debug)]
pub enum ScanError {
    NotOurs(NotOurs),
    Corrupt(Corruption),
}

impl std::fmt::Display for ScanError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ScanError::NotOurs(n) => n.fmt(f),
            ScanError::Corrupt(c) => c.fmt(f),
        }
    }
}

impl From<Corruption> for ScanError {
    fn from(c: Corruption) -> ScanError {
        ScanError::Corrupt(c)
    }
}

/// Checks that every segment is ours: it starts with our header, or it is
/// the newest segment and holds nothing but zeros (a crash between creating
/// it and its header's fsync; see [`super::header`]). A headerless file
/// anywhere else cannot be one a crash left: records only go into a
/// segment whose header is durable, and the next roll after such a crash
/// starts at the same zxid (the one after the last recovered), so it
/// truncates and reuses that very file rather than leave it behind a newer
/// one; and since zxids jump to a new epoch at every start, recovery
/// removes it first ([`remove_fresh_newest`]). Only reads.
pub fn check_ours(segments: &[SegmentFile]) -> Result<(), NotOurs> {
    for (i, seg) in segments.iter().enumerate() {
        let not_ours = |reason: String| NotOurs {
            path: seg.path.clone(),
            reason,
        };
        match header::identify(&seg.path) {
            Err(e) => return Err(not_ours(format!("unreadable: {e}"))),
            Ok(Err(reason)) => return Err(not_ours(reason)),
            Ok(Ok(Kind::Ours)) => {}
            Ok(Ok(Kind::Fresh)) if i + 1 == segments.len() => {}
            Ok(Ok(Kind::Fresh)) => {
                return Err(not_ours(
                    "it has no ringkeeper log header, and only the newest segment can lack \
                     one (a crash while it was being created)"
                        .into(),
                ))
            }
        }
    }
    Ok(())
}

/// Removes the newest segment if it is a headerless all-zero file a crash
/// left (see [`check_ours`]): it holds no record, and the next roll starts
/// a new epoch at a zxid of its own, so nothing would reuse the name, and
/// a headerless segment before a newer one refuses startup. Returns the
/// path removed. A torn tail's cut ([`truncate`]) may have removed it
/// already: a segment that is gone is not removed again.
pub fn remove_fresh_newest(segments: &[SegmentFile]) -> io::Result<Option<PathBuf>> {
    let Some(newest) = segments.last() else {
        return Ok(None);
    };
    let kind = match header::identify(&newest.path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        k => k?,
    };
    if matches!(kind, Ok(Kind::Fresh)) {
        std::fs::remove_file(&newest.path)?;
        return Ok(Some(newest.path.clone()));
    }
    Ok(None)
}

impl std::fmt::Display for Corruption {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "txn log corrupt: {} at offset {}: {}",
            self.path.display(),
            self.offset,
            self.reason
        )
    }
}

/// Reads every valid record with zxid > `after_zxid`, in order, calling
/// `visit` on each; returns where the log ends. `visit` sees each record
/// exactly once; records at or below `after_zxid` are skipped. Fails
/// before reading any record if a segment is not ours ([`check_ours`]).
pub fn scan(
    segments: &[SegmentFile],
    after_zxid: i64,
    mut visit: impl FnMut(&Found<'_>) -> Result<(), String>,
) -> Result<ScanEnd, ScanError> {
    check_ours(segments).map_err(ScanError::NotOurs)?;
    // A segment holds zxids below the next one's first: one whose
    // successor starts at or before `after_zxid + 1` is all skipped, and
    // is not read at all (as ZooKeeper reads the logs after its snapshot).
    let covered = segments
        .windows(2)
        .take_while(|w| w[1].first_zxid <= after_zxid.saturating_add(1))
        .count();
    let mut last_zxid: Option<i64> = None;
    for (si, seg) in segments.iter().enumerate().skip(covered) {
        // Mapped, not read: replay touches each record once, in order.
        let file = std::fs::File::open(&seg.path).map_err(|e| Corruption {
            path: seg.path.clone(),
            offset: 0,
            reason: format!("unreadable: {e}"),
        })?;
        let map = unsafe { memmap2::Mmap::map(&file) }.map_err(|e| Corruption {
            path: seg.path.clone(),
            offset: 0,
            reason: format!("cannot map: {e}"),
        })?;
        let _ = map.advise(memmap2::Advice::Sequential);
        let bytes: &[u8] = &map;
        let mut off = header::records_start(bytes, bytes.len());
        loop {
            let stop = match record::read(&bytes[off..]) {
                Read::Record(h, payload, total) => {
                    let after = last_zxid.filter(|z| !zxid::follows(*z, h.zxid));
                    if let Some(prev) = after {
                        Some(format!(
                            "zxid {:#x} does not follow {prev:#x} (the next in its epoch, or \
                             the first of a later one)",
                            h.zxid
                        ))
                    } else {
                        if h.zxid > after_zxid {
                            let found = Found {
                                header: h,
                                payload,
                                segment: si,
                                end: off + total,
                            };
                            visit(&found).map_err(|reason| Corruption {
                                path: seg.path.clone(),
                                offset: off,
                                reason,
                            })?;
                        }
                        last_zxid = Some(h.zxid);
                        off += total;
                        None
                    }
                }
                Read::End if off >= bytes.len() || is_zero(&bytes[off..]) => {
                    // This segment ends cleanly; the log goes on in the next.
                    if si + 1 < segments.len() {
                        break;
                    }
                    return Ok(ScanEnd::Clean {
                        segment: si,
                        offset: off,
                    });
                }
                Read::End => Some("a gap of zeros before more data".to_string()),
                Read::Bad(why) => Some(why.to_string()),
            };
            if let Some(reason) = stop {
                let next = last_zxid.map_or(i64::MIN, |z| z + 1);
                if let Some(evidence) = durable_beyond(segments, si, off, bytes, next) {
                    return Err(ScanError::Corrupt(Corruption {
                        path: seg.path.clone(),
                        offset: off,
                        reason: format!("{reason}; {evidence}"),
                    }));
                }
                return Ok(ScanEnd::Torn {
                    segment: si,
                    offset: off,
                    reason,
                });
            }
        }
    }
    Ok(ScanEnd::Clean {
        segment: segments.len().saturating_sub(1),
        offset: 0,
    })
}

fn is_zero(b: &[u8]) -> bool {
    b.iter().all(|x| *x == 0)
}

/// How many epochs past a missing record one that vouches for it may be
/// (an election a day for 179 years).
const EPOCHS_AHEAD_MAX: i64 = 1 << 16;

/// Looks past a bad spot for a valid record that says zxid `missing` had
/// been made durable. Records are 8-byte aligned, so only aligned offsets
/// need checking.
fn durable_beyond(
    segments: &[SegmentFile],
    si: usize,
    off: usize,
    bytes: &[u8],
    missing: i64,
) -> Option<String> {
    // The first record of the scan torn (`missing` unknown, i64::MIN):
    // its segment's name says which zxid it held.
    let epoch_floor = if missing == i64::MIN {
        segments[si].first_zxid
    } else {
        missing
    };
    let check = |buf: &[u8], start: usize, path: &Path| -> Option<String> {
        let mut o = start;
        while o + record::HEADER_BYTES <= buf.len() {
            // Only a header that could vouch for `missing` is worth its
            // checksum: at most 8-byte offsets past a tear some bytes read
            // as a length of megabytes, and checksumming each took a
            // follower's restart to minutes (tests/ensemble_powercut.rs).
            // Such a record comes after `missing`, says at least it was
            // durable, is not durable beyond itself, and lies within
            // `EPOCHS_AHEAD_MAX` epochs (random bytes almost never do).
            let vouches = record::peek_header(&buf[o..]).is_some_and(|h| {
                h.durable_zxid >= missing
                    && h.zxid >= h.durable_zxid.max(0)
                    && h.zxid > missing
                    && (h.zxid >> 32) <= (epoch_floor >> 32) + EPOCHS_AHEAD_MAX
            });
            if !vouches {
                o += 8;
                continue;
            }
            if let Read::Record(h, _, _) = record::read(&buf[o..]) {
                if h.durable_zxid >= missing {
                    return Some(format!(
                        "the record of zxid {:#x} at {}:{} says zxid {missing:#x} had been made durable",
                        h.zxid,
                        path.display(),
                        o
                    ));
                }
            }
            o += 8;
        }
        None
    };
    if let Some(e) = check(bytes, (off + 8) & !7, &segments[si].path) {
        return Some(e);
    }
    for seg in &segments[si + 1..] {
        let b = std::fs::read(&seg.path).ok()?;
        if let Some(e) = check(&b, header::records_start(&b, b.len()), &seg.path) {
            return Some(e);
        }
    }
    None
}

/// Cuts the log at a torn tail: removes every later segment, newest first,
/// then zeros from `offset` to the end of that segment, and makes it all
/// durable. In that order a crash part way leaves the log a prefix of
/// what it was, with the same torn tail to cut again, never the kept
/// part followed by a later segment. Only for a [`ScanEnd::Torn`] that
/// [`scan`] returned: every segment passed [`check_ours`], and the cut
/// lies past the segment's header.
pub fn truncate(
    dir: &Path,
    segments: &[SegmentFile],
    segment: usize,
    offset: usize,
) -> io::Result<()> {
    let seg = &segments[segment];
    assert!(
        offset >= header::BYTES,
        "a torn tail inside the header of {}",
        seg.path.display()
    );
    for later in segments[segment + 1..].iter().rev() {
        std::fs::remove_file(&later.path)?;
    }
    std::fs::File::open(dir)?.sync_all()?;
    let f = OpenOptions::new().write(true).open(&seg.path)?;
    let len = f.metadata()?.len() as usize;
    if offset < len {
        use std::os::unix::fs::FileExt;
        let zeros = vec![0u8; 1 << 20];
        let mut at = offset;
        while at < len {
            let n = (len - at).min(zeros.len());
            f.write_all_at(&zeros[..n], at as u64)?;
            at += n;
        }
    }
    f.sync_all()
}
