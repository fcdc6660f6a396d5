//! A txn as Apache ZooKeeper carries it in a quorum PROPOSAL (and writes it
//! in its txn log): `TxnHeader{i64 clientId; i32 cxid; i64 zxid; i64 time;
//! i32 type}`, then the record for that type from zookeeper.jute, then an
//! optional `TxnDigest` that this server never writes and ignores when
//! reading (ZAB-PROTOCOL-NOTES §4.1). Jute: big-endian; a buffer is an i32
//! length (-1: null) and bytes; a string an i32 length and UTF-8.
//!
//! The header type is the one Apache ZooKeeper's PrepRequestProcessor
//! gives the same request, because a Java member answers its own clients
//! from the txn the leader sent (FinalRequestProcessor answers a create2
//! with the stat of the DataTree's result, which only the txn types
//! create2, createContainer and createTTL fill in): a create2 request is
//! txn type create2 (15), a container or TTL create its own type (19, 21,
//! a node's kind lives in its ephemeral owner here), the reaper's delete
//! deleteContainer (20; ContainerManager's request, session 0, cxid 0).
//! Inside a multi ZooKeeper rebuilds each create from its flags, so a
//! create there is create (1), createContainer or createTTL, never
//! create2 (its DataTree refuses 15 inside a multi).
//!
//! Otherwise ringkeeper's [`Txn`] maps onto it one to one, except that a
//! check carries no version (ZooKeeper's DataTree ignores
//! CheckVersionTxn's version when applying; -1 is written where
//! ZooKeeper writes the node's version + 1) and that a failed multi's ops
//! before the failure are written as error 0 (ZooKeeper writes their
//! records, which its DataTree then applies as error 0 all the same).
//! Decoding is total: bytes give a txn or an error.

use std::sync::Arc;

use bytes::Bytes;
use thiserror::Error;

use crate::proto::codes::{CONTAINER_EPHEMERAL_OWNER, TTL_OWNER_MASK};
use crate::proto::jute::{DecodeError, Reader, Writer};
use crate::proto::{decode_acls, encode_acls};
use crate::tree::{Txn, TxnOp};

/// `ZooDefs.OpCode` values a txn header carries.
mod kind {
    pub const ERROR: i32 = -1;
    pub const CREATE: i32 = 1;
    pub const DELETE: i32 = 2;
    pub const SET_DATA: i32 = 5;
    pub const SET_ACL: i32 = 7;
    pub const CHECK: i32 = 13;
    pub const MULTI: i32 = 14;
    pub const CREATE2: i32 = 15;
    pub const CREATE_CONTAINER: i32 = 19;
    pub const DELETE_CONTAINER: i32 = 20;
    pub const CREATE_TTL: i32 = 21;
    pub const CREATE_SESSION: i32 = -10;
    pub const CLOSE_SESSION: i32 = -11;
}

#[derive(Debug, Error, PartialEq, Eq)]
pub enum ZkTxnError {
    #[error("malformed txn: {0}")]
    Malformed(String),
    #[error("txn type {0} is not one this server applies")]
    UnknownType(i32),
    #[error("a multi inside a multi")]
    NestedMulti,
    #[error("closeSession without its list of ephemerals (the leader runs with closeSessionTxn.enabled=false), which this server cannot apply")]
    CloseSessionWithoutPaths,
    #[error("an ephemeral node owned by session {owner:#x} created by session {session:#x}: ZooKeeper's CreateTxn cannot say that")]
    ForeignEphemeralOwner { owner: i64, session: i64 },
}

impl From<DecodeError> for ZkTxnError {
    fn from(e: DecodeError) -> ZkTxnError {
        ZkTxnError::Malformed(e.to_string())
    }
}

