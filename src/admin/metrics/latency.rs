//! Latency summaries: an hdrhistogram plus the exact sum, per operation.
//!
//! Each shard owns one [`LatencyRecorder`] in a `RefCell` on its own
//! executor: recording a request is a borrow and a histogram increment, no
//! atomic, no lock. A scrape gets a copy of each shard's [`LatencyBook`]
//! (see the module doc of `admin::metrics`) and merges them.

use std::cell::RefCell;
use std::time::Duration;

use hdrhistogram::Histogram;

use crate::proto::codes::op;

/// Highest value a histogram tells apart (60 s in µs); slower requests count
/// as this much in the quantiles (their sum stays exact).
pub const VALUE_MAX: u64 = 60_000_000;
/// Two significant digits: quantiles within 1%, and a histogram of about
/// 20 KiB, so that copying every operation's histogram for a scrape stays
/// cheap for the shard that does it between requests.
const SIGNIFICANT_DIGITS: u8 = 2;

/// The quantiles every summary reports.
pub const QUANTILES: [f64; 4] = [0.5, 0.9, 0.99, 0.999];

/// Operation names as ZooKeeper's `Request.op2String` spells them (3.8 has
/// no name for addWatch: it is "addWatch" here, as the OpCode is named),
/// most frequent first: finding a request's slot is a short linear search.
pub const OPS: [(i32, &str); 31] = [
    (op::GET_DATA, "getData"),
    (op::EXISTS, "exists"),
    (op::PING, "ping"),
    (op::GET_CHILDREN2, "getChildren2"),
    (op::GET_CHILDREN, "getChildren"),
    (op::SET_DATA, "setData"),
    (op::CREATE, "create"),
    (op::CREATE2, "create2"),
    (op::DELETE, "delete"),
    (op::MULTI, "multi"),
    (op::MULTI_READ, "multiRead"),
    (op::CHECK, "check"),
    (op::SYNC, "sync"),
    (op::CREATE_SESSION, "createSession"),
    (op::CLOSE_SESSION, "closeSession"),
    (op::CREATE_CONTAINER, "createContainer"),
    (op::CREATE_TTL, "createTtl"),
    (op::DELETE_CONTAINER, "deleteContainer"),
    (op::GET_ACL, "getACL"),
    (op::SET_ACL, "setACL"),
    (op::SET_WATCHES, "setWatches"),
    (op::SET_WATCHES2, "setWatches2"),
    (op::ADD_WATCH, "addWatch"),
    (op::CHECK_WATCHES, "checkWatches"),
    (op::REMOVE_WATCHES, "removeWatches"),
    (op::GET_EPHEMERALS, "getEphemerals"),
    (op::GET_ALL_CHILDREN_NUMBER, "getAllChildrenNumber"),
    (op::WHO_AM_I, "whoAmI"),
    (op::RECONFIG, "reconfig"),
    (op::AUTH, "auth"),
    (op::SASL, "sasl"),
];

/// The label of an opcode ZooKeeper has no name for.
pub const UNKNOWN_OP: &str = "unknown";

fn slot(opcode: i32) -> usize {
    OPS.iter()
        .position(|&(code, _)| code == opcode)
        .unwrap_or(OPS.len())
}

fn slot_name(slot: usize) -> &'static str {
    OPS.get(slot).map_or(UNKNOWN_OP, |&(_, name)| name)
}

/// One summary: the distribution (for quantiles) and the exact sum and count.
#[derive(Clone, Debug)]
pub struct Summary {
    hist: Histogram<u64>,
    sum: u64,
}

impl Default for Summary {
    fn default() -> Self {
        Summary::new()
    }
}

impl Summary {
    pub fn new() -> Summary {
        Summary {
            hist: Histogram::new_with_bounds(1, VALUE_MAX, SIGNIFICANT_DIGITS)
                .expect("constant histogram bounds are valid"),
            sum: 0,
        }
    }

    pub fn record(&mut self, value: u64) {
        self.hist.saturating_record(value);
        self.sum = self.sum.saturating_add(value);
    }

    pub fn count(&self) -> u64 {
        self.hist.len()
    }

    pub fn sum(&self) -> u64 {
        self.sum
    }

    /// The value at `q` (0..=1); None when nothing was recorded.
    pub fn quantile(&self, q: f64) -> Option<u64> {
        (self.count() > 0).then(|| self.hist.value_at_quantile(q))
    }

    pub fn merge(&mut self, other: &Summary) {
        // Same bounds on both sides: adding cannot fail.
        self.hist
            .add(&other.hist)
            .expect("histograms with equal bounds add");
        self.sum = self.sum.saturating_add(other.sum);
    }
}

/// Request latency in µs by operation. Histograms are made on an
/// operation's first request, so a shard holds only those of the
/// operations its clients use.
#[derive(Clone, Debug, Default)]
pub struct LatencyBook {
    slots: Vec<Option<Summary>>,
}

impl LatencyBook {
    pub fn record(&mut self, opcode: i32, us: u64) {
        let i = slot(opcode);
        if self.slots.len() <= i {
            self.slots.resize(OPS.len() + 1, None);
        }
        self.slots[i].get_or_insert_with(Summary::new).record(us);
    }

    pub fn merge(&mut self, other: &LatencyBook) {
        for (i, theirs) in other.slots.iter().enumerate() {
            let Some(theirs) = theirs else { continue };
            if self.slots.len() <= i {
                self.slots.resize(OPS.len() + 1, None);
            }
            match &mut self.slots[i] {
                Some(mine) => mine.merge(theirs),
                mine @ None => *mine = Some(theirs.clone()),
            }
        }
    }

