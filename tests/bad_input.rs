//! Hostile and malformed input on the client port, spoken with a raw
//! `std::net::TcpStream` (no client library), plus the four-letter words.
//!
//! Every expectation here was observed on Apache ZooKeeper 3.8
//! (`RK_TEST_TARGET=zookeeper`); ringkeeper must behave the same way.

mod common;

use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::time::Duration;

use common::{start_target, Server};

use common::raw::*;

/// One request that is valid in every respect: getData("/", watch=false).
fn get_root_body() -> Vec<u8> {
    let mut b = Vec::new();
    put_str(&mut b, "/");
    put_bool(&mut b, false);
    b
}

/// After whatever happened, a fresh connection can still do real work.
fn assert_server_healthy(server: &Server, tag: &str) {
    let mut c = Conn::handshake(server.port, 30_000);
    let path = format!("/healthy-{tag}");
    let (r, _) = c.call(1, OP_CREATE, &create_body(&path, b"ok", 0));
    assert_eq!(r.err, 0, "create {path} after {tag}");
    let (r, _) = c.call(2, OP_GET_DATA, &get_body(&path, false));
    assert_eq!(r.err, 0, "getData {path} after {tag}");
    assert_eq!(&r.body[..6], &[0, 0, 0, 2, b'o', b'k']);
    assert_eq!(server.four_letter("ruok"), "imok", "ruok after {tag}");
}

#[test]
fn four_letter_words() {
    let server = start_target("");

    assert_eq!(server.four_letter("ruok"), "imok");
    assert_eq!(server.four_letter("isro"), "rw");

    let srvr = server.four_letter("srvr");
    let lines: Vec<&str> = srvr.lines().collect();
    assert_eq!(lines.len(), 9, "srvr answers 9 lines: {srvr:?}");
    assert!(srvr.ends_with('\n'), "srvr ends with a newline: {srvr:?}");
    assert!(lines[0].starts_with("Zookeeper version: "), "{srvr}");
    assert!(lines[1].starts_with("Latency min/avg/max: "), "{srvr}");
    assert!(lines[2].starts_with("Received: "), "{srvr}");
    assert!(lines[3].starts_with("Sent: "), "{srvr}");
    assert!(lines[4].starts_with("Connections: "), "{srvr}");
    assert!(lines[5].starts_with("Outstanding: "), "{srvr}");
    // A fresh server: nothing written yet.
    assert_eq!(lines[6], "Zxid: 0x0", "{srvr}");
    assert_eq!(lines[7], "Mode: standalone", "{srvr}");
    // ZooKeeper counts the root twice ("" and "/") plus /zookeeper,
    // /zookeeper/quota and /zookeeper/config.
    assert_eq!(lines[8], "Node count: 5", "{srvr}");

    let envi = server.four_letter("envi");
    assert!(envi.starts_with("Environment:\n"), "{envi}");
    assert!(envi.contains("\nzookeeper.version="), "{envi}");

    let stat = server.four_letter("stat");
    assert!(stat.starts_with("Zookeeper version: "), "{stat}");
    assert!(stat.contains("\nClients:\n"), "{stat}");
    assert!(stat.contains("\nMode: standalone\n"), "{stat}");
    assert!(stat.contains("\nNode count: 5\n"), "{stat}");

    // After one write the zxid moves and srvr shows it in hex.
    let mut c = Conn::handshake(server.port, 30_000);
    let (r, _) = c.call(1, OP_CREATE, &create_body("/x", b"", 0));
    assert_eq!(r.err, 0);
    let srvr = server.four_letter("srvr");
    assert!(
        srvr.contains(&format!("\nZxid: {:#x}\n", r.zxid)),
        "srvr shows the last zxid {:#x}: {srvr}",
        r.zxid
    );
    assert!(srvr.contains("\nNode count: 6\n"), "{srvr}");

    // Four bytes that are no known word are a frame length (0x78797a77 is
    // above jute.maxbuffer): the connection is closed without an answer.
    assert_eq!(server.four_letter("xyzw"), "");
}

