use super::*;

fn lone(accepted: u32, current: u32, last: i64) -> Replica {
    Replica::new(Membership::alone(1), Epochs { accepted, current }, last)
}

/// Runs a lone voter's start to leadership, checking each Ready.
fn lead(r: &mut Replica) -> u32 {
    let next = r.epochs().accepted + 1;
    let current = r.epochs().current;
    let ready = r.step(Input::Start).unwrap();
    assert_eq!(
        ready,
        Ready {
            persist_accepted_epoch: Some(next),
            ..Ready::default()
        }
    );
    assert_eq!(r.role(), Role::Discovering { epoch: next });
    let ready = r.step(Input::AcceptedEpochDurable(next)).unwrap();
    assert_eq!(
        ready,
        Ready {
            persist_current_epoch: Some(next),
            ..Ready::default()
        }
    );
    assert_eq!(r.epochs().accepted, next);
    assert_eq!(r.epochs().current, current, "current only after accepted");
    let ready = r.step(Input::CurrentEpochDurable(next)).unwrap();
    assert_eq!(
        ready,
        Ready {
            lead: Some(next),
            ..Ready::default()
        }
    );
    assert_eq!(r.role(), Role::Leading { epoch: next });
    next
}

#[test]
fn a_lone_voter_leads_the_epoch_after_its_accepted_one() {
    let mut r = lone(0, 0, 0);
    assert_eq!(lead(&mut r), 1);
    // A restart after a failed discovery (accepted 5, current 4).
    let mut r = lone(5, 4, zxid::make(4, 77));
    assert_eq!(lead(&mut r), 6);
    assert_eq!(
        r.committed(),
        zxid::make(4, 77),
        "the old history is committed"
    );
}

#[test]
fn a_standalone_server_resumes_its_epoch() {
    let mut r = lone(3, 2, zxid::make(2, 10));
    let ready = r.step(Input::Resume).unwrap();
    assert_eq!(
        ready,
        Ready {
            lead: Some(2),
            ..Ready::default()
        },
        "no epoch files written"
    );
    assert_eq!(r.role(), Role::Leading { epoch: 2 });
    r.step(Input::Proposed {
        first: zxid::make(2, 11),
        last: zxid::make(2, 11),
    })
    .unwrap();
    let ready = r.step(Input::Durable(zxid::make(2, 11))).unwrap();
    assert_eq!(ready.commit_to, Some(zxid::make(2, 11)));
    // A fresh server: epoch 0, zxids from 1, as ZooKeeper's standalone.
    let mut r = lone(0, 0, 0);
    assert_eq!(r.step(Input::Resume).unwrap().lead, Some(0));
    r.step(Input::Proposed { first: 1, last: 4 }).unwrap();
    assert_eq!(r.step(Input::Durable(4)).unwrap().commit_to, Some(4));
}

#[test]
fn a_lone_voter_commits_what_its_log_made_durable() {
    let mut r = lone(2, 2, zxid::make(2, 10));
    let e = lead(&mut r);
    r.step(Input::Proposed {
        first: zxid::make(e, 1),
        last: zxid::make(e, 5),
    })
    .unwrap();
    r.step(Input::Proposed {
        first: zxid::make(e, 6),
        last: zxid::make(e, 6),
    })
    .unwrap();
    assert_eq!(r.committed(), zxid::make(2, 10), "nothing durable yet");
    let ready = r.step(Input::Durable(zxid::make(e, 5))).unwrap();
    assert_eq!(ready.commit_to, Some(zxid::make(e, 5)));
    let ready = r.step(Input::Durable(zxid::make(e, 5))).unwrap();
    assert_eq!(ready.commit_to, None, "no news");
    let ready = r.step(Input::Durable(zxid::make(e, 6))).unwrap();
    assert_eq!(ready.commit_to, Some(zxid::make(e, 6)));
}

#[test]
#[should_panic(expected = "does not follow")]
fn a_gap_in_proposals_is_a_bug() {
    let mut r = lone(0, 0, 0);
    let e = lead(&mut r);
    r.step(Input::Proposed {
        first: zxid::make(e, 2),
        last: zxid::make(e, 2),
    })
    .unwrap();
}

