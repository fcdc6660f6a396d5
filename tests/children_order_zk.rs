//! getChildren order, unsorted, against Apache ZooKeeper 3.8.
//!
//! ZooKeeper lists a znode's children in the iteration order of the
//! java.util.HashSet its DataNode keeps them in; README claims ringkeeper
//! lists them in that same order. tests/prop_children_order.rs checks the
//! tree against a model that borrows the server's own hash functions; here
//! the only reference is a real ZooKeeper (Debian's 3.8, started by
//! tests/common next to a ringkeeper, each on a free port) and nothing is
//! modelled: the same writes go to both, one at a time, and every listing
//! is compared as sent, order included.
//!
//! Listings compared: getChildren, getChildren2 (and its stat's cversion and
//! numChildren), and getChildren inside a multiRead, at many points while
//! each parent grows and shrinks:
//!
//! - `/flat`: 2,000 children `n0`..`n1999`, one create at a time, listed
//!   at every size up to 64 and every 8th after, so every resize of the
//!   table is crossed;
//! - `/prefix`: 1,200 names with long common prefixes, zero-padded
//!   numbers, dotted keys, hex ids and non-ASCII letters (String.hashCode
//!   works on UTF-16 units), written in multis of 100 creates;
//! - `/seq`: 700 sequential children (persistent and ephemeral, three
//!   prefixes, and the empty prefix);
//! - `/churn`: creates, deletes of every third child, re-creates of the
//!   deleted names in reverse order, more creates, more deletes: removal and
//!   re-insertion move a name within its bucket;
//! - `/`, a parent with one child and one with none.
//!
//! `colliding_hashes` adds names that share their whole String.hashCode
//! ("Aa" and "BB" hash alike, so any string of such blocks does) or the low
//! 12 bits of its spread hash, so that one bucket holds many names: Java's
//! HashMap resizes instead of growing a bucket past 8 names in a table of
//! fewer than 64 slots, and past that turns the bucket into a red-black
//! tree whose iteration order is no longer the insertion order.
//!
//! The hash used to pick those names is computed here from its definition
//! (`s[0]*31^(n-1) + ... + s[n-1]` over UTF-16 units, then `h ^ (h >>> 16)`).
//! With `RK_DIFF_SELF=1` both sides are ZooKeeper, which shows that its
//! order is deterministic for every listing here (it must pass).
//!
//! Every difference is collected and reported with the parent, the listing,
//! the first index that differs and the names around it. Bounded: each
//! reply within `diff::wire::OP_TIMEOUT`; both servers are killed when the
//! test ends, also on a panic.

mod common;
mod diff;

use diff::wire::{op, Acl, Conn, Dec, Enc, Reply, Stat};
use diff::{other_flavor, side_name, start_pair, DIFF_CFG};

const PERSISTENT: i32 = 0;
const EPHEMERAL: i32 = 1;
const PERSISTENT_SEQUENTIAL: i32 = 2;
const EPHEMERAL_SEQUENTIAL: i32 = 3;

/// Differences reported in full (more are counted).
const REPORT_MAX: usize = 20;

/// One session on each server; every write goes to both, every listing is
/// read from both and compared.
struct Pair {
    zk: Conn,
    other: Conn,
    other_name: &'static str,
    /// Listings compared, and those that differed.
    compared: usize,
    differences: Vec<String>,
    /// Per parent: listings that differed, and where the first was.
    differing_parents: Vec<(String, usize, String)>,
    /// Per parent, the shape of ZooKeeper's HashSet of its children.
    shapes: std::collections::HashMap<String, JavaShape>,
    /// Listings whose parent has a tree bin (only their names must match).
    compared_as_sets: usize,
    /// Of those, the ones whose order did differ.
    order_differed_in_tree_bins: usize,
}

/// Enough of the java.util.HashSet a DataNode keeps its children in
/// (`new HashSet<>(8)`) to know whether one of its bins has become a
/// red-black tree: a put into a bin of 8 names doubles a table of fewer
/// than 64 slots (treeifyBin) and otherwise makes the bin a tree, whose
/// order is no longer the insertion order. README says ringkeeper does not
/// model the order inside such a bin (it would cost every create under a
/// large parent); listings of a parent that has one are compared as sets
/// (names, cversion, numChildren) and counted, every other listing exactly.
#[derive(Default)]
struct JavaShape {
    capacity: usize,
    /// The spread hashes of the names in the set.
    names: Vec<(String, u32)>,
    /// A bin became a tree (for good: its order stays the tree's).
    tree: bool,
}

