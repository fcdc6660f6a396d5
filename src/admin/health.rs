//! Whether the server can still take writes, shared by the consensus core
//! (the only writer: it sets the failure when the txn log fails) and every
//! shard (which reads it to answer health words and new sessions).
//!
//! Once the txn log failed, the server behaves as ZooKeeper's
//! ReadOnlyZooKeeperServer until restart: isro answers `ro`, srvr/stat say
//! `Mode: read-only`, new sessions are read-only ones. A relaxed atomic is
//! enough: the core publishes the failure to the shards in its next batch
//! anyway, and a health word a moment late is harmless.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicU8, Ordering::Relaxed};

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
    /// The server id of the leader this member follows or is (0: none):
    /// the AdminServer's `leader` command.
    leader_id: AtomicU64,
    pub ensemble: EnsembleGauges,
}

/// What mntr shows of this server's ensemble (QuorumPeer, Leader and
/// ServerMetrics values), set by the consensus core, read by the shards.
pub struct EnsembleGauges {
    pub quorum_size: AtomicU64,
    pub learners: AtomicU64,
    pub synced_followers: AtomicU64,
    pub pending_syncs: AtomicU64,
    /// Unix ms when this server began to lead (0: not leading).
    pub leading_since_ms: AtomicU64,
    /// Index into `PHASES`.
    pub phase: AtomicU8,
    pub proposal_count: AtomicU64,
    pub last_proposal_bytes: AtomicI64,
    pub min_proposal_bytes: AtomicI64,
    pub max_proposal_bytes: AtomicI64,
    pub learner_proposals_received: AtomicU64,
    pub learner_commits_received: AtomicU64,
    /// This member lost its disk and waits to be synced (the lost-disk
    /// marker, `startup::damaged`).
    pub awaiting_resync: std::sync::atomic::AtomicBool,
    /// Learners this leader synced by SNAP, and by DIFF or TRUNC
    /// (ZooKeeper's snap_count and diff_count).
    pub snap_syncs: AtomicU64,
    pub diff_syncs: AtomicU64,
    election_count: AtomicU64,
    election_sum_ms: AtomicU64,
    election_min_ms: AtomicU64,
    election_max_ms: AtomicU64,
}

/// Zab phases, as QuorumPeer.getDetailedPeerState names them.
pub const PHASES: [&str; 4] = ["election", "discovery", "synchronization", "broadcast"];

impl Default for EnsembleGauges {
    fn default() -> Self {
        EnsembleGauges {
            quorum_size: AtomicU64::new(0),
            learners: AtomicU64::new(0),
            synced_followers: AtomicU64::new(0),
            pending_syncs: AtomicU64::new(0),
            leading_since_ms: AtomicU64::new(0),
            phase: AtomicU8::new(0),
            proposal_count: AtomicU64::new(0),
            // ServerMetrics' proposal size gauges start at -1.
            last_proposal_bytes: AtomicI64::new(-1),
            min_proposal_bytes: AtomicI64::new(-1),
            max_proposal_bytes: AtomicI64::new(-1),
            learner_proposals_received: AtomicU64::new(0),
            learner_commits_received: AtomicU64::new(0),
            awaiting_resync: std::sync::atomic::AtomicBool::new(false),
            snap_syncs: AtomicU64::new(0),
            diff_syncs: AtomicU64::new(0),
            election_count: AtomicU64::new(0),
            election_sum_ms: AtomicU64::new(0),
            election_min_ms: AtomicU64::new(u64::MAX),
            election_max_ms: AtomicU64::new(0),
        }
    }
}

impl EnsembleGauges {
    pub fn set_phase(&self, name: &str) {
        let i = PHASES.iter().position(|p| *p == name).unwrap_or(0);
        self.phase.store(i as u8, Relaxed);
    }

    pub fn proposed(&self, bytes: usize) {
        let b = bytes as i64;
        self.proposal_count.fetch_add(1, Relaxed);
        self.last_proposal_bytes.store(b, Relaxed);
        let min = self.min_proposal_bytes.load(Relaxed);
        if min < 0 || b < min {
            self.min_proposal_bytes.store(b, Relaxed);
        }
        self.max_proposal_bytes.fetch_max(b, Relaxed);
    }

