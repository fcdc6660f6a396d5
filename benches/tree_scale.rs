//! Write cost against tree size (issue 11, section 1): a create through
//! prep + apply, as the consensus core runs it, into a tree that already
//! holds N children under the same parent, or N znodes spread over many
//! parents; and one multi of 100k creates. Each batch of 100 starts from a
//! clone of the prepared tree (O(1)), as the consensus core publishes one
//! version per batch, so the batch's first write to each node copies it.
//! The cost should stay flat as N grows 1k -> 1M.

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use ringkeeper::consensus::prep::{prep, PrepContext};
use ringkeeper::proto::codes::op;
use ringkeeper::proto::{Acl, Request};
use ringkeeper::tree::{Tree, Txn};

// The server's allocator: what a create costs depends on it.
#[global_allocator]
static GLOBAL: ringkeeper::allocator::Mimalloc = ringkeeper::allocator::Mimalloc;

const SESSION: i64 = 0x100_0000_0001;
/// Creates per measured batch (one commit batch's worth).
const BATCH: u64 = 100;

fn ctx() -> PrepContext<'static> {
    PrepContext {
        session_id: SESSION,
        extended_types_enabled: false,
        enforce_quota: false,
        providers: Default::default(),
        ids: &[],
    }
}

fn create(path: String) -> Request {
    Request::Create {
        opcode: op::CREATE,
        path,
        data: Some(Bytes::from_static(&[0x42; 100])),
        acl: vec![Acl::world_all()],
        flags: 0,
        ttl: -1,
    }
}

fn commit(tree: &mut Tree, zxid: &mut i64, req: &Request) {
    *zxid += 1;
    let op = prep(tree, tree, &ctx(), &mut req.clone());
    tree.apply(&Txn {
        zxid: *zxid,
        time_ms: *zxid,
        session_id: SESSION,
        cxid: 0,
        op,
    });
}

/// A tree with `n` znodes: under "/p" alone, or round-robin under `parents`.
fn build(n: usize, parents: usize) -> (Tree, i64) {
    build_named(n, parents, |i| {
        format!("/p{}/n{:010}", i % parents as u64, i / parents as u64)
    })
}

/// Parents `/p0..`, then znode `i` at `path(i)` for i in 0..n.
fn build_named(n: usize, parents: usize, path: impl Fn(u64) -> String) -> (Tree, i64) {
    let mut tree = Tree::new();
    let mut zxid = 0;
    for p in 0..parents {
        commit(&mut tree, &mut zxid, &create(format!("/p{p}")));
    }
    for i in 0..n as u64 {
        commit(&mut tree, &mut zxid, &create(path(i)));
    }
    (tree, zxid)
}

fn bench_creates(c: &mut Criterion, name: &str, parents: usize, sizes: &[usize]) {
    let mut g = c.benchmark_group(name);
    g.throughput(Throughput::Elements(BATCH));
    g.sample_size(20);
    g.measurement_time(Duration::from_secs(3));
    for &n in sizes {
        let (base, base_zxid) = build(n, parents);
        g.bench_with_input(BenchmarkId::from_parameter(n), &n, |b, _| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let mut tree = base.clone();
                    let mut zxid = base_zxid;
                    let reqs: Vec<Request> = (0..BATCH)
                        .map(|i| create(format!("/p{}/new{i:06}", i as usize % parents)))
                        .collect();
                    // One version per batch, as the core publishes: the
                    // batch's first write to each node copies it.
                    let t0 = Instant::now();
                    for r in &reqs {
                        commit(&mut tree, &mut zxid, r);
                    }
                    total += t0.elapsed();
                    black_box(&tree);
                }
                total
            })
        });
    }
    g.finish();
}

fn one_parent(c: &mut Criterion) {
    bench_creates(
        c,
        "create_under_one_parent",
        1,
        &[1_000, 10_000, 100_000, 1_000_000],
    );
}

fn spread(c: &mut Criterion) {
    bench_creates(
        c,
        "create_spread_1000_parents",
        1000,
        &[10_000, 100_000, 1_000_000],
    );
}

fn big_multi(c: &mut Criterion) {
    let mut g = c.benchmark_group("multi");
    g.sample_size(10);
    g.throughput(Throughput::Elements(100_000));
    let ops: Vec<Request> = (0..100_000)
        .map(|i| create(format!("/m/n{i:07}")))
        .collect();
    let multi = Request::Multi(ops);
    let mut base = Tree::new();
    let mut zxid = 0;
    commit(&mut base, &mut zxid, &create("/m".into()));
    g.bench_function("100k_creates_prep_apply", |b| {
        b.iter(|| {
            let mut tree = base.clone();
            let mut z = zxid;
            commit(&mut tree, &mut z, &multi);
            assert_eq!(tree.znode_count(), base.znode_count() + 100_000);
            black_box(Arc::new(tree))
        })
    });
    g.finish();
}

