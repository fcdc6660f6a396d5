//! `ringkeeper import`: an Apache ZooKeeper dataDir (3.4-3.9) into a
//! ringkeeper dataDir, as ZooKeeper's own FileTxnSnapLog.restore would
//! load it: the newest snapshot that reads back whole (an older one when
//! the newest is damaged, as FileSnap.deserialize falls back), then every
//! txn after it from the logs, applied leniently (ZooKeeper snapshots are
//! fuzzy: some of those txns are in them already), sessions created and
//! closed on the way, and ZooKeeper's own digests checked where it wrote
//! them: the tree built here must be the one ZooKeeper had.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Instant;

use super::digest::{tree_digest, DIGEST_VERSION};
use super::zk_snapshot::{self, ZxidDigest};
use super::{out_dir::OutDir, read_epoch, zk_log, MigrateError, ZK_VERSION_DIR};
use crate::consensus::epoch_files;
use crate::peer::zk_txn::ZkTxnError;
use crate::snapshot::SessionEntry;
use crate::tree::{Tree, Txn, TxnOp};
use crate::zab::zxid;

pub struct ImportOptions {
    pub zookeeper_data_dir: PathBuf,
    pub zookeeper_data_log_dir: Option<PathBuf>,
    pub out: PathBuf,
    /// Stop when the tree differs from a digest ZooKeeper wrote.
    pub check_digests: bool,
}

#[derive(Debug, Default)]
pub struct ImportReport {
    pub out: PathBuf,
    pub snapshot: Option<PathBuf>,
    pub snapshot_zxid: i64,
    /// Newer snapshots that did not read back, and why.
    pub damaged_snapshots: Vec<String>,
    pub logs: Vec<PathBuf>,
    pub txns_applied: u64,
    /// Ops already in the fuzzy snapshot, skipped as ZooKeeper skips them.
    pub ops_skipped: usize,
    pub last_zxid: i64,
    pub znodes: usize,
    pub sessions: usize,
    pub ephemerals: usize,
    pub digests_checked: u32,
    /// Digests that did not match where ZooKeeper only counts a mismatch.
    pub digest_warnings: Vec<String>,
    pub epochs: Option<(u32, u32)>,
    pub myid: bool,
    pub elapsed_ms: u128,
}

impl fmt::Display for ImportReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for d in &self.damaged_snapshots {
            writeln!(f, "skipped damaged snapshot: {d}")?;
        }
        match &self.snapshot {
            Some(s) => writeln!(
                f,
                "snapshot: {} (zxid {})",
                s.display(),
                zxid::hex(self.snapshot_zxid)
            )?,
            None => writeln!(f, "snapshot: none (an empty ZooKeeper)")?,
        }
        for l in &self.logs {
            writeln!(f, "log: {}", l.display())?;
        }
        writeln!(
            f,
            "txns applied: {} ({} ops already in the fuzzy snapshot, skipped)",
            self.txns_applied, self.ops_skipped
        )?;
        writeln!(f, "last zxid: {}", zxid::hex(self.last_zxid))?;
        writeln!(
            f,
            "znodes: {}, sessions: {}, ephemerals: {}",
            self.znodes, self.sessions, self.ephemerals
        )?;
        writeln!(f, "ZooKeeper digests checked: {}", self.digests_checked)?;
        for w in &self.digest_warnings {
            writeln!(f, "warning: {w}")?;
        }
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

/// Where the replay stands against the digests ZooKeeper wrote.
struct Digests {
    check: bool,
    /// The snapshot's digest, until the replay reaches its zxid (before
    /// that the tree is fuzzy and no digest can match).
    pending: Option<ZxidDigest>,
    /// Whether the tree is known not to be fuzzy (the snapshot's digest
    /// was reached, or it had an empty one).
    settled: bool,
    /// The digest written with the last txn applied.
    last_txn: Option<(i64, i32, i64)>,
    checked: u32,
    warnings: Vec<String>,
}

impl Digests {
    /// The snapshot's own digest, met where the replay leaves the fuzzy
    /// range: ZooKeeper counts a mismatch there (digest_mismatches_count)
    /// and goes on, and so does this, saying so; the digest of the last
    /// txn, checked at the end, decides.
    fn compare_fuzzy_end(&mut self, tree: &Tree, d: ZxidDigest, file: &Path) {
        self.checked += 1;
        let ours = tree_digest(tree);
        if ours != d.digest {
            self.warnings.push(format!(
                "{}: at zxid {}, where the snapshot stops being fuzzy, ZooKeeper's digest is {}                  and this tree's {ours} (ZooKeeper counts this in digest_mismatches_count and                  goes on; the last txn's digest is checked at the end)",
                file.display(),
                zxid::hex(d.zxid),
                d.digest
            ));
        }
    }

