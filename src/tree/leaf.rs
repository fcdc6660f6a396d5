//! A leaf of the child index: child nodes in name order, with an 8-byte
//! head of each name kept inline.
//!
//! Why: a child's name lives in the child (one allocation with its data,
//! behind the node), so comparing against it is two dependent cache misses,
//! and a binary search over 64 children makes six of those comparisons: on a
//! big tree, most of a lookup's time. Here every name in the leaf shares a
//! prefix (`prefix_len` bytes), and `heads[i]` holds the 8 bytes of name i
//! after it (big-endian, zero-padded). A search compares the prefix once
//! (against the parent's separator, or the first child), then
//! binary-searches the heads inline, and reads a child's name only to order
//! names whose heads tie, or to confirm a match the head cannot prove.
//! Cost: 8 bytes per child.
//!
//! Head order is name order: if head(a) < head(b), the first byte where the
//! padded heads differ is a real byte of b, so a < b (a is either smaller
//! there or ended). Equal heads say nothing in general. But znode names
//! hold no NUL byte (ZooKeeper refuses paths with one), so a head with
//! padding in it says where its name ends: when the name searched for ends
//! within its head, a child with the same head has the same name, and the
//! search answers without reading any child (`exact_heads`; a leaf that
//! was handed a name with a NUL anyway turns the shortcut off).
//!
//! 4-byte heads tied too often: names such as `n500005` and `n5000005`
//! (siblings in the load generator's spread layout) share their first 4
//! bytes after a short prefix, and each tie cost two dependent cache misses
//! (the child, then its name) on a tree bigger than the cache.

use std::cmp::Ordering;

use super::child_index::copy_sized;
use super::children::Child;
use super::prefetch;
use super::separators::HEAD_BYTES;

pub struct Leaf {
    keys: Vec<Child>,
    heads: Vec<u64>,
    /// Every name in the leaf starts with the first `prefix_len` bytes of
    /// the first one. Removals never make that false, so it is not always
    /// the longest common prefix; an insert that shares less shortens it
    /// and recomputes the heads.
    prefix_len: u32,
    /// No name here has a NUL byte within its head, so equal heads with
    /// padding in them mean equal names (see the module doc).
    exact_heads: bool,
}

fn head(name: &[u8], prefix_len: usize) -> u64 {
    super::separators::head(&name[prefix_len..])
}

/// Whether `name`'s head (after `prefix_len`) holds no NUL byte of its own.
fn head_is_exact(name: &[u8], prefix_len: usize) -> bool {
    let rest = &name[prefix_len..];
    !rest[..rest.len().min(HEAD_BYTES)].contains(&0)
}

fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

impl Drop for Leaf {
    /// Dropping a leaf takes back a count from each child: ask for their
    /// lines together first (see [`prefetch`]).
    fn drop(&mut self) {
        prefetch::counts(self.keys.iter().map(|k| &k.0));
    }
}

impl Leaf {
    pub fn with_capacity(n: usize) -> Leaf {
        Leaf {
            keys: Vec::with_capacity(n),
            heads: Vec::with_capacity(n),
            prefix_len: 0,
            exact_heads: true,
        }
    }

    /// A copy for a new tree version, sized for at most `max` entries.
    pub fn copy(&self, max: usize) -> Leaf {
        prefetch::counts(self.keys.iter().map(|k| &k.0));
        Leaf {
            keys: copy_sized(&self.keys, max),
            heads: copy_sized(&self.heads, max),
            prefix_len: self.prefix_len,
            exact_heads: self.exact_heads,
        }
    }

    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn keys(&self) -> &[Child] {
        &self.keys
    }

    pub fn key_mut(&mut self, i: usize) -> &mut Child {
        &mut self.keys[i]
    }

    /// Where `name` is (Ok) or would go (Err), as slice::binary_search.
    /// `first`, when the caller knows it (an inner node's separator for
    /// this leaf), is the leaf's first name: the shared prefix is read from
    /// it instead of from the first child, two cache misses away.
    pub fn search(&self, name: &[u8], first: Option<&[u8]>) -> Result<usize, usize> {
        let Some(first_child) = self.keys.first() else {
            return Err(0);
        };
        let p = self.prefix_len as usize;
        if p > 0 {
            let first = first.unwrap_or_else(|| first_child.0.name_bytes());
            debug_assert_eq!(
                first,
                first_child.0.name_bytes(),
                "separator is the first name"
            );
            let prefix = &first[..p];
            match name[..name.len().min(p)].cmp(prefix) {
                Ordering::Less => return Err(0),
                Ordering::Greater => return Err(self.keys.len()),
                // A proper prefix of every name here: before all of them.
                Ordering::Equal if name.len() < p => return Err(0),
                Ordering::Equal => {}
            }
        }
        let h = head(name, p);
        let lo = self.heads.partition_point(|&x| x < h);
        let ties = self.heads[lo..].partition_point(|&x| x == h);
        if ties == 0 {
            return Err(lo);
        }
        if self.exact_heads && name.len() - p < HEAD_BYTES && head_is_exact(name, p) {
            // The name ends inside its head: a child with this head has
            // this name (there is at most one).
            debug_assert_eq!(ties, 1, "names in a leaf are distinct");
            debug_assert_eq!(self.keys[lo].0.name_bytes(), name);
            return Ok(lo);
        }
        self.keys[lo..lo + ties]
            .binary_search_by(|k| k.0.name_bytes().cmp(name))
            .map(|i| lo + i)
            .map_err(|i| lo + i)
    }

