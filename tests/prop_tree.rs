//! Property tests of prep + apply (src/consensus/prep.rs, src/tree): random
//! sequences of writes over a small path space, each prepped against the tree
//! and applied with the next zxid, as the consensus core does, and checked
//! against a reference model written here from ZooKeeper's
//! PrepRequestProcessor / DataTree rules (ACL checks included), and against
//! the tree's invariants.

use std::collections::{BTreeMap, BTreeSet};

use proptest::collection::vec;
use proptest::prelude::*;

use ringkeeper::consensus::prep::{fixup_acl, prep, PrepContext};
use ringkeeper::proto::codes::{err, event, op, perm, CONTAINER_EPHEMERAL_OWNER, TTL_OWNER_MASK};
use ringkeeper::proto::{Acl, Id, Request, Stat};
use ringkeeper::tree::{NodeKind, Tree, Txn, TxnOp};

fn config() -> ProptestConfig {
    ProptestConfig {
        // PROPTEST_CASES still overrides, for a longer hunt.
        cases: std::env::var("PROPTEST_CASES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(256),
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// The largest TTL ZooKeeper accepts: EphemeralType.TTL.maxValue(), i.e.
/// EXTENDED_FEATURE_VALUE_MASK = ~(0xff00000000000000 | 0x00ffff0000000000).
const ZK_MAX_TTL_MS: i64 = 0x0000_00FF_FFFF_FFFF;

/// Session ids and each session's ids as a shard passes them to prep: the
/// ip id first, then what auth packets added.
const SESSIONS: [i64; 3] = [0x100_0000_0001, 0x100_0000_0002, 0x100_0000_0003];
const ALICE: &str = "alice:gAQ5cUgmEiw2PAc8mUNg2BdQCXI=";

fn session_ids(session: usize) -> Vec<(String, String)> {
    let ip = |addr: &str| ("ip".to_string(), addr.to_string());
    match session {
        // Inside 10.0.0.0/8, logged in as alice.
        0 => vec![ip("10.0.0.1"), ("digest".to_string(), ALICE.to_string())],
        // Inside 10.0.0.0/8, no login.
        1 => vec![ip("10.0.0.1")],
        // Outside 10.0.0.0/8, no login.
        _ => vec![ip("127.0.0.1")],
    }
}

fn acl(perms: i32, scheme: &str, id: &str) -> Acl {
    Acl {
        perms,
        id: Id {
            scheme: scheme.into(),
            id: id.into(),
        },
    }
}

// ------------------------------------------------------------ abstract ops
//
// Ops are generated abstractly and resolved against the model when they run,
// so that most of them name nodes that exist and versions that match.

/// Fixed paths, whether or not they exist, invalid ones included.
const FIXED_PATHS: &[&str] = &[
    "/a",
    "/b",
    "/a/b",
    "/b/c",
    "/a/b/c",
    "/",
    "/zookeeper",
    "/zookeeper/quota",
    "/a/",
    "",
    "a",
    "/a//b",
    "/nope/x",
    "/a/.",
    "/a\u{0}b",
    "/a\u{1}",
    // Names a sequential create can collide with (NODE_EXISTS).
    "/a0000000001",
    "/b/0000000000",
];
const NAMES: &[&str] = &["a", "b", "c", "d"];

#[derive(Clone, Debug)]
enum PathSel {
    Fixed(usize),
    /// An existing node (any but the read-only /zookeeper/config).
    Existing(usize),
    /// A child name under an existing node outside /zookeeper.
    Child(usize, usize),
    /// An existing node outside /zookeeper plus "/": the usual prefix of a
    /// sequential create.
    SeqDir(usize),
}

#[derive(Clone, Debug)]
enum Ver {
    Any,
    Right,
    Wrong(i32),
    Raw(i32),
}

#[derive(Clone, Copy, Debug)]
enum AclSel {
    Open,
    OpenTwice,
    OpenPlusDigest,
    OpenPlusIp,
    /// "auth" expands to the session's authenticated ids; INVALID_ACL without any.
    OpenPlusAuth,
    Empty,
    WorldNobody,
    BadDigest,
    BadIp,
    UnknownScheme,
    // Valid ACLs that restrict someone: prep must enforce them.
    /// world:anyone with every permission but this one.
    OpenBut(i32),
    /// ip:10.0.0.0/8 only (sessions 0 and 1, not 2).
    IpOnly,
    /// "auth" only: alice's digest for session 0, INVALID_ACL for the others.
    AuthOnly,
    /// Anyone may read; alice (by digest) may do everything.
    ReadPlusAlice,
}

/// One permission bit, for AclSel::OpenBut.
const PERMS: [i32; 5] = [
    perm::READ,
    perm::WRITE,
    perm::CREATE,
    perm::DELETE,
    perm::ADMIN,
];

impl AclSel {
    fn acls(self) -> Vec<Acl> {
        let open = Acl::world_all();
        match self {
            AclSel::Open => vec![open],
            AclSel::OpenTwice => vec![open.clone(), open],
            AclSel::OpenPlusDigest => vec![open, acl(perm::READ, "digest", "bob:xyz=")],
            AclSel::OpenPlusIp => vec![acl(perm::ALL, "ip", "10.0.0.0/8"), open],
            AclSel::OpenPlusAuth => vec![open, acl(perm::ALL, "auth", "")],
            AclSel::Empty => vec![],
            AclSel::WorldNobody => vec![acl(perm::ALL, "world", "nobody")],
            AclSel::BadDigest => vec![open, acl(perm::ALL, "digest", "nocolon")],
            AclSel::BadIp => vec![open, acl(perm::ALL, "ip", "300.1.1.1")],
            AclSel::UnknownScheme => vec![acl(perm::ALL, "foo", "bar"), open],
            AclSel::OpenBut(p) => vec![acl(perm::ALL & !p, "world", "anyone")],
            AclSel::IpOnly => vec![acl(perm::ALL, "ip", "10.0.0.0/8")],
            AclSel::AuthOnly => vec![acl(perm::ALL, "auth", "")],
            AclSel::ReadPlusAlice => vec![
                acl(perm::READ, "world", "anyone"),
                acl(perm::ALL, "digest", ALICE),
            ],
        }
    }
}

#[derive(Clone, Debug)]
enum CreateKind {
    /// flags 0..=3 with create or create2.
    Plain {
        flags: i32,
        create2: bool,
    },
    Container,
    Ttl {
        sequential: bool,
        ttl: i64,
    },
    /// Any create opcode with any flags and ttl: mostly refused.
    Weird {
        opcode: i32,
        flags: i32,
        ttl: i64,
    },
}

#[derive(Clone, Debug)]
enum Op {
    Create {
        path: PathSel,
        kind: CreateKind,
        /// None: a null buffer on the wire.
        data: Option<Vec<u8>>,
        acl: AclSel,
    },
    Delete {
        path: PathSel,
        version: Ver,
    },
    SetData {
        path: PathSel,
        data: Option<Vec<u8>>,
        version: Ver,
    },
    SetAcl {
        path: PathSel,
        acl: AclSel,
        version: Ver,
    },
    Check {
        path: PathSel,
        version: Ver,
    },
    Multi(Vec<Op>),
    CloseSession,
}

// Strategies are flat tuples of small ranges mapped through tables: cheap to
// generate in a debug build (proptest's unions are not), and each range
// shrinks towards the simplest choice (index 0).

fn path_sel() -> impl Strategy<Value = PathSel> {
    (0..5u8, any::<usize>()).prop_map(|(k, i)| match k {
        0 => PathSel::Fixed(i % FIXED_PATHS.len()),
        _ => PathSel::Existing(i),
    })
}

fn create_path_sel() -> impl Strategy<Value = PathSel> {
    (0..10u8, any::<usize>(), 0..NAMES.len()).prop_map(|(k, i, n)| match k {
        0 => PathSel::Fixed(i % FIXED_PATHS.len()),
        1 => PathSel::Existing(i),
        2..=8 => PathSel::Child(i, n),
        _ => PathSel::SeqDir(i),
    })
}

fn ver() -> impl Strategy<Value = Ver> {
    (0..9u8, 0..5i32).prop_map(|(k, v)| match k {
        0..=2 => Ver::Any,
        3..=6 => Ver::Right,
        7 => Ver::Wrong(1 + v % 2),
        _ => Ver::Raw(v - 2),
    })
}

fn acl_sel() -> impl Strategy<Value = AclSel> {
    (0..40u8, 0..PERMS.len()).prop_map(|(k, p)| match k {
        0..=19 => AclSel::Open,
        20..=21 => AclSel::OpenTwice,
        22..=23 => AclSel::OpenPlusDigest,
        24..=25 => AclSel::OpenPlusIp,
        26..=28 => AclSel::OpenPlusAuth,
        29 => AclSel::Empty,
        30 => AclSel::WorldNobody,
        31 => AclSel::BadDigest,
        32 => AclSel::BadIp,
        33 => AclSel::UnknownScheme,
        34..=35 => AclSel::OpenBut(PERMS[p]),
        36 => AclSel::IpOnly,
        37 => AclSel::AuthOnly,
        _ => AclSel::ReadPlusAlice,
    })
}

const CREATE_OPCODES: [i32; 4] = [
    op::CREATE,
    op::CREATE2,
    op::CREATE_CONTAINER,
    op::CREATE_TTL,
];
/// TTLs: mostly valid, then 0 and -1 (BAD_ARGUMENTS).
const TTLS: [i64; 8] = [1, 60_000, ZK_MAX_TTL_MS, 2, 3, 4, 0, -1];

fn create_kind() -> impl Strategy<Value = CreateKind> {
    (
        0..17u8,
        0..4i32,
        any::<bool>(),
        0..TTLS.len(),
        0..4usize,
        -1..8i32,
    )
        .prop_map(|(k, flags, b, t, o, weird_flags)| match k {
            0..=11 => CreateKind::Plain { flags, create2: b },
            12..=13 => CreateKind::Container,
            14..=15 => CreateKind::Ttl {
                sequential: b,
                ttl: TTLS[t],
            },
            _ => CreateKind::Weird {
                opcode: CREATE_OPCODES[o],
                flags: weird_flags,
                ttl: [-1, 0, 1000][t % 3],
            },
        })
}

/// 0 to 5 bytes, or (one time in seven) a null buffer.
fn data() -> impl Strategy<Value = Option<Vec<u8>>> {
    (0..7u8).prop_map(|n| (n < 6).then(|| (0..n).collect()))
}

/// The ops a multi may hold (setACL too: prep refuses it inside a multi).
fn leaf_op() -> impl Strategy<Value = Op> {
    (
        0..14u8,
        create_path_sel(),
        create_kind(),
        data(),
        acl_sel(),
        path_sel(),
        ver(),
    )
        .prop_map(|(k, cpath, kind, data, acl, path, version)| match k {
            0..=5 => Op::Create {
                path: cpath,
                kind,
                data,
                acl,
            },
            6..=8 => Op::Delete { path, version },
            9..=11 => Op::SetData {
                path,
                data,
                version,
            },
            12 => Op::SetAcl { path, acl, version },
            _ => Op::Check { path, version },
        })
}

/// Ops likely to succeed, so that multis of several ops commit too.
fn friendly_op() -> impl Strategy<Value = Op> {
    (0..8u8, any::<usize>(), 0..NAMES.len(), 0..4i32, data()).prop_map(|(k, i, n, flags, data)| {
        let version = Ver::Right;
        match k {
            0..=3 => Op::Create {
                path: PathSel::Child(i, n),
                kind: CreateKind::Plain {
                    flags,
                    create2: k % 2 == 0,
                },
                data,
                acl: AclSel::Open,
            },
            4 => Op::Delete {
                path: PathSel::Existing(i),
                version,
            },
            5 | 6 => Op::SetData {
                path: PathSel::Existing(i),
                data,
                version,
            },
            _ => Op::Check {
                path: PathSel::Existing(i),
                version,
            },
        }
    })
}

fn any_op() -> impl Strategy<Value = (usize, Op)> {
    let op = prop_oneof![
        14 => leaf_op(),
        2 => vec(leaf_op(), 0..6).prop_map(Op::Multi),
        2 => vec(friendly_op(), 1..5).prop_map(Op::Multi),
        1 => Just(Op::CloseSession),
    ];
    (0..SESSIONS.len(), op)
}

// ------------------------------------------------------------ the model

#[derive(Clone, Debug, PartialEq)]
struct ModelNode {
    /// None: created or set with a null buffer.
    data: Option<Vec<u8>>,
    acl: Vec<Acl>,
    czxid: i64,
    mzxid: i64,
    ctime: i64,
    mtime: i64,
    version: i32,
    /// Stored count of child creates (what ZooKeeper keeps in StatPersisted).
    creates: i32,
    aversion: i32,
    /// As stored: session id, CONTAINER_EPHEMERAL_OWNER or a TTL encoding.
    owner: i64,
    pzxid: i64,
}

impl ModelNode {
    fn fresh(acl: Vec<Acl>) -> ModelNode {
        ModelNode {
            data: Some(vec![]),
            acl,
            czxid: 0,
            mzxid: 0,
            ctime: 0,
            mtime: 0,
            version: 0,
            creates: 0,
            aversion: 0,
            owner: 0,
            pzxid: 0,
        }
    }

    /// EphemeralType.get(owner) == NORMAL (extended types on: containers
    /// and TTLs are not ephemeral).
    fn ephemeral_session(&self) -> Option<i64> {
        let o = self.owner;
        let ttl = o < 0 && (o & TTL_OWNER_MASK) == TTL_OWNER_MASK;
        (o != 0 && o != CONTAINER_EPHEMERAL_OWNER && !ttl).then_some(o)
    }
}

#[derive(Clone, Debug)]
struct Model {
    nodes: BTreeMap<String, ModelNode>,
}

#[derive(Debug, PartialEq)]
enum Outcome {
    /// Success: the watch triggers it fires and the paths it created.
    Ok {
        triggers: Vec<(String, i32)>,
        created: Vec<String>,
    },
    Err(i32),
    MultiErr(Vec<i32>),
}

/// ZooKeeper's parent of `path` (everything before the last '/'; "" is the root).
fn parent_of(path: &str) -> Option<&str> {
    let i = path.rfind('/')?;
    Some(if i == 0 { "/" } else { &path[..i] })
}

/// PathUtils.validatePath.
fn zk_valid_path(path: &str) -> bool {
    if path.is_empty() || !path.starts_with('/') {
        return false;
    }
    if path == "/" {
        return true;
    }
    if path.ends_with('/') {
        return false;
    }
    let bad_segment = path[1..]
        .split('/')
        .any(|s| s.is_empty() || s == "." || s == "..");
    let bad_char = path.chars().any(|c| {
        let c = c as u32;
        c == 0
            || (0x01..=0x1f).contains(&c)
            || (0x7f..=0x9f).contains(&c)
            || (0xd800..=0xf8ff).contains(&c)
            || c >= 0xfff0
    });
    !bad_segment && !bad_char
}

fn check_version(current: i32, expected: i32) -> Result<(), i32> {
    if expected != -1 && expected != current {
        Err(err::BAD_VERSION)
    } else {
        Ok(())
    }
}

/// Java's Integer.parseInt on ASCII input.
fn java_parse_int(s: &str) -> Option<i32> {
    let digits = s.strip_prefix(['+', '-']).unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let v: i64 = digits.parse().ok()?;
    let v = if s.starts_with('-') { -v } else { v };
    i32::try_from(v).ok()
}

/// DigestAuthenticationProvider.isValid: `id.split(":").length == 2`, where
/// Java's split drops trailing empty strings.
fn zk_digest_valid(id: &str) -> bool {
    let mut parts: Vec<&str> = id.split(':').collect();
    while parts.last() == Some(&"") {
        parts.pop();
    }
    parts.len() == 2
}

/// IPAuthenticationProvider.v4addr2Bytes: `addr.split("\\.", -1)`, four
/// parts, each through Integer.parseInt and 0..=255.
fn zk_v4_bytes(addr: &str) -> Option<[u8; 4]> {
    let parts: Vec<&str> = addr.split('.').collect();
    if parts.len() != 4 {
        return None;
    }
    let mut b = [0u8; 4];
    for (i, p) in parts.iter().enumerate() {
        b[i] = u8::try_from(java_parse_int(p)?).ok()?;
    }
    Some(b)
}

/// IPAuthenticationProvider: the address and the "/bits" part (split("/", 2)),
/// bits through Integer.parseInt and 0..=32; None when not valid.
fn zk_ip_expr(expr: &str) -> Option<([u8; 4], i32)> {
    let (addr, bits) = match expr.split_once('/') {
        Some((a, b)) => (a, Some(b)),
        None => (expr, None),
    };
    let addr = zk_v4_bytes(addr)?;
    let bits = match bits {
        None => 32,
        Some(b) => java_parse_int(b).filter(|v| (0..=32).contains(v))?,
    };
    Some((addr, bits))
}

/// IPAuthenticationProvider.isValid: an IPv4 dotted quad (each part through
/// Integer.parseInt, 0..=255), optionally "/bits" with 0 <= bits <= 32.
fn zk_ip_valid(id: &str) -> bool {
    zk_ip_expr(id).is_some()
}

/// IPAuthenticationProvider.matches: both addresses masked to `bits`, as
/// its mask() does byte by byte.
fn zk_ip_matches(id: &str, expr: &str) -> bool {
    let Some((mut acl_addr, bits)) = zk_ip_expr(expr) else {
        return false;
    };
    let Some(mut remote) = zk_v4_bytes(id) else {
        return false;
    };
    let mask = |b: &mut [u8; 4]| {
        let mut start = (bits / 8) as usize;
        let mut start_mask = !((1i32 << (8 - bits % 8)) - 1);
        while start < b.len() {
            b[start] &= start_mask as u8;
            start_mask = 0;
            start += 1;
        }
    };
    mask(&mut acl_addr);
    mask(&mut remote);
    acl_addr == remote
}

/// ZooKeeperServer.checkACL with the default providers (ip, digest; "super"
/// among the session's ids passes everything).
fn zk_check_acl(acl: &[Acl], ids: &[(String, String)], wanted: i32) -> Result<(), i32> {
    if acl.is_empty() || ids.iter().any(|(s, _)| s == "super") {
        return Ok(());
    }
    for a in acl.iter().filter(|a| a.perms & wanted != 0) {
        let (scheme, expr) = (a.id.scheme.as_str(), a.id.id.as_str());
        if scheme == "world" && expr == "anyone" {
            return Ok(());
        }
        let matches = |id: &str| match scheme {
            "ip" => zk_ip_matches(id, expr),
            "digest" => id == expr,
            _ => false,
        };
        if ids.iter().any(|(s, id)| s == scheme && matches(id)) {
            return Ok(());
        }
    }
    Err(err::NO_AUTH)
}

/// PrepRequestProcessor.fixupACL. Only digest ids count as authenticated
/// (ip is not, and "super" has no provider).
fn zk_fixup_acl(acls: &[Acl], auth: &[(String, String)]) -> Result<Vec<Acl>, i32> {
    let mut unique: Vec<&Acl> = Vec::new();
    for a in acls {
        if !unique.contains(&a) {
            unique.push(a);
        }
    }
    if unique.is_empty() {
        return Err(err::INVALID_ACL);
    }
    let mut out = Vec::new();
    for a in unique {
        match a.id.scheme.as_str() {
            "world" if a.id.id == "anyone" => out.push(a.clone()),
            "auth" => {
                let mut any = false;
                for (scheme, id) in auth.iter().filter(|(s, _)| s == "digest") {
                    any = true;
                    out.push(acl(a.perms, scheme, id));
                }
                if !any {
                    return Err(err::INVALID_ACL);
                }
            }
            "digest" if zk_digest_valid(&a.id.id) => out.push(a.clone()),
            "ip" if zk_ip_valid(&a.id.id) => out.push(a.clone()),
            _ => return Err(err::INVALID_ACL),
        }
    }
    Ok(out)
}

/// A create inside a multi as ZooKeeper's MultiOperationRecord hands it to
/// prep (Op.create rebuilds it, and its type follows the flags): TTL flags
/// make a createTTL (keeping the ttl only if one came on the wire), container
/// flags a createContainer, other flags a plain create without ttl. This is
/// how ringkeeper's decoder rebuilds them too, so prep never sees an opcode
/// that disagrees with the flags inside a multi. Flags CreateMode.fromFlag
/// refuses make create, create2 and createContainer fail to decode in
/// ZooKeeper (MARSHALLINGERROR for the whole multi); they are sent anyway,
/// and prep must refuse that op with BAD_ARGUMENTS, as fromFlag does.
fn multi_create(opcode: i32, flags: i32, ttl: i64) -> (i32, i64) {
    match zk_create_mode(flags) {
        Some((.., true)) => (
            op::CREATE_TTL,
            if opcode == op::CREATE_TTL { ttl } else { -1 },
        ),
        Some((_, _, true, _)) => (op::CREATE_CONTAINER, -1),
        _ => (op::CREATE, -1),
    }
}

fn is_special(path: &str) -> bool {
    matches!(
        path,
        "/" | "/zookeeper" | "/zookeeper/quota" | "/zookeeper/config"
    )
}

struct Ctx<'a> {
    zxid: i64,
    time: i64,
    session: i64,
    /// The session's ids, ip first.
    ids: &'a [(String, String)],
    extended: bool,
}

/// CreateMode.fromFlag: (ephemeral, sequential, container, ttl).
fn zk_create_mode(flags: i32) -> Option<(bool, bool, bool, bool)> {
    Some(match flags {
        0 => (false, false, false, false),
        1 => (true, false, false, false),
        2 => (false, true, false, false),
        3 => (true, true, false, false),
        4 => (false, false, true, false),
        5 => (false, false, false, true),
        6 => (false, true, false, true),
        _ => return None,
    })
}

impl Model {
    /// The tree ZooKeeper's DataTree starts with.
    fn new() -> Model {
        let mut nodes = BTreeMap::new();
        nodes.insert("/".to_string(), ModelNode::fresh(vec![Acl::world_all()]));
        nodes.insert(
            "/zookeeper".to_string(),
            ModelNode::fresh(vec![Acl::world_all()]),
        );
        nodes.insert(
            "/zookeeper/quota".to_string(),
            ModelNode::fresh(vec![Acl::world_all()]),
        );
        let mut config = ModelNode::fresh(vec![acl(perm::READ, "world", "anyone")]);
        config.aversion = -1;
        nodes.insert("/zookeeper/config".to_string(), config);
        Model { nodes }
    }

    fn children(&self, path: &str) -> Vec<String> {
        self.nodes
            .keys()
            .filter(|p| p.as_str() != "/" && parent_of(p) == Some(path))
            .map(|p| p[p.rfind('/').unwrap() + 1..].to_string())
            .collect()
    }

    fn ephemerals(&self, session: i64) -> BTreeSet<String> {
        self.nodes
            .iter()
            .filter(|(_, n)| n.ephemeral_session() == Some(session))
            .map(|(p, _)| p.clone())
            .collect()
    }

    /// Nodes an op may target: all of them, the read-only /zookeeper/config
    /// too (prep's ACL checks refuse writing it).
    fn targets(&self) -> Vec<&str> {
        self.nodes.keys().map(String::as_str).collect()
    }

    /// Nodes new children go under in this test: outside /zookeeper.
    fn parents(&self) -> Vec<&str> {
        self.nodes
            .keys()
            .map(String::as_str)
            .filter(|p| !p.starts_with("/zookeeper"))
            .collect()
    }

    fn resolve_path(&self, sel: &PathSel) -> String {
        let pick = |v: Vec<&str>, i: usize| v[i % v.len()].to_string();
        match sel {
            PathSel::Fixed(i) => FIXED_PATHS[*i].to_string(),
            PathSel::Existing(i) => pick(self.targets(), *i),
            PathSel::Child(i, n) => {
                let p = pick(self.parents(), *i);
                if p == "/" {
                    format!("/{}", NAMES[*n])
                } else {
                    format!("{p}/{}", NAMES[*n])
                }
            }
            PathSel::SeqDir(i) => {
                let p = pick(self.parents(), *i);
                if p == "/" {
                    p
                } else {
                    format!("{p}/")
                }
            }
        }
    }

    fn resolve_version(&self, path: &str, v: &Ver, acl_version: bool) -> i32 {
        let current = self
            .nodes
            .get(path)
            .map(|n| if acl_version { n.aversion } else { n.version })
            .unwrap_or(0);
        match v {
            Ver::Any => -1,
            Ver::Right => current,
            Ver::Wrong(d) => current + d,
            Ver::Raw(v) => *v,
        }
    }

    /// The Request an abstract op stands for in the current state.
    fn resolve(&self, o: &Op) -> Request {
        self.resolve_in(o, false)
    }

    /// `in_multi`: the op is inside a multi, so it reaches prep as
    /// ZooKeeper's MultiOperationRecord rebuilt it (see multi_create).
    fn resolve_in(&self, o: &Op, in_multi: bool) -> Request {
        match o {
            Op::Create {
                path,
                kind,
                data,
                acl,
            } => {
                let (opcode, flags, ttl) = match kind {
                    CreateKind::Plain { flags, create2 } => {
                        (if *create2 { op::CREATE2 } else { op::CREATE }, *flags, -1)
                    }
                    CreateKind::Container => (op::CREATE_CONTAINER, 4, -1),
                    CreateKind::Ttl { sequential, ttl } => {
                        (op::CREATE_TTL, if *sequential { 6 } else { 5 }, *ttl)
                    }
                    CreateKind::Weird { opcode, flags, ttl } => {
                        // Only createTTL carries a ttl on the wire.
                        let mut ttl = if *opcode == op::CREATE_TTL { *ttl } else { -1 };
                        let ttl_flags = matches!(zk_create_mode(*flags), Some((.., true)));
                        if *opcode == op::CREATE_TTL
                            && !in_multi
                            && zk_create_mode(*flags).is_some()
                            && !ttl_flags
                            && ttl < 0
                        {
                            // ZooKeeper's prep passes this (a negative ttl
                            // is fine for non-TTL flags) and logs a
                            // CreateTTLTxn that DataTree cannot apply
                            // (TTL.toEphemeralOwner throws on ttl <= 0): no
                            // defined outcome to model. Send ttl 0 instead,
                            // which prep must refuse (BAD_ARGUMENTS).
                            ttl = 0;
                        }
                        (*opcode, *flags, ttl)
                    }
                };
                let (opcode, ttl) = if in_multi {
                    multi_create(opcode, flags, ttl)
                } else {
                    (opcode, ttl)
                };
                Request::Create {
                    opcode,
                    path: self.resolve_path(path),
                    data: data.clone().map(Into::into),
                    acl: acl.acls(),
                    flags,
                    ttl,
                }
            }
            Op::Delete { path, version } => {
                let path = self.resolve_path(path);
                let version = self.resolve_version(&path, version, false);
                Request::Delete { path, version }
            }
            Op::SetData {
                path,
                data,
                version,
            } => {
                let path = self.resolve_path(path);
                let version = self.resolve_version(&path, version, false);
                Request::SetData {
                    path,
                    data: data.clone().map(Into::into),
                    version,
                }
            }
            Op::SetAcl { path, acl, version } => {
                let path = self.resolve_path(path);
                let version = self.resolve_version(&path, version, true);
                Request::SetAcl {
                    path,
                    acl: acl.acls(),
                    version,
                }
            }
            Op::Check { path, version } => {
                let path = self.resolve_path(path);
                let version = self.resolve_version(&path, version, false);
                Request::Check { path, version }
            }
            Op::Multi(ops) => {
                Request::Multi(ops.iter().map(|o| self.resolve_in(o, true)).collect())
            }
            Op::CloseSession => Request::CloseSession,
        }
    }

    /// Runs one write: prep's checks in ZooKeeper's order, then its effect.
    fn write(&mut self, c: &Ctx, req: &Request) -> Outcome {
        match req {
            Request::Multi(ops) => {
                let mut scratch = self.clone();
                let mut triggers = Vec::new();
                let mut created = Vec::new();
                for (i, o) in ops.iter().enumerate() {
                    let is_multi_op = matches!(
                        o,
                        Request::Create { .. }
                            | Request::Delete { .. }
                            | Request::SetData { .. }
                            | Request::Check { .. }
                    );
                    let res = if is_multi_op {
                        scratch.single(c, o)
                    } else {
                        Err(err::BAD_ARGUMENTS)
                    };
                    match res {
                        Ok((t, cr)) => {
                            triggers.extend(t);
                            created.extend(cr);
                        }
                        Err(code) => {
                            let mut codes = vec![0; i];
                            codes.push(code);
                            codes.resize(ops.len(), err::RUNTIME_INCONSISTENCY);
                            return Outcome::MultiErr(codes);
                        }
                    }
                }
                *self = scratch;
                Outcome::Ok { triggers, created }
            }
            Request::CloseSession => {
                let mut triggers = Vec::new();
                for p in self.ephemerals(c.session) {
                    triggers.extend(self.remove(c.zxid, &p));
                }
                Outcome::Ok {
                    triggers,
                    created: vec![],
                }
            }
            other => match self.single(c, other) {
                Ok((triggers, created)) => Outcome::Ok { triggers, created },
                Err(code) => Outcome::Err(code),
            },
        }
    }

    fn remove(&mut self, zxid: i64, path: &str) -> Vec<(String, i32)> {
        self.nodes.remove(path).unwrap();
        let parent = parent_of(path).unwrap().to_string();
        let pn = self.nodes.get_mut(&parent).unwrap();
        pn.pzxid = pn.pzxid.max(zxid);
        vec![
            (path.to_string(), event::NODE_DELETED),
            (parent, event::NODE_CHILDREN_CHANGED),
        ]
    }

    #[allow(clippy::type_complexity)]
    fn single(&mut self, c: &Ctx, req: &Request) -> Result<(Vec<(String, i32)>, Vec<String>), i32> {
        match req {
            Request::Create {
                opcode,
                path,
                data,
                acl,
                flags,
                ttl,
            } => {
                let (ephemeral, sequential, _container, is_ttl) =
                    zk_create_mode(*flags).ok_or(err::BAD_ARGUMENTS)?;
                // validateCreateRequest
                if is_ttl && !c.extended {
                    return Err(err::UNIMPLEMENTED);
                }
                let ttl_ok = if is_ttl {
                    *ttl > 0 && *ttl <= ZK_MAX_TTL_MS
                } else {
                    *ttl < 0
                };
                if !ttl_ok {
                    return Err(err::BAD_ARGUMENTS);
                }
                // validatePathForCreate
                if path.contains('\0') {
                    return Err(err::BAD_ARGUMENTS);
                }
                let parent = parent_of(path).ok_or(err::BAD_ARGUMENTS)?.to_string();
                let acl = zk_fixup_acl(acl, c.ids)?;
                let pn = self.nodes.get(&parent).ok_or(err::NO_NODE)?;
                zk_check_acl(&pn.acl, c.ids, perm::CREATE)?;
                let final_path = if sequential {
                    format!("{path}{:010}", pn.creates)
                } else {
                    path.clone()
                };
                if !zk_valid_path(&final_path) {
                    return Err(err::BAD_ARGUMENTS);
                }
                if self.nodes.contains_key(&final_path) {
                    return Err(err::NODE_EXISTS);
                }
                if pn.ephemeral_session().is_some() {
                    return Err(err::NO_CHILDREN_FOR_EPHEMERALS);
                }
                // The txn type follows the opcode, not the flags:
                // createContainer makes a CreateContainerTxn and createTTL a
                // CreateTTLTxn whatever the flags, create and create2 a
                // CreateTxn (ephemeral or not) even with container flags.
                let owner = match *opcode {
                    op::CREATE_CONTAINER => CONTAINER_EPHEMERAL_OWNER,
                    op::CREATE_TTL => {
                        // resolve() never sends what DataTree cannot apply.
                        assert!(*ttl > 0, "CreateTTLTxn with ttl {ttl}");
                        TTL_OWNER_MASK | ttl
                    }
                    _ if ephemeral => c.session,
                    _ => 0,
                };
                let pn = self.nodes.get_mut(&parent).unwrap();
                pn.creates += 1;
                pn.pzxid = c.zxid;
                self.nodes.insert(
                    final_path.clone(),
                    ModelNode {
                        data: data.as_deref().map(<[u8]>::to_vec),
                        acl,
                        czxid: c.zxid,
                        mzxid: c.zxid,
                        ctime: c.time,
                        mtime: c.time,
                        version: 0,
                        creates: 0,
                        aversion: 0,
                        owner,
                        pzxid: c.zxid,
                    },
                );
                Ok((
                    vec![
                        (final_path.clone(), event::NODE_CREATED),
                        (parent, event::NODE_CHILDREN_CHANGED),
                    ],
                    vec![final_path],
                ))
            }
            Request::Delete { path, version } => {
                // getParentPathAndValidate
                if path.contains('\0') || is_special(path) {
                    return Err(err::BAD_ARGUMENTS);
                }
                let parent = parent_of(path).ok_or(err::BAD_ARGUMENTS)?;
                let pn = self.nodes.get(parent).ok_or(err::NO_NODE)?;
                zk_check_acl(&pn.acl, c.ids, perm::DELETE)?;
                let n = self.nodes.get(path).ok_or(err::NO_NODE)?;
                check_version(n.version, *version)?;
                if !self.children(path).is_empty() {
                    return Err(err::NOT_EMPTY);
                }
                Ok((self.remove(c.zxid, path), vec![]))
            }
            Request::SetData {
                path,
                data,
                version,
            } => {
                if !zk_valid_path(path) {
                    return Err(err::BAD_ARGUMENTS);
                }
                let n = self.nodes.get_mut(path).ok_or(err::NO_NODE)?;
                zk_check_acl(&n.acl, c.ids, perm::WRITE)?;
                check_version(n.version, *version)?;
                n.version += 1;
                n.data = data.as_deref().map(<[u8]>::to_vec);
                n.mzxid = c.zxid;
                n.mtime = c.time;
                Ok((vec![(path.clone(), event::NODE_DATA_CHANGED)], vec![]))
            }
            Request::SetAcl { path, acl, version } => {
                if !zk_valid_path(path) {
                    return Err(err::BAD_ARGUMENTS);
                }
                let acl = zk_fixup_acl(acl, c.ids)?;
                let n = self.nodes.get_mut(path).ok_or(err::NO_NODE)?;
                zk_check_acl(&n.acl, c.ids, perm::ADMIN)?;
                check_version(n.aversion, *version)?;
                n.aversion += 1;
                n.acl = acl;
                Ok((vec![], vec![]))
            }
            Request::Check { path, version } => {
                if !zk_valid_path(path) {
                    return Err(err::BAD_ARGUMENTS);
                }
                let n = self.nodes.get(path).ok_or(err::NO_NODE)?;
                zk_check_acl(&n.acl, c.ids, perm::READ)?;
                check_version(n.version, *version)?;
                Ok((vec![], vec![]))
            }
            _ => Err(err::UNIMPLEMENTED),
        }
    }
}

// ------------------------------------------------------------ checks

type Dump = BTreeMap<String, (Stat, Option<Vec<u8>>, Vec<Acl>, Vec<String>)>;

/// Everything a client can observe of the tree.
fn dump(tree: &Tree) -> Dump {
    tree.paths()
        .map(|p| {
            let n = tree.get(&p).unwrap();
            (
                p.to_string(),
                (
                    n.stat(),
                    n.data().map(<[u8]>::to_vec),
                    n.acl.to_vec(),
                    tree.children(&p).unwrap(),
                ),
            )
        })
        .collect()
}

/// `after` holds the same nodes as `before`: the very same (shared) node
/// values, or equal ones.
fn unchanged(before: &Tree, after: &Tree) -> bool {
    before.znode_count() == after.znode_count()
        && before
            .paths()
            .all(|p| match (before.get(&p), after.get(&p)) {
                (Some(a), Some(b)) => {
                    std::ptr::eq(a, b)
                        || (a.stat() == b.stat()
                            && a.data() == b.data()
                            && a.acl == b.acl
                            && a.children.zookeeper_order() == b.children.zookeeper_order())
                }
                _ => false,
            })
        || dump(before) == dump(after)
}

/// Sorted child names of every node that has children, from a path list.
fn children_by_parent<'a>(paths: impl Iterator<Item = &'a str>) -> BTreeMap<&'a str, Vec<String>> {
    let mut m: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for p in paths.filter(|p| *p != "/") {
        let i = p.rfind('/').unwrap();
        m.entry(parent_of(p).unwrap())
            .or_default()
            .push(p[i + 1..].to_string());
    }
    for v in m.values_mut() {
        v.sort();
    }
    m
}

