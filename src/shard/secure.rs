//! Connections that arrive on a TLS port (secureClientPort) or on a port
//! that takes both (client.portUnification): the TLS handshake, bounded in
//! time and in how many run at once, and the client certificate's ids,
//! before the connection is served as any other (conn::serve).
//!
//! As NettyServerCnxnFactory does: a failed handshake, a client without a
//! certificate when one is needed, or a certificate the x509 provider
//! cannot name closes the connection without a ZooKeeper answer; with
//! ssl.clientAuth=want a client without a certificate is served with its
//! ip id only.

use std::cell::Cell;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;

use crate::admin::limits::Slot;
use crate::socket::{Socket, TLS_HANDSHAKE_TIMEOUT};
use crate::tls::ClientTlsContext;

use super::conn::{self, Arrival};
use super::Shard;

/// How a listener's connections start.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum PortKind {
    Plain,
    /// client.portUnification: TLS if the first bytes are a TLS record.
    Unified,
    /// secureClientPort: TLS only.
    Secure,
}

/// Handshakes in flight on one shard, against its share of
/// `netty.server.outstandingHandshake.limit`.
pub struct HandshakeCount {
    now: Cell<usize>,
    limit: Option<usize>,
}

impl HandshakeCount {
    pub fn new(limit: Option<usize>, shards: usize) -> HandshakeCount {
        HandshakeCount {
            now: Cell::new(0),
            limit: limit.map(|l| (l / shards.max(1)).max(1)),
        }
    }

    /// A place for one more handshake, or None at the limit.
    fn enter(self: &Rc<Self>) -> Option<HandshakeTicket> {
        if self.limit.is_some_and(|l| self.now.get() >= l) {
            return None;
        }
        self.now.set(self.now.get() + 1);
        Some(HandshakeTicket(self.clone()))
    }
}

struct HandshakeTicket(Rc<HandshakeCount>);

impl Drop for HandshakeTicket {
    fn drop(&mut self) {
        self.0.now.set(self.0.now.get() - 1);
    }
}

/// Serves one connection accepted on a port of `kind`.
pub async fn serve(
    shard: Rc<Shard>,
    socket: Socket,
    peer: SocketAddr,
    id: u64,
    slot: Slot,
    kind: PortKind,
) {
    let tls = match (kind, &shard.tls) {
        (PortKind::Plain, _) | (_, None) => {
            return conn::serve(shard, socket, peer, id, slot, Arrival::default()).await
        }
        (_, Some(tls)) => tls.clone(),
    };
    let mut prefix = Vec::new();
    if kind == PortKind::Unified {
        match sniff(&socket, &mut prefix).await {
            Ok(false) => {
                let arrival = Arrival {
                    prefix,
                    certificate_ids: Vec::new(),
                };
                return conn::serve(shard, socket, peer, id, slot, arrival).await;
            }
            Ok(true) => {}
            Err(why) => {
                tracing::debug!(conn = id, %peer, "closed before its first bytes: {why}");
                return;
            }
        }
    }
    let Some(ticket) = shard.handshakes.enter() else {
        tracing::warn!(conn = id, %peer, "too many TLS handshakes in flight: closing");
        return;
    };
    let handshake = handshake(socket, &tls, &prefix);
    let timeout = async {
        glommio::timer::sleep(TLS_HANDSHAKE_TIMEOUT).await;
        Err(format!(
            "TLS handshake not done in {TLS_HANDSHAKE_TIMEOUT:?}"
        ))
    };
    let outcome = futures_lite::future::or(handshake, timeout).await;
    drop(ticket);
    match outcome {
        Ok((socket, certificate_ids)) => {
            let arrival = Arrival {
                prefix: Vec::new(),
                certificate_ids,
            };
            conn::serve(shard, socket, peer, id, slot, arrival).await
        }
        Err(why) => {
            tracing::info!(conn = id, %peer, "TLS connection closed: {why}");
        }
    }
}

/// Reads until the first bytes tell TLS from plaintext (they stay in
/// `prefix`).
async fn sniff(socket: &Socket, prefix: &mut Vec<u8>) -> Result<bool, String> {
    let mut buf = [0u8; 4096];
    loop {
        if let Some(tls) = crate::tls::looks_like_tls(prefix) {
            return Ok(tls);
        }
        match socket.read(&mut buf).await {
            Ok(0) => return Err("end of stream".into()),
            Ok(n) => prefix.extend_from_slice(&buf[..n]),
            Err(e) => return Err(e.to_string()),
        }
    }
}

async fn handshake(
    socket: Socket,
    tls: &Arc<ClientTlsContext>,
    prefix: &[u8],
) -> Result<(Socket, Vec<(String, String)>), String> {
    let socket = socket.accept_tls(tls.current(), prefix).await?;
    let ids = socket
        .with_tls(|session| {
            tracing::debug!("TLS session: {}", session.describe());
            crate::tls::certificate_ids(tls, session)
        })
        .expect("a TLS socket")?;
    Ok((socket, ids))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handshakes_are_bounded_per_shard() {
        let count = Rc::new(HandshakeCount::new(Some(4), 2));
        let a = count.enter().expect("first");
        let b = count.enter().expect("second");
        assert!(
            count.enter().is_none(),
            "a shard's share of 4 over 2 shards is 2"
        );
        drop(a);
        let _c = count.enter().expect("a place freed");
        drop(b);
        let unlimited = Rc::new(HandshakeCount::new(None, 2));
        let held: Vec<_> = (0..100).map(|_| unlimited.enter().unwrap()).collect();
        assert_eq!(held.len(), 100);
    }
}