impl JavaShape {
    fn add(&mut self, name: &str) {
        let h = java_spread(java_string_hash(name));
        if self.capacity == 0 {
            self.capacity = 8;
        }
        if !self.tree {
            let mask = self.capacity as u32 - 1;
            let in_bin = self
                .names
                .iter()
                .filter(|(_, x)| x & mask == h & mask)
                .count();
            if in_bin >= 8 {
                if self.capacity < 64 {
                    self.capacity *= 2;
                } else {
                    self.tree = true;
                }
            }
        }
        self.names.push((name.to_string(), h));
        if self.names.len() > self.capacity * 3 / 4 {
            self.capacity *= 2;
        }
    }

    fn remove(&mut self, name: &str) {
        self.names.retain(|(n, _)| n != name);
    }
}

/// (parent, name) of a path.
fn split_path(path: &str) -> (String, String) {
    let i = path.rfind('/').expect("an absolute path");
    let parent = if i == 0 { "/" } else { &path[..i] };
    (parent.to_string(), path[i + 1..].to_string())
}

impl Pair {
    fn connect(zk: &common::Server, other: &common::Server) -> Pair {
        let zk = Conn::connect(&zk.addr(), 30_000).expect("a session on zookeeper");
        let other_name = side_name(other_flavor());
        let other = Conn::connect(&other.addr(), 30_000)
            .unwrap_or_else(|e| panic!("a session on {other_name}: {e}"));
        Pair {
            zk,
            other,
            other_name,
            compared: 0,
            differences: Vec::new(),
            differing_parents: Vec::new(),
            shapes: Default::default(),
            compared_as_sets: 0,
            order_differed_in_tree_bins: 0,
        }
    }

    fn added(&mut self, path: &str) {
        let (parent, name) = split_path(path);
        self.shapes.entry(parent).or_default().add(&name);
    }

    /// Sends one request to both; a transport failure ends the test.
    fn call(&mut self, what: &str, opcode: i32, body: &[u8]) -> (Reply, Reply) {
        let a = self
            .zk
            .call(opcode, body)
            .unwrap_or_else(|e| panic!("{what} on zookeeper: {e}"));
        let b = self
            .other
            .call(opcode, body)
            .unwrap_or_else(|e| panic!("{what} on {}: {e}", self.other_name));
        (a, b)
    }

    /// A write both must accept, with the same answer (the created path).
    fn write(&mut self, what: &str, opcode: i32, body: &[u8]) -> String {
        let (a, b) = self.call(what, opcode, body);
        assert_eq!(
            (a.err, b.err),
            (0, 0),
            "{what}: error codes (zookeeper, {}); the trees would diverge",
            self.other_name
        );
        if opcode == op::CREATE {
            let pa = Dec::new(&a.body).str().expect("create reply on zookeeper");
            let pb = Dec::new(&b.body).str().expect("create reply");
            assert_eq!(
                pa, pb,
                "{what}: created path (zookeeper, {})",
                self.other_name
            );
            pa
        } else {
            String::new()
        }
    }

    fn create(&mut self, path: &str, flags: i32) -> String {
        let created = self.write(
            &format!("create {path}"),
            op::CREATE,
            &create_body(path, flags),
        );
        self.added(&created);
        created
    }

    fn delete(&mut self, path: &str) {
        let mut e = Enc::new();
        e.str(path).i32(-1);
        self.write(&format!("delete {path}"), op::DELETE, &e.0);
        let (parent, name) = split_path(path);
        if let Some(shape) = self.shapes.get_mut(&parent) {
            shape.remove(&name);
        }
    }

    /// One multi of creates (all persistent).
    fn multi_create(&mut self, paths: &[String]) {
        let mut e = Enc::new();
        for p in paths {
            e.i32(op::CREATE).bool(false).i32(-1);
            e.0.extend_from_slice(&create_body(p, PERSISTENT));
        }
        e.i32(-1).bool(true).i32(-1);
        for p in paths {
            self.added(p);
        }
        self.write(
            &format!("multi of {} creates from {}", paths.len(), paths[0]),
            op::MULTI,
            &e.0,
        );
    }

