//! A small synchronous ZooKeeper wire client (jute over TCP) for the
//! differential tests. It sends whatever path strings it is given (no client
//! side validation), keeps every reply byte, and records watch notifications
//! in arrival order, so both servers can be compared at the protocol level.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// Per-reply read timeout: a server that does not answer within this fails
/// the op (and the connection is considered dead afterwards).
pub const OP_TIMEOUT: Duration = Duration::from_secs(5);

pub mod op {
    pub const NOTIFICATION: i32 = 0;
    pub const CREATE: i32 = 1;
    pub const DELETE: i32 = 2;
    pub const EXISTS: i32 = 3;
    pub const GET_DATA: i32 = 4;
    pub const SET_DATA: i32 = 5;
    pub const GET_ACL: i32 = 6;
    pub const SET_ACL: i32 = 7;
    pub const GET_CHILDREN: i32 = 8;
    pub const SYNC: i32 = 9;
    pub const PING: i32 = 11;
    pub const GET_CHILDREN2: i32 = 12;
    pub const CHECK: i32 = 13;
    pub const MULTI: i32 = 14;
    pub const CREATE2: i32 = 15;
    pub const RECONFIG: i32 = 16;
    pub const CHECK_WATCHES: i32 = 17;
    pub const REMOVE_WATCHES: i32 = 18;
    pub const CREATE_CONTAINER: i32 = 19;
    pub const DELETE_CONTAINER: i32 = 20;
    pub const CREATE_TTL: i32 = 21;
    pub const MULTI_READ: i32 = 22;
    pub const AUTH: i32 = 100;
    pub const SET_WATCHES: i32 = 101;
    pub const GET_EPHEMERALS: i32 = 103;
    pub const GET_ALL_CHILDREN_NUMBER: i32 = 104;
    pub const SET_WATCHES2: i32 = 105;
    pub const ADD_WATCH: i32 = 106;
    pub const WHO_AM_I: i32 = 107;
    pub const CLOSE_SESSION: i32 = -11;
    pub const ERROR: i32 = -1;
}

pub fn err_name(code: i32) -> String {
    let s = match code {
        0 => "OK",
        -1 => "SystemError",
        -2 => "RuntimeInconsistency",
        -3 => "DataInconsistency",
        -4 => "ConnectionLoss",
        -5 => "MarshallingError",
        -6 => "Unimplemented",
        -7 => "OperationTimeout",
        -8 => "BadArguments",
        -13 => "NewConfigNoQuorum",
        -14 => "ReconfigInProgress",
        -15 => "UnknownSession",
        -100 => "APIError",
        -101 => "NoNode",
        -102 => "NoAuth",
        -103 => "BadVersion",
        -108 => "NoChildrenForEphemerals",
        -110 => "NodeExists",
        -111 => "NotEmpty",
        -112 => "SessionExpired",
        -113 => "InvalidCallback",
        -114 => "InvalidACL",
        -115 => "AuthFailed",
        -118 => "SessionMoved",
        -119 => "NotReadOnly",
        -120 => "EphemeralOnLocalSession",
        -121 => "NoWatcher",
        -122 => "RequestTimeout",
        -123 => "ReconfigDisabled",
        -124 => "SessionClosedRequireSaslAuth",
        -125 => "QuotaExceeded",
        -127 => "Throttled",
        _ => return format!("Err({code})"),
    };
    s.to_string()
}

pub fn event_name(t: i32) -> String {
    let s = match t {
        -1 => "None",
        1 => "NodeCreated",
        2 => "NodeDeleted",
        3 => "NodeDataChanged",
        4 => "NodeChildrenChanged",
        5 => "DataWatchRemoved",
        6 => "ChildWatchRemoved",
        7 => "PersistentWatchRemoved",
        _ => return format!("Event({t})"),
    };
    s.to_string()
}

// ---------------------------------------------------------------- encoding

#[derive(Default, Clone)]
pub struct Enc(pub Vec<u8>);

