//! Watch tables of one shard, keyed by connection id. Mirrors Apache
//! ZooKeeper's two WatchManagers (data and child) with per-watch modes:
//! standard watches fire once, persistent ones stay, recursive ones also fire
//! for changes below their path (but not for NodeChildrenChanged).

pub mod presence;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use crate::proto::codes::event;
use presence::{ShardWatches, WatchPresence};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Standard,
    Persistent,
    PersistentRecursive,
}

/// With several shards: where a shard publishes what its managers hold.
struct Shared {
    presence: Arc<WatchPresence>,
    shard: usize,
    /// Per watched path, what this manager holds (kept as watches come and
    /// go, so a publish costs the same however many watch the path).
    paths: HashMap<String, Held>,
}

#[derive(Clone, Copy, Default)]
struct Held {
    persistent: u32,
    standard: u32,
    /// The latest view a standard watch still held was set at.
    standard_since: i64,
}

/// One of ZooKeeper's WatchManagers.
#[derive(Default)]
struct Manager {
    table: HashMap<String, HashMap<u64, Mode>>,
    /// As ZooKeeper's watch2Paths, a connection's entry stays (maybe
    /// empty) until the connection goes, which wchs and wchc show.
    by_conn: HashMap<u64, HashSet<String>>,
    recursive_count: usize,
    /// 0: data, 1: child (the manager's key in [`WatchPresence`]).
    kind: u8,
    shared: Option<Shared>,
}

impl Manager {
    fn new(kind: u8, shared: Option<(Arc<WatchPresence>, usize)>) -> Manager {
        Manager {
            kind,
            shared: shared.map(|(presence, shard)| Shared {
                presence,
                shard,
                paths: HashMap::new(),
            }),
            ..Manager::default()
        }
    }

    /// `at`: the view's zxid when the watch was set.
    fn add(&mut self, path: &str, conn: u64, mode: Mode, at: i64) {
        let prev = self
            .table
            .entry(path.to_string())
            .or_default()
            .insert(conn, mode);
        self.adjust_recursive(prev, Some(mode));
        self.by_conn
            .entry(conn)
            .or_default()
            .insert(path.to_string());
        self.count(path, prev, Some((mode, at)));
        self.publish(path);
    }

    /// Keeps [`Shared::paths`]: `removed` went from `path`, `added` came.
    fn count(&mut self, path: &str, removed: Option<Mode>, added: Option<(Mode, i64)>) {
        let Some(shared) = &mut self.shared else {
            return;
        };
        let held = match shared.paths.get_mut(path) {
            Some(held) => held,
            None => shared.paths.entry(path.to_string()).or_default(),
        };
        match removed {
            Some(Mode::Standard) => held.standard -= 1,
            Some(_) => held.persistent -= 1,
            None => {}
        }
        match added {
            Some((Mode::Standard, at)) => {
                held.standard_since = if held.standard == 0 {
                    at
                } else {
                    held.standard_since.max(at)
                };
                held.standard += 1;
            }
            Some(_) => held.persistent += 1,
            None => {}
        }
    }

    /// Tells the other shards what this one now holds on `path`.
    fn publish(&mut self, path: &str) {
        let Some(shared) = &mut self.shared else {
            return;
        };
        let held = shared.paths.get(path).copied().unwrap_or_default();
        debug_assert_eq!(
            held.standard as usize + held.persistent as usize,
            self.table.get(path).map_or(0, |m| m.len()),
            "the published counts are the table's"
        );
        if held.standard == 0 && held.persistent == 0 {
            shared.paths.remove(path);
        }
        let now = ShardWatches {
            persistent: held.persistent,
            standard_since: (held.standard > 0).then_some(held.standard_since),
        };
        shared.presence.publish(self.kind, path, shared.shard, now);
    }

    fn adjust_recursive(&mut self, removed: Option<Mode>, added: Option<Mode>) {
        if removed == Some(Mode::PersistentRecursive) {
            self.recursive_count -= 1;
        }
        if added == Some(Mode::PersistentRecursive) {
            self.recursive_count += 1;
        }
    }