/// Invariants of the tree on its own.
fn check_invariants(tree: &Tree) -> Result<(), TestCaseError> {
    let paths: BTreeSet<String> = tree.paths().map(|p| p.to_string()).collect();
    let mut ephemerals: BTreeMap<i64, BTreeSet<String>> = BTreeMap::new();
    let mut data_bytes = 0u64;
    let by_parent = children_by_parent(paths.iter().map(String::as_str));
    for p in &paths {
        let n = tree.get(p).unwrap();
        let stat = n.stat();
        prop_assert_eq!(n.data_len(), n.data().map_or(0, |d| d.len()));
        // DataTree.approximateDataSize: path length plus data length.
        data_bytes += (p.len() + n.data_len()) as u64;
        if p != "/" {
            let parent = parent_of(p).unwrap();
            let name = &p[p.rfind('/').unwrap() + 1..];
            let pn = tree.get(parent);
            prop_assert!(pn.is_some(), "{} has no parent", p);
            prop_assert!(
                pn.unwrap().children.contains(name),
                "{} missing from its parent's children",
                p
            );
        }
        // The children set is exactly the nodes whose parent this is, and
        // ZooKeeper's listing order is an order of that set.
        let expected = by_parent.get(p.as_str()).cloned().unwrap_or_default();
        let sorted: Vec<String> = n.children.sorted().map(|c| c.to_string()).collect();
        prop_assert_eq!(&sorted, &expected, "children of {}", p);
        let mut listed = tree.children(p).unwrap();
        prop_assert_eq!(&listed, &n.children.zookeeper_order());
        listed.sort();
        prop_assert_eq!(&listed, &expected, "listed children of {}", p);
        prop_assert!(expected.iter().all(|c| n.children.contains(c)));
        prop_assert_eq!(n.children.is_empty(), expected.is_empty());
        prop_assert_eq!(stat.num_children as usize, n.children.len());
        prop_assert_eq!(stat.cversion, n.cversion() * 2 - stat.num_children);
        prop_assert_eq!(stat.data_length as usize, n.data_len());
        prop_assert!(
            stat.mzxid >= stat.czxid && stat.pzxid >= stat.czxid,
            "{}: {:?}",
            p,
            stat
        );
        prop_assert!(stat.mzxid <= tree.last_zxid() && stat.pzxid <= tree.last_zxid());
        prop_assert!(
            stat.num_children <= n.cversion() || is_special(p),
            "{} {:?}",
            p,
            stat
        );
        match n.kind() {
            NodeKind::Ephemeral(s) => {
                prop_assert!(n.children.is_empty(), "ephemeral {} has children", p);
                prop_assert_eq!(stat.ephemeral_owner, s);
                ephemerals.entry(s).or_default().insert(p.clone());
            }
            _ => prop_assert_eq!(stat.ephemeral_owner, 0),
        }
    }
    for (s, set) in &ephemerals {
        let got: BTreeSet<String> = tree
            .ephemerals_of(*s)
            .iter()
            .map(|p| p.to_string())
            .collect();
        prop_assert_eq!(&got, set, "ephemerals_of({:#x})", s);
    }
    prop_assert_eq!(
        tree.ephemeral_count(),
        ephemerals.values().map(BTreeSet::len).sum::<usize>()
    );
    prop_assert_eq!(tree.znode_count(), paths.len());
    prop_assert_eq!(tree.node_count(), paths.len() + 1);
    prop_assert_eq!(tree.descendant_count("/"), Some(paths.len() as i32 - 1));
    prop_assert_eq!(tree.approximate_data_size(), data_bytes);
    Ok(())
}

