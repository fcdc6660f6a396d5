//! A shard: one executor that owns client connections, their watches and a
//! read view of the tree. Reads are answered here; writes go to the
//! consensus core; commits come back in zxid order and are applied to the
//! view only after their watch events are queued (guarantee 3).

mod accept;
mod admin_server;
pub mod auth;
pub mod budget;
pub mod conn;
mod metrics;
pub mod reads;
mod secure;
pub mod visibility;

use std::cell::{Cell, RefCell};
use std::collections::HashSet;
use std::os::fd::{AsRawFd, FromRawFd, IntoRawFd, OwnedFd};
use std::rc::Rc;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::admin::four_letter::{self, Needs, TreeFacts, View};
use crate::admin::health::Health;
use crate::admin::javafmt;
use crate::admin::limits;
use crate::admin::mailbox::{self, Ask};
use crate::admin::metrics::latency::LatencyRecorder;
use crate::admin::metrics::MetricsSetup;
use crate::admin::report::{ConnInfo, SessionInfo, ShardCounts, ShardReport};
use crate::admin::stats::{op_name, totals, ShardStats};
use crate::config::Config;
use crate::consensus::core::apply_answering;
use crate::consensus::link::{LinkSender, ShardEnds};
use crate::consensus::messages::{AuthIds, Commit, Direct, Reply, ShardBatch, ToCore};
use crate::fast_map::{FastMap, FastSet};
use crate::proto::codes::{op, perm, state};
use crate::proto::{ConnectResponse, Request, WatcherEvent};
use crate::session::board::SessionBoard;
use crate::session::ConnRef;
use crate::socket::Socket;
use crate::tree::Tree;
use crate::uring::ClientRing;
use crate::watch::WatchTable;

use conn::{Conn, Pending};

pub struct Shard {
    pub id: usize,
    pub config: Arc<Config>,
    stats: Arc<[ShardStats]>,
    to_core: Rc<LinkSender<ToCore>>,
    /// The view reads are answered from. Shared with the core when it runs
    /// beside this shard alone (see `ShardBatch::shard_applies`).
    tree: Rc<RefCell<Tree>>,
    watches: RefCell<WatchTable>,
    conns: RefCell<FastMap<u64, Rc<Conn>>>,
    /// Sessions whose connection is on this shard.
    sessions: RefCell<FastMap<i64, u64>>,
    /// Sessions heard from since the last touch batch (at most one entry
    /// per session of this shard).
    touched: RefCell<FastSet<i64>>,
    /// Counts the touch batches sent: a connection marks the round its
    /// session went into `touched` in, and skips the set until the next.
    touch_round: Cell<u64>,
    next_conn: Cell<u64>,
    /// This shard's share of globalOutstandingLimit.
    outstanding_share: u64,
    /// Connections with requests in flight: the share is split evenly
    /// among them (see `fair_share`).
    busy_conns: Cell<u64>,
    /// Refused connections not yet logged (the log is rate limited, as
    /// ZooKeeper's acceptErrorLogger).
    refused_unlogged: Cell<u64>,
    refused_logged_at: Cell<Option<Instant>>,
    /// Request latency by operation, for the metrics endpoint.
    latency: LatencyRecorder,
    health: Arc<Health>,
    /// Reply bytes queued on all shards (`ringkeeper.replyBytesMax`).
    reply_budget: Arc<budget::ReplyBudget>,
    session_board: Arc<SessionBoard>,
    /// The client port's TLS, when configured.
    tls: Option<Arc<crate::tls::ClientTlsContext>>,
    handshakes: Rc<secure::HandshakeCount>,
    /// With more than one shard: the highest zxid any shard answered from
    /// (see [`visibility`]); None with one.
    answered: Option<Arc<visibility::AnsweredZxid>>,
    /// Connections whose front read waits for the view to reach a zxid
    /// (in the order they began to wait), and the least of those zxids
    /// (`i64::MAX` when none waits). At most one entry per connection: only
    /// a read with nothing pending before it waits here.
    view_waiters: RefCell<Vec<(u64, i64)>>,
    least_waited: Cell<i64>,
    /// The triggers of the txn being applied here (a txn the core left to
    /// this shard), kept between txns so that applying one allocates none.
    triggers: Cell<Vec<crate::tree::Trigger>>,
}

impl Shard {
    fn my_stats(&self) -> &ShardStats {
        &self.stats[self.id]
    }

    pub fn conn_ref(&self, conn: u64) -> ConnRef {
        ConnRef {
            shard: self.id,
            conn,
        }
    }

    pub fn last_zxid(&self) -> i64 {
        self.tree.borrow().last_zxid()
    }

    /// The state a read arriving now must see at least: what any shard
    /// has answered from (`visibility`; `i64::MIN` with one shard).
    fn read_needs(&self) -> i64 {
        self.answered.as_ref().map_or(i64::MIN, |a| a.needed())
    }

    /// The read at the front of `conn.pending` waits until the view reaches
    /// `need` (`answer_view_waiters`). A connection waits here at most once
    /// at a time: only its front read does, and it is taken off the list
    /// before that read is looked at again.
    fn wait_for_view(&self, conn: &Conn, need: i64) {
        debug_assert!(
            matches!(conn.pending.borrow().front(), Some(Pending::Read { needs, .. }) if *needs == need),
            "only the front read waits for the view"
        );
        self.view_waiters.borrow_mut().push((conn.id, need));
        self.least_waited.set(self.least_waited.get().min(need));
    }

    /// The view has reached `zxid`: answers the reads that waited for it
    /// (and what queued behind them, up to a write).
    fn answer_view_waiters(&self, zxid: i64, clock: &mut ReplyClock) {
        if self.least_waited.get() > zxid {
            return;
        }
        let ready: Vec<u64> = {
            let mut waiters = self.view_waiters.borrow_mut();
            let ready = waiters
                .iter()
                .filter(|(_, need)| *need <= zxid)
                .map(|(conn, _)| *conn)
                .collect();
            waiters.retain(|(_, need)| *need > zxid);
            let least = waiters.iter().map(|(_, need)| *need).min();
            self.least_waited.set(least.unwrap_or(i64::MAX));
            ready
        };
        for id in ready {
            let conn = self.conns.borrow().get(&id).cloned();
            if let Some(conn) = conn {
                self.answer_reads_in_front(&conn, clock);
            }
        }
    }

