//! What one shard tells the admin words about itself (see `mailbox`).
//! Plain data, built on the shard's executor and then only read.

use std::net::SocketAddr;

/// Counts mntr needs from every shard.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ShardCounts {
    /// Watches in both watch managers (DataTree.getWatchCount).
    pub watch_count: u64,
    /// Sessions whose connection is on this shard.
    pub sessions: u64,
}

/// One connection as cons/stat/dump show it (ServerCnxn.dumpConnectionInfo).
#[derive(Clone, Debug, PartialEq)]
pub struct ConnInfo {
    pub peer: SocketAddr,
    pub interest: u8,
    pub queued: u64,
    pub received: u64,
    pub sent: u64,
    /// 0 until a session is established.
    pub session_id: i64,
    pub last_op: &'static str,
    /// Wall-clock ms of the accept.
    pub established_ms: i64,
    pub timeout_ms: i32,
    pub last_cxid: i64,
    pub last_zxid: i64,
    /// Elapsed-clock ms (ZooKeeper's Time.currentElapsedTime) of the last
    /// response, 0 before any.
    pub last_response_ms: i64,
    pub last_latency_ms: u64,
    pub min_latency_ms: u64,
    pub avg_latency_ms: u64,
    pub max_latency_ms: u64,
    /// Elapsed-clock ms of the last packet received.
    pub last_heard_ms: i64,
}

/// One session bound to a connection of the shard.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SessionInfo {
    pub id: i64,
    pub timeout_ms: i32,
    /// Elapsed-clock ms of the last packet of the session.
    pub last_heard_ms: i64,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct ShardReport {
    pub counts: ShardCounts,
    pub conns: Vec<ConnInfo>,
    pub sessions: Vec<SessionInfo>,
    /// Data watches (the manager wchc/wchp/wchs show, as in ZooKeeper's
    /// DataTree.dumpWatches): session id of the watching connection and
    /// the paths it watches.
    pub data_watches: Vec<(i64, Vec<String>)>,
}
