//! An ensemble member whose log is damaged beyond a torn tail (a corrupt
//! record, txns missing) does not refuse to start: it moves its snapshots
//! and log segments aside, into `damaged-<unix seconds>/` in the directory
//! that held them, and starts empty, and the leader syncs it (a SNAP, as a
//! member whose disk was replaced). Nothing is deleted: the files stay for
//! whoever wants to look at them. The epoch files and myid stay where they
//! are: acceptedEpoch still bounds what this member may accept.
//!
//! Such a member has forgotten acks it gave (protocol-aware recovery,
//! DESIGN.md §5): until a leader established without it has synced it, it
//! must not count toward establishing an epoch, or an ensemble could
//! choose a leader that lacks acknowledged writes and truncate the members
//! that hold them. That state is the marker file [`LOST_DISK_MARKER`] in
//! dataDir, written and made durable *before* anything is moved, and
//! removed once synced. An operator who replaces or wipes a member's disk
//! by hand creates the same file (with any content) next to myid.
//!
//! The files move one at a time, each move durable before the next, and
//! newest first: the log's segments from the newest, then the fuzzy
//! marker, then the snapshots from the newest. A crash part way leaves an
//! older state of this member's own (the older segments, or a snapshot
//! with nothing after it), never a snapshot or segment with newer ones
//! missing before it: a segment that starts an epoch's first txn follows
//! anything, so recovery would take such a mix for a state this member
//! never had, and a leader would sync it by DIFF from there.
//!
//! A standalone server has nobody to resync from: it still refuses to start
//! and names the damage.

use std::path::{Path, PathBuf};

use crate::log::segment;

/// In dataDir while this member waits to be synced after losing its disk.
pub const LOST_DISK_MARKER: &str = "ringkeeper.lost-disk";

/// Whether `data_dir` holds the lost-disk marker.
pub fn disk_lost(data_dir: &Path) -> bool {
    data_dir.join(LOST_DISK_MARKER).exists()
}

/// Writes the lost-disk marker durably (file and directory synced), saying
/// `why`.
pub fn mark_disk_lost(data_dir: &Path, why: &str) -> Result<(), String> {
    let path = data_dir.join(LOST_DISK_MARKER);
    let text = format!(
        "this member's disk was set aside ({why}); it waits to be synced by an \
         established leader before it counts toward a quorum again\n"
    );
    let write = || -> std::io::Result<()> {
        let tmp = data_dir.join(format!("{LOST_DISK_MARKER}.tmp"));
        let mut f = std::fs::File::create(&tmp)?;
        std::io::Write::write_all(&mut f, text.as_bytes())?;
        f.sync_all()?;
        std::fs::rename(&tmp, &path)?;
        std::fs::File::open(data_dir)?.sync_all()
    };
    write().map_err(|e| format!("writing {}: {e}", path.display()))
}

/// Removes the lost-disk marker durably: this member was synced.
pub fn clear_disk_lost(data_dir: &Path) -> Result<(), String> {
    let path = data_dir.join(LOST_DISK_MARKER);
    match std::fs::remove_file(&path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(format!("removing {}: {e}", path.display())),
    }
    std::fs::File::open(data_dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| format!("syncing {}: {e}", data_dir.display()))
}
use crate::recovery::FUZZY_SNAPSHOT_MARKER;
use crate::snapshot;

/// Whether `name` is a file recovery reads from this kind of directory.
fn is_state(name: &str, data: bool, log: bool) -> bool {
    (data && (name.starts_with(snapshot::PREFIX) || name == FUZZY_SNAPSHOT_MARKER))
        || (log && name.starts_with(segment::PREFIX))
}

/// The order state files move in: segments newest first, other `log.`
/// files, the fuzzy marker, snapshots newest first, other `snapshot.`
/// files (see the module's comment).
fn aside_order(mut names: Vec<String>) -> Vec<String> {
    let rank = |n: &str| -> (u8, std::cmp::Reverse<i64>) {
        let zxid = |prefix: &str| {
            n.strip_prefix(prefix)
                .and_then(|hex| i64::from_str_radix(hex, 16).ok())
        };
        match (zxid(segment::PREFIX), zxid(snapshot::PREFIX)) {
            (Some(z), _) => (0, std::cmp::Reverse(z)),
            _ if n.starts_with(segment::PREFIX) => (1, std::cmp::Reverse(0)),
            _ if n == FUZZY_SNAPSHOT_MARKER => (2, std::cmp::Reverse(0)),
            (_, Some(z)) => (3, std::cmp::Reverse(z)),
            _ => (4, std::cmp::Reverse(0)),
        }
    };
    names.sort_by(|a, b| rank(a).cmp(&rank(b)).then_with(|| a.cmp(b)));
    names
}

