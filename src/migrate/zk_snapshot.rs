//! Apache ZooKeeper's snapshot files (`FileSnap`, `SnapStream`):
//! `snapshot.<zxid hex>`, plain or with a `.gz` / `.snappy` extension
//! (gzip, or snappy-java's stream framing), holding a FileHeader (magic
//! "ZKSN", version 2, dbid), the sessions and the DataTree (as in a SNAP:
//! `peer::snap_stream`), then a seal: the Adler32 of the uncompressed bytes
//! so far as an i64 and the string "/". 3.6+ adds a ZxidDigest (zxid,
//! digest version, tree digest) and a second seal; 3.9 may add the last
//! processed zxid and a third.

use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use super::{zxid_from_name, MigrateError};
use crate::peer::snap_stream::{self, SnapReader};
use crate::peer::Decoded;
use crate::snapshot::SessionEntry;
use crate::tree::Tree;

pub const PREFIX: &str = "snapshot";
const MAGIC: &[u8; 4] = b"ZKSN";
const VERSION: i32 = 2;
/// FileSnap's dbId.
const DB_ID: i64 = -1;
/// SnapStream's gzip and snappy-java framing.
const SNAPPY_MAGIC: &[u8; 8] = b"\x82SNAPPY\0";
const SNAPPY_HEADER_BYTES: usize = 16;
/// A snappy-java block is at most 32 KiB uncompressed by default; bound
/// what one length prefix may ask for.
const SNAPPY_BLOCK_MAX: usize = 64 << 20;
const READ_CHUNK: usize = 256 << 10;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compression {
    None,
    Gzip,
    Snappy,
}

/// SnapStream.getStreamMode: by the file name's last extension.
pub fn compression_of(name: &str) -> Compression {
    match name.rsplit('.').next() {
        Some("gz") => Compression::Gzip,
        Some("snappy") => Compression::Snappy,
        _ => Compression::None,
    }
}

/// The digest ZooKeeper wrote after a snapshot's nodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ZxidDigest {
    pub zxid: i64,
    pub version: i32,
    pub digest: i64,
}

pub struct ZkSnapshot {
    pub path: PathBuf,
    /// From the file name: the last txn started when it was taken.
    pub zxid: i64,
    pub tree: Tree,
    pub sessions: Vec<SessionEntry>,
    pub digest: Option<ZxidDigest>,
    /// Nodes whose ACL number the snapshot's cache lacks (a setACL while
    /// it was written): the replay must give them their list.
    pub unresolved_acls: Vec<(std::sync::Arc<str>, i64)>,
}

/// Snapshot files in `dir`, newest first.
pub fn list(dir: &Path) -> io::Result<Vec<(i64, PathBuf)>> {
    let mut v = super::files_by_zxid(dir, PREFIX)?;
    v.reverse();
    Ok(v)
}

/// snappy-java's SnappyOutputStream framing: a 16-byte header (magic,
/// version, compatible version), then blocks of an i32 compressed length
/// and raw snappy; a header may recur (concatenated streams).
struct SnappyJava<R> {
    inner: R,
    block: Vec<u8>,
    at: usize,
    started: bool,
}

impl<R: Read> SnappyJava<R> {
    fn new(inner: R) -> Self {
        SnappyJava {
            inner,
            block: Vec::new(),
            at: 0,
            started: false,
        }
    }

    /// The next block into `self.block`; false at the end of the stream.
    fn next_block(&mut self) -> io::Result<bool> {
        let bad = |m: &str| io::Error::new(io::ErrorKind::InvalidData, m.to_string());
        loop {
            let mut len = [0u8; 4];
            if !read_full_or_eof(&mut self.inner, &mut len)? {
                return if self.started {
                    Ok(false)
                } else {
                    Err(bad("empty file: no snappy-java header"))
                };
            }
            if len == SNAPPY_MAGIC[..4] {
                let mut rest = [0u8; SNAPPY_HEADER_BYTES - 4];
                self.inner.read_exact(&mut rest)?;
                if rest[..4] != SNAPPY_MAGIC[4..] {
                    return Err(bad("a damaged snappy-java header"));
                }
                self.started = true;
                continue;
            }
            if !self.started {
                return Err(bad("not a snappy-java stream (no \\x82SNAPPY header)"));
            }
            let n = u32::from_be_bytes(len) as usize;
            if n > SNAPPY_BLOCK_MAX {
                return Err(bad("a snappy block longer than 64 MiB"));
            }
            let mut compressed = vec![0u8; n];
            self.inner.read_exact(&mut compressed)?;
            self.block = snap::raw::Decoder::new()
                .decompress_vec(&compressed)
                .map_err(|e| bad(&format!("snappy: {e}")))?;
            self.at = 0;
            return Ok(true);
        }
    }
}

