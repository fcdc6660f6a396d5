//! The log as ZAB's leader syncs followers from it: the logged txns after
//! the newest snapshot, in Apache ZooKeeper's txn encoding (what a
//! PROPOSAL carries).
//!
//! Read at startup and kept in memory by `zab::ensemble::Node` (about the
//! log's size again, growing while the server runs). A follower behind the
//! newest snapshot gets a SNAP, as from ZooKeeper when its txn log does not
//! reach back far enough. Autopurge works as in a standalone server: it
//! keeps the retained snapshots and the log after the oldest of them.

use std::path::Path;

use crate::log::{range, txn_codec};
use crate::peer::zk_txn;
use crate::zab::ensemble::Txn;

/// The zxid of the newest snapshot in `data_dir` (0: none).
pub fn newest_snapshot(data_dir: &Path) -> Result<i64, String> {
    Ok(crate::snapshot::list(data_dir)
        .map_err(|e| format!("{}: {e}", data_dir.display()))?
        .into_iter()
        .map(|(z, _)| z)
        .max()
        .unwrap_or(0))
}

/// The logged txns after `after` (reading only the segments that hold
/// them).
pub fn read(log_dir: &Path, after: i64) -> Result<Vec<Txn>, String> {
    let records = range::read_range(log_dir, after, i64::MAX)?;
    let mut history = Vec::with_capacity(records.len());
    for r in records {
        let zxid = r.header.zxid;
        let txn = txn_codec::decode(&r.payload)
            .map_err(|e| format!("{}: txn {zxid:#x}: {e}", log_dir.display()))?;
        let mut data = Vec::new();
        zk_txn::encode(&txn, &mut data)
            .map_err(|e| format!("{}: txn {zxid:#x}: {e}", log_dir.display()))?;
        history.push(Txn { zxid, data });
    }
    Ok(history)
}