#[test]
fn bad_lengths_before_handshake_close_the_connection() {
    let server = start_target("");
    for (what, len) in [
        ("negative", -1i32),
        ("very negative", i32::MIN),
        ("over jute.maxbuffer", JUTE_MAX_BUFFER + 1),
        ("huge", i32::MAX),
    ] {
        let mut s = tcp(server.port);
        s.write_all(&len.to_be_bytes()).unwrap();
        assert_closed_without_reply(&mut s, what);
    }
    assert_server_healthy(&server, "bad-lengths-pre");
}

#[test]
fn bad_lengths_after_handshake_close_the_connection() {
    let server = start_target("");
    for (what, len) in [
        ("negative", -5i32),
        ("over jute.maxbuffer", JUTE_MAX_BUFFER + 1),
        // A zero-length frame cannot hold a request header.
        ("zero", 0),
    ] {
        let mut c = Conn::handshake(server.port, 30_000);
        c.s.write_all(&len.to_be_bytes()).unwrap();
        assert_closed_without_reply(&mut c.s, what);
    }

    // A request shorter than its 8-byte header.
    let mut c = Conn::handshake(server.port, 30_000);
    c.s.write_all(&frame(&[0, 0, 0, 1, 0])).unwrap();
    assert_closed_without_reply(&mut c.s, "5-byte request");

    // Exactly jute.maxbuffer is an acceptable length: the server waits for
    // the body instead of closing.
    let mut c = Conn::handshake(server.port, 30_000);
    c.s.write_all(&JUTE_MAX_BUFFER.to_be_bytes()).unwrap();
    assert_still_open(&mut c.s, "length == jute.maxbuffer");
    assert_server_healthy(&server, "bad-lengths-post");
}

#[test]
fn truncated_frames_close_the_connection() {
    let server = start_target("");

    // A connect request whose body is too short for a ConnectRequest.
    let mut s = tcp(server.port);
    s.write_all(&frame(&[0, 0, 0, 0, 0])).unwrap();
    assert_closed_without_reply(&mut s, "5-byte connect request");

    // An empty connect request.
    let mut s = tcp(server.port);
    s.write_all(&frame(&[])).unwrap();
    assert_closed_without_reply(&mut s, "empty connect request");

    // Three bytes of a length, then EOF.
    let mut s = tcp(server.port);
    s.write_all(&[0, 0, 0]).unwrap();
    s.shutdown(Shutdown::Write).unwrap();
    assert_closed_without_reply(&mut s, "partial length then EOF");

    // A connect frame announcing 100 bytes, carrying 10, then EOF.
    let mut s = tcp(server.port);
    let mut b = 100i32.to_be_bytes().to_vec();
    b.extend_from_slice(&[0; 10]);
    s.write_all(&b).unwrap();
    s.shutdown(Shutdown::Write).unwrap();
    assert_closed_without_reply(&mut s, "truncated connect frame then EOF");

    // The same after a good handshake.
    let mut c = Conn::handshake(server.port, 30_000);
    let mut b = 100i32.to_be_bytes().to_vec();
    b.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 4, 0, 0]);
    c.s.write_all(&b).unwrap();
    c.s.shutdown(Shutdown::Write).unwrap();
    assert_closed_without_reply(&mut c.s, "truncated request frame then EOF");

    assert_server_healthy(&server, "truncated");
}

#[test]
fn unknown_opcode_gets_unimplemented_then_close() {
    let server = start_target("");
    for op in [999, 0, 10, 23, 99, 108, -3, i32::MAX] {
        let mut c = Conn::handshake(server.port, 30_000);
        c.send(7, op, &get_root_body());
        let r = c
            .recv()
            .unwrap_or_else(|| panic!("opcode {op}: closed without a reply"));
        assert_eq!(r.xid, 7, "opcode {op}");
        assert_eq!(r.err, ERR_UNIMPLEMENTED, "opcode {op}");
        // The reply to an unknown request carries zxid -1.
        assert_eq!(r.zxid, -1, "opcode {op}");
        assert!(r.body.is_empty(), "opcode {op}");
        assert_closed_without_reply(&mut c.s, &format!("after unknown opcode {op}"));
    }
    assert_server_healthy(&server, "unknown-opcode");
}

