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
//!    checks that it holds no committed txn past this SNAP's zxid);
//! 3. the snapshot-to-be is marked fuzzy (the txns after it replay
//!    leniently, as ZooKeeper replays after a fuzzy snapshot);
//! 4. the leader's tree is written as a durable snapshot: from here the
//!    member recovers to the SNAP's zxid whatever the log holds below it;
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
    fn remove_snapshots_above(&mut self, zxid: i64) -> Result<(), String>;
    fn mark_fuzzy(&mut self, zxid: i64) -> Result<(), String>;
    fn write_snapshot(&mut self, zxid: i64, tree: &Self::Tree) -> Result<(), String>;
    fn clear_log(&mut self) -> Result<(), String>;
}

/// Installs `tree`, the leader's state as of `zxid`, on `disk`, stopping at
/// the first step that fails.
pub fn install<D: SnapDisk>(disk: &mut D, zxid: i64, tree: &D::Tree) -> Result<(), String> {
    disk.cut_log_above(zxid)?;
    disk.remove_snapshots_above(zxid)?;
    disk.mark_fuzzy(zxid)?;
    disk.write_snapshot(zxid, tree)?;
    disk.clear_log()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Default)]
    struct Steps(Vec<String>, Option<usize>);

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
        let mut d = Steps(Vec::new(), Some(3));
        assert_eq!(install(&mut d, 7, &"t").unwrap_err(), "failed at write 7 t");
        assert_eq!(d.0.len(), 3, "nothing after a failed step");
    }
}
