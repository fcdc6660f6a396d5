//! Watches: data, exist (also on a missing node), child, persistent and
//! persistent-recursive; their ordering; and re-registration after a
//! reconnect (setWatches).
//!
//! Every expectation here was observed on Apache ZooKeeper 3.8
//! (`RK_TEST_TARGET=zookeeper`); ringkeeper must behave the same way.

mod common;

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{start_target, Server};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;
use zk::{Acls, AddWatchMode, Client, CreateMode, EventType, PersistentWatcher, WatchedEvent};
use zookeeper_client as zk;

use common::raw::*;

const TEST_LIMIT: Duration = Duration::from_secs(60);
const EVENT_WAIT: Duration = Duration::from_secs(10);

async fn bounded<F: Future>(f: F) -> F::Output {
    tokio::time::timeout(TEST_LIMIT, f)
        .await
        .expect("test did not finish in time")
}

async fn within<F: Future>(what: &str, f: F) -> F::Output {
    tokio::time::timeout(EVENT_WAIT, f)
        .await
        .unwrap_or_else(|_| panic!("nothing within {EVENT_WAIT:?}: {what}"))
}

/// The future is already complete: polled once, without waiting.
async fn ready_now<F: Future + Unpin>(what: &str, f: &mut F) -> F::Output {
    tokio::time::timeout(Duration::ZERO, f)
        .await
        .unwrap_or_else(|_| panic!("not delivered yet: {what}"))
}

async fn connect_to(addr: &str) -> Client {
    Client::connector()
        .with_session_timeout(Duration::from_secs(30))
        .connect(addr)
        .await
        .expect("connect")
}

async fn connect(server: &Server) -> Client {
    connect_to(&server.addr()).await
}

fn persistent() -> zk::CreateOptions<'static> {
    CreateMode::Persistent.with_acls(Acls::anyone_all())
}

fn ev(kind: EventType, path: &str) -> (EventType, String) {
    (kind, path.to_string())
}

fn kp(e: &WatchedEvent) -> (EventType, String) {
    (e.event_type, e.path.clone())
}

/// Next node event of a persistent watcher (session events skipped).
async fn next_node_event(w: &mut PersistentWatcher) -> (EventType, String) {
    loop {
        let e = within("persistent watch event", w.changed()).await;
        if e.event_type != EventType::Session {
            return kp(&e);
        }
    }
}

#[tokio::test]
async fn data_watch() {
    let server = start_target("");
    bounded(async {
        let a = connect(&server).await;
        let a2 = connect(&server).await;
        let b = connect(&server).await;
        b.create("/d", b"0", &persistent()).await.unwrap();

        // Every session that watches gets the event.
        let (_, _, w) = a.get_and_watch_data("/d").await.unwrap();
        let (_, _, w2) = a2.get_and_watch_data("/d").await.unwrap();
        b.set_data("/d", b"1", None).await.unwrap();
        let e = within("data change", w.changed()).await;
        assert_eq!(kp(&e), ev(EventType::NodeDataChanged, "/d"));
        assert_eq!(e.session_state, zk::SessionState::SyncConnected);
        assert_eq!(
            kp(&within("a2", w2.changed()).await),
            ev(EventType::NodeDataChanged, "/d")
        );

        // Children do not concern a data watch; deletion does.
        let (_, _, w) = a.get_and_watch_data("/d").await.unwrap();
        b.create("/d/c", b"", &persistent()).await.unwrap();
        b.delete("/d/c", None).await.unwrap();
        b.delete("/d", None).await.unwrap();
        assert_eq!(
            kp(&within("delete", w.changed()).await),
            ev(EventType::NodeDeleted, "/d")
        );

        // getData on a missing node sets no watch: it is an error.
        assert_eq!(
            a.get_and_watch_data("/d").await.err(),
            Some(zk::Error::NoNode)
        );
    })
    .await;
}

