//! `ringkeeper log dump FILE`, `ringkeeper log verify DIR` and
//! `ringkeeper snapshot dump FILE`: readable views of the files on disk, in
//! the spirit of ZooKeeper's TxnLogToolkit and SnapshotFormatter. The dumps
//! also read Apache ZooKeeper's own txn logs and snapshots (by their magic),
//! as zkTxnLogToolkit.sh and zkSnapShotToolkit.sh do.

use std::io::Write;
use std::path::Path;

use crate::log::record::{self, Read};
use crate::log::{header, recovery, txn_codec};

mod txn_line;

/// How `log dump` prints each txn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DumpFormat {
    /// One line per txn as ZooKeeper's TxnLogToolkit prints it, between a
    /// header line and "EOF reached after N txns." (see `txn_line`).
    Text,
    /// One JSON object per line per txn, nothing else.
    Json,
}

/// Prints every record of one segment; stops at the end of the written part.
/// Refuses a file without ringkeeper's segment header (an all-zero one, a
/// segment a crash caught before its header was durable, has no txns).
pub fn dump_log(file: &Path, format: DumpFormat, out: &mut dyn Write) -> Result<(), String> {
    let mut head = [0u8; 4];
    if std::fs::File::open(file)
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut head))
        .is_ok()
        && crate::migrate::zk_log::is_zookeeper_log(&head)
    {
        return dump_zookeeper_log(file, format, out);
    }
    match header::identify(file).map_err(|e| format!("{}: {e}", file.display()))? {
        Ok(_) => {}
        Err(reason) => {
            return Err(format!(
                "{} is not a ringkeeper txn log segment: {reason}",
                file.display()
            ))
        }
    }
    let bytes = std::fs::read(file).map_err(|e| format!("{}: {e}", file.display()))?;
    let io = |e: std::io::Error| format!("writing the dump: {e}");
    if format == DumpFormat::Text {
        writeln!(out, "ringkeeper txn log segment {}", file.display()).map_err(io)?;
    }
    let mut off = header::records_start(&bytes, bytes.len());
    let mut count = 0u64;
    loop {
        match record::read(&bytes[off..]) {
            Read::Record(h, payload, total) => {
                let txn = txn_codec::decode(payload)
                    .map_err(|e| format!("{}:{off}: undecodable txn: {e}", file.display()))?;
                let line = match format {
                    DumpFormat::Text => txn_line::text(&txn),
                    DumpFormat::Json => txn_line::json(&txn, off, h.durable_zxid),
                };
                writeln!(out, "{line}").map_err(io)?;
                off += total;
                count += 1;
            }
            Read::End => break,
            Read::Bad(why) => return Err(format!("{}:{off}: {why}", file.display())),
        }
    }
    if format == DumpFormat::Text {
        writeln!(out, "EOF reached after {count} txns.").map_err(io)?;
    }
    Ok(())
}

/// An Apache ZooKeeper txn log, each txn as [`dump_log`] prints ours
/// (`durable_zxid` in JSON is the txn's own zxid: ZooKeeper's records do
/// not carry one).
fn dump_zookeeper_log(file: &Path, format: DumpFormat, out: &mut dyn Write) -> Result<(), String> {
    use crate::migrate::zk_log;
    let bytes = std::fs::read(file).map_err(|e| format!("{}: {e}", file.display()))?;
    let io = |e: std::io::Error| format!("writing the dump: {e}");
    if format == DumpFormat::Text {
        writeln!(out, "Apache ZooKeeper txn log {}", file.display()).map_err(io)?;
    }
    let mut count = 0u64;
    zk_log::records(file, &bytes, |r| {
        let fail = |m: String| crate::migrate::MigrateError::at(file, r.offset, m);
        let (txn, _) = zk_log::decode_txn(r.entry).map_err(|e| fail(e.to_string()))?;
        let line = match format {
            DumpFormat::Text => txn_line::text(&txn),
            DumpFormat::Json => txn_line::json(&txn, r.offset as usize, txn.zxid),
        };
        writeln!(out, "{line}").map_err(|e| fail(io(e)))?;
        count += 1;
        Ok(())
    })
    .map_err(|e| e.to_string())?;
    if format == DumpFormat::Text {
        writeln!(out, "EOF reached after {count} txns.").map_err(io)?;
    }
    Ok(())
}

