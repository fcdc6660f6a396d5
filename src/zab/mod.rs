//! ZAB as a pure state machine (DESIGN.md §5): no I/O, no clock, no
//! threads. It decides what is committed; the consensus core's runner
//! feeds it inputs (what the runner did, what peers said) and executes the
//! [`Ready`] each step hands back (persist an epoch, start assigning zxids
//! in an epoch, publish up to a commit point), never deciding protocol
//! itself.
//!
//! What is here (issue 12, step 1): epoch establishment and broadcast
//! commit counting. A lone voter elects itself, proposes the epoch after
//! its acceptedEpoch, persists it as acceptedEpoch and then currentEpoch
//! (ZooKeeper's order), and leads: a txn is committed once a quorum has it
//! durable, which for one voter is its own log's fdatasync. A standalone
//! server (voters = {myid}) takes the same path at the epoch's end, but at
//! start it resumes the epoch its log is in ([`Input::Resume`]): Apache
//! ZooKeeper's standalone server numbers its txns 0x1, 0x2, ... across
//! restarts, and clients see those zxids. Acks of other voters are counted the same way
//! (the quorum-th highest ack), ready for followers. Election over the
//! network, discovery with followers and sync come with the peer ports: a
//! replica with other voters stays LOOKING here.

pub mod election;
pub mod ensemble;
pub mod quorum;
pub mod zxid;

use std::collections::{BTreeMap, BTreeSet};

/// A server id (`myid`, the N of `server.N`).
pub type Sid = u64;

/// Who votes, and who this replica is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Membership {
    myid: Sid,
    voters: BTreeSet<Sid>,
}

impl Membership {
    /// A standalone server: an ensemble of one.
    pub fn alone(myid: Sid) -> Membership {
        Membership {
            myid,
            voters: [myid].into(),
        }
    }

    pub fn new(myid: Sid, voters: BTreeSet<Sid>) -> Result<Membership, String> {
        if !voters.contains(&myid) {
            return Err(format!("myid {myid} is not one of the voters {voters:?}"));
        }
        Ok(Membership { myid, voters })
    }

    pub fn myid(&self) -> Sid {
        self.myid
    }

    pub fn voters(&self) -> &BTreeSet<Sid> {
        &self.voters
    }
}

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

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    Looking,
    /// Elected, establishing `epoch` (its epoch files being written).
    Discovering {
        epoch: u32,
    },
    Leading {
        epoch: u32,
    },
}

pub enum Input {
    /// Begin: elect a leader and establish a new epoch.
    Start,
    /// Begin as a standalone server: no election, no new epoch; lead the
    /// epoch of currentEpoch, continuing the log's zxids. Lone voter only.
    Resume,
    /// acceptedEpoch now durably holds this epoch, as asked.
    AcceptedEpochDurable(u32),
    /// currentEpoch now durably holds this epoch, as asked.
    CurrentEpochDurable(u32),
    /// The leader assigned zxids `first..=last` and handed them to its log.
    Proposed { first: i64, last: i64 },
    /// This replica's log is durable through this zxid.
    Durable(i64),
    /// A peer has its log durable through `zxid` (ACK).
    Ack { from: Sid, zxid: i64 },
    /// The leader's epoch is running out of counters: establish the next
    /// one. Only once everything proposed is committed.
    NewEpoch,
}

/// What the runner must do after a step, in this order.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Ready {
    /// Write acceptedEpoch (atomically, durably), then say so.
    pub persist_accepted_epoch: Option<u32>,
    /// Write currentEpoch (atomically, durably), then say so.
    pub persist_current_epoch: Option<u32>,
    /// This replica leads `epoch`: assign zxids from `zxid::make(epoch, 1)`.
    pub lead: Option<u32>,
    /// Txns through this zxid are committed: apply and publish them.
    pub commit_to: Option<i64>,
}

/// A peer broke the protocol: close its connection.
#[derive(Debug, PartialEq, Eq)]
pub struct Violation {
    pub peer: Sid,
    pub reason: String,
}

struct Leader {
    epoch: u32,
    last_proposed: i64,
    /// Each voter's highest acknowledged zxid in this epoch.
    acked: BTreeMap<Sid, i64>,
    committed: i64,
}

enum Phase {
    Looking,
    PersistingAccepted { epoch: u32 },
    PersistingCurrent { epoch: u32 },
    Leading(Leader),
}

pub struct Replica {
    members: Membership,
    epochs: Epochs,
    /// The last zxid in this replica's log (all of it durable at start).
    last_logged: i64,
    phase: Phase,
}

impl Replica {
    /// A replica whose disk holds `epochs` and a log through `last_logged`,
    /// all of it durable (recovery syncs what it keeps).
    pub fn new(members: Membership, epochs: Epochs, last_logged: i64) -> Replica {
        assert!(
            epochs.accepted >= epochs.current,
            "acceptedEpoch < currentEpoch"
        );
        assert!(
            zxid::epoch(last_logged) <= epochs.current,
            "the log runs ahead of currentEpoch"
        );
        Replica {
            members,
            epochs,
            last_logged,
            phase: Phase::Looking,
        }
    }

    pub fn role(&self) -> Role {
        match &self.phase {
            Phase::Looking => Role::Looking,
            Phase::PersistingAccepted { epoch } | Phase::PersistingCurrent { epoch } => {
                Role::Discovering { epoch: *epoch }
            }
            Phase::Leading(l) => Role::Leading { epoch: l.epoch },
        }
    }

