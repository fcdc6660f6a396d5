//! Fast leader election (`FastLeaderElection.lookForLeader`) as a pure state
//! machine: notifications and ticks in, notifications to send and a
//! decision out. The rules are ZooKeeper 3.8's (ZAB-PROTOCOL-NOTES §1.3):
//!
//! - a vote is (leader, its last zxid, its currentEpoch); the better vote
//!   has the higher epoch, then zxid, then sid (`totalOrderPredicate`);
//! - a round (`logicalclock`) starts with a vote for oneself sent to every
//!   voter; a notification of a later round makes us join that round with
//!   the better of its vote and our own; an earlier round's is answered
//!   with our vote; a better vote in our round is adopted and re-sent;
//! - once a quorum of our round's votes equals ours, we wait
//!   `finalize_wait_ticks` for a better one (ZooKeeper: 200 ms) and then
//!   decide: LEADING if the vote is ours, else FOLLOWING;
//! - FOLLOWING/LEADING notifications from servers already out of the
//!   election count towards joining them: a quorum for the same leader and
//!   epoch (whatever their rounds and zxids), the leader itself saying
//!   LEADING (`checkLeader`), ends our election at once (ZOOKEEPER-1732,
//!   -1805);
//! - a LOOKING notification of our round with a worse vote is answered with
//!   ours (ZooKeeper answers only older rounds and waits for the sender's
//!   notification timeout; see `on_looking`);
//! - when nothing arrives for `not_timeout` ticks we send our vote again,
//!   doubling the timeout up to its maximum (`notTimeout` backoff);
//! - decided, we answer every LOOKING voter with our final vote and state,
//!   and after syncing with a new leader our vote carries its epoch
//!   ([`Election::update_vote_epoch`], ZOOKEEPER-1818).
//!
//! Safety does not rest here: two servers may each decide to lead in a race
//! the finalize wait narrows but cannot close; ZAB's discovery (a quorum
//! must accept the new epoch) is what keeps one leader per epoch.

use std::collections::{BTreeMap, BTreeSet};

use super::Sid;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum PeerState {
    Looking,
    Following,
    Leading,
}

/// A vote for `leader`, whose log ends at `zxid` in `peer_epoch`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Vote {
    pub leader: Sid,
    pub zxid: i64,
    pub peer_epoch: u32,
}

impl Vote {
    /// ZooKeeper's `totalOrderPredicate(self, other)`: whether this vote
    /// beats `other`.
    pub fn beats(&self, other: &Vote) -> bool {
        (self.peer_epoch, self.zxid, self.leader) > (other.peer_epoch, other.zxid, other.leader)
    }
}

/// One election message (the wire form is §1.2 of the notes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Notification {
    pub state: PeerState,
    pub vote: Vote,
    /// The sender's round (`electionEpoch`).
    pub round: u64,
}

/// The outcome of an election, for this server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Decision {
    pub vote: Vote,
    pub round: u64,
    /// Leading or Following.
    pub state: PeerState,
}

/// What a step asks the runner to do.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Out {
    pub send: Vec<(Sid, Notification)>,
    pub decided: Option<Decision>,
}

/// Times, in the runner's ticks.
#[derive(Clone, Copy, Debug)]
pub struct Timing {
    pub finalize_wait_ticks: u32,
    pub min_not_timeout_ticks: u32,
    pub max_not_timeout_ticks: u32,
}

pub struct Election {
    myid: Sid,
    voters: BTreeSet<Sid>,
    timing: Timing,
    /// This server's own vote: itself, its last zxid and currentEpoch.
    own: Vote,
    round: u64,
    proposal: Vote,
    state: PeerState,
    /// Our round's votes, by voter (LOOKING ones; a FOLLOWING/LEADING one
    /// of our round too, stored as ZooKeeper stores it, without its state).
    recvset: BTreeMap<Sid, (Vote, u64)>,
    /// Votes of servers out of the election, any round, with their state.
    outofelection: BTreeMap<Sid, (Vote, u64, PeerState)>,
    /// Ticks left in the finalize wait, once a quorum agrees with us.
    finalizing: Option<u32>,
    idle_ticks: u32,
    not_timeout: u32,
    decided: Option<Decision>,
    /// This server lost its disk (see `zab::ensemble::Node::with_disk_lost`):
    /// its vote names itself with nothing (below every real vote), it never
    /// takes up another's vote, so it never counts toward anyone's quorum,
    /// and it never leads; it joins a leader only out of the election.
    abstain: bool,
}