impl Enc {
    pub fn new() -> Self {
        Enc(Vec::new())
    }
    pub fn i32(&mut self, v: i32) -> &mut Self {
        self.0.extend_from_slice(&v.to_be_bytes());
        self
    }
    pub fn i64(&mut self, v: i64) -> &mut Self {
        self.0.extend_from_slice(&v.to_be_bytes());
        self
    }
    pub fn bool(&mut self, v: bool) -> &mut Self {
        self.0.push(v as u8);
        self
    }
    pub fn str(&mut self, s: &str) -> &mut Self {
        self.buf(Some(s.as_bytes()))
    }
    pub fn buf(&mut self, b: Option<&[u8]>) -> &mut Self {
        match b {
            None => self.i32(-1),
            Some(b) => {
                self.i32(b.len() as i32);
                self.0.extend_from_slice(b);
                self
            }
        }
    }
    pub fn acls(&mut self, acls: &[Acl]) -> &mut Self {
        self.i32(acls.len() as i32);
        for a in acls {
            self.i32(a.perms).str(&a.scheme).str(&a.id);
        }
        self
    }
    pub fn strs(&mut self, v: &[String]) -> &mut Self {
        self.i32(v.len() as i32);
        for s in v {
            self.str(s);
        }
        self
    }
}

pub struct Dec<'a> {
    pub b: &'a [u8],
}

type DResult<T> = Result<T, String>;

impl<'a> Dec<'a> {
    pub fn new(b: &'a [u8]) -> Self {
        Dec { b }
    }
    fn take(&mut self, n: usize) -> DResult<&'a [u8]> {
        if self.b.len() < n {
            return Err(format!("short body: want {n}, have {}", self.b.len()));
        }
        let (h, t) = self.b.split_at(n);
        self.b = t;
        Ok(h)
    }
    pub fn i32(&mut self) -> DResult<i32> {
        Ok(i32::from_be_bytes(self.take(4)?.try_into().unwrap()))
    }
    pub fn i64(&mut self) -> DResult<i64> {
        Ok(i64::from_be_bytes(self.take(8)?.try_into().unwrap()))
    }
    pub fn bool(&mut self) -> DResult<bool> {
        Ok(self.take(1)?[0] != 0)
    }
    pub fn buf(&mut self) -> DResult<Option<Vec<u8>>> {
        let n = self.i32()?;
        if n < 0 {
            return Ok(None);
        }
        Ok(Some(self.take(n as usize)?.to_vec()))
    }
    pub fn str(&mut self) -> DResult<String> {
        match self.buf()? {
            None => Ok("<null>".into()),
            Some(b) => Ok(String::from_utf8_lossy(&b).into_owned()),
        }
    }
    pub fn strs(&mut self) -> DResult<Vec<String>> {
        let n = self.i32()?;
        if !(0..=1_000_000).contains(&n) {
            return Err(format!("bad vector length {n}"));
        }
        (0..n).map(|_| self.str()).collect()
    }
    pub fn stat(&mut self) -> DResult<Stat> {
        Ok(Stat {
            czxid: self.i64()?,
            mzxid: self.i64()?,
            ctime: self.i64()?,
            mtime: self.i64()?,
            version: self.i32()?,
            cversion: self.i32()?,
            aversion: self.i32()?,
            ephemeral_owner: self.i64()?,
            data_length: self.i32()?,
            num_children: self.i32()?,
            pzxid: self.i64()?,
        })
    }
    pub fn acls(&mut self) -> DResult<Vec<Acl>> {
        let n = self.i32()?;
        if !(0..=100_000).contains(&n) {
            return Err(format!("bad acl vector length {n}"));
        }
        (0..n)
            .map(|_| {
                Ok(Acl {
                    perms: self.i32()?,
                    scheme: self.str()?,
                    id: self.str()?,
                })
            })
            .collect()
    }
    pub fn is_empty(&self) -> bool {
        self.b.is_empty()
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stat {
    pub czxid: i64,
    pub mzxid: i64,
    pub ctime: i64,
    pub mtime: i64,
    pub version: i32,
    pub cversion: i32,
    pub aversion: i32,
    pub ephemeral_owner: i64,
    pub data_length: i32,
    pub num_children: i32,
    pub pzxid: i64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Acl {
    pub perms: i32,
    pub scheme: String,
    pub id: String,
}

impl Acl {
    pub fn new(perms: i32, scheme: &str, id: &str) -> Acl {
        Acl {
            perms,
            scheme: scheme.into(),
            id: id.into(),
        }
    }
    pub fn open() -> Vec<Acl> {
        vec![Acl::new(31, "world", "anyone")]
    }
}

// ---------------------------------------------------------------- frames

#[derive(Clone, Debug)]
pub struct Reply {
    pub xid: i32,
    pub zxid: i64,
    pub err: i32,
    pub body: Vec<u8>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    pub typ: i32,
    pub state: i32,
    pub path: String,
    /// zxid from the notification's reply header (ZooKeeper 3.8 sends -1).
    pub zxid: i64,
}

/// Failure of a call at the transport level (not a ZooKeeper error code).
#[derive(Clone, Debug)]
pub enum CallErr {
    /// No reply within OP_TIMEOUT.
    Timeout,
    /// The server closed the connection (or it was already closed).
    Closed,
    Io(String),
}

impl std::fmt::Display for CallErr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallErr::Timeout => write!(f, "TIMEOUT"),
            CallErr::Closed => write!(f, "CONNECTION-CLOSED"),
            CallErr::Io(e) => write!(f, "IO({e})"),
        }
    }
}

