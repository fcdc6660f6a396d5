//! A read queued behind the same session's write sees exactly that write:
//! not older (it follows the write), not newer (the session's next write
//! comes after it), even when the writes of both and of other sessions are
//! committed in one group-commit batch. Pipelined raw requests make the
//! batches big; the shard then answers each read from the tree right after
//! the write before it (see `Shard::apply_batch`). Runs against Apache
//! ZooKeeper too (RK_TEST_TARGET=zookeeper).

mod common;

use std::io::Write;

use common::raw::*;
use common::start_target;

const ROUNDS: i32 = 300;

/// Sends `ROUNDS` x (setData path vN, getData path) in one write, and
/// checks every getData reply against the setData before it.
fn pipeline_and_check(port: u16, path: &str) {
    let mut c = Conn::handshake(port, 30_000);
    let (r, _) = c.call(1, 1, &create_body(path, b"v", 0));
    assert_eq!(r.err, 0, "create {path}");
    let mut bytes = Vec::new();
    for i in 0..ROUNDS {
        for (xid, op, body) in [
            (2 + 2 * i, 5, set_body(path, format!("v{i}").as_bytes())),
            (3 + 2 * i, 4, get_body(path, false)),
        ] {
            let mut b = Vec::new();
            put_i32(&mut b, xid);
            put_i32(&mut b, op);
            b.extend_from_slice(&body);
            bytes.extend_from_slice(&frame(&b));
        }
    }
    c.s.write_all(&bytes).unwrap();
    let mut set_zxid = 0;
    for i in 0..ROUNDS {
        let set = c.recv().expect("setData reply");
        assert_eq!((set.xid, set.err), (2 + 2 * i, 0), "setData {i}");
        assert!(set.zxid > set_zxid, "write zxids grow");
        set_zxid = set.zxid;
        let get = c.recv().expect("getData reply");
        assert_eq!((get.xid, get.err), (3 + 2 * i, 0), "getData {i}");
        let mut rd = Rd(&get.body);
        let data = rd.buf().expect("data");
        assert_eq!(
            String::from_utf8(data).unwrap(),
            format!("v{i}"),
            "the read after write {i} on {path} sees that write"
        );
        let (_czxid, mzxid) = (rd.i64(), rd.i64());
        assert_eq!(mzxid, set.zxid, "the read's stat is the write's");
        assert!(get.zxid >= set.zxid, "a reply's zxid never goes back");
    }
}

#[test]
fn reads_behind_writes_in_one_batch_see_exactly_their_write() {
    let server = start_target("");
    let port = server.port;
    // Several sessions at once: their writes share batches, so each read
    // must be answered from a version in the middle of one.
    let workers: Vec<_> = (0..4)
        .map(|w| std::thread::spawn(move || pipeline_and_check(port, &format!("/raw{w}"))))
        .collect();
    for w in workers {
        w.join().expect("worker");
    }
}
