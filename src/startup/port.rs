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
//! The race that remains: two servers probing in the same few milliseconds
//! before either's shards have bound both pass. Two servers on one dataDir
//! are refused by its lock whatever the timing; two on different dataDirs
//! and one port, started in the same instant, are not caught.

use std::net::{SocketAddr, TcpListener};

/// Fails with the bind error (EADDRINUSE: "Address already in use") when
/// something listens on `addr`. Port 0 (any free port) is never in use.
pub fn check_free(addr: SocketAddr) -> Result<(), String> {
    if addr.port() == 0 {
        return Ok(());
    }
    match TcpListener::bind(addr) {
        Ok(probe) => {
            drop(probe);
            Ok(())
        }
        Err(e) => Err(format!(
            "cannot bind the client port {addr}: {e} (is another server running on it?)"
        )),
    }
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
        drop(held);
        check_free(addr).unwrap();
    }
}
