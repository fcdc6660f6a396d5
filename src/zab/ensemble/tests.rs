use super::*;
use crate::zab::zxid::make;

const TIMINGS: Timings = Timings {
    election: Timing {
        finalize_wait_ticks: 3,
        min_not_timeout_ticks: 10,
        max_not_timeout_ticks: 40,
    },
    init_limit_ticks: 50,
    sync_limit_ticks: 20,
};

fn txn(z: i64) -> Txn {
    Txn {
        zxid: z,
        data: z.to_be_bytes().to_vec(),
    }
}

fn node(myid: Sid, voters: &[Sid], epoch: u32, history: Vec<Txn>) -> Node {
    Node::new(
        myid,
        voters.iter().copied().collect(),
        TIMINGS,
        Epochs {
            accepted: epoch,
            current: epoch,
        },
        history,
    )
}

/// Replicas whose storage does everything at once and whose messages
/// arrive at once, in order.
struct Cluster {
    nodes: BTreeMap<Sid, Node>,
    queue: std::collections::VecDeque<(Sid, Sid, Msg)>,
    /// Every message sent: (from, to, message).
    sent: Vec<(Sid, Sid, Msg)>,
    /// Replicas that speak as Java servers do (their FOLLOWERINFO and
    /// LEADERINFO without the ringkeeper bit).
    java: BTreeSet<Sid>,
}

impl Cluster {
    fn new(nodes: Vec<Node>) -> Cluster {
        let mut c = Cluster {
            nodes: nodes.into_iter().map(|n| (n.myid(), n)).collect(),
            queue: Default::default(),
            sent: Vec::new(),
            java: BTreeSet::new(),
        };
        let ids: Vec<Sid> = c.nodes.keys().copied().collect();
        for s in ids {
            c.step(s, Input::Start);
        }
        c
    }

    fn step(&mut self, s: Sid, input: Input) {
        let Some(node) = self.nodes.get_mut(&s) else {
            return; // a replica that is down: lost
        };
        let r = node.step(input);
        // Storage answers at once.
        if let Some(e) = r.persist_accepted_epoch {
            self.step(s, Input::AcceptedEpochDurable(e));
        }
        if let Some(e) = r.persist_current_epoch {
            self.step(s, Input::CurrentEpochDurable(e));
        }
        if r.sync {
            let last = self.nodes[&s].log_last();
            self.step(s, Input::Durable(last));
        }
        for (to, mut m) in r.send {
            if self.java.contains(&s) {
                match &mut m {
                    Msg::FollowerInfo { ringkeeper, .. } | Msg::LeaderInfo { ringkeeper, .. } => {
                        *ringkeeper = false
                    }
                    _ => {}
                }
            }
            self.sent.push((s, to, m.clone()));
            self.queue.push_back((s, to, m));
        }
    }

    /// A replica joins (or comes back).
    fn add(&mut self, n: Node) {
        let s = n.myid();
        self.nodes.insert(s, n);
        self.step(s, Input::Start);
    }

    fn settle(&mut self, ticks: u32) {
        for _ in 0..ticks {
            while let Some((from, to, msg)) = self.queue.pop_front() {
                self.step(to, Input::Receive { from, msg });
            }
            let ids: Vec<Sid> = self.nodes.keys().copied().collect();
            for s in ids {
                self.step(s, Input::Tick);
            }
        }
        while let Some((from, to, msg)) = self.queue.pop_front() {
            self.step(to, Input::Receive { from, msg });
        }
    }

    fn leader(&self) -> Option<Sid> {
        self.nodes
            .values()
            .find(|n| matches!(n.role(), Role::Broadcasting { .. }))
            .map(|n| n.myid())
    }
}

#[test]
fn three_replicas_establish_a_new_epoch_and_commit_writes() {
    // 3 has the longest log of epoch 1: it leads epoch 2, and the others
    // get its history (2 by DIFF, 1 by SNAP: its log is empty).
    let h: Vec<Txn> = (1..=4).map(|c| txn(make(1, c))).collect();
    let mut c = Cluster::new(vec![
        node(1, &[1, 2, 3], 0, Vec::new()),
        node(2, &[1, 2, 3], 1, h[..2].to_vec()),
        node(3, &[1, 2, 3], 1, h.clone()),
    ]);
    c.settle(20);
    assert_eq!(c.leader(), Some(3));
    for n in c.nodes.values() {
        assert_eq!(
            n.epochs(),
            Epochs {
                accepted: 2,
                current: 2
            },
            "server {}",
            n.myid()
        );
        assert_eq!(n.history(), &h[..], "server {}", n.myid());
        assert_eq!(n.committed(), make(1, 4), "server {}", n.myid());
    }
    for v in 0..3u8 {
        c.step(3, Input::Propose(vec![v]));
    }
    c.settle(2);
    for n in c.nodes.values() {
        assert_eq!(n.committed(), make(2, 3), "server {}", n.myid());
        assert_eq!(n.history().last().unwrap().data, vec![2]);
    }
}

