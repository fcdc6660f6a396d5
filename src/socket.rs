//! One TCP socket shared by a connection's reader and writer tasks, and
//! the reader's frame buffer. Client connections (shard) and peer links
//! (peer) both use it, so it sits below both.
//!
//! The socket used to be `dup`ed so each task had a stream of its own: two
//! descriptors per connection (10,378 for 5,000 idle sessions). glommio's
//! stream keeps separate read and write sources and timers, so both tasks can
//! use the one stream as long as neither holds it across an await: each
//! poll borrows it for the duration of that poll only.

use std::cell::RefCell;
use std::io;
use std::os::unix::io::{AsRawFd, RawFd};
use std::pin::Pin;
use std::rc::Rc;
use std::time::Duration;

use futures_lite::future::poll_fn;
use futures_lite::{AsyncRead, AsyncWrite};
use glommio::net::TcpStream;

use crate::tls::TlsSession;
use crate::uring::RingSocket;

#[derive(Clone)]
pub struct Socket(Rc<Inner>);

enum Inner {
    Plain(Plain),
    /// TLS over a plain socket (client connections on a secure port): the
    /// one place a connection's bytes pass through the TLS session.
    Tls(Box<TlsStream>),
}

enum Plain {
    /// A glommio stream (peer links; client sockets where the kernel gave
    /// no ring).
    Stream(RefCell<TcpStream>),
    /// A client socket on its shard's own ring (src/uring.rs).
    Ring(RingSocket),
}

struct TlsStream {
    plain: Plain,
    session: RefCell<TlsSession>,
    /// The last write's ciphertext buffer, kept for the next write.
    out: RefCell<Vec<u8>>,
}

/// Ciphertext buffer capacity a TLS connection keeps between writes.
const TLS_OUT_KEEP: usize = 64 << 10;

/// Netty's SslHandler handshake timeout, which ZooKeeper leaves as it is.
pub const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

impl Socket {
    pub fn new(stream: TcpStream) -> Socket {
        Socket(Rc::new(Inner::Plain(Plain::Stream(RefCell::new(stream)))))
    }

    pub fn on_ring(socket: RingSocket) -> Socket {
        Socket(Rc::new(Inner::Plain(Plain::Ring(socket))))
    }

    /// The ring beneath a plain (not TLS) ring socket: its inbox can be
    /// taken whole (`RingSocket::poll_swap`).
    fn ring(&self) -> Option<&crate::uring::RingSocket> {
        match &*self.0 {
            Inner::Plain(Plain::Ring(r)) => Some(r),
            _ => None,
        }
    }

    fn plain(&self) -> &Plain {
        match &*self.0 {
            Inner::Plain(p) => p,
            Inner::Tls(t) => &t.plain,
        }
    }

    pub fn fd(&self) -> RawFd {
        self.plain().fd()
    }

    /// Runs the server side of a TLS handshake on this (plain, not yet
    /// shared) socket, `prefix` being bytes already read from it, and
    /// returns the socket that carries the session. The caller bounds it
    /// in time ([`TLS_HANDSHAKE_TIMEOUT`]).
    pub async fn accept_tls(
        self,
        config: std::sync::Arc<rustls::ServerConfig>,
        prefix: &[u8],
    ) -> Result<Socket, String> {
        let session = TlsSession::new(config).map_err(|e| e.to_string())?;
        self.start_tls(session, prefix).await
    }

    /// The client side: a TLS handshake with `server` (whose certificate
    /// must name it) on this plain, dialed socket. The caller bounds it in
    /// time.
    pub async fn connect_tls(
        self,
        config: std::sync::Arc<rustls::ClientConfig>,
        server: rustls::pki_types::ServerName<'static>,
    ) -> Result<Socket, String> {
        let session = TlsSession::client(config, server).map_err(|e| e.to_string())?;
        self.start_tls(session, &[]).await
    }

    async fn start_tls(self, mut session: TlsSession, prefix: &[u8]) -> Result<Socket, String> {
        let plain = match Rc::try_unwrap(self.0) {
            Ok(Inner::Plain(p)) => p,
            _ => return Err("TLS on a socket already shared or already TLS".into()),
        };
        let mut out = Vec::new();
        let mut buf = vec![0u8; 4096];
        let mut fed = session.feed(prefix);
        loop {
            // The handshake's next flight, or the alert that ends it.
            let _ = session.take_outgoing(&mut out);
            if !out.is_empty() {
                let (o, sent) = plain.write_owned(out).await;
                out = o;
                out.clear();
                sent.map_err(|e| format!("TLS handshake: {e}"))?;
            }
            fed.map_err(|e| format!("TLS handshake failed: {e}"))?;
            if !session.is_handshaking() {
                break;
            }
            let n = plain
                .read(&mut buf)
                .await
                .map_err(|e| format!("TLS handshake: {e}"))?;
            if n == 0 {
                return Err("closed during the TLS handshake".into());
            }
            fed = session.feed(&buf[..n]);
        }
        Ok(Socket(Rc::new(Inner::Tls(Box::new(TlsStream {
            plain,
            session: RefCell::new(session),
            out: RefCell::new(out),
        })))))
    }

