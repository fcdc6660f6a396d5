//! Whether the server can still take writes, shared by the consensus core
//! (the only writer: it sets the failure when the txn log fails) and every
//! shard (which reads it to answer health words and new sessions).
//!
//! Once the txn log failed, the server behaves as ZooKeeper's
//! ReadOnlyZooKeeperServer until restart: isro answers `ro`, srvr/stat say
//! `Mode: read-only`, new sessions are read-only ones. A relaxed atomic is
//! enough: the core publishes the failure to the shards in its next batch
//! anyway, and a health word a moment late is harmless.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering::Relaxed};

/// What this server is in its ensemble (standalone: an ensemble of one).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ServerRole {
    Standalone = 0,
    /// Electing a leader, or syncing with one: not serving writes.
    Looking = 1,
    Follower = 2,
    Leader = 3,
}

#[derive(Default)]
#[repr(align(128))]
pub struct Health {
    log_failed: AtomicBool,
    /// ZooKeeper's unrecoverable_error_count: failures that stop the
    /// server from serving as before (here: txn log failures).
    unrecoverable_errors: AtomicU64,
    /// A `ServerRole`, set by the consensus core.
    role: AtomicU8,
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

    pub fn set_role(&self, role: ServerRole) {
        self.role.store(role as u8, Relaxed);
    }

    pub fn role(&self) -> ServerRole {
        match self.role.load(Relaxed) {
            1 => ServerRole::Looking,
            2 => ServerRole::Follower,
            3 => ServerRole::Leader,
            _ => ServerRole::Standalone,
        }
    }

    /// Whether new sessions must be read-only ones: the log failed, or this
    /// ensemble member has no leader (others are closed without an answer
    /// and try the next server).
    pub fn takes_only_read_only_clients(&self) -> bool {
        self.is_read_only() || self.role() == ServerRole::Looking
    }

    pub fn unrecoverable_errors(&self) -> u64 {
        self.unrecoverable_errors.load(Relaxed)
    }
}
