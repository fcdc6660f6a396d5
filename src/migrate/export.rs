//! `ringkeeper export`: a ringkeeper dataDir (stopped) as an Apache
//! ZooKeeper dataDir: `version-2/snapshot.<zxid>` in ZooKeeper 3.8's
//! format with the tree's digest (which ZooKeeper checks as it loads) of
//! the newest snapshot's tree, `version-2/log.<zxid>` with the txns the
//! log holds after it, the epoch files and myid: the rollback path.
//!
//! The txns after the snapshot stay a log, not folded into the snapshot,
//! so that ZooKeeper can cut them when its leader says so: a member that
//! led last may hold a txn nobody else has (logged, never committed), and
//! a ZooKeeper told to TRUNC below its snapshot exits ("No log files found
//! to truncate") at every start.

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Instant;

use super::{out_dir::OutDir, read_epoch, zk_log, zk_snapshot, MigrateError, ZK_VERSION_DIR};
use crate::consensus::epoch_files;
use crate::log::{recovery, txn_codec};
use crate::snapshot::SessionEntry;
use crate::tree::Tree;
use crate::zab::zxid;

/// The timeout given to a session that owns ephemerals but is missing
/// from ringkeeper's session list (ZooKeeper's default maxSessionTimeout).
const ORPHAN_TIMEOUT_MS: i32 = 40_000;

pub struct ExportOptions {
    pub data_dir: PathBuf,
    pub data_log_dir: Option<PathBuf>,
    pub out: PathBuf,
}

#[derive(Debug, Default)]
pub struct ExportReport {
    pub out: PathBuf,
    pub snapshot: PathBuf,
    /// The txn log after the snapshot, and how many txns it holds.
    pub log: Option<(PathBuf, usize)>,
    pub last_zxid: i64,
    pub znodes: usize,
    pub sessions: usize,
    pub epochs: Option<(u32, u32)>,
    pub myid: bool,
    pub elapsed_ms: u128,
}

impl fmt::Display for ExportReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "snapshot: {}", self.snapshot.display())?;
        if let Some((log, txns)) = &self.log {
            writeln!(
                f,
                "txn log: {} ({txns} txns after the snapshot)",
                log.display()
            )?;
        }
        writeln!(f, "last zxid: {}", zxid::hex(self.last_zxid))?;
        writeln!(f, "znodes: {}, sessions: {}", self.znodes, self.sessions)?;
        match self.epochs {
            Some((a, c)) => writeln!(f, "acceptedEpoch {a}, currentEpoch {c}: carried over")?,
            None => writeln!(f, "epoch files: none (standalone)")?,
        }
        if self.myid {
            writeln!(f, "myid: carried over")?;
        }
        writeln!(
            f,
            "written: {} in {} ms",
            self.out.display(),
            self.elapsed_ms
        )
    }
}

