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
/// shards of one server).
#[derive(Debug)]
pub struct AnsweredZxid(AtomicI64);

impl AnsweredZxid {
    pub fn new(zxid: i64) -> AnsweredZxid {
        AnsweredZxid(AtomicI64::new(zxid))
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

    /// A shard's view was replaced by a reloaded tree (a role change): the
    /// mark cannot be above it (what any shard answered was committed, and
    /// the reloaded tree holds every committed txn); if it were, reads would
    /// wait for a zxid that never comes, so it is brought down to the tree.
    pub fn reloaded_at(&self, zxid: i64) {
        let was = self.0.fetch_min(zxid, AcqRel);
        if was > zxid {
            tracing::warn!(
                answered = format_args!("{was:#x}"),
                reloaded = format_args!("{zxid:#x}"),
                "a reloaded tree is behind what a shard answered from"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mark_only_rises_while_serving_and_a_reload_caps_it() {
        let m = AnsweredZxid::new(5);
        m.raise_to(3);
        assert_eq!(m.needed(), 5);
        m.raise_to(9);
        assert_eq!(m.needed(), 9);
        m.reloaded_at(12);
        assert_eq!(m.needed(), 9, "a reload at or above the mark keeps it");
        m.reloaded_at(7);
        assert_eq!(m.needed(), 7);
    }
}