    /// WatchManager.containsWatcher as ZooKeeper 3.8 implements it: true
    /// when *any* connection watches `path` (the watcher itself is only
    /// consulted for a recursive mode, which implies an entry anyway).
    /// Reproduced for compatibility; here "any" means any on this shard.
    /// `view`: the zxid of the view the check is answered from.
    fn contains(&self, path: &str, _conn: u64, view: i64) -> bool {
        self.table.contains_key(path)
            || self
                .shared
                .as_ref()
                .is_some_and(|s| s.presence.others_watch(self.kind, path, s.shard, view))
    }

    fn remove(&mut self, path: &str, conn: u64) -> bool {
        let removed = self.unwatch(path, conn);
        if removed {
            self.publish(path);
        }
        removed
    }

    /// [`Manager::remove`] without telling the other shards (the caller
    /// publishes once it is done with `path`).
    fn unwatch(&mut self, path: &str, conn: u64) -> bool {
        let Some(m) = self.table.get_mut(path) else {
            return false;
        };
        let prev = m.remove(&conn);
        if m.is_empty() {
            self.table.remove(path);
        }
        if let Some(paths) = self.by_conn.get_mut(&conn) {
            paths.remove(path);
        }
        self.adjust_recursive(prev, None);
        self.count(path, prev, None);
        prev.is_some()
    }

    fn remove_conn(&mut self, conn: u64) {
        // The connection's list goes first: `remove` then finds none.
        for path in self.by_conn.remove(&conn).unwrap_or_default() {
            self.remove(&path, conn);
        }
    }

    /// WatchManager.triggerWatch for the txn `zxid`: the connections to
    /// notify, minus `suppress`.
    fn trigger(
        &mut self,
        path: &str,
        event_type: i32,
        zxid: i64,
        out: &mut Vec<u64>,
        suppress: &[u64],
    ) {
        if let Some(shared) = &self.shared {
            // For the other shards' standard watches on `path`, which go
            // when their shards apply this txn: gone from now on.
            shared.presence.triggered(self.kind, path, zxid);
        }
        let mut fired_once: Vec<u64> = Vec::new();
        let mut local = Some(path);
        let mut at_parent = false;
        while let Some(p) = local {
            if let Some(m) = self.table.get(p) {
                for (&conn, &mode) in m {
                    let fire = match mode {
                        Mode::PersistentRecursive => event_type != event::NODE_CHILDREN_CHANGED,
                        _ => !at_parent,
                    };
                    if fire && !out.contains(&conn) && !suppress.contains(&conn) {
                        out.push(conn);
                    }
                    if !at_parent && mode == Mode::Standard {
                        fired_once.push(conn);
                    }
                }
            }
            if !at_parent && !fired_once.is_empty() {
                for conn in fired_once.drain(..) {
                    self.unwatch(p, conn);
                }
                self.publish(p);
            }
            // Ancestors matter only while recursive watches exist.
            local = if self.recursive_count > 0 {
                parent(p)
            } else {
                None
            };
            at_parent = true;
        }
    }
}

fn parent(path: &str) -> Option<&str> {
    if path == "/" {
        return None;
    }
    match path.rfind('/') {
        Some(0) => Some("/"),
        Some(i) => Some(&path[..i]),
        None => None,
    }
}

/// The kind of watch a read or addWatch asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WatchKind {
    /// getData / exists watches (ZooKeeper keeps both in dataWatches).
    Data,
    Child,
}

#[derive(Default)]
pub struct WatchTable {
    data: Manager,
    child: Manager,
}

impl WatchTable {
    /// One shard's table of a server with several: it publishes what it
    /// holds to `presence`, for checkWatches on the other shards.
    pub fn shared(presence: Arc<WatchPresence>, shard: usize) -> WatchTable {
        WatchTable {
            data: Manager::new(0, Some((presence.clone(), shard))),
            child: Manager::new(1, Some((presence, shard))),
        }
    }

    /// A standard watch, set by a read answered from the view at `at`.
    pub fn add(&mut self, kind: WatchKind, path: &str, conn: u64, at: i64) {
        match kind {
            WatchKind::Data => self.data.add(path, conn, Mode::Standard, at),
            WatchKind::Child => self.child.add(path, conn, Mode::Standard, at),
        }
    }

