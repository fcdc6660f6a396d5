//! Crash tests (issue #4): ringkeeper is killed with SIGKILL at random
//! moments while several clients write as fast as they can, restarted on the
//! same data dir and port, and the recovered tree is checked against what the
//! clients saw acknowledged:
//!
//! - every acknowledged create is there with its value;
//! - every counter is at least its last acknowledged value, and is a value
//!   that was actually sent;
//! - multis are all-or-nothing (pairs of creates, pairs of setDatas);
//! - each connection's writes survive as a prefix (FIFO order: no write is
//!   there while an earlier write of the same connection is missing);
//! - what one restart showed is there after every later restart, and what it
//!   did not show never comes back;
//! - nothing appears that no client sent.
//!
//! Plus sessions: a session survives a kill -9 and re-attaches with its id
//! and password, its ephemeral intact; sessions that do not come back expire
//! and take their ephemerals with them.
//!
//! The clients speak the wire protocol over raw sockets (module `raw`), so
//! that "acknowledged" means exactly "the reply arrived".
//!
//! Knobs: RK_CRASH_SEED (default: from the clock, always printed),
//! RK_CRASH_CYCLES (default 24 kills), RK_CRASH_SEGMENT_BYTES (default 4096:
//! ringkeeper.segmentBytesMax, small so that kills land on segment rolls).
//! On a failure the data dir and server logs are copied to
//! $TMPDIR/ringkeeper-crash-<seed>-cycle<n> for a post mortem.

mod common;

use common::raw_fallible as raw;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::PathBuf;
use std::thread;
use std::time::{Duration, Instant};

use common::restart::Proc;
use common::{four_letter, start_ringkeeper, Server};
use raw::*;

// ---------------------------------------------------------------------------
// Restarting a killed server on the same data dir and port.
// (Candidate for tests/common: Server's child is private there.)

/// Copies the data dir (and the server logs) somewhere that outlives the
/// test, for a post mortem (`ringkeeper log dump`, `log verify`).
fn keep_data_dir(server: &Server, seed: u64, cycle: usize) -> PathBuf {
    let to = std::env::temp_dir().join(format!("ringkeeper-crash-{seed}-cycle{cycle}"));
    let _ = std::fs::remove_dir_all(&to);
    for (from, to) in [
        (server.data_dir(), to.join("data")),
        (server.dir.path().to_path_buf(), to.clone()),
    ] {
        std::fs::create_dir_all(&to).unwrap();
        for e in std::fs::read_dir(&from).unwrap() {
            let p = e.unwrap().path();
            if p.is_file() {
                std::fs::copy(&p, to.join(p.file_name().unwrap())).unwrap();
            }
        }
    }
    to
}

/// The server's last zxid as `srvr` shows it.
fn srvr_zxid(port: u16) -> i64 {
    let out = four_letter(port, "srvr").expect("srvr");
    let line = out
        .lines()
        .find_map(|l| l.strip_prefix("Zxid: 0x"))
        .unwrap_or_else(|| panic!("no Zxid in srvr: {out}"));
    i64::from_str_radix(line.trim(), 16).unwrap()
}

/// SplitMix64: small, seedable, good enough to pick ops and kill times.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }
}

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().map(|v| {
        v.trim()
            .parse()
            .unwrap_or_else(|_| panic!("{name}={v} is not a number"))
    })
}

// ---------------------------------------------------------------------------
// The crash test.

const WORKERS: usize = 4;
const COUNTERS: usize = 3;
/// Requests a worker keeps in flight: enough that batches hold many txns
/// and a kill usually lands with a batch between append and fdatasync.
const PIPELINE: usize = 8;
const WORKER_SESSION_MS: i32 = 4_000;

