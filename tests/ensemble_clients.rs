//! The clients' view of a 3-server ensemble, with each client pinned to one
//! server, through three real client libraries:
//! - kazoo (Debian's python3-kazoo): tests/kazoo/ensemble_view.py checks
//!   watches across servers, sync then read, a session moving between
//!   servers, ephemerals deleted once when their session expires, and Lock,
//!   Election, Queue and DoubleBarrier with contenders on different servers;
//! - Apache Curator (Debian's libcurator-*-java): tests/curator/Recipes.java,
//!   the standalone recipe suite, with each new Curator client on the next
//!   server in turn (mutex, leader latch, cache, atomic long, read-write
//!   lock, semaphore, leader selector, shared count, double barrier,
//!   transactions, setWatches after a reconnect);
//! - zookeeper-client (Rust): watches across servers, sync then read, a
//!   session moved to another server, an expired session's ephemeral
//!   deleted once (seen by a persistent recursive watch on a third server),
//!   and its lock recipe with contenders on three servers.
//!
//! Every test also runs against Apache ZooKeeper (RK_TEST_TARGET=zookeeper),
//! which checks the test itself.
//!
//! Needs: apt-get install -y python3-kazoo default-jdk-headless
//! libcurator-recipes-java libcurator-framework-java zookeeper

mod common;

use std::future::Future;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use common::bounded::{assert_all_passed, run_bounded};
use common::cluster::Cluster;
use common::ensemble_client::ELECTION_TIMEOUT;
use common::target_flavor;
use zk::{Acls, AddWatchMode, Client, CreateMode, EventType, SessionState};
use zookeeper_client as zk;

const KAZOO_CHECKS: [&str; 8] = [
    "watches_across_servers",
    "sync_then_read",
    "session_move",
    "ephemerals_expire_once",
    "lock",
    "election",
    "queue",
    "double_barrier",
];
const KAZOO_TIMEOUT: Duration = Duration::from_secs(240);
/// Bounds the zookeeper-client checks as a whole, and each wait for an event.
const RUST_CLIENT_LIMIT: Duration = Duration::from_secs(180);
const EVENT_WAIT: Duration = Duration::from_secs(20);

/// Each test runs a 3-server ensemble (three JVMs against ZooKeeper) and
/// clients: on two cores they take turns.
static SERIAL: Mutex<()> = Mutex::new(());

fn ensemble() -> (std::sync::MutexGuard<'static, ()>, Cluster) {
    let turn = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let c = Cluster::start(target_flavor(), 3);
    c.wait_for_leader(ELECTION_TIMEOUT);
    (turn, c)
}

fn servers(c: &Cluster) -> Vec<String> {
    c.members.iter().map(|m| m.client.to_string()).collect()
}

#[test]
fn kazoo_sees_one_ensemble_from_every_server() {
    let (_turn, c) = ensemble();
    let work = tempfile::tempdir().unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/kazoo/ensemble_view.py");
    let mut cmd = Command::new("/usr/bin/python3");
    cmd.arg("-u").arg(&script).args(servers(&c));
    let start = Instant::now();
    let run = run_bounded(cmd, Stdio::null(), work.path(), "view", KAZOO_TIMEOUT);
    eprintln!(
        "kazoo ensemble view ({:.1}s):\n{}",
        start.elapsed().as_secs_f64(),
        run.out
    );
    assert_all_passed(&run, &KAZOO_CHECKS, "the kazoo ensemble script", &|| {
        c.report()
    });
}

#[test]
fn curator_recipes_with_clients_on_every_server() {
    let (_turn, c) = ensemble();
    let work = tempfile::tempdir().unwrap();
    let cp = common::curator::compile(work.path());
    let start = Instant::now();
    let run = common::curator::run_recipes(&cp, work.path(), &servers(&c));
    eprintln!(
        "Curator recipes across the ensemble ({:.1}s):\n{}",
        start.elapsed().as_secs_f64(),
        run.out
    );
    assert_all_passed(
        &run,
        &common::curator::RECIPES,
        "the Curator program across the ensemble",
        &|| c.report(),
    );
}

fn persistent() -> zk::CreateOptions<'static> {
    CreateMode::Persistent.with_acls(Acls::anyone_all())
}

fn ephemeral() -> zk::CreateOptions<'static> {
    CreateMode::Ephemeral.with_acls(Acls::anyone_all())
}

async fn within<F: Future>(what: &str, f: F) -> F::Output {
    tokio::time::timeout(EVENT_WAIT, f)
        .await
        .unwrap_or_else(|_| panic!("not within {EVENT_WAIT:?}: {what}"))
}

