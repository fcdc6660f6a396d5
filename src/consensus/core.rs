//! The consensus core. It preps each request into a txn, and the
//! leader-only [`Core::assign`] gives it its zxid (in the epoch `zab`
//! established) and time and frames it for the log; then [`Core::apply`],
//! which every role runs, either applies it to the core's own tree at once
//! (so the next request is prepped against every change before it, as
//! ZooKeeper's outstanding changes do) or, when the core shares the one
//! tree with the lone shard on its executor ([`Core::share_tree`]), records
//! its changes as outstanding and leaves the tree to the shard, which
//! applies each txn once its batch is committed. The runner makes each
//! batch committed (`zab`: durable on a quorum, which standalone is alone)
//! before any shard sees it: replies and the tree versions go out only
//! after that. Time comes in with each input ([`Clock`]): nothing here
//! reads a clock.

use std::cell::RefCell;
use std::collections::HashSet;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::config::Config;
use crate::log::{record, txn_codec};
use crate::proto::codes::{err, op};
use crate::proto::{ConnectResponse, Request, Response, Stat};
use crate::session::{password_for, ConnRef, SessionTracker};
use crate::tree::{Tree, Txn, TxnOp};
use crate::zab::zxid::{self, Mint};

use super::messages::{Commit, Direct, Reply, ShardBatch, ToCore};
use super::outstanding::Outstanding;
use super::prep::{prep, prep_reading, PrepContext, ReadBefore};
use crate::recovery::Recovered;

/// Most requests prepped into one batch before it is logged and committed.
pub const BATCH_REQUESTS_MAX: usize = 1024;
/// Bound on live sessions.
pub const SESSIONS_MAX: usize = 1_000_000;
/// Room left at the top of an epoch's counter for one batch (SESSIONS_MAX
/// expiries fit in it); defined with the setting it bounds.
pub use crate::config::EPOCH_COUNTER_MARGIN;

/// The time an input arrived: monotonic for session timeouts, wall-clock
/// milliseconds for txn times (ctime/mtime).
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    pub now: Instant,
    pub wall_ms: i64,
}

impl Clock {
    pub fn read() -> Clock {
        Clock {
            now: Instant::now(),
            wall_ms: now_ms(),
        }
    }
}

/// The tree the core preps against.
enum CoreTree {
    /// The core's own, with every txn applied so far; each batch hands the
    /// shards a version of it.
    Own(Tree),
    /// The committed tree, shared with the lone shard beside the core on
    /// one executor: the shard applies each txn once its batch is committed,
    /// in place, so no version per batch is made (and none of the copies a
    /// version costs the next write to each path). Prep reads it with
    /// `outstanding` laid over it.
    ///
    /// This departs from DESIGN.md's "the core is the only writer" and
    /// "a version per batch"; what those protect still holds. The tree
    /// changes only by committed txns, applied once each in zxid order (by
    /// the shard's apply instead of the core's), and the core never writes
    /// it. Guarantee 3: the shard applies a txn, fires its watches and
    /// answers its request before it applies the next, and a read is
    /// answered from the tree as it stands between two txns, so no reply
    /// shows data newer than the events sent before it. Memory: one tree;
    /// a snapshot holds a clone (shared structure) while it is written, and
    /// only what changes meanwhile is copied.
    Shared {
        tree: Rc<RefCell<Tree>>,
        outstanding: Outstanding,
        last_assigned: i64,
    },
}

pub struct Core {
    tree: CoreTree,
    sessions: SessionTracker,
    /// Leader: the epoch's zxids, from `zab` (None: this core assigns
    /// none; it follows, looks, or its writes are refused).
    mint: Option<Mint>,
    /// The counter at which the runner must start a new epoch (see
    /// EPOCH_COUNTER_MARGIN; lower in tests, `ringkeeper.epochCounterLimit`).
    epoch_counter_limit: u32,
    /// Highest zxid covered by a completed fdatasync (stamped into records).
    durable_zxid: i64,
    /// Set when the log failed: writes answer SYSTEMERROR until restart.
    writes_refused: bool,
    /// A follower replaying txns over a leader's fuzzy snapshot: ops
    /// already in the tree are skipped (`Tree::apply_lenient`).
    replay_lenient: bool,
    /// Read-only sessions made after the log failed, as ZooKeeper's
    /// ReadOnlyZooKeeperServer makes them: in the tracker (so they can
    /// reconnect and expire) but never logged, gone at restart. At most
    /// SESSIONS_MAX, through the tracker's own bound.
    local_sessions: HashSet<i64>,
    extended_types_enabled: bool,
    /// The optional auth providers registered (x509 with TLS, sasl).
    providers: crate::acl::AuthProviders,
    enforce_quota: bool,
    // Output of the batch being built.
    commits: Vec<Commit>,
    direct: Vec<Vec<Direct>>,
    /// Framed log records of the batch, and the zxids they span.
    log_bytes: Vec<u8>,
    log_zxids: Option<(i64, i64)>,
    /// A log buffer handed back after its batch was appended: reused, so a
    /// batch does not regrow (and a large one re-map) its buffer each time.
    spare_log_bytes: Vec<u8>,
    /// Capacity for the next batch's commit list: the most commits a batch
    /// has had so far (rounded up to a power of two). A list that grows
    /// while a batch fills is reallocated onto fresh pages, and the kernel
    /// zeroes each of them (12% of the core's time at 5M znodes); a list
    /// of one size each time reuses the pages the last one freed.
    commits_capacity: usize,
    /// Txns applied (a follower's commits) since the last batch was taken:
    /// that batch carries the tree.
    applied_since_take: bool,
    /// An ensemble follower: it never assigns a zxid (its clients' writes
    /// go to the leader), knows sessions from the commits, and leaves
    /// expiry to the leader.
    follower: bool,
}

