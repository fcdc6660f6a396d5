//! Apache Curator recipes (Debian's libcurator-recipes-java and
//! libcurator-framework-java, 5.4) against ringkeeper and against Apache
//! ZooKeeper 3.8: tests/curator/*.java is compiled with javac into a
//! temporary directory and run with `java`, which exercises
//! InterProcessMutex, LeaderLatch, CuratorCache and DistributedAtomicLong
//! (and InterProcessReadWriteLock, InterProcessSemaphoreV2, LeaderSelector,
//! SharedCount, DistributedDoubleBarrier, transactions, and a reconnect
//! through a cutting proxy that checks setWatches) with several clients and
//! threads, and prints one PASS/FAIL line per recipe. javac and java run in
//! their own process groups, bounded by a timeout, and the group is killed
//! whatever happens. tests/ensemble_clients.rs runs the same program
//! against a 3-server ensemble.
//!
//! Needs: apt-get install -y default-jdk-headless libcurator-recipes-java
//! libcurator-framework-java zookeeper

mod common;

use std::sync::Mutex;
use std::time::Instant;

use common::bounded::{assert_all_passed, server_context};
use common::curator::{compile, run_recipes, RECIPES};
use common::{Flavor, Server};

/// The two tests each start a JVM client and a server (a second JVM for
/// ZooKeeper): on two cores they take turns.
static SERIAL: Mutex<()> = Mutex::new(());

fn curator_recipes(flavor: Flavor) {
    let _turn = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let work = tempfile::tempdir().unwrap();
    let cp = compile(work.path());
    let server: Server = common::start(flavor, "forceSync=no");
    let started = Instant::now();
    let run = run_recipes(&cp, work.path(), &[server.addr()]);
    eprintln!(
        "Curator recipes against {flavor:?} on {} ({:.1}s):\n{}",
        server.addr(),
        started.elapsed().as_secs_f64(),
        run.out
    );
    let context = || server_context(server.pid(), &server.dir.path().join("server.log"));
    assert_all_passed(
        &run,
        &RECIPES,
        &format!("the Curator program against {flavor:?}"),
        &context,
    );
}

#[test]
fn curator_recipes_ringkeeper() {
    curator_recipes(Flavor::Ringkeeper);
}

#[test]
fn curator_recipes_zookeeper() {
    curator_recipes(Flavor::ZooKeeper);
}
