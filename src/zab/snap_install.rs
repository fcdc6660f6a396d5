//! Installing a leader's SNAP on a follower: the one order of disk steps
//! that the server runs (`consensus::runner`) and the simulation checks
//! (`sim::ensemble`, which also crashes a member between any two steps).
//!
//! Each step leaves a disk that recovers to a state the protocol allows:
//!
//! 1. the log after the SNAP's zxid goes: those txns are not in the
//!    leader's history (never committed), and nothing can now bring them
//!    back after the snapshot;
//! 2. snapshots after it go too: a SNAP covers the leader's commit point,
//!    so such a snapshot holds txns nobody committed (one an earlier SNAP
//!    from a leader that never established its epoch left; the simulation
//!    checks that it holds no committed txn past this SNAP's zxid). It may
//!    also be all this member holds of txns below the SNAP's zxid that it
//!    acked (that earlier SNAP's install cleared the log): until step 4
//!    the member would recover to an older state than its acks promised.
//!    So before any such snapshot goes, the lost-disk marker is written
//!    (`startup::damaged`), unless it is there already: a crash in that
//!    window restarts the member as one that lost its disk, which counts
//!    toward no epoch until an established leader has synced it;
//! 3. the snapshot-to-be is marked fuzzy (the txns after it replay
//!    leniently, as ZooKeeper replays after a fuzzy snapshot);
//! 4. the leader's tree is written as a durable snapshot: from here the
//!    member recovers to the SNAP's zxid whatever the log holds below it,
//!    which holds every committed txn it acked; a marker step 2 wrote goes;
//! 5. only then the rest of the log (covered by the snapshot, possibly
//!    diverged below it) goes.
//!
//! Only while following `from` and syncing with it (`Node::syncing_with`):
//! otherwise the SNAP is out of protocol order and its connection closes.
//! zab hears `Input::SnapshotInstalled` once all five are done.

/// The disk a SNAP is installed on.
pub trait SnapDisk {
    /// The leader's tree, as the SNAP carried it.
    type Tree;
    fn cut_log_above(&mut self, zxid: i64) -> Result<(), String>;
    /// Whether a snapshot past `zxid` is on the disk.
    fn has_snapshot_above(&self, zxid: i64) -> Result<bool, String>;
    /// Whether the lost-disk marker is there.
    fn disk_lost(&self) -> bool;
    /// Writes the lost-disk marker durably.
    fn mark_disk_lost(&mut self) -> Result<(), String>;
    /// Removes the lost-disk marker durably.
    fn clear_disk_lost(&mut self) -> Result<(), String>;
    fn remove_snapshots_above(&mut self, zxid: i64) -> Result<(), String>;
    fn mark_fuzzy(&mut self, zxid: i64) -> Result<(), String>;
    fn write_snapshot(&mut self, zxid: i64, tree: &Self::Tree) -> Result<(), String>;
    fn clear_log(&mut self) -> Result<(), String>;
}

/// Installs `tree`, the leader's state as of `zxid`, on `disk`, stopping at
/// the first step that fails.
pub fn install<D: SnapDisk>(disk: &mut D, zxid: i64, tree: &D::Tree) -> Result<(), String> {
    disk.cut_log_above(zxid)?;
    let marked = !disk.disk_lost() && disk.has_snapshot_above(zxid)?;
    if marked {
        disk.mark_disk_lost()?;
    }
    disk.remove_snapshots_above(zxid)?;
    disk.mark_fuzzy(zxid)?;
    disk.write_snapshot(zxid, tree)?;
    if marked {
        disk.clear_disk_lost()?;
    }
    disk.clear_log()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The steps done, the step to fail at, a snapshot past the SNAP's
    /// zxid, the lost-disk marker.
    #[derive(Default)]
    struct Steps(Vec<String>, Option<usize>, bool, bool);

    impl Steps {
        fn did(&mut self, what: String) -> Result<(), String> {
            if self.1 == Some(self.0.len()) {
                return Err(format!("failed at {what}"));
            }
            self.0.push(what);
            Ok(())
        }
    }

    impl SnapDisk for Steps {
        type Tree = &'static str;
        fn cut_log_above(&mut self, z: i64) -> Result<(), String> {
            self.did(format!("cut {z}"))
        }
        fn has_snapshot_above(&self, _z: i64) -> Result<bool, String> {
            Ok(self.2)
        }
        fn disk_lost(&self) -> bool {
            self.3
        }
        fn mark_disk_lost(&mut self) -> Result<(), String> {
            self.did("mark lost".into())?;
            self.3 = true;
            Ok(())
        }
        fn clear_disk_lost(&mut self) -> Result<(), String> {
            self.did("clear lost".into())?;
            self.3 = false;
            Ok(())
        }
        fn remove_snapshots_above(&mut self, z: i64) -> Result<(), String> {
            self.did(format!("snapshots {z}"))
        }
        fn mark_fuzzy(&mut self, z: i64) -> Result<(), String> {
            self.did(format!("fuzzy {z}"))
        }
        fn write_snapshot(&mut self, z: i64, tree: &&'static str) -> Result<(), String> {
            self.did(format!("write {z} {tree}"))
        }
        fn clear_log(&mut self) -> Result<(), String> {
            self.did("clear".into())
        }
    }

    #[test]
    fn the_snapshot_is_durable_before_the_log_goes() {
        let mut d = Steps::default();
        install(&mut d, 7, &"t").unwrap();
        assert_eq!(
            d.0,
            ["cut 7", "snapshots 7", "fuzzy 7", "write 7 t", "clear"]
        );
        let mut d = Steps(Vec::new(), Some(3), false, false);
        assert_eq!(install(&mut d, 7, &"t").unwrap_err(), "failed at write 7 t");
        assert_eq!(d.0.len(), 3, "nothing after a failed step");
    }

    #[test]
    fn a_snapshot_past_the_snap_goes_only_under_the_lost_disk_marker() {
        let mut d = Steps(Vec::new(), None, true, false);
        install(&mut d, 7, &"t").unwrap();
        assert_eq!(
            d.0,
            [
                "cut 7",
                "mark lost",
                "snapshots 7",
                "fuzzy 7",
                "write 7 t",
                "clear lost",
                "clear"
            ]
        );
        assert!(!d.3, "the SNAP's snapshot holds what the member acked");
        // A crash before the SNAP's snapshot is durable leaves the marker.
        let mut d = Steps(Vec::new(), Some(4), true, false);
        install(&mut d, 7, &"t").unwrap_err();
        assert!(d.3);
        // A member that had lost its disk keeps its marker: only an
        // established leader's sync removes it.
        let mut d = Steps(Vec::new(), None, true, true);
        install(&mut d, 7, &"t").unwrap();
        assert_eq!(
            d.0,
            ["cut 7", "snapshots 7", "fuzzy 7", "write 7 t", "clear"]
        );
        assert!(d.3);
    }
}
