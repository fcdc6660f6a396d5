//! Records of zookeeper.jute that cross the wire, with encode and decode.

use super::codes::op;
use super::jute::{DecodeError, Reader, Writer};

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stat {
    pub czxid: i64,
    pub mzxid: i64,
    pub ctime: i64,
    pub mtime: i64,
    pub version: i32,
    pub cversion: i32,
    pub aversion: i32,
    pub ephemeral_owner: i64,
    pub data_length: i32,
    pub num_children: i32,
    pub pzxid: i64,
}

impl Stat {
    pub const ENCODED_LEN: usize = 68;

    /// Every stat a reply carries passes here: the 68 bytes are laid out
    /// in one array and appended once, not field by field.
    pub fn encode(&self, w: &mut Writer) {
        let mut b = [0u8; Self::ENCODED_LEN];
        b[0..8].copy_from_slice(&self.czxid.to_be_bytes());
        b[8..16].copy_from_slice(&self.mzxid.to_be_bytes());
        b[16..24].copy_from_slice(&self.ctime.to_be_bytes());
        b[24..32].copy_from_slice(&self.mtime.to_be_bytes());
        b[32..36].copy_from_slice(&self.version.to_be_bytes());
        b[36..40].copy_from_slice(&self.cversion.to_be_bytes());
        b[40..44].copy_from_slice(&self.aversion.to_be_bytes());
        b[44..52].copy_from_slice(&self.ephemeral_owner.to_be_bytes());
        b[52..56].copy_from_slice(&self.data_length.to_be_bytes());
        b[56..60].copy_from_slice(&self.num_children.to_be_bytes());
        b[60..68].copy_from_slice(&self.pzxid.to_be_bytes());
        w.buf.extend_from_slice(&b);
    }

