//! Members that lose their disk, on real processes (issue 26, section 1,
//! defects 1, 4 and 6): a member whose txn log is damaged must never lead
//! or count toward a new epoch until a leader established without it has
//! synced it, so an ensemble whose only up-to-date members are damaged is
//! unavailable, as Apache ZooKeeper's is (there the damaged member refuses
//! to start), and nothing acknowledged is truncated anywhere; srvr, stat,
//! mntr and the log say which member waits. Also: a joiner finishes its
//! sync under saturating writes, and `ringkeeper.epochCounterLimit` starts
//! new epochs in an ensemble.
//!
//! Every test runs against Apache ZooKeeper too (RK_TEST_TARGET=zookeeper):
//! the checks of what both must do are the same, and where the two differ
//! (ringkeeper starts a damaged member empty, ZooKeeper's exits) each
//! flavor's expected behaviour is asserted.

mod common;

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use common::cluster::{four_letter_at, Cluster, TICK_MS};
use common::ensemble_client::*;
use common::raw_fallible::*;
use common::{target_flavor, Flavor};

/// `initLimit` in the harness's zoo.cfg (tests/common/cluster.rs).
const INIT_LIMIT: u64 = 10;
/// How long an ensemble without a quorum is watched: many election rounds
/// at the harness's tickTime (200 ms).
const UNAVAILABLE_FOR: Duration = Duration::from_secs(8);
/// Bound on a process starting (a JVM on a busy machine included) or
/// exiting.
const PROCESS_TIMEOUT: Duration = Duration::from_secs(60);
/// What srvr and stat add on a member waiting for its sync after losing
/// its disk (ringkeeper).
const LOST_DISK_LINE: &str = "This member lost its disk";
const LOST_DISK_MARKER: &str = "ringkeeper.lost-disk";

fn name(i: usize) -> String {
    format!("server {}", i + 1)
}

fn data_dir(c: &Cluster, i: usize) -> PathBuf {
    c.dir().join(format!("s{}", i + 1)).join("data")
}

fn server_log(c: &Cluster, i: usize) -> String {
    std::fs::read_to_string(c.dir().join(format!("s{}", i + 1)).join("server.log"))
        .unwrap_or_default()
}

/// Whether member `i`'s process (started, not yet reaped) has exited: it
/// is a zombie or gone.
fn exited(c: &Cluster, i: usize) -> bool {
    let Some(pid) = c.pid(i) else {
        return true;
    };
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the command name in parentheses.
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_none_or(|state| state == "Z" || state == "X"),
        Err(_) => true,
    }
}

fn wait_exited(c: &Cluster, i: usize, why: &str) {
    let start = Instant::now();
    while !exited(c, i) {
        assert!(
            start.elapsed() < PROCESS_TIMEOUT,
            "{} did not exit ({why}) within {PROCESS_TIMEOUT:?}\n{}",
            name(i),
            c.report()
        );
        thread::sleep(Duration::from_millis(100));
    }
    let log = server_log(c, i);
    // The last run's lines (the log is appended to at each start).
    let mut reason: Vec<&str> = log
        .lines()
        .rev()
        .filter(|l| l.contains("CRC") || l.contains("exiting abnormally"))
        .take(2)
        .collect();
    reason.reverse();
    eprintln!("{} exited ({why}): {reason:?}", name(i));
}

/// Waits until member `i` answers srvr with something containing `what`;
/// returns the answer.
fn wait_srvr(c: &Cluster, i: usize, what: &str) -> String {
    let start = Instant::now();
    loop {
        let s = c.srvr(i);
        if s.contains(what) {
            return s;
        }
        assert!(
            !exited(c, i),
            "{} exited; expected srvr to say {what:?}\n{}",
            name(i),
            c.report()
        );
        assert!(
            start.elapsed() < PROCESS_TIMEOUT,
            "{} did not answer srvr with {what:?} within {PROCESS_TIMEOUT:?}\n{}",
            name(i),
            c.report()
        );
        thread::sleep(Duration::from_millis(50));
    }
}

/// Waits until member `i` answers srvr at all (serving or not).
fn wait_answers(c: &Cluster, i: usize) {
    let start = Instant::now();
    while c.srvr(i).is_empty() {
        assert!(
            !exited(c, i),
            "{} exited before it answered\n{}",
            name(i),
            c.report()
        );
        assert!(
            start.elapsed() < PROCESS_TIMEOUT,
            "{} does not answer srvr after {PROCESS_TIMEOUT:?}\n{}",
            name(i),
            c.report()
        );
        thread::sleep(Duration::from_millis(20));
    }
}

fn mntr(c: &Cluster, i: usize) -> String {
    four_letter_at(c.members[i].client, "mntr").unwrap_or_default()
}

