//! A persistent B-tree of child nodes ordered by name, built for what a
//! znode's children need and nothing else: find, insert, remove, iterate in
//! order, O(1) clone.
//!
//! Why not imbl's OrdSet: every imbl B-tree node, leaves included, is a
//! 64-key chunk plus a 65-pointer chunk (1,064 bytes, the 1,280-byte size
//! class), and names appended in order (sequential znodes, the common case)
//! leave each leaf half full: ~40 bytes per child. Here a leaf is its keys
//! (8-byte pointers, at most [`LEAF_MAX`], the Vec sized by powers of two
//! so small parents stay small) and an 8-byte head of each name
//! ([`Leaf`]: a search compares those inline), and a node that overflows
//! because of an append at its end keeps its full left half: ~17 bytes per
//! child for sequential names, ~22 for random ones.
//!
//! Nodes sit behind `triomphe::Arc`; a change copies the nodes from the
//! root to the leaf only while an older version shares them.
//!
//! Inner nodes keep their separators as copies of the names, back to back
//! in one buffer ([`Separators`]; one name per kid, about 1/64 of the
//! children), not as references to the child nodes: a child is then
//! referenced by its leaf slot alone, so [`ChildIndex::get_mut`] can change
//! it in place when no older version shares it; an inner node's binary
//! search stays inside the node; and copying one for a new version touches
//! no other block's count but its kids'.

use triomphe::Arc;

use super::children::Child;
use super::leaf::Leaf;
use super::prefetch;
use super::separators::Separators;

/// Keys in a leaf, children of an inner node. 64 pointers: 512 bytes.
const LEAF_MAX: usize = 64;
const INNER_MAX: usize = 64;
/// A node below this many entries is merged into its right neighbour when
/// both fit in one (deletions otherwise leave sparse leaves behind).
const MERGE_BELOW: usize = LEAF_MAX / 4;

#[derive(Default, Clone)]
pub struct ChildIndex {
    root: Option<Arc<BNode>>,
    len: usize,
}

enum BNode {
    Leaf(Leaf),
    /// `firsts[i]` is the smallest name under `kids[i]`.
    Inner {
        firsts: Separators,
        kids: Vec<Arc<BNode>>,
    },
}

impl Clone for BNode {
    /// Copies at the size the entries need (a derived clone would too, but
    /// the next insert would then double a full Vec past the bound).
    fn clone(&self) -> Self {
        match self {
            BNode::Leaf(leaf) => BNode::Leaf(leaf.copy(LEAF_MAX)),
            BNode::Inner { firsts, kids } => {
                prefetch::counts(kids.iter());
                BNode::Inner {
                    firsts: firsts.clone(),
                    kids: copy_sized(kids, INNER_MAX),
                }
            }
        }
    }
}

impl Drop for BNode {
    /// Dropping an inner node takes back a count from each kid: ask for
    /// their lines together first (a leaf does the same for its children).
    fn drop(&mut self) {
        if let BNode::Inner { kids, .. } = self {
            prefetch::counts(kids.iter());
        }
    }
}

/// A Vec holding `v` with room for what it will likely get: the next power
/// of two, at most `max` (so that a copied full node does not double).
pub(super) fn copy_sized<T: Clone>(v: &[T], max: usize) -> Vec<T> {
    let mut out = Vec::with_capacity(v.len().next_power_of_two().clamp(4, max));
    out.extend_from_slice(v);
    out
}

/// Index of the kid whose range holds `name`: the last with first <= name.
fn kid_for(firsts: &Separators, name: &[u8]) -> usize {
    firsts.last_at_most(name)
}

impl BNode {
    fn entries(&self) -> usize {
        match self {
            BNode::Leaf(leaf) => leaf.len(),
            BNode::Inner { kids, .. } => kids.len(),
        }
    }

    /// The smallest name under this node, as a separator for its parent.
    fn first_key(&self) -> &[u8] {
        match self {
            BNode::Leaf(leaf) => leaf.keys()[0].0.name_bytes(),
            BNode::Inner { firsts, .. } => firsts.get(0),
        }
    }

