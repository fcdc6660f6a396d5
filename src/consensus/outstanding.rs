//! What prep reads of the tree, and the changes prepped txns make to it
//! before they are applied: ZooKeeper's outstanding ChangeRecords.
//!
//! Prep needs a few facts per znode (ACL, versions, cversion, owner, child
//! count, data length), never the children themselves. [`Facts`] is that
//! view. A [`Tree`] answers it directly; [`Scratch`] layers one multi's ops
//! over another view; [`Outstanding`] holds the effect of every txn prepped
//! but not yet applied to the committed tree, so that the core can prep
//! against "committed tree plus outstanding changes" (PrepRequestProcessor)
//! while the tree itself is changed only when a batch is durable.
//!
//! Each recorded change carries the zxid of the txn that made it; once the
//! tree has applied that zxid the entry says nothing the tree does not, and
//! [`Outstanding::prune`] drops it.

use std::collections::hash_map::Entry;
use std::collections::{BTreeSet, VecDeque};
use std::sync::Arc;

use crate::fast_map::FastMap;
use crate::proto::Acl;
use crate::tree::path::split_parent;
use crate::tree::{Node, NodeKind, Tree, TxnOp};

/// What prep reads of one znode.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeFacts {
    pub acl: Arc<[Acl]>,
    pub version: i32,
    pub aversion: i32,
    /// The stored count of child creates (`Node::cversion`).
    pub cversion: i32,
    pub ephemeral_owner: i64,
    pub children: usize,
    pub data_len: usize,
}

impl NodeFacts {
    pub fn of(node: &Node) -> NodeFacts {
        NodeFacts {
            acl: node.acl.clone(),
            version: node.version,
            aversion: node.aversion,
            cversion: node.cversion(),
            ephemeral_owner: node.ephemeral_owner,
            children: node.children.len(),
            data_len: node.data_len(),
        }
    }

    pub fn kind(&self) -> NodeKind {
        crate::tree::kind_of_owner(self.ephemeral_owner)
    }
}

/// A view of the tree as prep sees it.
pub trait Facts {
    fn node(&self, path: &str) -> Option<NodeFacts>;
    /// The session's ephemeral paths, sorted.
    fn ephemerals_of(&self, session_id: i64) -> Vec<Arc<str>>;
}

impl Facts for Tree {
    fn node(&self, path: &str) -> Option<NodeFacts> {
        self.get(path).map(NodeFacts::of)
    }

    fn ephemerals_of(&self, session_id: i64) -> Vec<Arc<str>> {
        Tree::ephemerals_of(self, session_id)
    }
}

/// A path to record a change at: the txn's own `Arc`, or a parent's name
/// (made into an `Arc` only if no change is recorded there yet).
enum At<'a> {
    Path(&'a Arc<str>),
    Parent(&'a str),
}

impl At<'_> {
    fn as_str(&self) -> &str {
        match self {
            At::Path(p) => p,
            At::Parent(p) => p,
        }
    }

    fn to_arc(&self) -> Arc<str> {
        match self {
            At::Path(p) => Arc::clone(p),
            At::Parent(p) => Arc::from(*p),
        }
    }
}