fn mntr_value(text: &str, key: &str) -> Option<String> {
    text.lines()
        .filter_map(|l| l.split_once('\t'))
        .find(|(k, _)| *k == key)
        .map(|(_, v)| v.to_string())
}

fn epoch_of(zxid: i64) -> i64 {
    zxid >> 32
}

/// Files under member `i`'s data dir (version-2/ for ZooKeeper) named
/// `<prefix><hex>`, outside the `damaged-*` directories.
fn member_files(c: &Cluster, i: usize, prefix: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut dirs = vec![data_dir(c, i)];
    while let Some(dir) = dirs.pop() {
        for e in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let p = e.path();
            let n = e.file_name().to_string_lossy().into_owned();
            if p.is_dir() {
                if !n.starts_with("damaged-") {
                    dirs.push(p);
                }
            } else if n
                .strip_prefix(prefix)
                .is_some_and(|hex| !hex.is_empty() && u64::from_str_radix(hex, 16).is_ok())
            {
                found.push(p);
            }
        }
    }
    found.sort();
    found
}

fn log_files(c: &Cluster, i: usize) -> Vec<PathBuf> {
    member_files(c, i, "log.")
}

/// Flips one byte of the (unique) log record of member `i` that holds
/// `needle` (a znode path, in its payload in both ringkeeper's and
/// ZooKeeper's formats): its checksum no longer matches, and the records
/// after it show it had been acknowledged.
fn flip_byte_in_record(c: &Cluster, i: usize, needle: &str) {
    let mut hits = Vec::new();
    for f in log_files(c, i) {
        let bytes = std::fs::read(&f).unwrap();
        for (at, w) in bytes.windows(needle.len()).enumerate() {
            if w == needle.as_bytes() {
                hits.push((f.clone(), at));
            }
        }
    }
    assert_eq!(
        hits.len(),
        1,
        "{needle} once in the logs of {}: {hits:?}",
        name(i)
    );
    let (file, at) = &hits[0];
    let mut bytes = std::fs::read(file).unwrap();
    bytes[at + needle.len() - 1] ^= 0xff;
    std::fs::write(file, &bytes).unwrap();
    eprintln!(
        "flipped byte {} of {} ({needle})",
        at + needle.len() - 1,
        file.display()
    );
}

/// The log segments and snapshots of a stopped member, as they were.
struct Kept {
    member: usize,
    files: Vec<(PathBuf, Vec<u8>)>,
}

fn keep(c: &Cluster, i: usize) -> Kept {
    let mut paths = log_files(c, i);
    paths.extend(member_files(c, i, "snapshot."));
    assert!(
        paths.iter().any(|p| p.to_string_lossy().contains("log.")),
        "{} has a txn log",
        name(i)
    );
    Kept {
        member: i,
        files: paths
            .into_iter()
            .map(|p| {
                let b = std::fs::read(&p).unwrap();
                (p, b)
            })
            .collect(),
    }
}

impl Kept {
    /// What changed: files gone, or changed anywhere before the end of
    /// what was written in them (preallocated logs end in zeros, which
    /// later records may fill).
    fn changes(&self) -> Vec<String> {
        let mut out = Vec::new();
        for (p, was) in &self.files {
            let written = was.iter().rposition(|b| *b != 0).map_or(0, |e| e + 1);
            match std::fs::read(p) {
                Err(e) => out.push(format!("{}: {e}", p.display())),
                Ok(now) if now.len() < written || now[..written] != was[..written] => {
                    let first = was[..written.min(now.len())]
                        .iter()
                        .zip(&now)
                        .position(|(a, b)| a != b)
                        .unwrap_or(now.len());
                    out.push(format!(
                        "{}: {written} written bytes, now {} bytes, first change at {first}",
                        p.display(),
                        now.len()
                    ))
                }
                Ok(_) => {}
            }
        }
        out
    }

    /// Files byte for byte as they were (nothing appended either).
    fn identical(&self) -> Vec<String> {
        self.files
            .iter()
            .filter(|(p, was)| std::fs::read(p).ok().as_ref() != Some(was))
            .map(|(p, _)| p.display().to_string())
            .collect()
    }
}

/// Creates `parent/<name>` for each name through a session on member `on`,
/// every one acknowledged; returns the zxid of each.
fn create_all(c: &Cluster, on: usize, parent: &str, names: &[String]) -> Vec<i64> {
    let mut conn = session_on(c, on);
    names
        .iter()
        .map(|n| {
            let r = conn
                .call(OP_CREATE, &create_body(&format!("{parent}/{n}"), b"v", 0))
                .unwrap_or_else(|e| panic!("create {parent}/{n} via {}: {e}", name(on)));
            assert_eq!(r.err, 0, "create {parent}/{n} via {}", name(on));
            r.zxid
        })
        .collect()
}