/// A leader of epoch 2 in sync, with history 1:1..=5, 2:1..=2.
fn syncing_leader() -> Node {
    let mut h: Vec<Txn> = (1..=5).map(|c| txn(make(1, c))).collect();
    h.extend((1..=2).map(|c| txn(make(2, c))));
    let mut n = node(1, &[1, 2, 3], 2, h);
    n.role = RoleState::Leading(Leader {
        phase: LeaderPhase::Syncing,
        epoch: 3,
        infos: BTreeMap::new(),
        epoch_acks: BTreeMap::new(),
        epoch_counted: BTreeSet::new(),
        ringkeeper_followers: BTreeSet::new(),
        forwarding: BTreeSet::new(),
        newleader_acked: BTreeSet::new(),
        acked: BTreeMap::new(),
        last_proposed: make(2, 2),
        syncs: VecDeque::new(),
        mint: None,
        ticks: 0,
        heard: BTreeMap::new(),
    });
    n
}

/// A leader broadcasting epoch 2 to follower 2 (ringkeeper) and 3 (Java),
/// 1:1..=5 committed, 2:1..=2 proposed and durable here.
fn broadcasting_leader() -> Node {
    let mut n = syncing_leader();
    let RoleState::Leading(l) = &mut n.role else {
        unreachable!()
    };
    l.phase = LeaderPhase::Broadcasting;
    l.epoch = 2;
    l.forwarding = [2, 3].into();
    l.newleader_acked = [2, 3].into();
    l.ringkeeper_followers = [2].into();
    l.mint = Some(Mint::after(2, make(2, 2)));
    n.committed = make(1, 5);
    n.durable = make(2, 2);
    n
}

/// What `r` sends to `to`, in order.
fn sent_to(r: &Ready, to: Sid) -> Vec<&Msg> {
    r.send
        .iter()
        .filter(|(t, _)| *t == to)
        .map(|(_, m)| m)
        .collect()
}

#[test]
fn a_sync_is_answered_between_the_commit_of_its_point_and_the_next() {
    let mut n = broadcasting_leader();
    // Both came when 2:1 was the last zxid assigned; an earlier point is
    // committed already and answered at once.
    for from in [2, 3] {
        let r = n.step(Input::Sync {
            from,
            point: make(2, 1),
        });
        assert!(r.send.is_empty(), "{:?}", r.send);
    }
    let r = n.step(Input::Sync {
        from: 3,
        point: make(1, 5),
    });
    assert!(matches!(sent_to(&r, 3)[..], [Msg::SyncAnswer]));
    assert_eq!(n.pending_syncs(), 2);
    // One ACK makes a quorum with the leader: 2:1 and 2:2 commit at once.
    let r = n.step(Input::Receive {
        from: 2,
        msg: Msg::Ack(make(2, 2)),
    });
    assert_eq!(r.commit_to, Some(make(2, 2)));
    // ringkeeper: the run of commits cut at the sync's point.
    assert!(
        matches!(
            sent_to(&r, 2)[..],
            [Msg::Commit(a), Msg::SyncAnswer, Msg::Commit(b)] if *a == make(2, 1) && *b == make(2, 2)
        ),
        "{:?}",
        sent_to(&r, 2)
    );
    // Java: one COMMIT per txn, the answer after its point's.
    assert!(
        matches!(
            sent_to(&r, 3)[..],
            [Msg::Commit(a), Msg::SyncAnswer, Msg::Commit(b)] if *a == make(2, 1) && *b == make(2, 2)
        ),
        "{:?}",
        sent_to(&r, 3)
    );
    assert_eq!(n.pending_syncs(), 0);
}

