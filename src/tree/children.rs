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
//! The capacity doubles as HashMap's table does: when the size passes 3/4
//! of it, and when an insert makes a bucket longer than 8 while the table
//! has fewer than 64 slots (treeifyBin resizes such a table instead).
//!
//! Not modelled: in a table of 64 or more slots such a bucket becomes a
//! red-black tree (HashMap.TreeNode), which Java lists root first and then
//! in the order of its `next` links, and keeps listing so after a resize or
//! a removal turns it back into a list. Those names (nine or more sharing a
//! bucket: crafted hashes, or for ordinary names fewer than one insert in
//! a million) are listed here in insertion order. Modelling it needs every
//! bucket's length and a bucket's names at the moment it passes 8, which
//! the name-ordered index does not give without a second, hash-ordered
//! index of every child.
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
    /// when the size passes 3/4 of it, or when a bucket comes to hold
    /// more than [`TREEIFY_THRESHOLD`] names while it is below
    /// [`MIN_TREEIFY_CAPACITY`]; it never shrinks.
    java_capacity: u32,
    /// While `java_capacity` is below [`MIN_TREEIFY_CAPACITY`]: how many
    /// children each bucket holds ([`SmallCounts`]). Unused from then on.
    small_counts: SmallCounts,
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

/// HashMap.TREEIFY_THRESHOLD: a bin longer than this is treeified, or the
/// table resized if it is below [`MIN_TREEIFY_CAPACITY`].
const TREEIFY_THRESHOLD: u32 = 8;
/// HashMap.MIN_TREEIFY_CAPACITY.
const MIN_TREEIFY_CAPACITY: u32 = 64;

/// A 4-bit count of children per bucket of a table of at most 32 buckets.
/// A bucket there holds at most 10 names (a table of 8 holds at most 6;
/// a 9th name in a bucket of a table of 16 doubles it, as does a 10th in
/// a table of 32), so the counts fit.
#[derive(Clone, Copy, Default)]
struct SmallCounts([u64; 2]);

impl SmallCounts {
    /// Counts one more child in `bucket` (< 32); returns its new count.
    fn add(&mut self, bucket: u32) -> u32 {
        let (word, shift) = ((bucket / 16) as usize, (bucket % 16) * 4);
        let count = (self.0[word] >> shift & 0xf) + 1;
        debug_assert!(count <= 10, "bucket {bucket} holds {count}");
        self.0[word] += 1 << shift;
        count as u32
    }

    fn remove(&mut self, bucket: u32) {
        let (word, shift) = ((bucket / 16) as usize, (bucket % 16) * 4);
        debug_assert!(self.0[word] >> shift & 0xf > 0);
        self.0[word] -= 1 << shift;
    }
}

impl Index {
    /// Counts a new child named `name` in a table below
    /// [`MIN_TREEIFY_CAPACITY`]; true if its bucket is then longer than
    /// [`TREEIFY_THRESHOLD`].
    #[inline(never)]
    fn count_small(&mut self, name: &str) -> bool {
        let bucket = spread(string_hash(name)) & (self.java_capacity - 1);
        self.small_counts.add(bucket) > TREEIFY_THRESHOLD
    }

    /// HashMap.resize: the table doubles (once per insert at most: the
    /// doubled threshold is then above the size).
    #[cold]
    #[inline(never)]
    fn grow(&mut self) {
        self.java_capacity *= 2;
        self.small_counts = SmallCounts::default();
        if self.java_capacity < MIN_TREEIFY_CAPACITY {
            // At most 24 children: count them again for the new buckets.
            let mask = self.java_capacity - 1;
            for c in self.set.iter() {
                self.small_counts
                    .add(spread(string_hash(c.0.name())) & mask);
            }
        }
    }

    fn new() -> Box<Index> {
        Box::new(Index {
            set: ChildIndex::default(),
            next_seq: 0,
            java_capacity: 8,
            small_counts: SmallCounts::default(),
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
        // HashMap.putVal appends to a list bin and, when that makes it
        // longer than TREEIFY_THRESHOLD, calls treeifyBin, which in a table
        // this small resizes instead.
        let full_bin = index.java_capacity < MIN_TREEIFY_CAPACITY && index.count_small(node.name());
        index.set.insert(Child(NodeRef::new(node)));
        // Then putVal's own check: ++size > threshold (3/4 of the table).
        if full_bin || index.set.len() as u64 * 4 > u64::from(index.java_capacity) * 3 {
            index.grow();
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
        let index = self.index.as_mut()?;
        let child = index.set.remove(name.as_bytes())?;
        if index.java_capacity < MIN_TREEIFY_CAPACITY {
            let bucket = spread(string_hash(name)) & (index.java_capacity - 1);
            index.small_counts.remove(bucket);
        }
        Some(child)
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

    /// "Aa" and "BB" hash alike, so every string of such blocks does.
    fn equal_hash(n: usize) -> Vec<String> {
        (0..n)
            .map(|bits| {
                (0..5)
                    .map(|b| if bits >> b & 1 == 1 { "BB" } else { "Aa" })
                    .collect()
            })
            .collect()
    }

    /// A bucket past 8 names doubles a table below 64 slots (HashMap's
    /// treeifyBin), which moves the names beside it. Orders observed from
    /// java.util.HashSet (OpenJDK 17); "s0" shares the bucket.
    #[test]
    fn a_full_bucket_doubles_a_small_table() {
        let same = equal_hash(9);
        let mut c = of(&["s0", "s1", "s2", "s3"]);
        let mut capacities = Vec::new();
        for n in &same {
            c.insert_new(Node::leaf(n));
            capacities.push(c.java_capacity());
        }
        assert_eq!(capacities, [8, 8, 16, 16, 16, 16, 16, 32, 64]);
        let listed = |names: &[&str], same: &[String]| -> Vec<String> {
            let mut v: Vec<String> = names.iter().map(|s| s.to_string()).collect();
            let at = v.iter().position(|n| n == "s0").unwrap() + 1;
            v.splice(at..at, same.iter().cloned());
            v
        };
        assert_eq!(
            c.zookeeper_order(),
            listed(&["s0", "s1", "s2", "s3"], &same)
        );
        for n in &same[..4] {
            c.take(n).unwrap();
        }
        c.insert_new(Node::leaf("s4"));
        assert_eq!(c.java_capacity(), 64, "never shrinks");
        assert_eq!(
            c.zookeeper_order(),
            listed(&["s0", "s1", "s2", "s3", "s4"], &same[4..])
        );
        // One name short of doubling: a table of 32 keeps 9 in a bucket.
        let mut c = of(&["s0", "s1", "s2", "s3"]);
        for n in &same[..8] {
            c.insert_new(Node::leaf(n));
        }
        assert_eq!(c.java_capacity(), 32);
        assert_eq!(
            c.zookeeper_order(),
            ["s3"]
                .into_iter()
                .map(String::from)
                .chain(listed(&["s0", "s1", "s2"], &same[..8]))
                .collect::<Vec<_>>()
        );
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
