//! A member's data and log directories as the disk a leader's SNAP is
//! installed on (`zab::snap_install`, whose order the simulation checks).

use std::path::Path;

use crate::snapshot::SessionEntry;
use crate::tree::Tree;
use crate::zab::snap_install::SnapDisk;

pub struct SnapFiles<'a> {
    pub data_dir: &'a Path,
    pub log_dir: &'a Path,
    /// The sessions the SNAP carried, written with its tree.
    pub sessions: &'a [SessionEntry],
}

impl SnapDisk for SnapFiles<'_> {
    type Tree = Tree;

    fn cut_log_above(&mut self, zxid: i64) -> Result<(), String> {
        crate::log::range::truncate_above(self.log_dir, zxid).map(|_| ())
    }

    fn remove_snapshots_above(&mut self, zxid: i64) -> Result<(), String> {
        remove_snapshots_above(self.data_dir, zxid)
    }

    fn mark_fuzzy(&mut self, zxid: i64) -> Result<(), String> {
        crate::recovery::mark_fuzzy_snapshot(self.data_dir, zxid)
            .map_err(|e| format!("marking the leader's snapshot: {e}"))
    }

    fn write_snapshot(&mut self, _zxid: i64, tree: &Tree) -> Result<(), String> {
        // Unpaced: the member serves nothing until it is installed.
        crate::snapshot::write(self.data_dir, tree, self.sessions, 0)
            .map(|_| ())
            .map_err(|e| format!("writing the leader's snapshot: {e}"))
    }

    fn clear_log(&mut self) -> Result<(), String> {
        crate::log::range::clear(self.log_dir)
    }
}

/// Removes the snapshots in `data_dir` past `zxid`, which a SNAP or TRUNC
/// to it says are not in the leader's history. A member snapshots only its
/// committed trees, and neither cuts a committed txn; but a SNAP from a
/// leader that never established its epoch carries that leader's whole
/// log, and once installed it is a snapshot past what a later leader
/// holds (the simulation reaches this). Such a snapshot goes, and a
/// reload starts from an older snapshot and the log after it (or fails,
/// and the member stops, when autopurge removed them: it then resyncs by
/// SNAP at its next start).
pub fn remove_snapshots_above(data_dir: &Path, zxid: i64) -> Result<(), String> {
    let listed = crate::snapshot::list(data_dir)
        .map_err(|e| format!("listing snapshots in {}: {e}", data_dir.display()))?;
    for (z, path) in listed.into_iter().filter(|(z, _)| *z > zxid) {
        tracing::warn!(
            snapshot = %path.display(),
            "the leader's history ends at {zxid:#x}, below this snapshot ({z:#x}): removing it"
        );
        std::fs::remove_file(&path).map_err(|e| format!("removing {}: {e}", path.display()))?;
    }
    Ok(())
}
