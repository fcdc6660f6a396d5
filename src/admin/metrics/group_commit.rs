//! What the consensus core publishes about group commit.
//!
//! The core runs on its own executor. It writes plain counters and gauges
//! into [`CoreMetrics`] with relaxed atomic stores that only it performs
//! (a few per loop turn and per fsync, none per txn), and keeps the fsync
//! latency histogram in its own `RefCell`. A task on the core's executor
//! copies that histogram into [`CoreMetrics`] every [`PUBLISH_EVERY`] when it
//! changed, swapping an `Arc` under a mutex that only this task and scrapes
//! touch. So a scrape sees the counters as of now and the fsync summary as
//! of at most [`PUBLISH_EVERY`] ago.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::latency::Summary;

/// How often the core publishes its fsync latency histogram.
pub const PUBLISH_EVERY: Duration = Duration::from_millis(250);

/// Written by the consensus core only, read by scrapes.
#[derive(Default)]
#[repr(align(128))]
pub struct CoreMetrics {
    /// Txns prepped and not yet durable: the batch being built plus the
    /// batch whose fdatasync is in flight.
    pub outstanding_txns: AtomicU64,
    /// Requests from the shards queued in the core's inbox, not yet prepped.
    pub inbox_requests: AtomicU64,
    /// Log batches made durable by an fdatasync.
    pub fsyncs: AtomicU64,
    /// Txns made durable (with forceSync=no: appended).
    pub txns: AtomicU64,
    /// Log bytes made durable.
    pub log_bytes: AtomicU64,
    /// Txns and bytes of the last batch an fdatasync covered.
    pub fsync_batch_txns: AtomicU64,
    pub fsync_batch_bytes: AtomicU64,
    fsync_latency: Mutex<Option<Arc<Summary>>>,
    /// How long writing each snapshot took (µs), recorded by the snapshot
    /// thread once per snapshot: a lock per snapshot costs nothing.
    snapshot_time: Mutex<Summary>,
}

/// The fsync latency summary as scrapes see it.
impl CoreMetrics {
    /// The last published fsync latency summary (µs).
    pub fn fsync_latency(&self) -> Option<Arc<Summary>> {
        self.fsync_latency
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// One snapshot was written in `us` microseconds.
    pub fn snapshot_written(&self, us: u64) {
        self.snapshot_time
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .record(us);
    }

    /// A copy of the snapshot time summary (µs).
    pub fn snapshot_time(&self) -> Summary {
        self.snapshot_time
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn publish(&self, summary: Summary) {
        *self.fsync_latency.lock().unwrap_or_else(|e| e.into_inner()) = Some(Arc::new(summary));
    }
}

/// The core's side: lives in the runner, does nothing when metrics are off.
pub struct CoreRecorder {
    on: Option<Recording>,
}

struct Recording {
    shared: Arc<CoreMetrics>,
    fsync_us: Rc<RefCell<Summary>>,
    changed: Rc<Cell<bool>>,
    /// Txns and bytes of the batch last appended, until it is durable.
    appended: (u64, u64),
    sync_started: Option<Instant>,
}

impl CoreRecorder {
    /// Starts recording into `shared` (and its publisher task on the current
    /// executor), or records nothing when `shared` is None.
    pub fn new(shared: Option<Arc<CoreMetrics>>) -> CoreRecorder {
        let on = shared.map(|shared| {
            let r = Recording {
                shared,
                fsync_us: Rc::default(),
                changed: Rc::default(),
                appended: (0, 0),
                sync_started: None,
            };
            glommio::spawn_local(publisher(
                r.shared.clone(),
                r.fsync_us.clone(),
                r.changed.clone(),
            ))
            .detach();
            r
        });
        CoreRecorder { on }
    }

    /// What scrapes read, when metrics are on.
    pub fn shared(&self) -> Option<Arc<CoreMetrics>> {
        self.on.as_ref().map(|r| r.shared.clone())
    }

    /// Once per turn of the core's loop: txns prepped into the batch being
    /// built, the zxids of the batch being synced, requests in the inbox.
    #[inline]
    pub fn loop_turn(&self, building_txns: usize, syncing: Option<(i64, i64)>, inbox: usize) {
        if let Some(r) = &self.on {
            let syncing = syncing.map_or(0, |(first, last)| (last - first + 1) as u64);
            r.shared
                .outstanding_txns
                .store(building_txns as u64 + syncing, Relaxed);
            r.shared.inbox_requests.store(inbox as u64, Relaxed);
        }
    }

    /// A batch of txns `first..=last`, `bytes` long, went into the log.
    pub fn appended(&mut self, first: i64, last: i64, bytes: usize) {
        if let Some(r) = &mut self.on {
            r.appended = ((last - first + 1) as u64, bytes as u64);
            r.sync_started = None;
        }
    }

    /// The fdatasync of the batch last appended started.
    pub fn sync_started(&mut self) {
        if let Some(r) = &mut self.on {
            r.sync_started = Some(Instant::now());
        }
    }

    /// The batch last appended is durable (after its fdatasync, or at once
    /// with forceSync=no).
    pub fn durable(&mut self) {
        let Some(r) = &mut self.on else { return };
        let (txns, bytes) = std::mem::take(&mut r.appended);
        let s = &r.shared;
        s.txns.fetch_add(txns, Relaxed);
        s.log_bytes.fetch_add(bytes, Relaxed);
        if let Some(started) = r.sync_started.take() {
            let us = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
            r.fsync_us.borrow_mut().record(us);
            r.changed.set(true);
            s.fsync_batch_txns.store(txns, Relaxed);
            s.fsync_batch_bytes.store(bytes, Relaxed);
            s.fsyncs.fetch_add(1, Relaxed);
        }
    }
}

async fn publisher(
    shared: Arc<CoreMetrics>,
    fsync_us: Rc<RefCell<Summary>>,
    changed: Rc<Cell<bool>>,
) {
    shared.publish(Summary::new());
    loop {
        glommio::timer::sleep(PUBLISH_EVERY).await;
        if changed.replace(false) {
            let copy = fsync_us.borrow().clone();
            shared.publish(copy);
        }
    }
}
