//! Bad input on the peer ports of a running 3-server ensemble: garbage, a
//! frame over the bound, an unknown packet type, a server id not in the
//! configuration, a packet out of protocol order, and a stalled follower.
//! Each one must close only that connection (ringkeeper; Apache ZooKeeper
//! is laxer about unknown ids, so there the test only checks that the
//! ensemble survives), and afterwards the ensemble must still take writes
//! on the same leader and serve them from every member.

mod common;

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::thread;
use std::time::{Duration, Instant};

use common::cluster::Cluster;
use common::raw_fallible::*;
use common::{target_flavor, Flavor};

const ELECTION_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a closed connection may take to show EOF: the peer ports give
/// a connection that sent half a header initLimit ticks (2 s here).
const CLOSE_TIMEOUT: Duration = Duration::from_secs(15);

// QuorumPacket types (Leader.java).
const UPTODATE: i32 = 12;
const FOLLOWERINFO: i32 = 11;
const ELECTION_PROTOCOL_V2: i64 = -65535;

fn quorum_packet(kind: i32, zxid: i64, data: &[u8]) -> Vec<u8> {
    let mut body = Vec::new();
    put_i32(&mut body, kind);
    put_i64(&mut body, zxid);
    put_buf(&mut body, data);
    put_i32(&mut body, -1); // authinfo: null vector
    body // a QuorumPacket goes on the wire as is, without a length prefix
}

fn follower_info(sid: i64) -> Vec<u8> {
    let mut info = Vec::new();
    put_i64(&mut info, sid);
    put_i32(&mut info, 0x10000); // protocol version
    put_i64(&mut info, 0); // config version
    quorum_packet(FOLLOWERINFO, 0, &info)
}

fn election_header(sid: i64, addr: &str) -> Vec<u8> {
    let mut b = Vec::new();
    put_i64(&mut b, ELECTION_PROTOCOL_V2);
    put_i64(&mut b, sid);
    put_str(&mut b, addr);
    b
}

/// Connects to `addr`, writes each chunk, then reports whether the server
/// closed the connection within `CLOSE_TIMEOUT`.
fn closed_after(addr: SocketAddr, chunks: &[Vec<u8>]) -> bool {
    closed_within(addr, chunks, CLOSE_TIMEOUT)
}

/// As `closed_after`, within `timeout` (what the server sends before
/// closing, e.g. a LEADERINFO, is read and ignored).
fn closed_within(addr: SocketAddr, chunks: &[Vec<u8>], timeout: Duration) -> bool {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).expect("connect");
    for c in chunks {
        if s.write_all(c).is_err() {
            return true;
        }
        thread::sleep(Duration::from_millis(50));
    }
    s.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let start = Instant::now();
    let mut buf = [0u8; 4096];
    while start.elapsed() < timeout {
        match s.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(e)
                if e.kind() == io::ErrorKind::WouldBlock || e.kind() == io::ErrorKind::TimedOut => {
            }
            Err(_) => return true,
        }
    }
    false
}

fn session_on(c: &Cluster, index: usize) -> Conn {
    let start = Instant::now();
    loop {
        match Conn::connect_to(c.members[index].client, 10_000, 0, &[0; 16], 0) {
            Ok(Some(conn)) => return conn,
            _ if start.elapsed() > ELECTION_TIMEOUT => {
                panic!("no session on server {}\n{}", index + 1, c.report())
            }
            _ => thread::sleep(Duration::from_millis(100)),
        }
    }
}

/// A write on the leader, then every member syncs and reads it.
fn assert_serving(c: &Cluster, leader: usize, name: &str) {
    assert_eq!(
        c.wait_for_leader(ELECTION_TIMEOUT),
        leader,
        "the leader changed after {name}\n{}",
        c.report()
    );
    let path = format!("/after-{name}");
    let r = session_on(c, leader)
        .call(OP_CREATE, &create_body(&path, name.as_bytes(), 0))
        .expect("create");
    assert_eq!(r.err, 0, "create {path} after {name}");
    for i in 0..c.size() {
        let mut conn = session_on(c, i);
        assert_eq!(conn.call(OP_SYNC, &path_body(&path)).unwrap().err, 0);
        let r = conn.call(OP_GET_DATA, &get_body(&path, false)).unwrap();
        assert_eq!(r.err, 0, "server {} lacks {path}\n{}", i + 1, c.report());
    }
}

fn check_closed(flavor: Flavor, what: &str, closed: bool, strict: bool) {
    if flavor == Flavor::Ringkeeper || strict {
        assert!(closed, "{what}: the connection stayed open");
    }
}

