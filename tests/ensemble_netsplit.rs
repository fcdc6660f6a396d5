//! Network partitions of a running ensemble, made with iptables: every
//! member runs in a cgroup (v2) of its own; a rule for each member marks
//! (conntrack) every connection its process dials to a peer port (quorum
//! or election) of a member on the other side, and every packet of a
//! marked connection is dropped, both ways. Every peer connection across
//! the cut is dialled by someone, so none survives; clients still reach
//! every member (their ports are not in the rules). Loopback connections
//! all come from 127.0.0.1, which is why the rules match the dialling
//! process rather than an address.
//!
//! The rules carry a comment naming this process and the cut; the guard
//! deletes exactly its rules on every exit path (panics included), and the
//! cluster its cgroups. Checked as the other ensemble tests are: every acknowledged
//! write on every member once healed, members identical. Runs against
//! Apache ZooKeeper too (RK_TEST_TARGET=zookeeper).
//!
//! Needs: root, iptables (Debian's package), cgroup v2 mounted.

mod common;

use std::collections::BTreeSet;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::cluster::{Cluster, SYNC_LIMIT, TICK_MS};
use common::ensemble_client::*;
use common::target_flavor;

static CUTS: AtomicUsize = AtomicUsize::new(0);

fn iptables(args: &[String]) -> Result<(), String> {
    let out = Command::new("iptables")
        .arg("-w")
        .args(args)
        .output()
        .map_err(|e| format!("iptables: {e} (apt-get install -y iptables)"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "iptables {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// A cut between `side` and the other members, undone when dropped.
struct Cut {
    /// Each rule's arguments after -I/-D OUTPUT.
    rules: Vec<Vec<String>>,
}

impl Cut {
    fn new(c: &Cluster, side: &[usize]) -> Cut {
        let n = CUTS.fetch_add(1, Ordering::Relaxed);
        let tag = format!("rktest-{}-{n}", std::process::id());
        let mark = format!(
            "{:#x}",
            0x5a00_0000u32 | ((std::process::id() & 0xffff) << 8) | (n as u32 & 0xff)
        );
        let rule = |words: &[&str]| -> Vec<String> {
            let mut v: Vec<String> = words.iter().map(|w| w.to_string()).collect();
            v.extend(["-m", "comment", "--comment", &tag].map(String::from));
            v
        };
        let mut cut = Cut { rules: Vec::new() };
        // Inserted at the top, so it ends up below the rules that mark.
        cut.insert(rule(&["-m", "connmark", "--mark", &mark, "-j", "DROP"]));
        let other: Vec<usize> = (0..c.size()).filter(|i| !side.contains(i)).collect();
        for (from, to) in [(side.to_vec(), other.clone()), (other, side.to_vec())] {
            let ports: Vec<String> = to
                .iter()
                .flat_map(|j| [c.members[*j].quorum.port(), c.members[*j].election.port()])
                .map(|p| p.to_string())
                .collect();
            for i in from {
                let group = c.cgroup(i).expect("a cluster started in cgroups");
                cut.insert(rule(&[
                    "-p",
                    "tcp",
                    "-m",
                    "cgroup",
                    "--path",
                    group,
                    "-m",
                    "multiport",
                    "--dports",
                    &ports.join(","),
                    "-j",
                    "CONNMARK",
                    "--set-mark",
                    &mark,
                ]));
            }
        }
        cut
    }

    fn insert(&mut self, rule: Vec<String>) {
        let mut add = vec!["-I".to_string(), "OUTPUT".to_string()];
        add.extend(rule.iter().cloned());
        // Kept first: a rule whose insertion reported failure is still
        // deleted (deleting a missing one only warns).
        self.rules.push(rule);
        iptables(&add).unwrap_or_else(|e| panic!("{e}"));
    }

    /// Removes the rules.
    fn heal(&mut self) {
        for rule in self.rules.drain(..) {
            let mut del = vec!["-D".to_string(), "OUTPUT".to_string()];
            del.extend(rule);
            if let Err(e) = iptables(&del) {
                eprintln!("removing a partition rule: {e}");
            }
        }
    }
}

impl Drop for Cut {
    fn drop(&mut self) {
        self.heal();
    }
}

/// Waits until exactly one of `among` leads and the rest of them follow;
/// returns it and how long that took.
fn leader_among(c: &Cluster, among: &[usize]) -> (usize, Duration) {
    let start = Instant::now();
    let leader = c.wait_for_leader_among(among, ELECTION_TIMEOUT);
    (leader, start.elapsed())
}

/// Waits until `index` no longer says it serves (it left its role).
fn wait_not_serving(c: &Cluster, index: usize) -> Duration {
    let start = Instant::now();
    loop {
        let s = c.srvr(index);
        if !s.contains("Mode: leader") && !s.contains("Mode: follower") {
            return start.elapsed();
        }
        assert!(
            start.elapsed() < ELECTION_TIMEOUT,
            "server {} still serves across the cut\n{}",
            index + 1,
            c.report()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A follower cut off from the other two: the majority goes on taking
/// writes; the follower stops serving (it lost its leader); healed, it
/// catches up and holds every acknowledged write.
#[test]
fn a_cut_off_follower_stops_serving_and_catches_up_when_healed() {
    let c = Cluster::start_in_cgroups(target_flavor(), 3);
    make_parent(&c, "/cutf");
    let leader = c.wait_for_leader(ELECTION_TIMEOUT);
    let follower = (0..3).find(|i| *i != leader).unwrap();
    let majority: Vec<usize> = (0..3).filter(|i| *i != follower).collect();
    let w = Writer::start(
        majority.iter().map(|i| c.members[*i].client).collect(),
        "/cutf",
        100_000,
    );
    w.wait_for(0, 50, &c);
    let mut cut = Cut::new(&c, &[follower]);
    let left = wait_not_serving(&c, follower);
    eprintln!(
        "the cut-off follower stopped serving {left:?} after the cut (syncLimit x tickTime = {} ms)",
        SYNC_LIMIT * TICK_MS
    );
    let at_cut = w.acked_count();
    w.wait_for(at_cut, 100, &c);
    assert_eq!(leader_among(&c, &majority).0, leader);
    cut.heal();
    let at_heal = w.acked_count();
    w.wait_for(at_heal, 50, &c);
    let acked = w.finish();
    c.wait_for_leader(ELECTION_TIMEOUT);
    check_replicas(&c, "/cutf", &acked);
}

/// The leader cut off from both followers: they elect one of themselves
/// after syncLimit, writes go on through them, the old leader stops
/// serving; healed, it follows the new leader and holds what it missed,
/// and nothing it may have taken alone survives that was not acknowledged.
#[test]
fn a_cut_off_leader_is_replaced_and_rejoins_when_healed() {
    let c = Cluster::start_in_cgroups(target_flavor(), 3);
    make_parent(&c, "/cutl");
    let old = c.wait_for_leader(ELECTION_TIMEOUT);
    let majority: Vec<usize> = (0..3).filter(|i| *i != old).collect();
    // Writes through every member, the old leader included: what it
    // acknowledges before it notices must survive, the rest must not count.
    let w = Writer::start(addrs(&c), "/cutl", 100_000);
    w.wait_for(0, 50, &c);
    let mut cut = Cut::new(&c, &[old]);
    let (new, took) = leader_among(&c, &majority);
    eprintln!(
        "a new leader (server {}) {took:?} after the cut (syncLimit x tickTime = {} ms)",
        new + 1,
        SYNC_LIMIT * TICK_MS
    );
    wait_not_serving(&c, old);
    let at_cut = w.acked_count();
    w.wait_for(at_cut, 100, &c);
    cut.heal();
    let at_heal = w.acked_count();
    w.wait_for(at_heal, 50, &c);
    let acked = w.finish();
    assert_eq!(c.wait_for_leader(ELECTION_TIMEOUT), new);
    check_replicas(&c, "/cutl", &acked);
}

/// Five servers split two (the leader among them) against three: the
/// three elect a leader and take writes; the two serve nothing; healed,
/// all five agree and hold every acknowledged write.
#[test]
fn five_servers_split_two_three_keep_the_majority_side() {
    let c = Cluster::start_in_cgroups(target_flavor(), 5);
    make_parent(&c, "/split");
    let old = c.wait_for_leader(ELECTION_TIMEOUT);
    let minority = vec![old, (0..5).find(|i| *i != old).unwrap()];
    let majority: Vec<usize> = (0..5).filter(|i| !minority.contains(i)).collect();
    let w = Writer::start(
        majority.iter().map(|i| c.members[*i].client).collect(),
        "/split",
        100_000,
    );
    w.wait_for(0, 50, &c);
    let mut cut = Cut::new(&c, &minority);
    let (new, took) = leader_among(&c, &majority);
    eprintln!(
        "the three elected server {} {took:?} after the cut",
        new + 1
    );
    for &i in &minority {
        wait_not_serving(&c, i);
    }
    let at_cut = w.acked_count();
    w.wait_for(at_cut, 100, &c);
    cut.heal();
    let acked: BTreeSet<String> = w.finish();
    c.wait_for_leader(ELECTION_TIMEOUT);
    check_replicas(&c, "/split", &acked);
}
