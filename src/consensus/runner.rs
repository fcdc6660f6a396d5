//! Drives the consensus core: the one async loop that feeds
//! `zab::ensemble::Node` its inputs (client writes, peer messages, ticks,
//! log syncs, epoch writes) and carries out each `Ready` it hands back; it
//! decides no protocol itself (DESIGN.md §5). A standalone server runs the
//! same loop with a lone voter (`Node::resume_alone`), no peer ports, and
//! its commit point is its own log's durable point.
//!
//! Two inboxes: clients' requests (from the shards' forwarders) and
//! control (peer messages, ticks, completed syncs). Requests are read only
//! while the batch being built has room (`fsyncBatchTxnsMax`,
//! `fsyncBatchBytesMax`, batches in flight, the epoch's counter): beyond
//! that the shards' forwarders wait and the shards' bounded queues push back
//! on their connections, while control keeps flowing (acks free room).
//!
//! What the core serves depends on the role `zab` reports:
//!
//! - leading an established epoch (a standalone server always): the core
//!   preps client requests into batches, assigning zxids from zab's mint;
//!   each batch's txns are proposed (their PROPOSALs go out while the
//!   leader's own log append and fdatasync run), and a batch is published
//!   to the shards once `zab`'s commit point covers it (a quorum of durable
//!   acks; for a lone voter, its own sync). The next batch is logged and
//!   proposed as soon as the last sync is done, so batches pipeline behind
//!   the followers' acks (group commit);
//! - following: proposals are logged and synced in groups (acked by `zab`
//!   after their sync), commits are applied to the core's tree and
//!   published; clients' writes, syncs and new sessions are forwarded to
//!   the leader (REQUEST) and answered here when their commit is applied;
//! - looking: as following, without a leader.
//!
//! Every role change of an ensemble member closes the clients' connections
//! and rebuilds the core from the disk (the newest snapshot and the log),
//! as ZooKeeper reloads its database: a leader that lost its quorum drops
//! what it had prepped but not committed. A standalone server's only role
//! change is the next epoch when the counter runs out; its sessions stay.

use std::cell::RefCell;
use std::collections::{BTreeMap, VecDeque};
use std::io;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_lite::future;
use glommio::channels::local_channel::{self, LocalReceiver, LocalSender};

use super::core::{frame_txn, Batch, Clock, Core, BATCH_REQUESTS_MAX};
use super::forward::{Forwarder, PendingConnect, PendingReconnect, CREATE_SESSION};
use super::link::{send_local, CoreEnds, LinkReceiver, LinkSender};
use super::messages::{Commit, Reply, ShardBatch, ToCore};
use crate::admin::health::{Health, ServerRole};
use crate::admin::metrics::group_commit::{CoreMetrics, CoreRecorder};
use crate::config::Config;
use crate::log::{LogSettings, TxnLog};
use crate::peer::net::{PeerAddrs, PeerEvent, PeerEvents, PeerNet};
use crate::peer::session_packets::{self, Forwarded, Revalidate};
use crate::peer::zk_txn;
use crate::proto::codes::{err, op};
use crate::proto::{Request, Response};
use crate::recovery::Recovered;
use crate::session::board::SessionBoard;
use crate::tree::Tree;
use crate::tree::Txn;
use crate::zab::ensemble::{self, Input, Node, Ready, Role};
use crate::zab::zxid::Mint;
use crate::zab::{Epochs, Sid};

use super::epoch_files::{ACCEPTED_EPOCH, CURRENT_EPOCH};

/// Inbox bounds: shard forwarders (requests) and peer readers, tickers and
/// sync jobs (control) wait beyond them.
const REQUESTS_MAX: usize = 4096;
const CONTROL_MAX: usize = 8192;
/// Batches logged and proposed but not yet committed, at most.
const BATCHES_IN_FLIGHT_MAX: usize = 64;
/// Requests handled before other tasks on the executor get a turn.
const YIELD_EVERY: usize = 64;

pub struct CoreSetup {
    pub config: Arc<Config>,
    pub myid: Sid,
    /// Standalone (no `server.N` ensemble): a lone voter, no peer ports.
    pub standalone: bool,
    pub epochs: Epochs,
    pub recovered: Recovered,
    /// The log, as ZooKeeper's txn encoding (what DIFF sends).
    pub history: Vec<ensemble::Txn>,
    /// The history starts after this zxid (a SNAP's snapshot), or 0.
    pub history_base: i64,
    /// The lost-disk marker is in dataDir (`startup::damaged`).
    pub disk_lost: bool,
    pub peers: BTreeMap<Sid, PeerAddrs>,
    /// The election and quorum ports, bound (None standalone).
    pub listeners: Option<(std::net::TcpListener, std::net::TcpListener)>,
    /// sslQuorum's TLS for the peer ports, built at startup.
    pub quorum_tls: Option<Arc<crate::tls::quorum::QuorumTlsContext>>,
    pub health: Arc<Health>,
    pub sessions: Arc<SessionBoard>,
    /// Where to publish group-commit metrics, when they are on.
    pub metrics: Option<Arc<CoreMetrics>>,
}

enum Event {
    Request(ToCore),
    Tick,
    Reap,
    /// Read on the connection `EventTag` names: dropped when that is no
    /// longer the current one with its peer by the time it is handled.
    Peer(crate::peer::net::EventTag, PeerEvent),
    /// A log sync through this zxid completed.
    Synced(i64, io::Result<()>),
}

/// A log sync job (`TxnLog::sync_job`), boxed to be held across turns.
type SyncFuture = std::pin::Pin<Box<dyn std::future::Future<Output = io::Result<()>>>>;

/// A log sync running: the zxid it makes durable and the job.
struct SyncJob {
    through: i64,
    job: SyncFuture,
}

/// Resolves when the running sync job completes (never while none runs),
/// taking it out of `slot`. Dropped unresolved, it leaves the job running.
async fn sync_completed(slot: &mut Option<SyncJob>) -> Event {
    let Some(s) = slot.as_mut() else {
        return future::pending().await;
    };
    let result = s.job.as_mut().await;
    let through = slot.take().expect("the job just completed").through;
    Event::Synced(through, result)
}

/// The running sync job's completion, if it has completed by now.
async fn sync_completed_now(slot: &mut Option<SyncJob>) -> Option<Event> {
    if slot.is_none() {
        return None;
    }
    future::poll_once(sync_completed(slot)).await
}

/// The tracing target of one line per log write and per completed sync
/// (debug level): what a power-cut test needs to know which records one
/// write held and whether its sync completed.
pub const LOG_BATCHES: &str = "ringkeeper::log_batches";

fn log_batch_appended(first: i64, last: i64) {
    tracing::debug!(
        target: LOG_BATCHES,
        first = format_args!("{first:#x}"),
        last = format_args!("{last:#x}"),
        "log batch appended"
    );
}

/// The tick of the state machine: a fraction of tickTime, so that the
/// election's waits and initLimit/syncLimit both count in it, finely
/// enough that a silent leader is dropped close to syncLimit x tickTime,
/// and at most a fifth of the finalize wait, which would otherwise be
/// quantized away (50 ms at tickTime 2000 was one 100 ms tick: a decision
/// anywhere from 0 to 100 ms after the quorum agreed).
fn tick_ms(config: &Config) -> u64 {
    let finalize = (config.election_finalize_wait_ms / 5).max(5);
    (config.tick_time_ms as u64 / 10)
        .clamp(5, 100)
        .min(finalize)
}

pub fn timings(config: &Config) -> ensemble::Timings {
    let tick = tick_ms(config);
    let ticks = |ms: u64| ms.div_ceil(tick).max(1) as u32;
    let tick_time = config.tick_time_ms as u64;
    ensemble::Timings {
        election: crate::zab::election::Timing {
            // FastLeaderElection's finalizeWait (shorter by default, see
            // the key) and its notification timeout's bounds.
            finalize_wait_ticks: ticks(config.election_finalize_wait_ms),
            min_not_timeout_ticks: ticks(200),
            max_not_timeout_ticks: ticks(60_000),
        },
        init_limit_ticks: ticks(config.init_limit as u64 * tick_time),
        sync_limit_ticks: ticks(config.sync_limit as u64 * tick_time),
    }
}

