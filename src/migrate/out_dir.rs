//! The output of `import` and `export`: written in a hidden sibling
//! directory, fsynced, and renamed to its name only when whole. A failure
//! (or a crash) leaves the named directory as it was: absent or empty.

use std::io;
use std::path::{Path, PathBuf};

#[derive(Debug)]
pub struct OutDir {
    target: PathBuf,
    staging: PathBuf,
    committed: bool,
}

impl OutDir {
    /// Prepares to write `target`, which must be absent or an empty
    /// directory.
    pub fn create(target: &Path) -> Result<OutDir, String> {
        let shown = target.display();
        match std::fs::read_dir(target) {
            Ok(mut entries) => {
                if entries.next().is_some() {
                    return Err(format!(
                        "{shown} is not empty: give a new or empty directory (nothing was written)"
                    ));
                }
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(format!("{shown}: {e}")),
        }
        let name = target
            .file_name()
            .ok_or_else(|| format!("{shown}: not a directory name"))?
            .to_string_lossy()
            .into_owned();
        let parent = match target.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        std::fs::create_dir_all(&parent).map_err(|e| format!("{}: {e}", parent.display()))?;
        let staging = parent.join(format!(".{name}.partial-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&staging);
        std::fs::create_dir(&staging).map_err(|e| format!("{}: {e}", staging.display()))?;
        Ok(OutDir {
            target: target.to_path_buf(),
            staging,
            committed: false,
        })
    }

    /// Where to write until [`OutDir::commit`].
    pub fn path(&self) -> &Path {
        &self.staging
    }

    /// Makes everything written durable, then gives it the target's name.
    pub fn commit(mut self) -> io::Result<PathBuf> {
        sync_tree(&self.staging)?;
        if self.target.exists() {
            std::fs::remove_dir(&self.target)?;
        }
        std::fs::rename(&self.staging, &self.target)?;
        let parent = match self.target.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        std::fs::File::open(parent)?.sync_all()?;
        self.committed = true;
        Ok(self.target.clone())
    }
}

/// fsyncs every file and directory under `dir`.
fn sync_tree(dir: &Path) -> io::Result<()> {
    for e in std::fs::read_dir(dir)? {
        let e = e?;
        if e.file_type()?.is_dir() {
            sync_tree(&e.path())?;
        } else {
            std::fs::File::open(e.path())?.sync_all()?;
        }
    }
    std::fs::File::open(dir)?.sync_all()
}

impl Drop for OutDir {
    fn drop(&mut self) {
        if !self.committed {
            let _ = std::fs::remove_dir_all(&self.staging);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_appears_until_commit_and_nothing_stays_after_a_failure() {
        let tmp = tempfile::tempdir().unwrap();
        let target = tmp.path().join("out");
        let o = OutDir::create(&target).unwrap();
        std::fs::write(o.path().join("f"), b"x").unwrap();
        assert!(!target.exists());
        drop(o); // a failure
        assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 0);
        let o = OutDir::create(&target).unwrap();
        std::fs::write(o.path().join("f"), b"x").unwrap();
        o.commit().unwrap();
        assert_eq!(std::fs::read(target.join("f")).unwrap(), b"x");
        assert!(OutDir::create(&target).unwrap_err().contains("not empty"));
    }
}
