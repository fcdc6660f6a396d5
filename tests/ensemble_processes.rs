//! Ensembles of real processes on loopback (each member on 127.0.0.i):
//! election, replication, and failures (kill -9 of the leader and of
//! followers under a writer, SIGSTOP of the leader, restarts), checked
//! through the client protocol: every acknowledged write is present on
//! every live member afterwards, and the members agree on the tree.
//! Runs against Apache ZooKeeper too (RK_TEST_TARGET=zookeeper), which
//! checks the tests themselves.

mod common;

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::thread;
use std::time::{Duration, Instant};

use common::cluster::{Cluster, SYNC_LIMIT, TICK_MS};
use common::ensemble_client::*;
use common::raw_fallible::*;
use common::target_flavor;

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
            let err = create_resending(&c, i, &mut conn, &format!("/r/{name}"), b"v");
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

fn mntr_map(c: &Cluster, index: usize) -> Vec<(String, String)> {
    common::cluster::four_letter_at(c.members[index].client, "mntr")
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split_once('\t'))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn mntr_value<'a>(m: &'a [(String, String)], key: &str) -> Option<&'a str> {
    m.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
}

/// The key mntr prints right before `key`.
fn mntr_key_before<'a>(m: &'a [(String, String)], key: &str) -> Option<&'a str> {
    let i = m.iter().position(|(k, _)| k == key)?;
    i.checked_sub(1).map(|j| m[j].0.as_str())
}

/// What operators read of an ensemble, as ZooKeeper 3.8 shows it: srvr's
/// mode and (leader) proposal sizes, mntr's ensemble keys in ZooKeeper's
/// places, `conf` with the membership, and /zookeeper/config.
#[test]
fn srvr_mntr_conf_and_the_config_node_show_the_ensemble() {
    let c = Cluster::start(target_flavor(), 3);
    make_parent(&c, "/ops");
    let leader = c.wait_for_leader(ELECTION_TIMEOUT);
    let follower = (leader + 1) % 3;
    wait_converged(&c);

    let srvr = c.srvr(leader);
    let last = srvr.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("Proposal sizes last/min/max: ") && !last.contains("-1/-1/-1"),
        "leader srvr: {srvr}"
    );
    assert!(
        !c.srvr(follower).contains("Proposal sizes"),
        "follower srvr"
    );

    // Synced followers are counted once their sync is acknowledged.
    let start = Instant::now();
    let m = loop {
        let m = mntr_map(&c, leader);
        if mntr_value(&m, "zk_synced_followers") == Some("2") {
            break m;
        }
        assert!(start.elapsed() < ELECTION_TIMEOUT, "leader mntr: {m:?}");
        thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(mntr_value(&m, "zk_server_state"), Some("leader"));
    assert_eq!(mntr_value(&m, "zk_peer_state"), Some("leading - broadcast"));
    assert_eq!(mntr_value(&m, "zk_learners"), Some("2"));
    assert_eq!(mntr_value(&m, "zk_quorum_size"), Some("3"));
    assert_eq!(mntr_value(&m, "zk_pending_syncs"), Some("0"));
    assert!(mntr_value(&m, "zk_leader_uptime").is_some_and(|v| v.parse::<u64>().unwrap() > 0));
    assert!(mntr_value(&m, "zk_cnt_election_time").is_some_and(|v| v != "0"));
    for (key, before) in [
        ("zk_peer_state", "zk_server_state"),
        ("zk_min_proposal_size", "zk_avg_latency"),
        ("zk_max_proposal_size", "zk_packets_received"),
        ("zk_synced_followers", "zk_max_client_response_size"),
        ("zk_synced_non_voting_followers", "zk_watch_count"),
        ("zk_last_proposal_size", "zk_open_file_descriptor_count"),
        ("zk_learners", "zk_outstanding_tls_handshake"),
        ("zk_quorum_size", "zk_non_mtls_local_conn_count"),
    ] {
        assert_eq!(mntr_key_before(&m, key), Some(before), "leader mntr: {key}");
    }

    let m = mntr_map(&c, follower);
    assert_eq!(mntr_value(&m, "zk_server_state"), Some("follower"));
    assert_eq!(
        mntr_value(&m, "zk_peer_state"),
        Some("following - broadcast")
    );
    assert_eq!(mntr_value(&m, "zk_quorum_size"), Some("3"));
    assert_eq!(mntr_value(&m, "zk_learners"), None);
    assert_eq!(mntr_value(&m, "zk_synced_followers"), None);
    assert_eq!(
        mntr_key_before(&m, "zk_peer_state"),
        Some("zk_server_state")
    );

    // conf: the quorum part, then the membership (reconfig disabled).
    let membership: String = c
        .members
        .iter()
        .map(|m| {
            format!(
                "server.{}={}:{}:{}:participant\n",
                m.id,
                m.quorum.ip(),
                m.quorum.port(),
                m.election.port()
            )
        })
        .collect::<String>()
        + "version=0";
    for (i, m) in c.members.iter().enumerate() {
        let conf = common::cluster::four_letter_at(m.client, "conf").unwrap();
        let quorum_part = format!(
            "serverId={}\ninitLimit=10\nsyncLimit={SYNC_LIMIT}\nelectionAlg=3\n\
             electionPort={}\nquorumPort={}\npeerType=0\nmembership: \n{membership}",
            m.id,
            m.election.port(),
            m.quorum.port()
        );
        assert!(
            conf.ends_with(&quorum_part),
            "server {} conf:\n{conf}",
            i + 1
        );

        let mut conn = session_on(&c, i);
        let r = conn
            .call(OP_GET_DATA, &get_body("/zookeeper/config", false))
            .unwrap();
        assert_eq!(r.err, 0);
        let mut rd = Rd(&r.body);
        let data = rd.buf().unwrap_or_default();
        let stat = parse_stat(&mut rd);
        assert_eq!(
            String::from_utf8_lossy(&data),
            membership,
            "server {}",
            i + 1
        );
        assert_eq!(
            (stat.version, stat.mzxid),
            (-1, 0),
            "/zookeeper/config stat"
        );
    }
}

