//! A znode's children: the child nodes themselves, in a persistent B-tree
//! ordered by name, plus what it takes to list them in the order Apache
//! ZooKeeper does.
//!
//! ZooKeeper keeps child names in a java.util.HashSet (capacity 8 at first)
//! and getChildren returns its iteration order: by hash bucket, and within a
//! bucket by insertion. Clients that print children unsorted (and tests
//! comparing against ZooKeeper) see that order, so we reproduce it: bucket
//! of Java's String.hashCode (spread as HashMap does) for the set's current
//! capacity, then the child's insertion sequence (kept in the child node).
//!
//! Cost: one 8-byte slot per child in [`ChildIndex`] (the child's name
//! lives in the child node), so inserting, finding and removing a child is
//! O(log n) in the child count, and cloning the index for a new tree version
//! is O(1) (its nodes are shared until written).

use super::child_index::ChildIndex;
use super::{prefetch, Node, NodeRef};
use crate::java_compat::{spread, string_hash};

/// A child node in its parent's index, ordered by its name.
#[derive(Clone)]
pub struct Child(pub(super) NodeRef);

/// Children per pass of [`InZookeeperOrder`] over a big parent (see there).
const PASS_CHILDREN: usize = 1 << 18;

/// Children in the order ZooKeeper lists them ([`Children::in_zookeeper_order`]).
///
/// The order is by Java bucket, then insertion sequence, so listing sorts
/// a 16-byte entry (packed key, node) per child. A parent of more than
/// [`PASS_CHILDREN`] children is listed in passes: each walks its index,
/// keeps the children of one range of buckets, sorts and yields them. The
/// transient memory of a listing (or of a snapshot's pass over the parent)
/// then stays near 4 MiB instead of 16 bytes per child (16 MB at 1M), for
/// one more walk over the index per pass.
pub struct InZookeeperOrder<'a> {
    children: &'a Children,
    mask: u32,
    passes: u64,
    next_pass: u64,
    chunk: std::vec::IntoIter<(u64, &'a Node)>,
}

impl<'a> InZookeeperOrder<'a> {
    fn new(children: &'a Children, pass_children: usize) -> Self {
        let len = children.len();
        InZookeeperOrder {
            children,
            mask: children.index.as_ref().map_or(1, |i| i.java_capacity) - 1,
            passes: len.div_ceil(pass_children).max(1) as u64,
            next_pass: 0,
            chunk: Vec::new().into_iter(),
        }
    }

    /// The children whose bucket is in this pass's range, sorted.
    fn collect_pass(&self, pass: u64) -> Vec<(u64, &'a Node)> {
        let buckets = u64::from(self.mask) + 1;
        let (lo, hi) = (
            buckets * pass / self.passes,
            buckets * (pass + 1) / self.passes,
        );
        let mut v = Vec::with_capacity(self.children.len() / self.passes as usize + 1);
        // In blocks: every node of a block is asked for, then every name,
        // before the first hash, so that the misses of a big parent's
        // children (cold in a snapshot's pass) overlap.
        let mut block: Vec<&'a Node> = Vec::with_capacity(PREFETCH_BLOCK);
        let mut children = self.children.iter();
        loop {
            block.clear();
            block.extend(children.by_ref().take(PREFETCH_BLOCK));
            if block.is_empty() {
                break;
            }
            block.iter().for_each(|n| prefetch::node(n));
            block.iter().for_each(|n| prefetch::name_data(n));
            for &n in &block {
                let bucket = spread(string_hash(n.name())) & self.mask;
                if (lo..hi).contains(&u64::from(bucket)) {
                    v.push((order_key(bucket, n.seq), n));
                }
            }
        }
        v.sort_unstable_by_key(|(key, _)| *key);
        v
    }
}

/// Children asked for together by [`InZookeeperOrder`].
const PREFETCH_BLOCK: usize = 32;
/// How far ahead of the child it yields [`InZookeeperOrder`] asks for a
/// child's node, and half that for its name and data.
const PREFETCH_AHEAD: usize = 16;

impl<'a> Iterator for InZookeeperOrder<'a> {
    type Item = &'a Node;