async fn connect(server: &str) -> Client {
    within(
        &format!("a session on {server}"),
        Client::connector()
            .with_session_timeout(Duration::from_secs(4))
            .connect(server),
    )
    .await
    .unwrap_or_else(|e| panic!("connect to {server}: {e}"))
}

/// A watch set through one server fires for changes written through
/// another: data, children and existence.
async fn watches_across_servers(s: &[String]) {
    let (a, b) = (connect(&s[0]).await, connect(&s[1]).await);
    b.create("/zc/w", b"0", &persistent()).await.unwrap();
    // The node b created may not have reached a's server yet.
    a.sync("/zc/w").await.unwrap();
    let (_, _, data) = a.get_and_watch_data("/zc/w").await.unwrap();
    let (_, _, children) = a.get_and_watch_children("/zc").await.unwrap();
    let (stat, exists) = a.check_and_watch_stat("/zc/w-new").await.unwrap();
    assert!(stat.is_none());
    b.set_data("/zc/w", b"1", None).await.unwrap();
    b.create("/zc/w-new", b"", &persistent()).await.unwrap();
    let e = within("data watch", data.changed()).await;
    assert_eq!(
        (e.event_type, e.path.as_str()),
        (EventType::NodeDataChanged, "/zc/w")
    );
    let e = within("child watch", children.changed()).await;
    assert_eq!(
        (e.event_type, e.path.as_str()),
        (EventType::NodeChildrenChanged, "/zc")
    );
    let e = within("exists watch", exists.changed()).await;
    assert_eq!(
        (e.event_type, e.path.as_str()),
        (EventType::NodeCreated, "/zc/w-new")
    );
    // After the events, a's server holds what fired them.
    assert_eq!(a.get_data("/zc/w").await.unwrap().0, b"1");
}

/// A write acknowledged through one server is read through another after
/// a sync there, every time (ringkeeper). Apache ZooKeeper 3.8.0 does not
/// always: in CI with RK_TEST_TARGET=zookeeper one read after sync returned
/// the value before the acknowledged write ("read 87 after sync": v86, not
/// v87); there the reads are only checked never to go back.
async fn sync_then_read(s: &[String]) {
    let strict = target_flavor() == common::Flavor::Ringkeeper;
    let (w, r) = (connect(&s[1]).await, connect(&s[2]).await);
    w.create("/zc/s", b"", &persistent()).await.unwrap();
    let mut last_version = 0;
    for i in 0..100 {
        let v = format!("v{i}");
        w.set_data("/zc/s", v.as_bytes(), None).await.unwrap();
        r.sync("/zc/s").await.unwrap();
        let (got, stat) = r.get_data("/zc/s").await.unwrap();
        if strict {
            assert_eq!(String::from_utf8_lossy(&got), v, "read {i} after sync");
            assert_eq!(stat.version, i + 1);
        } else {
            assert!(
                stat.version >= last_version && stat.version <= i + 1,
                "read {i} after sync: version {} after {last_version}",
                stat.version
            );
        }
        last_version = stat.version;
    }
}

/// A session moved to another server keeps its id, its ephemeral node and
/// its ability to write.
async fn session_move(s: &[String]) {
    let first = Client::connector()
        .with_session_timeout(Duration::from_secs(4))
        .with_detached()
        .connect(&s[0])
        .await
        .unwrap();
    let id = first.session_id();
    first.create("/zc/moving", b"", &ephemeral()).await.unwrap();
    let session = first.into_session();
    let moved = within(
        "the moved session",
        Client::connector()
            .with_session(session)
            .with_session_timeout(Duration::from_secs(4))
            .connect(&s[2]),
    )
    .await
    .expect("reconnect the session on another server");
    assert_eq!(moved.session_id(), id);
    moved.sync("/zc").await.unwrap();
    let stat = moved
        .check_stat("/zc/moving")
        .await
        .unwrap()
        .expect("ephemeral kept");
    assert_eq!(stat.ephemeral_owner, id.0);
    moved.set_data("/zc/moving", b"moved", None).await.unwrap();
    let other = connect(&s[1]).await;
    other.sync("/zc").await.unwrap();
    assert_eq!(other.get_data("/zc/moving").await.unwrap().0, b"moved");
}