/// The tree equals the model.
fn check_model(tree: &Tree, model: &Model) -> Result<(), TestCaseError> {
    let paths: BTreeSet<String> = tree.paths().map(|p| p.to_string()).collect();
    let expected: BTreeSet<String> = model.nodes.keys().cloned().collect();
    prop_assert_eq!(&paths, &expected);
    prop_assert_eq!(tree.node_count(), model.nodes.len() + 1);
    let by_parent = children_by_parent(model.nodes.keys().map(String::as_str));
    for (p, m) in &model.nodes {
        let n = tree.get(p.as_str()).unwrap();
        let num_children = by_parent.get(p.as_str()).map_or(0, Vec::len) as i32;
        let want = Stat {
            czxid: m.czxid,
            mzxid: m.mzxid,
            ctime: m.ctime,
            mtime: m.mtime,
            version: m.version,
            cversion: 2 * m.creates - num_children,
            aversion: m.aversion,
            ephemeral_owner: m.ephemeral_session().unwrap_or(0),
            data_length: m.data.as_ref().map_or(0, Vec::len) as i32,
            num_children,
            pzxid: m.pzxid,
        };
        prop_assert_eq!(n.stat(), want, "stat of {}", p);
        prop_assert_eq!(n.cversion(), m.creates, "stored cversion of {}", p);
        prop_assert_eq!(n.ephemeral_owner, m.owner, "stored owner of {}", p);
        prop_assert_eq!(n.data(), m.data.as_deref(), "data of {}", p);
        prop_assert_eq!(&n.acl[..], &m.acl[..], "acl of {}", p);
        // Children lists: equal paths (above) and check_invariants imply them.
    }
    for s in SESSIONS {
        let got: BTreeSet<String> = tree
            .ephemerals_of(s)
            .iter()
            .map(|p| p.to_string())
            .collect();
        prop_assert_eq!(got, model.ephemerals(s), "ephemerals_of({:#x})", s);
    }
    Ok(())
}

