//! The payload of a log record: one txn in a compact binary form (big-endian,
//! jute-style strings and buffers). Decoding is total: any byte string
//! either decodes to a txn or to an error, never a panic.

use std::sync::Arc;

use bytes::Bytes;

use crate::proto::jute::{DecodeError, Reader, Writer};
use crate::proto::{decode_acls, encode_acls, Acl};
use crate::tree::{Txn, TxnOp};

const CREATE: u8 = 1;
const DELETE: u8 = 2;
const SET_DATA: u8 = 3;
const SET_ACL: u8 = 4;
const CHECK: u8 = 5;
const CREATE_SESSION: u8 = 6;
const CLOSE_SESSION: u8 = 7;
const MULTI: u8 = 8;
const ERROR: u8 = 9;
const MULTI_ERROR: u8 = 10;

/// Bound on multi nesting when decoding (a multi holds no multi).
const MULTI_DEPTH_MAX: usize = 1;

pub fn encode(txn: &Txn, buf: &mut Vec<u8>) {
    let mut w = Writer::new(buf);
    w.i64(txn.zxid)
        .i64(txn.time_ms)
        .i64(txn.session_id)
        .i32(txn.cxid);
    encode_op(&txn.op, &mut w);
}

fn encode_op(op: &TxnOp, w: &mut Writer) {
    match op {
        TxnOp::Create {
            path,
            data,
            acl,
            ephemeral_owner,
            parent_cversion,
            // Not kept: it matters only while the txn is proposed.
            create2: _,
        } => {
            w.buf.push(CREATE);
            w.string(path).opt_buffer(data.as_deref());
            encode_acls(w, acl);
            w.i64(*ephemeral_owner).i32(*parent_cversion);
        }
        TxnOp::Delete { path } => {
            w.buf.push(DELETE);
            w.string(path);
        }
        TxnOp::SetData {
            path,
            data,
            version,
        } => {
            w.buf.push(SET_DATA);
            w.string(path).opt_buffer(data.as_deref()).i32(*version);
        }
        TxnOp::SetAcl {
            path,
            acl,
            aversion,
        } => {
            w.buf.push(SET_ACL);
            w.string(path);
            encode_acls(w, acl);
            w.i32(*aversion);
        }
        TxnOp::Check { path } => {
            w.buf.push(CHECK);
            w.string(path);
        }
        TxnOp::CreateSession { timeout_ms } => {
            w.buf.push(CREATE_SESSION);
            w.i32(*timeout_ms);
        }
        TxnOp::CloseSession { ephemerals } => {
            w.buf.push(CLOSE_SESSION);
            w.string_vec(ephemerals);
        }
        TxnOp::Multi(ops) => {
            w.buf.push(MULTI);
            w.i32(ops.len() as i32);
            for o in ops {
                encode_op(o, w);
            }
        }
        TxnOp::Error { code } => {
            w.buf.push(ERROR);
            w.i32(*code);
        }
        TxnOp::MultiError { codes } => {
            w.buf.push(MULTI_ERROR);
            w.i32(codes.len() as i32);
            for c in codes {
                w.i32(*c);
            }
        }
    }
}

pub fn decode(payload: &[u8]) -> Result<Txn, DecodeError> {
    let mut r = Reader::of_member(payload);
    let txn = Txn {
        zxid: r.read_i64()?,
        time_ms: r.read_i64()?,
        session_id: r.read_i64()?,
        cxid: r.read_i32()?,
        op: decode_op(&mut r, 0)?,
    };
    if r.remaining() != 0 {
        return Err(DecodeError::Invalid("trailing bytes after txn"));
    }
    Ok(txn)
}

fn path(r: &mut Reader) -> Result<Arc<str>, DecodeError> {
    Ok(Arc::from(r.read_string()?))
}

fn data(r: &mut Reader) -> Result<Option<Bytes>, DecodeError> {
    Ok(r.read_buffer_opt()?.map(Bytes::copy_from_slice))
}

fn acl(r: &mut Reader) -> Result<Arc<[Acl]>, DecodeError> {
    Ok(Arc::from(decode_acls(r)?))
}

fn decode_op(r: &mut Reader, depth: usize) -> Result<TxnOp, DecodeError> {
    Ok(match r.read_u8()? {
        CREATE => TxnOp::Create {
            path: path(r)?,
            data: data(r)?,
            acl: acl(r)?,
            ephemeral_owner: r.read_i64()?,
            parent_cversion: r.read_i32()?,
            create2: false,
        },
        DELETE => TxnOp::Delete { path: path(r)? },
        SET_DATA => TxnOp::SetData {
            path: path(r)?,
            data: data(r)?,
            version: r.read_i32()?,
        },
        SET_ACL => TxnOp::SetAcl {
            path: path(r)?,
            acl: acl(r)?,
            aversion: r.read_i32()?,
        },
        CHECK => TxnOp::Check { path: path(r)? },
        CREATE_SESSION => TxnOp::CreateSession {
            timeout_ms: r.read_i32()?,
        },
        CLOSE_SESSION => TxnOp::CloseSession {
            ephemerals: r.read_string_vec()?.into_iter().map(Arc::from).collect(),
        },
        MULTI if depth < MULTI_DEPTH_MAX => {
            let n = r.read_count(1)?;
            let mut ops = Vec::with_capacity(n);
            for _ in 0..n {
                ops.push(decode_op(r, depth + 1)?);
            }
            TxnOp::Multi(ops)
        }
        ERROR => TxnOp::Error {
            code: r.read_i32()?,
        },
        MULTI_ERROR => {
            let n = r.read_count(4)?;
            let mut codes = Vec::with_capacity(n);
            for _ in 0..n {
                codes.push(r.read_i32()?);
            }
            TxnOp::MultiError { codes }
        }
        _ => return Err(DecodeError::Invalid("unknown txn type")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let txn = Txn {
            zxid: 7,
            time_ms: 123,
            session_id: 0x100,
            cxid: 3,
            op: TxnOp::Multi(vec![
                TxnOp::Create {
                    path: Arc::from("/a"),
                    data: None,
                    acl: Arc::from(vec![Acl::world_all()]),
                    ephemeral_owner: 0,
                    parent_cversion: 1,
                    create2: false,
                },
                TxnOp::SetData {
                    path: Arc::from("/a"),
                    data: Some(Bytes::from_static(b"x")),
                    version: 1,
                },
                TxnOp::Check {
                    path: Arc::from("/a"),
                },
            ]),
        };
        let mut buf = Vec::new();
        encode(&txn, &mut buf);
        assert_eq!(decode(&buf).unwrap(), txn);
        for cut in 0..buf.len() {
            assert!(decode(&buf[..cut]).is_err());
        }
    }
}
