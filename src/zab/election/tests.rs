use super::*;

const TIMING: Timing = Timing {
    finalize_wait_ticks: 5,
    min_not_timeout_ticks: 10,
    max_not_timeout_ticks: 40,
};

/// Servers 1..=n delivering every message at once, in send order.
struct Net {
    servers: BTreeMap<Sid, Election>,
    queue: std::collections::VecDeque<(Sid, Sid, Notification)>,
    decided: BTreeMap<Sid, Decision>,
}

impl Net {
    fn new(n: u64) -> Net {
        let voters: BTreeSet<Sid> = (1..=n).collect();
        Net {
            servers: voters
                .iter()
                .map(|s| (*s, Election::new(*s, voters.clone(), TIMING)))
                .collect(),
            queue: Default::default(),
            decided: BTreeMap::new(),
        }
    }

    fn take(&mut self, from: Sid, out: Out) {
        if let Some(d) = out.decided {
            self.decided.insert(from, d);
        }
        for (to, n) in out.send {
            self.queue.push_back((from, to, n));
        }
    }

    fn start(&mut self, sid: Sid, zxid: i64, epoch: u32) {
        let out = self.servers.get_mut(&sid).unwrap().start(zxid, epoch);
        self.take(sid, out);
    }

    /// Delivers until quiet, skipping messages to or from `down`.
    fn deliver(&mut self, down: &[Sid]) {
        while let Some((from, to, n)) = self.queue.pop_front() {
            if down.contains(&from) || down.contains(&to) {
                continue;
            }
            let out = self.servers.get_mut(&to).unwrap().receive(from, n);
            self.take(to, out);
        }
    }

    fn ticks(&mut self, k: u32, down: &[Sid]) {
        for _ in 0..k {
            let sids: Vec<Sid> = self.servers.keys().copied().collect();
            for s in sids {
                if !down.contains(&s) {
                    let out = self.servers.get_mut(&s).unwrap().tick();
                    self.take(s, out);
                }
            }
            self.deliver(down);
        }
    }

    fn leader_of(&self, sid: Sid) -> Option<Sid> {
        self.decided.get(&sid).map(|d| d.vote.leader)
    }
}

#[test]
fn vote_order_is_epoch_then_zxid_then_sid() {
    let v = |leader, zxid, peer_epoch| Vote {
        leader,
        zxid,
        peer_epoch,
    };
    assert!(v(1, 0, 2).beats(&v(3, 99, 1)));
    assert!(v(1, 7, 2).beats(&v(3, 6, 2)));
    assert!(v(3, 7, 2).beats(&v(1, 7, 2)));
    assert!(!v(3, 7, 2).beats(&v(3, 7, 2)));
}

#[test]
fn three_fresh_servers_elect_the_highest_sid_after_the_finalize_wait() {
    let mut net = Net::new(3);
    for s in 1..=3 {
        net.start(s, 0, 0);
    }
    net.deliver(&[]);
    assert!(
        net.decided.is_empty(),
        "nobody decides before the finalize wait"
    );
    net.ticks(TIMING.finalize_wait_ticks, &[]);
    for s in 1..=3 {
        assert_eq!(net.leader_of(s), Some(3), "server {s}");
    }
    assert_eq!(net.servers[&3].state(), PeerState::Leading);
    assert_eq!(net.servers[&1].state(), PeerState::Following);
}

#[test]
fn the_longest_log_wins_over_the_highest_sid() {
    let mut net = Net::new(3);
    net.start(1, 9, 1);
    net.start(2, 5, 1);
    net.start(3, 3 << 32, 0);
    net.deliver(&[]);
    net.ticks(TIMING.finalize_wait_ticks, &[]);
    assert!((1..=3).all(|s| net.leader_of(s) == Some(1)));
    assert_eq!(net.decided[&2].vote.zxid, 9);
}