/// A client that reconnects with its session on another server moves the
/// session there (the server asks the leader: REVALIDATE); a write still
/// sent on its old connection is refused with SESSIONMOVED, which closes
/// that connection unanswered (ZOOKEEPER-710), and the session goes on
/// through its new server.
#[test]
fn a_moved_session_refuses_writes_from_its_old_server() {
    moved_session(|leader| ((leader + 1) % 3, (leader + 2) % 3));
}

/// The same, moving from the leader to a follower: the leader's own
/// connection is the old one (checkSession on the leader's local requests).
#[test]
fn a_session_moved_off_the_leader_refuses_writes_there() {
    moved_session(|leader| (leader, (leader + 1) % 3));
}

/// The same, moving from a follower to the leader.
#[test]
fn a_session_moved_to_the_leader_refuses_writes_from_its_follower() {
    moved_session(|leader| ((leader + 1) % 3, leader));
}

/// `servers(leader)`: the (old, new) members the session moves between.
fn moved_session(servers: fn(usize) -> (usize, usize)) {
    let c = Cluster::start(target_flavor(), 3);
    let leader = c.wait_for_leader(ELECTION_TIMEOUT);
    let (a, b) = servers(leader);
    make_parent(&c, "/moved");
    let mut old = session_on(&c, a);
    assert_eq!(create(&mut old, "/moved/before", b"").unwrap(), 0);
    let mut new = Conn::connect_to(
        c.members[b].client,
        old.timeout,
        old.session_id,
        &old.passwd.clone(),
        0,
    )
    .expect("reconnect")
    .expect("the session is accepted on another server");
    assert_eq!(new.session_id, old.session_id);
    let r = old.call(OP_CREATE, &create_body("/moved/old-connection", b"", 0));
    assert!(
        r.is_err(),
        "the old connection was answered instead of closed: {r:?}"
    );
    assert_eq!(create(&mut new, "/moved/after", b"").unwrap(), 0);
    let mut check = session_on(&c, leader);
    let kids = children_after_sync(&mut check, "/moved");
    assert_eq!(
        kids.into_iter().collect::<Vec<_>>(),
        ["after", "before"],
        "the refused write left nothing"
    );
}

