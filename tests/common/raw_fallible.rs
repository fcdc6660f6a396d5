//! The wire protocol over raw sockets with every call fallible, for tests
//! whose server dies under their clients on purpose (crash tests).
use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

pub const OP_CREATE: i32 = 1;
pub const OP_DELETE: i32 = 2;
pub const OP_EXISTS: i32 = 3;
pub const OP_GET_DATA: i32 = 4;
pub const OP_SET_DATA: i32 = 5;
pub const OP_GET_CHILDREN: i32 = 8;
pub const OP_SYNC: i32 = 9;
pub const OP_PING: i32 = 11;
pub const OP_MULTI: i32 = 14;
pub const OP_CLOSE: i32 = -11;
pub const XID_PING: i32 = -2;
pub const ERR_NO_NODE: i32 = -101;
pub const FLAG_EPHEMERAL: i32 = 1;

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
pub fn put_str(b: &mut Vec<u8>, s: &str) {
    put_buf(b, s.as_bytes());
}

/// create body, world:anyone ALL.
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
pub fn set_body(path: &str, data: &[u8], version: i32) -> Vec<u8> {
    let mut b = Vec::new();
    put_str(&mut b, path);
    put_buf(&mut b, data);
    put_i32(&mut b, version);
    b
}
pub fn delete_body(path: &str, version: i32) -> Vec<u8> {
    let mut b = Vec::new();
    put_str(&mut b, path);
    put_i32(&mut b, version);
    b
}
pub fn get_body(path: &str, watch: bool) -> Vec<u8> {
    let mut b = Vec::new();
    put_str(&mut b, path);
    put_bool(&mut b, watch);
    b
}
pub fn path_body(path: &str) -> Vec<u8> {
    let mut b = Vec::new();
    put_str(&mut b, path);
    b
}
/// A multi of (opcode, body) ops.
pub fn multi_body(ops: &[(i32, Vec<u8>)]) -> Vec<u8> {
    let mut b = Vec::new();
    for (code, body) in ops {
        put_i32(&mut b, *code);
        put_bool(&mut b, false);
        put_i32(&mut b, -1);
        b.extend_from_slice(body);
    }
    put_i32(&mut b, -1);
    put_bool(&mut b, true);
    put_i32(&mut b, -1);
    b
}
/// Whether a multi's results hold an error result (type -1).
pub fn multi_failed(body: &[u8]) -> bool {
    body.len() < 4 || i32::from_be_bytes(body[..4].try_into().unwrap()) == -1
}

pub struct Rd<'a>(pub &'a [u8]);
impl Rd<'_> {
    fn take(&mut self, n: usize) -> &[u8] {
        let (h, t) = self.0.split_at(n);
        self.0 = t;
        h
    }
    pub fn i32(&mut self) -> i32 {
        i32::from_be_bytes(self.take(4).try_into().unwrap())
    }
    pub fn i64(&mut self) -> i64 {
        i64::from_be_bytes(self.take(8).try_into().unwrap())
    }
    pub fn bool(&mut self) -> bool {
        self.take(1)[0] != 0
    }
    pub fn buf(&mut self) -> Option<Vec<u8>> {
        let n = self.i32();
        (n >= 0).then(|| self.take(n as usize).to_vec())
    }
    pub fn str(&mut self) -> String {
        String::from_utf8(self.buf().unwrap_or_default()).unwrap()
    }
}

#[derive(Debug, Clone, Default)]
pub struct Stat {
    pub czxid: i64,
    pub mzxid: i64,
    pub version: i32,
    pub ephemeral_owner: i64,
    pub data_length: i32,
    pub num_children: i32,
}
pub fn parse_stat(r: &mut Rd) -> Stat {
    let czxid = r.i64();
    let mzxid = r.i64();
    let _ctime = r.i64();
    let _mtime = r.i64();
    let version = r.i32();
    let _cversion = r.i32();
    let _aversion = r.i32();
    let ephemeral_owner = r.i64();
    let data_length = r.i32();
    let num_children = r.i32();
    let _pzxid = r.i64();
    Stat {
        czxid,
        mzxid,
        version,
        ephemeral_owner,
        data_length,
        num_children,
    }
}

#[derive(Debug, Clone)]
pub struct Reply {
    pub xid: i32,
    pub zxid: i64,
    pub err: i32,
    pub body: Vec<u8>,
}

pub struct Conn {
    s: TcpStream,
    pub session_id: i64,
    pub passwd: Vec<u8>,
    pub timeout: i32,
    next_xid: i32,
}

fn frame(body: &[u8]) -> Vec<u8> {
    let mut f = Vec::with_capacity(body.len() + 4);
    put_i32(&mut f, body.len() as i32);
    f.extend_from_slice(body);
    f
}

fn read_frame(s: &mut TcpStream) -> io::Result<Vec<u8>> {
    let mut len = [0u8; 4];
    s.read_exact(&mut len)?;
    let len = i32::from_be_bytes(len);
    if !(0..=(64 << 20)).contains(&len) {
        return Err(io::Error::other(format!("frame length {len}")));
    }
    let mut body = vec![0u8; len as usize];
    s.read_exact(&mut body)?;
    Ok(body)
}

impl Conn {
    /// Connects with a session id and password (0 and zeros: a new
    /// session). Ok(None): the server refused the session.
    pub fn connect(
        port: u16,
        timeout: i32,
        session_id: i64,
        passwd: &[u8],
        last_zxid_seen: i64,
    ) -> io::Result<Option<Conn>> {
        let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
        Conn::connect_to(addr, timeout, session_id, passwd, last_zxid_seen)
    }