fn created_paths(op: &TxnOp) -> Vec<String> {
    match op {
        TxnOp::Create { path, .. } => vec![path.to_string()],
        TxnOp::Multi(ops) => ops.iter().flat_map(created_paths).collect(),
        _ => vec![],
    }
}

/// Prep's txn is the one the model predicts: same error code, same multi
/// codes, or a success of the request's kind creating the same paths.
fn check_prep(
    req: &Request,
    txn: &TxnOp,
    want: &Outcome,
    model: &Model,
    session: i64,
) -> Result<(), TestCaseError> {
    match want {
        Outcome::Err(code) => prop_assert_eq!(txn, &TxnOp::Error { code: *code }, "{:?}", req),
        Outcome::MultiErr(codes) => {
            prop_assert_eq!(
                txn,
                &TxnOp::MultiError {
                    codes: codes.clone()
                },
                "{:?}",
                req
            );
            // 0 … 0, the failing code, -2 … -2
            let k = codes.iter().position(|c| *c != 0).unwrap();
            prop_assert!(codes[k] != err::RUNTIME_INCONSISTENCY);
            prop_assert!(codes[k + 1..]
                .iter()
                .all(|c| *c == err::RUNTIME_INCONSISTENCY));
        }
        Outcome::Ok { created, .. } => {
            let kind_ok = match (req, txn) {
                (Request::Create { .. }, TxnOp::Create { .. })
                | (Request::Delete { .. }, TxnOp::Delete { .. })
                | (Request::SetData { .. }, TxnOp::SetData { .. })
                | (Request::SetAcl { .. }, TxnOp::SetAcl { .. })
                | (Request::Check { .. }, TxnOp::Check { .. }) => true,
                (Request::Multi(ops), TxnOp::Multi(txns)) => ops.len() == txns.len(),
                (Request::CloseSession, TxnOp::CloseSession { ephemerals }) => {
                    let got: BTreeSet<String> = ephemerals.iter().map(|p| p.to_string()).collect();
                    prop_assert_eq!(got, model.ephemerals(session));
                    true
                }
                _ => false,
            };
            prop_assert!(kind_ok, "{:?} prepped as {:?}", req, txn);
            prop_assert_eq!(&created_paths(txn), created, "{:?}", req);
        }
    }
    Ok(())
}