/// As the server runs the loadgen's spread experiment (`tuning/scale.sh`
/// with LAYOUT=spread): names `n{i}` round robin under 100 parents,
/// unpadded, so new names land all over each parent's index; batches of
/// 800 creates (8 sessions x 100 outstanding); the core publishes one
/// version per batch and the shard drops the one it held before, and that
/// drop is timed too (on the server it runs on a thread that serves
/// requests). Untimed, each batch is deleted again so the tree stays at
/// its size however many iterations criterion runs.
///
/// `hold_versions` false: nothing holds an older version, so every write
/// is in place, as on the server whose core shares the shard's tree (the
/// default on 2 cores, `ringkeeper.sharedTree`); what grows with the tree
/// is then only the walks' cold lines.
fn bench_growing(
    c: &mut Criterion,
    name: &str,
    parents: usize,
    sizes: &[usize],
    hold_versions: bool,
) {
    const GROW_BATCH: u64 = 800;
    let mut g = c.benchmark_group(name);
    g.throughput(Throughput::Elements(GROW_BATCH));
    g.sample_size(10);
    g.measurement_time(Duration::from_secs(4));
    let path = |i: u64| format!("/p{}/n{i}", i % parents as u64);
    for &n in sizes {
        let (mut tree, mut zxid) = build_named(n, parents, path);
        let at_size = tree.znode_count();
        let mut next = n as u64;
        let mut held = hold_versions.then(|| tree.clone());
        g.bench_with_input(BenchmarkId::from_parameter(n), &n, |b, _| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let names: Vec<String> = (next..next + GROW_BATCH).map(path).collect();
                    next += GROW_BATCH;
                    let creates: Vec<Request> = names.iter().cloned().map(create).collect();
                    let t0 = Instant::now();
                    for r in &creates {
                        commit(&mut tree, &mut zxid, r);
                    }
                    if let Some(held) = held.as_mut() {
                        *held = tree.clone(); // the old version drops here
                    }
                    total += t0.elapsed();
                    for p in names {
                        let del = Request::Delete {
                            path: p,
                            version: -1,
                        };
                        commit(&mut tree, &mut zxid, &del);
                    }
                    if let Some(held) = held.as_mut() {
                        *held = tree.clone(); // the old version drops here
                    }
                }
                assert_eq!(tree.znode_count(), at_size);
                total
            })
        });
    }
    g.finish();
}

/// The spread sizes of issue 11 when measuring; `cargo test --all-targets`
/// runs each bench once, unoptimized, where a tree of 5M znodes would take
/// minutes to build.
fn growing_sizes() -> &'static [usize] {
    if std::env::args().any(|a| a == "--bench") {
        &[10_000, 100_000, 1_000_000, 5_000_000]
    } else {
        &[10_000]
    }
}

fn growing_spread(c: &mut Criterion) {
    let sizes = growing_sizes();
    bench_growing(c, "create_growing_spread_100_parents", 100, sizes, true);
}

fn in_place_spread(c: &mut Criterion) {
    let sizes = growing_sizes();
    bench_growing(c, "create_in_place_spread_100_parents", 100, sizes, false);
}

/// Encoding a snapshot of N znodes over 100 parents into nothing: the CPU
/// and memory work a background snapshot does per byte, apart from the
/// disk (a paced snapshot's duty cycle on the serving cores' neighbours).
fn snapshot_encode(c: &mut Criterion) {
    let measuring = std::env::args().any(|a| a == "--bench");
    let sizes: &[usize] = if measuring {
        &[100_000, 1_000_000]
    } else {
        &[10_000]
    };
    let mut g = c.benchmark_group("snapshot_encode_spread_100_parents");
    g.sample_size(10);
    for &n in sizes {
        let (tree, _) = build(n, 100);
        let bytes = ringkeeper::snapshot::encode(&tree, &[]).len() as u64;
        g.throughput(Throughput::Bytes(bytes));
        g.bench_with_input(BenchmarkId::from_parameter(n), &tree, |b, tree| {
            b.iter(|| ringkeeper::snapshot::encode_to(tree, &[], std::io::sink()).unwrap())
        });
    }
    g.finish();
}

criterion_group!(
    benches,
    one_parent,
    spread,
    big_multi,
    growing_spread,
    in_place_spread,
    snapshot_encode
);
criterion_main!(benches);
