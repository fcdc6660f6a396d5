//! Rebuilding a tree from a snapshot: nodes arrive parents first, children
//! in the order ZooKeeper lists them (which is also the order ZooKeeper
//! re-adds them when it loads its own snapshots).

use std::sync::Arc;

use imbl::{HashMap, OrdSet};

use super::{path::split_parent, Children, Node, NodeKind, Tree, QUOTA_PATH};

impl Tree {
    /// A tree with no nodes at all, to restore into.
    pub fn empty() -> Tree {
        Tree {
            nodes: HashMap::new(),
            ephemerals: HashMap::new(),
            containers: OrdSet::new(),
            ttls: OrdSet::new(),
            quota_roots: OrdSet::new(),
            last_zxid: 0,
            data_bytes: 0,
        }
    }

    /// Adds a node read from a snapshot. Its parent must be there already.
    pub fn restore_node(&mut self, path: Arc<str>, mut node: Node) -> Result<(), String> {
        node.children = Children::default();
        if &*path != "/" {
            let (parent, name) = split_parent(&path).ok_or("node path without a parent")?;
            let p = self
                .nodes
                .get_mut(parent)
                .ok_or_else(|| format!("{path} comes before its parent"))?;
            Arc::make_mut(p).children.insert(Arc::from(name));
            if let Some(root) = parent.strip_prefix(QUOTA_PATH) {
                if name == super::quota::LIMIT_NODE {
                    self.quota_roots.insert(Arc::from(root));
                }
            }
        }
        match node.kind() {
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
        self.data_bytes += (path.len() + node.data_len()) as u64;
        if self.nodes.insert(path.clone(), Arc::new(node)).is_some() {
            return Err(format!("{path} appears twice"));
        }
        Ok(())
    }

    pub fn set_last_zxid(&mut self, zxid: i64) {
        self.last_zxid = zxid;
    }

    /// Paths parents-first, children in ZooKeeper's order (for snapshots).
    pub fn paths_parents_first(&self) -> Vec<Arc<str>> {
        let mut out = Vec::with_capacity(self.nodes.len());
        let mut stack: Vec<Arc<str>> = vec![Arc::from("/")];
        while let Some(p) = stack.pop() {
            if let Some(n) = self.nodes.get(&p) {
                for c in n.children.zookeeper_order().into_iter().rev() {
                    stack.push(Arc::from(super::join(&p, &c)));
                }
                out.push(p);
            }
        }
        out
    }
}