#[test]
fn a_sync_waits_for_a_point_not_yet_proposed_and_a_gone_learner_s_are_dropped() {
    let mut n = broadcasting_leader();
    // The core assigned 2:3 (not yet given to zab) when this one came.
    n.step(Input::Sync {
        from: 2,
        point: make(2, 3),
    });
    n.step(Input::Sync {
        from: 3,
        point: make(2, 3),
    });
    let r = n.step(Input::Receive {
        from: 2,
        msg: Msg::Ack(make(2, 2)),
    });
    assert!(
        !r.send.iter().any(|(_, m)| matches!(m, Msg::SyncAnswer)),
        "answered before its point: {:?}",
        r.send
    );
    // Learner 3's connection ends: its sync goes with it.
    n.step(Input::Disconnected(3));
    assert_eq!(n.pending_syncs(), 1);
    n.step(Input::Propose(vec![7]));
    let r = n.step(Input::Durable(make(2, 3)));
    assert!(r.send.is_empty(), "{:?}", r.send);
    let r = n.step(Input::Receive {
        from: 2,
        msg: Msg::Ack(make(2, 3)),
    });
    assert!(
        matches!(sent_to(&r, 2)[..], [Msg::Commit(z), Msg::SyncAnswer] if *z == make(2, 3)),
        "{:?}",
        sent_to(&r, 2)
    );
    assert!(sent_to(&r, 3).is_empty());
    // A learner this leader did not sync gets no answer.
    let r = n.step(Input::Sync {
        from: 3,
        point: make(1, 1),
    });
    assert!(r.send.is_empty(), "{:?}", r.send);
}

fn sync_for(peer_last: i64) -> Vec<Msg> {
    sync_from(syncing_leader(), peer_last)
}

fn sync_from(mut n: Node, peer_last: i64) -> Vec<Msg> {
    let mut r = Ready::default();
    n.sync_follower(2, peer_last, &mut r);
    r.send
        .into_iter()
        .map(|(to, m)| {
            assert_eq!(to, 2);
            m
        })
        .collect()
}

fn proposals(msgs: &[Msg]) -> Vec<i64> {
    msgs.iter()
        .filter_map(|m| match m {
            Msg::Proposal(t) => Some(t.zxid),
            _ => None,
        })
        .collect()
}

#[test]
fn sync_sends_diff_trunc_or_snap_as_zookeeper_chooses() {
    // In our history: DIFF with what follows it.
    let m = sync_for(make(1, 3));
    assert_eq!(m[0], Msg::Diff);
    assert_eq!(
        proposals(&m),
        [make(1, 4), make(1, 5), make(2, 1), make(2, 2)]
    );
    assert_eq!(m.last(), Some(&Msg::NewLeader { epoch: 3 }));
    // Up to date: an empty DIFF.
    let m = sync_for(make(2, 2));
    assert_eq!((m[0].clone(), proposals(&m).len()), (Msg::Diff, 0));
    // Ahead of us in our last epoch: TRUNC to our last.
    let m = sync_for(make(2, 9));
    assert_eq!(m[0], Msg::Trunc { to: make(2, 2) });
    assert!(proposals(&m).is_empty());
    // Ahead of us in an epoch we never had: a TRUNC would cross an epoch
    // boundary (ZooKeeper never sends one): SNAP.
    let m = sync_for(make(3, 1));
    assert!(matches!(&m[0], Msg::Snap { .. }), "{m:?}");
    // Diverged (a txn of epoch 1 we never had): TRUNC to our last zxid
    // before it, then everything after.
    let m = sync_for(make(1, 7));
    assert_eq!(m[0], Msg::Trunc { to: make(1, 5) });
    assert_eq!(proposals(&m), [make(2, 1), make(2, 2)]);
    // Empty, with the whole history in the log: DIFF with all of it.
    let m = sync_for(0);
    assert_eq!((m[0].clone(), proposals(&m).len()), (Msg::Diff, 7));
    // A history that starts after 1:2 (older txns only in a snapshot): a
    // follower at 1:2 still gets a DIFF; an empty one, or one that
    // ends before it, a SNAP.
    let later = |n: Node| {
        let mut n = n;
        n.history.drain(..2);
        n.with_history_base(make(1, 2))
    };
    let m = sync_from(later(syncing_leader()), make(1, 2));
    assert_eq!((m[0].clone(), proposals(&m).len()), (Msg::Diff, 5));
    let m = sync_from(later(syncing_leader()), 0);
    assert!(matches!(&m[0], Msg::Snap { history } if history.len() == 5));
    let m = sync_from(later(syncing_leader()), make(1, 1));
    assert!(matches!(&m[0], Msg::Snap { .. }), "{m:?}");
    // Every history txn also gets its COMMIT before NEWLEADER.
    let m = sync_for(make(1, 3));
    let commits = m.iter().filter(|m| matches!(m, Msg::Commit(_))).count();
    assert_eq!(commits, 4);
}

