//! A raw-socket ZooKeeper client for tests that need exact bytes: the
//! handshake, framed requests and replies, notifications.
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

pub const JUTE_MAX_BUFFER: i32 = 1_048_575;

pub const OP_CREATE: i32 = 1;
pub const OP_DELETE: i32 = 2;
pub const OP_EXISTS: i32 = 3;
pub const OP_GET_DATA: i32 = 4;
pub const OP_SET_DATA: i32 = 5;
pub const OP_GET_CHILDREN: i32 = 8;
pub const OP_SYNC: i32 = 9;
pub const OP_PING: i32 = 11;
pub const OP_CHECK: i32 = 13;
pub const OP_MULTI: i32 = 14;
pub const OP_CREATE2: i32 = 15;
pub const OP_CHECK_WATCHES: i32 = 17;
pub const OP_REMOVE_WATCHES: i32 = 18;
pub const OP_MULTI_READ: i32 = 22;
pub const OP_SET_WATCHES: i32 = 101;
pub const OP_SET_WATCHES2: i32 = 105;
pub const OP_ADD_WATCH: i32 = 106;
pub const OP_WHO_AM_I: i32 = 107;
pub const OP_CLOSE_SESSION: i32 = -11;

/// Serialized size of a Stat.
pub const STAT_LEN: usize = 68;

pub const ERR_MARSHALLING: i32 = -5;
pub const ERR_UNIMPLEMENTED: i32 = -6;
pub const ERR_BAD_ARGUMENTS: i32 = -8;
pub const ERR_NO_NODE: i32 = -101;
pub const ERR_INVALID_ACL: i32 = -114;
pub const ERR_NO_WATCHER: i32 = -121;

pub fn put_i32(b: &mut Vec<u8>, v: i32) {
    b.extend_from_slice(&v.to_be_bytes());
}
pub fn put_i64(b: &mut Vec<u8>, v: i64) {
    b.extend_from_slice(&v.to_be_bytes());
}
pub fn put_bool(b: &mut Vec<u8>, v: bool) {
    b.push(v as u8);
}
pub fn put_buf(b: &mut Vec<u8>, v: &[u8]) {
    put_i32(b, v.len() as i32);
    b.extend_from_slice(v);
}
pub fn put_str(b: &mut Vec<u8>, v: &str) {
    put_buf(b, v.as_bytes());
}
pub fn put_strs(b: &mut Vec<u8>, v: &[&str]) {
    put_i32(b, v.len() as i32);
    for s in v {
        put_str(b, s);
    }
}
pub fn put_multi_header(b: &mut Vec<u8>, op: i32, done: bool, err: i32) {
    put_i32(b, op);
    put_bool(b, done);
    put_i32(b, err);
}
pub fn frame(body: &[u8]) -> Vec<u8> {
    let mut b = Vec::with_capacity(body.len() + 4);
    put_buf(&mut b, body);
    b
}

/// One request frame: the header (xid, opcode) and `body`.
pub fn request(xid: i32, op: i32, body: &[u8]) -> Vec<u8> {
    let mut b = Vec::new();
    put_i32(&mut b, xid);
    put_i32(&mut b, op);
    b.extend_from_slice(body);
    frame(&b)
}

/// setData body: path, data, version (-1: any).
pub fn set_body(path: &str, data: &[u8]) -> Vec<u8> {
    let mut b = Vec::new();
    put_str(&mut b, path);
    put_buf(&mut b, data);
    put_i32(&mut b, -1);
    b
}

/// create/create2 body with world:anyone ALL.
pub fn create_body(path: &str, data: &[u8], flags: i32) -> Vec<u8> {
    let mut b = Vec::new();
    put_str(&mut b, path);
    put_buf(&mut b, data);
    put_i32(&mut b, 1);
    put_i32(&mut b, 31);
    put_str(&mut b, "world");
    put_str(&mut b, "anyone");
    put_i32(&mut b, flags);
    b
}
/// A body that is just a path (sync, getACL, getEphemerals, ...).
pub fn path_body(path: &str) -> Vec<u8> {
    let mut b = Vec::new();
    put_str(&mut b, path);
    b
}
/// getData / exists / getChildren body.
pub fn get_body(path: &str, watch: bool) -> Vec<u8> {
    let mut b = Vec::new();
    put_str(&mut b, path);
    put_bool(&mut b, watch);
    b
}

pub struct Rd<'a>(pub &'a [u8]);
impl Rd<'_> {
    pub fn i32(&mut self) -> i32 {
        let (h, t) = self.0.split_at(4);
        self.0 = t;
        i32::from_be_bytes(h.try_into().unwrap())
    }
    pub fn i64(&mut self) -> i64 {
        let (h, t) = self.0.split_at(8);
        self.0 = t;
        i64::from_be_bytes(h.try_into().unwrap())
    }
    pub fn bool(&mut self) -> bool {
        let (h, t) = self.0.split_at(1);
        self.0 = t;
        h[0] != 0
    }
    pub fn buf(&mut self) -> Option<Vec<u8>> {
        let n = self.i32();
        if n < 0 {
            return None;
        }
        let (h, t) = self.0.split_at(n as usize);
        self.0 = t;
        Some(h.to_vec())
    }
    pub fn str(&mut self) -> String {
        String::from_utf8(self.buf().unwrap_or_default()).unwrap()
    }
}

