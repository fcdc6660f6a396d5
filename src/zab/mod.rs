//! ZAB as pure state machines (DESIGN.md §5): no I/O, no clock, no
//! threads. [`ensemble::Node`] is the one replica: election, discovery,
//! synchronization and broadcast; it decides what is committed, and it is
//! the only place zxids are minted ([`zxid::Mint`]). The consensus core's
//! runner feeds it inputs (what storage did, what peers said, client
//! writes) and carries out the `Ready` each step hands back, deciding no
//! protocol itself.
//!
//! A standalone server is an ensemble of one: the same `Node` with one
//! voter. It resumes the epoch its log is in (`Node::resume_alone`):
//! Apache ZooKeeper's standalone server numbers its txns 0x1, 0x2, ...
//! across restarts, and clients see those zxids. When the epoch's counter
//! runs out it establishes the next epoch as any leader does (its own
//! quorum, no finalize wait).

pub mod election;
pub mod ensemble;
pub mod quorum;
pub mod snap_install;
pub mod zxid;

/// A server id (`myid`, the N of `server.N`).
pub type Sid = u64;

/// The epochs a replica keeps on disk beside its log (`acceptedEpoch`:
/// the last epoch it agreed to join; `currentEpoch`: the last epoch whose
/// history it holds durably). Always accepted >= current.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Epochs {
    pub accepted: u32,
    pub current: u32,
}

/// Epochs stay below 2^31 so that zxids stay positive, as in ZooKeeper.
pub const EPOCH_MAX: u32 = i32::MAX as u32 - 1;
