//! Apache ZooKeeper's peer protocol on the wire (ZAB-PROTOCOL-NOTES §1-2):
//! the election port's connection header and notifications, and the quorum
//! port's `QuorumPacket`s. Codecs only: every decoder takes bytes as they
//! arrive, says when it needs more, and refuses (never panics on) a frame
//! over its bound, garbage, or an unknown type; the caller then closes that
//! peer's connection. `net` puts them on sockets; `zab_msg` maps the
//! state machine's messages onto packets.

pub mod election_wire;
pub mod net;
pub mod quorum_auth;
pub mod quorum_packet;
pub mod send_batch;
pub mod session_packets;
pub mod snap_stream;
pub mod zab_msg;
pub mod zk_txn;

use thiserror::Error;

#[derive(Debug, Error, PartialEq, Eq)]
pub enum PeerError {
    #[error("{what} of {len} bytes is over the bound of {max}")]
    TooLong {
        what: &'static str,
        len: i64,
        max: usize,
    },
    #[error("bad {what}: {detail}")]
    Bad { what: &'static str, detail: String },
}

/// Bytes taken from the front of a stream, or a call for more.
#[derive(Debug, PartialEq, Eq)]
pub enum Decoded<T> {
    /// A whole item, and how many bytes it took.
    Item(T, usize),
    /// Not enough bytes yet.
    More,
}
