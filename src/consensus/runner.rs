//! Drives the consensus core, on its own executor or as a task beside shard
//! 0 (`ringkeeper.consensusExecutor`): one task per shard
//! forwards that shard's requests into a bounded inbox, tickers ask for
//! session expiry and container reaping, and the main loop does group
//! commit:
//!
//! - requests are prepped as they arrive, their records framed into the
//!   batch being built;
//! - when no fdatasync is in flight, the batch is copied into the log and
//!   one fdatasync (io_uring) starts for it; the loop keeps prepping the
//!   next batch meanwhile;
//! - when the fdatasync completes, that batch's replies and tree versions go
//!   to the shards, and the next batch starts at once. (When the core
//!   shares its executor with the only shard, the two share one tree
//!   instead: the core preps against it plus its outstanding changes, and
//!   the shard applies each batch's txns as it receives them.)
//!
//! A batch stops growing at `fsync_batch_txns_max` / `fsync_batch_bytes_max`:
//! then the inbox is not read until the sync completes (backpressure).
//!
//! What is committed is `zab`'s decision: each logged batch is proposed to
//! it, each completed sync is this replica's durable point, and a batch is
//! published once `zab`'s commit point covers it (for the lone voter of a
//! standalone server, at once). When the epoch's zxid counter reaches its
//! limit, the inbox waits until everything assigned is committed, and `zab`
//! establishes the next epoch (two small synchronous file writes, once per
//! ~4 billion txns).

use std::cell::RefCell;
use std::io;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_lite::future;
use glommio::channels::local_channel;

use super::core::{Batch, Clock, Core, BATCH_REQUESTS_MAX};
use super::link::{CoreEnds, LinkSender};
use super::messages::{ShardBatch, ToCore};
use crate::admin::health::Health;
use crate::admin::metrics::group_commit::{CoreMetrics, CoreRecorder};
use crate::config::Config;
use crate::log::{LogSettings, TxnLog};
use crate::recovery::Recovered;
use crate::tree::Tree;
use crate::zab::{Input, Replica};

/// Inbox bound: when it is full, shard forwarders wait, and the shards'
/// own bounded queues push back on their connections.
const INBOX_MAX: usize = 4096;
/// While draining the inbox the core lets other tasks on its executor run
/// after this many requests (about 100-200 µs of prep).
const YIELD_EVERY_REQUESTS: usize = 64;

enum Inbox {
    Request(ToCore),
    Tick,
    Reap,
}

enum Event {
    Inbox(Option<Inbox>),
    Synced(io::Result<()>),
}

pub struct CoreSetup {
    pub config: Arc<Config>,
    pub recovered: Recovered,
    /// ZAB, having established `epoch` (see server::run).
    pub zab: Replica,
    pub epoch: u32,
    /// Where to publish group-commit metrics, when they are on.
    pub metrics: Option<Arc<CoreMetrics>>,
    /// Where a txn log failure is made known to the shards' health words.
    pub health: Arc<Health>,
    /// Where to publish the session tracker for the admin words.
    pub sessions: Arc<crate::session::board::SessionBoard>,
}