/// A view that records changes over a base view.
trait Record: Facts {
    fn set(&mut self, at: At<'_>, facts: Option<NodeFacts>);
}

/// Records `op`'s effect on the facts prep reads, as `Tree::apply_op`
/// changes them (a create counts a child and moves the parent's cversion
/// forward; a delete uncounts it; deletes leave cversion alone).
/// `read_before`: the facts prep read of the node looked up first here
/// (`prep::ReadBefore`), taken instead of a second walk of the tree.
fn record_op(view: &mut impl Record, op: &TxnOp, mut read_before: Option<NodeFacts>) {
    let first = &mut read_before;
    match op {
        TxnOp::Create {
            path,
            data,
            acl,
            ephemeral_owner,
            parent_cversion,
            ..
        } => {
            let (parent, _) = split_parent(path).expect("create path has a parent");
            let mut p = facts_of(view, parent, first).expect("prep checked the parent");
            p.cversion = p.cversion.max(*parent_cversion);
            p.children += 1;
            view.set(At::Parent(parent), Some(p));
            let facts = NodeFacts {
                acl: acl.clone(),
                version: 0,
                aversion: 0,
                cversion: 0,
                ephemeral_owner: *ephemeral_owner,
                children: 0,
                data_len: data.as_ref().map_or(0, |d| d.len()),
            };
            view.set(At::Path(path), Some(facts));
        }
        TxnOp::Delete { path } => record_delete(view, path, first),
        TxnOp::SetData {
            path,
            data,
            version,
        } => {
            let mut n = facts_of(view, path, first).expect("prep checked the node");
            n.version = *version;
            n.data_len = data.as_ref().map_or(0, |d| d.len());
            view.set(At::Path(path), Some(n));
        }
        TxnOp::SetAcl {
            path,
            acl,
            aversion,
        } => {
            let mut n = facts_of(view, path, first).expect("prep checked the node");
            n.acl = acl.clone();
            n.aversion = *aversion;
            view.set(At::Path(path), Some(n));
        }
        TxnOp::CloseSession { ephemerals } => {
            for p in ephemerals {
                record_delete(view, p, &mut None);
            }
        }
        TxnOp::Multi(ops) => {
            for o in ops {
                record_op(view, o, None);
            }
        }
        TxnOp::Check { .. }
        | TxnOp::CreateSession { .. }
        | TxnOp::Error { .. }
        | TxnOp::MultiError { .. } => {}
    }
}

fn record_delete(view: &mut impl Record, path: &Arc<str>, read_before: &mut Option<NodeFacts>) {
    let (parent, _) = split_parent(path).expect("delete path has a parent");
    let mut p = facts_of(view, parent, read_before).expect("a deleted node's parent exists");
    p.children -= 1;
    view.set(At::Parent(parent), Some(p));
    view.set(At::Path(path), None);
}

/// The facts of `path` in `view`: those prep read (taken, so only the first
/// lookup of an op uses them), or else looked up.
fn facts_of(
    view: &impl Record,
    path: &str,
    read_before: &mut Option<NodeFacts>,
) -> Option<NodeFacts> {
    match read_before.take() {
        Some(read) => {
            debug_assert_eq!(Some(&read), view.node(path).as_ref(), "prep read {path}");
            Some(read)
        }
        None => view.node(path),
    }
}

/// The ephemerals of `session_id` in `base`, with `changes` laid over
/// them: sorted, as `Tree::ephemerals_of`.
fn ephemerals_over<'a>(
    base: Vec<Arc<str>>,
    changes: impl Iterator<Item = (&'a Arc<str>, &'a Option<NodeFacts>)>,
    session_id: i64,
) -> Vec<Arc<str>> {
    let mut set: BTreeSet<Arc<str>> = base.into_iter().collect();
    for (path, facts) in changes {
        match facts {
            Some(f) if f.kind() == NodeKind::Ephemeral(session_id) => {
                set.insert(path.clone());
            }
            _ => {
                set.remove(path);
            }
        }
    }
    set.into_iter().collect()
}

/// One multi's ops over a base view: each op is prepped against the ones
/// before it (PrepRequestProcessor's pendingChanges of a multi).
pub struct Scratch<'a, B: Facts + ?Sized> {
    base: &'a B,
    changes: FastMap<Arc<str>, Option<NodeFacts>>,
}

impl<'a, B: Facts + ?Sized> Scratch<'a, B> {
    pub fn new(base: &'a B) -> Self {
        Scratch {
            base,
            changes: FastMap::default(),
        }
    }

    /// Lays the effect of one op of the multi over the view.
    pub fn record(&mut self, op: &TxnOp) {
        record_op(self, op, None);
    }
}

impl<B: Facts + ?Sized> Facts for Scratch<'_, B> {
    fn node(&self, path: &str) -> Option<NodeFacts> {
        match self.changes.get(path) {
            Some(f) => f.clone(),
            None => self.base.node(path),
        }
    }

    fn ephemerals_of(&self, session_id: i64) -> Vec<Arc<str>> {
        ephemerals_over(
            self.base.ephemerals_of(session_id),
            self.changes.iter(),
            session_id,
        )
    }
}

impl<B: Facts + ?Sized> Record for Scratch<'_, B> {
    fn set(&mut self, at: At<'_>, facts: Option<NodeFacts>) {
        match self.changes.get_mut(at.as_str()) {
            Some(f) => *f = facts,
            None => {
                self.changes.insert(at.to_arc(), facts);
            }
        }
    }
}

/// The changes of txns prepped but not yet applied to the committed tree,
/// by path, each with the zxid of the last txn that made it.
#[derive(Default)]
pub struct Outstanding {
    changes: FastMap<Arc<str>, (i64, Option<NodeFacts>)>,
    /// (zxid, path) in the order recorded: what [`Outstanding::prune`]
    /// walks. At most one entry per change recorded, so it is as bounded as
    /// the txns in flight (a batch being built plus one being synced).
    order: VecDeque<(i64, Arc<str>)>,
}

impl Outstanding {
    pub fn is_empty(&self) -> bool {
        self.changes.is_empty()
    }

    pub fn len(&self) -> usize {
        self.changes.len()
    }

    /// Forgets every change: the txns that made them will never apply
    /// (the log failed).
    pub fn clear(&mut self) {
        self.changes.clear();
        self.order.clear();
    }