#[test]
fn a_follower_acks_newleader_only_with_its_history_durable_and_current_epoch_written() {
    let mut f = follower_of_1(vec![txn(make(1, 1))], FollowerPhase::Connecting);
    let from_leader = |f: &mut Node, msg| f.step(Input::Receive { from: 1, msg });
    let r = from_leader(
        &mut f,
        Msg::LeaderInfo {
            epoch: 2,
            ringkeeper: true,
        },
    );
    assert_eq!(r.persist_accepted_epoch, Some(2));
    assert!(
        r.send.is_empty(),
        "no ACKEPOCH before acceptedEpoch is durable"
    );
    let r = f.step(Input::AcceptedEpochDurable(2));
    assert_eq!(
        r.send,
        [(
            1,
            Msg::AckEpoch {
                last_zxid: make(1, 1),
                current_epoch: Some(1)
            }
        )]
    );
    from_leader(&mut f, Msg::Diff);
    let r = from_leader(&mut f, Msg::Proposal(txn(make(1, 2))));
    assert_eq!(r.append, [txn(make(1, 2))]);
    from_leader(&mut f, Msg::Commit(make(1, 2)));
    let r = from_leader(&mut f, Msg::NewLeader { epoch: 2 });
    assert!(r.sync, "the synced history must be made durable");
    assert_eq!(r.persist_current_epoch, None, "not before it is durable");
    assert!(r.send.is_empty());
    let r = f.step(Input::Durable(make(1, 2)));
    assert_eq!(r.persist_current_epoch, Some(2));
    assert!(r.send.is_empty(), "no ack before currentEpoch is written");
    let r = f.step(Input::CurrentEpochDurable(2));
    assert_eq!(r.send, [(1, Msg::Ack(make(2, 0)))]);
    assert_eq!(f.committed(), 0, "nothing committed before UPTODATE");
    let r = from_leader(&mut f, Msg::UpToDate);
    assert_eq!(r.commit_to, Some(make(1, 2)));
    // A proposal: acked once durable, not before.
    let r = from_leader(&mut f, Msg::Proposal(txn(make(2, 1))));
    assert!(r.send.is_empty());
    let r = f.step(Input::Durable(make(2, 1)));
    assert_eq!(r.send, [(1, Msg::Ack(make(2, 1)))]);
}

#[test]
fn a_gap_or_a_different_txn_ends_following() {
    let mut f = follower_of_1(vec![txn(make(1, 1))], FollowerPhase::Broadcasting(1));
    let r = f.step(Input::Receive {
        from: 1,
        msg: Msg::Proposal(txn(make(1, 1))),
    });
    assert!(r.role.is_none(), "a duplicate is ignored");
    let r = f.step(Input::Receive {
        from: 1,
        msg: Msg::Proposal(txn(make(1, 3))),
    });
    assert_eq!(r.role, Some(Role::Looking), "a gap (ZOOKEEPER-4925)");
    let mut f = follower_of_1(vec![txn(make(1, 1))], FollowerPhase::Broadcasting(1));
    let other = Txn {
        zxid: make(1, 1),
        data: vec![9],
    };
    let r = f.step(Input::Receive {
        from: 1,
        msg: Msg::Proposal(other),
    });
    assert_eq!(
        r.role,
        Some(Role::Looking),
        "another txn under a logged zxid"
    );
}

/// A DIFF bigger than a third of the tree's snapshot (and than the floor)
/// goes as a SNAP, as ZooKeeper's snapshotSizeFactor chooses; the SNAP
/// carries only the history after the runner's committed tree.
#[test]
fn a_diff_much_bigger_than_the_tree_goes_as_a_snap() {
    let big = |mut n: Node| {
        for t in &mut n.history {
            t.data = vec![7; 2 << 20];
        }
        n
    };
    // 4 txns of 2 MiB behind, a 1 MiB tree: SNAP.
    let mut n = big(syncing_leader());
    n.set_snapshot_bytes(1 << 20);
    n.set_snap_floor(make(1, 5));
    let m = sync_from(n, make(1, 3));
    let Msg::Snap { history } = &m[0] else {
        panic!("{m:?}")
    };
    assert_eq!(
        history.iter().map(|t| t.zxid).collect::<Vec<_>>(),
        [make(2, 1), make(2, 2)]
    );
    // The same DIFF against a tree of 100 MiB: DIFF.
    let mut n = big(syncing_leader());
    n.set_snapshot_bytes(100 << 20);
    assert_eq!(sync_from(n, make(1, 3))[0], Msg::Diff);
    // A small DIFF (under the floor) stays one whatever the tree.
    let mut n = syncing_leader();
    n.set_snapshot_bytes(1);
    assert_eq!(sync_from(n, make(1, 3))[0], Msg::Diff);
}

