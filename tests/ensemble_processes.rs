//! Ensembles of real processes on loopback (each member on 127.0.0.i):
//! election, replication, and failures (kill -9 of the leader and of
//! followers under a writer, SIGSTOP of the leader, restarts), checked
//! through the client protocol: every acknowledged write is present on
//! every live member afterwards, and the members agree on the tree.
//! Runs against Apache ZooKeeper too (RK_TEST_TARGET=zookeeper), which
//! checks the tests themselves.

mod common;

use std::collections::BTreeSet;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use common::cluster::{Cluster, SYNC_LIMIT, TICK_MS};
use common::raw_fallible::*;
use common::target_flavor;

const ELECTION_TIMEOUT: Duration = Duration::from_secs(30);

fn session(addr: SocketAddr) -> io::Result<Conn> {
    Conn::connect_to(addr, 10_000, 0, &[0; 16], 0)?
        .ok_or_else(|| io::Error::other("session refused"))
}

/// A session on member `index`, retried until it is serving.
fn session_on(c: &Cluster, index: usize) -> Conn {
    let start = Instant::now();
    loop {
        match session(c.members[index].client) {
            Ok(conn) => return conn,
            Err(e) if start.elapsed() > ELECTION_TIMEOUT => {
                panic!("no session on server {}: {e}\n{}", index + 1, c.report())
            }
            Err(_) => thread::sleep(Duration::from_millis(100)),
        }
    }
}

fn create(conn: &mut Conn, path: &str, data: &[u8]) -> io::Result<i32> {
    Ok(conn.call(OP_CREATE, &create_body(path, data, 0))?.err)
}

/// The children of `path` as this member sees them after a sync.
fn children_after_sync(conn: &mut Conn, path: &str) -> BTreeSet<String> {
    let r = conn.call(OP_SYNC, &path_body(path)).expect("sync");
    assert_eq!(r.err, 0, "sync {path}");
    let r = conn
        .call(OP_GET_CHILDREN, &get_body(path, false))
        .expect("getChildren");
    assert_eq!(r.err, 0, "getChildren {path}");
    let mut rd = Rd(&r.body);
    let n = rd.i32();
    (0..n).map(|_| rd.str()).collect()
}

/// Waits until every live member reports the same zxid (it has applied
/// what the leader committed), then returns it.
fn wait_converged(c: &Cluster) -> i64 {
    let start = Instant::now();
    loop {
        let zxids: Vec<Option<i64>> = (0..c.size())
            .filter(|i| c.is_up(*i))
            .map(|i| c.zxid(i))
            .collect();
        if zxids.iter().all(|z| z.is_some() && *z == zxids[0]) {
            return zxids[0].unwrap();
        }
        assert!(
            start.elapsed() < ELECTION_TIMEOUT,
            "members did not converge: {zxids:?}\n{}",
            c.report()
        );
        thread::sleep(Duration::from_millis(50));
    }
}

/// Every live member holds every name in `acked` under `parent`, and all
/// of them hold the same children.
fn check_replicas(c: &Cluster, parent: &str, acked: &BTreeSet<String>) {
    wait_converged(c);
    let mut seen: Option<(usize, BTreeSet<String>)> = None;
    for i in (0..c.size()).filter(|i| c.is_up(*i)) {
        let mut conn = session_on(c, i);
        let kids = children_after_sync(&mut conn, parent);
        let missing: Vec<_> = acked.difference(&kids).collect();
        assert!(
            missing.is_empty(),
            "server {} lost acknowledged writes {missing:?}\n{}",
            i + 1,
            c.report()
        );
        if let Some((j, other)) = &seen {
            assert_eq!(
                &kids,
                other,
                "servers {} and {} differ under {parent}",
                i + 1,
                j + 1
            );
        }
        seen = Some((i, kids));
    }
}

/// Creates `/parent/<n>` sequentially until stopped (or `max`), moving to
/// the next member whenever a call fails; returns the acknowledged names.
struct Writer {
    stop: Arc<AtomicBool>,
    acked: Arc<Mutex<BTreeSet<String>>>,
    count: Arc<AtomicUsize>,
    handle: Option<thread::JoinHandle<()>>,
}