    /// Drops the changes the committed tree has caught up with: those whose
    /// last txn is at or before `applied_zxid`.
    pub fn prune(&mut self, applied_zxid: i64) {
        while let Some((zxid, _)) = self.order.front() {
            if *zxid > applied_zxid {
                break;
            }
            let (zxid, path) = self.order.pop_front().expect("front exists");
            // A later txn's change to the same path stays.
            if let Entry::Occupied(e) = self.changes.entry(path) {
                if e.get().0 == zxid {
                    e.remove();
                }
            }
        }
    }

    /// Records the effect of the txn `zxid` (prepped against `tree` plus
    /// these changes).
    pub fn record(&mut self, tree: &Tree, zxid: i64, op: &TxnOp) {
        self.record_read(tree, zxid, op, None);
    }

    /// [`Outstanding::record`] right after prep read `read_before` for
    /// `op` against `tree` plus these changes (`prep::prep_reading`), with
    /// nothing recorded or applied since.
    pub fn record_read(
        &mut self,
        tree: &Tree,
        zxid: i64,
        op: &TxnOp,
        read_before: Option<NodeFacts>,
    ) {
        let mut r = Recorder {
            tree,
            out: self,
            zxid,
        };
        record_op(&mut r, op, read_before);
    }

    /// The view prep reads: `tree` with these changes laid over it.
    pub fn over<'a>(&'a self, tree: &'a Tree) -> Pending<'a> {
        Pending { tree, out: self }
    }

    /// The view prep reads, once the changes `tree` has applied since are
    /// dropped.
    pub fn caught_up<'a>(&'a mut self, tree: &'a Tree) -> Pending<'a> {
        self.prune(tree.last_zxid());
        self.over(tree)
    }
}

/// The committed tree plus the outstanding changes.
pub struct Pending<'a> {
    tree: &'a Tree,
    out: &'a Outstanding,
}

impl Facts for Pending<'_> {
    fn node(&self, path: &str) -> Option<NodeFacts> {
        match self.out.changes.get(path) {
            Some((_, f)) => f.clone(),
            None => self.tree.node(path),
        }
    }

    fn ephemerals_of(&self, session_id: i64) -> Vec<Arc<str>> {
        ephemerals_over(
            self.tree.ephemerals_of(session_id),
            self.out.changes.iter().map(|(p, (_, f))| (p, f)),
            session_id,
        )
    }
}

struct Recorder<'a> {
    tree: &'a Tree,
    out: &'a mut Outstanding,
    zxid: i64,
}

impl Facts for Recorder<'_> {
    fn node(&self, path: &str) -> Option<NodeFacts> {
        self.out.over(self.tree).node(path)
    }

    fn ephemerals_of(&self, session_id: i64) -> Vec<Arc<str>> {
        self.out.over(self.tree).ephemerals_of(session_id)
    }
}

