//! What shards and the consensus core say to each other. Each shard has one
//! bounded SPSC channel to the core and one back; nothing else is shared.

use std::sync::Arc;

use crate::proto::{ConnectResponse, Request, Response};
use crate::session::ConnRef;
use crate::tree::{Tree, Trigger, Txn};

/// A connection's ids (scheme, id): its ip first, then what auth added.
pub type AuthIds = Arc<[(String, String)]>;

pub enum ToCore {
    /// A write (or sync/closeSession) in the session's order. The request
    /// is boxed from the shard to its commit: moving the message through
    /// the channel and the core's loop copied its 136 bytes about ten times
    /// (4% of a write's CPU, issue 27), and the commit keeps it boxed.
    Write {
        conn: ConnRef,
        session_id: i64,
        xid: i32,
        request: Box<Request>,
        ids: AuthIds,
        /// The request's body as the client sent it, kept by a follower's
        /// shard: the follower passes it on to the leader unchanged, as a
        /// Java follower does (a body encoded again from `request` could
        /// differ: three bytes for each byte that was not UTF-8, "" for a
        /// null string, another opcode for a multi's create).
        client_body: Option<Box<[u8]>>,
    },
    /// A write whose body did not decode: ZooKeeper still gives it a zxid
    /// (an error txn) and answers MARSHALLINGERROR.
    MalformedWrite {
        conn: ConnRef,
        session_id: i64,
        xid: i32,
    },
    /// A ConnectRequest after the shard's own checks; `timeout_ms` is
    /// already negotiated into [min, max].
    Connect {
        conn: ConnRef,
        session_id: i64,
        passwd: Vec<u8>,
        timeout_ms: i32,
        has_read_only: bool,
        /// The client's readOnly flag (canBeReadOnly): false when absent.
        can_be_read_only: bool,
    },
    /// Sessions that sent anything since the last touch batch.
    Touch(Vec<i64>),
    /// The connection went away without closeSession; the session lives on
    /// until it expires or reconnects.
    Disconnected { conn: ConnRef, session_id: i64 },
}

/// A reply to one request, addressed to its connection.
#[derive(Debug)]
pub struct Reply {
    pub conn: ConnRef,
    pub xid: i32,
    pub err: i32,
    pub body: Option<Response>,
}

pub enum Commit {
    /// A committed txn, the watches it fires and, for the shard holding the
    /// requester, the reply. No tree version per commit: a shard that must
    /// answer a read right after this txn applies the batch's txns to its
    /// view up to here (see `Shard::apply_batch`).
    Txn {
        zxid: i64,
        txn: Txn,
        triggers: Vec<Trigger>,
        reply: Option<Reply>,
        /// A closeSession txn (client's or expiry): the owner's connection closes.
        closed_session: Option<i64>,
        /// When the shard applies the batch itself ([`ShardBatch::shard_applies`]):
        /// the request behind `reply`, whose result (error and body) the
        /// shard reads off its tree once the txn is applied. Boxed: a
        /// `Request` would add 136 bytes to every commit moved or held,
        /// in either mode, for one allocation per write in this one.
        request: Option<Box<Request>>,
    },
    /// A reply that orders after every txn before it but changes nothing
    /// (sync, requests of closing sessions).
    Barrier(Reply),
}

pub enum Direct {
    Connected {
        conn: u64,
        response: ConnectResponse,
    },
    /// The session moved to another connection: close this one.
    Close { conn: u64 },
}

/// One message per shard per core batch: commits in zxid order (shared by
/// every shard), then messages for this shard only.
pub struct ShardBatch {
    pub commits: Arc<Vec<Commit>>,
    /// The tree after the batch's last txn (None: the batch has no txn, or
    /// the shard applies its txns itself).
    pub tree: Option<Tree>,
    /// The core and this shard share one tree (the shard is alone beside
    /// the core on its executor): the core prepped these txns against that
    /// tree plus its outstanding changes and left it alone; the shard
    /// applies each txn in turn, fires its watches and answers its request.
    pub shard_applies: bool,
    pub direct: Vec<Direct>,
}
