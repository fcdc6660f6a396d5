//! The log as ZAB's sync needs it: the records in a zxid range (a leader's
//! DIFF), and cutting everything after a zxid (a follower's TRUNC). Both
//! work on the log directory while no writer has it open (a follower syncs
//! before it logs anything of the new epoch); the cut is recovery's own
//! (`recovery::truncate`): zeros after the record, later segments removed,
//! each step fsynced.

use std::path::Path;

use super::record::Header;
use super::recovery;

/// One record read back.
pub struct Record {
    pub header: Header,
    pub payload: Vec<u8>,
}

/// The records with `after < zxid <= through`, in log order.
pub fn read_range(dir: &Path, after: i64, through: i64) -> Result<Vec<Record>, String> {
    let segments = recovery::list_segments(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut out = Vec::new();
    recovery::scan(&segments, after, |found| {
        if found.header.zxid <= through {
            out.push(Record {
                header: found.header,
                payload: found.payload.to_vec(),
            });
        }
        Ok(())
    })
    .map_err(|e| e.to_string())?;
    Ok(out)
}

/// Cuts every record after `zxid` off the log; returns how many were cut.
/// `zxid` must be a record of the log, or lie before its first record
/// (then every record goes); anything else is an error and nothing
/// changes.
pub fn truncate_after(dir: &Path, zxid: i64) -> Result<u64, String> {
    let segments = recovery::list_segments(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    if segments.is_empty() {
        return Ok(0);
    }
    // Where the kept part ends: just past record `zxid`, or at the first
    // segment's first record when nothing is kept.
    let mut cut: Option<(usize, usize)> = None;
    let mut first: Option<i64> = None;
    let mut later = 0u64;
    recovery::scan(&segments, i64::MIN, |found| {
        first.get_or_insert(found.header.zxid);
        if found.header.zxid == zxid {
            cut = Some((found.segment, found.end));
        } else if found.header.zxid > zxid {
            later += 1;
        }
        Ok(())
    })
    .map_err(|e| e.to_string())?;
    let (segment, offset) = match (cut, first) {
        (Some(c), _) => c,
        (None, Some(f)) if zxid < f => (0, super::header::BYTES),
        (None, None) => return Ok(0),
        (None, Some(_)) => {
            return Err(format!(
                "cannot truncate the log after {zxid:#x}: no such record, and it is not \
                 before the log's first record"
            ))
        }
    };
    recovery::truncate(dir, &segments, segment, offset)
        .map_err(|e| format!("truncating {}: {e}", dir.display()))?;
    Ok(later)
}

/// Cuts every record above `zxid` off the log (whether or not `zxid` is a
/// record of it); returns whether anything was cut. Reads only the
/// segments that can hold such records.
pub fn truncate_above(dir: &Path, zxid: i64) -> Result<bool, String> {
    let segments = recovery::list_segments(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut first_above: Option<(usize, usize)> = None;
    recovery::scan(&segments, zxid, |found| {
        if first_above.is_none() {
            let start = found.end - super::record::framed_len(found.payload.len());
            first_above = Some((found.segment, start));
        }
        Ok(())
    })
    .map_err(|e| e.to_string())?;
    let Some((segment, offset)) = first_above else {
        return Ok(false);
    };
    recovery::truncate(dir, &segments, segment, offset)
        .map_err(|e| format!("truncating {}: {e}", dir.display()))?;
    Ok(true)
}

/// Removes every record of the log, reading none (the segments must be
/// ours: their headers are checked).
pub fn clear(dir: &Path) -> Result<(), String> {
    let segments = recovery::list_segments(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    if segments.is_empty() {
        return Ok(());
    }
    recovery::check_ours(&segments).map_err(|e| e.to_string())?;
    recovery::truncate(dir, &segments, 0, super::header::BYTES)
        .map_err(|e| format!("clearing {}: {e}", dir.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::{header, record, segment};
    use crate::zab::zxid::make;

    /// A segment holding `zxids` (payload: the zxid's bytes), then zeros.
    fn write_segment(dir: &Path, zxids: &[i64]) {
        let mut bytes = header::encode();
        for z in zxids {
            let payload = z.to_be_bytes();
            let at = bytes.len();
            bytes.resize(at + record::framed_len(payload.len()), 0);
            record::write(&mut bytes[at..], *z, *z, &payload);
        }
        bytes.resize(bytes.len() + 4096, 0);
        std::fs::write(dir.join(segment::file_name(zxids[0])), bytes).unwrap();
    }

    fn zxids(dir: &Path) -> Vec<i64> {
        read_range(dir, i64::MIN, i64::MAX)
            .unwrap()
            .iter()
            .map(|r| {
                assert_eq!(r.payload, r.header.zxid.to_be_bytes());
                r.header.zxid
            })
            .collect()
    }

    /// Epoch 1: 1..=5 in one segment, 6..=8 in the next; epoch 2: 1..=3.
    fn three_segments() -> (tempfile::TempDir, Vec<i64>) {
        let d = tempfile::tempdir().unwrap();
        let a: Vec<i64> = (1..=5).map(|c| make(1, c)).collect();
        let b: Vec<i64> = (6..=8).map(|c| make(1, c)).collect();
        let c: Vec<i64> = (1..=3).map(|c| make(2, c)).collect();
        for s in [&a, &b, &c] {
            write_segment(d.path(), s);
        }
        let all = [a, b, c].concat();
        (d, all)
    }

    #[test]
    fn truncating_above_a_zxid_and_clearing() {
        let (d, all) = three_segments();
        // Not a record of the log (1:9 was never written): 1:1..=8 stay.
        assert!(truncate_above(d.path(), make(1, 9)).unwrap());
        assert_eq!(zxids(d.path()), all[..8]);
        assert!(truncate_above(d.path(), make(1, 3)).unwrap());
        assert_eq!(zxids(d.path()), all[..3]);
        assert!(!truncate_above(d.path(), make(1, 3)).unwrap());
        clear(d.path()).unwrap();
        assert!(zxids(d.path()).is_empty());
    }

    #[test]
    fn ranges_across_segments_and_epochs() {
        let (d, all) = three_segments();
        assert_eq!(zxids(d.path()), all);
        let got: Vec<i64> = read_range(d.path(), make(1, 4), make(2, 1))
            .unwrap()
            .iter()
            .map(|r| r.header.zxid)
            .collect();
        assert_eq!(
            got,
            [make(1, 5), make(1, 6), make(1, 7), make(1, 8), make(2, 1)]
        );
        assert!(read_range(d.path(), make(2, 3), i64::MAX)
            .unwrap()
            .is_empty());
    }

    #[test]
    fn truncation_keeps_through_the_zxid() {
        for (i, keep) in [make(1, 3), make(1, 5), make(1, 8), make(2, 2), make(2, 3)]
            .into_iter()
            .enumerate()
        {
            let (d, all) = three_segments();
            let kept: Vec<i64> = all.iter().copied().filter(|z| *z <= keep).collect();
            let cut = truncate_after(d.path(), keep).unwrap();
            assert_eq!(cut as usize, all.len() - kept.len(), "case {i}");
            assert_eq!(zxids(d.path()), kept, "case {i}");
            // The log goes on from there: a record of a later epoch follows.
            let next = make(3, 1);
            write_segment(d.path(), &[next]);
            assert_eq!(zxids(d.path()), [kept, vec![next]].concat(), "case {i}");
        }
    }

    #[test]
    fn truncation_before_the_first_record_empties_the_log() {
        let (d, all) = three_segments();
        assert_eq!(truncate_after(d.path(), 0).unwrap() as usize, all.len());
        assert!(zxids(d.path()).is_empty());
        assert_eq!(recovery::list_segments(d.path()).unwrap().len(), 1);
    }

    #[test]
    fn truncation_after_a_zxid_not_in_the_log_changes_nothing() {
        let (d, all) = three_segments();
        for z in [make(1, 9), make(2, 4), make(3, 0)] {
            let err = truncate_after(d.path(), z).unwrap_err();
            assert!(err.contains("no such record"), "{err}");
            assert_eq!(zxids(d.path()), all);
        }
    }
}
