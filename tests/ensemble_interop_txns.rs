//! Every write txn type across flavors (issue 26, defect 10): in mixed
//! ensembles of ringkeeper and Debian's Apache ZooKeeper 3.8, each member's
//! client port is sent the same script of writes (create, create2,
//! createContainer, createTTL, setData, setACL, delete, multi with each op,
//! check inside multi, failing multis, and the errors of each) and must
//! give ZooKeeper's answers: the error codes, the result types and the
//! stats, each create2-family stat also equal to what exists() says right
//! after. A Java member answers its clients from the txn the leader sent
//! (FinalRequestProcessor reads a create2's stat off the DataTree's result,
//! which has one only for the txn types create2/createContainer/createTTL),
//! so a ringkeeper leader must send ZooKeeper's txn types; a ringkeeper
//! member following a Java leader must apply and answer what Java sends.
//! Then the reaper deletes an emptied container and an expired TTL node
//! (deleteContainer txns), and one writer per member pipelines creates,
//! create2s, multis and setDatas at the same time (a Java follower exits
//! with code 12, "Committing zxid ... but next pending txn", if a leader
//! commits several proposals with one COMMIT; a Java leader closes a
//! follower that leaves a proposal unacknowledged for syncLimit, and
//! commits nothing past a proposal no quorum acknowledged, so a ringkeeper
//! follower must ACK each proposal). At the end every acknowledged write is
//! on every member and every Java member still runs.
//!
//! The expected answers are ZooKeeper 3.8's: `java_alone_answers_the_script`
//! runs the same script on three Java servers.
//!
//! Who leads first: FastLeaderElection picks the highest (epoch, zxid,
//! sid), so with empty data dirs the highest id's flavor usually leads; when
//! another member leads (it was up first), it is restarted until the wanted
//! flavor leads (see tests/ensemble_interop.rs).

mod common;

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::thread;
use std::time::{Duration, Instant};

use common::cluster::Cluster;
use common::ensemble_client::*;
use common::raw_fallible::*;
use common::Flavor::{Ringkeeper as Rk, ZooKeeper as Zk};
use common::{Flavor, ZK_JAR};

const OP_SET_ACL: i32 = 7;
const OP_CHECK: i32 = 13;
const OP_CREATE2: i32 = 15;
const OP_CREATE_CONTAINER: i32 = 19;
const OP_CREATE_TTL: i32 = 21;
const OP_ERROR: i32 = -1;

const FLAG_SEQUENTIAL: i32 = 2;
const FLAG_CONTAINER: i32 = 4;
const FLAG_TTL: i32 = 5;
const FLAG_TTL_SEQUENTIAL: i32 = 6;

const NODE_EXISTS: i32 = -110;
const NO_NODE: i32 = -101;
const BAD_VERSION: i32 = -103;
const BAD_ARGUMENTS: i32 = -8;
const NO_CHILDREN_FOR_EPHEMERALS: i32 = -108;
const NOT_EMPTY: i32 = -111;
const INVALID_ACL: i32 = -114;
const RUNTIME_INCONSISTENCY: i32 = -2;

const LONG_TTL: i64 = 600_000;
/// A TTL node the reaper takes during the test (ms).
const SHORT_TTL: i64 = 500;

/// The reaper runs this often on both flavors (ms).
const REAP_INTERVAL_MS: u64 = 300;
/// Writes per writer thread in the concurrent phase (as many setData).
const WRITES_PER_MEMBER: usize = 150;
/// Requests each writer keeps in flight.
const WINDOW: usize = 16;

/// One mixed ensemble at a time: three JVMs and a debug ringkeeper are
/// already more than two cores run without missing initLimit.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

fn require_zookeeper() {
    assert!(
        std::path::Path::new(ZK_JAR).exists(),
        "Apache ZooKeeper is not installed: apt-get install -y zookeeper"
    );
    let java = std::process::Command::new("java").arg("-version").output();
    assert!(
        java.is_ok_and(|o| o.status.success()),
        "no java to run Apache ZooKeeper with: apt-get install -y default-jre-headless"
    );
}

// ---------------------------------------------------------------- bodies

fn ttl_body(path: &str, data: &[u8], flags: i32, ttl: i64) -> Vec<u8> {
    let mut b = create_body(path, data, flags);
    put_i64(&mut b, ttl);
    b
}

