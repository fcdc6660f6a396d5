//! dataDir and dataLogDir at startup: created, made absolute, checked
//! writable and syncable, and locked for the life of the process.
//!
//! Absolute because the log opens its directory through io_uring
//! (`glommio::io::Directory::open`), which fails with EBADF on a relative
//! path (it becomes `openat(-1, ...)`), and because a path that means the
//! same directory whatever the working directory is what the lock and the
//! startup line should name.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

use super::StartError;

/// The lock file each directory holds while a server uses it.
pub const LOCK_FILE_NAME: &str = "ringkeeper.lock";

/// Creates `dir` (and its parents) and returns its absolute, canonical form.
/// `key` names the setting (dataDir, dataLogDir) in errors.
pub fn resolve(dir: &Path, key: &str) -> Result<PathBuf, StartError> {
    std::fs::create_dir_all(dir).map_err(|e| {
        StartError::data_dir(format!("{key} {}: cannot create it: {e}", dir.display()))
    })?;
    std::fs::canonicalize(dir).map_err(|e| {
        StartError::data_dir(format!("{key} {}: cannot resolve it: {e}", dir.display()))
    })
}

/// Creates, writes, fdatasyncs and removes a probe file in `dir`: a
/// read-only mount or a directory without write permission fails here,
/// before recovery, instead of on the first write (when clients would see
/// their sessions refused while the server answers `ruok` with `imok`).
pub fn check_writable(dir: &Path, key: &str) -> Result<(), StartError> {
    // The pid keeps two servers started at once from sharing a probe; the
    // lock taken after this check refuses the second one anyway.
    let probe = dir.join(format!(".ringkeeper-write-probe.{}", std::process::id()));
    let fail = |what: &str, e: std::io::Error| {
        StartError::data_dir(format!(
            "{key} {} is not writable ({what} {}: {e}); ringkeeper needs to write and \
             sync its files there",
            dir.display(),
            probe.display()
        ))
    };
    let mut f = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(&probe)
        .map_err(|e| fail("creating", e))?;
    let written = f
        .write_all(b"ringkeeper write probe\n")
        .and_then(|_| f.sync_data());
    drop(f);
    let removed = std::fs::remove_file(&probe);
    written.map_err(|e| fail("writing and syncing", e))?;
    removed.map_err(|e| fail("removing", e))
}

/// Takes an exclusive lock (flock) on `<dir>/ringkeeper.lock`, held as long
/// as the returned file is open: for the life of the process. The kernel
/// drops it when the process dies, kill -9 included, so a stale file never
/// blocks a restart.
pub fn lock(dir: &Path, key: &str) -> Result<File, StartError> {
    let path = dir.join(LOCK_FILE_NAME);
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(|e| StartError::data_dir(format!("{key}: cannot open {}: {e}", path.display())))?;
    // SAFETY: flock on a descriptor this function owns; no memory involved.
    let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if rc != 0 {
        let e = std::io::Error::last_os_error();
        let message = if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
            format!(
                "{key} {} is in use by another ringkeeper (it holds the lock on {}); \
                 two servers must never share a data or log directory",
                dir.display(),
                path.display()
            )
        } else {
            format!("{key}: cannot lock {}: {e}", path.display())
        };
        return Err(StartError::from(message));
    }
    // Who holds it, for an operator looking at the directory; the lock
    // itself is what counts, not this text.
    let _ = file.set_len(0);
    let _ = (&file).write_all(format!("{}\n", std::process::id()).as_bytes());
    Ok(file)
}

/// The directories a server uses, resolved, checked and locked.
pub struct DataDirs {
    pub data_dir: PathBuf,
    pub data_log_dir: PathBuf,
    /// Held open for the life of the process: the locks.
    _locks: Vec<File>,
}

/// Resolves, checks (nothing foreign, writable) and locks dataDir and dataLogDir (once when they are
/// the same directory).
pub fn prepare(data_dir: &Path, data_log_dir: &Path) -> Result<DataDirs, StartError> {
    let data = resolve(data_dir, "dataDir")?;
    let log = resolve(data_log_dir, "dataLogDir")?;
    // First, so that a directory that is not ours is left exactly as it
    // was (no probe, no lock file), and before recovery, which modifies
    // files it takes for its own.
    super::foreign::check_dirs(&data, &log)?;
    check_writable(&data, "dataDir")?;
    let mut locks = vec![lock(&data, "dataDir")?];
    if log != data {
        check_writable(&log, "dataLogDir")?;
        locks.push(lock(&log, "dataLogDir")?);
    }
    Ok(DataDirs {
        data_dir: data,
        data_log_dir: log,
        _locks: locks,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_dirs_become_absolute_and_exist() {
        let tmp = tempfile::tempdir().unwrap();
        let rel = tmp.path().join("a/../b/c");
        let got = resolve(&rel, "dataDir").unwrap();
        assert!(got.is_absolute());
        assert_eq!(got, std::fs::canonicalize(tmp.path().join("b/c")).unwrap());
    }

    #[test]
    fn a_second_lock_on_one_dir_is_refused_until_the_first_is_dropped() {
        let tmp = tempfile::tempdir().unwrap();
        let first = lock(tmp.path(), "dataDir").unwrap();
        let err = lock(tmp.path(), "dataDir").unwrap_err();
        assert!(
            err.message.contains("in use by another ringkeeper"),
            "{err}"
        );
        drop(first);
        lock(tmp.path(), "dataDir").unwrap();
    }

    #[test]
    fn the_write_probe_leaves_nothing_behind() {
        let tmp = tempfile::tempdir().unwrap();
        check_writable(tmp.path(), "dataDir").unwrap();
        assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 0);
    }
}
