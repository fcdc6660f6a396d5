//! The data tree: an immutable, structurally shared tree of znodes.
//!
//! The consensus core is the only writer. Cloning a `Tree` is O(1) (a few
//! reference counts), so the core publishes a version per commit batch and
//! each shard reads from the version matching the commits whose watch
//! events it has already delivered (guarantee 3 of DESIGN.md). Versions
//! share all unchanged nodes, so memory stays about 1x the data however
//! many shards (or a snapshot being written) hold a version.
//!
//! Shape: a real tree, not a map of paths. Each node owns its children in a
//! persistent B-tree keyed by name ([`Children`]); a lookup walks the path's
//! segments, a write copies the nodes from the root down to the changed one
//! when an older version still shares them (O(depth x log children)), and
//! in place when nothing else holds them. No path is stored anywhere except
//! in the ephemeral/container/TTL indexes that need them.
//!
//! What a znode costs (x86-64, mimalloc size classes):
//! - the node: 88 bytes of fields + an 8-byte count (triomphe::Arc), the
//!   96-byte class (cversion and pzxid live with the children, as only a
//!   node that has had children needs them);
//! - its name and data in one allocation: a 16-byte header (count, length)
//!   followed by the name and the data (a 100-byte value under an 11-byte
//!   name: 127, the 128-byte class);
//! - its slot in the parent's index ([`child_index`]): an 8-byte pointer
//!   and an 8-byte name head in a leaf of at most 64, ~17 bytes per child
//!   for names appended in order, ~22 for random ones;
//! - its ACL list: shared with the parent when equal, or the one
//!   `world:anyone` list (see [`open_acl`]); a distinct list costs ~100
//!   bytes.
//!
//! About 244 bytes for a 100-byte znode by that count; 243 measured with
//! mimalloc v2 (257 with v3; `cargo run --release --example tree_memory`,
//! tuning/scale.md), against
//! ~440 bytes of live heap per znode in Apache ZooKeeper.

pub mod child_index;
pub mod children;
mod leaf;
pub mod path;
mod prefetch;
pub mod quota;
pub mod restore;
mod separators;
pub mod txn;

use std::sync::Arc;

use bytes::Bytes;
use imbl::{HashMap, OrdSet};

pub use children::Children;

use crate::proto::codes::{perm, CONTAINER_EPHEMERAL_OWNER, TTL_OWNER_MASK};
use crate::proto::{Acl, Id, Stat};

pub use txn::{Trigger, Txn, TxnOp};

/// How nodes point at nodes: an Arc with an 8-byte count and no weak count.
pub type NodeRef = triomphe::Arc<Node>;

/// The top bit of `name_len_flags`: the node has data (not null).
const HAS_DATA: u32 = 1 << 31;

/// One znode as stored. `cversion()` is the stored count of child creates;
/// clients see `cversion * 2 - numChildren` (DataNode.copyStat). cversion
/// and pzxid are kept with the children ([`Children`]): they change only
/// with them.
#[derive(Clone)]
pub struct Node {
    /// The node's name, then its data: one allocation per znode for both,
    /// behind a thin (8-byte) pointer that keeps the length in the block.
    name_data: Bytes8,
    /// Length of the name in `name_data`, with [`HAS_DATA`].
    name_len_flags: u32,
    pub version: i32,
    pub aversion: i32,
    /// Insertion sequence among its siblings (for ZooKeeper's child order).
    seq: u32,
    pub acl: Arc<[Acl]>,
    pub czxid: i64,
    pub mzxid: i64,
    pub ctime: i64,
    pub mtime: i64,
    pub ephemeral_owner: i64,
    pub children: Children,
}

// The size the memory figures above assume (with the count, mimalloc's
// 96-byte class); a new field must earn its bytes.
const _: () = assert!(std::mem::size_of::<Node>() == 88);

