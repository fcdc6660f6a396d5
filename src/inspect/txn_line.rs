//! One txn as `ringkeeper log dump` prints it: a line of text as ZooKeeper
//! 3.8's TxnLogToolkit prints it (`printTxn` and `getFormattedTxnStr`), or
//! a JSON object for tools (`--json`).
//!
//! The text follows TxnLogToolkit field by field:
//! `<date> session 0x<id> cxid 0x<cxid> zxid 0x<zxid> <op> <fields>`, the
//! date in `DateFormat.getDateTimeInstance(SHORT, LONG)` of the en_US
//! locale; creates and setData print `path,data,...` with the data as UTF-8;
//! every other txn prints its jute record's toString (strings quoted with
//! `'` and escaped as jute's ToStringOutputArchive does, vectors `v{...}`,
//! records `s{...}`). Where the output differs, and why:
//! - dates are always in UTC (ZooKeeper uses the JVM's time zone);
//! - an ACL list prints `[31,s{'world,'anyone}]`: Java's List.toString of
//!   ACL records, without the newline each record's toString ends with, so
//!   that each txn stays on one line;
//! - a create2 / deleteContainer request is logged here as the txn it made
//!   (`create` / `delete`): the log does not keep the request's opcode;
//! - `check` prints its path only (the log keeps no version for it);
//! - a multi prints each op as `<op>:<fields>` in the format above, where
//!   ZooKeeper prints each sub-txn's serialized bytes as UTF-8.

use std::fmt::Write;

use base64::Engine;

use crate::admin::javafmt;
use crate::proto::codes::{CONTAINER_EPHEMERAL_OWNER, TTL_OWNER_MASK};
use crate::proto::Acl;
use crate::tree::{Txn, TxnOp};

/// TxnLogToolkit's line for `txn`, without the line end.
pub fn text(txn: &Txn) -> String {
    format!(
        "{} session 0x{:x} cxid 0x{:x} zxid 0x{:x} {} {}",
        javafmt::short_date_long_time(txn.time_ms),
        txn.session_id,
        i64::from(txn.cxid),
        txn.zxid,
        op_name(&txn.op),
        fields(&txn.op)
    )
}

/// Request.op2String of the txn's type.
pub fn op_name(op: &TxnOp) -> &'static str {
    match op {
        TxnOp::Create {
            ephemeral_owner, ..
        } => match create_kind(*ephemeral_owner) {
            CreateKind::Container => "createContainer",
            CreateKind::Ttl(_) => "createTtl",
            CreateKind::Plain { .. } => "create",
        },
        TxnOp::Delete { .. } => "delete",
        TxnOp::SetData { .. } => "setData",
        TxnOp::SetAcl { .. } => "setACL",
        TxnOp::Check { .. } => "check",
        TxnOp::CreateSession { .. } => "createSession",
        TxnOp::CloseSession { .. } => "closeSession",
        TxnOp::Multi(_) | TxnOp::MultiError { .. } => "multi",
        TxnOp::Error { .. } => "error",
    }
}

enum CreateKind {
    Plain { ephemeral: bool },
    Container,
    Ttl(i64),
}

/// What a create's ephemeralOwner says (EphemeralType in ZooKeeper).
fn create_kind(owner: i64) -> CreateKind {
    if owner == CONTAINER_EPHEMERAL_OWNER {
        CreateKind::Container
    } else if owner < 0 && owner & TTL_OWNER_MASK == TTL_OWNER_MASK {
        CreateKind::Ttl(owner & !TTL_OWNER_MASK)
    } else {
        CreateKind::Plain {
            ephemeral: owner != 0,
        }
    }
}

