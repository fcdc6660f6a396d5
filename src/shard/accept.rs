//! Accepting connections, and waiting after a failed accept.
//!
//! A connection already waiting is taken with one `accept4` that also
//! returns the peer's address ([`waiting`]). glommio's accept makes the
//! listener nonblocking for a first try and back (three `fcntl`s), and the
//! peer's address then costs a `getpeername` per use: six system calls
//! instead of one for each new session, which is mostly kernel time (80%
//! of the server's CPU in `loadgen sessions` is the kernel's). When nothing
//! is waiting, the shard waits for the listener to become readable in
//! glommio's ring (`glommio::net::poll_readable`).
//!
//! At the process or system descriptor limit (EMFILE, ENFILE) every accept
//! fails at once until a descriptor is freed; retrying every 10 ms logged a
//! warning 100 times a second. The wait doubles from ACCEPT_BACKOFF_MIN to
//! ACCEPT_BACKOFF_MAX, and an episode of failures is logged once when it
//! starts and once when it ends.

use std::io;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::OwnedFd;
use std::os::unix::io::{FromRawFd, RawFd};
use std::time::Duration;

/// The shard's listener on `addr`, bound as glommio binds one (SO_REUSEPORT,
/// so that every shard binds the port and the kernel spreads connections
/// over them; backlog 1024) plus SO_REUSEADDR and nonblocking for good, so
/// that [`waiting`] never blocks the shard.
pub fn bind(addr: SocketAddr) -> io::Result<OwnedFd> {
    use socket2::{Domain, Protocol, Socket, Type};
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    socket.set_reuse_port(true)?;
    // As ZooKeeper's listener does: a port whose earlier connections are
    // in TIME_WAIT (a server restarted a moment after it closed them, or
    // another server that had the port) binds; one that something listens
    // on still does not, on Linux (and startup::port probes for that).
    socket.set_reuse_address(true)?;
    socket.bind(&addr.into())?;
    socket.listen(1024)?;
    socket.set_nonblocking(true)?;
    Ok(socket.into())
}

/// The connection waiting on the nonblocking `listener`, with its peer's
/// address; None when none is waiting. The new socket is blocking, as
/// glommio's own accept leaves it (glommio's reads and writes try
/// MSG_DONTWAIT first and then wait with io_uring; the shard's ring only
/// submits operations the kernel completes when the socket is ready).
pub fn waiting(listener: RawFd) -> Option<io::Result<(OwnedFd, SocketAddr)>> {
    // SAFETY: sockaddr_storage is plain data, valid when zeroed.
    let mut addr: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    // SAFETY: accept4 writes at most `len` bytes into `addr` and updates
    // `len`; both live across the call.
    let fd = unsafe {
        libc::accept4(
            listener,
            &mut addr as *mut libc::sockaddr_storage as *mut libc::sockaddr,
            &mut len,
            libc::SOCK_CLOEXEC,
        )
    };
    if fd < 0 {
        let e = io::Error::last_os_error();
        return match e.kind() {
            io::ErrorKind::WouldBlock => None,
            _ => Some(Err(e)),
        };
    }
    // SAFETY: `fd` is a new socket that nothing else owns.
    let stream = unsafe { OwnedFd::from_raw_fd(fd) };
    Some(match peer_address(&addr) {
        Some(peer) => Ok((stream, peer)),
        None => Err(io::Error::other(format!(
            "accepted a socket of address family {}",
            addr.ss_family
        ))),
    })
}