/// What one batch hands to the runner: log records to make durable, then
/// commits and connection answers to publish.
pub struct Batch {
    pub log_bytes: Vec<u8>,
    pub log_zxids: Option<(i64, i64)>,
    /// The core's tree once this batch's txns are applied (if it has txns
    /// and the core has its own tree).
    pub tree_after: Option<Tree>,
    /// The shard applies the txns itself (see [`ShardBatch::shard_applies`]).
    pub shard_applies: bool,
    pub commits: Vec<Commit>,
    pub direct: Vec<Vec<Direct>>,
}

impl Batch {
    /// A batch of nothing, for no shard.
    fn empty() -> Batch {
        Batch {
            log_bytes: Vec::new(),
            log_zxids: None,
            tree_after: None,
            shard_applies: false,
            commits: Vec::new(),
            direct: Vec::new(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.commits.is_empty() && self.direct.iter().all(Vec::is_empty)
    }

    /// The per-shard messages, in order (None: nothing for that shard).
    pub fn into_shard_batches(self) -> Vec<Option<ShardBatch>> {
        let commits: Arc<Vec<Commit>> = Arc::new(self.commits);
        self.direct
            .into_iter()
            .map(|direct| {
                if commits.is_empty() && direct.is_empty() {
                    None
                } else {
                    Some(ShardBatch {
                        commits: commits.clone(),
                        tree: self.tree_after.clone(),
                        shard_applies: self.shard_applies,
                        direct,
                    })
                }
            })
            .collect()
    }
}

impl Core {
    /// A core over the recovered state, at `clock`; leading the epoch of
    /// `mint` (established by `zab`) when there is one.
    pub fn new(
        config: &Config,
        shard_count: usize,
        recovered: Recovered,
        mint: Option<Mint>,
        clock: Clock,
    ) -> Core {
        let tree = recovered.tree;
        let last = tree.last_zxid();
        assert!(
            mint.is_none_or(|m| zxid::epoch(last) <= m.epoch()),
            "the log is ahead of the epoch led"
        );
        let mut sessions = SessionTracker::new(1, clock.wall_ms, SESSIONS_MAX);
        // Recovered sessions get a whole timeout to reconnect, as in ZooKeeper.
        for (id, timeout_ms) in &recovered.sessions {
            sessions.add(*id, *timeout_ms, None, clock.now);
        }
        Core {
            mint,
            epoch_counter_limit: config.epoch_counter_limit,
            durable_zxid: tree.last_zxid(),
            writes_refused: false,
            replay_lenient: false,
            local_sessions: HashSet::new(),
            tree: CoreTree::Own(tree),
            sessions,
            extended_types_enabled: config.extended_types_enabled,
            providers: crate::acl::AuthProviders {
                x509: config.client_tls.is_some(),
                sasl: config.sasl_provider,
            },
            enforce_quota: config.enforce_quota,
            commits: Vec::new(),
            direct: (0..shard_count).map(|_| Vec::new()).collect(),
            log_bytes: Vec::new(),
            log_zxids: None,
            spare_log_bytes: Vec::new(),
            commits_capacity: 0,
            applied_since_take: false,
            follower: false,
        }
    }

    /// Makes this core an ensemble follower's (see `follower`).
    pub fn follow(&mut self) {
        self.follower = true;
    }

    /// From now on, prep against `tree` (the same state as the core's own,
    /// which is dropped) plus outstanding changes, and leave applying to
    /// the shard that shares it (see [`CoreTree::Shared`]). Only for a
    /// standalone core whose one shard runs on its executor.
    pub fn share_tree(&mut self, tree: Rc<RefCell<Tree>>) {
        assert!(!self.follower, "a follower applies what it is sent");
        assert!(
            self.log_zxids.is_none() && self.commits.is_empty(),
            "a batch is being built"
        );
        let last_assigned = tree.borrow().last_zxid();
        let own = std::mem::replace(
            &mut self.tree,
            CoreTree::Shared {
                tree,
                outstanding: Outstanding::default(),
                last_assigned,
            },
        );
        match own {
            CoreTree::Own(own) => assert_eq!(
                own.last_zxid(),
                last_assigned,
                "the shared tree is the core's own state"
            ),
            CoreTree::Shared { .. } => panic!("the tree is shared already"),
        }
    }

    /// Whether the shard applies the txns (the tree is shared).
    pub fn shares_tree(&self) -> bool {
        matches!(self.tree, CoreTree::Shared { .. })
    }

    /// The committed tree the core shares with its shard (None: it keeps
    /// its own).
    pub fn shared_tree(&self) -> Option<Rc<RefCell<Tree>>> {
        match &self.tree {
            CoreTree::Own(_) => None,
            CoreTree::Shared { tree, .. } => Some(tree.clone()),
        }
    }

    /// The core's own tree. Panics when it is shared: only the ensemble
    /// runner (which never shares it) and tests read it.
    pub fn tree(&self) -> &Tree {
        match &self.tree {
            CoreTree::Own(t) => t,
            CoreTree::Shared { .. } => panic!("the core's tree is shared with its shard"),
        }
    }

    /// The core's own tree, mutably (see [`Core::tree`]).
    fn own_tree_mut(&mut self) -> &mut Tree {
        match &mut self.tree {
            CoreTree::Own(t) => t,
            CoreTree::Shared { .. } => panic!("the core's tree is shared with its shard"),
        }
    }

    /// Preps `request` against the tree plus every txn prepped before it
    /// (the txn takes the request's data: see [`prep`]).
    fn prep(&mut self, ctx: &PrepContext, request: &mut Request) -> (TxnOp, ReadBefore) {
        match &mut self.tree {
            CoreTree::Own(t) => (prep(t, t, ctx, request), None),
            CoreTree::Shared {
                tree, outstanding, ..
            } => {
                let t = tree.borrow();
                prep_reading(&outstanding.caught_up(&t), &t, ctx, request)
            }
        }
    }

    /// The session's ephemerals, outstanding changes included.
    fn ephemerals_of(&mut self, session_id: i64) -> Vec<Arc<str>> {
        use super::outstanding::Facts;
        match &mut self.tree {
            CoreTree::Own(t) => t.ephemerals_of(session_id),
            CoreTree::Shared {
                tree, outstanding, ..
            } => outstanding
                .caught_up(&tree.borrow())
                .ephemerals_of(session_id),
        }
    }

    /// The zxid of the last txn assigned (or applied, on a follower).
    pub fn last_assigned(&self) -> i64 {
        match &self.tree {
            CoreTree::Own(t) => t.last_zxid(),
            CoreTree::Shared { last_assigned, .. } => *last_assigned,
        }
    }

    /// Follower: a new session id, minted here as ZooKeeper's learner
    /// mints it (this server's id in the top byte); None at the bound.
    pub fn mint_session_id(&mut self) -> Option<i64> {
        self.sessions.next_session_id()
    }

    /// Follower: the leader committed the createSession this server
    /// forwarded for `conn`: the session is its, and the client hears so.
    pub fn session_created(
        &mut self,
        id: i64,
        conn: ConnRef,
        timeout_ms: i32,
        has_read_only: bool,
        now: Instant,
    ) {
        if self.sessions.get(id).is_none() {
            self.sessions.add(id, timeout_ms, None, now);
        }
        self.sessions.set_owner(id, Some(conn));
        self.direct[conn.shard].push(Direct::Connected {
            conn: conn.conn,
            response: accepted(id, timeout_ms, has_read_only),
        });
    }

    /// A connect that cannot be served (the leader went away meanwhile).
    pub fn refuse_connect(&mut self, conn: ConnRef, has_read_only: bool) {
        self.direct[conn.shard].push(Direct::Connected {
            conn: conn.conn,
            response: ConnectResponse::refused(has_read_only),
        });
    }

    /// A reply that changes nothing, in order after what was applied.
    pub fn reply(&mut self, reply: Reply) {
        self.commits.push(Commit::Barrier(reply));
    }

    /// The timeout of a live session.
    /// The sessions this core tracks.
    pub fn session_count(&self) -> usize {
        self.sessions.len()
    }

    pub fn session_timeout(&self, id: i64) -> Option<i32> {
        self.sessions.get(id).map(|s| s.timeout_ms)
    }

    /// Leader: a follower's clients used these sessions.
    pub fn touch(&mut self, id: i64, now: Instant) {
        self.sessions.touch(id, now);
    }

    /// Follower: txns from here on may already be in the tree (it came
    /// from a leader's fuzzy snapshot).
    pub fn replay_leniently(&mut self) {
        self.replay_lenient = true;
    }

    /// Closes one client connection (unanswered).
    pub fn close_connection(&mut self, conn: ConnRef) {
        self.direct[conn.shard].push(Direct::Close { conn: conn.conn });
    }

    /// Leader: may a session a follower's client reconnects with go on
    /// (SessionTracker.touchSession)? A live one is touched.
    pub fn revalidate(&mut self, id: i64, now: Instant) -> bool {
        let live = self.sessions.get(id).is_some_and(|s| !s.closing);
        if live {
            self.sessions.touch(id, now);
        }
        live
    }

    /// Leader: a forwarded request refused before prep (SESSIONMOVED):
    /// an error txn, which the follower answers its client from.
    pub fn forwarded_error(&mut self, session_id: i64, cxid: i32, code: i32, clock: Clock) {
        let op = TxnOp::Error { code };
        self.commit_txn(session_id, cxid, op, None, clock.wall_ms);
    }

    /// Leader: a createSession a follower forwarded (it minted the id).
    pub fn create_forwarded_session(&mut self, id: i64, timeout_ms: i32, clock: Clock) {
        if self.sessions.get(id).is_some() {
            return; // a duplicate: the session exists
        }
        self.sessions.add(id, timeout_ms, None, clock.now);
        let op = TxnOp::CreateSession { timeout_ms };
        self.commit_txn(id, 0, op, None, clock.wall_ms);
    }

    /// Leader: a write (or closeSession) a follower forwarded. Its reply is
    /// the follower's, read off its own tree when the txn commits there;
    /// so every outcome here is a txn, errors included, as ZooKeeper's
    /// PrepRequestProcessor makes them. `request` None: the body did not
    /// decode.
    pub fn handle_forwarded(
        &mut self,
        session_id: i64,
        cxid: i32,
        request: Option<Request>,
        ids: super::messages::AuthIds,
        clock: Clock,
    ) {
        let error = |code| TxnOp::Error { code };
        let Some(mut request) = request else {
            let op = error(err::MARSHALLING_ERROR);
            return self.commit_txn(session_id, cxid, op, None, clock.wall_ms);
        };
        let live = self.sessions.get(session_id).is_some_and(|s| !s.closing);
        if !live {
            let op = error(err::SESSION_EXPIRED);
            return self.commit_txn(session_id, cxid, op, None, clock.wall_ms);
        }
        self.sessions.touch(session_id, clock.now);
        if matches!(request, Request::CloseSession) {
            if let Some(s) = self.sessions.get_mut(session_id) {
                s.closing = true;
            }
        }
        let ctx = PrepContext {
            session_id,
            extended_types_enabled: self.extended_types_enabled,
            enforce_quota: self.enforce_quota,
            providers: self.providers,
            ids: &ids,
        };
        let prepped = self.prep(&ctx, &mut request);
        self.commit_prepped(session_id, cxid, prepped, None, clock.wall_ms);
    }

    /// In an ensemble, new session ids carry this server's id in their top
    /// byte (ZooKeeper's SessionTrackerImpl).
    pub fn set_server_id(&mut self, myid: i64, clock: Clock) {
        self.sessions.reseed(myid, clock.wall_ms);
    }

    /// Closes every connection that owns a session (the server changes
    /// role; ZooKeeper closes its client connections then, and clients
    /// reconnect, possibly elsewhere).
    pub fn close_all_connections(&mut self) {
        for owner in self.sessions.owners() {
            self.direct[owner.shard].push(Direct::Close { conn: owner.conn });
        }
    }

    /// A follower: applies a txn the leader committed (it is in the log
    /// already), for the shards to see in the next batch.
    pub fn apply_committed(
        &mut self,
        txn: Txn,
        origin: Option<(ConnRef, Box<Request>)>,
        now: Instant,
    ) {
        self.applied_since_take = true;
        if let TxnOp::CreateSession { timeout_ms } = txn.op {
            if self.sessions.get(txn.session_id).is_none() {
                self.sessions.add(txn.session_id, timeout_ms, None, now);
            }
        }
        self.apply(txn, origin, None);
    }

    /// The log failed: roll the tree back to its durable version (a shared
    /// tree never left it: its outstanding changes are dropped), refuse
    /// writes from now on, and hand back the batch being built (to fail it).
    pub fn refuse_writes(&mut self, durable_tree: Option<Tree>) -> Batch {
        // The mint stays: nothing is assigned from now on.
        self.writes_refused = true;
        match &mut self.tree {
            CoreTree::Own(t) => {
                *t = durable_tree.expect("an own tree rolls back to its durable one")
            }
            CoreTree::Shared { outstanding, .. } => outstanding.clear(),
        }
        self.take_batch()
    }

    /// Turns a batch that will never be durable into error replies: each
    /// write answers SYSTEMERROR, new sessions are refused, and no tree
    /// version or watch event goes out.
    pub fn failed_batch(&self, batch: Batch) -> Batch {
        let commits = batch
            .commits
            .into_iter()
            .filter_map(|c| match c {
                Commit::Txn { reply, .. } => reply.map(|r| {
                    Commit::Barrier(Reply {
                        err: err::SYSTEM_ERROR,
                        body: None,
                        ..r
                    })
                }),
                barrier => Some(barrier),
            })
            .collect();
        let direct = batch
            .direct
            .into_iter()
            .map(|ds| {
                ds.into_iter()
                    .map(|d| match d {
                        Direct::Connected { conn, response } => Direct::Connected {
                            conn,
                            response: ConnectResponse::refused(response.has_read_only),
                        },
                        close => close,
                    })
                    .collect()
            })
            .collect();
        Batch {
            log_bytes: Vec::new(),
            log_zxids: None,
            tree_after: None,
            shard_applies: false,
            commits,
            direct,
        }
    }

    /// Whether the epoch's counter reached its limit: the runner stops
    /// taking requests, lets what is in flight commit, and establishes the
    /// next epoch ([`Core::lead`]).
    pub fn epoch_ending(&self) -> bool {
        self.mint
            .is_some_and(|m| m.next_counter() >= self.epoch_counter_limit as u64)
    }

    /// Assigns zxids from `mint` from now on (a new epoch `zab`
    /// established; the batch being built must be empty).
    pub fn lead(&mut self, mint: Mint) {
        assert!(
            self.log_zxids.is_none() && self.commits.is_empty(),
            "a batch is being built"
        );
        assert!(
            self.mint.is_none_or(|m| mint.epoch() > m.epoch()),
            "epochs only go forward"
        );
        self.mint = Some(mint);
    }

    /// Takes back a batch's log buffer once the log has copied it.
    pub fn recycle_log_buffer(&mut self, mut buf: Vec<u8>) {
        buf.clear();
        if buf.capacity() > self.spare_log_bytes.capacity() {
            self.spare_log_bytes = buf;
        }
    }

    /// Sessions as a snapshot keeps them.
    /// Publishes the session tracker to `board` (for the admin words).
    pub fn set_session_board(&mut self, board: Arc<crate::session::board::SessionBoard>) {
        self.sessions.set_board(board);
    }

    /// What a reload from the disk would rebuild, taken from memory: only
    /// a core that applies nothing but logged txns (a follower's, or one
    /// refusing writes: electing or after a log failure) has a tree and
    /// sessions equal to the log's; a leader's runs ahead of it (None).
    /// Local (read-only) sessions are not persisted and are left out.
    pub fn reloadable_state(&self) -> Option<Recovered> {
        if !(self.follower || self.writes_refused) {
            return None;
        }
        let sessions = self
            .sessions
            .entries()
            .into_iter()
            .filter(|e| !self.local_sessions.contains(&e.id))
            .map(|e| (e.id, e.timeout_ms))
            .collect();
        let tree = match &self.tree {
            CoreTree::Own(t) => t.clone(),
            CoreTree::Shared { tree, .. } => tree.borrow().clone(),
        };
        Some(Recovered {
            tree,
            sessions,
            txns_replayed: 0,
        })
    }

    pub fn session_entries(&self) -> Vec<crate::snapshot::SessionEntry> {
        self.sessions.entries()
    }

    pub fn set_durable_zxid(&mut self, zxid: i64) {
        debug_assert!(zxid >= self.durable_zxid);
        self.durable_zxid = zxid;
    }

    /// Requests handled into the batch being built (its txns).
    pub fn batch_txns(&self) -> usize {
        self.log_zxids.map_or(0, |(a, b)| (b - a + 1) as usize)
    }

    pub fn batch_bytes(&self) -> usize {
        self.log_bytes.len()
    }

    /// Hands the batch built so far to the runner.
    pub fn take_batch(&mut self) -> Batch {
        if self.commits.is_empty()
            && self.log_zxids.is_none()
            && self.log_bytes.is_empty()
            && !self.applied_since_take
            && self.direct.iter().all(Vec::is_empty)
        {
            // Nothing since the last take (most of a leader's loop turns
            // take one): an empty batch, allocating nothing. The lists
            // stay as they are.
            return Batch::empty();
        }
        let log_zxids = self.log_zxids.take();
        // A batch with nothing to log leaves the buffer here: the runner
        // drops such a batch's buffer rather than handing it back, and the
        // spare taken in its place would leave the next batch none, to
        // grow from empty, copying what it holds at every doubling (2% of
        // a write-bound server's CPU).
        let log_bytes = if self.log_bytes.is_empty() {
            Vec::new()
        } else {
            let next = std::mem::take(&mut self.spare_log_bytes);
            std::mem::replace(&mut self.log_bytes, next)
        };
        self.commits_capacity = self
            .commits_capacity
            .max(self.commits.len().next_power_of_two());
        let commits_hint = self.commits_capacity;
        let applied = std::mem::take(&mut self.applied_since_take);
        let (tree_after, shard_applies) = match &self.tree {
            CoreTree::Own(t) => ((log_zxids.is_some() || applied).then(|| t.clone()), false),
            CoreTree::Shared { .. } => (None, log_zxids.is_some()),
        };
        Batch {
            log_bytes,
            tree_after,
            shard_applies,
            log_zxids,
            // Sized for the biggest batch yet: no regrowth (fresh pages,
            // memmove) of the commit list while it fills.
            commits: std::mem::replace(&mut self.commits, Vec::with_capacity(commits_hint)),
            direct: self.direct.iter_mut().map(std::mem::take).collect(),
        }
    }

    /// Handles one request of the batch being built, arrived at `clock`.
    pub fn handle(&mut self, msg: ToCore, clock: Clock) {
        let now = clock.now;
        match msg {
            ToCore::Write {
                conn,
                session_id,
                xid,
                request,
                ids,
                client_body: _,
            } => self.write(conn, session_id, xid, request, ids, clock),
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
                self.commit_txn(session_id, xid, op, None, clock.wall_ms);
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
                can_be_read_only,
            } => {
                if self.writes_refused && !can_be_read_only {
                    // See connect_read_only: the shard did not know yet.
                    self.direct[conn.shard].push(Direct::Connected {
                        conn: conn.conn,
                        response: ConnectResponse::refused(has_read_only),
                    });
                } else {
                    self.connect(conn, session_id, &passwd, timeout_ms, has_read_only, clock)
                }
            }
            ToCore::Touch(ids) => {
                for id in ids {
                    self.sessions.touch(id, now);
                }
            }
            ToCore::Disconnected { conn, session_id } => {
                if self.sessions.get(session_id).and_then(|s| s.owner) == Some(conn) {
                    self.sessions.set_owner(session_id, None);
                }
            }
        }
    }

    /// ContainerManager: deletes empty containers that once had children
    /// (or were never used for longer than the configured bound) and TTL
    /// nodes without children whose ttl passed since their last change,
    /// each as an ordinary delete txn, at most `max_deletions` per pass.
    pub fn reap(&mut self, max_deletions: usize, never_used_ms: u64, clock: Clock) {
        if self.writes_refused {
            return;
        }
        let now = clock.wall_ms;
        // ContainerManager reads the committed tree; its delete is prepped,
        // so a node an outstanding txn deleted or gave a child is spared.
        let mut doomed = self.reap_candidates(max_deletions, never_used_ms, now);
        if let CoreTree::Shared {
            tree, outstanding, ..
        } = &mut self.tree
        {
            use super::outstanding::Facts;
            let t = tree.borrow();
            let view = outstanding.caught_up(&t);
            doomed.retain(|p| view.node(p).is_some_and(|n| n.children == 0));
        }
        for path in doomed {
            tracing::debug!(%path, "reaping");
            self.commit_txn(0, 0, TxnOp::Delete { path }, None, clock.wall_ms);
        }
    }

    /// The containers and TTL nodes due for deletion, at most `max`.
    fn reap_candidates(&self, max: usize, never_used_ms: u64, now: i64) -> Vec<Arc<str>> {
        let elapsed = |n: &crate::tree::Node| now.saturating_sub(n.mtime);
        let shared;
        let tree: &Tree = match &self.tree {
            CoreTree::Own(t) => t,
            CoreTree::Shared { tree, .. } => {
                shared = tree.borrow();
                &shared
            }
        };
        let containers = tree.containers().filter(|p| {
            tree.get(p).is_some_and(|n| {
                n.children.is_empty()
                    && (n.cversion() > 0
                        || (never_used_ms != 0 && elapsed(n) > never_used_ms as i64))
            })
        });
        let ttls = tree.ttl_nodes().filter(|p| {
            tree.get(p).is_some_and(|n| match n.kind() {
                crate::tree::NodeKind::Ttl(ttl) => {
                    n.children.is_empty() && ttl != 0 && elapsed(n) > ttl
                }
                _ => false,
            })
        });
        containers.chain(ttls).take(max).cloned().collect()
    }

    /// Expires sessions whose timeout passed: one closeSession txn each.
    /// Once the log failed, only local (read-only) sessions expire, without
    /// a txn; the others wait for a restart, which gives them a whole
    /// timeout again.
    pub fn expire_sessions(&mut self, clock: Clock) {
        if self.follower {
            return; // the leader's decision
        }
        if self.writes_refused {
            self.expire_local_sessions(clock.now);
            return;
        }
        for id in self.sessions.take_expired(clock.now) {
            tracing::debug!(session = format_args!("{id:#x}"), "session expired");
            let op = TxnOp::CloseSession {
                ephemerals: self.ephemerals_of(id),
            };
            self.commit_txn(id, 0, op, None, clock.wall_ms);
        }
    }

    fn expire_local_sessions(&mut self, now: Instant) {
        let expired: Vec<i64> = self
            .local_sessions
            .iter()
            .copied()
            .filter(|id| {
                self.sessions.get(*id).is_none_or(|s| {
                    now.duration_since(s.last_touch)
                        > Duration::from_millis(s.timeout_ms.max(0) as u64)
                })
            })
            .collect();
        for id in expired {
            tracing::debug!(
                session = format_args!("{id:#x}"),
                "read-only session expired"
            );
            self.drop_local_session(id);
        }
    }

    /// Forgets a local session and closes its connection.
    fn drop_local_session(&mut self, id: i64) {
        self.local_sessions.remove(&id);
        if let Some(owner) = self.sessions.remove(id).and_then(|s| s.owner) {
            self.direct[owner.shard].push(Direct::Close { conn: owner.conn });
        }
    }

    fn write(
        &mut self,
        conn: ConnRef,
        session_id: i64,
        xid: i32,
        mut request: Box<Request>,
        ids: super::messages::AuthIds,
        clock: Clock,
    ) {
        let now = clock.now;
        let reply_to = |err, body| Reply {
            conn,
            xid,
            err,
            body,
        };
        if matches!(*request, Request::CloseSession) && self.local_sessions.contains(&session_id) {
            // ReadOnlyRequestProcessor lets closeSession through: the
            // session ends, its connection closes after this reply.
            self.commits.push(Commit::Barrier(reply_to(0, None)));
            self.drop_local_session(session_id);
            return;
        }
        if self.writes_refused && !matches!(*request, Request::Sync { .. }) {
            self.commits
                .push(Commit::Barrier(reply_to(err::SYSTEM_ERROR, None)));
            return;
        }
        let live = self.sessions.get(session_id).is_some_and(|s| !s.closing);
        if !live {
            self.commits
                .push(Commit::Barrier(reply_to(err::SESSION_EXPIRED, None)));
            return;
        }
        self.sessions.touch(session_id, now);
        if let Request::Sync { path } = &*request {
            let body = Response::Path(path.clone());
            self.commits.push(Commit::Barrier(reply_to(0, Some(body))));
            return;
        }
        if matches!(*request, Request::CloseSession) {
            if let Some(s) = self.sessions.get_mut(session_id) {
                s.closing = true;
            }
        }
        let ctx = PrepContext {
            session_id,
            extended_types_enabled: self.extended_types_enabled,
            enforce_quota: self.enforce_quota,
            providers: self.providers,
            ids: &ids,
        };
        let prepped = self.prep(&ctx, &mut request);
        let origin = Some((conn, request));
        self.commit_prepped(session_id, xid, prepped, origin, clock.wall_ms);
    }

    fn connect(
        &mut self,
        conn: ConnRef,
        session_id: i64,
        passwd: &[u8],
        timeout_ms: i32,
        has_read_only: bool,
        clock: Clock,
    ) {
        let now = clock.now;
        let response = if self.writes_refused {
            self.connect_read_only(conn, session_id, passwd, timeout_ms, has_read_only, now)
        } else if session_id == 0 {
            match self.sessions.next_session_id() {
                Some(id) => {
                    self.sessions.add(id, timeout_ms, Some(conn), now);
                    let op = TxnOp::CreateSession { timeout_ms };
                    self.commit_txn(id, 0, op, None, clock.wall_ms);
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

    /// A connect after the log failed from a client that sent
    /// canBeReadOnly, answered as ReadOnlyZooKeeperServer does: a new
    /// session is a local one; every accepted session is told it is
    /// read-only. (A client that did not ask for read-only is closed by its
    /// shard before it asks; `handle` refuses it in the moment the failure
    /// is not yet known there.)
    fn connect_read_only(
        &mut self,
        conn: ConnRef,
        session_id: i64,
        passwd: &[u8],
        timeout_ms: i32,
        has_read_only: bool,
        now: Instant,
    ) -> ConnectResponse {
        let mut response = if session_id != 0 {
            self.reconnect(conn, session_id, passwd, timeout_ms, has_read_only, now)
        } else if let Some(id) = self.sessions.next_session_id() {
            self.sessions.add(id, timeout_ms, Some(conn), now);
            self.local_sessions.insert(id);
            accepted(id, timeout_ms, has_read_only)
        } else {
            tracing::warn!("session limit {SESSIONS_MAX} reached: refusing a new session");
            ConnectResponse::refused(has_read_only)
        };
        response.read_only = response.session_id != 0;
        response
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
        if self.sessions.get(session_id).is_none_or(|s| s.closing) {
            return ConnectResponse::refused(has_read_only);
        }
        if valid {
            // Touched first: the board shows a detached session's last touch.
            let s = self.sessions.get_mut(session_id).expect("checked above");
            s.timeout_ms = timeout_ms;
            s.last_touch = now;
        }
        // Like ZooKeeper, the session's current connection is closed before
        // the password is checked, so a wrong password also disconnects it.
        let old = self.sessions.set_owner(session_id, valid.then_some(conn));
        if let Some(old) = old.filter(|o| *o != conn) {
            self.direct[old.shard].push(Direct::Close { conn: old.conn });
        }
        if !valid {
            return ConnectResponse::refused(has_read_only);
        }
        accepted(session_id, timeout_ms, has_read_only)
    }

    /// The leader's whole path for one txn: assign, then apply.
    fn commit_txn(
        &mut self,
        session_id: i64,
        xid: i32,
        op: TxnOp,
        origin: Option<(ConnRef, Box<Request>)>,
        wall_ms: i64,
    ) {
        self.commit_prepped(session_id, xid, (op, None), origin, wall_ms);
    }

    /// [`Core::commit_txn`] for an op just prepped, with what its prep read
    /// (nothing may be prepped, recorded or applied in between).
    fn commit_prepped(
        &mut self,
        session_id: i64,
        xid: i32,
        (op, read_before): (TxnOp, ReadBefore),
        origin: Option<(ConnRef, Box<Request>)>,
        wall_ms: i64,
    ) {
        let txn = self.assign(session_id, xid, op, wall_ms);
        self.apply(txn, origin, read_before);
    }

    /// Leader only: gives `op` the next zxid of the epoch and its time, and
    /// frames its record into the batch's log bytes.
    fn assign(&mut self, session_id: i64, xid: i32, op: TxnOp, wall_ms: i64) -> Txn {
        let zxid = self
            .mint
            .as_mut()
            .expect("only a leader's core assigns")
            .take()
            .expect("the runner starts a new epoch before the counter runs out");
        let txn = Txn {
            zxid,
            time_ms: wall_ms,
            session_id,
            cxid: xid,
            op,
        };
        self.frame_for_log(&txn);
        txn
    }

    /// Every role: the txn's effect on the tree and the sessions, and its
    /// commit for the shards with the reply to `origin` (the request, when
    /// a connection of this server sent it).
    /// `read_before`: what prep read for this txn's op, when it was prepped
    /// just now against the shared tree plus the outstanding changes.
    fn apply(
        &mut self,
        txn: Txn,
        origin: Option<(ConnRef, Box<Request>)>,
        read_before: ReadBefore,
    ) {
        let session_id = txn.session_id;
        let xid = txn.cxid;
        let closed_session = matches!(txn.op, TxnOp::CloseSession { .. }).then_some(session_id);
        if closed_session.is_some() {
            self.sessions.remove(session_id);
        }
        if let CoreTree::Shared {
            tree,
            outstanding,
            last_assigned,
        } = &mut self.tree
        {
            // The shard applies it, once it is committed, and answers it
            // from the tree then.
            outstanding.record_read(&tree.borrow(), txn.zxid, &txn.op, read_before);
            *last_assigned = txn.zxid;
            let (reply, request) = match origin {
                Some((conn, request)) => (
                    Some(Reply {
                        conn,
                        xid,
                        err: 0,
                        body: None,
                    }),
                    Some(request),
                ),
                None => (None, None),
            };
            self.commits.push(Commit::Txn {
                zxid: txn.zxid,
                txn,
                triggers: Vec::new(),
                reply,
                closed_session,
                request,
            });
            return;
        }
        let lenient = self.replay_lenient;
        let tree = self.own_tree_mut();
        let mut triggers = Vec::new();
        let request = origin.as_ref().map(|o| &*o.1);
        let result = apply_answering(tree, &txn, request, lenient, &mut triggers);
        let reply = origin.zip(result).map(|((conn, _), (err, body))| Reply {
            conn,
            xid,
            err,
            body,
        });
        self.commits.push(Commit::Txn {
            zxid: txn.zxid,
            txn,
            triggers,
            reply,
            closed_session,
            request: None,
        });
    }

    /// Appends the txn's framed record to the batch's log bytes, encoding
    /// the payload in place.
    fn frame_for_log(&mut self, txn: &Txn) {
        frame_txn(&mut self.log_bytes, txn, self.durable_zxid);
        self.log_zxids = Some(match self.log_zxids {
            None => (txn.zxid, txn.zxid),
            Some((first, _)) => (first, txn.zxid),
        });
    }
}

/// Appends `txn` to `buf` as one framed log record (its payload encoded in
/// place), stamped with the zxid known durable when it was framed.
pub fn frame_txn(buf: &mut Vec<u8>, txn: &Txn, durable_zxid: i64) {
    let start = buf.len();
    buf.resize(start + record::HEADER_BYTES, 0);
    txn_codec::encode(txn, buf);
    record::finish_in_place(buf, start, txn.zxid, durable_zxid);
}

/// The op type a multi result carries: createContainer and createTTL answer
/// as create2 (FinalRequestProcessor's CreateResult), which is also all a
/// Java client's MultiResponse accepts.
fn multi_result_type(r: &Request) -> i32 {
    match r.opcode() {
        op::CREATE_CONTAINER | op::CREATE_TTL => op::CREATE2,
        other => other,
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

/// Applies `txn` to `tree` (`lenient`: skipping ops a fuzzy snapshot
/// already holds), appends its watch triggers to `triggers` (a buffer the
/// caller reuses: no allocation per txn) and returns, for `request` (its
/// origin, when this server holds it), the reply's error and body read off
/// the tree.
pub fn apply_answering(
    tree: &mut Tree,
    txn: &Txn,
    request: Option<&Request>,
    lenient: bool,
    triggers: &mut Vec<crate::tree::Trigger>,
) -> Option<(i32, Option<Response>)> {
    // Multi results show each op's own effect, so they are read off the
    // tree after each op applies.
    if let (false, TxnOp::Multi(ops), Some(Request::Multi(requests))) = (lenient, &txn.op, request)
    {
        let mut results = Vec::with_capacity(ops.len());
        tree.apply_observing(txn, triggers, |tree, i, o, stat| {
            if let Some(r) = requests.get(i) {
                let result = single_result(tree, o, r, true, stat);
                results.push((multi_result_type(r), Ok(result)));
            }
        });
        return Some((0, Some(Response::Multi(results))));
    }
    // A lenient replay may skip ops: its results come off a scratch copy.
    let multi_results = match (&txn.op, request) {
        (TxnOp::Multi(ops), Some(Request::Multi(requests))) => {
            let mut scratch = tree.clone();
            let results: Vec<_> = ops
                .iter()
                .zip(requests)
                .map(|(o, r)| {
                    let stat = scratch.apply_op(txn, o, &mut Vec::new());
                    (
                        multi_result_type(r),
                        Ok(single_result(&scratch, o, r, true, stat)),
                    )
                })
                .collect();
            Some(results)
        }
        _ => None,
    };
    // The stat a setData or setACL left, taken as it applied: its reply
    // needs no second lookup of the node.
    let mut changed = None;
    if lenient {
        let (fired, skipped) = tree.apply_lenient(txn);
        if skipped > 0 {
            tracing::warn!(
                zxid = format_args!("{:#x}", txn.zxid),
                skipped,
                "txn already (partly) in the leader's snapshot: ops skipped"
            );
        }
        triggers.extend(fired);
    } else {
        tree.apply_observing(txn, triggers, |_, _, _, stat| changed = stat);
    }
    request.map(|request| match multi_results {
        Some(results) => (0, Some(Response::Multi(results))),
        None => result_of(tree, &txn.op, request, changed),
    })
}

/// The reply to a write, read off the tree after its txn was applied
/// (`changed`: the stat its op left, when the tree gave it).
fn result_of(
    tree: &Tree,
    op: &TxnOp,
    request: &Request,
    changed: Option<Stat>,
) -> (i32, Option<Response>) {
    match op {
        TxnOp::Error { code } => (*code, None),
        TxnOp::MultiError { codes } => {
            let results = codes.iter().map(|c| (op::ERROR, Err(*c))).collect();
            (0, Some(Response::Multi(results)))
        }
        other => (0, Some(single_result(tree, other, request, false, changed))),
    }
}

fn single_result(
    tree: &Tree,
    op: &TxnOp,
    request: &Request,
    in_multi: bool,
    changed: Option<Stat>,
) -> Response {
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
            Response::Stat(changed.unwrap_or_else(|| stat_of(path)))
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

impl crate::snapshot::policy::Sessions for Core {
    fn session_entries(&self) -> Vec<crate::snapshot::SessionEntry> {
        Core::session_entries(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::Acl;
    use bytes::Bytes;

    fn create(path: &str) -> Request {
        Request::Create {
            opcode: op::CREATE2,
            path: path.into(),
            data: Some(Bytes::from_static(b"d")),
            acl: vec![Acl::world_all()],
            flags: 0,
            ttl: -1,
        }
    }

    fn bare_core() -> Core {
        let recovered = Recovered {
            tree: Tree::new(),
            sessions: Default::default(),
            txns_replayed: 0,
        };
        Core::new(
            &Config::embedded_default(),
            1,
            recovered,
            None,
            Clock::read(),
        )
    }

    /// A batch's log buffer comes back and is the one a later batch fills,
    /// in the runner's order (take, append, hand back), and a batch with
    /// nothing to log between two that have records neither takes the
    /// spare nor carries a buffer away.
    #[test]
    fn log_buffers_are_reused_by_later_batches() {
        let mut core = bare_core();
        // One batch of 3,000 bytes of records, taken; the buffer the core
        // goes on with must hold at least `next_capacity`.
        let logged_batch = |core: &mut Core, zxid: i64, next_capacity: usize| {
            core.log_bytes.extend_from_slice(&[7; 3000]);
            core.log_zxids = Some((zxid, zxid));
            let batch = core.take_batch();
            assert_eq!(batch.log_bytes.len(), 3000);
            assert!(
                core.log_bytes.capacity() >= next_capacity,
                "batch {zxid}: the next one fills a buffer handed back"
            );
            batch
        };
        core.recycle_log_buffer(Vec::with_capacity(8192));
        let first = logged_batch(&mut core, 1, 8192);
        core.recycle_log_buffer(first.log_bytes);

        // Nothing logged: the buffer stays, the spare stays, and the empty
        // batch allocates nothing (the commit list is not replaced).
        let commits_capacity = core.commits.capacity();
        let empty = core.take_batch();
        assert!(empty.is_empty());
        assert_eq!(empty.log_bytes.capacity(), 0);
        assert_eq!(empty.commits.capacity(), 0);
        assert_eq!(core.commits.capacity(), commits_capacity);
        assert!(core.log_bytes.capacity() >= 8192);
        drop(empty);

        // The batch after it goes on in the first one's buffer.
        logged_batch(&mut core, 2, 3000);
    }

    /// A multi's per-op results read off the tree as each op applies equal
    /// those read off a scratch copy (the lenient path), and so do its
    /// triggers and the tree it leaves.
    #[test]
    fn multi_results_read_as_the_ops_apply() {
        let requests = vec![
            create("/a"),
            Request::SetData {
                path: "/a".into(),
                data: Some(Bytes::from_static(b"xy")),
                version: 0,
            },
            create("/a/b"),
            Request::Check {
                path: "/a".into(),
                version: 1,
            },
            Request::Delete {
                path: "/a/b".into(),
                version: -1,
            },
        ];
        let ctx = PrepContext {
            session_id: 3,
            extended_types_enabled: false,
            enforce_quota: false,
            providers: Default::default(),
            ids: &[],
        };
        let mut tree = Tree::new();
        let mut multi = Request::Multi(requests);
        let op = prep(&tree, &tree, &ctx, &mut multi);
        assert!(matches!(op, TxnOp::Multi(_)), "{op:?}");
        let txn = Txn {
            zxid: 5,
            time_ms: 7,
            session_id: 3,
            cxid: 1,
            op,
        };
        let mut scratch_path = tree.clone();
        let (mut t1, mut t2) = (Vec::new(), Vec::new());
        let r1 = apply_answering(&mut tree, &txn, Some(&multi), false, &mut t1);
        let r2 = apply_answering(&mut scratch_path, &txn, Some(&multi), true, &mut t2);
        assert_eq!(t1, t2);
        assert_eq!(r1, r2);
        let Some((0, Some(Response::Multi(results)))) = r1 else {
            panic!("{r1:?}");
        };
        assert_eq!(results.len(), 5);
        assert_eq!(
            tree.paths().collect::<Vec<_>>(),
            scratch_path.paths().collect::<Vec<_>>()
        );
        assert_eq!(tree.get("/a").map(|n| n.version), Some(1));
    }
}
