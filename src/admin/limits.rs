//! Connection limits checked at accept: maxClientCnxns (per client IP) and
//! maxCnxns (in total), as NIOServerCnxnFactory.AcceptThread.doAccept does.
//!
//! The counts span all shards, since the kernel spreads one client's
//! connections over the shards' listeners. Each shard keeps the counts of
//! the connections *it* admitted (`ShardStats::ip_conns`, `admitted`),
//! touched only at accept and close, never per request. To admit, a shard
//! first takes the slot in its own count and then adds up every shard's
//! count; if the sum is over the limit it gives the slot back and refuses.
//! Two shards admitting the same client at the same moment therefore can
//! both refuse (each sees the other's slot) but can never both admit past
//! the limit. With one shard the check is exact.

use std::net::IpAddr;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::Arc;

use super::stats::ShardStats;

/// Why a connection was refused, in ZooKeeper's words.
#[derive(Debug, PartialEq, Eq)]
pub enum Refusal {
    /// "Too many connections from /ip - max is n"
    PerIp { ip: IpAddr, max: u32 },
    /// "Too many connections n - max is m"
    Total { count: u64, max: u32 },
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::PerIp { ip, max } => write!(
                f,
                "Too many connections from /{} - max is {max}",
                super::javafmt::host_address(*ip)
            ),
            Refusal::Total { count, max } => {
                write!(f, "Too many connections {count} - max is {max}")
            }
        }
    }
}

/// An admitted connection's place in the counts; dropping it frees it.
pub struct Slot {
    stats: Arc<[ShardStats]>,
    shard: usize,
    ip: Option<IpAddr>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let own = &self.stats[self.shard];
        own.admitted.fetch_sub(1, SeqCst);
        if let Some(ip) = self.ip {
            let mut map = own.ip_conns.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(n) = map.get_mut(&ip) {
                *n -= 1;
                if *n == 0 {
                    map.remove(&ip);
                }
            }
        }
    }
}

/// Admits a connection from `ip` on `shard`, or says why not. A limit of 0
/// means no limit (as in ZooKeeper).
pub fn admit(
    stats: &Arc<[ShardStats]>,
    shard: usize,
    ip: IpAddr,
    max_per_ip: u32,
    max_total: u32,
) -> Result<Slot, Refusal> {
    let own = &stats[shard];
    own.admitted.fetch_add(1, SeqCst);
    let mut slot = Slot {
        stats: stats.clone(),
        shard,
        ip: None,
    };
    if max_total > 0 {
        // The new connection is counted: refuse when the others reach max.
        let count: u64 = stats.iter().map(|s| s.admitted.load(SeqCst)).sum();
        if count > max_total as u64 {
            return Err(Refusal::Total {
                count: count - 1,
                max: max_total,
            });
        }
    }
    if max_per_ip > 0 {
        *own.ip_conns
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(ip)
            .or_insert(0) += 1;
        slot.ip = Some(ip);
        let count: u32 = stats
            .iter()
            .map(|s| {
                let map = s.ip_conns.lock().unwrap_or_else(|e| e.into_inner());
                map.get(&ip).copied().unwrap_or(0)
            })
            .sum();
        if count > max_per_ip {
            return Err(Refusal::PerIp {
                ip,
                max: max_per_ip,
            });
        }
    }
    Ok(slot)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shards(n: usize) -> Arc<[ShardStats]> {
        (0..n).map(|_| ShardStats::new()).collect()
    }

    #[test]
    fn per_ip_limit_counts_every_shard() {
        let stats = shards(2);
        let a: IpAddr = "127.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        let s1 = admit(&stats, 0, a, 3, 0).unwrap();
        let _s2 = admit(&stats, 1, a, 3, 0).unwrap();
        let _s3 = admit(&stats, 0, a, 3, 0).unwrap();
        let err = admit(&stats, 1, a, 3, 0).err().unwrap();
        assert_eq!(
            err.to_string(),
            "Too many connections from /127.0.0.1 - max is 3"
        );
        // Another client is not affected.
        let _b1 = admit(&stats, 1, b, 3, 0).unwrap();
        // A refusal leaves no trace; a close frees a slot.
        drop(s1);
        let _s4 = admit(&stats, 1, a, 3, 0).unwrap();
        assert!(admit(&stats, 0, a, 3, 0).is_err());
        let held: u32 = stats
            .iter()
            .map(|s| s.ip_conns.lock().unwrap().get(&a).copied().unwrap_or(0))
            .sum();
        assert_eq!(held, 3);
    }

    #[test]
    fn total_limit_and_unlimited() {
        let stats = shards(2);
        let ip: IpAddr = "127.0.0.1".parse().unwrap();
        let _a = admit(&stats, 0, ip, 0, 2).unwrap();
        let _b = admit(&stats, 1, ip, 0, 2).unwrap();
        let err = admit(&stats, 0, ip, 0, 2).err().unwrap();
        assert_eq!(err.to_string(), "Too many connections 2 - max is 2");
        let all: Vec<Slot> = (0..100)
            .map(|i| admit(&stats, i % 2, ip, 0, 0).unwrap())
            .collect();
        assert_eq!(all.len(), 100);
        assert!(
            stats[0].ip_conns.lock().unwrap().is_empty(),
            "no map without a limit"
        );
    }
}
