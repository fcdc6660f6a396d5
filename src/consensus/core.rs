//! The consensus core: the only writer of the tree. It drains requests from
//! every shard in batches, preps each into a txn (zxid order), appends the
//! batch to the txn log, waits until the log says it is durable, applies it
//! and fans the commits out to every shard. Standalone is an ensemble of one:
//! a txn is committed when the local log has it.

use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use crate::config::Config;
use crate::log::TxnLog;
use crate::proto::codes::{err, op};
use crate::proto::{ConnectResponse, Request, Response};
use crate::session::{password_for, ConnRef, SessionTracker};
use crate::tree::{Tree, Txn, TxnOp};

use super::messages::{Commit, Direct, Reply, ShardBatch, ToCore};
use super::prep::{prep, PrepContext};

/// Most requests prepped into one batch before it is logged and committed.
pub const BATCH_REQUESTS_MAX: usize = 1024;
/// Bound on live sessions.
pub const SESSIONS_MAX: usize = 1_000_000;

pub struct Core {
    /// The tree with every txn applied so far. In standalone mode prep and
    /// commit see the same tree: a batch is applied, logged and published
    /// before the next batch is prepped.
    tree: Tree,
    sessions: SessionTracker,
    log: TxnLog,
    next_zxid: i64,
    extended_types_enabled: bool,
    shard_count: usize,
    // Output of the batch being built.
    commits: Vec<Commit>,
    direct: Vec<Vec<Direct>>,
}

impl Core {
    pub fn new(config: &Config, shard_count: usize) -> Core {
        let tree = Tree::new();
        Core {
            next_zxid: tree.last_zxid() + 1,
            tree,
            sessions: SessionTracker::new(1, now_ms(), SESSIONS_MAX),
            log: TxnLog::new(),
            extended_types_enabled: config.extended_types_enabled,
            shard_count,
            commits: Vec::new(),
            direct: (0..shard_count).map(|_| Vec::new()).collect(),
        }
    }

    pub fn tree(&self) -> &Tree {
        &self.tree
    }

    /// Handles one request of the batch being built.
    pub fn handle(&mut self, msg: ToCore) {
        let now = Instant::now();
        match msg {
            ToCore::Write {
                conn,
                session_id,
                xid,
                request,
                ids,
            } => self.write(conn, session_id, xid, request, ids, now),
            ToCore::MalformedWrite {
                conn,
                session_id,
                xid,
            } => {
                let op = TxnOp::Error {
                    code: err::MARSHALLING_ERROR,
                };
                let reply = Reply {
                    conn,
                    xid,
                    err: err::MARSHALLING_ERROR,
                    body: None,
                };
                self.commit_txn(session_id, xid, op, None);
                if let Some(Commit::Txn { reply: r, .. }) = self.commits.last_mut() {
                    *r = Some(reply);
                }
            }
            ToCore::Connect {
                conn,
                session_id,
                passwd,
                timeout_ms,
                has_read_only,
            } => self.connect(conn, session_id, &passwd, timeout_ms, has_read_only, now),
            ToCore::Touch(ids) => {
                for id in ids {
                    self.sessions.touch(id, now);
                }
            }
            ToCore::Disconnected { conn, session_id } => {
                if let Some(s) = self.sessions.get_mut(session_id) {
                    if s.owner == Some(conn) {
                        s.owner = None;
                    }
                }
            }
        }
    }

    /// ContainerManager: deletes empty containers that once had children
    /// (or were never used for longer than the configured bound) and TTL
    /// nodes without children whose ttl passed since their last change,
    /// each as an ordinary delete txn, at most `max_deletions` per pass.
    pub fn reap(&mut self, max_deletions: usize, never_used_ms: u64) {
        let now = now_ms();
        let elapsed = |n: &crate::tree::Node| now.saturating_sub(n.mtime);
        let containers = self.tree.containers().filter(|p| {
            self.tree.get(p).is_some_and(|n| {
                n.children.is_empty()
                    && (n.cversion > 0 || (never_used_ms != 0 && elapsed(n) > never_used_ms as i64))
            })
        });
        let ttls = self.tree.ttl_nodes().filter(|p| {
            self.tree.get(p).is_some_and(|n| match n.kind() {
                crate::tree::NodeKind::Ttl(ttl) => {
                    n.children.is_empty() && ttl != 0 && elapsed(n) > ttl
                }
                _ => false,
            })
        });
        let doomed: Vec<_> = containers
            .chain(ttls)
            .take(max_deletions)
            .cloned()
            .collect();
        for path in doomed {
            tracing::debug!(%path, "reaping");
            self.commit_txn(0, 0, TxnOp::Delete { path }, None);
        }
    }

