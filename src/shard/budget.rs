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
    /// Per shard: the most bytes one of its connections had queued when the
    /// shard last looked (while over the bound). The shard holding the
    /// largest closes its connection; the others only pause reading.
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

    pub fn add(&self, bytes: usize) {
        self.queued_bytes.fetch_add(bytes, Relaxed);
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

    /// Publishes `shard`'s largest queued connection and says whether it is
    /// at least as large as every other shard's (so this shard closes it).
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
        b.add(60);
        assert!(!b.is_over());
        b.add(40);
        assert!(b.is_over());
        assert!(b.publish_worst(0, 70));
        assert!(!b.publish_worst(1, 30));
        assert!(b.publish_worst(1, 70), "ties: either shard may close");
        b.release(100);
        assert_eq!(b.queued_bytes(), 0);
    }

    #[test]
    #[should_panic(expected = "released more")]
    fn release_past_zero_is_a_bug() {
        ReplyBudget::new(10, 1).release(1);
    }
}