/// One write a worker sent.
#[derive(Clone, Debug)]
enum Op {
    /// create /c/w<w>-<n>, data create_data(w, n).
    Create { n: u64 },
    /// setData /k/w<w>-<k> to v.
    Set { k: usize, v: u64 },
    /// multi: create /m/x-w<w>-<n> and /m/y-w<w>-<n>, same data.
    Pair { n: u64 },
    /// multi: setData /p/a-w<w> and /p/b-w<w> to v.
    PairSet { v: u64 },
}

#[derive(Debug)]
struct Sent {
    op: Op,
    /// The reply arrived (with err 0).
    acked: bool,
}

fn create_path(w: usize, n: u64) -> String {
    format!("/c/w{w}-{n}")
}
fn create_data(seed: u64, w: usize, n: u64) -> Vec<u8> {
    format!("create {seed:x} w{w} n{n}").into_bytes()
}
fn pair_paths(w: usize, n: u64) -> [String; 2] {
    [format!("/m/x-w{w}-{n}"), format!("/m/y-w{w}-{n}")]
}
fn pair_data(seed: u64, w: usize, n: u64) -> Vec<u8> {
    format!("pair {seed:x} w{w} n{n}").into_bytes()
}
fn counter_path(w: usize, k: usize) -> String {
    format!("/k/w{w}-{k}")
}
fn pairset_paths(w: usize) -> [String; 2] {
    [format!("/p/a-w{w}"), format!("/p/b-w{w}")]
}

/// What a worker knows across cycles: its next names and values.
struct WorkerPlan {
    w: usize,
    seed: u64,
    next_create: u64,
    next_pair: u64,
    /// One increasing sequence for every set of this worker, so each
    /// counter only ever gets larger values.
    next_value: u64,
}

impl WorkerPlan {
    fn next_op(&mut self, rng: &mut Rng) -> Op {
        match rng.below(10) {
            0..=4 => {
                self.next_create += 1;
                Op::Create {
                    n: self.next_create,
                }
            }
            5..=6 => {
                self.next_value += 1;
                Op::Set {
                    k: rng.below(COUNTERS as u64) as usize,
                    v: self.next_value,
                }
            }
            7..=8 => {
                self.next_pair += 1;
                Op::Pair { n: self.next_pair }
            }
            _ => {
                self.next_value += 1;
                Op::PairSet { v: self.next_value }
            }
        }
    }

    fn request(&self, op: &Op) -> (i32, Vec<u8>) {
        let w = self.w;
        match op {
            Op::Create { n } => (
                OP_CREATE,
                create_body(&create_path(w, *n), &create_data(self.seed, w, *n), 0),
            ),
            Op::Set { k, v } => (
                OP_SET_DATA,
                set_body(&counter_path(w, *k), v.to_string().as_bytes(), -1),
            ),
            Op::Pair { n } => {
                let data = pair_data(self.seed, w, *n);
                let [x, y] = pair_paths(w, *n);
                (
                    OP_MULTI,
                    multi_body(&[
                        (OP_CREATE, create_body(&x, &data, 0)),
                        (OP_CREATE, create_body(&y, &data, 0)),
                    ]),
                )
            }
            Op::PairSet { v } => {
                let [a, b] = pairset_paths(w);
                let data = v.to_string().into_bytes();
                (
                    OP_MULTI,
                    multi_body(&[
                        (OP_SET_DATA, set_body(&a, &data, -1)),
                        (OP_SET_DATA, set_body(&b, &data, -1)),
                    ]),
                )
            }
        }
    }
}

/// What one worker did in one cycle.
struct WorkerRun {
    plan: WorkerPlan,
    sent: Vec<Sent>,
    /// Highest zxid in an acknowledged reply.
    max_zxid: i64,
    /// Replies that were errors: never expected.
    errors: Vec<String>,
}