impl std::fmt::Debug for Node {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Node")
            .field("name", &self.name())
            .field("data_len", &self.data_len())
            .field("stat", &self.stat())
            .finish()
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeKind {
    Persistent,
    Ephemeral(i64),
    Container,
    Ttl(i64),
}

/// What a stored ephemeralOwner says a node is (the TTL and container
/// encodings of CreateMode).
pub fn kind_of_owner(owner: i64) -> NodeKind {
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

impl Node {
    pub fn kind(&self) -> NodeKind {
        kind_of_owner(self.ephemeral_owner)
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
            cversion: self.cversion() * 2 - num_children,
            aversion: self.aversion,
            ephemeral_owner,
            data_length: self.data_len() as i32,
            num_children,
            pzxid: self.pzxid(),
        }
    }

    /// The stored count of child creates.
    pub fn cversion(&self) -> i32 {
        self.children.cversion()
    }

    pub fn set_cversion(&mut self, cversion: i32) {
        self.children.set_cversion(cversion);
    }

    /// The zxid of the last change to the children (czxid until one).
    pub fn pzxid(&self) -> i64 {
        self.children.pzxid().unwrap_or(self.czxid)
    }

    pub fn set_pzxid(&mut self, pzxid: i64) {
        if pzxid != self.pzxid() {
            self.children.set_pzxid(pzxid);
        }
    }

    pub fn name(&self) -> &str {
        // SAFETY: name_data starts with the bytes of a &str (see `with`),
        // and name_len ends on the boundary it was cut at.
        unsafe { std::str::from_utf8_unchecked(self.name_bytes()) }
    }

    pub(crate) fn name_bytes(&self) -> &[u8] {
        &self.name_data.slice[..(self.name_len_flags & !HAS_DATA) as usize]
    }

    /// The node's data; None when it was created or set with a null
    /// buffer (clients read it back as null).
    pub fn data(&self) -> Option<&[u8]> {
        (self.name_len_flags & HAS_DATA != 0)
            .then(|| &self.name_data.slice[(self.name_len_flags & !HAS_DATA) as usize..])
    }

    /// The data as `Bytes` sharing this node's allocation (no copy: a 1 MB
    /// getData reply points into the tree).
    pub fn data_shared(&self) -> Option<Bytes> {
        self.data()?;
        let start = (self.name_len_flags & !HAS_DATA) as usize;
        Some(Bytes::from_owner(DataView(self.name_data.clone(), start)))
    }

    pub fn data_len(&self) -> usize {
        self.data().map_or(0, <[u8]>::len)
    }

    pub fn set_data(&mut self, data: Option<&[u8]>) {
        let name_len = self.name_bytes().len();
        if !self.overwrite_data(name_len, data.unwrap_or_default()) {
            self.name_data = pack(self.name_bytes(), data);
        }
        self.name_len_flags = name_len_flags(name_len, data.is_some());
    }

    /// Writes `data` over the old data in the node's own block, when it is
    /// as long and nothing else holds the block (no getData reply in flight,
    /// no snapshot's copy of the tree): a setData of the same size, the
    /// usual one, then allocates and frees nothing. Returns whether it did.
    fn overwrite_data(&mut self, name_len: usize, data: &[u8]) -> bool {
        if self.name_data.slice.len() != name_len + data.len() {
            return false;
        }
        self.name_data
            .with_arc_mut(|block| match triomphe::Arc::get_mut(block) {
                Some(block) => {
                    block.slice_mut()[name_len..].copy_from_slice(data);
                    true
                }
                None => false,
            })
    }

    /// A node named `name` with everything else zero.
    pub fn with(name: &str, data: Option<&[u8]>, acl: Arc<[Acl]>) -> Node {
        Node {
            name_data: pack(name.as_bytes(), data),
            name_len_flags: name_len_flags(name.len(), data.is_some()),
            acl,
            czxid: 0,
            mzxid: 0,
            ctime: 0,
            mtime: 0,
            version: 0,
            aversion: 0,
            ephemeral_owner: 0,
            seq: 0,
            children: Children::default(),
        }
    }

    #[cfg(test)]
    pub(crate) fn leaf(name: &str) -> Node {
        Node::with(name, None, Arc::from(Vec::new()))
    }
}

/// Bytes behind a thin pointer: count, length and bytes in one block.
type Bytes8 = triomphe::ThinArc<(), u8>;

fn pack(name: &[u8], data: Option<&[u8]>) -> Bytes8 {
    use std::mem::MaybeUninit;
    use triomphe::{HeaderWithLength, UniqueArc};
    let data = data.unwrap_or_default();
    if data.is_empty() {
        return Bytes8::from_header_and_slice((), name);
    }
    // Name and data written straight into the node's one block: no staging
    // copy of the data on its way in (a setData's largest cost in the tree).
    let len = name.len() + data.len();
    let mut block =
        UniqueArc::<triomphe::HeaderSlice<_, [MaybeUninit<u8>]>>::from_header_and_uninit_slice(
            HeaderWithLength::new((), len),
            len,
        );
    let (head, tail) = block.slice.split_at_mut(name.len());
    write_bytes(head, name);
    write_bytes(tail, data);
    // SAFETY: both parts of the slice were written just above, and together
    // they are all `len` bytes of it.
    let block = unsafe { block.assume_init_slice_with_header() };
    triomphe::Arc::into_thin(block.shareable())
}

fn write_bytes(dst: &mut [std::mem::MaybeUninit<u8>], src: &[u8]) {
    assert_eq!(dst.len(), src.len());
    // SAFETY: `MaybeUninit<u8>` has the layout of `u8`, and the lengths match.
    unsafe {
        std::ptr::copy_nonoverlapping(src.as_ptr(), dst.as_mut_ptr().cast::<u8>(), src.len())
    };
}

fn name_len_flags(name_len: usize, has_data: bool) -> u32 {
    // Paths are bounded by jute.maxbuffer (far below 2 GiB).
    let len = u32::try_from(name_len).expect("znode name under 2 GiB");
    assert!(len & HAS_DATA == 0, "znode name under 2 GiB");
    len | if has_data { HAS_DATA } else { 0 }
}

/// A node's data as the owner of a `Bytes`.
struct DataView(Bytes8, usize);

impl AsRef<[u8]> for DataView {
    fn as_ref(&self) -> &[u8] {
        &self.0.slice[self.1..]
    }
}

#[derive(Clone)]
pub struct Tree {
    root: NodeRef,
    znodes: usize,
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

/// The names along `path` below the root: "/a/b" gives "a", "b"; "/" none.
/// None for a string that is not an absolute path.
fn segments(path: &str) -> Option<Segments<'_>> {
    let rest = path.strip_prefix('/')?;
    Some(Segments {
        rest: (!rest.is_empty()).then_some(rest),
    })
}

/// `segments`' iterator. Every lookup walks one, so it finds each '/' with
/// a plain byte scan: a name is a few bytes long, shorter than what
/// `str::split`'s searcher costs to set up.
struct Segments<'a> {
    rest: Option<&'a str>,
}

