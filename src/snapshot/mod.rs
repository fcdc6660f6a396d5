//! Snapshots: the tree and the sessions as of one zxid, written in the
//! background to a temporary file with a crc32c trailer, fsynced, renamed
//! into place (`snapshot.<zxid hex>`), and the directory fsynced.
//!
//! Layout: magic, zxid, sessions (id, timeout), nodes parents first (path,
//! data, acl, stat as stored), then the crc32c of everything before it.

pub mod policy;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::proto::jute::{Reader, Writer};
use crate::proto::{decode_acls, encode_acls};
use crate::tree::{Node, Tree};

/// The start of every snapshot file (and what identifies it as ours).
pub const MAGIC: &[u8; 8] = b"RKSNAP01";
pub const PREFIX: &str = "snapshot.";

pub fn file_name(zxid: i64) -> String {
    format!("{PREFIX}{zxid:016x}")
}

pub fn zxid_of(path: &Path) -> Option<i64> {
    let hex = path.file_name()?.to_str()?.strip_prefix(PREFIX)?;
    u64::from_str_radix(hex, 16).ok().map(|v| v as i64)
}

/// A session as the snapshot keeps it: the password derives from the id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SessionEntry {
    pub id: i64,
    pub timeout_ms: i32,
}

pub struct Loaded {
    pub tree: Tree,
    pub sessions: Vec<SessionEntry>,
    pub zxid: i64,
}

/// A writer that keeps the crc32c of everything written through it.
struct Crc<W> {
    inner: W,
    crc: u32,
}

impl<W: Write> Write for Crc<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.crc = crc32c::crc32c_append(self.crc, &buf[..n]);
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// Streams a snapshot into `out`, node by node: memory while writing is
/// one node's encoding, not a copy of the tree (a 1M-znode snapshot used
/// to build a ~200 MB buffer first).
pub fn encode_to(tree: &Tree, sessions: &[SessionEntry], out: impl Write) -> std::io::Result<()> {
    let mut out = Crc { inner: out, crc: 0 };
    let mut buf = Vec::with_capacity(4096);
    buf.extend_from_slice(MAGIC);
    let mut w = Writer::new(&mut buf);
    w.i64(tree.last_zxid()).i32(sessions.len() as i32);
    for s in sessions {
        w.i64(s.id).i32(s.timeout_ms);
    }
    w.i32(tree.znode_count() as i32);
    out.write_all(&buf)?;
    let mut result = Ok(());
    let mut written = 0usize;
    tree.visit(|p, n| {
        if result.is_err() {
            return;
        }
        buf.clear();
        let mut w = Writer::new(&mut buf);
        w.string(p).opt_buffer(n.data());
        encode_acls(&mut w, &n.acl);
        w.i64(n.czxid)
            .i64(n.mzxid)
            .i64(n.ctime)
            .i64(n.mtime)
            .i32(n.version)
            .i32(n.cversion())
            .i32(n.aversion)
            .i64(n.ephemeral_owner)
            .i64(n.pzxid());
        written += 1;
        result = out.write_all(&buf);
    });
    result?;
    assert_eq!(written, tree.znode_count(), "the count written up front");
    let crc = out.crc;
    out.inner.write_all(&crc.to_be_bytes())?;
    out.flush()
}

pub fn encode(tree: &Tree, sessions: &[SessionEntry]) -> Vec<u8> {
    let mut buf = Vec::new();
    encode_to(tree, sessions, &mut buf).expect("writing to a Vec");
    buf
}

