//! Recovery may only ever modify files it positively identifies as its own
//! (it cuts torn tails, removes later segments and half-written
//! snapshots). So before it runs, everything in the data and log
//! directories that looks like a log or a snapshot must be ringkeeper's;
//! anything else stops startup with its name. Pointed at a copy of Apache
//! ZooKeeper's `version-2/`, recovery used to read ZooKeeper's `log.1` as a
//! segment of ours with a "torn tail" and zero it.
//!
//! Ours: `log.<16 hex digits>` starting with the log segment header (or
//! all zeros, if it is the newest: see `log::header`), `log.prepared` (the
//! next segment being zero-filled: empty, zeros, or starting with (a prefix
//! of) the header), `snapshot.<16 hex digits>` starting with the
//! snapshot magic, and `snapshot.<16 hex digits>.tmp` that is empty or
//! starts with (a prefix of) it. ZooKeeper's: a `version-2` directory, and
//! any file starting with its txn log magic "ZKLG" or snapshot magic "ZKSN".

use std::io::Read;
use std::path::Path;

use super::StartError;
use crate::log::{header, prepare, recovery, segment};
use crate::snapshot;

const ZOOKEEPER_LOG_MAGIC: &[u8; 4] = b"ZKLG";
const ZOOKEEPER_SNAPSHOT_MAGIC: &[u8; 4] = b"ZKSN";
const ZOOKEEPER_DIR: &str = "version-2";
/// Bytes read from the start of each file to recognise it.
const HEAD_BYTES: usize = 8;

/// Checks every entry of `dir` (named `key` in errors), then that every
/// segment starts with ringkeeper's log header (only the newest may be a
/// headerless all-zero file a crash left).
pub fn check(dir: &Path, key: &str) -> Result<(), String> {
    let refuse = |path: &Path, why: &str| {
        format!(
            "{key} {}: {} {why}; ringkeeper only uses and modifies its own files and \
             refuses to start (nothing was changed): point {key} at an empty directory \
             or move the file away",
            dir.display(),
            path.display()
        )
    };
    let entries = std::fs::read_dir(dir).map_err(|e| format!("{key} {}: {e}", dir.display()))?;
    for entry in entries {
        let entry = entry.map_err(|e| format!("{key} {}: {e}", dir.display()))?;
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        let is_dir = entry.file_type().map(|t| t.is_dir()).unwrap_or(false);
        if let Some(why) = foreign_reason(&path, &name, is_dir) {
            return Err(refuse(&path, &why));
        }
    }
    let segments =
        recovery::list_segments(dir).map_err(|e| format!("{key} {}: {e}", dir.display()))?;
    recovery::check_ours(&segments).map_err(|n| {
        refuse(
            &n.path,
            &format!(
                "is named like a txn log segment but is not a ringkeeper one: {}",
                n.reason
            ),
        )
    })
}

/// Why the entry is not one of ours, if it looks like data and is not.
fn foreign_reason(path: &Path, name: &str, is_dir: bool) -> Option<String> {
    if is_dir {
        return (name == ZOOKEEPER_DIR).then(|| {
            "is an Apache ZooKeeper data directory (version-2/): to move its data over, run \
                 `ringkeeper import --zookeeper-datadir DIR --datadir NEW_DIR`"
                .to_string()
        });
    }
    let head = read_head(path);
    if head.starts_with(ZOOKEEPER_LOG_MAGIC) || head.starts_with(ZOOKEEPER_SNAPSHOT_MAGIC) {
        return Some(format!(
            "is an Apache ZooKeeper {} (magic {:?}): this is an Apache ZooKeeper dataDir \
             (`ringkeeper import` reads one)",
            if head.starts_with(ZOOKEEPER_LOG_MAGIC) {
                "txn log"
            } else {
                "snapshot"
            },
            String::from_utf8_lossy(&head[..4])
        ));
    }
    if name == prepare::PREPARED_NAME {
        // Overwritten at startup: only when ours (any stage of a zero fill).
        let ours_head = header::encode();
        let ours = ours_head.starts_with(&head)
            || head.iter().all(|b| *b == 0)
            || head.starts_with(header::MAGIC);
        return (!ours).then(|| "does not start with ringkeeper's log segment header".to_string());
    }
    if let Some(rest) = name.strip_prefix(segment::PREFIX) {
        return (!is_hex16(rest))
            .then(|| "looks like a txn log but is not a ringkeeper segment name".to_string());
    }
    if let Some(rest) = name.strip_prefix(snapshot::PREFIX) {
        let (zxid, tmp) = match rest.strip_suffix(".tmp") {
            Some(z) => (z, true),
            None => (rest, false),
        };
        if !is_hex16(zxid) {
            return Some("looks like a snapshot but is not a ringkeeper snapshot name".into());
        }
        let magic = snapshot::MAGIC;
        let ours = if tmp {
            // Half-written by a crash: any prefix of the magic.
            magic.starts_with(&head)
        } else {
            head.starts_with(magic)
        };
        return (!ours).then(|| "does not start with ringkeeper's snapshot magic".to_string());
    }
    None
}

