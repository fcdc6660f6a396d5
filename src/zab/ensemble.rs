//! A replica of an ensemble: election, discovery, synchronization and
//! broadcast (ZAB 1.0 as Apache ZooKeeper 3.9.4 runs it) as one pure state
//! machine over an opaque history. Inputs are peer messages, ticks, the
//! runner's reports that storage did what it was asked, and client writes;
//! each step returns a [`Ready`] of storage actions, messages and commit
//! points. No I/O, no clock.
//!
//! The order of durable steps is the one the ZooKeeper bugs of
//! ZAB-PROTOCOL-NOTES §6 teach: a follower makes the synced history durable,
//! then writes currentEpoch, then acks NEWLEADER (ZOOKEEPER-4643/4785); the
//! NEWLEADER ack goes before any proposal ack (ZOOKEEPER-4685); proposals
//! must follow the log without a gap (ZOOKEEPER-4925), and a duplicate of a
//! logged proposal is ignored. Between peers the channel is FIFO (TCP); a
//! message that breaks the protocol order ends the relationship (back to
//! LOOKING), as a closed connection does.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use super::election::{Decision, Election, Notification, PeerState, Timing};
use super::zxid::Mint;
use super::{quorum, zxid, Epochs, Sid};

/// One txn of the history: its zxid and opaque contents.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Txn {
    pub zxid: i64,
    pub data: Vec<u8>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Msg {
    Vote(Notification),
    /// `ringkeeper`: the sender is a ringkeeper server (a bit of the
    /// protocol version, `quorum_packet::RINGKEEPER_PEER`): it takes one
    /// ACK or COMMIT for a run of proposals. A Java peer needs one per
    /// proposal (a Java leader counts acks proposal by proposal, a Java
    /// follower matches each COMMIT with its next pending txn).
    FollowerInfo {
        accepted_epoch: u32,
        ringkeeper: bool,
    },
    LeaderInfo {
        epoch: u32,
        ringkeeper: bool,
    },
    /// `current_epoch` None: -1, this epoch was already accepted.
    AckEpoch {
        last_zxid: i64,
        current_epoch: Option<u32>,
    },
    Diff,
    Trunc {
        to: i64,
    },
    Snap {
        history: Vec<Txn>,
    },
    Proposal(Txn),
    Commit(i64),
    NewLeader {
        epoch: u32,
    },
    Ack(i64),
    UpToDate,
    Ping,
    /// The leader's answer to a learner's sync (a SYNC packet): everything
    /// the leader had assigned when the sync came is committed at the
    /// learner, and nothing after it (see [`Input::Sync`]).
    SyncAnswer,
}

pub enum Input {
    Start,
    Receive {
        from: Sid,
        msg: Msg,
    },
    Tick,
    /// The log is durable through this zxid (the answer to a sync).
    Durable(i64),
    AcceptedEpochDurable(u32),
    CurrentEpochDurable(u32),
    /// A client write, at the leader.
    Propose(Vec<u8>),
    /// A run of client writes, at the leader: as many `Propose`s in one
    /// step (what a leader's batch holds).
    ProposeBatch(Vec<Vec<u8>>),
    /// The connection with this peer broke (TCP error, reset, timeout).
    Disconnected(Sid),
    /// Leader: the zxid counter of this epoch reached its limit and
    /// everything proposed is committed: step down, so that the next
    /// election starts a new epoch (ZOOKEEPER-1277).
    EndEpoch,
    /// Follower: the tree a SNAP from `from` carried, as of `zxid`, is
    /// durable here (in a snapshot) and the log holds nothing else: the
    /// history starts after it.
    SnapshotInstalled {
        from: Sid,
        zxid: i64,
    },
    /// Leader: learner `from` forwarded a client's sync, which came when
    /// the leader had assigned zxids through `point`. Its answer goes to
    /// `from` right after the COMMIT that covers `point` and before any
    /// COMMIT of a later txn (Leader.processSync and tryToCommit): the
    /// learner answers the sync at that point of its commits, and the
    /// session's requests after the sync come after it.
    Sync {
        from: Sid,
        point: i64,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    Looking,
    Following {
        leader: Sid,
    },
    /// Elected, not yet established.
    Leading,
    /// Established: a quorum acked NEWLEADER for `epoch`.
    Broadcasting {
        epoch: u32,
    },
}

/// What the runner must do, in this order: cut or replace the log, append,
/// start a sync (answer [`Input::Durable`]), write epochs (answer
/// [`Input::AcceptedEpochDurable`] / [`Input::CurrentEpochDurable`]), send.
#[derive(Debug, Default)]
pub struct Ready {
    pub truncate_after: Option<i64>,
    pub replace_log: Option<Vec<Txn>>,
    pub append: Vec<Txn>,
    pub sync: bool,
    pub persist_accepted_epoch: Option<u32>,
    pub persist_current_epoch: Option<u32>,
    pub send: Vec<(Sid, Msg)>,
    /// Txns through this zxid are committed here.
    pub commit_to: Option<i64>,
    pub role: Option<Role>,
    /// This replica now leads an established epoch: its core assigns the
    /// epoch's zxids from this mint (the same zxids `Input::Propose` gives).
    pub lead: Option<Mint>,
    /// Learner connections to close: they broke the protocol's order.
    pub close: Vec<Sid>,
    /// Follower: the leader asked for a TRUNC below this member's snapshot
    /// base, which its disk cannot do. Write the lost-disk marker, then set
    /// the snapshots and log aside and start empty (as a damaged disk):
    /// this member now waits to be synced (`Node::awaiting_resync`).
    pub wipe_disk: bool,
    /// This member, which had lost its disk, is synced by an established
    /// leader: remove the lost-disk marker.
    pub resync_done: bool,
}

/// What a member's server may offer clients, by the protocol's state (the
/// runner maps it to its core and its health words).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Serves {
    /// No leader it is synced with (electing, syncing, or leading an epoch
    /// not yet established): no writes, and sessions only read-only ones
    /// when `readonlymode.enabled` (none otherwise, as ZooKeeper).
    NoLeader,
    /// Synced with `leader` (UPTODATE seen): reads here, writes forwarded.
    Follower { leader: Sid },
    /// Leading an established epoch: everything.
    Leader,
}