    /// Inserts `child` (absent); returns the new right sibling if this node
    /// split. `first` is this node's smallest name when the caller has it
    /// (see [`Leaf::search`]).
    fn insert(&mut self, child: Child, first: Option<&[u8]>) -> Option<Arc<BNode>> {
        match self {
            BNode::Leaf(leaf) => {
                let pos = match leaf.search(child.0.name_bytes(), first) {
                    Ok(_) => panic!("child inserted twice"),
                    Err(pos) => pos,
                };
                if leaf.len() < LEAF_MAX {
                    leaf.insert(pos, child);
                    return None;
                }
                let (at, to_left) = split_point(leaf.len(), pos);
                let mut right = leaf.split_off(at, if at == leaf.len() { 4 } else { LEAF_MAX });
                if to_left {
                    leaf.insert(pos, child);
                } else {
                    right.insert(pos - leaf.len(), child);
                }
                Some(Arc::new(BNode::Leaf(right)))
            }
            BNode::Inner { firsts, kids } => {
                let i = kid_for(firsts, child.0.name_bytes());
                let kid_first = if firsts.get(i) > child.0.name_bytes() {
                    // Smaller than everything: it becomes kid 0's first.
                    firsts.set(i, child.0.name_bytes());
                    None
                } else {
                    Some(firsts.get(i))
                };
                let split = Arc::make_mut(&mut kids[i]).insert(child, kid_first)?;
                let at = i + 1;
                if kids.len() < INNER_MAX {
                    firsts.insert(at, split.first_key());
                    kids.insert(at, split);
                    return None;
                }
                let (mut right_kids, to_left) = split_off(kids, at, INNER_MAX);
                let mut right_firsts = firsts.split_off(firsts.len() - right_kids.len());
                if to_left {
                    firsts.insert(at, split.first_key());
                    kids.insert(at, split);
                } else {
                    right_firsts.insert(at - kids.len(), split.first_key());
                    right_kids.insert(at - kids.len(), split);
                }
                Some(Arc::new(BNode::Inner {
                    firsts: right_firsts,
                    kids: right_kids,
                }))
            }
        }
    }

    /// Removes the child named `name`, if there is one. `first`: as for
    /// [`BNode::insert`].
    fn remove(&mut self, name: &[u8], first: Option<&[u8]>) -> Option<Child> {
        match self {
            BNode::Leaf(leaf) => {
                let pos = leaf.search(name, first).ok()?;
                Some(leaf.remove(pos))
            }
            BNode::Inner { firsts, kids } => {
                let i = kid_for(firsts, name);
                let removed = Arc::make_mut(&mut kids[i]).remove(name, Some(firsts.get(i)))?;
                let left = kids[i].entries();
                if left == 0 {
                    firsts.remove(i);
                    kids.remove(i);
                    return Some(removed);
                }
                if firsts.get(i) == name {
                    firsts.set(i, kids[i].first_key());
                }
                if left < MERGE_BELOW && i + 1 < kids.len() {
                    let right = kids[i + 1].entries();
                    let max = if matches!(*kids[i], BNode::Leaf(_)) {
                        LEAF_MAX
                    } else {
                        INNER_MAX
                    };
                    if left + right <= max {
                        let next = kids.remove(i + 1);
                        firsts.remove(i + 1);
                        Arc::make_mut(&mut kids[i]).append(&next);
                    }
                }
                Some(removed)
            }
        }
    }

    /// Appends the entries of `next` (its right neighbour, same level).
    fn append(&mut self, next: &BNode) {
        match (self, next) {
            (BNode::Leaf(leaf), BNode::Leaf(more)) => leaf.append(more),
            (
                BNode::Inner { firsts, kids },
                BNode::Inner {
                    firsts: more_firsts,
                    kids: more_kids,
                },
            ) => {
                firsts.extend(more_firsts);
                kids.extend_from_slice(more_kids);
            }
            _ => unreachable!("neighbours are on one level"),
        }
    }
}

/// Where a full node of `len` entries splits for an insert at `pos`: at
/// the end it keeps everything on the left and the new entry starts the
/// right (appends fill nodes to the brim), else in the middle. Returns the
/// split point and whether the new entry goes left.
fn split_point(len: usize, pos: usize) -> (usize, bool) {
    let appending = pos >= len;
    let at = if appending { len } else { len / 2 };
    (at, !appending && pos <= at)
}