    /// `f` on the TLS session, if this socket has one.
    pub fn with_tls<R>(&self, f: impl FnOnce(&TlsSession) -> R) -> Option<R> {
        match &*self.0 {
            Inner::Tls(t) => Some(f(&t.session.borrow())),
            Inner::Plain(_) => None,
        }
    }

    /// A read that waits longer than `timeout` for its first byte fails with
    /// TimedOut (glommio arms the timer only while a read is pending, and
    /// every byte received disarms it: the time counts from the last byte;
    /// the ring sweeps such deadlines every few milliseconds).
    pub fn set_read_timeout(&self, timeout: Duration) {
        self.plain().set_read_timeout(timeout)
    }

    /// Reads wait as long as they must again (no timer per read).
    pub fn clear_read_timeout(&self) {
        self.plain().clear_read_timeout()
    }

    /// Bytes received (decrypted on a TLS socket); 0 at the end.
    pub async fn read(&self, buf: &mut [u8]) -> io::Result<usize> {
        match &*self.0 {
            Inner::Plain(p) => p.read(buf).await,
            Inner::Tls(t) => loop {
                if let Some(n) = t.session.borrow_mut().read_plain(buf)? {
                    return Ok(n);
                }
                // The ciphertext is read into `buf` and taken (copied) by
                // rustls before any plaintext is written there.
                let n = t.plain.read(buf).await?;
                if n == 0 {
                    return Ok(0);
                }
                t.session.borrow_mut().feed(&buf[..n])?;
            },
        }
    }

    pub async fn write_all(&self, buf: &[u8]) -> io::Result<()> {
        match &*self.0 {
            Inner::Plain(p) => p.write_all(buf).await,
            Inner::Tls(_) => self.write_owned(buf.to_vec()).await.1,
        }
    }

    /// Sends what the kernel takes of `buf` now, without waiting: the bytes
    /// sent, 0 when none (a full socket buffer, an error, which the next
    /// `write_all` meets, or a socket this does not apply to: TLS, whose
    /// records must pass the session, or a ring's). Only while no write of
    /// this socket is pending, or the bytes would interleave.
    pub fn try_write_now(&self, buf: &[u8]) -> usize {
        let Some(fd) = self.direct_fd() else {
            return 0;
        };
        // SAFETY: `buf` is valid for its length; the descriptor is this
        // stream's, open while it lives.
        let sent = unsafe {
            libc::send(
                fd,
                buf.as_ptr().cast(),
                buf.len(),
                libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
            )
        };
        usize::try_from(sent).unwrap_or(0)
    }

    /// The descriptor a caller may send on directly, as `try_write_now`
    /// does: a plain glommio stream's; `None` for TLS and ring sockets.
    pub fn direct_fd(&self) -> Option<RawFd> {
        match &*self.0 {
            Inner::Plain(Plain::Stream(s)) => Some(s.borrow().as_raw_fd()),
            _ => None,
        }
    }

    /// Writes all of `buf` and gives it back: on a ring the kernel reads
    /// the buffer after this call's first poll, so the socket holds it
    /// until the send completes. On a TLS socket `buf` is encrypted into a
    /// buffer the socket keeps, and that is what is sent.
    pub async fn write_owned(&self, buf: Vec<u8>) -> (Vec<u8>, io::Result<()>) {
        match &*self.0 {
            Inner::Plain(p) => p.write_owned(buf).await,
            Inner::Tls(t) => {
                let mut out = std::mem::take(&mut *t.out.borrow_mut());
                out.clear();
                if let Err(e) = t.session.borrow_mut().encrypt(&buf, &mut out) {
                    return (buf, Err(e));
                }
                let (mut out, sent) = t.plain.write_owned(out).await;
                out.clear();
                if out.capacity() <= TLS_OUT_KEEP {
                    *t.out.borrow_mut() = out;
                }
                (buf, sent)
            }
        }
    }

    /// Ends both directions at once: a pending read returns end of file and
    /// a pending write fails, whatever the peer does.
    pub fn shutdown(&self) {
        self.plain().shutdown()
    }
}