impl<R: Read> Read for SnappyJava<R> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        while self.at == self.block.len() {
            if !self.next_block()? {
                return Ok(0);
            }
        }
        let n = out.len().min(self.block.len() - self.at);
        out[..n].copy_from_slice(&self.block[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

/// Fills `buf`; false if the stream ended before its first byte.
fn read_full_or_eof(r: &mut impl Read, buf: &mut [u8]) -> io::Result<bool> {
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..]) {
            Ok(0) if got == 0 => return Ok(false),
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(true)
}

/// The uncompressed stream, read ahead into a buffer; `consume` moves past
/// bytes and keeps the Adler32 and offset of what was consumed.
struct Stream<'a> {
    path: &'a Path,
    src: Box<dyn Read>,
    buf: Vec<u8>,
    start: usize,
    offset: u64,
    adler: adler2::Adler32,
    eof: bool,
}

impl Stream<'_> {
    fn err(&self, m: impl Into<String>) -> MigrateError {
        MigrateError::at(self.path, self.offset, m)
    }

    fn pending(&self) -> &[u8] {
        &self.buf[self.start..]
    }

    /// Reads more; false at the end of the stream.
    fn more(&mut self) -> Result<bool, MigrateError> {
        if self.eof {
            return Ok(false);
        }
        self.buf.drain(..self.start);
        self.start = 0;
        let have = self.buf.len();
        self.buf.resize(have + READ_CHUNK, 0);
        let n = loop {
            match self.src.read(&mut self.buf[have..]) {
                Ok(n) => break n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    self.buf.truncate(have);
                    return Err(self.err(format!("reading: {e}")));
                }
            }
        };
        self.buf.truncate(have + n);
        self.eof = n == 0;
        Ok(n > 0)
    }

    fn consume(&mut self, n: usize) {
        self.adler
            .write_slice(&self.buf[self.start..self.start + n]);
        self.start += n;
        self.offset += n as u64;
    }

    /// The next `n` bytes, consumed; None at the end of the stream.
    fn take(&mut self, n: usize) -> Result<Option<Vec<u8>>, MigrateError> {
        while self.pending().len() < n {
            if !self.more()? {
                return Ok(None);
            }
        }
        let v = self.pending()[..n].to_vec();
        self.consume(n);
        Ok(Some(v))
    }

    fn take_exact(&mut self, n: usize, what: &str) -> Result<Vec<u8>, MigrateError> {
        self.take(n)?
            .ok_or_else(|| self.err(format!("the file ends inside {what}")))
    }

    fn at_end(&mut self) -> Result<bool, MigrateError> {
        Ok(self.pending().is_empty() && !self.more()?)
    }

    /// SnapStream.checkSealIntegrity: the Adler32 so far, then "/".
    fn seal(&mut self) -> Result<(), MigrateError> {
        let expected = self.adler.checksum() as i64;
        let at = self.offset;
        let val = i64::from_be_bytes(self.take_exact(8, "a checksum")?.try_into().unwrap());
        if val != expected {
            return Err(MigrateError::at(
                self.path,
                at,
                format!(
                    "checksum mismatch: the file says {val:#x}, its bytes give {expected:#x} \
                     (Adler32): the snapshot is damaged"
                ),
            ));
        }
        let slash = self.take_exact(5, "the seal's \"/\"")?;
        if slash != [0, 0, 0, 1, b'/'] {
            return Err(MigrateError::at(
                self.path,
                at + 8,
                "the seal does not end with \"/\"",
            ));
        }
        Ok(())
    }
}

