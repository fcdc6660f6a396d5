//! Rolling replacement (issue 29 §1), as an operator does it, with real
//! processes: three Apache ZooKeeper 3.8 servers under write load through
//! every member; one at a time, a member is stopped, its dataDir goes
//! through `ringkeeper import`, and ringkeeper starts in its place with the
//! same zoo.cfg; then back, one at a time, through `ringkeeper export` to
//! ZooKeeper; then, for comparison, a ZooKeeper-only rolling restart.
//! Every write acknowledged anywhere, at any step, is on every member at
//! the end. Each step's write outage (the longest pause in acknowledgements
//! of the writers on the other members) and the replaced member's own
//! downtime are printed: speed is reported, not asserted.
//!
//! Needs: apt-get install -y zookeeper

mod common;

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use common::cluster::Cluster;
use common::ensemble_client::{check_replicas, create, make_parent, session, ELECTION_TIMEOUT};
use common::Flavor;

const PARENT: &str = "/rolling";
/// No writer runs longer than this, whatever happens.
const WRITER_DEADLINE: Duration = Duration::from_secs(600);

/// Creates `/rolling/m<member>-<n>` through one member only, reconnecting
/// to it (every 50 ms) while it is down; keeps when each write was
/// acknowledged.
struct PinnedWriter {
    stop: Arc<AtomicBool>,
    acks: Arc<Mutex<Vec<(Instant, String)>>>,
    handle: Option<thread::JoinHandle<()>>,
}

impl PinnedWriter {
    fn start(member: usize, addr: SocketAddr) -> PinnedWriter {
        let stop = Arc::new(AtomicBool::new(false));
        let acks = Arc::new(Mutex::new(Vec::new()));
        let (s, a) = (stop.clone(), acks.clone());
        let handle = thread::spawn(move || {
            let deadline = Instant::now() + WRITER_DEADLINE;
            let mut next = 0usize;
            let mut conn = None;
            while !s.load(Ordering::Relaxed) && Instant::now() < deadline {
                if conn.is_none() {
                    conn = session(addr).ok();
                    if conn.is_none() {
                        thread::sleep(Duration::from_millis(50));
                        continue;
                    }
                }
                let name = format!("m{member}-{next:07}");
                next += 1;
                match create(conn.as_mut().unwrap(), &format!("{PARENT}/{name}"), b"w") {
                    Ok(0) => a.lock().unwrap().push((Instant::now(), name)),
                    // Unknown outcome or refused: not counted; reconnect.
                    _ => conn = None,
                }
            }
        });
        PinnedWriter {
            stop,
            acks,
            handle: Some(handle),
        }
    }

    fn acked(&self) -> usize {
        self.acks.lock().unwrap().len()
    }

    fn times(&self) -> Vec<Instant> {
        self.acks.lock().unwrap().iter().map(|(t, _)| *t).collect()
    }

    fn finish(mut self) -> Vec<String> {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.take().unwrap().join().unwrap();
        let acks = std::mem::take(&mut *self.acks.lock().unwrap());
        acks.into_iter().map(|(_, n)| n).collect()
    }
}

