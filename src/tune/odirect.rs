//! O_DIRECT on dataLogDir: a temporary file opened O_DIRECT|O_DSYNC, as the
//! log's segments are (src/log/direct.rs), and one aligned 4 KiB block
//! written through it.

use std::os::unix::fs::{FileExt, OpenOptionsExt};

use super::logdir::TempFile;
use super::{Check, Context, Status, Value};
use crate::aligned::{AlignedBuf, ALIGN_BYTES};

pub const NAME: &str = "o_direct";
pub const TITLE: &str = "O_DIRECT on dataLogDir";

/// Ok, or the step that failed and why.
pub fn probe(dir: &std::path::Path) -> Result<(), String> {
    let tmp = TempFile::name_in(dir, "odirect");
    let f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_DIRECT | libc::O_DSYNC)
        .open(&tmp.path)
        .map_err(|e| format!("open with O_DIRECT|O_DSYNC: {e}"))?;
    let mut buf = AlignedBuf::zeroed(ALIGN_BYTES);
    buf.bytes_mut()[..8].copy_from_slice(b"RKTUNE\0\0");
    match f.write_at(buf.bytes(), 0) {
        Ok(n) if n == ALIGN_BYTES => Ok(()),
        Ok(n) => Err(format!(
            "an aligned {ALIGN_BYTES}-byte write wrote {n} bytes"
        )),
        Err(e) => Err(format!("an aligned {ALIGN_BYTES}-byte O_DIRECT write: {e}")),
    }
}

pub fn check(ctx: &Context) -> Check {
    let c = Check::new(NAME, TITLE).why(
        "ringkeeper.logWrite=direct (the default) makes each batch durable with one \
         O_DIRECT|O_DSYNC write: no copy into the page cache and no writeback for the \
         sync to wait behind. Snapshots are written with O_DIRECT too. Where the \
         filesystem refuses it, the log falls back to write + fdatasync and snapshots go \
         through the page cache: slower syncs, and a snapshot's writeback in the way of \
         the log's.",
    );
    let configured = format!("{:?}", ctx.config.log_write).to_lowercase();
    match probe(&ctx.log_dir) {
        Ok(()) => c
            .found(format!(
                "{}: an O_DIRECT|O_DSYNC file takes an aligned {ALIGN_BYTES}-byte write \
                 (ringkeeper.logWrite={configured})",
                ctx.log_dir.display()
            ))
            .value("o_direct", Value::Text("ok".into())),
        Err(e) => c
            .status(Status::Fail)
            .found(format!("{}: {e}", ctx.log_dir.display()))
            .fix(
                "put dataLogDir on a filesystem with O_DIRECT (ext4, xfs); on this one the \
                 server runs, but with ringkeeper.logWrite=buffered semantics (set it \
                 explicitly to say so)",
            )
            .value("o_direct", Value::Text(e)),
    }
}
