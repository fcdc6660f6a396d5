//! Client-side helpers for ensemble tests: sessions retried until a
//! member serves, a writer that moves between members and records what was
//! acknowledged, and the checks that every live member holds it.

use std::collections::BTreeSet;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use super::cluster::Cluster;
use super::raw_fallible::*;

pub const ELECTION_TIMEOUT: Duration = Duration::from_secs(30);

pub fn session(addr: SocketAddr) -> io::Result<Conn> {
    Conn::connect_to(addr, 10_000, 0, &[0; 16], 0)?
        .ok_or_else(|| io::Error::other("session refused"))
}

/// A session on member `index`, retried until it is serving.
pub fn session_on(c: &Cluster, index: usize) -> Conn {
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

pub fn create(conn: &mut Conn, path: &str, data: &[u8]) -> io::Result<i32> {
    Ok(conn.call(OP_CREATE, &create_body(path, data, 0))?.err)
}

/// The children of `path` as this member sees them after a sync.
pub fn children_after_sync(conn: &mut Conn, path: &str) -> BTreeSet<String> {
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
pub fn wait_converged(c: &Cluster) -> i64 {
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
pub fn check_replicas(c: &Cluster, parent: &str, acked: &BTreeSet<String>) {
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
pub struct Writer {
    stop: Arc<AtomicBool>,
    acked: Arc<Mutex<BTreeSet<String>>>,
    count: Arc<AtomicUsize>,
    handle: Option<thread::JoinHandle<()>>,
}

impl Writer {
    pub fn start(addrs: Vec<SocketAddr>, parent: &str, max: usize) -> Writer {
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

    pub fn acked_count(&self) -> usize {
        self.count.load(Ordering::Relaxed)
    }

    /// Waits until `more` writes beyond `from` were acknowledged.
    pub fn wait_for(&self, from: usize, more: usize, c: &Cluster) {
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

    pub fn finish(mut self) -> BTreeSet<String> {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.take().unwrap().join().unwrap();
        std::mem::take(&mut *self.acked.lock().unwrap())
    }
}

pub fn addrs(c: &Cluster) -> Vec<SocketAddr> {
    c.members.iter().map(|m| m.client).collect()
}

pub fn make_parent(c: &Cluster, parent: &str) {
    let leader = c.wait_for_leader(ELECTION_TIMEOUT);
    let mut conn = session_on(c, leader);
    assert_eq!(
        create(&mut conn, parent, b"").unwrap(),
        0,
        "create {parent}"
    );
}

/// A create through member `on` whose connection the server drops
/// mid-request (Apache ZooKeeper 3.8 now and then closes one while a member
/// syncs or restarts) has an unknown outcome: reconnect to the same member
/// and send it again, as a client library does, up to 3 times; NODEEXISTS
/// (-110) after a resend means the first one was applied.
pub fn create_resending(c: &Cluster, on: usize, conn: &mut Conn, path: &str, data: &[u8]) -> i32 {
    let mut lost = 0;
    loop {
        match create(conn, path, data) {
            Ok(err) if lost > 0 && err == -110 => return 0,
            Ok(err) => return err,
            Err(e) if lost < 3 => {
                lost += 1;
                eprintln!("create {path} via server {}: {e}; reconnecting", on + 1);
                *conn = session_on(c, on);
            }
            Err(e) => panic!("create {path} via server {}: {e}", on + 1),
        }
    }
}
