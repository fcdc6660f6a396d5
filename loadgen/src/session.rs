//! One ZooKeeper session on a raw socket, driven with pipelined requests.
//! Requests are pre-encoded templates whose xid is patched in place, or are
//! encoded straight into the caller's reusable output buffer; replies are
//! parsed in the read buffer: no allocation per request.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

use futures_lite::{AsyncReadExt, AsyncWriteExt};
use std::sync::{Arc, OnceLock};

use rustls::pki_types::pem::PemObject;

use glommio::net::TcpStream;
use ringkeeper::proto::codes::op;
use ringkeeper::proto::jute::Writer;
use ringkeeper::proto::{encode_acls, Acl, ConnectRequest, ConnectResponse, Request};
use ringkeeper::tls::TlsSession;

const READ_BUFFER_BYTES: usize = 256 * 1024;
const FRAME_BYTES_MAX: usize = 64 << 20;
/// How long a connect (TCP + ConnectResponse) may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Every request frame this process sent, ConnectRequests included: what a
/// ZooKeeper server counts as packets received (srvr "Received:").
pub static FRAMES_SENT: AtomicU64 = AtomicU64::new(0);
/// ConnectRequests among them.
pub static CONNECTS_SENT: AtomicU64 = AtomicU64::new(0);
/// Socket reads and writes (each a glommio I/O operation, which allocates
/// its own bookkeeping): requests are batched many per operation.
pub static IO_OPS: AtomicU64 = AtomicU64::new(0);

/// The session's connection: plain TCP, or TLS for a target written
/// `tcp+tls://host:port` (see [`tls_config`]).
enum Transport {
    Plain(TcpStream),
    Tls(Box<TlsTransport>),
}

struct TlsTransport {
    stream: TcpStream,
    session: TlsSession,
    /// Ciphertext read from the socket, and written to it.
    cipher_in: Vec<u8>,
    cipher_out: Vec<u8>,
}

/// What `tcp+tls://` targets connect with, from the environment:
/// RK_LOADGEN_TLS_CA (PEM, the CA that signed the server's certificate;
/// required), RK_LOADGEN_TLS_CERT and RK_LOADGEN_TLS_KEY (PEM, a client
/// certificate and its key, for servers with ssl.clientAuth=need). The
/// server's certificate must name the target's host (an IP address as a
/// SAN IP entry), as Java's client checks it.
fn tls_config() -> std::io::Result<Arc<rustls::ClientConfig>> {
    static CONFIG: OnceLock<Result<Arc<rustls::ClientConfig>, String>> = OnceLock::new();
    CONFIG
        .get_or_init(|| {
            let read = |var: &str| -> Result<Option<Vec<u8>>, String> {
                match std::env::var(var) {
                    Ok(path) => std::fs::read(&path)
                        .map(Some)
                        .map_err(|e| format!("{var}={path}: {e}")),
                    Err(_) => Ok(None),
                }
            };
            let ca = read("RK_LOADGEN_TLS_CA")?.ok_or(
                "tcp+tls:// targets need RK_LOADGEN_TLS_CA (a PEM file of the server's CA)",
            )?;
            let mut roots = rustls::RootCertStore::empty();
            for cert in rustls::pki_types::CertificateDer::pem_slice_iter(&ca) {
                roots
                    .add(cert.map_err(|e| format!("RK_LOADGEN_TLS_CA: {e}"))?)
                    .map_err(|e| format!("RK_LOADGEN_TLS_CA: {e}"))?;
            }
            let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
            let builder = rustls::ClientConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()
                .map_err(|e| e.to_string())?
                .with_root_certificates(roots);
            let config = match (read("RK_LOADGEN_TLS_CERT")?, read("RK_LOADGEN_TLS_KEY")?) {
                (Some(cert), Some(key)) => {
                    let chain = rustls::pki_types::CertificateDer::pem_slice_iter(&cert)
                        .collect::<Result<Vec<_>, _>>()
                        .map_err(|e| format!("RK_LOADGEN_TLS_CERT: {e}"))?;
                    let key = rustls::pki_types::PrivateKeyDer::from_pem_slice(&key)
                        .map_err(|e| format!("RK_LOADGEN_TLS_KEY: {e}"))?;
                    builder
                        .with_client_auth_cert(chain, key)
                        .map_err(|e| format!("RK_LOADGEN_TLS_CERT/KEY: {e}"))?
                }
                _ => builder.with_no_client_auth(),
            };
            Ok(Arc::new(config))
        })
        .clone()
        .map_err(std::io::Error::other)
}