struct Runner {
    config: Arc<Config>,
    myid: Sid,
    /// A standalone server: a lone voter, no peers (`CoreSetup::standalone`).
    standalone: bool,
    node: Node,
    /// The peer ports (None standalone).
    net: Option<PeerNet>,
    core: Core,
    role: Role,
    log: TxnLog,
    /// False once a standalone server's log failed: writes are refused
    /// until restart, reads go on (an ensemble member stops instead).
    writable: bool,
    metrics: CoreRecorder,
    sync_stats: SyncStats,
    /// Leader: the zxids of the batch whose sync runs (metrics).
    syncing_batch: Option<(i64, i64)>,
    shards: Vec<LinkSender<ShardBatch>>,
    health: Arc<Health>,
    sessions: Arc<SessionBoard>,
    events: Rc<LocalSender<Event>>,
    /// Follower: txns logged (or being logged) and not yet applied.
    unapplied: BTreeMap<i64, Txn>,
    /// Follower: framed records waiting for the next log append.
    pending_bytes: Vec<u8>,
    pending_zxids: Option<(i64, i64)>,
    /// A sync was asked for (`Ready::sync`) and has not started yet.
    want_sync: bool,
    /// The zxid the running sync covers.
    syncing: Option<i64>,
    /// The running sync job, polled by the loop itself (a task spawned per
    /// sync, and its Synced event through the control channel, were about
    /// 2k instructions of an idle write).
    sync_job: Option<SyncJob>,
    /// When this server began looking for a leader (mntr's election_time).
    looking_since: Option<std::time::Instant>,
    /// Leader: batches proposed and waiting for their commit, in order.
    in_flight: VecDeque<Batch>,
    /// Highest zxid `zab` reported committed (and this server applied).
    committed: i64,
    /// The last zxid a completed sync made durable in this member's log:
    /// what a follower's records carry as `durable_zxid` (`log::record`),
    /// never the leader's commit point, which can run ahead of this disk.
    log_durable: i64,
    /// A proposal decoded before `zab` saw it (see `received_proposal`),
    /// for `log_proposal`.
    decoded: Option<Txn>,
    /// Ticks counted for `crate::fault`.
    fault_ticks: u64,
    /// Leader: the highest proposal ACK from each follower not yet handed
    /// to zab. Followers ack every proposal (Java leaders count them one
    /// by one); zab only needs each follower's highest, so a run of them
    /// is one step (see `coalesce`).
    pending_acks: BTreeMap<Sid, i64>,
    /// Follower: the highest COMMIT from the leader not yet handed to zab
    /// (one per proposal on the wire, as Java followers need).
    pending_commit: Option<(Sid, i64)>,
    snapshots: crate::snapshot::policy::Policy,
    /// Follower: its clients' requests waiting for the leader.
    forwarder: Forwarder,
    /// Leader: the tree as of the last batch committed: what a SNAP sends,
    /// and what a standalone server's failed log rolls back to. None when
    /// the core shares its shard's tree (which only holds committed txns).
    committed_tree: Option<Tree>,
    /// Following a leader whose SNAP this server installed: its snapshot
    /// is fuzzy, so the txns that follow replay leniently.
    replay_lenient: bool,
    /// Leader: the server each session's requests come through
    /// (SessionTracker's owner), for SESSIONMOVED.
    session_owners: super::session_owners::SessionOwners,
    /// The mint zab handed out with the epoch it now leads, until the core
    /// takes it at the role change.
    mint: Option<Mint>,
}

/// Runs the core; `links[i]` is its link to shard i. `shared_tree`: the
/// tree of the one shard on this executor, for a standalone core to share
/// (see [`Core::share_tree`]).
pub async fn run(setup: CoreSetup, links: Vec<CoreEnds>, shared_tree: Option<Rc<RefCell<Tree>>>) {
    let config = setup.config.clone();
    let (tx, control_rx) = local_channel::new_bounded::<Event>(CONTROL_MAX);
    let tx = Rc::new(tx);
    let mut shards = Vec::with_capacity(links.len());
    let mut from_shards = Vec::with_capacity(links.len());
    for link in links {
        shards.push(link.to_shard);
        from_shards.push(link.from_shard);
    }
    let requests_rx = requests_from(from_shards);
    // The runner takes peer events straight from the net's channel (a task
    // moving them into the control channel was one more task and channel
    // per packet read).
    let (net, peer_rx) = match setup.listeners {
        Some((election, quorum)) => {
            let init_timeout =
                Duration::from_millis(config.init_limit as u64 * config.tick_time_ms as u64);
            let (net, peer_rx) = PeerNet::start(
                setup.myid,
                setup.peers.clone(),
                init_timeout,
                election,
                quorum,
                setup.quorum_tls.clone(),
                config.quorum_sasl.clone().map(Arc::new),
            );
            (Some(net), Some(peer_rx))
        }
        None => (None, None),
    };
    // A lone voter needs ticks only for session expiry (and the fault
    // hooks): twice per tickTime, as ZooKeeper's session buckets.
    let tick = if setup.standalone {
        (config.tick_time_ms as u64 / 2).clamp(10, 1000)
    } else {
        tick_ms(&config)
    };
    ticker(&tx, Duration::from_millis(tick), || Event::Tick);
    ticker(
        &tx,
        Duration::from_millis(config.container_check_interval_ms),
        || Event::Reap,
    );
    let voters: std::collections::BTreeSet<Sid> = if setup.standalone {
        [setup.myid].into()
    } else {
        setup.peers.keys().copied().collect()
    };
    let last = setup.recovered.tree.last_zxid();
    let node = Node::new(
        setup.myid,
        voters.clone(),
        timings(&config),
        setup.epochs,
        setup.history,
    )
    .with_history_base(setup.history_base);
    let node = if setup.disk_lost {
        node.with_disk_lost()
    } else {
        node
    };
    let log = TxnLog::new(log_settings(&config), last);
    let metrics = CoreRecorder::new(setup.metrics);
    let mut core = serving_core(
        &config,
        shards.len(),
        setup.recovered,
        Serving::Looking,
        setup.standalone,
    );
    if let Some(tree) = shared_tree {
        assert!(
            setup.standalone && shards.len() == 1,
            "a tree is shared with a standalone server's only shard"
        );
        core.share_tree(tree);
    }
    let mut r = Runner {
        snapshots: crate::snapshot::policy::Policy::new(&config, metrics.shared()),
        core,
        standalone: setup.standalone,
        config,
        myid: setup.myid,
        node,
        net,
        role: Role::Looking,
        log,
        writable: true,
        metrics,
        sync_stats: SyncStats::new(),
        syncing_batch: None,
        shards,
        health: setup.health,
        sessions: setup.sessions,
        events: tx,
        unapplied: BTreeMap::new(),
        pending_bytes: Vec::new(),
        pending_zxids: None,
        want_sync: false,
        syncing: None,
        sync_job: None,
        looking_since: Some(std::time::Instant::now()),
        in_flight: VecDeque::new(),
        committed: last,
        log_durable: last,
        decoded: None,
        fault_ticks: 0,
        pending_acks: BTreeMap::new(),
        pending_commit: None,
        forwarder: Forwarder::default(),
        session_owners: Default::default(),
        replay_lenient: false,
        committed_tree: None,
        mint: None,
    };
    r.core.set_session_board(r.sessions.clone());
    let ready = if r.standalone {
        tracing::info!(
            myid = r.myid,
            last_zxid = format_args!("{last:#x}"),
            shards = r.shards.len(),
            log_write = ?r.log.write_mode(),
            shared_tree = r.core.shares_tree(),
            "consensus core running: a standalone server (an ensemble of one)"
        );
        r.node.resume_alone()
    } else {
        r.health.set_role(ServerRole::Looking);
        r.health
            .ensemble
            .quorum_size
            .store(voters.len() as u64, std::sync::atomic::Ordering::Relaxed);
        tracing::info!(
            myid = r.myid,
            last_zxid = format_args!("{last:#x}"),
            accepted_epoch = setup.epochs.accepted,
            current_epoch = setup.epochs.current,
            "ensemble member running: looking for a leader"
        );
        r.node.step(Input::Start)
    };
    r.execute(ready).await;
    loop {
        r.metrics
            .loop_turn(r.core.batch_txns(), r.syncing_batch, requests_rx.len());
        // A completed sync first, then control, then peers; requests only
        // while the batch has room.
        let first = if r.has_room() {
            future::or(
                async { Some(sync_completed(&mut r.sync_job).await) },
                future::or(
                    control_rx.recv(),
                    future::or(peer_event(&peer_rx), next_request(&requests_rx)),
                ),
            )
            .await
        } else {
            future::or(
                async { Some(sync_completed(&mut r.sync_job).await) },
                future::or(control_rx.recv(), peer_event(&peer_rx)),
            )
            .await
        };
        let Some(first) = first else { break };
        // What the turn sends to peers goes out together: at the points
        // below that flush it, or when the cork drops at the turn's end.
        let mut cork = r.net.as_ref().map(PeerNet::cork);
        let mut next = Some(first);
        let mut handled = 0;
        // One clock reading for the requests drained without yielding (two
        // vDSO calls per request were 1% of a write's CPU): they arrived
        // together, as ZooKeeper's requests prepped within one millisecond
        // share their txn time. Read when the first of them comes (an
        // ensemble's events read their own, where they need it).
        let mut clock: Option<Clock> = None;
        while let Some(event) = next.take() {
            match event {
                // A lone voter's client requests go straight to its core:
                // nothing of zab comes between them (the hot path).
                Event::Request(m) if r.standalone => {
                    r.core.handle(m, *clock.get_or_insert_with(Clock::read))
                }
                event => {
                    r.handle(event).await;
                    clock = None;
                }
            }
            handled += 1;
            if handled % YIELD_EVERY == 0 {
                // Sharing an executor with a shard, the core must not hold
                // it for a whole large batch (what it sent goes first).
                drop(cork.take());
                future::yield_now().await;
                cork = r.net.as_ref().map(PeerNet::cork);
                clock = None;
            }
            // Control events are looked at through their senders' length
            // (polling an empty channel registers and drops a waker); peer
            // events and requests through try_recv, which registers none.
            next = if let Some(synced) = sync_completed_now(&mut r.sync_job).await {
                Some(synced)
            } else if r.events.len() > 0 {
                future::poll_once(control_rx.recv()).await.flatten()
            } else if let Some((tag, e)) = peer_rx.as_ref().and_then(PeerEvents::try_recv_tagged) {
                Some(Event::Peer(tag, e))
            } else if r.has_room() && handled < BATCH_REQUESTS_MAX {
                requests_rx.try_recv().map(Event::Request)
            } else {
                None
            };
        }
        if r.fsync_delay_due() {
            // Let more writes join the batch before paying for a sync: what
            // arrives meanwhile is prepped into it. What the turn sent so far
            // does not wait for that.
            drop(cork.take());
            let deadline = Instant::now() + Duration::from_micros(r.config.fsync_delay_us);
            loop {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() || !r.has_room() {
                    break;
                }
                let got = future::or(next_request(&requests_rx), async {
                    glommio::timer::sleep(left).await;
                    None
                })
                .await;
                match got {
                    Some(event) => r.handle(event).await,
                    None => break,
                }
            }
            // Corked again: the leader's proposals go after its log write.
            cork = r.net.as_ref().map(PeerNet::cork);
        }
        r.flush().await;
        drop(cork);
    }
}

