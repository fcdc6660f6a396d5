//! Transactions: the resolved form of a write, decided by prep on the
//! consensus core. Applying a txn never fails: every check was made in prep
//! against the same tree state, so a failing precondition here is a bug.

use std::sync::Arc;

use bytes::Bytes;

use super::{path::split_parent, Node, Tree};
use crate::proto::codes::event;
use crate::proto::{Acl, Stat};

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TxnOp {
    Create {
        path: Arc<str>,
        data: Option<Bytes>,
        acl: Arc<[Acl]>,
        ephemeral_owner: i64,
        parent_cversion: i32,
        /// The request was a create2: ZooKeeper's txn type 15, whose
        /// record is create's. A Java member answers a create2 with the
        /// stat its DataTree gives only for the txn types create2,
        /// createContainer and createTTL, so a leader must propose a
        /// create2 as one (as a plain create its client went unanswered:
        /// issue 26, defect 10b). Nothing else reads it: containers and
        /// TTL nodes have txn types of their own, a multi's creates are
        /// rebuilt from their flags (never create2), and this server's
        /// own log does not keep it (a txn read back from there is
        /// proposed as create, which applies alike; no client awaits a
        /// txn sent in a DIFF).
        create2: bool,
    },
    Delete {
        path: Arc<str>,
    },
    SetData {
        path: Arc<str>,
        data: Option<Bytes>,
        version: i32,
    },
    SetAcl {
        path: Arc<str>,
        acl: Arc<[Acl]>,
        aversion: i32,
    },
    /// A version check that passed (check alone or inside multi).
    Check {
        path: Arc<str>,
    },
    CreateSession {
        timeout_ms: i32,
    },
    /// Closes the txn's session and deletes its ephemerals, in one txn.
    CloseSession {
        ephemerals: Vec<Arc<str>>,
    },
    /// All ops of a successful multi, sharing the txn's zxid.
    Multi(Vec<TxnOp>),
    /// A failed write: it still takes a zxid, as in ZooKeeper (ErrorTxn).
    Error {
        code: i32,
    },
    /// A failed multi: per-op codes (0 before the failure, its code, -2 after).
    MultiError {
        codes: Vec<i32>,
    },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Txn {
    pub zxid: i64,
    pub time_ms: i64,
    pub session_id: i64,
    pub cxid: i32,
    pub op: TxnOp,
}

fn node_data_len(data: &Option<Bytes>) -> usize {
    data.as_ref().map_or(0, Bytes::len)
}

/// A watch to fire: this event type on this path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Trigger {
    pub path: Arc<str>,
    pub event_type: i32,
    /// The ACL DataTree hands triggerWatch with the event: the changed
    /// node's, or its parent's for NodeChildrenChanged. A connection whose
    /// ids have no READ in it is not sent the event (the watch is still
    /// used up), as ZooKeeper's ServerCnxn.process(event, znodeAcl) does.
    pub acl: Arc<[Acl]>,
}

impl Tree {
    /// ZKDatabase.initConfigInZKDatabase: an ensemble member puts its
    /// membership in /zookeeper/config whenever it loads its data (no txn:
    /// setData with version -1 and zxid 0, mtime the local clock).
    pub fn set_config_node(&mut self, text: &[u8], now_ms: i64) {
        let old_len = self.update(super::CONFIG_PATH, |node| {
            let old_len = node.data_len() as u64;
            node.set_data(Some(text));
            node.version = -1;
            node.mzxid = 0;
            node.mtime = now_ms;
            old_len
        });
        self.data_bytes = self.data_bytes - old_len + text.len() as u64;
    }

    /// Applies a committed txn and returns the watch triggers it fires, in
    /// the order ZooKeeper's DataTree fires them.
    pub fn apply(&mut self, txn: &Txn) -> Vec<Trigger> {
        let mut triggers = Vec::new();
        self.apply_observing(txn, &mut triggers, |_, _, _, _| {});
        triggers
    }