impl Transport {
    async fn connect(addr: &str) -> std::io::Result<Transport> {
        let Some(host_port) = addr.strip_prefix("tcp+tls://") else {
            let stream = TcpStream::connect(addr.strip_prefix("tcp://").unwrap_or(addr)).await?;
            stream.set_nodelay(true)?;
            return Ok(Transport::Plain(stream));
        };
        let config = tls_config()?;
        let host = host_port.rsplit_once(':').map_or(host_port, |(h, _)| h);
        let name = rustls::pki_types::ServerName::try_from(host.to_string())
            .map_err(|e| std::io::Error::other(format!("{host}: {e}")))?;
        let stream = TcpStream::connect(host_port).await?;
        stream.set_nodelay(true)?;
        let mut t = TlsTransport {
            stream,
            session: TlsSession::client(config, name)?,
            cipher_in: vec![0; READ_BUFFER_BYTES],
            cipher_out: Vec::new(),
        };
        while t.session.is_handshaking() {
            t.flush().await?;
            if !t.session.is_handshaking() {
                break;
            }
            t.feed().await?;
        }
        t.flush().await?;
        Ok(Transport::Tls(Box::new(t)))
    }

    async fn write_all(&mut self, buf: &[u8]) -> std::io::Result<()> {
        match self {
            Transport::Plain(s) => s.write_all(buf).await,
            Transport::Tls(t) => {
                t.cipher_out.clear();
                t.session.encrypt(buf, &mut t.cipher_out)?;
                t.stream.write_all(&t.cipher_out).await
            }
        }
    }

    async fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Transport::Plain(s) => s.read(buf).await,
            Transport::Tls(t) => loop {
                if let Some(n) = t.session.read_plain(buf)? {
                    return Ok(n);
                }
                if t.feed().await? == 0 {
                    return Ok(0);
                }
            },
        }
    }
}

impl TlsTransport {
    /// Sends what the TLS session has to send.
    async fn flush(&mut self) -> std::io::Result<()> {
        self.cipher_out.clear();
        self.session.take_outgoing(&mut self.cipher_out)?;
        if !self.cipher_out.is_empty() {
            self.stream.write_all(&self.cipher_out).await?;
        }
        Ok(())
    }

    /// Reads ciphertext into the session; 0 at the end of the stream.
    async fn feed(&mut self) -> std::io::Result<usize> {
        let n = self.stream.read(&mut self.cipher_in).await?;
        if n > 0 {
            self.session.feed(&self.cipher_in[..n])?;
        }
        Ok(n)
    }
}

pub struct Session {
    stream: Transport,
    rbuf: Vec<u8>,
    rstart: usize,
    rend: usize,
    read_at: Instant,
    next_xid: i32,
    unsent_frames: u64,
}

/// A request encoded once: `len | xid | type | body`, xid patched per send.
#[derive(Clone)]
pub struct Template {
    pub bytes: Vec<u8>,
    pub is_write: bool,
}

impl Template {
    pub fn new(request: &Request) -> Template {
        let mut bytes = vec![0u8; 12];
        bytes[8..12].copy_from_slice(&request.opcode().to_be_bytes());
        request.encode(&mut bytes);
        let len = (bytes.len() - 4) as i32;
        bytes[0..4].copy_from_slice(&len.to_be_bytes());
        Template {
            bytes,
            is_write: request.is_write(),
        }
    }
}

/// One reply frame as read off the wire (xid, zxid, err); `body` is what
/// follows the header.
pub struct Frame<'a> {
    pub xid: i32,
    pub err: i32,
    pub body: &'a [u8],
    /// When the read that completed this frame returned.
    pub at: Instant,
}

