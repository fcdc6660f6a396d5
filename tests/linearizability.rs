//! Writes and conditional sets on an ensemble are linearizable, checked
//! over a recorded history by a real checker (Wing & Gong's search with
//! Lowe's memoization, as Knossos does), while the leader is killed and
//! restarted.
//!
//! The model is one register per znode: its value and its version.
//! setData(-1) sets the value and answers the new version; setData(v)
//! does so only at version v and answers BADVERSION otherwise. A request
//! whose connection failed has an unknown outcome: it may take effect at
//! any point after it was sent, or never. Reads on a follower are not
//! linearizable in ZooKeeper (they may be stale), so the history's only
//! reads are the final ones (after a sync, once every writer stopped).
//! Keys are checked one at a time (linearizability is compositional).
//!
//! The checker's own tests come first: histories it must accept and
//! histories it must refuse. Runs against Apache ZooKeeper too
//! (RK_TEST_TARGET=zookeeper).

mod common;

use std::collections::{BTreeMap, HashSet};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use common::cluster::Cluster;
use common::ensemble_client::*;
use common::raw_fallible::*;
use common::target_flavor;

const ERR_BAD_VERSION: i32 = -103;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Call {
    /// setData(value, -1).
    Write(u64),
    /// setData(value, expected version).
    Cas(u64, i32),
    Read,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Outcome {
    /// The version the write made.
    Written(i32),
    BadVersion,
    /// What a read saw.
    Saw(u64, i32),
    /// The connection failed: it may or may not have happened.
    Unknown,
}

#[derive(Clone, Copy, Debug)]
struct Op {
    /// Microseconds since the history began.
    invoked: u64,
    /// None when the outcome is unknown (it may take effect any time after
    /// `invoked`, or never).
    completed: Option<u64>,
    call: Call,
    outcome: Outcome,
}

/// The register: value and version.
type State = (u64, i32);

/// The state after `op` from `s`, if its outcome is possible there.
fn step(s: State, op: &Op) -> Option<State> {
    let (_, version) = s;
    let next = version + 1;
    match (op.call, op.outcome) {
        (Call::Write(v), Outcome::Written(w)) if w == next => Some((v, next)),
        (Call::Write(v), Outcome::Unknown) => Some((v, next)),
        (Call::Cas(v, e), Outcome::Written(w)) if e == version && w == next => Some((v, next)),
        (Call::Cas(v, e), Outcome::Unknown) if e == version => Some((v, next)),
        (Call::Cas(_, e), Outcome::BadVersion) if e != version => Some(s),
        (Call::Read, Outcome::Saw(v, w)) if (v, w) == s => Some(s),
        _ => None,
    }
}

#[derive(Debug, PartialEq)]
enum Verdict {
    Linearizable,
    /// No order fits; the op that could be placed least far.
    Not(String),
    /// The search ran out of its budget of states.
    GaveUp,
}

/// Whether `history` (one key's) has a linearization from `initial`:
/// an order of every completed op and some of the unknown ones, each at a
/// moment between its invocation and completion, that the register allows.
fn check(initial: State, history: &[Op], budget: usize) -> Verdict {
    let mut ops: Vec<Op> = history.to_vec();
    ops.sort_by_key(|o| o.invoked);
    let n = ops.len();
    let must: usize = ops.iter().filter(|o| o.completed.is_some()).count();
    let words = n.div_ceil(64);
    // A search state: which ops are placed, and the register.
    type Node = (Vec<u64>, State);
    let mut seen: HashSet<Node> = HashSet::new();
    let mut stack: Vec<Node> = vec![(vec![0; words], initial)];
    let mut deepest = 0usize;
    while let Some((placed, state)) = stack.pop() {
        if !seen.insert((placed.clone(), state)) {
            continue;
        }
        if seen.len() > budget {
            return Verdict::GaveUp;
        }
        let is_placed = |i: usize| placed[i / 64] & (1 << (i % 64)) != 0;
        let done = (0..n)
            .filter(|i| is_placed(*i) && ops[*i].completed.is_some())
            .count();
        if done == must {
            return Verdict::Linearizable;
        }
        deepest = deepest.max(done);
        // Next can be any unplaced op invoked before every unplaced
        // completed op completed.
        let bound = (0..n)
            .filter(|i| !is_placed(*i))
            .filter_map(|i| ops[i].completed)
            .min()
            .unwrap_or(u64::MAX);
        for i in (0..n).filter(|i| !is_placed(*i) && ops[*i].invoked <= bound) {
            if let Some(next) = step(state, &ops[i]) {
                let mut p = placed.clone();
                p[i / 64] |= 1 << (i % 64);
                stack.push((p, next));
            }
        }
    }
    Verdict::Not(format!(
        "no order places more than {deepest} of the {must} completed ops"
    ))
}

// ---------------------------------------------------------------------------
// The checker: what it must accept and refuse.

fn op(invoked: u64, completed: Option<u64>, call: Call, outcome: Outcome) -> Op {
    Op {
        invoked,
        completed,
        call,
        outcome,
    }
}

const BUDGET: usize = 1_000_000;

#[test]
fn the_checker_accepts_sequential_and_overlapping_histories() {
    let h = [
        op(0, Some(1), Call::Write(7), Outcome::Written(1)),
        op(2, Some(3), Call::Cas(8, 1), Outcome::Written(2)),
        op(4, Some(5), Call::Cas(9, 1), Outcome::BadVersion),
        op(6, Some(7), Call::Read, Outcome::Saw(8, 2)),
    ];
    assert_eq!(check((0, 0), &h, BUDGET), Verdict::Linearizable);
    // Two overlapping writes, either order; the read decides which.
    let h = [
        op(0, Some(10), Call::Write(1), Outcome::Written(2)),
        op(1, Some(9), Call::Write(2), Outcome::Written(1)),
        op(11, Some(12), Call::Read, Outcome::Saw(1, 2)),
    ];
    assert_eq!(check((0, 0), &h, BUDGET), Verdict::Linearizable);
}

#[test]
fn the_checker_accepts_unknown_outcomes_taken_or_not() {
    // Lost in a failure but applied: the read sees it.
    let h = [
        op(0, None, Call::Write(5), Outcome::Unknown),
        op(10, Some(11), Call::Read, Outcome::Saw(5, 1)),
    ];
    assert_eq!(check((0, 0), &h, BUDGET), Verdict::Linearizable);
    // Never applied.
    let h = [
        op(0, None, Call::Write(5), Outcome::Unknown),
        op(10, Some(11), Call::Read, Outcome::Saw(0, 0)),
    ];
    assert_eq!(check((0, 0), &h, BUDGET), Verdict::Linearizable);
    // Applied late (after a later write completed).
    let h = [
        op(0, None, Call::Write(5), Outcome::Unknown),
        op(2, Some(3), Call::Write(6), Outcome::Written(1)),
        op(10, Some(11), Call::Read, Outcome::Saw(5, 2)),
    ];
    assert_eq!(check((0, 0), &h, BUDGET), Verdict::Linearizable);
}

#[test]
fn the_checker_refuses_lost_stale_and_doubled_writes() {
    // An acknowledged write lost: the final read does not see it.
    let h = [
        op(0, Some(1), Call::Write(5), Outcome::Written(1)),
        op(2, Some(3), Call::Read, Outcome::Saw(0, 0)),
    ];
    assert!(matches!(check((0, 0), &h, BUDGET), Verdict::Not(_)));
    // Real-time order broken: the second write finished after the first
    // and was invoked after it completed, but the read saw the first.
    let h = [
        op(0, Some(1), Call::Write(5), Outcome::Written(1)),
        op(2, Some(3), Call::Write(6), Outcome::Written(2)),
        op(4, Some(5), Call::Read, Outcome::Saw(5, 2)),
    ];
    assert!(matches!(check((0, 0), &h, BUDGET), Verdict::Not(_)));
    // Two conditional sets succeed on the same version.
    let h = [
        op(0, Some(5), Call::Cas(1, 0), Outcome::Written(1)),
        op(1, Some(6), Call::Cas(2, 0), Outcome::Written(1)),
    ];
    assert!(matches!(check((0, 0), &h, BUDGET), Verdict::Not(_)));
    // A conditional set refused at the version it named.
    let h = [op(0, Some(1), Call::Cas(1, 0), Outcome::BadVersion)];
    assert!(matches!(check((0, 0), &h, BUDGET), Verdict::Not(_)));
}

// ---------------------------------------------------------------------------
// The ensemble.

const KEYS: usize = 3;
const CLIENTS_PER_MEMBER: usize = 2;
const OPS_PER_CLIENT_MAX: u64 = 400;
const OP_PAUSE: Duration = Duration::from_millis(15);

fn key(k: usize) -> String {
    format!("/lin/k{k}")
}

/// A small deterministic generator (xorshift).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// One client: setData and conditional setData on random keys until
/// stopped, through `first` then the next member after each failure.
fn client(
    id: u64,
    addrs: Vec<SocketAddr>,
    first: usize,
    start: Instant,
    stop: Arc<AtomicBool>,
) -> Vec<(usize, Op)> {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ (id + 1).wrapping_mul(0x2545_f491_4f6c_dd1d));
    let mut history = Vec::new();
    let mut versions = [0i32; KEYS];
    let mut at = first;
    let mut conn: Option<Conn> = None;
    let mut count = 0u64;
    let micros = |t: Instant| t.duration_since(start).as_micros() as u64;
    while !stop.load(Ordering::Relaxed) && count < OPS_PER_CLIENT_MAX {
        let Some(c) = conn.as_mut() else {
            conn = session(addrs[at % addrs.len()]).ok();
            if conn.is_none() {
                at += 1;
                thread::sleep(Duration::from_millis(20));
            }
            continue;
        };
        count += 1;
        let k = (rng.next() % KEYS as u64) as usize;
        let value = (id << 32) | count;
        let call = if rng.next().is_multiple_of(2) {
            Call::Write(value)
        } else {
            Call::Cas(value, versions[k])
        };
        let version = match call {
            Call::Cas(_, v) => v,
            _ => -1,
        };
        let invoked = micros(Instant::now());
        let reply = c.call(
            OP_SET_DATA,
            &set_body(&key(k), &value.to_be_bytes(), version),
        );
        let completed = micros(Instant::now());
        let (outcome, completed) = match reply {
            Ok(r) if r.err == 0 => {
                let stat = parse_stat(&mut Rd(&r.body));
                versions[k] = stat.version;
                (Outcome::Written(stat.version), Some(completed))
            }
            Ok(r) if r.err == ERR_BAD_VERSION => (Outcome::BadVersion, Some(completed)),
            // Refused or lost: the outcome is not known.
            _ => {
                conn = None;
                at += 1;
                (Outcome::Unknown, None)
            }
        };
        history.push((
            k,
            Op {
                invoked,
                completed,
                call,
                outcome,
            },
        ));
        // Spread over the run (the kill included), and keep the history
        // small enough to search.
        thread::sleep(OP_PAUSE);
    }
    history
}