pub fn decode(bytes: &[u8]) -> Result<Loaded, String> {
    if bytes.len() < MAGIC.len() + 4 || &bytes[..MAGIC.len()] != MAGIC {
        return Err("not a ringkeeper snapshot".into());
    }
    let (body, trailer) = bytes.split_at(bytes.len() - 4);
    let crc = u32::from_be_bytes(trailer.try_into().unwrap());
    if crc32c::crc32c(body) != crc {
        return Err("checksum mismatch".into());
    }
    let mut r = Reader::of_member(&body[MAGIC.len()..]);
    let e = |e: crate::proto::jute::DecodeError| e.to_string();
    let zxid = r.read_i64().map_err(e)?;
    let n = r.read_count(12).map_err(e)?;
    let mut sessions = Vec::with_capacity(n);
    for _ in 0..n {
        sessions.push(SessionEntry {
            id: r.read_i64().map_err(e)?,
            timeout_ms: r.read_i32().map_err(e)?,
        });
    }
    let count = r.read_count(4).map_err(e)?;
    let mut tree = Tree::empty();
    for _ in 0..count {
        let path: Arc<str> = Arc::from(r.read_string().map_err(e)?);
        let name = match crate::tree::path::split_parent(&path) {
            Some((_, name)) => name,
            None if &*path == "/" => "",
            None => return Err(format!("bad node path {path:?}")),
        };
        let data = r.read_buffer_opt().map_err(e)?;
        let acl = Arc::from(decode_acls(&mut r).map_err(e)?);
        let mut node = Node::with(name, data, acl);
        node.czxid = r.read_i64().map_err(e)?;
        node.mzxid = r.read_i64().map_err(e)?;
        node.ctime = r.read_i64().map_err(e)?;
        node.mtime = r.read_i64().map_err(e)?;
        node.version = r.read_i32().map_err(e)?;
        node.set_cversion(r.read_i32().map_err(e)?);
        node.aversion = r.read_i32().map_err(e)?;
        node.ephemeral_owner = r.read_i64().map_err(e)?;
        let pzxid = r.read_i64().map_err(e)?;
        if pzxid < 0 {
            // zxids are (epoch << 32 | counter), never negative.
            return Err(format!("bad pzxid {pzxid:#x} for {path}"));
        }
        node.set_pzxid(pzxid);
        tree.restore_node(path, node)?;
    }
    if r.remaining() != 0 {
        return Err("trailing bytes".into());
    }
    tree.set_last_zxid(zxid);
    Ok(Loaded {
        tree,
        sessions,
        zxid,
    })
}

/// Writeback of a snapshot is started every this many bytes.
const WRITEBACK_CHUNK_BYTES: u64 = 1 << 20;

/// A file whose writeback starts every [`WRITEBACK_CHUNK_BYTES`] as it is
/// written, waiting for the chunk before: at most two chunks are ever in
/// the disk's queue. Written whole and then fsynced, a 190 MB snapshot
/// (1M znodes) put all of it in the queue at once, ahead of the txn log's
/// writes, whose syncs then waited behind it: 100 ms of no commits.
///
/// With a pace, each chunk also waits until the bytes written are no more
/// than the pace allows since the start: the thread that encodes into this
/// file sleeps in between, so its CPU time is spread out with its I/O.
struct PacedWriteback {
    file: std::fs::File,
    written: u64,
    started_to: u64,
    pace: Option<Pace>,
}

/// At most `bytes_per_s` since `since`.
struct Pace {
    bytes_per_s: u64,
    since: std::time::Instant,
}

impl Pace {
    /// Sleeps until `written` bytes are within the pace.
    fn wait_for(&self, written: u64) {
        let due = std::time::Duration::from_secs_f64(written as f64 / self.bytes_per_s as f64);
        if let Some(early) = due.checked_sub(self.since.elapsed()) {
            std::thread::sleep(early);
        }
    }
}

impl PacedWriteback {
    fn sync_range(&self, from: u64, flags: libc::c_uint) -> std::io::Result<()> {
        use std::os::unix::io::AsRawFd;
        // SAFETY: sync_file_range takes no memory; the descriptor is ours.
        let rc = unsafe {
            libc::sync_file_range(
                self.file.as_raw_fd(),
                from as libc::off64_t,
                WRITEBACK_CHUNK_BYTES as libc::off64_t,
                flags,
            )
        };
        if rc == 0 {
            Ok(())
        } else {
            Err(std::io::Error::last_os_error())
        }
    }
}

impl Write for PacedWriteback {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.file.write(buf)?;
        self.written += n as u64;
        while self.written - self.started_to >= WRITEBACK_CHUNK_BYTES {
            let start = self.started_to;
            self.sync_range(start, libc::SYNC_FILE_RANGE_WRITE)?;
            if let Some(before) = start.checked_sub(WRITEBACK_CHUNK_BYTES) {
                self.sync_range(
                    before,
                    libc::SYNC_FILE_RANGE_WAIT_BEFORE
                        | libc::SYNC_FILE_RANGE_WRITE
                        | libc::SYNC_FILE_RANGE_WAIT_AFTER,
                )?;
            }
            self.started_to += WRITEBACK_CHUNK_BYTES;
            if let Some(pace) = &self.pace {
                pace.wait_for(self.started_to);
            }
        }
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.file.flush()
    }
}