/// FinalRequestProcessor answers a ping with PING_XID (-2) whatever xid it
/// came with, also when it waits behind the session's write.
#[test]
fn a_ping_is_answered_with_xid_minus_two() {
    const OP_PING: i32 = 11;
    let server = start_target("");
    let mut c = Conn::handshake(server.port, 30_000);
    for xid in [-2, 7, 0] {
        c.send(xid, OP_PING, &[]);
        let r = c.recv().expect("a ping reply");
        assert_eq!((r.xid, r.err), (-2, 0), "ping sent with xid {xid}");
    }
    c.send(8, 1, &create_body("/ping-behind", b"", 0));
    c.send(9, OP_PING, &[]);
    let created = c.recv().expect("create reply");
    assert_eq!((created.xid, created.err), (8, 0));
    let pong = c.recv().expect("ping reply");
    assert_eq!((pong.xid, pong.err), (-2, 0), "a ping behind a write");
    assert_eq!(
        pong.zxid, created.zxid,
        "the ping answers at the write's zxid"
    );
    assert_server_healthy(&server, "ping-xid");
}

#[test]
fn malformed_request_body_gets_marshalling_error_and_connection_survives() {
    let server = start_target("");
    let mut c = Conn::handshake(server.port, 30_000);

    // getData whose path length runs past the end of the frame.
    let mut bad_read = 1000i32.to_be_bytes().to_vec();
    bad_read.extend_from_slice(b"/ab");
    // create whose path length runs past the end of the frame.
    let bad_write = bad_read.clone();
    // exists without its watch flag; getData with no body at all.
    let mut no_flag = Vec::new();
    put_str(&mut no_flag, "/");

    let cases: [(&str, i32, &[u8]); 4] = [
        ("getData, bad string length", OP_GET_DATA, &bad_read),
        ("create, bad string length", OP_CREATE, &bad_write),
        ("exists without watch flag", OP_EXISTS, &no_flag),
        ("getData without body", OP_GET_DATA, &[]),
    ];
    for (i, (what, op, body)) in cases.into_iter().enumerate() {
        let xid = 10 + i as i32;
        let (r, _) = c.call(xid, op, body);
        assert_eq!(r.xid, xid, "{what}");
        assert_eq!(r.err, ERR_MARSHALLING, "{what}");
        assert!(r.body.is_empty(), "{what}");
        // Still open and usable.
        let (p, _) = c.call(-2, OP_PING, &[]);
        assert_eq!((p.xid, p.err), (-2, 0), "ping after {what}");
    }

    // A read op inside multi, or a write op inside multiRead: -5 too.
    let mut m = Vec::new();
    put_multi_header(&mut m, OP_GET_DATA, false, -1);
    m.extend_from_slice(&get_body("/", false));
    put_multi_header(&mut m, -1, true, -1);
    let (r, _) = c.call(30, OP_MULTI, &m);
    assert_eq!(r.err, ERR_MARSHALLING, "getData inside multi");
    let mut m = Vec::new();
    put_multi_header(&mut m, OP_CREATE, false, -1);
    m.extend_from_slice(&create_body("/in-multi-read", b"", 0));
    put_multi_header(&mut m, -1, true, -1);
    let (r, _) = c.call(31, OP_MULTI_READ, &m);
    assert_eq!(r.err, ERR_MARSHALLING, "create inside multiRead");
    let (r, _) = c.call(32, OP_EXISTS, &get_body("/in-multi-read", false));
    assert_eq!(r.err, ERR_NO_NODE, "nothing was created");
    assert_server_healthy(&server, "malformed-body");
}