/// How many of `names` member `i` holds under `parent` (after a sync;
/// a missing parent holds none).
fn present(c: &Cluster, i: usize, parent: &str, names: &BTreeSet<String>) -> usize {
    let mut conn = session_on(c, i);
    let r = conn.call(OP_SYNC, &path_body(parent)).expect("sync");
    assert!(
        r.err == 0 || r.err == ERR_NO_NODE,
        "sync {parent}: {}",
        r.err
    );
    let r = conn
        .call(OP_GET_CHILDREN, &get_body(parent, false))
        .expect("getChildren");
    if r.err == ERR_NO_NODE {
        return 0;
    }
    assert_eq!(r.err, 0, "getChildren {parent}");
    let mut rd = Rd(&r.body);
    let n = rd.i32();
    let kids: BTreeSet<String> = (0..n).map(|_| rd.str()).collect();
    names.intersection(&kids).count()
}

/// Watches `members` for `for_`: none may serve (srvr with a `Mode:`
/// line), and each must answer that it is not serving. Returns what went
/// wrong.
fn watch_unavailable(c: &Cluster, members: &[usize], for_: Duration) -> Vec<String> {
    let start = Instant::now();
    let mut served: Vec<Option<String>> = vec![None; c.size()];
    let mut answered = vec![false; c.size()];
    while start.elapsed() < for_ {
        for &i in members {
            let s = c.srvr(i);
            if s.contains("not currently serving") {
                answered[i] = true;
            }
            if served[i].is_none() {
                if let Some(mode) = s.lines().find(|l| l.starts_with("Mode: ")) {
                    served[i] = Some(format!(
                        "{} served ({mode}) {:?} into the watch",
                        name(i),
                        start.elapsed()
                    ));
                }
            }
        }
        thread::sleep(Duration::from_millis(100));
    }
    let mut out: Vec<String> = served.into_iter().flatten().collect();
    for &i in members {
        if !answered[i] {
            out.push(format!("{} never said it was not serving", name(i)));
        }
    }
    out
}

/// The lost-disk state of a ringkeeper member that set its files aside:
/// srvr and stat say so, the marker is in its dataDir, and its log says
/// so. Returns what is missing.
fn lost_disk_shown(c: &Cluster, i: usize) -> Vec<String> {
    let mut out = Vec::new();
    for word in ["srvr", "stat"] {
        let answer = four_letter_at(c.members[i].client, word).unwrap_or_default();
        if !answer.contains(LOST_DISK_LINE) {
            out.push(format!(
                "{}'s {word} does not mention its lost disk: {answer:?}",
                name(i)
            ));
        }
    }
    if !data_dir(c, i).join(LOST_DISK_MARKER).exists() {
        out.push(format!("no {LOST_DISK_MARKER} in {}'s dataDir", name(i)));
    }
    if !server_log(c, i).contains("lost its disk") {
        out.push(format!("{}'s log does not mention its lost disk", name(i)));
    }
    out
}

/// mntr on a ringkeeper member waiting after losing its disk carries
/// `zk_lost_disk_awaiting_sync 1`. Returns what is wrong.
fn lost_disk_in_mntr(c: &Cluster, i: usize) -> Vec<String> {
    let m = mntr(c, i);
    match mntr_value(&m, "zk_lost_disk_awaiting_sync").as_deref() {
        Some("1") => Vec::new(),
        other => vec![format!(
            "{}'s mntr has zk_lost_disk_awaiting_sync {other:?}, not 1 (zk_server_state {:?})",
            name(i),
            mntr_value(&m, "zk_server_state")
        )],
    }
}

/// Waits (bounded) until member `i` has no lost-disk marker and its srvr
/// no longer mentions it; returns what is still there at the bound.
fn wait_lost_disk_cleared(c: &Cluster, i: usize) -> Vec<String> {
    let start = Instant::now();
    loop {
        let marker = data_dir(c, i).join(LOST_DISK_MARKER).exists();
        let srvr = c.srvr(i);
        if !marker && !srvr.contains(LOST_DISK_LINE) {
            return Vec::new();
        }
        if start.elapsed() > ELECTION_TIMEOUT {
            return vec![format!(
                "{} still shows its lost disk after {ELECTION_TIMEOUT:?} (marker: {marker}, \
                 srvr: {srvr:?})",
                name(i)
            )];
        }
        thread::sleep(Duration::from_millis(100));
    }
}

fn has_damaged_dir(c: &Cluster, i: usize) -> bool {
    std::fs::read_dir(data_dir(c, i))
        .unwrap()
        .flatten()
        .any(|e| e.file_name().to_string_lossy().starts_with("damaged-"))
}