#[derive(Clone, Copy, Debug)]
pub struct Timings {
    pub election: Timing,
    /// initLimit: discovery and sync must finish within this.
    pub init_limit_ticks: u32,
    /// syncLimit: a silent peer is dropped after this.
    pub sync_limit_ticks: u32,
}

#[derive(Debug, PartialEq, Eq)]
enum LeaderPhase {
    /// Gathering FOLLOWERINFO from a quorum.
    Discovering,
    PersistingAccepted,
    /// Gathering ACKEPOCH from a quorum.
    AwaitingEpochAcks,
    PersistingCurrent,
    /// Sync sent; gathering NEWLEADER acks from a quorum.
    Syncing,
    Broadcasting,
}

struct Leader {
    phase: LeaderPhase,
    epoch: u32,
    infos: BTreeMap<Sid, u32>,
    epoch_acks: BTreeMap<Sid, (i64, Option<u32>)>,
    /// Followers whose ACKEPOCH counted toward this epoch (not -1): only
    /// their NEWLEADER acks establish it, so that a member that lost its
    /// disk (which acks -1) never helps establish an epoch.
    epoch_counted: BTreeSet<Sid>,
    /// Followers that said they are ringkeeper servers (one COMMIT for a
    /// run of proposals; see `Msg::FollowerInfo`).
    ringkeeper_followers: BTreeSet<Sid>,
    /// Followers that got their sync: proposals and commits go to them.
    forwarding: BTreeSet<Sid>,
    newleader_acked: BTreeSet<Sid>,
    acked: BTreeMap<Sid, i64>,
    last_proposed: i64,
    /// Forwarded syncs not answered yet: (learner, point), in arrival
    /// order (points never decrease). A learner's go when it leaves
    /// `forwarding`: its connection ended, and the syncs with it.
    syncs: VecDeque<(Sid, i64)>,
    /// Broadcasting: the epoch's zxids (see `Ready::lead`).
    mint: Option<Mint>,
    ticks: u32,
    heard: BTreeMap<Sid, u32>,
}

#[derive(Debug, PartialEq, Eq)]
enum FollowerPhase {
    Connecting,
    PersistingAccepted(u32),
    Syncing(u32),
    /// NEWLEADER seen: the history as it was then (through `upto`) is
    /// being made durable, then currentEpoch. Proposals that follow
    /// NEWLEADER are logged meanwhile but not waited for (ZooKeeper acks
    /// what came before NEWLEADER): under steady writes the log's end keeps
    /// moving and a joiner waiting for it would never ack.
    Committing {
        epoch: u32,
        upto: i64,
    },
    PersistingCurrent(u32),
    AwaitingUpToDate(u32),
    Broadcasting(u32),
}

struct Follower {
    leader: Sid,
    phase: FollowerPhase,
    silent: u32,
    /// Highest COMMIT seen during sync (reported at UPTODATE).
    sync_committed: i64,
    acked: i64,
    /// The leader said it is a ringkeeper server: one ACK for a run of
    /// proposals (see `Msg::FollowerInfo`).
    leader_is_ringkeeper: bool,
}

// One per member, never moved around: its size does not matter.
#[allow(clippy::large_enum_variant)]
enum RoleState {
    Looking,
    Leading(Leader),
    Following(Follower),
}

pub struct Node {
    myid: Sid,
    voters: BTreeSet<Sid>,
    timings: Timings,
    epochs: Epochs,
    /// The log as appended (the runner keeps the bytes; this is what sync
    /// and DIFF read: in the server, the log's range read).
    history: Vec<Txn>,
    /// The zxid just before `history`'s first txn: 0 when the history
    /// reaches back to the beginning; above 0 once older txns live only in
    /// a snapshot. A follower at or after it gets a DIFF; one before it
    /// needs a SNAP.
    history_base: i64,
    durable: i64,
    committed: i64,
    election: Election,
    role: RoleState,
    /// About how many bytes a snapshot of the tree takes (the runner says;
    /// unknown: never SNAP for size). A DIFF bigger than a third of it
    /// (ZooKeeper's `snapshotSizeFactor`), and than `DIFF_BYTES_FLOOR`,
    /// goes as a SNAP instead.
    snapshot_bytes: u64,
    /// A SNAP carries the history after this zxid only: the runner holds
    /// the committed tree through it (a SNAP needs no more). The whole
    /// history by default (the simulation installs it as the log).
    snap_floor: i64,
    /// The history's length when `trim_history` last looked.
    history_len_checked: usize,
    /// The history in memory keeps at least this many bytes of txns
    /// (`HISTORY_BYTES_MIN` unless the simulation makes it small).
    history_bytes_min: u64,
    /// Appends between two looks at the history's size.
    history_check_every: usize,
    /// This member's disk was set aside, replaced or wiped: it has
    /// forgotten acks it gave, so it must not count toward establishing an
    /// epoch (no vote of its own, ACKEPOCH -1, never leads) until a leader
    /// established without it has synced it (protocol-aware recovery,
    /// DESIGN.md §5). The runner keeps it in a marker file.
    awaiting_resync: bool,
    /// FOLLOWERINFOs that came while this replica was still electing (a
    /// learner that decided first; a Java learner retries its connect for
    /// as long): heard if it comes to lead, their connections closed if it
    /// follows (ZooKeeper has no listener for them then).
    early_infos: BTreeMap<Sid, Msg>,
}

/// The history in memory keeps at least this many bytes of txns (see
/// `Node::trim_history`).
pub const HISTORY_BYTES_MIN: u64 = 64 << 20;
/// Appends between two looks at the history's size.
const HISTORY_CHECK_EVERY: usize = 4096;

/// DIFFs up to this many bytes are sent as such whatever the tree's size.
pub const DIFF_BYTES_FLOOR: u64 = 4 << 20;

impl Node {
    /// A replica whose storage holds `epochs` and the durable `history`.
    pub fn new(
        myid: Sid,
        voters: BTreeSet<Sid>,
        timings: Timings,
        epochs: Epochs,
        history: Vec<Txn>,
    ) -> Node {
        let durable = history.last().map_or(0, |t| t.zxid);
        Node {
            myid,
            election: Election::new(myid, voters.clone(), timings.election),
            voters,
            timings,
            epochs,
            history,
            history_base: 0,
            durable,
            committed: 0,
            role: RoleState::Looking,
            snapshot_bytes: u64::MAX,
            snap_floor: i64::MIN,
            history_len_checked: 0,
            history_bytes_min: HISTORY_BYTES_MIN,
            history_check_every: HISTORY_CHECK_EVERY,
            awaiting_resync: false,
            early_infos: BTreeMap::new(),
        }
    }