/// SASL (op 102) on a server with no SASL login configured (no JAAS), as
/// ZooKeeperServer.processSasl answers it: OK with a null token, the
/// request's xid and zxid 0; no zxid is used, nothing is authenticated and
/// the connection stays. A token Java cannot read, or a null one, closes
/// the connection without an answer.
#[test]
fn sasl_is_answered_as_by_zookeeper_without_sasl() {
    const OP_SASL: i32 = 102;
    let server = start_target("");
    let mut c = Conn::handshake(server.port, 30_000);
    let (first, _) = c.call(1, OP_CREATE, &create_body("/sasl", b"", 0));
    assert_eq!(first.err, 0);
    let mut trailing = Vec::new();
    put_buf(&mut trailing, b"ab");
    trailing.extend_from_slice(b"ignored");
    let tokens: [(&str, Vec<u8>); 4] = [
        ("empty token", {
            let mut b = Vec::new();
            put_buf(&mut b, b"");
            b
        }),
        ("a token", {
            let mut b = Vec::new();
            put_buf(&mut b, &[7u8; 300]);
            b
        }),
        ("bytes after the token", trailing),
        ("a binary GSSAPI-like token", {
            let mut b = Vec::new();
            put_buf(&mut b, &[0x60, 0x82, 0x02, 0x00, 0x06, 0x09]);
            b
        }),
    ];
    for (i, (what, body)) in tokens.iter().enumerate() {
        let xid = [2, 3, -3, 1 << 30][i];
        let (r, _) = c.call(xid, OP_SASL, body);
        assert_eq!((r.xid, r.zxid, r.err), (xid, 0, 0), "{what}");
        // SetSASLResponse{token = null}.
        assert_eq!(r.body, [0xff; 4], "{what}");
    }
    // Still only the ip id.
    let (r, _) = c.call(4, OP_WHO_AM_I, &[]);
    let mut want = Vec::new();
    put_i32(&mut want, 1);
    put_str(&mut want, "ip");
    put_str(&mut want, "127.0.0.1");
    assert_eq!((r.err, r.body), (0, want), "whoAmI after SASL");
    // No zxid was used.
    let (next, _) = c.call(5, OP_CREATE, &create_body("/sasl/after", b"", 0));
    assert_eq!((next.err, next.zxid), (0, first.zxid + 1));

    let mut null_token = Vec::new();
    put_i32(&mut null_token, -1);
    let mut too_long = Vec::new();
    put_i32(&mut too_long, 10);
    too_long.extend_from_slice(b"short");
    let bad: [(&str, &[u8]); 4] = [
        ("null token", &null_token),
        ("no body", &[]),
        ("half a length", &[0, 0]),
        ("token longer than the frame", &too_long),
    ];
    for (what, body) in bad {
        let mut c = Conn::handshake(server.port, 30_000);
        c.send(9, OP_SASL, body);
        assert_closed_without_reply(&mut c.s, what);
    }
    assert_server_healthy(&server, "sasl");
}

#[test]
fn invalid_paths_are_rejected() {
    let server = start_target("");
    let mut c = Conn::handshake(server.port, 30_000);
    // Creates validate the path: -8 BADARGUMENTS.
    for p in ["a", "", "/.", "/\u{1}"] {
        let (r, _) = c.call(1, OP_CREATE, &create_body(p, b"", 0));
        assert_eq!(r.err, ERR_BAD_ARGUMENTS, "create {p:?}");
    }
    // ... but the parent is looked up first: a missing parent wins.
    for p in ["/a/", "/a//b", "/a/.."] {
        let (r, _) = c.call(2, OP_CREATE, &create_body(p, b"", 0));
        assert_eq!(r.err, ERR_NO_NODE, "create {p:?}");
    }
    // Reads do not validate: an unknown path is simply missing.
    for p in ["a", "/a/", "//"] {
        let (r, _) = c.call(3, OP_GET_DATA, &get_body(p, false));
        assert_eq!(r.err, ERR_NO_NODE, "getData {p:?}");
    }
    // The root and /zookeeper cannot be deleted.
    for p in ["/", "/zookeeper"] {
        let mut b = Vec::new();
        put_str(&mut b, p);
        put_i32(&mut b, -1);
        let (r, _) = c.call(4, OP_DELETE, &b);
        assert_eq!(r.err, ERR_BAD_ARGUMENTS, "delete {p:?}");
    }
    // Unknown create flags.
    let (r, _) = c.call(5, OP_CREATE, &create_body("/flags", b"", 99));
    assert_eq!(r.err, ERR_BAD_ARGUMENTS, "create flags 99");
    // An empty ACL list, and an ACL with an unknown scheme.
    let mut b = Vec::new();
    put_str(&mut b, "/acl");
    put_buf(&mut b, b"");
    put_i32(&mut b, 0);
    put_i32(&mut b, 0);
    let (r, _) = c.call(6, OP_CREATE, &b);
    assert_eq!(r.err, ERR_INVALID_ACL, "empty acl");
    let mut b = Vec::new();
    put_str(&mut b, "/acl");
    put_buf(&mut b, b"");
    put_i32(&mut b, 1);
    put_i32(&mut b, 31);
    put_str(&mut b, "bogus");
    put_str(&mut b, "x");
    put_i32(&mut b, 0);
    let (r, _) = c.call(7, OP_CREATE, &b);
    assert_eq!(r.err, ERR_INVALID_ACL, "unknown acl scheme");
    // None of it closed the connection.
    let (p, _) = c.call(-2, OP_PING, &[]);
    assert_eq!(p.err, 0);
}