pub struct Conn {
    stream: Option<TcpStream>,
    next_xid: i32,
    pub session_id: i64,
    passwd: Vec<u8>,
    pub negotiated_timeout: i32,
    /// Highest reply-header zxid seen (sent as lastZxidSeen on reconnect and
    /// used as relativeZxid for setWatches).
    pub last_zxid: i64,
    /// Notifications received and not yet taken, in arrival order.
    pub events: Vec<Event>,
    last_send: Instant,
}

fn read_exact_deadline(s: &mut TcpStream, buf: &mut [u8]) -> Result<(), CallErr> {
    match s.read_exact(buf) {
        Ok(()) => Ok(()),
        Err(e) => match e.kind() {
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => Err(CallErr::Timeout),
            std::io::ErrorKind::UnexpectedEof
            | std::io::ErrorKind::ConnectionReset
            | std::io::ErrorKind::ConnectionAborted
            | std::io::ErrorKind::BrokenPipe => Err(CallErr::Closed),
            _ => Err(CallErr::Io(e.to_string())),
        },
    }
}

fn read_frame(s: &mut TcpStream) -> Result<Vec<u8>, CallErr> {
    let mut len = [0u8; 4];
    read_exact_deadline(s, &mut len)?;
    let n = i32::from_be_bytes(len);
    if !(0..=64 * 1024 * 1024).contains(&n) {
        return Err(CallErr::Io(format!("bad frame length {n}")));
    }
    let mut body = vec![0u8; n as usize];
    read_exact_deadline(s, &mut body)?;
    Ok(body)
}

/// The event of a notification frame (xid -1), if it is one.
fn parse_notification(frame: &[u8]) -> Option<Event> {
    let mut d = Dec::new(frame);
    let (xid, zxid, _err) = (d.i32().ok()?, d.i64().ok()?, d.i32().ok()?);
    if xid != -1 {
        return None;
    }
    Some(Event {
        typ: d.i32().ok()?,
        state: d.i32().ok()?,
        path: d.str().ok()?,
        zxid,
    })
}

/// A TCP connection to `addr` (an IPv4 socket address) bound to `src`
/// first: std has no bind-before-connect, so the socket is made by hand.
fn tcp_connect_from(addr: &str, src: std::net::Ipv4Addr) -> std::io::Result<TcpStream> {
    use std::os::unix::io::FromRawFd;
    let dst: std::net::SocketAddrV4 = addr.parse().map_err(|e| {
        std::io::Error::new(std::io::ErrorKind::InvalidInput, format!("{addr}: {e}"))
    })?;
    let sockaddr = |ip: std::net::Ipv4Addr, port: u16| libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: port.to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from(ip).to_be(),
        },
        sin_zero: [0; 8],
    };
    let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
    // SAFETY: plain socket calls on a descriptor this function owns; it
    // is closed on every error path and handed to TcpStream on success.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let local = sockaddr(src, 0);
        let remote = sockaddr(*dst.ip(), dst.port());
        if libc::bind(fd, &local as *const _ as *const libc::sockaddr, len) != 0
            || libc::connect(fd, &remote as *const _ as *const libc::sockaddr, len) != 0
        {
            let e = std::io::Error::last_os_error();
            libc::close(fd);
            return Err(e);
        }
        Ok(TcpStream::from_raw_fd(fd))
    }
}