    /// Lists `parent` on both sides in each of the three ways and compares
    /// every listing as sent. `when` says where in the script this is.
    fn compare(&mut self, parent: &str, when: &str) {
        let mut get = Enc::new();
        get.str(parent).bool(false);
        let (a, b) = self.call(&format!("getChildren {parent}"), op::GET_CHILDREN, &get.0);
        let zk_children = self.check("getChildren", parent, when, &a, &b, |d| {
            Ok((d.strs()?, None))
        });

        let (a, b) = self.call(&format!("getChildren2 {parent}"), op::GET_CHILDREN2, &get.0);
        let zk_children2 = self.check("getChildren2", parent, when, &a, &b, |d| {
            let c = d.strs()?;
            let st = d.stat()?;
            Ok((c, Some(st)))
        });

        // multiRead: getChildren of the parent between two getData.
        let mut m = Enc::new();
        m.i32(op::GET_DATA).bool(false).i32(-1);
        m.str("/").bool(false);
        m.i32(op::GET_CHILDREN).bool(false).i32(-1);
        m.str(parent).bool(false);
        m.i32(op::GET_DATA).bool(false).i32(-1);
        m.str(parent).bool(false);
        m.i32(-1).bool(true).i32(-1);
        let (a, b) = self.call(&format!("multiRead {parent}"), op::MULTI_READ, &m.0);
        let zk_multi = self.check("multiRead's getChildren", parent, when, &a, &b, |d| {
            let (typ, _done, err) = (d.i32()?, d.bool()?, d.i32()?);
            if (typ, err) != (op::GET_DATA, 0) {
                return Err(format!("first result: type {typ}, err {err}"));
            }
            d.buf()?;
            d.stat()?;
            let (typ, _done, err) = (d.i32()?, d.bool()?, d.i32()?);
            if (typ, err) != (op::GET_CHILDREN, 0) {
                return Err(format!("second result: type {typ}, err {err}"));
            }
            Ok((d.strs()?, None))
        });

        // The reference agrees with itself (else the script is at fault).
        assert!(
            zk_children == zk_children2 && zk_children == zk_multi,
            "zookeeper lists {parent} ({when}) differently in getChildren, getChildren2 and \
             multiRead"
        );
    }

    /// Compares one listing's replies; returns the reference's children.
    fn check(
        &mut self,
        what: &str,
        parent: &str,
        when: &str,
        a: &Reply,
        b: &Reply,
        decode: impl Fn(&mut Dec) -> Result<(Vec<String>, Option<Stat>), String>,
    ) -> Vec<String> {
        self.compared += 1;
        let here = format!("{what} {parent} ({when})");
        let before = self.differences.len();
        let as_set = self.shapes.get(parent).is_some_and(|s| s.tree);
        if as_set {
            self.compared_as_sets += 1;
        }
        let za = self.check_inner(&here, a, b, as_set, decode);
        if self.differences.len() > before {
            match self
                .differing_parents
                .iter_mut()
                .find(|(p, _, _)| p == parent)
            {
                Some((_, n, _)) => *n += 1,
                None => {
                    self.differing_parents
                        .push((parent.to_string(), 1, format!("{what} ({when})")))
                }
            }
        }
        za
    }