/// Spawns a task that sends `what()` into the inbox every `every`.
fn ticker(tx: &Rc<local_channel::LocalSender<Inbox>>, every: Duration, what: fn() -> Inbox) {
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

/// Runs the core; `links[i]` is its link to shard i. `shared_tree`: the
/// tree of the one shard on this executor, to share (see
/// [`Core::share_tree`]).
pub async fn run(setup: CoreSetup, links: Vec<CoreEnds>, shared_tree: Option<Rc<RefCell<Tree>>>) {
    let config = setup.config.clone();
    let (tx, rx) = local_channel::new_bounded::<Inbox>(INBOX_MAX);
    let tx = Rc::new(tx);
    let mut shards = Vec::with_capacity(links.len());
    for link in links {
        shards.push(link.to_shard);
        let r = link.from_shard;
        let tx = tx.clone();
        glommio::spawn_local(async move {
            while let Some(m) = r.recv().await {
                if tx.send(Inbox::Request(m)).await.is_err() {
                    break;
                }
            }
        })
        .detach();
    }
    let tick = Duration::from_millis((config.tick_time_ms as u64 / 2).clamp(10, 1000));
    ticker(&tx, tick, || Inbox::Tick);
    let reap = Duration::from_millis(config.container_check_interval_ms);
    ticker(&tx, reap, || Inbox::Reap);
    let last_zxid = setup.recovered.tree.last_zxid();
    let mut core = Core::new(
        &config,
        shards.len(),
        setup.recovered,
        setup.epoch,
        Clock::read(),
    );
    core.set_session_board(setup.sessions);
    if let Some(tree) = shared_tree {
        assert_eq!(shards.len(), 1, "a tree is shared with the only shard");
        core.share_tree(tree);
    }
    let mut log = TxnLog::new(log_settings(&config), last_zxid);
    tracing::info!(
        shards = shards.len(),
        log_write = ?log.write_mode(),
        shared_tree = core.shares_tree(),
        "consensus core running"
    );
    let recorder = CoreRecorder::new(setup.metrics);
    let mut committer = Committer::new(
        &config,
        (!core.shares_tree()).then(|| core.tree().clone()),
        recorder,
        setup.health,
        setup.zab,
    );
    let (synced_tx, synced_rx) = local_channel::new_bounded::<io::Result<()>>(1);
    let synced_tx = Rc::new(synced_tx);
    let mut in_flight: Option<Batch> = None;
    let mut fault_ticks = 0u64;
    loop {
        let syncing = in_flight.as_ref().and_then(|b| b.log_zxids);
        committer
            .metrics
            .loop_turn(core.batch_txns(), syncing, tx.len());
        if in_flight.is_none() && core.epoch_ending() && committer.writable {
            // Nothing is in flight, so the batch is empty too (it is taken
            // whenever nothing is): everything assigned is committed.
            committer.next_epoch(&mut core, &config.data_dir);
        }
        let room = core.batch_txns() < config.fsync_batch_txns_max
            && core.batch_bytes() < config.fsync_batch_bytes_max
            && !core.epoch_ending();
        let event = match (&in_flight, room) {
            (None, _) => Event::Inbox(rx.recv().await),
            (Some(_), false) => Event::Synced(synced_rx.recv().await.expect("sync sender lives")),
            (Some(_), true) => {
                future::or(async { Event::Inbox(rx.recv().await) }, async {
                    Event::Synced(synced_rx.recv().await.expect("sync sender lives"))
                })
                .await
            }
        };
        match event {
            Event::Inbox(None) => break,
            Event::Inbox(Some(first)) => {
                let mut next = Some(first);
                let mut handled = 0;
                while let Some(msg) = next.take() {
                    take_inbox(&mut core, &committer, msg, &mut fault_ticks);
                    handled += 1;
                    if handled % YIELD_EVERY_REQUESTS == 0 {
                        // Sharing an executor with a shard, the core must
                        // not hold it for a whole large batch.
                        future::yield_now().await;
                    }
                    if handled < BATCH_REQUESTS_MAX
                        && core.batch_txns() < config.fsync_batch_txns_max
                        && core.batch_bytes() < config.fsync_batch_bytes_max
                        && !core.epoch_ending()
                    {
                        next = future::poll_once(rx.recv()).await.flatten();
                    }
                }
            }
            Event::Synced(result) => {
                let batch = in_flight.take().expect("a batch was syncing");
                match result {
                    Ok(()) => committer.durable(&mut core, batch, &shards).await,
                    Err(e) => {
                        let at = log.location().to_path_buf();
                        committer.failed(&mut core, batch, &at, e, &shards).await
                    }
                }
            }
        }
        if in_flight.is_none() {
            if config.fsync_delay_us > 0 && core.batch_txns() > 0 && committer.writable {
                // Let more writes join the batch before paying for a sync:
                // what arrives meanwhile is prepped into it (a plain sleep
                // left it for the next sync, after another wait).
                let deadline = Instant::now() + Duration::from_micros(config.fsync_delay_us);
                loop {
                    let left = deadline.saturating_duration_since(Instant::now());
                    let room = core.batch_txns() < config.fsync_batch_txns_max
                        && core.batch_bytes() < config.fsync_batch_bytes_max
                        && !core.epoch_ending();
                    if left.is_zero() || !room {
                        break;
                    }
                    let got = future::or(async { rx.recv().await }, async {
                        glommio::timer::sleep(left).await;
                        None
                    })
                    .await;
                    match got {
                        Some(msg) => take_inbox(&mut core, &committer, msg, &mut fault_ticks),
                        None => break,
                    }
                }
            }
            in_flight = committer
                .start(&mut core, &mut log, &synced_tx, &shards)
                .await;
        }
    }
}

/// One message of the core's inbox: a request, a tick (sessions expire)
/// or a reaper pass.
fn take_inbox(core: &mut Core, committer: &Committer, msg: Inbox, fault_ticks: &mut u64) {
    let clock = Clock::read();
    match msg {
        Inbox::Request(m) => core.handle(m, clock),
        Inbox::Tick => {
            crate::fault::core_ticked(fault_ticks);
            core.expire_sessions(clock)
        }
        Inbox::Reap => core.reap(committer.reap_per_pass, committer.never_used_ms, clock),
    }
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

/// What happens to a batch after the core built it: log append, sync,
/// publication (or failure), and snapshots.
struct Committer {
    /// The tree as of the last durable batch: what a failed sync rolls back
    /// to, and what snapshots are taken of. None when the core shares the
    /// shard's tree, which only ever holds durable txns (holding a version
    /// of it here would make every later change copy its path).
    durable_tree: Option<Tree>,
    /// False once the log failed: writes are refused until restart.
    writable: bool,
    snapshots: crate::snapshot::policy::Policy,
    reap_per_pass: usize,
    never_used_ms: u64,
    sync_stats: SyncStats,
    metrics: CoreRecorder,
    health: Arc<Health>,
    /// Decides what is committed.
    zab: Replica,
}

/// Group-commit counters, logged at info every `SYNC_REPORT_EVERY` while
/// writes flow: fsyncs/s, txns per fsync, mean time a sync took.
struct SyncStats {
    since: std::time::Instant,
    syncs: u64,
    txns: u64,
    sync_time: Duration,
    started: Option<std::time::Instant>,
}

const SYNC_REPORT_EVERY: Duration = Duration::from_secs(10);

impl SyncStats {
    fn synced(&mut self, txns: u64) {
        let now = std::time::Instant::now();
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
            since: std::time::Instant::now(),
            syncs: 0,
            txns: 0,
            sync_time: Duration::ZERO,
            started: None,
        }
    }
}

impl Committer {
    fn new(
        config: &Config,
        tree: Option<Tree>,
        metrics: CoreRecorder,
        health: Arc<Health>,
        zab: Replica,
    ) -> Committer {
        let reap_per_pass = (config.container_max_per_minute as u64
            * config.container_check_interval_ms)
            .div_ceil(60_000)
            .max(1) as usize;
        Committer {
            durable_tree: tree,
            writable: true,
            snapshots: crate::snapshot::policy::Policy::new(config, metrics.shared()),
            reap_per_pass,
            never_used_ms: config.container_max_never_used_interval_ms,
            sync_stats: SyncStats::new(),
            metrics,
            health,
            zab,
        }
    }

    /// The epoch's counter reached its limit and everything assigned is
    /// committed: `zab` establishes the next epoch and the core assigns in
    /// it. If the epoch files cannot be written, the log is as good as
    /// failed: writes are refused from now on.
    fn next_epoch(&mut self, core: &mut Core, data_dir: &std::path::Path) {
        assert_eq!(core.batch_txns(), 0, "a new epoch with a batch being built");
        match super::epoch_files::establish(&mut self.zab, data_dir, Input::NewEpoch) {
            Ok(epoch) => {
                tracing::info!(
                    epoch,
                    "the zxid counter reached its limit: leading a new epoch"
                );
                core.lead(epoch);
            }
            Err(e) => {
                tracing::error!("{e}: refusing writes until restart");
                if self.writable {
                    self.health.log_failed();
                }
                self.writable = false;
                let rest = core.refuse_writes(self.durable_tree.clone());
                debug_assert!(rest.is_empty());
            }
        }
    }

    /// Takes the batch built so far: logs it and starts its sync (returning
    /// it as in flight), or publishes it at once when there is nothing to sync.
    async fn start(
        &mut self,
        core: &mut Core,
        log: &mut TxnLog,
        synced_tx: &Rc<local_channel::LocalSender<io::Result<()>>>,
        shards: &[LinkSender<ShardBatch>],
    ) -> Option<Batch> {
        let mut batch = core.take_batch();
        if batch.is_empty() {
            return None;
        }
        let Some((first, last)) = batch.log_zxids else {
            publish(batch, shards).await;
            return None;
        };
        if let Err(e) = log.append_batch(&batch.log_bytes, first, last).await {
            let at = log.location().to_path_buf();
            self.failed(core, batch, &at, e, shards).await;
            return None;
        }
        self.zab
            .step(Input::Proposed { first, last })
            .expect("no peer input");
        self.metrics.appended(first, last, batch.log_bytes.len());
        self.snapshots.logged(batch.log_bytes.len());
        core.recycle_log_buffer(std::mem::take(&mut batch.log_bytes));
        if !log.force_sync() {
            self.durable(core, batch, shards).await;
            return None;
        }
        self.sync_stats.started = Some(std::time::Instant::now());
        self.metrics.sync_started();
        let job = log.sync_job();
        let tx = synced_tx.clone();
        glommio::spawn_local(async move {
            let _ = tx.send(job.await).await;
        })
        .detach();
        Some(batch)
    }

    async fn durable(&mut self, core: &mut Core, batch: Batch, shards: &[LinkSender<ShardBatch>]) {
        if let Some((first, last)) = batch.log_zxids {
            let ready = self.zab.step(Input::Durable(last)).expect("no peer input");
            // An ensemble of one commits what its own log made durable.
            assert_eq!(ready.commit_to, Some(last), "a lone voter's commit point");
            core.set_durable_zxid(last);
            self.sync_stats.synced((last - first + 1) as u64);
            self.metrics.durable();
            if let Some(tree) = batch.tree_after.clone() {
                self.durable_tree = Some(tree);
            }
            let txns = (last - first + 1) as u64;
            match core.shared_tree() {
                Some(shared) => self.snapshots.committed(txns, &shared.borrow(), core),
                None => {
                    let tree = self
                        .durable_tree
                        .as_ref()
                        .expect("an own tree's durable version");
                    self.snapshots.committed(txns, tree, core)
                }
            }
        }
        publish(batch, shards).await;
    }

    /// The log failed at `at` (the segment being written, or the log
    /// directory): nothing in this batch or after it is acknowledged;
    /// writes are refused from now on; reads go on from the durable tree,
    /// and the server reports itself read-only (`admin::health`).
    async fn failed(
        &mut self,
        core: &mut Core,
        batch: Batch,
        at: &std::path::Path,
        e: io::Error,
        shards: &[LinkSender<ShardBatch>],
    ) {
        tracing::error!(
            "txn log failed at {} ({e}): refusing writes until restart; \
             serving reads and read-only sessions",
            at.display()
        );
        if self.writable {
            self.health.log_failed();
        }
        self.writable = false;
        let rest = core.refuse_writes(self.durable_tree.clone());
        publish(core.failed_batch(batch), shards).await;
        publish(core.failed_batch(rest), shards).await;
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