fn acl_body(path: &str, scheme: &str, id: &str, version: i32) -> Vec<u8> {
    let mut b = Vec::new();
    put_str(&mut b, path);
    put_i32(&mut b, 1);
    put_i32(&mut b, 31);
    put_str(&mut b, scheme);
    put_str(&mut b, id);
    put_i32(&mut b, version);
    b
}

fn check_body(path: &str, version: i32) -> Vec<u8> {
    delete_body(path, version)
}

// ---------------------------------------------------------------- answers

/// A zxid of a stat against the zxid in the reply's header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Rel {
    Before,
    Reply,
    After,
}

/// A stat's ephemeralOwner as clients see it: 0 for containers and TTL
/// nodes too (DataNode.copyStat); their kind shows in what the reaper
/// deletes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Owner {
    None,
    /// The session that sent the request.
    Mine,
    Other(i64),
}

/// A stat as comparable across members and runs.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Shape {
    czxid: Rel,
    mzxid: Rel,
    pzxid: Rel,
    version: i32,
    cversion: i32,
    aversion: i32,
    owner: Owner,
    data_length: i32,
    num_children: i32,
}

/// The stat of a node this reply's txn created, holding `len` bytes.
fn fresh(len: i32, owner: Owner) -> Shape {
    Shape {
        czxid: Rel::Reply,
        mzxid: Rel::Reply,
        pzxid: Rel::Reply,
        version: 0,
        cversion: 0,
        aversion: 0,
        owner,
        data_length: len,
        num_children: 0,
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Answer {
    Err(i32),
    /// create: the path (relative to the script's base).
    Path(String),
    /// create2, createContainer, createTTL: path and stat.
    Created(String, Shape),
    /// setData, setACL.
    Stat(Shape),
    /// delete, check in a multi.
    Empty,
    /// The reply header's error and each result (type, answer).
    Multi(i32, Vec<(i32, Answer)>),
    /// No reply within the client's read timeout, or the connection ended.
    NoReply(String),
    Garbled(String),
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct FullStat([i64; 11]);

struct Parser<'a> {
    r: Rd<'a>,
    base: &'a str,
    reply_zxid: i64,
    session: i64,
    /// The stats of top-level creates, for the exists() comparison.
    raw: Option<FullStat>,
}

impl Parser<'_> {
    fn need(&self, n: usize) -> Result<(), String> {
        if self.r.0.len() < n {
            Err(format!("body ends {} bytes early", n - self.r.0.len()))
        } else {
            Ok(())
        }
    }

    fn i32(&mut self) -> Result<i32, String> {
        self.need(4)?;
        Ok(self.r.i32())
    }

    fn path(&mut self) -> Result<String, String> {
        let n = self.i32()?;
        self.need(n.max(0) as usize)?;
        let raw = self.r.0[..n.max(0) as usize].to_vec();
        self.r.0 = &self.r.0[n.max(0) as usize..];
        let p = String::from_utf8_lossy(&raw).into_owned();
        Ok(p.strip_prefix(self.base).map(str::to_string).unwrap_or(p))
    }

    fn full_stat(&mut self) -> Result<FullStat, String> {
        self.need(68)?;
        let r = &mut self.r;
        Ok(FullStat([
            r.i64(),
            r.i64(),
            r.i64(),
            r.i64(),
            r.i32() as i64,
            r.i32() as i64,
            r.i32() as i64,
            r.i64(),
            r.i32() as i64,
            r.i32() as i64,
            r.i64(),
        ]))
    }

    fn shape(&mut self) -> Result<Shape, String> {
        let s = self.full_stat()?;
        self.raw = Some(s.clone());
        let rel = |z: i64| match z.cmp(&self.reply_zxid) {
            std::cmp::Ordering::Less => Rel::Before,
            std::cmp::Ordering::Equal => Rel::Reply,
            std::cmp::Ordering::Greater => Rel::After,
        };
        let owner = match s.0[7] {
            0 => Owner::None,
            o if o == self.session => Owner::Mine,
            o => Owner::Other(o),
        };
        Ok(Shape {
            czxid: rel(s.0[0]),
            mzxid: rel(s.0[1]),
            pzxid: rel(s.0[10]),
            version: s.0[4] as i32,
            cversion: s.0[5] as i32,
            aversion: s.0[6] as i32,
            owner,
            data_length: s.0[8] as i32,
            num_children: s.0[9] as i32,
        })
    }

    /// The body of a successful result of `op`.
    fn result(&mut self, op: i32) -> Result<Answer, String> {
        Ok(match op {
            OP_CREATE => Answer::Path(self.path()?),
            OP_CREATE2 | OP_CREATE_CONTAINER | OP_CREATE_TTL => {
                let p = self.path()?;
                Answer::Created(p, self.shape()?)
            }
            OP_SET_DATA | OP_SET_ACL | OP_EXISTS => Answer::Stat(self.shape()?),
            OP_DELETE | OP_CHECK => Answer::Empty,
            OP_ERROR => Answer::Err(self.i32()?),
            OP_MULTI => {
                let mut results = Vec::new();
                loop {
                    let t = self.i32()?;
                    self.need(1)?;
                    let done = self.r.bool();
                    let _err = self.i32()?;
                    if done {
                        break;
                    }
                    let a = self.result(t)?;
                    results.push((t, a));
                }
                Answer::Multi(0, results)
            }
            other => return Err(format!("no parser for op {other}")),
        })
    }
}

/// Sends one request and reads its answer, with the whole stat of a
/// create's result (not of a multi's).
fn ask(conn: &mut Conn, base: &str, op: i32, body: &[u8]) -> (Answer, Option<FullStat>) {
    let reply = match conn.call(op, body) {
        Ok(r) => r,
        Err(e) => return (Answer::NoReply(e.to_string()), None),
    };
    let mut p = Parser {
        r: Rd(&reply.body),
        base,
        reply_zxid: reply.zxid,
        session: conn.session_id,
        raw: None,
    };
    // A multi's results follow whatever its header says (3.8.0: 0 for a
    // failed multi too).
    if reply.err != 0 && (op != OP_MULTI || reply.body.is_empty()) {
        return (Answer::Err(reply.err), None);
    }
    let answer = match p.result(op) {
        Ok(Answer::Multi(_, results)) if p.r.0.is_empty() => Answer::Multi(reply.err, results),
        Ok(a) if p.r.0.is_empty() => a,
        Ok(a) => Answer::Garbled(format!("{a:?} and {} more bytes", p.r.0.len())),
        Err(e) => Answer::Garbled(format!("{e}: {:02x?}", reply.body)),
    };
    let raw = if op == OP_MULTI { None } else { p.raw };
    (answer, raw)
}

// ---------------------------------------------------------------- script

struct Step {
    what: &'static str,
    op: i32,
    body: Vec<u8>,
    want: Answer,
}

fn step(what: &'static str, op: i32, body: Vec<u8>, want: Answer) -> Step {
    Step {
        what,
        op,
        body,
        want,
    }
}

fn created(path: &str, shape: Shape) -> Answer {
    Answer::Created(path.to_string(), shape)
}

/// The script for one member under `base`, with ZooKeeper 3.8's answers.
fn script(base: &str) -> Vec<Step> {
    let p = |rel: &str| format!("{base}{rel}");
    let path = |rel: &str| Answer::Path(rel.to_string());
    let err = Answer::Err;
    let multi_failed = |codes: &[i32]| {
        Answer::Multi(
            0,
            codes.iter().map(|c| (OP_ERROR, Answer::Err(*c))).collect(),
        )
    };
    vec![
        step(
            "create base",
            OP_CREATE,
            create_body(base, b"", 0),
            path(""),
        ),
        step(
            "create",
            OP_CREATE,
            create_body(&p("/c"), b"c", 0),
            path("/c"),
        ),
        step(
            "create2",
            OP_CREATE2,
            create_body(&p("/c2"), b"c2", 0),
            created("/c2", fresh(2, Owner::None)),
        ),
        step(
            "create2 sequential",
            OP_CREATE2,
            create_body(&p("/q-"), b"", FLAG_SEQUENTIAL),
            created("/q-0000000002", fresh(0, Owner::None)),
        ),
        step(
            "create2 ephemeral",
            OP_CREATE2,
            create_body(&p("/e"), b"e", FLAG_EPHEMERAL),
            created("/e", fresh(1, Owner::Mine)),
        ),
        step(
            "createContainer",
            OP_CREATE_CONTAINER,
            create_body(&p("/k"), b"k", FLAG_CONTAINER),
            created("/k", fresh(1, Owner::None)),
        ),
        // The txn type follows the opcode, not the flags.
        step(
            "createContainer with persistent flags",
            OP_CREATE_CONTAINER,
            create_body(&p("/kp"), b"", 0),
            created("/kp", fresh(0, Owner::None)),
        ),
        step(
            "create2 with container flags",
            OP_CREATE2,
            create_body(&p("/c2k"), b"", FLAG_CONTAINER),
            created("/c2k", fresh(0, Owner::None)),
        ),
        step(
            "createTTL",
            OP_CREATE_TTL,
            ttl_body(&p("/t"), b"t", FLAG_TTL, LONG_TTL),
            created("/t", fresh(1, Owner::None)),
        ),
        step(
            "createTTL sequential",
            OP_CREATE_TTL,
            ttl_body(&p("/ts-"), b"", FLAG_TTL_SEQUENTIAL, LONG_TTL),
            created("/ts-0000000008", fresh(0, Owner::None)),
        ),
        step(
            "create of an existing node",
            OP_CREATE,
            create_body(&p("/c"), b"", 0),
            err(NODE_EXISTS),
        ),
        step(
            "create2 of an existing node",
            OP_CREATE2,
            create_body(&p("/c2"), b"", 0),
            err(NODE_EXISTS),
        ),
        step(
            "create2 without parent",
            OP_CREATE2,
            create_body(&p("/none/x"), b"", 0),
            err(NO_NODE),
        ),
        step(
            "createContainer without parent",
            OP_CREATE_CONTAINER,
            create_body(&p("/none/x"), b"", FLAG_CONTAINER),
            err(NO_NODE),
        ),
        step(
            "createTTL without parent",
            OP_CREATE_TTL,
            ttl_body(&p("/none/x"), b"", FLAG_TTL, 1000),
            err(NO_NODE),
        ),
        step(
            "createTTL with ttl 0",
            OP_CREATE_TTL,
            ttl_body(&p("/tbad"), b"", FLAG_TTL, 0),
            err(BAD_ARGUMENTS),
        ),
        step(
            "create2 with unknown flags",
            OP_CREATE2,
            create_body(&p("/bad"), b"", 9),
            err(BAD_ARGUMENTS),
        ),
        step(
            "create2 under an ephemeral",
            OP_CREATE2,
            create_body(&p("/e/x"), b"", 0),
            err(NO_CHILDREN_FOR_EPHEMERALS),
        ),
        step(
            "setData",
            OP_SET_DATA,
            set_body(&p("/c"), b"set", 0),
            Answer::Stat(Shape {
                czxid: Rel::Before,
                mzxid: Rel::Reply,
                pzxid: Rel::Before,
                version: 1,
                cversion: 0,
                aversion: 0,
                owner: Owner::None,
                data_length: 3,
                num_children: 0,
            }),
        ),
        step(
            "setData with a wrong version",
            OP_SET_DATA,
            set_body(&p("/c"), b"", 7),
            err(BAD_VERSION),
        ),
        step(
            "setData of no node",
            OP_SET_DATA,
            set_body(&p("/none"), b"", -1),
            err(NO_NODE),
        ),
        step(
            "setACL",
            OP_SET_ACL,
            acl_body(&p("/c"), "world", "anyone", 0),
            Answer::Stat(Shape {
                czxid: Rel::Before,
                mzxid: Rel::Before,
                pzxid: Rel::Before,
                version: 1,
                cversion: 0,
                aversion: 1,
                owner: Owner::None,
                data_length: 3,
                num_children: 0,
            }),
        ),
        step(
            "setACL with a wrong version",
            OP_SET_ACL,
            acl_body(&p("/c"), "world", "anyone", 0),
            err(BAD_VERSION),
        ),
        step(
            "setACL with an invalid ACL",
            OP_SET_ACL,
            acl_body(&p("/c"), "bogus", "x", -1),
            err(INVALID_ACL),
        ),
        step(
            "setACL of no node",
            OP_SET_ACL,
            acl_body(&p("/none"), "world", "anyone", -1),
            err(NO_NODE),
        ),
        step(
            "delete",
            OP_DELETE,
            delete_body(&p("/c2"), 0),
            Answer::Empty,
        ),
        step(
            "delete of no node",
            OP_DELETE,
            delete_body(&p("/c2"), -1),
            err(NO_NODE),
        ),
        step(
            "delete with a wrong version",
            OP_DELETE,
            delete_body(&p("/c"), 0),
            err(BAD_VERSION),
        ),
        step(
            "delete of a node with children",
            OP_DELETE,
            delete_body(base, -1),
            err(NOT_EMPTY),
        ),
        step(
            "multi with each op",
            OP_MULTI,
            multi_body(&[
                (OP_CREATE, create_body(&p("/m"), b"", 0)),
                (OP_CREATE2, create_body(&p("/m/a"), b"a", 0)),
                (
                    OP_CREATE_CONTAINER,
                    create_body(&p("/mk"), b"", FLAG_CONTAINER),
                ),
                (OP_CREATE_TTL, ttl_body(&p("/mt"), b"", FLAG_TTL, LONG_TTL)),
                (OP_SET_DATA, set_body(&p("/m"), b"x", 0)),
                (OP_CHECK, check_body(&p("/m"), 1)),
                (OP_DELETE, delete_body(&p("/m/a"), 0)),
            ]),
            // ZooKeeper rebuilds each create in a multi from its flags:
            // create2 answers as create, container and TTL as create2.
            Answer::Multi(
                0,
                vec![
                    (OP_CREATE, path("/m")),
                    (OP_CREATE, path("/m/a")),
                    (OP_CREATE2, created("/mk", fresh(0, Owner::None))),
                    (OP_CREATE2, created("/mt", fresh(0, Owner::None))),
                    (
                        OP_SET_DATA,
                        Answer::Stat(Shape {
                            czxid: Rel::Reply,
                            mzxid: Rel::Reply,
                            pzxid: Rel::Reply,
                            version: 1,
                            cversion: 1,
                            aversion: 0,
                            owner: Owner::None,
                            data_length: 1,
                            num_children: 1,
                        }),
                    ),
                    (OP_CHECK, Answer::Empty),
                    (OP_DELETE, Answer::Empty),
                ],
            ),
        ),
        step(
            "multi with a check only",
            OP_MULTI,
            multi_body(&[(OP_CHECK, check_body(&p("/m"), 1))]),
            Answer::Multi(0, vec![(OP_CHECK, Answer::Empty)]),
        ),
        step(
            "multi with a failing check",
            OP_MULTI,
            multi_body(&[
                (OP_CREATE, create_body(&p("/f"), b"", 0)),
                (OP_CHECK, check_body(&p("/m"), 5)),
                (OP_CREATE2, create_body(&p("/g"), b"", 0)),
            ]),
            multi_failed(&[0, BAD_VERSION, RUNTIME_INCONSISTENCY]),
        ),
        step(
            "nothing of the failed multi",
            OP_EXISTS,
            get_body(&p("/f"), false),
            err(NO_NODE),
        ),
        step(
            "multi failing on its first op",
            OP_MULTI,
            multi_body(&[
                (OP_DELETE, delete_body(&p("/none"), -1)),
                (OP_SET_DATA, set_body(&p("/m"), b"y", -1)),
            ]),
            multi_failed(&[NO_NODE, RUNTIME_INCONSISTENCY]),
        ),
        step(
            "multi with a create2 of an existing node",
            OP_MULTI,
            multi_body(&[(OP_CREATE2, create_body(&p("/c"), b"", 0))]),
            multi_failed(&[NODE_EXISTS]),
        ),
        step(
            "multi with a createTTL without parent",
            OP_MULTI,
            multi_body(&[
                (OP_SET_DATA, set_body(&p("/m"), b"z", 1)),
                (
                    OP_CREATE_TTL,
                    ttl_body(&p("/none/t"), b"", FLAG_TTL, LONG_TTL),
                ),
            ]),
            multi_failed(&[0, NO_NODE]),
        ),
    ]
}

/// Runs `steps` through member `index` in one session (closed at the
/// end, so that its ephemerals go); returns what differs from ZooKeeper's
/// answers.
fn run_script(c: &Cluster, index: usize, base: &str, steps: Vec<Step>) -> Vec<String> {
    let who = format!("server {} ({:?})", index + 1, c.members[index].flavor);
    let mut problems = Vec::new();
    let mut conn = session_on(c, index);
    for s in steps {
        let (got, raw) = ask(&mut conn, base, s.op, &s.body);
        if got != s.want {
            problems.push(format!(
                "{who}: {} ({base}): got {got:?}, want {:?}",
                s.what, s.want
            ));
        }
        if let Answer::NoReply(_) = got {
            // The request may or may not have been applied; go on with
            // a new session.
            conn = session_on(c, index);
            continue;
        }
        // A create's stat is the node's, as exists() reads it.
        if let (Answer::Created(rel, _), Some(raw)) = (&got, raw) {
            let exists = ask_stat(&mut conn, &format!("{base}{rel}"));
            if exists.as_ref() != Some(&raw) {
                problems.push(format!(
                    "{who}: {}: the reply's stat {raw:?} is not the node's {exists:?}",
                    s.what
                ));
            }
        }
    }
    if let Err(e) = conn.call(OP_CLOSE, &[]) {
        problems.push(format!("{who}: closeSession: {e}"));
    }
    problems
}

/// The full stat exists() gives for `path` (None: no node, or no answer).
fn ask_stat(conn: &mut Conn, path: &str) -> Option<FullStat> {
    let r = conn.call(OP_EXISTS, &get_body(path, false)).ok()?;
    if r.err != 0 {
        return None;
    }
    let mut p = Parser {
        r: Rd(&r.body),
        base: "",
        reply_zxid: 0,
        session: 0,
        raw: None,
    };
    p.full_stat().ok()
}

/// Through each member: a container emptied of the child it had, and a
/// TTL node whose ttl passes soon (not before the create's stat is
/// compared with exists()), for the leader's reaper
/// (deleteContainer txns). The script's createContainer with persistent
/// flags made a container and its create2 with container flags a
/// persistent node (the txn type follows the opcode): emptied of a child
/// each, the reaper takes the first only.
fn reapable(base: &str) -> Vec<Step> {
    let p = |rel: &str| format!("{base}{rel}");
    let mut steps = vec![step(
        "createContainer to reap",
        OP_CREATE_CONTAINER,
        create_body(&p("/r"), b"", FLAG_CONTAINER),
        created("/r", fresh(0, Owner::None)),
    )];
    for (create, delete, parent) in [
        ("create in a container", "delete from a container", "/r"),
        ("create in a container", "delete from a container", "/kp"),
        ("create in a persistent node", "delete from it", "/c2k"),
    ] {
        let child = format!("{parent}/x");
        steps.push(step(
            create,
            OP_CREATE,
            create_body(&p(&child), b"", 0),
            Answer::Path(child.clone()),
        ));
        steps.push(step(
            delete,
            OP_DELETE,
            delete_body(&p(&child), -1),
            Answer::Empty,
        ));
    }
    steps.push(step(
        "createTTL to reap",
        OP_CREATE_TTL,
        ttl_body(&p("/tt"), b"", FLAG_TTL, SHORT_TTL),
        created("/tt", fresh(0, Owner::None)),
    ));
    steps
}

/// What `reapable` leaves for the reaper under `base`.
fn doomed(base: &str) -> [String; 3] {
    [
        format!("{base}/r"),
        format!("{base}/kp"),
        format!("{base}/tt"),
    ]
}

/// What is left under a script's base once the reaper ran and the
/// script's session closed.
fn left_after_script() -> BTreeSet<String> {
    [
        "c",
        "q-0000000002",
        "k",
        "c2k",
        "t",
        "ts-0000000008",
        "m",
        "mk",
        "mt",
    ]
    .into_iter()
    .map(String::from)
    .collect()
}

/// Waits until no member holds any of `paths` (after a sync).
fn wait_reaped(c: &Cluster, paths: &[String]) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut problems = Vec::new();
    for i in 0..c.size() {
        let mut conn = session_on(c, i);
        loop {
            let left: Vec<&String> = paths
                .iter()
                .filter(|p| {
                    let _ = conn.call(OP_SYNC, &path_body(p));
                    ask_stat(&mut conn, p).is_some()
                })
                .collect();
            if left.is_empty() {
                break;
            }
            if Instant::now() > deadline {
                problems.push(format!(
                    "server {} ({:?}) still holds {left:?} {:?} after the reaper's interval",
                    i + 1,
                    c.members[i].flavor,
                    Duration::from_millis(REAP_INTERVAL_MS)
                ));
                break;
            }
            thread::sleep(Duration::from_millis(100));
        }
    }
    problems
}