impl Session {
    /// Opens a session and creates `path` (empty, persistent) with it: the
    /// set-up every experiment with a root of its own starts with. Returns
    /// the session and the create's code (0 or an error such as NODEEXISTS,
    /// for the caller to judge).
    pub async fn connect_creating(
        addr: &str,
        timeout_ms: i32,
        path: &str,
    ) -> Result<(Session, i32), String> {
        let mut s = Session::connect(addr, timeout_ms)
            .await
            .map_err(|e| format!("connect {addr}: {e}"))?;
        let code = s
            .call(&create_template(path, b""))
            .await
            .map_err(|e| e.to_string())?;
        Ok((s, code))
    }

    /// Opens a new session (bounded by CONNECT_TIMEOUT).
    pub async fn connect(addr: &str, timeout_ms: i32) -> std::io::Result<Session> {
        let connecting = Self::connect_inner(addr, timeout_ms);
        let deadline = async {
            glommio::timer::sleep(CONNECT_TIMEOUT).await;
            Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!("connect to {addr} timed out"),
            ))
        };
        futures_lite::future::or(connecting, deadline).await
    }

    async fn connect_inner(addr: &str, timeout_ms: i32) -> std::io::Result<Session> {
        let (s, resp) = Self::attach(addr, timeout_ms, 0, vec![0; 16]).await?;
        if resp.session_id == 0 {
            return Err(std::io::Error::other("session refused"));
        }
        Ok(s)
    }

    /// Connects with `session_id` and `passwd` (0 and zeros: a new
    /// session) and returns the server's answer as it is: a session id of
    /// 0 (timeout 0) is ZooKeeper's "that session expired".
    pub async fn attach(
        addr: &str,
        timeout_ms: i32,
        session_id: i64,
        passwd: Vec<u8>,
    ) -> std::io::Result<(Session, ConnectResponse)> {
        let mut stream = Transport::connect(addr).await?;
        let req = ConnectRequest {
            protocol_version: 0,
            last_zxid_seen: 0,
            timeout_ms,
            session_id,
            passwd,
            read_only: false,
            has_read_only: true,
        };
        let mut buf = vec![0u8; 4];
        req.encode(&mut buf);
        let len = (buf.len() - 4) as i32;
        buf[0..4].copy_from_slice(&len.to_be_bytes());
        FRAMES_SENT.fetch_add(1, Relaxed);
        CONNECTS_SENT.fetch_add(1, Relaxed);
        stream.write_all(&buf).await?;
        let body = read_frame(&mut stream).await?;
        let resp = ConnectResponse::decode(&body)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e.to_string()))?;
        let session = Session {
            stream,
            rbuf: vec![0; READ_BUFFER_BYTES],
            rstart: 0,
            rend: 0,
            read_at: Instant::now(),
            next_xid: 1,
            unsent_frames: 0,
        };
        Ok((session, resp))
    }

    fn take_xid(&mut self) -> i32 {
        let xid = self.next_xid;
        self.next_xid = self.next_xid.wrapping_add(1).max(1);
        self.unsent_frames += 1;
        xid
    }

    /// Appends `t` to `out` with a fresh xid; returns the xid.
    pub fn push(&mut self, out: &mut Vec<u8>, t: &Template) -> i32 {
        let xid = self.take_xid();
        let start = out.len();
        out.extend_from_slice(&t.bytes);
        out[start + 4..start + 8].copy_from_slice(&xid.to_be_bytes());
        xid
    }

    /// Appends a request of `opcode` whose body `body` writes; returns the xid.
    pub fn push_with(
        &mut self,
        out: &mut Vec<u8>,
        opcode: i32,
        body: impl FnOnce(&mut Writer),
    ) -> i32 {
        let xid = self.take_xid();
        let start = out.len();
        out.extend_from_slice(&[0u8; 4]);
        out.extend_from_slice(&xid.to_be_bytes());
        out.extend_from_slice(&opcode.to_be_bytes());
        body(&mut Writer::new(out));
        let len = (out.len() - start - 4) as i32;
        out[start..start + 4].copy_from_slice(&len.to_be_bytes());
        xid
    }

    /// Writes `out` (frames pushed since the last send).
    pub async fn send(&mut self, out: &[u8]) -> std::io::Result<()> {
        FRAMES_SENT.fetch_add(self.unsent_frames, Relaxed);
        IO_OPS.fetch_add(1, Relaxed);
        self.unsent_frames = 0;
        self.stream.write_all(out).await
    }

    /// Waits for at least one reply frame, then hands every complete frame
    /// in the buffer to `f`, notifications (xid -1) included. Returns how
    /// many frames were handled.
    pub async fn recv(&mut self, mut f: impl FnMut(&Frame)) -> std::io::Result<usize> {
        loop {
            let mut handled = 0;
            let mut used = 0;
            {
                let buf = &self.rbuf[self.rstart..self.rend];
                while buf.len() - used >= 4 {
                    let len = i32::from_be_bytes(buf[used..used + 4].try_into().unwrap());
                    if len < 0 {
                        return Err(std::io::Error::other(format!("frame length {len}")));
                    }
                    let len = len as usize;
                    if buf.len() - used < 4 + len {
                        break;
                    }
                    let frame = &buf[used + 4..used + 4 + len];
                    if len >= 16 {
                        f(&Frame {
                            xid: i32::from_be_bytes(frame[0..4].try_into().unwrap()),
                            err: i32::from_be_bytes(frame[12..16].try_into().unwrap()),
                            body: &frame[16..],
                            at: self.read_at,
                        });
                        handled += 1;
                    }
                    used += 4 + len;
                }
            }
            self.rstart += used;
            if handled > 0 {
                return Ok(handled);
            }
            self.fill().await?;
        }
    }

    /// Reads more bytes, compacting or growing the buffer as needed.
    async fn fill(&mut self) -> std::io::Result<()> {
        if self.rstart == self.rend {
            self.rstart = 0;
            self.rend = 0;
        }
        if self.rend == self.rbuf.len() {
            if self.rstart > 0 {
                self.rbuf.copy_within(self.rstart..self.rend, 0);
                self.rend -= self.rstart;
                self.rstart = 0;
            } else {
                // One frame larger than the buffer.
                let new_len = (self.rbuf.len() * 2).min(FRAME_BYTES_MAX + 4);
                if new_len == self.rbuf.len() {
                    return Err(std::io::Error::other("reply frame too large"));
                }
                self.rbuf.resize(new_len, 0);
            }
        }
        IO_OPS.fetch_add(1, Relaxed);
        let n = self.stream.read(&mut self.rbuf[self.rend..]).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        self.read_at = Instant::now();
        self.rend += n;
        Ok(())
    }

    /// Waits for the reply to `xid` and returns its error code; every other
    /// frame (notifications included) goes to `other`.
    pub async fn wait_for(
        &mut self,
        xid: i32,
        mut other: impl FnMut(&Frame),
    ) -> std::io::Result<i32> {
        let mut code = None;
        while code.is_none() {
            self.recv(|fr| {
                if fr.xid == xid {
                    code = Some(fr.err);
                } else {
                    other(fr);
                }
            })
            .await?;
        }
        Ok(code.unwrap_or(0))
    }

    /// One synchronous request; returns the error code.
    pub async fn call(&mut self, t: &Template) -> std::io::Result<i32> {
        let mut out = Vec::with_capacity(t.bytes.len());
        let xid = self.push(&mut out, t);
        self.send(&out).await?;
        self.wait_for(xid, |_| {}).await
    }

    /// Runs `ts` pipelined, `window` at a time; returns each one's code.
    /// Nothing else may be in flight on the session.
    pub async fn call_many(&mut self, ts: &[Template], window: usize) -> std::io::Result<Vec<i32>> {
        let mut codes = Vec::with_capacity(ts.len());
        let mut out = Vec::new();
        for chunk in ts.chunks(window.max(1)) {
            out.clear();
            for t in chunk {
                self.push(&mut out, t);
            }
            self.send(&out).await?;
            let mut got = 0;
            while got < chunk.len() {
                self.recv(|fr| {
                    // Replies come in order; notifications and pings have xid < 0.
                    if fr.xid > 0 {
                        codes.push(fr.err);
                        got += 1;
                    }
                })
                .await?;
            }
        }
        Ok(codes)
    }

    /// Closes the session (closeSession, bounded wait for its reply).
    pub async fn close(mut self) {
        let t = Template::new(&Request::CloseSession);
        let _ = futures_lite::future::or(
            async {
                let _ = self.call(&t).await;
            },
            async {
                glommio::timer::sleep(Duration::from_secs(2)).await;
            },
        )
        .await;
    }
}

