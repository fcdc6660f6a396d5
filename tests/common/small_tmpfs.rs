//! A small tmpfs mounted for one test (needs root / CAP_SYS_ADMIN), so that
//! a server's dataDir can run out of space on demand: `fill_leaving` puts
//! a ballast file that leaves a few bytes free. Unmounted (lazily if busy)
//! when dropped, also on a panic. tests/disk_full.rs has a fuller helper
//! (ext4 on a loop device, EIO by shutting the filesystem down).

use std::ffi::CString;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::Command;

pub struct SmallTmpfs {
    root: tempfile::TempDir,
}

impl SmallTmpfs {
    /// Mounts a tmpfs of `mib` MiB; Err says why it could not.
    pub fn mount(mib: u32) -> Result<SmallTmpfs, String> {
        let root = tempfile::Builder::new()
            .prefix("rk-tmpfs-")
            .tempdir()
            .map_err(|e| format!("temp dir: {e}"))?;
        let mnt = root.path().join("mnt");
        std::fs::create_dir(&mnt).map_err(|e| format!("mount point: {e}"))?;
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={mib}m"), "tmpfs"])
            .arg(&mnt)
            .output()
            .map_err(|e| format!("mount: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "mount -t tmpfs: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(SmallTmpfs { root })
    }

    pub fn path(&self) -> PathBuf {
        self.root.path().join("mnt")
    }

    pub fn free_bytes(&self) -> u64 {
        let c = CString::new(self.path().as_os_str().as_bytes()).unwrap();
        // SAFETY: statvfs writes only the struct it is given.
        let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
        let rc = unsafe { libc::statvfs(c.as_ptr(), &mut st) };
        assert_eq!(rc, 0, "statvfs: {}", std::io::Error::last_os_error());
        st.f_bavail as u64 * st.f_frsize as u64
    }

    /// A file of zeros at `ballast` that leaves about `leave` bytes free.
    pub fn fill_leaving(&self, ballast: &Path, leave: u64) {
        let mut left = self.free_bytes().saturating_sub(leave);
        let mut f = std::fs::File::create(ballast).expect("create the ballast file");
        let chunk = vec![0u8; 1 << 20];
        while left > 0 {
            let n = left.min(chunk.len() as u64) as usize;
            f.write_all(&chunk[..n]).expect("write the ballast file");
            left -= n as u64;
        }
    }
}

impl Drop for SmallTmpfs {
    fn drop(&mut self) {
        let mnt = self.path();
        let ok = Command::new("umount")
            .arg(&mnt)
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            let _ = Command::new("umount").arg("-l").arg(&mnt).status();
        }
    }
}
