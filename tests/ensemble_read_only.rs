//! An ensemble member without a leader and read-only sessions (issue 26,
//! 11): by default it serves nobody, as Apache ZooKeeper's server is not
//! running then (a connection is closed unanswered), since its data can
//! hold logged txns nobody committed. `readonlymode.enabled=true` makes it
//! serve clients that allow read-only sessions (ZooKeeper's
//! ReadOnlyZooKeeperServer, which ZooKeeper turns on with a Java system
//! property; a zoo.cfg line does not, so that case is ringkeeper's). Its
//! four-letter words answer as ZooKeeper's do while no server runs.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use common::cluster::{four_letter_at, Cluster};
use common::{target_flavor, Flavor};

const NOT_SERVING: &str = "This ZooKeeper instance is not currently serving requests";

/// A read-only-capable connect request (readOnly = true); Some(read_only
/// flag of the answer) when a session was granted, None when the server
/// closed the connection or refused.
fn read_only_connect(addr: SocketAddr) -> Option<bool> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut b = Vec::new();
    b.extend_from_slice(&0i32.to_be_bytes()); // protocol version
    b.extend_from_slice(&0i64.to_be_bytes()); // last zxid seen
    b.extend_from_slice(&10_000i32.to_be_bytes()); // timeout
    b.extend_from_slice(&0i64.to_be_bytes()); // session id
    b.extend_from_slice(&16i32.to_be_bytes());
    b.extend_from_slice(&[0; 16]); // password
    b.push(1); // readOnly
    let mut framed = (b.len() as i32).to_be_bytes().to_vec();
    framed.extend_from_slice(&b);
    s.write_all(&framed).ok()?;
    let mut len = [0u8; 4];
    s.read_exact(&mut len).ok()?;
    let mut body = vec![0u8; i32::from_be_bytes(len) as usize];
    s.read_exact(&mut body).ok()?;
    let session_id = i64::from_be_bytes(body[8..16].try_into().unwrap());
    if session_id == 0 {
        return None;
    }
    // protocol, timeout, session id, password (len + 16), readOnly.
    Some(body.get(4 + 4 + 8 + 4 + 16).copied() == Some(1))
}

/// A 3-server ensemble with two members down: the third has no leader.
fn lone_member(extra_cfg: &str) -> Cluster {
    let mut c = Cluster::start_with_cfg(target_flavor(), 3, extra_cfg);
    c.wait_for_leader(Duration::from_secs(60));
    c.kill(0);
    c.kill(1);
    let deadline = Instant::now() + Duration::from_secs(30);
    while !c.srvr(2).contains("not currently serving") {
        assert!(
            Instant::now() < deadline,
            "member 3 still serves alone:\n{}",
            c.report()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    c
}

#[test]
fn a_member_without_a_leader_serves_nobody_by_default() {
    let c = lone_member("");
    assert_eq!(
        read_only_connect(c.members[2].client),
        None,
        "a read-only session granted by a member with no leader\n{}",
        c.report()
    );
    // The words whose commands check isZKServerRunning say it is not
    // serving (isro: null; hash prints without a line end); the others
    // answer as ever. A monitoring probe or a read-only client's search
    // for a writable server reads these.
    let addr = c.members[2].client;
    let word = |w: &str| four_letter_at(addr, w).unwrap_or_else(|e| panic!("{w}: {e}"));
    for w in [
        "conf", "cons", "crst", "dirs", "dump", "mntr", "srst", "srvr", "stat", "wchc", "wchp",
        "wchs",
    ] {
        assert_eq!(word(w), format!("{NOT_SERVING}\n"), "{w}\n{}", c.report());
    }
    assert_eq!(word("hash"), NOT_SERVING);
    assert_eq!(word("isro"), "null");
    assert_eq!(word("ruok"), "imok");
    assert!(word("envi").starts_with("Environment:\n"));
}

#[test]
fn read_only_mode_serves_read_only_sessions_without_a_leader() {
    // Apache ZooKeeper takes the switch only as a Java system property.
    if target_flavor() == Flavor::ZooKeeper {
        let c = lone_member("readonlymode.enabled=true\n");
        assert_eq!(read_only_connect(c.members[2].client), None);
        return;
    }
    let c = lone_member("readonlymode.enabled=true\n");
    assert_eq!(
        read_only_connect(c.members[2].client),
        Some(true),
        "{}",
        c.report()
    );
}