#[test]
fn a_quorum_decides_without_the_best_server_if_it_is_down() {
    let mut net = Net::new(3);
    for s in 1..=3 {
        net.start(s, 0, 0);
    }
    net.deliver(&[3]);
    net.ticks(TIMING.finalize_wait_ticks, &[3]);
    assert_eq!(net.leader_of(1), Some(2));
    assert_eq!(net.leader_of(2), Some(2));
    assert_eq!(net.leader_of(3), None);
}

#[test]
fn a_better_vote_during_the_finalize_wait_reopens_it() {
    let mut e = Election::new(1, [1, 2, 3].into(), TIMING);
    e.start(0, 0);
    let n = |leader, round| Notification {
        state: PeerState::Looking,
        vote: Vote {
            leader,
            zxid: 0,
            peer_epoch: 0,
        },
        round,
    };
    // Server 2 votes for itself: 2 beats 1; with 2's vote ours is {1, 2}.
    let out = e.receive(2, n(2, 1));
    assert_eq!(out.send.len(), 2, "the adopted vote goes to both others");
    assert!(e.tick().decided.is_none());
    // Server 3's better vote in the wait: adopted, the wait starts over
    // once a quorum agrees on it.
    e.receive(3, n(3, 1));
    for _ in 0..TIMING.finalize_wait_ticks - 1 {
        assert!(e.tick().decided.is_none());
    }
    assert_eq!(e.tick().decided.map(|d| d.vote.leader), Some(3));
}

#[test]
fn a_restarted_server_joins_the_established_leader_at_once() {
    let mut net = Net::new(3);
    for s in 1..=3 {
        net.start(s, 0, 0);
    }
    net.deliver(&[]);
    net.ticks(TIMING.finalize_wait_ticks, &[]);
    assert_eq!(net.leader_of(1), Some(3));
    // Server 1 loses its leader (say) and looks again: its peers, out of
    // the election, answer with their state; it follows 3 without waiting.
    net.decided.remove(&1);
    net.start(1, 0, 0);
    net.deliver(&[]);
    assert_eq!(net.leader_of(1), Some(3));
    assert_eq!(net.servers[&1].state(), PeerState::Following);
}

#[test]
fn a_leader_must_say_so_before_a_joiner_follows_it() {
    let mut e = Election::new(1, [1, 2, 3, 4, 5].into(), TIMING);
    e.start(0, 0);
    let following_4 = Notification {
        state: PeerState::Following,
        vote: Vote {
            leader: 4,
            zxid: 0,
            peer_epoch: 0,
        },
        round: 7,
    };
    for s in [2, 3, 5] {
        assert!(
            e.receive(s, following_4).decided.is_none(),
            "4 has not said LEADING"
        );
    }
    let leading = Notification {
        state: PeerState::Leading,
        ..following_4
    };
    let d = e
        .receive(4, leading)
        .decided
        .expect("a quorum and the leader");
    assert_eq!(
        (d.vote.leader, d.round, d.state),
        (4, 7, PeerState::Following)
    );
    assert_eq!(e.round(), 7);
}

#[test]
fn silence_resends_with_backoff_up_to_the_cap() {
    let mut e = Election::new(1, [1, 2, 3].into(), TIMING);
    e.start(0, 0);
    let mut resent_at = Vec::new();
    for t in 1..=200 {
        if !e.tick().send.is_empty() {
            resent_at.push(t);
        }
    }
    assert_eq!(
        resent_at[..4],
        [10, 30, 70, 110],
        "10, then 20, 40, 40: {resent_at:?}"
    );
}

#[test]
fn a_lone_voter_decides_at_once() {
    let mut e = Election::new(7, [7].into(), TIMING);
    let out = e.start(5, 1);
    assert!(out.send.is_empty());
    let d = out.decided.expect("its own quorum, nobody to wait for");
    assert_eq!((d.state, d.vote.leader), (PeerState::Leading, 7));
}