/// Appends `txn` in ZooKeeper's encoding.
pub fn encode(txn: &Txn, out: &mut Vec<u8>) -> Result<(), ZkTxnError> {
    // The header's type is known once the record is written: it goes in
    // last, over a placeholder (a record of its own, copied after the
    // header, grew and copied the payload several times per txn).
    const TYPE_AT: usize = 8 + 4 + 8 + 8;
    let start = out.len();
    out.reserve(TYPE_AT + 4 + record_size_hint(&txn.op));
    Writer::new(out)
        .i64(txn.session_id)
        .i32(txn.cxid)
        .i64(txn.zxid)
        .i64(txn.time_ms)
        .i32(0);
    match encode_record(&txn.op, txn.session_id, Place::Txn, out) {
        Ok(t) => {
            out[start + TYPE_AT..start + TYPE_AT + 4].copy_from_slice(&t.to_be_bytes());
            Ok(())
        }
        Err(e) => {
            out.truncate(start);
            Err(e)
        }
    }
}

/// About how many bytes `op`'s record takes.
fn record_size_hint(op: &TxnOp) -> usize {
    use crate::proto::jute::record_size_hint as hint;
    match op {
        TxnOp::Create {
            path, data, acl, ..
        } => hint(path, data.as_deref(), acl.len()),
        TxnOp::SetData { path, data, .. } => hint(path, data.as_deref(), 0),
        TxnOp::Delete { path } | TxnOp::Check { path } => hint(path, None, 0),
        _ => 256,
    }
}

/// Where an op is encoded: as the txn, or as an op of a multi.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Place {
    Txn,
    InMulti,
}

/// The header type of `op` and its record, appended to `out`.
fn encode_record(
    op: &TxnOp,
    session_id: i64,
    place: Place,
    out: &mut Vec<u8>,
) -> Result<i32, ZkTxnError> {
    let mut w = Writer::new(out);
    Ok(match op {
        TxnOp::Create {
            path,
            data,
            acl,
            ephemeral_owner,
            parent_cversion,
            create2,
        } => {
            let owner = *ephemeral_owner;
            w.string(path).opt_buffer(data.as_deref());
            encode_acls(&mut w, acl);
            if owner == CONTAINER_EPHEMERAL_OWNER {
                w.i32(*parent_cversion);
                kind::CREATE_CONTAINER
            } else if owner < 0 && owner & TTL_OWNER_MASK == TTL_OWNER_MASK {
                w.i32(*parent_cversion).i64(owner & !TTL_OWNER_MASK);
                kind::CREATE_TTL
            } else if owner == 0 || owner == session_id {
                w.bool(owner != 0).i32(*parent_cversion);
                if *create2 && place == Place::Txn {
                    kind::CREATE2
                } else {
                    kind::CREATE
                }
            } else {
                return Err(ZkTxnError::ForeignEphemeralOwner {
                    owner,
                    session: session_id,
                });
            }
        }
        TxnOp::Delete { path } => {
            w.string(path);
            // Only the reaper deletes as session 0 (sessions are never 0).
            if session_id == 0 && place == Place::Txn {
                kind::DELETE_CONTAINER
            } else {
                kind::DELETE
            }
        }
        TxnOp::SetData {
            path,
            data,
            version,
        } => {
            w.string(path).opt_buffer(data.as_deref()).i32(*version);
            kind::SET_DATA
        }
        TxnOp::SetAcl {
            path,
            acl,
            aversion,
        } => {
            w.string(path);
            encode_acls(&mut w, acl);
            w.i32(*aversion);
            kind::SET_ACL
        }
        TxnOp::Check { path } => {
            w.string(path).i32(-1);
            kind::CHECK
        }
        TxnOp::CreateSession { timeout_ms } => {
            w.i32(*timeout_ms);
            kind::CREATE_SESSION
        }
        TxnOp::CloseSession { ephemerals } => {
            w.string_vec(ephemerals);
            kind::CLOSE_SESSION
        }
        TxnOp::Error { code } => {
            w.i32(*code);
            kind::ERROR
        }
        TxnOp::Multi(ops) => {
            w.i32(ops.len() as i32);
            for op in ops {
                if matches!(op, TxnOp::Multi(_) | TxnOp::MultiError { .. }) {
                    return Err(ZkTxnError::NestedMulti);
                }
                let mut inner = Vec::new();
                let t = encode_record(op, session_id, Place::InMulti, &mut inner)?;
                Writer::new(out).i32(t).buffer(&inner);
            }
            kind::MULTI
        }
        TxnOp::MultiError { codes } => {
            w.i32(codes.len() as i32);
            for code in codes {
                let mut inner = Vec::new();
                Writer::new(&mut inner).i32(*code);
                Writer::new(out).i32(kind::ERROR).buffer(&inner);
            }
            kind::MULTI
        }
    })
}

