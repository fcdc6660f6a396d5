//! Refuses to start on a client port another process already listens on.
//!
//! Every shard binds the client port with SO_REUSEPORT (so the kernel
//! spreads connections over the shards), and SO_REUSEPORT lets any other
//! socket of the same user that sets it too bind the same port: a second
//! ringkeeper would start without a word and the kernel would split new
//! clients between two unrelated data trees. A bind *without* SO_REUSEPORT
//! fails with "Address already in use" when anyone listens there, as
//! ZooKeeper's bind does; the probe is released at once so the shards can
//! bind (a socket without SO_REUSEPORT would keep them out).
//!
//! The probe's bind also fails while the port has connections in TIME_WAIT
//! left by a listener without SO_REUSEADDR (our shards set it since
//! 2026-11-25; glommio's own listeners and older servers did not, and their
//! connections inherit that). So a refused probe is
//! only believed when the kernel's socket table (/proc/net/tcp, tcp6) shows
//! a socket listening on the port; otherwise the shards bind as before.
//!
//! The race that remains: two servers probing in the same few milliseconds
//! before either's shards have bound both pass. Two servers on one dataDir
//! are refused by its lock whatever the timing; two on different dataDirs
//! and one port, started in the same instant, are not caught.

use std::net::{SocketAddr, TcpListener};

/// How long a listener seen on the port may take to go away before the
/// port counts as held. A server killed with SIGKILL a moment ago can
/// still show its listener after its process is gone: glommio accepts
/// through io_uring, and a pending accept keeps the socket open until the
/// kernel tears the ring down, asynchronously (seen in the restart tests:
/// a restart right after kill -9 and wait found the port listening).
const DYING_LISTENER_WAIT_MS: u64 = 3000;

/// Fails with the bind error (EADDRINUSE: "Address already in use") when
/// something listens on `addr` (and goes on listening for
/// [`DYING_LISTENER_WAIT_MS`]). Port 0 (any free port) is never in use.
pub fn check_free(addr: SocketAddr) -> Result<(), String> {
    let deadline =
        std::time::Instant::now() + std::time::Duration::from_millis(DYING_LISTENER_WAIT_MS);
    loop {
        match probe(addr) {
            Err(e) if std::time::Instant::now() < deadline => {
                tracing::debug!(%addr, "client port held ({e}); waiting for it to be released");
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            result => return result,
        }
    }
}

fn probe(addr: SocketAddr) -> Result<(), String> {
    if addr.port() == 0 {
        return Ok(());
    }
    let e = match TcpListener::bind(addr) {
        Ok(probe) => {
            drop(probe);
            return Ok(());
        }
        Err(e) => e,
    };
    let refused = || {
        Err(format!(
            "cannot bind the client port {addr}: {e} (is another server running on it?)"
        ))
    };
    if e.kind() != std::io::ErrorKind::AddrInUse {
        return refused();
    }
    match listening_on(addr) {
        Ok(false) => {
            tracing::debug!(%addr, "client port busy only with closed connections (TIME_WAIT)");
            Ok(())
        }
        Ok(true) => refused(),
        // Without the table the bind's answer stands: fail closed.
        Err(table) => {
            tracing::warn!("cannot read the socket table to check the client port: {table}");
            refused()
        }
    }
}

/// Whether some socket listens on TCP `addr`'s port at an address that
/// overlaps it (the same address, or either one the wildcard), from the
/// kernel's tables: lines of `sl local_address rem_address st ...`, the
/// address `HEXIP:HEXPORT` (an IPv4 address as its bytes in the host's
/// order), state 0A for LISTEN.
fn listening_on(addr: SocketAddr) -> std::io::Result<bool> {
    let port = addr.port();
    let overlaps = |hex_ip: &str| -> bool {
        if addr.ip().is_unspecified() || hex_ip.bytes().all(|b| b == b'0') {
            return true;
        }
        match (addr.ip(), u32::from_str_radix(hex_ip, 16)) {
            (std::net::IpAddr::V4(v4), Ok(raw)) if hex_ip.len() == 8 => {
                std::net::Ipv4Addr::from(raw.to_ne_bytes()) == v4
            }
            // IPv6 tables: count any listener on the port (conservative).
            _ => true,
        }
    };
    const TCP_LISTEN: &str = "0A";
    let mut found = false;
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let text = match std::fs::read_to_string(table) {
            Ok(t) => t,
            // No IPv6 in this kernel: nothing listens there.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && table.ends_with('6') => continue,
            Err(e) => return Err(e),
        };
        found |= text.lines().skip(1).any(|line| {
            let mut fields = line.split_whitespace().skip(1);
            let local = fields.next().unwrap_or("");
            let state = fields.nth(1).unwrap_or("");
            let Some((ip, local_port)) = local.rsplit_once(':') else {
                return false;
            };
            state == TCP_LISTEN
                && u16::from_str_radix(local_port, 16).ok() == Some(port)
                && overlaps(ip)
        });
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listened_port_is_refused_and_a_free_one_is_not() {
        let held = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = held.local_addr().unwrap();
        let err = check_free(addr).unwrap_err();
        assert!(err.contains("Address already in use"), "{err}");
        assert!(listening_on(addr).unwrap());
        // Another loopback address on the same port does not overlap.
        let other = SocketAddr::new([127, 0, 0, 2].into(), addr.port());
        assert!(!listening_on(other).unwrap());
        assert!(listening_on(SocketAddr::new([0, 0, 0, 0].into(), addr.port())).unwrap());
        drop(held);
        check_free(addr).unwrap();
        assert!(!listening_on(addr).unwrap());
    }
}
