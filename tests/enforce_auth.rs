//! `enforce.auth.enabled` / `enforce.auth.schemes`, differential against
//! Apache ZooKeeper 3.8 (Debian's package; its `AuthenticationHelper`):
//! every request but auth and SASL on a connection that has not
//! authenticated with a required scheme is answered
//! SESSIONCLOSEDREQUIRESASLAUTH (-124) with zxid 0 and the connection is
//! closed, pings and closeSession included; the session itself survives
//! (a reconnect that authenticates goes on with it); the `ip` scheme is
//! held by every connection from the start. The same scripts run against
//! both servers and their transcripts must be equal. Set RK_SKIP_ZK=1 to
//! run only against ringkeeper where ZooKeeper is not installed.

mod common;

use common::raw_fallible as raw;

use common::{start, Flavor};
use raw::*;

const OP_GET_DATA: i32 = 4;
const OP_CREATE: i32 = 1;
const OP_PING: i32 = 11;
const OP_CLOSE_SESSION: i32 = -11;
const OP_AUTH: i32 = 100;
const XID_PING: i32 = -2;
const XID_AUTH: i32 = -4;

fn auth_body(scheme: &str, auth: &[u8]) -> Vec<u8> {
    let mut b = Vec::new();
    put_i32(&mut b, 0);
    put_str(&mut b, scheme);
    put_buf(&mut b, auth);
    b
}

/// What a client sees of one request: the error, the zxid when the
/// request was refused (0 from both), and whether the connection was
/// closed after it.
fn outcome(c: &mut Conn, xid: i32, op: i32, body: &[u8]) -> String {
    let r = match c.call_xid(xid, op, body) {
        Ok(r) => r,
        Err(e) => return format!("op {op}: no reply ({})", e.kind()),
    };
    if r.err == 0 {
        return format!("op {op}: ok");
    }
    // The reply must be followed by the end of the connection (or nothing).
    let after = match c.recv() {
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => "closed".to_string(),
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => "closed".to_string(),
        Err(e) => format!("error {:?}", e.kind()),
        Ok(r) => format!("then reply xid {} err {}", r.xid, r.err),
    };
    format!("op {op}: err {} zxid {}, {after}", r.err, r.zxid)
}

/// The scripts, one transcript line per request.
fn transcript(flavor: Flavor, extra_cfg: &str) -> Vec<String> {
    let server = start(flavor, extra_cfg);
    let port = server.port;
    let mut t = Vec::new();
    let fresh = || Conn::new_session(port, 30_000).expect("session");
    // Unauthenticated: a read, a ping, a write, closeSession.
    for (xid, op, body) in [
        (1, OP_GET_DATA, get_body("/", false)),
        (XID_PING, OP_PING, vec![]),
        (1, OP_CREATE, create_body("/n", b"", 0)),
        (1, OP_CLOSE_SESSION, vec![]),
    ] {
        let mut c = fresh();
        t.push(format!("anonymous {}", outcome(&mut c, xid, op, &body)));
    }
    // digest: authenticated, everything goes.
    let mut c = fresh();
    t.push(format!(
        "digest {}",
        outcome(&mut c, XID_AUTH, OP_AUTH, &auth_body("digest", b"u:p"))
    ));
    t.push(format!(
        "digest {}",
        outcome(&mut c, 1, OP_CREATE, &create_body("/d", b"x", 0))
    ));
    t.push(format!(
        "digest {}",
        outcome(&mut c, 2, OP_GET_DATA, &get_body("/d", false))
    ));
    // An unknown scheme fails as always (AUTHFAILED, closed).
    let mut c = fresh();
    t.push(format!(
        "unknown {}",
        outcome(&mut c, XID_AUTH, OP_AUTH, &auth_body("nope", b"x"))
    ));
    // The refused session is not closed: a reconnect that authenticates
    // goes on with it.
    let mut c = fresh();
    let (id, passwd) = (c.session_id, c.passwd.clone());
    t.push(format!(
        "refused {}",
        outcome(&mut c, 1, OP_GET_DATA, &get_body("/", false))
    ));
    drop(c);
    match Conn::connect(port, 30_000, id, &passwd, 0).expect("reconnect") {
        None => t.push("reconnect: session gone".into()),
        Some(mut c) => {
            t.push("reconnect: same session".into());
            let auth = auth_body("digest", b"u:p");
            t.push(format!(
                "reconnect {}",
                outcome(&mut c, XID_AUTH, OP_AUTH, &auth)
            ));
            t.push(format!(
                "reconnect {}",
                outcome(&mut c, 1, OP_GET_DATA, &get_body("/d", false))
            ));
        }
    }
    t
}

fn compare(extra_cfg: &str) -> Vec<String> {
    let ours = transcript(Flavor::Ringkeeper, extra_cfg);
    if std::env::var("RK_SKIP_ZK").is_err() {
        let theirs = transcript(Flavor::ZooKeeper, extra_cfg);
        assert_eq!(ours, theirs, "ringkeeper (left) vs ZooKeeper (right)");
    }
    ours
}

#[test]
fn digest_is_enforced_as_in_zookeeper() {
    let t = compare("enforce.auth.enabled=true\nenforce.auth.schemes=digest");
    assert_eq!(
        &t[..4],
        [
            "anonymous op 4: err -124 zxid 0, closed",
            "anonymous op 11: err -124 zxid 0, closed",
            "anonymous op 1: err -124 zxid 0, closed",
            "anonymous op -11: err -124 zxid 0, closed",
        ]
    );
    assert_eq!(
        t[4..7],
        ["digest op 100: ok", "digest op 1: ok", "digest op 4: ok"]
    );
}

/// Every connection holds an `ip` id from the start: enforcing `ip` lets
/// everyone in (ZooKeeper's behaviour, however surprising).
#[test]
fn ip_scheme_admits_every_connection() {
    let t = compare("enforce.auth.enabled=true\nenforce.auth.schemes=ip");
    assert_eq!(t[0], "anonymous op 4: ok");
}

/// enforce.auth.enabled=false (or any value but true): nothing enforced.
#[test]
fn enforcement_off_is_the_default() {
    let t = compare("enforce.auth.enabled=yes\nenforce.auth.schemes=digest");
    assert_eq!(t[0], "anonymous op 4: ok");
}