/// Reads and checks one snapshot file whole.
pub fn read(path: &Path) -> Result<ZkSnapshot, MigrateError> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let zxid = zxid_from_name(&name, PREFIX)
        .ok_or_else(|| MigrateError::file(path, "not named snapshot.<zxid in hex>"))?;
    let file = std::fs::File::open(path).map_err(|e| MigrateError::file(path, e.to_string()))?;
    let file = io::BufReader::with_capacity(1 << 20, file);
    let src: Box<dyn Read> = match compression_of(&name) {
        Compression::None => Box::new(file),
        Compression::Gzip => Box::new(flate2::read::MultiGzDecoder::new(file)),
        Compression::Snappy => Box::new(SnappyJava::new(file)),
    };
    let mut s = Stream {
        path,
        src,
        buf: Vec::new(),
        start: 0,
        offset: 0,
        adler: adler2::Adler32::new(),
        eof: false,
    };
    let header = s.take_exact(16, "the file header")?;
    if &header[..4] != MAGIC {
        return Err(MigrateError::at(
            path,
            0,
            format!(
                "not an Apache ZooKeeper snapshot: magic {:?}, expected \"ZKSN\"",
                String::from_utf8_lossy(&header[..4])
            ),
        ));
    }
    let version = i32::from_be_bytes(header[4..8].try_into().unwrap());
    if version != VERSION {
        return Err(MigrateError::at(
            path,
            4,
            format!("snapshot format version {version}; only version 2 exists"),
        ));
    }
    let mut reader = SnapReader::default();
    while !reader.nodes_done() {
        match reader.decode(s.pending()) {
            Ok(Decoded::Item(item, n)) => {
                s.consume(n);
                reader.accept(item).map_err(|e| s.err(e.to_string()))?;
            }
            Ok(Decoded::More) => {
                if !s.more()? {
                    return Err(s.err("the file ends inside the tree: the snapshot is truncated"));
                }
            }
            Err(e) => return Err(s.err(e.to_string())),
        }
    }
    s.seal()?;
    let mut digest = None;
    if !s.at_end()? {
        let d = s.take_exact(20, "the zxid digest")?;
        digest = Some(ZxidDigest {
            zxid: i64::from_be_bytes(d[..8].try_into().unwrap()),
            version: i32::from_be_bytes(d[8..12].try_into().unwrap()),
            digest: i64::from_be_bytes(d[12..].try_into().unwrap()),
        });
        s.seal()?;
        // 3.9: the last processed zxid and a third seal.
        if !s.at_end()? {
            s.take_exact(8, "the last processed zxid")?;
            s.seal()?;
            if !s.at_end()? {
                return Err(s.err("bytes after the last seal"));
            }
        }
    }
    let unresolved_acls = reader.unresolved_acls().to_vec();
    let (tree, sessions) = reader.finish_file(zxid);
    Ok(ZkSnapshot {
        path: path.to_path_buf(),
        zxid,
        tree,
        sessions,
        digest,
        unresolved_acls,
    })
}

/// A writer that keeps the Adler32 of what went through it.
struct Sealed<W> {
    inner: W,
    adler: adler2::Adler32,
}

impl<W: Write> Sealed<W> {
    fn put(&mut self, b: &[u8]) -> io::Result<()> {
        self.adler.write_slice(b);
        self.inner.write_all(b)
    }

    fn seal(&mut self) -> io::Result<()> {
        let val = self.adler.checksum() as i64;
        self.put(&val.to_be_bytes())?;
        self.put(&[0, 0, 0, 1, b'/'])
    }
}