fn fail_if_any(what: &str, failures: &[String], c: &Cluster) {
    assert!(
        failures.is_empty(),
        "{what}:\n  {}\n{}",
        failures.join("\n  "),
        c.report()
    );
}

/// Defect 1. Writes 1-100 on A, B and C; B down; C restarted, so that A
/// and C establish a newer epoch; writes 101-200 on A and C; A and C down;
/// a byte of A's record of write 150 flipped; A and B start. A cannot
/// count (ringkeeper: it lost its disk and abstains; ZooKeeper: it refuses
/// to start) and B alone is no quorum: nobody serves, B keeps its log.
/// C starts: a leader, and all 200 writes on every member.
///
/// The checks are collected and reported together, so that a run on a
/// server without the rule shows the whole outcome (on c4c51c5: A leads
/// with an empty log and every member ends with none of the 200).
#[test]
fn a_member_with_a_damaged_log_never_leads_and_truncates_nobody() {
    let flavor = target_flavor();
    let (a, b, cc) = (0, 1, 2);
    let mut c = Cluster::start(flavor, 3);
    let mut failures = Vec::new();
    make_parent(&c, "/lost");
    let names: Vec<String> = (0..200).map(|k| format!("n{k:03}")).collect();
    let all: BTreeSet<String> = names.iter().cloned().collect();

    let leader = c.wait_for_leader(ELECTION_TIMEOUT);
    let first = create_all(&c, leader, "/lost", &names[..100]);
    wait_converged(&c);

    c.kill(b);
    c.kill(cc);
    // A drops out of the old epoch (a leader without a quorum steps down)
    // before C returns, so that A and C establish a new one.
    wait_srvr(&c, a, "not currently serving");
    c.restart(cc);
    let leader = c.wait_for_leader_among(&[a, cc], ELECTION_TIMEOUT);
    let second = create_all(&c, leader, "/lost", &names[100..]);
    wait_converged(&c);
    assert!(
        epoch_of(second[0]) > epoch_of(first[99]),
        "A and C established a newer epoch: {:#x} then {:#x}",
        first[99],
        second[0]
    );

    c.kill(a);
    c.kill(cc);
    flip_byte_in_record(&c, a, "/lost/n150");
    let b_files = keep(&c, b);
    c.restart(a);
    c.restart(b);

    match flavor {
        Flavor::ZooKeeper => wait_exited(&c, a, "a corrupt txn log refuses startup"),
        // A sets its files aside and comes up empty.
        Flavor::Ringkeeper => wait_answers(&c, a),
    }
    wait_answers(&c, b);
    let watched: Vec<usize> = [a, b].into_iter().filter(|i| !exited(&c, *i)).collect();
    if flavor == Flavor::Ringkeeper && watched.len() != 2 {
        failures.push(format!("a member exited: {watched:?} left"));
    }
    failures.extend(watch_unavailable(&c, &watched, UNAVAILABLE_FOR));
    failures.extend(
        b_files
            .changes()
            .into_iter()
            .map(|ch| format!("{} lost logged data: {ch}", name(b_files.member))),
    );
    match flavor {
        Flavor::Ringkeeper => {
            failures.extend(lost_disk_shown(&c, a));
            if !has_damaged_dir(&c, a) {
                failures.push(format!("no damaged-* dir in {}'s dataDir", name(a)));
            }
        }
        Flavor::ZooKeeper => {
            assert!(exited(&c, a), "ZooKeeper's A stays down");
            c.kill(a); // reaps it: not a live member from here on
        }
    }

    c.restart(cc);
    c.wait_for_leader(ELECTION_TIMEOUT);
    let live: Vec<usize> = (0..3).filter(|i| c.is_up(*i)).collect();
    let expected_live = match flavor {
        Flavor::Ringkeeper => vec![a, b, cc],
        Flavor::ZooKeeper => vec![b, cc],
    };
    assert_eq!(live, expected_live, "live members");
    wait_converged(&c);
    let counts: Vec<(usize, usize)> = live
        .iter()
        .map(|&i| (i, present(&c, i, "/lost", &all)))
        .collect();
    for &(i, n) in &counts {
        if n != all.len() {
            failures.push(format!(
                "{} holds {n} of the 200 acknowledged znodes",
                name(i)
            ));
        }
    }
    eprintln!("znodes held at the end (of 200): {counts:?}");
    if flavor == Flavor::Ringkeeper {
        failures.extend(wait_lost_disk_cleared(&c, a));
        if !c.srvr(a).contains("Mode: follower") {
            failures.push(format!("{} is not a follower: {:?}", name(a), c.srvr(a)));
        }
    }
    fail_if_any("a damaged member's ensemble", &failures, &c);
}