#[tokio::test]
async fn exist_watch() {
    let server = start_target("");
    bounded(async {
        let a = connect(&server).await;
        let b = connect(&server).await;

        // On a missing node: fires on creation.
        let (stat, w) = a.check_and_watch_stat("/x").await.unwrap();
        assert_eq!(stat, None);
        b.create("/x", b"", &persistent()).await.unwrap();
        assert_eq!(
            kp(&within("create", w.changed()).await),
            ev(EventType::NodeCreated, "/x")
        );

        // On an existing node: data change, then deletion.
        let (stat, w) = a.check_and_watch_stat("/x").await.unwrap();
        assert!(stat.is_some());
        b.set_data("/x", b"1", None).await.unwrap();
        assert_eq!(
            kp(&within("set", w.changed()).await),
            ev(EventType::NodeDataChanged, "/x")
        );
        let (_, w) = a.check_and_watch_stat("/x").await.unwrap();
        b.delete("/x", None).await.unwrap();
        assert_eq!(
            kp(&within("delete", w.changed()).await),
            ev(EventType::NodeDeleted, "/x")
        );

        // A missing node created by a multi, under a missing parent.
        let (_, w) = a.check_and_watch_stat("/p/q").await.unwrap();
        let mut m = b.new_multi_writer();
        m.add_create("/p", b"", &persistent()).unwrap();
        m.add_create("/p/q", b"", &persistent()).unwrap();
        m.commit().await.unwrap();
        assert_eq!(
            kp(&within("multi", w.changed()).await),
            ev(EventType::NodeCreated, "/p/q")
        );
    })
    .await;
}

#[tokio::test]
async fn child_watch() {
    let server = start_target("");
    bounded(async {
        let a = connect(&server).await;
        let b = connect(&server).await;
        b.create("/p", b"", &persistent()).await.unwrap();

        // getChildren (op 8): a new child.
        let (_, w) = a.list_and_watch_children("/p").await.unwrap();
        b.create("/p/c", b"", &persistent()).await.unwrap();
        assert_eq!(
            kp(&within("child created", w.changed()).await),
            ev(EventType::NodeChildrenChanged, "/p")
        );
        // getChildren2 (op 12): a removed child.
        let (_, _, w) = a.get_and_watch_children("/p").await.unwrap();
        b.delete("/p/c", None).await.unwrap();
        assert_eq!(
            kp(&within("child deleted", w.changed()).await),
            ev(EventType::NodeChildrenChanged, "/p")
        );
        // The watched node itself goes away.
        let (_, w) = a.list_and_watch_children("/p").await.unwrap();
        b.delete("/p", None).await.unwrap();
        assert_eq!(
            kp(&within("deleted", w.changed()).await),
            ev(EventType::NodeDeleted, "/p")
        );
        assert_eq!(
            a.list_and_watch_children("/p").await.err(),
            Some(zk::Error::NoNode)
        );
    })
    .await;
}

#[tokio::test]
async fn persistent_watch() {
    let server = start_target("");
    bounded(async {
        let a = connect(&server).await;
        let b = connect(&server).await;
        // Allowed on a missing path.
        let mut w = a.watch("/pw", AddWatchMode::Persistent).await.unwrap();
        b.create("/pw", b"", &persistent()).await.unwrap();
        b.set_data("/pw", b"1", None).await.unwrap();
        b.create("/pw/c", b"", &persistent()).await.unwrap();
        b.set_data("/pw/c", b"1", None).await.unwrap(); // not watched
        b.create("/pw/c/g", b"", &persistent()).await.unwrap(); // not watched
        b.delete("/pw/c/g", None).await.unwrap(); // not watched
        b.delete("/pw/c", None).await.unwrap();
        b.delete("/pw", None).await.unwrap();
        b.create("/pw", b"", &persistent()).await.unwrap();
        b.set_data("/pw", b"end", None).await.unwrap();
        for expected in [
            ev(EventType::NodeCreated, "/pw"),
            ev(EventType::NodeDataChanged, "/pw"),
            ev(EventType::NodeChildrenChanged, "/pw"),
            ev(EventType::NodeChildrenChanged, "/pw"),
            ev(EventType::NodeDeleted, "/pw"),
            // Still there after the deletion.
            ev(EventType::NodeCreated, "/pw"),
            ev(EventType::NodeDataChanged, "/pw"),
        ] {
            assert_eq!(next_node_event(&mut w).await, expected);
        }
    })
    .await;
}