    fn next(&mut self) -> Option<&'a Node> {
        loop {
            if let Some((_, n)) = self.chunk.next() {
                // The caller reads what it is given (a snapshot encodes
                // it): ask for the children it will read next.
                let ahead = self.chunk.as_slice();
                if let Some((_, far)) = ahead.get(PREFETCH_AHEAD) {
                    prefetch::node(far);
                }
                if let Some((_, near)) = ahead.get(PREFETCH_AHEAD / 2) {
                    prefetch::name_data(near);
                }
                return Some(n);
            }
            if self.next_pass == self.passes {
                return None;
            }
            self.chunk = self.collect_pass(self.next_pass).into_iter();
            self.next_pass += 1;
        }
    }
}

/// A packed order key: the bucket, then the insertion sequence. A
/// sequence saturates at u32::MAX (past 4G insertions into one parent,
/// beyond ZooKeeper's own int32 cversion), and children inserted after
/// that list in no defined order within a bucket.
fn order_key(bucket: u32, seq: u32) -> u64 {
    (u64::from(bucket) << 32) | u64::from(seq)
}

#[derive(Clone, Default)]
pub struct Children {
    /// None until the first child: most znodes are leaves, and this keeps a
    /// leaf's cost at one null pointer.
    index: Option<Box<Index>>,
}

#[derive(Clone)]
struct Index {
    set: ChildIndex,
    next_seq: u64,
    /// The Java HashSet's table size: 8 after the first child, doubling
    /// when the size passes 3/4 of it; it never shrinks.
    java_capacity: u32,
    /// The owner's stored cversion and its pzxid ([`PZXID_IS_CZXID`]: its
    /// czxid). They change only with the owner's children, so they live
    /// here rather than in every node: a node that never had a child has
    /// cversion 0 and pzxid = czxid, and its Node is 16 bytes smaller
    /// (the 96-byte allocation class instead of 112).
    cversion: i32,
    pzxid: i64,
}

/// Index::pzxid when the owner's pzxid is still its czxid.
const PZXID_IS_CZXID: i64 = i64::MIN;

impl Index {
    fn new() -> Box<Index> {
        Box::new(Index {
            set: ChildIndex::default(),
            next_seq: 0,
            java_capacity: 8,
            cversion: 0,
            pzxid: PZXID_IS_CZXID,
        })
    }
}

impl Children {
    pub fn len(&self) -> usize {
        self.index.as_ref().map_or(0, |i| i.set.len())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn contains(&self, name: &str) -> bool {
        self.get(name).is_some()
    }

    pub fn get(&self, name: &str) -> Option<&Node> {
        self.index.as_ref()?.set.get(name.as_bytes()).map(|c| &*c.0)
    }

    /// Adds a new child, stamping its insertion sequence. The name must not
    /// be taken (prep checked NODEEXISTS).
    pub(super) fn insert_new(&mut self, mut node: Node) {
        let index = self.index.get_or_insert_with(Index::new);
        node.seq = u32::try_from(index.next_seq).unwrap_or(u32::MAX);
        index.next_seq += 1;
        index.set.insert(Child(NodeRef::new(node)));
        if index.set.len() as u64 * 4 > index.java_capacity as u64 * 3 {
            index.java_capacity *= 2;
        }
    }

    /// The owner's stored cversion (0 if it never had children).
    pub(super) fn cversion(&self) -> i32 {
        self.index.as_ref().map_or(0, |i| i.cversion)
    }

    pub(super) fn set_cversion(&mut self, cversion: i32) {
        if cversion != 0 || self.index.is_some() {
            self.index.get_or_insert_with(Index::new).cversion = cversion;
        }
    }

    /// The owner's pzxid, None while it is the owner's czxid.
    pub(super) fn pzxid(&self) -> Option<i64> {
        self.index
            .as_ref()
            .map(|i| i.pzxid)
            .filter(|&z| z != PZXID_IS_CZXID)
    }

    pub(super) fn set_pzxid(&mut self, pzxid: i64) {
        assert_ne!(pzxid, PZXID_IS_CZXID, "a zxid");
        self.index.get_or_insert_with(Index::new).pzxid = pzxid;
    }

    /// Removes a child and hands it back (to delete it).
    pub(super) fn take(&mut self, name: &str) -> Option<Child> {
        self.index.as_mut()?.set.remove(name.as_bytes())
    }

    /// The child named `name`, to change in place (see [`ChildIndex::get_mut`]).
    pub(super) fn get_mut(&mut self, name: &str) -> Option<&mut NodeRef> {
        Some(&mut self.index.as_mut()?.set.get_mut(name.as_bytes())?.0)
    }

    /// Child nodes in name (byte) order.
    pub fn iter(&self) -> impl Iterator<Item = &Node> {
        self.index.iter().flat_map(|i| i.set.iter()).map(|c| &*c.0)
    }

    /// Names in byte order.
    pub fn sorted(&self) -> impl Iterator<Item = &str> {
        self.iter().map(Node::name)
    }

    /// Child nodes in the order ZooKeeper's getChildren lists them (see
    /// [`InZookeeperOrder`] for what it costs).
    pub fn in_zookeeper_order(&self) -> InZookeeperOrder<'_> {
        InZookeeperOrder::new(self, PASS_CHILDREN)
    }