    /// Recomputes every head for a prefix of `prefix_len` bytes.
    fn set_prefix(&mut self, prefix_len: usize) {
        self.prefix_len = u32::try_from(prefix_len).expect("name under 4 GiB");
        self.heads.clear();
        self.heads
            .extend(self.keys.iter().map(|k| head(k.0.name_bytes(), prefix_len)));
        self.exact_heads = self
            .keys
            .iter()
            .all(|k| head_is_exact(k.0.name_bytes(), prefix_len));
    }

    /// Inserts `child` at `pos` (from [`Leaf::search`]).
    pub fn insert(&mut self, pos: usize, child: Child) {
        let name = child.0.name_bytes();
        match self.keys.first() {
            None => {
                // Alone, the whole name is the prefix.
                self.prefix_len = u32::try_from(name.len()).expect("name under 4 GiB");
                self.heads.push(0);
                self.exact_heads = true;
                self.keys.push(child);
                return;
            }
            Some(first) => {
                let p = self.prefix_len as usize;
                let shared = common_prefix(&first.0.name_bytes()[..p], name);
                if shared < p {
                    self.set_prefix(shared);
                }
            }
        }
        let h = head(child.0.name_bytes(), self.prefix_len as usize);
        self.exact_heads &= head_is_exact(child.0.name_bytes(), self.prefix_len as usize);
        self.heads.insert(pos, h);
        self.keys.insert(pos, child);
    }

    pub fn remove(&mut self, pos: usize) -> Child {
        self.heads.remove(pos);
        self.keys.remove(pos)
    }

    /// Moves entries `at..` into a new leaf with room for `capacity`.
    pub fn split_off(&mut self, at: usize, capacity: usize) -> Leaf {
        let mut right = Leaf::with_capacity(capacity);
        right.keys.extend(self.keys.drain(at..));
        right.heads.extend(self.heads.drain(at..));
        right.prefix_len = self.prefix_len;
        right.exact_heads = self.exact_heads;
        right
    }

    /// Appends the entries of `next`, the right neighbour.
    pub fn append(&mut self, next: &Leaf) {
        let Some(b) = next.keys.first() else {
            return;
        };
        let Some(a) = self.keys.first() else {
            self.keys.extend_from_slice(&next.keys);
            self.heads.extend_from_slice(&next.heads);
            self.prefix_len = next.prefix_len;
            self.exact_heads = next.exact_heads;
            return;
        };
        let shared = (self.prefix_len.min(next.prefix_len) as usize)
            .min(common_prefix(a.0.name_bytes(), b.0.name_bytes()));
        self.keys.extend_from_slice(&next.keys);
        if shared == self.prefix_len as usize && shared == next.prefix_len as usize {
            self.heads.extend_from_slice(&next.heads);
            self.exact_heads &= next.exact_heads;
        } else {
            self.set_prefix(shared);
        }
    }

    /// Checks the inline heads against the names (tests).
    #[cfg(test)]
    pub fn check(&self) {
        assert_eq!(self.keys.len(), self.heads.len());
        let p = self.prefix_len as usize;
        if let Some(first) = self.keys.first() {
            let prefix = &first.0.name_bytes()[..p];
            for (k, &h) in self.keys.iter().zip(&self.heads) {
                assert!(k.0.name_bytes().starts_with(prefix), "shared prefix");
                assert_eq!(h, head(k.0.name_bytes(), p), "head of {}", k.0.name());
                if self.exact_heads {
                    assert!(head_is_exact(k.0.name_bytes(), p), "{}", k.0.name());
                }
            }
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

    /// search agrees with a binary search by full name, through inserts that
    /// shorten the prefix, removals, splits and appends, for names that tie
    /// on their heads and names that are prefixes of others.
    #[test]
    fn search_matches_full_name_order() {
        let mut pool: Vec<String> =
            "a ab abc abcd abcde abcdef abcdeg abcdf abd b n1000000 n1000001 \
             n100000 n1000010 n1000100 n999 n9 zz zzzzzzzz1 zzzzzzzz2 n5000005 n500005 n50000005 \
             abcdefghij abcdefghik abcdefgh abcdefg"
                .split_whitespace()
                .map(str::to_string)
                .collect();
        // A name with a NUL byte (which prep refuses) turns the head
        // shortcut off for its leaf; the search stays right.
        pool.extend(["ab\0".to_string(), "ab\0c".to_string()]);
        let mut x: u64 = 0x5851_f42d_4c95_7f2d;
        for _round in 0..300 {
            let mut leaf = Leaf::with_capacity(4);
            let mut model: Vec<String> = Vec::new();
            for _ in 0..40 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let name = &pool[(x % pool.len() as u64) as usize];
                let want = model.binary_search(name);
                assert_eq!(
                    leaf.search(name.as_bytes(), None),
                    want,
                    "{name} in {model:?}"
                );
                match want {
                    Ok(i) if x.is_multiple_of(3) => {
                        leaf.remove(i);
                        model.remove(i);
                    }
                    Ok(_) => {}
                    Err(i) => {
                        leaf.insert(i, child(name));
                        model.insert(i, name.clone());
                    }
                }
                leaf.check();
                if model.len() > 4 && x.is_multiple_of(7) {
                    let at = (x >> 20) as usize % model.len();
                    let right = leaf.split_off(at, 8);
                    right.check();
                    leaf.check();
                    leaf.append(&right);
                    leaf.check();
                }
            }
            for n in &pool {
                assert_eq!(
                    leaf.search(n.as_bytes(), None),
                    model.binary_search(n),
                    "{n}"
                );
            }
            assert!(leaf.search(b"", None).is_err());
        }
    }
}