/// The history in memory stays bounded: past twice its limit, committed
/// txns go from its front down to the limit (never uncommitted ones), and
/// its base moves up to the last one dropped.
#[test]
fn the_history_is_trimmed_to_its_bound_of_committed_txns() {
    let mib = |c: u32| Txn {
        zxid: make(1, c),
        data: vec![0; 1 << 20],
    };
    let history: Vec<Txn> = (1..=200).map(mib).collect();
    let mut n = node(1, &[1, 2, 3], 1, history.clone());
    n.committed = make(1, 200);
    n.trim_history();
    assert_eq!(n.history.len(), 64);
    assert_eq!(n.history_base, make(1, 136));
    assert_eq!(n.log_last(), make(1, 200));
    // Only committed txns go.
    let mut n = node(1, &[1, 2, 3], 1, history);
    n.committed = make(1, 100);
    n.trim_history();
    assert_eq!(n.history.first().map(|t| t.zxid), Some(make(1, 101)));
    assert_eq!(n.history_base, make(1, 100));
    // Under twice the bound nothing goes.
    let mut n = node(1, &[1, 2, 3], 1, (1..=100).map(mib).collect());
    n.committed = make(1, 100);
    n.trim_history();
    assert_eq!((n.history.len(), n.history_base), (100, 0));
}

/// Server 2 of three at epoch 1 with `history`, following 1 (a Java
/// leader, as far as it knows) in `phase`.
fn follower_of_1(history: Vec<Txn>, phase: FollowerPhase) -> Node {
    let mut f = node(2, &[1, 2, 3], 1, history);
    f.role = RoleState::Following(Follower {
        leader: 1,
        phase,
        silent: 0,
        sync_committed: 0,
        acked: 0,
        leader_is_ringkeeper: false,
    });
    f
}

fn epochs(accepted: u32, current: u32) -> Epochs {
    Epochs { accepted, current }
}

fn history(epoch: u32, counters: std::ops::RangeInclusive<u32>) -> Vec<Txn> {
    counters.map(|c| txn(make(epoch, c))).collect()
}

/// Issue 26, defect 1: A's disk was set aside (currentEpoch 6 kept, empty
/// log); B holds 5:1..=100 at epoch 5; C, down at first, holds those and
/// 6:1..=100. A and B alone must not form an epoch (A would lead with
/// nothing and truncate B); once C is back, C leads and A is synced.
#[test]
fn a_member_that_lost_its_disk_never_leads_nor_counts_until_synced() {
    let voters = [1, 2, 3];
    let a = Node::new(
        1,
        voters.into_iter().collect(),
        TIMINGS,
        epochs(6, 6),
        vec![],
    )
    .with_disk_lost();
    let b_history = history(5, 1..=100);
    let b = Node::new(
        2,
        voters.into_iter().collect(),
        TIMINGS,
        epochs(5, 5),
        b_history.clone(),
    );
    let mut c = Cluster::new(vec![a, b]);
    c.settle(300);
    assert_eq!(c.leader(), None, "A and B must not establish an epoch");
    assert!(
        !c.sent
            .iter()
            .any(|(_, _, m)| matches!(m, Msg::Trunc { .. })),
        "nobody is truncated"
    );
    assert_eq!(c.nodes[&2].history(), &b_history[..]);
    assert!(c.nodes[&1].awaiting_resync());
    let mut c_history = b_history.clone();
    c_history.extend(history(6, 1..=100));
    c.add(Node::new(
        3,
        voters.into_iter().collect(),
        TIMINGS,
        epochs(6, 6),
        c_history.clone(),
    ));
    c.settle(300);
    assert_eq!(c.leader(), Some(3));
    for n in c.nodes.values() {
        assert_eq!(n.history(), &c_history[..], "server {}", n.myid());
        assert!(!n.awaiting_resync(), "server {}", n.myid());
    }
}

/// Two members that lost their disks and one healthy member: unavailable,
/// and nobody is truncated.
#[test]
fn two_lost_disks_of_three_leave_the_ensemble_unavailable() {
    let voters: BTreeSet<Sid> = [1, 2, 3].into_iter().collect();
    let lost = |s| Node::new(s, voters.clone(), TIMINGS, epochs(4, 4), vec![]).with_disk_lost();
    let h = history(3, 1..=10);
    let mut c = Cluster::new(vec![
        lost(1),
        lost(2),
        Node::new(3, voters.clone(), TIMINGS, epochs(3, 3), h.clone()),
    ]);
    c.settle(400);
    assert_eq!(c.leader(), None);
    assert!(!c
        .sent
        .iter()
        .any(|(_, _, m)| matches!(m, Msg::Trunc { .. })));
    assert_eq!(c.nodes[&3].history(), &h[..]);
}

