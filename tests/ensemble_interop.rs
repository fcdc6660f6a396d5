//! Mixed ensembles of ringkeeper and Debian's Apache ZooKeeper 3.8 on the
//! same zoo.cfg: one peer protocol, so either can lead the other. The
//! happy path: writes through every member (followers forward them), the
//! leader killed once under a writer, and every survivor holding every
//! acknowledged write.
//!
//! FastLeaderElection picks the highest (epoch, zxid, sid): with empty data
//! dirs the member with the highest id leads, so the order of flavors
//! decides who leads first and who after the kill.

mod common;

use std::collections::BTreeSet;
use std::thread;
use std::time::Duration;

use common::cluster::Cluster;
use common::ensemble_client::*;
use common::raw_fallible::Conn;
use common::Flavor::{Ringkeeper as Rk, ZooKeeper as Zk};
use common::{Flavor, ZK_JAR};

fn require_zookeeper() {
    assert!(
        std::path::Path::new(ZK_JAR).exists(),
        "Apache ZooKeeper is not installed: apt-get install -y zookeeper"
    );
}

/// Writes `count` children under `parent` through every member in turn.
fn write_through_every_member(c: &Cluster, parent: &str, count: usize) -> BTreeSet<String> {
    let mut acked = BTreeSet::new();
    for i in 0..c.size() {
        let mut conn = session_on(c, i);
        for k in 0..count {
            let name = format!("s{}-{k:03}", i + 1);
            let err = create(&mut conn, &format!("{parent}/{name}"), b"v").unwrap();
            assert_eq!(
                err,
                0,
                "create via server {} ({:?})\n{}",
                i + 1,
                c.members[i].flavor,
                c.report()
            );
            acked.insert(name);
        }
    }
    acked
}

/// A session made on one follower reconnects on the other and back (each
/// asks the leader: REVALIDATE, across flavors) and writes through it.
fn move_a_session_between_followers(c: &Cluster, leader: usize) {
    let followers: Vec<usize> = (0..c.size()).filter(|i| *i != leader).collect();
    let (a, b) = (followers[0], followers[1]);
    let mut conn = session_on(c, a);
    assert_eq!(create(&mut conn, "/mix-moved", b"").unwrap(), 0);
    // There and back: each follower asks the leader once.
    for (k, to) in [b, a].into_iter().enumerate() {
        let moved = Conn::connect_to(
            c.members[to].client,
            conn.timeout,
            conn.session_id,
            &conn.passwd.clone(),
            0,
        )
        .expect("reconnect")
        .unwrap_or_else(|| {
            panic!(
                "the session was refused on server {}\n{}",
                to + 1,
                c.report()
            )
        });
        assert_eq!(moved.session_id, conn.session_id);
        conn = moved;
        let err = create(&mut conn, &format!("/mix-moved/{k}"), b"").unwrap();
        assert_eq!(
            err,
            0,
            "a write after the move to {}\n{}",
            to + 1,
            c.report()
        );
    }
}

/// Starts `flavors`, checks the expected member leads, replicates writes
/// made on every member, kills the leader under a writer, checks the
/// expected survivor leads and that no acknowledged write is lost.
fn lead_and_fail_over(flavors: &[Flavor], first_leader: usize, second_leader: usize) {
    require_zookeeper();
    let mut c = Cluster::start_mixed(flavors);
    let leader = c.wait_for_leader(ELECTION_TIMEOUT);
    assert_eq!(leader, first_leader, "first leader\n{}", c.report());
    make_parent(&c, "/mix");
    let mut acked = write_through_every_member(&c, "/mix", 30);
    check_replicas(&c, "/mix", &acked);
    move_a_session_between_followers(&c, leader);

    let w = Writer::start(addrs(&c), "/mix", 100_000);
    w.wait_for(0, 100, &c);
    c.kill(leader);
    let at_kill = w.acked_count();
    let next = c.wait_for_leader(ELECTION_TIMEOUT);
    assert_eq!(next, second_leader, "leader after the kill\n{}", c.report());
    w.wait_for(at_kill, 100, &c);
    acked.extend(w.finish());
    check_replicas(&c, "/mix", &acked);

    // The old leader rejoins as a follower and catches up.
    c.restart(leader);
    thread::sleep(Duration::from_millis(200));
    assert_eq!(c.wait_for_leader(ELECTION_TIMEOUT), second_leader);
    check_replicas(&c, "/mix", &acked);
}

/// Two Java servers and a ringkeeper follower: it syncs from the Java
/// leader, serves reads and forwards writes; after the Java leader dies,
/// ringkeeper follows the other Java server.
#[test]
fn ringkeeper_follows_a_java_leader() {
    lead_and_fail_over(&[Rk, Zk, Zk], 2, 1);
}

/// One Java server and two ringkeepers: the Java server follows a
/// ringkeeper leader, serving the same data and forwarding its clients'
/// writes; after that leader dies it follows the other ringkeeper.
#[test]
fn java_follows_a_ringkeeper_leader() {
    lead_and_fail_over(&[Zk, Rk, Rk], 2, 1);
}
