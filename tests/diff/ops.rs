//! Operations, their wire encoding, and the rendering of replies into
//! normalized, comparable text. A `Runner` drives several sessions against
//! one server and records everything into a transcript.

use std::fmt::Write as _;
use std::time::Duration;

use super::norm::Norm;
use super::wire::{self, op, Acl, CallErr, Conn, Dec, Enc, Event, Reply, Stat};

/// Create flags (CreateMode).
pub mod mode {
    pub const PERSISTENT: i32 = 0;
    pub const EPHEMERAL: i32 = 1;
    pub const SEQUENTIAL: i32 = 2;
    pub const EPHEMERAL_SEQUENTIAL: i32 = 3;
    pub const CONTAINER: i32 = 4;
    pub const PERSISTENT_WITH_TTL: i32 = 5;
    pub const PERSISTENT_SEQUENTIAL_WITH_TTL: i32 = 6;
}

#[derive(Clone, Debug)]
pub enum Op {
    /// opcode: CREATE, CREATE2, CREATE_CONTAINER or CREATE_TTL.
    Create {
        opcode: i32,
        path: String,
        data: Vec<u8>,
        acl: Vec<Acl>,
        flags: i32,
        ttl: i64,
    },
    Delete {
        path: String,
        version: i32,
    },
    Exists {
        path: String,
        watch: bool,
    },
    GetData {
        path: String,
        watch: bool,
    },
    SetData {
        path: String,
        data: Vec<u8>,
        version: i32,
    },
    GetAcl {
        path: String,
    },
    SetAcl {
        path: String,
        acl: Vec<Acl>,
        version: i32,
    },
    GetChildren {
        path: String,
        watch: bool,
    },
    GetChildren2 {
        path: String,
        watch: bool,
    },
    Sync {
        path: String,
    },
    /// A version check (standalone outside multi, or inside Multi).
    Check {
        path: String,
        version: i32,
    },
    Multi(Vec<Op>),
    MultiRead(Vec<Op>),
    GetAllChildrenNumber {
        path: String,
    },
    GetEphemerals {
        prefix: String,
    },
    /// mode 0 = persistent, 1 = persistent recursive.
    AddWatch {
        path: String,
        mode: i32,
    },
    /// typ 1 = children, 2 = data, 3 = any (4/5 persistent kinds in 3.8).
    RemoveWatches {
        path: String,
        typ: i32,
    },
    CheckWatches {
        path: String,
        typ: i32,
    },
    /// SetWatches (op 101) or, with persistent lists, SetWatches2 (op 105).
    /// `rel_zxid: None` means the session's own last seen zxid.
    SetWatches {
        rel_zxid: Option<i64>,
        data: Vec<String>,
        exist: Vec<String>,
        child: Vec<String>,
        persistent: Option<(Vec<String>, Vec<String>)>,
    },
    WhoAmI,
    AddAuth {
        scheme: String,
        auth: Vec<u8>,
    },
    Reconfig,
    Raw {
        opcode: i32,
        body: Vec<u8>,
    },
}

pub fn create(path: &str, data: &str, flags: i32) -> Op {
    Op::Create {
        opcode: op::CREATE2,
        path: path.into(),
        data: data.as_bytes().to_vec(),
        acl: Acl::open(),
        flags,
        ttl: 0,
    }
}

pub fn create_v1(path: &str, data: &str, flags: i32) -> Op {
    Op::Create {
        opcode: op::CREATE,
        path: path.into(),
        data: data.as_bytes().to_vec(),
        acl: Acl::open(),
        flags,
        ttl: 0,
    }
}

pub fn container(path: &str) -> Op {
    Op::Create {
        opcode: op::CREATE_CONTAINER,
        path: path.into(),
        data: Vec::new(),
        acl: Acl::open(),
        flags: mode::CONTAINER,
        ttl: 0,
    }
}

pub fn delete(path: &str, version: i32) -> Op {
    Op::Delete {
        path: path.into(),
        version,
    }
}

pub fn exists(path: &str, watch: bool) -> Op {
    Op::Exists {
        path: path.into(),
        watch,
    }
}

pub fn get(path: &str, watch: bool) -> Op {
    Op::GetData {
        path: path.into(),
        watch,
    }
}

