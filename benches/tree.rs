//! The data tree on the consensus core's path: reads on a 100k-node tree,
//! writes through prep + apply as the core runs them, the per-commit version
//! publish (Tree clone), and listing a node with 1000 children. And a
//! shard's user-space work for one getData of 1 KiB: the request decoded,
//! served from the tree, the reply framed. And the user-space work of a
//! standalone server's 1 KiB setData end to end, the kernel's part left out.

use std::hint::black_box;
use std::time::Instant;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use ringkeeper::consensus::prep::{prep, PrepContext};
use ringkeeper::proto::codes::op;
use ringkeeper::proto::{encode_reply_with, Acl, Request};
use ringkeeper::shard::reads::{self, Reader};
use ringkeeper::tree::{Tree, Txn, TxnOp};
use ringkeeper::watch::WatchTable;

const DIRS: usize = 100;
const PER_DIR: usize = 1000;
const SESSION: i64 = 0x100_0000_0001;

/// A tree and the next zxid, driven the way the consensus core drives it.
struct Core {
    tree: Tree,
    next_zxid: i64,
}

impl Core {
    fn write(&mut self, req: &Request) -> TxnOp {
        let ctx = PrepContext {
            session_id: SESSION,
            extended_types_enabled: false,
            enforce_quota: false,
            providers: Default::default(),
            ids: &[],
        };
        // A copy, as a decoded request would be: prep takes its data.
        let op = prep(&self.tree, &self.tree, &ctx, &mut req.clone());
        let txn = Txn {
            zxid: self.next_zxid,
            time_ms: 1_700_000_000_000 + self.next_zxid,
            session_id: SESSION,
            cxid: 0,
            op,
        };
        self.next_zxid += 1;
        self.tree.apply(&txn);
        txn.op
    }
}

fn create(path: String, data: &[u8]) -> Request {
    Request::Create {
        opcode: op::CREATE,
        path,
        data: Some(bytes::Bytes::copy_from_slice(data)),
        acl: vec![Acl::world_all()],
        flags: 0,
        ttl: -1,
    }
}

fn leaf(d: usize, n: usize) -> String {
    format!("/bench/d{d:03}/n{n:04}")
}

/// /bench/dDDD/nNNNN: 100 x 1000 leaves with 32 bytes each, 100k+ nodes.
fn build() -> Core {
    let mut core = Core {
        tree: Tree::new(),
        next_zxid: 1,
    };
    let data = [0x42u8; 32];
    core.write(&create("/bench".into(), &[]));
    for d in 0..DIRS {
        core.write(&create(format!("/bench/d{d:03}"), &[]));
        for n in 0..PER_DIR {
            let op = core.write(&create(leaf(d, n), &data));
            debug_assert!(matches!(op, TxnOp::Create { .. }));
        }
    }
    assert_eq!(core.tree.znode_count(), 4 + 1 + DIRS + DIRS * PER_DIR);
    core
}

/// A fixed pseudo-random walk over the leaves, so lookups miss the caches.
fn random_leaves(k: usize) -> Vec<String> {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    (0..k)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let i = (x % (DIRS * PER_DIR) as u64) as usize;
            leaf(i / PER_DIR, i % PER_DIR)
        })
        .collect()
}