/// Splits a full node's entries for an insert at `pos` (see
/// [`split_point`]): returns the right part and whether the new entry goes
/// left.
fn split_off<T>(v: &mut Vec<T>, pos: usize, max: usize) -> (Vec<T>, bool) {
    let (at, to_left) = split_point(v.len(), pos);
    let mut right = Vec::with_capacity(if at == v.len() { 4 } else { max });
    right.extend(v.drain(at..));
    (right, to_left)
}

impl ChildIndex {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn get(&self, name: &[u8]) -> Option<&Child> {
        let mut node = self.root.as_deref()?;
        let mut first = None;
        loop {
            match node {
                BNode::Leaf(leaf) => {
                    return leaf.search(name, first).ok().map(|i| &leaf.keys()[i]);
                }
                BNode::Inner { firsts, kids } => {
                    let i = kid_for(firsts, name);
                    first = Some(firsts.get(i));
                    node = &kids[i];
                }
            }
        }
    }

    /// The child named `name`, to change in place: the index nodes on its
    /// path are copied first if an older version shares them.
    pub fn get_mut(&mut self, name: &[u8]) -> Option<&mut Child> {
        let mut node = Arc::make_mut(self.root.as_mut()?);
        let mut first = None;
        loop {
            match node {
                BNode::Leaf(leaf) => {
                    let i = leaf.search(name, first).ok()?;
                    return Some(leaf.key_mut(i));
                }
                BNode::Inner { firsts, kids } => {
                    let i = kid_for(firsts, name);
                    first = Some(firsts.get(i));
                    node = Arc::make_mut(&mut kids[i]);
                }
            }
        }
    }

    /// Inserts a child whose name is not in the index (panics if it is).
    pub fn insert(&mut self, child: Child) {
        let root = self
            .root
            .get_or_insert_with(|| Arc::new(BNode::Leaf(Leaf::with_capacity(4))));
        if let Some(right) = Arc::make_mut(root).insert(child, None) {
            let left = self.root.take().expect("root");
            let mut firsts = Separators::default();
            firsts.push(left.first_key());
            firsts.push(right.first_key());
            self.root = Some(Arc::new(BNode::Inner {
                firsts,
                kids: vec![left, right],
            }));
        }
        self.len += 1;
    }

    pub fn remove(&mut self, name: &[u8]) -> Option<Child> {
        let root = self.root.as_mut()?;
        let removed = Arc::make_mut(root).remove(name, None)?;
        self.len -= 1;
        // Shrink from the top: an empty root goes, an inner root with one
        // kid is replaced by it.
        loop {
            match self.root.as_deref() {
                Some(r) if r.entries() == 0 => self.root = None,
                Some(BNode::Inner { kids, .. }) if kids.len() == 1 => {
                    self.root = Some(kids[0].clone());
                }
                _ => break,
            }
        }
        Some(removed)
    }

    /// Children in name order.
    pub fn iter(&self) -> Iter<'_> {
        Iter {
            stack: self.root.as_deref().map(|r| (r, 0)).into_iter().collect(),
        }
    }
}

pub struct Iter<'a> {
    /// Nodes from the root down, each with the next entry to visit.
    stack: Vec<(&'a BNode, usize)>,
}

impl<'a> Iterator for Iter<'a> {
    type Item = &'a Child;

