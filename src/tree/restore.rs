//! Rebuilding a tree from a snapshot: nodes arrive parents first, children
//! in the order ZooKeeper lists them (which is also the order ZooKeeper
//! re-adds them when it loads its own snapshots).

use std::sync::Arc;

use imbl::{HashMap, OrdSet};

use super::{path::split_parent, Children, Node, NodeKind, NodeRef, Tree, QUOTA_PATH};

impl Tree {
    /// A tree with no nodes at all (an empty root placeholder), to restore into.
    pub fn empty() -> Tree {
        Tree {
            root: NodeRef::new(Node::with("", None, super::open_acl())),
            znodes: 0,
            ephemerals: HashMap::new(),
            containers: OrdSet::new(),
            ttls: OrdSet::new(),
            quota_roots: OrdSet::new(),
            last_zxid: 0,
            data_bytes: 0,
        }
    }

    /// Adds a node read from a snapshot, named as the last segment of
    /// `path` (see [`Node::with`]). Its parent must be there already.
    pub fn restore_node(&mut self, path: Arc<str>, mut node: Node) -> Result<(), String> {
        // Children arrive on their own; the counters that live with them
        // (cversion, pzxid) are the node's and stay.
        let (cversion, pzxid) = (node.cversion(), node.pzxid());
        node.children = Children::default();
        node.set_cversion(cversion);
        node.set_pzxid(pzxid);
        if &*path == "/" {
            if self.znodes != 0 {
                return Err("/ appears twice or after other nodes".into());
            }
            self.root = NodeRef::new(node);
        } else {
            let (parent, name) = split_parent(&path).ok_or("node path without a parent")?;
            if node.name() != name {
                return Err(format!("{path}: node named {}", node.name()));
            }
            if self.znodes == 0 || self.get(parent).is_none() {
                return Err(format!("{path} comes before its parent"));
            }
            if let Some(root) = parent.strip_prefix(QUOTA_PATH) {
                if name == super::quota::LIMIT_NODE {
                    self.quota_roots.insert(Arc::from(root));
                }
            }
            let kind = node.kind();
            let data_len = node.data_len();
            let added = self.update(parent, |p| {
                if p.children.contains(name) {
                    return false;
                }
                node.acl = super::shared_acl(&node.acl, &p.acl);
                p.children.insert_new(node);
                true
            });
            if !added {
                return Err(format!("{path} appears twice"));
            }
            match kind {
                NodeKind::Ephemeral(s) => {
                    self.ephemerals.entry(s).or_default().insert(path.clone());
                }
                NodeKind::Container => {
                    self.containers.insert(path.clone());
                }
                NodeKind::Ttl(_) => {
                    self.ttls.insert(path.clone());
                }
                NodeKind::Persistent => {}
            }
            self.data_bytes += (path.len() + data_len) as u64;
            self.znodes += 1;
            return Ok(());
        }
        self.data_bytes += (path.len() + self.root().data_len()) as u64;
        self.znodes += 1;
        Ok(())
    }

    pub fn set_last_zxid(&mut self, zxid: i64) {
        self.last_zxid = zxid;
    }
}