fn is_hex16(s: &str) -> bool {
    s.len() == 16 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Up to the first `HEAD_BYTES` bytes of the file (fewer when it is
/// shorter or unreadable).
fn read_head(path: &Path) -> Vec<u8> {
    let mut head = Vec::with_capacity(HEAD_BYTES);
    if let Ok(f) = std::fs::File::open(path) {
        let _ = f.take(HEAD_BYTES as u64).read_to_end(&mut head);
    }
    head
}

/// Checks dataDir and dataLogDir (once when they are the same).
pub fn check_dirs(data_dir: &Path, data_log_dir: &Path) -> Result<(), StartError> {
    check(data_dir, "dataDir")?;
    if data_log_dir != data_dir {
        check(data_log_dir, "dataLogDir")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn our_files_pass_and_foreign_ones_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let mut seg = header::encode();
        seg.extend_from_slice(&[9u8; 64]);
        std::fs::write(d.join("log.0000000000000001"), &seg).unwrap();
        std::fs::write(d.join("log.0000000000000002"), [0u8; 64]).unwrap();
        std::fs::write(d.join("log.prepared"), [0u8; 64]).unwrap();
        std::fs::write(d.join("snapshot.0000000000000005"), b"RKSNAP01....").unwrap();
        std::fs::write(d.join("snapshot.0000000000000006.tmp"), b"RKS").unwrap();
        std::fs::write(d.join("myid"), b"1\n").unwrap();
        check(d, "dataDir").unwrap();
        let refused = |name: &str, bytes: &[u8], needle: &str| {
            let p = d.join(name);
            std::fs::write(&p, bytes).unwrap();
            let err = check(d, "dataDir").unwrap_err();
            assert!(err.contains(name) && err.contains(needle), "{name}: {err}");
            std::fs::remove_file(&p).unwrap();
        };
        refused("log.1", b"ZKLG\0\0\0\x02", "Apache ZooKeeper txn log");
        refused("snapshot.0", b"ZKSN\0\0\0\x02", "Apache ZooKeeper snapshot");
        refused("log.2", b"", "not a ringkeeper segment name");
        refused("log.prepared", b"junk....", "log segment header");
        refused(
            "log.0000000000000000",
            b"random bytes",
            "not a ringkeeper one",
        );
        // Headerless zeros are ours only as the newest segment.
        refused(
            "log.0000000000000000",
            &[0u8; 64],
            "only the newest segment",
        );
        refused("snapshot.0000000000000007", b"junk", "snapshot magic");
        refused("snapshot.0000000000000008.tmp", b"XX", "snapshot magic");
        refused("anything", b"ZKLGxxxx", "Apache ZooKeeper dataDir");
        std::fs::create_dir(d.join("version-2")).unwrap();
        let err = check(d, "dataDir").unwrap_err();
        assert!(err.contains("Apache ZooKeeper data directory"), "{err}");
    }
}
