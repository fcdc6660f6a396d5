//! Whether the server can still take writes, shared by the consensus core
//! (the only writer: it sets the failure when the txn log fails) and every
//! shard (which reads it to answer health words and new sessions).
//!
//! Once the txn log failed, the server behaves as ZooKeeper's
//! ReadOnlyZooKeeperServer until restart: isro answers `ro`, srvr/stat say
//! `Mode: read-only`, new sessions are read-only ones. A relaxed atomic is
//! enough: the core publishes the failure to the shards in its next batch
//! anyway, and a health word a moment late is harmless.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};

#[derive(Default)]
#[repr(align(128))]
pub struct Health {
    log_failed: AtomicBool,
    /// ZooKeeper's unrecoverable_error_count: failures that stop the
    /// server from serving as before (here: txn log failures).
    unrecoverable_errors: AtomicU64,
}

impl Health {
    /// The txn log failed: writes are refused until restart.
    pub fn log_failed(&self) {
        self.unrecoverable_errors.fetch_add(1, Relaxed);
        self.log_failed.store(true, Relaxed);
    }

    /// Whether the server serves only reads (the txn log failed).
    pub fn is_read_only(&self) -> bool {
        self.log_failed.load(Relaxed)
    }

    pub fn unrecoverable_errors(&self) -> u64 {
        self.unrecoverable_errors.load(Relaxed)
    }
}