    fn compare(
        &mut self,
        tree: &Tree,
        zxid: i64,
        digest: i64,
        file: &Path,
        offset: Option<u64>,
    ) -> Result<(), MigrateError> {
        self.checked += 1;
        let ours = tree_digest(tree);
        if self.check && ours != digest {
            return Err(MigrateError {
                file: file.to_path_buf(),
                offset,
                message: format!(
                    "the tree rebuilt here differs from ZooKeeper's at zxid {}: ZooKeeper's \
                     digest {digest}, this tree's {ours} (run with --no-digest-check to \
                     import it anyway)",
                    zxid::hex(zxid)
                ),
            });
        }
        Ok(())
    }
}

/// A log entry as a txn, its closeSession with every ephemeral the
/// session holds (DataTree.killSession deletes the txn's paths and the
/// session's own), and its digest.
fn decode_entry(entry: &[u8], tree: &Tree) -> Result<(Txn, Option<(i32, i64)>), ZkTxnError> {
    let (mut txn, digest) = zk_log::decode_txn(entry)?;
    if let TxnOp::CloseSession { ephemerals } = &mut txn.op {
        for p in tree.ephemerals_of(txn.session_id) {
            if !ephemerals.contains(&p) {
                ephemerals.push(p);
            }
        }
    }
    Ok((txn, digest))
}