    fn check_inner(
        &mut self,
        here: &str,
        a: &Reply,
        b: &Reply,
        as_set: bool,
        decode: impl Fn(&mut Dec) -> Result<(Vec<String>, Option<Stat>), String>,
    ) -> Vec<String> {
        assert_eq!(a.err, 0, "{here}: zookeeper answered error {}", a.err);
        let (za, sa) = decode(&mut Dec::new(&a.body))
            .unwrap_or_else(|e| panic!("{here}: zookeeper's reply: {e}"));
        if b.err != 0 {
            self.differences.push(format!(
                "{here}: {} answered error {} (zookeeper: {} children)",
                self.other_name,
                b.err,
                za.len()
            ));
            return za;
        }
        let (zb, sb) = match decode(&mut Dec::new(&b.body)) {
            Ok(x) => x,
            Err(e) => {
                self.differences
                    .push(format!("{here}: {}'s reply: {e}", self.other_name));
                return za;
            }
        };
        if let (Some(sa), Some(sb)) = (sa, sb) {
            if (sa.cversion, sa.num_children) != (sb.cversion, sb.num_children) {
                self.differences.push(format!(
                    "{here}: stat cversion/numChildren: zookeeper {}/{}, {} {}/{}",
                    sa.cversion, sa.num_children, self.other_name, sb.cversion, sb.num_children
                ));
            }
        }
        let sorted = |v: &[String]| {
            let mut v = v.to_vec();
            v.sort();
            v
        };
        if za != zb {
            if as_set && sorted(&za) == sorted(&zb) {
                self.order_differed_in_tree_bins += 1;
            } else {
                self.differences
                    .push(describe_difference(here, &za, &zb, self.other_name));
            }
        }
        za
    }

    /// Fails the test with every difference found.
    fn finish(self, what: &str) {
        eprintln!(
            "{what}: {} listings compared, {} differ; {} under a parent with a bin Java made a \
             tree (only the names must match), of which {} in another order",
            self.compared,
            self.differences.len(),
            self.compared_as_sets,
            self.order_differed_in_tree_bins
        );
        assert!(self.compared > 0, "{what}: nothing was compared");
        if !self.differences.is_empty() {
            let shown: Vec<&String> = self.differences.iter().take(REPORT_MAX).collect();
            let parents: Vec<String> = self
                .differing_parents
                .iter()
                .map(|(p, n, first)| format!("{p}: {n} listings, the first {first}"))
                .collect();
            panic!(
                "{what}: {} of {} listings differ between zookeeper and {}, under {}\n\n\
                 the differences{}:\n\n{}",
                self.differences.len(),
                self.compared,
                self.other_name,
                parents.join("; "),
                if self.differences.len() > REPORT_MAX {
                    format!(" (the first {REPORT_MAX} shown)")
                } else {
                    String::new()
                },
                shown
                    .iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join("\n\n")
            );
        }
    }
}

fn create_body(path: &str, flags: i32) -> Vec<u8> {
    let mut e = Enc::new();
    e.str(path).buf(Some(b"")).acls(&Acl::open()).i32(flags);
    e.0
}

/// What differs between two listings: other names, or the same names in
/// another order (first differing index, the names around it).
fn describe_difference(here: &str, za: &[String], zb: &[String], other: &str) -> String {
    let (mut sa, mut sb) = (za.to_vec(), zb.to_vec());
    sa.sort();
    sb.sort();
    if sa != sb {
        let missing: Vec<&String> = sa.iter().filter(|n| !sb.contains(n)).take(10).collect();
        let extra: Vec<&String> = sb.iter().filter(|n| !sa.contains(n)).take(10).collect();
        return format!(
            "{here}: other children: zookeeper {}, {other} {}; missing on {other} {missing:?}, \
             extra {extra:?}",
            za.len(),
            zb.len()
        );
    }
    let first = (0..za.len()).find(|&i| za[i] != zb[i]).unwrap();
    let moved = (0..za.len()).filter(|&i| za[i] != zb[i]).count();
    let (from, to) = (first.saturating_sub(3), (first + 5).min(za.len()));
    format!(
        "{here}: same {} names in another order: {moved} positions differ, the first at index \
         {first}\n  zookeeper [{from}..{to}]: {:?}\n  {other:<9} [{from}..{to}]: {:?}",
        za.len(),
        &za[from..to],
        &zb[from..to]
    )
}

/// Java's String.hashCode, over UTF-16 code units.
fn java_string_hash(s: &str) -> i32 {
    s.encode_utf16()
        .fold(0i32, |h, u| h.wrapping_mul(31).wrapping_add(i32::from(u)))
}

/// java.util.HashMap.hash: the hash code with its high half folded in.
fn java_spread(h: i32) -> u32 {
    let h = h as u32;
    h ^ (h >> 16)
}