/// Writes `tree` and `sessions` as ZooKeeper 3.8 writes a snapshot
/// (uncompressed, with the digest of the tree at its last zxid) into `dir`
/// as `snapshot.<zxid hex>`, fsynced. Returns the file's path.
pub fn write(dir: &Path, tree: &Tree, sessions: &[SessionEntry]) -> io::Result<PathBuf> {
    let zxid = tree.last_zxid();
    let path = dir.join(format!("{PREFIX}.{zxid:x}"));
    let file = std::fs::File::create(&path)?;
    let mut out = Sealed {
        inner: io::BufWriter::with_capacity(1 << 20, file),
        adler: adler2::Adler32::new(),
    };
    let mut header = Vec::with_capacity(16);
    header.extend_from_slice(MAGIC);
    header.extend_from_slice(&VERSION.to_be_bytes());
    header.extend_from_slice(&DB_ID.to_be_bytes());
    out.put(&header)?;
    let mut result = Ok(());
    snap_stream::encode_file_body(tree, sessions, 1 << 20, |chunk| {
        result = out.put(&chunk);
        result.is_ok()
    });
    result?;
    out.seal()?;
    let mut d = Vec::with_capacity(20);
    d.extend_from_slice(&zxid.to_be_bytes());
    d.extend_from_slice(&super::digest::DIGEST_VERSION.to_be_bytes());
    d.extend_from_slice(&super::digest::tree_digest(tree).to_be_bytes());
    out.put(&d)?;
    out.seal()?;
    let file = out.inner.into_inner().map_err(|e| e.into_error())?;
    file.sync_all()?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tree::{Txn, TxnOp};

    fn sample() -> Tree {
        let mut t = Tree::new();
        for (i, p) in ["/a", "/a/b", "/c"].iter().enumerate() {
            t.apply(&Txn {
                zxid: i as i64 + 1,
                time_ms: 7,
                session_id: 5,
                cxid: 1,
                op: TxnOp::Create {
                    path: (*p).into(),
                    data: Some(bytes::Bytes::from_static(b"data")),
                    acl: crate::tree::open_acl(),
                    ephemeral_owner: if *p == "/c" { 5 } else { 0 },
                    parent_cversion: 1,
                    create2: false,
                },
            });
        }
        t
    }

    #[test]
    fn written_snapshots_read_back_with_their_digest() {
        let dir = tempfile::tempdir().unwrap();
        let t = sample();
        let sessions = [SessionEntry {
            id: 5,
            timeout_ms: 4000,
        }];
        let path = write(dir.path(), &t, &sessions).unwrap();
        assert_eq!(path.file_name().unwrap(), "snapshot.3");
        let back = read(&path).unwrap();
        assert_eq!(back.zxid, 3);
        assert_eq!(back.sessions, sessions);
        assert_eq!(
            back.tree.paths().collect::<Vec<_>>(),
            t.paths().collect::<Vec<_>>()
        );
        assert_eq!(
            back.digest,
            Some(ZxidDigest {
                zxid: 3,
                version: 2,
                digest: super::super::digest::tree_digest(&t),
            })
        );
    }

    #[test]
    fn every_damaged_byte_is_found_and_placed() {
        let dir = tempfile::tempdir().unwrap();
        let path = write(dir.path(), &sample(), &[]).unwrap();
        let good = std::fs::read(&path).unwrap();
        for at in [0, 5, 20, good.len() / 2, good.len() - 30, good.len() - 1] {
            let mut bad = good.clone();
            bad[at] ^= 0x41;
            std::fs::write(&path, &bad).unwrap();
            let e = read(&path)
                .err()
                .unwrap_or_else(|| panic!("byte {at} not noticed"));
            assert!(e.offset.is_some(), "{e}");
        }
        std::fs::write(&path, &good[..good.len() - 10]).unwrap();
        let e = read(&path).err().expect("a truncated file");
        assert!(e.to_string().contains("ends inside"), "{e}");
    }

    #[test]
    fn gzip_and_snappy_java_streams_read_as_plain() {
        let dir = tempfile::tempdir().unwrap();
        let plain = std::fs::read(write(dir.path(), &sample(), &[]).unwrap()).unwrap();
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(&plain).unwrap();
        std::fs::write(dir.path().join("snapshot.3.gz"), gz.finish().unwrap()).unwrap();
        // snappy-java: header, then blocks of at most 32 KiB.
        let mut sn = SNAPPY_MAGIC.to_vec();
        sn.extend_from_slice(&1i32.to_be_bytes());
        sn.extend_from_slice(&1i32.to_be_bytes());
        for block in plain.chunks(40) {
            let c = snap::raw::Encoder::new().compress_vec(block).unwrap();
            sn.extend_from_slice(&(c.len() as u32).to_be_bytes());
            sn.extend_from_slice(&c);
        }
        std::fs::write(dir.path().join("snapshot.3.snappy"), sn).unwrap();
        for name in ["snapshot.3.gz", "snapshot.3.snappy"] {
            let back = read(&dir.path().join(name)).unwrap();
            assert_eq!(back.tree.znode_count(), sample().znode_count(), "{name}");
        }
        let listed: Vec<_> = list(dir.path())
            .unwrap()
            .into_iter()
            .map(|(z, _)| z)
            .collect();
        assert_eq!(listed, vec![3, 3, 3]);
    }

    /// A 3.4/3.5 snapshot ends at its first seal (no digest): it reads,
    /// without one.
    #[test]
    fn a_snapshot_without_a_digest_reads() {
        let dir = tempfile::tempdir().unwrap();
        let path = write(dir.path(), &sample(), &[]).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        // Drop the digest (20 bytes) and its seal (13).
        std::fs::write(&path, &bytes[..bytes.len() - 33]).unwrap();
        let back = read(&path).unwrap();
        assert_eq!(back.digest, None);
        assert_eq!(back.tree.znode_count(), sample().znode_count());
    }
}