impl<'a> Iterator for Segments<'a> {
    type Item = &'a str;

    fn next(&mut self) -> Option<&'a str> {
        let rest = self.rest?;
        // '/' is ASCII, so a byte equal to it starts a character and both
        // slices below fall on character boundaries.
        match rest.bytes().position(|b| b == b'/') {
            Some(i) => {
                self.rest = Some(&rest[i + 1..]);
                Some(&rest[..i])
            }
            None => {
                self.rest = None;
                Some(rest)
            }
        }
    }
}

/// One shared `world:anyone` ALL list: most znodes carry it, and one
/// allocation per node would cost ~110 bytes each.
pub fn open_acl() -> Arc<[Acl]> {
    static OPEN: std::sync::OnceLock<Arc<[Acl]>> = std::sync::OnceLock::new();
    OPEN.get_or_init(|| Arc::from(vec![Acl::world_all()]))
        .clone()
}

/// `acl`, or an equal list the tree already holds (the parent's, or the
/// open ACL), so that equal lists share one allocation.
fn shared_acl(acl: &Arc<[Acl]>, parent: &Arc<[Acl]>) -> Arc<[Acl]> {
    if Arc::ptr_eq(acl, parent) || **acl == **parent {
        return parent.clone();
    }
    let open = open_acl();
    if **acl == *open {
        return open;
    }
    acl.clone()
}