    /// The same replica whose disk was set aside, replaced or wiped (see
    /// `awaiting_resync`): it abstains from elections and from counting
    /// toward a new epoch until an established leader has synced it.
    pub fn with_disk_lost(mut self) -> Node {
        self.awaiting_resync = true;
        self.election.set_abstain(true);
        self
    }

    /// Whether this member still waits to be synced after losing its disk.
    pub fn awaiting_resync(&self) -> bool {
        self.awaiting_resync
    }

    /// Keeps at least `bytes` of txns in memory (the simulation sets it
    /// small so that trimming, and the SNAPs it causes, run), looking every
    /// `check_every` appends.
    pub fn set_history_bytes_min(&mut self, bytes: u64, check_every: usize) {
        assert!(check_every > 0);
        self.history_bytes_min = bytes;
        self.history_check_every = check_every;
    }

    /// The runner holds the committed tree through `zxid` (see
    /// `snap_floor`).
    pub fn set_snap_floor(&mut self, zxid: i64) {
        self.snap_floor = zxid;
    }

    /// How big a snapshot of the tree is, about (see `snapshot_bytes`).
    pub fn set_snapshot_bytes(&mut self, bytes: u64) {
        self.snapshot_bytes = bytes;
    }

    /// The same replica when its history starts after `base` (the txns
    /// through `base` are in a snapshot).
    pub fn with_history_base(mut self, base: i64) -> Node {
        assert!(
            self.history.first().is_none_or(|t| t.zxid > base),
            "the history starts after its base"
        );
        self.history_base = base;
        self.durable = self.durable.max(base);
        self
    }

    /// A standalone server (the lone voter) begins: no election and no new
    /// epoch; it leads the epoch of currentEpoch, continuing the log's
    /// zxids as Apache ZooKeeper's standalone server numbers its txns
    /// (0x1, 0x2, ... across restarts). Its history is all durable, so
    /// committed. A new epoch comes only through `Input::EndEpoch`.
    pub fn resume_alone(&mut self) -> Ready {
        assert!(
            self.voters.len() == 1 && self.voters.contains(&self.myid),
            "only a lone voter resumes"
        );
        assert!(matches!(self.role, RoleState::Looking), "started twice");
        let epoch = self.epochs.current;
        let last = self.log_last();
        assert!(
            zxid::epoch(last) <= epoch,
            "the log runs ahead of currentEpoch"
        );
        assert!(
            self.durable >= last,
            "a lone voter's log is durable at start"
        );
        let mint = Mint::after(epoch, last);
        self.role = RoleState::Leading(Leader {
            phase: LeaderPhase::Broadcasting,
            epoch,
            infos: [(self.myid, self.epochs.accepted)].into(),
            epoch_acks: BTreeMap::new(),
            epoch_counted: BTreeSet::new(),
            ringkeeper_followers: BTreeSet::new(),
            forwarding: BTreeSet::new(),
            newleader_acked: BTreeSet::new(),
            acked: [(self.myid, last)].into(),
            last_proposed: last,
            syncs: VecDeque::new(),
            mint: Some(mint),
            ticks: 0,
            heard: BTreeMap::new(),
        });
        self.committed = last;
        Ready {
            role: Some(Role::Broadcasting { epoch }),
            lead: Some(mint),
            commit_to: (last > 0).then_some(last),
            ..Ready::default()
        }
    }

    pub fn myid(&self) -> Sid {
        self.myid
    }

    pub fn log_last(&self) -> i64 {
        self.history.last().map_or(self.history_base, |t| t.zxid)
    }

    pub fn history(&self) -> &[Txn] {
        &self.history
    }

    pub fn committed(&self) -> i64 {
        self.committed
    }

    pub fn epochs(&self) -> Epochs {
        self.epochs
    }

    pub fn role(&self) -> Role {
        match &self.role {
            RoleState::Looking => Role::Looking,
            RoleState::Following(f) => Role::Following { leader: f.leader },
            RoleState::Leading(l) if l.phase == LeaderPhase::Broadcasting => {
                Role::Broadcasting { epoch: l.epoch }
            }
            RoleState::Leading(_) => Role::Leading,
        }
    }

    /// Leader: (learners that named themselves with FOLLOWERINFO and are
    /// still connected, followers synced and receiving proposals), as
    /// mntr's zk_learners and zk_synced_followers.
    pub fn leader_learners(&self) -> Option<(usize, usize)> {
        match &self.role {
            RoleState::Leading(l) => {
                let others =
                    |s: &mut dyn Iterator<Item = &Sid>| s.filter(|sid| **sid != self.myid).count();
                Some((
                    others(&mut l.infos.keys()),
                    others(&mut l.newleader_acked.iter()),
                ))
            }
            _ => None,
        }
    }

    /// What this member may serve clients now (see [`Serves`]).
    pub fn serves(&self) -> Serves {
        match &self.role {
            RoleState::Leading(l) if l.phase == LeaderPhase::Broadcasting => Serves::Leader,
            RoleState::Following(f) if matches!(f.phase, FollowerPhase::Broadcasting(_)) => {
                Serves::Follower { leader: f.leader }
            }
            _ => Serves::NoLeader,
        }
    }