/// Writes until the connection dies (the server is killed under it),
/// keeping PIPELINE requests in flight; records each reply as it arrives.
fn run_worker(port: u16, plan: WorkerPlan, mut rng: Rng) -> WorkerRun {
    let mut run = WorkerRun {
        plan,
        sent: Vec::new(),
        max_zxid: 0,
        errors: Vec::new(),
    };
    let Ok(mut conn) = Conn::new_session(port, WORKER_SESSION_MS) else {
        return run; // killed before we got in
    };
    let mut in_flight: std::collections::VecDeque<(i32, usize)> = Default::default();
    'outer: loop {
        while in_flight.len() < PIPELINE {
            let op = run.plan.next_op(&mut rng);
            let (code, body) = run.plan.request(&op);
            run.sent.push(Sent { op, acked: false });
            match conn.send(code, &body) {
                Ok(xid) => in_flight.push_back((xid, run.sent.len() - 1)),
                Err(_) => break 'outer,
            }
        }
        let reply = match conn.recv() {
            Ok(r) => r,
            Err(_) => break,
        };
        let (xid, idx) = in_flight.pop_front().expect("a request in flight");
        assert_eq!(reply.xid, xid, "replies come in request order");
        let sent = &mut run.sent[idx];
        let failed = match sent.op {
            Op::Pair { .. } | Op::PairSet { .. } => reply.err != 0 || multi_failed(&reply.body),
            _ => reply.err != 0,
        };
        if failed {
            run.errors.push(format!(
                "worker {}: {:?} answered err {} (body {:?})",
                run.plan.w, sent.op, reply.err, reply.body
            ));
        } else {
            sent.acked = true;
            run.max_zxid = run.max_zxid.max(reply.zxid);
        }
    }
    run
}

/// What must hold of a node from now on.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Expect {
    /// Acknowledged, or seen after a restart: there with this data, forever.
    Present(Vec<u8>),
    /// Sent, not acknowledged, not seen after the restart that followed:
    /// must never appear.
    Absent,
    /// Sent, not acknowledged, not yet checked: there with this data or not.
    Maybe(Vec<u8>),
}

/// A counter: its value after the last check, and what was sent since.
#[derive(Clone, Debug, Default)]
struct Counter {
    /// The value must be at least this: the last value seen, raised by
    /// acknowledged sets since.
    floor: u64,
    /// Every value ever sent to it (and 0, its initial value).
    sent: BTreeSet<u64>,
}

#[derive(Default)]
struct Model {
    nodes: BTreeMap<String, Expect>,
    counters: BTreeMap<String, Counter>,
    /// The pairs of paths a multi wrote together.
    pairs: Vec<[String; 2]>,
    /// The highest zxid any acknowledged reply carried.
    max_acked_zxid: i64,
    /// Unacknowledged creates found missing / present after the restart.
    unacked_lost: usize,
    unacked_kept: usize,
}

impl Model {
    fn counter(&mut self, path: &str) -> &mut Counter {
        self.counters.entry(path.to_string()).or_default()
    }

    /// Takes in one worker's cycle.
    fn record(&mut self, run: &WorkerRun) {
        let (w, seed) = (run.plan.w, run.plan.seed);
        self.max_acked_zxid = self.max_acked_zxid.max(run.max_zxid);
        for s in &run.sent {
            match &s.op {
                Op::Create { n } => {
                    let data = create_data(seed, w, *n);
                    let e = if s.acked {
                        Expect::Present(data)
                    } else {
                        Expect::Maybe(data)
                    };
                    self.nodes.insert(create_path(w, *n), e);
                }
                Op::Pair { n } => {
                    let data = pair_data(seed, w, *n);
                    for p in pair_paths(w, *n) {
                        let e = if s.acked {
                            Expect::Present(data.clone())
                        } else {
                            Expect::Maybe(data.clone())
                        };
                        self.nodes.insert(p, e);
                    }
                    self.pairs.push(pair_paths(w, *n));
                }
                Op::Set { k, v } => {
                    let c = self.counter(&counter_path(w, *k));
                    c.sent.insert(*v);
                    if s.acked {
                        c.floor = c.floor.max(*v);
                    }
                }
                Op::PairSet { v } => {
                    for p in pairset_paths(w) {
                        let c = self.counter(&p);
                        c.sent.insert(*v);
                        if s.acked {
                            c.floor = c.floor.max(*v);
                        }
                    }
                }
            }
        }
    }
}