#[tokio::test]
async fn persistent_recursive_watch() {
    let server = start_target("");
    bounded(async {
        let a = connect(&server).await;
        let b = connect(&server).await;
        let mut w = a
            .watch("/rw", AddWatchMode::PersistentRecursive)
            .await
            .unwrap();
        b.create("/rw", b"", &persistent()).await.unwrap();
        b.create("/rw/a", b"", &persistent()).await.unwrap();
        b.create("/rw/a/b", b"", &persistent()).await.unwrap();
        b.set_data("/rw/a/b", b"1", None).await.unwrap();
        b.delete("/rw/a/b", None).await.unwrap();
        b.create("/rwx", b"", &persistent()).await.unwrap(); // not below /rw
        b.set_data("/rwx", b"1", None).await.unwrap(); // not below /rw
        b.set_data("/rw", b"end", None).await.unwrap();
        // No NodeChildrenChanged for recursive watches.
        for expected in [
            ev(EventType::NodeCreated, "/rw"),
            ev(EventType::NodeCreated, "/rw/a"),
            ev(EventType::NodeCreated, "/rw/a/b"),
            ev(EventType::NodeDataChanged, "/rw/a/b"),
            ev(EventType::NodeDeleted, "/rw/a/b"),
            ev(EventType::NodeDataChanged, "/rw"),
        ] {
            assert_eq!(next_node_event(&mut w).await, expected);
        }

        // A recursive watch on "/" sees everything.
        let mut all = a
            .watch("/", AddWatchMode::PersistentRecursive)
            .await
            .unwrap();
        b.create("/top", b"", &persistent()).await.unwrap();
        b.set_data("/rw/a", b"2", None).await.unwrap();
        assert_eq!(
            next_node_event(&mut all).await,
            ev(EventType::NodeCreated, "/top")
        );
        assert_eq!(
            next_node_event(&mut all).await,
            ev(EventType::NodeDataChanged, "/rw/a")
        );
        assert_eq!(
            next_node_event(&mut w).await,
            ev(EventType::NodeDataChanged, "/rw/a")
        );
    })
    .await;
}

#[tokio::test]
async fn watch_event_precedes_the_newer_data() {
    let server = start_target("");
    bounded(async {
        let a = connect(&server).await;
        let b = connect(&server).await;
        b.create("/o", b"old", &persistent()).await.unwrap();

        for round in 0..5 {
            let (_, _, data_w) = a.get_and_watch_data("/o").await.unwrap();
            let (_, exist_w) = a.check_and_watch_stat("/o").await.unwrap();
            let (_, child_w) = a.list_and_watch_children("/o").await.unwrap();
            let mut data_w = Box::pin(data_w.changed());
            let mut exist_w = Box::pin(exist_w.changed());
            let mut child_w = Box::pin(child_w.changed());

            let value = format!("new-{round}");
            b.set_data("/o", value.as_bytes(), None).await.unwrap();
            b.create(&format!("/o/c{round}"), b"", &persistent())
                .await
                .unwrap();
            // As soon as A can read the new data, the events are delivered.
            let (data, _) = a.get_data("/o").await.unwrap();
            assert_eq!(data, value.as_bytes());
            assert_eq!(
                kp(&ready_now("data watch", &mut data_w).await),
                ev(EventType::NodeDataChanged, "/o")
            );
            assert_eq!(
                kp(&ready_now("exist watch", &mut exist_w).await),
                ev(EventType::NodeDataChanged, "/o")
            );
            let children = a.list_children("/o").await.unwrap();
            assert_eq!(children.len(), round + 1);
            assert_eq!(
                kp(&ready_now("child watch", &mut child_w).await),
                ev(EventType::NodeChildrenChanged, "/o")
            );
        }

        // The same holds for a persistent watch.
        let mut w = a.watch("/o", AddWatchMode::Persistent).await.unwrap();
        b.set_data("/o", b"latest", None).await.unwrap();
        assert_eq!(a.get_data("/o").await.unwrap().0, b"latest");
        let mut next = Box::pin(w.changed());
        assert_eq!(
            kp(&ready_now("persistent watch", &mut next).await),
            ev(EventType::NodeDataChanged, "/o")
        );
    })
    .await;
}