#[test]
fn decided_servers_answer_lookers_with_their_vote_and_state() {
    let mut net = Net::new(3);
    for s in 1..=3 {
        net.start(s, 0, 0);
    }
    net.deliver(&[]);
    net.ticks(TIMING.finalize_wait_ticks, &[]);
    let e = net.servers.get_mut(&2).unwrap();
    e.update_vote_epoch(5);
    let out = e.receive(
        1,
        Notification {
            state: PeerState::Looking,
            vote: Vote {
                leader: 1,
                zxid: 0,
                peer_epoch: 0,
            },
            round: 9,
        },
    );
    assert_eq!(out.send.len(), 1);
    let (to, n) = out.send[0];
    assert_eq!(to, 1);
    assert_eq!(n.state, PeerState::Following);
    assert_eq!(n.vote.leader, 3);
    assert_eq!(n.vote.peer_epoch, 5, "ZOOKEEPER-1818: the synced epoch");
    assert_eq!(n.round, 1, "the round it decided in");
}

#[test]
fn non_voters_are_answered_and_never_counted() {
    let mut e = Election::new(1, [1, 2, 3].into(), TIMING);
    e.start(0, 0);
    let n = Notification {
        state: PeerState::Looking,
        vote: Vote {
            leader: 9,
            zxid: 1 << 40,
            peer_epoch: 9,
        },
        round: 1,
    };
    let out = e.receive(9, n);
    assert_eq!(out.send.len(), 1);
    let out = e.receive(2, n);
    assert_eq!(
        out.send.len(),
        1,
        "a vote for a non-voter is answered, not adopted"
    );
    assert_eq!(e.notification().vote.leader, 1);
}

#[test]
fn followers_of_different_rounds_count_together_for_a_joiner() {
    let mut e = Election::new(5, (1..=7).collect(), TIMING);
    e.start(0, 0);
    let vote = |zxid| Vote {
        leader: 7,
        zxid,
        peer_epoch: 2,
    };
    let n = |state, zxid, round| Notification {
        state,
        vote: vote(zxid),
        round,
    };
    assert!(e
        .receive(1, n(PeerState::Following, 10, 3))
        .decided
        .is_none());
    assert!(e
        .receive(2, n(PeerState::Following, 10, 3))
        .decided
        .is_none());
    assert!(e
        .receive(4, n(PeerState::Following, 12, 4))
        .decided
        .is_none());
    // The leader, in yet another round, makes four of seven.
    let d = e
        .receive(7, n(PeerState::Leading, 12, 4))
        .decided
        .expect("joined");
    assert_eq!(d.vote.leader, 7);
    // A different epoch does not count with the others.
    let mut e = Election::new(5, (1..=7).collect(), TIMING);
    e.start(0, 0);
    for s in [1, 2, 4] {
        e.receive(s, n(PeerState::Following, 10, 3));
    }
    let mut other_epoch = n(PeerState::Leading, 12, 4);
    other_epoch.vote.peer_epoch = 3;
    assert!(e.receive(7, other_epoch).decided.is_none());
}

/// Followers notice a lost leader one after the other: the first one's
/// notifications reach the second while it still follows (dropped here).
/// When the second starts looking in the same round with a worse vote, the
/// first answers it with the better one at once: both decide after the
/// finalize wait, not after a notification timeout.
#[test]
fn a_worse_vote_of_our_round_is_answered_with_ours() {
    let mut net = Net::new(3);
    net.start(3, 0, 0);
    net.deliver(&[1, 2]);
    net.start(1, 0, 0);
    net.deliver(&[2]);
    net.ticks(TIMING.finalize_wait_ticks + 1, &[2]);
    const { assert!(TIMING.finalize_wait_ticks + 1 < TIMING.min_not_timeout_ticks) };
    assert_eq!(net.leader_of(3), Some(3));
    assert_eq!(net.leader_of(1), Some(3));
}