#[test]
fn bad_input_on_the_peer_ports_closes_only_that_connection() {
    let flavor = target_flavor();
    let c = &mut Cluster::start(flavor, 3);
    let leader = c.wait_for_leader(ELECTION_TIMEOUT);
    let follower = (leader + 1) % 3;
    let quorum = c.members[leader].quorum;
    assert_serving(c, leader, "start");

    let garbage: Vec<u8> = (0..256u32).map(|i| (i * 37 % 251) as u8).collect();
    // A PING whose data claims 2 GiB.
    let mut oversized = Vec::new();
    put_i32(&mut oversized, 5);
    put_i64(&mut oversized, 0);
    put_i32(&mut oversized, i32::MAX);
    oversized.extend_from_slice(&[0; 64]);
    // A notification frame that claims 2 GiB.
    let mut oversized_vote = Vec::new();
    put_i32(&mut oversized_vote, i32::MAX);
    oversized_vote.extend_from_slice(&[0; 64]);

    // The quorum port of the leader.
    let closed = closed_after(quorum, std::slice::from_ref(&garbage));
    check_closed(flavor, "quorum port, garbage", closed, true);
    let closed = closed_after(quorum, std::slice::from_ref(&oversized));
    check_closed(flavor, "quorum port, a frame over the bound", closed, true);
    let closed = closed_after(quorum, &[quorum_packet(99, 0, &[])]);
    check_closed(flavor, "quorum port, an unknown packet type", closed, true);
    let closed = closed_after(quorum, &[follower_info(99)]);
    check_closed(flavor, "quorum port, server id 99", closed, false);
    assert_serving(c, leader, "quorum-port-garbage");

    // A configured id that breaks the order: an UPTODATE where ACKEPOCH
    // belongs. The follower whose id it borrows is down meanwhile (alive,
    // its own reconnect would take the connection over and close this one).
    c.kill(follower);
    let sid = c.members[follower].id as i64;
    let closed = closed_after(
        quorum,
        &[follower_info(sid), quorum_packet(UPTODATE, 0, &[])],
    );
    check_closed(flavor, "quorum port, a packet out of order", closed, true);
    c.restart(follower);
    assert_serving(c, leader, "out-of-order");

    // The election port of every member.
    for i in 0..3 {
        let election = c.members[i].election;
        let closed = closed_after(election, std::slice::from_ref(&garbage));
        check_closed(flavor, "election port, garbage", closed, true);
        let closed = closed_after(election, &[election_header(99, "127.0.0.99:1")]);
        check_closed(flavor, "election port, server id 99", closed, false);
        let mut long_addr = Vec::new();
        put_i64(&mut long_addr, ELECTION_PROTOCOL_V2);
        put_i64(&mut long_addr, 3);
        put_i32(&mut long_addr, i32::MAX);
        let closed = closed_after(election, &[long_addr]);
        check_closed(
            flavor,
            "election port, an address over the bound",
            closed,
            true,
        );
    }
    // A notification over the bound from a configured id that wins the
    // handshake (a higher id than the member's own).
    let high = c.members[2].id as i64;
    let closed = closed_after(
        c.members[0].election,
        &[
            election_header(high, &c.members[2].election.to_string()),
            oversized_vote,
        ],
    );
    check_closed(
        flavor,
        "election port, a notification over the bound",
        closed,
        true,
    );
    assert_serving(c, leader, "election-port-garbage");
}

/// A follower that stops reading (SIGSTOP) while the leader takes writes:
/// the leader and the other follower go on, and the stalled one catches up
/// when it runs again.
#[test]
fn a_stalled_follower_does_not_block_the_leader() {
    let c = &mut Cluster::start(target_flavor(), 3);
    let leader = c.wait_for_leader(ELECTION_TIMEOUT);
    let stalled = (leader + 1) % 3;
    assert_serving(c, leader, "start");
    c.pause(stalled);
    let mut conn = session_on(c, leader);
    let value = vec![7u8; 1024];
    const WRITES: usize = 3_000;
    for i in 0..WRITES {
        conn.send(OP_CREATE, &create_body(&format!("/w{i}"), &value, 0))
            .expect("send");
        if i % 100 == 99 {
            for _ in 0..100 {
                let r = conn.recv().expect("reply");
                assert_eq!(r.err, 0, "a write while a follower is stalled");
            }
        }
    }
    c.resume(stalled);
    let start = Instant::now();
    loop {
        let zxids: Vec<Option<i64>> = (0..3).map(|i| c.zxid(i)).collect();
        if zxids.iter().all(|z| z.is_some() && *z == zxids[0]) {
            break;
        }
        assert!(
            start.elapsed() < ELECTION_TIMEOUT,
            "the stalled follower did not catch up: {zxids:?}\n{}",
            c.report()
        );
        thread::sleep(Duration::from_millis(100));
    }
    let mut check = session_on(c, stalled);
    let r = check
        .call(OP_GET_DATA, &get_body(&format!("/w{}", WRITES - 1), false))
        .unwrap();
    assert_eq!(r.err, 0, "the stalled follower lacks the last write");
}