pub fn set(path: &str, data: &str, version: i32) -> Op {
    Op::SetData {
        path: path.into(),
        data: data.as_bytes().to_vec(),
        version,
    }
}

pub fn children(path: &str, watch: bool) -> Op {
    Op::GetChildren {
        path: path.into(),
        watch,
    }
}

pub fn children2(path: &str, watch: bool) -> Op {
    Op::GetChildren2 {
        path: path.into(),
        watch,
    }
}

pub fn check(path: &str, version: i32) -> Op {
    Op::Check {
        path: path.into(),
        version,
    }
}

pub fn sync(path: &str) -> Op {
    Op::Sync { path: path.into() }
}

fn encode_into(o: &Op, e: &mut Enc) -> i32 {
    match o {
        Op::Create {
            opcode,
            path,
            data,
            acl,
            flags,
            ttl,
        } => {
            e.str(path).buf(Some(data)).acls(acl).i32(*flags);
            if *opcode == op::CREATE_TTL {
                e.i64(*ttl);
            }
            *opcode
        }
        Op::Delete { path, version } => {
            e.str(path).i32(*version);
            op::DELETE
        }
        Op::Exists { path, watch } => {
            e.str(path).bool(*watch);
            op::EXISTS
        }
        Op::GetData { path, watch } => {
            e.str(path).bool(*watch);
            op::GET_DATA
        }
        Op::SetData {
            path,
            data,
            version,
        } => {
            e.str(path).buf(Some(data)).i32(*version);
            op::SET_DATA
        }
        Op::GetAcl { path } => {
            e.str(path);
            op::GET_ACL
        }
        Op::SetAcl { path, acl, version } => {
            e.str(path).acls(acl).i32(*version);
            op::SET_ACL
        }
        Op::GetChildren { path, watch } => {
            e.str(path).bool(*watch);
            op::GET_CHILDREN
        }
        Op::GetChildren2 { path, watch } => {
            e.str(path).bool(*watch);
            op::GET_CHILDREN2
        }
        Op::Sync { path } => {
            e.str(path);
            op::SYNC
        }
        Op::Check { path, version } => {
            e.str(path).i32(*version);
            op::CHECK
        }
        Op::Multi(ops) | Op::MultiRead(ops) => {
            for sub in ops {
                let mut b = Enc::new();
                let code = encode_into(sub, &mut b);
                e.i32(code).bool(false).i32(-1);
                e.0.extend_from_slice(&b.0);
            }
            e.i32(-1).bool(true).i32(-1);
            if matches!(o, Op::Multi(_)) {
                op::MULTI
            } else {
                op::MULTI_READ
            }
        }
        Op::GetAllChildrenNumber { path } => {
            e.str(path);
            op::GET_ALL_CHILDREN_NUMBER
        }
        Op::GetEphemerals { prefix } => {
            e.str(prefix);
            op::GET_EPHEMERALS
        }
        Op::AddWatch { path, mode } => {
            e.str(path).i32(*mode);
            op::ADD_WATCH
        }
        Op::RemoveWatches { path, typ } => {
            e.str(path).i32(*typ);
            op::REMOVE_WATCHES
        }
        Op::CheckWatches { path, typ } => {
            e.str(path).i32(*typ);
            op::CHECK_WATCHES
        }
        Op::SetWatches {
            rel_zxid,
            data,
            exist,
            child,
            persistent,
        } => {
            e.i64(rel_zxid.unwrap_or(0))
                .strs(data)
                .strs(exist)
                .strs(child);
            match persistent {
                None => op::SET_WATCHES,
                Some((p, r)) => {
                    e.strs(p).strs(r);
                    op::SET_WATCHES2
                }
            }
        }
        Op::WhoAmI => op::WHO_AM_I,
        Op::AddAuth { scheme, auth } => {
            e.i32(0).str(scheme).buf(Some(auth));
            op::AUTH
        }
        Op::Reconfig => {
            e.buf(None).buf(None).buf(None).i64(-1);
            op::RECONFIG
        }
        Op::Raw { opcode, body } => {
            e.0.extend_from_slice(body);
            *opcode
        }
    }
}

pub fn encode(o: &Op) -> (i32, Vec<u8>) {
    let mut e = Enc::new();
    let code = encode_into(o, &mut e);
    (code, e.0)
}