/// Defect 3: a follower whose history starts after 1:9 (a SNAP from a
/// leader that never established its epoch) is sent TRUNC 1:8 by a leader
/// that never had 1:9: it must not keep 1:9.
#[test]
fn a_trunc_below_the_snapshot_base_does_not_keep_the_snapshot() {
    let voters: BTreeSet<Sid> = [1, 2, 3].into_iter().collect();
    let h = history(1, 1..=8);
    let leader = |s| Node::new(s, voters.clone(), TIMINGS, epochs(2, 2), h.clone());
    let follower =
        Node::new(2, voters.clone(), TIMINGS, epochs(1, 1), vec![]).with_history_base(make(1, 9));
    let mut c = Cluster::new(vec![leader(1), follower, leader(3)]);
    c.settle(300);
    assert!(c.leader().is_some());
    for n in c.nodes.values() {
        assert_eq!(n.log_last(), make(1, 8), "server {}", n.myid());
        assert_eq!(n.history(), &h[..], "server {}", n.myid());
    }
}

/// Three replicas holding 1:1..=2 that established epoch 2; its leader.
fn established_three() -> (Cluster, Sid) {
    established_three_with_java(&[])
}

/// As `established_three`, the replicas in `java` speaking as Java
/// servers (from their first FOLLOWERINFO on).
fn established_three_with_java(java: &[Sid]) -> (Cluster, Sid) {
    let voters = [1, 2, 3];
    let mut c = Cluster {
        nodes: voters
            .iter()
            .map(|s| (*s, node(*s, &voters, 1, history(1, 1..=2))))
            .collect(),
        queue: Default::default(),
        sent: Vec::new(),
        java: java.iter().copied().collect(),
    };
    for s in voters {
        c.step(s, Input::Start);
    }
    c.settle(30);
    let l = c.leader().expect("a leader");
    (c, l)
}

/// Defect 10(a): one COMMIT per proposal, in order, to a Java follower;
/// a ringkeeper follower gets the point at once.
#[test]
fn the_leader_commits_each_proposal_in_order() {
    let voters = [1, 2, 3];
    // Server 1 speaks as Java; 3 (highest sid) leads.
    let (mut c, l) = established_three_with_java(&[1]);
    assert_eq!(l, 3);
    // Three proposals before any ack comes back: one quorum point covers
    // them all.
    for k in 0..3u8 {
        c.step(l, Input::Propose(vec![k]));
    }
    c.sent.clear();
    // The followers' acks of the first two are lost in coalescing (a
    // follower acks what is durable, which covers several): the third's
    // ack moves the commit point over all three at once.
    while let Some((from, to, msg)) = c.queue.pop_front() {
        if matches!(msg, Msg::Ack(z) if z == make(2, 1) || z == make(2, 2)) {
            continue;
        }
        c.step(to, Input::Receive { from, msg });
    }
    for f in voters.iter().filter(|s| **s != l) {
        let commits: Vec<i64> = c
            .sent
            .iter()
            .filter(|(from, to, _)| *from == l && to == f)
            .filter_map(|(_, _, m)| match m {
                Msg::Commit(z) => Some(*z),
                _ => None,
            })
            .collect();
        let expected = if *f == 1 {
            vec![make(2, 1), make(2, 2), make(2, 3)]
        } else {
            vec![make(2, 3)]
        };
        assert_eq!(commits, expected, "to {f}");
    }
}

/// Drives follower 2 of leader 1 (epoch 2) through discovery to NEWLEADER.
fn follower_at_newleader(history: Vec<Txn>) -> Node {
    let mut f = follower_of_1(history, FollowerPhase::Connecting);
    f.step(Input::Receive {
        from: 1,
        msg: Msg::LeaderInfo {
            epoch: 2,
            ringkeeper: false,
        },
    });
    f.step(Input::AcceptedEpochDurable(2));
    f.step(Input::Receive {
        from: 1,
        msg: Msg::Diff,
    });
    f
}

