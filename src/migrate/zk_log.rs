//! Apache ZooKeeper's txn logs (`FileTxnLog`): `log.<first zxid hex>`, a
//! FileHeader (magic "ZKLG", version 2, dbid), then records: the Adler32
//! of the entry as an i64, the entry as a jute buffer (TxnHeader, the txn
//! record, and in 3.6+ a TxnDigest), and the byte 'B'. The file is
//! preallocated with zeros: an empty entry ends it, as does a record cut
//! short by a crash (FileTxnIterator.next reads either as the end of that
//! file); a checksum that does not match stops the replay, as in
//! ZooKeeper ("CRC check failed").

use std::io;
use std::path::{Path, PathBuf};

use super::MigrateError;
use crate::peer::zk_txn::{self, ZkTxnError};
use crate::tree::{Txn, TxnOp};

pub const PREFIX: &str = "log";
const MAGIC: &[u8; 4] = b"ZKLG";
const HEADER_BYTES: usize = 16;
const END_OF_RECORD: u8 = b'B';
/// BinaryInputArchive's default jute.maxbuffer bound, plus its slack.
const ENTRY_BYTES_MAX: usize = (0xfffff + 1024) * 64;

/// One record: where it starts in its file and its entry's bytes.
pub struct Record<'a> {
    pub offset: u64,
    pub entry: &'a [u8],
}

/// ZooDefs.OpCode values read off a txn header here.
const OP_SET_DATA: i32 = 5;
const OP_RECONFIG: i32 = 16;
/// TxnHeader: clientId i64, cxid i32, zxid i64, time i64, type i32.
const TXN_HEADER_BYTES: usize = 32;
const TXN_DIGEST_BYTES: usize = 12;

fn be_i32(b: &[u8], at: usize) -> i32 {
    i32::from_be_bytes(b[at..at + 4].try_into().unwrap())
}

fn be_i64(b: &[u8], at: usize) -> i64 {
    i64::from_be_bytes(b[at..at + 8].try_into().unwrap())
}

/// A log entry as a txn (SerializeUtils.deserializeTxn), and the
/// TxnDigest (version, tree digest) after it if the writer had digests
/// on. A reconfig is its SetDataTxn on /zookeeper/config, as
/// DataTree.processTxn applies it; a closeSession from before
/// CloseSessionTxn (3.4, 3.5) or with closeSessionTxn.enabled=false has
/// no paths: the caller adds the session's ephemerals, as killSession
/// does.
pub fn decode_txn(entry: &[u8]) -> Result<(Txn, Option<(i32, i64)>), ZkTxnError> {
    if entry.len() < TXN_HEADER_BYTES {
        return Err(ZkTxnError::Malformed("shorter than a txn header".into()));
    }
    let patched;
    let entry = if be_i32(entry, 28) == OP_RECONFIG {
        let mut e = entry.to_vec();
        e[28..32].copy_from_slice(&OP_SET_DATA.to_be_bytes());
        patched = e;
        &patched[..]
    } else {
        entry
    };
    let (txn, used) = match zk_txn::decode_prefix(entry) {
        Ok(t) => t,
        Err(ZkTxnError::CloseSessionWithoutPaths) => (
            Txn {
                session_id: be_i64(entry, 0),
                cxid: be_i32(entry, 8),
                zxid: be_i64(entry, 12),
                time_ms: be_i64(entry, 20),
                op: TxnOp::CloseSession {
                    ephemerals: Vec::new(),
                },
            },
            entry.len(),
        ),
        Err(e) => return Err(e),
    };
    let rest = &entry[used..];
    let digest = (rest.len() >= TXN_DIGEST_BYTES).then(|| (be_i32(rest, 0), be_i64(rest, 4)));
    Ok((txn, digest))
}

/// Whether `bytes` start as a ZooKeeper txn log.
pub fn is_zookeeper_log(bytes: &[u8]) -> bool {
    bytes.starts_with(MAGIC)
}