/// Names of a few kinds with shared prefixes: what real applications
/// put under one parent.
fn prefixed_name(i: usize) -> String {
    match i % 6 {
        0 => format!("service-instance-{i:010}"),
        1 => format!("app.config.section{}.key{}", i % 7, i / 7),
        2 => format!(
            "lock-{:016x}",
            (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)
        ),
        3 => format!("worker_{}", i / 6),
        4 => format!("é-nœud-{i}"),
        _ => format!("узел-日本-{i}"),
    }
}

#[test]
fn ordinary_names() {
    let (zk, other) = start_pair(DIFF_CFG);
    let mut p = Pair::connect(&zk, &other);

    // An empty parent and a parent with one child.
    p.create("/empty", PERSISTENT);
    p.compare("/empty", "no children");
    p.create("/one", PERSISTENT);
    p.create("/one/only", PERSISTENT);
    p.compare("/one", "one child");

    // 2,000 children one at a time, listed at every size up to 64, then
    // at every 8th.
    p.create("/flat", PERSISTENT);
    for i in 0..2000 {
        p.create(&format!("/flat/n{i}"), PERSISTENT);
        let n = i + 1;
        if n <= 64 || n % 8 == 0 {
            p.compare("/flat", &format!("{n} children"));
        }
    }

    // Shared prefixes and non-ASCII names, in multis of 100.
    p.create("/prefix", PERSISTENT);
    for batch in 0..12 {
        let paths: Vec<String> = (batch * 100..(batch + 1) * 100)
            .map(|i| format!("/prefix/{}", prefixed_name(i)))
            .collect();
        p.multi_create(&paths);
        p.compare("/prefix", &format!("after multi {}", batch + 1));
    }

    // Sequential children: persistent and ephemeral, several prefixes,
    // and the empty prefix (the name is then the counter alone).
    p.create("/seq", PERSISTENT);
    for i in 0..700 {
        let (prefix, flags) = match i % 4 {
            0 => ("/seq/job-", PERSISTENT_SEQUENTIAL),
            1 => ("/seq/lease-", EPHEMERAL_SEQUENTIAL),
            2 => ("/seq/", PERSISTENT_SEQUENTIAL),
            _ => ("/seq/lock-00000000", EPHEMERAL_SEQUENTIAL),
        };
        p.create(prefix, flags);
        if i < 64 || i % 16 == 15 {
            p.compare("/seq", &format!("{} sequential children", i + 1));
        }
    }
    p.compare("/seq", "700 sequential children");

    // Churn: deletes and re-creates move names within their bucket.
    p.create("/churn", PERSISTENT);
    let name = |i: usize| format!("/churn/c{}", i * 7919 % 10007);
    for i in 0..400 {
        p.create(&name(i), PERSISTENT);
    }
    p.compare("/churn", "400 created");
    let deleted: Vec<usize> = (0..400).filter(|i| i % 3 == 0).collect();
    for (k, &i) in deleted.iter().enumerate() {
        p.delete(&name(i));
        if k % 10 == 9 {
            p.compare("/churn", &format!("{} deleted", k + 1));
        }
    }
    p.compare("/churn", "every third deleted");
    for (k, &i) in deleted.iter().rev().enumerate() {
        p.create(&name(i), PERSISTENT);
        if k % 10 == 9 {
            p.compare("/churn", &format!("{} re-created", k + 1));
        }
    }
    p.compare("/churn", "all re-created in reverse order");
    for i in 400..600 {
        p.create(&name(i), PERSISTENT);
    }
    p.compare("/churn", "200 more");
    for i in 0..300 {
        p.delete(&name(i));
        if i % 25 == 24 {
            p.compare("/churn", &format!("first {} deleted", i + 1));
        }
    }
    // Ephemerals under a persistent parent, some deleted again.
    for i in 0..100 {
        p.create(&format!("/churn/e{i}"), EPHEMERAL);
    }
    for i in (0..100).step_by(2) {
        p.delete(&format!("/churn/e{i}"));
    }
    p.compare("/churn", "with ephemerals");

    // The root lists the parents above and /zookeeper.
    p.compare("/", "the root");
    // Ordinary names: every listing in ZooKeeper's own order.
    assert_eq!(p.order_differed_in_tree_bins, 0);
    p.finish("ordinary names");
    drop((zk, other));
}

