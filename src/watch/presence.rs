//! Which paths any shard's connections watch, for checkWatches.
//!
//! ZooKeeper 3.8's checkWatches answers OK when *any* connection of the
//! server watches the path (WatchManager.containsWatcher looks the path up
//! and never the watcher: [`super::WatchTable::contains`]). With several
//! shards a session's shard sees only its own connections' watches, so the
//! shards publish here, per watched path and manager, what each of them
//! holds: how many persistent watches, and whether it holds standard ones
//! and since when (the view's zxid when the latest was set).
//!
//! A standard watch goes when a txn triggers its path. Each shard removes
//! its own when it applies that txn, at its own pace, so a shard a batch
//! behind would still publish watches that another session's check, on a
//! shard that has applied the txn, must not see any more. The first shard
//! to apply a trigger records its zxid on the path's entry (the last two
//! are kept), and for a check answered from a view, a shard's standard
//! watches count only when set at or after the newest trigger that view
//! holds: a read that set a watch at a view before the trigger is, in the
//! order of the server's history, before the trigger, and its watch is
//! gone with it; a trigger the asking shard has not applied yet is not
//! seen by its check either.
//!
//! Left open, each for as long as a shard lags (a batch, in steady state):
//! an entry goes with its last watch, and its triggers with it, so a
//! lagging shard that then publishes a watch set at a view before such a
//! trigger has it counted by the other shards' checks until it applies
//! that trigger itself; and a closed session's watches stay visible to
//! other shards until its connection is gone (as to its own shard).
//!
//! Only kept with more than one shard. Striped by path, so shards touching
//! different paths do not wait for each other.

use std::collections::hash_map::RandomState;
use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Mutex;

/// A shard's watches on one path in one manager.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ShardWatches {
    /// Persistent and persistent-recursive watches: they go only when
    /// removed or their connection closes, both in the owner's order.
    pub persistent: u32,
    /// The latest view (zxid) a standard watch still held was set at.
    pub standard_since: Option<i64>,
}

impl ShardWatches {
    fn is_empty(&self) -> bool {
        self.persistent == 0 && self.standard_since.is_none()
    }

    fn counts(&self, trigger: i64) -> bool {
        self.persistent > 0 || self.standard_since.is_some_and(|since| since >= trigger)
    }
}

#[derive(Default)]
struct Entry {
    /// The zxids of the last two txns that triggered the path in this
    /// manager, newest first, as the first shard to apply each recorded it
    /// (0: none).
    triggers: [i64; 2],
    /// By shard index; a shard with nothing here has no entry.
    shards: Vec<(usize, ShardWatches)>,
}

impl Entry {
    /// The newest trigger a check answered from `view` must honour: one
    /// the asking shard has applied. A shard ahead may have recorded a
    /// newer one, which that check must not see yet (its session would see
    /// the write's effect on watches before the write). When both kept
    /// triggers are ahead of the view (the asker is two triggers of this
    /// path behind), the older one stands in.
    fn trigger_at(&self, view: i64) -> i64 {
        match self.triggers {
            [newest, _] if newest <= view => newest,
            [_, older] => older,
        }
    }
}

const STRIPES: usize = 64;

/// Per manager (0: data, 1: child), by path.
type Stripe = [HashMap<String, Entry>; 2];

/// Shared by the shards of one server.
pub struct WatchPresence {
    stripes: Vec<Mutex<Stripe>>,
    hasher: RandomState,
    /// Paths with an entry: while there are none (no watches anywhere), a
    /// write's triggers take no lock.
    entries: AtomicUsize,
}

impl Default for WatchPresence {
    fn default() -> Self {
        WatchPresence::new()
    }
}

impl WatchPresence {
    pub fn new() -> WatchPresence {
        WatchPresence {
            stripes: (0..STRIPES).map(|_| Mutex::default()).collect(),
            hasher: RandomState::new(),
            entries: AtomicUsize::new(0),
        }
    }