    /// addWatch: persistent modes go into both managers, as in DataTree.addWatch.
    pub fn add_persistent(&mut self, path: &str, conn: u64, recursive: bool, at: i64) {
        let mode = if recursive {
            Mode::PersistentRecursive
        } else {
            Mode::Persistent
        };
        self.data.add(path, conn, mode, at);
        self.child.add(path, conn, mode, at);
    }

    /// checkWatches with WatcherType Children(1), Data(2), Any(3),
    /// answered from the view at `view`. Other types find nothing, as in
    /// ZooKeeper 3.8.
    pub fn contains(&self, path: &str, conn: u64, watcher_type: i32, view: i64) -> bool {
        match watcher_type {
            1 => self.child.contains(path, conn, view),
            2 => self.data.contains(path, conn, view),
            3 => self.child.contains(path, conn, view) || self.data.contains(path, conn, view),
            _ => false,
        }
    }

    pub fn remove(&mut self, path: &str, conn: u64, watcher_type: i32) -> bool {
        match watcher_type {
            1 => self.child.remove(path, conn),
            2 => self.data.remove(path, conn),
            3 => {
                let c = self.child.remove(path, conn);
                let d = self.data.remove(path, conn);
                c || d
            }
            _ => false,
        }
    }

    pub fn remove_conn(&mut self, conn: u64) {
        self.data.remove_conn(conn);
        self.child.remove_conn(conn);
    }

    /// Connections to notify of `event_type` on `path` (from the txn
    /// `zxid`), in the managers' order (DataTree: data watches, then child
    /// watches without those already notified).
    pub fn trigger(&mut self, path: &str, event_type: i32, zxid: i64) -> Vec<u64> {
        let mut out = Vec::new();
        match event_type {
            event::NODE_CREATED | event::NODE_DATA_CHANGED => {
                self.data.trigger(path, event_type, zxid, &mut out, &[])
            }
            event::NODE_CHILDREN_CHANGED => {
                self.child.trigger(path, event_type, zxid, &mut out, &[])
            }
            event::NODE_DELETED => {
                self.data.trigger(path, event_type, zxid, &mut out, &[]);
                let already = out.clone();
                self.child
                    .trigger(path, event_type, zxid, &mut out, &already);
            }
            _ => {}
        }
        out
    }

    /// Total watches (wchs "Total watches").
    pub fn count(&self) -> usize {
        self.data.table.values().map(|m| m.len()).sum::<usize>()
            + self.child.table.values().map(|m| m.len()).sum::<usize>()
    }

    /// The data watches by connection, for wchc/wchp/wchs (which, as
    /// ZooKeeper's DataTree.dumpWatches, show only the data manager).
    /// Built on demand for the admin words; unordered.
    pub fn data_watches_by_conn(&self) -> Vec<(u64, Vec<String>)> {
        self.data
            .by_conn
            .iter()
            .map(|(&conn, paths)| (conn, paths.iter().cloned().collect()))
            .collect()
    }

