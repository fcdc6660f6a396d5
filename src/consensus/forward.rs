//! A follower's side of its clients' requests (ZooKeeper's
//! FollowerRequestProcessor and CommitProcessor): writes, syncs,
//! createSession and closeSession go to the leader as REQUEST packets;
//! their replies are made here when the leader's commit of the same
//! (session, cxid) is applied to this server's tree, or, for a sync, when
//! the leader's SYNC arrives (in order). Session touches are gathered for
//! the next PING reply. Everything pending is bounded: beyond
//! `PENDING_MAX` a request is answered at once with an error.

use std::collections::{BTreeMap, VecDeque};

use crate::fast_map::FastMap;
use crate::peer::session_packets::Forwarded;
use crate::proto::Request;
use crate::session::ConnRef;

/// Most requests waiting for the leader.
pub const PENDING_MAX: usize = 100_000;

/// Where a reply goes once the leader answered.
pub struct Origin {
    pub conn: ConnRef,
    pub request: Box<Request>,
}

pub struct PendingConnect {
    pub conn: ConnRef,
    pub timeout_ms: i32,
    pub has_read_only: bool,
}

/// A client reconnecting here with a session: waits for the leader's
/// REVALIDATE answer, then is connected (or refused) here.
pub struct PendingReconnect {
    pub conn: ConnRef,
    pub passwd: Vec<u8>,
    pub timeout_ms: i32,
    pub has_read_only: bool,
    pub can_be_read_only: bool,
}

pub struct PendingSync {
    pub conn: ConnRef,
    pub xid: i32,
    pub path: String,
}

#[derive(Default)]
pub struct Forwarder {
    writes: FastMap<(i64, i32), Origin>,
    syncs: VecDeque<PendingSync>,
    connects: FastMap<i64, PendingConnect>,
    reconnects: FastMap<i64, VecDeque<PendingReconnect>>,
    reconnects_waiting: usize,
    /// Sessions active since the last PING reply, with their timeouts.
    touches: BTreeMap<i64, i32>,
}

/// ZooDefs.OpCode.createSession.
pub const CREATE_SESSION: i32 = -10;

impl Forwarder {
    pub fn is_full(&self) -> bool {
        self.writes.len() + self.syncs.len() + self.connects.len() + self.reconnects_waiting
            >= PENDING_MAX
    }

    /// The REQUEST for a client's write (or closeSession); its reply waits
    /// for the commit of (session, cxid). `client_body`: the body as the
    /// client sent it, passed on unchanged when the shard kept it (else it
    /// is encoded again from `request`).
    pub fn write(
        &mut self,
        session_id: i64,
        cxid: i32,
        conn: ConnRef,
        request: Box<Request>,
        client_body: Option<Box<[u8]>>,
        auth: &[(String, String)],
    ) -> Forwarded {
        let body = client_body.map(Vec::from).unwrap_or_else(|| {
            let mut body = Vec::with_capacity(request_size_hint(&request));
            request.encode(&mut body);
            body
        });
        let f = Forwarded {
            session_id,
            cxid,
            op: request.opcode(),
            body,
            auth: auth.to_vec(),
        };
        self.writes
            .insert((session_id, cxid), Origin { conn, request });
        f
    }

    /// The REQUEST for a sync; answered when the leader's SYNC comes back.
    pub fn sync(
        &mut self,
        session_id: i64,
        cxid: i32,
        conn: ConnRef,
        request: &Request,
    ) -> Forwarded {
        let mut body = Vec::new();
        request.encode(&mut body);
        let path = match request {
            Request::Sync { path } => path.clone(),
            _ => String::new(),
        };
        self.syncs.push_back(PendingSync {
            conn,
            xid: cxid,
            path,
        });
        Forwarded {
            session_id,
            cxid,
            op: request.opcode(),
            body,
            auth: Vec::new(),
        }
    }

    /// The REQUEST for a new session this server minted `id` for.
    pub fn create_session(&mut self, id: i64, pending: PendingConnect) -> Forwarded {
        let body = pending.timeout_ms.to_be_bytes().to_vec();
        self.connects.insert(id, pending);
        Forwarded {
            session_id: id,
            cxid: 0,
            op: CREATE_SESSION,
            body,
            auth: Vec::new(),
        }
    }

    /// A reconnect waiting for the leader's REVALIDATE answer; true when
    /// it is the first for this session (a question must be sent).
    pub fn revalidate(&mut self, session_id: i64, pending: PendingReconnect) -> bool {
        let waiting = self.reconnects.entry(session_id).or_default();
        waiting.push_back(pending);
        self.reconnects_waiting += 1;
        waiting.len() == 1
    }

    /// The leader answered for `session_id`: every reconnect waiting on it.
    pub fn revalidated(&mut self, session_id: i64) -> Vec<PendingReconnect> {
        let done: Vec<_> = self
            .reconnects
            .remove(&session_id)
            .map(Vec::from)
            .unwrap_or_default();
        self.reconnects_waiting -= done.len();
        done
    }

    /// The request a committed txn answers, if this server forwarded it.
    pub fn committed(&mut self, session_id: i64, cxid: i32) -> Option<Origin> {
        self.writes.remove(&(session_id, cxid))
    }

    /// The connect a committed createSession answers.
    pub fn session_created(&mut self, id: i64) -> Option<PendingConnect> {
        self.connects.remove(&id)
    }

    /// The oldest sync, answered by the leader's SYNC.
    pub fn sync_answered(&mut self) -> Option<PendingSync> {
        self.syncs.pop_front()
    }

    pub fn touched(&mut self, id: i64, timeout_ms: i32) {
        self.touches.insert(id, timeout_ms);
    }

    /// The touch table for the next PING reply.
    pub fn take_touches(&mut self) -> Vec<(i64, i32)> {
        std::mem::take(&mut self.touches).into_iter().collect()
    }

    /// The leader is gone: connects still waiting are to be refused (the
    /// connections of pending writes and syncs are closed with the role).
    pub fn abandon(&mut self) -> Vec<PendingConnect> {
        self.writes.clear();
        self.syncs.clear();
        self.touches.clear();
        self.reconnects_waiting = 0;
        let reconnects = self
            .reconnects
            .drain()
            .flat_map(|(_, w)| w)
            .map(|r| PendingConnect {
                conn: r.conn,
                timeout_ms: r.timeout_ms,
                has_read_only: r.has_read_only,
            });
        self.connects
            .drain()
            .map(|(_, c)| c)
            .chain(reconnects)
            .collect()
    }
}

/// About how many bytes `request` encodes to.
fn request_size_hint(request: &Request) -> usize {
    use crate::proto::jute::record_size_hint as hint;
    match request {
        Request::Create {
            path, data, acl, ..
        } => hint(path, data.as_deref(), acl.len()),
        Request::SetData { path, data, .. } => hint(path, data.as_deref(), 0),
        _ => 128,
    }
}