impl Writer {
    fn start(addrs: Vec<SocketAddr>, parent: &str, max: usize) -> Writer {
        let stop = Arc::new(AtomicBool::new(false));
        let acked = Arc::new(Mutex::new(BTreeSet::new()));
        let count = Arc::new(AtomicUsize::new(0));
        let (s, a, n, parent) = (
            stop.clone(),
            acked.clone(),
            count.clone(),
            parent.to_string(),
        );
        let handle = thread::spawn(move || {
            let deadline = Instant::now() + Duration::from_secs(90);
            let mut next = 0usize;
            let mut at = 0usize;
            let mut conn: Option<Conn> = None;
            while !s.load(Ordering::Relaxed) && next < max && Instant::now() < deadline {
                if conn.is_none() {
                    conn = session(addrs[at % addrs.len()]).ok();
                    if conn.is_none() {
                        at += 1;
                        thread::sleep(Duration::from_millis(50));
                        continue;
                    }
                }
                let name = format!("{next:06}");
                next += 1;
                match create(conn.as_mut().unwrap(), &format!("{parent}/{name}"), b"w") {
                    Ok(0) => {
                        a.lock().unwrap().insert(name);
                        n.fetch_add(1, Ordering::Relaxed);
                    }
                    // Outcome unknown (or refused): not counted; next member.
                    _ => {
                        conn = None;
                        at += 1;
                    }
                }
            }
        });
        Writer {
            stop,
            acked,
            count,
            handle: Some(handle),
        }
    }

    fn acked_count(&self) -> usize {
        self.count.load(Ordering::Relaxed)
    }

    /// Waits until `more` writes beyond `from` were acknowledged.
    fn wait_for(&self, from: usize, more: usize, c: &Cluster) {
        let start = Instant::now();
        while self.acked_count() < from + more {
            assert!(
                start.elapsed() < ELECTION_TIMEOUT,
                "writes did not resume ({} acked)\n{}",
                self.acked_count(),
                c.report()
            );
            thread::sleep(Duration::from_millis(20));
        }
    }

    fn finish(mut self) -> BTreeSet<String> {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.take().unwrap().join().unwrap();
        std::mem::take(&mut *self.acked.lock().unwrap())
    }
}

fn addrs(c: &Cluster) -> Vec<SocketAddr> {
    c.members.iter().map(|m| m.client).collect()
}

fn make_parent(c: &Cluster, parent: &str) {
    let leader = c.wait_for_leader(ELECTION_TIMEOUT);
    let mut conn = session_on(c, leader);
    assert_eq!(
        create(&mut conn, parent, b"").unwrap(),
        0,
        "create {parent}"
    );
}

#[test]
fn three_servers_replicate_writes_made_on_any_server() {
    let c = Cluster::start(target_flavor(), 3);
    let leader = c.wait_for_leader(ELECTION_TIMEOUT);
    make_parent(&c, "/r");
    let mut acked = BTreeSet::new();
    // Writes through every member: a follower forwards them to the leader.
    for i in 0..3 {
        let mut conn = session_on(&c, i);
        for k in 0..30 {
            let name = format!("s{}-{k:02}", i + 1);
            let err = create(&mut conn, &format!("/r/{name}"), b"v").unwrap();
            assert_eq!(err, 0, "create via server {}", i + 1);
            acked.insert(name);
        }
    }
    check_replicas(&c, "/r", &acked);
    assert_eq!(
        c.wait_for_leader(ELECTION_TIMEOUT),
        leader,
        "a stable leader"
    );
}

#[test]
fn leader_killed_under_writes_loses_no_acknowledged_write() {
    let mut c = Cluster::start(target_flavor(), 3);
    make_parent(&c, "/w");
    let leader = c.wait_for_leader(ELECTION_TIMEOUT);
    let w = Writer::start(addrs(&c), "/w", 100_000);
    w.wait_for(0, 200, &c);
    c.kill(leader);
    let at_kill = w.acked_count();
    let new_leader = c.wait_for_leader(ELECTION_TIMEOUT);
    assert_ne!(new_leader, leader);
    w.wait_for(at_kill, 200, &c);
    let acked = w.finish();
    check_replicas(&c, "/w", &acked);
    // The old leader comes back as a follower and catches up.
    c.restart(leader);
    assert_eq!(c.wait_for_leader(ELECTION_TIMEOUT), new_leader);
    check_replicas(&c, "/w", &acked);
}