pub fn import(o: &ImportOptions) -> Result<ImportReport, MigrateError> {
    let started = Instant::now();
    let snap_dir = o.zookeeper_data_dir.join(ZK_VERSION_DIR);
    let log_dir = o
        .zookeeper_data_log_dir
        .as_deref()
        .unwrap_or(&o.zookeeper_data_dir)
        .join(ZK_VERSION_DIR);
    if !snap_dir.is_dir() {
        return Err(MigrateError::file(
            &o.zookeeper_data_dir,
            "no version-2 directory: not an Apache ZooKeeper dataDir",
        ));
    }
    let out = OutDir::create(&o.out).map_err(|m| MigrateError::file(&o.out, m))?;
    let io_err = |p: &Path, e: std::io::Error| MigrateError::file(p, e.to_string());
    let mut report = ImportReport::default();

    let mut loaded = None;
    for (_, path) in zk_snapshot::list(&snap_dir).map_err(|e| io_err(&snap_dir, e))? {
        match zk_snapshot::read(&path) {
            Ok(s) => {
                loaded = Some(s);
                break;
            }
            Err(e) => report.damaged_snapshots.push(e.to_string()),
        }
    }
    let all_logs = zk_log::list(&log_dir).map_err(|e| io_err(&log_dir, e))?;
    let mut unresolved_acls = Vec::new();
    let (mut tree, mut sessions, snap_zxid, snap_digest) = match loaded {
        Some(s) => {
            report.snapshot = Some(s.path.clone());
            unresolved_acls = s.unresolved_acls;
            let sessions: BTreeMap<i64, i32> =
                s.sessions.iter().map(|e| (e.id, e.timeout_ms)).collect();
            (s.tree, sessions, s.zxid, s.digest)
        }
        None if !report.damaged_snapshots.is_empty() => {
            return Err(MigrateError::file(
                &snap_dir,
                format!(
                    "no snapshot reads back whole: {}",
                    report.damaged_snapshots.join("; ")
                ),
            ))
        }
        None if !all_logs.is_empty() => {
            return Err(MigrateError::file(
                &snap_dir,
                "no snapshot, but there are txn logs: ZooKeeper refuses to start from \
                 this too (ZOOKEEPER-3056); a dataDir always has a snapshot",
            ))
        }
        None => (Tree::new(), BTreeMap::new(), 0, None),
    };
    report.snapshot_zxid = snap_zxid;
    let mut digests = Digests {
        check: o.check_digests,
        pending: None,
        settled: false,
        last_txn: None,
        checked: 0,
        warnings: Vec::new(),
    };
    match snap_digest {
        Some(d) if d.version != DIGEST_VERSION => {}
        // ZooKeeper's "empty digest", or one older than the snapshot's
        // start (a new leader's snapshot): not fuzzy.
        Some(d) if d.zxid == 0 || d.zxid < snap_zxid => digests.settled = true,
        Some(d) if d.zxid == snap_zxid => {
            let path = report.snapshot.clone().unwrap_or_default();
            digests.compare_fuzzy_end(&tree, d, &path);
            digests.settled = true;
        }
        Some(d) => digests.pending = Some(d),
        None => {}
    }

    for (_, path) in zk_log::after_snapshot(&all_logs, snap_zxid) {
        let bytes = std::fs::read(&path).map_err(|e| io_err(&path, e))?;
        let mut used = false;
        zk_log::records(&path, &bytes, |r| {
            let at = |m: String| MigrateError::at(&path, r.offset, m);
            let (txn, digest) = decode_entry(r.entry, &tree).map_err(|e| at(e.to_string()))?;
            if txn.zxid <= tree.last_zxid() {
                return Ok(()); // in the snapshot, or an older log's
            }
            used = true;
            if !zxid::follows(tree.last_zxid(), txn.zxid) && tree.last_zxid() != 0 {
                return Err(at(format!(
                    "txn {} does not follow {}: the txns between are missing from the logs",
                    zxid::hex(txn.zxid),
                    zxid::hex(tree.last_zxid())
                )));
            }
            crate::recovery::track_session(&mut sessions, &txn);
            let (_, skipped) = tree.apply_lenient(&txn);
            report.ops_skipped += skipped;
            report.txns_applied += 1;
            digests.last_txn = digest.map(|(v, d)| (txn.zxid, v, d));
            if let Some(p) = digests.pending {
                if txn.zxid >= p.zxid {
                    digests.pending = None;
                    if txn.zxid == p.zxid {
                        digests.compare_fuzzy_end(&tree, p, &path);
                    }
                    digests.settled = true;
                }
            }
            Ok(())
        })?;
        if used {
            report.logs.push(path);
        }
    }
    if digests.settled {
        if let Some((z, v, d)) = digests.last_txn {
            if v == DIGEST_VERSION && z == tree.last_zxid() {
                let last_log = report.logs.last().cloned().unwrap_or_default();
                digests.compare(&tree, z, d, &last_log, None)?;
            }
        }
    }
    // A node the fuzzy snapshot left naming an ACL list its cache lacked
    // must have had it set by a replayed setACL (or be gone).
    for (path, number) in &unresolved_acls {
        if tree.get(path).is_some_and(|n| n.acl.is_empty()) {
            return Err(MigrateError::file(
                report.snapshot.as_deref().unwrap_or(&snap_dir),
                format!(
                    "{path} names ACL list {number}, which the snapshot's ACL cache does not \
                     hold, and no txn after the snapshot sets its ACL"
                ),
            ));
        }
    }
    report.digests_checked = digests.checked;
    report.digest_warnings = std::mem::take(&mut digests.warnings);

    let accepted = read_epoch(&snap_dir, epoch_files::ACCEPTED_EPOCH)?;
    let current = read_epoch(&snap_dir, epoch_files::CURRENT_EPOCH)?;
    let write_epoch = |name: &str, epoch: u32| {
        epoch_files::write(out.path(), name, epoch).map_err(|e| io_err(&out.path().join(name), e))
    };
    if let (Some(a), Some(c)) = (accepted, current) {
        write_epoch(epoch_files::ACCEPTED_EPOCH, a)?;
        write_epoch(epoch_files::CURRENT_EPOCH, c)?;
        report.epochs = Some((a, c));
    } else if let Some(c) = current {
        write_epoch(epoch_files::CURRENT_EPOCH, c)?;
    }
    let myid = o.zookeeper_data_dir.join(epoch_files::MYID);
    if myid.exists() {
        std::fs::copy(&myid, out.path().join(epoch_files::MYID)).map_err(|e| io_err(&myid, e))?;
        report.myid = true;
    }
    let entries: Vec<SessionEntry> = sessions
        .iter()
        .map(|(&id, &timeout_ms)| SessionEntry { id, timeout_ms })
        .collect();
    crate::snapshot::write(out.path(), &tree, &entries, 0).map_err(|e| io_err(out.path(), e))?;
    report.last_zxid = tree.last_zxid();
    report.znodes = tree.znode_count();
    report.sessions = entries.len();
    report.ephemerals = tree.ephemeral_count();
    report.out = out.commit().map_err(|e| io_err(&o.out, e))?;
    report.elapsed_ms = started.elapsed().as_millis();
    Ok(report)
}