    fn stripe(&self, path: &str) -> std::sync::MutexGuard<'_, Stripe> {
        let i = self.hasher.hash_one(path) as usize % STRIPES;
        // A shard that panicked holding a stripe took its server down.
        self.stripes[i].lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `shard` now holds `now` on `path` in manager `kind`.
    pub fn publish(&self, kind: u8, path: &str, shard: usize, now: ShardWatches) {
        let mut stripe = self.stripe(path);
        let paths = &mut stripe[kind as usize];
        if now.is_empty() {
            let Some(entry) = paths.get_mut(path) else {
                return;
            };
            entry.shards.retain(|(s, _)| *s != shard);
            if entry.shards.is_empty() {
                paths.remove(path);
                self.entries.fetch_sub(1, Relaxed);
            }
            return;
        }
        let entry = match paths.get_mut(path) {
            Some(entry) => entry,
            None => {
                self.entries.fetch_add(1, Relaxed);
                paths.entry(path.to_string()).or_default()
            }
        };
        match entry.shards.iter_mut().find(|(s, _)| *s == shard) {
            Some((_, w)) => *w = now,
            None => entry.shards.push((shard, now)),
        }
    }

    /// A txn with `zxid` triggered `path` in manager `kind`: every standard
    /// watch set before it is gone, on every shard.
    pub fn triggered(&self, kind: u8, path: &str, zxid: i64) {
        // A trigger applied while the path has no entry is not recorded.
        // A shard behind that then sets a watch at a view before the
        // trigger publishes a watch the server's order has already fired:
        // other shards' checks find it until that shard applies the
        // trigger itself (its lag, a batch at most in steady state).
        if self.entries.load(Relaxed) == 0 {
            return;
        }
        let mut stripe = self.stripe(path);
        if let Some(entry) = stripe[kind as usize].get_mut(path) {
            // Every shard applying the txn comes here: the first records it.
            if zxid > entry.triggers[0] {
                entry.triggers = [zxid, entry.triggers[0]];
            }
        }
    }

    /// Whether a shard other than `shard` watches `path` in manager `kind`,
    /// as a check answered from the view at `view` sees it.
    pub fn others_watch(&self, kind: u8, path: &str, shard: usize, view: i64) -> bool {
        if self.entries.load(Relaxed) == 0 {
            return false;
        }
        let stripe = self.stripe(path);
        stripe[kind as usize].get(path).is_some_and(|e| {
            e.shards
                .iter()
                .any(|(s, w)| *s != shard && w.counts(e.trigger_at(view)))
        })
    }

    /// Paths with an entry (for tests: entries go with their last watch).
    pub fn len(&self) -> usize {
        self.entries.load(Relaxed)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn standard(since: i64) -> ShardWatches {
        ShardWatches {
            persistent: 0,
            standard_since: Some(since),
        }
    }

    #[test]
    fn another_shards_watch_counts_until_triggered() {
        let p = WatchPresence::new();
        p.publish(0, "/a", 1, standard(5));
        assert!(p.others_watch(0, "/a", 0, 5));
        assert!(
            !p.others_watch(0, "/a", 1, 5),
            "a shard's own are not others'"
        );
        assert!(!p.others_watch(1, "/a", 0, 5), "managers are apart");
        // Shard 0 applied txn 7, which triggered /a: shard 1's watch, set
        // at view 5, is gone for a check from view 7, even before shard 1
        // applies txn 7...
        p.triggered(0, "/a", 7);
        assert!(!p.others_watch(0, "/a", 0, 7));
        // ...but not for a check from a shard still at view 6.
        assert!(p.others_watch(0, "/a", 2, 6));
        // A watch set at view 7 or later (after the trigger) counts.
        p.publish(0, "/a", 2, standard(7));
        assert!(p.others_watch(0, "/a", 0, 7));
        // A shard catching up applies txn 7 too: nothing changes.
        p.triggered(0, "/a", 7);
        assert!(p.others_watch(0, "/a", 0, 7));
        // Txn 9 fires it again; a check from view 8 honours txn 7 only.
        p.triggered(0, "/a", 9);
        assert!(!p.others_watch(0, "/a", 0, 9));
        assert!(p.others_watch(0, "/a", 0, 8));
    }

    #[test]
    fn persistent_watches_outlive_triggers() {
        let p = WatchPresence::new();
        p.publish(
            1,
            "/b",
            3,
            ShardWatches {
                persistent: 1,
                standard_since: None,
            },
        );
        p.triggered(1, "/b", 100);
        assert!(p.others_watch(1, "/b", 0, 100));
        p.publish(1, "/b", 3, ShardWatches::default());
        assert!(!p.others_watch(1, "/b", 0, 100));
        assert!(p.is_empty(), "the entry goes with its last watch");
    }
}