    /// A connection that has seen `zxid` arrived while this shard's view is
    /// behind it: waits (bounded) for the view when another shard has
    /// answered from it already. Says whether the view got there.
    pub(crate) async fn view_reaches(&self, zxid: i64) -> bool {
        const STEP: Duration = Duration::from_micros(200);
        const WAIT_MAX: Duration = Duration::from_secs(1);
        if self.answered.as_ref().is_none_or(|a| a.needed() < zxid) {
            return self.last_zxid() >= zxid;
        }
        let deadline = Instant::now() + WAIT_MAX;
        while self.last_zxid() < zxid && Instant::now() < deadline {
            glommio::timer::sleep(STEP).await;
        }
        self.last_zxid() >= zxid
    }

    /// Sends to the consensus core; says whether it had to wait (the
    /// channel was full: backpressure).
    pub async fn to_core(&self, msg: ToCore) -> bool {
        let mut send = std::pin::pin!(self.to_core.send(msg));
        let mut polls = 0u32;
        let sent = std::future::poll_fn(|cx| {
            polls += 1;
            std::future::Future::poll(send.as_mut(), cx)
        })
        .await;
        if sent.is_err() {
            tracing::error!(shard = self.id, "consensus core is gone");
        }
        polls > 1
    }

    fn add_conn(&self, conn: Rc<Conn>) {
        self.conns.borrow_mut().insert(conn.id, conn);
        self.my_stats().connections.fetch_add(1, Relaxed);
    }

    fn remove_conn(&self, conn: &Rc<Conn>) {
        self.conns.borrow_mut().remove(&conn.id);
        self.watches.borrow_mut().remove_conn(conn.id);
        self.my_stats().connections.fetch_sub(1, Relaxed);
        let outstanding = conn.pending.borrow().len() as u64;
        self.my_stats().outstanding.fetch_sub(outstanding, Relaxed);
        if outstanding > 0 {
            self.set_busy(-1);
        }
        let session_id = conn.session_id.get();
        let owned = self.sessions.borrow().get(&session_id) == Some(&conn.id);
        if owned {
            self.sessions.borrow_mut().remove(&session_id);
            let msg = ToCore::Disconnected {
                conn: self.conn_ref(conn.id),
                session_id,
            };
            // Cleanup must not wait on the core's queue: send from a task.
            let to_core = self.to_core.clone();
            glommio::spawn_local(async move {
                let _ = to_core.send(msg).await;
            })
            .detach();
        }
    }

    /// Whether the txn log failed: the server serves reads only.
    fn is_read_only(&self) -> bool {
        self.health.is_read_only()
    }

    fn note_connection_drop(&self) {
        self.my_stats().connection_drops.fetch_add(1, Relaxed);
    }

    /// This shard's connection with the most reply bytes queued (not one
    /// already closing), and how many.
    fn worst_queued(&self) -> (Option<Rc<Conn>>, usize) {
        let worst = self
            .conns
            .borrow()
            .values()
            .filter(|c| !c.is_closing())
            .max_by_key(|c| c.queued_bytes())
            .cloned();
        let bytes = worst.as_ref().map_or(0, |c| c.queued_bytes());
        (worst, bytes)
    }

    /// Over the reply budget: publishes this shard's connection with the
    /// most reply bytes queued and closes it if no other shard has one with
    /// more. (Connections with replies queued are not read meanwhile.)
    fn relieve_replies(&self) {
        let (worst, bytes) = self.worst_queued();
        if !self.reply_budget.publish_worst(self.id, bytes) || bytes == 0 {
            return;
        }
        let Some(c) = worst else { return };
        tracing::warn!(
            shard = self.id,
            conn = c.id,
            peer = %c.peer,
            session = format_args!("{:#x}", c.session_id.get()),
            queued_bytes = bytes,
            all_queued_bytes = self.reply_budget.queued_bytes(),
            reply_bytes_max = self.reply_budget.max_bytes(),
            "reply bytes queued for clients reached ringkeeper.replyBytesMax: \
             closing the connection with the most"
        );
        c.abort();
        // What this shard holds now, not 0: its other connections may hold
        // more than any other shard's.
        let (_, next) = self.worst_queued();
        self.reply_budget.publish_worst(self.id, next);
    }

    fn bind_session(&self, session_id: i64, conn: u64) {
        self.sessions.borrow_mut().insert(session_id, conn);
    }

    /// A request arrived on `conn` (packetReceived, touchSession).
    fn note_received(&self, conn: &Conn, opcode: i32, now: Instant) {
        self.my_stats().packets_received.fetch_add(1, Relaxed);
        conn.stats.last_heard.set(now);
        if opcode != crate::proto::codes::op::AUTH && opcode != crate::proto::codes::op::SASL {
            // ZooKeeper sets lastOp when it answers; here it is the last
            // request taken, which differs only while requests are in flight.
            conn.stats.last_op.set(op_name(opcode));
        }
        let session_id = conn.session_id.get();
        let round = self.touch_round.get();
        if session_id != 0 && conn.touched_round.get() != round {
            conn.touched_round.set(round);
            self.touched.borrow_mut().insert(session_id);
        }
    }

    /// The connect request is a packet as soon as its frame is read, even
    /// when it then fails to decode or is refused (ZooKeeper's
    /// packetReceived runs before readConnectRequest).
    fn note_connect_received(&self, conn: &Conn) {
        self.my_stats().packets_received.fetch_add(1, Relaxed);
        conn.received.set(conn.received.get() + 1);
    }

    /// The connect answer is a packet too; a session's creation is its
    /// first operation ("SESS", cxid 0), as in ZooKeeper.
    fn note_handshake(&self, conn: &Conn, response: &ConnectResponse, started: Instant) {
        let s = self.my_stats();
        s.packets_sent.fetch_add(1, Relaxed);
        conn.sent.set(conn.sent.get() + 1);
        if response.session_id != 0 {
            conn.stats.timeout_ms.set(response.timeout_ms);
            conn.stats.last_op.set("SESS");
            let now = Instant::now();
            let elapsed = now.saturating_duration_since(started);
            let ms = elapsed.as_millis() as u64;
            conn.stats.responded(0, self.last_zxid(), now, ms);
            s.record_latency_ms(ms);
            self.latency.record(op::CREATE_SESSION, elapsed);
        }
    }

