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

    fn has_snapshot_above(&self, zxid: i64) -> Result<bool, String> {
        crate::snapshot::list(self.data_dir)
            .map(|listed| listed.iter().any(|(z, _)| *z > zxid))
            .map_err(|e| format!("listing snapshots in {}: {e}", self.data_dir.display()))
    }

    fn disk_lost(&self) -> bool {
        crate::startup::damaged::disk_lost(self.data_dir)
    }

    fn mark_disk_lost(&mut self) -> Result<(), String> {
        crate::startup::damaged::mark_disk_lost(
            self.data_dir,
            "a SNAP below its newest snapshot was being installed",
        )
    }

    fn clear_disk_lost(&mut self) -> Result<(), String> {
        crate::startup::damaged::clear_disk_lost(self.data_dir)
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

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::proto::Acl;
    use crate::startup::damaged::disk_lost;
    use crate::tree::{Txn, TxnOp};

    /// A tree of `n` znodes, its last zxid `n`.
    fn tree(n: i64) -> Tree {
        let mut t = Tree::new();
        for z in 1..=n {
            t.apply(&Txn {
                zxid: z,
                time_ms: 5,
                session_id: 0,
                cxid: 0,
                op: TxnOp::Create {
                    path: Arc::from(format!("/n{z}")),
                    data: None,
                    acl: Arc::from(vec![Acl::world_all()]),
                    ephemeral_owner: 0,
                    parent_cversion: z as i32,
                    create2: false,
                },
            });
        }
        t
    }

    /// The member's files, crashing (failing) at writing the SNAP's
    /// snapshot when `crash` is set.
    struct Crashing<'a>(SnapFiles<'a>, bool);

    impl SnapDisk for Crashing<'_> {
        type Tree = Tree;
        fn cut_log_above(&mut self, z: i64) -> Result<(), String> {
            self.0.cut_log_above(z)
        }
        fn has_snapshot_above(&self, z: i64) -> Result<bool, String> {
            self.0.has_snapshot_above(z)
        }
        fn disk_lost(&self) -> bool {
            self.0.disk_lost()
        }
        fn mark_disk_lost(&mut self) -> Result<(), String> {
            self.0.mark_disk_lost()
        }
        fn clear_disk_lost(&mut self) -> Result<(), String> {
            self.0.clear_disk_lost()
        }
        fn remove_snapshots_above(&mut self, z: i64) -> Result<(), String> {
            self.0.remove_snapshots_above(z)
        }
        fn mark_fuzzy(&mut self, z: i64) -> Result<(), String> {
            self.0.mark_fuzzy(z)
        }
        fn write_snapshot(&mut self, z: i64, t: &Tree) -> Result<(), String> {
            if self.1 {
                return Err("crashed".into());
            }
            self.0.write_snapshot(z, t)
        }
        fn clear_log(&mut self) -> Result<(), String> {
            self.0.clear_log()
        }
    }

    fn snapshots(dir: &Path) -> Vec<i64> {
        let mut z: Vec<i64> = crate::snapshot::list(dir)
            .unwrap()
            .into_iter()
            .map(|(z, _)| z)
            .collect();
        z.sort();
        z
    }

    #[test]
    fn a_snapshot_past_the_snap_goes_under_the_lost_disk_marker() {
        for crash in [false, true] {
            let data = tempfile::tempdir().unwrap();
            let log = tempfile::tempdir().unwrap();
            crate::snapshot::write(data.path(), &tree(2), &[], 0).unwrap();
            crate::snapshot::write(data.path(), &tree(9), &[], 0).unwrap();
            let files = SnapFiles {
                data_dir: data.path(),
                log_dir: log.path(),
                sessions: &[],
            };
            let result =
                crate::zab::snap_install::install(&mut Crashing(files, crash), 5, &tree(5));
            if crash {
                result.unwrap_err();
                // It would recover to 2, less than it may have acked.
                assert_eq!(snapshots(data.path()), [2]);
                assert!(
                    disk_lost(data.path()),
                    "restarts as a member that lost its disk"
                );
            } else {
                result.unwrap();
                assert_eq!(snapshots(data.path()), [2, 5]);
                assert!(!disk_lost(data.path()));
            }
        }
    }

    #[test]
    fn a_snap_above_every_snapshot_writes_no_marker() {
        let data = tempfile::tempdir().unwrap();
        let log = tempfile::tempdir().unwrap();
        crate::snapshot::write(data.path(), &tree(2), &[], 0).unwrap();
        let files = SnapFiles {
            data_dir: data.path(),
            log_dir: log.path(),
            sessions: &[],
        };
        crate::zab::snap_install::install(&mut Crashing(files, true), 5, &tree(5)).unwrap_err();
        assert!(
            !disk_lost(data.path()),
            "its snapshot at 2 holds what it acked"
        );
    }
}