/// Writes a snapshot durably: temp file (past the page cache where the
/// filesystem allows it, [`crate::aligned::ChunkWriter`]; else its
/// writeback paced as it is written), the whole write at most
/// `bytes_per_s` when that is not 0, fsync, rename, fsync of the
/// directory.
///
/// Why direct: a background snapshot written through the page cache costs the
/// machine twice for every byte. The snapshot thread copies each byte into
/// the cache (`copy_folio_from_iter_atomic`, about half of that thread's
/// samples at 5M znodes), and the kernel's writeback workers then copy it
/// to the disk and reclaim the pages; all of it runs next to the serving
/// threads, and at 5M znodes (a 1 GB snapshot, paced over half a minute) a
/// snapshot is running most of the time. Written direct, the disk reads
/// each chunk straight from the writer's buffer, a write returns when the disk has
/// it (so at most one chunk is ever queued ahead of the txn log's writes),
/// and the snapshot leaves no dirty pages behind for the log's fdatasync
/// to wait on.
///
/// Durability is the same either way: the file is fsynced (the disk's
/// volatile cache, and the file's size and extents) before the rename.
pub fn write(
    dir: &Path,
    tree: &Tree,
    sessions: &[SessionEntry],
    bytes_per_s: u64,
) -> std::io::Result<PathBuf> {
    let final_path = dir.join(file_name(tree.last_zxid()));
    let tmp = dir.join(format!("{}.tmp", file_name(tree.last_zxid())));
    let pace = || {
        (bytes_per_s > 0).then(|| Pace {
            bytes_per_s,
            since: std::time::Instant::now(),
        })
    };
    let direct_pace = pace();
    let after_chunk = |written| {
        if let Some(p) = &direct_pace {
            p.wait_for(written);
        }
    };
    let f = match crate::aligned::ChunkWriter::create(&tmp, after_chunk)? {
        Some(mut out) => {
            encode_to(tree, sessions, &mut out)?;
            out.finish()?
        }
        None => {
            let f = PacedWriteback {
                file: std::fs::File::create(&tmp)?,
                written: 0,
                started_to: 0,
                pace: pace(),
            };
            let mut out = std::io::BufWriter::with_capacity(1 << 20, f);
            encode_to(tree, sessions, &mut out)?;
            out.into_inner().map_err(|e| e.into_error())?.file
        }
    };
    f.sync_all()?;
    drop(f);
    std::fs::rename(&tmp, &final_path)?;
    std::fs::File::open(dir)?.sync_all()?;
    Ok(final_path)
}

/// Snapshot files in `dir`, newest first.
pub fn list(dir: &Path) -> std::io::Result<Vec<(i64, PathBuf)>> {
    let mut v = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if let Some(z) = zxid_of(&path) {
            v.push((z, path));
        }
    }
    v.sort_by_key(|s| std::cmp::Reverse(s.0));
    Ok(v)
}

