//! One ZooKeeper session on a raw socket, driven with pipelined requests.
//! Requests are pre-encoded templates whose xid is patched in place, and
//! replies are parsed in the read buffer: no allocation per request.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use futures_lite::{AsyncReadExt, AsyncWriteExt};
use glommio::net::TcpStream;
use ringkeeper::proto::codes::op;
use ringkeeper::proto::{ConnectRequest, ConnectResponse, Request};

const READ_BUFFER_BYTES: usize = 256 * 1024;
const FRAME_BYTES_MAX: usize = 64 << 20;

pub struct Session {
    stream: TcpStream,
    rbuf: Vec<u8>,
    rstart: usize,
    rend: usize,
    next_xid: i32,
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

/// A reply header as read off the wire.
pub struct ReplyHeader {
    pub xid: i32,
    pub err: i32,
}

impl Session {
    pub async fn connect(addr: &str, timeout_ms: i32) -> std::io::Result<Session> {
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        let mut stream = stream;
        let req = ConnectRequest {
            protocol_version: 0,
            last_zxid_seen: 0,
            timeout_ms,
            session_id: 0,
            passwd: vec![0; 16],
            read_only: false,
            has_read_only: true,
        };
        let mut buf = vec![0u8; 4];
        req.encode(&mut buf);
        let len = (buf.len() - 4) as i32;
        buf[0..4].copy_from_slice(&len.to_be_bytes());
        stream.write_all(&buf).await?;
        let body = read_frame(&mut stream).await?;
        let resp = ConnectResponse::decode(&body)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e.to_string()))?;
        if resp.session_id == 0 {
            return Err(std::io::Error::other("session refused"));
        }
        Ok(Session {
            stream,
            rbuf: vec![0; READ_BUFFER_BYTES],
            rstart: 0,
            rend: 0,
            next_xid: 1,
        })
    }

    /// Appends `t` to `out` with a fresh xid; returns the xid.
    pub fn push(&mut self, out: &mut Vec<u8>, t: &Template) -> i32 {
        let xid = self.next_xid;
        self.next_xid = self.next_xid.wrapping_add(1).max(1);
        let start = out.len();
        out.extend_from_slice(&t.bytes);
        out[start + 4..start + 8].copy_from_slice(&xid.to_be_bytes());
        xid
    }

    pub async fn send(&mut self, out: &[u8]) -> std::io::Result<()> {
        self.stream.write_all(out).await
    }

    /// Waits for at least one reply, then hands every complete reply in the
    /// buffer to `f`. Notifications (xid -1) are skipped. Returns how many
    /// replies were handled.
    pub async fn recv_replies(&mut self, mut f: impl FnMut(ReplyHeader)) -> std::io::Result<usize> {
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
                        let xid = i32::from_be_bytes(frame[0..4].try_into().unwrap());
                        let err = i32::from_be_bytes(frame[12..16].try_into().unwrap());
                        if xid != -1 {
                            f(ReplyHeader { xid, err });
                            handled += 1;
                        }
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
        let n = self.stream.read(&mut self.rbuf[self.rend..]).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        self.rend += n;
        Ok(())
    }

    /// One synchronous request; returns the error code.
    pub async fn call(&mut self, t: &Template) -> std::io::Result<i32> {
        let mut out = Vec::with_capacity(t.bytes.len());
        let xid = self.push(&mut out, t);
        self.send(&out).await?;
        let mut code = None;
        while code.is_none() {
            self.recv_replies(|h| {
                if h.xid == xid {
                    code = Some(h.err);
                }
            })
            .await?;
        }
        Ok(code.unwrap_or(0))
    }

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

async fn read_frame(io: &mut TcpStream) -> std::io::Result<Vec<u8>> {
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
}

pub fn create_template(path: &str, data: &[u8]) -> Template {
    Template::new(&Request::Create {
        opcode: op::CREATE,
        path: path.to_string(),
        data: Some(data.to_vec()),
        acl: vec![ringkeeper::proto::Acl::world_all()],
        flags: 0,
        ttl: -1,
    })
}