fn show_data(d: &[u8]) -> String {
    if d.iter().all(|&b| (0x20..0x7f).contains(&b)) {
        format!("{:?}", String::from_utf8_lossy(d))
    } else {
        let mut s = String::from("0x");
        for b in d {
            let _ = write!(s, "{b:02x}");
        }
        s
    }
}

fn show_opt_data(d: &Option<Vec<u8>>) -> String {
    match d {
        None => "null".into(),
        Some(d) => show_data(d),
    }
}

fn show_acls(a: &[Acl]) -> String {
    let v: Vec<String> = a
        .iter()
        .map(|a| format!("{}:{}:{}", a.scheme, a.id.escape_debug(), a.perms))
        .collect();
    format!("[{}]", v.join(","))
}

fn flag_name(f: i32) -> String {
    match f {
        0 => "P".into(),
        1 => "E".into(),
        2 => "PS".into(),
        3 => "ES".into(),
        4 => "C".into(),
        5 => "TTL".into(),
        6 => "TTLS".into(),
        x => format!("flags{x}"),
    }
}

/// Human-readable form of an op (identical on both sides).
pub fn describe(o: &Op) -> String {
    match o {
        Op::Create {
            opcode,
            path,
            data,
            acl,
            flags,
            ttl,
        } => {
            let name = match *opcode {
                op::CREATE => "create",
                op::CREATE2 => "create2",
                op::CREATE_CONTAINER => "createContainer",
                op::CREATE_TTL => "createTTL",
                _ => "create?",
            };
            let mut s = format!("{name} {path:?} {} {}", show_data(data), flag_name(*flags));
            if *acl != Acl::open() {
                s.push_str(&format!(" acl={}", show_acls(acl)));
            }
            if *opcode == op::CREATE_TTL {
                s.push_str(&format!(" ttl={ttl}"));
            }
            s
        }
        Op::Delete { path, version } => format!("delete {path:?} v={version}"),
        Op::Exists { path, watch } => format!("exists {path:?}{}", if *watch { " W" } else { "" }),
        Op::GetData { path, watch } => {
            format!("getData {path:?}{}", if *watch { " W" } else { "" })
        }
        Op::SetData {
            path,
            data,
            version,
        } => format!("setData {path:?} {} v={version}", show_data(data)),
        Op::GetAcl { path } => format!("getACL {path:?}"),
        Op::SetAcl { path, acl, version } => {
            format!("setACL {path:?} {} v={version}", show_acls(acl))
        }
        Op::GetChildren { path, watch } => {
            format!("getChildren {path:?}{}", if *watch { " W" } else { "" })
        }
        Op::GetChildren2 { path, watch } => {
            format!("getChildren2 {path:?}{}", if *watch { " W" } else { "" })
        }
        Op::Sync { path } => format!("sync {path:?}"),
        Op::Check { path, version } => format!("check {path:?} v={version}"),
        Op::Multi(ops) => {
            let v: Vec<String> = ops.iter().map(describe).collect();
            format!("multi[{}]", v.join("; "))
        }
        Op::MultiRead(ops) => {
            let v: Vec<String> = ops.iter().map(describe).collect();
            format!("multiRead[{}]", v.join("; "))
        }
        Op::GetAllChildrenNumber { path } => format!("getAllChildrenNumber {path:?}"),
        Op::GetEphemerals { prefix } => format!("getEphemerals {prefix:?}"),
        Op::AddWatch { path, mode } => format!(
            "addWatch {path:?} {}",
            if *mode == 1 {
                "PERSISTENT_RECURSIVE"
            } else {
                "PERSISTENT"
            }
        ),
        Op::RemoveWatches { path, typ } => format!("removeWatches {path:?} type={typ}"),
        Op::CheckWatches { path, typ } => format!("checkWatches {path:?} type={typ}"),
        Op::SetWatches {
            rel_zxid,
            data,
            exist,
            child,
            persistent,
        } => {
            let rel = match rel_zxid {
                None => "last-seen".to_string(),
                Some(z) => z.to_string(),
            };
            let mut s = format!(
                "setWatches{} rel={rel} data={data:?} exist={exist:?} child={child:?}",
                if persistent.is_some() { "2" } else { "" }
            );
            if let Some((p, r)) = persistent {
                s.push_str(&format!(" persistent={p:?} recursive={r:?}"));
            }
            s
        }
        Op::WhoAmI => "whoAmI".into(),
        Op::AddAuth { scheme, auth } => format!("addAuth {scheme} {}", show_data(auth)),
        Op::Reconfig => "reconfig".into(),
        Op::Raw { opcode, body } => format!("raw op={opcode} body={}", show_data(body)),
    }
}