/// getFormattedTxnStr: the txn's fields.
fn fields(op: &TxnOp) -> String {
    let mut out = String::new();
    match op {
        TxnOp::Create {
            path,
            data,
            acl,
            ephemeral_owner,
            parent_cversion,
            ..
        } => {
            let _ = write!(out, "{path},{},{}", utf8(data), acl_list(acl));
            match create_kind(*ephemeral_owner) {
                CreateKind::Plain { ephemeral } => {
                    let _ = write!(out, ",{ephemeral},{parent_cversion}");
                }
                CreateKind::Container => {
                    let _ = write!(out, ",{parent_cversion}");
                }
                CreateKind::Ttl(ttl) => {
                    let _ = write!(out, ",{parent_cversion},{ttl}");
                }
            }
        }
        TxnOp::SetData {
            path,
            data,
            version,
        } => {
            let _ = write!(out, "{path},{},{version}", utf8(data));
        }
        TxnOp::Delete { path } | TxnOp::Check { path } => out.push_str(&jute_string(path)),
        TxnOp::SetAcl {
            path,
            acl,
            aversion,
        } => {
            let _ = write!(out, "{},{},{aversion}", jute_string(path), acl_vector(acl));
        }
        TxnOp::CreateSession { timeout_ms } => {
            let _ = write!(out, "{timeout_ms}");
        }
        TxnOp::CloseSession { ephemerals } => {
            let paths: Vec<String> = ephemerals.iter().map(|p| jute_string(p)).collect();
            let _ = write!(out, "v{{{}}}", paths.join(","));
        }
        TxnOp::Error { code } => {
            let _ = write!(out, "{code}");
        }
        TxnOp::Multi(ops) => {
            let parts: Vec<String> = ops
                .iter()
                .map(|op| format!("{}:{}", op_name(op), fields(op)))
                .collect();
            out.push_str(&parts.join(";"));
        }
        TxnOp::MultiError { codes } => {
            let parts: Vec<String> = codes.iter().map(|c| format!("error:{c}")).collect();
            out.push_str(&parts.join(";"));
        }
    }
    out
}

/// checkNullToEmpty: the data as UTF-8 (lossy), "" for none.
fn utf8(data: &Option<bytes::Bytes>) -> String {
    data.as_deref()
        .map(|d| String::from_utf8_lossy(d).into_owned())
        .unwrap_or_default()
}

/// ToStringOutputArchive.escapeString.
fn jute_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 1);
    out.push('\'');
    for c in s.chars() {
        match c {
            '\0' => out.push_str("%00"),
            '\n' => out.push_str("%0A"),
            '\r' => out.push_str("%0D"),
            ',' => out.push_str("%2C"),
            '}' => out.push_str("%7D"),
            '%' => out.push_str("%25"),
            c => out.push(c),
        }
    }
    out
}

/// One ACL as a nested jute record: `31,s{'world,'anyone}`.
fn acl_record(a: &Acl) -> String {
    format!(
        "{},s{{{},{}}}",
        a.perms,
        jute_string(&a.id.scheme),
        jute_string(&a.id.id)
    )
}

/// A create's ACL list as Java's List.toString prints it (see module doc).
fn acl_list(acl: &[Acl]) -> String {
    let items: Vec<String> = acl.iter().map(acl_record).collect();
    format!("[{}]", items.join(", "))
}

/// setACL's ACL vector as its record's toString prints it.
fn acl_vector(acl: &[Acl]) -> String {
    let items: Vec<String> = acl
        .iter()
        .map(|a| format!("s{{{}}}", acl_record(a)))
        .collect();
    format!("v{{{}}}", items.join(","))
}

/// One JSON object (one line) for `txn`, read at byte `offset` of its
/// segment from a record that said `durable_zxid`. Session ids and zxids
/// are hex strings (they do not fit a double); data is base64.
pub fn json(txn: &Txn, offset: usize, durable_zxid: i64) -> String {
    let mut o = format!(
        "{{\"offset\":{offset},\"time_ms\":{},\"session\":\"0x{:x}\",\"cxid\":{},\
         \"zxid\":\"0x{:x}\",\"durable_zxid\":\"0x{:x}\",",
        txn.time_ms, txn.session_id, txn.cxid, txn.zxid, durable_zxid
    );
    json_op(&mut o, &txn.op);
    o.push('}');
    o
}