    /// A request takes its place in `conn.pending` and counts as outstanding.
    fn push_pending(&self, conn: &Conn, p: Pending) {
        if conn.pending.borrow().is_empty() {
            self.set_busy(1);
        }
        conn.pending.borrow_mut().push_back(p);
        self.my_stats().outstanding.fetch_add(1, Relaxed);
    }

    /// globalOutstandingLimit, this shard's share: past it, connections
    /// with requests in flight are not read (ZooKeeper's shouldThrottle).
    fn over_outstanding_limit(&self) -> bool {
        self.my_stats().outstanding.load(Relaxed) > self.outstanding_share
    }

    /// The most requests one connection may have in flight while others
    /// have some too: the share split evenly among the busy connections
    /// (at least one each). Without it, which throttled connection read
    /// next depended on whose replies came first, an order that repeats
    /// batch after batch (a connection read early gets its requests into
    /// the next batch early, so its replies come back first again), and the
    /// connections at the back of it waited for most of a second.
    fn fair_share(&self) -> usize {
        (self.outstanding_share / self.busy_conns.get().max(1)).max(1) as usize
    }

    fn set_busy(&self, by: i64) {
        let busy = self.busy_conns.get() as i64 + by;
        assert!(busy >= 0, "busy connections below zero");
        self.busy_conns.set(busy as u64);
    }

    /// Says whether it had to wait for room on the core's channel.
    /// `body`: the request's body as it arrived, kept only while this
    /// server follows (it is passed on to the leader as it came).
    async fn send_write(&self, conn: &Conn, xid: i32, request: Request, body: &[u8]) -> bool {
        let ids: AuthIds = conn.ids.borrow().clone();
        let following = self.health.role() == crate::admin::health::ServerRole::Follower;
        self.to_core(ToCore::Write {
            conn: self.conn_ref(conn.id),
            session_id: conn.session_id.get(),
            xid,
            request: Box::new(request),
            ids,
            client_body: following.then(|| body.into()),
        })
        .await
    }

    /// Says whether it had to wait for room on the core's channel.
    async fn send_malformed_write(&self, conn: &Conn, xid: i32) -> bool {
        self.to_core(ToCore::MalformedWrite {
            conn: self.conn_ref(conn.id),
            session_id: conn.session_id.get(),
            xid,
        })
        .await
    }

    /// Answers a read from the current view; `now` gives the time it is
    /// answered, read once the reply is queued (a costly read, such as a
    /// large getChildren, counts its own work).
    pub(crate) fn answer_read(
        &self,
        conn: &Conn,
        xid: i32,
        request: &Request,
        started: Instant,
        now: impl FnOnce() -> Instant,
    ) {
        let tree = self.tree.borrow();
        let ids = conn.ids.borrow();
        let who = reads::Reader {
            conn: conn.id,
            session_id: conn.session_id.get(),
            ids: &ids,
        };
        let res = reads::serve(&tree, &mut self.watches.borrow_mut(), &who, request);
        for ev in &res.events {
            conn.notify(ev);
        }
        // FinalRequestProcessor answers a ping with PING_XID (-2), whatever
        // xid it came with (clients send -2).
        let reply_xid = if matches!(request, Request::Ping) {
            crate::proto::codes::xid::PING
        } else {
            xid
        };
        conn.reply_read(reply_xid, tree.last_zxid(), res.err, res.body.as_ref());
        self.finish_request(conn, xid, request.opcode(), started, now());
    }

    /// Counts a request answered at `now`.
    fn finish_request(&self, conn: &Conn, xid: i32, opcode: i32, started: Instant, now: Instant) {
        let zxid = self.last_zxid();
        self.finish_request_at(conn, xid, opcode, started, zxid, now);
    }

    /// As `finish_request`, answered at `zxid`.
    fn finish_request_at(
        &self,
        conn: &Conn,
        xid: i32,
        opcode: i32,
        started: Instant,
        zxid: i64,
        now: Instant,
    ) {
        let s = self.my_stats();
        let elapsed = now.saturating_duration_since(started);
        let ms = elapsed.as_millis() as u64;
        s.packets_sent.fetch_add(1, Relaxed);
        s.record_latency_ms(ms);
        self.latency.record(opcode, elapsed);
        conn.stats.responded(xid as i64, zxid, now, ms);
    }