    /// Names in the order ZooKeeper's getChildren returns them.
    pub fn zookeeper_order(&self) -> Vec<String> {
        self.in_zookeeper_order()
            .map(|n| n.name().to_string())
            .collect()
    }

    #[cfg(test)]
    fn java_capacity(&self) -> u32 {
        self.index.as_ref().map_or(0, |i| i.java_capacity)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(names: &[&str]) -> Children {
        let mut c = Children::default();
        for n in names {
            c.insert_new(Node::leaf(n));
        }
        c
    }

    #[test]
    fn order_matches_apache_zookeeper() {
        // Observed from Apache ZooKeeper 3.8.0's getChildren.
        let c = of(&["zeta", "alpha", "m10", "b", "a1"]);
        assert_eq!(c.zookeeper_order(), ["zeta", "a1", "b", "m10", "alpha"]);
        let root = of(&["zookeeper", "rk-loadgen", "o"]);
        assert_eq!(root.zookeeper_order(), ["rk-loadgen", "zookeeper", "o"]);
    }

    #[test]
    fn capacity_grows_past_three_quarters() {
        let mut c = Children::default();
        for i in 0..7 {
            c.insert_new(Node::leaf(&format!("n{i}")));
        }
        assert_eq!(c.java_capacity(), 16);
        assert!(c.take("n0").is_some());
        assert_eq!(c.java_capacity(), 16);
        assert_eq!(c.len(), 6);
    }

    /// Listing in passes (a big parent's) gives the order of one pass.
    #[test]
    fn passes_keep_the_order() {
        let mut c = Children::default();
        for i in 0..5000 {
            c.insert_new(Node::leaf(&format!("n{}", i * 7919 % 10007)));
        }
        for i in (0..5000).step_by(3) {
            c.take(&format!("n{}", i * 7919 % 10007)).unwrap();
        }
        let names = |it: InZookeeperOrder<'_>| it.map(|n| n.name().to_string()).collect();
        let one: Vec<String> = names(InZookeeperOrder::new(&c, usize::MAX));
        assert_eq!(one.len(), c.len());
        for pass_children in [1, 7, 700, 3333, c.len()] {
            let many: Vec<String> = names(InZookeeperOrder::new(&c, pass_children));
            assert_eq!(many, one, "{pass_children} children per pass");
        }
        assert_eq!(InZookeeperOrder::new(&Children::default(), 1).count(), 0);
    }

    #[test]
    fn a_changed_child_keeps_its_sequence() {
        let mut c = of(&["a", "b", "c"]);
        let before = c.zookeeper_order();
        NodeRef::make_mut(c.get_mut("b").unwrap()).version = 3;
        assert_eq!(c.get("b").unwrap().version, 3);
        assert_eq!(c.zookeeper_order(), before);
        assert!(c.get_mut("x").is_none());
        let b = c.take("b").unwrap();
        assert!(!c.contains("b"));
        assert_eq!(b.0.version, 3);
        assert_eq!(c.sorted().collect::<Vec<_>>(), ["a", "c"]);
        assert!(c.take("x").is_none());
        for n in ["a", "c"] {
            c.take(n).unwrap();
        }
        assert!(c.is_empty());
    }
}