/// The txn in ZooKeeper's encoding at the front of `bytes` (a digest or
/// anything else after the record is ignored).
pub fn decode(bytes: &[u8]) -> Result<Txn, ZkTxnError> {
    decode_prefix(bytes).map(|(txn, _)| txn)
}

/// As [`decode`], with how many bytes the header and record took: what
/// follows them in a txn log entry is the `TxnDigest` (`i32 version; i64
/// treeDigest`) when the writer had digests on.
pub fn decode_prefix(bytes: &[u8]) -> Result<(Txn, usize), ZkTxnError> {
    let mut r = Reader::of_member(bytes);
    let session_id = r.read_i64()?;
    let cxid = r.read_i32()?;
    let zxid = r.read_i64()?;
    let time_ms = r.read_i64()?;
    let t = r.read_i32()?;
    let op = if t == kind::MULTI {
        decode_multi(&mut r, session_id)?
    } else {
        decode_record(t, &mut r, session_id)?
    };
    let used = r.position();
    Ok((
        Txn {
            zxid,
            time_ms,
            session_id,
            cxid,
            op,
        },
        used,
    ))
}

fn path(r: &mut Reader) -> Result<Arc<str>, ZkTxnError> {
    Ok(Arc::from(r.read_string()?.as_str()))
}

fn data(r: &mut Reader) -> Result<Option<Bytes>, ZkTxnError> {
    Ok(r.read_buffer_opt()?.map(Bytes::copy_from_slice))
}

fn decode_record(t: i32, r: &mut Reader, session_id: i64) -> Result<TxnOp, ZkTxnError> {
    Ok(match t {
        kind::CREATE | kind::CREATE2 | kind::CREATE_CONTAINER | kind::CREATE_TTL => {
            let path = path(r)?;
            let data = data(r)?;
            let acl: Arc<[_]> = decode_acls(r)?.into();
            let (ephemeral_owner, parent_cversion) = match t {
                kind::CREATE_CONTAINER => (CONTAINER_EPHEMERAL_OWNER, r.read_i32()?),
                kind::CREATE_TTL => {
                    let parent_cversion = r.read_i32()?;
                    let ttl = r.read_i64()?;
                    if ttl <= 0 || ttl & TTL_OWNER_MASK != 0 {
                        return Err(ZkTxnError::Malformed(format!("ttl {ttl}")));
                    }
                    (TTL_OWNER_MASK | ttl, parent_cversion)
                }
                _ => {
                    let ephemeral = r.read_bool()?;
                    (if ephemeral { session_id } else { 0 }, r.read_i32()?)
                }
            };
            TxnOp::Create {
                path,
                data,
                acl,
                ephemeral_owner,
                parent_cversion,
                create2: t == kind::CREATE2,
            }
        }
        kind::DELETE | kind::DELETE_CONTAINER => TxnOp::Delete { path: path(r)? },
        kind::SET_DATA => TxnOp::SetData {
            path: path(r)?,
            data: data(r)?,
            version: r.read_i32()?,
        },
        kind::SET_ACL => {
            let path = path(r)?;
            let acl = decode_acls(r)?.into();
            TxnOp::SetAcl {
                path,
                acl,
                aversion: r.read_i32()?,
            }
        }
        kind::CHECK => {
            let path = path(r)?;
            let _version = r.read_i32()?;
            TxnOp::Check { path }
        }
        kind::CREATE_SESSION => TxnOp::CreateSession {
            timeout_ms: r.read_i32()?,
        },
        kind::CLOSE_SESSION => {
            if r.remaining() == 0 {
                return Err(ZkTxnError::CloseSessionWithoutPaths);
            }
            let ephemerals = r
                .read_string_vec()?
                .into_iter()
                .map(|p| Arc::from(p.as_str()))
                .collect();
            TxnOp::CloseSession { ephemerals }
        }
        kind::ERROR => TxnOp::Error {
            code: r.read_i32()?,
        },
        kind::MULTI => return Err(ZkTxnError::NestedMulti),
        other => return Err(ZkTxnError::UnknownType(other)),
    })
}