/// Where the runner takes client requests from. A lone shard on the core's
/// own executor sends into a channel the runner reads itself; otherwise a
/// task per shard moves its link's requests into one queue (`REQUESTS_MAX`)
/// and the runner reads that. What else is queued moves on without a
/// waiter per message (both channels' futures and wakers were 3% of a
/// write's CPU); a full queue holds the shards back.
fn requests_from(mut links: Vec<LinkReceiver<ToCore>>) -> LocalReceiver<ToCore> {
    if links.len() == 1 {
        // One channel less per write: the second was about 250 of a
        // write's 8,200 instructions (tuning/saturated-instructions.sh).
        match links.pop() {
            Some(LinkReceiver::Local(r)) => return r,
            Some(shared) => links.push(shared),
            None => {}
        }
    }
    let (requests_tx, requests_rx) = local_channel::new_bounded::<ToCore>(REQUESTS_MAX);
    let requests_tx = Rc::new(requests_tx);
    for r in links {
        let tx = requests_tx.clone();
        glommio::spawn_local(async move {
            while let Some(first) = r.recv().await {
                let mut next = Some(first);
                while let Some(m) = next.take() {
                    if send_local(&tx, m).await.is_err() {
                        return;
                    }
                    next = r.try_recv();
                }
            }
        })
        .detach();
    }
    requests_rx
}

/// The next client request. A queue whose senders are all gone (the shards
/// shut down) never yields one; the runner ends by its control channel.
async fn next_request(requests: &LocalReceiver<ToCore>) -> Option<Event> {
    match requests.recv().await {
        Some(m) => Some(Event::Request(m)),
        None => future::pending().await,
    }
}

/// The next peer event still current; never, without a peer net (a lone
/// voter) or once it is gone.
async fn peer_event(events: &Option<PeerEvents>) -> Option<Event> {
    match events {
        Some(events) => match events.recv_tagged().await {
            Some((tag, e)) => Some(Event::Peer(tag, e)),
            None => future::pending().await,
        },
        None => future::pending().await,
    }
}

fn ticker(tx: &Rc<LocalSender<Event>>, every: Duration, what: fn() -> Event) {
    let tx = tx.clone();
    glommio::spawn_local(async move {
        loop {
            glommio::timer::sleep(every).await;
            if tx.send(what()).await.is_err() {
                break;
            }
        }
    })
    .detach();
}

/// What the core serves in a role.
#[derive(Clone, Copy)]
enum Serving {
    /// Reads and read-only sessions only (no leader to write through).
    Looking,
    /// Reads; writes and new sessions forwarded to the leader.
    Following { myid: Sid },
    /// Everything, assigning zxids from `mint`.
    Leading { mint: Mint, myid: Sid },
}

/// About what a snapshot of `tree` takes: its data, and for each znode
/// its stat, path and ACL reference.
fn snapshot_bytes(tree: &crate::tree::Tree) -> u64 {
    tree.approximate_data_size() + tree.znode_count() as u64 * 120
}

/// Where a rebuild takes the data from.
#[derive(Clone, Copy, Debug)]
enum Reload {
    /// The log was rewritten (TRUNC, SNAP): read it back.
    Disk,
    /// The core's own data when it is the log's (see `state_in_memory`),
    /// else the disk.
    MemoryIfSame,
}

/// The core for a role over `recovered`. A standalone server's core
/// carries no config node and keeps ZooKeeper's standalone session ids.
fn serving_core(
    config: &Config,
    shard_count: usize,
    recovered: Recovered,
    serving: Serving,
    standalone: bool,
) -> Core {
    let mut recovered = recovered;
    if !standalone {
        recovered
            .tree
            .set_config_node(config.membership_text().as_bytes(), super::core::now_ms());
    }
    let clock = Clock::read();
    let mint = match serving {
        Serving::Leading { mint, .. } => Some(mint),
        _ => None,
    };
    let mut core = Core::new(config, shard_count, recovered, mint, clock);
    match serving {
        Serving::Leading { myid, .. } if !standalone => core.set_server_id(myid as i64, clock),
        Serving::Leading { .. } => {}
        Serving::Following { myid } => {
            core.set_server_id(myid as i64, clock);
            core.follow();
        }
        Serving::Looking if standalone => {}
        Serving::Looking => {
            let tree = core.tree().clone();
            let rest = core.refuse_writes(Some(tree));
            debug_assert!(rest.is_empty());
        }
    }
    core
}

pub(super) fn log_settings(config: &Config) -> LogSettings {
    LogSettings {
        dir: config.data_log_dir.clone(),
        preallocate_bytes: config.preallocate_bytes,
        segment_bytes_max: config.segment_bytes_max,
        force_sync: config.force_sync,
        write: config.log_write,
    }
}

pub(super) async fn publish(batch: Batch, shards: &[LinkSender<ShardBatch>]) {
    for (shard, b) in shards.iter().zip(batch.into_shard_batches()) {
        if let Some(b) = b {
            if shard.send(b).await.is_err() {
                tracing::error!("a shard is gone");
            }
        }
    }
}

/// Group-commit counters, logged at info every `SYNC_REPORT_EVERY` while
/// writes flow: fsyncs/s, txns per fsync, mean time a sync took.
struct SyncStats {
    since: Instant,
    syncs: u64,
    txns: u64,
    sync_time: Duration,
    started: Option<Instant>,
}

const SYNC_REPORT_EVERY: Duration = Duration::from_secs(10);

impl SyncStats {
    fn synced(&mut self, txns: u64) {
        let now = Instant::now();
        if let Some(s) = self.started.take() {
            self.sync_time += now - s;
        }
        self.syncs += 1;
        self.txns += txns;
        let elapsed = now - self.since;
        if elapsed >= SYNC_REPORT_EVERY {
            tracing::info!(
                fsyncs_per_s = format_args!("{:.0}", self.syncs as f64 / elapsed.as_secs_f64()),
                txns_per_s = format_args!("{:.0}", self.txns as f64 / elapsed.as_secs_f64()),
                txns_per_fsync = format_args!("{:.1}", self.txns as f64 / self.syncs as f64),
                mean_sync_us = (self.sync_time.as_micros() as u64) / self.syncs.max(1),
                "group commit"
            );
            *self = SyncStats::new();
        }
    }

    fn new() -> SyncStats {
        SyncStats {
            since: Instant::now(),
            syncs: 0,
            txns: 0,
            sync_time: Duration::ZERO,
            started: None,
        }
    }
}

impl Runner {
    /// The peer ports: only an ensemble member, whose zab has peers, gets
    /// here.
    fn net(&self) -> &PeerNet {
        self.net
            .as_ref()
            .expect("only an ensemble member talks to peers")
    }

    /// Whether more requests may join the batch being built.
    fn has_room(&self) -> bool {
        self.in_flight.len() < BATCHES_IN_FLIGHT_MAX
            && self.core.batch_txns() < self.config.fsync_batch_txns_max
            && self.core.batch_bytes() < self.config.fsync_batch_bytes_max
            && !self.epoch_ending()
    }

    /// Leader: a batch waits for its sync, which `fsyncDelayUs` holds back
    /// for more writes to join it.
    fn fsync_delay_due(&self) -> bool {
        self.config.fsync_delay_us > 0
            && self.writable
            && self.syncing.is_none()
            && matches!(self.role, Role::Broadcasting { .. })
            && self.core.batch_txns() > 0
    }

    /// Leader: the epoch's zxid counter reached `epochCounterLimit`.
    fn epoch_ending(&self) -> bool {
        matches!(self.role, Role::Broadcasting { .. }) && self.core.epoch_ending()
    }

