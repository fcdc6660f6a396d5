//! Once a write is acknowledged to one session, every other session of the
//! same server reads it (or something newer), as on a standalone Apache
//! ZooKeeper, where requests pass one pipeline in arrival order. With more
//! than one shard each shard applies a commit batch on its own executor,
//! so a session on a shard that had not applied the batch yet could read
//! the value from before a write another session had already seen
//! acknowledged. Client test suites lean on this all the time (client A
//! creates, client B reads at once), so the shards keep it. Half the
//! readers send a write of their own just before the other session's, so
//! their read waits behind that write and is still owed the other's. Also: a new
//! connection that has seen a zxid is never refused for it by a shard that
//! is a batch behind.
//! Runs against Apache ZooKeeper too (RK_TEST_TARGET=zookeeper), which
//! ignores the ringkeeper.* keys.

mod common;

use common::raw::*;
use common::start_target;

const SESSIONS: usize = 12;
const ROUNDS: usize = 600;

/// Rounds of: one session writes and is acknowledged, then every other
/// session (spread by the kernel over the shards) reads at once. Returns
/// the stale reads seen, as (round, reader, what it read).
fn writes_then_reads_everywhere(extra_cfg: &str) -> Vec<(usize, usize, String)> {
    let server = start_target(extra_cfg);
    let port = server.port;
    let mut conns: Vec<Conn> = (0..SESSIONS)
        .map(|_| Conn::handshake(port, 30_000))
        .collect();
    let (r, _) = conns[0].call(1, 1, &create_body("/x", b"start", 0));
    assert_eq!(r.err, 0, "create /x");
    for (i, c) in conns.iter_mut().enumerate() {
        let (r, _) = c.call(2, 1, &create_body(&format!("/own{i}"), b"", 0));
        assert_eq!(r.err, 0, "create /own{i}");
    }
    let mut stale = Vec::new();
    let mut xid = 10;
    for round in 0..ROUNDS {
        xid += 1;
        let writer = round % SESSIONS;
        let value = format!("v{round}");
        // Odd readers send a write of their own before the writer's and
        // do not wait for it: their read then queues behind it, and the
        // two writes may share a batch, the reader's first.
        let writes_first = |i: usize| i % 2 == 1 && i != writer;
        for (i, c) in conns.iter_mut().enumerate() {
            if writes_first(i) {
                let own = set_body(&format!("/own{i}"), value.as_bytes());
                c.send(xid + 1_000_000, 5, &own);
            }
        }
        let (set, _) = conns[writer].call(xid, 5, &set_body("/x", value.as_bytes()));
        assert_eq!(set.err, 0, "setData in round {round}");
        for (i, c) in conns.iter_mut().enumerate() {
            if i != writer {
                c.send(xid, 4, &get_body("/x", false));
            }
        }
        for (i, c) in conns.iter_mut().enumerate() {
            if i == writer {
                continue;
            }
            if writes_first(i) {
                let own = c.recv().expect("own setData reply");
                assert_eq!(
                    (own.xid, own.err),
                    (xid + 1_000_000, 0),
                    "own setData in round {round}"
                );
            }
            let get = c.recv().expect("getData reply");
            assert_eq!((get.xid, get.err), (xid, 0), "getData in round {round}");
            let data = Rd(&get.body).buf().expect("data");
            let read = String::from_utf8(data).unwrap();
            if read != value {
                stale.push((round, i, read));
            } else {
                assert!(
                    get.zxid >= set.zxid,
                    "a reply's zxid is at least the write's"
                );
            }
        }
        if round % 25 == 0 {
            // A new connection that has seen the write's zxid (as a client
            // moving its session would) is answered, not refused.
            let (_s, resp) = Conn::open(
                port,
                &connect_body(30_000, 0, &[0; 16], set.zxid, Some(false)),
            );
            let resp = resp.unwrap_or_else(|| {
                panic!("a connection that has seen {:#x} was refused", set.zxid)
            });
            assert_ne!(resp.session_id, 0, "round {round}: session refused");
        }
    }
    stale
}

fn check(extra_cfg: &str) {
    let stale = writes_then_reads_everywhere(extra_cfg);
    assert!(
        stale.is_empty(),
        "{} of {} reads after another session's acknowledged write read an older value \
         (round, reader, value): {:?}",
        stale.len(),
        ROUNDS * (SESSIONS - 1),
        &stale[..stale.len().min(10)]
    );
}

#[test]
fn three_shards_core_on_its_own_executor() {
    check("ringkeeper.shards=3\nringkeeper.consensusExecutor=own\n");
}

#[test]
fn two_shards_core_on_shard_zero() {
    check("ringkeeper.shards=2\nringkeeper.consensusExecutor=shared\n");
}
