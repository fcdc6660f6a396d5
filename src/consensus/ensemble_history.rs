//! The log as ZAB's leader syncs followers from it: every logged txn, in
//! Apache ZooKeeper's txn encoding (what a PROPOSAL carries).
//!
//! The whole log is read at startup and kept in memory by
//! `zab::ensemble::Node` (about the log's size again). That is what a
//! DIFF from any point needs until snapshot transfer (SNAP) exists; it is
//! also why purging the log is refused in an ensemble for now.

use std::path::Path;

use crate::log::{range, txn_codec};
use crate::peer::zk_txn;
use crate::zab::ensemble::Txn;

pub fn read(log_dir: &Path) -> Result<Vec<Txn>, String> {
    let records = range::read_range(log_dir, i64::MIN, i64::MAX)?;
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

/// Where the history starts: after the newest snapshot when the log holds
/// nothing at or before it (a follower synced by SNAP cleared its log),
/// else at the beginning (0).
pub fn base(data_dir: &Path, history: &[Txn]) -> Result<i64, String> {
    let newest = crate::snapshot::list(data_dir)
        .map_err(|e| format!("{}: {e}", data_dir.display()))?
        .into_iter()
        .map(|(z, _)| z)
        .max()
        .unwrap_or(0);
    Ok(match history.first() {
        Some(t) if t.zxid <= newest => 0,
        _ => newest,
    })
}
