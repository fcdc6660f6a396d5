//! A power cut on a follower of a 3-server ensemble, on real processes
//! (issue 26, defect 2): a follower frames each txn log record with
//! `durable_zxid`, the last zxid a completed sync made durable on this
//! member (src/log/record.rs), and recovery tells a torn tail (a write whose
//! sync never completed, which may reach the disk in any page order) from
//! damage by it (src/log/recovery.rs). Framed with the leader's commit
//! point instead, a later record of a write can vouch for an earlier record
//! of the same, unsynced write; a power cut that keeps the later record and
//! loses the earlier one then reads as damage, and the member sets all its
//! data aside.
//!
//! The test writes through the leader from several pipelined sessions at
//! once (so a follower logs several records per write), and kills a
//! follower with SIGKILL in a write whose sync never completed (found in
//! its debug log, `ringkeeper::log_batches`) and that the commit point
//! passed: the ensemble had committed a record of it before a later one
//! of it was proposed, which is when a commit point vouches for a record
//! of the same write. It tears that write out of page order: the first
//! record's bytes are zeroed, the later records of the same write stay.
//! The restarted follower must cut a torn tail there (no `damaged-*`
//! directory, no lost-disk marker), follow again, and every acknowledged
//! write must be on every member. Then every record of the follower's log
//! is checked against the framing rule: its `durable_zxid` is at most what
//! a sync its process completed before the record's write (or the start,
//! or a reload of the log) had made durable.
//!
//! Red on c4c51c5 (with only c216476's two log lines added, so that it
//! finds the writes): there the restarted follower calls the tear damage
//! and sets its files aside, every run.
//!
//! ringkeeper only: it reads ringkeeper's log format and log lines (Apache
//! ZooKeeper has no such framing), so it runs ringkeeper whatever
//! RK_TEST_TARGET says.

mod common;

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fs::OpenOptions;
use std::net::SocketAddr;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use common::cluster::Cluster;
use common::ensemble_client::*;
use common::raw_fallible::*;
use common::Flavor;

/// The members' RUST_LOG: the role, recovery and reload lines (info) and
/// one line per log write and per completed sync (debug).
const LOG_FILTER: &str = "info,ringkeeper::log_batches=debug";
const PARENT: &str = "/pc";
/// Sessions writing through the leader at once, and requests each keeps
/// outstanding.
const WRITERS: usize = 8;
const DEPTH: usize = 8;
/// Bounds on one load phase: creates sent, and time.
const LOAD_BUDGET: usize = 30_000;
const LOAD_DEADLINE: Duration = Duration::from_secs(60);
/// Writes acknowledged in a phase before the follower is killed.
const BEFORE_KILL: usize = 600;
/// Kills of the follower until one lands where it should (see
/// `INSPECTIONS`); a kill that lands elsewhere is followed by a restart.
const ATTEMPTS: usize = 10;
/// Before each kill the follower is frozen (SIGSTOP) at moments spread
/// over its writes, at most this many times, until (1) its log lines end
/// in a write of two records or more whose sync has not completed, (2)
/// that write is on its disk, and (3) the ensemble had committed a record
/// of that write before a later record of it was proposed (a client had
/// its answer for the one before it sent the other): the follower received
/// the COMMIT between the two PROPOSALs. It is then killed (SIGKILL) as it
/// stands. A blind kill meets (1) and (2) about one time in three, and (3)
/// needs the follower to be the slower one: each freeze is a stall, as a
/// slow disk or a scheduling pause makes one (well within syncLimit), after
/// which the follower catches up on proposals and commits back to back.
const INSPECTIONS: usize = 300;
/// How long a frozen member is left before its log is read: writes it had
/// submitted complete in the kernel meanwhile (as they do after a kill).
const IO_SETTLE: Duration = Duration::from_millis(5);
/// The most records the torn write may hold. Recovery's look for a record
/// vouching past a torn spot (log/recovery.rs `durable_beyond`) checksums,
/// at each 8-byte offset of the records after it whose first four bytes
/// read as a length that fits in the preallocated segment, that many bytes
/// (up to 64 MiB): about 80 ms per record after the spot in a debug build,
/// 10 ms in a release one. This keeps a restart within a bound.
const MAX_RECORDS: i64 = 150;
/// Bound on the torn follower's recovery (see `MAX_RECORDS`).
const RECOVERY_TIMEOUT: Duration = Duration::from_secs(180);
const PROCESS_TIMEOUT: Duration = Duration::from_secs(60);