    pub fn epochs(&self) -> Epochs {
        self.epochs
    }

    pub fn members(&self) -> &Membership {
        &self.members
    }

    /// The commit point: every txn through it is committed.
    pub fn committed(&self) -> i64 {
        match &self.phase {
            Phase::Leading(l) => l.committed,
            _ => self.last_logged,
        }
    }

    pub fn step(&mut self, input: Input) -> Result<Ready, Violation> {
        let mut ready = Ready::default();
        match input {
            Input::Start => {
                assert!(matches!(self.phase, Phase::Looking), "started twice");
                if self.members.voters.len() == 1 {
                    // The lone voter's election and discovery: it is the
                    // quorum, and the next epoch is its acceptedEpoch + 1.
                    self.propose_epoch(&mut ready);
                }
            }
            Input::Resume => {
                assert!(matches!(self.phase, Phase::Looking), "started twice");
                assert_eq!(self.members.voters.len(), 1, "only a lone voter resumes");
                let epoch = self.epochs.current;
                self.lead(epoch);
                ready.lead = Some(epoch);
            }
            Input::AcceptedEpochDurable(e) => {
                let Phase::PersistingAccepted { epoch } = self.phase else {
                    panic!("acceptedEpoch {e} persisted unasked");
                };
                assert_eq!(e, epoch);
                self.epochs.accepted = epoch;
                // Every voter's epoch ack is in (there is only this one);
                // none is more recent than this replica's own log.
                self.phase = Phase::PersistingCurrent { epoch };
                ready.persist_current_epoch = Some(epoch);
            }
            Input::CurrentEpochDurable(e) => {
                let Phase::PersistingCurrent { epoch } = self.phase else {
                    panic!("currentEpoch {e} persisted unasked");
                };
                assert_eq!(e, epoch);
                self.epochs.current = epoch;
                self.lead(epoch);
                ready.lead = Some(epoch);
            }
            Input::Proposed { first, last } => {
                let Phase::Leading(l) = &mut self.phase else {
                    panic!("proposed while not leading");
                };
                assert!(
                    zxid::follows(l.last_proposed, first),
                    "proposal {} does not follow {}",
                    zxid::hex(first),
                    zxid::hex(l.last_proposed)
                );
                assert!(last >= first && zxid::epoch(last) == l.epoch);
                l.last_proposed = last;
                self.last_logged = last;
            }
            Input::Durable(z) => {
                let myid = self.members.myid;
                let Phase::Leading(l) = &mut self.phase else {
                    panic!("durable while not leading");
                };
                assert!(z <= l.last_proposed, "durable beyond what was proposed");
                let before = l.acked.insert(myid, z).unwrap_or(i64::MIN);
                assert!(z >= before, "durable point went back");
                ready.commit_to = Self::advance(&self.members, l);
            }
            Input::Ack { from, zxid: z } => {
                let violation = |reason: String| Violation { peer: from, reason };
                if !self.members.voters.contains(&from) || from == self.members.myid {
                    return Err(violation(format!("ack from {from}, not another voter")));
                }
                let Phase::Leading(l) = &mut self.phase else {
                    return Ok(ready);
                };
                if zxid::counter(z) == 0 {
                    // The NEWLEADER ack repeated after UPTODATE: ignored,
                    // as Leader.processAck does.
                    return Ok(ready);
                }
                if z > l.last_proposed || zxid::epoch(z) != l.epoch {
                    return Err(violation(format!(
                        "ack for {}, never proposed (last proposed {})",
                        zxid::hex(z),
                        zxid::hex(l.last_proposed)
                    )));
                }
                let acked = l.acked.entry(from).or_insert(z);
                *acked = (*acked).max(z);
                ready.commit_to = Self::advance(&self.members, l);
            }
            Input::NewEpoch => {
                let Phase::Leading(l) = &self.phase else {
                    panic!("a new epoch while not leading");
                };
                assert_eq!(
                    l.committed, l.last_proposed,
                    "a new epoch with txns in flight"
                );
                self.phase = Phase::Looking;
                self.propose_epoch(&mut ready);
            }
        }
        Ok(ready)
    }

    /// Leads `epoch`. The leader's history is the epoch's: all of it
    /// durable (and, for a lone voter, on a quorum), so committed.
    fn lead(&mut self, epoch: u32) {
        let mut acked = BTreeMap::new();
        acked.insert(self.members.myid, self.last_logged);
        self.phase = Phase::Leading(Leader {
            epoch,
            last_proposed: self.last_logged,
            acked,
            committed: self.last_logged,
        });
    }

    fn propose_epoch(&mut self, ready: &mut Ready) {
        let epoch = self.epochs.accepted + 1;
        assert!(epoch <= EPOCH_MAX, "epochs exhausted");
        self.phase = Phase::PersistingAccepted { epoch };
        ready.persist_accepted_epoch = Some(epoch);
    }

    /// Moves the commit point to what a quorum has acknowledged, if that is
    /// further; returns the new point.
    fn advance(members: &Membership, l: &mut Leader) -> Option<i64> {
        let point = quorum::acknowledged_by_quorum(&members.voters, &l.acked)?;
        (point > l.committed).then(|| {
            debug_assert!(point <= l.last_proposed);
            l.committed = point;
            point
        })
    }
}

#[cfg(test)]
mod tests;
