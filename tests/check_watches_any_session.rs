//! ZooKeeper 3.8's checkWatches answers OK when *any* connection of the
//! server watches the path (WatchManager.containsWatcher looks the path
//! up, not the watcher), and NoWatcher once no connection does. With
//! several shards the session asking and the session watching are on
//! different shards most of the time: the answer must be the server's, not
//! the asking shard's. removeWatches, by contrast, removes only the
//! session's own watch.
//! Runs against Apache ZooKeeper too (RK_TEST_TARGET=zookeeper), which
//! ignores the ringkeeper.* keys.

mod common;

use common::raw::*;
use common::start_target;

/// Askers, spread by the kernel over the shards: with three shards the
/// chance that all of them share the watcher's is (1/3)^16.
const ASKERS: usize = 16;

const CHILD: i32 = 1;
const DATA: i32 = 2;
const ANY: i32 = 3;

fn watch_op(c: &mut Conn, xid: &mut i32, op: i32, path: &str, kind: i32) -> i32 {
    *xid += 1;
    let mut b = Vec::new();
    put_str(&mut b, path);
    put_i32(&mut b, kind);
    let (r, _) = c.call(*xid, op, &b);
    r.err
}

/// Every asker's answer to checkWatches(`path`, `kind`), as
/// (asker, error) where it is not `want`.
fn others_check(
    askers: &mut [Conn],
    xid: &mut i32,
    path: &str,
    kind: i32,
    want: i32,
) -> Vec<(usize, i32)> {
    askers
        .iter_mut()
        .enumerate()
        .map(|(i, c)| (i, watch_op(c, xid, OP_CHECK_WATCHES, path, kind)))
        .filter(|(_, err)| *err != want)
        .collect()
}

fn check_from_every_session(extra_cfg: &str) {
    let server = start_target(extra_cfg);
    let mut xid = 0;
    let mut watcher = Conn::handshake(server.port, 30_000);
    let mut askers: Vec<Conn> = (0..ASKERS)
        .map(|_| Conn::handshake(server.port, 30_000))
        .collect();
    for p in ["/d", "/c", "/p"] {
        xid += 1;
        let (r, _) = watcher.call(xid, OP_CREATE, &create_body(p, b"", 0));
        assert_eq!(r.err, 0, "create {p}");
    }
    // A data watch on /d, a child watch on /c, an exists watch on a
    // missing node, a persistent watch on /p.
    xid += 1;
    assert_eq!(
        watcher.call(xid, OP_GET_DATA, &get_body("/d", true)).0.err,
        0
    );
    xid += 1;
    assert_eq!(
        watcher
            .call(xid, OP_GET_CHILDREN, &get_body("/c", true))
            .0
            .err,
        0
    );
    xid += 1;
    assert_eq!(
        watcher
            .call(xid, OP_EXISTS, &get_body("/missing", true))
            .0
            .err,
        ERR_NO_NODE
    );
    let mut b = Vec::new();
    put_str(&mut b, "/p");
    put_i32(&mut b, 0);
    xid += 1;
    assert_eq!(watcher.call(xid, OP_ADD_WATCH, &b).0.err, 0);

    let expect = [
        ("/d", DATA, 0),
        ("/d", ANY, 0),
        ("/d", CHILD, ERR_NO_WATCHER),
        ("/c", CHILD, 0),
        ("/c", DATA, ERR_NO_WATCHER),
        ("/missing", DATA, 0),
        ("/p", DATA, 0),
        ("/p", CHILD, 0),
        ("/nobody", ANY, ERR_NO_WATCHER),
    ];
    for (path, kind, want) in expect {
        let wrong = others_check(&mut askers, &mut xid, path, kind, want);
        assert!(
            wrong.is_empty(),
            "checkWatches({path}, {kind}) from other sessions: want {want}, \
             these askers answered otherwise: {wrong:?}"
        );
    }

    // removeWatches is the session's own: the others have nothing to
    // remove, and the watcher's watch stays.
    for (i, c) in askers.iter_mut().enumerate() {
        assert_eq!(
            watch_op(c, &mut xid, OP_REMOVE_WATCHES, "/d", DATA),
            ERR_NO_WATCHER,
            "asker {i} removed the watcher's watch"
        );
    }
    assert_eq!(
        watch_op(&mut watcher, &mut xid, OP_CHECK_WATCHES, "/d", DATA),
        0
    );

    // One asker's write fires the watch on /d; once that write is
    // acknowledged, no session finds a watch on /d (without waiting for
    // the event to reach the watcher).
    xid += 1;
    let (r, _) = askers[0].call(xid, OP_SET_DATA, &set_body("/d", b"x"));
    assert_eq!(r.err, 0);
    let wrong = others_check(&mut askers, &mut xid, "/d", DATA, ERR_NO_WATCHER);
    assert!(
        wrong.is_empty(),
        "after the watch on /d fired, these askers still found one: {wrong:?}"
    );
    // Likewise a child watch, fired by a create under /c.
    xid += 1;
    let (r, _) = askers[1].call(xid, OP_CREATE, &create_body("/c/k", b"", 0));
    assert_eq!(r.err, 0);
    let wrong = others_check(&mut askers, &mut xid, "/c", CHILD, ERR_NO_WATCHER);
    assert!(
        wrong.is_empty(),
        "after the watch on /c fired, these askers still found one: {wrong:?}"
    );
    // The persistent watch stays through a change...
    xid += 1;
    let (r, _) = askers[2].call(xid, OP_SET_DATA, &set_body("/p", b"y"));
    assert_eq!(r.err, 0);
    let wrong = others_check(&mut askers, &mut xid, "/p", DATA, 0);
    assert!(wrong.is_empty(), "persistent watch on /p lost: {wrong:?}");
    // ...and goes when its owner removes it.
    assert_eq!(
        watch_op(&mut watcher, &mut xid, OP_REMOVE_WATCHES, "/p", ANY),
        0
    );
    let wrong = others_check(&mut askers, &mut xid, "/p", ANY, ERR_NO_WATCHER);
    assert!(
        wrong.is_empty(),
        "removed watch on /p still found: {wrong:?}"
    );

    // A watch set again after it fired is found again.
    xid += 1;
    assert_eq!(
        watcher.call(xid, OP_GET_DATA, &get_body("/d", true)).0.err,
        0
    );
    let wrong = others_check(&mut askers, &mut xid, "/d", DATA, 0);
    assert!(
        wrong.is_empty(),
        "watch set again on /d not found: {wrong:?}"
    );
}

#[test]
fn check_watches_sees_every_session_one_shard() {
    check_from_every_session("ringkeeper.shards=1\n");
}

#[test]
fn check_watches_sees_every_session_three_shards() {
    check_from_every_session("ringkeeper.shards=3\nringkeeper.consensusExecutor=own\n");
}
