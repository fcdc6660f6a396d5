//! A client's sync pipelined with its writes through a follower: the
//! replies come back in request order, as Apache ZooKeeper's do, and no
//! member stops. The follower forwards both to the leader; the leader's
//! answer to the sync must come right after the COMMIT that covers what it
//! had assigned when the sync came, before the COMMIT of the session's
//! next write (Leader.processSync, tryToCommit). Sent in one TCP write as
//! setData, sync, setData, while other sessions write through the same
//! follower (so that commits cover several txns at once), with the Java
//! client's ordinary async calls in mind (sync exists only as an async
//! call there).
//!
//! - every server of the target flavour (RK_TEST_TARGET=zookeeper runs the
//!   test itself against Apache ZooKeeper);
//! - a ringkeeper leader with a Java follower under the client: the Java
//!   follower matches each COMMIT with its session's next request and
//!   leaves a write whose COMMIT passes a pending sync unanswered.
//!
//! Needs: apt-get install -y zookeeper (for the mixed ensemble).

mod common;

use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::cluster::Cluster;
use common::ensemble_client::ELECTION_TIMEOUT;
use common::raw::*;
use common::{target_flavor, Flavor, ZK_JAR};

const OP_CREATE: i32 = 1;
const OP_SET_DATA: i32 = 5;
const OP_SYNC: i32 = 9;
const NODE_EXISTS: i32 = -110;

/// Rounds of setData, sync, setData per pipelining session.
const ROUNDS: i32 = 150;
/// Bounds each session's run (the rounds take a few seconds).
const RUN_LIMIT: Duration = Duration::from_secs(90);
/// A reply not in this long fails the test (the Java follower's failure
/// mode is a write that is never answered).
const REPLY_WAIT: Duration = Duration::from_secs(15);

/// Each test runs a 3-member ensemble: on two cores they take turns.
static SERIAL: Mutex<()> = Mutex::new(());

/// A new session on the server at `addr`.
fn session(addr: SocketAddr) -> TcpStream {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(REPLY_WAIT)).unwrap();
    s.set_nodelay(true).unwrap();
    s.write_all(&frame(&connect_body(30_000, 0, &[0; 16], 0, Some(false))))
        .unwrap();
    let resp = read_frame(&mut s).expect("connect response");
    assert_ne!(
        parse_connect_response(&resp).session_id,
        0,
        "a session at {addr}"
    );
    s
}

fn set_body(path: &str, data: &[u8]) -> Vec<u8> {
    let mut b = Vec::new();
    put_str(&mut b, path);
    put_buf(&mut b, data);
    put_i32(&mut b, -1);
    b
}

/// The next reply's (xid, err, body); panics on a closed connection or a
/// reply that does not come within `REPLY_WAIT`.
fn reply(s: &mut TcpStream, what: &str) -> (i32, i32, Vec<u8>) {
    let b = read_frame(s).unwrap_or_else(|| panic!("connection closed awaiting {what}"));
    let mut r = Rd(&b);
    let xid = r.i32();
    let _zxid = r.i64();
    let err = r.i32();
    (xid, err, r.0.to_vec())
}

fn create(s: &mut TcpStream, path: &str) {
    s.write_all(&request(1, OP_CREATE, &create_body(path, b"v", 0)))
        .unwrap();
    let (xid, err, _) = reply(s, &format!("create {path}"));
    assert_eq!(xid, 1);
    assert!(err == 0 || err == NODE_EXISTS, "create {path}: {err}");
}