/// One full cycle: kill a follower under pipelined writes, tear its
/// unsynced write out of page order, restart it.
#[test]
fn a_power_cut_tearing_a_followers_unsynced_write_is_cut_as_a_torn_tail() {
    // The harness passes RK_TEST_LOG to the members as RUST_LOG; this is
    // the only test in this binary.
    std::env::set_var("RK_TEST_LOG", LOG_FILTER);
    let started = Instant::now();
    let mut c = Cluster::start(Flavor::Ringkeeper, 3);
    make_parent(&c, PARENT);
    let leader = c.wait_for_leader(ELECTION_TIMEOUT);
    let f = (leader + 1) % 3;
    let mut acked: BTreeSet<String> = BTreeSet::new();
    // Where the follower's current process starts in its log file.
    let mut run_from = 0usize;

    let mut chosen = None;
    let mut before_tear = None;
    for attempt in 0..ATTEMPTS {
        let load = Load::start(c.members[leader].client, &format!("a{attempt}"));
        load.wait_for(BEFORE_KILL, &c);
        let frozen = freeze_in_passed_write(&c, f, run_from, &load);
        // SIGKILL, frozen or not.
        c.kill(f);
        let (done, refused) = load.finish();
        assert_eq!(refused, 0, "creates refused by the leader\n{}", c.report());
        acked.extend(done);
        let log = server_log(&c, f);
        let found = frozen.and_then(|(n, seen)| {
            eprintln!("attempt {}: frozen at inspection {n}", attempt + 1);
            as_frozen(seen, &parse_log(&log[run_from..]), &data_dir(&c, f))
        });
        match found {
            Ok(w) => {
                // The framing rule on the log as the kill left it, the
                // write that is torn below included (asserted at the end,
                // after what the tear does).
                before_tear = Some(framing_violations(&log, &data_dir(&c, f)));
                eprintln!(
                    "attempt {}: the kill landed in write {:#x}..{:#x} ({} records), \
                     its sync not completed; the commit point passed it: {}",
                    attempt + 1,
                    w.first,
                    w.last,
                    w.records.len(),
                    w.passed
                );
                chosen = Some(w);
                break;
            }
            Err(why) => {
                eprintln!("attempt {}: {why}; again", attempt + 1);
                run_from = log.len();
                c.restart(f);
                assert_eq!(c.wait_for_leader(ELECTION_TIMEOUT), leader);
            }
        }
    }
    let w = chosen.unwrap_or_else(|| {
        panic!(
            "no kill in {ATTEMPTS} attempts landed in a write of 2 or more records on \
             the disk, whose sync had not completed and that the commit point had \
             passed\n{}",
            c.report()
        )
    });

    // The power cut: the first record of the write never reached the
    // disk, the later ones of the same write did.
    let first = &w.records[0];
    let len = w.records[1].offset - first.offset;
    let bytes = std::fs::read(&w.segment).unwrap();
    let at = |from: usize, n: usize| &bytes[first.offset + from..first.offset + from + n];
    let payload_len = u32::from_be_bytes(at(0, 4).try_into().unwrap());
    let zxid = i64::from_be_bytes(at(8, 8).try_into().unwrap());
    assert_eq!(
        (zxid, (24 + payload_len as usize + 7) & !7),
        (first.zxid, len),
        "the dump and the frame at {}:{} agree",
        w.segment.display(),
        first.offset
    );
    let vouching: Vec<String> = w.records[1..]
        .iter()
        .filter(|r| r.durable >= first.zxid)
        .map(|r| format!("{:#x} (durable_zxid {:#x})", r.zxid, r.durable))
        .collect();
    let vouching = match &vouching[..] {
        [] => "none".to_string(),
        [some @ .., _] if some.len() < 3 => vouching.join(", "),
        _ => format!("{} of them, from {}", vouching.len(), vouching[0]),
    };
    eprintln!(
        "tearing {:#x} at {}:{} ({len} bytes); later records of the same write that \
         vouch for it: {vouching}",
        first.zxid,
        w.segment.display(),
        first.offset
    );
    let file = OpenOptions::new().write(true).open(&w.segment).unwrap();
    let zeros = vec![0u8; len];
    file.write_all_at(&zeros, first.offset as u64).unwrap();
    file.sync_all().unwrap();
    drop(file);

    let restart_from = server_log(&c, f).len();
    c.restart(f);
    let start = Instant::now();
    let recovered = loop {
        let log = server_log(&c, f);
        let running = parse_log(&log[restart_from..])
            .iter()
            .any(|e| matches!(e, Event::Running { .. }));
        if running {
            // Each recovery: a member that sets its files aside recovers
            // again, empty.
            break log[restart_from..]
                .lines()
                .filter(|l| l.contains(": recovered zxid="))
                .map(|l| {
                    let get = |name| field(l, name).unwrap_or("?");
                    format!("{} in {} ms", get("zxid"), get("ms"))
                })
                .collect::<Vec<_>>()
                .join(", then through ");
        }
        let alive = !matches!(process_state(c.pid(f).unwrap()), None | Some('Z'));
        assert!(
            alive && start.elapsed() < RECOVERY_TIMEOUT,
            "the follower did not get through recovery (within {RECOVERY_TIMEOUT:?})\n{}",
            c.report()
        );
        thread::sleep(Duration::from_millis(50));
    };
    eprintln!("the follower recovered through {recovered}");
    assert_eq!(c.wait_for_leader(ELECTION_TIMEOUT), leader);
    let data = data_dir(&c, f);
    let damaged: Vec<String> = std::fs::read_dir(&data)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("damaged-"))
        .collect();
    let since_restart = server_log(&c, f)[restart_from..].to_string();
    assert!(
        damaged.is_empty(),
        "the follower set its data aside ({damaged:?} in {}) after a power cut that only \
         tore its unsynced write (later records vouching for the torn one: {vouching}); \
         its log since the restart:\n{}",
        data.display(),
        excerpt(&since_restart)
    );
    assert!(
        !data.join("ringkeeper.lost-disk").exists(),
        "a lost-disk marker in {}",
        data.display()
    );
    let srvr = c.srvr(f);
    assert!(srvr.contains("Mode: follower"), "follower srvr: {srvr}");
    let cut = parse_log(&since_restart).into_iter().find_map(|e| match e {
        Event::TornCut { segment, offset } => Some((segment, offset)),
        _ => None,
    });
    let segment_name = w
        .segment
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    assert!(
        cut.as_ref()
            .is_some_and(|(s, o)| s.ends_with(&segment_name) && *o == first.offset),
        "recovery cut a torn tail at {:?}, not at {segment_name}:{}; log since the \
         restart:\n{}",
        cut,
        first.offset,
        excerpt(&since_restart)
    );

    // More writes after the restart, then every member holds every one.
    let load = Load::start(c.members[leader].client, "after");
    load.wait_for(200, &c);
    let (done, refused) = load.finish();
    assert_eq!(refused, 0, "creates refused by the leader\n{}", c.report());
    acked.extend(done);
    check_replicas(&c, PARENT, &acked);
    assert_eq!(c.wait_for_leader(ELECTION_TIMEOUT), leader);

    // The framing rule, on every record the follower held when the kill
    // caught the write torn above, and on every one it holds now.
    c.kill(f);
    let after = framing_violations(&server_log(&c, f), &data);
    for (when, (checked, violations)) in [
        ("when it was killed", before_tear.unwrap()),
        ("at the end", after),
    ] {
        assert!(checked > 0, "the follower's log holds records {when}");
        assert!(
            violations.is_empty(),
            "{} of {checked} records of the follower {when} vouch for more than its \
             completed syncs had made durable, e.g.:\n{}",
            violations.len(),
            violations
                .iter()
                .take(10)
                .cloned()
                .collect::<Vec<_>>()
                .join("\n")
        );
        eprintln!("{when}: the {checked} records of the follower frame by the rule");
    }
    eprintln!(
        "{} writes acknowledged; {:?}",
        acked.len(),
        started.elapsed()
    );
}

