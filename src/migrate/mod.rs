//! Moving data between Apache ZooKeeper and ringkeeper (issue 29 §1):
//! `ringkeeper import` reads a ZooKeeper dataDir (the newest valid
//! snapshot, then the txn logs after it, replayed over the fuzzy snapshot
//! as ZooKeeper's FileTxnSnapLog.restore does) and writes a ringkeeper
//! dataDir; `ringkeeper export` writes a ringkeeper dataDir's state as a
//! snapshot that ZooKeeper loads unchanged (the way back).
//!
//! Both write into a sibling temporary directory and rename it into place
//! at the end: a damaged input or a crash leaves no half-written output.

pub mod digest;
mod export;
mod import;
pub mod out_dir;
pub mod zk_log;
pub mod zk_snapshot;

use std::fmt;
use std::path::{Path, PathBuf};

pub use export::{export, ExportOptions, ExportReport};
pub use import::{import, ImportOptions, ImportReport};

/// ZooKeeper keeps its files in this subdirectory of dataDir/dataLogDir.
pub const ZK_VERSION_DIR: &str = "version-2";

/// Why a migration stopped: the file, where in it (a byte offset of the
/// file as stored, or of the decompressed stream for a compressed
/// snapshot), and what was wrong.
#[derive(Debug)]
pub struct MigrateError {
    pub file: PathBuf,
    pub offset: Option<u64>,
    pub message: String,
}

impl MigrateError {
    pub fn at(file: &Path, offset: u64, message: impl Into<String>) -> MigrateError {
        MigrateError {
            file: file.to_path_buf(),
            offset: Some(offset),
            message: message.into(),
        }
    }

    pub fn file(file: &Path, message: impl Into<String>) -> MigrateError {
        MigrateError {
            file: file.to_path_buf(),
            offset: None,
            message: message.into(),
        }
    }
}

impl fmt::Display for MigrateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.offset {
            Some(o) => write!(f, "{} at byte {o}: {}", self.file.display(), self.message),
            None => write!(f, "{}: {}", self.file.display(), self.message),
        }
    }
}

impl std::error::Error for MigrateError {}

/// `name` as ZooKeeper's Util.getZxidFromName reads it: the hex after
/// `prefix.`, up to the next dot (a compressed snapshot's extension).
pub fn zxid_from_name(name: &str, prefix: &str) -> Option<i64> {
    let rest = name.strip_prefix(prefix)?.strip_prefix('.')?;
    let hex = rest.split('.').next()?;
    u64::from_str_radix(hex, 16).ok().map(|z| z as i64)
}

/// The `prefix.<zxid>` files in `dir` (none if it does not exist), by zxid
/// ascending.
pub fn files_by_zxid(dir: &Path, prefix: &str) -> std::io::Result<Vec<(i64, PathBuf)>> {
    let mut v = Vec::new();
    match std::fs::read_dir(dir) {
        Ok(entries) => {
            for e in entries {
                let e = e?;
                let name = e.file_name().to_string_lossy().into_owned();
                if let Some(z) = zxid_from_name(&name, prefix) {
                    v.push((z, e.path()));
                }
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    v.sort_by_key(|(z, _)| *z);
    Ok(v)
}

/// An epoch file (`acceptedEpoch`, `currentEpoch`: decimal text) in
/// `dir`, None if there is none.
pub fn read_epoch(dir: &Path, name: &str) -> Result<Option<u32>, MigrateError> {
    let path = dir.join(name);
    match std::fs::read_to_string(&path) {
        Ok(t) => t
            .trim()
            .parse::<u32>()
            .map(Some)
            .map_err(|_| MigrateError::file(&path, format!("not an epoch: {:?}", t.trim()))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(MigrateError::file(&path, e.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zxids_from_zookeepers_file_names() {
        assert_eq!(zxid_from_name("snapshot.1a", "snapshot"), Some(0x1a));
        assert_eq!(
            zxid_from_name("snapshot.100000003.gz", "snapshot"),
            Some(0x1_0000_0003)
        );
        assert_eq!(zxid_from_name("log.0", "log"), Some(0));
        assert_eq!(zxid_from_name("log.xyz", "log"), None);
        assert_eq!(zxid_from_name("snapshot.5", "log"), None);
    }
}