async fn read_frame(io: &mut Transport) -> std::io::Result<Vec<u8>> {
    let mut len = [0u8; 4];
    io.read_exact(&mut len).await?;
    let len = i32::from_be_bytes(len);
    if !(0..=FRAME_BYTES_MAX as i32).contains(&len) {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("frame length {len}"),
        ));
    }
    let mut body = vec![0u8; len as usize];
    io.read_exact(&mut body).await?;
    Ok(body)
}

impl Transport {
    async fn read_exact(&mut self, mut buf: &mut [u8]) -> std::io::Result<()> {
        while !buf.is_empty() {
            let n = self.read(buf).await?;
            if n == 0 {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
            buf = &mut buf[n..];
        }
        Ok(())
    }
}

/// Requests in flight on one session, oldest first (replies come in order).
pub struct InFlight {
    q: VecDeque<(i32, Instant, bool)>,
}

impl InFlight {
    pub fn with_capacity(n: usize) -> InFlight {
        InFlight {
            q: VecDeque::with_capacity(n),
        }
    }

    pub fn push(&mut self, xid: i32, at: Instant, is_write: bool) {
        self.q.push_back((xid, at, is_write));
    }

    /// Matches a reply to the oldest request; None if the server answered
    /// out of order (a protocol violation the caller reports).
    pub fn pop(&mut self, xid: i32) -> Option<(Instant, bool)> {
        match self.q.front() {
            Some(&(x, at, w)) if x == xid => {
                self.q.pop_front();
                Some((at, w))
            }
            _ => None,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.q.is_empty()
    }

    /// Forgets everything (the connection was lost); returns how many.
    pub fn clear(&mut self) -> usize {
        let n = self.q.len();
        self.q.clear();
        n
    }
}

/// The open ACL (world:anyone, all perms) that creates carry.
pub fn open_acl() -> Vec<Acl> {
    vec![Acl::world_all()]
}

/// Appends a create request body: path, data, ACL, flags.
pub fn create_body(w: &mut Writer, path: &str, data: &[u8], acl: &[Acl], flags: i32) {
    w.string(path).buffer(data);
    encode_acls(w, acl);
    w.i32(flags);
}

pub fn create_template(path: &str, data: &[u8]) -> Template {
    Template::new(&Request::Create {
        opcode: op::CREATE,
        path: path.to_string(),
        data: Some(data.to_vec().into()),
        acl: open_acl(),
        flags: 0,
        ttl: -1,
    })
}

/// Parses a watch notification body (type, state, path) without copying.
pub fn parse_event(body: &[u8]) -> Option<(i32, &[u8])> {
    if body.len() < 12 {
        return None;
    }
    let kind = i32::from_be_bytes(body[0..4].try_into().unwrap());
    let len = i32::from_be_bytes(body[8..12].try_into().unwrap());
    let path = body.get(12..12 + usize::try_from(len).ok()?)?;
    Some((kind, path))
}

/// Runs `f` on a fresh single-threaded glommio executor and waits for it.
pub fn on_executor<F, Fut, T>(name: &str, f: F) -> Result<T, String>
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: std::future::Future<Output = T> + 'static,
    T: Send + 'static,
{
    glommio::LocalExecutorBuilder::new(glommio::Placement::Unbound)
        .name(name)
        .spawn(f)
        .map_err(|e| e.to_string())?
        .join()
        .map_err(|e| e.to_string())
}
