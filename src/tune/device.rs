//! The block device under dataLogDir: its volatile write cache and FUA
//! (/sys/block/<dev>/queue/write_cache, .../fua), and whether it spins.
//! The device is found from the directory's st_dev (major:minor), or for
//! filesystems with anonymous device numbers (btrfs) from mountinfo's
//! source device.

use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

use super::logdir::{existing_ancestor, mount_for};
use super::{Check, Context, Status, Value};

fn split_dev(dev: u64) -> (u32, u32) {
    (libc::major(dev), libc::minor(dev))
}

/// The sysfs directory of the whole disk holding `dir` (a partition's
/// parent), with the major:minor it was found by.
fn disk_of(ctx: &Context, dir: &Path) -> Result<(PathBuf, (u32, u32)), String> {
    let meta = std::fs::metadata(dir).map_err(|e| format!("stat {}: {e}", dir.display()))?;
    let mut dev = split_dev(meta.dev());
    if dev.0 == 0 {
        // Anonymous device numbers: tmpfs, overlay, btrfs subvolumes, NFS...
        let mount = mount_for(ctx, dir);
        let source = mount.as_ref().map(|m| m.source.clone()).unwrap_or_default();
        let rdev = std::fs::metadata(&source)
            .ok()
            .filter(|m| m.file_type().is_block_device())
            .map(|m| m.rdev());
        match rdev {
            Some(r) if source.starts_with("/dev/") => dev = split_dev(r),
            _ => {
                return Err(format!(
                    "not on a block device ({} from {})",
                    mount.map_or("?".to_string(), |m| m.fs_type),
                    if source.is_empty() { "?" } else { &source }
                ))
            }
        }
    }
    let link = ctx
        .host
        .path(&format!("/sys/dev/block/{}:{}", dev.0, dev.1));
    let mut sys = std::fs::canonicalize(&link)
        .map_err(|e| format!("device {}:{}: {} ({e})", dev.0, dev.1, link.display()))?;
    if sys.join("partition").exists() {
        if let Some(parent) = sys.parent() {
            sys = parent.to_path_buf();
        }
    }
    Ok((sys, dev))
}

pub fn check(ctx: &Context) -> Check {
    let c = Check::new("write_cache", "Device write cache and FUA").why(
        "Each log batch is one O_DIRECT|O_DSYNC write: with a volatile write cache \
         (`write back`) the kernel makes it durable with FUA where the device has it, or \
         with a cache flush after the write where it does not (two commands per sync). \
         `write through` means no volatile cache, or one the device promises to keep \
         (power-loss protection). A spinning disk pays a rotation per sync: milliseconds \
         for every batch.",
    );
    let Some(dir) = existing_ancestor(&ctx.log_dir) else {
        return c
            .status(Status::Unknown)
            .found("dataLogDir has no existing directory");
    };
    let (sys, dev) = match disk_of(ctx, &dir) {
        Ok(d) => d,
        Err(why) => {
            return c
                .status(Status::Unknown)
                .found(format!("{}: {why}", dir.display()))
        }
    };
    let name = sys
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let rel = |f: &str| {
        std::fs::read_to_string(sys.join("queue").join(f))
            .ok()
            .map(|s| s.trim().to_string())
    };
    let cache = rel("write_cache");
    let fua = rel("fua");
    let rotational = rel("rotational");
    let model = std::fs::read_to_string(sys.join("device/model"))
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty());
    let mut found = format!(
        "{} is on /dev/{name} ({}:{}{}): write cache {}, FUA {}, {}",
        dir.display(),
        dev.0,
        dev.1,
        model.map(|m| format!(", {m}")).unwrap_or_default(),
        cache.as_deref().unwrap_or("unknown"),
        match fua.as_deref() {
            Some("1") => "yes",
            Some("0") => "no (the kernel flushes the cache after each O_DSYNC write)",
            _ => "unknown",
        },
        match rotational.as_deref() {
            Some("1") => "rotational",
            Some("0") => "not rotational",
            _ => "rotational unknown",
        }
    );
    if let Ok(holders) = std::fs::read_dir(sys.join("slaves")) {
        let under: Vec<String> = holders
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        if !under.is_empty() {
            found.push_str(&format!("; built on {}", under.join(", ")));
        }
    }
    let c = c
        .found(found)
        .value("device", Value::Text(name.clone()))
        .value(
            "write_cache",
            Value::Text(cache.clone().unwrap_or_else(|| "unknown".into())),
        )
        .value(
            "fua",
            Value::Text(fua.clone().unwrap_or_else(|| "unknown".into())),
        );
    if cache.is_none() && fua.is_none() {
        return c.status(Status::Unknown);
    }
    // virtio-blk and Xen disks report rotational whatever backs them.
    let virtual_disk = name.starts_with("vd") || name.starts_with("xvd");
    if rotational.as_deref() == Some("1") && virtual_disk {
        let found = format!(
            "{}; a virtual disk reports rotational whatever backs it: the measured \
             fdatasync latency tells",
            c.found
        );
        return c.found(found);
    }
    if rotational.as_deref() == Some("1") {
        return c.status(Status::Warn).fix(
            "put dataLogDir on an SSD (ideally one with power-loss protection, which \
             reports `write through`), or at least a disk of its own so the log's \
             sequential writes are not interleaved with other I/O",
        );
    }
    c
}