/// What scripts and the random generator need to know about a result.
#[derive(Clone, Debug, Default)]
pub struct Parsed {
    /// None: transport failure (timeout / connection closed).
    pub err: Option<i32>,
    pub path: Option<String>,
    pub stat: Option<Stat>,
    pub children: Vec<String>,
    /// Per sub-op (type, err, created path) of a multi.
    pub subs: Vec<(i32, i32, Option<String>)>,
}

impl Parsed {
    pub fn ok(&self) -> bool {
        self.err == Some(0)
    }
}

fn strict_multi_create() -> bool {
    std::env::var("RK_DIFF_STRICT_MULTI").is_ok_and(|v| v == "1")
}

/// Parses the body of `opcode` and renders it; returns (text, parsed, the
/// zxid the header must carry for a successful write with a stat).
fn render_body(
    opcode: i32,
    d: &mut Dec,
    norm: &mut Norm,
    p: &mut Parsed,
    expect: &mut Option<i64>,
) -> Result<String, String> {
    let mut s = String::new();
    match opcode {
        op::CREATE => {
            let path = d.str()?;
            s = format!("path={path:?}");
            p.path = Some(path);
        }
        op::CREATE2 | op::CREATE_CONTAINER | op::CREATE_TTL => {
            let path = d.str()?;
            let st = d.stat()?;
            expect.get_or_insert(st.czxid);
            s = format!("path={path:?} stat={}", norm.stat(&st));
            p.path = Some(path);
            p.stat = Some(st);
        }
        op::EXISTS | op::SET_ACL => {
            let st = d.stat()?;
            s = format!("stat={}", norm.stat(&st));
            p.stat = Some(st);
        }
        op::SET_DATA => {
            let st = d.stat()?;
            expect.get_or_insert(st.mzxid);
            s = format!("stat={}", norm.stat(&st));
            p.stat = Some(st);
        }
        op::GET_DATA => {
            let data = d.buf()?;
            let st = d.stat()?;
            s = format!("data={} stat={}", show_opt_data(&data), norm.stat(&st));
            p.stat = Some(st);
        }
        op::GET_ACL => {
            let acls = d.acls()?;
            let st = d.stat()?;
            s = format!("acl={} stat={}", show_acls(&acls), norm.stat(&st));
            p.stat = Some(st);
        }
        op::GET_CHILDREN => {
            let mut c = d.strs()?;
            c.sort();
            s = format!("children={c:?}");
            p.children = c;
        }
        op::GET_CHILDREN2 => {
            let mut c = d.strs()?;
            c.sort();
            let st = d.stat()?;
            s = format!("children={c:?} stat={}", norm.stat(&st));
            p.children = c;
            p.stat = Some(st);
        }
        op::SYNC => {
            s = format!("path={:?}", d.str()?);
        }
        op::DELETE | op::CHECK | op::REMOVE_WATCHES | op::CHECK_WATCHES => {}
        op::ADD_WATCH => {
            // ZooKeeper answers addWatch with an ErrorResponse body.
            s = format!("body-err={}", d.i32()?);
        }
        op::GET_ALL_CHILDREN_NUMBER => {
            s = format!("n={}", d.i32()?);
        }
        op::GET_EPHEMERALS => {
            let mut c = d.strs()?;
            c.sort();
            s = format!("ephemerals={c:?}");
            p.children = c;
        }
        op::WHO_AM_I => {
            let n = d.i32()?;
            let mut v = Vec::new();
            for _ in 0..n.max(0) {
                v.push(format!("{}:{}", d.str()?, d.str()?));
            }
            s = format!("clientInfo={v:?}");
        }
        op::RECONFIG => {
            let data = d.buf()?;
            let st = d.stat()?;
            s = format!("data={} stat={}", show_opt_data(&data), norm.stat(&st));
        }
        op::MULTI | op::MULTI_READ => {
            let mut parts = Vec::new();
            loop {
                let typ = d.i32()?;
                let done = d.bool()?;
                let err = d.i32()?;
                if done {
                    if typ != -1 || err != -1 {
                        parts.push(format!("(end-header type={typ} err={err})"));
                    }
                    break;
                }
                if typ == op::ERROR {
                    let e = d.i32()?;
                    parts.push(format!("error({})", wire::err_name(e)));
                    p.subs.push((typ, e, None));
                    continue;
                }
                let mut sp = Parsed::default();
                let is_create = matches!(
                    typ,
                    op::CREATE | op::CREATE2 | op::CREATE_CONTAINER | op::CREATE_TTL
                );
                if is_create && !strict_multi_create() {
                    // ZooKeeper 3.8.0 answers create2/ephemeral creates inside
                    // a multi as plain `create` (path, no stat; fixed in
                    // 3.8.2, ZOOKEEPER-4026) but containers with a stat: only
                    // the path is compared unless RK_DIFF_STRICT_MULTI=1.
                    let path = d.str()?;
                    if typ != op::CREATE {
                        d.stat()?;
                    }
                    parts.push(format!("create(path={path:?})"));
                    p.subs.push((typ, 0, Some(path)));
                    continue;
                }
                let body = render_body(typ, d, norm, &mut sp, expect)?;
                let name = match typ {
                    op::CREATE => "create",
                    op::CREATE2 => "create2",
                    op::CREATE_CONTAINER => "createContainer",
                    op::CREATE_TTL => "createTTL",
                    op::DELETE => "delete",
                    op::SET_DATA => "setData",
                    op::CHECK => "check",
                    op::GET_DATA => "getData",
                    op::GET_CHILDREN => "getChildren",
                    _ => "?",
                };
                let hdr_err = if err != 0 && err != -1 {
                    format!("(hdr-err {err})")
                } else {
                    String::new()
                };
                parts.push(format!("{name}{hdr_err}({body})"));
                p.subs.push((typ, 0, sp.path));
            }
            s = format!("results=[{}]", parts.join(", "));
        }
        _ => {
            if !d.is_empty() {
                s = format!("body={}", show_data(d.b));
                d.b = &[];
            }
        }
    }
    Ok(s)
}