/// `ROUNDS` x (setData, sync, setData) on `path`, each round in one write;
/// every reply in order, without error, the sync's with its path.
fn pipeline_syncs(addr: SocketAddr, path: &str) {
    let mut s = session(addr);
    create(&mut s, path);
    let start = Instant::now();
    for round in 0..ROUNDS {
        assert!(
            start.elapsed() < RUN_LIMIT,
            "{ROUNDS} rounds within {RUN_LIMIT:?}"
        );
        let xid = 2 + 3 * round;
        let mut bytes = request(xid, OP_SET_DATA, &set_body(path, b"a"));
        bytes.extend(request(xid + 1, OP_SYNC, &path_body(path)));
        bytes.extend(request(xid + 2, OP_SET_DATA, &set_body(path, b"b")));
        s.write_all(&bytes).unwrap();
        for (k, what) in ["setData", "sync", "setData"].into_iter().enumerate() {
            let want = xid + k as i32;
            let (got, err, body) = reply(&mut s, &format!("{what} (xid {want}) at {addr}"));
            assert_eq!(
                got, want,
                "round {round}: replies in request order at {addr}"
            );
            assert_eq!(err, 0, "round {round}: {what} at {addr}");
            if what == "sync" {
                assert_eq!(Rd(&body).str(), path, "the sync answers with its path");
            }
        }
    }
}

/// setData on `path` one at a time until `stop` (or `RUN_LIMIT`).
fn write_until(addr: SocketAddr, path: &str, stop: &AtomicBool) {
    let mut s = session(addr);
    create(&mut s, path);
    let start = Instant::now();
    let mut xid = 2;
    while !stop.load(Ordering::Relaxed) && start.elapsed() < RUN_LIMIT {
        s.write_all(&request(xid, OP_SET_DATA, &set_body(path, b"w")))
            .unwrap();
        let (got, err, _) = reply(&mut s, &format!("background setData at {addr}"));
        assert_eq!((got, err), (xid, 0), "background setData at {addr}");
        xid += 1;
    }
}

/// Pipelined syncs through member `at`, with two other sessions writing
/// through it meanwhile; then every member still serves.
fn syncs_through(c: &Cluster, at: usize, tag: &str) {
    let addr = c.members[at].client;
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..2)
        .map(|w| {
            let stop = stop.clone();
            let path = format!("/{tag}-w{w}");
            std::thread::spawn(move || write_until(addr, &path, &stop))
        })
        .collect();
    let syncing = {
        let path = format!("/{tag}-s");
        std::thread::spawn(move || pipeline_syncs(addr, &path))
    };
    let result = syncing.join();
    stop.store(true, Ordering::Relaxed);
    for w in writers {
        w.join()
            .unwrap_or_else(|_| panic!("a writer through {addr}\n{}", c.report()));
    }
    if result.is_err() {
        panic!(
            "pipelined syncs through member {} ({:?}) failed\n{}",
            at + 1,
            c.members[at].flavor,
            c.report()
        );
    }
    for i in 0..c.size() {
        let mode = c.srvr(i);
        assert!(
            mode.contains("Mode: leader") || mode.contains("Mode: follower"),
            "member {} serves after the syncs through member {}: {mode:?}\n{}",
            i + 1,
            at + 1,
            c.report()
        );
    }
}

#[test]
fn a_sync_between_writes_through_each_follower_keeps_their_order() {
    let _turn = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let c = Cluster::start(target_flavor(), 3);
    let leader = c.wait_for_leader(ELECTION_TIMEOUT);
    for at in (0..3).filter(|i| *i != leader) {
        syncs_through(&c, at, &format!("f{}", at + 1));
    }
    syncs_through(&c, leader, "leader");
    assert_eq!(
        c.wait_for_leader(ELECTION_TIMEOUT),
        leader,
        "{}",
        c.report()
    );
}

#[test]
fn a_java_follower_of_a_ringkeeper_leader_keeps_a_syncing_session_in_order() {
    use Flavor::{Ringkeeper as Rk, ZooKeeper as Zk};
    assert!(
        std::path::Path::new(ZK_JAR).exists(),
        "Apache ZooKeeper is not installed: apt-get install -y zookeeper"
    );
    let _turn = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // The ringkeepers form the quorum before the JVM is up; the higher id
    // leads.
    let c = Cluster::start_mixed(&[Zk, Rk, Rk]);
    let leader = c.wait_for_leader(ELECTION_TIMEOUT);
    assert_eq!(
        c.members[leader].flavor,
        Rk,
        "a ringkeeper leader\n{}",
        c.report()
    );
    syncs_through(&c, 0, "java");
    assert_eq!(
        c.wait_for_leader(ELECTION_TIMEOUT),
        leader,
        "{}",
        c.report()
    );
}