impl Election {
    pub fn new(myid: Sid, voters: BTreeSet<Sid>, timing: Timing) -> Election {
        assert!(voters.contains(&myid), "only voters take part");
        let own = Vote {
            leader: myid,
            zxid: 0,
            peer_epoch: 0,
        };
        Election {
            myid,
            voters,
            timing,
            own,
            round: 0,
            proposal: own,
            state: PeerState::Looking,
            recvset: BTreeMap::new(),
            outofelection: BTreeMap::new(),
            finalizing: None,
            idle_ticks: 0,
            not_timeout: timing.min_not_timeout_ticks,
            decided: None,
            abstain: false,
        }
    }

    /// Abstains (see `abstain`) or takes part again, from the next round.
    pub fn set_abstain(&mut self, abstain: bool) {
        self.abstain = abstain;
    }

    pub fn abstains(&self) -> bool {
        self.abstain
    }

    pub fn state(&self) -> PeerState {
        self.state
    }

    pub fn round(&self) -> u64 {
        self.round
    }

    pub fn decided(&self) -> Option<Decision> {
        self.decided
    }

    /// Starts a round: LOOKING, voting for ourselves with the log as it is
    /// now (`last_zxid`, `current_epoch`). Also after losing a leader.
    pub fn start(&mut self, last_zxid: i64, current_epoch: u32) -> Out {
        self.own = if self.abstain {
            // Beaten by every vote of a server with a log, even an empty one.
            Vote {
                leader: self.myid,
                zxid: -1,
                peer_epoch: 0,
            }
        } else {
            Vote {
                leader: self.myid,
                zxid: last_zxid,
                peer_epoch: current_epoch,
            }
        };
        self.round += 1;
        self.state = PeerState::Looking;
        self.decided = None;
        self.recvset.clear();
        self.outofelection.clear();
        self.finalizing = None;
        self.idle_ticks = 0;
        self.not_timeout = self.timing.min_not_timeout_ticks;
        self.proposal = self.own;
        let mut out = Out::default();
        self.broadcast(&mut out);
        if self.voters.len() == 1 && !self.abstain {
            // A lone voter is its own quorum and nobody can bring a better
            // vote: no finalize wait.
            let (vote, round) = (self.proposal, self.round);
            self.decide(vote, round, &mut out);
        }
        out
    }

    /// After syncing with the leader of `epoch`: our final vote carries it,
    /// so that servers joining later see votes that agree.
    pub fn update_vote_epoch(&mut self, epoch: u32) {
        if let Some(d) = &mut self.decided {
            d.vote.peer_epoch = epoch;
            self.proposal.peer_epoch = epoch;
        }
    }

    fn notification(&self) -> Notification {
        match self.decided {
            Some(d) => Notification {
                state: d.state,
                vote: d.vote,
                round: d.round,
            },
            None => Notification {
                state: PeerState::Looking,
                vote: self.proposal,
                round: self.round,
            },
        }
    }

    /// Our vote to every voter; our own copy counts at once.
    fn broadcast(&mut self, out: &mut Out) {
        self.recvset.insert(self.myid, (self.proposal, self.round));
        let n = self.notification();
        for v in &self.voters {
            if *v != self.myid {
                out.send.push((*v, n));
            }
        }
        self.check_quorum();
    }

    /// Starts the finalize wait when a quorum of our round agrees with us.
    fn check_quorum(&mut self) {
        if self.abstain {
            return;
        }
        if self.finalizing.is_none() && self.quorum_for(self.proposal) {
            self.finalizing = Some(self.timing.finalize_wait_ticks);
        }
    }

    fn quorum_for(&self, vote: Vote) -> bool {
        let agree = self
            .recvset
            .iter()
            .filter(|(_, (v, r))| *v == vote && *r == self.round)
            .map(|(s, _)| s);
        super::quorum::is_quorum(&self.voters, agree)
    }

    fn decide(&mut self, vote: Vote, round: u64, out: &mut Out) {
        assert!(
            !(self.abstain && vote.leader == self.myid),
            "a server that lost its disk never leads"
        );
        let state = if vote.leader == self.myid {
            PeerState::Leading
        } else {
            PeerState::Following
        };
        let d = Decision { vote, round, state };
        self.state = state;
        self.proposal = vote;
        self.decided = Some(d);
        self.finalizing = None;
        out.decided = Some(d);
    }

