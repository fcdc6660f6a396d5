//! Startup: the newest valid snapshot, then every logged txn after it.
//! A torn tail is cut; corruption is an error (see log::recovery): a
//! standalone server refuses to start, an ensemble member sets the damaged
//! files aside and resyncs from the leader (startup::damaged).

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Instant;

use crate::log::{recovery, txn_codec};
use crate::snapshot;
use crate::tree::{Tree, Txn, TxnOp};

/// Names the snapshot (by its zxid, hex) that a follower took from a
/// leader's SNAP: fuzzy, so the txns after it replay leniently.
pub const FUZZY_SNAPSHOT_MARKER: &str = "fuzzy_snapshot";

/// Records, durably, that the snapshot at `zxid` is a leader's fuzzy one.
pub fn mark_fuzzy_snapshot(data_dir: &Path, zxid: i64) -> std::io::Result<()> {
    let path = data_dir.join(FUZZY_SNAPSHOT_MARKER);
    let tmp = data_dir.join(format!("{FUZZY_SNAPSHOT_MARKER}.tmp"));
    std::fs::write(&tmp, format!("{zxid:x}\n"))?;
    std::fs::File::open(&tmp)?.sync_all()?;
    std::fs::rename(&tmp, &path)?;
    std::fs::File::open(data_dir)?.sync_all()
}

fn is_fuzzy_snapshot(data_dir: &Path, zxid: i64) -> bool {
    std::fs::read_to_string(data_dir.join(FUZZY_SNAPSHOT_MARKER))
        .ok()
        .and_then(|s| i64::from_str_radix(s.trim(), 16).ok())
        == Some(zxid)
}

pub struct Recovered {
    pub tree: Tree,
    /// Live sessions: id -> timeout.
    pub sessions: BTreeMap<i64, i32>,
    pub txns_replayed: u64,
}

/// Snapshot files left half-written by a crash.
fn remove_temp_snapshots(data_dir: &Path) {
    let Ok(entries) = std::fs::read_dir(data_dir) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let name = name.to_string_lossy();
        if name.starts_with(snapshot::PREFIX) && name.ends_with(".tmp") {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

/// The live sessions (id -> timeout) after `txn`: a createSession adds its
/// session, a closeSession removes it (as FileTxnSnapLog.processTransaction
/// keeps them while it replays).
pub fn track_session(sessions: &mut BTreeMap<i64, i32>, txn: &Txn) {
    match &txn.op {
        TxnOp::CreateSession { timeout_ms } => {
            sessions.insert(txn.session_id, *timeout_ms);
        }
        TxnOp::CloseSession { .. } => {
            sessions.remove(&txn.session_id);
        }
        _ => {}
    }
}

/// Applies one logged txn to the state being recovered, as a replay of the
/// log does: the txn must follow the tree's last one; `lenient` over a
/// leader's fuzzy snapshot.
pub fn replay(
    tree: &mut Tree,
    sessions: &mut BTreeMap<i64, i32>,
    txn: &Txn,
    lenient: bool,
) -> Result<(), String> {
    if !crate::zab::zxid::follows(tree.last_zxid(), txn.zxid) {
        return Err(format!(
            "txn {:#x} does not follow {:#x}: txns are missing",
            txn.zxid,
            tree.last_zxid()
        ));
    }
    track_session(sessions, txn);
    if lenient {
        tree.apply_lenient(txn);
    } else {
        tree.apply(txn);
    }
    Ok(())
}

/// Why recovery stopped.
#[derive(Debug)]
pub enum RecoverError {
    /// The log is damaged beyond a torn tail: a corrupt record, a txn that
    /// does not decode or apply, txns missing. The data is wrong, not the
    /// machine: an ensemble member can set it aside and resync.
    Damaged(String),
    /// Anything else (directories that cannot be read or written, I/O
    /// errors, files that are not ours): nothing to resync from.
    Failed(String),
}

impl std::fmt::Display for RecoverError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RecoverError::Damaged(m) | RecoverError::Failed(m) => f.write_str(m),
        }
    }
}

impl From<RecoverError> for String {
    fn from(e: RecoverError) -> String {
        e.to_string()
    }
}

/// The newest snapshot (`newest`, at `path`) did not read back and the
/// tree was rebuilt from an older one (`loaded`) and the log: that is only
/// whole when the log's first txn after the loaded snapshot directly
/// follows it in its epoch (or is the very first txn) and the log goes on
/// past the damaged one. Otherwise txns are missing in between (an ensemble
/// member clears its log at a SNAP install), which is damage, never a
/// silent gap (issue 26, defect 8).
fn check_covers_skipped(
    loaded: i64,
    first_replayed: Option<i64>,
    end: i64,
    newest: i64,
    path: &Path,
) -> Result<(), RecoverError> {
    let reaches_back = match first_replayed {
        // Across an epoch boundary a gap cannot be told from none: taken
        // as damage (an ensemble member resyncs; rare: the newer snapshot
        // must also be damaged).
        Some(first) => {
            first == loaded + 1 || (loaded == 0 && crate::zab::zxid::counter(first) == 1)
        }
        None => false,
    };
    if reaches_back && end >= newest {
        tracing::warn!(
            snapshot = %path.display(),
            "the newest snapshot is damaged; the older one and the log cover it"
        );
        return Ok(());
    }
    Err(RecoverError::Damaged(format!(
        "snapshot {} is damaged, and the log does not cover it from the snapshot before it \
         ({:#x}: the log replayed {} through {end:#x})",
        path.display(),
        loaded,
        first_replayed.map_or("nothing".to_string(), |z| format!("from {z:#x}")),
    )))
}