impl Record for Recorder<'_> {
    fn set(&mut self, at: At<'_>, facts: Option<NodeFacts>) {
        let key = match at {
            // The txn's own path is an `Arc` already: no lookup for a key
            // to share (an equal key already in the map stays there).
            At::Path(p) => Arc::clone(p),
            At::Parent(p) => match self.out.changes.get_key_value(p) {
                Some((key, _)) => key.clone(),
                None => Arc::from(p),
            },
        };
        self.out.order.push_back((self.zxid, key.clone()));
        self.out.changes.insert(key, (self.zxid, facts));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tree::{open_acl, Txn};

    fn create(path: &str, owner: i64, parent_cversion: i32) -> TxnOp {
        TxnOp::Create {
            path: Arc::from(path),
            data: Some(bytes::Bytes::from_static(b"abc")),
            acl: open_acl(),
            ephemeral_owner: owner,
            parent_cversion,
            create2: false,
        }
    }

    fn apply(tree: &mut Tree, zxid: i64, op: &TxnOp) {
        tree.apply(&Txn {
            zxid,
            time_ms: 0,
            session_id: 1,
            cxid: 0,
            op: op.clone(),
        });
    }

    /// Recording an op with what its prep read gives the same overlay as
    /// recording it with lookups of its own, for every op kind that reads
    /// (create, sequential create, setData, setACL, delete), each prepped
    /// over the changes before it. Were prep to hand over the facts of
    /// another node than the one recording starts from, the overlays part.
    #[test]
    fn recording_with_what_prep_read_matches_looking_up() {
        use crate::consensus::prep::{prep_reading, PrepContext};
        use crate::proto::{Acl, Request};
        let mut committed = Tree::new();
        apply(&mut committed, 1, &create("/a", 0, 1));
        let ctx = PrepContext {
            session_id: 7,
            extended_types_enabled: false,
            enforce_quota: false,
            providers: Default::default(),
            ids: &[],
        };
        let data = Some(bytes::Bytes::from_static(b"xyz"));
        let create_req = |path: &str, flags| Request::Create {
            opcode: crate::proto::codes::op::CREATE,
            path: path.into(),
            data: data.clone(),
            acl: vec![Acl::world_all()],
            flags,
            ttl: -1,
        };
        let requests = [
            create_req("/a/b", 0),
            create_req("/a/b/c", 0),
            create_req("/a/s-", 2),
            create_req("/a/e", 1),
            Request::SetData {
                path: "/a/b".into(),
                data: data.clone(),
                version: 0,
            },
            Request::SetAcl {
                path: "/a/b/c".into(),
                acl: vec![Acl::world_all()],
                version: -1,
            },
            Request::Delete {
                path: "/a/b/c".into(),
                version: -1,
            },
            Request::SetData {
                path: "/a/b".into(),
                data: None,
                version: 1,
            },
            create_req("/a/b/c", 0),
        ];
        let mut read = Outstanding::default();
        let mut looked_up = Outstanding::default();
        let mut used = 0;
        for (i, req) in requests.iter().enumerate() {
            let zxid = 2 + i as i64;
            let (op, read_before) =
                prep_reading(&read.over(&committed), &committed, &ctx, &mut req.clone());
            let again = crate::consensus::prep::prep(
                &looked_up.over(&committed),
                &committed,
                &ctx,
                &mut req.clone(),
            );
            assert_eq!(op, again, "{req:?}");
            assert!(!matches!(op, TxnOp::Error { .. }), "{req:?}: {op:?}");
            used += read_before.is_some() as usize;
            read.record_read(&committed, zxid, &op, read_before);
            looked_up.record(&committed, zxid, &op);
            let own = match &op {
                TxnOp::Create { path, .. }
                | TxnOp::Delete { path }
                | TxnOp::SetData { path, .. }
                | TxnOp::SetAcl { path, .. } => path.clone(),
                other => panic!("{other:?}"),
            };
            for p in ["/", "/a", "/a/b", "/a/b/c", "/a/e", &own] {
                assert_eq!(
                    read.over(&committed).node(p),
                    looked_up.over(&committed).node(p),
                    "{p} after {req:?}"
                );
            }
        }
        assert_eq!(used, requests.len(), "every op here hands its read over");
        assert!(read.over(&committed).node("/a/s-0000000001").is_some());
    }

    /// Every path's facts through the overlay equal the facts of a tree
    /// that applied the same txns, before and after the tree catches up.
    #[test]
    fn overlay_matches_the_applied_tree() {
        let mut committed = Tree::new();
        apply(&mut committed, 1, &create("/a", 0, 1));
        let ops = [
            create("/a/b", 0, 1),
            create("/a/e", 5, 2),
            TxnOp::SetData {
                path: Arc::from("/a/b"),
                data: None,
                version: 1,
            },
            TxnOp::Multi(vec![
                create("/a/c", 0, 3),
                TxnOp::Delete {
                    path: Arc::from("/a/c"),
                },
            ]),
            TxnOp::CloseSession {
                ephemerals: vec![Arc::from("/a/e")],
            },
        ];
        let mut applied = committed.clone();
        let mut out = Outstanding::default();
        for (i, op) in ops.iter().enumerate() {
            let zxid = 2 + i as i64;
            out.record(&committed, zxid, op);
            apply(&mut applied, zxid, op);
            for p in ["/", "/a", "/a/b", "/a/c", "/a/e"] {
                assert_eq!(
                    out.over(&committed).node(p),
                    applied.node(p),
                    "{p} after {i}"
                );
            }
            assert_eq!(
                out.over(&committed).ephemerals_of(5),
                applied.ephemerals_of(5)
            );
        }
        // The committed tree catches up txn by txn; pruning keeps the view.
        for (i, op) in ops.iter().enumerate() {
            let zxid = 2 + i as i64;
            apply(&mut committed, zxid, op);
            out.prune(zxid);
            for p in ["/a", "/a/b", "/a/c", "/a/e"] {
                assert_eq!(out.over(&committed).node(p), applied.node(p), "{p}");
            }
        }
        assert!(out.is_empty());
        assert!(out.order.is_empty());
    }

    #[test]
    fn scratch_sees_its_own_ops_only() {
        let mut tree = Tree::new();
        apply(&mut tree, 1, &create("/a", 0, 1));
        let mut s = Scratch::new(&tree);
        s.record(&create("/a/x", 9, 1));
        assert_eq!(s.node("/a").map(|f| f.children), Some(1));
        assert_eq!(s.ephemerals_of(9), vec![Arc::<str>::from("/a/x")]);
        assert_eq!(tree.node("/a").map(|f| f.children), Some(0));
        assert!(tree.ephemerals_of(9).is_empty());
    }
}