#[tokio::test]
async fn events_arrive_in_zxid_order() {
    let server = start_target("");
    bounded(async {
        let a = connect(&server).await;
        let b = connect(&server).await;
        let mut w = a
            .watch("/ord", AddWatchMode::PersistentRecursive)
            .await
            .unwrap();

        // Pipelined: every request is sent before any reply is awaited.
        type Pending<'a> = Pin<Box<dyn Future<Output = Result<(), zk::Error>> + Send + 'a>>;
        let paths: Vec<String> = (0..10).map(|i| format!("/ord/n{i}")).collect();
        let mut pending: Vec<Pending> = Vec::new();
        let mut expected = Vec::new();
        let f = b.create("/ord", b"", &persistent());
        pending.push(Box::pin(async move { f.await.map(|_| ()) }));
        expected.push(ev(EventType::NodeCreated, "/ord"));
        for path in &paths {
            let f = b.create(path, b"", &persistent());
            pending.push(Box::pin(async move { f.await.map(|_| ()) }));
            expected.push(ev(EventType::NodeCreated, path));
            let f = b.set_data(path, b"x", None);
            pending.push(Box::pin(async move { f.await.map(|_| ()) }));
            expected.push(ev(EventType::NodeDataChanged, path));
        }
        for path in paths.iter().step_by(3) {
            pending.push(Box::pin(b.delete(path, None)));
            expected.push(ev(EventType::NodeDeleted, path));
        }
        let f = b.set_data("/ord", b"done", None);
        pending.push(Box::pin(async move { f.await.map(|_| ()) }));
        expected.push(ev(EventType::NodeDataChanged, "/ord"));
        for p in pending {
            p.await.unwrap();
        }

        let mut got = Vec::new();
        for _ in 0..expected.len() {
            got.push(next_node_event(&mut w).await);
        }
        assert_eq!(got, expected);
    })
    .await;
}

// ---------------------------------------------------------------------------
// setWatches through a real reconnect: a TCP proxy that can cut the client
// off while another client changes the tree.

struct Proxy {
    port: u16,
    paused: Arc<AtomicBool>,
    conns: Arc<Mutex<Vec<JoinHandle<()>>>>,
    accept: JoinHandle<()>,
}

impl Proxy {
    async fn start(upstream: u16) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let paused = Arc::new(AtomicBool::new(false));
        let conns: Arc<Mutex<Vec<JoinHandle<()>>>> = Arc::default();
        let accept = {
            let paused = paused.clone();
            let conns = conns.clone();
            tokio::spawn(async move {
                loop {
                    let Ok((mut inbound, _)) = listener.accept().await else {
                        continue;
                    };
                    if paused.load(Ordering::SeqCst) {
                        // Refuse: the client sees the connection close.
                        drop(inbound);
                        continue;
                    }
                    let task = tokio::spawn(async move {
                        if let Ok(mut outbound) = TcpStream::connect(("127.0.0.1", upstream)).await
                        {
                            let _ =
                                tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                        }
                    });
                    conns.lock().unwrap().push(task);
                }
            })
        };
        Proxy {
            port,
            paused,
            conns,
            accept,
        }
    }

    fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Drops every proxied connection and refuses new ones.
    fn cut_off(&self) {
        self.paused.store(true, Ordering::SeqCst);
        for t in self.conns.lock().unwrap().drain(..) {
            t.abort();
        }
    }

    fn restore(&self) {
        self.paused.store(false, Ordering::SeqCst);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.accept.abort();
        for t in self.conns.lock().unwrap().drain(..) {
            t.abort();
        }
    }
}

