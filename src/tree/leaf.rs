//! A leaf of the child index: child nodes in name order, with a 4-byte
//! head of each name kept inline.
//!
//! Why: a child's name lives in the child (one allocation with its data,
//! behind the node), so comparing against it is two dependent cache misses,
//! and a binary search over 64 children makes six of those comparisons: on a
//! big tree, most of a lookup's time. Here every name in the leaf shares a
//! prefix (`prefix_len` bytes), and `heads[i]` holds the 4 bytes of name i
//! after it (big-endian, zero-padded). A search compares the prefix once
//! (against the first child), then binary-searches the heads inline, and
//! reads a child's name only to confirm a match or to order names whose
//! heads tie. Cost: 4 bytes per child.
//!
//! Head order is name order: if head(a) < head(b), the first byte where the
//! padded heads differ is a real byte of b, so a < b (a is either smaller
//! there or ended). Equal heads say nothing, and are compared in full.

use std::cmp::Ordering;

use super::child_index::copy_sized;
use super::children::Child;

pub struct Leaf {
    keys: Vec<Child>,
    heads: Vec<u32>,
    /// Every name in the leaf starts with the first `prefix_len` bytes of
    /// the first one. Removals never make that false, so it is not always
    /// the longest common prefix; an insert that shares less shortens it
    /// and recomputes the heads.
    prefix_len: u32,
}

fn head(name: &[u8], prefix_len: usize) -> u32 {
    let mut b = [0u8; 4];
    let rest = &name[prefix_len..];
    let n = rest.len().min(4);
    b[..n].copy_from_slice(&rest[..n]);
    u32::from_be_bytes(b)
}

fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

impl Leaf {
    pub fn with_capacity(n: usize) -> Leaf {
        Leaf {
            keys: Vec::with_capacity(n),
            heads: Vec::with_capacity(n),
            prefix_len: 0,
        }
    }

    /// A copy for a new tree version, sized for at most `max` entries.
    pub fn copy(&self, max: usize) -> Leaf {
        Leaf {
            keys: copy_sized(&self.keys, max),
            heads: copy_sized(&self.heads, max),
            prefix_len: self.prefix_len,
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
    pub fn search(&self, name: &[u8]) -> Result<usize, usize> {
        let Some(first) = self.keys.first() else {
            return Err(0);
        };
        let p = self.prefix_len as usize;
        if p > 0 {
            let prefix = &first.0.name_bytes()[..p];
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
    }

    /// Inserts `child` at `pos` (from [`Leaf::search`]).
    pub fn insert(&mut self, pos: usize, child: Child) {
        let name = child.0.name_bytes();
        match self.keys.first() {
            None => {
                // Alone, the whole name is the prefix.
                self.prefix_len = u32::try_from(name.len()).expect("name under 4 GiB");
                self.heads.push(0);
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
            return;
        };
        let shared = (self.prefix_len.min(next.prefix_len) as usize)
            .min(common_prefix(a.0.name_bytes(), b.0.name_bytes()));
        self.keys.extend_from_slice(&next.keys);
        if shared == self.prefix_len as usize && shared == next.prefix_len as usize {
            self.heads.extend_from_slice(&next.heads);
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
        let pool: Vec<String> = "a ab abc abcd abcde abcdef abcdeg abcdf abd b n1000000 n1000001 \
             n100000 n1000010 n1000100 n999 n9 zz zzzzzzzz1 zzzzzzzz2"
            .split_whitespace()
            .map(str::to_string)
            .collect();
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
                assert_eq!(leaf.search(name.as_bytes()), want, "{name} in {model:?}");
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
                assert_eq!(leaf.search(n.as_bytes()), model.binary_search(n), "{n}");
            }
            assert!(leaf.search(b"").is_err());
        }
    }
}