// ---------------------------------------------------------------- writers

#[derive(Default)]
struct Written {
    created: BTreeSet<String>,
    set: BTreeSet<String>,
    failures: Vec<String>,
}

/// One writer per member, all at once, each with `WINDOW` requests in
/// flight: creates, create2s and multis (create + setData) of
/// /conc/m<id>-<k>, then a setData of each. Every request must succeed.
fn write_concurrently(c: &Cluster) -> Vec<Written> {
    let deadline = Instant::now() + Duration::from_secs(60);
    let members: Vec<(usize, SocketAddr)> =
        (0..c.size()).map(|i| (i, c.members[i].client)).collect();
    thread::scope(|s| {
        let handles: Vec<_> = members
            .into_iter()
            .map(|(i, addr)| s.spawn(move || writer(i, addr, deadline)))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("writer thread"))
            .collect()
    })
}

fn writer(index: usize, addr: SocketAddr, deadline: Instant) -> Written {
    let mut w = Written::default();
    let who = format!("writer via server {}", index + 1);
    let mut conn = loop {
        match session(addr) {
            Ok(conn) => break conn,
            Err(e) if Instant::now() > deadline => {
                w.failures.push(format!("{who}: no session: {e}"));
                return w;
            }
            Err(_) => thread::sleep(Duration::from_millis(100)),
        }
    };
    let names: Vec<String> = (0..WRITES_PER_MEMBER)
        .map(|k| format!("m{}-{k:04}", index + 1))
        .collect();
    for pass in 0..2 {
        for (n, chunk) in names.chunks(WINDOW).enumerate() {
            let mut sent = Vec::new();
            for (j, name) in chunk.iter().enumerate() {
                let path = format!("/conc/{name}");
                let (op, body) = match (pass, (n * WINDOW + j) % 3) {
                    (1, _) => (OP_SET_DATA, set_body(&path, b"s", -1)),
                    (_, 0) => (OP_CREATE, create_body(&path, b"v", 0)),
                    (_, 1) => (OP_CREATE2, create_body(&path, b"v", 0)),
                    _ => (
                        OP_MULTI,
                        multi_body(&[
                            (OP_CREATE, create_body(&path, b"v", 0)),
                            (OP_SET_DATA, set_body(&path, b"w", 0)),
                        ]),
                    ),
                };
                match conn.send(op, &body) {
                    Ok(xid) => sent.push((xid, op, name)),
                    Err(e) => {
                        w.failures
                            .push(format!("{who}: sending op {op} {name}: {e}"));
                        return w;
                    }
                }
            }
            for (xid, op, name) in sent {
                match conn.recv() {
                    Ok(r) if r.xid != xid => {
                        w.failures.push(format!(
                            "{who}: reply for xid {} while awaiting {xid}",
                            r.xid
                        ));
                        return w;
                    }
                    Ok(r) if r.err == 0 && !(op == OP_MULTI && multi_failed(&r.body)) => {
                        if pass == 0 {
                            w.created.insert(name.clone());
                        } else {
                            w.set.insert(name.clone());
                        }
                    }
                    Ok(r) => w
                        .failures
                        .push(format!("{who}: op {op} {name}: error {}", r.err)),
                    Err(e) => {
                        w.failures.push(format!(
                            "{who}: no reply to op {op} {name} ({} created, {} set): {e}",
                            w.created.len(),
                            w.set.len()
                        ));
                        return w;
                    }
                }
            }
            if Instant::now() > deadline {
                w.failures.push(format!(
                    "{who}: not done in time ({} created, {} set)",
                    w.created.len(),
                    w.set.len()
                ));
                return w;
            }
        }
    }
    let _ = conn.call(OP_CLOSE, &[]);
    w
}