/// Checks every record of the segments in `data` against the framing
/// rule, by the log lines of the member's processes (`log`): a record's
/// `durable_zxid` is at most what its process had made durable before the
/// record's write (see `writes_with_bounds`). Returns how many records
/// were checked and what broke the rule.
fn framing_violations(log: &str, data: &Path) -> (usize, Vec<String>) {
    let writes = writes_with_bounds(&parse_log(log));
    let mut checked = 0usize;
    let mut violations = Vec::new();
    let segs = segments(data);
    for seg in &segs {
        let (records, error) = dump(seg);
        if let Some(e) = error {
            // Only a kill of ours can have torn the newest segment.
            assert_eq!(
                Some(seg),
                segs.last(),
                "a segment that does not dump whole: {e}"
            );
            eprintln!("the newest segment ends in a record a kill tore: {e}");
        }
        for r in records {
            checked += 1;
            // A write after a truncation or a reload can hold a zxid again:
            // the last one holding it wrote what is on disk.
            match writes
                .iter()
                .rev()
                .find(|w| w.first <= r.zxid && r.zxid <= w.last)
            {
                None => violations.push(format!(
                    "{}:{} zxid {:#x}: no 'log batch appended' line holds it",
                    seg.display(),
                    r.offset,
                    r.zxid
                )),
                Some(w) if r.durable > w.bound => violations.push(format!(
                    "{}:{} zxid {:#x} of the write {:#x}..{:#x} says {:#x} was durable; \
                     what its process had synced before that write: {:#x}",
                    seg.display(),
                    r.offset,
                    r.zxid,
                    w.first,
                    w.last,
                    r.durable,
                    w.bound
                )),
                Some(_) => {}
            }
        }
    }
    (checked, violations)
}