    pub fn decode(r: &mut Reader) -> Result<Stat, DecodeError> {
        Ok(Stat {
            czxid: r.read_i64()?,
            mzxid: r.read_i64()?,
            ctime: r.read_i64()?,
            mtime: r.read_i64()?,
            version: r.read_i32()?,
            cversion: r.read_i32()?,
            aversion: r.read_i32()?,
            ephemeral_owner: r.read_i64()?,
            data_length: r.read_i32()?,
            num_children: r.read_i32()?,
            pzxid: r.read_i64()?,
        })
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Id {
    pub scheme: String,
    pub id: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Acl {
    pub perms: i32,
    pub id: Id,
}

impl Acl {
    pub fn world_all() -> Acl {
        Acl {
            perms: super::codes::perm::ALL,
            id: Id {
                scheme: "world".into(),
                id: "anyone".into(),
            },
        }
    }
}

pub fn encode_acls(w: &mut Writer, acls: &[Acl]) {
    w.i32(acls.len() as i32);
    for a in acls {
        w.i32(a.perms).string(&a.id.scheme).string(&a.id.id);
    }
}

pub fn decode_acls(r: &mut Reader) -> Result<Vec<Acl>, DecodeError> {
    let n = r.read_count(12)?;
    let mut v = Vec::with_capacity(n);
    for _ in 0..n {
        let perms = r.read_i32()?;
        let scheme = r.read_string()?;
        let id = r.read_string()?;
        v.push(Acl {
            perms,
            id: Id { scheme, id },
        });
    }
    Ok(v)
}

/// The handshake. Clients before 3.4 omit `read_only`; `has_read_only`
/// remembers that so the answer omits it too (ProtocolManager).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConnectRequest {
    pub protocol_version: i32,
    pub last_zxid_seen: i64,
    pub timeout_ms: i32,
    pub session_id: i64,
    pub passwd: Vec<u8>,
    pub read_only: bool,
    pub has_read_only: bool,
}

impl ConnectRequest {
    pub fn decode(body: &[u8]) -> Result<ConnectRequest, DecodeError> {
        let mut r = Reader::new(body);
        let mut c = ConnectRequest {
            protocol_version: r.read_i32()?,
            last_zxid_seen: r.read_i64()?,
            timeout_ms: r.read_i32()?,
            session_id: r.read_i64()?,
            passwd: r.read_buffer()?.to_vec(),
            read_only: false,
            has_read_only: false,
        };
        if r.remaining() >= 1 {
            c.read_only = r.read_bool()?;
            c.has_read_only = true;
        }
        Ok(c)
    }

    pub fn encode(&self, buf: &mut Vec<u8>) {
        let mut w = Writer::new(buf);
        w.i32(self.protocol_version)
            .i64(self.last_zxid_seen)
            .i32(self.timeout_ms)
            .i64(self.session_id)
            .buffer(&self.passwd);
        if self.has_read_only {
            w.bool(self.read_only);
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConnectResponse {
    pub protocol_version: i32,
    pub timeout_ms: i32,
    pub session_id: i64,
    pub passwd: Vec<u8>,
    pub read_only: bool,
    pub has_read_only: bool,
}

impl ConnectResponse {
    /// What ZooKeeper answers an unknown, expired or wrongly authenticated
    /// session before closing the connection.
    pub fn refused(has_read_only: bool) -> ConnectResponse {
        ConnectResponse {
            protocol_version: 0,
            timeout_ms: 0,
            session_id: 0,
            passwd: vec![0; 16],
            read_only: false,
            has_read_only,
        }
    }

    pub fn encode(&self, buf: &mut Vec<u8>) {
        let mut w = Writer::new(buf);
        w.i32(self.protocol_version)
            .i32(self.timeout_ms)
            .i64(self.session_id)
            .buffer(&self.passwd);
        if self.has_read_only {
            w.bool(self.read_only);
        }
    }

    pub fn decode(body: &[u8]) -> Result<ConnectResponse, DecodeError> {
        let mut r = Reader::new(body);
        let mut c = ConnectResponse {
            protocol_version: r.read_i32()?,
            timeout_ms: r.read_i32()?,
            session_id: r.read_i64()?,
            passwd: r.read_buffer()?.to_vec(),
            read_only: false,
            has_read_only: false,
        };
        if r.remaining() >= 1 {
            c.read_only = r.read_bool()?;
            c.has_read_only = true;
        }
        Ok(c)
    }
}

/// Paths a client asks to re-watch after reconnecting (SetWatches / SetWatches2).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SetWatches {
    pub relative_zxid: i64,
    pub data: Vec<String>,
    pub exist: Vec<String>,
    pub child: Vec<String>,
    pub persistent: Vec<String>,
    pub persistent_recursive: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Request {
    /// create (1), create2 (15), createContainer (19), createTTL (21).
    Create {
        opcode: i32,
        path: String,
        /// None: the client sent a null buffer (-1), kept as null data.
        data: Option<bytes::Bytes>,
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
        data: Option<bytes::Bytes>,
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
    Check {
        path: String,
        version: i32,
    },
    Multi(Vec<Request>),
    MultiRead(Vec<Request>),
    Reconfig {
        joining: String,
        leaving: String,
        new_members: String,
        cur_config_id: i64,
    },
    CheckWatches {
        path: String,
        watcher_type: i32,
    },
    RemoveWatches {
        path: String,
        watcher_type: i32,
    },
    Auth {
        auth_type: i32,
        scheme: String,
        auth: Vec<u8>,
    },
    /// Boxed: a reconnect's rare request, five vectors wide, would make
    /// every request (moved three or four times on its way) that large.
    SetWatches(Box<SetWatches>),
    SetWatches2(Box<SetWatches>),
    Sasl {
        token: Vec<u8>,
    },
    GetEphemerals {
        prefix: String,
    },
    GetAllChildrenNumber {
        path: String,
    },
    AddWatch {
        path: String,
        mode: i32,
    },
    WhoAmI,
    Ping,
    CloseSession,
}

impl Request {
    pub fn opcode(&self) -> i32 {
        match self {
            Request::Create { opcode, .. } => *opcode,
            Request::Delete { .. } => op::DELETE,
            Request::Exists { .. } => op::EXISTS,
            Request::GetData { .. } => op::GET_DATA,
            Request::SetData { .. } => op::SET_DATA,
            Request::GetAcl { .. } => op::GET_ACL,
            Request::SetAcl { .. } => op::SET_ACL,
            Request::GetChildren { .. } => op::GET_CHILDREN,
            Request::GetChildren2 { .. } => op::GET_CHILDREN2,
            Request::Sync { .. } => op::SYNC,
            Request::Check { .. } => op::CHECK,
            Request::Multi(_) => op::MULTI,
            Request::MultiRead(_) => op::MULTI_READ,
            Request::Reconfig { .. } => op::RECONFIG,
            Request::CheckWatches { .. } => op::CHECK_WATCHES,
            Request::RemoveWatches { .. } => op::REMOVE_WATCHES,
            Request::Auth { .. } => op::AUTH,
            Request::SetWatches(_) => op::SET_WATCHES,
            Request::SetWatches2(_) => op::SET_WATCHES2,
            Request::Sasl { .. } => op::SASL,
            Request::GetEphemerals { .. } => op::GET_EPHEMERALS,
            Request::GetAllChildrenNumber { .. } => op::GET_ALL_CHILDREN_NUMBER,
            Request::AddWatch { .. } => op::ADD_WATCH,
            Request::WhoAmI => op::WHO_AM_I,
            Request::Ping => op::PING,
            Request::CloseSession => op::CLOSE_SESSION,
        }
    }

    /// Whether requests of this opcode go through the consensus core.
    pub fn is_write_opcode(opcode: i32) -> bool {
        matches!(
            opcode,
            op::CREATE
                | op::CREATE2
                | op::CREATE_CONTAINER
                | op::CREATE_TTL
                | op::DELETE
                | op::SET_DATA
                | op::SET_ACL
                | op::CHECK
                | op::MULTI
                | op::RECONFIG
                | op::CLOSE_SESSION
        )
    }

    /// Writes that go through the consensus core (PrepRequestProcessor's set).
    pub fn is_write(&self) -> bool {
        matches!(
            self,
            Request::Create { .. }
                | Request::Delete { .. }
                | Request::SetData { .. }
                | Request::SetAcl { .. }
                | Request::Check { .. }
                | Request::Multi(_)
                | Request::Reconfig { .. }
                | Request::CloseSession
        )
    }

    /// The path a single-path request names, if any.
    pub fn path(&self) -> Option<&str> {
        match self {
            Request::Create { path, .. }
            | Request::Delete { path, .. }
            | Request::Exists { path, .. }
            | Request::GetData { path, .. }
            | Request::SetData { path, .. }
            | Request::GetAcl { path }
            | Request::SetAcl { path, .. }
            | Request::GetChildren { path, .. }
            | Request::GetChildren2 { path, .. }
            | Request::Sync { path }
            | Request::Check { path, .. }
            | Request::CheckWatches { path, .. }
            | Request::RemoveWatches { path, .. }
            | Request::GetAllChildrenNumber { path }
            | Request::AddWatch { path, .. } => Some(path),
            _ => None,
        }
    }

    /// Decodes a request body for `opcode`.
    pub fn decode(opcode: i32, body: &[u8]) -> Result<Request, DecodeError> {
        let mut r = Reader::new(body);
        let req = Self::decode_from(opcode, &mut r)?;
        Ok(req)
    }

    fn decode_from(opcode: i32, r: &mut Reader) -> Result<Request, DecodeError> {
        let path = |r: &mut Reader| r.read_string();
        Ok(match opcode {
            op::CREATE | op::CREATE2 | op::CREATE_CONTAINER | op::CREATE_TTL => {
                let path = r.read_string()?;
                let data = r.read_buffer_opt()?.map(bytes::Bytes::copy_from_slice);
                let acl = decode_acls(r)?;
                let flags = r.read_i32()?;
                let ttl = if opcode == op::CREATE_TTL {
                    r.read_i64()?
                } else {
                    -1
                };
                Request::Create {
                    opcode,
                    path,
                    data,
                    acl,
                    flags,
                    ttl,
                }
            }
            op::DELETE => Request::Delete {
                path: path(r)?,
                version: r.read_i32()?,
            },
            op::EXISTS => Request::Exists {
                path: path(r)?,
                watch: r.read_bool()?,
            },
            op::GET_DATA => Request::GetData {
                path: path(r)?,
                watch: r.read_bool()?,
            },
            op::SET_DATA => Request::SetData {
                path: path(r)?,
                data: r.read_buffer_opt()?.map(bytes::Bytes::copy_from_slice),
                version: r.read_i32()?,
            },
            op::GET_ACL => Request::GetAcl { path: path(r)? },
            op::SET_ACL => Request::SetAcl {
                path: path(r)?,
                acl: decode_acls(r)?,
                version: r.read_i32()?,
            },
            op::GET_CHILDREN => Request::GetChildren {
                path: path(r)?,
                watch: r.read_bool()?,
            },
            op::GET_CHILDREN2 => Request::GetChildren2 {
                path: path(r)?,
                watch: r.read_bool()?,
            },
            op::SYNC => Request::Sync { path: path(r)? },
            op::CHECK => Request::Check {
                path: path(r)?,
                version: r.read_i32()?,
            },
            op::MULTI | op::MULTI_READ => {
                let ops = decode_multi_ops(r, opcode == op::MULTI_READ)?;
                if opcode == op::MULTI {
                    Request::Multi(ops)
                } else {
                    Request::MultiRead(ops)
                }
            }
            op::RECONFIG => Request::Reconfig {
                joining: r.read_string()?,
                leaving: r.read_string()?,
                new_members: r.read_string()?,
                cur_config_id: r.read_i64()?,
            },
            op::CHECK_WATCHES => Request::CheckWatches {
                path: path(r)?,
                watcher_type: read_watcher_type(r)?,
            },
            op::REMOVE_WATCHES => Request::RemoveWatches {
                path: path(r)?,
                watcher_type: read_watcher_type(r)?,
            },
            op::AUTH => Request::Auth {
                auth_type: r.read_i32()?,
                scheme: r.read_string()?,
                auth: r.read_buffer()?.to_vec(),
            },
            op::SET_WATCHES => Request::SetWatches(Box::new(SetWatches {
                relative_zxid: r.read_i64()?,
                data: r.read_string_vec()?,
                exist: r.read_string_vec()?,
                child: r.read_string_vec()?,
                ..Default::default()
            })),
            op::SET_WATCHES2 => Request::SetWatches2(Box::new(SetWatches {
                relative_zxid: r.read_i64()?,
                data: r.read_string_vec()?,
                exist: r.read_string_vec()?,
                child: r.read_string_vec()?,
                persistent: r.read_string_vec()?,
                persistent_recursive: r.read_string_vec()?,
            })),
            op::SASL => Request::Sasl {
                token: r.read_buffer()?.to_vec(),
            },
            op::GET_EPHEMERALS => Request::GetEphemerals { prefix: path(r)? },
            op::GET_ALL_CHILDREN_NUMBER => Request::GetAllChildrenNumber { path: path(r)? },
            op::ADD_WATCH => Request::AddWatch {
                path: path(r)?,
                mode: match r.read_i32()? {
                    m @ 0..=1 => m,
                    _ => return Err(DecodeError::Invalid("unknown addWatch mode")),
                },
            },
            op::WHO_AM_I => Request::WhoAmI,
            op::PING => Request::Ping,
            op::CLOSE_SESSION => Request::CloseSession,
            other => return Err(DecodeError::UnknownOpcode(other)),
        })
    }

    /// Encodes the request body (without header), its strings in UTF-8
    /// (`Writer::utf8`): a follower passes a client's write on to the leader
    /// in this form.
    pub fn encode(&self, buf: &mut Vec<u8>) {
        let mut w = Writer::utf8(buf);
        match self {
            Request::Create {
                opcode,
                path,
                data,
                acl,
                flags,
                ttl,
            } => {
                w.string(path);
                w.opt_buffer(data.as_deref());
                encode_acls(&mut w, acl);
                w.i32(*flags);
                if *opcode == op::CREATE_TTL {
                    w.i64(*ttl);
                }
            }
            Request::Delete { path, version } | Request::Check { path, version } => {
                w.string(path).i32(*version);
            }
            Request::Exists { path, watch }
            | Request::GetData { path, watch }
            | Request::GetChildren { path, watch }
            | Request::GetChildren2 { path, watch } => {
                w.string(path).bool(*watch);
            }
            Request::SetData {
                path,
                data,
                version,
            } => {
                w.string(path);
                w.opt_buffer(data.as_deref()).i32(*version);
            }
            Request::GetAcl { path }
            | Request::Sync { path }
            | Request::GetAllChildrenNumber { path }
            | Request::GetEphemerals { prefix: path } => {
                w.string(path);
            }
            Request::SetAcl { path, acl, version } => {
                w.string(path);
                encode_acls(&mut w, acl);
                w.i32(*version);
            }
            Request::Multi(ops) | Request::MultiRead(ops) => {
                for o in ops {
                    w.i32(o.opcode()).bool(false).i32(-1);
                    o.encode(w.buf);
                }
                w.i32(-1).bool(true).i32(-1);
            }
            Request::Reconfig {
                joining,
                leaving,
                new_members,
                cur_config_id,
            } => {
                w.string(joining)
                    .string(leaving)
                    .string(new_members)
                    .i64(*cur_config_id);
            }
            Request::CheckWatches { path, watcher_type }
            | Request::RemoveWatches { path, watcher_type } => {
                w.string(path).i32(*watcher_type);
            }
            Request::Auth {
                auth_type,
                scheme,
                auth,
            } => {
                w.i32(*auth_type).string(scheme).buffer(auth);
            }
            Request::SetWatches(s) | Request::SetWatches2(s) => {
                w.i64(s.relative_zxid)
                    .string_vec(&s.data)
                    .string_vec(&s.exist)
                    .string_vec(&s.child);
                if matches!(self, Request::SetWatches2(_)) {
                    w.string_vec(&s.persistent)
                        .string_vec(&s.persistent_recursive);
                }
            }
            Request::Sasl { token } => {
                w.buffer(token);
            }
            Request::AddWatch { path, mode } => {
                w.string(path).i32(*mode);
            }
            Request::WhoAmI | Request::Ping | Request::CloseSession => {}
        }
    }
}

/// WatcherType.fromInt (3.8): Children(1), Data(2), Any(3); anything
/// else fails to deserialize (MARSHALLINGERROR).
fn read_watcher_type(r: &mut Reader) -> Result<i32, DecodeError> {
    match r.read_i32()? {
        t @ 1..=3 => Ok(t),
        _ => Err(DecodeError::Invalid("unknown watcher type")),
    }
}

/// MultiOperationRecord: multi takes only writes, multiRead only
/// getData/getChildren; any other op type is a marshalling error.
fn decode_multi_ops(r: &mut Reader, read_only: bool) -> Result<Vec<Request>, DecodeError> {
    let mut ops = Vec::new();
    loop {
        let opcode = r.read_i32()?;
        let done = r.read_bool()?;
        let _err = r.read_i32()?;
        if done {
            return Ok(ops);
        }
        let allowed = if read_only {
            matches!(opcode, op::GET_DATA | op::GET_CHILDREN)
        } else {
            matches!(
                opcode,
                op::CREATE
                    | op::CREATE2
                    | op::CREATE_TTL
                    | op::CREATE_CONTAINER
                    | op::DELETE
                    | op::SET_DATA
                    | op::CHECK
            )
        };
        if !allowed {
            return Err(DecodeError::Invalid("invalid type of op in multi"));
        }
        let op = Request::decode_from(opcode, r)?;
        ops.push(if read_only {
            op
        } else {
            multi_create_as_zookeeper(op)?
        });
    }
}

/// MultiOperationRecord (3.8.0) rebuilds each create as an Op whose type
/// follows its flags (Op.create: CreateMode.fromFlag with PERSISTENT for
/// flags no mode has): createTTL without TTL flags becomes a plain create
/// (its ttl ignored); every non-TTL, non-container create answers as a
/// plain create (path only) inside multi; unknown flags stay, so that prep
/// fails that op with BADARGUMENTS (measured on 3.8.0: the multi answers
/// OK with the op's error, not a marshalling error).
fn multi_create_as_zookeeper(op: Request) -> Result<Request, DecodeError> {
    let Request::Create {
        opcode,
        path,
        data,
        acl,
        flags,
        ttl,
    } = op
    else {
        return Ok(op);
    };
    let mode = super::codes::CreateMode::from_flags(flags);
    let (opcode, ttl) = match mode {
        Some(m) if m.ttl => (
            op::CREATE_TTL,
            if opcode == op::CREATE_TTL { ttl } else { -1 },
        ),
        Some(m) if m.container => (op::CREATE_CONTAINER, -1),
        _ => (op::CREATE, -1),
    };
    Ok(Request::Create {
        opcode,
        path,
        data,
        acl,
        flags,
        ttl,
    })
}

/// The result of one successful operation: the body that follows a
/// ReplyHeader with err 0.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Response {
    Empty,
    Create {
        path: String,
    },
    Create2 {
        path: String,
        stat: Stat,
    },
    Stat(Stat),
    GetData {
        data: Option<bytes::Bytes>,
        stat: Stat,
    },
    GetAcl {
        acl: Vec<Acl>,
        stat: Stat,
    },
    Children(Vec<String>),
    Children2 {
        children: Vec<String>,
        stat: Stat,
    },
    Path(String),
    /// One result per op: Ok(response) or Err(code) (ErrorResponse).
    Multi(Vec<(i32, Result<Response, i32>)>),
    Number(i32),
    Strings(Vec<String>),
    /// addWatch answers with an ErrorResponse{err=0} body.
    ErrorBody(i32),
    WhoAmI(Vec<(String, String)>),
    /// SetSASLResponse{token}; the token may be null.
    Sasl(Option<Vec<u8>>),
}

impl Response {
    pub fn encode(&self, buf: &mut Vec<u8>) {
        let mut w = Writer::new(buf);
        match self {
            Response::Empty => {}
            Response::Create { path } | Response::Path(path) => {
                w.string(path);
            }
            Response::Create2 { path, stat } => {
                w.string(path);
                stat.encode(&mut w);
            }
            Response::Stat(stat) => stat.encode(&mut w),
            Response::GetData { data, stat } => {
                w.opt_buffer(data.as_deref());
                stat.encode(&mut w);
            }
            Response::GetAcl { acl, stat } => {
                encode_acls(&mut w, acl);
                stat.encode(&mut w);
            }
            Response::Children(c) | Response::Strings(c) => {
                w.string_vec(c);
            }
            Response::Children2 { children, stat } => {
                w.string_vec(children);
                stat.encode(&mut w);
            }
            Response::Multi(results) => {
                for (opcode, res) in results {
                    match res {
                        Ok(body) => {
                            w.i32(*opcode).bool(false).i32(0);
                            body.encode(w.buf);
                        }
                        Err(code) => {
                            w.i32(op::ERROR).bool(false).i32(*code).i32(*code);
                        }
                    }
                }
                w.i32(-1).bool(true).i32(-1);
            }
            Response::Number(n) | Response::ErrorBody(n) => {
                w.i32(*n);
            }
            Response::WhoAmI(ids) => {
                w.i32(ids.len() as i32);
                for (scheme, user) in ids {
                    w.string(scheme).string(user);
                }
            }
            Response::Sasl(token) => {
                w.opt_buffer(token.as_deref());
            }
        }
    }

    /// Decodes a reply body for a request of `opcode` (the client side:
    /// used by the load generator and the tests).
    pub fn decode(opcode: i32, body: &[u8]) -> Result<Response, DecodeError> {
        let mut r = Reader::new(body);
        Self::decode_from(opcode, &mut r)
    }

    fn decode_from(opcode: i32, r: &mut Reader) -> Result<Response, DecodeError> {
        Ok(match opcode {
            op::CREATE => Response::Create {
                path: r.read_string()?,
            },
            op::CREATE2 | op::CREATE_CONTAINER | op::CREATE_TTL => Response::Create2 {
                path: r.read_string()?,
                stat: Stat::decode(r)?,
            },
            op::EXISTS | op::SET_DATA | op::SET_ACL | op::CHECK => {
                if r.remaining() == 0 {
                    Response::Empty
                } else {
                    Response::Stat(Stat::decode(r)?)
                }
            }
            op::GET_DATA => Response::GetData {
                data: r.read_buffer_opt()?.map(bytes::Bytes::copy_from_slice),
                stat: Stat::decode(r)?,
            },
            op::GET_ACL => Response::GetAcl {
                acl: decode_acls(r)?,
                stat: Stat::decode(r)?,
            },
            op::GET_CHILDREN => Response::Children(r.read_string_vec()?),
            op::GET_CHILDREN2 => Response::Children2 {
                children: r.read_string_vec()?,
                stat: Stat::decode(r)?,
            },
            op::SYNC => Response::Path(r.read_string()?),
            op::GET_EPHEMERALS => Response::Strings(r.read_string_vec()?),
            op::GET_ALL_CHILDREN_NUMBER => Response::Number(r.read_i32()?),
            op::ADD_WATCH => Response::ErrorBody(r.read_i32()?),
            op::WHO_AM_I => {
                let n = r.read_count(8)?;
                let mut v = Vec::with_capacity(n);
                for _ in 0..n {
                    v.push((r.read_string()?, r.read_string()?));
                }
                Response::WhoAmI(v)
            }
            op::SASL => Response::Sasl(r.read_buffer_opt()?.map(<[u8]>::to_vec)),
            op::MULTI | op::MULTI_READ => {
                let mut results = Vec::new();
                loop {
                    let t = r.read_i32()?;
                    let done = r.read_bool()?;
                    let err = r.read_i32()?;
                    if done {
                        break;
                    }
                    if t == op::ERROR {
                        let code = r.read_i32()?;
                        let _ = err; // the header repeats the code
                        results.push((t, Err(code)));
                    } else if t == op::DELETE || t == op::CHECK {
                        results.push((t, Ok(Response::Empty)));
                    } else {
                        results.push((t, Ok(Self::decode_from(t, r)?)));
                    }
                }
                Response::Multi(results)
            }
            _ => Response::Empty,
        })
    }
}

/// A watch notification (xid -1).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WatcherEvent {
    pub event_type: i32,
    pub state: i32,
    pub path: String,
}

impl WatcherEvent {
    pub fn encode(&self, buf: &mut Vec<u8>) {
        Writer::new(buf)
            .i32(self.event_type)
            .i32(self.state)
            .string(&self.path);
    }
}