    /// Operations with at least one request, in [`OPS`] order.
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, &Summary)> {
        self.slots
            .iter()
            .enumerate()
            .filter_map(|(i, s)| Some((slot_name(i), s.as_ref()?)))
    }
}

/// Whether ZooKeeper counts a request of `opcode` in `updatelatency`
/// (ServerStats.updateLatency: requests that carry a txn header, the ones
/// PrepRequestProcessor turns into a txn or an error txn) rather than in
/// `readlatency` (everything else, pings and sync included).
pub fn is_update(opcode: i32) -> bool {
    matches!(
        opcode,
        op::CREATE
            | op::CREATE2
            | op::CREATE_TTL
            | op::CREATE_CONTAINER
            | op::DELETE
            | op::DELETE_CONTAINER
            | op::SET_DATA
            | op::SET_ACL
            | op::MULTI
            | op::CHECK
            | op::RECONFIG
            | op::CREATE_SESSION
            | op::CLOSE_SESSION
    )
}

impl LatencyBook {
    /// Every operation's latency merged into two summaries, ZooKeeper's
    /// `readlatency` and `updatelatency` (see [`is_update`]).
    pub fn reads_and_updates(&self) -> (Summary, Summary) {
        let (mut reads, mut updates) = (Summary::new(), Summary::new());
        for (i, s) in self.slots.iter().enumerate() {
            let Some(s) = s else { continue };
            match OPS.get(i) {
                Some(&(code, _)) if is_update(code) => updates.merge(s),
                _ => reads.merge(s),
            }
        }
        (reads, updates)
    }
}

/// A shard's recorder: off (nothing kept) unless metrics are configured.
pub struct LatencyRecorder {
    book: Option<RefCell<LatencyBook>>,
}

impl LatencyRecorder {
    pub fn new(enabled: bool) -> LatencyRecorder {
        LatencyRecorder {
            book: enabled.then(RefCell::default),
        }
    }

    /// One answered request of `opcode` that took `elapsed`.
    #[inline]
    pub fn record(&self, opcode: i32, elapsed: Duration) {
        if let Some(book) = &self.book {
            let us = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX);
            book.borrow_mut().record(opcode, us);
        }
    }

    /// A copy of everything recorded so far.
    pub fn snapshot(&self) -> LatencyBook {
        self.book
            .as_ref()
            .map(|b| b.borrow().clone())
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn op_names_are_unique_and_unknown_ops_share_a_slot() {
        let names: std::collections::HashSet<&str> = OPS.iter().map(|&(_, n)| n).collect();
        assert_eq!(names.len(), OPS.len());
        let codes: std::collections::HashSet<i32> = OPS.iter().map(|&(c, _)| c).collect();
        assert_eq!(codes.len(), OPS.len());
        assert_eq!(slot_name(slot(op::GET_DATA)), "getData");
        assert_eq!(slot_name(slot(op::CREATE_TTL)), "createTtl");
        assert_eq!(slot_name(slot(9999)), UNKNOWN_OP);
    }

    #[test]
    fn summaries_keep_exact_counts_and_sums() {
        let mut a = LatencyBook::default();
        for us in [10, 20, 30] {
            a.record(op::GET_DATA, us);
        }
        a.record(op::SET_DATA, VALUE_MAX * 10);
        let mut b = LatencyBook::default();
        b.record(op::GET_DATA, 40);
        b.record(4242, 1);
        a.merge(&b);
        let got: Vec<(&str, u64, u64)> = a.iter().map(|(n, s)| (n, s.count(), s.sum())).collect();
        assert_eq!(
            got,
            vec![
                ("getData", 4, 100),
                ("setData", 1, VALUE_MAX * 10),
                (UNKNOWN_OP, 1, 1)
            ]
        );
        let (_, get) = a.iter().next().unwrap();
        let p50 = get.quantile(0.5).unwrap();
        assert!((20..=21).contains(&p50), "{p50}");
        assert!(get.quantile(1.0).unwrap() >= 40);
        let (_, set) = a.iter().nth(1).unwrap();
        assert!(
            set.quantile(0.5).unwrap() >= VALUE_MAX,
            "saturates at the bound"
        );
        assert_eq!(Summary::new().quantile(0.5), None);
    }

    #[test]
    fn reads_and_updates_split_as_zookeeper_does() {
        let mut b = LatencyBook::default();
        b.record(op::GET_DATA, 10);
        b.record(op::PING, 30);
        b.record(op::SYNC, 5);
        b.record(op::CREATE, 100);
        b.record(op::CREATE_SESSION, 200);
        b.record(4242, 1);
        let (reads, updates) = b.reads_and_updates();
        assert_eq!((reads.count(), reads.sum()), (4, 46));
        assert_eq!((updates.count(), updates.sum()), (2, 300));
        assert!(!is_update(op::MULTI_READ) && is_update(op::CHECK));
    }

    #[test]
    fn a_disabled_recorder_keeps_nothing() {
        let r = LatencyRecorder::new(false);
        r.record(op::GET_DATA, Duration::from_micros(5));
        assert_eq!(r.snapshot().iter().count(), 0);
        let r = LatencyRecorder::new(true);
        r.record(op::GET_DATA, Duration::from_micros(5));
        assert_eq!(r.snapshot().iter().map(|(_, s)| s.count()).sum::<u64>(), 1);
    }
}