// ---- load ----------------------------------------------------------------

/// `WRITERS` sessions on one member, each with `DEPTH` creates outstanding,
/// until stopped (or the budget or deadline runs out); records what was
/// acknowledged, and when each acknowledged create was sent and answered.
struct Load {
    stop: Arc<AtomicBool>,
    acked: Arc<Mutex<BTreeSet<String>>>,
    acks: Arc<Mutex<Vec<Ack>>>,
    count: Arc<AtomicUsize>,
    refused: Arc<AtomicUsize>,
    handles: Vec<thread::JoinHandle<()>>,
}

/// An acknowledged create: its txn's zxid, an instant before it was sent
/// and one after its answer came.
#[derive(Clone, Copy)]
struct Ack {
    zxid: i64,
    sent: Instant,
    answered: Instant,
}

impl Load {
    fn start(addr: SocketAddr, tag: &str) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let acked = Arc::new(Mutex::new(BTreeSet::new()));
        let acks = Arc::new(Mutex::new(Vec::new()));
        let count = Arc::new(AtomicUsize::new(0));
        let refused = Arc::new(AtomicUsize::new(0));
        let budget = Arc::new(AtomicUsize::new(LOAD_BUDGET));
        let handles = (0..WRITERS)
            .map(|t| {
                let (stop, acked, acks, count, refused, budget) = (
                    stop.clone(),
                    acked.clone(),
                    acks.clone(),
                    count.clone(),
                    refused.clone(),
                    budget.clone(),
                );
                let prefix = format!("{PARENT}/{tag}-{t}-");
                thread::spawn(move || {
                    let deadline = Instant::now() + LOAD_DEADLINE;
                    let Some(mut conn) = connect(addr, deadline) else {
                        return;
                    };
                    let mut outstanding: VecDeque<(i32, String, Instant)> = VecDeque::new();
                    let mut seq = 0usize;
                    loop {
                        let sending = !stop.load(Ordering::Relaxed) && Instant::now() < deadline;
                        while sending && outstanding.len() < DEPTH && take_one(&budget) {
                            let path = format!("{prefix}{seq:06}");
                            seq += 1;
                            // Before it leaves (see `commit_between`).
                            let sent = Instant::now();
                            match conn.send(OP_CREATE, &create_body(&path, b"powercut", 0)) {
                                Ok(xid) => outstanding.push_back((xid, path, sent)),
                                // Nothing more is known of this session's writes.
                                Err(_) => return,
                            }
                        }
                        let Some((xid, path, sent)) = outstanding.pop_front() else {
                            return;
                        };
                        match conn.recv() {
                            Ok(r) if r.xid == xid => {
                                if r.err == 0 {
                                    acks.lock().unwrap().push(Ack {
                                        zxid: r.zxid,
                                        sent,
                                        answered: Instant::now(),
                                    });
                                    let name = path.rsplit('/').next().unwrap().to_string();
                                    acked.lock().unwrap().insert(name);
                                    count.fetch_add(1, Ordering::Relaxed);
                                } else {
                                    refused.fetch_add(1, Ordering::Relaxed);
                                }
                            }
                            // Outcome unknown: not counted.
                            _ => return,
                        }
                    }
                })
            })
            .collect();
        Load {
            stop,
            acked,
            acks,
            count,
            refused,
            handles,
        }
    }

    /// Waits (bounded) until `n` creates of this load were acknowledged.
    fn wait_for(&self, n: usize, c: &Cluster) {
        let start = Instant::now();
        while self.count.load(Ordering::Relaxed) < n {
            assert!(
                start.elapsed() < PROCESS_TIMEOUT && self.handles.iter().any(|h| !h.is_finished()),
                "{} of {n} writes acknowledged\n{}",
                self.count.load(Ordering::Relaxed),
                c.report()
            );
            thread::sleep(Duration::from_millis(5));
        }
    }

    /// Whether the ensemble committed a txn of `first..=last` before a later
    /// one of them was proposed, as far as this load's answers show: some
    /// create of them was sent after another one's answer came. The leader
    /// answers once it has committed, and takes the later request after
    /// that, so a follower gets the COMMIT of the one before the PROPOSAL
    /// of the other (one connection, in order). Says which, if so.
    fn commit_between(&self, first: i64, last: i64) -> Option<String> {
        let acks: Vec<Ack> = self
            .acks
            .lock()
            .unwrap()
            .iter()
            .filter(|a| first <= a.zxid && a.zxid <= last)
            .copied()
            .collect();
        let committed = acks.iter().min_by_key(|a| a.answered)?;
        let later = acks.iter().find(|a| a.sent > committed.answered)?;
        Some(format!(
            "{:#x} was answered {:?} before {:#x} was sent",
            committed.zxid,
            later.sent - committed.answered,
            later.zxid
        ))
    }

    /// Stops sending, collects the outstanding answers; returns what was
    /// acknowledged and how many creates were refused.
    fn finish(mut self) -> (BTreeSet<String>, usize) {
        self.stop.store(true, Ordering::Relaxed);
        for h in self.handles.drain(..) {
            h.join().unwrap();
        }
        (
            std::mem::take(&mut *self.acked.lock().unwrap()),
            self.refused.load(Ordering::Relaxed),
        )
    }
}

