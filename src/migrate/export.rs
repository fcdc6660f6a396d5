//! `ringkeeper export`: a ringkeeper dataDir (stopped) as an Apache
//! ZooKeeper dataDir: `version-2/snapshot.<zxid>` in ZooKeeper 3.8's
//! format with the tree's digest (which ZooKeeper checks as it loads),
//! the epoch files and myid: the rollback path.

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Instant;

use super::{out_dir::OutDir, read_epoch, zk_snapshot, MigrateError, ZK_VERSION_DIR};
use crate::consensus::epoch_files;
use crate::snapshot::SessionEntry;
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
    let sessions: Vec<SessionEntry> = recovered
        .sessions
        .iter()
        .map(|(&id, &timeout_ms)| SessionEntry { id, timeout_ms })
        .collect();
    let tree = &recovered.tree;
    let snapshot =
        zk_snapshot::write(&version_dir, tree, &sessions).map_err(|e| io_err(&version_dir, e))?;
    let mut report = ExportReport {
        last_zxid: tree.last_zxid(),
        znodes: tree.znode_count(),
        sessions: sessions.len(),
        ..ExportReport::default()
    };
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
    report.out = committed;
    report.elapsed_ms = started.elapsed().as_millis();
    Ok(report)
}