/// Removes everything in member `to`'s data dir but its myid and copies
/// member `from`'s data files there (as an operator replaces a failed
/// member's disk with a healthy member's data).
fn replace_data_with_copy(c: &Cluster, from: usize, to: usize) {
    let (src, dst) = (data_dir(c, from), data_dir(c, to));
    for e in std::fs::read_dir(&dst).unwrap().flatten() {
        if e.file_name() == "myid" {
            continue;
        }
        let p = e.path();
        if p.is_dir() {
            std::fs::remove_dir_all(&p).unwrap();
        } else {
            std::fs::remove_file(&p).unwrap();
        }
    }
    fn copy(src: &Path, dst: &Path) {
        for e in std::fs::read_dir(src).unwrap().flatten() {
            let (s, d) = (e.path(), dst.join(e.file_name()));
            if s.is_dir() {
                std::fs::create_dir_all(&d).unwrap();
                copy(&s, &d);
            } else if e.file_name() != "myid" {
                std::fs::copy(&s, &d).unwrap();
            }
        }
    }
    copy(&src, &dst);
}

/// Two damaged members out of three: writes on all three, all stopped, a
/// byte flipped in an acknowledged record of two of them, all started.
/// Nobody serves (ringkeeper: two members abstain; ZooKeeper: two refuse
/// to start) and the healthy member's log and snapshots stay byte for
/// byte as they were. Then the healthy member's data, copied onto one of
/// the damaged members (an operator's repair), gives a quorum that holds
/// every acknowledged write: the healthy member kept them all.
#[test]
fn two_damaged_members_of_three_leave_it_unavailable_and_truncate_nothing() {
    let flavor = target_flavor();
    let mut c = Cluster::start(flavor, 3);
    let mut failures = Vec::new();
    make_parent(&c, "/two");
    let names: Vec<String> = (0..100).map(|k| format!("n{k:03}")).collect();
    let all: BTreeSet<String> = names.iter().cloned().collect();
    let leader = c.wait_for_leader(ELECTION_TIMEOUT);
    // Through every member.
    for (i, chunk) in names.chunks(34).enumerate() {
        create_all(&c, i % 3, "/two", chunk);
    }
    wait_converged(&c);
    for i in 0..3 {
        c.kill(i);
    }
    let healthy = (leader + 1) % 3;
    let damaged = [leader, (leader + 2) % 3];
    for &i in &damaged {
        flip_byte_in_record(&c, i, "/two/n050");
    }
    let kept = keep(&c, healthy);
    for i in 0..3 {
        c.restart(i);
    }

    for &i in &damaged {
        match flavor {
            Flavor::ZooKeeper => wait_exited(&c, i, "a corrupt txn log refuses startup"),
            Flavor::Ringkeeper => wait_answers(&c, i),
        }
    }
    wait_answers(&c, healthy);
    let watched: Vec<usize> = (0..3).filter(|i| !exited(&c, *i)).collect();
    failures.extend(watch_unavailable(&c, &watched, UNAVAILABLE_FOR));
    failures.extend(
        kept.identical()
            .into_iter()
            .map(|f| format!("the healthy {}'s {f} changed", name(kept.member))),
    );
    if flavor == Flavor::Ringkeeper {
        for &i in &damaged {
            failures.extend(lost_disk_shown(&c, i));
        }
    }

    // The repair: the healthy member's data onto the first damaged one.
    for i in 0..3 {
        c.kill(i);
    }
    let (repaired, still_damaged) = (damaged[0], damaged[1]);
    replace_data_with_copy(&c, healthy, repaired);
    for i in 0..3 {
        c.restart(i);
    }
    if flavor == Flavor::ZooKeeper {
        wait_exited(&c, still_damaged, "its txn log is still corrupt");
        c.kill(still_damaged);
    }
    c.wait_for_leader(ELECTION_TIMEOUT);
    wait_converged(&c);
    for i in (0..3).filter(|i| c.is_up(*i)) {
        let n = present(&c, i, "/two", &all);
        if n != all.len() {
            failures.push(format!(
                "{} holds {n} of the 100 acknowledged znodes",
                name(i)
            ));
        }
    }
    if flavor == Flavor::Ringkeeper {
        // The member still damaged was synced by the established leader.
        failures.extend(wait_lost_disk_cleared(&c, still_damaged));
    }
    fail_if_any("two damaged members of three", &failures, &c);
}

/// Sessions writing with several requests outstanding each (setData on a
/// znode of their own), until stopped, for at most `LOAD_TIME` or
/// `LOAD_WRITES_MAX` writes each.
struct Load {
    stop: Arc<AtomicBool>,
    acked: Arc<AtomicU64>,
    threads: Vec<thread::JoinHandle<Result<u64, String>>>,
}