    /// The Zab phase, as QuorumPeer.getDetailedPeerState spells it.
    pub fn phase_name(&self) -> &'static str {
        match &self.role {
            RoleState::Looking => "election",
            RoleState::Leading(l) => match l.phase {
                LeaderPhase::Broadcasting => "broadcast",
                LeaderPhase::Syncing => "synchronization",
                _ => "discovery",
            },
            RoleState::Following(f) => match f.phase {
                FollowerPhase::Broadcasting(_) => "broadcast",
                FollowerPhase::Connecting | FollowerPhase::PersistingAccepted(_) => "discovery",
                _ => "synchronization",
            },
        }
    }

    pub fn step(&mut self, input: Input) -> Ready {
        let mut r = Ready::default();
        match input {
            Input::Start => self.look(&mut r),
            Input::Tick => self.tick(&mut r),
            Input::Receive { from, msg } => self.receive(from, msg, &mut r),
            Input::Durable(z) => {
                self.durable = self.durable.max(z.min(self.log_last()));
                self.on_durable(&mut r);
            }
            Input::AcceptedEpochDurable(e) => self.on_accepted(e, &mut r),
            Input::CurrentEpochDurable(e) => self.on_current(e, &mut r),
            Input::Propose(data) => self.propose(data, &mut r),
            Input::ProposeBatch(batch) => {
                r.append.reserve(batch.len());
                for data in batch {
                    self.propose(data, &mut r);
                }
            }
            Input::EndEpoch => {
                if matches!(self.role(), Role::Broadcasting { .. }) {
                    self.look(&mut r);
                }
            }
            Input::SnapshotInstalled { from, zxid } => self.snapshot_installed(from, zxid, &mut r),
            Input::Sync { from, point } => self.leader_sync(from, point, &mut r),
            Input::Disconnected(peer) => match &self.role {
                RoleState::Looking => {
                    self.early_infos.remove(&peer);
                }
                RoleState::Following(f) if f.leader == peer => self.look(&mut r),
                RoleState::Leading(_) => self.look_if_broken(peer, &mut r),
                _ => {}
            },
        }
        if self.history.len() >= self.history_len_checked + self.history_check_every {
            self.trim_history();
        }
        r
    }

    /// Bounds the history in memory: past twice its limit (the larger of
    /// `HISTORY_BYTES_MIN` and what a DIFF may carry before a SNAP is
    /// cheaper), committed txns are dropped from its front down to the
    /// limit, and the base moves up: a follower behind it gets a SNAP.
    fn trim_history(&mut self) {
        self.history_len_checked = self.history.len();
        if self.voters.len() == 1 {
            // Nobody syncs from a lone voter: its committed txns need not
            // stay in memory.
            let drop = self.history.partition_point(|t| t.zxid <= self.committed);
            if drop > 0 {
                self.history_base = self.history[drop - 1].zxid;
                self.history.drain(..drop);
                self.history_len_checked = self.history.len();
            }
            return;
        }
        let limit = match self.snapshot_bytes {
            u64::MAX => self.history_bytes_min,
            s => self.history_bytes_min.max(s / 3),
        };
        let bytes: u64 = self.history.iter().map(|t| t.data.len() as u64).sum();
        if bytes <= 2 * limit {
            return;
        }
        let mut over = bytes - limit;
        let mut drop = 0;
        for t in &self.history {
            if over == 0 || t.zxid > self.committed {
                break;
            }
            over = over.saturating_sub(t.data.len() as u64);
            drop += 1;
        }
        if drop == 0 {
            return;
        }
        self.history_base = self.history[drop - 1].zxid;
        self.history.drain(..drop);
        self.history_len_checked = self.history.len();
    }

    fn look(&mut self, r: &mut Ready) {
        self.role = RoleState::Looking;
        // Learners of a role left behind: the runner closes their
        // connections with the role.
        self.early_infos.clear();
        r.role = Some(Role::Looking);
        let out = self.election.start(self.log_last(), self.epochs.current);
        self.take_election(out, r);
    }

    fn take_election(&mut self, out: super::election::Out, r: &mut Ready) {
        for (to, n) in out.send {
            r.send.push((to, Msg::Vote(n)));
        }
        if let Some(d) = out.decided {
            self.decided(d, r);
        }
    }

    fn decided(&mut self, d: Decision, r: &mut Ready) {
        if d.state == PeerState::Leading {
            let mut infos = BTreeMap::new();
            infos.insert(self.myid, self.epochs.accepted);
            self.role = RoleState::Leading(Leader {
                phase: LeaderPhase::Discovering,
                epoch: 0,
                infos,
                epoch_acks: BTreeMap::new(),
                epoch_counted: BTreeSet::new(),
                ringkeeper_followers: BTreeSet::new(),
                forwarding: BTreeSet::new(),
                newleader_acked: BTreeSet::new(),
                acked: BTreeMap::new(),
                last_proposed: self.log_last(),
                syncs: VecDeque::new(),
                mint: None,
                ticks: 0,
                heard: BTreeMap::new(),
            });
            r.role = Some(Role::Leading);
            self.leader_progress(r);
            for (from, msg) in std::mem::take(&mut self.early_infos) {
                if matches!(self.role, RoleState::Leading(_)) {
                    self.leader_receive(from, msg, r);
                }
            }
        } else {
            r.close
                .extend(std::mem::take(&mut self.early_infos).into_keys());
            self.role = RoleState::Following(Follower {
                leader: d.vote.leader,
                phase: FollowerPhase::Connecting,
                silent: 0,
                sync_committed: 0,
                acked: 0,
                leader_is_ringkeeper: false,
            });
            r.role = Some(Role::Following {
                leader: d.vote.leader,
            });
            r.send.push((
                d.vote.leader,
                Msg::FollowerInfo {
                    accepted_epoch: self.epochs.accepted,
                    ringkeeper: true,
                },
            ));
        }
    }

    fn tick(&mut self, r: &mut Ready) {
        let (init, sync) = (self.timings.init_limit_ticks, self.timings.sync_limit_ticks);
        let n_voters = self.voters.len();
        match &mut self.role {
            RoleState::Looking => {
                let out = self.election.tick();
                self.take_election(out, r);
            }
            RoleState::Leading(l) => {
                l.ticks += 1;
                for h in l.heard.values_mut() {
                    *h += 1;
                }
                let give_up = if l.phase == LeaderPhase::Broadcasting {
                    let live = l
                        .newleader_acked
                        .iter()
                        .filter(|f| l.heard.get(f).is_some_and(|h| *h <= sync))
                        .count();
                    (live + 1) * 2 <= n_voters
                } else {
                    l.ticks > init
                };
                if give_up {
                    self.look(r);
                    return;
                }
                for f in &l.forwarding {
                    r.send.push((*f, Msg::Ping));
                }
            }
            RoleState::Following(f) => {
                f.silent += 1;
                let limit = if matches!(f.phase, FollowerPhase::Broadcasting(_)) {
                    sync
                } else {
                    init
                };
                if f.silent > limit {
                    self.look(r);
                }
            }
        }
    }

    fn receive(&mut self, from: Sid, msg: Msg, r: &mut Ready) {
        if !self.voters.contains(&from) || from == self.myid {
            return;
        }
        if let Msg::Vote(n) = msg {
            let out = self.election.receive(from, n);
            if matches!(self.role, RoleState::Looking) {
                self.take_election(out, r);
            } else {
                // Decided: the election answers LOOKING peers itself.
                for (to, n) in out.send {
                    r.send.push((to, Msg::Vote(n)));
                }
            }
            return;
        }
        match &mut self.role {
            RoleState::Looking => {
                if matches!(msg, Msg::FollowerInfo { .. }) {
                    self.early_infos.insert(from, msg);
                }
            }
            RoleState::Leading(_) => self.leader_receive(from, msg, r),
            RoleState::Following(f) if f.leader == from => {
                f.silent = 0;
                self.follower_receive(msg, r);
            }
            RoleState::Following(_) => {
                if matches!(msg, Msg::FollowerInfo { .. }) {
                    // Not leading: ZooKeeper has no listener for it.
                    r.close.push(from);
                }
            }
        }
    }

    // ---- leader --------------------------------------------------------

    fn leader_receive(&mut self, from: Sid, msg: Msg, r: &mut Ready) {
        let log_last = self.log_last();
        let RoleState::Leading(l) = &mut self.role else {
            return;
        };
        l.heard.insert(from, 0);
        match msg {
            Msg::FollowerInfo {
                accepted_epoch,
                ringkeeper,
            } => {
                l.infos.insert(from, accepted_epoch);
                if ringkeeper {
                    l.ringkeeper_followers.insert(from);
                } else {
                    l.ringkeeper_followers.remove(&from);
                }
                l.epoch_acks.remove(&from);
                l.forwarding.remove(&from);
                l.syncs.retain(|(s, _)| *s != from);
                l.newleader_acked.remove(&from);
                l.acked.remove(&from);
                if matches!(
                    l.phase,
                    LeaderPhase::AwaitingEpochAcks
                        | LeaderPhase::PersistingCurrent
                        | LeaderPhase::Syncing
                        | LeaderPhase::Broadcasting
                ) {
                    if accepted_epoch > l.epoch {
                        // It accepted a later epoch: this one is stale.
                        self.look(r);
                        return;
                    }
                    r.send.push((
                        from,
                        Msg::LeaderInfo {
                            epoch: l.epoch,
                            ringkeeper: true,
                        },
                    ));
                }
                self.leader_progress(r);
            }
            Msg::AckEpoch {
                last_zxid,
                current_epoch,
            } => {
                if !l.infos.contains_key(&from) || l.epoch == 0 {
                    return self.out_of_order(from, r);
                }
                let mine = (self.epochs.current, log_last);
                if let Some(c) = current_epoch {
                    if (c, last_zxid) > mine {
                        // A follower more recent than us: not our epoch.
                        self.look(r);
                        return;
                    }
                }
                l.epoch_acks.insert(from, (last_zxid, current_epoch));
                if current_epoch.is_some() {
                    l.epoch_counted.insert(from);
                }
                if matches!(l.phase, LeaderPhase::Syncing | LeaderPhase::Broadcasting) {
                    self.sync_follower(from, last_zxid, r);
                }
                self.leader_progress(r);
            }
            Msg::Ack(z) => {
                if !l.forwarding.contains(&from) {
                    return;
                }
                if z == zxid::make(l.epoch, 0) {
                    if !l.newleader_acked.insert(from) {
                        // A Java follower repeats this ack after UPTODATE:
                        // it is synced already, no second UPTODATE.
                        return;
                    }
                    if l.phase == LeaderPhase::Broadcasting {
                        r.send.push((from, Msg::UpToDate));
                    }
                    self.leader_progress(r);
                } else if l.newleader_acked.contains(&from)
                    && zxid::epoch(z) == l.epoch
                    && z <= l.last_proposed
                {
                    let a = l.acked.entry(from).or_insert(z);
                    *a = (*a).max(z);
                    self.leader_commit(r);
                }
            }
            Msg::Ping => {}
            _ => self.out_of_order(from, r),
        }
    }

    /// A message out of protocol order from a follower: ZooKeeper closes
    /// that learner's connection; here the follower is forgotten (it will
    /// time out and come back).
    /// Following `leader` and not yet past its sync (a SNAP may come).
    pub fn syncing_with(&self, leader: Sid) -> bool {
        matches!(&self.role, RoleState::Following(f)
            if f.leader == leader && matches!(f.phase, FollowerPhase::Syncing(_)))
    }

    fn snapshot_installed(&mut self, from: Sid, zxid: i64, r: &mut Ready) {
        match &mut self.role {
            RoleState::Following(f)
                if f.leader == from && matches!(f.phase, FollowerPhase::Syncing(_)) =>
            {
                self.history.clear();
                self.history_base = zxid;
                self.durable = zxid;
                f.sync_committed = f.sync_committed.max(zxid);
            }
            _ => self.look(r),
        }
    }

    /// A learner sent what the protocol does not allow here: forget it
    /// and close its connection (it starts over with FOLLOWERINFO).
    fn out_of_order(&mut self, from: Sid, r: &mut Ready) {
        self.look_if_broken(from, r);
        r.close.push(from);
    }

    fn look_if_broken(&mut self, from: Sid, _r: &mut Ready) {
        if let RoleState::Leading(l) = &mut self.role {
            l.infos.remove(&from);
            l.epoch_acks.remove(&from);
            l.forwarding.remove(&from);
            l.syncs.retain(|(s, _)| *s != from);
            l.newleader_acked.remove(&from);
            l.acked.remove(&from);
        }
    }

    /// Moves discovery and sync on as far as the gathered answers allow.
    fn leader_progress(&mut self, r: &mut Ready) {
        let log_last = self.log_last();
        let voters = &self.voters;
        let myid = self.myid;
        let RoleState::Leading(l) = &mut self.role else {
            return;
        };
        if l.phase == LeaderPhase::Discovering && quorum::is_quorum(voters, l.infos.keys()) {
            let epoch = l.infos.values().copied().max().unwrap_or(0) + 1;
            assert!(epoch > self.epochs.accepted);
            l.epoch = epoch;
            l.phase = LeaderPhase::PersistingAccepted;
            r.persist_accepted_epoch = Some(epoch);
            return;
        }
        if l.phase == LeaderPhase::AwaitingEpochAcks {
            // Acks of -1 (already accepted) do not count (Leader.waitForEpochAck).
            let counted = l
                .epoch_acks
                .iter()
                .filter(|(_, (_, c))| c.is_some())
                .map(|(s, _)| s)
                .chain(std::iter::once(&myid));
            if quorum::is_quorum(voters, counted) {
                // currentEpoch says this history is the epoch's: it must be
                // durable first (a leader that logged proposals as a
                // follower may still be syncing them; found by the
                // simulation with the runner's settle taken out).
                if self.durable < log_last {
                    r.sync = true;
                    return;
                }
                l.phase = LeaderPhase::PersistingCurrent;
                r.persist_current_epoch = Some(l.epoch);
            }
            return;
        }
        if l.phase == LeaderPhase::Syncing {
            let own_durable = self.durable >= log_last;
            if !own_durable {
                r.sync = true;
                return;
            }
            let acked = l
                .newleader_acked
                .iter()
                .filter(|s| l.epoch_counted.contains(s))
                .chain(std::iter::once(&myid));
            if quorum::is_quorum(voters, acked) {
                l.phase = LeaderPhase::Broadcasting;
                l.acked.insert(myid, log_last);
                let mint = Mint::after(l.epoch, log_last);
                l.mint = Some(mint);
                r.lead = Some(mint);
                for f in &l.newleader_acked {
                    r.send.push((*f, Msg::UpToDate));
                }
                r.role = Some(Role::Broadcasting { epoch: l.epoch });
                self.election.update_vote_epoch(l.epoch);
                // The leader's history is the epoch's: committed now.
                if log_last > self.committed {
                    self.committed = log_last;
                    r.commit_to = Some(log_last);
                }
            }
        }
    }

    fn on_accepted(&mut self, e: u32, r: &mut Ready) {
        match &mut self.role {
            RoleState::Leading(l) if l.phase == LeaderPhase::PersistingAccepted && l.epoch == e => {
                self.epochs.accepted = e;
                l.phase = LeaderPhase::AwaitingEpochAcks;
                for f in l.infos.keys() {
                    if *f != self.myid {
                        r.send.push((
                            *f,
                            Msg::LeaderInfo {
                                epoch: e,
                                ringkeeper: true,
                            },
                        ));
                    }
                }
                self.leader_progress(r);
            }
            RoleState::Following(f) if f.phase == FollowerPhase::PersistingAccepted(e) => {
                self.epochs.accepted = e;
                f.phase = FollowerPhase::Syncing(e);
                // -1 does not count toward the epoch (Leader.waitForEpochAck):
                // a member that lost its disk must not help establish one.
                let current_epoch = (!self.awaiting_resync).then_some(self.epochs.current);
                r.send.push((
                    f.leader,
                    Msg::AckEpoch {
                        last_zxid: self.log_last(),
                        current_epoch,
                    },
                ));
            }
            // A role left behind: the write happened; nothing waits for it.
            _ => self.epochs.accepted = self.epochs.accepted.max(e),
        }
    }

    fn on_current(&mut self, e: u32, r: &mut Ready) {
        match &mut self.role {
            RoleState::Leading(l) if l.phase == LeaderPhase::PersistingCurrent && l.epoch == e => {
                self.epochs.current = e;
                l.phase = LeaderPhase::Syncing;
                let acks: Vec<(Sid, i64)> =
                    l.epoch_acks.iter().map(|(s, (z, _))| (*s, *z)).collect();
                for (f, z) in acks {
                    self.sync_follower(f, z, r);
                }
                self.leader_progress(r);
            }
            RoleState::Following(f) if f.phase == FollowerPhase::PersistingCurrent(e) => {
                self.epochs.current = e;
                f.phase = FollowerPhase::AwaitingUpToDate(e);
                r.send.push((f.leader, Msg::Ack(zxid::make(e, 0))));
            }
            _ => self.epochs.current = self.epochs.current.max(e),
        }
    }

    /// Sends follower `f` (whose log ends at `peer_last`) what brings it to
    /// our history, then NEWLEADER, and forwards proposals to it from now on.
    fn sync_follower(&mut self, f: Sid, peer_last: i64, r: &mut Ready) {
        let last = self.log_last();
        let RoleState::Leading(l) = &mut self.role else {
            return;
        };
        let commit_to = if l.phase == LeaderPhase::Broadcasting {
            self.committed
        } else {
            last
        };
        let position = self.history.iter().position(|t| t.zxid == peer_last);
        // Where the txns the follower lacks start in our history, when it
        // holds nothing we lack: DIFF.
        let diff_from = if peer_last == last {
            Some(self.history.len())
        } else if let Some(i) = position {
            Some(i + 1)
        } else if peer_last == self.history_base {
            Some(0)
        } else {
            None
        };
        // A DIFF much bigger than the tree goes as a SNAP (ZooKeeper's
        // snapshotSizeFactor): cheaper for both ends.
        let too_big = diff_from.is_some_and(|i| {
            let bytes: u64 = self.history[i..].iter().map(|t| t.data.len() as u64).sum();
            bytes > DIFF_BYTES_FLOOR && bytes > self.snapshot_bytes / 3
        });
        // Otherwise it has txns we lack: cut it back to our last zxid
        // before them, unless that lies before our history (then SNAP).
        let keep = self.history.partition_point(|t| t.zxid < peer_last);
        let trunc_to = if keep > 0 {
            Some(self.history[keep - 1].zxid)
        } else if self.history_base == 0 && peer_last > 0 {
            Some(0)
        } else {
            None
        };
        // A TRUNC never crosses an epoch boundary (ZooKeeper's
        // LearnerHandler: "the learner will crash if it is asked to do
        // so"): the learner may hold that point only in a snapshot, or not
        // at all. A SNAP is always right.
        let trunc_to = trunc_to.filter(|to| zxid::epoch(*to) == zxid::epoch(peer_last));
        let from_index = if let Some(i) = diff_from.filter(|_| !too_big) {
            r.send.push((f, Msg::Diff));
            i
        } else if let Some(to) = trunc_to.filter(|_| !too_big) {
            r.send.push((f, Msg::Trunc { to }));
            keep
        } else {
            r.send.push((
                f,
                Msg::Snap {
                    history: self.history
                        [self.history.partition_point(|t| t.zxid <= self.snap_floor)..]
                        .iter()
                        .take_while(|t| t.zxid <= commit_to)
                        .cloned()
                        .collect(),
                },
            ));
            self.history.partition_point(|t| t.zxid <= commit_to)
        };
        for t in &self.history[from_index..] {
            r.send.push((f, Msg::Proposal(t.clone())));
            if t.zxid <= commit_to {
                r.send.push((f, Msg::Commit(t.zxid)));
            }
        }
        l.forwarding.insert(f);
        r.send.push((f, Msg::NewLeader { epoch: l.epoch }));
    }

    fn propose(&mut self, data: Vec<u8>, r: &mut Ready) {
        let RoleState::Leading(l) = &mut self.role else {
            return;
        };
        if l.phase != LeaderPhase::Broadcasting {
            return;
        }
        let Some(z) = l
            .mint
            .as_mut()
            .expect("a broadcasting leader's mint")
            .take()
        else {
            // The counter ran out: a new epoch (ZOOKEEPER-1277).
            self.look(r);
            return;
        };
        let t = Txn { zxid: z, data };
        l.last_proposed = z;
        for f in &l.forwarding {
            r.send.push((*f, Msg::Proposal(t.clone())));
        }
        self.history.push(t.clone());
        r.append.push(t);
        r.sync = true;
    }

    /// Commits what a quorum has durable; COMMIT to every follower, with
    /// each learner's sync answers in their place among its COMMITs.
    fn leader_commit(&mut self, r: &mut Ready) {
        let RoleState::Leading(l) = &mut self.role else {
            return;
        };
        if l.phase != LeaderPhase::Broadcasting {
            return;
        }
        l.acked.insert(self.myid, self.durable);
        let Some(point) = quorum::acknowledged_by_quorum(&self.voters, &l.acked) else {
            return;
        };
        if point > self.committed && zxid::epoch(point) == l.epoch {
            let from = self.history.partition_point(|t| t.zxid <= self.committed);
            let to = self.history.partition_point(|t| t.zxid <= point);
            let answered = l.syncs.partition_point(|(_, p)| *p <= point);
            for f in &l.forwarding {
                // This learner's syncs answered now, in order.
                let mut syncs = l.syncs.range(..answered).filter(|(s, _)| s == f).peekable();
                // One COMMIT per proposal, in order, to a Java follower: it
                // matches each against its next pending txn
                // (FollowerZooKeeperServer exits on a COMMIT that skips one).
                // A ringkeeper follower takes a point at once: one COMMIT
                // for the run, cut where a sync is answered.
                let per_txn = !l.ringkeeper_followers.contains(f);
                let mut unsent = None;
                for t in &self.history[from..to] {
                    while syncs.next_if(|(_, p)| *p < t.zxid).is_some() {
                        if let Some(z) = unsent.take() {
                            r.send.push((*f, Msg::Commit(z)));
                        }
                        r.send.push((*f, Msg::SyncAnswer));
                    }
                    if per_txn {
                        r.send.push((*f, Msg::Commit(t.zxid)));
                    } else {
                        unsent = Some(t.zxid);
                    }
                }
                if !per_txn && (unsent.is_some() || to == from) {
                    // `point` itself, also when no txn of the history is
                    // in the run (as before syncs were answered here).
                    r.send.push((*f, Msg::Commit(point)));
                }
                for _ in syncs {
                    r.send.push((*f, Msg::SyncAnswer));
                }
            }
            l.syncs.drain(..answered);
            self.committed = point;
            r.commit_to = Some(point);
        }
    }

    /// A learner's forwarded sync (`Input::Sync`): answered now when its
    /// point is committed, else when the commit that covers it goes out.
    /// Only a learner this leader synced gets an answer: another one's
    /// connection is from an epoch it no longer leads.
    fn leader_sync(&mut self, from: Sid, point: i64, r: &mut Ready) {
        if !self.takes_syncs_from(from) {
            return;
        }
        let RoleState::Leading(l) = &mut self.role else {
            unreachable!("checked above");
        };
        if point <= self.committed {
            r.send.push((from, Msg::SyncAnswer));
            return;
        }
        let last = l.syncs.back().map_or(i64::MIN, |(_, p)| *p);
        // A point is what the leader had assigned: it never goes back.
        l.syncs.push_back((from, point.max(last)));
    }

    /// Leader: whether a sync `from` forwards is answered (`Input::Sync`):
    /// it leads an established epoch and `from` is a learner it synced.
    pub fn takes_syncs_from(&self, from: Sid) -> bool {
        match &self.role {
            RoleState::Leading(l) => {
                l.phase == LeaderPhase::Broadcasting && l.forwarding.contains(&from)
            }
            _ => false,
        }
    }

    /// Leader: forwarded syncs waiting for their commit.
    pub fn pending_syncs(&self) -> usize {
        match &self.role {
            RoleState::Leading(l) => l.syncs.len(),
            _ => 0,
        }
    }

    // ---- follower ------------------------------------------------------

    fn follower_receive(&mut self, msg: Msg, r: &mut Ready) {
        let RoleState::Following(f) = &mut self.role else {
            return;
        };
        let leader = f.leader;
        match (&f.phase, msg) {
            // A Java learner reads no PING until it is synced
            // (Learner.syncWithLeader), and a Java leader waiting for the
            // NEWLEADER ack drops a learner that sends one instead.
            (FollowerPhase::Broadcasting(_), Msg::Ping) => r.send.push((leader, Msg::Ping)),
            // The runner answers the oldest sync it forwarded (the SYNC is
            // in order among the COMMITs it has taken).
            (FollowerPhase::Broadcasting(_), Msg::SyncAnswer) => {}
            (_, Msg::Ping) => {}
            (FollowerPhase::Connecting, Msg::LeaderInfo { epoch, ringkeeper }) => {
                f.leader_is_ringkeeper = ringkeeper;
                if epoch > self.epochs.accepted {
                    f.phase = FollowerPhase::PersistingAccepted(epoch);
                    r.persist_accepted_epoch = Some(epoch);
                } else if epoch == self.epochs.accepted {
                    f.phase = FollowerPhase::Syncing(epoch);
                    r.send.push((
                        leader,
                        Msg::AckEpoch {
                            last_zxid: self.log_last(),
                            current_epoch: None,
                        },
                    ));
                } else {
                    self.look(r);
                }
            }
            (FollowerPhase::Syncing(_), Msg::Diff) => {}
            (FollowerPhase::Syncing(_), Msg::Trunc { to }) => {
                if to < self.history_base {
                    // Below the snapshot this member's history starts from
                    // (a SNAP from a leader that never established its epoch
                    // can carry txns nobody committed): the disk cannot go
                    // back there. It forgets its data as a lost disk does,
                    // and is synced again once a leader is established.
                    self.lose_disk(r);
                    return;
                }
                if to < self.committed {
                    // A leader may never cut committed txns: not ours.
                    self.look(r);
                    return;
                }
                let keep = self.history.partition_point(|t| t.zxid <= to);
                if keep < self.history.len() {
                    self.history.truncate(keep);
                    self.durable = self.durable.min(to);
                    r.truncate_after = Some(to);
                }
            }
            (FollowerPhase::Syncing(_), Msg::Snap { history }) => {
                let last = history.last().map_or(0, |t| t.zxid);
                self.history = history.clone();
                self.durable = last;
                r.replace_log = Some(history);
                f.sync_committed = f.sync_committed.max(last);
            }
            (
                FollowerPhase::Syncing(_)
                | FollowerPhase::Committing { .. }
                | FollowerPhase::PersistingCurrent(_)
                | FollowerPhase::AwaitingUpToDate(_)
                | FollowerPhase::Broadcasting(_),
                Msg::Proposal(t),
            ) => {
                let last = self.log_last();
                if t.zxid <= self.history_base {
                    // Under a leader's SNAP: in the snapshot already
                    // (ZooKeeper forwards from before the SNAP's zxid).
                    return;
                }
                if t.zxid <= last {
                    // A duplicate of a logged proposal is harmless; a
                    // different txn under a logged zxid is not.
                    if !self.history.contains(&t) {
                        self.look(r);
                    }
                    return;
                }
                if !zxid::follows(last, t.zxid) {
                    self.look(r); // a gap: ZOOKEEPER-4925
                    return;
                }
                self.history.push(t.clone());
                r.append.push(t);
                r.sync = true;
            }
            (FollowerPhase::Syncing(_), Msg::Commit(z)) => {
                f.sync_committed = f.sync_committed.max(z);
            }
            (FollowerPhase::Broadcasting(_), Msg::Commit(z)) => {
                let last = self.log_last();
                if z > last {
                    self.look(r);
                    return;
                }
                if z > self.committed {
                    self.committed = z;
                    r.commit_to = Some(z);
                }
            }
            (
                FollowerPhase::Committing { .. }
                | FollowerPhase::PersistingCurrent(_)
                | FollowerPhase::AwaitingUpToDate(_),
                Msg::Commit(z),
            ) => f.sync_committed = f.sync_committed.max(z),
            (FollowerPhase::Syncing(e), Msg::NewLeader { epoch }) if *e == epoch => {
                f.phase = FollowerPhase::Committing {
                    epoch,
                    upto: self.history.last().map_or(self.history_base, |t| t.zxid),
                };
                self.on_durable(r);
            }
            (FollowerPhase::AwaitingUpToDate(e), Msg::UpToDate) => {
                let e = *e;
                f.phase = FollowerPhase::Broadcasting(e);
                let to = f
                    .sync_committed
                    .min(self.history.last().map_or(self.history_base, |t| t.zxid));
                if to > self.committed {
                    self.committed = to;
                    r.commit_to = Some(to);
                }
                r.role = Some(Role::Following { leader });
                if self.awaiting_resync {
                    // An established leader synced it: its acks are promises
                    // about its disk again.
                    self.awaiting_resync = false;
                    self.election.set_abstain(false);
                    r.resync_done = true;
                }
                // Joiners must see one vote from all of us (ZOOKEEPER-1732).
                self.election.update_vote_epoch(e);
                self.on_durable(r);
            }
            _ => self.look(r),
        }
    }

    /// Forgets the history (the runner sets the disk aside after writing
    /// the lost-disk marker) and looks again, abstaining until synced.
    fn lose_disk(&mut self, r: &mut Ready) {
        self.history.clear();
        self.history_base = 0;
        self.durable = 0;
        self.committed = 0;
        self.awaiting_resync = true;
        self.election.set_abstain(true);
        r.wipe_disk = true;
        self.look(r);
    }

    fn on_durable(&mut self, r: &mut Ready) {
        match &mut self.role {
            RoleState::Leading(l)
                if matches!(
                    l.phase,
                    LeaderPhase::Syncing | LeaderPhase::AwaitingEpochAcks
                ) =>
            {
                self.leader_progress(r)
            }
            RoleState::Leading(_) => self.leader_commit(r),
            RoleState::Following(f) => match f.phase {
                FollowerPhase::Committing { epoch: e, upto } => {
                    if self.durable >= upto {
                        // The synced history is durable: now currentEpoch.
                        f.phase = FollowerPhase::PersistingCurrent(e);
                        r.persist_current_epoch = Some(e);
                    } else {
                        r.sync = true;
                    }
                }
                FollowerPhase::Broadcasting(e) => {
                    // One ACK per proposal, as ZooKeeper's followers: a Java
                    // leader counts each proposal's acks on its own, and a
                    // proposal only the last ack covered would never commit.
                    let z = self.durable;
                    if z > f.acked && zxid::epoch(z) == e && f.leader_is_ringkeeper {
                        // A ringkeeper leader takes the point at once.
                        f.acked = z;
                        r.send.push((f.leader, Msg::Ack(z)));
                    } else if z > f.acked && zxid::epoch(z) == e {
                        let from = f.acked;
                        f.acked = z;
                        let start = self.history.partition_point(|t| t.zxid <= from);
                        for t in &self.history[start..] {
                            if t.zxid > z {
                                break;
                            }
                            if zxid::epoch(t.zxid) == e {
                                r.send.push((f.leader, Msg::Ack(t.zxid)));
                            }
                        }
                    }
                }
                _ => {}
            },
            RoleState::Looking => {}
        }
    }
}

#[cfg(test)]
mod tests;