/// A follower whose txn log is corrupt (one flipped byte in its first
/// record, acknowledged records after it), restarted while the others go
/// on taking writes.
///
/// ringkeeper (README, Durability): an ensemble member does not refuse to
/// start, as a standalone server does: it sets its snapshots and segments
/// aside in `damaged-<time>/`, starts empty, and the leader syncs it; it
/// then holds every acknowledged write.
///
/// Apache ZooKeeper (RK_TEST_TARGET=zookeeper): the follower refuses to
/// load the corrupt log (CRC check) and exits, leaving its files as they
/// were; the leader and the other follower keep every acknowledged write.
#[test]
fn a_follower_with_a_corrupt_log_resyncs_instead_of_refusing_to_start() {
    let flavor = target_flavor();
    let mut c = Cluster::start(flavor, 3);
    make_parent(&c, "/d");
    let leader = c.wait_for_leader(ELECTION_TIMEOUT);
    let follower = (leader + 1) % 3;
    let w = Writer::start(vec![c.members[leader].client], "/d", 100_000);
    w.wait_for(0, 300, &c);
    c.kill(follower);
    let data = c.dir().join(format!("s{}/data", follower + 1));
    // ZooKeeper keeps its log in version-2/.
    let logs = match flavor {
        common::Flavor::Ringkeeper => data.clone(),
        common::Flavor::ZooKeeper => data.join("version-2"),
    };
    let mut segments: Vec<(u64, std::path::PathBuf)> = std::fs::read_dir(&logs)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter_map(|p| {
            let hex = p.file_name()?.to_str()?.strip_prefix("log.")?;
            Some((u64::from_str_radix(hex, 16).ok()?, p))
        })
        .collect();
    segments.sort();
    let first = &segments
        .first()
        .unwrap_or_else(|| panic!("the follower has a log segment in {}", logs.display()))
        .1;
    let at = match flavor {
        // Past the 4096-byte segment header and the first record's 24-byte
        // header: a byte of its payload.
        common::Flavor::Ringkeeper => 4096 + 24 + 2,
        // Past the 16-byte file header (magic, version, dbid) and the first
        // record's crc (8) and length (4): a byte of its txn header.
        common::Flavor::ZooKeeper => 16 + 8 + 4 + 2,
    };
    let mut bytes = std::fs::read(first).unwrap();
    assert!(bytes.len() > at + 4096, "the segment holds records");
    bytes[at] ^= 0xff;
    std::fs::write(first, &bytes).unwrap();
    let at_restart = w.acked_count();
    c.restart(follower);
    if flavor == common::Flavor::ZooKeeper {
        wait_exited(&c, follower);
        c.kill(follower);
    }
    w.wait_for(at_restart, 200, &c);
    let acked = w.finish();
    assert_eq!(c.wait_for_leader(ELECTION_TIMEOUT), leader);
    check_replicas(&c, "/d", &acked);
    if flavor == common::Flavor::ZooKeeper {
        assert_eq!(
            std::fs::read(first).unwrap(),
            bytes,
            "the corrupt log is left as it was"
        );
        return;
    }
    // It is serving as a follower, and the damaged files are kept.
    assert!(
        c.srvr(follower).contains("Mode: follower"),
        "{}",
        c.report()
    );
    let damaged: Vec<_> = std::fs::read_dir(&data)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("damaged-"))
        })
        .collect();
    assert_eq!(damaged.len(), 1, "one damaged-* dir in {}", data.display());
    let name = first.file_name().unwrap();
    assert_eq!(
        std::fs::read(damaged[0].join(name)).unwrap(),
        bytes,
        "the corrupt segment is kept as it was"
    );
}