/// Runs `ops` through prep + apply on a tree and through the model.
fn run(extended: bool, ops: &[(usize, Op)]) -> Result<(), TestCaseError> {
    let mut tree = Tree::new();
    let mut model = Model::new();
    check_invariants(&tree)?;
    check_model(&tree, &model)?;
    for (i, (s, o)) in ops.iter().enumerate() {
        let session = SESSIONS[*s];
        let ids = session_ids(*s);
        let zxid = tree.last_zxid() + 1;
        let time = 1_700_000_000_000 + zxid * 7;
        let req = model.resolve(o);

        let before_model = model.clone();
        let want = model.write(
            &Ctx {
                zxid,
                time,
                session,
                ids: &ids,
                extended,
            },
            &req,
        );
        let ctx = PrepContext {
            session_id: session,
            extended_types_enabled: extended,
            enforce_quota: false,
            providers: Default::default(),
            ids: &ids,
        };
        let txn_op = prep(&tree, &tree, &ctx, &mut req.clone());
        check_prep(&req, &txn_op, &want, &before_model, session)
            .map_err(|e| TestCaseError::fail(format!("op {i} ({req:?}): {e}")))?;

        let before = tree.clone();
        let failed = matches!(txn_op, TxnOp::Error { .. } | TxnOp::MultiError { .. });
        let triggers = tree.apply(&Txn {
            zxid,
            time_ms: time,
            session_id: session,
            cxid: i as i32,
            op: txn_op,
        });
        prop_assert_eq!(tree.last_zxid(), zxid);
        let mut got: Vec<(String, i32)> = triggers
            .iter()
            .map(|t| (t.path.to_string(), t.event_type))
            .collect();
        if failed {
            // A failed write takes a zxid and changes nothing else.
            prop_assert!(got.is_empty());
            prop_assert!(
                unchanged(&before, &tree),
                "failed {:?} changed the tree",
                req
            );
        }
        if let Outcome::Ok { triggers, .. } = &want {
            let mut triggers = triggers.clone();
            if matches!(req, Request::CloseSession) {
                // ZooKeeper deletes a session's ephemerals in no particular order.
                got.sort();
                triggers.sort();
            }
            prop_assert_eq!(&got, &triggers, "triggers of {:?}", req);
        }
        check_invariants(&tree)
            .map_err(|e| TestCaseError::fail(format!("after op {i} ({req:?}): {e}")))?;
        check_model(&tree, &model)
            .map_err(|e| TestCaseError::fail(format!("after op {i} ({req:?}): {e}")))?;
    }
    Ok(())
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn prep_and_apply_match_the_model(
        extended in prop_oneof![3 => Just(true), 1 => Just(false)],
        ops in vec(any_op(), 1..200),
    ) {
        run(extended, &ops)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: config().cases / 4, ..config() })]

    /// Only sequential creates under one parent: the names are the parent's
    /// stored create count, %010d, whatever was deleted in between.
    #[test]
    fn sequential_names_count_creates(
        ops in vec((0..SESSIONS.len(), prop_oneof![
            3 => (0..4i32).prop_map(|k| Op::Create {
                path: PathSel::Fixed(0),
                kind: CreateKind::Plain { flags: 2 | (k & 1), create2: k >= 2 },
                data: Some(vec![]),
                acl: AclSel::Open,
            }),
            1 => Just(Op::Create {
                path: PathSel::Fixed(0),
                kind: CreateKind::Plain { flags: 0, create2: false },
                data: Some(vec![]),
                acl: AclSel::Open,
            }),
            2 => any::<usize>().prop_map(|i| Op::Delete { path: PathSel::Existing(i), version: Ver::Any }),
            1 => Just(Op::CloseSession),
        ]), 1..200),
    ) {
        run(true, &ops)?;
    }
}