/// Reads every node the model knows about and checks it; then settles the
/// model on what was seen. Returns the problems found.
fn verify(proc: &Proc, model: &mut Model, runs: &[WorkerRun], cycle: usize) -> Vec<String> {
    let port = proc.port;
    let mut problems = Vec::new();
    let zxid = srvr_zxid(port);
    if zxid < model.max_acked_zxid {
        problems.push(format!(
            "the server restarted at zxid {zxid:#x}, below the acknowledged {:#x}",
            model.max_acked_zxid
        ));
    }
    let mut conn = match Conn::new_session(port, 30_000) {
        Ok(c) => c,
        Err(e) => {
            problems.push(format!(
                "cycle {cycle}: no new session after the restart: {e}"
            ));
            return problems;
        }
    };
    let node_paths: Vec<String> = model.nodes.keys().cloned().collect();
    let counter_paths: Vec<String> = model.counters.keys().cloned().collect();
    let all: Vec<&String> = node_paths.iter().chain(&counter_paths).collect();
    let datas = get_many(&mut conn, &all).expect("reads after the restart");
    let mut seen: HashMap<String, Option<Vec<u8>>> = HashMap::new();
    for (p, d) in all.iter().zip(datas) {
        seen.insert((*p).clone(), d);
    }

    // Nodes. (Unacknowledged ones: how many were lost, how many survived.)
    let mut model_stats = (0usize, 0usize);
    for (path, expect) in model.nodes.iter_mut() {
        let got = &seen[path];
        match (&*expect, got) {
            (Expect::Present(want), Some(d)) if d == want => {}
            (Expect::Present(want), _) => problems.push(format!(
                "{path}: acknowledged (or seen before) with {:?}, now {:?}",
                String::from_utf8_lossy(want),
                got.as_ref()
                    .map(|d| String::from_utf8_lossy(d).into_owned())
            )),
            (Expect::Absent, None) => {}
            (Expect::Absent, Some(d)) => problems.push(format!(
                "{path}: missing after an earlier restart, now back with {:?}",
                String::from_utf8_lossy(d)
            )),
            (Expect::Maybe(_), None) => {
                model_stats.0 += 1;
                *expect = Expect::Absent
            }
            (Expect::Maybe(want), Some(d)) if d == want => {
                model_stats.1 += 1;
                *expect = Expect::Present(d.clone())
            }
            (Expect::Maybe(want), Some(d)) => problems.push(format!(
                "{path}: sent with {:?}, found with {:?}",
                String::from_utf8_lossy(want),
                String::from_utf8_lossy(d)
            )),
        }
    }
    model.unacked_lost += model_stats.0;
    model.unacked_kept += model_stats.1;
    // Multis: both or neither.
    for [x, y] in &model.pairs {
        if seen[x].is_some() != seen[y].is_some() {
            problems.push(format!(
                "half a multi: {x} {} but {y} {}",
                if seen[x].is_some() {
                    "exists"
                } else {
                    "missing"
                },
                if seen[y].is_some() {
                    "exists"
                } else {
                    "missing"
                }
            ));
        }
    }
    // Counters.
    let mut values: HashMap<String, u64> = HashMap::new();
    for (path, c) in model.counters.iter_mut() {
        let Some(Some(d)) = seen.get(path) else {
            problems.push(format!("counter {path} is gone"));
            continue;
        };
        let v: u64 = match std::str::from_utf8(d).ok().and_then(|s| s.parse().ok()) {
            Some(v) => v,
            None => {
                problems.push(format!("counter {path} holds {d:?}"));
                continue;
            }
        };
        if v < c.floor {
            problems.push(format!(
                "counter {path} is {v}, below {} (acknowledged or seen before)",
                c.floor
            ));
        }
        if !c.sent.contains(&v) {
            problems.push(format!("counter {path} is {v}, a value never sent"));
        }
        c.floor = c.floor.max(v);
        values.insert(path.clone(), v);
    }
    for w in 0..WORKERS {
        let [a, b] = pairset_paths(w);
        if values.get(&a) != values.get(&b) {
            problems.push(format!(
                "half a multi: {a} = {:?} but {b} = {:?}",
                values.get(&a),
                values.get(&b)
            ));
        }
    }
    // Each connection's writes survive as a prefix of what it sent.
    for run in runs {
        let w = run.plan.w;
        let applied = |op: &Op| -> bool {
            match op {
                Op::Create { n } => seen[&create_path(w, *n)].is_some(),
                Op::Pair { n } => pair_paths(w, *n).iter().all(|p| seen[p].is_some()),
                Op::Set { k, v } => values.get(&counter_path(w, *k)).is_some_and(|x| x >= v),
                Op::PairSet { v } => values.get(&pairset_paths(w)[0]).is_some_and(|x| x >= v),
            }
        };
        let flags: Vec<bool> = run.sent.iter().map(|s| applied(&s.op)).collect();
        if let Some(first_missing) = flags.iter().position(|a| !a) {
            if let Some(later) = flags[first_missing..].iter().position(|a| *a) {
                let later = first_missing + later;
                problems.push(format!(
                    "worker {w}: write #{later} ({:?}, acked {}) survived but the earlier #{first_missing} ({:?}, acked {}) did not",
                    run.sent[later].op,
                    run.sent[later].acked,
                    run.sent[first_missing].op,
                    run.sent[first_missing].acked
                ));
            }
        }
    }
    // Nothing that no one sent.
    for parent in ["/c", "/m"] {
        let children = children_of(&mut conn, parent).expect("getChildren");
        for child in children {
            let path = format!("{parent}/{child}");
            if !model.nodes.contains_key(&path) {
                problems.push(format!("{path} exists but was never sent"));
            }
        }
    }
    problems
}