/// Renders a reply; `who` is the session role (for header zxid checks).
pub fn render(
    opcode: i32,
    who: &str,
    r: &Result<Reply, CallErr>,
    norm: &mut Norm,
) -> (String, Parsed) {
    let mut p = Parsed::default();
    let r = match r {
        Err(e) => return (format!("!{e}"), p),
        Ok(r) => r,
    };
    p.err = Some(r.err);
    let mut out = wire::err_name(r.err);
    let mut expect = None;
    if !r.body.is_empty() {
        let mut d = Dec::new(&r.body);
        match render_body(opcode, &mut d, norm, &mut p, &mut expect) {
            Ok(s) => {
                if !s.is_empty() {
                    out.push(' ');
                    out.push_str(&s);
                }
                if !d.is_empty() {
                    let _ = write!(out, " (+{} trailing bytes)", d.b.len());
                }
            }
            Err(e) => {
                let _ = write!(out, " (undecodable body: {e}: {})", show_data(&r.body));
            }
        }
    }
    if r.err != 0 {
        expect = None;
    }
    // ZooKeeper answers auth packets and unknown opcodes with a header zxid
    // that is not the last processed zxid; do not check those.
    if opcode != op::AUTH && r.err != -6 {
        out.push_str(&norm.hdr_zxid(who, r.zxid, expect));
    }
    (out, p)
}

pub fn render_event(norm: &mut Norm, who: &str, e: &Event) -> String {
    format!(
        "EVENT {who}: {} {:?} state={} zxid={}",
        wire::event_name(e.typ),
        e.path,
        e.state,
        norm.event_zxid(e.zxid)
    )
}

pub struct Session {
    pub name: String,
    pub conn: Conn,
    /// Render the next batch of notifications sorted: ZooKeeper deletes a
    /// closed session's ephemerals in Java HashSet order, so the order of
    /// the events of one closeSession is not part of the contract.
    pub sort_next: bool,
}