    /// Applies a committed txn as [`Tree::apply`] does, calling `after`
    /// with the tree as it stands after each op of a multi (index and op),
    /// or after the txn's one op: what a multi's per-op results are read
    /// off, without a scratch copy of the tree. `after` also gets the stat
    /// a setData or setACL left on its node, taken as the op applied (as
    /// DataTree copies it before it updates quota), so a reply need not
    /// look the node up again. The triggers are appended to `triggers`: a
    /// caller applying txn after txn hands the same buffer each time.
    pub fn apply_observing(
        &mut self,
        txn: &Txn,
        triggers: &mut Vec<Trigger>,
        mut after: impl FnMut(&Tree, usize, &TxnOp, Option<Stat>),
    ) {
        assert!(
            txn.zxid > self.last_zxid,
            "txn zxid {:#x} not after {:#x}",
            txn.zxid,
            self.last_zxid
        );
        match &txn.op {
            TxnOp::Multi(ops) => {
                for (i, o) in ops.iter().enumerate() {
                    let stat = self.apply_op(txn, o, triggers);
                    after(self, i, o, stat);
                }
            }
            op => {
                let stat = self.apply_op(txn, op, triggers);
                after(self, 0, op, stat);
            }
        }
        self.last_zxid = txn.zxid;
    }

    /// Applies a txn replayed over a fuzzy snapshot (one a ZooKeeper
    /// leader serialized while it went on applying txns, so some of the
    /// txns that follow it may be in it already): each op that cannot
    /// apply as the tree stands (a create of a node that exists, a change
    /// of one that does not) is skipped, as DataTree.processTxn records
    /// such errors and goes on. Returns the triggers and the ops skipped.
    pub fn apply_lenient(&mut self, txn: &Txn) -> (Vec<Trigger>, usize) {
        assert!(
            txn.zxid > self.last_zxid,
            "txn zxid {:#x} not after {:#x}",
            txn.zxid,
            self.last_zxid
        );
        let mut triggers = Vec::new();
        let mut skipped = 0;
        self.apply_op_lenient(txn, &txn.op, &mut triggers, &mut skipped);
        self.last_zxid = txn.zxid;
        (triggers, skipped)
    }

    fn apply_op_lenient(
        &mut self,
        txn: &Txn,
        op: &TxnOp,
        out: &mut Vec<Trigger>,
        skipped: &mut usize,
    ) {
        let exists = |t: &Tree, p: &str| t.get(p).is_some();
        let applies = match op {
            TxnOp::Create { path, .. } => {
                !exists(self, path)
                    && split_parent(path).is_some_and(|(parent, _)| exists(self, parent))
            }
            TxnOp::Delete { path } | TxnOp::SetData { path, .. } | TxnOp::SetAcl { path, .. } => {
                exists(self, path)
            }
            TxnOp::CloseSession { ephemerals } => {
                let present: Vec<Arc<str>> = ephemerals
                    .iter()
                    .filter(|p| exists(self, p))
                    .cloned()
                    .collect();
                *skipped += ephemerals.len() - present.len();
                for gone in ephemerals.iter().filter(|p| !present.contains(p)) {
                    self.raise_parent_pzxid(gone, txn.zxid);
                }
                let op = TxnOp::CloseSession {
                    ephemerals: present,
                };
                self.apply_op(txn, &op, out);
                return;
            }
            TxnOp::Multi(ops) => {
                for o in ops {
                    self.apply_op_lenient(txn, o, out, skipped);
                }
                return;
            }
            _ => true,
        };
        if applies {
            self.apply_op(txn, op, out);
        } else {
            *skipped += 1;
            if let TxnOp::Delete { path } = op {
                self.raise_parent_pzxid(path, txn.zxid);
            }
            if let TxnOp::Create {
                path,
                ephemeral_owner,
                parent_cversion,
                create2: false,
                ..
            } = op
            {
                // DataTree.processTxn: a create (txn type 1, not create2,
                // a container's or a TTL node's) that finds its node
                // there still moves the parent's cversion and pzxid, as
                // setCversionPzxid does (the node was deleted and made
                // again by another session after the fuzzy snapshot
                // serialized the parent).
                let plain = matches!(
                    super::kind_of_owner(*ephemeral_owner),
                    super::NodeKind::Persistent | super::NodeKind::Ephemeral(_)
                );
                if plain && exists(self, path) {
                    let (parent, _) = split_parent(path).expect("create path has a parent");
                    self.raise_cversion(parent, *parent_cversion, txn.zxid);
                }
            }
        }
    }

