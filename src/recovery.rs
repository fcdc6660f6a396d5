//! Startup: the newest valid snapshot, then every logged txn after it.
//! A torn tail is cut; corruption refuses to start (see log::recovery).

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Instant;

use crate::log::{recovery, txn_codec};
use crate::snapshot;
use crate::tree::{Tree, TxnOp};

pub struct Recovered {
    pub tree: Tree,
    /// Live sessions: id -> timeout.
    pub sessions: BTreeMap<i64, i32>,
    pub txns_replayed: u64,
}

pub fn recover(data_dir: &Path, log_dir: &Path) -> Result<Recovered, String> {
    let started = Instant::now();
    for dir in [data_dir, log_dir] {
        std::fs::create_dir_all(dir).map_err(|e| format!("data dir {}: {e}", dir.display()))?;
        std::fs::read_dir(dir)
            .map_err(|e| format!("data dir {} unreadable: {e}", dir.display()))?;
    }
    let (mut tree, mut sessions) = match snapshot::load_newest(data_dir)
        .map_err(|e| format!("reading snapshots in {}: {e}", data_dir.display()))?
    {
        Some(l) => (
            l.tree,
            l.sessions.iter().map(|s| (s.id, s.timeout_ms)).collect(),
        ),
        None => (Tree::new(), BTreeMap::new()),
    };
    let segments = recovery::list_segments(log_dir)
        .map_err(|e| format!("listing {}: {e}", log_dir.display()))?;
    let after = tree.last_zxid();
    let mut replayed = 0u64;
    let end = recovery::scan(&segments, after, |found| {
        let txn = txn_codec::decode(&found.payload).map_err(|e| format!("undecodable txn: {e}"))?;
        if txn.zxid != found.header.zxid {
            return Err("record and txn disagree on the zxid".into());
        }
        if txn.zxid != tree.last_zxid() + 1 {
            return Err(format!(
                "txn {:#x} does not follow {:#x}: txns are missing",
                txn.zxid,
                tree.last_zxid()
            ));
        }
        match &txn.op {
            TxnOp::CreateSession { timeout_ms } => {
                sessions.insert(txn.session_id, *timeout_ms);
            }
            TxnOp::CloseSession { .. } => {
                sessions.remove(&txn.session_id);
            }
            _ => {}
        }
        tree.apply(&txn);
        replayed += 1;
        Ok(())
    })
    .map_err(|c| c.to_string())?;
    if let recovery::ScanEnd::Torn {
        segment,
        offset,
        reason,
    } = &end
    {
        tracing::warn!(
            segment = %segments[*segment].path.display(),
            offset,
            reason = %reason,
            "cutting a torn tail off the txn log (never acknowledged)"
        );
        recovery::truncate(log_dir, &segments, *segment, *offset)
            .map_err(|e| format!("truncating the torn tail: {e}"))?;
    }
    tracing::info!(
        zxid = format_args!("{:#x}", tree.last_zxid()),
        replayed,
        sessions = sessions.len(),
        ms = started.elapsed().as_millis() as u64,
        "recovered"
    );
    Ok(Recovered {
        tree,
        sessions,
        txns_replayed: replayed,
    })
}
