//! Sessions: timeout negotiation, keep-alive, re-attaching a session on a new
//! connection, close, expiry, and the connect handshake's refusals.
//!
//! Every expectation here was observed on Apache ZooKeeper 3.8
//! (`RK_TEST_TARGET=zookeeper`); ringkeeper must behave the same way.

mod common;

use std::future::Future;
use std::time::{Duration, Instant};

use common::{start_target, Server};
use zk::{Acls, Client, CreateMode, EventType, WatchedEvent};
use zookeeper_client as zk;

use common::raw::*;

const TEST_LIMIT: Duration = Duration::from_secs(60);
const EVENT_WAIT: Duration = Duration::from_secs(15);

async fn bounded<F: Future>(f: F) -> F::Output {
    tokio::time::timeout(TEST_LIMIT, f)
        .await
        .expect("test did not finish in time")
}

async fn event(what: &str, f: impl Future<Output = WatchedEvent>) -> WatchedEvent {
    tokio::time::timeout(EVENT_WAIT, f)
        .await
        .unwrap_or_else(|_| panic!("no event within {EVENT_WAIT:?}: {what}"))
}

async fn connect_with_timeout(server: &Server, timeout: Duration) -> Client {
    Client::connector()
        .with_session_timeout(timeout)
        .connect(&server.addr())
        .await
        .expect("connect")
}

fn ephemeral() -> zk::CreateOptions<'static> {
    CreateMode::Ephemeral.with_acls(Acls::anyone_all())
}

fn persistent() -> zk::CreateOptions<'static> {
    CreateMode::Persistent.with_acls(Acls::anyone_all())
}

#[tokio::test]
async fn timeout_is_clamped_to_2_and_20_ticks() {
    // tickTime=2000: the negotiated timeout lies in [4000, 40000] ms.
    let server = start_target("");
    bounded(async {
        for (asked, got) in [
            (1_000, 4_000),
            (3_999, 4_000),
            (4_000, 4_000),
            (4_001, 4_001),
            (10_000, 10_000),
            (40_000, 40_000),
            (40_001, 40_000),
            (100_000, 40_000),
        ] {
            let c = connect_with_timeout(&server, Duration::from_millis(asked)).await;
            assert_eq!(
                c.session_timeout(),
                Duration::from_millis(got),
                "asked for {asked} ms"
            );
        }
    })
    .await;
}

#[tokio::test]
async fn timeout_bounds_from_config() {
    let server = start_target("minSessionTimeout=5000\nmaxSessionTimeout=9000");
    bounded(async {
        for (asked, got) in [(1_000, 5_000), (7_000, 7_000), (20_000, 9_000)] {
            let c = connect_with_timeout(&server, Duration::from_millis(asked)).await;
            assert_eq!(
                c.session_timeout(),
                Duration::from_millis(got),
                "asked for {asked} ms"
            );
        }
    })
    .await;
}

#[tokio::test]
async fn reattach_on_a_new_connection_keeps_session_and_ephemerals() {
    let server = start_target("");
    bounded(async {
        let observer = connect_with_timeout(&server, Duration::from_secs(30)).await;

        // A detached client does not close its session when dropped: it just
        // drops the connection.
        let first = Client::connector()
            .with_session_timeout(Duration::from_secs(4))
            .with_detached()
            .connect(&server.addr())
            .await
            .unwrap();
        let id = first.session_id();
        first.create("/mine", b"", &ephemeral()).await.unwrap();
        let info = first.session().clone();
        drop(first);
        tokio::time::sleep(Duration::from_secs(1)).await;

        // Session id + password on a new connection: same session.
        let second = Client::connector()
            .with_session(info)
            .with_session_timeout(Duration::from_secs(4))
            .connect(&server.addr())
            .await
            .unwrap();
        assert_eq!(second.session_id(), id);
        assert_eq!(second.session_timeout(), Duration::from_secs(4));
        let stat = second
            .check_stat("/mine")
            .await
            .unwrap()
            .expect("ephemeral kept");
        assert_eq!(stat.ephemeral_owner, id.0);
        assert_eq!(second.list_ephemerals("/").await.unwrap(), vec!["/mine"]);

        // Pings keep an idle session alive well past its timeout.
        tokio::time::sleep(Duration::from_secs(7)).await;
        let stat = observer
            .check_stat("/mine")
            .await
            .unwrap()
            .expect("still alive");
        assert_eq!(stat.ephemeral_owner, id.0);
        second.create("/mine2", b"", &ephemeral()).await.unwrap();

        // Closing the session removes its ephemerals at once.
        let (_, watch) = observer.check_and_watch_stat("/mine").await.unwrap();
        let closed_at = Instant::now();
        drop(second);
        let ev = event("/mine deleted on close", watch.changed()).await;
        assert_eq!(
            (ev.event_type, ev.path.as_str()),
            (EventType::NodeDeleted, "/mine")
        );
        assert!(
            closed_at.elapsed() < Duration::from_secs(3),
            "close is not expiry"
        );
        assert_eq!(observer.check_stat("/mine2").await.unwrap(), None);
    })
    .await;
}