    /// Applies one batch from the core, commit by commit.
    fn apply_batch(&self, batch: ShardBatch) {
        let mut clock = ReplyClock::new();
        // The view stays the previous batch's last tree while the commits'
        // events and replies go out, and becomes this batch's last tree at
        // the end. A read queued behind a write must be answered from the
        // tree right after that write (not older: it follows the write; not
        // newer: the events of later commits have not been sent): only then
        // is the view brought forward, by applying the batch's txns up to
        // that write. The core used to hand over a tree version per commit
        // instead, and keeping one per txn made every write copy its path
        // from the root (a third of the core's time at 1M znodes).
        // The batch is applied without yielding, so nothing else looks at
        // the view in between.
        let mut advanced = 0;
        let mut at_zxid = None;
        if let Some(answered) = &self.answered {
            // Before anything of the batch is answered here (replies and
            // watch events alike): reads on the other shards then wait for
            // it (`visibility`).
            let last = batch.commits.iter().rev().find_map(|c| match c {
                Commit::Txn { zxid, .. } => Some(*zxid),
                Commit::Barrier(_) => None,
            });
            if let Some(last) = last {
                answered.raise_to(last);
            }
        }
        for (i, commit) in batch.commits.iter().enumerate() {
            clock.tick();
            let done = &batch.commits[..=i];
            match commit {
                Commit::Txn {
                    zxid,
                    txn,
                    triggers,
                    reply,
                    closed_session,
                    request,
                } => {
                    at_zxid = Some(*zxid);
                    if batch.shard_applies {
                        // The tree is shared with the core, which left the
                        // txn to us: apply it in place, then fire its
                        // watches and answer it from the tree, as
                        // ZooKeeper's FinalRequestProcessor does.
                        let mut triggers = self.triggers.take();
                        let result = apply_answering(
                            &mut self.tree.borrow_mut(),
                            txn,
                            request.as_deref(),
                            false,
                            &mut triggers,
                        );
                        // The view is at this commit already: nothing for
                        // `deliver` to bring forward for reads behind it.
                        advanced = i + 1;
                        self.fire(&triggers, *zxid);
                        triggers.clear();
                        self.triggers.set(triggers);
                        if let Some(r) = reply {
                            let answered = result.map(|(err, body)| Reply {
                                conn: r.conn,
                                xid: r.xid,
                                err,
                                body,
                            });
                            self.deliver(
                                answered.as_ref().unwrap_or(r),
                                at_zxid,
                                done,
                                &mut advanced,
                                &mut clock,
                            );
                        }
                    } else {
                        self.fire(triggers, *zxid);
                        if let Some(r) = reply {
                            self.deliver(r, at_zxid, done, &mut advanced, &mut clock);
                        }
                    }
                    if let Some(sid) = closed_session {
                        self.close_session_conn(*sid);
                    }
                    if self.least_waited.get() <= *zxid {
                        // Reads that waited for this txn: answered from the
                        // view right after it, whose events went out.
                        self.advance_view(done, &mut advanced);
                        self.answer_view_waiters(*zxid, &mut clock);
                    }
                }
                Commit::Barrier(r) => self.deliver(r, at_zxid, done, &mut advanced, &mut clock),
            }
        }
        if let Some(tree) = batch.tree {
            // A tree with no commits replaces the view outright (an
            // ensemble member reloaded its data for a new role).
            debug_assert!(
                at_zxid.is_none() || Some(tree.last_zxid()) == at_zxid,
                "the batch's tree is after its last txn"
            );
            *self.tree.borrow_mut() = tree;
        }
        for d in batch.direct {
            match d {
                Direct::Connected { conn, response } => {
                    if let Some(c) = self.conns.borrow().get(&conn) {
                        c.connect_result(response);
                    }
                }
                Direct::Close { conn } => {
                    if let Some(c) = self.conns.borrow().get(&conn) {
                        tracing::debug!(conn, "session moved to another connection");
                        c.close();
                    }
                }
            }
        }
        self.answer_view_waiters(self.last_zxid(), &mut clock);
        let s = self.my_stats();
        let tree = self.tree.borrow();
        s.last_zxid.store(tree.last_zxid(), Relaxed);
        s.node_count.store(tree.node_count() as u64, Relaxed);
        s.watch_count
            .store(self.watches.borrow().count() as u64, Relaxed);
    }

    /// The watches `triggers` (of the txn `zxid`) fire.
    fn fire(&self, triggers: &[crate::tree::Trigger], zxid: i64) {
        if triggers.is_empty() {
            return;
        }
        let conns = self.conns.borrow();
        let mut watches = self.watches.borrow_mut();
        for t in triggers {
            let targets = watches.trigger(&t.path, t.event_type, zxid);
            if targets.is_empty() {
                continue;
            }
            let ev = WatcherEvent {
                event_type: t.event_type,
                state: state::SYNC_CONNECTED,
                path: t.path.to_string(),
            };
            for id in targets {
                if let Some(c) = conns.get(&id) {
                    // NIOServerCnxn.process: no READ, no event.
                    if crate::acl::allowed(&t.acl, &c.ids.borrow(), perm::READ) {
                        c.notify(&ev);
                    }
                }
            }
        }
    }

    /// Brings the view forward to the state after the last of `done`: the
    /// txns of `done[*advanced..]` are applied to it (each batch's txns at
    /// most once, in order, as the core applied them).
    fn advance_view(&self, done: &[Commit], advanced: &mut usize) {
        let mut view = self.tree.borrow_mut();
        for c in &done[*advanced..] {
            if let Commit::Txn { txn, .. } = c {
                view.apply(txn);
            }
        }
        *advanced = done.len();
    }

    /// The committed reply of a write (`at_zxid`: the zxid of the last txn
    /// so far in this batch, None when none came before it; `done`: the
    /// batch's commits up to this one): answer it, then every read that
    /// waited behind it, from the tree after `done`.
    fn deliver(
        &self,
        r: &Reply,
        at_zxid: Option<i64>,
        done: &[Commit],
        advanced: &mut usize,
        clock: &mut ReplyClock,
    ) {
        if r.conn.shard != self.id {
            return;
        }
        let Some(conn) = self.conns.borrow().get(&r.conn.conn).cloned() else {
            return;
        };
        let expected = match conn.pending.borrow().front() {
            Some(Pending::Write { xid, op, started }) if *xid == r.xid => Ok((*op, *started)),
            Some(Pending::Write { xid, .. }) => Err(Some(*xid)),
            _ => Err(None),
        };
        let (opcode, started) = match expected {
            Ok(front) => front,
            Err(_) if conn.is_closing() => return,
            Err(waiting) => {
                // Replies to forwarded requests come in the order the
                // leader's COMMITs and SYNCs came: out of this session's
                // order only if the leader sent them so. The session's
                // replies cannot be matched to its requests any more, so
                // its connection ends (after what is queued); the server
                // goes on.
                tracing::error!(
                    conn = conn.id,
                    session = format_args!("{:#x}", conn.session_id.get()),
                    reply_xid = r.xid,
                    waiting_write_xid = ?waiting,
                    "a committed reply out of the session's request order: closing its connection"
                );
                conn.close();
                return;
            }
        };
        conn.pending.borrow_mut().pop_front();
        self.my_stats().outstanding.fetch_sub(1, Relaxed);
        let zxid = at_zxid.unwrap_or_else(|| self.last_zxid());
        conn.reply(r.xid, zxid, r.err, r.body.as_ref());
        self.finish_request_at(&conn, r.xid, opcode, started, zxid, clock.now());
        let waiting = matches!(
            conn.pending.borrow().front(),
            Some(Pending::Read { .. } | Pending::Error { .. })
        );
        if waiting {
            self.advance_view(done, advanced);
        }
        self.answer_reads_in_front(&conn, clock);
    }