/// Defect 4: proposals keep coming after NEWLEADER and every sync ends
/// one behind the log's end: the follower must still write currentEpoch
/// (and ack) once what it had at NEWLEADER is durable.
#[test]
fn a_joiner_acks_newleader_under_steady_proposals() {
    let mut f = follower_at_newleader(vec![txn(make(1, 1))]);
    // The DIFF's proposal, not yet durable at NEWLEADER.
    f.step(Input::Receive {
        from: 1,
        msg: Msg::Proposal(txn(make(1, 2))),
    });
    let r = f.step(Input::Receive {
        from: 1,
        msg: Msg::NewLeader { epoch: 2 },
    });
    let mut persisted = r.persist_current_epoch;
    let mut end = make(1, 2);
    for c in 1..=1000u32 {
        if persisted.is_some() {
            break;
        }
        // A sync covering what was appended before the next proposal.
        let durable_through = end;
        end = make(2, c);
        f.step(Input::Receive {
            from: 1,
            msg: Msg::Proposal(txn(end)),
        });
        persisted = f
            .step(Input::Durable(durable_through))
            .persist_current_epoch;
    }
    assert_eq!(persisted, Some(2), "currentEpoch is written and acked");
}

/// A Java follower repeats its NEWLEADER ack after UPTODATE: no second
/// UPTODATE.
#[test]
fn a_repeated_newleader_ack_gets_no_second_uptodate() {
    let voters = [1, 2, 3];
    let (mut c, l) = established_three();
    let f = voters.into_iter().find(|s| *s != l).unwrap();
    c.sent.clear();
    c.step(
        l,
        Input::Receive {
            from: f,
            msg: Msg::Ack(make(2, 0)),
        },
    );
    assert!(
        !c.sent.iter().any(|(_, _, m)| *m == Msg::UpToDate),
        "{:?}",
        c.sent
    );
}

/// Defect 6: at the end of an epoch's counter the leader steps down and
/// the ensemble establishes the next epoch.
#[test]
fn an_ended_epoch_leads_to_the_next() {
    let (mut c, l) = established_three();
    c.step(l, Input::Propose(vec![1]));
    c.settle(5);
    c.step(l, Input::EndEpoch);
    assert_eq!(c.nodes[&l].role(), Role::Looking);
    c.settle(100);
    let l = c.leader().expect("a new leader");
    assert_eq!(c.nodes[&l].epochs().current, 3);
    c.step(l, Input::Propose(vec![2]));
    c.settle(5);
    for n in c.nodes.values() {
        assert_eq!(n.committed(), make(3, 1), "server {}", n.myid());
    }
}

/// A follower acks every proposal its sync made durable, one ACK each (a
/// Java leader counts acks per proposal), and answers PINGs only once
/// synced (a Java leader waiting for the NEWLEADER ack drops a learner
/// that sends a PING instead).
#[test]
fn a_follower_acks_each_proposal_and_pings_only_when_synced() {
    let mut f = follower_at_newleader(vec![txn(make(1, 1))]);
    let from_leader = |f: &mut Node, msg| f.step(Input::Receive { from: 1, msg });
    assert!(from_leader(&mut f, Msg::Ping).send.is_empty(), "syncing");
    from_leader(&mut f, Msg::NewLeader { epoch: 2 });
    f.step(Input::CurrentEpochDurable(2));
    assert!(
        from_leader(&mut f, Msg::Ping).send.is_empty(),
        "not yet UPTODATE"
    );
    from_leader(&mut f, Msg::UpToDate);
    assert_eq!(from_leader(&mut f, Msg::Ping).send, [(1, Msg::Ping)]);
    for c in 1..=3 {
        from_leader(&mut f, Msg::Proposal(txn(make(2, c))));
    }
    let r = f.step(Input::Durable(make(2, 3)));
    assert_eq!(
        r.send,
        [
            (1, Msg::Ack(make(2, 1))),
            (1, Msg::Ack(make(2, 2))),
            (1, Msg::Ack(make(2, 3)))
        ]
    );
}

/// Under a ringkeeper leader a follower acks its durable point once.
#[test]
fn a_follower_of_a_ringkeeper_leader_acks_a_run_of_proposals_once() {
    let (mut c, l) = established_three();
    for k in 0..3u8 {
        c.step(l, Input::Propose(vec![k]));
    }
    let f = [1, 2, 3].into_iter().find(|s| *s != l).unwrap();
    // Deliver the three proposals to f, then make them durable at once.
    let mut to_f = Vec::new();
    c.queue.retain(|(from, to, m)| {
        let mine = *to == f && matches!(m, Msg::Proposal(_));
        if mine {
            to_f.push((*from, m.clone()));
        }
        !mine
    });
    let node = c.nodes.get_mut(&f).unwrap();
    for (from, msg) in to_f {
        node.step(Input::Receive { from, msg });
    }
    let r = node.step(Input::Durable(make(2, 3)));
    assert_eq!(r.send, [(l, Msg::Ack(make(2, 3)))]);
}

