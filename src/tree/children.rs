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
use super::{Node, NodeRef};
use crate::java_compat::{spread, string_hash};

/// A child node in its parent's index, ordered by its name.
#[derive(Clone)]
pub struct Child(pub(super) NodeRef);

/// Children as [`Children::in_zookeeper_order`] lists them.
pub type InZookeeperOrder<'a> =
    std::iter::Map<std::vec::IntoIter<(u64, &'a Node)>, fn((u64, &'a Node)) -> &'a Node>;

/// Bits of a packed order key that hold the insertion sequence; the rest
/// hold the bucket. 28 bucket bits cover a Java table of 2^28 slots (over
/// 200M children); a sequence past 2^36 insertions into one parent
/// saturates, and those children then list in no defined order within a
/// bucket.
const SEQ_BITS: u32 = 36;

fn order_key(bucket: u32, seq: u64) -> u64 {
    debug_assert!(u64::from(bucket) < 1 << (64 - SEQ_BITS));
    (u64::from(bucket) << SEQ_BITS) | seq.min((1 << SEQ_BITS) - 1)
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
        let index = self.index.get_or_insert_with(|| {
            Box::new(Index {
                set: ChildIndex::default(),
                next_seq: 0,
                java_capacity: 8,
            })
        });
        node.seq = index.next_seq;
        index.next_seq += 1;
        index.set.insert(Child(NodeRef::new(node)));
        if index.set.len() as u64 * 4 > index.java_capacity as u64 * 3 {
            index.java_capacity *= 2;
        }
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

    /// Child nodes in the order ZooKeeper's getChildren lists them. Sorts
    /// one 16-byte entry per child (bucket and sequence packed in a u64):
    /// at 1M children that is the transient memory of a listing or a
    /// snapshot's pass over the parent.
    pub fn in_zookeeper_order(&self) -> InZookeeperOrder<'_> {
        let mask = self.index.as_ref().map_or(1, |i| i.java_capacity) - 1;
        let mut v: Vec<(u64, &Node)> = self
            .iter()
            .map(|n| (order_key(spread(string_hash(n.name())) & mask, n.seq), n))
            .collect();
        v.sort_unstable_by_key(|(key, _)| *key);
        v.into_iter().map(|(_, n)| n)
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