// ---------------------------------------------------------------- checks

/// The state letter of a process (`Z`: exited, not yet reaped).
fn process_state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit(')')
        .next()?
        .split_whitespace()
        .next()?
        .chars()
        .next()
}

/// Java members that exited, and the log lines of the defects this file
/// tests for.
fn java_problems(c: &Cluster) -> Vec<String> {
    let mut problems = Vec::new();
    for (i, m) in c.members.iter().enumerate() {
        if m.flavor != Zk {
            continue;
        }
        match c.pid(i).and_then(process_state) {
            None | Some('Z') | Some('X') => {
                problems.push(format!("Java server {} is no longer running", i + 1))
            }
            Some(_) => {}
        }
        let log = std::fs::read_to_string(c.dir().join(format!("s{}/server.log", i + 1)))
            .unwrap_or_default();
        let bad: Vec<&str> = log
            .lines()
            .filter(|l| l.contains("but next pending txn") || l.contains("Destruction averted"))
            .take(5)
            .collect();
        if !bad.is_empty() {
            problems.push(format!(
                "Java server {} logged:\n  {}",
                i + 1,
                bad.join("\n  ")
            ));
        }
    }
    problems
}

/// Every member holds every acknowledged create under /conc, with the data
/// "s" where the setData was acknowledged.
fn check_written(c: &Cluster, written: &[Written]) {
    let mut created = BTreeSet::new();
    let mut set = BTreeSet::new();
    for w in written {
        created.extend(w.created.iter().cloned());
        set.extend(w.set.iter().cloned());
    }
    check_replicas(c, "/conc", &created);
    let paths: Vec<String> = set.iter().map(|n| format!("/conc/{n}")).collect();
    for i in 0..c.size() {
        let mut conn = session_on(c, i);
        let r = conn.call(OP_SYNC, &path_body("/conc")).expect("sync");
        assert_eq!(r.err, 0, "sync /conc on server {}", i + 1);
        let data = get_many(&mut conn, &paths).expect("getData");
        let wrong: Vec<_> = paths
            .iter()
            .zip(&data)
            .filter(|(_, d)| d.as_deref() != Some(b"s".as_slice()))
            .take(5)
            .collect();
        assert!(
            wrong.is_empty(),
            "server {} ({:?}) lacks acknowledged setData: {wrong:?}\n{}",
            i + 1,
            c.members[i].flavor,
            c.report()
        );
    }
}