/// Drives named sessions against one server and records a transcript.
pub struct Runner {
    pub addr: String,
    pub norm: Norm,
    pub out: Vec<String>,
    pub sessions: Vec<Session>,
    /// Sessions ended with closeSession (kept to try re-attaching).
    pub closed: Vec<Session>,
    /// Prefix for transcript lines (e.g. the op index).
    pub tag: String,
    pub timeout_ms: i32,
}

impl Runner {
    pub fn new(addr: &str) -> Runner {
        Runner {
            addr: addr.to_string(),
            norm: Norm::new(),
            out: Vec::new(),
            sessions: Vec::new(),
            closed: Vec::new(),
            tag: String::new(),
            timeout_ms: 30_000,
        }
    }

    fn line(&mut self, s: String) {
        if self.tag.is_empty() {
            self.out.push(s);
        } else {
            self.out.push(format!("{} {s}", self.tag));
        }
    }

    pub fn note(&mut self, s: impl Into<String>) {
        let s = s.into();
        self.line(format!("-- {s}"));
    }

    /// Opens (or re-opens) session `name`.
    pub fn open(&mut self, name: &str) {
        self.sessions.retain(|s| s.name != name);
        match Conn::connect(&self.addr, self.timeout_ms) {
            Ok(c) => {
                self.norm.register_session(c.session_id, name);
                self.line(format!("{name}: connect => OK"));
                self.sessions.push(Session {
                    name: name.to_string(),
                    conn: c,
                    sort_next: false,
                });
            }
            Err(e) => self.line(format!("{name}: connect => !{e}")),
        }
    }

    /// Opens session `name` over a connection from the local address `src`.
    pub fn open_from(&mut self, name: &str, src: std::net::Ipv4Addr) {
        self.sessions.retain(|s| s.name != name);
        match Conn::connect_from(&self.addr, src, self.timeout_ms) {
            Ok(c) => {
                self.norm.register_session(c.session_id, name);
                self.line(format!("{name}: connect from {src} => OK"));
                self.sessions.push(Session {
                    name: name.to_string(),
                    conn: c,
                    sort_next: false,
                });
            }
            Err(e) => self.line(format!("{name}: connect from {src} => !{e}")),
        }
    }

    /// Starts a fresh normalizer (zxid and time orders), keeping the open
    /// sessions' names: lets the transcript of one part of a long script
    /// be compared on its own.
    pub fn reset_norm(&mut self) {
        self.norm = Norm::new();
        for s in &self.sessions {
            self.norm.register_session(s.conn.session_id, &s.name);
        }
    }

    fn idx(&self, name: &str) -> Option<usize> {
        self.sessions.iter().position(|s| s.name == name)
    }

    pub fn session_id(&self, name: &str) -> Option<i64> {
        self.idx(name).map(|i| self.sessions[i].conn.session_id)
    }

    fn flush_events(&mut self, i: usize) {
        let name = self.sessions[i].name.clone();
        let evs = self.sessions[i].conn.take_events();
        let sort = std::mem::take(&mut self.sessions[i].sort_next);
        let mut lines: Vec<String> = evs
            .iter()
            .map(|e| render_event(&mut self.norm, &name, e))
            .collect();
        if sort {
            lines.sort();
            for l in &mut lines {
                l.push_str(" (order-free)");
            }
        }
        for l in lines {
            self.line(l);
        }
    }

    /// Runs `o` on session `who`; records events received before the reply,
    /// then the op and its normalized result.
    pub fn run(&mut self, who: &str, o: &Op) -> Parsed {
        let Some(i) = self.idx(who) else {
            self.line(format!("{who}: {} => !NO-SESSION", describe(o)));
            return Parsed::default();
        };
        let orig = o;
        let o = match o {
            Op::SetWatches {
                rel_zxid: None,
                data,
                exist,
                child,
                persistent,
            } => Op::SetWatches {
                rel_zxid: Some(self.sessions[i].conn.last_zxid),
                data: data.clone(),
                exist: exist.clone(),
                child: child.clone(),
                persistent: persistent.clone(),
            },
            o => o.clone(),
        };
        let (code, body) = encode(&o);
        let r = self.sessions[i].conn.call(code, &body);
        self.flush_events(i);
        let (text, p) = render(code, who, &r, &mut self.norm);
        // describe the op as given (a side's own zxid is not comparable)
        self.line(format!("{who}: {} => {text}", describe(orig)));
        p
    }