#[tokio::test]
async fn close_session_then_reattach_is_refused() {
    let server = start_target("");
    bounded(async {
        let observer = connect_with_timeout(&server, Duration::from_secs(30)).await;
        let client = connect_with_timeout(&server, Duration::from_secs(30)).await;
        client.create("/c", b"", &persistent()).await.unwrap();
        client.create("/c/e", b"", &ephemeral()).await.unwrap();
        let (_, _, child_watch) = observer.get_and_watch_children("/c").await.unwrap();
        let info = client.session().clone();
        let mut state = client.state_watcher();
        drop(client);
        let ev = event("children of /c", child_watch.changed()).await;
        assert_eq!(
            (ev.event_type, ev.path.as_str()),
            (EventType::NodeChildrenChanged, "/c")
        );
        assert!(observer.list_children("/c").await.unwrap().is_empty());
        assert_eq!(state.changed().await, zk::SessionState::Closed);

        let again = Client::connector()
            .with_session(info)
            .connect(&server.addr())
            .await;
        assert_eq!(again.err(), Some(zk::Error::SessionExpired));
    })
    .await;
}

#[tokio::test]
async fn expiry_deletes_ephemerals_and_fires_watches() {
    let server = start_target("");
    bounded(async {
        let observer = connect_with_timeout(&server, Duration::from_secs(30)).await;
        observer.create("/svc", b"", &persistent()).await.unwrap();

        let doomed = Client::connector()
            .with_session_timeout(Duration::from_secs(4))
            .with_detached()
            .connect(&server.addr())
            .await
            .unwrap();
        assert_eq!(doomed.session_timeout(), Duration::from_secs(4));
        doomed.create("/svc/eph", b"", &ephemeral()).await.unwrap();
        doomed
            .create(
                "/svc/seq-",
                b"",
                &CreateMode::EphemeralSequential.with_acls(Acls::anyone_all()),
            )
            .await
            .unwrap();
        doomed.create("/kept", b"", &persistent()).await.unwrap();

        let (_, data_watch) = observer.check_and_watch_stat("/svc/eph").await.unwrap();
        let (_, _, child_watch) = observer.get_and_watch_children("/svc").await.unwrap();
        let info = doomed.session().clone();

        // The connection goes away without closeSession; nothing pings.
        let gone_at = Instant::now();
        drop(doomed);
        let ev = event("/svc/eph deleted by expiry", data_watch.changed()).await;
        assert_eq!(
            (ev.event_type, ev.path.as_str()),
            (EventType::NodeDeleted, "/svc/eph")
        );
        let waited = gone_at.elapsed();
        assert!(
            waited >= Duration::from_secs(3),
            "expired after {waited:?}, before the 4 s timeout"
        );
        let ev = event("children of /svc", child_watch.changed()).await;
        assert_eq!(
            (ev.event_type, ev.path.as_str()),
            (EventType::NodeChildrenChanged, "/svc")
        );
        assert!(observer.list_children("/svc").await.unwrap().is_empty());
        assert!(observer.check_stat("/kept").await.unwrap().is_some());

        // The expired session cannot be re-attached.
        let again = Client::connector()
            .with_session(info)
            .connect(&server.addr())
            .await;
        assert_eq!(again.err(), Some(zk::Error::SessionExpired));
    })
    .await;
}