// ---------------------------------------------------------------- tests

/// Starts `flavors` with TTL nodes enabled and a quick reaper on every
/// member, and makes a member of `leader` flavor lead.
fn start(flavors: &[Flavor], leader: Flavor) -> Cluster {
    let reap = format!("znode.container.checkIntervalMs={REAP_INTERVAL_MS}");
    let mut c = Cluster::start_mixed_with(
        flavors,
        &["zookeeper.extendedTypesEnabled=true", reap.as_str()],
    );
    // ringkeeper reads them from its zoo.cfg (the harness writes none):
    // restarted with them at once, while the JVMs start.
    for i in 0..c.size() {
        if c.members[i].flavor != Rk {
            continue;
        }
        c.kill(i);
        let cfg = c.dir().join(format!("s{}/zoo.cfg", i + 1));
        let mut text = std::fs::read_to_string(&cfg).expect("zoo.cfg");
        let _ = write!(text, "extendedTypesEnabled=true\n{reap}\n");
        std::fs::write(&cfg, text).expect("zoo.cfg");
        c.restart(i);
    }
    for _ in 0..4 {
        let at = c.wait_for_leader(ELECTION_TIMEOUT);
        if c.members[at].flavor == leader {
            eprintln!("server {} ({leader:?}) leads", at + 1);
            return c;
        }
        // The next election goes to the highest id among equals.
        c.kill(at);
        c.restart(at);
    }
    panic!("no {leader:?} member came to lead\n{}", c.report());
}