/// The newest snapshot that reads back whole; damaged ones are reported and skipped.
pub fn load_newest(dir: &Path) -> std::io::Result<Option<Loaded>> {
    for (_, path) in list(dir)? {
        match std::fs::read(&path)
            .map_err(|e| e.to_string())
            .and_then(|b| decode(&b))
        {
            Ok(l) => {
                tracing::info!(snapshot = %path.display(), zxid = format_args!("{:#x}", l.zxid), "loaded snapshot");
                return Ok(Some(l));
            }
            Err(e) => tracing::warn!(snapshot = %path.display(), "skipping damaged snapshot: {e}"),
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::Acl;
    use crate::tree::{Txn, TxnOp};

    #[test]
    fn round_trip_keeps_tree_and_child_order() {
        let mut t = Tree::new();
        for (i, name) in ["zeta", "alpha", "m10", "b"].iter().enumerate() {
            t.apply(&Txn {
                zxid: i as i64 + 1,
                time_ms: 5,
                session_id: 9,
                cxid: 0,
                op: TxnOp::Create {
                    path: Arc::from(format!("/{name}")),
                    data: Some(bytes::Bytes::from_static(b"d")),
                    acl: Arc::from(vec![Acl::world_all()]),
                    ephemeral_owner: if i == 0 { 9 } else { 0 },
                    parent_cversion: i as i32 + 1,
                    create2: false,
                },
            });
        }
        let s = [SessionEntry {
            id: 9,
            timeout_ms: 4000,
        }];
        let bytes = encode(&t, &s);
        let back = decode(&bytes).unwrap();
        assert_eq!(back.zxid, 4);
        assert_eq!(back.sessions, s);
        assert_eq!(back.tree.children("/"), t.children("/"));
        assert_eq!(back.tree.ephemerals_of(9), t.ephemerals_of(9));
        assert_eq!(
            back.tree.get("/b").unwrap().stat(),
            t.get("/b").unwrap().stat()
        );
        assert_eq!(back.tree.node_count(), t.node_count());
        let mut bad = bytes.clone();
        bad[20] ^= 1;
        assert!(decode(&bad).is_err());
    }

    /// A paced write writes the same bytes as an unpaced one and takes at
    /// least as long as its pace allows: 3 MiB at 10 MB/s waits for the
    /// second and third 1 MiB chunks, 0.2 s and more.
    #[test]
    fn paced_write_is_the_same_snapshot_and_keeps_its_pace() {
        let mut t = Tree::new();
        let value = bytes::Bytes::from(vec![7u8; 1000]);
        for i in 0..3200 {
            t.apply(&Txn {
                zxid: i + 1,
                time_ms: 5,
                session_id: 0,
                cxid: 0,
                op: TxnOp::Create {
                    path: Arc::from(format!("/n{i}")),
                    data: Some(value.clone()),
                    acl: Arc::from(vec![Acl::world_all()]),
                    ephemeral_owner: 0,
                    parent_cversion: i as i32 + 1,
                    create2: false,
                },
            });
        }
        let expected = encode(&t, &[]);
        assert!(expected.len() as u64 > 3 * WRITEBACK_CHUNK_BYTES);
        let dir = tempfile::tempdir().unwrap();
        for bytes_per_s in [0, 10_000_000] {
            let started = std::time::Instant::now();
            let path = write(dir.path(), &t, &[], bytes_per_s).unwrap();
            let took = started.elapsed();
            assert_eq!(std::fs::read(&path).unwrap(), expected, "{bytes_per_s} B/s");
            if bytes_per_s > 0 {
                assert!(took >= std::time::Duration::from_millis(200), "{took:?}");
            }
            std::fs::remove_file(path).unwrap();
        }
    }

    /// cversion and pzxid survive a round trip for a node that had children
    /// and lost them (they live with the children's index, which such a
    /// node keeps) and for one that never had any; a negative pzxid, which
    /// no zxid can be, is refused with an error rather than a panic.
    #[test]
    fn child_counters_round_trip_and_bad_pzxid_is_refused() {
        let mut t = Tree::new();
        let create = |path: &str, zxid: i64, parent_cversion: i32| Txn {
            zxid,
            time_ms: 5,
            session_id: 9,
            cxid: 0,
            op: TxnOp::Create {
                path: Arc::from(path),
                data: None,
                acl: Arc::from(vec![Acl::world_all()]),
                ephemeral_owner: 0,
                parent_cversion,
                create2: false,
            },
        };
        t.apply(&create("/p", 1, 1));
        t.apply(&create("/p/c", 2, 1));
        t.apply(&create("/leaf", 3, 2));
        t.apply(&Txn {
            zxid: 4,
            time_ms: 6,
            session_id: 9,
            cxid: 1,
            op: TxnOp::Delete {
                path: Arc::from("/p/c"),
            },
        });
        let back = decode(&encode(&t, &[])).unwrap();
        for p in ["/p", "/leaf"] {
            assert_eq!(
                back.tree.get(p).unwrap().stat(),
                t.get(p).unwrap().stat(),
                "{p}"
            );
        }
        let p = back.tree.get("/p").unwrap();
        assert_eq!((p.cversion(), p.pzxid(), p.czxid), (1, 4, 1));
        let leaf = back.tree.get("/leaf").unwrap();
        assert_eq!((leaf.cversion(), leaf.pzxid()), (0, 3));

        let mut bad = t.clone();
        bad.update("/leaf", |n| n.set_pzxid(-5));
        let err = decode(&encode(&bad, &[])).err().expect("refused");
        assert!(err.contains("bad pzxid"), "{err}");
    }
}