const LOAD_SESSIONS: usize = 32;
const LOAD_OUTSTANDING: usize = 8;
const LOAD_TIME: Duration = Duration::from_secs(90);
const LOAD_WRITES_MAX: u64 = 200_000;

impl Load {
    fn start(addrs: &[SocketAddr], parent: &str) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let acked = Arc::new(AtomicU64::new(0));
        let threads = (0..LOAD_SESSIONS)
            .map(|k| {
                let (stop, acked) = (stop.clone(), acked.clone());
                let addr = addrs[k % addrs.len()];
                let path = format!("{parent}/s{k:02}");
                thread::spawn(move || -> Result<u64, String> {
                    let mut conn = session(addr).map_err(|e| format!("{path}: session: {e}"))?;
                    let deadline = Instant::now() + LOAD_TIME;
                    let body = set_body(&path, b"load", -1);
                    let (mut sent, mut done) = (0u64, 0u64);
                    loop {
                        let go = !stop.load(Ordering::Relaxed)
                            && Instant::now() < deadline
                            && sent < LOAD_WRITES_MAX;
                        while go && sent - done < LOAD_OUTSTANDING as u64 {
                            conn.send(OP_SET_DATA, &body)
                                .map_err(|e| format!("{path}: send: {e}"))?;
                            sent += 1;
                        }
                        if sent == done {
                            return Ok(done);
                        }
                        let r = conn.recv().map_err(|e| format!("{path}: recv: {e}"))?;
                        if r.err != 0 {
                            return Err(format!("{path}: setData answered {}", r.err));
                        }
                        done += 1;
                        acked.fetch_add(1, Ordering::Relaxed);
                    }
                })
            })
            .collect();
        Load {
            stop,
            acked,
            threads,
        }
    }

    fn acked(&self) -> u64 {
        self.acked.load(Ordering::Relaxed)
    }

    /// Stops the writers (each waits for its outstanding replies); every
    /// session's count of acknowledged writes.
    fn finish(self) -> Vec<Result<u64, String>> {
        self.stop.store(true, Ordering::Relaxed);
        self.threads
            .into_iter()
            .map(|t| t.join().unwrap_or_else(|_| Err("panicked".into())))
            .collect()
    }
}

/// Defect 4's guard: a member that joins while two members take a
/// saturating write load finishes its sync (the leader counts two synced
/// followers) within initLimit x tickTime of answering, plus a margin,
/// and the writes go on being acknowledged; afterwards it holds what they
/// wrote.
#[test]
fn a_joiner_syncs_within_init_limit_under_saturating_writes() {
    let flavor = target_flavor();
    let mut c = Cluster::start(flavor, 3);
    make_parent(&c, "/load");
    let leader = c.wait_for_leader(ELECTION_TIMEOUT);
    let paths: Vec<String> = (0..LOAD_SESSIONS).map(|k| format!("s{k:02}")).collect();
    create_all(&c, leader, "/load", &paths);
    let joiner = (leader + 1) % 3;
    let other = (leader + 2) % 3;
    c.kill(joiner);
    let load = Load::start(
        &[c.members[leader].client, c.members[other].client],
        "/load",
    );
    // Saturated: a few seconds of writes the joiner misses.
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(3) {
        thread::sleep(Duration::from_millis(100));
    }
    let before = load.acked();
    assert!(before > 0, "the load is acknowledged\n{}", c.report());
    c.restart(joiner);
    // From the moment it answers (its process and recovery are not the
    // sync's time).
    wait_answers(&c, joiner);
    let answered = Instant::now();
    let bound = Duration::from_millis(INIT_LIMIT * TICK_MS) + Duration::from_secs(5);
    let synced_after = loop {
        if mntr_value(&mntr(&c, leader), "zk_synced_followers").as_deref() == Some("2") {
            break answered.elapsed();
        }
        if answered.elapsed() > bound {
            let load = load.finish();
            panic!(
                "the joiner was not synced within {bound:?} (initLimit x tickTime + 5 s) \
                 under load; leader mntr:\n{}\nload: {load:?}\n{}",
                mntr(&c, leader),
                c.report()
            );
        }
        thread::sleep(Duration::from_millis(20));
    };
    let at_sync = load.acked();
    // Writes keep being acknowledged with the joiner in.
    let start = Instant::now();
    while load.acked() < at_sync + 2_000 {
        assert!(
            start.elapsed() < ELECTION_TIMEOUT,
            "writes stalled after the join: {} acked\n{}",
            load.acked(),
            c.report()
        );
        thread::sleep(Duration::from_millis(20));
    }
    let per_session = load.finish();
    eprintln!(
        "{before} writes acknowledged before the restart, {at_sync} when the leader counted \
         two synced followers {synced_after:?} after the joiner answered; {} in all",
        per_session.iter().flatten().sum::<u64>()
    );
    let errors: Vec<&String> = per_session
        .iter()
        .filter_map(|r| r.as_ref().err())
        .collect();
    assert!(
        errors.is_empty(),
        "writers failed: {errors:?}\n{}",
        c.report()
    );
    assert_eq!(c.wait_for_leader(ELECTION_TIMEOUT), leader, "same leader");
    // Every member holds each session's writes: its znode's version counts
    // them.
    wait_converged(&c);
    for i in 0..3 {
        let mut conn = session_on(&c, i);
        for (k, acked) in per_session.iter().enumerate() {
            let acked = *acked.as_ref().unwrap();
            let r = conn
                .call(OP_EXISTS, &get_body(&format!("/load/s{k:02}"), false))
                .unwrap();
            assert_eq!(r.err, 0);
            let stat = parse_stat(&mut Rd(&r.body));
            assert_eq!(
                stat.version as u64,
                acked,
                "/load/s{k:02} on {}: version against acknowledged setData",
                name(i)
            );
        }
    }
}