#[test]
fn a_new_epoch_once_everything_is_committed() {
    let mut r = lone(0, 0, 0);
    let e = lead(&mut r);
    let last = zxid::make(e, 3);
    r.step(Input::Proposed {
        first: zxid::make(e, 1),
        last,
    })
    .unwrap();
    r.step(Input::Durable(last)).unwrap();
    let ready = r.step(Input::NewEpoch).unwrap();
    assert_eq!(ready.persist_accepted_epoch, Some(e + 1));
    r.step(Input::AcceptedEpochDurable(e + 1)).unwrap();
    let ready = r.step(Input::CurrentEpochDurable(e + 1)).unwrap();
    assert_eq!(ready.lead, Some(e + 1));
    // The next epoch's first txn follows the last one's last.
    r.step(Input::Proposed {
        first: zxid::make(e + 1, 1),
        last: zxid::make(e + 1, 1),
    })
    .unwrap();
    assert_eq!(r.committed(), last);
}

/// A leader of `voters` in epoch 3 with txns 1..=10 proposed (built
/// directly: elections with peers come later).
fn leader_of(voters: &[Sid]) -> Replica {
    let members = Membership::new(1, voters.iter().copied().collect()).unwrap();
    let mut r = Replica::new(
        members,
        Epochs {
            accepted: 3,
            current: 3,
        },
        zxid::make(3, 0),
    );
    r.phase = Phase::Leading(Leader {
        epoch: 3,
        last_proposed: zxid::make(3, 0),
        acked: [(1, zxid::make(3, 0))].into(),
        committed: zxid::make(3, 0),
    });
    r.step(Input::Proposed {
        first: zxid::make(3, 1),
        last: zxid::make(3, 10),
    })
    .unwrap();
    r
}

#[test]
fn three_voters_commit_what_two_have() {
    let z = |c| zxid::make(3, c);
    let mut r = leader_of(&[1, 2, 3]);
    assert_eq!(r.step(Input::Durable(z(10))).unwrap().commit_to, None);
    assert_eq!(
        r.step(Input::Ack {
            from: 2,
            zxid: z(4)
        })
        .unwrap()
        .commit_to,
        Some(z(4))
    );
    assert_eq!(
        r.step(Input::Ack {
            from: 3,
            zxid: z(8)
        })
        .unwrap()
        .commit_to,
        Some(z(8))
    );
    // An old ack changes nothing; the NEWLEADER ack is ignored.
    assert_eq!(
        r.step(Input::Ack {
            from: 3,
            zxid: z(2)
        })
        .unwrap(),
        Ready::default()
    );
    assert_eq!(
        r.step(Input::Ack {
            from: 2,
            zxid: z(0)
        })
        .unwrap(),
        Ready::default()
    );
    assert_eq!(r.committed(), z(8));
}

#[test]
fn five_voters_need_three() {
    let z = |c| zxid::make(3, c);
    let mut r = leader_of(&[1, 2, 3, 4, 5]);
    r.step(Input::Ack {
        from: 4,
        zxid: z(9),
    })
    .unwrap();
    r.step(Input::Ack {
        from: 5,
        zxid: z(9),
    })
    .unwrap();
    assert_eq!(r.committed(), z(0), "two of five");
    let ready = r.step(Input::Durable(z(6))).unwrap();
    assert_eq!(
        ready.commit_to,
        Some(z(6)),
        "the leader's own log is the third"
    );
}

#[test]
fn bad_acks_are_violations() {
    let z = |c| zxid::make(3, c);
    let mut r = leader_of(&[1, 2, 3]);
    let peer_of = |e: Result<Ready, Violation>| e.unwrap_err().peer;
    assert_eq!(
        peer_of(r.step(Input::Ack {
            from: 9,
            zxid: z(1)
        })),
        9
    );
    assert_eq!(
        peer_of(r.step(Input::Ack {
            from: 1,
            zxid: z(1)
        })),
        1
    );
    assert_eq!(
        peer_of(r.step(Input::Ack {
            from: 2,
            zxid: z(11)
        })),
        2
    );
    assert_eq!(
        peer_of(r.step(Input::Ack {
            from: 2,
            zxid: zxid::make(2, 5)
        })),
        2
    );
    assert_eq!(r.committed(), z(0));
}

#[test]
fn more_voters_wait_for_an_election() {
    let members = Membership::new(2, [1, 2, 3].into()).unwrap();
    let mut r = Replica::new(
        members,
        Epochs {
            accepted: 0,
            current: 0,
        },
        0,
    );
    assert_eq!(r.step(Input::Start).unwrap(), Ready::default());
    assert_eq!(r.role(), Role::Looking);
    assert!(Membership::new(4, [1, 2, 3].into()).is_err());
}