#[tokio::test]
async fn watches_survive_a_reconnect() {
    let server = start_target("");
    bounded(async {
        let proxy = Proxy::start(server.port).await;
        let a = Client::connector()
            .with_session_timeout(Duration::from_secs(10))
            .connect(&proxy.addr())
            .await
            .unwrap();
        let b = connect(&server).await;
        for p in ["/s1", "/s3", "/s4"] {
            b.create(p, b"", &persistent()).await.unwrap();
        }
        a.create(
            "/a-eph",
            b"",
            &CreateMode::Ephemeral.with_acls(Acls::anyone_all()),
        )
        .await
        .unwrap();
        let id = a.session_id();

        let (_, _, w1) = a.get_and_watch_data("/s1").await.unwrap();
        let (_, w2) = a.check_and_watch_stat("/s2").await.unwrap();
        let (_, w3) = a.list_and_watch_children("/s3").await.unwrap();
        let (_, _, w4) = a.get_and_watch_data("/s4").await.unwrap();
        let (_, w5) = a.check_and_watch_stat("/s5").await.unwrap();
        let mut w4 = Box::pin(w4.changed());
        let mut w5 = Box::pin(w5.changed());

        let mut state = a.state_watcher();
        proxy.cut_off();
        assert_eq!(
            within("disconnect", state.changed()).await,
            zk::SessionState::Disconnected
        );
        // Changes A cannot see while it is away.
        b.set_data("/s1", b"changed", None).await.unwrap();
        b.create("/s2", b"", &persistent()).await.unwrap();
        b.create("/s3/c", b"", &persistent()).await.unwrap();
        proxy.restore();
        assert_eq!(
            within("reconnect", state.changed()).await,
            zk::SessionState::SyncConnected
        );
        assert_eq!(a.session_id(), id);

        // setWatches fires the watches whose nodes changed meanwhile...
        assert_eq!(
            kp(&within("w1", w1.changed()).await),
            ev(EventType::NodeDataChanged, "/s1")
        );
        assert_eq!(
            kp(&within("w2", w2.changed()).await),
            ev(EventType::NodeCreated, "/s2")
        );
        assert_eq!(
            kp(&within("w3", w3.changed()).await),
            ev(EventType::NodeChildrenChanged, "/s3")
        );
        // ... and re-arms the others without firing them.
        a.sync("/").await.unwrap();
        assert!(tokio::time::timeout(Duration::ZERO, &mut w4).await.is_err());
        assert!(tokio::time::timeout(Duration::ZERO, &mut w5).await.is_err());
        b.set_data("/s4", b"now", None).await.unwrap();
        b.create("/s5", b"", &persistent()).await.unwrap();
        assert_eq!(
            kp(&within("w4", &mut w4).await),
            ev(EventType::NodeDataChanged, "/s4")
        );
        assert_eq!(
            kp(&within("w5", &mut w5).await),
            ev(EventType::NodeCreated, "/s5")
        );

        // The session and its ephemeral survived the reconnect.
        let stat = b
            .check_stat("/a-eph")
            .await
            .unwrap()
            .expect("ephemeral kept");
        assert_eq!(stat.ephemeral_owner, id.0);
    })
    .await;
}

// ---------------------------------------------------------------------------
// Raw protocol: the exact notification stream, which the library filters.

const CREATED: i32 = 1;
const DELETED: i32 = 2;
const DATA_CHANGED: i32 = 3;
const CHILDREN_CHANGED: i32 = 4;

fn events(list: &[(i32, &str)]) -> Vec<Event> {
    list.iter()
        .map(|(kind, path)| Event {
            kind: *kind,
            // SyncConnected
            state: 3,
            path: path.to_string(),
            // 3.8 sends -1 as the zxid of a notification.
            zxid: -1,
        })
        .collect()
}

fn set_data_body(path: &str, data: &[u8]) -> Vec<u8> {
    let mut b = Vec::new();
    put_str(&mut b, path);
    put_buf(&mut b, data);
    put_i32(&mut b, -1);
    b
}

fn delete_body(path: &str) -> Vec<u8> {
    let mut b = Vec::new();
    put_str(&mut b, path);
    put_i32(&mut b, -1);
    b
}

fn add_watch_body(path: &str, mode: i32) -> Vec<u8> {
    let mut b = Vec::new();
    put_str(&mut b, path);
    put_i32(&mut b, mode);
    b
}

/// Does a write on `b` and returns what `a` sees by its next reply.
fn write_then_sync(a: &mut Conn, b: &mut Conn, op: i32, body: &[u8]) -> Vec<Event> {
    let (r, _) = b.call(50, op, body);
    assert_eq!(r.err, 0, "op {op}");
    a.call(51, OP_SYNC, &path_body("/")).1
}

fn ok(c: &mut Conn, op: i32, body: &[u8]) -> Vec<Event> {
    let (r, evs) = c.call(60, op, body);
    assert!(
        r.err == 0 || (op == OP_EXISTS && r.err == ERR_NO_NODE),
        "op {op}: {}",
        r.err
    );
    evs
}

