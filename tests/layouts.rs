//! Every executor layout serves the same protocol: one shard or two, with
//! the consensus core on its own executor or as a task on shard 0's
//! (linked to it by local channels, to any other shard by shared ones), and
//! beside a lone shard with the tree shared between them (the default) or
//! not (`ringkeeper.sharedTree=false`: a version per batch).
//! Eight sessions, spread by the kernel over the shards, write, pipeline,
//! watch each other and see each other's ephemerals come and go.

mod common;

use std::future::Future;
use std::time::Duration;

use zk::{Acls, Client, CreateMode, EventType};
use zookeeper_client as zk;

const TEST_LIMIT: Duration = Duration::from_secs(60);
const SESSIONS: usize = 8;
const PIPELINED_SETS: usize = 200;

async fn bounded<F: Future>(what: &str, f: F) -> F::Output {
    tokio::time::timeout(TEST_LIMIT, f)
        .await
        .unwrap_or_else(|_| panic!("not done within {TEST_LIMIT:?}: {what}"))
}

async fn exercise(extra_cfg: &str) {
    let server = common::start_ringkeeper(extra_cfg);
    let mut clients = Vec::new();
    for _ in 0..SESSIONS {
        let c = Client::connector()
            .with_session_timeout(Duration::from_secs(30))
            .connect(&server.addr())
            .await
            .expect("connect");
        clients.push(c);
    }
    let persistent = CreateMode::Persistent.with_acls(Acls::anyone_all());
    let ephemeral = CreateMode::Ephemeral.with_acls(Acls::anyone_all());
    let mut watches = Vec::new();
    for (i, c) in clients.iter().enumerate() {
        c.create(&format!("/e{i}"), i.to_string().as_bytes(), &ephemeral)
            .await
            .unwrap();
        let (stat, w) = c.check_and_watch_stat("/go").await.unwrap();
        assert!(stat.is_none());
        watches.push(w);
    }
    clients[0].create("/go", b"", &persistent).await.unwrap();
    for w in watches {
        let e = bounded("every session's watch fires", w.changed()).await;
        assert_eq!(
            (e.event_type, e.path.as_str()),
            (EventType::NodeCreated, "/go")
        );
    }
    // Each session pipelines its sets on a node of its own; the replies and
    // the final version show every one applied once, in order.
    let runs = clients
        .iter()
        .cloned()
        .enumerate()
        .map(|(i, c)| async move {
            let path = format!("/p{i}");
            c.create(
                &path,
                b"",
                &CreateMode::Persistent.with_acls(Acls::anyone_all()),
            )
            .await
            .unwrap();
            // The client sends each request when it is called: all are in
            // flight before the first reply is awaited.
            let sets: Vec<_> = (0..PIPELINED_SETS)
                .map(|n| c.set_data(&path, n.to_string().as_bytes(), None))
                .collect();
            for (n, set) in sets.into_iter().enumerate() {
                assert_eq!(set.await.unwrap().version, n as i32 + 1, "{path}");
            }
            let (data, stat) = c.get_data(&path).await.unwrap();
            assert_eq!(data, (PIPELINED_SETS - 1).to_string().into_bytes());
            assert_eq!(stat.version, PIPELINED_SETS as i32);
        });
    let runs: Vec<_> = runs.map(tokio::spawn).collect();
    for run in runs {
        bounded("pipelined sets", run).await.unwrap();
    }
    // Everyone sees everyone's ephemeral; a closed session's goes with it.
    for c in &clients {
        for i in 0..SESSIONS {
            let (data, _) = c.get_data(&format!("/e{i}")).await.unwrap();
            assert_eq!(data, i.to_string().into_bytes());
        }
    }
    // Dropping a client closes its session.
    let closed = format!("/e{}", SESSIONS - 1);
    let (_, _, gone) = clients[0].get_and_watch_data(&closed).await.unwrap();
    drop(clients.pop());
    let e = bounded("the closed session's ephemeral goes", gone.changed()).await;
    assert_eq!(
        (e.event_type, e.path.as_str()),
        (EventType::NodeDeleted, closed.as_str())
    );
    for c in &clients {
        c.sync("/").await.unwrap();
        assert!(c.check_stat(&closed).await.unwrap().is_none());
    }
}

#[tokio::test]
async fn one_shard_core_on_its_executor() {
    exercise("ringkeeper.shards=1\nringkeeper.consensusExecutor=shared\n").await;
}

#[tokio::test]
async fn one_shard_core_on_its_executor_own_tree() {
    exercise(
        "ringkeeper.shards=1\nringkeeper.consensusExecutor=shared\nringkeeper.sharedTree=false\n",
    )
    .await;
}

#[tokio::test]
async fn one_shard_core_on_own_executor() {
    exercise("ringkeeper.shards=1\nringkeeper.consensusExecutor=own\n").await;
}

#[tokio::test]
async fn two_shards_core_on_shard_zero() {
    exercise("ringkeeper.shards=2\nringkeeper.consensusExecutor=shared\n").await;
}

#[tokio::test]
async fn two_shards_core_on_own_executor() {
    exercise("ringkeeper.shards=2\nringkeeper.consensusExecutor=own\n").await;
}
