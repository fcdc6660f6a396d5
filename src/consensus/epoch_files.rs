//! The files beside the log that ZAB keeps (ZooKeeper's `QuorumPeer`):
//! `acceptedEpoch` and `currentEpoch`, decimal text in dataDir, each
//! written atomically (`<name>.tmp`, fsync, rename, fsync of the
//! directory, as `AtomicFileWritingIdiom`), and `myid`.

use std::io::{self, Write};
use std::path::Path;

use crate::zab::{zxid, Epochs, Sid, EPOCH_MAX};

pub const ACCEPTED_EPOCH: &str = "acceptedEpoch";
pub const CURRENT_EPOCH: &str = "currentEpoch";
pub const MYID: &str = "myid";
const TMP_SUFFIX: &str = ".tmp";

/// Replaces `dir/name` with `epoch` so that a crash leaves either the old
/// value or the new one, and the new one is durable when this returns.
pub fn write(dir: &Path, name: &str, epoch: u32) -> io::Result<()> {
    let tmp = dir.join(format!("{name}{TMP_SUFFIX}"));
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(epoch.to_string().as_bytes())?;
    f.sync_all()?;
    drop(f);
    std::fs::rename(&tmp, dir.join(name))?;
    std::fs::File::open(dir)?.sync_all()
}

/// The number in `dir/name`, None if there is no such file.
fn read_number(dir: &Path, name: &str) -> Result<Option<u64>, String> {
    let path = dir.join(name);
    match std::fs::read_to_string(&path) {
        Ok(text) => text.trim().parse::<u64>().map(Some).map_err(|_| {
            format!(
                "{}: expected a decimal number, found {:?}",
                path.display(),
                text.chars().take(40).collect::<String>()
            )
        }),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("{}: {e}", path.display())),
    }
}

fn read_epoch(dir: &Path, name: &str) -> Result<Option<u32>, String> {
    match read_number(dir, name)? {
        Some(n) if n <= EPOCH_MAX as u64 => Ok(Some(n as u32)),
        Some(n) => Err(format!(
            "{}: epoch {n} is out of range (at most {EPOCH_MAX})",
            dir.join(name).display()
        )),
        None => Ok(None),
    }
}

/// The epochs in `dir` for a log that ends at `last_zxid`, checked as
/// ZooKeeper's `QuorumPeer.loadDataBase` checks them: a missing file is
/// created from the last zxid's epoch; a currentEpoch older than the log is
/// refused unless `currentEpoch.tmp` (a crash between writing it and the
/// rename, ZOOKEEPER-1653) brings it up to date; acceptedEpoch must not be
/// older than currentEpoch.
pub fn load(dir: &Path, last_zxid: i64) -> Result<Epochs, String> {
    load_checked(dir, last_zxid, false)
}

/// As [`load`], for an ensemble member: its log may also end in an epoch
/// it accepted but did not make current yet (it logged a leader's sync and
/// crashed before writing currentEpoch, the 3.9.4 order); it rejoins and
/// the leader syncs it. A log beyond acceptedEpoch is still refused.
pub fn load_for_ensemble(dir: &Path, last_zxid: i64) -> Result<Epochs, String> {
    load_checked(dir, last_zxid, true)
}

fn load_checked(dir: &Path, last_zxid: i64, ensemble: bool) -> Result<Epochs, String> {
    let io_err = |name: &str, e: io::Error| format!("writing {}: {e}", dir.join(name).display());
    let log_epoch = zxid::epoch(last_zxid);
    let mut current = match read_epoch(dir, CURRENT_EPOCH)? {
        Some(c) => c,
        None => {
            write(dir, CURRENT_EPOCH, log_epoch).map_err(|e| io_err(CURRENT_EPOCH, e))?;
            log_epoch
        }
    };
    let tmp_name = format!("{CURRENT_EPOCH}{TMP_SUFFIX}");
    if log_epoch > current {
        // A crash before the temporary file was written whole leaves it
        // empty or short: a file that is not a number says nothing, and
        // neither does one that is not above currentEpoch (a number cut
        // short is smaller); currentEpoch then stands.
        let tmp_path = dir.join(&tmp_name);
        let tmp = match std::fs::read_to_string(&tmp_path) {
            Ok(text) => match text.trim().parse::<u32>() {
                Ok(t) if t > current && t <= EPOCH_MAX => Some(t),
                _ => {
                    tracing::warn!(
                        "ignoring {} ({text:?}): not an epoch above currentEpoch {current}; \
                         a crash came before it was written whole",
                        tmp_path.display()
                    );
                    None
                }
            },
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(e) => return Err(format!("{}: {e}", tmp_path.display())),
        };
        if let Some(tmp) = tmp {
            tracing::info!(
                "{} found: setting currentEpoch to {tmp}",
                dir.join(&tmp_name).display()
            );
            write(dir, CURRENT_EPOCH, tmp).map_err(|e| io_err(CURRENT_EPOCH, e))?;
            current = tmp;
        }
    }
    let accepted_on_disk = if ensemble {
        read_epoch(dir, ACCEPTED_EPOCH)?
    } else {
        None
    };
    if log_epoch > current && accepted_on_disk.is_none_or(|a| log_epoch > a) {
        return Err(format!(
            "{}: the current epoch, {current}, is older than the last zxid in the log, {} \
             (epoch {log_epoch}): the epoch files and the log do not belong together",
            dir.join(CURRENT_EPOCH).display(),
            zxid::hex(last_zxid)
        ));
    }
    let accepted = match read_epoch(dir, ACCEPTED_EPOCH)? {
        Some(a) => a,
        None => {
            write(dir, ACCEPTED_EPOCH, log_epoch).map_err(|e| io_err(ACCEPTED_EPOCH, e))?;
            log_epoch
        }
    };
    if accepted < current {
        return Err(format!(
            "{}: the accepted epoch, {accepted}, is less than the current epoch, {current}",
            dir.join(ACCEPTED_EPOCH).display()
        ));
    }
    Ok(Epochs { accepted, current })
}