impl Conn {
    /// Opens a new session with the given requested timeout.
    pub fn connect(addr: &str, timeout_ms: i32) -> Result<Conn, String> {
        Conn::connect_session(addr, timeout_ms, 0, &[0u8; 16], 0)
    }

    /// Re-attaches to an existing session on a new TCP connection, as a
    /// client does after a connection loss.
    pub fn reconnect(&self, addr: &str) -> Result<Conn, String> {
        let mut c = Conn::connect_session(
            addr,
            self.negotiated_timeout,
            self.session_id,
            &self.passwd,
            self.last_zxid,
        )?;
        c.next_xid = self.next_xid;
        Ok(c)
    }

    /// Opens a TCP connection and sends a ConnectRequest. Err when the
    /// server refuses (e.g. an expired session or a wrong password: timeout
    /// and session id 0 in the response).
    pub fn connect_session(
        addr: &str,
        timeout_ms: i32,
        session_id: i64,
        passwd: &[u8],
        last_zxid: i64,
    ) -> Result<Conn, String> {
        let stream = TcpStream::connect(addr).map_err(|e| format!("connect {addr}: {e}"))?;
        Conn::handshake(stream, timeout_ms, session_id, passwd, last_zxid)
    }

    /// A new session over a connection from the local address `src` (any
    /// of 127/8 reaches a server on 127.0.0.1): for ip ACLs that must not
    /// match the usual 127.0.0.1.
    pub fn connect_from(
        addr: &str,
        src: std::net::Ipv4Addr,
        timeout_ms: i32,
    ) -> Result<Conn, String> {
        let stream =
            tcp_connect_from(addr, src).map_err(|e| format!("connect {addr} from {src}: {e}"))?;
        Conn::handshake(stream, timeout_ms, 0, &[0u8; 16], 0)
    }

    fn handshake(
        stream: TcpStream,
        timeout_ms: i32,
        session_id: i64,
        passwd: &[u8],
        last_zxid: i64,
    ) -> Result<Conn, String> {
        stream.set_read_timeout(Some(OP_TIMEOUT)).unwrap();
        stream.set_write_timeout(Some(OP_TIMEOUT)).unwrap();
        stream.set_nodelay(true).unwrap();
        let mut c = Conn {
            stream: Some(stream),
            next_xid: 1,
            session_id: 0,
            passwd: Vec::new(),
            negotiated_timeout: 0,
            last_zxid,
            events: Vec::new(),
            last_send: Instant::now(),
        };
        let mut e = Enc::new();
        e.i32(0) // protocol version
            .i64(last_zxid)
            .i32(timeout_ms)
            .i64(session_id)
            .buf(Some(passwd))
            .bool(false); // read only
        c.send_frame(&e.0)
            .map_err(|e| format!("send connect: {e}"))?;
        let body = read_frame(c.stream.as_mut().unwrap()).map_err(|e| format!("connect: {e}"))?;
        let mut d = Dec::new(&body);
        let _proto = d.i32()?;
        c.negotiated_timeout = d.i32()?;
        c.session_id = d.i64()?;
        c.passwd = d.buf()?.unwrap_or_default();
        if c.session_id == 0 || c.negotiated_timeout <= 0 {
            return Err(format!(
                "session refused (timeout {}, session id {})",
                c.negotiated_timeout,
                if c.session_id == 0 { "0" } else { "non-zero" }
            ));
        }
        if session_id != 0 && c.session_id != session_id {
            return Err("reconnect answered with another session id".into());
        }
        Ok(c)
    }

    pub fn is_open(&self) -> bool {
        self.stream.is_some()
    }

    fn send_frame(&mut self, payload: &[u8]) -> Result<(), CallErr> {
        let s = self.stream.as_mut().ok_or(CallErr::Closed)?;
        let mut framed = Vec::with_capacity(payload.len() + 4);
        framed.extend_from_slice(&(payload.len() as i32).to_be_bytes());
        framed.extend_from_slice(payload);
        self.last_send = Instant::now();
        s.write_all(&framed).map_err(|e| {
            self.stream = None;
            CallErr::Io(e.to_string())
        })
    }