fn json_op(o: &mut String, op: &TxnOp) {
    let _ = write!(o, "\"op\":\"{}\"", op_name(op));
    match op {
        TxnOp::Create {
            path,
            data,
            acl,
            ephemeral_owner,
            parent_cversion,
            ..
        } => {
            let _ = write!(
                o,
                ",\"path\":{},\"data\":{},\"acl\":{},\"ephemeral_owner\":\"0x{:x}\",\"parent_cversion\":{parent_cversion}",
                json_str(path),
                json_data(data),
                json_acl(acl),
                ephemeral_owner
            );
            if let CreateKind::Ttl(ttl) = create_kind(*ephemeral_owner) {
                let _ = write!(o, ",\"ttl_ms\":{ttl}");
            }
        }
        TxnOp::SetData {
            path,
            data,
            version,
        } => {
            let _ = write!(
                o,
                ",\"path\":{},\"data\":{},\"version\":{version}",
                json_str(path),
                json_data(data)
            );
        }
        TxnOp::Delete { path } | TxnOp::Check { path } => {
            let _ = write!(o, ",\"path\":{}", json_str(path));
        }
        TxnOp::SetAcl {
            path,
            acl,
            aversion,
        } => {
            let _ = write!(
                o,
                ",\"path\":{},\"acl\":{},\"aversion\":{aversion}",
                json_str(path),
                json_acl(acl)
            );
        }
        TxnOp::CreateSession { timeout_ms } => {
            let _ = write!(o, ",\"timeout_ms\":{timeout_ms}");
        }
        TxnOp::CloseSession { ephemerals } => {
            let paths: Vec<String> = ephemerals.iter().map(|p| json_str(p)).collect();
            let _ = write!(o, ",\"ephemerals\":[{}]", paths.join(","));
        }
        TxnOp::Error { code } => {
            let _ = write!(o, ",\"err\":{code}");
        }
        TxnOp::Multi(ops) => {
            o.push_str(",\"ops\":[");
            for (i, op) in ops.iter().enumerate() {
                if i > 0 {
                    o.push(',');
                }
                o.push('{');
                json_op(o, op);
                o.push('}');
            }
            o.push(']');
        }
        TxnOp::MultiError { codes } => {
            let codes: Vec<String> = codes.iter().map(i32::to_string).collect();
            let _ = write!(o, ",\"errs\":[{}]", codes.join(","));
        }
    }
}

fn json_data(data: &Option<bytes::Bytes>) -> String {
    json_bytes(data.as_deref())
}

/// Base64 of the bytes in quotes, or null.
pub(super) fn json_bytes(data: Option<&[u8]>) -> String {
    match data {
        None => "null".into(),
        Some(d) => format!(
            "\"{}\"",
            base64::engine::general_purpose::STANDARD.encode(d)
        ),
    }
}

pub(super) fn json_acl(acl: &[Acl]) -> String {
    let items: Vec<String> = acl
        .iter()
        .map(|a| {
            format!(
                "{{\"perms\":{},\"scheme\":{},\"id\":{}}}",
                a.perms,
                json_str(&a.id.scheme),
                json_str(&a.id.id)
            )
        })
        .collect();
    format!("[{}]", items.join(","))
}