/// Defect 6: with `ringkeeper.epochCounterLimit=100` an ensemble's leader
/// steps down when the zxid counter reaches 100, and the next election
/// starts a new epoch: 350 writes span at least three epochs, every
/// acknowledged write is on every member, and no member exits. Apache
/// ZooKeeper ignores the key (it rolls over at counter 0xffffffff): there
/// the writes stay in one epoch.
#[test]
fn an_epoch_counter_limit_starts_new_epochs_in_an_ensemble() {
    const LIMIT: i64 = 100;
    let flavor = target_flavor();
    let c = Cluster::start_with_cfg(
        flavor,
        3,
        &format!("ringkeeper.epochCounterLimit={LIMIT}\n"),
    );
    make_parent(&c, "/epoch");
    let w = Writer::start(addrs(&c), "/epoch", 100_000);
    w.wait_for(0, 350, &c);
    let acked = w.finish();
    c.wait_for_leader(ELECTION_TIMEOUT);
    check_replicas(&c, "/epoch", &acked);
    for i in 0..3 {
        assert!(!exited(&c, i), "{} exited\n{}", name(i), c.report());
    }
    // The czxid of every acknowledged znode.
    let mut conn = session_on(&c, 0);
    let zxids: Vec<i64> = acked
        .iter()
        .map(|n| {
            let r = conn
                .call(OP_EXISTS, &get_body(&format!("/epoch/{n}"), false))
                .unwrap();
            assert_eq!(r.err, 0, "/epoch/{n}");
            parse_stat(&mut Rd(&r.body)).czxid
        })
        .collect();
    let epochs: BTreeSet<i64> = zxids.iter().map(|z| epoch_of(*z)).collect();
    let max_counter = zxids.iter().map(|z| z & 0xffff_ffff).max().unwrap();
    eprintln!(
        "{} writes acknowledged, in epochs {epochs:?}, highest counter {max_counter:#x}",
        acked.len()
    );
    let (first, last) = (*epochs.first().unwrap(), *epochs.last().unwrap());
    match flavor {
        Flavor::Ringkeeper => {
            assert!(
                last - first >= 2 && epochs.len() >= 3,
                "the epoch advanced at least twice over {} writes: {epochs:?}",
                acked.len()
            );
            assert!(
                max_counter <= LIMIT,
                "no counter beyond the limit: {max_counter:#x}"
            );
        }
        Flavor::ZooKeeper => assert_eq!(first, last, "one epoch: {epochs:?}"),
    }
}