impl Tree {
    /// A new tree as Apache ZooKeeper's DataTree starts: "/", "/zookeeper",
    /// "/zookeeper/quota" and "/zookeeper/config" (read-only, aversion -1).
    pub fn new() -> Tree {
        let open = open_acl();
        let read_only: Arc<[Acl]> = Arc::from(vec![Acl {
            perms: perm::READ,
            id: Id {
                scheme: "world".into(),
                id: "anyone".into(),
            },
        }]);
        // These nodes are linked with addChild, not createNode: their stored
        // cversion stays 0, so clients see a negative cversion, as with ZooKeeper.
        let mut config = Node::with("config", Some(&[]), read_only);
        config.aversion = -1;
        let mut zk = Node::with("zookeeper", Some(&[]), open.clone());
        zk.children
            .insert_new(Node::with("quota", Some(&[]), open.clone()));
        zk.children.insert_new(config);
        let mut root = Node::with("", Some(&[]), open);
        root.children.insert_new(zk);
        Tree {
            root: NodeRef::new(root),
            znodes: 4,
            ephemerals: HashMap::new(),
            containers: OrdSet::new(),
            ttls: OrdSet::new(),
            quota_roots: OrdSet::new(),
            last_zxid: 0,
            data_bytes: ["/", ZOOKEEPER_PATH, QUOTA_PATH, CONFIG_PATH]
                .iter()
                .map(|p| p.len() as u64)
                .sum(),
        }
    }

    fn root(&self) -> &Node {
        &self.root
    }

    /// The node at `path`: one child lookup (O(log children)) per segment.
    pub fn get(&self, path: &str) -> Option<&Node> {
        let mut node = self.root();
        for name in segments(path)? {
            node = node.children.get(name)?;
        }
        Some(node)
    }

    /// Runs `f` on the node at `path`, mutable. Nodes from the root down
    /// to it are copied if an older tree version still shares them, and
    /// changed in place if not. Panics if there is no such node: prep
    /// checked it exists, so a missing node here is a bug.
    pub(crate) fn update<R>(&mut self, path: &str, f: impl FnOnce(&mut Node) -> R) -> R {
        // Iterative: a path may be thousands of segments deep. Each level
        // is one lookup in its parent's index, whose slot is then changed
        // in place (the index's nodes and the child copied first only if
        // an older version shares them).
        let mut cur = NodeRef::make_mut(&mut self.root);
        for name in segments(path).unwrap_or_else(|| panic!("update of bad path {path}")) {
            let child = cur
                .children
                .get_mut(name)
                .unwrap_or_else(|| panic!("txn names missing node {path}"));
            cur = NodeRef::make_mut(child);
        }
        f(cur)
    }

    pub fn last_zxid(&self) -> i64 {
        self.last_zxid
    }

    /// Node count as ZooKeeper reports it: its map also holds "" as an alias
    /// of the root, so it counts one more than there are znodes.
    pub fn node_count(&self) -> usize {
        self.znodes + 1
    }