fn tree(c: &mut Criterion) {
    let mut core = build();
    let paths = random_leaves(4096);
    let mut g = c.benchmark_group("tree");
    g.throughput(Throughput::Elements(1));

    let mut i = 0;
    g.bench_function("get_100k", |b| {
        b.iter(|| {
            i = (i + 1) & 4095;
            black_box(
                core.tree
                    .get(black_box(paths[i].as_str()))
                    .map(|n| n.stat()),
            )
        })
    });

    g.bench_function("children_1000", |b| {
        b.iter(|| core.tree.children(black_box("/bench/d042")).unwrap())
    });

    g.bench_function("clone", |b| b.iter(|| black_box(core.tree.clone())));

    // setData through prep + apply on the 100k tree.
    let data = [0x17u8; 32];
    let sets: Vec<Request> = paths
        .iter()
        .map(|p| Request::SetData {
            path: p.clone(),
            data: Some(bytes::Bytes::copy_from_slice(&data)),
            version: -1,
        })
        .collect();
    let mut i = 0;
    g.bench_function("set_data_prep_apply", |b| {
        b.iter(|| {
            i = (i + 1) & 4095;
            core.write(&sets[i])
        })
    });

    // The same, publishing every version as the core does: a clone per
    // commit, kept (by the shards) until the next one, so each apply pays
    // copy-on-write along its path.
    let mut published = core.tree.clone();
    g.bench_function("set_data_prep_apply_publish", |b| {
        b.iter(|| {
            i = (i + 1) & 4095;
            core.write(&sets[i]);
            published = core.tree.clone();
        })
    });
    drop(published);

    // create: timed creates of fresh leaves, then untimed deletes so the
    // tree keeps its size; delete: the other way round.
    let mut serial = 0u64;
    let mut batch = |iters: u64| {
        let names: Vec<String> = (0..iters)
            .map(|k| format!("/bench/d{:03}/x{}", (serial + k) % DIRS as u64, serial + k))
            .collect();
        serial += iters;
        let creates: Vec<Request> = names.iter().map(|n| create(n.clone(), &data)).collect();
        let deletes: Vec<Request> = names
            .into_iter()
            .map(|path| Request::Delete { path, version: -1 })
            .collect();
        (creates, deletes)
    };
    let timed = |core: &mut Core, reqs: &[Request]| {
        let start = Instant::now();
        for r in reqs {
            core.write(r);
        }
        start.elapsed()
    };
    let untimed = |core: &mut Core, reqs: &[Request]| {
        for r in reqs {
            core.write(r);
        }
    };
    g.bench_function("create_prep_apply", |b| {
        b.iter_custom(|iters| {
            let (creates, deletes) = batch(iters);
            let t = timed(&mut core, &creates);
            untimed(&mut core, &deletes);
            t
        })
    });
    g.bench_function("delete_prep_apply", |b| {
        b.iter_custom(|iters| {
            let (creates, deletes) = batch(iters);
            untimed(&mut core, &creates);
            timed(&mut core, &deletes)
        })
    });
    g.finish();
    assert_eq!(core.tree.znode_count(), 4 + 1 + DIRS + DIRS * PER_DIR);
}

/// /bench/key-NNNNNN: `keys` children of 1 KiB each under one parent.
fn keys_1k(keys: usize) -> Core {
    let mut core = Core {
        tree: Tree::new(),
        next_zxid: 1,
    };
    let data = [0x5au8; 1024];
    core.write(&create("/bench".into(), &[]));
    for n in 0..keys {
        core.write(&create(format!("/bench/key-{n:06}"), &data));
    }
    core
}

/// One getData as a shard answers it in line, the kernel's part left out:
/// the request's body decoded, the read served from the tree (lookup, ACL,
/// stat), the framed reply appended to the connection's buffer.
fn read_path(c: &mut Criterion) {
    let core = keys_1k(1000);
    let bodies: Vec<Vec<u8>> = (0..1000)
        .map(|n| {
            let mut body = Vec::new();
            Request::GetData {
                path: format!("/bench/key-{:06}", (n * 7919) % 1000),
                watch: false,
            }
            .encode(&mut body);
            body
        })
        .collect();
    let mut watches = WatchTable::default();
    let who = Reader {
        conn: 1,
        session_id: SESSION,
        ids: &[],
    };
    let mut out = Vec::with_capacity(64 * 1024);
    let mut g = c.benchmark_group("read_path");
    g.throughput(Throughput::Elements(1));
    let mut i = 0;
    g.bench_function("get_data_1k_served", |b| {
        b.iter(|| {
            i = (i + 1) % bodies.len();
            let req = Request::decode(op::GET_DATA, black_box(&bodies[i])).unwrap();
            let res = reads::serve(&core.tree, &mut watches, &who, &req);
            if out.len() > 60 * 1024 {
                out.clear();
            }
            encode_reply_with(&mut out, i as i32, 1, res.err, |o| {
                if let Some(b) = &res.body {
                    b.encode(o)
                }
            });
            black_box(out.len())
        })
    });
    g.finish();
}

