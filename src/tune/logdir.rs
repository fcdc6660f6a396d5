//! dataLogDir itself: usable (a directory the server can create, write and
//! sync a file in, with room for its segments), and the filesystem it is
//! on (statfs's type, mountinfo's options).

use std::ffi::CString;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use super::mountinfo::{self, Mount};
use super::{bytes, Check, Context, Status, Value};

/// A temporary file in `dir`, removed when dropped.
pub struct TempFile {
    pub path: PathBuf,
}

impl TempFile {
    pub fn name_in(dir: &Path, what: &str) -> TempFile {
        TempFile {
            path: dir.join(format!(".ringkeeper-tune-{what}.{}", std::process::id())),
        }
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// `path` made absolute (relative to the working directory, as the
/// server resolves it), symlinks resolved where it exists.
pub fn absolute(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| {
        std::env::current_dir()
            .map(|d| d.join(path))
            .unwrap_or_else(|_| path.to_path_buf())
    })
}

/// The nearest existing directory at or above `path`.
pub fn existing_ancestor(path: &Path) -> Option<PathBuf> {
    absolute(path)
        .ancestors()
        .find(|p| p.is_dir())
        .map(Path::to_path_buf)
}

/// statfs: (f_type, free bytes for an unprivileged user, total bytes).
pub fn statfs(path: &Path) -> std::io::Result<(u64, u64, u64)> {
    let c = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
    // SAFETY: statfs writes only the struct it is given.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statfs(c.as_ptr(), &mut st) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let bsize = st.f_bsize as u64;
    Ok((
        st.f_type as u64,
        st.f_bavail as u64 * bsize,
        st.f_blocks as u64 * bsize,
    ))
}

/// Names of statfs magic numbers (linux/magic.h).
pub fn fs_name(magic: u64) -> &'static str {
    match magic {
        0xEF53 => "ext2/3/4",
        0x5846_5342 => "xfs",
        0x9123_683E => "btrfs",
        0x2FC1_2FC1 => "zfs",
        0xF2F5_2010 => "f2fs",
        0x0102_1994 => "tmpfs",
        0x8584_58F6 => "ramfs",
        0x6969 => "nfs",
        0xFF53_4D42 | 0xFE53_4D42 => "cifs/smb",
        0x6573_5546 => "fuse",
        0x794C_7630 => "overlayfs",
        0x5346_544E => "ntfs",
        0x4d44 => "vfat",
        0x3153_464A => "jfs",
        0x5265_4973 => "reiserfs",
        0xCA45_1A4E => "bcachefs",
        0x0BAD_1DEA => "fuse.ceph or other",
        0x00C3_6400 => "ceph",
        _ => "other",
    }
}

pub fn usable(ctx: &Context) -> Check {
    let dir = &ctx.log_dir;
    let c = Check::new("data_log_dir", "dataLogDir usable").why(
        "The txn log lives here: every acknowledged write is in it first. The server \
         creates the directory if it is missing, locks it, and refuses to start (exit \
         code 3) when it cannot write and sync a file in it; a full disk at runtime turns \
         the server read-only.",
    );
    let shown = dir.display();
    if !dir.exists() {
        let parent = existing_ancestor(dir);
        return c
            .status(Status::Fail)
            .found(format!(
                "{shown} does not exist (nearest existing directory: {})",
                parent.map_or("none".to_string(), |p| p.display().to_string())
            ))
            .fix(format!(
                "create it (mkdir -p {shown}, owned by the server's user), or point \
                 dataLogDir in zoo.cfg (or --data-log-dir here) at the directory the \
                 server will use"
            ));
    }
    if !dir.is_dir() {
        return c
            .status(Status::Fail)
            .found(format!("{shown} is not a directory"))
            .fix("point dataLogDir at a directory");
    }
    let probe = TempFile::name_in(dir, "probe");
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&probe.path)
        .and_then(|mut f| {
            f.write_all(b"ringkeeper tune check\n")?;
            f.sync_data()
        });
    if let Err(e) = written {
        return c
            .status(Status::Fail)
            .found(format!(
                "{shown}: cannot create, write and sync a file in it: {e}"
            ))
            .fix(format!(
                "give the server's user write access (chown/chmod {shown}), remount the \
                 filesystem read-write, or point dataLogDir at a writable directory"
            ));
    }
    drop(probe);
    let (free, total) = match statfs(dir) {
        Ok((_, free, total)) => (free, total),
        Err(e) => {
            return c
                .status(Status::Warn)
                .found(format!("{shown} is writable; statfs failed: {e}"));
        }
    };
    let segment = ctx.config.preallocate_bytes as u64;
    let c = c
        .value("free_bytes", Value::Int(free as i64))
        .value("total_bytes", Value::Int(total as i64));
    if total == 0 {
        return c.found(format!(
            "{} is writable and syncs; its filesystem reports no size (ramfs: bounded by memory)",
            absolute(dir).display()
        ));
    }
    let found = format!(
        "{} is writable and syncs; {} free of {}",
        absolute(dir).display(),
        bytes(free),
        bytes(total)
    );
    // The current segment and the prepared next one, preallocated.
    if free < 2 * segment {
        c.status(Status::Fail).found(found).fix(format!(
            "free space: the log preallocates segments of {} (preAllocSize), the current \
             one and the next; give it at least a few GiB",
            bytes(segment)
        ))
    } else if free < 1 << 30 {
        c.status(Status::Warn).found(found).fix(
            "less than 1 GiB free: the log and snapshots (snapCount, autopurge) need room \
             to grow; when it fills up the server turns read-only",
        )
    } else {
        c.found(found)
    }
}