    /// Reads frames until the reply with `xid`; notifications are queued.
    fn read_reply(&mut self, xid: i32) -> Result<Reply, CallErr> {
        loop {
            let s = self.stream.as_mut().ok_or(CallErr::Closed)?;
            let frame = match read_frame(s) {
                Ok(f) => f,
                Err(e) => {
                    self.stream = None;
                    return Err(e);
                }
            };
            let mut d = Dec::new(&frame);
            let (rxid, zxid, err) = match (d.i32(), d.i64(), d.i32()) {
                (Ok(a), Ok(b), Ok(c)) => (a, b, c),
                _ => {
                    self.stream = None;
                    return Err(CallErr::Io("short reply header".into()));
                }
            };
            if rxid == -1 {
                let ev = (|| -> DResult<Event> {
                    Ok(Event {
                        typ: d.i32()?,
                        state: d.i32()?,
                        path: d.str()?,
                        zxid,
                    })
                })()
                .map_err(CallErr::Io)?;
                self.events.push(ev);
                continue;
            }
            if rxid != -2 && zxid > self.last_zxid {
                self.last_zxid = zxid;
            }
            if rxid == xid {
                return Ok(Reply {
                    xid: rxid,
                    zxid,
                    err,
                    body: d.b.to_vec(),
                });
            }
            if rxid == -2 {
                continue; // a stray ping reply
            }
            self.stream = None;
            return Err(CallErr::Io(format!(
                "reply xid {rxid} while waiting for {xid} (err {err})"
            )));
        }
    }

    fn keepalive(&mut self) {
        let limit = Duration::from_millis((self.negotiated_timeout / 3).max(500) as u64);
        if self.stream.is_some() && self.last_send.elapsed() > limit {
            let _ = self.ping();
        }
    }

    pub fn ping(&mut self) -> Result<(), CallErr> {
        let mut e = Enc::new();
        e.i32(-2).i32(op::PING);
        self.send_frame(&e.0)?;
        self.read_reply(-2).map(|_| ())
    }

    /// Sends one request and waits for its reply.
    pub fn call(&mut self, opcode: i32, body: &[u8]) -> Result<Reply, CallErr> {
        self.keepalive();
        let xid = match opcode {
            op::AUTH => -4,
            op::SET_WATCHES | op::SET_WATCHES2 => -8,
            _ => {
                self.next_xid += 1;
                self.next_xid
            }
        };
        let mut e = Enc::new();
        e.i32(xid).i32(opcode);
        e.0.extend_from_slice(body);
        self.send_frame(&e.0)?;
        self.read_reply(xid)
    }

    /// Sends closeSession, returns its reply, then reads (bounded) until the
    /// server closes the connection, queueing any notification that arrives.
    /// The flag tells whether the server closed the connection (ZooKeeper
    /// does, right after the reply).
    pub fn close_session(&mut self) -> (Result<Reply, CallErr>, bool) {
        let r = self.call(op::CLOSE_SESSION, &[]);
        let mut closed_by_server = r.is_err();
        if let Some(s) = self.stream.as_mut() {
            let _ = s.set_read_timeout(Some(Duration::from_millis(1000)));
            loop {
                match read_frame(s) {
                    Ok(frame) => self.events.extend(parse_notification(&frame)),
                    Err(CallErr::Timeout) => break,
                    Err(_) => {
                        closed_by_server = true;
                        break;
                    }
                }
            }
        }
        self.stream = None;
        (r, closed_by_server)
    }

    /// Drops the TCP connection without closing the session.
    pub fn disconnect(&mut self) {
        self.stream = None;
    }

    /// Waits up to `wait` for notifications without sending anything.
    pub fn poll_events(&mut self, wait: Duration) {
        let Some(s) = self.stream.as_mut() else {
            return;
        };
        let deadline = Instant::now() + wait;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            let _ = s.set_read_timeout(Some(left));
            match read_frame(s) {
                Ok(frame) => self.events.extend(parse_notification(&frame)),
                Err(CallErr::Timeout) => break,
                Err(_) => {
                    self.stream = None;
                    return;
                }
            }
        }
        let _ = s.set_read_timeout(Some(OP_TIMEOUT));
    }

    pub fn take_events(&mut self) -> Vec<Event> {
        std::mem::take(&mut self.events)
    }
}
