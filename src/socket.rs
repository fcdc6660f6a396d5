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

use crate::uring::RingSocket;

#[derive(Clone)]
pub struct Socket(Rc<Inner>);

enum Inner {
    /// A glommio stream (peer links; client sockets where the kernel gave
    /// no ring).
    Stream(RefCell<TcpStream>),
    /// A client socket on its shard's own ring (src/uring.rs).
    Ring(RingSocket),
}

impl Socket {
    pub fn new(stream: TcpStream) -> Socket {
        Socket(Rc::new(Inner::Stream(RefCell::new(stream))))
    }

    pub fn on_ring(socket: RingSocket) -> Socket {
        Socket(Rc::new(Inner::Ring(socket)))
    }

    pub fn fd(&self) -> RawFd {
        match &*self.0 {
            Inner::Stream(s) => s.borrow().as_raw_fd(),
            Inner::Ring(r) => r.fd(),
        }
    }

    /// A read that waits longer than `timeout` for its first byte fails with
    /// TimedOut (glommio arms the timer only while a read is pending, and
    /// every byte received disarms it: the time counts from the last byte;
    /// the ring sweeps such deadlines every few milliseconds).
    pub fn set_read_timeout(&self, timeout: Duration) {
        match &*self.0 {
            // Only a zero duration is refused; callers pass at least 1 ms.
            Inner::Stream(s) => {
                let _ = s.borrow().set_read_timeout(Some(timeout));
            }
            Inner::Ring(r) => r.set_read_timeout(timeout),
        }
    }

    pub async fn read(&self, buf: &mut [u8]) -> io::Result<usize> {
        match &*self.0 {
            Inner::Stream(s) => {
                poll_fn(|cx| Pin::new(&mut *s.borrow_mut()).poll_read(cx, buf)).await
            }
            Inner::Ring(r) => poll_fn(|cx| r.poll_read(cx, buf)).await,
        }
    }

    pub async fn write_all(&self, mut buf: &[u8]) -> io::Result<()> {
        let s = match &*self.0 {
            Inner::Stream(s) => s,
            Inner::Ring(r) => return r.write_owned(buf.to_vec()).await.1,
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

    /// Writes all of `buf` and gives it back: on a ring the kernel reads
    /// the buffer after this call's first poll, so the socket holds it
    /// until the send completes.
    pub async fn write_owned(&self, buf: Vec<u8>) -> (Vec<u8>, io::Result<()>) {
        match &*self.0 {
            Inner::Stream(_) => {
                let r = self.write_all(&buf).await;
                (buf, r)
            }
            Inner::Ring(r) => r.write_owned(buf).await,
        }
    }

    /// Ends both directions at once: a pending read returns end of file and
    /// a pending write fails, whatever the peer does.
    pub fn shutdown(&self) {
        match &*self.0 {
            Inner::Stream(_) => {
                // SAFETY: shutdown takes no memory; the descriptor stays
                // open (and ours) until the stream is dropped.
                unsafe { libc::shutdown(self.fd(), libc::SHUT_RDWR) };
            }
            Inner::Ring(r) => r.shutdown(),
        }
    }
}

/// Capacity the frame buffer starts with and shrinks back to: requests of
/// an ordinary session fit, and a pipelining client still gets dozens of
/// small requests per read.
pub const IN_BYTES_KEEP: usize = 4096;

/// Bytes read from the socket and not yet taken as frames. It grows to the
/// largest frame in it (at most jute.maxbuffer plus its length) and shrinks
/// back to IN_BYTES_KEEP once empty, so an idle connection holds little.
pub struct FrameReader {
    buf: Vec<u8>,
    start: usize,
    end: usize,
}

impl FrameReader {
    pub fn new(capacity: usize) -> FrameReader {
        FrameReader {
            buf: vec![0; capacity],
            start: 0,
            end: 0,
        }
    }

    /// Reads until `n` bytes are buffered, growing the buffer if needed.
    async fn fill(&mut self, sock: &Socket, n: usize) -> Result<(), String> {
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
                Ok(0) => return Err("end of stream".into()),
                Ok(got) => self.end += got,
                Err(e) if e.kind() == io::ErrorKind::TimedOut => {
                    return Err("silent past its timeout".into())
                }
                Err(e) => return Err(e.to_string()),
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

    /// The next length-prefixed frame's body. The length is checked against
    /// `max` (jute.maxbuffer) before anything is allocated.
    pub async fn frame(&mut self, sock: &Socket, max: usize) -> Result<&[u8], String> {
        self.shrink_if_empty();
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

    fn shrink_if_empty(&mut self) {
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
            if self.buf.len() > IN_BYTES_KEEP {
                self.buf = vec![0; IN_BYTES_KEEP];
            }
        }
    }
}