    /// Answers the reads (and errors) at the front of `conn.pending`, up to
    /// its next write, from the view as it is.
    fn answer_reads_in_front(&self, conn: &Conn, clock: &mut ReplyClock) {
        loop {
            if conn.is_closing() {
                // Closed while its reads waited (or by one of their
                // replies: over the reply budget, or its own cap): what is
                // left goes with the connection (`remove_conn`).
                break;
            }
            let next = {
                let mut p = conn.pending.borrow_mut();
                match p.front() {
                    Some(Pending::Read { needs, .. }) if *needs > self.last_zxid() => {
                        // It arrived after another shard answered from a
                        // state this view has not reached (`visibility`).
                        let needs = *needs;
                        drop(p);
                        self.wait_for_view(conn, needs);
                        return;
                    }
                    Some(Pending::Read { .. } | Pending::Error { .. }) => p.pop_front(),
                    _ => None,
                }
            };
            if next.is_some() {
                self.my_stats().outstanding.fetch_sub(1, Relaxed);
            }
            match next {
                Some(Pending::Read {
                    xid,
                    request,
                    started,
                    ..
                }) => self.answer_read(conn, xid, &request, started, || clock.now()),
                Some(Pending::Error {
                    xid,
                    op,
                    err,
                    started,
                }) => {
                    conn.reply(xid, self.last_zxid(), err, None);
                    self.finish_request(conn, xid, op, started, clock.now());
                }
                _ => break,
            }
        }
        if conn.pending.borrow().is_empty() {
            self.set_busy(-1);
        }
        conn.maybe_resume();
    }

    fn close_session_conn(&self, session_id: i64) {
        let Some(conn_id) = self.sessions.borrow_mut().remove(&session_id) else {
            return;
        };
        if let Some(c) = self.conns.borrow().get(&conn_id) {
            c.close();
        }
    }

    // ---- four-letter words -------------------------------------------

    /// A word arrived on `conn`: it counts as a received packet and the
    /// connection stops being read (cons shows it with interest 0).
    fn note_four_letter(&self, conn: &Conn) {
        self.my_stats().packets_received.fetch_add(1, Relaxed);
        conn.received.set(conn.received.get() + 1);
        conn.stats.interest.set(0);
    }

    /// Answers an allowed `word` (the caller checked the whitelist);
    /// `stmk_mask` is stmk's argument. None: close without an answer.
    async fn four_letter(&self, word: &'static str, stmk_mask: Option<i64>) -> Option<String> {
        self.admin_effects(word, stmk_mask).await;
        let needs = four_letter::needs(word);
        let view = self.admin_view(needs, word).await;
        let answer_now = move || four_letter::answer(word, &view);
        // The words that list every connection, session or watch: sorting
        // and formatting them in Java's orders takes milliseconds per
        // ten thousand entries, so it is done on glommio's blocking thread
        // while the shard goes on serving requests.
        let answer = if needs == Needs::Full {
            glommio::executor().spawn_blocking(answer_now).await
        } else {
            answer_now()
        };
        if let Some(text) = &answer {
            self.note_four_letter_sent(text);
        }
        answer
    }

    /// What srst, crst and stmk (and their AdminServer commands) change.
    pub(crate) async fn admin_effects(&self, word: &str, stmk_mask: Option<i64>) {
        // ZooKeeper resets nothing while no server runs (electing,
        // syncing): the words answer that it is not serving.
        let serving =
            self.is_read_only() || self.health.role() != crate::admin::health::ServerRole::Looking;
        if !serving && matches!(word, "srst" | "crst") {
            return;
        }
        match word {
            "srst" => self.stats.iter().for_each(ShardStats::reset),
            "crst" => {
                self.reset_conn_stats();
                self.ask_others(Ask::ResetConns).await;
            }
            "stmk" => {
                if let Some(mask) = stmk_mask {
                    for s in self.stats.iter() {
                        s.trace_mask.store(mask, Relaxed);
                    }
                }
            }
            _ => {}
        }
    }

    /// Everything an admin word or command prints, gathered from every
    /// shard as `needs` says; `tree_word` picks the tree facts (see
    /// `tree_facts`).
    pub(crate) async fn admin_view(&self, needs: Needs, tree_word: &str) -> View {
        let mut shards = Vec::new();
        let mut counts = ShardCounts::default();
        match needs {
            Needs::Nothing => {}
            Needs::Counts => {
                counts = self.report(false).counts;
                for i in self.ask_others(Ask::Counts).await {
                    if let Some(c) = self.stats[i].mailbox.counts() {
                        counts.watch_count += c.watch_count;
                    }
                }
                // The core's tracker: with sessions whose socket closed.
                counts.sessions = self.session_board.count();
            }
            Needs::Full => {
                let mut mine = self.report(true);
                for i in self.ask_others(Ask::Full).await {
                    shards.extend(self.stats[i].mailbox.full());
                }
                self.add_detached_sessions(&mut mine, &shards);
                shards.insert(0, Arc::new(mine));
            }
        }
        View {
            config: self.config.clone(),
            totals: totals(&self.stats),
            shards,
            counts,
            tree: self.tree_facts(tree_word),
            trace_mask: self.my_stats().trace_mask.load(Relaxed),
            read_only: self.is_read_only(),
            unrecoverable_errors: self.health.unrecoverable_errors(),
            role: self.health.role(),
            ensemble: self
                .health
                .ensemble
                .view(crate::consensus::core::now_ms() as u64),
            leader_id: self.health.leader_id(),
            last_snapshot: None,
        }
    }

    /// ZooKeeper writes a word's answer through an 8 KiB buffered writer,
    /// each flush one packet sent (none for an empty answer).
    fn note_four_letter_sent(&self, text: &str) {
        let packets = text.len().div_ceil(8192) as u64;
        self.my_stats().packets_sent.fetch_add(packets, Relaxed);
    }

    /// Asks every other shard for `what` and waits (bounded) until each has
    /// answered; returns the shards asked. See `admin::mailbox`.
    async fn ask_others(&self, what: Ask) -> Vec<usize> {
        let asked: Vec<(usize, u64)> = (0..self.stats.len())
            .filter(|&i| i != self.id)
            .map(|i| (i, self.stats[i].mailbox.ask(what)))
            .collect();
        let deadline = Instant::now() + mailbox::WAIT_MAX;
        loop {
            let waiting: Vec<usize> = asked
                .iter()
                .filter(|(i, gen)| !self.stats[*i].mailbox.is_done(what, *gen))
                .map(|(i, _)| *i)
                .collect();
            if waiting.is_empty() {
                break;
            }
            if Instant::now() >= deadline {
                tracing::warn!(
                    shard = self.id,
                    ?what,
                    ?waiting,
                    "shards did not answer an admin request: using their previous reports"
                );
                break;
            }
            glommio::timer::sleep(mailbox::WAIT_STEP).await;
        }
        asked.into_iter().map(|(i, _)| i).collect()
    }