fn take_one(budget: &AtomicUsize) -> bool {
    budget
        .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |b| b.checked_sub(1))
        .is_ok()
}

fn connect(addr: SocketAddr, deadline: Instant) -> Option<Conn> {
    loop {
        match session(addr) {
            Ok(conn) => return Some(conn),
            Err(_) if Instant::now() < deadline => thread::sleep(Duration::from_millis(50)),
            Err(_) => return None,
        }
    }
}

// ---- the member's files and log lines ------------------------------------

fn data_dir(c: &Cluster, i: usize) -> PathBuf {
    c.dir().join(format!("s{}", i + 1)).join("data")
}

/// Member `i`'s log file, complete lines only (a frozen or killed
/// process may have left one half written).
fn server_log(c: &Cluster, i: usize) -> String {
    let bytes =
        std::fs::read(c.dir().join(format!("s{}", i + 1)).join("server.log")).unwrap_or_default();
    let end = bytes.iter().rposition(|b| *b == b'\n').map_or(0, |n| n + 1);
    String::from_utf8_lossy(&bytes[..end]).into_owned()
}

/// Freezes member `f` (SIGSTOP by pid) at moments spread over its writes
/// until the lines of its current process (from byte `run_from` of its
/// log) end in a write of two records or more, on its disk, whose sync
/// has not completed and that the commit point passed (see `INSPECTIONS`);
/// returns at which inspection and that write, leaving it frozen, or
/// resumes it each time and gives up after `INSPECTIONS`.
fn freeze_in_passed_write(
    c: &Cluster,
    f: usize,
    run_from: usize,
    load: &Load,
) -> Result<(usize, Unsynced), String> {
    let pid = c.pid(f).expect("the follower runs");
    let mut why_not: BTreeMap<String, usize> = BTreeMap::new();
    for i in 0..INSPECTIONS {
        thread::sleep(Duration::from_millis(1 + (i as u64 * 3) % 8));
        signal(pid, libc::SIGSTOP);
        wait_stopped(pid);
        thread::sleep(IO_SETTLE);
        let log = server_log(c, f);
        let run = parse_log(&log[run_from.min(log.len())..]);
        let found = last_unsynced(&run).and_then(|(first, last)| {
            let passed = load.commit_between(first, last).ok_or("not passed")?;
            let w = unsynced_write(&run, &data_dir(c, f)).map_err(|_| "not on disk")?;
            Ok(Unsynced { passed, ..w })
        });
        match found {
            Ok(w) => return Ok((i + 1, w)),
            Err(e) => *why_not.entry(e).or_default() += 1,
        }
        signal(pid, libc::SIGCONT);
    }
    Err(format!(
        "no freeze in {INSPECTIONS} caught such a write (why not, how often: {why_not:?})"
    ))
}

