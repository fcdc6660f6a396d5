//! Builds a tree of N znodes (default 1M: 100 parents, 100-byte values) through
//! prep + apply, as the consensus core does, and prints the RSS it added per
//! znode. `cargo run --release --example tree_memory -- [ZNODES] [VALUE_BYTES]`.
use ringkeeper::consensus::prep::{prep, PrepContext};
use ringkeeper::proto::codes::op;
use ringkeeper::proto::{Acl, Request};
use ringkeeper::tree::{Tree, Txn};
#[global_allocator]
static GLOBAL: ringkeeper::allocator::Mimalloc = ringkeeper::allocator::Mimalloc;
fn rss() -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap();
    s.lines()
        .find(|l| l.starts_with("VmRSS"))
        .unwrap()
        .split_whitespace()
        .nth(1)
        .unwrap()
        .parse::<u64>()
        .unwrap()
        * 1024
}
fn main() {
    let total: usize = std::env::args()
        .nth(1)
        .map(|s| s.parse().unwrap())
        .unwrap_or(1_000_000);
    let value_bytes: usize = std::env::args()
        .nth(2)
        .map(|s| s.parse().unwrap())
        .unwrap_or(100);
    let value = bytes::Bytes::from(vec![7u8; value_bytes]);
    let parents = 100usize;
    let mut tree = Tree::new();
    let ctx = PrepContext {
        session_id: 1,
        extended_types_enabled: false,
        enforce_quota: false,
        providers: Default::default(),
        ids: &[],
    };
    let mut z = 1i64;
    let base = rss();
    let mut apply = |tree: &mut Tree, path: String| {
        let mut r = Request::Create {
            opcode: op::CREATE,
            path,
            data: Some(bytes::Bytes::copy_from_slice(&value)),
            acl: vec![Acl::world_all()],
            flags: 0,
            ttl: -1,
        };
        let op = prep(tree, tree, &ctx, &mut r);
        let t = Txn {
            zxid: z,
            time_ms: z,
            session_id: 1,
            cxid: 0,
            op,
        };
        z += 1;
        tree.apply(&t);
    };
    for p in 0..parents {
        apply(&mut tree, format!("/p{p:03}"));
    }
    for i in 0..total {
        apply(
            &mut tree,
            format!("/p{:03}/n{:010}", i % parents, i / parents),
        );
    }
    let r = rss();
    println!(
        "{} znodes: rss {} MB, {} bytes/znode",
        tree.znode_count(),
        (r - base) >> 20,
        (r - base) / total as u64
    );
}
