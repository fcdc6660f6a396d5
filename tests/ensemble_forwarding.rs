//! What a follower passes on to its leader: a client's write goes on as the
//! client sent it, as a Java follower passes it on, so the leader reads what
//! it would have read from the client. A body encoded again from the
//! decoded request is not that: each byte that is not UTF-8 reads as
//! U+FFFD, three bytes in UTF-8, so a request under the client limit could
//! come out over the leader's limit for a quorum packet, and the leader
//! dropped the follower (and with it the follower's clients) instead of
//! answering the request.
//!
//! Runs against Apache ZooKeeper too (RK_TEST_TARGET=zookeeper), which
//! checks the test itself.
//!
//! Needs: apt-get install -y zookeeper

mod common;

use common::cluster::Cluster;
use common::ensemble_client::{session_on, ELECTION_TIMEOUT};
use common::raw_fallible::{
    create_body, get_body, put_buf, put_i32, OP_CREATE, OP_EXISTS, OP_SET_DATA,
};
use common::target_flavor;

const BAD_ARGUMENTS: i32 = -8;
/// Bytes of 0xff in the path: under the client's limit (jute.maxbuffer,
/// 1,048,575), three times that as UTF-8 (2.1 MB) over the leader's limit
/// for a quorum packet's data (twice jute.maxbuffer).
const BAD_BYTES: usize = 700_000;

#[test]
fn a_write_with_bytes_that_are_not_utf8_through_a_follower_is_answered_and_the_follower_stays() {
    let flavor = target_flavor();
    let c = Cluster::start(flavor, 3);
    let leader = c.wait_for_leader(ELECTION_TIMEOUT);
    let follower = (leader + 1) % 3;
    let mut bystander = session_on(&c, follower);
    let mut client = session_on(&c, follower);

    let mut path = b"/".to_vec();
    path.extend(std::iter::repeat_n(0xffu8, BAD_BYTES));
    let mut body = Vec::new();
    put_buf(&mut body, &path);
    put_buf(&mut body, b"x");
    put_i32(&mut body, -1);
    let reply = client.call(OP_SET_DATA, &body).unwrap_or_else(|e| {
        panic!(
            "{flavor:?}: setData of a path of {BAD_BYTES} bytes 0xff through follower {}: {e}\n{}",
            follower + 1,
            c.report()
        )
    });
    assert_eq!(
        reply.err,
        BAD_ARGUMENTS,
        "{flavor:?}: setData of a path of {BAD_BYTES} bytes 0xff through follower {}\n{}",
        follower + 1,
        c.report()
    );

    // The follower still follows the same leader, and its clients are
    // still connected: both sessions read and write through it.
    for (conn, who, path) in [
        (&mut client, "the same session", "/after"),
        (&mut bystander, "another session", "/bystander"),
    ] {
        let read = conn.call(OP_EXISTS, &get_body("/", false)).map(|r| r.err);
        let create = conn
            .call(OP_CREATE, &create_body(path, b"", 0))
            .map(|r| r.err);
        assert!(
            matches!((&read, &create), (Ok(0), Ok(0))),
            "{flavor:?}: {who} on the follower afterwards: exists {read:?}, create {create:?}\n{}",
            c.report()
        );
    }
    assert_eq!(
        c.wait_for_leader(ELECTION_TIMEOUT),
        leader,
        "{flavor:?}: the leader changed\n{}",
        c.report()
    );
    assert!(
        c.srvr(follower).contains("Mode: follower"),
        "{flavor:?}: member {} is not following:\n{}",
        follower + 1,
        c.srvr(follower)
    );
}