#[test]
fn raw_notification_stream() {
    let server = start_target("");
    let mut a = Conn::handshake(server.port, 30_000);
    let mut b = Conn::handshake(server.port, 30_000);
    ok(&mut b, OP_CREATE, &create_body("/ev", b"", 0));
    ok(&mut b, OP_CREATE, &create_body("/ev/c1", b"", 0));

    // Data and exist watch on the same node: one event per change.
    ok(&mut a, OP_GET_DATA, &get_body("/ev", true));
    ok(&mut a, OP_EXISTS, &get_body("/ev", true));
    ok(&mut a, OP_GET_CHILDREN, &get_body("/ev", true));
    ok(&mut a, OP_EXISTS, &get_body("/ev/new", true));
    ok(&mut a, OP_GET_DATA, &get_body("/ev/c1", true));

    // The notification reaches A before the reply to A's next read.
    let (r, _) = b.call(1, OP_SET_DATA, &set_data_body("/ev", b"v2"));
    assert_eq!(r.err, 0);
    let (r, evs) = a.call(2, OP_GET_DATA, &get_body("/ev", false));
    assert_eq!(&r.body[..6], &[0, 0, 0, 2, b'v', b'2']);
    assert_eq!(evs, events(&[(DATA_CHANGED, "/ev")]));

    // A create: the node's event first, then the parent's.
    let evs = write_then_sync(&mut a, &mut b, OP_CREATE, &create_body("/ev/new", b"", 0));
    assert_eq!(
        evs,
        events(&[(CREATED, "/ev/new"), (CHILDREN_CHANGED, "/ev")])
    );

    // One-shot: the same changes again fire nothing.
    let evs = write_then_sync(&mut a, &mut b, OP_SET_DATA, &set_data_body("/ev", b"v3"));
    assert_eq!(evs, vec![]);
    let evs = write_then_sync(&mut a, &mut b, OP_CREATE, &create_body("/ev/more", b"", 0));
    assert_eq!(evs, vec![]);

    // A child watch ignores data changes of its node and of the children.
    ok(&mut a, OP_GET_CHILDREN, &get_body("/ev", true));
    let evs = write_then_sync(&mut a, &mut b, OP_SET_DATA, &set_data_body("/ev", b"v4"));
    assert_eq!(evs, vec![]);
    let evs = write_then_sync(
        &mut a,
        &mut b,
        OP_SET_DATA,
        &set_data_body("/ev/more", b"x"),
    );
    assert_eq!(evs, vec![]);

    // A delete: the node's event first, then the parent's.
    let evs = write_then_sync(&mut a, &mut b, OP_DELETE, &delete_body("/ev/c1"));
    assert_eq!(
        evs,
        events(&[(DELETED, "/ev/c1"), (CHILDREN_CHANGED, "/ev")])
    );

    // Data, exist and child watch on one node, child and data on its
    // parent: one NodeDeleted for the node, one event for the parent.
    ok(&mut b, OP_CREATE, &create_body("/d", b"", 0));
    ok(&mut b, OP_CREATE, &create_body("/d/x", b"", 0));
    ok(&mut a, OP_GET_DATA, &get_body("/d/x", true));
    ok(&mut a, OP_EXISTS, &get_body("/d/x", true));
    ok(&mut a, OP_GET_CHILDREN, &get_body("/d/x", true));
    ok(&mut a, OP_GET_CHILDREN, &get_body("/d", true));
    ok(&mut a, OP_GET_DATA, &get_body("/d", true));
    let evs = write_then_sync(&mut a, &mut b, OP_DELETE, &delete_body("/d/x"));
    assert_eq!(evs, events(&[(DELETED, "/d/x"), (CHILDREN_CHANGED, "/d")]));

    // A session's own write: its event comes before the write's reply.
    ok(&mut a, OP_GET_DATA, &get_body("/d", true));
    let (r, evs) = a.call(3, OP_SET_DATA, &set_data_body("/d", b"mine"));
    assert_eq!(r.err, 0);
    assert_eq!(evs, events(&[(DATA_CHANGED, "/d")]));

    // A multi: events in op order, interleaved per op.
    ok(&mut a, OP_EXISTS, &get_body("/m1", true));
    ok(&mut a, OP_EXISTS, &get_body("/m2", true));
    ok(&mut a, OP_GET_CHILDREN, &get_body("/", true));
    let mut m = Vec::new();
    put_multi_header(&mut m, OP_CREATE, false, -1);
    m.extend_from_slice(&create_body("/m1", b"", 0));
    put_multi_header(&mut m, OP_CREATE, false, -1);
    m.extend_from_slice(&create_body("/m2", b"", 0));
    put_multi_header(&mut m, -1, true, -1);
    let evs = write_then_sync(&mut a, &mut b, OP_MULTI, &m);
    assert_eq!(
        evs,
        events(&[(CREATED, "/m1"), (CHILDREN_CHANGED, "/"), (CREATED, "/m2")])
    );

    // An ephemeral's deletion by closeSession fires like a delete.
    let mut e = Conn::handshake(server.port, 30_000);
    ok(&mut e, OP_CREATE, &create_body("/d/eph", b"", 1));
    ok(&mut a, OP_EXISTS, &get_body("/d/eph", true));
    ok(&mut a, OP_GET_CHILDREN, &get_body("/d", true));
    let (r, _) = e.call(4, OP_CLOSE_SESSION, &[]);
    assert_eq!(r.err, 0);
    let (_, evs) = a.call(5, OP_SYNC, &path_body("/"));
    assert_eq!(
        evs,
        events(&[(DELETED, "/d/eph"), (CHILDREN_CHANGED, "/d")])
    );
}

