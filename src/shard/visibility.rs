//! What one session has seen acknowledged, every session of this server
//! reads. A standalone Apache ZooKeeper (and each member of an ensemble)
//! passes every request through one pipeline in arrival order, so a read
//! that arrives after another session's write was answered sees that write.
//! Shards apply each commit batch on their own executors, each at its own
//! pace: without a rule, a session on a shard that had not applied the
//! batch yet read the value from before a write another session had
//! already seen acknowledged on another shard (tests/cross_session_reads.rs
//! saw it in about 1% of such reads with three shards).
//!
//! The rule: a shard raises [`AnsweredZxid`] to a batch's last zxid before
//! it answers anything from that batch; a read that finds the mark above
//! its shard's view waits (in its session's order) until the shard has
//! applied up to the mark. Every shard gets every batch with commits, so
//! the wait ends with the batch already on its way. With one shard there is
//! nothing to wait for and no mark is kept.

use std::sync::atomic::AtomicI64;
use std::sync::atomic::Ordering::{AcqRel, Acquire};

/// The highest zxid any shard may have answered from (shared by all the
/// shards of one server). It only rises: what a shard answered from was
/// committed, and a reloaded tree (a role change) holds every committed
/// txn, so no view is ever brought back below it for good.
#[derive(Debug)]
pub struct AnsweredZxid(AtomicI64);

impl Default for AnsweredZxid {
    fn default() -> Self {
        AnsweredZxid::new()
    }
}

impl AnsweredZxid {
    /// Nothing answered yet. (Not the recovered tree's last zxid: that may
    /// hold txns a follower's first sync truncates, and reads would then
    /// wait for a write to pass them.)
    pub fn new() -> AnsweredZxid {
        AnsweredZxid(AtomicI64::new(i64::MIN))
    }

    /// A shard is about to answer from the state after `zxid`. A load
    /// first: every shard applies every batch, and only the first to get
    /// there needs to write the shared line.
    pub fn raise_to(&self, zxid: i64) {
        if self.0.load(Acquire) < zxid {
            self.0.fetch_max(zxid, AcqRel);
        }
    }

    /// The state a read arriving now must see at least.
    pub fn needed(&self) -> i64 {
        self.0.load(Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mark_starts_below_every_zxid_and_only_rises() {
        let m = AnsweredZxid::new();
        assert!(m.needed() < 0, "nothing waits before a batch is answered");
        m.raise_to(9);
        assert_eq!(m.needed(), 9);
        m.raise_to(3);
        assert_eq!(m.needed(), 9);
        m.raise_to(12);
        assert_eq!(m.needed(), 12);
    }
}