// ------------------------------------------- divergences from ZooKeeper, pinned

fn ctx_for<'a>(ids: &'a [(String, String)]) -> PrepContext<'a> {
    PrepContext {
        session_id: SESSIONS[0],
        extended_types_enabled: true,
        enforce_quota: false,
        providers: Default::default(),
        ids,
    }
}

fn create_req(path: &str, flags: i32, opcode: i32, ttl: i64, acl: Vec<Acl>) -> Request {
    Request::Create {
        opcode,
        path: path.into(),
        data: Some(bytes::Bytes::new()),
        acl,
        flags,
        ttl,
    }
}

proptest! {
    #![proptest_config(config())]

    /// EphemeralType.TTL.maxValue() is 2^40 - 1 ms: larger TTLs are
    /// BAD_ARGUMENTS in ZooKeeper (they would set the reserved bits of the
    /// ephemeralOwner).
    #[test]
    fn ttl_bounds_match_zookeeper(
        ttl in prop_oneof![
            Just(ZK_MAX_TTL_MS),
            Just(ZK_MAX_TTL_MS + 1),
            ZK_MAX_TTL_MS..0x00FF_FFFF_FFFF_FFFFi64,
            Just(0x00FF_FFFF_FFFF_FFFFi64),
            1..1_000_000i64,
        ],
        sequential in any::<bool>(),
    ) {
        let tree = Tree::new();
        let req = create_req("/t", if sequential { 6 } else { 5 }, op::CREATE_TTL, ttl, vec![Acl::world_all()]);
        let txn = prep(&tree, &tree, &ctx_for(&session_ids(2)), &mut req.clone());
        if ttl <= ZK_MAX_TTL_MS {
            prop_assert!(matches!(txn, TxnOp::Create { .. }), "ttl {:#x}: {:?}", ttl, txn);
        } else {
            prop_assert_eq!(txn, TxnOp::Error { code: err::BAD_ARGUMENTS }, "ttl {:#x}", ttl);
        }
    }

    /// DigestAuthenticationProvider.isValid is `id.split(":").length == 2`;
    /// Java's split drops trailing empty strings ("user:" is one part,
    /// "user:hash:" two).
    #[test]
    fn digest_acl_validity_matches_zookeeper(id in "[a-c:]{0,6}") {
        let got = fixup_acl(&[acl(perm::ALL, "digest", &id)], &[], Default::default()).is_ok();
        prop_assert_eq!(got, zk_digest_valid(&id), "digest id {:?}", id);
    }

    /// IPAuthenticationProvider.isValid takes IPv4 only (addr2Bytes has no
    /// IPv6 yet), each part through Integer.parseInt ("010", "+1" pass).
    #[test]
    fn ip_acl_validity_matches_zookeeper(
        id in prop_oneof![
            "(25[0-6]|[12]?[0-9]{1,2}|0[0-9]{1,2}|\\+[0-9])(\\.[0-9]{1,3}){3}(/[+-]?[0-9]{1,2})?",
            "[0-9a-f:.]{0,12}(/[0-9]{1,3})?",
        ],
    ) {
        let got = fixup_acl(&[acl(perm::ALL, "ip", &id)], &[], Default::default()).is_ok();
        prop_assert_eq!(got, zk_ip_valid(&id), "ip id {:?}", id);
    }
}