#[test]
fn raw_persistent_streams() {
    let server = start_target("");
    let mut a = Conn::handshake(server.port, 30_000);
    let mut b = Conn::handshake(server.port, 30_000);
    ok(&mut a, OP_ADD_WATCH, &add_watch_body("/p", 0));
    ok(&mut a, OP_ADD_WATCH, &add_watch_body("/r", 1));
    for (op, body) in [
        (OP_CREATE, create_body("/p", b"", 0)),
        (OP_SET_DATA, set_data_body("/p", b"x")),
        (OP_CREATE, create_body("/p/c", b"", 0)),
        (OP_SET_DATA, set_data_body("/p/c", b"x")),
        (OP_DELETE, delete_body("/p/c")),
        (OP_DELETE, delete_body("/p")),
        (OP_CREATE, create_body("/r", b"", 0)),
        (OP_CREATE, create_body("/r/a", b"", 0)),
        (OP_CREATE, create_body("/r/a/b", b"", 0)),
        (OP_SET_DATA, set_data_body("/r/a/b", b"x")),
        (OP_DELETE, delete_body("/r/a/b")),
        (OP_CREATE, create_body("/rx", b"", 0)),
    ] {
        let (r, _) = b.call(1, op, &body);
        assert_eq!(r.err, 0);
    }
    let (_, evs) = a.call(2, OP_SYNC, &path_body("/"));
    assert_eq!(
        evs,
        events(&[
            (CREATED, "/p"),
            (DATA_CHANGED, "/p"),
            (CHILDREN_CHANGED, "/p"),
            (CHILDREN_CHANGED, "/p"),
            (DELETED, "/p"),
            (CREATED, "/r"),
            (CREATED, "/r/a"),
            (CREATED, "/r/a/b"),
            (DATA_CHANGED, "/r/a/b"),
            (DELETED, "/r/a/b"),
        ])
    );

    // A one-shot watch added on a path that has a persistent watch of the
    // same session. ZooKeeper 3.8 keeps a single mode per (session, path) in
    // each of its data and child watch tables (ZOOKEEPER-4466): the one-shot
    // data watch replaces the persistent one in the data table, so after it
    // fired, data changes are no longer reported, while the child table still
    // holds the persistent watch (children and deletion keep firing).
    ok(&mut b, OP_CREATE, &create_body("/p", b"", 0));
    let (_, evs) = a.call(3, OP_SYNC, &path_body("/"));
    assert_eq!(evs, events(&[(CREATED, "/p")]));
    ok(&mut a, OP_GET_DATA, &get_body("/p", true));
    let evs = write_then_sync(&mut a, &mut b, OP_SET_DATA, &set_data_body("/p", b"1"));
    assert_eq!(evs, events(&[(DATA_CHANGED, "/p")]));
    let evs = write_then_sync(&mut a, &mut b, OP_SET_DATA, &set_data_body("/p", b"2"));
    assert_eq!(evs, vec![]);
    let evs = write_then_sync(&mut a, &mut b, OP_CREATE, &create_body("/p/k", b"", 0));
    assert_eq!(evs, events(&[(CHILDREN_CHANGED, "/p")]));
    ok(&mut b, OP_DELETE, &delete_body("/p/k"));
    let evs = write_then_sync(&mut a, &mut b, OP_DELETE, &delete_body("/p"));
    assert_eq!(evs, events(&[(CHILDREN_CHANGED, "/p"), (DELETED, "/p")]));
}