/// A MultiTxn. With no error entry it is the ops; with one, the results
/// ZooKeeper's DataTree gives: ops before the first error 0, error entries
/// their code, other ops after it -2 (RUNTIMEINCONSISTENCY).
fn decode_multi(r: &mut Reader, session_id: i64) -> Result<TxnOp, ZkTxnError> {
    // Each entry is at least a type and a buffer length.
    let n = r.read_count(8)?;
    let mut ops = Vec::with_capacity(n);
    for _ in 0..n {
        let t = r.read_i32()?;
        let inner = r.read_buffer()?;
        let mut ir = Reader::of_member(inner);
        ops.push(decode_record(t, &mut ir, session_id)?);
    }
    if !ops.iter().any(|o| matches!(o, TxnOp::Error { .. })) {
        return Ok(TxnOp::Multi(ops));
    }
    let mut failed = false;
    let codes = ops
        .iter()
        .map(|o| match o {
            TxnOp::Error { code } => {
                failed = true;
                *code
            }
            _ if failed => crate::proto::codes::err::RUNTIME_INCONSISTENCY,
            _ => 0,
        })
        .collect();
    Ok(TxnOp::MultiError { codes })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::{Acl, Id};
    use proptest::prelude::*;

    fn open_acl() -> Arc<[Acl]> {
        vec![Acl {
            perms: 31,
            id: Id {
                scheme: "world".into(),
                id: "anyone".into(),
            },
        }]
        .into()
    }

    fn txn(op: TxnOp) -> Txn {
        Txn {
            zxid: 0x1_0000_0007,
            time_ms: 1_700_000_000_123,
            session_id: 0x0100_0000_0000_0042,
            cxid: 9,
            op,
        }
    }

    fn create(owner: i64) -> TxnOp {
        TxnOp::Create {
            path: "/a/b".into(),
            data: Some(Bytes::from_static(b"xy")),
            acl: open_acl(),
            ephemeral_owner: owner,
            parent_cversion: 3,
            create2: false,
        }
    }

    fn round_trip(t: &Txn) -> Txn {
        let mut b = Vec::new();
        encode(t, &mut b).unwrap();
        decode(&b).unwrap()
    }

    #[test]
    fn every_op_round_trips() {
        let s = txn(TxnOp::Error { code: 0 }).session_id;
        let ops = vec![
            create(0),
            create(s),
            create(CONTAINER_EPHEMERAL_OWNER),
            create(TTL_OWNER_MASK | 5000),
            TxnOp::Create {
                path: "/n".into(),
                data: None,
                acl: open_acl(),
                ephemeral_owner: 0,
                parent_cversion: 0,
                create2: false,
            },
            TxnOp::Create {
                path: "/n2".into(),
                data: None,
                acl: open_acl(),
                ephemeral_owner: s,
                parent_cversion: 0,
                create2: true,
            },
            TxnOp::Delete { path: "/a".into() },
            TxnOp::SetData {
                path: "/a".into(),
                data: Some(Bytes::new()),
                version: 4,
            },
            TxnOp::SetAcl {
                path: "/a".into(),
                acl: open_acl(),
                aversion: 2,
            },
            TxnOp::Check { path: "/a".into() },
            TxnOp::CreateSession { timeout_ms: 30000 },
            TxnOp::CloseSession {
                ephemerals: vec!["/e1".into(), "/e2".into()],
            },
            TxnOp::Error { code: -101 },
            TxnOp::Multi(vec![create(0), TxnOp::Delete { path: "/x".into() }]),
            TxnOp::MultiError {
                codes: vec![0, -101, -2],
            },
        ];
        for op in ops {
            let t = txn(op);
            assert_eq!(round_trip(&t), t);
        }
    }

    /// Byte layouts written out from zookeeper.jute by hand.
    #[test]
    fn golden_bytes() {
        let mut b = Vec::new();
        encode(&txn(TxnOp::CreateSession { timeout_ms: 30000 }), &mut b).unwrap();
        let mut want = Vec::new();
        want.extend_from_slice(&0x0100_0000_0000_0042i64.to_be_bytes());
        want.extend_from_slice(&9i32.to_be_bytes());
        want.extend_from_slice(&0x1_0000_0007i64.to_be_bytes());
        want.extend_from_slice(&1_700_000_000_123i64.to_be_bytes());
        want.extend_from_slice(&(-10i32).to_be_bytes());
        want.extend_from_slice(&30000i32.to_be_bytes());
        assert_eq!(b, want);

        let mut b = Vec::new();
        encode(&txn(create(0)), &mut b).unwrap();
        let mut rec = Vec::new();
        rec.extend_from_slice(&4i32.to_be_bytes());
        rec.extend_from_slice(b"/a/b");
        rec.extend_from_slice(&2i32.to_be_bytes());
        rec.extend_from_slice(b"xy");
        rec.extend_from_slice(&1i32.to_be_bytes());
        rec.extend_from_slice(&31i32.to_be_bytes());
        rec.extend_from_slice(&5i32.to_be_bytes());
        rec.extend_from_slice(b"world");
        rec.extend_from_slice(&6i32.to_be_bytes());
        rec.extend_from_slice(b"anyone");
        rec.push(0); // ephemeral: false
        rec.extend_from_slice(&3i32.to_be_bytes());
        assert_eq!(&b[28..32], &1i32.to_be_bytes(), "type create");
        assert_eq!(&b[32..], &rec[..]);

        let mut b = Vec::new();
        let set = TxnOp::SetData {
            path: "/a".into(),
            data: None,
            version: 7,
        };
        encode(&txn(set), &mut b).unwrap();
        let mut rec = (5i32).to_be_bytes().to_vec();
        rec.extend_from_slice(&2i32.to_be_bytes());
        rec.extend_from_slice(b"/a");
        rec.extend_from_slice(&(-1i32).to_be_bytes());
        rec.extend_from_slice(&7i32.to_be_bytes());
        assert_eq!(&b[28..], &rec[..]);
    }

    fn header_type(t: &Txn) -> i32 {
        let mut b = Vec::new();
        encode(t, &mut b).unwrap();
        i32::from_be_bytes(b[28..32].try_into().unwrap())
    }

    /// Each txn's header type is the one ZooKeeper's PrepRequestProcessor
    /// gives the request behind it: a Java follower answers its client
    /// from it (a create2 proposed as create left the client unanswered,
    /// an NPE in Create2Response.serialize).
    #[test]
    fn header_types_are_zookeepers() {
        let s = txn(TxnOp::Error { code: 0 }).session_id;
        let create2 = |owner| match create(owner) {
            TxnOp::Create {
                path,
                data,
                acl,
                ephemeral_owner,
                parent_cversion,
                ..
            } => TxnOp::Create {
                path,
                data,
                acl,
                ephemeral_owner,
                parent_cversion,
                create2: true,
            },
            _ => unreachable!(),
        };
        let set = TxnOp::SetData {
            path: "/a".into(),
            data: None,
            version: 1,
        };
        let cases = vec![
            (create(0), 1),
            (create(s), 1),
            (create2(0), 15),
            (create2(s), 15),
            (create(CONTAINER_EPHEMERAL_OWNER), 19),
            (create(TTL_OWNER_MASK | 5000), 21),
            (TxnOp::Delete { path: "/a".into() }, 2),
            (set.clone(), 5),
            (
                TxnOp::SetAcl {
                    path: "/a".into(),
                    acl: open_acl(),
                    aversion: 1,
                },
                7,
            ),
            (TxnOp::Check { path: "/a".into() }, 13),
            (TxnOp::Multi(vec![create(0), set]), 14),
            (TxnOp::MultiError { codes: vec![-101] }, 14),
            (TxnOp::Error { code: -110 }, -1),
            (TxnOp::CreateSession { timeout_ms: 1 }, -10),
            (TxnOp::CloseSession { ephemerals: vec![] }, -11),
        ];
        for (op, want) in cases {
            assert_eq!(header_type(&txn(op.clone())), want, "{op:?}");
        }
        // The reaper's delete: ContainerManager's deleteContainer request.
        let reaped = Txn {
            session_id: 0,
            cxid: 0,
            ..txn(TxnOp::Delete { path: "/c".into() })
        };
        assert_eq!(header_type(&reaped), 20);
        let mut b = Vec::new();
        encode(&reaped, &mut b).unwrap();
        assert_eq!(decode(&b).unwrap(), reaped);
    }

    /// ZooKeeper's MultiTxn never holds create2 (it rebuilds a multi's
    /// creates from their flags, and its DataTree refuses type 15 there)
    /// nor deleteContainer.
    #[test]
    fn a_multi_holds_creates_and_deletes() {
        let mut c2 = create(0);
        if let TxnOp::Create { create2, .. } = &mut c2 {
            *create2 = true;
        }
        let t = Txn {
            session_id: 0,
            ..txn(TxnOp::Multi(vec![c2, TxnOp::Delete { path: "/x".into() }]))
        };
        let mut b = Vec::new();
        encode(&t, &mut b).unwrap();
        let mut r = Reader::new(&b[32..]);
        assert_eq!(r.read_i32().unwrap(), 2);
        let mut types = Vec::new();
        for _ in 0..2 {
            types.push(r.read_i32().unwrap());
            r.read_buffer().unwrap();
        }
        assert_eq!(types, [1, 2]);
        assert_eq!(
            decode(&b).unwrap(),
            Txn {
                session_id: 0,
                ..txn(TxnOp::Multi(vec![
                    create(0),
                    TxnOp::Delete { path: "/x".into() }
                ]))
            }
        );
    }

    #[test]
    fn a_trailing_digest_is_ignored() {
        let t = txn(TxnOp::Delete { path: "/d".into() });
        let mut b = Vec::new();
        encode(&t, &mut b).unwrap();
        b.extend_from_slice(&2i32.to_be_bytes());
        b.extend_from_slice(&0x1234_5678_9abc_def0i64.to_be_bytes());
        assert_eq!(decode(&b).unwrap(), t);
    }

    /// A Java leader's failed multi: the ops before the failure as real
    /// records, the failure as an error, later ops as real records.
    #[test]
    fn a_java_failed_multi_reads_as_zookeeper_applies_it() {
        let mut b = Vec::new();
        let ok = txn(TxnOp::Multi(vec![
            create(0),
            TxnOp::Error { code: -101 },
            TxnOp::SetData {
                path: "/a".into(),
                data: None,
                version: 1,
            },
        ]));
        encode(&ok, &mut b).unwrap();
        assert_eq!(
            decode(&b).unwrap().op,
            TxnOp::MultiError {
                codes: vec![0, -101, -2]
            }
        );
    }

    #[test]
    fn what_zookeeper_cannot_say_or_we_cannot_apply_is_an_error() {
        let mut b = Vec::new();
        assert!(matches!(
            encode(&txn(create(77)), &mut b),
            Err(ZkTxnError::ForeignEphemeralOwner { .. })
        ));
        let mut b = Vec::new();
        encode(&txn(TxnOp::CreateSession { timeout_ms: 1 }), &mut b).unwrap();
        b[28..32].copy_from_slice(&(-11i32).to_be_bytes());
        b.truncate(32);
        assert_eq!(decode(&b), Err(ZkTxnError::CloseSessionWithoutPaths));
        b[28..32].copy_from_slice(&99i32.to_be_bytes());
        b.extend_from_slice(&[0; 4]);
        assert_eq!(decode(&b), Err(ZkTxnError::UnknownType(99)));
        let nested = txn(TxnOp::Multi(vec![TxnOp::Multi(vec![])]));
        assert_eq!(encode(&nested, &mut b), Err(ZkTxnError::NestedMulti));
    }

    proptest! {
        #[test]
        fn garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = decode(&bytes);
        }

        #[test]
        fn truncations_never_panic(cut in 0usize..120) {
            let mut b = Vec::new();
            encode(&txn(TxnOp::Multi(vec![create(0), TxnOp::Check { path: "/c".into() }])), &mut b).unwrap();
            let _ = decode(&b[..cut.min(b.len())]);
        }
    }
}
