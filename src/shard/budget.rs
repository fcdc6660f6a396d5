//! The global bound on reply bytes queued for clients
//! (`ringkeeper.replyBytesMax`), shared by every connection on every shard.
//!
//! A client that sends requests and never reads their replies makes the
//! server hold the replies. A per-connection cap alone (`OUT_BYTES_MAX`)
//! bounds one abuser, not forty: forty sessions asking for a 1 MB node held
//! 2.5 GB. With this budget, total queued reply memory stays near the bound
//! whatever the number of abusers: at the bound, connections that have
//! replies queued are no longer read (see `Conn::must_pause`), and the
//! connection with the most queued bytes is closed (`Shard::relieve_replies`).

use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

pub struct ReplyBudget {
    queued_bytes: AtomicUsize,
    max_bytes: usize,
    /// Per shard: the most bytes one of its connections has queued, never
    /// below the truth: raised as a connection's queue grows past it, set to
    /// the exact value when the shard looks (over the bound). The shard
    /// holding the largest closes that connection; the others only pause
    /// reading. (Published only when a shard looked, as before, it went
    /// stale low: a shard whose connections had grown since showed 0, and
    /// another shard closed a connection holding a handshake's 41 bytes.)
    worst_bytes: Box<[AtomicUsize]>,
}

impl ReplyBudget {
    pub fn new(max_bytes: usize, shards: usize) -> ReplyBudget {
        assert!(max_bytes > 0, "reply budget of zero bytes");
        ReplyBudget {
            queued_bytes: AtomicUsize::new(0),
            max_bytes,
            worst_bytes: (0..shards.max(1)).map(|_| AtomicUsize::new(0)).collect(),
        }
    }

    /// `bytes` more queued on a connection of `shard`, which now holds
    /// `conn_bytes`.
    pub fn add(&self, shard: usize, bytes: usize, conn_bytes: usize) {
        self.queued_bytes.fetch_add(bytes, Relaxed);
        let worst = &self.worst_bytes[shard];
        if worst.load(Relaxed) < conn_bytes {
            worst.fetch_max(conn_bytes, Relaxed);
        }
    }

    pub fn release(&self, bytes: usize) {
        let before = self.queued_bytes.fetch_sub(bytes, Relaxed);
        assert!(before >= bytes, "reply budget released more than it held");
    }

    pub fn queued_bytes(&self) -> usize {
        self.queued_bytes.load(Relaxed)
    }

    pub fn max_bytes(&self) -> usize {
        self.max_bytes
    }

    pub fn is_over(&self) -> bool {
        self.queued_bytes() >= self.max_bytes
    }

    /// Publishes `shard`'s largest queued connection (exact: the shard just
    /// looked) and says whether it is at least as large as every other
    /// shard's (so this shard closes it; ties: either).
    pub fn publish_worst(&self, shard: usize, bytes: usize) -> bool {
        self.worst_bytes[shard].store(bytes, Relaxed);
        self.worst_bytes
            .iter()
            .enumerate()
            .all(|(i, w)| i == shard || w.load(Relaxed) <= bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bound_and_worst() {
        let b = ReplyBudget::new(100, 2);
        b.add(0, 60, 60);
        assert!(!b.is_over());
        b.add(1, 40, 40);
        assert!(b.is_over());
        assert!(b.publish_worst(0, 60));
        assert!(!b.publish_worst(1, 40));
        assert!(b.publish_worst(1, 60), "ties: either shard may close");
        b.release(100);
        assert_eq!(b.queued_bytes(), 0);
    }

    #[test]
    fn growth_is_seen_before_the_shard_looks_again() {
        let b = ReplyBudget::new(100, 2);
        b.add(0, 10, 10);
        assert!(b.publish_worst(0, 10));
        // Shard 1's connection grows without shard 1 looking: shard 0 must
        // not think its 10 bytes are the largest.
        b.add(1, 80, 80);
        assert!(!b.publish_worst(0, 10));
        assert!(b.publish_worst(1, 80));
    }

    #[test]
    #[should_panic(expected = "released more")]
    fn release_past_zero_is_a_bug() {
        ReplyBudget::new(10, 1).release(1);
    }
}