    async fn handle(&mut self, event: Event) {
        if let Event::Peer(tag, e) = &event {
            if !self.net().current(*tag, e) {
                // Its connection closed or was replaced while it waited here
                // (issue 26, defect 7): an old session's SNAP would roll a
                // syncing follower back.
                return;
            }
            if self.coalesce(e) {
                return;
            }
        }
        // Anything else sees zab with every ack and commit before it.
        if !self.pending_acks.is_empty() || self.pending_commit.is_some() {
            self.step_coalesced().await;
        }
        // The clock is read where the event needs it: a proposal, a commit
        // or a sync's completion does not (two clock readings per event
        // were about a tenth of a follower's loop).
        match event {
            Event::Request(m) if self.standalone => self.core.handle(m, Clock::read()),
            Event::Request(m) => {
                let clock = Clock::read();
                match self.role {
                    Role::Following { leader } => self.follower_request(leader, m, clock),
                    Role::Broadcasting { .. } => match &m {
                        ToCore::Connect { session_id, .. } if *session_id != 0 => {
                            // A client came back to the leader itself.
                            self.session_owners.set(*session_id, self.myid);
                            self.core.handle(m, clock)
                        }
                        ToCore::Write {
                            conn,
                            session_id,
                            xid,
                            request,
                            ..
                        } if !matches!(**request, Request::CloseSession)
                            && self
                                .session_owners
                                .get(*session_id)
                                .is_some_and(|owner| owner != self.myid) =>
                        {
                            // SessionTrackerImpl.checkSession on the leader's own
                            // clients: the session moved to a follower and this
                            // is its old connection. An error txn, as for a
                            // forwarded request, and the connection closes
                            // unanswered (ZOOKEEPER-710). closeSession is not
                            // checked, as in ZooKeeper.
                            self.core
                                .forwarded_error(*session_id, *xid, err::SESSION_MOVED, clock);
                            self.core.close_connection(*conn);
                        }
                        _ => self.core.handle(m, clock),
                    },
                    _ => self.core.handle(m, clock),
                }
            }
            Event::Tick => {
                crate::fault::core_ticked(&mut self.fault_ticks);
                let ready = self.node.step(Input::Tick);
                self.execute(ready).await;
                self.core.expire_sessions(Clock::read());
                let core = &self.core;
                self.session_owners
                    .prune(core.session_count(), |s| core.session_timeout(s).is_some());
            }
            Event::Reap => {
                if matches!(self.role, Role::Broadcasting { .. }) {
                    let per_pass = (self.config.container_max_per_minute as u64
                        * self.config.container_check_interval_ms)
                        .div_ceil(60_000)
                        .max(1) as usize;
                    self.core.reap(
                        per_pass,
                        self.config.container_max_never_used_interval_ms,
                        Clock::read(),
                    );
                }
            }
            Event::Peer(_, PeerEvent::Received { from, msg }) => {
                let counter = match msg {
                    ensemble::Msg::Proposal(_) => {
                        Some(&self.health.ensemble.learner_proposals_received)
                    }
                    ensemble::Msg::Commit(_) => {
                        Some(&self.health.ensemble.learner_commits_received)
                    }
                    _ => None,
                };
                if let Some(c) = counter {
                    c.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
                if let ensemble::Msg::Proposal(t) = &msg {
                    if !self.received_proposal(from, t) {
                        return;
                    }
                }
                let ready = self.node.step(Input::Receive { from, msg });
                self.execute(ready).await;
            }
            Event::Peer(_, PeerEvent::Request { from, request }) => {
                if !matches!(self.role, Role::Broadcasting { .. }) {
                } else if request.op == op::SYNC {
                    // Its point: every zxid assigned so far, proposed or
                    // still in the batch being built. zab answers it in its
                    // place among this learner's COMMITs.
                    let point = self.core.last_assigned();
                    let ready = self.node.step(Input::Sync { from, point });
                    self.execute(ready).await;
                } else {
                    self.forwarded(from, request, Clock::read());
                }
            }
            Event::Peer(_, PeerEvent::Touches { sessions, .. }) => {
                if matches!(self.role, Role::Broadcasting { .. }) {
                    let now = Instant::now();
                    for (id, _) in sessions {
                        self.core.touch(id, now);
                    }
                }
            }
            Event::Peer(_, PeerEvent::SyncAnswered { .. }) => {
                if let Some(s) = self.forwarder.sync_answered() {
                    self.core.reply(Reply {
                        conn: s.conn,
                        xid: s.xid,
                        err: 0,
                        body: Some(Response::Path(s.path)),
                    });
                }
            }
            Event::Peer(_, PeerEvent::Revalidate { from, what }) => {
                self.revalidate(from, what, Clock::read())
            }
            Event::Peer(
                _,
                PeerEvent::Snapshot {
                    from,
                    zxid,
                    tree,
                    sessions,
                },
            ) => {
                if !self.node.syncing_with(from) {
                    tracing::warn!(peer = from, "a SNAP out of protocol order: closing");
                    self.net().close_quorum(from);
                    return;
                }
                self.install_snapshot(zxid, *tree, &sessions).await;
                let ready = self.node.step(Input::SnapshotInstalled { from, zxid });
                self.execute(ready).await;
            }
            Event::Peer(_, PeerEvent::Disconnected(sid)) => {
                let ready = self.node.step(Input::Disconnected(sid));
                self.execute(ready).await;
            }
            Event::Synced(z, result) => {
                self.syncing = None;
                if let Err(e) = result {
                    self.log_failed(e).await;
                    return;
                }
                if let Some((first, last)) = self.syncing_batch.take() {
                    self.sync_stats.synced((last - first + 1) as u64);
                    self.metrics.durable();
                }
                self.log_durable = self.log_durable.max(z);
                tracing::debug!(
                    target: LOG_BATCHES,
                    through = format_args!("{z:#x}"),
                    "log synced"
                );
                let ready = self.node.step(Input::Durable(z));
                self.execute(ready).await;
            }
        }
    }

    /// Follower: a client's request. Writes, syncs and new sessions go to
    /// the leader; the rest (reconnects, touches, disconnects) the core
    /// handles here.
    fn follower_request(&mut self, leader: Sid, m: ToCore, clock: Clock) {
        let full = self.forwarder.is_full();
        let send = |net: &PeerNet, f: Forwarded| net.send_request(leader, &f);
        match m {
            ToCore::Write {
                conn,
                session_id,
                xid,
                request,
                ids,
                client_body,
            } => {
                if full {
                    tracing::warn!(
                        "{} requests wait for the leader: refusing more",
                        super::forward::PENDING_MAX
                    );
                    self.core.reply(Reply {
                        conn,
                        xid,
                        err: err::SYSTEM_ERROR,
                        body: None,
                    });
                    return;
                }
                self.note_touch(session_id, clock);
                let f = if matches!(*request, Request::Sync { .. }) {
                    self.forwarder.sync(session_id, xid, conn, &request)
                } else {
                    self.forwarder
                        .write(session_id, xid, conn, request, client_body, &ids)
                };
                send(self.net(), f);
            }
            ToCore::MalformedWrite { conn, xid, .. } => self.core.reply(Reply {
                conn,
                xid,
                err: err::MARSHALLING_ERROR,
                body: None,
            }),
            ToCore::Connect {
                conn,
                session_id: 0,
                timeout_ms,
                has_read_only,
                ..
            } => match self.core.mint_session_id().filter(|_| !full) {
                Some(id) => {
                    let pending = PendingConnect {
                        conn,
                        timeout_ms,
                        has_read_only,
                    };
                    let f = self.forwarder.create_session(id, pending);
                    send(self.net(), f);
                }
                None => self.core.refuse_connect(conn, has_read_only),
            },
            ToCore::Connect {
                conn,
                session_id,
                passwd,
                timeout_ms,
                has_read_only,
                can_be_read_only,
            } if !full && passwd == crate::session::password_for(session_id) => {
                // ZooKeeper's learner asks the leader first (REVALIDATE).
                let pending = PendingReconnect {
                    conn,
                    passwd,
                    timeout_ms,
                    has_read_only,
                    can_be_read_only,
                };
                if self.forwarder.revalidate(session_id, pending) {
                    let p = session_packets::revalidate_request(session_id, timeout_ms);
                    self.net().send_packet(leader, &p);
                }
            }
            ToCore::Touch(ids) => {
                for id in ids {
                    self.note_touch(id, clock);
                }
            }
            other => self.core.handle(other, clock),
        }
    }

    /// A REVALIDATE: a leader answers a follower's question (and the
    /// session's requests now come through that follower); a follower
    /// connects (or refuses) the clients that waited for the answer.
    fn revalidate(&mut self, from: Sid, what: Revalidate, clock: Clock) {
        match (what, self.role) {
            (
                Revalidate::Asked {
                    session_id,
                    timeout_ms: _,
                },
                Role::Broadcasting { .. },
            ) => {
                let valid = self.core.revalidate(session_id, clock.now);
                if valid {
                    self.session_owners.set(session_id, from);
                }
                let answer = session_packets::revalidate_answer(session_id, valid);
                self.net().send_packet(from, &answer);
            }
            (Revalidate::Answered { session_id, valid }, Role::Following { leader })
                if leader == from =>
            {
                for r in self.forwarder.revalidated(session_id) {
                    if valid {
                        self.core.handle(
                            ToCore::Connect {
                                conn: r.conn,
                                session_id,
                                passwd: r.passwd,
                                timeout_ms: r.timeout_ms,
                                has_read_only: r.has_read_only,
                                can_be_read_only: r.can_be_read_only,
                            },
                            clock,
                        );
                        self.note_touch(session_id, clock);
                    } else {
                        self.core.refuse_connect(r.conn, r.has_read_only);
                    }
                }
            }
            _ => tracing::warn!(peer = from, ?what, "a REVALIDATE out of place: ignored"),
        }
    }

    /// Follower: a session of this server's clients was active; the leader
    /// hears it in the next PING reply.
    fn note_touch(&mut self, id: i64, clock: Clock) {
        self.core.touch(id, clock.now);
        if let Some(timeout) = self.core.session_timeout(id) {
            self.forwarder.touched(id, timeout);
        }
    }

    /// Leader: a request a follower forwarded for its client.
    fn forwarded(&mut self, from: Sid, f: Forwarded, clock: Clock) {
        match f.op {
            CREATE_SESSION => match f.body.get(..4) {
                Some(b) => {
                    self.session_owners.set(f.session_id, from);
                    let timeout = i32::from_be_bytes(b.try_into().expect("4 bytes"));
                    self.core
                        .create_forwarded_session(f.session_id, timeout, clock);
                }
                None => tracing::warn!(peer = from, "a createSession without its timeout"),
            },
            // `run` hands syncs to zab (`Input::Sync`).
            op::SYNC => unreachable!("a forwarded sync goes to zab"),
            op::CLOSE_SESSION => {
                self.session_owners.remove(f.session_id);
                let request = Request::decode(op::CLOSE_SESSION, &f.body).ok();
                let ids: super::messages::AuthIds = f.auth.into();
                self.core
                    .handle_forwarded(f.session_id, f.cxid, request, ids, clock);
            }
            // SessionTrackerImpl.checkSession: the server a session
            // revalidated at (or first wrote through) owns it; a request
            // from its old server is refused.
            _ if self.session_owners.get_or_set(f.session_id, from) != from => {
                self.core
                    .forwarded_error(f.session_id, f.cxid, err::SESSION_MOVED, clock);
            }
            opcode => {
                let request = Request::decode(opcode, &f.body).ok();
                let ids: super::messages::AuthIds = f.auth.into();
                self.core
                    .handle_forwarded(f.session_id, f.cxid, request, ids, clock);
            }
        }
    }

    /// The txn log failed. An ensemble member cannot promise durability
    /// any more: it stops (the rest of the ensemble goes on without it;
    /// ZooKeeper exits too) rather than serve from a log it cannot trust.
    /// A standalone server keeps serving what is durable: nothing in
    /// flight or after it is acknowledged, writes are refused from now on,
    /// reads go on from the committed tree, and it reports itself
    /// read-only (`admin::health`).
    async fn log_failed(&mut self, e: io::Error) {
        let at = self.log.location().display().to_string();
        if !self.standalone {
            tracing::error!("txn log failed at {at} ({e}): stopping this ensemble member");
            std::process::exit(3);
        }
        tracing::error!(
            "txn log failed at {at} ({e}): refusing writes until restart; \
             serving reads and read-only sessions"
        );
        self.refuse_writes().await;
    }

    /// A standalone server can no longer log: every batch not yet
    /// committed fails, and the core refuses writes from now on.
    async fn refuse_writes(&mut self) {
        if self.writable {
            self.health.log_failed();
        }
        self.writable = false;
        self.want_sync = false;
        self.syncing_batch = None;
        let rest = self.core.refuse_writes(self.committed_tree.clone());
        for batch in std::mem::take(&mut self.in_flight) {
            publish(self.core.failed_batch(batch), &self.shards).await;
        }
        publish(self.core.failed_batch(rest), &self.shards).await;
    }

    /// After a run of events: a leader proposes what the core batched, and
    /// whoever has records waiting starts the next log sync.
    async fn flush(&mut self) {
        self.step_coalesced().await;
        if matches!(self.role, Role::Broadcasting { .. }) && self.syncing.is_none() {
            self.propose_batch().await;
        } else if !matches!(self.role, Role::Broadcasting { .. }) {
            // Answers to connects and reads-only sessions go out at once.
            let batch = self.core.take_batch();
            if !batch.is_empty() {
                publish(batch, &self.shards).await;
            }
        }
        if self.epoch_ending()
            && self.writable
            && self.in_flight.is_empty()
            && self.core.batch_txns() == 0
            && self.syncing.is_none()
        {
            // Everything assigned is committed: the next epoch (an
            // ensemble's leader steps down, and the next election starts
            // it, ZOOKEEPER-1277; a lone voter establishes it at once).
            tracing::info!(
                limit = self.config.epoch_counter_limit,
                "the epoch's zxid counter reached its limit: a new epoch"
            );
            let batch = self.core.take_batch();
            if !batch.is_empty() {
                publish(batch, &self.shards).await;
            }
            let ready = self.node.step(Input::EndEpoch);
            self.execute(ready).await;
        }
        self.start_sync().await;
    }

    /// Leader: takes the core's batch, proposes its txns and logs it.
    async fn propose_batch(&mut self) {
        let batch = self.core.take_batch();
        if batch.is_empty() {
            return;
        }
        let Some((first, last)) = batch.log_zxids else {
            // Nothing to log: it goes out after what is in flight.
            if self.in_flight.is_empty() {
                publish(batch, &self.shards).await;
            } else {
                self.in_flight.push_back(batch);
            }
            return;
        };
        // One zab step for the batch; a lone voter has nobody to send a
        // txn to, so zab only counts it.
        let proposals: Vec<Vec<u8>> = batch
            .commits
            .iter()
            .filter_map(|c| match c {
                Commit::Txn { .. } if self.standalone => Some(Vec::new()),
                Commit::Txn { txn, .. } => {
                    let mut data = Vec::new();
                    zk_txn::encode(txn, &mut data).expect("a txn this server assigned encodes");
                    self.health.ensemble.proposed(data.len());
                    Some(data)
                }
                _ => None,
            })
            .collect();
        let ready = self.node.step(Input::ProposeBatch(proposals));
        debug_assert!(
            ready
                .append
                .iter()
                .map(|t| t.zxid)
                .eq(batch.commits.iter().filter_map(|c| match c {
                    Commit::Txn { txn, .. } => Some(txn.zxid),
                    _ => None,
                })),
            "the core's zxids are the ones zab proposes"
        );
        // Corked: they go out right after the leader's own log write is
        // submitted (start_sync), from this task.
        self.execute_sends(ready);
        if let Err(e) = self.log.append_batch(&batch.log_bytes, first, last).await {
            self.in_flight.push_back(batch);
            self.log_failed(e).await;
            return;
        }
        self.metrics.appended(first, last, batch.log_bytes.len());
        self.snapshots.logged(batch.log_bytes.len());
        log_batch_appended(first, last);
        let mut batch = batch;
        self.core
            .recycle_log_buffer(std::mem::take(&mut batch.log_bytes));
        self.syncing_batch = Some(match self.syncing_batch {
            Some((f, _)) => (f, last),
            None => (first, last),
        });
        self.in_flight.push_back(batch);
        self.want_sync = true;
    }

    /// Starts a sync of everything appended, if one is wanted and none runs.
    async fn start_sync(&mut self) {
        if self.syncing.is_some() || !self.writable {
            return;
        }
        if self.flush_follower_records().await {
            self.want_sync = true;
        }
        if !self.want_sync {
            return;
        }
        self.want_sync = false;
        // What this turn sent goes out: a learner's ACKs and forwarded
        // requests before its next log write is submitted (their answers
        // wait on them), a leader's proposals right after its own write is
        // (tuning/networking.md §21: a send to a peer on this machine costs
        // the sender the receiver's wake-up, and the disk, which every
        // member shares here, should start first).
        let leading = matches!(self.role, Role::Broadcasting { .. });
        if !leading {
            if let Some(net) = &self.net {
                net.flush_corked();
            }
        }
        let through = self.log.appended_zxid();
        if !self.log.force_sync() {
            if let Some((first, last)) = self.syncing_batch.take() {
                self.sync_stats.synced((last - first + 1) as u64);
                self.metrics.durable();
            }
            let ready = self.node.step(Input::Durable(through));
            Box::pin(self.execute(ready)).await;
            return;
        }
        self.syncing = Some(through);
        if self.syncing_batch.is_some() {
            self.sync_stats.started = Some(Instant::now());
            self.metrics.sync_started();
        }
        assert!(self.sync_job.is_none(), "one sync job at a time");
        let mut job: SyncFuture = Box::pin(self.log.sync_job());
        // Its first poll queues its write, and the write goes to the disk
        // now: at the executor's next park it would wait for whatever this
        // turn still runs (the proposals' sends, the committed batch's
        // replies), 20-70 us on this VM (tuning/networking.md §20). The
        // loop polls the job from then on.
        if let Some(result) = future::poll_once(job.as_mut()).await {
            job = Box::pin(future::ready(result));
        } else if let Err(e) = glommio::io::submit_queued() {
            // The park submits it instead.
            tracing::debug!("log write not submitted early: {e}");
        }
        self.sync_job = Some(SyncJob { through, job });
        if leading {
            if let Some(net) = &self.net {
                net.flush_corked();
            }
        }
    }

    fn execute_sends(&mut self, ready: Ready) {
        self.close_out_of_order(&ready.close);
        for (to, msg) in &ready.send {
            self.send(*to, msg);
        }
        debug_assert!(ready.commit_to.is_none() && ready.role.is_none());
    }

    /// Sends a zab message; a SNAP carries the committed tree.
    fn send(&self, to: Sid, msg: &ensemble::Msg) {
        let gauges = &self.health.ensemble;
        if matches!(msg, ensemble::Msg::Diff | ensemble::Msg::Trunc { .. }) {
            gauges
                .diff_syncs
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        let ensemble::Msg::Snap { history } = msg else {
            return self.net().send(to, msg);
        };
        gauges
            .snap_syncs
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        match self.snapshot_at(history) {
            Ok((zxid, tree)) => {
                let sessions = self.core.session_entries();
                tracing::info!(
                    peer = to,
                    zxid = format_args!("{zxid:#x}"),
                    znodes = tree.znode_count(),
                    "syncing a follower by SNAP"
                );
                self.net().send_snapshot(to, zxid, tree, sessions);
            }
            Err(e) => {
                tracing::error!(peer = to, "cannot make a SNAP: {e}: closing the connection");
                self.net().close_quorum(to);
            }
        }
    }

    /// The tree as of the last txn of `history` (committed: zab sends a
    /// SNAP only through its commit point): the last committed batch's
    /// tree, with the txns it does not hold yet applied.
    fn snapshot_at(&self, history: &[ensemble::Txn]) -> Result<(i64, crate::tree::Tree), String> {
        let mut tree = self
            .committed_tree
            .clone()
            .ok_or("not leading an established epoch")?;
        let from = tree.last_zxid();
        for t in history.iter().filter(|t| t.zxid > from) {
            let txn = zk_txn::decode(&t.data).map_err(|e| format!("txn {:#x}: {e}", t.zxid))?;
            tree.apply(&txn);
        }
        let zxid = history.last().map_or(tree.last_zxid(), |t| t.zxid);
        if tree.last_zxid() != zxid {
            return Err(format!(
                "the committed tree is at {:#x}, past the SNAP's {zxid:#x}",
                tree.last_zxid()
            ));
        }
        Ok((zxid, tree))
    }

    fn close_out_of_order(&self, learners: &[Sid]) {
        for &sid in learners {
            tracing::warn!(
                peer = sid,
                "zab closes this learner connection (out of protocol order, or no leader here)"
            );
            self.net().close_quorum(sid);
        }
    }

    /// Executes a `Ready` in its order: cut or replace the log, append,
    /// sync, epochs, send; then commits and the role.
    async fn execute(&mut self, ready: Ready) {
        // What a step makes steps again (epochs made durable, a restart):
        // queued after it, allocated only then.
        let mut queue = VecDeque::new();
        let mut next = Some(ready);
        while let Some(ready) = next.take().or_else(|| queue.pop_front()) {
            self.close_out_of_order(&ready.close);
            if ready.wipe_disk {
                self.wipe_disk().await;
            }
            if ready.resync_done {
                match crate::startup::damaged::clear_disk_lost(&self.config.data_dir) {
                    Ok(()) => tracing::info!(
                        "synced by an established leader after losing the disk: this member \
                         votes and counts toward a quorum again"
                    ),
                    // The marker stays: at the next start it abstains
                    // again, which is safe.
                    Err(e) => tracing::warn!("{e}"),
                }
            }
            if let Some(to) = ready.truncate_after {
                self.truncate_after(to).await;
            }
            if ready.replace_log.is_some() {
                tracing::error!(
                    "the leader sent a SNAP, which this server cannot load yet: \
                     leaving it and looking again"
                );
                self.net().close_quorum_all();
                queue.push_back(self.node.step(Input::Start));
                continue;
            }
            for t in &ready.append {
                self.log_proposal(t);
            }
            if ready.sync {
                self.want_sync = true;
            }
            if let Some(e) = ready.persist_accepted_epoch {
                let data_dir = self.config.data_dir.clone();
                if self.write_epoch(&data_dir, ACCEPTED_EPOCH, e).await {
                    queue.push_back(self.node.step(Input::AcceptedEpochDurable(e)));
                }
            }
            if let Some(e) = ready.persist_current_epoch {
                let data_dir = self.config.data_dir.clone();
                if self.write_epoch(&data_dir, CURRENT_EPOCH, e).await {
                    queue.push_back(self.node.step(Input::CurrentEpochDurable(e)));
                }
            }
            if let Some(mint) = ready.lead {
                self.mint = Some(mint);
            }
            // Timed only when it is a sync's stream of packets (a clock
            // reading per step otherwise).
            let sending = (ready.send.len() > 4096).then(std::time::Instant::now);
            for (n, (to, msg)) in ready.send.iter().enumerate() {
                if n % 4096 == 4095 {
                    // A follower's DIFF: what is corked goes to the socket
                    // and its writer now (a DIFF held whole would meet the
                    // queue's bound), and the shards and the peer writers
                    // run meanwhile.
                    if let Some(net) = &self.net {
                        net.flush_corked();
                    }
                    glommio::yield_if_needed().await;
                }
                if matches!(msg, ensemble::Msg::Ping) && matches!(self.role, Role::Following { .. })
                {
                    let touches = self.forwarder.take_touches();
                    let reply = session_packets::ping_reply(0, &touches);
                    self.net().send_packet(*to, &reply);
                } else {
                    self.send(*to, msg);
                }
            }
            if let Some(sending) = sending {
                tracing::info!(
                    packets = ready.send.len(),
                    ms = sending.elapsed().as_millis() as u64,
                    "sent a follower's sync"
                );
            }
            if let Some(role) = ready.role {
                self.change_role(role).await;
            }
            if let Some(z) = ready.commit_to {
                self.commit_to(z).await;
            }
        }
        // Records a follower got wait for the next sync; a wanted sync
        // with nothing new to append (NEWLEADER) starts here.
        if self.pending_zxids.is_some() || self.want_sync {
            Box::pin(self.start_sync()).await;
        }
        self.update_gauges();
    }

    /// What zab says this member may serve, for the shards and the admin
    /// words (a standalone server always serves, as its own leader).
    fn publish_serving(&self) {
        if self.standalone {
            return;
        }
        let (role, leader) = match self.node.serves() {
            ensemble::Serves::NoLeader => (ServerRole::Looking, 0),
            ensemble::Serves::Follower { leader } => (ServerRole::Follower, leader),
            ensemble::Serves::Leader => (ServerRole::Leader, self.myid),
        };
        self.health.set_role_and_leader(role, leader);
    }

    /// mntr's view of the ensemble, and what the member serves, after
    /// every step of `zab`.
    fn update_gauges(&self) {
        use std::sync::atomic::Ordering::Relaxed;
        if self.standalone {
            return;
        }
        self.publish_serving();
        let g = &self.health.ensemble;
        g.set_phase(self.node.phase_name());
        let (learners, synced) = self.node.leader_learners().unwrap_or((0, 0));
        g.learners.store(learners as u64, Relaxed);
        g.synced_followers.store(synced as u64, Relaxed);
        g.pending_syncs
            .store(self.node.pending_syncs() as u64, Relaxed);
        g.awaiting_resync
            .store(self.node.awaiting_resync(), Relaxed);
    }

    /// Writes an epoch file zab asked for; whether it is durable. An
    /// ensemble member that cannot write one stops; a standalone server
    /// refuses writes from then on (its log is as good as failed).
    async fn write_epoch(&mut self, dir: &std::path::Path, name: &str, epoch: u32) -> bool {
        let Err(e) = super::epoch_files::write(dir, name, epoch) else {
            return true;
        };
        let path = dir.join(name);
        if !self.standalone {
            tracing::error!(
                "cannot write {}: {e}: stopping this ensemble member",
                path.display()
            );
            std::process::exit(3);
        }
        tracing::error!(
            "cannot write {}: {e}: refusing writes until restart",
            path.display()
        );
        self.refuse_writes().await;
        false
    }

    /// Keeps a proposal ACK (leader) or COMMIT (follower) for the next
    /// `step_coalesced`, merged with the ones before it: the wire carries
    /// one per proposal, and stepping zab, committing and publishing to
    /// the shards for each cost the ensemble about half its write
    /// throughput. The order zab sees is unchanged but for merging a run
    /// of them (every other event steps them first). Returns whether kept.
    fn coalesce(&mut self, e: &PeerEvent) -> bool {
        let PeerEvent::Received { from, msg } = e else {
            return false;
        };
        match (msg, self.role) {
            (ensemble::Msg::Ack(z), Role::Broadcasting { epoch })
                if crate::zab::zxid::epoch(*z) == epoch && crate::zab::zxid::counter(*z) != 0 =>
            {
                let a = self.pending_acks.entry(*from).or_insert(*z);
                *a = (*a).max(*z);
                true
            }
            (ensemble::Msg::Commit(z), Role::Following { leader }) if leader == *from => {
                self.health
                    .ensemble
                    .learner_commits_received
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let z = self.pending_commit.map_or(*z, |(_, c)| c.max(*z));
                self.pending_commit = Some((*from, z));
                true
            }
            _ => false,
        }
    }

    /// Hands zab the acks and commits `coalesce` kept.
    async fn step_coalesced(&mut self) {
        for (from, z) in std::mem::take(&mut self.pending_acks) {
            let ready = self.node.step(Input::Receive {
                from,
                msg: ensemble::Msg::Ack(z),
            });
            self.execute(ready).await;
        }
        if let Some((from, z)) = self.pending_commit.take() {
            let ready = self.node.step(Input::Receive {
                from,
                msg: ensemble::Msg::Commit(z),
            });
            self.execute(ready).await;
        }
    }

    /// A PROPOSAL from `from`, before `zab` sees it: a txn this server
    /// cannot decode (or filed under another zxid) never enters the
    /// history; it is the sender's protocol violation, and that connection
    /// closes. Returns whether zab may take it.
    fn received_proposal(&mut self, from: Sid, t: &ensemble::Txn) -> bool {
        match zk_txn::decode(&t.data) {
            Ok(txn) if txn.zxid == t.zxid => {
                self.decoded = Some(txn);
                true
            }
            Ok(txn) => {
                tracing::error!(
                    peer = from,
                    "a proposal under zxid {:#x} holds a txn of {:#x}: closing the connection",
                    t.zxid,
                    txn.zxid
                );
                self.net().close_quorum(from);
                false
            }
            Err(e) => {
                tracing::error!(
                    peer = from,
                    "a proposal {:#x} does not decode ({e}): closing the connection",
                    t.zxid
                );
                self.net().close_quorum(from);
                false
            }
        }
    }

    /// A follower logs a proposal (ZooKeeper's txn encoding from the
    /// leader, decoded by `received_proposal`): framed now, appended and
    /// synced with the next group.
    fn log_proposal(&mut self, t: &ensemble::Txn) {
        let txn = match self.decoded.take() {
            Some(txn) if txn.zxid == t.zxid => txn,
            // A SNAP's or DIFF's txns come decoded the same way; anything
            // else (none today) is decoded here, and was checked already.
            _ => zk_txn::decode(&t.data).expect("proposals are decoded before zab takes them"),
        };
        // Only what a completed sync made durable here vouches for the
        // records before it (log/record.rs): never the commit point.
        frame_txn(&mut self.pending_bytes, &txn, self.log_durable);
        self.pending_zxids = Some(match self.pending_zxids {
            None => (txn.zxid, txn.zxid),
            Some((first, _)) => (first, txn.zxid),
        });
        self.unapplied.insert(txn.zxid, txn);
    }

    /// The leader asked for what this disk cannot do (a TRUNC below its
    /// snapshot): the member forgets its data as a damaged one does (the
    /// lost-disk marker first, then snapshots and log aside) and starts
    /// empty, waiting to be synced.
    async fn wipe_disk(&mut self) {
        self.pending_bytes.clear();
        self.pending_zxids = None;
        self.decoded = None;
        self.settle_log().await;
        self.unapplied.clear();
        let files = self.snapshots.files_lock();
        let moved = {
            let _files = files.lock().unwrap_or_else(|e| e.into_inner());
            crate::startup::damaged::set_aside(
                &self.config.data_dir,
                &self.config.data_log_dir,
                "the leader truncated below this member's snapshot",
            )
        };
        match moved {
            Ok(moved) => tracing::error!(
                moved_to = ?moved,
                "the leader truncated below this member's snapshot, which it cannot do: its \
                 snapshots and segments are set aside and it starts empty; it does not vote or \
                 count toward a new epoch until a leader established without it has synced it"
            ),
            Err(e) => {
                tracing::error!("{e}: stopping this ensemble member");
                std::process::exit(3);
            }
        }
        self.log = TxnLog::new(log_settings(&self.config), 0);
        self.log_durable = 0;
        self.committed = 0;
        self.committed_tree = None;
        self.rebuild(Serving::Looking, Reload::Disk).await;
    }

    /// TRUNC: cut the log after `to` and rebuild the core from the disk.
    async fn truncate_after(&mut self, to: i64) {
        // Records not appended yet are simply dropped; writes already
        // staged land first, so that nothing lands after the cut.
        self.pending_bytes.clear();
        self.pending_zxids = None;
        self.settle_log().await;
        self.unapplied.retain(|z, _| *z <= to);
        let files = self.snapshots.files_lock();
        let cut = {
            let _files = files.lock().unwrap_or_else(|e| e.into_inner());
            // Every record above `to`, whether or not `to` is one here (a
            // Java leader may TRUNC to its last committed zxid, which this
            // log can lack when it holds txns of a later epoch: zab keeps
            // what is at or below it, and so does the disk).
            super::snap_files::remove_snapshots_above(&self.config.data_dir, to)
                .and_then(|()| crate::log::range::truncate_above(&self.config.data_log_dir, to))
        };
        match cut {
            Ok(cut) => tracing::info!(cut, "truncated the log after {to:#x}, as the leader asked"),
            Err(e) => {
                tracing::error!("{e}: stopping this ensemble member");
                std::process::exit(3);
            }
        }
        self.log = TxnLog::new(log_settings(&self.config), to);
        self.log_durable = self.log_durable.min(to);
        let serving = match self.role {
            Role::Following { .. } => Serving::Following { myid: self.myid },
            _ => Serving::Looking,
        };
        self.rebuild(serving, Reload::Disk).await;
    }

    /// SNAP: the leader's tree as of `zxid` replaces this server's data,
    /// in `zab::snap_install`'s order (the one the simulation checks).
    async fn install_snapshot(
        &mut self,
        zxid: i64,
        tree: crate::tree::Tree,
        sessions: &[crate::snapshot::SessionEntry],
    ) {
        self.pending_bytes.clear();
        self.pending_zxids = None;
        self.settle_log().await;
        self.unapplied.clear();
        let (data_dir, log_dir) = (
            self.config.data_dir.clone(),
            self.config.data_log_dir.clone(),
        );
        let files = self.snapshots.files_lock();
        let result = {
            let _files = files.lock().unwrap_or_else(|e| e.into_inner());
            let mut disk = super::snap_files::SnapFiles {
                data_dir: &data_dir,
                log_dir: &log_dir,
                sessions,
            };
            crate::zab::snap_install::install(&mut disk, zxid, &tree)
        };
        if let Err(e) = result {
            tracing::error!("installing a SNAP at {zxid:#x}: {e}: stopping this ensemble member");
            std::process::exit(3);
        }
        tracing::info!(
            zxid = format_args!("{zxid:#x}"),
            znodes = tree.znode_count(),
            sessions = sessions.len(),
            "installed the leader's snapshot (SNAP)"
        );
        self.log = TxnLog::new(log_settings(&self.config), zxid);
        self.log_durable = zxid;
        self.committed = zxid;
        self.replay_lenient = true;
        self.rebuild(Serving::Following { myid: self.myid }, Reload::Disk)
            .await;
    }

    /// The state a reload from the (settled) log would give, built in
    /// memory: the core's tree and sessions (when they are the log's: not
    /// a leader's core, which runs ahead) with the logged txns it has not
    /// applied replayed over them, as recovery replays them. None when that
    /// cannot be had (then the disk is read).
    fn state_in_memory(&self) -> Option<Recovered> {
        let mut state = self.core.reloadable_state()?;
        for txn in self.unapplied.values() {
            if txn.zxid <= state.tree.last_zxid() {
                continue;
            }
            let replayed = crate::recovery::replay(
                &mut state.tree,
                &mut state.sessions,
                txn,
                self.replay_lenient,
            );
            if let Err(e) = replayed {
                tracing::warn!("rebuilding in memory: {e}: reading the log instead");
                return None;
            }
            state.txns_replayed += 1;
        }
        Some(state)
    }

    /// Rebuilds the core for a new role, closing every client connection
    /// of the old one: from `source`, whose data must equal the log's.
    async fn rebuild(&mut self, serving: Serving, source: Reload) {
        self.settle_log().await;
        self.core.close_all_connections();
        for c in self.forwarder.abandon() {
            self.core.refuse_connect(c.conn, c.has_read_only);
        }
        self.session_owners.clear();
        let closing = self.core.take_batch();
        publish(self.core.failed_batch(closing), &self.shards).await;
        for batch in std::mem::take(&mut self.in_flight) {
            // Never committed here: their clients lose the connection and
            // learn the outcome from the next leader, as with ZooKeeper.
            publish(self.core.failed_batch(batch), &self.shards).await;
        }
        let in_memory = match source {
            Reload::Disk => None,
            Reload::MemoryIfSame => self.state_in_memory(),
        };
        let recovered = match in_memory {
            Some(r) => r,
            None => {
                let r = match crate::recovery::recover(
                    &self.config.data_dir,
                    &self.config.data_log_dir,
                    self.config.max_session_timeout_ms as i32,
                ) {
                    Ok(r) => r,
                    Err(e) => {
                        tracing::error!("reloading the data: {e}: stopping this ensemble member");
                        std::process::exit(3);
                    }
                };
                // A writer of its own from here: recovery read (and may
                // have cut) the segments the old one had open.
                self.log = TxnLog::new(log_settings(&self.config), r.tree.last_zxid());
                // Recovery synced what it kept.
                self.log_durable = r.tree.last_zxid();
                r
            }
        };
        let last = recovered.tree.last_zxid();
        // zab learns that what it handed to the log is durable from the
        // next sync (with nothing new, of the new writer).
        self.want_sync = true;
        self.unapplied.retain(|z, _| *z > last);
        self.committed = self.committed.min(last);
        self.core = serving_core(
            &self.config,
            self.shards.len(),
            recovered,
            serving,
            self.standalone,
        );
        self.core.set_session_board(self.sessions.clone());
        if self.replay_lenient && matches!(serving, Serving::Following { .. }) {
            self.core.replay_leniently();
        }
        // The shards get the reloaded tree.
        let tree = self.core.tree().clone();
        for shard in &self.shards {
            let b = ShardBatch {
                commits: Arc::new(Vec::new()),
                tree: Some(tree.clone()),
                shard_applies: false,
                direct: Vec::new(),
            };
            if shard.send(b).await.is_err() {
                tracing::error!("a shard is gone");
            }
        }
    }

    /// A standalone server's only role changes are its epochs: resuming
    /// one at start, and the next when the counter runs out. Its sessions
    /// and clients stay; the core assigns from the new epoch's mint.
    fn standalone_role(&mut self, role: Role) {
        self.role = role;
        if let Role::Broadcasting { epoch } = role {
            let mint = self
                .mint
                .take()
                .expect("zab hands out a mint with its epoch");
            self.core.lead(mint);
            if self.committed_tree.is_none() && !self.core.shares_tree() {
                self.committed_tree = Some(self.core.tree().clone());
            }
            tracing::info!(
                myid = self.myid,
                epoch,
                "leading epoch {epoch} as a standalone server (an ensemble of one)"
            );
        }
    }

    async fn change_role(&mut self, role: Role) {
        if self.standalone {
            return self.standalone_role(role);
        }
        let was = std::mem::replace(&mut self.role, role);
        tracing::info!(myid = self.myid, ?was, now = ?role, "role");
        let gauges = &self.health.ensemble;
        match role {
            Role::Looking => {
                self.looking_since
                    .get_or_insert_with(std::time::Instant::now);
            }
            _ => {
                if let Some(since) = self.looking_since.take() {
                    gauges.election_took(since.elapsed().as_millis() as u64);
                }
            }
        }
        let leading_since = match role {
            Role::Broadcasting { .. } => super::core::now_ms() as u64,
            _ => 0,
        };
        gauges
            .leading_since_ms
            .store(leading_since, std::sync::atomic::Ordering::Relaxed);
        match role {
            Role::Looking => {
                self.net().close_quorum_all();
                self.publish_serving();
                if !matches!(was, Role::Looking) {
                    self.rebuild(Serving::Looking, Reload::MemoryIfSame).await;
                }
            }
            Role::Following { leader } => {
                // Following the same leader again is UPTODATE: synced, the
                // core stays (a rebuild would apply logged proposals that
                // are not committed yet).
                if was != (Role::Following { leader }) {
                    self.rebuild(Serving::Following { myid: self.myid }, Reload::MemoryIfSame)
                        .await;
                }
                // Clients only once synced (UPTODATE), as ZooKeeper's
                // follower starts serving: a request forwarded before
                // then would reach the leader ahead of ACKEPOCH
                // (`Node::serves`, published after every step).
            }
            Role::Leading => {
                // Establishing: the log (all of it, about to be committed)
                // is what a SNAP sends; the core reloaded it when looking.
                self.committed_tree = Some(self.core.tree().clone());
                self.node
                    .set_snapshot_bytes(snapshot_bytes(self.core.tree()));
                self.node.set_snap_floor(self.core.tree().last_zxid());
            }
            Role::Broadcasting { epoch } => {
                // Everything in the log is committed now (a quorum acked
                // NEWLEADER); proposals numbered in `epoch` start.
                self.flush_follower_records().await;
                let serving = Serving::Leading {
                    mint: self
                        .mint
                        .take()
                        .expect("zab hands out a mint with its epoch"),
                    myid: self.myid,
                };
                self.rebuild(serving, Reload::MemoryIfSame).await;
                self.committed = self.node.log_last();
                self.committed_tree = Some(self.core.tree().clone());
                self.node.set_snap_floor(self.core.tree().last_zxid());
                tracing::info!(
                    myid = self.myid,
                    epoch,
                    "leading epoch {epoch}: serving clients"
                );
            }
        }
    }

    /// Follower: applies a committed txn, answering the client that asked
    /// for it here, if one did.
    fn apply_committed(&mut self, txn: Txn) {
        let now = std::time::Instant::now();
        let origin = self
            .forwarder
            .committed(txn.session_id, txn.cxid)
            .map(|o| (o.conn, o.request));
        let created = match txn.op {
            crate::tree::TxnOp::CreateSession { .. } => {
                self.forwarder.session_created(txn.session_id)
            }
            _ => None,
        };
        let id = txn.session_id;
        let moved =
            matches!(txn.op, crate::tree::TxnOp::Error { code } if code == err::SESSION_MOVED);
        if let (true, Some((conn, _))) = (moved, &origin) {
            // FinalRequestProcessor: SESSIONMOVED is a connection-level
            // error; the connection closes unanswered (ZOOKEEPER-710).
            let conn = *conn;
            self.core.apply_committed(txn, None, now);
            self.core.close_connection(conn);
            return;
        }
        self.core.apply_committed(txn, origin, now);
        if let Some(c) = created {
            self.core
                .session_created(id, c.conn, c.timeout_ms, c.has_read_only, now);
        }
    }

    /// Puts everything handed to the log on disk before the data is
    /// reloaded from it: records not appended yet, writes staged for the
    /// next sync, and a sync job already running. Without this a reload
    /// (role change, TRUNC) would lose staged txns zab counts as logged.
    async fn settle_log(&mut self) {
        self.flush_follower_records().await;
        if let Some(running) = self.sync_job.as_mut() {
            // The loop still sees it complete (Synced), with its result.
            let result = running.job.as_mut().await;
            running.job = Box::pin(future::ready(result));
        }
        if let Err(e) = self.log.sync_job().await {
            self.log_failed(e).await;
        }
        self.log_durable = self.log_durable.max(self.log.appended_zxid());
    }

    /// Appends what a follower holds unappended (before its core becomes a
    /// leader's, which reloads the log).
    /// Returns whether there were any.
    async fn flush_follower_records(&mut self) -> bool {
        let Some((first, last)) = self.pending_zxids.take() else {
            return false;
        };
        let bytes = std::mem::take(&mut self.pending_bytes);
        if let Err(e) = self.log.append_batch(&bytes, first, last).await {
            self.log_failed(e).await;
        }
        self.snapshots.logged(bytes.len());
        log_batch_appended(first, last);
        true
    }

    /// `zab` says txns through `z` are committed.
    async fn commit_to(&mut self, z: i64) {
        if z <= self.committed {
            return;
        }
        self.committed = z;
        match self.role {
            Role::Broadcasting { .. } => {
                while let Some(front) = self.in_flight.front() {
                    let done = front.log_zxids.is_none_or(|(_, last)| last <= z);
                    if !done {
                        break;
                    }
                    let batch = self.in_flight.pop_front().expect("a front");
                    if let Some((first, last)) = batch.log_zxids {
                        self.core.set_durable_zxid(last);
                        let txns = (last - first + 1) as u64;
                        if let Some(tree) = &batch.tree_after {
                            if !self.standalone {
                                self.node.set_snapshot_bytes(snapshot_bytes(tree));
                                self.node.set_snap_floor(tree.last_zxid());
                            }
                            self.committed_tree = Some(tree.clone());
                            self.snapshots.committed(txns, tree, &self.core);
                        } else if let Some(shared) = self.core.shared_tree() {
                            // The shard applies the batch's txns as it
                            // takes it; the tree holds what was before.
                            self.snapshots.committed(txns, &shared.borrow(), &self.core);
                        }
                    }
                    publish(batch, &self.shards).await;
                }
            }
            _ => {
                let mut applied = 0u64;
                while let Some(entry) = self.unapplied.first_entry() {
                    if *entry.key() > z {
                        break;
                    }
                    let txn = entry.remove();
                    if txn.zxid > self.core.tree().last_zxid() {
                        self.apply_committed(txn);
                        applied += 1;
                    }
                }
                let batch = self.core.take_batch();
                if applied > 0 {
                    if let Some(tree) = &batch.tree_after {
                        let tree = tree.clone();
                        self.snapshots.committed(applied, &tree, &self.core);
                    }
                }
                publish(batch, &self.shards).await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_finalize_wait_is_not_quantized_away() {
        for tick_time_ms in [200, 2000, 10_000] {
            for wait_ms in [50, 200] {
                let mut config = Config::embedded_default();
                config.tick_time_ms = tick_time_ms;
                config.election_finalize_wait_ms = wait_ms;
                let t = timings(&config);
                let tick = tick_ms(&config);
                let waited = t.election.finalize_wait_ticks as u64 * tick;
                // The decision comes between (ticks - 1) and ticks ticks
                // after the quorum: within a fifth of the wait.
                assert!(
                    waited >= wait_ms && waited - tick >= wait_ms * 4 / 5 - 1,
                    "tickTime {tick_time_ms}, wait {wait_ms}: {} ticks of {tick} ms",
                    t.election.finalize_wait_ticks
                );
            }
        }
    }
}