/// An "auth" ACL expands to the session's *authenticated* ids. A digest
/// login with the super password gives ("super", "") too, but "super" has no
/// AuthenticationProvider, so ZooKeeper's fixupACL skips it.
#[test]
fn auth_acl_does_not_expand_to_super() {
    let auth = vec![
        ("ip".to_string(), "127.0.0.1".to_string()),
        ("super".to_string(), String::new()),
        (
            "digest".to_string(),
            "super:D/InIHSb7yEEbrWz8b9l71RjZJU=".to_string(),
        ),
    ];
    let got =
        fixup_acl(&[acl(perm::ALL, "auth", "")], &auth, Default::default()).map(|a| a.to_vec());
    assert_eq!(
        got,
        Ok(vec![acl(
            perm::ALL,
            "digest",
            "super:D/InIHSb7yEEbrWz8b9l71RjZJU="
        )])
    );
}

/// The ACL ids on which fixup_acl and ZooKeeper disagree, listed at once.
#[test]
fn acl_id_validity_examples_match_zookeeper() {
    let cases = [
        ("digest", "user:"),
        ("digest", "user:hash:"),
        ("digest", ":"),
        ("digest", "user:hash"),
        ("ip", "::1"),
        ("ip", "fe80::1/64"),
        ("ip", "010.0.0.1"),
        ("ip", "+1.2.3.4"),
        ("ip", "1.2.3.4/-0"),
        ("ip", "10.0.0.0/8"),
    ];
    let mismatches: Vec<String> = cases
        .iter()
        .filter_map(|(scheme, id)| {
            let got = fixup_acl(&[acl(perm::ALL, scheme, id)], &[], Default::default()).is_ok();
            let want = if *scheme == "ip" {
                zk_ip_valid(id)
            } else {
                zk_digest_valid(id)
            };
            (got != want).then(|| format!("{scheme}:{id} ringkeeper {got}, ZooKeeper {want}"))
        })
        .collect();
    assert!(mismatches.is_empty(), "{mismatches:#?}");
}

#[test]
fn java_helpers_behave_like_java() {
    assert!(zk_digest_valid("a:b") && zk_digest_valid(":b") && zk_digest_valid("a:b:"));
    assert!(!zk_digest_valid("a:") && !zk_digest_valid(":") && !zk_digest_valid("ab"));
    assert!(zk_ip_valid("10.0.0.1") && zk_ip_valid("010.0.0.1") && zk_ip_valid("+1.2.3.4"));
    assert!(zk_ip_valid("1.2.3.4/-0") && zk_ip_valid("1.2.3.4/32"));
    assert!(
        !zk_ip_valid("::1")
            && !zk_ip_valid("1.2.3.4/33")
            && !zk_ip_valid("1.2.3.")
            && !zk_ip_valid("256.0.0.1")
    );
}
