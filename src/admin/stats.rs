//! Server counters. Each shard writes only its own `ShardStats` (relaxed
//! atomics, no lock, no shared cache line with other shards); the
//! four-letter words add them up when asked. `ShardStats` is also each
//! shard's admin slot: its mailbox for cross-shard reports
//! ([`super::mailbox`]) and its share of the per-IP connection counts
//! ([`super::limits`]), both touched only by admin words and at
//! accept/close, never per request.

use std::cell::Cell;
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;
use std::time::{Instant, SystemTime};

use super::javafmt;
use super::mailbox::Mailbox;

/// ZooTrace's default text trace mask (what gtmk answers on a fresh server).
pub const DEFAULT_TRACE_MASK: i64 = 306;

#[repr(align(128))]
pub struct ShardStats {
    pub packets_received: AtomicU64,
    pub packets_sent: AtomicU64,
    pub connections: AtomicU64,
    /// Requests taken from this shard's connections and not yet answered
    /// (writes in flight and the requests queued behind them). The shard's
    /// share of globalOutstandingLimit is checked against it.
    pub outstanding: AtomicU64,
    pub latency_count: AtomicU64,
    pub latency_total_ms: AtomicU64,
    pub latency_min_ms: AtomicU64,
    pub latency_max_ms: AtomicU64,
    pub watch_count: AtomicU64,
    pub last_zxid: AtomicI64,
    pub node_count: AtomicU64,
    /// Connections refused at accept (maxClientCnxns, maxCnxns).
    pub connections_rejected: AtomicU64,
    /// Connections whose client closed the socket while the server still
    /// read it (ZooKeeper's connection_drop_count, NIOServerCnxn's
    /// handleFailedRead): never reset, like ZooKeeper's metrics counters.
    pub connection_drops: AtomicU64,
    /// stmk's mask; stmk writes every shard's copy, gtmk reads its own.
    pub trace_mask: AtomicI64,
    /// When the server started (mntr's zk_uptime).
    pub started: Instant,
    /// Connections this shard admitted, by client IP (maxClientCnxns).
    pub ip_conns: Mutex<HashMap<IpAddr, u32>>,
    /// Connections this shard admitted (maxCnxns).
    pub admitted: AtomicU64,
    pub mailbox: Mailbox,
}

impl Default for ShardStats {
    fn default() -> Self {
        ShardStats::new()
    }
}

impl ShardStats {
    pub fn new() -> ShardStats {
        ShardStats {
            packets_received: AtomicU64::new(0),
            packets_sent: AtomicU64::new(0),
            connections: AtomicU64::new(0),
            outstanding: AtomicU64::new(0),
            latency_count: AtomicU64::new(0),
            latency_total_ms: AtomicU64::new(0),
            latency_min_ms: AtomicU64::new(u64::MAX),
            latency_max_ms: AtomicU64::new(0),
            watch_count: AtomicU64::new(0),
            last_zxid: AtomicI64::new(0),
            node_count: AtomicU64::new(0),
            connections_rejected: AtomicU64::new(0),
            connection_drops: AtomicU64::new(0),
            trace_mask: AtomicI64::new(DEFAULT_TRACE_MASK),
            started: Instant::now(),
            ip_conns: Mutex::new(HashMap::new()),
            admitted: AtomicU64::new(0),
            mailbox: Mailbox::default(),
        }
    }

    /// Records one request's latency (ZooKeeper counts in whole ms).
    pub fn record_latency_ms(&self, ms: u64) {
        self.latency_count.fetch_add(1, Relaxed);
        self.latency_total_ms.fetch_add(ms, Relaxed);
        if ms < self.latency_min_ms.load(Relaxed) {
            self.latency_min_ms.store(ms, Relaxed);
        }
        if ms > self.latency_max_ms.load(Relaxed) {
            self.latency_max_ms.store(ms, Relaxed);
        }
    }

    /// srst (ServerStats.reset): latency and packet counters.
    pub fn reset(&self) {
        self.packets_received.store(0, Relaxed);
        self.packets_sent.store(0, Relaxed);
        self.latency_count.store(0, Relaxed);
        self.latency_total_ms.store(0, Relaxed);
        self.latency_min_ms.store(u64::MAX, Relaxed);
        self.latency_max_ms.store(0, Relaxed);
        self.connections_rejected.store(0, Relaxed);
    }
}