    /// As `connect`, to any address (ensemble members on 127.0.0.x).
    pub fn connect_to(
        addr: std::net::SocketAddr,
        timeout: i32,
        session_id: i64,
        passwd: &[u8],
        last_zxid_seen: i64,
    ) -> io::Result<Option<Conn>> {
        let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
        s.set_read_timeout(Some(Duration::from_secs(10)))?;
        s.set_nodelay(true)?;
        let mut b = Vec::new();
        put_i32(&mut b, 0);
        put_i64(&mut b, last_zxid_seen);
        put_i32(&mut b, timeout);
        put_i64(&mut b, session_id);
        put_buf(&mut b, passwd);
        put_bool(&mut b, false);
        s.write_all(&frame(&b))?;
        let body = read_frame(&mut s)?;
        let mut r = Rd(&body);
        let _protocol = r.i32();
        let timeout = r.i32();
        let session_id = r.i64();
        let passwd = r.buf().unwrap_or_default();
        if session_id == 0 {
            return Ok(None);
        }
        Ok(Some(Conn {
            s,
            session_id,
            passwd,
            timeout,
            next_xid: 1,
        }))
    }

    pub fn new_session(port: u16, timeout: i32) -> io::Result<Conn> {
        Conn::connect(port, timeout, 0, &[0; 16], 0)?
            .ok_or_else(|| io::Error::other("the server refused a new session"))
    }

    /// Sends a request with the next xid; returns the xid.
    pub fn send(&mut self, op: i32, body: &[u8]) -> io::Result<i32> {
        let xid = self.next_xid;
        self.next_xid += 1;
        self.send_xid(xid, op, body)?;
        Ok(xid)
    }

    pub fn send_xid(&mut self, xid: i32, op: i32, body: &[u8]) -> io::Result<()> {
        let mut b = Vec::with_capacity(body.len() + 8);
        put_i32(&mut b, xid);
        put_i32(&mut b, op);
        b.extend_from_slice(body);
        self.s.write_all(&frame(&b))
    }

    /// The next reply (watch notifications skipped).
    pub fn recv(&mut self) -> io::Result<Reply> {
        loop {
            let b = read_frame(&mut self.s)?;
            if b.len() < 16 {
                return Err(io::Error::other("reply shorter than its header"));
            }
            let mut r = Rd(&b);
            let xid = r.i32();
            let zxid = r.i64();
            let err = r.i32();
            if xid == -1 {
                continue;
            }
            return Ok(Reply {
                xid,
                zxid,
                err,
                body: r.0.to_vec(),
            });
        }
    }

    pub fn call(&mut self, op: i32, body: &[u8]) -> io::Result<Reply> {
        let xid = self.send(op, body)?;
        self.await_xid(xid)
    }

    pub fn call_xid(&mut self, xid: i32, op: i32, body: &[u8]) -> io::Result<Reply> {
        self.send_xid(xid, op, body)?;
        self.await_xid(xid)
    }

    fn await_xid(&mut self, xid: i32) -> io::Result<Reply> {
        let r = self.recv()?;
        if r.xid != xid {
            return Err(io::Error::other(format!(
                "reply for xid {} while awaiting {xid}",
                r.xid
            )));
        }
        Ok(r)
    }
}

/// getData of many paths, pipelined: Some(data) or None (no node).
pub fn get_many<S: AsRef<str>>(conn: &mut Conn, paths: &[S]) -> io::Result<Vec<Option<Vec<u8>>>> {
    let mut out = Vec::with_capacity(paths.len());
    for chunk in paths.chunks(256) {
        let mut xids = Vec::with_capacity(chunk.len());
        for p in chunk {
            xids.push(conn.send(OP_GET_DATA, &get_body(p.as_ref(), false))?);
        }
        for (xid, p) in xids.into_iter().zip(chunk) {
            let r = conn.recv()?;
            if r.xid != xid {
                return Err(io::Error::other("replies out of order"));
            }
            out.push(match r.err {
                0 => Rd(&r.body).buf(),
                ERR_NO_NODE => None,
                e => {
                    return Err(io::Error::other(format!(
                        "getData {} answered {e}",
                        p.as_ref()
                    )))
                }
            });
        }
    }
    Ok(out)
}

/// create of many nodes, pipelined; every create must succeed.
pub fn create_many(conn: &mut Conn, nodes: &[(String, Vec<u8>)]) -> io::Result<i64> {
    let mut last_zxid = 0;
    for chunk in nodes.chunks(256) {
        let mut xids = Vec::with_capacity(chunk.len());
        for (p, d) in chunk {
            xids.push(conn.send(OP_CREATE, &create_body(p, d, 0))?);
        }
        for (xid, (p, _)) in xids.into_iter().zip(chunk) {
            let r = conn.recv()?;
            if r.xid != xid || r.err != 0 {
                return Err(io::Error::other(format!(
                    "create {p}: xid {} err {}",
                    r.xid, r.err
                )));
            }
            last_zxid = r.zxid;
        }
    }
    Ok(last_zxid)
}

pub fn children_of(conn: &mut Conn, path: &str) -> io::Result<Vec<String>> {
    let r = conn.call(OP_GET_CHILDREN, &get_body(path, false))?;
    if r.err != 0 {
        return Err(io::Error::other(format!("getChildren {path}: {}", r.err)));
    }
    let mut rd = Rd(&r.body);
    let n = rd.i32();
    Ok((0..n.max(0)).map(|_| rd.str()).collect())
}