/// An expired session's ephemeral node is deleted exactly once, as a
/// persistent recursive watch on a third server sees it; the session is
/// then refused everywhere.
async fn ephemerals_expire_once(s: &[String]) {
    let watcher = connect(&s[1]).await;
    let mut all = watcher
        .watch("/zc", AddWatchMode::PersistentRecursive)
        .await
        .unwrap();
    let doomed = Client::connector()
        .with_session_timeout(Duration::from_millis(1_000))
        .with_detached()
        .connect(&s[0])
        .await
        .unwrap();
    doomed
        .create("/zc/doomed", b"", &ephemeral())
        .await
        .unwrap();
    let session = doomed.into_session();
    // The detached client is gone without closing its session: it expires.
    let is_delete =
        |e: &zk::WatchedEvent| e.path == "/zc/doomed" && e.event_type == EventType::NodeDeleted;
    loop {
        let e = within("the expired session's ephemeral deleted", all.changed()).await;
        if is_delete(&e) {
            break;
        }
    }
    // Nothing more about it in the next ten ticks.
    let quiet_until = tokio::time::Instant::now() + Duration::from_secs(2);
    while let Ok(e) = tokio::time::timeout_at(quiet_until, all.changed()).await {
        assert!(
            !is_delete(&e),
            "the expired session's ephemeral deleted twice"
        );
    }
    let third = connect(&s[2]).await;
    third.sync("/zc").await.unwrap();
    assert!(third.check_stat("/zc/doomed").await.unwrap().is_none());
    let again = Client::connector()
        .with_session(session)
        .connect(&s[2])
        .await;
    assert_eq!(again.err(), Some(zk::Error::SessionExpired));
}

/// zookeeper-client's lock recipe (Curator's lock layout) with one
/// contender on each server: each holder reads a counter, writes it plus
/// one without a version check, and releases. Lost updates would show an
/// overlap of two holders.
async fn lock_across_servers(s: &[String]) {
    const ROUNDS: usize = 15;
    let setup = connect(&s[0]).await;
    setup
        .create("/zc/counter", b"0", &persistent())
        .await
        .unwrap();
    let mut tasks = Vec::new();
    for server in s {
        let server = server.clone();
        tasks.push(tokio::spawn(async move {
            let c = connect(&server).await;
            for _ in 0..ROUNDS {
                let prefix = zk::LockPrefix::new_curator("/zc/lock", "lock-").unwrap();
                let options = zk::LockOptions::new(Acls::anyone_all())
                    .with_ancestor_options(persistent())
                    .unwrap();
                let lock = within("the lock", c.lock(prefix, b"", options))
                    .await
                    .expect("lock");
                let (v, _) = lock.client().get_data("/zc/counter").await.unwrap();
                let n: usize = String::from_utf8_lossy(&v).parse().unwrap();
                lock.set_data("/zc/counter", (n + 1).to_string().as_bytes(), None)
                    .await
                    .unwrap();
                drop(lock);
            }
        }));
    }
    for t in tasks {
        t.await.expect("a lock contender failed");
    }
    setup.sync("/zc/counter").await.unwrap();
    let (v, _) = setup.get_data("/zc/counter").await.unwrap();
    assert_eq!(
        String::from_utf8_lossy(&v),
        (3 * ROUNDS).to_string(),
        "increments under the lock"
    );
}

async fn step<F: Future<Output = ()>>(name: &str, check: F) {
    let t = Instant::now();
    check.await;
    eprintln!("PASS {name} [{} ms]", t.elapsed().as_millis());
}

#[test]
fn zookeeper_client_sees_one_ensemble_from_every_server() {
    let (_turn, c) = ensemble();
    let s = servers(&c);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let checks = async {
        let root = connect(&s[0]).await;
        root.create("/zc", b"", &persistent()).await.unwrap();
        step("watches_across_servers", watches_across_servers(&s)).await;
        step("sync_then_read", sync_then_read(&s)).await;
        step("session_move", session_move(&s)).await;
        step("ephemerals_expire_once", ephemerals_expire_once(&s)).await;
        step("lock", lock_across_servers(&s)).await;
        assert_eq!(root.state(), SessionState::SyncConnected);
    };
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        rt.block_on(async { tokio::time::timeout(RUST_CLIENT_LIMIT, checks).await })
    }));
    match result {
        Ok(Ok(())) => {}
        Ok(Err(_)) => panic!(
            "the zookeeper-client checks did not finish within {RUST_CLIENT_LIMIT:?}\n{}",
            c.report()
        ),
        Err(panic) => {
            eprintln!("{}", c.report());
            std::panic::resume_unwind(panic);
        }
    }
}