    /// DataTree.deleteNode of a node that is not there: the parent's pzxid
    /// still moves up to the txn's ("the child might already be deleted
    /// during taking fuzzy snapshot, but we still need to update the
    /// pzxid"), when the parent exists.
    fn raise_parent_pzxid(&mut self, path: &str, zxid: i64) {
        let Some((parent, _)) = split_parent(path) else {
            return;
        };
        if self.get(parent).is_some_and(|p| zxid > p.pzxid()) {
            self.update(parent, |p| p.set_pzxid(zxid));
        }
    }

    /// DataTree.setCversionPzxid: `cversion` (-1: one more than now) and
    /// `zxid` as the node's pzxid, if that raises its cversion.
    fn raise_cversion(&mut self, path: &str, cversion: i32, zxid: i64) {
        self.update(path, |node| {
            let cversion = if cversion == -1 {
                node.cversion() + 1
            } else {
                cversion
            };
            if cversion > node.cversion() {
                node.set_cversion(cversion);
                node.set_pzxid(zxid);
            }
        });
    }

    /// Applies one op of `txn` (a multi's ops share its zxid) without
    /// moving last_zxid: for scratch trees that compute per-op results.
    /// Applies one op; returns the stat of the node a setData or setACL
    /// changed, as it stands after the change.
    pub(crate) fn apply_op(
        &mut self,
        txn: &Txn,
        op: &TxnOp,
        out: &mut Vec<Trigger>,
    ) -> Option<Stat> {
        match op {
            TxnOp::Create {
                path,
                data,
                acl,
                ephemeral_owner,
                parent_cversion,
                ..
            } => {
                self.create(
                    txn,
                    path,
                    data,
                    acl,
                    *ephemeral_owner,
                    *parent_cversion,
                    out,
                );
                None
            }
            TxnOp::Delete { path } => {
                self.delete(txn.zxid, path, out);
                None
            }
            TxnOp::SetData {
                path,
                data,
                version,
            } => {
                let (old_len, acl, stat) = self.update(path, |node| {
                    let old_len = node.data_len() as u64;
                    node.set_data(data.as_deref());
                    node.version = *version;
                    node.mzxid = txn.zxid;
                    node.mtime = txn.time_ms;
                    (old_len, node.acl.clone(), node.stat())
                });
                let new_len = node_data_len(data) as u64;
                self.data_bytes = self.data_bytes - old_len + new_len;
                self.quota_on_set(path, new_len as i64 - old_len as i64);
                out.push(Trigger {
                    path: path.clone(),
                    event_type: event::NODE_DATA_CHANGED,
                    acl,
                });
                Some(stat)
            }
            TxnOp::SetAcl {
                path,
                acl,
                aversion,
            } => Some(self.update(path, |node| {
                node.acl = acl.clone();
                node.aversion = *aversion;
                node.stat()
            })),
            TxnOp::CloseSession { ephemerals } => {
                for p in ephemerals {
                    self.delete(txn.zxid, p, out);
                }
                self.ephemerals.remove(&txn.session_id);
                None
            }
            TxnOp::Multi(ops) => {
                for o in ops {
                    self.apply_op(txn, o, out);
                }
                None
            }
            TxnOp::Check { .. }
            | TxnOp::CreateSession { .. }
            | TxnOp::Error { .. }
            | TxnOp::MultiError { .. } => None,
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn create(
        &mut self,
        txn: &Txn,
        path: &Arc<str>,
        data: &Option<Bytes>,
        acl: &Arc<[Acl]>,
        ephemeral_owner: i64,
        parent_cversion: i32,
        out: &mut Vec<Trigger>,
    ) {
        let (parent_path, name) = split_parent(path).expect("create path has a parent");
        let mut node = Node::with(name, data.as_deref(), acl.clone());
        node.czxid = txn.zxid;
        node.mzxid = txn.zxid;
        node.ctime = txn.time_ms;
        node.mtime = txn.time_ms;
        node.ephemeral_owner = ephemeral_owner;
        // pzxid: the czxid until a child changes (Node::pzxid).
        let kind = node.kind();
        let parent_acl = self.update(parent_path, |parent| {
            // A name already there panics in the index's insert (prep
            // checked NODEEXISTS); no separate lookup for it.
            node.acl = super::shared_acl(&node.acl, &parent.acl);
            parent.children.insert_new(node);
            // Only move forward: a replayed create must not lower them.
            if parent_cversion > parent.cversion() {
                parent.set_cversion(parent_cversion);
                parent.set_pzxid(txn.zxid);
            }
            parent.acl.clone()
        });
        self.znodes += 1;
        match kind {
            super::NodeKind::Ephemeral(session) => {
                self.ephemerals
                    .entry(session)
                    .or_default()
                    .insert(path.clone());
            }
            super::NodeKind::Container => {
                self.containers.insert(path.clone());
            }
            super::NodeKind::Ttl(_) => {
                self.ttls.insert(path.clone());
            }
            super::NodeKind::Persistent => {}
        }
        self.data_bytes += (path.len() + node_data_len(data)) as u64;
        self.quota_on_create(path, node_data_len(data) as i64);
        out.push(Trigger {
            path: path.clone(),
            event_type: event::NODE_CREATED,
            acl: acl.clone(),
        });
        out.push(Trigger {
            path: Arc::from(parent_path),
            event_type: event::NODE_CHILDREN_CHANGED,
            acl: parent_acl,
        });
    }

    fn delete(&mut self, zxid: i64, path: &Arc<str>, out: &mut Vec<Trigger>) {
        let (parent_path, name) = split_parent(path).expect("delete path has a parent");
        let (node, parent_acl) = self.update(parent_path, |parent| {
            let node = parent
                .children
                .take(name)
                .unwrap_or_else(|| panic!("delete of missing {path}"));
            if zxid > parent.pzxid() {
                parent.set_pzxid(zxid);
            }
            (node.0, parent.acl.clone())
        });
        assert!(node.children.is_empty(), "delete of non-empty {path}");
        self.znodes -= 1;
        self.data_bytes -= (path.len() + node.data_len()) as u64;
        self.quota_on_delete(path, node.data_len() as i64);
        match node.kind() {
            super::NodeKind::Ephemeral(session) => {
                if let Some(set) = self.ephemerals.get_mut(&session) {
                    set.remove(path);
                    if set.is_empty() {
                        self.ephemerals.remove(&session);
                    }
                }
            }
            super::NodeKind::Container => {
                self.containers.remove(path);
            }
            super::NodeKind::Ttl(_) => {
                self.ttls.remove(path);
            }
            super::NodeKind::Persistent => {}
        }
        out.push(Trigger {
            path: path.clone(),
            event_type: event::NODE_DELETED,
            acl: node.acl.clone(),
        });
        out.push(Trigger {
            path: Arc::from(parent_path),
            event_type: event::NODE_CHILDREN_CHANGED,
            acl: parent_acl,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn txn(zxid: i64, op: TxnOp) -> Txn {
        Txn {
            zxid,
            time_ms: 1,
            session_id: 9,
            cxid: zxid as i32,
            op,
        }
    }

    fn create(path: &str, owner: i64) -> TxnOp {
        TxnOp::Create {
            path: path.into(),
            data: Some(Bytes::from_static(b"x")),
            acl: crate::tree::open_acl(),
            ephemeral_owner: owner,
            parent_cversion: 1,
            create2: false,
        }
    }

    /// Txns replayed over a snapshot that already holds their effects skip
    /// exactly those ops and apply the rest.
    #[test]
    fn lenient_replay_skips_what_the_snapshot_already_holds() {
        let mut t = Tree::new();
        t.apply(&txn(1, create("/a", 0)));
        t.apply(&txn(2, create("/e", 9)));
        // "Fuzzy": /a and /e are in, the txns that made them replay again.
        assert_eq!(t.apply_lenient(&txn(3, create("/a", 0))).1, 1);
        let multi = TxnOp::Multi(vec![create("/a", 0), create("/a/b", 0)]);
        assert_eq!(t.apply_lenient(&txn(4, multi)).1, 1);
        assert!(t.get("/a/b").is_some());
        let gone = TxnOp::Delete {
            path: "/missing".into(),
        };
        assert_eq!(t.apply_lenient(&txn(5, gone)).1, 1);
        let close = TxnOp::CloseSession {
            ephemerals: vec!["/e".into(), "/never".into()],
        };
        assert_eq!(t.apply_lenient(&txn(6, close)).1, 1);
        assert!(t.get("/e").is_none());
        assert_eq!(t.last_zxid(), 6);
        // Nothing to skip: the same as apply.
        assert_eq!(t.apply_lenient(&txn(7, create("/c", 0))).1, 0);
    }

    /// A create replayed over a node that is already there (deleted and
    /// made again after a fuzzy snapshot serialized its parent) raises the
    /// parent's cversion and pzxid to the txn's, as ZooKeeper's
    /// setCversionPzxid; never lowers them; a create2 does not (ZooKeeper
    /// adjusts for txn type create only).
    #[test]
    fn lenient_create_of_an_existing_node_raises_the_parents_cversion() {
        let mut t = Tree::new();
        t.apply(&txn(1, create("/p", 0)));
        t.apply(&txn(2, create("/p/c", 0)));
        assert_eq!(t.get("/p").unwrap().cversion(), 1);
        let again = |cversion, create2| TxnOp::Create {
            path: "/p/c".into(),
            data: None,
            acl: crate::tree::open_acl(),
            ephemeral_owner: 0,
            parent_cversion: cversion,
            create2,
        };
        assert_eq!(t.apply_lenient(&txn(3, again(5, false))).1, 1);
        let p = t.get("/p").unwrap();
        assert_eq!((p.cversion(), p.pzxid()), (5, 3));
        // Lower: unchanged.
        t.apply_lenient(&txn(4, again(2, false)));
        assert_eq!(t.get("/p").unwrap().pzxid(), 3);
        // -1: one more than now.
        t.apply_lenient(&txn(5, again(-1, false)));
        let p = t.get("/p").unwrap();
        assert_eq!((p.cversion(), p.pzxid()), (6, 5));
        // create2: no adjustment.
        t.apply_lenient(&txn(6, again(9, true)));
        assert_eq!(t.get("/p").unwrap().cversion(), 6);
    }

    /// A delete replayed over a fuzzy snapshot that no longer holds the
    /// node still raises its parent's pzxid (never lowers it), as
    /// ZooKeeper's deleteNode does before it finds the node missing; so
    /// does a closeSession's missing ephemeral.
    #[test]
    fn lenient_delete_of_a_missing_node_raises_the_parents_pzxid() {
        let mut t = Tree::new();
        t.apply(&txn(1, create("/p", 0)));
        let gone = |p: &str| TxnOp::Delete { path: p.into() };
        assert_eq!(t.apply_lenient(&txn(5, gone("/p/c"))).1, 1);
        assert_eq!(t.get("/p").unwrap().pzxid(), 5);
        assert_eq!(t.get("/p").unwrap().cversion(), 0);
        t.apply(&txn(6, create("/p/d", 0)));
        t.apply_lenient(&txn(7, TxnOp::Multi(vec![gone("/p/x")])));
        assert_eq!(t.get("/p").unwrap().pzxid(), 7);
        let close = TxnOp::CloseSession {
            ephemerals: vec!["/p/e".into()],
        };
        t.apply_lenient(&txn(8, close));
        assert_eq!(t.get("/p").unwrap().pzxid(), 8);
        // A parent that is not there either: nothing.
        assert_eq!(t.apply_lenient(&txn(9, gone("/q/c"))).1, 1);
    }
}