// ---------------------------------------------------------------------------
// Raw handshakes: what the library cannot express.

fn expired_response(r: &ConnectResponse) -> bool {
    r.protocol_version == 0 && r.timeout == 0 && r.session_id == 0 && r.passwd == [0u8; 16]
}

/// The peer closes (EOF or reset) without sending anything more.
fn assert_closed(c: &mut std::net::TcpStream, what: &str) {
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    assert!(
        read_frame(c).is_none(),
        "{what}: expected the connection to close"
    );
}

#[test]
fn raw_handshake_shapes() {
    let server = start_target("");

    // A new session: protocolVersion 0, the timeout, an id, 16 bytes of
    // password, and the readOnly flag.
    let body = connect_body(10_000, 0, &[0; 16], 0, Some(false));
    let (_s, resp) = Conn::open(server.port, &body);
    let resp = resp.expect("connect response");
    assert_eq!(resp.protocol_version, 0);
    assert_eq!(resp.timeout, 10_000);
    assert_ne!(resp.session_id, 0);
    assert_eq!(resp.passwd.len(), 16);
    assert_eq!(resp.read_only, Some(false));

    // Old clients omit the readOnly flag: so does the answer.
    let (_s, resp) = Conn::open(server.port, &connect_body(10_000, 0, &[0; 16], 0, None));
    let resp = resp.expect("connect response");
    assert_ne!(resp.session_id, 0);
    assert_eq!(resp.read_only, None);

    // A client that accepts read-only mode gets a read-write session.
    let (_s, resp) = Conn::open(
        server.port,
        &connect_body(10_000, 0, &[0; 16], 0, Some(true)),
    );
    assert_eq!(resp.expect("connect response").read_only, Some(false));

    // A new session ignores the password it was sent, even an empty one.
    let (_s, resp) = Conn::open(server.port, &connect_body(10_000, 0, &[], 0, Some(false)));
    let resp = resp.expect("connect response");
    assert_ne!(resp.session_id, 0);
    assert_eq!(resp.passwd.len(), 16);

    // Zero and negative timeouts are clamped like any other.
    for t in [0, -5] {
        let (_s, resp) = Conn::open(server.port, &connect_body(t, 0, &[0; 16], 0, Some(false)));
        assert_eq!(resp.expect("connect response").timeout, 4_000, "asked {t}");
    }
}

#[test]
fn raw_reattach_wrong_password_and_unknown_session() {
    let server = start_target("");
    let mut a = Conn::handshake(server.port, 10_000);
    let (r, _) = a.call(1, OP_CREATE, &create_body("/eph", b"", 1));
    assert_eq!(r.err, 0);

    // The right password on a new connection: the same session, the same
    // password, and the old connection is closed.
    let body = connect_body(10_000, a.session_id, &a.passwd, r.zxid, Some(false));
    let (mut b, resp) = Conn::open(server.port, &body);
    let resp = resp.expect("connect response");
    assert_eq!(resp.session_id, a.session_id);
    assert_eq!(resp.passwd, a.passwd);
    assert_eq!(resp.timeout, 10_000);
    assert_closed(&mut a.s, "the connection that lost its session");

    // A wrong password: an all-zero answer (timeout 0, session 0, 16 zero
    // bytes), then close. ZooKeeper closes the session's current connection
    // too, before it checks the password.
    let mut wrong = a.passwd.clone();
    wrong[0] ^= 1;
    let (mut w, resp) = Conn::open(
        server.port,
        &connect_body(10_000, a.session_id, &wrong, 0, Some(false)),
    );
    let resp = resp.expect("an answer to a wrong password");
    assert!(expired_response(&resp), "{resp:?}");
    assert_eq!(resp.read_only, Some(false));
    assert_closed(&mut w, "after a wrong password");
    assert_closed(
        &mut b,
        "the session's connection after a wrong-password attempt",
    );

    // The session itself survived: reattach once more and find the node.
    let body = connect_body(10_000, a.session_id, &a.passwd, 0, Some(false));
    let (s, resp) = Conn::open(server.port, &body);
    assert_eq!(resp.expect("connect response").session_id, a.session_id);
    let mut c = Conn {
        s,
        session_id: a.session_id,
        passwd: a.passwd.clone(),
        timeout: 10_000,
    };
    let (r, _) = c.call(2, OP_EXISTS, &get_body("/eph", false));
    assert_eq!(r.err, 0, "the ephemeral is still there");

    // An unknown session id: the same all-zero answer, then close.
    let (mut u, resp) = Conn::open(
        server.port,
        &connect_body(10_000, a.session_id + 1000, &a.passwd, 0, Some(false)),
    );
    assert!(expired_response(&resp.expect("an answer")));
    assert_closed(&mut u, "after an unknown session");
}

