//! The data tree: an immutable, structurally shared map of znodes.
//!
//! The consensus core is the only writer. Cloning a `Tree` is O(1) (a few
//! reference counts), so the core publishes the version after every txn and
//! each shard reads from the version matching the commits whose watch events
//! it has already delivered (guarantee 3 of DESIGN.md). Versions share all
//! unchanged nodes, so memory stays about 1x the data however many shards hold
//! a version.

pub mod children;
pub mod path;
pub mod quota;
pub mod restore;
pub mod txn;

use std::sync::Arc;

use bytes::Bytes;
use imbl::{HashMap, OrdSet};

pub use children::Children;

use crate::proto::codes::{perm, CONTAINER_EPHEMERAL_OWNER, TTL_OWNER_MASK};
use crate::proto::{Acl, Id, Stat};

pub use txn::{Trigger, Txn, TxnOp};

/// One znode as stored. `cversion` is the stored count of child creates;
/// clients see `cversion * 2 - numChildren` (DataNode.copyStat).
#[derive(Clone, Debug)]
pub struct Node {
    /// None: created or set with a null buffer; clients read it back as null.
    pub data: Option<Bytes>,
    pub acl: Arc<[Acl]>,
    pub czxid: i64,
    pub mzxid: i64,
    pub ctime: i64,
    pub mtime: i64,
    pub version: i32,
    pub cversion: i32,
    pub aversion: i32,
    pub ephemeral_owner: i64,
    pub pzxid: i64,
    pub children: Children,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeKind {
    Persistent,
    Ephemeral(i64),
    Container,
    Ttl(i64),
}

impl Node {
    pub fn kind(&self) -> NodeKind {
        let owner = self.ephemeral_owner;
        if owner == 0 {
            NodeKind::Persistent
        } else if owner == CONTAINER_EPHEMERAL_OWNER {
            NodeKind::Container
        } else if owner < 0 && owner & TTL_OWNER_MASK == TTL_OWNER_MASK {
            NodeKind::Ttl(owner & !TTL_OWNER_MASK)
        } else {
            NodeKind::Ephemeral(owner)
        }
    }

    /// The stat as a client sees it.
    pub fn stat(&self) -> Stat {
        let num_children = self.children.len() as i32;
        let ephemeral_owner = match self.kind() {
            NodeKind::Ephemeral(s) => s,
            _ => 0,
        };
        Stat {
            czxid: self.czxid,
            mzxid: self.mzxid,
            ctime: self.ctime,
            mtime: self.mtime,
            version: self.version,
            cversion: self.cversion * 2 - num_children,
            aversion: self.aversion,
            ephemeral_owner,
            data_length: self.data_len() as i32,
            num_children,
            pzxid: self.pzxid,
        }
    }

    pub fn data_len(&self) -> usize {
        self.data.as_ref().map_or(0, Bytes::len)
    }

