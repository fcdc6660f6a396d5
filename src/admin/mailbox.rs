//! Cross-shard admin reports: how a four-letter word answered on one shard
//! sees every shard's connections, sessions and watches.
//!
//! Connections, watch tables and session bindings belong to their shard's
//! executor and live in `RefCell`s that no other thread may touch. The
//! words that need them (stat, cons, crst, dump, wchc, wchp, wchs, mntr),
//! and metrics scrapes (`admin::metrics`), therefore *ask* each shard
//! instead of reading its state:
//!
//! * Every shard's `ShardStats` (shared by all executors) holds a `Mailbox`:
//!   per kind of request an `asked` and a `done` generation counter, plus the
//!   last published report behind a `Mutex`.
//! * The word's handler bumps `asked` on every other shard, builds its own
//!   shard's report directly (no wait, exact), then waits until each other
//!   shard's `done` reaches the generation it asked for, sleeping
//!   [`WAIT_STEP`] between looks and giving up after [`WAIT_MAX`].
//! * Each shard runs a publisher task that looks at its mailbox every
//!   [`POLL`]: one atomic load per kind when nothing is asked. When asked,
//!   it builds the report on its own executor (between requests, like any
//!   other task), stores it under the mutex and then publishes `done`.
//!
//! Nothing here is on the request path: requests never take the mutex, never
//! wait for another core and never look at the mailbox. The mutex is touched
//! only by the publisher and by admin words, and only to swap an `Arc`.
//!
//! Staleness: every shard's report is built *after* the word was received
//! (the publisher reads `asked` before building), so nothing older than the
//! request is shown; but the shards' reports are taken at slightly
//! different moments (up to [`POLL`] apart), not as one atomic cut. A word
//! takes up to about [`POLL`] longer with several shards. With one shard (the
//! default on two cores) there is nothing to ask and the answer is exact.
//! If a shard does not answer within [`WAIT_MAX`] (it is stuck), the word
//! uses that shard's previous report, if any, and logs a warning.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::metrics::ShardMetrics;
use super::report::{ShardCounts, ShardReport};

/// How often a shard looks at its mailbox.
pub const POLL: Duration = Duration::from_millis(50);
/// How often a waiting word looks at the other shards' answers.
pub const WAIT_STEP: Duration = Duration::from_millis(5);
/// How long a word waits for a shard before using its previous report.
pub const WAIT_MAX: Duration = Duration::from_secs(2);

/// What a word asks of the other shards.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ask {
    /// Watch and session counts (mntr): cheap.
    Counts = 0,
    /// Connections, sessions and data watches (stat, cons, dump, wch*).
    Full = 1,
    /// Reset every connection's counters (crst).
    ResetConns = 2,
    /// Latency histograms and counts for a metrics scrape (`admin::metrics`).
    Metrics = 3,
}

#[derive(Default)]
pub struct Mailbox {
    asked: [AtomicU64; 4],
    done: [AtomicU64; 4],
    counts: Mutex<Option<Arc<ShardCounts>>>,
    full: Mutex<Option<Arc<ShardReport>>>,
    metrics: Mutex<Option<Arc<ShardMetrics>>>,
}

impl Mailbox {
    /// Admin side: files a request; returns the generation to wait for.
    pub fn ask(&self, what: Ask) -> u64 {
        self.asked[what as usize].fetch_add(1, Ordering::SeqCst) + 1
    }

    /// Admin side: whether the request of generation `gen` was served.
    pub fn is_done(&self, what: Ask, gen: u64) -> bool {
        self.done[what as usize].load(Ordering::Acquire) >= gen
    }

    /// Shard side: the newest generation asked and not yet served.
    pub fn wanted(&self, what: Ask) -> Option<u64> {
        let asked = self.asked[what as usize].load(Ordering::Acquire);
        (asked > self.done[what as usize].load(Ordering::Relaxed)).then_some(asked)
    }

    /// Shard side: publishes counts for generation `gen`.
    pub fn serve_counts(&self, gen: u64, counts: ShardCounts) {
        *self.counts.lock().unwrap_or_else(|e| e.into_inner()) = Some(Arc::new(counts));
        self.done[Ask::Counts as usize].store(gen, Ordering::Release);
    }

    /// Shard side: publishes a full report (which also answers counts).
    pub fn serve_full(&self, gen: u64, report: ShardReport) {
        let report = Arc::new(report);
        *self.counts.lock().unwrap_or_else(|e| e.into_inner()) = Some(Arc::new(report.counts));
        *self.full.lock().unwrap_or_else(|e| e.into_inner()) = Some(report);
        self.done[Ask::Full as usize].store(gen, Ordering::Release);
    }

    /// Shard side: publishes this shard's part of a metrics scrape.
    pub fn serve_metrics(&self, gen: u64, metrics: ShardMetrics) {
        *self.metrics.lock().unwrap_or_else(|e| e.into_inner()) = Some(Arc::new(metrics));
        self.done[Ask::Metrics as usize].store(gen, Ordering::Release);
    }

    /// Shard side: marks a request without payload (crst) as served.
    pub fn serve(&self, what: Ask, gen: u64) {
        self.done[what as usize].store(gen, Ordering::Release);
    }

    pub fn counts(&self) -> Option<Arc<ShardCounts>> {
        self.counts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    pub fn full(&self) -> Option<Arc<ShardReport>> {
        self.full.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    pub fn metrics(&self) -> Option<Arc<ShardMetrics>> {
        self.metrics
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_is_done_only_after_a_later_publish() {
        let m = Mailbox::default();
        assert_eq!(m.wanted(Ask::Full), None);
        let gen = m.ask(Ask::Full);
        assert!(!m.is_done(Ask::Full, gen));
        let seen = m.wanted(Ask::Full).unwrap();
        // A second request arrives while the shard builds the first.
        let gen2 = m.ask(Ask::Full);
        m.serve_full(seen, ShardReport::default());
        assert!(m.is_done(Ask::Full, gen));
        assert!(!m.is_done(Ask::Full, gen2), "built before the second ask");
        assert_eq!(m.wanted(Ask::Full), Some(gen2));
        m.serve_full(gen2, ShardReport::default());
        assert!(m.is_done(Ask::Full, gen2));
        assert!(m.counts().is_some(), "a full report answers counts too");
        assert!(!m.is_done(Ask::Counts, 1), "but not a counts request");
    }
}