impl Plain {
    fn fd(&self) -> RawFd {
        match self {
            Plain::Stream(s) => s.borrow().as_raw_fd(),
            Plain::Ring(r) => r.fd(),
        }
    }

    fn set_read_timeout(&self, timeout: Duration) {
        match self {
            // Only a zero duration is refused; callers pass at least 1 ms.
            Plain::Stream(s) => {
                let _ = s.borrow().set_read_timeout(Some(timeout));
            }
            Plain::Ring(r) => r.set_read_timeout(timeout),
        }
    }

    fn clear_read_timeout(&self) {
        match self {
            Plain::Stream(s) => {
                let _ = s.borrow().set_read_timeout(None);
            }
            Plain::Ring(r) => r.clear_read_timeout(),
        }
    }

    async fn read(&self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Plain::Stream(s) => {
                poll_fn(|cx| Pin::new(&mut *s.borrow_mut()).poll_read(cx, buf)).await
            }
            Plain::Ring(r) => poll_fn(|cx| r.poll_read(cx, buf)).await,
        }
    }

    async fn write_all(&self, mut buf: &[u8]) -> io::Result<()> {
        let s = match self {
            Plain::Stream(s) => s,
            Plain::Ring(r) => return r.write_owned(buf.to_vec()).await.1,
        };
        while !buf.is_empty() {
            let n = poll_fn(|cx| Pin::new(&mut *s.borrow_mut()).poll_write(cx, buf)).await?;
            if n == 0 {
                return Err(io::ErrorKind::WriteZero.into());
            }
            buf = &buf[n..];
        }
        Ok(())
    }

    async fn write_owned(&self, buf: Vec<u8>) -> (Vec<u8>, io::Result<()>) {
        match self {
            Plain::Stream(_) => {
                let r = self.write_all(&buf).await;
                (buf, r)
            }
            Plain::Ring(r) => r.write_owned(buf).await,
        }
    }

    fn shutdown(&self) {
        match self {
            Plain::Stream(_) => {
                // SAFETY: shutdown takes no memory; the descriptor stays
                // open (and ours) until the stream is dropped.
                unsafe { libc::shutdown(self.fd(), libc::SHUT_RDWR) };
            }
            Plain::Ring(r) => r.shutdown(),
        }
    }
}

/// Capacity the frame buffer starts with and shrinks back to: requests of
/// an ordinary session fit, and a pipelining client still gets dozens of
/// small requests per read.
pub const IN_BYTES_KEEP: usize = 4096;

/// What a frame read says when the client closed its socket.
const END_OF_STREAM: &str = "end of stream";

fn read_error(e: io::Error) -> String {
    if e.kind() == io::ErrorKind::TimedOut {
        "silent past its timeout".into()
    } else {
        e.to_string()
    }
}

/// Bytes read from the socket and not yet taken as frames. It grows to the
/// largest frame in it (at most jute.maxbuffer plus its length) and, once
/// empty, shrinks back to IN_BYTES_KEEP; on a ring socket it is the inbox
/// taken whole, and is handed back to the ring (or freed) while the reader
/// waits. Either way an idle connection holds little.
pub struct FrameReader {
    buf: Vec<u8>,
    start: usize,
    end: usize,
}

impl FrameReader {
    /// A reader that starts with `prefix`: bytes already read from the
    /// socket (client.portUnification looked at them to tell TLS apart).
    pub fn with_prefix(capacity: usize, prefix: &[u8]) -> FrameReader {
        let mut buf = vec![0; capacity.max(prefix.len())];
        buf[..prefix.len()].copy_from_slice(prefix);
        FrameReader {
            buf,
            start: 0,
            end: prefix.len(),
        }
    }

    /// Reads until `n` bytes are buffered, growing the buffer if needed.
    async fn fill(&mut self, sock: &Socket, n: usize) -> Result<(), String> {
        if self.start == self.end && n > 0 {
            self.start = 0;
            self.end = 0;
            match sock.ring() {
                // A ring socket's inbox becomes the buffer, all of it at
                // once, and the emptied buffer becomes its inbox: no copy.
                Some(ring) => {
                    let got = poll_fn(|cx| ring.poll_swap(cx, &mut self.buf))
                        .await
                        .map_err(read_error)?;
                    if got == 0 {
                        return Err(END_OF_STREAM.into());
                    }
                    self.end = got;
                }
                None if self.buf.len() > IN_BYTES_KEEP => self.buf = vec![0; IN_BYTES_KEEP],
                None => {}
            }
        }
        if self.start + n > self.buf.len() {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
            if n > self.buf.len() {
                self.buf.resize(n, 0);
            }
        }
        while self.end - self.start < n {
            match sock.read(&mut self.buf[self.end..]).await {
                Ok(0) => return Err(END_OF_STREAM.into()),
                Ok(got) => self.end += got,
                Err(e) => return Err(read_error(e)),
            }
        }
        Ok(())
    }