    fn fresh(data: Option<Bytes>, acl: Arc<[Acl]>) -> Node {
        Node {
            data,
            acl,
            czxid: 0,
            mzxid: 0,
            ctime: 0,
            mtime: 0,
            version: 0,
            cversion: 0,
            aversion: 0,
            ephemeral_owner: 0,
            pzxid: 0,
            children: Children::default(),
        }
    }
}

#[derive(Clone)]
pub struct Tree {
    nodes: HashMap<Arc<str>, Arc<Node>>,
    ephemerals: HashMap<i64, OrdSet<Arc<str>>>,
    /// Container and TTL nodes, for the reaper (DataTree.getContainers/getTtls).
    containers: OrdSet<Arc<str>>,
    ttls: OrdSet<Arc<str>>,
    /// Paths with a quota (a zookeeper_limits node under /zookeeper/quota).
    quota_roots: OrdSet<Arc<str>>,
    last_zxid: i64,
    /// DataTree.approximateDataSize: path length plus data length of every
    /// node (the "" alias of the root included, with length 0).
    data_bytes: u64,
}

pub const ZOOKEEPER_PATH: &str = "/zookeeper";
pub const QUOTA_PATH: &str = "/zookeeper/quota";
pub const CONFIG_PATH: &str = "/zookeeper/config";

impl Default for Tree {
    fn default() -> Self {
        Self::new()
    }
}

impl Tree {
    /// A new tree as Apache ZooKeeper's DataTree starts: "/", "/zookeeper",
    /// "/zookeeper/quota" and "/zookeeper/config" (read-only, aversion -1).
    pub fn new() -> Tree {
        let open: Arc<[Acl]> = Arc::from(vec![Acl::world_all()]);
        let read_only: Arc<[Acl]> = Arc::from(vec![Acl {
            perms: perm::READ,
            id: Id {
                scheme: "world".into(),
                id: "anyone".into(),
            },
        }]);
        let mut t = Tree {
            nodes: HashMap::new(),
            ephemerals: HashMap::new(),
            containers: OrdSet::new(),
            ttls: OrdSet::new(),
            quota_roots: OrdSet::new(),
            last_zxid: 0,
            data_bytes: ["/", ZOOKEEPER_PATH, QUOTA_PATH, CONFIG_PATH]
                .iter()
                .map(|p| p.len() as u64)
                .sum(),
        };
        // These nodes are linked with addChild, not createNode: their stored
        // cversion stays 0, so clients see a negative cversion, as with ZooKeeper.
        let mut root = Node::fresh(Some(Bytes::new()), open.clone());
        root.children.insert(Arc::from("zookeeper"));
        let mut zk = Node::fresh(Some(Bytes::new()), open.clone());
        zk.children.insert(Arc::from("quota"));
        zk.children.insert(Arc::from("config"));
        let mut config = Node::fresh(Some(Bytes::new()), read_only);
        config.aversion = -1;
        t.nodes.insert(Arc::from("/"), Arc::new(root));
        t.nodes.insert(Arc::from(ZOOKEEPER_PATH), Arc::new(zk));
        t.nodes.insert(
            Arc::from(QUOTA_PATH),
            Arc::new(Node::fresh(Some(Bytes::new()), open)),
        );
        t.nodes.insert(Arc::from(CONFIG_PATH), Arc::new(config));
        t
    }

    pub fn get(&self, path: &str) -> Option<&Arc<Node>> {
        self.nodes.get(path)
    }

    pub fn last_zxid(&self) -> i64 {
        self.last_zxid
    }

    /// Node count as ZooKeeper reports it: its map also holds "" as an alias
    /// of the root, so it counts one more than there are znodes.
    pub fn node_count(&self) -> usize {
        self.nodes.len() + 1
    }

    pub fn znode_count(&self) -> usize {
        self.nodes.len()
    }

    pub fn approximate_data_size(&self) -> u64 {
        self.data_bytes
    }

    pub fn ephemeral_count(&self) -> usize {
        self.ephemerals.values().map(|s| s.len()).sum()
    }

    /// Sessions that own ephemerals.
    pub fn ephemeral_owners(&self) -> Vec<i64> {
        self.ephemerals.keys().copied().collect()
    }

    /// The session's ephemeral paths, sorted.
    pub fn ephemerals_of(&self, session_id: i64) -> Vec<Arc<str>> {
        self.ephemerals
            .get(&session_id)
            .map(|s| s.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// Child names of `path` in ZooKeeper's order.
    pub fn children(&self, path: &str) -> Option<Vec<String>> {
        self.get(path).map(|n| n.children.zookeeper_order())
    }

    /// Number of all descendants of `path` (getAllChildrenNumber).
    pub fn descendant_count(&self, path: &str) -> Option<i32> {
        let node = self.get(path)?;
        let mut count = 0i32;
        let mut stack: Vec<(String, Arc<Node>)> = vec![(path.to_string(), node.clone())];
        while let Some((p, n)) = stack.pop() {
            for c in n.children.sorted() {
                let child_path = join(&p, c);
                if let Some(cn) = self.get(&child_path) {
                    count += 1;
                    stack.push((child_path, cn.clone()));
                }
            }
        }
        Some(count)
    }

    pub fn containers(&self) -> impl Iterator<Item = &Arc<str>> {
        self.containers.iter()
    }

    pub fn ttl_nodes(&self) -> impl Iterator<Item = &Arc<str>> {
        self.ttls.iter()
    }

    /// Every path in the tree (for snapshots and tests), unordered.
    pub fn paths(&self) -> impl Iterator<Item = &Arc<str>> {
        self.nodes.keys()
    }
}

/// "/" + "a" = "/a"; "/a" + "b" = "/a/b".
pub fn join(parent: &str, child: &str) -> String {
    let mut s = String::with_capacity(parent.len() + child.len() + 1);
    s.push_str(parent);
    if parent != "/" {
        s.push('/');
    }
    s.push_str(child);
    s
}