/// The mount holding `path` per /proc/self/mountinfo.
pub fn mount_for(ctx: &Context, path: &Path) -> Option<Mount> {
    let text = ctx.host.read("/proc/self/mountinfo")?;
    let mounts = mountinfo::parse(&text);
    mountinfo::mount_of(&mounts, &absolute(path)).cloned()
}

pub fn filesystem(ctx: &Context) -> Check {
    let c = Check::new("log_filesystem", "dataLogDir's filesystem").why(
        "fdatasync must reach stable storage for an acknowledged write to survive a \
         power cut: tmpfs and ramfs keep it in memory only. ext4 and xfs are what the \
         log is measured on; copy-on-write filesystems (btrfs, zfs) add metadata work to \
         each sync, network filesystems a round trip and weaker locking, and `nobarrier` \
         turns cache flushes off (a sync then proves nothing).",
    );
    let Some(at) = existing_ancestor(&ctx.log_dir) else {
        return c.status(Status::Unknown).found(format!(
            "no existing directory at or above {}",
            ctx.log_dir.display()
        ));
    };
    let note = if at == absolute(&ctx.log_dir) {
        String::new()
    } else {
        format!(" (dataLogDir does not exist yet; {} does)", at.display())
    };
    let magic = statfs(&at).ok().map(|s| s.0);
    let mount = mount_for(ctx, &at);
    let kind = match (&mount, magic) {
        (Some(m), _) => m.fs_type.clone(),
        (None, Some(m)) => fs_name(m).to_string(),
        (None, None) => {
            return c.status(Status::Unknown).found(format!(
                "neither statfs nor /proc/self/mountinfo names the filesystem of {}",
                at.display()
            ))
        }
    };
    let mut found = format!("{kind}{note}");
    if let Some(m) = magic {
        found.push_str(&format!(" (statfs type {m:#x}: {})", fs_name(m)));
    }
    let options = mount
        .as_ref()
        .map(|m| format!("{},{}", m.options, m.super_options))
        .unwrap_or_default();
    if let Some(m) = &mount {
        found.push_str(&format!(
            "; mounted at {} from {} with {} / {}",
            m.mount_point, m.source, m.options, m.super_options
        ));
    }
    let c = c.value("fs_type", Value::Text(kind.clone()));
    let base = kind.split('.').next().unwrap_or("");
    let memory = matches!(base, "tmpfs" | "ramfs")
        || magic.is_some_and(|m| matches!(fs_name(m), "tmpfs" | "ramfs"));
    let no_barrier = options
        .split(',')
        .any(|o| o == "nobarrier" || o == "barrier=0");
    if memory {
        return c.status(Status::Fail).found(found).fix(
            "put dataLogDir on a disk-backed filesystem (ext4 or xfs on a local SSD); in \
             memory, a reboot or power cut loses every acknowledged write",
        );
    }
    if no_barrier {
        return c.status(Status::Warn).found(found).fix(
            "remount without nobarrier/barrier=0 (unless the device's cache is \
             battery-backed and reports write through)",
        );
    }
    match base {
        "ext4" | "xfs" | "ext3" => c.found(found),
        "btrfs" | "zfs" | "bcachefs" => c.status(Status::Warn).found(found).fix(
            "copy-on-write: prefer ext4 or xfs for dataLogDir, or at least chattr +C on the \
             directory (btrfs) / logbias=latency and a SLOG (zfs)",
        ),
        "nfs" | "nfs4" | "cifs" | "smb3" | "fuse" | "ceph" | "9p" | "virtiofs" => c
            .status(Status::Warn)
            .found(found)
            .fix("a network or userspace filesystem: put dataLogDir on a local disk"),
        "overlay" => c
            .status(Status::Warn)
            .found(found)
            .fix("a container's overlay filesystem: mount a volume (a local disk) at dataLogDir"),
        _ => c.found(found),
    }
}