/// A small deterministic generator, so a failure can be replayed.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}

#[test]
fn random_garbage_before_handshake() {
    let server = start_target("");
    let mut rng = XorShift(0x5eed_1234_abcd_0001);
    for i in 0..200 {
        let n = 1 + (rng.next() % 600) as usize;
        let mut garbage = rng.bytes(n);
        if i % 4 == 0 && garbage.len() >= 4 {
            // Keep some frames' lengths plausible so the body is parsed as a
            // ConnectRequest instead of being refused at the length.
            let len = (garbage.len() - 4) as i32;
            garbage[..4].copy_from_slice(&len.to_be_bytes());
        }
        let mut s = tcp(server.port);
        // The server may close while we are still writing.
        let _ = s.write_all(&garbage);
        let _ = s.shutdown(Shutdown::Write);
        assert_eventually_closed(&mut s, &format!("garbage #{i} ({n} bytes)"));
    }
    assert_server_healthy(&server, "garbage-pre");
}

#[test]
fn random_garbage_after_handshake() {
    let server = start_target("");
    let mut rng = XorShift(0x5eed_1234_abcd_0002);
    for i in 0..100 {
        let mut c = Conn::handshake(server.port, 30_000);
        let n = 1 + (rng.next() % 600) as usize;
        let mut garbage = rng.bytes(n);
        if i % 2 == 0 && garbage.len() >= 12 {
            // A plausible frame length and a plausible opcode so that the
            // request decoders see random bodies.
            let len = (garbage.len() - 4) as i32;
            garbage[..4].copy_from_slice(&len.to_be_bytes());
            let op: i32 = [
                1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 14, 15, 17, 18, 19, 22, 103, 104, 106,
            ][(rng.next() % 19) as usize];
            garbage[8..12].copy_from_slice(&op.to_be_bytes());
        }
        let _ = c.s.write_all(&garbage);
        let _ = c.s.shutdown(Shutdown::Write);
        assert_eventually_closed(&mut c.s, &format!("garbage #{i} ({n} bytes)"));
    }
    assert_server_healthy(&server, "garbage-post");
    assert!(server.four_letter("srvr").contains("Mode: standalone"));
}

// ---------------------------------------------------------------------------

fn tcp(port: u16) -> TcpStream {
    let s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s
}

/// The peer closes (EOF or reset) without sending a single byte.
fn assert_closed_without_reply(s: &mut TcpStream, what: &str) {
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut buf = [0u8; 256];
    match s.read(&mut buf) {
        Ok(0) => {}
        Ok(n) => panic!("{what}: expected close, got {n} bytes: {:?}", &buf[..n]),
        Err(e) if is_reset(&e) => {}
        Err(e) => panic!("{what}: expected the server to close the connection, got {e}"),
    }
}

/// The peer closes within a bounded time; whatever it sent first is ignored.
fn assert_eventually_closed(s: &mut TcpStream, what: &str) {
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut buf = [0u8; 4096];
    let mut total = 0usize;
    loop {
        match s.read(&mut buf) {
            Ok(0) => return,
            Ok(n) => {
                total += n;
                assert!(total < 1 << 20, "{what}: endless answer");
            }
            Err(e) if is_reset(&e) => return,
            Err(e) => panic!("{what}: the server did not close the connection: {e}"),
        }
    }
}

/// Nothing arrives and the connection is not closed for a second.
fn assert_still_open(s: &mut TcpStream, what: &str) {
    s.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
    let mut buf = [0u8; 16];
    match s.read(&mut buf) {
        Ok(0) => panic!("{what}: connection closed"),
        Ok(n) => panic!("{what}: unexpected {n} bytes"),
        Err(e) if is_reset(&e) => panic!("{what}: connection reset"),
        Err(_) => {}
    }
}

fn is_reset(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::ConnectionReset
            | std::io::ErrorKind::ConnectionAborted
            | std::io::ErrorKind::BrokenPipe
    )
}