/// The sum over all shards, as srvr/stat/mntr print it.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Totals {
    pub packets_received: u64,
    pub packets_sent: u64,
    pub connections: u64,
    pub outstanding: u64,
    pub latency_min_ms: u64,
    pub latency_avg_ms: f64,
    pub latency_max_ms: u64,
    pub watch_count: u64,
    pub last_zxid: i64,
    pub node_count: u64,
    pub connections_rejected: u64,
    pub connection_drops: u64,
    pub uptime_ms: u64,
}

pub fn totals(shards: &[ShardStats]) -> Totals {
    let mut t = Totals::default();
    let (mut count, mut total, mut min) = (0u64, 0u64, u64::MAX);
    for s in shards {
        t.packets_received += s.packets_received.load(Relaxed);
        t.packets_sent += s.packets_sent.load(Relaxed);
        t.connections += s.connections.load(Relaxed);
        t.outstanding += s.outstanding.load(Relaxed);
        t.watch_count += s.watch_count.load(Relaxed);
        t.connections_rejected += s.connections_rejected.load(Relaxed);
        t.connection_drops += s.connection_drops.load(Relaxed);
        t.latency_max_ms = t.latency_max_ms.max(s.latency_max_ms.load(Relaxed));
        t.uptime_ms = t.uptime_ms.max(javafmt::ms_since(s.started));
        min = min.min(s.latency_min_ms.load(Relaxed));
        count += s.latency_count.load(Relaxed);
        total += s.latency_total_ms.load(Relaxed);
        // The shard with the newest view speaks for the server.
        let zxid = s.last_zxid.load(Relaxed);
        if zxid >= t.last_zxid {
            t.last_zxid = zxid;
            t.node_count = s.node_count.load(Relaxed);
        }
    }
    t.latency_min_ms = if count == 0 { 0 } else { min };
    t.latency_avg_ms = javafmt::avg4(total, count);
    t
}

/// One connection's counters for cons/stat/dump (ServerCnxn's fields).
/// Plain cells: only the connection's shard touches them; crst resets them.
pub struct ConnStats {
    /// Wall-clock time the connection was accepted (cons "est").
    pub established: SystemTime,
    /// The session timeout negotiated at connect (cons "to").
    pub timeout_ms: Cell<i32>,
    /// Last request received (touches the session, as ZooKeeper's
    /// touchSession on every packet).
    pub last_heard: Cell<Instant>,
    /// Last operation, ZooKeeper's four-letter code ("GETD", "SESS", ...).
    pub last_op: Cell<&'static str>,
    pub last_cxid: Cell<i64>,
    pub last_zxid: Cell<i64>,
    pub last_response: Cell<Option<Instant>>,
    pub last_latency_ms: Cell<u64>,
    pub min_latency_ms: Cell<u64>,
    pub max_latency_ms: Cell<u64>,
    pub latency_count: Cell<u64>,
    pub latency_total_ms: Cell<u64>,
    /// Selector interest ops as cons prints them: 1 (read) while the
    /// connection is read, 0 while reads are paused or after a word.
    pub interest: Cell<u8>,
}

impl Default for ConnStats {
    fn default() -> Self {
        ConnStats::new()
    }
}

impl ConnStats {
    pub fn new() -> ConnStats {
        ConnStats {
            established: SystemTime::now(),
            timeout_ms: Cell::new(0),
            last_heard: Cell::new(Instant::now()),
            last_op: Cell::new("NA"),
            last_cxid: Cell::new(-1),
            last_zxid: Cell::new(-1),
            last_response: Cell::new(None),
            last_latency_ms: Cell::new(0),
            min_latency_ms: Cell::new(u64::MAX),
            max_latency_ms: Cell::new(0),
            latency_count: Cell::new(0),
            latency_total_ms: Cell::new(0),
            interest: Cell::new(1),
        }
    }