    /// Expires sessions whose timeout passed: one closeSession txn each.
    pub fn expire_sessions(&mut self) {
        for id in self.sessions.take_expired(Instant::now()) {
            tracing::debug!(session = format_args!("{id:#x}"), "session expired");
            let op = TxnOp::CloseSession {
                ephemerals: self.tree.ephemerals_of(id),
            };
            self.commit_txn(id, 0, op, None);
        }
    }

    fn write(
        &mut self,
        conn: ConnRef,
        session_id: i64,
        xid: i32,
        request: Request,
        ids: super::messages::AuthIds,
        now: Instant,
    ) {
        let reply_to = |err, body| Reply {
            conn,
            xid,
            err,
            body,
        };
        let live = self.sessions.get(session_id).is_some_and(|s| !s.closing);
        if !live {
            self.commits
                .push(Commit::Barrier(reply_to(err::SESSION_EXPIRED, None)));
            return;
        }
        self.sessions.touch(session_id, now);
        if let Request::Sync { path } = &request {
            let body = Response::Path(path.clone());
            self.commits.push(Commit::Barrier(reply_to(0, Some(body))));
            return;
        }
        if matches!(request, Request::CloseSession) {
            if let Some(s) = self.sessions.get_mut(session_id) {
                s.closing = true;
            }
        }
        let ctx = PrepContext {
            session_id,
            extended_types_enabled: self.extended_types_enabled,
            ids: &ids,
        };
        let op = prep(&self.tree, &ctx, &request);
        self.commit_txn(session_id, xid, op, Some((conn, request)));
    }

    fn connect(
        &mut self,
        conn: ConnRef,
        session_id: i64,
        passwd: &[u8],
        timeout_ms: i32,
        has_read_only: bool,
        now: Instant,
    ) {
        let response = if session_id == 0 {
            match self.sessions.next_session_id() {
                Some(id) => {
                    self.sessions.add(id, timeout_ms, Some(conn), now);
                    self.commit_txn(id, 0, TxnOp::CreateSession { timeout_ms }, None);
                    accepted(id, timeout_ms, has_read_only)
                }
                None => {
                    tracing::warn!("session limit {SESSIONS_MAX} reached: refusing a new session");
                    ConnectResponse::refused(has_read_only)
                }
            }
        } else {
            self.reconnect(conn, session_id, passwd, timeout_ms, has_read_only, now)
        };
        self.direct[conn.shard].push(Direct::Connected {
            conn: conn.conn,
            response,
        });
    }

    fn reconnect(
        &mut self,
        conn: ConnRef,
        session_id: i64,
        passwd: &[u8],
        timeout_ms: i32,
        has_read_only: bool,
        now: Instant,
    ) -> ConnectResponse {
        let valid = passwd == password_for(session_id);
        let Some(s) = self.sessions.get_mut(session_id).filter(|s| !s.closing) else {
            return ConnectResponse::refused(has_read_only);
        };
        // Like ZooKeeper, the session's current connection is closed before
        // the password is checked, so a wrong password also disconnects it.
        let old = if valid {
            s.owner.replace(conn)
        } else {
            s.owner.take()
        };
        if let Some(old) = old.filter(|o| *o != conn) {
            self.direct[old.shard].push(Direct::Close { conn: old.conn });
        }
        if !valid {
            return ConnectResponse::refused(has_read_only);
        }
        s.timeout_ms = timeout_ms;
        s.last_touch = now;
        accepted(session_id, timeout_ms, has_read_only)
    }

