//! An ensemble member whose log is damaged beyond a torn tail (a corrupt
//! record, txns missing) does not refuse to start: it moves its snapshots
//! and log segments aside, into `damaged-<unix seconds>/` in the directory
//! that held them, and starts empty, and the leader syncs it (a SNAP, as a
//! member whose disk was replaced). Nothing is deleted: the files stay for
//! whoever wants to look at them. The epoch files and myid stay where they
//! are (an empty log is consistent with any epoch).
//!
//! A standalone server has nobody to resync from: it still refuses to start
//! and names the damage.

use std::path::{Path, PathBuf};

use crate::log::segment;
use crate::recovery::FUZZY_SNAPSHOT_MARKER;
use crate::snapshot;

/// Whether `name` is a file recovery reads from this kind of directory.
fn is_state(name: &str, data: bool, log: bool) -> bool {
    (data && (name.starts_with(snapshot::PREFIX) || name == FUZZY_SNAPSHOT_MARKER))
        || (log && name.starts_with(segment::PREFIX))
}

/// Moves the state files of `dir` into `dir/damaged-<stamp>/`; returns the
/// directory when it moved anything.
fn set_aside_in(dir: &Path, stamp: u64, data: bool, log: bool) -> Result<Option<PathBuf>, String> {
    let aside = dir.join(format!("damaged-{stamp}"));
    let entries = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut moved = 0;
    for entry in entries {
        let entry = entry.map_err(|e| format!("{}: {e}", dir.display()))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let is_file = entry.file_type().map(|t| t.is_file()).unwrap_or(false);
        if !is_file || !is_state(&name, data, log) {
            continue;
        }
        if moved == 0 {
            std::fs::create_dir_all(&aside)
                .map_err(|e| format!("creating {}: {e}", aside.display()))?;
        }
        std::fs::rename(entry.path(), aside.join(&name))
            .map_err(|e| format!("moving {} aside: {e}", entry.path().display()))?;
        moved += 1;
    }
    if moved == 0 {
        return Ok(None);
    }
    for d in [&aside, dir] {
        std::fs::File::open(d)
            .and_then(|f| f.sync_all())
            .map_err(|e| format!("syncing {}: {e}", d.display()))?;
    }
    Ok(Some(aside))
}

/// Moves the snapshots (from `data_dir`) and log segments (from `log_dir`)
/// aside; returns where they went.
pub fn set_aside(data_dir: &Path, log_dir: &Path) -> Result<Vec<PathBuf>, String> {
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let mut moved_to = Vec::new();
    if data_dir == log_dir {
        moved_to.extend(set_aside_in(data_dir, stamp, true, true)?);
    } else {
        moved_to.extend(set_aside_in(data_dir, stamp, true, false)?);
        moved_to.extend(set_aside_in(log_dir, stamp, false, true)?);
    }
    Ok(moved_to)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_files_move_aside_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        for name in [
            "log.0000000100000001",
            "log.prepared",
            "snapshot.0000000100000005",
            FUZZY_SNAPSHOT_MARKER,
            "myid",
            "currentEpoch",
            "acceptedEpoch",
            "notes.txt",
        ] {
            std::fs::write(d.join(name), name).unwrap();
        }
        let moved = set_aside(d, d).unwrap();
        assert_eq!(moved.len(), 1);
        let mut aside: Vec<String> = std::fs::read_dir(&moved[0])
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        aside.sort();
        assert_eq!(
            aside,
            [
                FUZZY_SNAPSHOT_MARKER,
                "log.0000000100000001",
                "log.prepared",
                "snapshot.0000000100000005"
            ]
        );
        for kept in ["myid", "currentEpoch", "acceptedEpoch", "notes.txt"] {
            assert_eq!(std::fs::read_to_string(d.join(kept)).unwrap(), kept);
        }
        // Nothing left to move: no second directory.
        assert!(set_aside(d, d).unwrap().is_empty());
    }

    #[test]
    fn separate_log_dir_keeps_its_segments_in_its_own_damaged_dir() {
        let data = tempfile::tempdir().unwrap();
        let log = tempfile::tempdir().unwrap();
        std::fs::write(data.path().join("snapshot.0000000000000003"), "s").unwrap();
        std::fs::write(log.path().join("log.0000000000000001"), "l").unwrap();
        let moved = set_aside(data.path(), log.path()).unwrap();
        assert_eq!(moved.len(), 2);
        assert!(moved[0].join("snapshot.0000000000000003").exists());
        assert!(moved[1].join("log.0000000000000001").exists());
    }
}