    /// ServerCnxn.updateStatsForResponse: a reply went out at `now`, `ms`
    /// after its request arrived.
    pub fn responded(&self, cxid: i64, zxid: i64, now: Instant, ms: u64) {
        if cxid >= 0 {
            self.last_cxid.set(cxid);
        }
        self.last_zxid.set(zxid);
        self.last_response.set(Some(now));
        self.last_latency_ms.set(ms);
        self.min_latency_ms.set(self.min_latency_ms.get().min(ms));
        self.max_latency_ms.set(self.max_latency_ms.get().max(ms));
        self.latency_count.set(self.latency_count.get() + 1);
        self.latency_total_ms.set(self.latency_total_ms.get() + ms);
    }

    /// ServerCnxn.resetStats (crst); packet counts live on the connection.
    pub fn reset(&self) {
        self.last_op.set("NA");
        self.last_cxid.set(-1);
        self.last_zxid.set(-1);
        self.last_response.set(None);
        self.last_latency_ms.set(0);
        self.min_latency_ms.set(u64::MAX);
        self.max_latency_ms.set(0);
        self.latency_count.set(0);
        self.latency_total_ms.set(0);
    }
}

/// FinalRequestProcessor's lastOp for an opcode ("NA" for those it has none).
pub fn op_name(opcode: i32) -> &'static str {
    use crate::proto::codes::op;
    match opcode {
        op::PING => "PING",
        op::CREATE_SESSION => "SESS",
        op::MULTI => "MULT",
        op::MULTI_READ => "MLTR",
        op::CREATE | op::CREATE2 | op::CREATE_TTL | op::CREATE_CONTAINER => "CREA",
        op::DELETE | op::DELETE_CONTAINER => "DELE",
        op::SET_DATA => "SETD",
        op::RECONFIG => "RECO",
        op::SET_ACL => "SETA",
        op::CLOSE_SESSION => "CLOS",
        op::SYNC => "SYNC",
        op::CHECK => "CHEC",
        op::EXISTS => "EXIS",
        op::GET_DATA => "GETD",
        op::SET_WATCHES => "SETW",
        op::SET_WATCHES2 => "STW2",
        op::ADD_WATCH => "ADDW",
        op::GET_ACL => "GETA",
        op::GET_CHILDREN | op::GET_CHILDREN2 => "GETC",
        op::GET_ALL_CHILDREN_NUMBER => "GETACN",
        op::CHECK_WATCHES => "CHKW",
        op::REMOVE_WATCHES => "REMW",
        op::WHO_AM_I => "HOMI",
        op::GET_EPHEMERALS => "GETE",
        _ => "NA",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn totals_add_shards_and_average_to_four_places() {
        let shards: Vec<ShardStats> = (0..2).map(|_| ShardStats::new()).collect();
        shards[0].record_latency_ms(1);
        shards[0].record_latency_ms(2);
        shards[1].record_latency_ms(4);
        shards[1].connections.fetch_add(3, Relaxed);
        let t = totals(&shards);
        assert_eq!(t.latency_min_ms, 1);
        assert_eq!(t.latency_max_ms, 4);
        assert_eq!(t.latency_avg_ms, 2.3333);
        assert_eq!(t.connections, 3);
        shards.iter().for_each(ShardStats::reset);
        let t = totals(&shards);
        assert_eq!((t.latency_min_ms, t.latency_max_ms), (0, 0));
        assert_eq!(t.latency_avg_ms, 0.0);
    }

    #[test]
    fn conn_stats_follow_server_cnxn() {
        let s = ConnStats::new();
        let now = Instant::now();
        s.responded(-2, 7, now, 3);
        assert_eq!(s.last_cxid.get(), -1, "special xids do not count");
        s.responded(5, 8, now, 1);
        assert_eq!(s.min_latency_ms.get(), 1);
        assert_eq!(s.max_latency_ms.get(), 3);
        assert_eq!((s.last_cxid.get(), s.last_zxid.get()), (5, 8));
        assert_eq!(s.latency_count.get(), 2);
        s.reset();
        assert_eq!(s.last_op.get(), "NA");
        assert_eq!(s.last_zxid.get(), -1);
        assert_eq!(s.min_latency_ms.get(), u64::MAX);
    }
}