/// The server id in `dir/myid`, None if there is none. ZooKeeper reads the
/// file's first line as a number; ids are 1-255 with
/// `zookeeper.extendedTypesEnabled` (the TTL nodes' top byte) and
/// 0-254 for session ids' top byte otherwise; any positive number is taken
/// here and the ensemble's configuration checks the rest.
pub fn read_myid(dir: &Path) -> Result<Option<Sid>, String> {
    let path = dir.join(MYID);
    match std::fs::read_to_string(&path) {
        Ok(text) => {
            let line = text.lines().next().unwrap_or("").trim();
            line.parse::<Sid>()
                .map(Some)
                .map_err(|_| format!("{}: serverid {line:?} is not a number", path.display()))
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("{}: {e}", path.display())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn epochs(accepted: u32, current: u32) -> Epochs {
        Epochs { accepted, current }
    }

    fn file(dir: &Path, name: &str) -> String {
        std::fs::read_to_string(dir.join(name)).unwrap()
    }

    #[test]
    fn missing_files_come_from_the_log() {
        let d = tempfile::tempdir().unwrap();
        let e = load(d.path(), zxid::make(3, 9)).unwrap();
        assert_eq!(e, epochs(3, 3));
        assert_eq!(file(d.path(), CURRENT_EPOCH), "3");
        assert_eq!(file(d.path(), ACCEPTED_EPOCH), "3");
        assert!(!d.path().join("currentEpoch.tmp").exists());
        // A fresh server: epoch 0.
        let d = tempfile::tempdir().unwrap();
        assert_eq!(load(d.path(), 0).unwrap(), epochs(0, 0));
    }

    #[test]
    fn a_temporary_current_epoch_a_crash_left_unwritten_is_ignored() {
        for left in ["", "12x", "5", "3"] {
            let d = tempfile::tempdir().unwrap();
            write(d.path(), ACCEPTED_EPOCH, 5).unwrap();
            write(d.path(), CURRENT_EPOCH, 4).unwrap();
            std::fs::write(d.path().join("currentEpoch.tmp"), left).unwrap();
            // A member that logged epoch 5's sync and crashed before its
            // currentEpoch was written: it rejoins with 4.
            let e = load_for_ensemble(d.path(), zxid::make(5, 2));
            // Written whole, it is the epoch the crash did not let land.
            let current = if left == "5" { 5 } else { 4 };
            assert_eq!(e, Ok(epochs(5, current)), "currentEpoch.tmp {left:?}");
        }
    }

    #[test]
    fn written_epochs_load_back() {
        let d = tempfile::tempdir().unwrap();
        write(d.path(), ACCEPTED_EPOCH, 7).unwrap();
        write(d.path(), CURRENT_EPOCH, 6).unwrap();
        assert_eq!(load(d.path(), zxid::make(6, 1)).unwrap(), epochs(7, 6));
        // ZooKeeper's own files end with nothing or a newline: both read.
        std::fs::write(d.path().join(ACCEPTED_EPOCH), "8\n").unwrap();
        assert_eq!(load(d.path(), 0).unwrap().accepted, 8);
    }

    #[test]
    fn a_log_ahead_of_current_epoch_is_refused_unless_the_tmp_file_says_so() {
        let d = tempfile::tempdir().unwrap();
        write(d.path(), CURRENT_EPOCH, 2).unwrap();
        write(d.path(), ACCEPTED_EPOCH, 3).unwrap();
        let err = load(d.path(), zxid::make(3, 1)).unwrap_err();
        assert!(
            err.contains("is older than the last zxid in the log, 0x300000001"),
            "{err}"
        );
        // The crash between writing currentEpoch.tmp and the rename.
        std::fs::write(d.path().join("currentEpoch.tmp"), "3").unwrap();
        assert_eq!(load(d.path(), zxid::make(3, 1)).unwrap(), epochs(3, 3));
        assert_eq!(file(d.path(), CURRENT_EPOCH), "3");
    }

    #[test]
    fn accepted_behind_current_and_garbage_are_refused() {
        let d = tempfile::tempdir().unwrap();
        write(d.path(), CURRENT_EPOCH, 4).unwrap();
        write(d.path(), ACCEPTED_EPOCH, 3).unwrap();
        let err = load(d.path(), 0).unwrap_err();
        assert!(
            err.contains("the accepted epoch, 3, is less than the current epoch, 4"),
            "{err}"
        );
        std::fs::write(d.path().join(ACCEPTED_EPOCH), "four").unwrap();
        let err = load(d.path(), 0).unwrap_err();
        assert!(
            err.contains("acceptedEpoch: expected a decimal number"),
            "{err}"
        );
        std::fs::write(d.path().join(ACCEPTED_EPOCH), "99999999999").unwrap();
        assert!(load(d.path(), 0).unwrap_err().contains("out of range"));
    }

    #[test]
    fn myid() {
        let d = tempfile::tempdir().unwrap();
        assert_eq!(read_myid(d.path()).unwrap(), None);
        std::fs::write(d.path().join(MYID), "3\n").unwrap();
        assert_eq!(read_myid(d.path()).unwrap(), Some(3));
        std::fs::write(d.path().join(MYID), "x").unwrap();
        assert!(read_myid(d.path()).unwrap_err().contains("is not a number"));
    }
}