    /// A leader election ended after `ms`.
    pub fn election_took(&self, ms: u64) {
        self.election_count.fetch_add(1, Relaxed);
        self.election_sum_ms.fetch_add(ms, Relaxed);
        self.election_min_ms.fetch_min(ms, Relaxed);
        self.election_max_ms.fetch_max(ms, Relaxed);
    }

    pub fn view(&self, now_unix_ms: u64) -> EnsembleView {
        let since = self.leading_since_ms.load(Relaxed);
        let count = self.election_count.load(Relaxed);
        EnsembleView {
            quorum_size: self.quorum_size.load(Relaxed),
            learners: self.learners.load(Relaxed),
            synced_followers: self.synced_followers.load(Relaxed),
            pending_syncs: self.pending_syncs.load(Relaxed),
            leader_uptime_ms: if since == 0 {
                0
            } else {
                now_unix_ms.saturating_sub(since)
            },
            phase: PHASES[(self.phase.load(Relaxed) as usize).min(PHASES.len() - 1)],
            proposal_count: self.proposal_count.load(Relaxed),
            last_proposal_bytes: self.last_proposal_bytes.load(Relaxed),
            min_proposal_bytes: self.min_proposal_bytes.load(Relaxed),
            max_proposal_bytes: self.max_proposal_bytes.load(Relaxed),
            learner_proposals_received: self.learner_proposals_received.load(Relaxed),
            learner_commits_received: self.learner_commits_received.load(Relaxed),
            awaiting_resync: self.awaiting_resync.load(Relaxed),
            snap_syncs: self.snap_syncs.load(Relaxed),
            diff_syncs: self.diff_syncs.load(Relaxed),
            election_count: count,
            election_sum_ms: self.election_sum_ms.load(Relaxed),
            election_min_ms: if count == 0 {
                0
            } else {
                self.election_min_ms.load(Relaxed)
            },
            election_max_ms: self.election_max_ms.load(Relaxed),
        }
    }
}

/// A copy of the gauges for one answer.
#[derive(Clone, Copy, Debug)]
pub struct EnsembleView {
    pub quorum_size: u64,
    pub learners: u64,
    pub synced_followers: u64,
    pub pending_syncs: u64,
    pub leader_uptime_ms: u64,
    pub phase: &'static str,
    pub proposal_count: u64,
    pub last_proposal_bytes: i64,
    pub min_proposal_bytes: i64,
    pub max_proposal_bytes: i64,
    pub learner_proposals_received: u64,
    pub learner_commits_received: u64,
    pub awaiting_resync: bool,
    pub snap_syncs: u64,
    pub diff_syncs: u64,
    pub election_count: u64,
    pub election_sum_ms: u64,
    pub election_min_ms: u64,
    pub election_max_ms: u64,
}

impl Default for EnsembleView {
    fn default() -> Self {
        EnsembleGauges::default().view(0)
    }
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

    /// Records the role and, for a leader or follower, the leader's id.
    pub fn set_role_and_leader(&self, role: ServerRole, leader_id: u64) {
        self.leader_id.store(leader_id, Relaxed);
        self.set_role(role);
    }

    /// The leader's server id while following or leading, None otherwise.
    pub fn leader_id(&self) -> Option<u64> {
        match self.role() {
            ServerRole::Leader | ServerRole::Follower => Some(self.leader_id.load(Relaxed)),
            _ => None,
        }
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

    /// Whether no session is taken at all: an ensemble member with no
    /// leader and `readonlymode.enabled` off (ZooKeeper's default: its
    /// server is not running, and a connection is closed unanswered).
    pub fn takes_no_clients(&self, read_only_mode: bool) -> bool {
        !read_only_mode && !self.is_read_only() && self.role() == ServerRole::Looking
    }

    pub fn unrecoverable_errors(&self) -> u64 {
        self.unrecoverable_errors.load(Relaxed)
    }
}
