//! kazoo's recipes (Debian's python3-kazoo, 2.8) against ringkeeper and
//! against Apache ZooKeeper 3.8 (the latter checks the script itself):
//! tests/kazoo/recipes.py exercises Lock, Semaphore, Election, Barrier and
//! DoubleBarrier, Queue and LockingQueue, Counter, Party and ShallowParty
//! with several clients and threads, client.server_version() (which reads
//! the `envi` four-letter word), a reconnect on the same session through a
//! cutting proxy, TreeCache and transactions, printing one PASS/FAIL line
//! each.
//! The script runs under Debian's /usr/bin/python3 (where python3-kazoo
//! lives), in its own process group, bounded by a timeout; the group is
//! killed whatever happens.
//!
//! Needs: apt-get install -y python3-kazoo zookeeper

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use common::bounded::{assert_all_passed, run_bounded, server_context};
use common::{Flavor, Server};

const PYTHON: &str = "/usr/bin/python3";
const RECIPES: [&str; 11] = [
    "Lock",
    "Semaphore",
    "Election",
    "Barrier",
    "Queue",
    "Counter",
    "Party",
    "server_version",
    "Reconnect",
    "TreeCache",
    "Transaction",
];
const RUN_TIMEOUT: Duration = Duration::from_secs(300);

/// The two tests take turns: two cores, and ZooKeeper is a JVM.
static SERIAL: Mutex<()> = Mutex::new(());

fn check_kazoo(dir: &Path) {
    let mut cmd = Command::new(PYTHON);
    cmd.arg("-c")
        .arg("import kazoo.version; print(kazoo.version.__version__)");
    let run = run_bounded(
        cmd,
        Stdio::null(),
        dir,
        "kazoo-version",
        Duration::from_secs(30),
    );
    assert!(
        run.success(),
        "kazoo is not importable by {PYTHON}: apt-get install -y python3-kazoo\n{}{}",
        run.out,
        run.err
    );
    eprintln!("kazoo {}", run.out.trim());
}

fn kazoo_recipes(flavor: Flavor) {
    let _turn = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let work = tempfile::tempdir().unwrap();
    check_kazoo(work.path());
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/kazoo/recipes.py");
    let server: Server = common::start(flavor, "forceSync=no");
    let mut cmd = Command::new(PYTHON);
    cmd.arg("-u").arg(&script).arg(server.addr());
    let started = Instant::now();
    let run = run_bounded(cmd, Stdio::null(), work.path(), "recipes", RUN_TIMEOUT);
    eprintln!(
        "kazoo recipes against {flavor:?} on {} ({:.1}s):\n{}",
        server.addr(),
        started.elapsed().as_secs_f64(),
        run.out
    );
    let context = || server_context(server.pid(), &server.dir.path().join("server.log"));
    assert_all_passed(
        &run,
        &RECIPES,
        &format!("the kazoo script against {flavor:?}"),
        &context,
    );
}

#[test]
fn kazoo_recipes_ringkeeper() {
    kazoo_recipes(Flavor::Ringkeeper);
}

#[test]
fn kazoo_recipes_zookeeper() {
    kazoo_recipes(Flavor::ZooKeeper);
}