    /// Answers what other shards asked of this one (runs on this shard).
    fn serve_mailbox(&self) {
        let mb = &self.my_stats().mailbox;
        if let Some(gen) = mb.wanted(Ask::ResetConns) {
            self.reset_conn_stats();
            mb.serve(Ask::ResetConns, gen);
        }
        if let Some(gen) = mb.wanted(Ask::Full) {
            mb.serve_full(gen, self.report(true));
        }
        if let Some(gen) = mb.wanted(Ask::Counts) {
            mb.serve_counts(gen, self.report(false).counts);
        }
        if let Some(gen) = mb.wanted(Ask::Metrics) {
            mb.serve_metrics(gen, self.metrics_report());
        }
    }

    /// crst: ServerCnxn.resetStats on every connection of this shard.
    fn reset_conn_stats(&self) {
        for c in self.conns.borrow().values() {
            c.received.set(0);
            c.sent.set(0);
            c.stats.reset();
        }
    }

    /// This shard's connections, sessions and data watches (`full`), or
    /// only its counts.
    fn report(&self, full: bool) -> ShardReport {
        let conns = self.conns.borrow();
        let watches = self.watches.borrow();
        let sessions = self.sessions.borrow();
        let counts = ShardCounts {
            watch_count: watches.count() as u64,
            sessions: sessions.len() as u64,
        };
        if !full {
            return ShardReport {
                counts,
                ..Default::default()
            };
        }
        let mut list: Vec<&Rc<Conn>> = conns.values().collect();
        list.sort_by_key(|c| c.id);
        let conn_infos = list.iter().map(|c| conn_info(c)).collect();
        let mut session_infos: Vec<SessionInfo> = sessions
            .iter()
            .filter_map(|(&id, conn_id)| {
                let c = conns.get(conn_id)?;
                Some(SessionInfo {
                    id,
                    timeout_ms: c.stats.timeout_ms.get(),
                    last_heard_ms: javafmt::elapsed_ms_of(c.stats.last_heard.get()),
                })
            })
            .collect();
        session_infos.sort_by_key(|s| s.id);
        let data_watches = watches
            .data_watches_by_conn()
            .into_iter()
            .filter_map(|(conn_id, paths)| Some((conns.get(&conn_id)?.session_id.get(), paths)))
            .collect();
        ShardReport {
            counts,
            conns: conn_infos,
            sessions: session_infos,
            data_watches,
        }
    }

    /// Adds to `mine` the sessions of the core's tracker that no shard
    /// lists (no connection: their socket closed and they have not expired
    /// yet), as ZooKeeper's dump lists every session of its tracker.
    fn add_detached_sessions(&self, mine: &mut ShardReport, others: &[Arc<ShardReport>]) {
        let listed: HashSet<i64> = mine
            .sessions
            .iter()
            .chain(others.iter().flat_map(|r| r.sessions.iter()))
            .map(|s| s.id)
            .collect();
        for (id, timeout_ms, last_touch) in self.session_board.detached() {
            if !listed.contains(&id) {
                mine.sessions.push(SessionInfo {
                    id,
                    timeout_ms,
                    last_heard_ms: javafmt::elapsed_ms_of(last_touch),
                });
            }
        }
        mine.sessions.sort_by_key(|s| s.id);
    }

    /// What mntr and dump show of this shard's view of the tree (nothing
    /// for other words: some of it walks the tree).
    fn tree_facts(&self, word: &str) -> TreeFacts {
        let tree = self.tree.borrow();
        let mut facts = TreeFacts::default();
        if word == "mntr" {
            facts.node_count = tree.node_count() as u64;
            facts.ephemerals_count = tree.ephemeral_count() as u64;
            facts.approximate_data_size = self.approximate_data_size(&tree);
        }
        if word == "dump" {
            // From the tree's index of ephemerals by owner: O(ephemerals).
            // Walking every path for them took 329 ms at 50k znodes, all of
            // it with the shard stopped.
            facts.ephemerals = tree
                .ephemeral_owners()
                .into_iter()
                .map(|owner| {
                    let paths = tree.ephemerals_of(owner);
                    (owner, paths.iter().map(|p| p.to_string()).collect())
                })
                .collect();
        }
        facts
    }

    /// DataTree.approximateDataSize: the tree keeps path plus data length of
    /// every node current; ZooKeeper's map also holds the root as "", whose
    /// data counts a second time. (Paths count UTF-8 bytes here, Java counts
    /// UTF-16 units: they differ only for non-ASCII paths.)
    fn approximate_data_size(&self, tree: &crate::tree::Tree) -> u64 {
        let root_data = tree.get("/").map_or(0, |n| n.data_len() as u64);
        tree.approximate_data_size() + root_data
    }

    // ---- connection limits -------------------------------------------

    /// maxClientCnxns / maxCnxns at accept; see `admin::limits`.
    fn admit(&self, ip: std::net::IpAddr) -> Option<limits::Slot> {
        let refusal = match limits::admit(
            &self.stats,
            self.id,
            ip,
            self.config.max_client_cnxns,
            self.config.max_cnxns,
        ) {
            Ok(slot) => return Some(slot),
            Err(r) => r,
        };
        self.my_stats().connections_rejected.fetch_add(1, Relaxed);
        // As acceptErrorLogger: at most one line a second, with the count
        // of the refusals not logged.
        let now = Instant::now();
        let due = self
            .refused_logged_at
            .get()
            .is_none_or(|t| now.duration_since(t) >= Duration::from_secs(1));
        if due {
            let also = self.refused_unlogged.replace(0);
            self.refused_logged_at.set(Some(now));
            if also > 0 {
                tracing::warn!(
                    shard = self.id,
                    "Error accepting new connection: {refusal} (and {also} more refused)"
                );
            } else {
                tracing::warn!(shard = self.id, "Error accepting new connection: {refusal}");
            }
        } else {
            self.refused_unlogged.set(self.refused_unlogged.get() + 1);
        }
        None
    }
}

/// The time replies of one commit batch are counted as sent at, for their
/// latency: read at the first reply, then again after every
/// `READINGS_EVERY` replies or commits (a commit for another shard's
/// connection still costs this shard its apply), rather than per reply (a
/// vDSO call each, 1-2% of a write-saturated server's CPU).
pub(crate) struct ReplyClock {
    now: Option<Instant>,
    left: u32,
}