#[test]
fn sets_and_conditional_sets_are_linearizable_across_a_leader_kill() {
    let mut c = Cluster::start(target_flavor(), 3);
    make_parent(&c, "/lin");
    let leader = c.wait_for_leader(ELECTION_TIMEOUT);
    let mut setup = session_on(&c, leader);
    for k in 0..KEYS {
        let r = setup
            .call(OP_CREATE, &create_body(&key(k), &0u64.to_be_bytes(), 0))
            .unwrap();
        assert_eq!(r.err, 0, "create {}", key(k));
    }
    drop(setup);
    let members = addrs(&c);
    let start = Instant::now();
    let stop = Arc::new(AtomicBool::new(false));
    let histories = Arc::new(Mutex::new(Vec::new()));
    let mut threads = Vec::new();
    for m in 0..members.len() {
        for j in 0..CLIENTS_PER_MEMBER {
            let (addrs, stop, histories) = (members.clone(), stop.clone(), histories.clone());
            let id = (m * CLIENTS_PER_MEMBER + j) as u64 + 1;
            threads.push(thread::spawn(move || {
                let h = client(id, addrs, m, start, stop);
                histories.lock().unwrap().push(h);
            }));
        }
    }
    thread::sleep(Duration::from_secs(2));
    c.kill(leader);
    thread::sleep(Duration::from_millis(1500));
    c.restart(leader);
    thread::sleep(Duration::from_secs(2));
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        t.join().unwrap();
    }
    wait_converged(&c);
    let end = start.elapsed().as_micros() as u64;
    let mut per_key: BTreeMap<usize, Vec<Op>> = BTreeMap::new();
    for (k, o) in histories.lock().unwrap().drain(..).flatten() {
        per_key.entry(k).or_default().push(o);
    }
    // The final reads, on every member after a sync: they must agree.
    for i in 0..c.size() {
        let mut conn = session_on(&c, i);
        for k in 0..KEYS {
            assert_eq!(conn.call(OP_SYNC, &path_body(&key(k))).unwrap().err, 0);
            let r = conn.call(OP_GET_DATA, &get_body(&key(k), false)).unwrap();
            assert_eq!(r.err, 0);
            let mut rd = Rd(&r.body);
            let data = rd.buf().unwrap_or_default();
            let stat = parse_stat(&mut rd);
            let value = u64::from_be_bytes(data.try_into().expect("8 bytes"));
            per_key.entry(k).or_default().push(Op {
                invoked: end + 1,
                completed: Some(end + 2),
                call: Call::Read,
                outcome: Outcome::Saw(value, stat.version),
            });
        }
    }
    let mut total = 0;
    for (k, ops) in &per_key {
        let unknown = ops.iter().filter(|o| o.completed.is_none()).count();
        let written = ops
            .iter()
            .filter(|o| matches!(o.outcome, Outcome::Written(_)))
            .count();
        eprintln!(
            "{}: {} ops ({written} acknowledged writes, {unknown} unknown)",
            key(*k),
            ops.len()
        );
        total += ops.len();
        let verdict = check((0, 0), ops, 5_000_000);
        assert_eq!(
            verdict,
            Verdict::Linearizable,
            "{} is not linearizable\n{}",
            key(*k),
            c.report()
        );
    }
    assert!(total > 100, "too few ops to say anything: {total}");
}