// ---- a standalone server: the lone voter --------------------------------

fn lone(accepted: u32, current: u32, history: Vec<Txn>) -> Node {
    Node::new(
        1,
        [1].into(),
        TIMINGS,
        Epochs { accepted, current },
        history,
    )
}

/// Proposes `n` txns at a broadcasting lone voter: the zxids it minted.
fn propose_n(n: &mut Node, count: usize) -> Vec<i64> {
    (0..count)
        .flat_map(|_| n.step(Input::Propose(Vec::new())).append)
        .map(|t| t.zxid)
        .collect()
}

#[test]
fn a_standalone_server_resumes_its_epoch_and_numbers_on() {
    // Apache ZooKeeper's standalone server numbers txns on across restarts,
    // in the epoch its log is in, even with acceptedEpoch ahead.
    let mut n = lone(3, 2, vec![txn(make(2, 9)), txn(make(2, 10))]);
    let r = n.resume_alone();
    assert_eq!(r.role, Some(Role::Broadcasting { epoch: 2 }));
    assert_eq!(r.lead.map(|m| m.epoch()), Some(2));
    assert_eq!(
        r.commit_to,
        Some(make(2, 10)),
        "its durable log is committed"
    );
    assert!(r.persist_accepted_epoch.is_none() && r.persist_current_epoch.is_none());
    let mut mint = r.lead.unwrap();
    assert_eq!(propose_n(&mut n, 2), [make(2, 11), make(2, 12)]);
    assert_eq!(mint.take(), Some(make(2, 11)), "the core's mint agrees");
    // A fresh server starts at 0x1.
    let mut n = lone(0, 0, Vec::new());
    n.resume_alone();
    assert_eq!(propose_n(&mut n, 1), [1]);
}

#[test]
fn a_lone_voter_commits_what_its_log_made_durable() {
    let mut n = lone(0, 0, Vec::new());
    n.resume_alone();
    let z = propose_n(&mut n, 5);
    assert_eq!(z, [1, 2, 3, 4, 5]);
    assert_eq!(n.step(Input::Durable(3)).commit_to, Some(3));
    assert_eq!(n.step(Input::Durable(3)).commit_to, None, "nothing new");
    assert_eq!(n.step(Input::Durable(5)).commit_to, Some(5));
    assert_eq!(n.committed(), 5);
    // Ticks never make a lone leader give up.
    for _ in 0..1000 {
        assert!(n.step(Input::Tick).role.is_none());
    }
}

#[test]
fn a_lone_voter_ends_an_epoch_into_the_next_one_at_once() {
    let mut n = lone(4, 4, vec![txn(make(4, 1))]);
    n.resume_alone();
    propose_n(&mut n, 2);
    n.step(Input::Durable(make(4, 3)));
    // The runner ends the epoch once everything is committed: no finalize
    // wait, its own quorum at each step, epoch files in ZooKeeper's order.
    let r = n.step(Input::EndEpoch);
    assert_eq!(r.persist_accepted_epoch, Some(5));
    assert!(r.send.is_empty());
    let r = n.step(Input::AcceptedEpochDurable(5));
    assert_eq!(r.persist_current_epoch, Some(5));
    assert_eq!(n.epochs().current, 4, "current only after accepted");
    let r = n.step(Input::CurrentEpochDurable(5));
    assert_eq!(r.role, Some(Role::Broadcasting { epoch: 5 }));
    let mut mint = r.lead.expect("a mint for the new epoch");
    assert_eq!(mint.take(), Some(make(5, 1)));
    assert_eq!(propose_n(&mut n, 1), [make(5, 1)]);
    assert_eq!(
        n.step(Input::Durable(make(5, 1))).commit_to,
        Some(make(5, 1))
    );
}

#[test]
fn a_lone_voter_keeps_no_committed_history_in_memory() {
    let mut n = lone(0, 0, Vec::new());
    n.set_history_bytes_min(0, 8);
    n.resume_alone();
    for _ in 0..10 {
        propose_n(&mut n, 8);
        let last = n.log_last();
        n.step(Input::Durable(last));
    }
    assert!(
        n.history().len() <= 8,
        "{} txns kept by a lone voter",
        n.history().len()
    );
    assert_eq!(n.log_last(), 80);
}