fn setup_tree(port: u16, model: &mut Model) {
    let mut c = Conn::new_session(port, 30_000).expect("connect");
    for p in ["/c", "/m", "/k", "/p"] {
        let r = c.call(OP_CREATE, &create_body(p, b"", 0)).unwrap();
        assert_eq!(r.err, 0, "create {p}");
    }
    for w in 0..WORKERS {
        let paths = (0..COUNTERS)
            .map(|k| counter_path(w, k))
            .chain(pairset_paths(w));
        for p in paths {
            let r = c.call(OP_CREATE, &create_body(&p, b"0", 0)).unwrap();
            assert_eq!(r.err, 0, "create {p}");
            model.counter(&p).sent.insert(0);
        }
    }
}

#[test]
fn kill_9_at_random_moments_loses_no_acknowledged_write() {
    let seed = env_u64("RK_CRASH_SEED").unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64
    });
    let cycles = env_u64("RK_CRASH_CYCLES").unwrap_or(24) as usize;
    eprintln!("crash test: seed {seed} (repeat with RK_CRASH_SEED={seed}), {cycles} kills");
    let test_start = Instant::now();
    let mut rng = Rng(seed);

    // Tiny segments (the 4 KiB minimum), so that segment rolls happen every
    // few dozen txns and kills land on them; snapshots now and then, so
    // kills land on those too.
    let segment_bytes = env_u64("RK_CRASH_SEGMENT_BYTES").unwrap_or(4096);
    let mut server = start_ringkeeper(&format!(
        "preAllocSize=64\nringkeeper.segmentBytesMax={segment_bytes}\nsnapCount=4000"
    ));
    let port = server.port;
    let mut model = Model::default();
    setup_tree(port, &mut model);

    let mut plans: Vec<WorkerPlan> = (0..WORKERS)
        .map(|w| WorkerPlan {
            w,
            seed,
            next_create: 0,
            next_pair: 0,
            next_value: 0,
        })
        .collect();
    let mut current: Option<Proc> = None;
    let mut totals = (0usize, 0usize);
    let mut torn_tails = 0;
    let mut interrupted = 0;
    for cycle in 0..cycles {
        // Mostly 0.3-1.5 s of writes; one cycle in five is killed early,
        // around connection setup and the first segment roll after a restart.
        let run_ms = if rng.below(5) == 0 {
            rng.range(0, 150)
        } else {
            rng.range(300, 1500)
        };
        let handles: Vec<_> = plans
            .drain(..)
            .map(|plan| {
                let worker_rng = Rng(rng.next());
                thread::spawn(move || run_worker(port, plan, worker_rng))
            })
            .collect();
        thread::sleep(Duration::from_millis(run_ms));
        match current.as_mut() {
            None => server.kill(),
            Some(p) => p.kill(),
        }
        let runs: Vec<WorkerRun> = handles
            .into_iter()
            .map(|h| h.join().expect("worker thread"))
            .collect();
        let errors: Vec<&String> = runs.iter().flat_map(|r| &r.errors).collect();
        assert!(errors.is_empty(), "seed {seed} cycle {cycle}: {errors:#?}");
        for run in &runs {
            model.record(run);
        }
        let sent: usize = runs.iter().map(|r| r.sent.len()).sum();
        let acked: usize = runs
            .iter()
            .map(|r| r.sent.iter().filter(|s| s.acked).count())
            .sum();
        totals.0 += sent;
        totals.1 += acked;

        let started = Instant::now();
        drop(current.take());
        // One restart in four is itself killed first, somewhere in recovery
        // or just after it (a torn tail half cut, a first segment half made).
        if rng.below(4) == 0 {
            let mut p = Proc::spawn(&server, &format!("interrupted-{cycle:02}"), "warn");
            thread::sleep(Duration::from_millis(rng.range(0, 250)));
            p.kill();
            interrupted += 1;
        }
        let proc = Proc::restart(&server, &format!("restart-{cycle:02}"));
        let restart_ms = started.elapsed().as_millis();
        if proc.output().contains("torn tail") {
            torn_tails += 1;
        }
        let problems = verify(&proc, &mut model, &runs, cycle);
        eprintln!(
            "cycle {cycle:2}: ran {run_ms:4} ms, {sent:5} sent, {acked:5} acked, \
             (re)start {restart_ms} ms, verify {} ms",
            started.elapsed().as_millis() - restart_ms
        );
        if !problems.is_empty() {
            let kept = keep_data_dir(&server, seed, cycle);
            panic!(
                "seed {seed}, cycle {cycle} (kill after {run_ms} ms): {} problems after the restart:\n{}\n\
                 data dir copied to {}\nserver output:\n{}",
                problems.len(),
                problems.join("\n"),
                kept.display(),
                proc.output()
            );
        }
        current = Some(proc);
        plans = runs.into_iter().map(|r| r.plan).collect();
    }
    eprintln!(
        "crash test: {cycles} kills ({torn_tails} left a torn tail, {interrupted} more during \
         restarts), {} writes sent, \
         {} acknowledged, {} nodes checked (unacknowledged creates: {} lost, {} kept), {:?}",
        totals.0,
        totals.1,
        model.nodes.len(),
        model.unacked_lost,
        model.unacked_kept,
        test_start.elapsed()
    );
    assert!(totals.1 > 0, "no write was ever acknowledged");
}