/// Log files in `dir`, oldest first.
pub fn list(dir: &Path) -> io::Result<Vec<(i64, PathBuf)>> {
    super::files_by_zxid(dir, PREFIX)
}

/// FileTxnLog.getLogFiles: the newest log starting at or before
/// `snapshot_zxid` and every later one.
pub fn after_snapshot(logs: &[(i64, PathBuf)], snapshot_zxid: i64) -> Vec<(i64, PathBuf)> {
    let start = logs
        .iter()
        .filter(|(z, _)| *z <= snapshot_zxid)
        .map(|(z, _)| *z)
        .max()
        .unwrap_or(0);
    logs.iter().filter(|(z, _)| *z >= start).cloned().collect()
}

/// Calls `each` with every record of the log file `bytes` (read from
/// `path`), in order, up to its end.
pub fn records(
    path: &Path,
    bytes: &[u8],
    mut each: impl FnMut(Record) -> Result<(), MigrateError>,
) -> Result<(), MigrateError> {
    if bytes.len() < HEADER_BYTES {
        return Err(MigrateError::at(path, 0, "shorter than a txn log header"));
    }
    if &bytes[..4] != MAGIC {
        return Err(MigrateError::at(
            path,
            0,
            format!(
                "not an Apache ZooKeeper txn log: magic {:?}, expected \"ZKLG\"",
                String::from_utf8_lossy(&bytes[..4])
            ),
        ));
    }
    let version = i32::from_be_bytes(bytes[4..8].try_into().unwrap());
    if version != 2 {
        return Err(MigrateError::at(
            path,
            4,
            format!("txn log format version {version}; only version 2 exists"),
        ));
    }
    let mut at = HEADER_BYTES;
    loop {
        let Some(head) = bytes.get(at..at + 12) else {
            return Ok(()); // the file ends: next log
        };
        let crc = i64::from_be_bytes(head[..8].try_into().unwrap());
        let len = i32::from_be_bytes(head[8..].try_into().unwrap());
        if len == 0 {
            return Ok(()); // preallocated zeros
        }
        if len < 0 || len as usize > ENTRY_BYTES_MAX {
            return Err(MigrateError::at(
                path,
                at as u64,
                format!("a record of {len} bytes: the log is damaged"),
            ));
        }
        let end = at + 12 + len as usize;
        let (Some(entry), Some(&eor)) = (bytes.get(at + 12..end), bytes.get(end)) else {
            return Ok(()); // a record cut short by a crash: the end
        };
        if eor != END_OF_RECORD {
            return Ok(()); // "Last transaction was partial."
        }
        let mut adler = adler2::Adler32::new();
        adler.write_slice(entry);
        if adler.checksum() as i64 != crc {
            return Err(MigrateError::at(
                path,
                at as u64,
                format!(
                    "CRC check failed: the record says {crc:#x}, its bytes give {:#x}",
                    adler.checksum()
                ),
            ));
        }
        each(Record {
            offset: at as u64,
            entry,
        })?;
        at = end + 1;
    }
}