const READINGS_EVERY: u32 = 32;

impl ReplyClock {
    pub(crate) fn new() -> ReplyClock {
        ReplyClock { now: None, left: 0 }
    }

    /// A reading taken now, which the next replies share.
    pub(crate) fn fresh(&mut self) -> Instant {
        self.now = None;
        self.now()
    }

    /// One commit (or reply) handled: the reading ages by one step.
    fn tick(&mut self) {
        self.left = self.left.saturating_sub(1);
    }

    pub(crate) fn now(&mut self) -> Instant {
        self.tick();
        match self.now {
            Some(now) if self.left > 0 => now,
            _ => {
                let now = Instant::now();
                self.now = Some(now);
                self.left = READINGS_EVERY;
                now
            }
        }
    }
}

/// One connection as the admin words show it.
fn conn_info(c: &Conn) -> ConnInfo {
    let s = &c.stats;
    let count = s.latency_count.get();
    ConnInfo {
        peer: c.peer,
        interest: s.interest.get(),
        queued: c.pending.borrow().len() as u64,
        received: c.received.get(),
        sent: c.sent.get(),
        session_id: c.session_id.get(),
        last_op: s.last_op.get(),
        established_ms: javafmt::wall_ms(s.established),
        timeout_ms: s.timeout_ms.get(),
        last_cxid: s.last_cxid.get(),
        last_zxid: s.last_zxid.get(),
        last_response_ms: s.last_response.get().map_or(0, javafmt::elapsed_ms_of),
        last_latency_ms: s.last_latency_ms.get(),
        min_latency_ms: match s.min_latency_ms.get() {
            u64::MAX => 0,
            m => m,
        },
        avg_latency_ms: s.latency_total_ms.get().checked_div(count).unwrap_or(0),
        max_latency_ms: s.max_latency_ms.get(),
        last_heard_ms: javafmt::elapsed_ms_of(s.last_heard.get()),
    }
}

/// Everything a shard executor needs, handed over from the launcher.
pub struct ShardSetup {
    pub id: usize,
    pub config: Arc<Config>,
    pub stats: Arc<[ShardStats]>,
    /// The recovered tree: the view until the first commit arrives. The
    /// launcher moves it into the `Rc` it hands [`run`] (on the shard's
    /// executor, where the core beside the shard may share it).
    pub tree: Tree,
    /// The metrics endpoint, for the shard that serves it (shard 0).
    pub metrics: Option<MetricsSetup>,
    /// The AdminServer's socket, for the shard that serves it (shard 0).
    pub admin: Option<crate::admin::admin_server::AdminSetup>,
    /// Set by the core when the txn log fails.
    pub health: Arc<Health>,
    /// Reply bytes queued, shared by all shards.
    pub reply_budget: Arc<budget::ReplyBudget>,
    /// The core's session tracker, as the admin words see it.
    pub sessions: Arc<SessionBoard>,
    /// The client port's TLS context (secureClientPort,
    /// client.portUnification), built once at startup.
    pub tls: Option<Arc<crate::tls::ClientTlsContext>>,
    /// Shared by all shards when there is more than one (`visibility`).
    pub answered: Option<Arc<visibility::AnsweredZxid>>,
    /// Shared by all shards when there is more than one: the watches each
    /// holds, for checkWatches (`watch::presence`).
    pub watch_presence: Option<Arc<crate::watch::presence::WatchPresence>>,
}

impl ShardSetup {
    /// Moves the recovered tree into the cell the shard will read from (on
    /// the shard's executor: the cell is not `Send`).
    pub fn take_view(&mut self) -> Rc<RefCell<Tree>> {
        Rc::new(RefCell::new(std::mem::take(&mut self.tree)))
    }
}

/// Runs a shard until its executor stops, talking to the core over `link`,
/// with `tree` (the recovered tree, taken out of `setup`) as its view.
pub async fn run(setup: ShardSetup, link: ShardEnds, tree: Rc<RefCell<Tree>>) {
    let config = &setup.config;
    let mut listeners = Vec::new();
    if config.client_port != 0 {
        let kind = if config.client_port_unification {
            secure::PortKind::Unified
        } else {
            secure::PortKind::Plain
        };
        let addr = std::net::SocketAddr::new(config.client_port_address, config.client_port);
        listeners.push((addr, kind));
    }
    if let Some(port) = config.secure_client_port {
        let addr = std::net::SocketAddr::new(config.secure_client_port_address, port);
        listeners.push((addr, secure::PortKind::Secure));
    }
    let listeners: Vec<_> = listeners
        .into_iter()
        .map(|(addr, kind)| match accept::bind(addr) {
            Ok(l) => (l, addr, kind),
            Err(e) => {
                tracing::error!(shard = setup.id, %addr, "cannot listen: {e}");
                std::process::exit(1);
            }
        })
        .collect();
    let ring = client_ring(&setup.config, setup.id);
    let ShardEnds { to_core, from_core } = link;
    let shard = Rc::new(Shard {
        id: setup.id,
        config: setup.config.clone(),
        stats: setup.stats.clone(),
        to_core: Rc::new(to_core),
        tree,
        watches: RefCell::new(match &setup.watch_presence {
            Some(presence) => WatchTable::shared(presence.clone(), setup.id),
            None => WatchTable::default(),
        }),
        conns: RefCell::new(FastMap::default()),
        sessions: RefCell::new(FastMap::default()),
        touched: RefCell::new(FastSet::default()),
        touch_round: Cell::new(0),
        next_conn: Cell::new(1),
        outstanding_share: (setup.config.global_outstanding_limit as usize
            / setup.stats.len().max(1)) as u64,
        refused_unlogged: Cell::new(0),
        refused_logged_at: Cell::new(None),
        latency: LatencyRecorder::new(setup.config.metrics.is_some()),
        busy_conns: Cell::new(0),
        health: setup.health.clone(),
        reply_budget: setup.reply_budget.clone(),
        session_board: setup.sessions.clone(),
        handshakes: Rc::new(secure::HandshakeCount::new(
            setup.tls.as_ref().and_then(|t| t.handshake_limit),
            setup.stats.len(),
        )),
        tls: setup.tls.clone(),
        answered: setup.answered.clone(),
        view_waiters: RefCell::new(Vec::new()),
        least_waited: Cell::new(i64::MAX),
        triggers: Cell::new(Vec::new()),
    });
    if let Some(ring) = &ring {
        glommio::spawn_local(ring.clone().drive()).detach();
        glommio::spawn_local(ring.clone().sweep_every()).detach();
    }
    {
        let s = shard.my_stats();
        let tree = shard.tree.borrow();
        s.last_zxid.store(tree.last_zxid(), Relaxed);
        s.node_count.store(tree.node_count() as u64, Relaxed);
    }
    for (_, addr, kind) in &listeners {
        tracing::info!(shard = shard.id, %addr, ?kind, "shard listening");
    }
    let commits = {
        let shard = shard.clone();
        glommio::spawn_local(async move {
            while let Some(batch) = from_core.recv().await {
                shard.apply_batch(batch);
            }
        })
    };
    glommio::spawn_local(touch_loop(shard.clone())).detach();
    if shard.stats.len() > 1 {
        glommio::spawn_local(mailbox_loop(shard.clone())).detach();
    }
    commits.detach();
    if let Some(m) = setup.metrics {
        metrics::start(shard.clone(), m);
    }
    if let Some(a) = setup.admin {
        admin_server::start(shard.clone(), a);
    }
    let mut loops: Vec<_> = listeners
        .into_iter()
        .map(|(listener, _, kind)| {
            glommio::spawn_local(accept_loop(shard.clone(), listener, ring.clone(), kind))
        })
        .collect();
    // The shard runs as long as its listeners do (always, until the
    // executor stops).
    while let Some(task) = loops.pop() {
        task.await;
    }
}