/// Sends `sig` to the member process `pid` (one this test started).
fn signal(pid: u32, sig: libc::c_int) {
    // SAFETY: kill(2) on a pid; no memory is involved.
    let r = unsafe { libc::kill(pid as libc::pid_t, sig) };
    assert_eq!(
        r,
        0,
        "kill({pid}, {sig}): {}",
        std::io::Error::last_os_error()
    );
}

/// The state letter of process `pid` (R, S, T, Z...), if it exists.
fn process_state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // It follows the command name in parentheses.
    stat.rsplit_once(") ").and_then(|(_, r)| r.chars().next())
}

/// Waits (bounded) until process `pid` is stopped.
fn wait_stopped(pid: u32) {
    let start = Instant::now();
    while !matches!(process_state(pid), Some('T') | Some('t')) {
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "process {pid} did not stop: {:?}",
            process_state(pid)
        );
        thread::sleep(Duration::from_millis(1));
    }
}

/// The last lines of a log, for failure messages.
fn excerpt(log: &str) -> String {
    let lines: Vec<&str> = log.lines().collect();
    lines[lines.len().saturating_sub(40)..].join("\n")
}

/// Txn log segments (`log.<hex>`) in `dir`, in zxid order.
fn segments(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<(u64, PathBuf)> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let hex = name.strip_prefix("log.")?;
            Some((u64::from_str_radix(hex, 16).ok()?, e.path()))
        })
        .collect();
    v.sort();
    v.into_iter().map(|(_, p)| p).collect()
}

#[derive(Debug, Clone)]
struct Record {
    offset: usize,
    zxid: i64,
    durable: i64,
}

/// The records of one segment (`ringkeeper log dump --json`), and the
/// error the dump stopped at, if any.
fn dump(segment: &Path) -> (Vec<Record>, Option<String>) {
    let out = Command::new(env!("CARGO_BIN_EXE_ringkeeper"))
        .args(["log", "dump", "--json"])
        .arg(segment)
        .output()
        .expect("run ringkeeper log dump");
    let records = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| Record {
            offset: json_field(l, "offset")
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("no offset in {l}")),
            zxid: json_field(l, "zxid")
                .and_then(hex)
                .unwrap_or_else(|| panic!("no zxid in {l}")),
            durable: json_field(l, "durable_zxid")
                .and_then(hex)
                .unwrap_or_else(|| panic!("no durable_zxid in {l}")),
        })
        .collect();
    let error = (!out.status.success()).then(|| String::from_utf8_lossy(&out.stderr).into_owned());
    (records, error)
}

