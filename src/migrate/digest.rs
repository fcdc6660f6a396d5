//! Apache ZooKeeper's tree digest (DigestCalculator, version 2): the sum,
//! wrapping, of a CRC32 per node over its path ("" for the root), its data
//! and its stat (czxid, mzxid, pzxid, ctime, mtime as i64; version,
//! cversion, aversion as i32; ephemeralOwner as i64; big-endian), leaving
//! out every node under "/zookeeper/". ZooKeeper 3.6+ writes it after each
//! txn in its log and after the nodes in its snapshots: import checks the
//! tree it built against it, export writes it so that ZooKeeper checks
//! ours.

use crate::tree::{Node, Tree};

/// DigestCalculator.DIGEST_VERSION in 3.6-3.9.
pub const DIGEST_VERSION: i32 = 2;
const EXCLUDED_SUBTREE: &str = "/zookeeper/";

/// One node's digest.
pub fn node_digest(path: &str, node: &Node) -> u64 {
    if path.starts_with(EXCLUDED_SUBTREE) {
        return 0;
    }
    let path = if path == "/" { "" } else { path };
    let mut stat = [0u8; 60];
    let fields_64 = [node.czxid, node.mzxid, node.pzxid(), node.ctime, node.mtime];
    for (i, v) in fields_64.iter().enumerate() {
        stat[i * 8..i * 8 + 8].copy_from_slice(&v.to_be_bytes());
    }
    stat[40..44].copy_from_slice(&node.version.to_be_bytes());
    stat[44..48].copy_from_slice(&node.cversion().to_be_bytes());
    stat[48..52].copy_from_slice(&node.aversion.to_be_bytes());
    stat[52..60].copy_from_slice(&node.ephemeral_owner.to_be_bytes());
    let mut crc = crc32fast::Hasher::new();
    crc.update(path.as_bytes());
    if let Some(d) = node.data() {
        crc.update(d);
    }
    crc.update(&stat);
    crc.finalize() as u64
}

/// The digest of the whole tree, as ZooKeeper's NodeHashMapImpl keeps it.
pub fn tree_digest(tree: &Tree) -> i64 {
    let mut sum = 0u64;
    tree.visit(|path, node| sum = sum.wrapping_add(node_digest(path, node)));
    sum as i64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tree::open_acl;

    /// The bytes a node's CRC32 covers, laid out by hand; that the sum
    /// agrees with ZooKeeper's own is shown by tests/migrate.rs (imports
    /// check ZooKeeper's digests, ZooKeeper checks an export's).
    #[test]
    fn one_node_covers_path_data_and_stat_in_order() {
        let mut n = Node::with("a", Some(b"x"), open_acl());
        n.czxid = 1;
        n.mzxid = 2;
        n.set_pzxid(3);
        n.ctime = 4;
        n.mtime = 5;
        n.version = 6;
        n.set_cversion(7);
        n.aversion = 8;
        n.ephemeral_owner = 9;
        let mut bytes = b"/ax".to_vec();
        for v in [1i64, 2, 3, 4, 5] {
            bytes.extend_from_slice(&v.to_be_bytes());
        }
        for v in [6i32, 7, 8] {
            bytes.extend_from_slice(&v.to_be_bytes());
        }
        bytes.extend_from_slice(&9i64.to_be_bytes());
        assert_eq!(node_digest("/a", &n), crc32fast::hash(&bytes) as u64);
        assert_eq!(node_digest("/zookeeper/quota", &n), 0);
        assert_ne!(node_digest("/zookeeper", &n), 0);
    }
}