// ---------------------------------------------------------------------------
// Sessions across a kill -9.

fn exists(conn: &mut Conn, path: &str) -> Option<Stat> {
    let r = conn
        .call(OP_EXISTS, &get_body(path, false))
        .expect("exists");
    match r.err {
        0 => Some(parse_stat(&mut Rd(&r.body))),
        ERR_NO_NODE => None,
        e => panic!("exists {path}: err {e}"),
    }
}

#[test]
fn sessions_and_ephemerals_survive_kill_9_and_expire_after() {
    let mut server = start_ringkeeper("");
    let port = server.port;
    let timeout = 6_000;

    // Two sessions, each with an ephemeral; `kept` will come back after the
    // restart, `gone` will not.
    let mut kept = Conn::new_session(port, timeout).unwrap();
    let mut gone = Conn::new_session(port, timeout).unwrap();
    assert_eq!(kept.timeout, timeout);
    let r = kept
        .call(OP_CREATE, &create_body("/kept", b"k", FLAG_EPHEMERAL))
        .unwrap();
    assert_eq!(r.err, 0);
    let r = gone
        .call(OP_CREATE, &create_body("/gone", b"g", FLAG_EPHEMERAL))
        .unwrap();
    assert_eq!(r.err, 0);
    let last_seen = r.zxid;
    let (kept_id, kept_pw) = (kept.session_id, kept.passwd.clone());

    server.kill();
    let killed_at = Instant::now();
    let proc = Proc::restart(&server, "restart-sessions-1");

    // Re-attach well within the timeout (counted from the restart).
    let mut again = Conn::connect(port, timeout, kept_id, &kept_pw, last_seen)
        .unwrap()
        .unwrap_or_else(|| panic!("session {kept_id:#x} refused after the restart"));
    assert_eq!(again.session_id, kept_id, "the same session");
    assert_eq!(again.timeout, timeout);
    let st = exists(&mut again, "/kept").expect("the ephemeral of the re-attached session");
    assert_eq!(st.ephemeral_owner, kept_id);
    let st = exists(&mut again, "/gone").expect("the other ephemeral, until its session expires");
    assert_eq!(st.ephemeral_owner, gone.session_id);
    drop(gone);

    // The session that did not come back expires (a whole timeout after the
    // restart, plus a tick); `kept` stays alive on its pings meanwhile.
    let deadline = Instant::now() + Duration::from_millis(timeout as u64 * 3);
    while exists(&mut again, "/gone").is_some() {
        assert!(
            Instant::now() < deadline,
            "/gone still there {:?} after the restart:\n{}",
            killed_at.elapsed(),
            proc.output()
        );
        let r = again.call_xid(XID_PING, OP_PING, &[]).unwrap();
        assert_eq!(r.err, 0);
        thread::sleep(Duration::from_millis(300));
    }
    assert!(
        killed_at.elapsed() >= Duration::from_millis(timeout as u64 - 1000),
        "/gone went after {:?}: recovered sessions get a whole timeout",
        killed_at.elapsed()
    );
    let st = exists(&mut again, "/kept").expect("the live session's ephemeral stays");
    assert_eq!(st.ephemeral_owner, kept_id);

    // Once more, but now nobody comes back: after the timeout the session
    // is gone, its ephemeral too, and the id is refused.
    let last_seen = again.call(OP_SYNC, &path_body("/")).unwrap().zxid;
    drop(again);
    drop(proc);
    let proc = Proc::restart(&server, "restart-sessions-2");
    let restarted = Instant::now();
    let mut observer = Conn::new_session(port, 30_000).unwrap();
    assert!(
        exists(&mut observer, "/kept").is_some(),
        "the ephemeral is back after the second restart"
    );
    let deadline = restarted + Duration::from_millis(timeout as u64 * 3);
    while exists(&mut observer, "/kept").is_some() {
        assert!(
            Instant::now() < deadline,
            "/kept still there {:?} after the second restart:\n{}",
            restarted.elapsed(),
            proc.output()
        );
        thread::sleep(Duration::from_millis(300));
    }
    let refused = Conn::connect(port, timeout, kept_id, &kept_pw, last_seen).unwrap();
    assert!(
        refused.is_none(),
        "the expired session {kept_id:#x} must not re-attach"
    );
}