    fn next(&mut self) -> Option<&'a Child> {
        loop {
            let (node, next) = self.stack.last_mut()?;
            match node {
                BNode::Leaf(leaf) => {
                    if let Some(k) = leaf.keys().get(*next) {
                        *next += 1;
                        return Some(k);
                    }
                }
                BNode::Inner { kids, .. } => {
                    if let Some(kid) = kids.get(*next) {
                        *next += 1;
                        self.stack.push((kid, 0));
                        continue;
                    }
                }
            }
            self.stack.pop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tree::{Node, NodeRef};

    fn child(name: &str) -> Child {
        Child(NodeRef::new(Node::leaf(name)))
    }

    fn names(ix: &ChildIndex) -> Vec<String> {
        ix.iter().map(|c| c.0.name().to_string()).collect()
    }

    /// Every separator is the smallest name under its kid, names are in
    /// order, and no node is empty or over its bound. Returns the node's
    /// smallest name.
    fn check(node: &BNode) -> Vec<u8> {
        match node {
            BNode::Leaf(leaf) => {
                leaf.check();
                let keys = leaf.keys();
                assert!(!keys.is_empty() && keys.len() <= LEAF_MAX);
                assert!(keys
                    .windows(2)
                    .all(|w| w[0].0.name_bytes() < w[1].0.name_bytes()));
                keys[0].0.name_bytes().to_vec()
            }
            BNode::Inner { firsts, kids } => {
                assert!(!kids.is_empty() && kids.len() <= INNER_MAX);
                assert_eq!(firsts.len(), kids.len());
                firsts.check();
                for (i, k) in kids.iter().enumerate() {
                    assert_eq!(firsts.get(i), check(k), "separator is the kid's first name");
                }
                assert!((1..kids.len()).all(|i| firsts.get(i - 1) < firsts.get(i)));
                firsts.get(0).to_vec()
            }
        }
    }

    /// Against a BTreeSet, through inserts and removes in orders that split
    /// and merge nodes at every level, with old versions kept and checked.
    #[test]
    fn matches_a_btreeset_and_keeps_old_versions() {
        let mut ix = ChildIndex::default();
        let mut model = std::collections::BTreeSet::new();
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        let mut versions = Vec::new();
        for round in 0..30_000u32 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let name = if round.is_multiple_of(3) {
                format!("s{round:08}")
            } else {
                format!("r{}", x % 5000)
            };
            if x.is_multiple_of(4) {
                assert_eq!(
                    ix.remove(name.as_bytes()).map(|c| c.0.name().to_string()),
                    model.take(&name)
                );
            } else if model.insert(name.clone()) {
                ix.insert(child(&name));
            }
            assert_eq!(ix.len(), model.len());
            if round.is_multiple_of(1000) {
                if let Some(r) = ix.root.as_deref() {
                    check(r);
                }
            }
            if round.is_multiple_of(5000) {
                versions.push((ix.clone(), model.clone()));
            }
        }
        assert_eq!(names(&ix), model.iter().cloned().collect::<Vec<_>>());
        for n in &model {
            assert_eq!(ix.get(n.as_bytes()).unwrap().0.name(), n);
        }
        assert!(ix.get(b"absent").is_none());
        for (old, m) in versions {
            assert_eq!(names(&old), m.into_iter().collect::<Vec<_>>());
        }
        for n in model {
            ix.remove(n.as_bytes()).unwrap();
        }
        assert_eq!(ix.len(), 0);
        assert!(ix.root.is_none());
    }

    /// A child changed through get_mut is changed in this version only: the
    /// copy-on-write path leaves an older version's nodes as they were, and
    /// an unshared child is changed in place (no copy).
    #[test]
    fn get_mut_changes_this_version_only() {
        let mut ix = ChildIndex::default();
        for i in 0..LEAF_MAX * 40 {
            ix.insert(child(&format!("n{i:06}")));
        }
        let old = ix.clone();
        let name = format!("n{:06}", LEAF_MAX * 17);
        let slot = ix.get_mut(name.as_bytes()).expect("present");
        // Shared with `old`: make_mut copies it.
        NodeRef::make_mut(&mut slot.0).version = 7;
        assert_eq!(ix.get(name.as_bytes()).unwrap().0.version, 7);
        assert_eq!(old.get(name.as_bytes()).unwrap().0.version, 0);
        drop(old);
        // Now only this version's leaf holds the child: no copy.
        let slot = ix.get_mut(name.as_bytes()).expect("present");
        let before = &*slot.0 as *const Node;
        NodeRef::make_mut(&mut slot.0).version = 8;
        assert_eq!(&*ix.get(name.as_bytes()).unwrap().0 as *const Node, before);
        assert!(ix.get_mut(b"absent").is_none());
        check(ix.root.as_deref().unwrap());
    }

    #[test]
    fn appends_fill_leaves() {
        let mut ix = ChildIndex::default();
        for i in 0..LEAF_MAX * 10 {
            ix.insert(child(&format!("n{i:06}")));
        }
        let BNode::Inner { kids, .. } = ix.root.as_deref().unwrap() else {
            panic!("one level of inner nodes")
        };
        assert_eq!(kids.len(), 10);
        assert!(kids.iter().all(|k| k.entries() == LEAF_MAX));
    }
}