pub fn connect_body(
    timeout: i32,
    session_id: i64,
    passwd: &[u8],
    last_zxid: i64,
    read_only: Option<bool>,
) -> Vec<u8> {
    let mut b = Vec::new();
    put_i32(&mut b, 0);
    put_i64(&mut b, last_zxid);
    put_i32(&mut b, timeout);
    put_i64(&mut b, session_id);
    put_buf(&mut b, passwd);
    if let Some(ro) = read_only {
        put_bool(&mut b, ro);
    }
    b
}

#[derive(Debug)]
pub struct ConnectResponse {
    pub protocol_version: i32,
    pub timeout: i32,
    pub session_id: i64,
    pub passwd: Vec<u8>,
    pub read_only: Option<bool>,
}

pub fn parse_connect_response(body: &[u8]) -> ConnectResponse {
    let mut r = Rd(body);
    let protocol_version = r.i32();
    let timeout = r.i32();
    let session_id = r.i64();
    let passwd = r.buf().unwrap_or_default();
    let read_only = if r.0.is_empty() { None } else { Some(r.bool()) };
    ConnectResponse {
        protocol_version,
        timeout,
        session_id,
        passwd,
        read_only,
    }
}

/// Reads one length-prefixed frame; None on EOF or reset.
pub fn read_frame(s: &mut TcpStream) -> Option<Vec<u8>> {
    let mut len = [0u8; 4];
    match s.read_exact(&mut len) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return None,
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return None,
        Err(e) => panic!("reading a frame: {e}"),
    }
    let len = i32::from_be_bytes(len);
    assert!(len >= 0, "negative frame length {len}");
    let mut body = vec![0u8; len as usize];
    s.read_exact(&mut body).expect("frame body");
    Some(body)
}

#[derive(Debug, Clone)]
pub struct Reply {
    pub xid: i32,
    pub zxid: i64,
    pub err: i32,
    pub body: Vec<u8>,
}

/// A watch notification: (type, state, path), and the zxid of its header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    pub kind: i32,
    pub state: i32,
    pub path: String,
    pub zxid: i64,
}

pub struct Conn {
    pub s: TcpStream,
    pub session_id: i64,
    pub passwd: Vec<u8>,
    pub timeout: i32,
}

impl Conn {
    pub fn open(port: u16, body: &[u8]) -> (TcpStream, Option<ConnectResponse>) {
        let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s.write_all(&frame(body)).unwrap();
        let resp = read_frame(&mut s).map(|b| parse_connect_response(&b));
        (s, resp)
    }

    /// A new session.
    pub fn handshake(port: u16, timeout: i32) -> Conn {
        let (s, resp) = Conn::open(port, &connect_body(timeout, 0, &[0; 16], 0, Some(false)));
        let resp = resp.expect("connect response");
        assert_ne!(resp.session_id, 0);
        Conn {
            s,
            session_id: resp.session_id,
            passwd: resp.passwd,
            timeout: resp.timeout,
        }
    }

    pub fn send(&mut self, xid: i32, op: i32, body: &[u8]) {
        let mut b = Vec::new();
        put_i32(&mut b, xid);
        put_i32(&mut b, op);
        b.extend_from_slice(body);
        self.s.write_all(&frame(&b)).unwrap();
    }

    /// Next frame, reply or notification alike; None once closed.
    pub fn recv(&mut self) -> Option<Reply> {
        let b = read_frame(&mut self.s)?;
        let mut r = Rd(&b);
        let xid = r.i32();
        let zxid = r.i64();
        let err = r.i32();
        Some(Reply {
            xid,
            zxid,
            err,
            body: r.0.to_vec(),
        })
    }

    /// Sends a request and reads up to its reply, collecting the watch
    /// notifications that arrive before it.
    pub fn call(&mut self, xid: i32, op: i32, body: &[u8]) -> (Reply, Vec<Event>) {
        self.send(xid, op, body);
        let mut events = Vec::new();
        loop {
            let r = self
                .recv()
                .unwrap_or_else(|| panic!("connection closed awaiting xid {xid} (op {op})"));
            if r.xid == -1 {
                let mut rd = Rd(&r.body);
                events.push(Event {
                    kind: rd.i32(),
                    state: rd.i32(),
                    path: rd.str(),
                    zxid: r.zxid,
                });
                continue;
            }
            assert_eq!(r.xid, xid, "replies come in request order");
            return (r, events);
        }
    }
}