#[test]
fn raw_set_watches() {
    let server = start_target("");
    let mut b = Conn::handshake(server.port, 30_000);
    for p in ["/sw", "/sw/a", "/sw/b", "/sw2", "/sw3"] {
        ok(&mut b, OP_CREATE, &create_body(p, b"", 0));
    }
    let (r, _) = b.call(1, OP_EXISTS, &get_body("/sw", false));
    let seen = r.zxid;
    ok(&mut b, OP_SET_DATA, &set_data_body("/sw/a", b"new"));
    ok(&mut b, OP_DELETE, &delete_body("/sw/b"));
    ok(&mut b, OP_CREATE, &create_body("/sw/c", b"", 0));

    // setWatches(relativeZxid, data, exist, child): what changed after
    // relativeZxid fires at once, before the reply; the rest is armed.
    let mut a = Conn::handshake(server.port, 30_000);
    let mut body = Vec::new();
    put_i64(&mut body, seen);
    put_strs(&mut body, &["/sw/a", "/sw/b", "/sw2", "/gone"]);
    put_strs(&mut body, &["/sw/c", "/nothere", "/sw3"]);
    put_strs(&mut body, &["/sw", "/sw2", "/gone2"]);
    let (r, evs) = a.call(-8, OP_SET_WATCHES, &body);
    assert_eq!((r.xid, r.err, r.body.len()), (-8, 0, 0));
    assert_eq!(
        evs,
        events(&[
            // data watches: changed, deleted, (unchanged: armed), missing
            (DATA_CHANGED, "/sw/a"),
            (DELETED, "/sw/b"),
            (DELETED, "/gone"),
            // exist watches: any existing node fires NodeCreated
            (CREATED, "/sw/c"),
            (CREATED, "/sw3"),
            // child watches: children changed, (unchanged: armed), missing
            (CHILDREN_CHANGED, "/sw"),
            (DELETED, "/gone2"),
        ])
    );
    let (_, evs) = a.call(1, OP_SYNC, &path_body("/"));
    assert_eq!(evs, vec![]);
    ok(&mut b, OP_SET_DATA, &set_data_body("/sw2", b"x"));
    ok(&mut b, OP_CREATE, &create_body("/nothere", b"", 0));
    ok(&mut b, OP_CREATE, &create_body("/sw2/k", b"", 0));
    let (_, evs) = a.call(2, OP_SYNC, &path_body("/"));
    assert_eq!(
        evs,
        events(&[
            (DATA_CHANGED, "/sw2"),
            (CREATED, "/nothere"),
            (CHILDREN_CHANGED, "/sw2"),
        ])
    );

    // setWatches2 adds persistent and persistent-recursive lists; those
    // only arm, they never fire on their own.
    let mut a2 = Conn::handshake(server.port, 30_000);
    let mut body = Vec::new();
    put_i64(&mut body, seen);
    put_strs(&mut body, &[]);
    put_strs(&mut body, &[]);
    put_strs(&mut body, &[]);
    put_strs(&mut body, &["/sw3"]);
    put_strs(&mut body, &["/sw"]);
    let (r, evs) = a2.call(7, OP_SET_WATCHES2, &body);
    assert_eq!((r.xid, r.err, r.body.len()), (7, 0, 0));
    assert_eq!(evs, vec![]);
    ok(&mut b, OP_SET_DATA, &set_data_body("/sw3", b"x"));
    ok(&mut b, OP_SET_DATA, &set_data_body("/sw/a", b"x"));
    let (_, evs) = a2.call(8, OP_SYNC, &path_body("/"));
    assert_eq!(
        evs,
        events(&[(DATA_CHANGED, "/sw3"), (DATA_CHANGED, "/sw/a")])
    );
}