#[test]
fn colliding_hashes() {
    let (zk, other) = start_pair(DIFF_CFG);
    let mut p = Pair::connect(&zk, &other);

    // 16 names with one String.hashCode: every string of four blocks
    // drawn from "Aa" and "BB".
    let equal_hash: Vec<String> = (0..16u32)
        .map(|bits| {
            let blocks: String = (0..4)
                .map(|b| if bits >> b & 1 == 1 { "BB" } else { "Aa" })
                .collect();
            format!("h-{blocks}")
        })
        .collect();
    let h = java_string_hash(&equal_hash[0]);
    assert!(equal_hash.iter().all(|n| java_string_hash(n) == h));

    // A small table: 9 and 10 names in one bucket make Java's HashMap
    // resize (to 32, then 64 slots) where the load alone would not, which
    // moves the ordinary names beside them.
    p.create("/small", PERSISTENT);
    for i in 0..4 {
        p.create(&format!("/small/s{i}"), PERSISTENT);
    }
    for (k, n) in equal_hash.iter().take(10).enumerate() {
        p.create(&format!("/small/{n}"), PERSISTENT);
        p.compare("/small", &format!("4 plain and {} equal-hash names", k + 1));
    }
    for i in 4..8 {
        p.create(&format!("/small/s{i}"), PERSISTENT);
        p.compare(
            "/small",
            &format!("{} plain and 10 equal-hash names", i + 1),
        );
    }

    // A parent of only such names: its one bucket passes 8 names in a
    // table of 8, then 16 and 32 slots, and then becomes a tree.
    p.create("/same", PERSISTENT);
    for (k, n) in equal_hash.iter().enumerate() {
        p.create(&format!("/same/{n}"), PERSISTENT);
        p.compare("/same", &format!("{} equal-hash names", k + 1));
    }
    for (k, n) in equal_hash.iter().enumerate().filter(|(k, _)| k % 3 != 1) {
        p.delete(&format!("/same/{n}"));
        p.compare("/same", &format!("equal-hash name {k} deleted"));
    }

    // The same names among 100 ordinary ones, the table already large.
    p.create("/mixed", PERSISTENT);
    for i in 0..100 {
        p.create(&format!("/mixed/plain{i}"), PERSISTENT);
    }
    for (k, n) in equal_hash.iter().enumerate() {
        p.create(&format!("/mixed/{n}"), PERSISTENT);
        p.compare(
            "/mixed",
            &format!("100 plain and {} equal-hash names", k + 1),
        );
    }
    for (k, n) in equal_hash
        .iter()
        .enumerate()
        .rev()
        .filter(|(k, _)| k % 2 == 0)
    {
        p.delete(&format!("/mixed/{n}"));
        p.compare("/mixed", &format!("equal-hash name {k} deleted"));
    }

    // Different hashes with the same low 12 bits after spreading: one
    // bucket in every table up to 4096 slots. 14 of them, among 200
    // others created first, then 2,000 more (resizes split the tree).
    let same_bucket: Vec<String> = (0u32..)
        .map(|i| format!("b{i}"))
        .filter(|n| java_spread(java_string_hash(n)) & 0xfff == 0)
        .take(14)
        .collect();
    p.create("/bucket", PERSISTENT);
    for i in 0..200 {
        p.create(&format!("/bucket/x{i}"), PERSISTENT);
    }
    for (k, n) in same_bucket.iter().enumerate() {
        p.create(&format!("/bucket/{n}"), PERSISTENT);
        p.compare(
            "/bucket",
            &format!("200 others and {} same-bucket names", k + 1),
        );
    }
    for i in 200..2200 {
        p.create(&format!("/bucket/x{i}"), PERSISTENT);
        if i % 100 == 99 {
            p.compare("/bucket", &format!("{} others", i + 1));
        }
    }
    for (k, n) in same_bucket.iter().enumerate().filter(|(k, _)| k % 2 == 1) {
        p.delete(&format!("/bucket/{n}"));
        p.compare("/bucket", &format!("same-bucket name {k} deleted"));
    }

    // Most listings here are still compared as sent: before a bin becomes
    // a tree, and in parents where none does.
    assert!(
        p.compared_as_sets * 3 < p.compared * 2,
        "{} of {} listings compared as sets",
        p.compared_as_sets,
        p.compared
    );
    p.finish("colliding hashes");
    drop((zk, other));
}