/// Waits until member `index`'s process (started, not yet reaped) has
/// exited: it is a zombie or gone.
fn wait_exited(c: &Cluster, index: usize) {
    let pid = c.pid(index).expect("started");
    let exited = || match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the command name in parentheses.
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_none_or(|state| state == "Z" || state == "X"),
        Err(_) => true,
    };
    let start = Instant::now();
    while !exited() {
        assert!(
            start.elapsed() < ELECTION_TIMEOUT,
            "server {} did not exit on its corrupt log within {ELECTION_TIMEOUT:?}\n{}",
            index + 1,
            c.report()
        );
        thread::sleep(Duration::from_millis(100));
    }
    // Its reason, when the Java member's log has a binding to log it.
    let log = std::fs::read_to_string(c.dir().join(format!("s{}/server.log", index + 1)))
        .unwrap_or_default();
    let reason: Vec<&str> = log.lines().filter(|l| l.contains("CRC")).collect();
    eprintln!("server {} exited: {reason:?}", index + 1);
}

/// Snapshot files (ringkeeper's or ZooKeeper's) under member `index`'s
/// data dir.
fn snapshot_files(c: &Cluster, index: usize) -> Vec<String> {
    let mut found = Vec::new();
    let mut dirs = vec![c.dir().join(format!("s{}", index + 1)).join("data")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if entry.path().is_dir() {
                dirs.push(entry.path());
            } else if name.starts_with("snapshot.") && !name.ends_with(".tmp") {
                found.push(name);
            }
        }
    }
    found
}

/// autopurge as operators' zoo.cfg files have it, in an ensemble: with
/// snapshots every few dozen txns and three kept, members purge as they
/// go, and a follower killed and restarted behind, the leader killed, and
/// the old leader restarted all come back with every acknowledged write.
#[test]
fn autopurge_in_an_ensemble_keeps_every_acknowledged_write() {
    let mut c = Cluster::start_with_cfg(
        target_flavor(),
        3,
        "snapCount=40\nautopurge.snapRetainCount=3\nautopurge.purgeInterval=1\n",
    );
    make_parent(&c, "/p");
    let leader = c.wait_for_leader(ELECTION_TIMEOUT);
    let value = vec![b'v'; 1024];
    let mut acked = BTreeSet::new();
    // Creates are resent on a dropped connection (create_resending).
    let write = |c: &Cluster, acked: &mut BTreeSet<String>, on: usize, tag: &str, n: usize| {
        let mut conn = session_on(c, on);
        for k in 0..n {
            let name = format!("{tag}-{k:04}");
            let err = create_resending(c, on, &mut conn, &format!("/p/{name}"), &value);
            assert_eq!(err, 0, "create {name} via server {}", on + 1);
            acked.insert(name);
        }
    };
    write(&c, &mut acked, leader, "a", 400);
    let follower = (leader + 1) % 3;
    c.kill(follower);
    write(&c, &mut acked, leader, "b", 400);
    c.restart(follower);
    assert_eq!(c.wait_for_leader(ELECTION_TIMEOUT), leader);
    write(&c, &mut acked, follower, "c", 200);
    check_replicas(&c, "/p", &acked);

    c.kill(leader);
    let next = c.wait_for_leader(ELECTION_TIMEOUT);
    write(&c, &mut acked, next, "d", 300);
    c.restart(leader);
    assert_eq!(c.wait_for_leader(ELECTION_TIMEOUT), next);
    write(&c, &mut acked, leader, "e", 100);
    check_replicas(&c, "/p", &acked);

    // Apache ZooKeeper purges on a timer (at start, then every
    // purgeInterval hours); ringkeeper after each snapshot.
    if target_flavor() == common::Flavor::Ringkeeper {
        for i in 0..3 {
            let snapshots = snapshot_files(&c, i);
            assert!(
                (1..=4).contains(&snapshots.len()),
                "server {} keeps {} snapshots after 1,400 writes: {snapshots:?}",
                i + 1,
                snapshots.len()
            );
        }
    }
}
