//! One connection's TLS state, without I/O: ciphertext goes in with
//! [`TlsSession::feed`], plaintext comes out with [`TlsSession::read_plain`];
//! plaintext goes in with [`TlsSession::encrypt`] and ciphertext comes out
//! into the caller's buffer. The socket (src/socket.rs) moves the bytes, on
//! the shard that owns the connection, so TLS work stays on that shard.
//!
//! Bounds: rustls keeps at most its received-plaintext limit decrypted and
//! unread; ciphertext beyond what it takes waits in `pending`, which only
//! holds what one read of the socket brought (the caller's buffer size), so
//! a client sending faster than its requests are read is held back by the
//! same backpressure as on a plain connection.

use std::io::{self, Read, Write};
use std::sync::Arc;

use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, ClientConnection, Connection, ServerConfig, ServerConnection};

pub struct TlsSession {
    conn: Connection,
    /// Ciphertext received and not yet taken by rustls.
    pending: Vec<u8>,
}

impl TlsSession {
    /// The server side of a connection.
    pub fn new(config: Arc<ServerConfig>) -> io::Result<TlsSession> {
        let conn = ServerConnection::new(config).map_err(io::Error::other)?;
        Ok(TlsSession {
            conn: Connection::Server(conn),
            pending: Vec::new(),
        })
    }

    /// The client side, for the load generator and tests: the first
    /// flight is ready in [`TlsSession::take_outgoing`].
    pub fn client(
        config: Arc<ClientConfig>,
        server: ServerName<'static>,
    ) -> io::Result<TlsSession> {
        let conn = ClientConnection::new(config, server).map_err(io::Error::other)?;
        Ok(TlsSession {
            conn: Connection::Client(conn),
            pending: Vec::new(),
        })
    }

    pub fn is_handshaking(&self) -> bool {
        self.conn.is_handshaking()
    }

    /// Takes ciphertext read from the socket. An error is the end of the
    /// connection (a bad record, a failed handshake); the alert rustls
    /// queued for the peer is still in [`TlsSession::take_outgoing`].
    pub fn feed(&mut self, mut bytes: &[u8]) -> io::Result<()> {
        if !self.pending.is_empty() {
            self.pending.extend_from_slice(bytes);
            return self.pump();
        }
        while !bytes.is_empty() {
            match self.conn.read_tls(&mut bytes) {
                Ok(_) => {
                    self.conn
                        .process_new_packets()
                        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
                }
                // rustls holds as much decrypted plaintext as it will:
                // the rest waits until the plaintext is read.
                Err(e) if e.kind() == io::ErrorKind::Other => {
                    self.pending.extend_from_slice(bytes);
                    return Ok(());
                }
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Gives rustls what waits in `pending`, as far as it takes it.
    fn pump(&mut self) -> io::Result<()> {
        let mut at = 0;
        while at < self.pending.len() {
            let mut rest = &self.pending[at..];
            match self.conn.read_tls(&mut rest) {
                Ok(n) => {
                    at += n;
                    self.conn
                        .process_new_packets()
                        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
                }
                Err(e) if e.kind() == io::ErrorKind::Other => break,
                Err(e) => return Err(e),
            }
        }
        self.pending.drain(..at);
        Ok(())
    }

    /// Decrypted bytes into `buf`: Some(n) (Some(0) after the peer's
    /// close_notify), or None when more ciphertext is needed.
    pub fn read_plain(&mut self, buf: &mut [u8]) -> io::Result<Option<usize>> {
        loop {
            match self.conn.reader().read(buf) {
                Ok(n) => return Ok(Some(n)),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    if self.pending.is_empty() {
                        return Ok(None);
                    }
                    let before = self.pending.len();
                    self.pump()?;
                    if self.pending.len() == before {
                        return Ok(None);
                    }
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Encrypts all of `plain` and appends the records (and anything else
    /// rustls has to send) to `out`.
    pub fn encrypt(&mut self, mut plain: &[u8], out: &mut Vec<u8>) -> io::Result<()> {
        while !plain.is_empty() {
            let n = self.conn.writer().write(plain)?;
            plain = &plain[n..];
            self.take_outgoing(out)?;
            if n == 0 && !plain.is_empty() && !self.conn.wants_write() {
                return Err(io::Error::new(
                    io::ErrorKind::WriteZero,
                    "TLS session takes no more data",
                ));
            }
        }
        self.take_outgoing(out)
    }

    /// Appends what rustls has to send (handshake messages, alerts,
    /// records) to `out`.
    pub fn take_outgoing(&mut self, out: &mut Vec<u8>) -> io::Result<()> {
        while self.conn.wants_write() {
            self.conn.write_tls(out)?;
        }
        Ok(())
    }

    /// The client's certificate, once the handshake is done and if it sent one.
    pub fn peer_leaf(&self) -> Option<&CertificateDer<'static>> {
        self.conn.peer_certificates().and_then(|c| c.first())
    }

    /// The negotiated protocol version and cipher suite, for the log.
    pub fn describe(&self) -> String {
        format!(
            "{:?} {:?}",
            self.conn.protocol_version(),
            self.conn.negotiated_cipher_suite().map(|s| s.suite())
        )
    }
}