/// A top-level number or string field of one `log dump --json` line.
fn json_field<'a>(line: &'a str, name: &str) -> Option<&'a str> {
    let at = line.find(&format!("\"{name}\":"))? + name.len() + 3;
    let rest = line[at..].trim_start_matches('"');
    let end = rest.find(['"', ',', '}']).unwrap_or(rest.len());
    Some(&rest[..end])
}

/// `0x...` as a zxid.
fn hex(s: &str) -> Option<i64> {
    let digits = s.strip_prefix("0x")?;
    let end = digits
        .find(|c: char| !c.is_ascii_hexdigit())
        .unwrap_or(digits.len());
    i64::from_str_radix(&digits[..end], 16).ok()
}

/// The value of ` name=` on a tracing line (up to the next space).
fn field<'a>(line: &'a str, name: &str) -> Option<&'a str> {
    let at = line.find(&format!(" {name}="))? + name.len() + 2;
    let rest = &line[at..];
    Some(&rest[..rest.find(' ').unwrap_or(rest.len())])
}

/// What a member's log says about its txn log, in order.
#[derive(Debug, Clone, PartialEq)]
enum Event {
    /// A process started, its log recovered through `last`.
    Running { last: i64 },
    /// The log was read back from disk (startup or a reload) through `zxid`.
    Recovered { zxid: i64 },
    /// A role change: the log is settled (appended and synced) first.
    RoleChange,
    /// A SNAP from the leader installed at `zxid` (the log starts there).
    Snap { zxid: i64 },
    /// A TRUNC from the leader cut the log after `to`.
    Trunc { to: i64 },
    /// One log write of the records `first..=last`.
    Batch { first: i64, last: i64 },
    /// A completed sync of everything appended through `through`.
    Synced { through: i64 },
    /// Recovery cut a torn tail here.
    TornCut { segment: String, offset: usize },
}

fn parse_log(log: &str) -> Vec<Event> {
    log.lines().filter_map(parse_line).collect()
}

fn parse_line(l: &str) -> Option<Event> {
    let z = |name: &str| field(l, name).and_then(hex);
    if l.contains("log batch appended") {
        Some(Event::Batch {
            first: z("first")?,
            last: z("last")?,
        })
    } else if l.contains("log synced") {
        Some(Event::Synced {
            through: z("through")?,
        })
    } else if l.contains("ensemble member running") {
        Some(Event::Running {
            last: z("last_zxid")?,
        })
    } else if l.contains(": recovered zxid=") {
        Some(Event::Recovered { zxid: z("zxid")? })
    } else if l.contains(": role myid=") {
        // Following the same leader again (UPTODATE) is no reload.
        let was = &l[l.find(" was=")? + 5..l.find(" now=")?];
        let now = &l[l.find(" now=")? + 5..];
        (was.trim() != now.trim()).then_some(Event::RoleChange)
    } else if l.contains("installed the leader's snapshot") {
        Some(Event::Snap { zxid: z("zxid")? })
    } else if let Some(at) = l.find("truncated the log after ") {
        Some(Event::Trunc {
            to: hex(&l[at + "truncated the log after ".len()..])?,
        })
    } else if l.contains("cutting a torn tail") {
        Some(Event::TornCut {
            segment: field(l, "segment")?.to_string(),
            offset: field(l, "offset")?.parse().ok()?,
        })
    } else {
        None
    }
}

/// One log write and the most a record of it may say was durable.
#[derive(Debug)]
struct Write {
    first: i64,
    last: i64,
    bound: i64,
}

