//! getChildren order at scale: the tree's order against a reference model
//! that runs java.util.HashMap's own mechanics (the HashSet ZooKeeper's
//! DataNode keeps its children in): a power-of-two table, new entries at the
//! tail of their bucket, removal unlinking in place, and on resize each
//! bucket split into a low and a high list that keep their relative order.
//! The tree computes the same order differently (bucket of the current
//! capacity, then insertion sequence), so the two can disagree.
//!
//! A bucket of more than 8 entries resizes a table of fewer than 64 slots
//! (as treeifyBin does). Not modelled: in a table of 64 or more such a
//! bucket becomes a red-black tree, which iterates in another order. With
//! String.hashCode spread over the table that takes nine names with equal
//! low hash bits in one parent.

use std::sync::Arc;

use bytes::Bytes;
use proptest::prelude::*;
use ringkeeper::java_compat::{spread, string_hash};
use ringkeeper::proto::Acl;
use ringkeeper::tree::{Tree, Txn, TxnOp};

/// java.util.HashMap<String, _> as HashSet uses it, iteration order only.
struct JavaHashSet {
    table: Vec<Vec<String>>,
    size: usize,
}

impl JavaHashSet {
    /// `new HashSet<>()` grows its table to 16 at the first add; DataNode's
    /// set starts at 8, which the tree also assumes (see tree::children).
    fn new() -> Self {
        JavaHashSet {
            table: vec![Vec::new(); 8],
            size: 0,
        }
    }

    fn bucket(&self, name: &str) -> usize {
        (spread(string_hash(name)) as usize) & (self.table.len() - 1)
    }

    fn add(&mut self, name: &str) {
        let b = self.bucket(name);
        if self.table[b].iter().any(|n| n == name) {
            return;
        }
        self.table[b].push(name.to_string());
        // A bin past TREEIFY_THRESHOLD (8): treeifyBin, which resizes a
        // table below MIN_TREEIFY_CAPACITY (64) instead.
        if self.table[b].len() > 8 && self.table.len() < 64 {
            self.resize();
        }
        self.size += 1;
        // threshold = capacity * 0.75; resize when ++size > threshold.
        if self.size > self.table.len() * 3 / 4 {
            self.resize();
        }
    }

    fn resize(&mut self) {
        let old_cap = self.table.len();
        let mut next = vec![Vec::new(); old_cap * 2];
        for (j, bucket) in self.table.drain(..).enumerate() {
            for name in bucket {
                let hi = (spread(string_hash(&name)) as usize) & old_cap != 0;
                next[if hi { j + old_cap } else { j }].push(name);
            }
        }
        self.table = next;
    }

    fn remove(&mut self, name: &str) {
        let b = self.bucket(name);
        if let Some(i) = self.table[b].iter().position(|n| n == name) {
            self.table[b].remove(i);
            self.size -= 1;
        }
    }

    fn iteration_order(&self) -> Vec<String> {
        self.table.iter().flatten().cloned().collect()
    }
}

/// Drives a tree with creates and deletes under one parent, as commits do.
struct Parent {
    tree: Tree,
    zxid: i64,
    cversion: i32,
}

impl Parent {
    fn new() -> Self {
        let mut p = Parent {
            tree: Tree::new(),
            zxid: 0,
            cversion: 0,
        };
        p.commit(TxnOp::Create {
            path: Arc::from("/p"),
            data: None,
            acl: Arc::from(vec![Acl::world_all()]),
            ephemeral_owner: 0,
            parent_cversion: 1,
            create2: false,
        });
        p
    }

    fn commit(&mut self, op: TxnOp) {
        self.zxid += 1;
        self.tree.apply(&Txn {
            zxid: self.zxid,
            time_ms: self.zxid,
            session_id: 1,
            cxid: 0,
            op,
        });
    }

    fn create(&mut self, name: &str) {
        self.cversion += 1;
        self.commit(TxnOp::Create {
            path: Arc::from(format!("/p/{name}")),
            data: Some(Bytes::from_static(b"v")),
            acl: Arc::from(vec![Acl::world_all()]),
            ephemeral_owner: 0,
            parent_cversion: self.cversion,
            create2: false,
        });
    }

    fn delete(&mut self, name: &str) {
        self.commit(TxnOp::Delete {
            path: Arc::from(format!("/p/{name}")),
        });
    }

    fn order(&self) -> Vec<String> {
        self.tree.children("/p").unwrap()
    }
}

/// xorshift64*: a fixed, dependency-free sequence for the big run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

#[test]
fn order_matches_java_hashset_at_100k_children() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut tree = Parent::new();
    let mut model = JavaHashSet::new();
    let mut live: Vec<String> = Vec::new();
    let mut created = 0usize;
    // Grow to 100k children with one delete for every nine creates, so the
    // order also has holes and re-inserted names; compare every 10k ops.
    let mut ops = 0usize;
    while live.len() < 100_000 {
        ops += 1;
        if rng.next().is_multiple_of(10) && !live.is_empty() {
            let i = (rng.next() % live.len() as u64) as usize;
            let name = live.swap_remove(i);
            tree.delete(&name);
            model.remove(&name);
        } else {
            // Mixed shapes: queue-like sequential names and random ones.
            let name = if rng.next().is_multiple_of(2) {
                format!("q-{created:010}")
            } else {
                format!("k{:x}", rng.next() % 1_000_000_007)
            };
            created += 1;
            // A random name may already be live: creating it again would
            // be NODEEXISTS in prep, not a commit.
            if tree.tree.get(&format!("/p/{name}")).is_none() {
                tree.create(&name);
                model.add(&name);
                live.push(name);
            }
        }
        if ops.is_multiple_of(10_000) {
            assert_eq!(tree.order(), model.iteration_order(), "after {ops} ops");
        }
    }
    assert_eq!(tree.order(), model.iteration_order());
    assert_eq!(tree.tree.get("/p").unwrap().stat().num_children, 100_000);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Small parents, many shapes: any interleaving of creates and deletes
    /// of names from a small pool (so names come back after deletion).
    #[test]
    fn order_matches_java_hashset(ops in prop::collection::vec((any::<bool>(), 0u16..300), 1..1500)) {
        let mut tree = Parent::new();
        let mut model = JavaHashSet::new();
        for (create, n) in ops {
            let name = format!("n{n}");
            let exists = tree.tree.get(&format!("/p/{name}")).is_some();
            if create && !exists {
                tree.create(&name);
                model.add(&name);
            } else if !create && exists {
                tree.delete(&name);
                model.remove(&name);
            }
        }
        prop_assert_eq!(tree.order(), model.iteration_order());
    }

    /// Small parents with up to 16 names of one String.hashCode ("Aa" and
    /// "BB" hash alike) among plain ones: a bucket past 8 names doubles a
    /// table below 64 slots.
    #[test]
    fn order_matches_java_hashset_with_equal_hashes(ops in prop::collection::vec((any::<bool>(), 0u16..48), 1..400)) {
        let mut tree = Parent::new();
        let mut model = JavaHashSet::new();
        for (create, n) in ops {
            let name = if n < 16 {
                (0..4).map(|b| if n >> b & 1 == 1 { "BB" } else { "Aa" }).collect()
            } else {
                format!("n{n}")
            };
            let exists = tree.tree.get(&format!("/p/{name}")).is_some();
            if create && !exists {
                tree.create(&name);
                model.add(&name);
            } else if !create && exists {
                tree.delete(&name);
                model.remove(&name);
            }
        }
        prop_assert_eq!(tree.order(), model.iteration_order());
    }
}
