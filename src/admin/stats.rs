//! Server counters. Each shard writes only its own `ShardStats` (relaxed
//! atomics, no lock, no shared cache line with other shards); the
//! four-letter words add them up when asked.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering::Relaxed};

#[derive(Default)]
#[repr(align(128))]
pub struct ShardStats {
    pub packets_received: AtomicU64,
    pub packets_sent: AtomicU64,
    pub connections: AtomicU64,
    pub outstanding: AtomicU64,
    pub latency_count: AtomicU64,
    pub latency_total_ms: AtomicU64,
    pub latency_min_ms: AtomicU64,
    pub latency_max_ms: AtomicU64,
    pub watch_count: AtomicU64,
    pub last_zxid: AtomicI64,
    pub node_count: AtomicU64,
}

impl ShardStats {
    pub fn new() -> ShardStats {
        let s = ShardStats::default();
        s.latency_min_ms.store(u64::MAX, Relaxed);
        s
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

    pub fn reset(&self) {
        self.packets_received.store(0, Relaxed);
        self.packets_sent.store(0, Relaxed);
        self.latency_count.store(0, Relaxed);
        self.latency_total_ms.store(0, Relaxed);
        self.latency_min_ms.store(u64::MAX, Relaxed);
        self.latency_max_ms.store(0, Relaxed);
    }
}

/// The sum over all shards, as srvr/stat print it.
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
        t.latency_max_ms = t.latency_max_ms.max(s.latency_max_ms.load(Relaxed));
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
    // ZooKeeper's AvgMinMaxCounter rounds the average to 3 decimals.
    t.latency_avg_ms = if count == 0 {
        0.0
    } else {
        ((total as f64 / count as f64) * 1000.0).round() / 1000.0
    };
    t
}