    /// Gives `op` the next zxid, appends it to the log, applies it and
    /// queues its commit for the shards.
    fn commit_txn(
        &mut self,
        session_id: i64,
        xid: i32,
        op: TxnOp,
        origin: Option<(ConnRef, Request)>,
    ) {
        let txn = Txn {
            zxid: self.next_zxid,
            time_ms: now_ms(),
            session_id,
            cxid: xid,
            op,
        };
        self.next_zxid += 1;
        self.log.append(&txn);
        // Multi results show each op's own effect, so they are read off a
        // scratch tree as the ops apply one by one.
        let multi_results = match (&txn.op, &origin) {
            (TxnOp::Multi(ops), Some((_, Request::Multi(requests)))) => {
                let mut scratch = self.tree.clone();
                let results: Vec<_> = ops
                    .iter()
                    .zip(requests)
                    .map(|(o, r)| {
                        scratch.apply_op(&txn, o, &mut Vec::new());
                        (r.opcode(), Ok(single_result(&scratch, o, r, true)))
                    })
                    .collect();
                Some(results)
            }
            _ => None,
        };
        let triggers = self.tree.apply(&txn);
        let closed_session = matches!(txn.op, TxnOp::CloseSession { .. }).then_some(session_id);
        if closed_session.is_some() {
            self.sessions.remove(session_id);
        }
        let reply = origin.map(|(conn, request)| {
            let (err, body) = match multi_results {
                Some(results) => (0, Some(Response::Multi(results))),
                None => result_of(&self.tree, &txn.op, &request),
            };
            Reply {
                conn,
                xid,
                err,
                body,
            }
        });
        self.commits.push(Commit::Txn {
            zxid: txn.zxid,
            tree: self.tree.clone(),
            triggers,
            reply,
            closed_session,
        });
    }

    /// Makes the batch durable and hands out what each shard must receive.
    /// Returns None for a shard with nothing to receive.
    pub async fn finish_batch(&mut self) -> Vec<Option<ShardBatch>> {
        self.log.sync().await;
        let commits: Arc<[Commit]> = std::mem::take(&mut self.commits).into();
        (0..self.shard_count)
            .map(|i| {
                let direct = std::mem::take(&mut self.direct[i]);
                if commits.is_empty() && direct.is_empty() {
                    None
                } else {
                    Some(ShardBatch {
                        commits: commits.clone(),
                        direct,
                    })
                }
            })
            .collect()
    }
}

fn accepted(session_id: i64, timeout_ms: i32, has_read_only: bool) -> ConnectResponse {
    ConnectResponse {
        protocol_version: 0,
        timeout_ms,
        session_id,
        passwd: password_for(session_id).to_vec(),
        read_only: false,
        has_read_only,
    }
}

/// The reply to a write, read off the tree after its txn was applied.
fn result_of(tree: &Tree, op: &TxnOp, request: &Request) -> (i32, Option<Response>) {
    match op {
        TxnOp::Error { code } => (*code, None),
        TxnOp::MultiError { codes } => {
            let results = codes.iter().map(|c| (op::ERROR, Err(*c))).collect();
            (0, Some(Response::Multi(results)))
        }
        other => (0, Some(single_result(tree, other, request, false))),
    }
}

fn single_result(tree: &Tree, op: &TxnOp, request: &Request, in_multi: bool) -> Response {
    let stat_of = |path: &str| tree.get(path).map(|n| n.stat()).unwrap_or_default();
    match (op, request) {
        (TxnOp::Create { path, .. }, Request::Create { opcode, .. }) => {
            if *opcode == crate::proto::codes::op::CREATE {
                Response::Create {
                    path: path.to_string(),
                }
            } else {
                Response::Create2 {
                    path: path.to_string(),
                    stat: stat_of(path),
                }
            }
        }
        (TxnOp::SetData { path, .. } | TxnOp::SetAcl { path, .. }, _) => {
            Response::Stat(stat_of(path))
        }
        (TxnOp::Check { path }, _) if !in_multi => Response::Stat(stat_of(path)),
        _ => Response::Empty,
    }
}

pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}