    pub fn znode_count(&self) -> usize {
        self.znodes
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
        let mut stack: Vec<&Node> = vec![node];
        while let Some(n) = stack.pop() {
            for c in n.children.iter() {
                count += 1;
                stack.push(c);
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

    /// Visits every node with its path, parents before children and
    /// siblings in ZooKeeper's order (the order snapshots keep). Memory:
    /// one path buffer and a stack as deep as the tree, never a list of
    /// all paths.
    pub fn visit(&self, mut f: impl FnMut(&str, &Node)) {
        let mut path = String::from("/");
        f(&path, self.root());
        // Each frame: a node's children still to visit, and the path
        // length to cut back to before each of them.
        let mut stack: Vec<(children::InZookeeperOrder<'_>, usize)> =
            vec![(self.root().children.in_zookeeper_order(), 0)];
        while let Some((next, base)) = stack.last_mut().map(|(it, b)| (it.next(), *b)) {
            let Some(child) = next else {
                stack.pop();
                continue;
            };
            path.truncate(base.max(1));
            if base > 0 {
                path.push('/');
            }
            path.push_str(child.name());
            f(&path, child);
            if !child.children.is_empty() {
                stack.push((child.children.in_zookeeper_order(), path.len()));
            }
        }
    }

    /// Every path in the tree, parents first (for admin words and tests;
    /// builds a list, so not for the write path).
    pub fn paths(&self) -> impl Iterator<Item = String> {
        let mut out = Vec::with_capacity(self.znodes);
        self.visit(|p, _| out.push(p.to_string()));
        out.into_iter()
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

#[cfg(test)]
mod node_bytes_tests {
    use super::Node;
    use std::sync::Arc;

    /// Name and data share one block: each reads back whole, whatever the
    /// lengths, through set_data and through the constructor.
    #[test]
    fn name_and_data_read_back_from_their_one_block() {
        for name in ["", "a", "node-0000000042", &"n".repeat(300)] {
            for len in [0usize, 1, 7, 1024, 70_000] {
                let data: Vec<u8> = (0..len).map(|i| (i * 31 + 7) as u8).collect();
                let mut node = Node::with(name, Some(&data), Arc::from(Vec::new()));
                assert_eq!(node.name(), name);
                assert_eq!(node.data(), Some(&data[..]));
                node.set_data(None);
                assert_eq!((node.name(), node.data()), (name, None));
                node.set_data(Some(&data));
                assert_eq!((node.name(), node.data()), (name, Some(&data[..])));
                let copy = node.clone();
                node.set_data(Some(b"other"));
                assert_eq!(copy.data(), Some(&data[..]), "a clone keeps its bytes");
                assert_eq!(node.data(), Some(&b"other"[..]));
            }
        }
    }

    /// A setData of the same length writes over the node's block only when
    /// nothing else holds it: a clone of the node (a snapshot's tree) and a
    /// getData reply's view keep the bytes they had.
    #[test]
    fn same_length_data_is_written_in_place_only_when_unshared() {
        let mut node = Node::with("key", Some(b"aaaa"), Arc::from(Vec::new()));
        let block = node.name_data.slice.as_ptr();
        node.set_data(Some(b"bbbb"));
        assert_eq!(node.data(), Some(&b"bbbb"[..]));
        assert_eq!(node.name_data.slice.as_ptr(), block, "written in place");

        let copy = node.clone();
        let view = node.data_shared().expect("data");
        node.set_data(Some(b"cccc"));
        assert_eq!((node.name(), node.data()), ("key", Some(&b"cccc"[..])));
        assert_eq!(copy.data(), Some(&b"bbbb"[..]), "a clone keeps its bytes");
        assert_eq!(&view[..], b"bbbb", "a reply's view keeps its bytes");
        assert_ne!(node.name_data.slice.as_ptr(), block, "a new block");

        // Null and empty data have the same block, told apart by the flag.
        let mut node = Node::with("k", Some(b""), Arc::from(Vec::new()));
        node.set_data(None);
        assert_eq!(node.data(), None);
        node.set_data(Some(b""));
        assert_eq!(node.data(), Some(&b""[..]));
    }
}

#[cfg(test)]
mod segments_tests {
    use super::segments;

    /// The definition `segments` had before its own iterator.
    fn reference(path: &str) -> Option<Vec<&str>> {
        let rest = path.strip_prefix('/')?;
        Some(if rest.is_empty() {
            Vec::new()
        } else {
            rest.split('/').collect()
        })
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(4096))]
        #[test]
        fn segments_split_as_str_split_did(
            chars in proptest::collection::vec(
                proptest::sample::select(vec!['/', '/', 'a', 'b', '.', 'é', '\u{10000}']),
                0..10,
            )
        ) {
            let path: String = chars.into_iter().collect();
            let got = segments(&path).map(|s| s.collect::<Vec<_>>());
            proptest::prop_assert_eq!(got, reference(&path), "{:?}", path);
        }
    }
}
