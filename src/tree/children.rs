//! A znode's child names, remembering enough to list them in the order
//! Apache ZooKeeper does. ZooKeeper keeps children in a java.util.HashSet
//! (created with capacity 8) and getChildren returns its iteration order:
//! by hash bucket, and within a bucket by insertion. Clients that print
//! children unsorted (and tests comparing against ZooKeeper) see that order,
//! so we reproduce it: bucket of Java's String.hashCode (spread as HashMap
//! does) for the set's current capacity, then insertion sequence.

use std::sync::Arc;

use imbl::OrdMap;

use crate::java_compat::{spread, string_hash};

#[derive(Clone, Debug, Default)]
pub struct Children {
    /// Name -> insertion sequence. None while empty: an empty imbl map
    /// still allocates a whole B-tree node, and most znodes are leaves.
    names: Option<OrdMap<Arc<str>, u64>>,
    next_seq: u64,
    /// The Java HashSet's table size: 0 before the first child, then 8,
    /// doubling when the size passes 3/4 of it; it never shrinks.
    java_capacity: u32,
}

impl Children {
    pub fn len(&self) -> usize {
        self.names.as_ref().map_or(0, OrdMap::len)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn contains(&self, name: &str) -> bool {
        self.names.as_ref().is_some_and(|m| m.contains_key(name))
    }

    pub fn insert(&mut self, name: Arc<str>) {
        if self.java_capacity == 0 {
            self.java_capacity = 8;
        }
        let names = self.names.get_or_insert_with(OrdMap::new);
        if names.insert(name, self.next_seq).is_none() {
            self.next_seq += 1;
            if names.len() as u64 * 4 > self.java_capacity as u64 * 3 {
                self.java_capacity *= 2;
            }
        }
    }

    pub fn remove(&mut self, name: &str) -> bool {
        let Some(names) = self.names.as_mut() else {
            return false;
        };
        let removed = names.remove(name).is_some();
        if names.is_empty() {
            self.names = None;
        }
        removed
    }

    /// Names in byte order.
    pub fn sorted(&self) -> impl Iterator<Item = &Arc<str>> {
        self.names.iter().flat_map(|m| m.keys())
    }

    /// Names in the order ZooKeeper's getChildren returns them.
    pub fn zookeeper_order(&self) -> Vec<String> {
        let mask = self.java_capacity.max(1) - 1;
        let mut v: Vec<(u32, u64, &Arc<str>)> = self
            .names
            .iter()
            .flat_map(|m| m.iter())
            .map(|(n, seq)| (spread(string_hash(n)) & mask, *seq, n))
            .collect();
        v.sort_unstable_by_key(|(bucket, seq, _)| (*bucket, *seq));
        v.into_iter().map(|(_, _, n)| n.to_string()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(names: &[&str]) -> Children {
        let mut c = Children::default();
        for n in names {
            c.insert(Arc::from(*n));
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
            c.insert(Arc::from(format!("n{i}").as_str()));
        }
        assert_eq!(c.java_capacity, 16);
        c.remove("n0");
        assert_eq!(c.java_capacity, 16);
        assert_eq!(c.len(), 6);
    }
}