/// Checks every record of every segment in `dir`, as recovery would.
pub fn verify_log(dir: &Path, out: &mut dyn Write) -> Result<(), String> {
    // Files that look like logs or snapshots but are not ours fail the
    // check: recovery would refuse to start on them.
    crate::startup::foreign::check(dir, "log dir")?;
    let segments = recovery::list_segments(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut count = 0u64;
    let end = recovery::scan(&segments, i64::MIN, |f| {
        txn_codec::decode(f.payload).map_err(|e| format!("undecodable txn: {e}"))?;
        count += 1;
        Ok(())
    })
    .map_err(|c| c.to_string())?;
    let _ = writeln!(
        out,
        "{} segments, {count} records: all checksums good",
        segments.len()
    );
    if let recovery::ScanEnd::Torn {
        segment,
        offset,
        reason,
    } = end
    {
        let _ = writeln!(
            out,
            "torn tail at {}:{offset} ({reason}): never acknowledged; recovery cuts it",
            segments[segment].path.display()
        );
    }
    Ok(())
}

pub fn dump_snapshot(file: &Path, format: DumpFormat, out: &mut dyn Write) -> Result<(), String> {
    let bytes = std::fs::read(file).map_err(|e| format!("{}: {e}", file.display()))?;
    let (tree, sessions, zxid) = if bytes.starts_with(crate::snapshot::MAGIC) {
        let l = crate::snapshot::decode(&bytes).map_err(|e| format!("{}: {e}", file.display()))?;
        (l.tree, l.sessions, l.zxid)
    } else {
        // Apache ZooKeeper's, plain or compressed (read by its name).
        drop(bytes);
        let s = crate::migrate::zk_snapshot::read(file).map_err(|e| e.to_string())?;
        (s.tree, s.sessions, s.zxid)
    };
    let io = |e: std::io::Error| format!("writing the dump: {e}");
    if format == DumpFormat::Json {
        writeln!(
            out,
            "{{\"zxid\":\"{zxid:#x}\",\"sessions\":[{}],\"nodes\":{}}}",
            sessions
                .iter()
                .map(|s| format!("{{\"id\":\"{:#x}\",\"timeout_ms\":{}}}", s.id, s.timeout_ms))
                .collect::<Vec<_>>()
                .join(","),
            tree.znode_count()
        )
        .map_err(io)?;
        let mut result = Ok(());
        tree.visit(|p, n| {
            if result.is_err() {
                return;
            }
            let st = n.stat();
            result = writeln!(
                out,
                "{{\"path\":{},\"czxid\":\"{:#x}\",\"mzxid\":\"{:#x}\",\"pzxid\":\"{:#x}\",\
                 \"ctime\":{},\"mtime\":{},\"version\":{},\"cversion\":{},\"aversion\":{},\
                 \"ephemeral_owner\":\"{:#x}\",\"data_length\":{},\"num_children\":{},\
                 \"acl\":{},\"data\":{}}}",
                txn_line::json_str(p),
                st.czxid,
                st.mzxid,
                st.pzxid,
                st.ctime,
                st.mtime,
                st.version,
                st.cversion,
                st.aversion,
                n.ephemeral_owner,
                st.data_length,
                st.num_children,
                txn_line::json_acl(&n.acl),
                txn_line::json_bytes(n.data())
            );
        });
        return result.map_err(io);
    }
    let _ = writeln!(out, "zxid {zxid:#x}");
    let _ = writeln!(out, "sessions {}", sessions.len());
    for s in &sessions {
        let _ = writeln!(out, "  session {:#x} timeout {} ms", s.id, s.timeout_ms);
    }
    let _ = writeln!(out, "nodes {}", tree.znode_count());
    tree.visit(|p, n| {
        let st = n.stat();
        let data = n
            .data()
            .map(|d| format!("{:?}", String::from_utf8_lossy(&d[..d.len().min(64)])))
            .unwrap_or_else(|| "null".into());
        let _ = writeln!(
            out,
            "  {p}\n    cZxid={:#x} mZxid={:#x} pZxid={:#x} ctime={} mtime={} version={} cversion={} aversion={} ephemeralOwner={:#x} dataLength={} numChildren={} data={data}",
            st.czxid, st.mzxid, st.pzxid, st.ctime, st.mtime, st.version, st.cversion, st.aversion,
            n.ephemeral_owner, st.data_length, st.num_children
        );
    });
    Ok(())
}