/// A standalone server's writes in its user space, batch by batch as the
/// runner takes them: each setData body decoded and boxed for the core,
/// prepped and framed into the batch's log bytes by the consensus core
/// (which shares the tree with its shard, as standalone does), the log
/// bytes copied into an aligned buffer as the O_DIRECT writer stages them,
/// then each txn applied by the shard and its reply framed. The log's write
/// and the sockets are left out.
fn write_path(c: &mut Criterion) {
    use std::cell::RefCell;
    use std::collections::{BTreeMap, BTreeSet};
    use std::rc::Rc;

    use ringkeeper::config::Config;
    use ringkeeper::consensus::core::{apply_answering, Clock, Core as ConsensusCore};
    use ringkeeper::consensus::messages::{Commit, ToCore};
    use ringkeeper::consensus::runner::timings;
    use ringkeeper::recovery::Recovered;
    use ringkeeper::session::ConnRef;
    use ringkeeper::zab::{ensemble::Node, Epochs};

    const KEYS: usize = 1000;
    const BATCH: usize = 8;
    let seed = keys_1k(KEYS);
    let config = Config::embedded_default();
    let last = seed.tree.last_zxid();
    // The epoch of the seed's zxids (0): a lone voter resumes it after them.
    let node = Node::new(
        1,
        BTreeSet::from([1]),
        timings(&config),
        Epochs {
            accepted: 0,
            current: 0,
        },
        Vec::new(),
    );
    let mint = node.with_history_base(last).resume_alone().lead;
    let recovered = Recovered {
        tree: seed.tree.clone(),
        sessions: BTreeMap::from([(SESSION, 30_000)]),
        txns_replayed: 0,
    };
    let mut core = ConsensusCore::new(&config, 1, recovered, mint, Clock::read());
    let shared = Rc::new(RefCell::new(seed.tree));
    core.share_tree(shared.clone());
    assert_eq!(shared.borrow().last_zxid(), last);
    let conn = ConnRef { shard: 0, conn: 1 };
    let ids: ringkeeper::consensus::messages::AuthIds =
        vec![("ip".to_string(), "127.0.0.1".to_string())].into();
    let bodies: Vec<Vec<u8>> = (0..KEYS)
        .map(|n| {
            let mut body = Vec::new();
            Request::SetData {
                path: format!("/bench/key-{:06}", (n * 7919) % KEYS),
                data: Some(bytes::Bytes::copy_from_slice(&[n as u8; 1024])),
                version: -1,
            }
            .encode(&mut body);
            body
        })
        .collect();
    let mut staged: Vec<u8> = Vec::with_capacity(1 << 20);
    let mut out = Vec::with_capacity(64 * 1024);
    let mut triggers = Vec::new();
    let mut i = 0;
    let mut g = c.benchmark_group("write_path");
    g.throughput(Throughput::Elements(BATCH as u64));
    g.bench_function("set_data_1k_batch_of_8", |b| {
        b.iter(|| {
            let clock = Clock::read();
            for _ in 0..BATCH {
                i = (i + 1) % bodies.len();
                let request = Request::decode(op::SET_DATA, black_box(&bodies[i])).unwrap();
                core.handle(
                    ToCore::Write {
                        conn,
                        session_id: SESSION,
                        xid: i as i32,
                        request: Box::new(request),
                        ids: ids.clone(),
                        client_body: None,
                    },
                    clock,
                );
            }
            let batch = core.take_batch();
            staged.clear();
            staged.extend_from_slice(&batch.log_bytes);
            core.recycle_log_buffer(batch.log_bytes);
            assert!(batch.shard_applies);
            if out.len() > 60 * 1024 {
                out.clear();
            }
            let mut tree = shared.borrow_mut();
            for commit in batch.commits.iter() {
                let Commit::Txn {
                    zxid,
                    txn,
                    reply: Some(reply),
                    request,
                    ..
                } = commit
                else {
                    panic!("every write commits a txn with a reply");
                };
                triggers.clear();
                let result =
                    apply_answering(&mut tree, txn, request.as_deref(), false, &mut triggers);
                let (err, body) = result.expect("the request is here");
                assert_eq!(err, 0);
                encode_reply_with(&mut out, reply.xid, *zxid, err, |o| {
                    if let Some(b) = &body {
                        b.encode(o)
                    }
                });
            }
            black_box((staged.len(), out.len()))
        })
    });
    g.finish();
}

criterion_group!(benches, tree, read_path, write_path);
criterion_main!(benches);