/// `orphan_timeout_ms`: the timeout given to a session that owns
/// ephemerals but is missing from the snapshot's session list.
pub fn recover(
    data_dir: &Path,
    log_dir: &Path,
    orphan_timeout_ms: i32,
) -> Result<Recovered, RecoverError> {
    use RecoverError::Failed;
    let started = Instant::now();
    for dir in [data_dir, log_dir] {
        std::fs::create_dir_all(dir)
            .map_err(|e| Failed(format!("data dir {}: {e}", dir.display())))?;
        std::fs::read_dir(dir)
            .map_err(|e| Failed(format!("data dir {} unreadable: {e}", dir.display())))?;
    }
    let (mut tree, mut sessions) = match snapshot::load_newest(data_dir)
        .map_err(|e| Failed(format!("reading snapshots in {}: {e}", data_dir.display())))?
    {
        Some(l) => (
            l.tree,
            l.sessions.iter().map(|s| (s.id, s.timeout_ms)).collect(),
        ),
        None => (Tree::new(), BTreeMap::new()),
    };
    let segments = recovery::list_segments(log_dir)
        .map_err(|e| Failed(format!("listing {}: {e}", log_dir.display())))?;
    let after = tree.last_zxid();
    // A newer snapshot that did not read back (load_newest skipped it):
    // the log must still hold every txn from the one loaded to it.
    let skipped = snapshot::list(data_dir)
        .map_err(|e| Failed(format!("listing snapshots in {}: {e}", data_dir.display())))?
        .into_iter()
        .find(|(z, _)| *z > after);
    let lenient = after > 0 && is_fuzzy_snapshot(data_dir, after);
    let mut replayed = 0u64;
    let mut first_replayed = None;
    let end = recovery::scan(&segments, after, |found| {
        first_replayed.get_or_insert(found.header.zxid);
        let txn = txn_codec::decode(found.payload).map_err(|e| format!("undecodable txn: {e}"))?;
        if txn.zxid != found.header.zxid {
            return Err("record and txn disagree on the zxid".into());
        }
        replay(&mut tree, &mut sessions, &txn, lenient)?;
        replayed += 1;
        Ok(())
    })
    .map_err(|c| match c {
        recovery::ScanError::Corrupt(c) => RecoverError::Damaged(c.to_string()),
        other => Failed(other.to_string()),
    })?;
    if let Some((newest, path)) = skipped {
        check_covers_skipped(after, first_replayed, tree.last_zxid(), newest, &path)?;
    }
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
            .map_err(|e| Failed(format!("truncating the torn tail: {e}")))?;
    }
    if let Some(removed) = recovery::remove_fresh_newest(&segments)
        .map_err(|e| Failed(format!("removing an empty headerless segment: {e}")))?
    {
        tracing::warn!(
            segment = %removed.display(),
            "removed the newest segment: a crash left it before its header (it held no record)"
        );
    }
    // What recovery kept must be durable before new records vouch for it
    // (their durable_zxid says so): the tail may be a batch whose sync
    // never completed before the crash.
    for seg in &segments {
        if seg.path.exists() {
            std::fs::File::open(&seg.path)
                .and_then(|f| f.sync_all())
                .map_err(|e| Failed(format!("syncing {}: {e}", seg.path.display())))?;
        }
    }
    std::fs::File::open(log_dir)
        .and_then(|f| f.sync_all())
        .map_err(|e| Failed(format!("syncing {}: {e}", log_dir.display())))?;
    remove_temp_snapshots(data_dir);
    // A snapshot lists the core's sessions, which can run ahead of its tree:
    // ephemerals whose session is missing get one, so they expire normally.
    for owner in tree.ephemeral_owners() {
        sessions.entry(owner).or_insert_with(|| {
            tracing::warn!(
                session = format_args!("{owner:#x}"),
                "ephemeral owner without a session: it will expire"
            );
            orphan_timeout_ms
        });
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::zab::zxid::make;

    #[test]
    fn a_damaged_newest_snapshot_needs_the_log_from_the_one_before() {
        let p = Path::new("snapshot.x");
        let ok = |loaded, first, end| check_covers_skipped(loaded, first, end, make(1, 9), p);
        // The log goes on from the older snapshot past the damaged one.
        assert!(ok(make(1, 4), Some(make(1, 5)), make(1, 12)).is_ok());
        // No older snapshot, the log from the very first txn.
        assert!(ok(0, Some(make(1, 1)), make(1, 9)).is_ok());
        // A SNAP install cleared the log before 1:9: it starts after it.
        let e = ok(make(1, 4), Some(make(2, 1)), make(2, 3)).unwrap_err();
        assert!(matches!(e, RecoverError::Damaged(_)), "{e}");
        assert!(e.to_string().contains("snapshot.x is damaged"), "{e}");
        // Txns missing in the middle of the epoch.
        assert!(ok(make(1, 4), Some(make(1, 7)), make(1, 12)).is_err());
        // The log stops before the damaged snapshot's zxid.
        assert!(ok(make(1, 4), Some(make(1, 5)), make(1, 8)).is_err());
        // Nothing to replay at all.
        assert!(ok(make(1, 4), None, make(1, 4)).is_err());
    }
}