/// A JSON string literal.
pub(super) fn json_str(s: &str) -> String {
    crate::admin::json::string(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn txn(op: TxnOp) -> Txn {
        Txn {
            zxid: 2,
            time_ms: 1_795_453_914_000,
            session_id: 0x100000e545c0000,
            cxid: 1,
            op,
        }
    }

    fn create(path: &str, data: &[u8], owner: i64, pcv: i32) -> TxnOp {
        TxnOp::Create {
            path: Arc::from(path),
            data: Some(bytes::Bytes::copy_from_slice(data)),
            acl: Arc::from(vec![Acl::world_all()]),
            ephemeral_owner: owner,
            parent_cversion: pcv,
            create2: false,
        }
    }

    /// Lines of Debian's ZooKeeper 3.8.0 TxnLogToolkit on a log written by
    /// zkCli (create, create -e, set, setAcl, create -c, delete, close;
    /// TZ=UTC), minus the newline inside ACL lists (see the module doc).
    #[test]
    fn lines_match_zookeepers_toolkit() {
        let prefix = "11/23/26, 5:11:54 PM UTC session 0x100000e545c0000 cxid 0x1 zxid 0x2";
        let cases: Vec<(TxnOp, &str)> = vec![
            (
                TxnOp::CreateSession { timeout_ms: 30000 },
                "createSession 30000",
            ),
            (
                create("/foo", b"bar", 0, 1),
                "create /foo,bar,[31,s{'world,'anyone}],false,1",
            ),
            (
                create("/eph", b"x", 0x100000e545c0000, 2),
                "create /eph,x,[31,s{'world,'anyone}],true,2",
            ),
            (
                TxnOp::SetData {
                    path: Arc::from("/foo"),
                    data: Some(bytes::Bytes::from_static(b"baz2")),
                    version: 1,
                },
                "setData /foo,baz2,1",
            ),
            (TxnOp::Error { code: -110 }, "error -110"),
            (
                TxnOp::SetAcl {
                    path: Arc::from("/foo"),
                    acl: Arc::from(vec![Acl {
                        perms: 3,
                        id: crate::proto::Id {
                            scheme: "digest".into(),
                            id: "u:cGFzc3dvcmQ=".into(),
                        },
                    }]),
                    aversion: 1,
                },
                "setACL '/foo,v{s{3,s{'digest,'u:cGFzc3dvcmQ=}}},1",
            ),
            (
                create("/cont", b"c", CONTAINER_EPHEMERAL_OWNER, 4),
                "createContainer /cont,c,[31,s{'world,'anyone}],4",
            ),
            (
                TxnOp::Delete {
                    path: Arc::from("/foo"),
                },
                "delete '/foo",
            ),
            (
                TxnOp::CloseSession {
                    ephemerals: vec![Arc::from("/eph")],
                },
                "closeSession v{'/eph}",
            ),
        ];
        for (op, want) in cases {
            assert_eq!(text(&txn(op)), format!("{prefix} {want}"));
        }
    }

    #[test]
    fn ours_where_zookeeper_prints_bytes() {
        let ttl = create("/t", b"", TTL_OWNER_MASK | 5000, 3);
        assert!(text(&txn(ttl)).ends_with(" createTtl /t,,[31,s{'world,'anyone}],3,5000"));
        let multi = TxnOp::Multi(vec![
            create("/a", b"x", 0, 1),
            TxnOp::Delete {
                path: Arc::from("/b,}%"),
            },
        ]);
        assert!(text(&txn(multi))
            .ends_with(" multi create:/a,x,[31,s{'world,'anyone}],false,1;delete:'/b%2C%7D%25"));
        let failed = TxnOp::MultiError {
            codes: vec![0, -101, -2],
        };
        assert!(text(&txn(failed)).ends_with(" multi error:0;error:-101;error:-2"));
        let neg = Txn {
            cxid: -2,
            ..txn(TxnOp::Error { code: -1 })
        };
        assert!(text(&neg).contains(" cxid 0xfffffffffffffffe "));
    }

    #[test]
    fn json_is_one_object_per_txn() {
        let j = json(&txn(create("/q\"\n", b"\x00\xff", 0, 1)), 64, 2);
        assert_eq!(
            j,
            "{\"offset\":64,\"time_ms\":1795453914000,\"session\":\"0x100000e545c0000\",\"cxid\":1,\
             \"zxid\":\"0x2\",\"durable_zxid\":\"0x2\",\"op\":\"create\",\"path\":\"/q\\\"\\n\",\
             \"data\":\"AP8=\",\"acl\":[{\"perms\":31,\"scheme\":\"world\",\"id\":\"anyone\"}],\
             \"ephemeral_owner\":\"0x0\",\"parent_cversion\":1}"
        );
        let m = json(
            &txn(TxnOp::Multi(vec![TxnOp::Check {
                path: Arc::from("/c"),
            }])),
            0,
            0,
        );
        assert!(m.ends_with(",\"op\":\"multi\",\"ops\":[{\"op\":\"check\",\"path\":\"/c\"}]}"));
    }
}