fn every_txn_type_through_every_member(flavors: &[Flavor], leader: Flavor) {
    let _turn = one_at_a_time();
    require_zookeeper();
    let c = start(flavors, leader);
    make_parent(&c, "/txns");
    make_parent(&c, "/conc");
    let bases: Vec<String> = (1..=c.size()).map(|i| format!("/txns/s{i}")).collect();

    let mut problems = Vec::new();
    for (i, base) in bases.iter().enumerate() {
        problems.extend(run_script(&c, i, base, script(base)));
    }
    for (i, base) in bases.iter().enumerate() {
        problems.extend(run_script(&c, i, base, reapable(base)));
    }
    let doomed: Vec<String> = bases.iter().flat_map(|b| doomed(b)).collect();
    problems.extend(wait_reaped(&c, &doomed));
    let written = write_concurrently(&c);
    for w in &written {
        problems.extend(w.failures.iter().cloned());
    }
    problems.extend(java_problems(&c));
    assert!(
        problems.is_empty(),
        "{} problems:\n{}\n{}",
        problems.len(),
        problems.join("\n"),
        c.report()
    );

    for base in &bases {
        check_replicas(&c, base, &left_after_script());
    }
    check_written(&c, &written);
    let problems = java_problems(&c);
    assert!(
        problems.is_empty(),
        "{}\n{}",
        problems.join("\n"),
        c.report()
    );
}

/// The reference: three Java servers give the answers the script expects.
#[test]
fn java_alone_answers_the_script() {
    every_txn_type_through_every_member(&[Zk, Zk, Zk], Zk);
}

/// Two ringkeepers and a Java follower, a ringkeeper leads.
#[test]
fn ringkeeper_leads_ringkeeper_and_java() {
    every_txn_type_through_every_member(&[Zk, Rk, Rk], Rk);
}

/// Two ringkeepers follow a Java leader.
#[test]
fn java_leads_two_ringkeepers() {
    every_txn_type_through_every_member(&[Rk, Rk, Zk], Zk);
}

/// Two Java followers of a ringkeeper leader.
#[test]
fn ringkeeper_leads_two_javas() {
    every_txn_type_through_every_member(&[Zk, Zk, Rk], Rk);
}

/// A ringkeeper follows a Java leader, beside another Java follower.
#[test]
fn java_leads_java_and_ringkeeper() {
    every_txn_type_through_every_member(&[Rk, Zk, Zk], Zk);
}