/// What an operator reads of a member that lost its disk and waits: one
/// member's log damaged, it starts alone. ringkeeper: srvr and stat say
/// it lost its disk, mntr carries `zk_lost_disk_awaiting_sync 1`, the
/// marker is in its dataDir, its log says so; once the other two start
/// and sync it, all of that is gone and it holds every write. ZooKeeper:
/// the damaged member exits (CRC check failed), the other two serve
/// every write.
#[test]
fn a_member_waiting_after_losing_its_disk_says_so_until_synced() {
    let flavor = target_flavor();
    let mut c = Cluster::start(flavor, 3);
    let mut failures = Vec::new();
    make_parent(&c, "/obs");
    let names: Vec<String> = (0..30).map(|k| format!("n{k:03}")).collect();
    let all: BTreeSet<String> = names.iter().cloned().collect();
    let leader = c.wait_for_leader(ELECTION_TIMEOUT);
    create_all(&c, leader, "/obs", &names);
    wait_converged(&c);
    for i in 0..3 {
        c.kill(i);
    }
    let damaged = 0;
    flip_byte_in_record(&c, damaged, "/obs/n010");
    c.restart(damaged);
    match flavor {
        Flavor::ZooKeeper => {
            wait_exited(&c, damaged, "a corrupt txn log refuses startup");
            c.kill(damaged);
        }
        Flavor::Ringkeeper => {
            wait_srvr(&c, damaged, LOST_DISK_LINE);
            failures.extend(lost_disk_shown(&c, damaged));
            failures.extend(lost_disk_in_mntr(&c, damaged));
        }
    }
    c.restart(1);
    c.restart(2);
    c.wait_for_leader(ELECTION_TIMEOUT);
    wait_converged(&c);
    for i in (0..3).filter(|i| c.is_up(*i)) {
        let n = present(&c, i, "/obs", &all);
        if n != all.len() {
            failures.push(format!(
                "{} holds {n} of the 30 acknowledged znodes",
                name(i)
            ));
        }
    }
    if flavor == Flavor::Ringkeeper {
        failures.extend(wait_lost_disk_cleared(&c, damaged));
        let m = mntr(&c, damaged);
        if let Some(v) = mntr_value(&m, "zk_lost_disk_awaiting_sync").filter(|v| v != "0") {
            failures.push(format!(
                "{}'s mntr still has zk_lost_disk_awaiting_sync {v} once synced",
                name(damaged)
            ));
        }
    }
    fail_if_any("a member that lost its disk", &failures, &c);
}

/// The zxid a log segment's name says it starts at.
fn segment_start(p: &Path) -> i64 {
    let hex = p
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.strip_prefix("log."))
        .expect("a segment name");
    i64::from_str_radix(hex, 16).expect("a zxid")
}

/// A member that lost its disk and crashed while its files were being set
/// aside restarts with the marker and some of them. They move newest
/// first (startup::damaged), so what is left is an older state of its
/// own: here its newest segment, which starts epoch 2, is gone and the
/// older ones and the snapshots are there. It recovers epoch 1's writes,
/// abstains, and an established leader syncs it to all of them. (Moved in
/// any other order, as they once were, the epoch-2 segment alone could be
/// left: recovery reads it as a state the member never had, the leader
/// syncs it by DIFF from there, and it serves without epoch 1's writes.)
/// Ringkeeper only: the marker is its own (ZooKeeper refuses to start on
/// a damaged log).
#[test]
fn a_member_restarted_with_its_disk_partly_set_aside_is_synced_whole() {
    let mut c = Cluster::start(Flavor::Ringkeeper, 3);
    let mut failures = Vec::new();
    make_parent(&c, "/first");
    let first: Vec<String> = (0..20).map(|k| format!("f{k:03}")).collect();
    let leader = c.wait_for_leader(ELECTION_TIMEOUT);
    create_all(&c, leader, "/first", &first);
    wait_converged(&c);
    // A new epoch, which every member's log starts in a segment of its own.
    for i in 0..3 {
        c.kill(i);
    }
    for i in 0..3 {
        c.restart(i);
    }
    let leader = c.wait_for_leader(ELECTION_TIMEOUT);
    make_parent(&c, "/second");
    let second: Vec<String> = (0..20).map(|k| format!("s{k:03}")).collect();
    create_all(&c, leader, "/second", &second);
    wait_converged(&c);
    let m = (0..3).find(|i| *i != leader).expect("a follower");
    c.kill(m);
    let segments = log_files(&c, m);
    let newest = segments.last().cloned().expect("a segment");
    let start = segment_start(&newest);
    assert!(
        epoch_of(start) >= 2 && start & 0xffff_ffff == 1 && segments.len() >= 2,
        "{}'s newest segment starts an epoch after the first ({start:#x}; segments {segments:?})",
        name(m)
    );
    // The set-aside, cut short after its first move: the marker, then the
    // newest segment.
    std::fs::write(data_dir(&c, m).join(LOST_DISK_MARKER), "test\n").unwrap();
    let aside = c.dir().join("half-set-aside");
    std::fs::create_dir_all(&aside).unwrap();
    std::fs::rename(&newest, aside.join(newest.file_name().unwrap())).unwrap();
    c.restart(m);
    failures.extend(wait_lost_disk_cleared(&c, m));
    wait_converged(&c);
    let all_first: BTreeSet<String> = first.iter().cloned().collect();
    let all_second: BTreeSet<String> = second.iter().cloned().collect();
    for i in 0..3 {
        for (parent, all) in [("/first", &all_first), ("/second", &all_second)] {
            let n = present(&c, i, parent, all);
            if n != all.len() {
                failures.push(format!(
                    "{} holds {n} of the {} acknowledged znodes under {parent}",
                    name(i),
                    all.len()
                ));
            }
        }
    }
    fail_if_any(
        "a member restarted with its disk half set aside",
        &failures,
        &c,
    );
}