pub fn export(o: &ExportOptions) -> Result<ExportReport, MigrateError> {
    let started = Instant::now();
    let data_dir = &o.data_dir;
    let log_dir = o.data_log_dir.as_deref().unwrap_or(data_dir);
    if !data_dir.is_dir() {
        return Err(MigrateError::file(data_dir, "no such directory"));
    }
    // A running server holds these locks: its files are still changing.
    let mut _locks = vec![
        crate::startup::dirs::lock(data_dir, "dataDir").map_err(|e| {
            MigrateError::file(data_dir, format!("{}: stop the server first", e.message))
        })?,
    ];
    if log_dir != data_dir {
        _locks.push(
            crate::startup::dirs::lock(log_dir, "dataLogDir").map_err(|e| {
                MigrateError::file(log_dir, format!("{}: stop the server first", e.message))
            })?,
        );
    }
    crate::startup::foreign::check_dirs(data_dir, log_dir)
        .map_err(|e| MigrateError::file(data_dir, e.message))?;
    let recovered = crate::recovery::recover(data_dir, log_dir, ORPHAN_TIMEOUT_MS)
        .map_err(|e| MigrateError::file(data_dir, e.to_string()))?;
    let out = OutDir::create(&o.out).map_err(|m| MigrateError::file(&o.out, m))?;
    let io_err = |p: &Path, e: std::io::Error| MigrateError::file(p, e.to_string());
    let version_dir = out.path().join(ZK_VERSION_DIR);
    std::fs::create_dir(&version_dir).map_err(|e| io_err(&version_dir, e))?;
    // The newest snapshot recovery read (recovery above cut any torn
    // tail) and the log's txns after it, as ZooKeeper keeps them.
    let (base, base_sessions) =
        match crate::snapshot::load_newest(data_dir).map_err(|e| io_err(data_dir, e))? {
            Some(l) => (l.tree, l.sessions),
            None => (Tree::new(), Vec::new()),
        };
    let tail = txns_after(log_dir, base.last_zxid())?;
    // The snapshot's sessions, and those recovery gave ephemerals that
    // had none (they expire in ZooKeeper as here); the log's
    // createSession and closeSession txns do the rest when it replays.
    let mut sessions = base_sessions;
    for (&id, &timeout_ms) in &recovered.sessions {
        if !sessions.iter().any(|s| s.id == id) {
            sessions.push(SessionEntry { id, timeout_ms });
        }
    }
    let snapshot =
        zk_snapshot::write(&version_dir, &base, &sessions).map_err(|e| io_err(&version_dir, e))?;
    let tree = &recovered.tree;
    let mut report = ExportReport {
        last_zxid: tree.last_zxid(),
        znodes: tree.znode_count(),
        sessions: recovered.sessions.len(),
        ..ExportReport::default()
    };
    if let Some(first) = tail.first() {
        let mut entries = Vec::with_capacity(tail.len());
        for txn in &tail {
            let mut e = Vec::new();
            crate::peer::zk_txn::encode(txn, &mut e)
                .map_err(|e| MigrateError::file(log_dir, format!("txn {:#x}: {e}", txn.zxid)))?;
            entries.push(e);
        }
        let path = version_dir.join(format!("{}.{:x}", zk_log::PREFIX, first.zxid));
        std::fs::write(&path, zk_log::log_file(&entries)).map_err(|e| io_err(&path, e))?;
        std::fs::File::open(&path)
            .and_then(|f| f.sync_all())
            .map_err(|e| io_err(&path, e))?;
        report.log = Some((path, tail.len()));
    }
    let accepted = read_epoch(data_dir, epoch_files::ACCEPTED_EPOCH)?;
    let current = read_epoch(data_dir, epoch_files::CURRENT_EPOCH)?;
    for (name, epoch) in [
        (epoch_files::ACCEPTED_EPOCH, accepted),
        (epoch_files::CURRENT_EPOCH, current),
    ] {
        if let Some(e) = epoch {
            epoch_files::write(&version_dir, name, e).map_err(|e| io_err(&version_dir, e))?;
        }
    }
    if let (Some(a), Some(c)) = (accepted, current) {
        report.epochs = Some((a, c));
    }
    let myid = data_dir.join(epoch_files::MYID);
    if myid.exists() {
        std::fs::copy(&myid, out.path().join(epoch_files::MYID)).map_err(|e| io_err(&myid, e))?;
        report.myid = true;
    }
    let committed = out.commit().map_err(|e| io_err(&o.out, e))?;
    report.snapshot = committed
        .join(ZK_VERSION_DIR)
        .join(snapshot.file_name().unwrap_or_default());
    if let Some((log, _)) = report.log.as_mut() {
        *log = committed
            .join(ZK_VERSION_DIR)
            .join(log.file_name().unwrap_or_default());
    }
    report.out = committed;
    report.elapsed_ms = started.elapsed().as_millis();
    Ok(report)
}

/// The txns the log in `log_dir` holds after `zxid`, in order (recovery
/// has already cut a torn tail and checked the rest).
fn txns_after(log_dir: &Path, zxid: i64) -> Result<Vec<crate::tree::Txn>, MigrateError> {
    let segments =
        recovery::list_segments(log_dir).map_err(|e| MigrateError::file(log_dir, e.to_string()))?;
    let mut txns = Vec::new();
    recovery::scan(&segments, zxid, |found| {
        let txn = txn_codec::decode(found.payload).map_err(|e| format!("undecodable txn: {e}"))?;
        txns.push(txn);
        Ok(())
    })
    .map_err(|e| MigrateError::file(log_dir, e.to_string()))?;
    Ok(txns)
}