fn sync_dir(d: &Path) -> Result<(), String> {
    std::fs::File::open(d)
        .and_then(|f| f.sync_all())
        .map_err(|e| format!("syncing {}: {e}", d.display()))
}

/// Moves the state files of `dir` into `dir/damaged-<stamp>/`, in
/// [`aside_order`], each move durable before the next; returns the
/// directory when it moved anything.
fn set_aside_in(dir: &Path, stamp: u64, data: bool, log: bool) -> Result<Option<PathBuf>, String> {
    let aside = dir.join(format!("damaged-{stamp}"));
    let entries = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut names = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| format!("{}: {e}", dir.display()))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let is_file = entry.file_type().map(|t| t.is_file()).unwrap_or(false);
        if is_file && is_state(&name, data, log) {
            names.push(name);
        }
    }
    if names.is_empty() {
        return Ok(None);
    }
    std::fs::create_dir_all(&aside).map_err(|e| format!("creating {}: {e}", aside.display()))?;
    sync_dir(dir)?;
    for name in aside_order(names) {
        let from = dir.join(&name);
        std::fs::rename(&from, aside.join(&name))
            .map_err(|e| format!("moving {} aside: {e}", from.display()))?;
        sync_dir(dir)?;
    }
    sync_dir(&aside)?;
    Ok(Some(aside))
}

/// Marks the disk lost (see [`LOST_DISK_MARKER`]), then moves the
/// snapshots (from `data_dir`) and log segments (from `log_dir`) aside;
/// returns where they went.
pub fn set_aside(data_dir: &Path, log_dir: &Path, why: &str) -> Result<Vec<PathBuf>, String> {
    mark_disk_lost(data_dir, why)?;
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let mut moved_to = Vec::new();
    if data_dir == log_dir {
        moved_to.extend(set_aside_in(data_dir, stamp, true, true)?);
    } else {
        // The log first: its segments are the newest state.
        moved_to.extend(set_aside_in(log_dir, stamp, false, true)?);
        moved_to.extend(set_aside_in(data_dir, stamp, true, false)?);
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
        let moved = set_aside(d, d, "test").unwrap();
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
        assert!(set_aside(d, d, "test").unwrap().is_empty());
        assert!(disk_lost(d), "the marker stays until synced");
        clear_disk_lost(d).unwrap();
        assert!(!disk_lost(d));
    }

    #[test]
    fn files_move_newest_first_segments_before_snapshots() {
        let names = [
            "snapshot.0000000100000005",
            "log.0000000100000001",
            "snapshot.0000000000000000",
            "log.prepared",
            "log.0000000200000001",
            FUZZY_SNAPSHOT_MARKER,
            "log.0000000100000009",
            "snapshot.0000000200000003.tmp",
            "snapshot.0000000200000003",
        ];
        let order = aside_order(names.iter().map(|n| n.to_string()).collect());
        assert_eq!(
            order,
            [
                "log.0000000200000001",
                "log.0000000100000009",
                "log.0000000100000001",
                "log.prepared",
                FUZZY_SNAPSHOT_MARKER,
                "snapshot.0000000200000003",
                "snapshot.0000000100000005",
                "snapshot.0000000000000000",
                "snapshot.0000000200000003.tmp",
            ]
        );
    }

    #[test]
    fn separate_log_dir_keeps_its_segments_in_its_own_damaged_dir() {
        let data = tempfile::tempdir().unwrap();
        let log = tempfile::tempdir().unwrap();
        std::fs::write(data.path().join("snapshot.0000000000000003"), "s").unwrap();
        std::fs::write(log.path().join("log.0000000000000001"), "l").unwrap();
        let moved = set_aside(data.path(), log.path(), "test").unwrap();
        assert_eq!(moved.len(), 2);
        // The log's first: its segments are the newest state.
        assert!(moved[0].join("log.0000000000000001").exists());
        assert!(moved[1].join("snapshot.0000000000000003").exists());
    }
}