    pub fn path_count(&self) -> usize {
        let mut paths: HashSet<&String> = self.data.table.keys().collect();
        paths.extend(self.child.table.keys());
        paths.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn standard_watches_fire_once() {
        let mut t = WatchTable::default();
        t.add(WatchKind::Data, "/a", 1, 0);
        assert_eq!(t.trigger("/a", event::NODE_DATA_CHANGED, 1), vec![1]);
        assert!(t.trigger("/a", event::NODE_DATA_CHANGED, 1).is_empty());
    }

    #[test]
    fn delete_notifies_each_connection_once() {
        let mut t = WatchTable::default();
        t.add(WatchKind::Data, "/a", 1, 0);
        t.add(WatchKind::Child, "/a", 1, 0);
        t.add(WatchKind::Child, "/a", 2, 0);
        assert_eq!(t.trigger("/a", event::NODE_DELETED, 1), vec![1, 2]);
        assert_eq!(t.count(), 0);
    }

    #[test]
    fn recursive_watches_see_descendants_but_not_child_events() {
        let mut t = WatchTable::default();
        t.add_persistent("/a", 3, true, 0);
        assert_eq!(t.trigger("/a/b/c", event::NODE_CREATED, 1), vec![3]);
        assert!(t
            .trigger("/a/b", event::NODE_CHILDREN_CHANGED, 1)
            .is_empty());
        assert_eq!(t.trigger("/a/b/c", event::NODE_DELETED, 1), vec![3]);
        assert_eq!(t.trigger("/a", event::NODE_DATA_CHANGED, 1), vec![3]);
        assert!(t.contains("/a", 3, 3, 1));
        assert!(t.remove("/a", 3, 3));
        assert!(t.trigger("/a", event::NODE_DATA_CHANGED, 1).is_empty());
    }

    #[test]
    fn data_watch_report_leaves_out_child_watches() {
        let mut t = WatchTable::default();
        t.add(WatchKind::Data, "/a", 1, 0);
        t.add(WatchKind::Data, "/b", 1, 0);
        t.add(WatchKind::Child, "/c", 2, 0);
        t.add_persistent("/p", 3, false, 0);
        let mut report = t.data_watches_by_conn();
        report.iter_mut().for_each(|(_, ps)| ps.sort());
        report.sort();
        assert_eq!(
            report,
            vec![
                (1, vec!["/a".to_string(), "/b".to_string()]),
                (3, vec!["/p".to_string()])
            ]
        );
        assert_eq!(t.count(), 5);
        // A fired watch leaves its connection listed, with no paths, as
        // ZooKeeper's watch2Paths does; closing the connection removes it.
        t.trigger("/a", event::NODE_DATA_CHANGED, 1);
        t.trigger("/b", event::NODE_DATA_CHANGED, 1);
        let report = t.data_watches_by_conn();
        assert!(report.contains(&(1, vec![])), "{report:?}");
        t.remove_conn(1);
        assert!(t.data_watches_by_conn().iter().all(|(c, _)| *c != 1));
    }

    #[test]
    fn persistent_watch_stays_and_sees_children() {
        let mut t = WatchTable::default();
        t.add_persistent("/p", 4, false, 0);
        assert_eq!(t.trigger("/p", event::NODE_CHILDREN_CHANGED, 1), vec![4]);
        assert_eq!(t.trigger("/p", event::NODE_CHILDREN_CHANGED, 1), vec![4]);
        assert!(t.trigger("/p/x", event::NODE_CREATED, 1).is_empty());
    }

    /// Two shards' tables over one presence: what one holds, the other's
    /// checks find, until it fires, is removed or its connection goes.
    #[test]
    fn shards_see_each_others_watches() {
        let presence = Arc::new(WatchPresence::new());
        let mut a = WatchTable::shared(presence.clone(), 0);
        let b = WatchTable::shared(presence.clone(), 1);
        const DATA: i32 = 2;
        const CHILD: i32 = 1;
        const ANY: i32 = 3;
        a.add(WatchKind::Data, "/d", 10, 5);
        a.add(WatchKind::Data, "/d", 11, 6);
        a.add(WatchKind::Child, "/c", 10, 6);
        assert!(b.contains("/d", 20, DATA, 6));
        assert!(!b.contains("/d", 20, CHILD, 6));
        assert!(b.contains("/c", 20, ANY, 6));
        // Txn 7 changes /d: both watches fire on a; b, at view 7, finds
        // none (b at view 6 would still find them).
        // (In the connections' map order, as ZooKeeper's HashSet of them.)
        let mut fired = a.trigger("/d", event::NODE_DATA_CHANGED, 7);
        fired.sort_unstable();
        assert_eq!(fired, vec![10, 11]);
        assert!(!b.contains("/d", 20, DATA, 7));
        // A persistent watch replacing a standard one on the same path
        // and connection is counted once, and outlives triggers.
        a.add(WatchKind::Data, "/p", 12, 7);
        a.add_persistent("/p", 12, false, 7);
        a.trigger("/p", event::NODE_DATA_CHANGED, 8);
        assert!(b.contains("/p", 20, DATA, 8));
        assert!(b.contains("/p", 20, CHILD, 8));
        // Removal by its owner goes at once.
        assert!(a.remove("/p", 12, ANY));
        assert!(!b.contains("/p", 20, ANY, 8));
        // A closed connection's watches go with it.
        a.remove_conn(10);
        assert!(!b.contains("/c", 20, CHILD, 8));
        assert!(presence.is_empty(), "entries go with their last watch");
    }
}