    /// Drops the TCP connection of `who` without closing its session.
    pub fn disconnect(&mut self, who: &str) {
        if let Some(i) = self.idx(who) {
            self.sessions[i].conn.disconnect();
            self.line(format!("{who}: (TCP connection dropped)"));
        }
    }

    /// Re-attaches `who`'s session over a new TCP connection.
    pub fn reconnect(&mut self, who: &str) {
        let Some(i) = self.idx(who) else {
            return;
        };
        match self.sessions[i].conn.reconnect(&self.addr) {
            Ok(c) => {
                self.sessions[i].conn = c;
                self.line(format!("{who}: reconnect => OK"));
            }
            Err(e) => self.line(format!("{who}: reconnect => !{e}")),
        }
    }

    /// Tries to re-attach to the closed session `who`.
    pub fn reconnect_closed(&mut self, who: &str) {
        let Some(s) = self.closed.iter().rev().find(|s| s.name == who) else {
            return;
        };
        match s.conn.reconnect(&self.addr) {
            Ok(_) => self.line(format!("{who}: re-attach after closeSession => OK")),
            Err(e) => self.line(format!("{who}: re-attach after closeSession => !{e}")),
        }
    }

    /// Tries to attach to `who`'s session with a wrong password.
    pub fn reconnect_bad_password(&mut self, who: &str) {
        let Some(i) = self.idx(who) else {
            return;
        };
        let c = &self.sessions[i].conn;
        let r = Conn::connect_session(
            &self.addr,
            c.negotiated_timeout,
            c.session_id,
            &[7u8; 16],
            c.last_zxid,
        );
        match r {
            Ok(_) => self.line(format!("{who}: reconnect with a wrong password => OK")),
            Err(e) => self.line(format!("{who}: reconnect with a wrong password => !{e}")),
        }
    }

    /// `sync /` on `who`: every notification for transactions committed
    /// before it must have arrived before its reply.
    pub fn drain(&mut self, who: &str) {
        self.run(who, &sync("/"));
    }

    /// Closes the session (closeSession) and records trailing notifications.
    pub fn close(&mut self, who: &str) {
        let Some(i) = self.idx(who) else {
            return;
        };
        let (r, closed_by_server) = self.sessions[i].conn.close_session();
        // Notifications that arrive on a closing connection are recorded
        // after the close line, as one order-free batch.
        let (mut text, _) = render(op::CLOSE_SESSION, who, &r, &mut self.norm);
        if !closed_by_server {
            text.push_str(" !server-kept-the-connection-open");
        }
        self.line(format!("{who}: closeSession => {text}"));
        self.sessions[i].sort_next = true;
        self.flush_events(i);
        let gone = self.sessions.remove(i);
        self.closed.push(gone);
        // Collect, on every other open session, the notifications of this
        // closeSession (ephemeral deletions) as one order-free batch.
        let others: Vec<String> = self
            .sessions
            .iter()
            .filter(|s| s.conn.is_open())
            .map(|s| s.name.clone())
            .collect();
        for n in others {
            if let Some(j) = self.idx(&n) {
                self.sessions[j].sort_next = true;
            }
            self.drain(&n);
        }
    }

    /// Waits briefly for notifications on `who` that no request flushes (used
    /// only at the end of a case).
    pub fn settle(&mut self, who: &str, wait: Duration) {
        if let Some(i) = self.idx(who) {
            self.sessions[i].conn.poll_events(wait);
            self.flush_events(i);
        }
    }

    /// Pings every open session (nothing is recorded; notifications that
    /// arrive stay queued for the session's next recorded op).
    pub fn keepalive(&mut self) {
        for s in &mut self.sessions {
            if s.conn.is_open() {
                let _ = s.conn.ping();
            }
        }
    }

    /// Marks the next batch of notifications of `who` as order-free.
    pub fn unordered_next(&mut self, who: &str) {
        if let Some(i) = self.idx(who) {
            self.sessions[i].sort_next = true;
        }
    }

    pub fn close_all(&mut self) {
        let names: Vec<String> = self.sessions.iter().map(|s| s.name.clone()).collect();
        for n in names {
            self.close(&n);
        }
    }
}