    /// A notification from `from`.
    pub fn receive(&mut self, from: Sid, n: Notification) -> Out {
        let mut out = Out::default();
        if from == self.myid {
            return out;
        }
        self.idle_ticks = 0;
        if !self.voters.contains(&from) || !self.voters.contains(&n.vote.leader) {
            // Not a voter, or a vote for one: answered, never counted.
            out.send.push((from, self.notification()));
            return out;
        }
        if self.state != PeerState::Looking {
            if n.state == PeerState::Looking {
                out.send.push((from, self.notification()));
            }
            return out;
        }
        if self.finalizing.is_some() {
            // lookForLeader's finalize loop: a better vote ends the wait
            // and is handled as usual; anything else is consumed (the
            // receiver thread still answers a LOOKING sender of an old round).
            if n.vote.beats(&self.proposal) {
                self.finalizing = None;
            } else {
                let behind =
                    n.round < self.round || (n.round == self.round && self.proposal.beats(&n.vote));
                if n.state == PeerState::Looking && behind {
                    out.send.push((from, self.notification()));
                }
                return out;
            }
        }
        match n.state {
            PeerState::Looking => self.on_looking(from, n, &mut out),
            PeerState::Following | PeerState::Leading => self.on_decided(from, n, &mut out),
        }
        out
    }

    fn on_looking(&mut self, from: Sid, n: Notification, out: &mut Out) {
        if n.round > self.round {
            self.round = n.round;
            self.recvset.clear();
            self.finalizing = None;
            self.proposal = if n.vote.beats(&self.own) && !self.abstain {
                n.vote
            } else {
                self.own
            };
            self.recvset.insert(from, (n.vote, n.round));
            self.broadcast(out);
            return;
        }
        if n.round < self.round {
            // The receiver thread brings a sender of an old round up to date.
            out.send.push((from, self.notification()));
            return;
        }
        self.recvset.insert(from, (n.vote, n.round));
        if n.vote.beats(&self.proposal) && !self.abstain {
            self.proposal = n.vote;
            self.finalizing = None;
            self.broadcast(out);
        } else {
            if self.proposal.beats(&n.vote) {
                // The sender does not know our better vote: it may have
                // missed our notification (it was not looking when it came,
                // as when followers notice a lost leader one after the
                // other). ZooKeeper leaves it to the sender's notification
                // timeout (200 ms and more); telling it now saves that.
                out.send.push((from, self.notification()));
            }
            self.check_quorum();
        }
    }

    fn on_decided(&mut self, from: Sid, n: Notification, out: &mut Out) {
        if n.round == self.round {
            self.recvset.insert(from, (n.vote, n.round));
            if self.quorum_for(n.vote) && self.leader_confirmed(n.vote.leader, n.round, false) {
                self.decide(n.vote, n.round, out);
                return;
            }
        }
        self.outofelection.insert(from, (n.vote, n.round, n.state));
        // Votes of servers out of the election agree when they name the
        // same leader and epoch: their zxids and rounds differ with when
        // each joined (Vote.equals, ZOOKEEPER-1805).
        let agree = self
            .outofelection
            .iter()
            .filter(|(_, (v, _, _))| v.leader == n.vote.leader && v.peer_epoch == n.vote.peer_epoch)
            .map(|(s, _)| s);
        if super::quorum::is_quorum(&self.voters, agree)
            && self.leader_confirmed(n.vote.leader, n.round, true)
        {
            self.round = n.round;
            self.decide(n.vote, n.round, out);
        }
    }

    /// `checkLeader`: the proposed leader itself must have said LEADING (in
    /// `outofelection`; the recvset keeps no state, as in ZooKeeper, so there
    /// only a vote for ourselves in our round passes), or be us in the
    /// notification's round.
    fn leader_confirmed(&self, leader: Sid, round: u64, out_of_election: bool) -> bool {
        if leader == self.myid && self.abstain {
            return false;
        }
        if leader == self.myid {
            return self.round == round;
        }
        out_of_election
            && self
                .outofelection
                .get(&leader)
                .is_some_and(|(_, _, s)| *s == PeerState::Leading)
    }

    /// One tick: the finalize wait runs down (deciding at its end), and a
    /// silent spell re-sends our vote with backoff.
    pub fn tick(&mut self) -> Out {
        let mut out = Out::default();
        if self.state != PeerState::Looking {
            return out;
        }
        if let Some(left) = self.finalizing {
            if left <= 1 {
                let (vote, round) = (self.proposal, self.round);
                self.decide(vote, round, &mut out);
                return out;
            }
            self.finalizing = Some(left - 1);
        }
        self.idle_ticks += 1;
        if self.idle_ticks >= self.not_timeout {
            self.idle_ticks = 0;
            self.not_timeout = (self.not_timeout * 2).min(self.timing.max_not_timeout_ticks);
            self.broadcast(&mut out);
        }
        out
    }
}

#[cfg(test)]
mod tests;