/// Accepts connections on one listener for as long as the shard runs.
async fn accept_loop(
    shard: Rc<Shard>,
    listener: OwnedFd,
    ring: Option<Rc<ClientRing>>,
    kind: secure::PortKind,
) {
    let listener_fd = listener.as_raw_fd();
    let mut backoff = accept::Backoff::new(shard.id);
    loop {
        let accepted = match accept::waiting(listener_fd) {
            Some(r) => r,
            None => {
                if let Err(e) = glommio::net::poll_readable(listener_fd).await {
                    tracing::warn!(shard = shard.id, "waiting for connections: {e}");
                    glommio::timer::sleep(Duration::from_millis(10)).await;
                }
                continue;
            }
        };
        match accepted {
            Ok((fd, peer)) => {
                backoff.succeeded();
                let Some(slot) = shard.admit(peer.ip()) else {
                    refuse(fd);
                    continue;
                };
                let id = shard.next_conn.get();
                shard.next_conn.set(id + 1);
                set_nodelay(&fd);
                let socket = match &ring {
                    Some(ring) => Socket::on_ring(ring.adopt(fd)),
                    // SAFETY: a connected socket that only the stream owns.
                    None => Socket::new(unsafe {
                        glommio::net::TcpStream::from_raw_fd(fd.into_raw_fd())
                    }),
                };
                glommio::spawn_local(secure::serve(shard.clone(), socket, peer, id, slot, kind))
                    .detach();
                // A stream of connections must not keep the shard's other
                // tasks (replies, reads) waiting.
                glommio::yield_if_needed().await;
            }
            Err(e) => glommio::timer::sleep(backoff.failed(&e)).await,
        }
    }
}

/// Closes a refused connection at once, discarding anything queued (as
/// ZooKeeper's fastCloseSock: SO_LINGER 0, so the client sees a reset).
fn refuse(stream: OwnedFd) {
    let _ = socket2::SockRef::from(&stream).set_linger(Some(Duration::ZERO));
    drop(stream);
}

/// TCP_NODELAY, as ZooKeeper's NIOServerCnxn sets it.
fn set_nodelay(fd: &OwnedFd) {
    let _ = socket2::SockRef::from(fd).set_tcp_nodelay(true);
}

/// The shard's ring for its client sockets, unless the kernel refuses one
/// or the configuration asks for glommio's sockets
/// (`ringkeeper.clientRing=false`); then connections use glommio's streams.
fn client_ring(config: &Config, shard: usize) -> Option<Rc<ClientRing>> {
    if !config.client_ring {
        tracing::info!(
            shard,
            "client sockets on glommio's streams (ringkeeper.clientRing=false)"
        );
        return None;
    }
    match ClientRing::new() {
        Ok(ring) => {
            tracing::info!(shard, "client sockets on the shard's own io_uring");
            Some(ring)
        }
        Err(e) => {
            tracing::warn!(
                shard,
                "no io_uring of its own for client sockets ({e}): using glommio's streams"
            );
            None
        }
    }
}

/// Answers other shards' admin requests (only with more than one shard).
async fn mailbox_loop(shard: Rc<Shard>) {
    loop {
        glommio::timer::sleep(mailbox::POLL).await;
        shard.serve_mailbox();
        // Another shard may have found the budget exceeded while the
        // connection with the most queued is here.
        if shard.reply_budget.is_over() {
            shard.relieve_replies();
        }
    }
}

/// Tells the core which sessions were heard from, every half tick, and
/// lets connections idle since the last time free their reply buffers.
async fn touch_loop(shard: Rc<Shard>) {
    let every = Duration::from_millis((shard.config.tick_time_ms as u64 / 2).clamp(10, 1000));
    loop {
        glommio::timer::sleep(every).await;
        for c in shard.conns.borrow().values() {
            c.shrink_if_idle();
        }
        let ids: Vec<i64> = shard.touched.borrow_mut().drain().collect();
        shard.touch_round.set(shard.touch_round.get() + 1);
        if !ids.is_empty() {
            shard.to_core(ToCore::Touch(ids)).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{ReplyClock, READINGS_EVERY};

    /// The first reply reads the clock; the reading serves the next
    /// replies and commits until `READINGS_EVERY` of them have gone by.
    #[test]
    fn a_reply_clock_is_read_at_the_first_reply_and_every_32_steps() {
        let mut clock = ReplyClock::new();
        for _ in 0..100 {
            clock.tick();
        }
        assert!(clock.now.is_none(), "commits alone read nothing");
        let first = clock.now();
        assert_eq!(clock.now, Some(first));
        for step in 1..READINGS_EVERY {
            if step % 2 == 0 {
                clock.tick();
            } else {
                assert_eq!(clock.now(), first, "step {step}");
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
        assert!(
            clock.now() > first,
            "read again after {READINGS_EVERY} steps"
        );
    }
}