#[test]
fn raw_client_ahead_of_server_is_refused() {
    let server = start_target("");
    let mut a = Conn::handshake(server.port, 10_000);
    let (r, _) = a.call(1, OP_CREATE, &create_body("/x", b"", 0));
    // A client that has seen a zxid the server has not: closed, no answer.
    let (mut s, resp) = Conn::open(
        server.port,
        &connect_body(10_000, 0, &[0; 16], r.zxid + 1, Some(false)),
    );
    assert!(resp.is_none(), "{resp:?}");
    assert_closed(&mut s, "zxid ahead");
    // Exactly the server's zxid is fine.
    let (_s, resp) = Conn::open(
        server.port,
        &connect_body(10_000, 0, &[0; 16], r.zxid, Some(false)),
    );
    assert_ne!(resp.expect("connect response").session_id, 0);
}

#[test]
fn raw_ping_and_close_session() {
    let server = start_target("");
    let mut c = Conn::handshake(server.port, 10_000);
    let (created, _) = c.call(1, OP_CREATE, &create_body("/e", b"", 1));

    // ping: xid -2, the last zxid, no error, no body.
    let (p, _) = c.call(-2, OP_PING, &[]);
    assert_eq!(
        (p.xid, p.zxid, p.err, p.body.len()),
        (-2, created.zxid, 0, 0)
    );

    // closeSession: answered (it is a transaction), then the server closes.
    let (r, _) = c.call(2, OP_CLOSE_SESSION, &[]);
    assert_eq!((r.err, r.zxid, r.body.len()), (0, created.zxid + 1, 0));
    assert_closed(&mut c.s, "after closeSession");

    let mut o = Conn::handshake(server.port, 10_000);
    let (r, _) = o.call(1, OP_EXISTS, &get_body("/e", false));
    assert_eq!(r.err, ERR_NO_NODE, "the ephemeral went with the session");
    let (_s, resp) = Conn::open(
        server.port,
        &connect_body(10_000, c.session_id, &c.passwd, 0, Some(false)),
    );
    assert!(expired_response(&resp.expect("an answer")));
}

/// A client that sends requests and never pings keeps its session alive
/// through many of the server's session-touch rounds, and the session
/// expires once the client goes quiet (its ephemeral goes with it).
#[test]
fn requests_alone_keep_a_session_alive_until_it_goes_quiet() {
    let server = start_target("tickTime=200\n");
    let mut c = Conn::handshake(server.port, 600);
    assert_eq!(c.timeout, 600, "600 ms is within 2..20 ticks of 200 ms");
    let (r, _) = c.call(1, OP_CREATE, &create_body("/alive", b"", 1));
    assert_eq!(r.err, 0);
    // Five timeouts of getData every 100 ms: no ping, only requests.
    let busy_until = Instant::now() + Duration::from_secs(3);
    let mut xid = 2;
    while Instant::now() < busy_until {
        let (r, _) = c.call(xid, OP_GET_DATA, &get_body("/alive", false));
        assert_eq!(r.err, 0, "request {xid}: the session is alive");
        xid += 1;
        std::thread::sleep(Duration::from_millis(100));
    }
    // Quiet now: the session expires and its ephemeral is deleted.
    let mut o = Conn::handshake(server.port, 10_000);
    let deadline = Instant::now() + Duration::from_secs(15);
    let mut oxid = 1;
    loop {
        let (r, _) = o.call(oxid, OP_EXISTS, &get_body("/alive", false));
        oxid += 1;
        if r.err == ERR_NO_NODE {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the quiet session's ephemeral outlived 25 timeouts"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}