/// A log file as FileTxnLog writes one, with `entries` (each a TxnHeader
/// and its record, as `peer::zk_txn::encode` gives them), padded with
/// zeros as FileTxnLog's preallocation leaves it.
pub fn log_file<E: AsRef<[u8]>>(entries: &[E]) -> Vec<u8> {
    let mut b = MAGIC.to_vec();
    b.extend_from_slice(&2i32.to_be_bytes());
    b.extend_from_slice(&0i64.to_be_bytes());
    for e in entries {
        let e = e.as_ref();
        let mut a = adler2::Adler32::new();
        a.write_slice(e);
        b.extend_from_slice(&(a.checksum() as i64).to_be_bytes());
        b.extend_from_slice(&(e.len() as i32).to_be_bytes());
        b.extend_from_slice(e);
        b.push(END_OF_RECORD);
    }
    b.resize(b.len() + 100, 0);
    b
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    fn read_all(bytes: &[u8]) -> Result<Vec<Vec<u8>>, MigrateError> {
        let mut v = Vec::new();
        records(Path::new("log.1"), bytes, |r| {
            v.push(r.entry.to_vec());
            Ok(())
        })?;
        Ok(v)
    }

    #[test]
    fn records_end_at_the_padding_or_a_torn_tail() {
        let f = log_file::<&[u8]>(&[b"one", b"two!"]);
        assert_eq!(
            read_all(&f).unwrap(),
            vec![b"one".to_vec(), b"two!".to_vec()]
        );
        // Torn inside the second record: the first only.
        let torn = &f[..16 + 8 + 4 + 3 + 1 + 10];
        assert_eq!(read_all(torn).unwrap().len(), 1);
    }

    #[test]
    fn a_flipped_byte_is_a_crc_failure_at_its_record() {
        let mut f = log_file::<&[u8]>(&[b"one", b"two!"]);
        let second = 16 + 8 + 4 + 3 + 1;
        f[second + 12] ^= 1;
        let e = read_all(&f).unwrap_err();
        assert_eq!(e.offset, Some(second as u64));
        assert!(e.message.contains("CRC"), "{e}");
        let mut g = log_file::<&[u8]>(&[b"x"]);
        g[0] = b'Q';
        assert!(read_all(&g).unwrap_err().message.contains("ZKLG"));
    }

    #[test]
    fn logs_from_the_one_holding_the_snapshot_on() {
        let logs: Vec<_> = [1i64, 0x50, 0x100]
            .iter()
            .map(|z| (*z, PathBuf::from(format!("log.{z:x}"))))
            .collect();
        let z = |v: Vec<(i64, PathBuf)>| v.into_iter().map(|(z, _)| z).collect::<Vec<_>>();
        assert_eq!(z(after_snapshot(&logs, 0x60)), vec![0x50, 0x100]);
        assert_eq!(z(after_snapshot(&logs, 0x50)), vec![0x50, 0x100]);
        assert_eq!(z(after_snapshot(&logs, 0)), vec![1, 0x50, 0x100]);
    }

    fn header(kind: i32, zxid: i64) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend_from_slice(&0x55i64.to_be_bytes()); // session
        b.extend_from_slice(&3i32.to_be_bytes()); // cxid
        b.extend_from_slice(&zxid.to_be_bytes());
        b.extend_from_slice(&1_700_000_000_000i64.to_be_bytes());
        b.extend_from_slice(&kind.to_be_bytes());
        b
    }

    /// A reconfig's SetDataTxn applies as a setData of /zookeeper/config,
    /// a closeSession without CloseSessionTxn (3.4, 3.5) decodes with no
    /// paths, and a TxnDigest after the record is returned.
    #[test]
    fn reconfig_old_close_session_and_digest() {
        let mut e = header(OP_RECONFIG, 7);
        let config = b"server.1=127.0.0.1:2888:3888:participant\nversion=100000000";
        e.extend_from_slice(&17i32.to_be_bytes());
        e.extend_from_slice(b"/zookeeper/config");
        e.extend_from_slice(&(config.len() as i32).to_be_bytes());
        e.extend_from_slice(config);
        e.extend_from_slice(&4i32.to_be_bytes()); // version
        e.extend_from_slice(&2i32.to_be_bytes()); // digest version
        e.extend_from_slice(&1234i64.to_be_bytes()); // tree digest
        let (txn, digest) = decode_txn(&e).unwrap();
        assert_eq!(txn.zxid, 7);
        match txn.op {
            TxnOp::SetData {
                path,
                data,
                version,
            } => {
                assert_eq!(&*path, "/zookeeper/config");
                assert_eq!(data.as_deref(), Some(&config[..]));
                assert_eq!(version, 4);
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(digest, Some((2, 1234)));

        let close = header(-11, 8);
        let (txn, digest) = decode_txn(&close).unwrap();
        assert_eq!(txn.session_id, 0x55);
        assert_eq!(
            txn.op,
            TxnOp::CloseSession {
                ephemerals: Vec::new()
            }
        );
        assert_eq!(digest, None);
        assert!(decode_txn(&close[..20]).is_err());
    }
}