fn peer_address(addr: &libc::sockaddr_storage) -> Option<SocketAddr> {
    match addr.ss_family as libc::c_int {
        libc::AF_INET => {
            // SAFETY: the family says the storage holds a sockaddr_in,
            // which is smaller than sockaddr_storage and no more aligned.
            let a =
                unsafe { &*(addr as *const libc::sockaddr_storage as *const libc::sockaddr_in) };
            Some(SocketAddr::V4(SocketAddrV4::new(
                Ipv4Addr::from(u32::from_be(a.sin_addr.s_addr)),
                u16::from_be(a.sin_port),
            )))
        }
        libc::AF_INET6 => {
            // SAFETY: as above, for sockaddr_in6.
            let a =
                unsafe { &*(addr as *const libc::sockaddr_storage as *const libc::sockaddr_in6) };
            Some(SocketAddr::V6(SocketAddrV6::new(
                Ipv6Addr::from(a.sin6_addr.s6_addr),
                u16::from_be(a.sin6_port),
                a.sin6_flowinfo,
                a.sin6_scope_id,
            )))
        }
        _ => None,
    }
}

const ACCEPT_BACKOFF_MIN: Duration = Duration::from_millis(10);
const ACCEPT_BACKOFF_MAX: Duration = Duration::from_secs(1);

pub struct Backoff {
    shard: usize,
    wait: Duration,
    failures: u64,
}

impl Backoff {
    pub fn new(shard: usize) -> Backoff {
        Backoff {
            shard,
            wait: ACCEPT_BACKOFF_MIN,
            failures: 0,
        }
    }

    /// An accept failed: how long to wait before the next.
    pub fn failed(&mut self, e: &dyn std::fmt::Display) -> Duration {
        if self.failures == 0 {
            tracing::warn!(
                shard = self.shard,
                "accept failed: {e}; retrying with backoff up to {ACCEPT_BACKOFF_MAX:?}"
            );
        }
        self.failures += 1;
        let wait = self.wait;
        self.wait = (self.wait * 2).min(ACCEPT_BACKOFF_MAX);
        wait
    }

    /// An accept succeeded: ends an episode of failures.
    pub fn succeeded(&mut self) {
        if self.failures > 0 {
            tracing::warn!(
                shard = self.shard,
                failures = self.failures,
                "accepting connections again"
            );
        }
        self.failures = 0;
        self.wait = ACCEPT_BACKOFF_MIN;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waiting_takes_a_pending_connection_with_its_peer() {
        use std::os::fd::AsRawFd;
        glommio::LocalExecutor::default().run(async {
            for addr in ["127.0.0.1:0", "[::1]:0"] {
                let Ok(listener) = bind(addr.parse().unwrap()) else {
                    continue; // no IPv6 on this host
                };
                let fd = listener.as_raw_fd();
                assert!(waiting(fd).is_none(), "nothing is waiting yet");
                let to = socket2::SockRef::from(&listener)
                    .local_addr()
                    .unwrap()
                    .as_socket()
                    .unwrap();
                let client = std::net::TcpStream::connect(to).unwrap();
                let (stream, peer) = waiting(fd).expect("a connection").unwrap();
                assert_eq!(peer, client.local_addr().unwrap());
                let stream_peer = socket2::SockRef::from(&stream).peer_addr().unwrap();
                assert_eq!(stream_peer.as_socket().unwrap(), peer);
                assert!(waiting(fd).is_none());
                // Waiting for readiness in glommio's ring works on the
                // nonblocking listener, as the shard waits.
                let later = std::thread::spawn(move || {
                    std::thread::sleep(Duration::from_millis(50));
                    std::net::TcpStream::connect(to).unwrap()
                });
                glommio::net::poll_readable(fd).await.unwrap();
                let (_, peer) = waiting(fd).expect("readable: a connection").unwrap();
                let client = later.join().unwrap();
                assert_eq!(peer, client.local_addr().unwrap());
            }
        });
    }

    #[test]
    fn doubles_to_the_cap_and_resets() {
        let mut b = Backoff::new(0);
        let waits: Vec<u64> = (0..10)
            .map(|_| b.failed(&"EMFILE").as_millis() as u64)
            .collect();
        assert_eq!(waits, [10, 20, 40, 80, 160, 320, 640, 1000, 1000, 1000]);
        b.succeeded();
        assert_eq!(b.failed(&"EMFILE"), ACCEPT_BACKOFF_MIN);
    }
}