    /// Takes `n` bytes (after reading them if needed).
    pub async fn take(&mut self, sock: &Socket, n: usize) -> Result<&[u8], String> {
        self.fill(sock, n).await?;
        let at = self.start;
        self.start += n;
        Ok(&self.buf[at..at + n])
    }

    /// Whether a whole frame (length and body) is buffered, so that the
    /// next [`FrameReader::frame`] reads nothing from the socket.
    pub fn has_whole_frame(&self) -> bool {
        let avail = &self.buf[self.start..self.end];
        match avail.first_chunk::<4>() {
            Some(len) => {
                let len = i32::from_be_bytes(*len);
                len >= 0 && avail.len() - 4 >= len as usize
            }
            None => false,
        }
    }

    /// The body length of the frame at the front when it is buffered whole
    /// and its length is in 0..=max.
    fn whole_frame_len(&self, max: usize) -> Option<usize> {
        let avail = &self.buf[self.start..self.end];
        let len = i32::from_be_bytes(*avail.first_chunk::<4>()?);
        let len = usize::try_from(len).ok().filter(|&n| n <= max)?;
        (avail.len() - 4 >= len).then_some(len)
    }

    /// The next length-prefixed frame's body. The length is checked against
    /// `max` (jute.maxbuffer) before anything is allocated.
    pub async fn frame(&mut self, sock: &Socket, max: usize) -> Result<&[u8], String> {
        if let Some(len) = self.whole_frame_len(max) {
            // Buffered whole (most frames of a busy connection): taken
            // without the reads' futures.
            let at = self.start + 4;
            self.start = at + len;
            return Ok(&self.buf[at..self.start]);
        }
        let len = self.take(sock, 4).await?;
        let len = i32::from_be_bytes(len.try_into().expect("4 bytes"));
        self.body(sock, len, max).await
    }

    /// A frame body of `len` bytes, its length already taken.
    pub async fn body(&mut self, sock: &Socket, len: i32, max: usize) -> Result<&[u8], String> {
        if len < 0 || len as usize > max {
            return Err(format!("frame length {len} outside 0..={max}"));
        }
        self.take(sock, len as usize).await
    }
}

#[cfg(test)]
mod tests {
    use super::FrameReader;

    /// A buffered frame is taken whole, its length checked against max
    /// (a longer one is left for the checked path, which refuses it).
    #[test]
    fn buffered_frames_are_taken_whole_within_max() {
        let mut bytes = Vec::new();
        for body in [&b"abc"[..], b"", b"defgh"] {
            bytes.extend_from_slice(&(body.len() as i32).to_be_bytes());
            bytes.extend_from_slice(body);
        }
        let mut r = FrameReader::with_prefix(64, &bytes);
        for want in [&b"abc"[..], b"", b"defgh"] {
            let len = r.whole_frame_len(5).expect("buffered");
            assert_eq!(len, want.len());
            assert_eq!(&r.buf[r.start + 4..r.start + 4 + len], want);
            r.start += 4 + len;
        }
        assert_eq!(r.whole_frame_len(5), None, "nothing left");
        let r = FrameReader::with_prefix(64, &bytes);
        assert_eq!(r.whole_frame_len(2), None, "3 bytes over a max of 2");
        let negative = (-1i32).to_be_bytes();
        assert_eq!(
            FrameReader::with_prefix(64, &negative).whole_frame_len(5),
            None
        );
    }

    /// A frame counts as buffered only with its length and whole body.
    #[test]
    fn whole_frames_are_told_from_partial_ones() {
        let mut bytes = Vec::new();
        bytes.extend_from_slice(&3i32.to_be_bytes());
        bytes.extend_from_slice(b"abc");
        bytes.extend_from_slice(&0i32.to_be_bytes());
        for cut in 0..bytes.len() {
            let r = FrameReader::with_prefix(64, &bytes[..cut]);
            assert_eq!(r.has_whole_frame(), cut >= 7, "cut at {cut}");
        }
        assert!(FrameReader::with_prefix(64, &bytes).has_whole_frame());
        let negative = (-1i32).to_be_bytes();
        assert!(!FrameReader::with_prefix(64, &negative).has_whole_frame());
        assert!(!FrameReader::with_prefix(64, &[]).has_whole_frame());
    }
}