#[test]
fn follower_killed_and_restarted_catches_up() {
    let mut c = Cluster::start(target_flavor(), 3);
    make_parent(&c, "/f");
    let leader = c.wait_for_leader(ELECTION_TIMEOUT);
    let follower = (leader + 1) % 3;
    let w = Writer::start(vec![c.members[leader].client], "/f", 100_000);
    w.wait_for(0, 100, &c);
    c.kill(follower);
    let at_kill = w.acked_count();
    w.wait_for(at_kill, 300, &c);
    c.restart(follower);
    let at_restart = w.acked_count();
    w.wait_for(at_restart, 100, &c);
    let acked = w.finish();
    assert_eq!(c.wait_for_leader(ELECTION_TIMEOUT), leader);
    check_replicas(&c, "/f", &acked);
}

/// Every member in turn, followers first and the leader last, is killed
/// and restarted under a writer that moves between members; each one
/// rejoins (a follower reloads its data twice while syncing, with
/// proposals still staged in its log) before the next goes down.
#[test]
fn rolling_restart_under_writes_loses_no_acknowledged_write() {
    let mut c = Cluster::start(target_flavor(), 3);
    make_parent(&c, "/roll");
    let leader = c.wait_for_leader(ELECTION_TIMEOUT);
    let w = Writer::start(addrs(&c), "/roll", 100_000);
    w.wait_for(0, 100, &c);
    let order: Vec<usize> = (1..=3).map(|k| (leader + k) % 3).collect();
    for i in order {
        c.kill(i);
        let at_kill = w.acked_count();
        w.wait_for(at_kill, 100, &c);
        c.restart(i);
        c.wait_for_leader(ELECTION_TIMEOUT);
        wait_converged(&c);
        let at_restart = w.acked_count();
        w.wait_for(at_restart, 100, &c);
    }
    let acked = w.finish();
    check_replicas(&c, "/roll", &acked);
}

#[test]
fn five_servers_survive_two_failed_followers() {
    let mut c = Cluster::start(target_flavor(), 5);
    make_parent(&c, "/five");
    let leader = c.wait_for_leader(ELECTION_TIMEOUT);
    let down: Vec<usize> = (0..5).filter(|i| *i != leader).take(2).collect();
    let w = Writer::start(vec![c.members[leader].client], "/five", 100_000);
    w.wait_for(0, 50, &c);
    for &i in &down {
        c.kill(i);
    }
    let at_kill = w.acked_count();
    w.wait_for(at_kill, 200, &c);
    for &i in &down {
        c.restart(i);
    }
    let acked = w.finish();
    assert_eq!(c.wait_for_leader(ELECTION_TIMEOUT), leader);
    check_replicas(&c, "/five", &acked);
}

/// A leader that stops answering without closing its sockets (SIGSTOP) is
/// dropped by its followers after syncLimit ticks; they elect another, and
/// the old one, resumed, follows it and gets what it missed.
#[test]
fn a_paused_leader_is_replaced_and_rejoins() {
    let mut c = Cluster::start(target_flavor(), 3);
    make_parent(&c, "/p");
    let leader = c.wait_for_leader(ELECTION_TIMEOUT);
    let others: Vec<SocketAddr> = (0..3)
        .filter(|i| *i != leader)
        .map(|i| c.members[i].client)
        .collect();
    c.pause(leader);
    let paused_at = Instant::now();
    let new_leader = c.wait_for_leader(ELECTION_TIMEOUT);
    let w = Writer::start(others, "/p", 100_000);
    w.wait_for(0, 100, &c);
    eprintln!(
        "first 100 writes after the pause done {:?} after it (syncLimit x tickTime = {} ms)",
        paused_at.elapsed(),
        SYNC_LIMIT * TICK_MS
    );
    c.resume(leader);
    let at_resume = w.acked_count();
    w.wait_for(at_resume, 100, &c);
    let acked = w.finish();
    assert_eq!(c.wait_for_leader(ELECTION_TIMEOUT), new_leader);
    check_replicas(&c, "/p", &acked);
}