/// Every log write of a member's log (all its processes), each with what
/// its process had made durable before it: the recovered log at the start
/// or a reload, each completed sync, and the settling of the log at a role
/// change (it appends what is pending, waits for the running sync and syncs
/// again: what was appended by then is durable). A write appended right
/// after a role change may be the one the settling appended (framed before
/// it) or a later one: the records after it are allowed what it holds
/// (the one place the bound is looser than the process's).
fn writes_with_bounds(events: &[Event]) -> Vec<Write> {
    let mut writes = Vec::new();
    let (mut bound, mut appended, mut settling) = (0i64, 0i64, false);
    for e in events {
        match *e {
            Event::Running { last }
            | Event::Recovered { zxid: last }
            | Event::Snap { zxid: last } => {
                bound = last;
                appended = last;
                settling = false;
            }
            Event::RoleChange => {
                bound = bound.max(appended);
                settling = true;
            }
            Event::Trunc { to } => {
                bound = bound.max(appended).min(to);
                appended = appended.min(to);
                settling = false;
            }
            Event::Synced { through } => {
                bound = bound.max(through);
                settling = false;
            }
            Event::Batch { first, last } => {
                writes.push(Write { first, last, bound });
                if settling {
                    bound = bound.max(last);
                    settling = false;
                }
                appended = appended.max(last);
            }
            Event::TornCut { .. } => {}
        }
    }
    writes
}

/// The last write of one process's log lines, if its sync never completed
/// (no sync through it, nor a settling of the log, after it).
fn last_unsynced(run: &[Event]) -> Result<(i64, i64), String> {
    let at = run
        .iter()
        .rposition(|e| matches!(e, Event::Batch { .. }))
        .ok_or("no log write")?;
    let Event::Batch { first, last } = run[at] else {
        unreachable!()
    };
    if run[at..].iter().any(|e| match e {
        Event::Synced { through } => *through >= last,
        Event::RoleChange | Event::Trunc { .. } | Event::Snap { .. } => true,
        _ => false,
    }) {
        return Err("synced".into());
    }
    if last == first {
        return Err("one record".into());
    }
    // Within an epoch, zxids are consecutive.
    if last >> 32 == first >> 32 && last - first + 1 > MAX_RECORDS {
        return Err("too many records".into());
    }
    Ok((first, last))
}

/// The write a kill left, which must be the one `seen` while the member was
/// frozen.
fn as_frozen(seen: Unsynced, run: &[Event], data: &Path) -> Result<Unsynced, String> {
    let w = unsynced_write(run, data)?;
    let offsets = |w: &Unsynced| w.records.iter().map(|r| r.offset).collect::<Vec<_>>();
    if (w.first, w.last, offsets(&w)) != (seen.first, seen.last, offsets(&seen)) {
        return Err(format!(
            "the kill left the write {:#x}..{:#x}, not {:#x}..{:#x} as frozen",
            w.first, w.last, seen.first, seen.last
        ));
    }
    Ok(Unsynced {
        passed: seen.passed,
        ..w
    })
}

/// The write a kill caught unsynced, on disk.
struct Unsynced {
    first: i64,
    last: i64,
    segment: PathBuf,
    records: Vec<Record>,
    /// How the commit point passed a record of it (`Load::commit_between`).
    passed: String,
}

/// The last write of one process's log lines, if its sync never completed,
/// it holds two records or more, and it is the end of the log on disk, in
/// one segment.
fn unsynced_write(run: &[Event], data: &Path) -> Result<Unsynced, String> {
    let (first, last) = last_unsynced(run)?;
    let segs = segments(data);
    let newest = segs.last().ok_or("no segment")?;
    let (records, error) = dump(newest);
    if let Some(e) = error {
        return Err(format!("the newest segment does not dump whole: {e}"));
    }
    let on_disk_last = records.last().map(|r| r.zxid);
    if on_disk_last != Some(last) {
        // Writes are staged at append and done by the sync job.
        return Err(format!(
            "the last write {first:#x}..{last:#x} had not reached the disk (the log there \
             ends at {})",
            on_disk_last.map_or("no record".into(), |z| format!("{z:#x}"))
        ));
    }
    let held: Vec<Record> = records
        .into_iter()
        .filter(|r| first <= r.zxid && r.zxid <= last)
        .collect();
    if held.first().map(|r| r.zxid) != Some(first) {
        return Err(format!(
            "the write {first:#x}..{last:#x} starts in an older segment"
        ));
    }
    if held.len() < 2 {
        return Err(format!("the unsynced write {first:#x} holds one record"));
    }
    Ok(Unsynced {
        first,
        last,
        segment: newest.clone(),
        records: held,
        passed: String::new(),
    })
}
