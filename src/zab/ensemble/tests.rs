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
}

impl Cluster {
    fn new(nodes: Vec<Node>) -> Cluster {
        let mut c = Cluster {
            nodes: nodes.into_iter().map(|n| (n.myid(), n)).collect(),
            queue: Default::default(),
        };
        let ids: Vec<Sid> = c.nodes.keys().copied().collect();
        for s in ids {
            c.step(s, Input::Start);
        }
        c
    }

    fn step(&mut self, s: Sid, input: Input) {
        let r = self.nodes.get_mut(&s).unwrap().step(input);
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
        for (to, m) in r.send {
            self.queue.push_back((s, to, m));
        }
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
        forwarding: BTreeSet::new(),
        newleader_acked: BTreeSet::new(),
        acked: BTreeMap::new(),
        last_proposed: make(2, 2),
        ticks: 0,
        heard: BTreeMap::new(),
    });
    n
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
    // Ahead of us: TRUNC to our last.
    let m = sync_for(make(2, 9));
    assert_eq!(m[0], Msg::Trunc { to: make(2, 2) });
    assert!(proposals(&m).is_empty());
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
    let mut f = node(2, &[1, 2, 3], 1, vec![txn(make(1, 1))]);
    f.role = RoleState::Following(Follower {
        leader: 1,
        phase: FollowerPhase::Connecting,
        silent: 0,
        sync_committed: 0,
        acked: 0,
    });
    let from_leader = |f: &mut Node, msg| f.step(Input::Receive { from: 1, msg });
    let r = from_leader(&mut f, Msg::LeaderInfo { epoch: 2 });
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
    let mut f = node(2, &[1, 2, 3], 1, vec![txn(make(1, 1))]);
    f.role = RoleState::Following(Follower {
        leader: 1,
        phase: FollowerPhase::Broadcasting(1),
        silent: 0,
        sync_committed: 0,
        acked: 0,
    });
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
    let mut f = node(2, &[1, 2, 3], 1, vec![txn(make(1, 1))]);
    f.role = RoleState::Following(Follower {
        leader: 1,
        phase: FollowerPhase::Broadcasting(1),
        silent: 0,
        sync_committed: 0,
        acked: 0,
    });
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