fn ringkeeper(args: &[&std::ffi::OsStr]) {
    let out = Command::new(env!("CARGO_BIN_EXE_ringkeeper"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "ringkeeper {args:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The longest pause between acknowledgements in [from, to] of the writers
/// other than `except`.
fn longest_pause(writers: &[PinnedWriter], except: usize, from: Instant, to: Instant) -> Duration {
    let mut times: Vec<Instant> = writers
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != except)
        .flat_map(|(_, w)| w.times())
        .filter(|t| *t >= from && *t <= to)
        .collect();
    times.sort();
    let mut edges = vec![from];
    edges.extend(times);
    edges.push(to);
    edges
        .windows(2)
        .map(|w| w[1].saturating_duration_since(w[0]))
        .max()
        .unwrap_or_default()
}

/// How a member comes back in a step.
#[derive(Clone, Copy, Debug)]
enum Step {
    /// ZooKeeper -> ringkeeper: import its dataDir.
    Import,
    /// ringkeeper -> ZooKeeper: export its dataDir.
    Export,
    /// ZooKeeper restarted as it is.
    Restart,
}

struct Measured {
    what: String,
    outage: Duration,
    downtime: Duration,
}

/// Stops member `i`, converts its dataDir if asked, starts it as its new
/// flavor, and waits until a write through it is acknowledged.
fn replace(c: &mut Cluster, writers: &[PinnedWriter], i: usize, step: Step) -> Measured {
    let data = c.members[i].cfg.parent().unwrap().join("data");
    let before = writers[i].acked();
    let from = Instant::now();
    c.kill(i);
    let moved = |suffix: &str| {
        let to = data.with_extension(format!("{suffix}-{}", before));
        std::fs::rename(&data, &to).unwrap();
        to
    };
    match step {
        Step::Import => {
            let old = moved("zk");
            ringkeeper(&[
                "import".as_ref(),
                "--zookeeper-datadir".as_ref(),
                old.as_os_str(),
                "--datadir".as_ref(),
                data.as_os_str(),
            ]);
            c.members[i].flavor = Flavor::Ringkeeper;
        }
        Step::Export => {
            let old = moved("rk");
            ringkeeper(&[
                "export".as_ref(),
                "--datadir".as_ref(),
                old.as_os_str(),
                "--zookeeper-datadir".as_ref(),
                data.as_os_str(),
            ]);
            c.members[i].flavor = Flavor::ZooKeeper;
        }
        Step::Restart => {}
    }
    c.restart(i);
    let start = Instant::now();
    while writers[i].acked() <= before {
        assert!(
            start.elapsed() < ELECTION_TIMEOUT * 2,
            "no write through server {} after its {step:?}\n{}",
            i + 1,
            c.report()
        );
        thread::sleep(Duration::from_millis(10));
    }
    let back = Instant::now();
    // The others' writes a moment past the member's return, for elections
    // it causes on the way back.
    thread::sleep(Duration::from_millis(500));
    Measured {
        what: format!("{step:?} server {} ({:?})", i + 1, c.members[i].flavor),
        outage: longest_pause(writers, i, from, Instant::now()),
        downtime: back - from,
    }
}

fn holds(c: &Cluster, acked: &BTreeSet<String>) {
    check_replicas(c, PARENT, acked);
}

fn assert_all_flavor(c: &Cluster, f: Flavor) {
    assert!(c.members.iter().all(|m| m.flavor == f), "{}", c.report());
}

#[test]
fn zookeeper_to_ringkeeper_and_back_one_member_at_a_time_under_writes() {
    let mut c = Cluster::start(Flavor::ZooKeeper, 3);
    make_parent(&c, PARENT);
    let writers: Vec<PinnedWriter> = (0..3)
        .map(|i| PinnedWriter::start(i + 1, c.members[i].client))
        .collect();
    thread::sleep(Duration::from_secs(1));
    let mut measured = Vec::new();
    // Followers first, the leader last, as a rolling restart goes.
    let order = |c: &Cluster| {
        let leader = c.wait_for_leader(ELECTION_TIMEOUT);
        let mut o: Vec<usize> = (0..3).filter(|i| *i != leader).collect();
        o.push(leader);
        o
    };
    for step in [Step::Import, Step::Export, Step::Restart] {
        for i in order(&c) {
            measured.push(replace(&mut c, &writers, i, step));
        }
        match step {
            Step::Import => assert_all_flavor(&c, Flavor::Ringkeeper),
            Step::Export | Step::Restart => assert_all_flavor(&c, Flavor::ZooKeeper),
        }
    }
    let acked: BTreeSet<String> = writers.into_iter().flat_map(|w| w.finish()).collect();
    println!("acknowledged writes: {}", acked.len());
    println!("step | write outage on the other members | the member's own downtime");
    for m in &measured {
        println!(
            "{} | {} ms | {} ms",
            m.what,
            m.outage.as_millis(),
            m.downtime.as_millis()
        );
    }
    assert!(acked.len() > 100, "too few writes to show anything");
    holds(&c, &acked);
}
