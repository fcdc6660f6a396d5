//! Wire codec: encode + decode of the messages a busy ensemble sees most.
//! Throughput is in messages (one request or response per element).

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use ringkeeper::proto::codes::op;
use ringkeeper::proto::{Acl, Request, Response, Stat};

fn stat() -> Stat {
    Stat {
        czxid: 0x1_0000_0042,
        mzxid: 0x1_0000_9f00,
        ctime: 1_700_000_000_000,
        mtime: 1_700_000_123_456,
        version: 17,
        cversion: 4,
        aversion: 0,
        ephemeral_owner: 0,
        data_length: 1024,
        num_children: 2,
        pzxid: 0x1_0000_9e00,
    }
}

/// The 10-op multi of a typical "claim and publish" transaction.
fn multi() -> Request {
    let data = vec![7u8; 64];
    let mut ops = Vec::new();
    for i in 0..4 {
        ops.push(Request::Create {
            opcode: op::CREATE,
            path: format!("/app/locks/worker-{i}-"),
            data: Some(data.clone().into()),
            acl: vec![Acl::world_all()],
            flags: 3,
            ttl: -1,
        });
    }
    for i in 0..3 {
        ops.push(Request::SetData {
            path: format!("/app/state/shard-{i:04}"),
            data: Some(data.clone().into()),
            version: 41 + i,
        });
    }
    ops.push(Request::Check {
        path: "/app/config".into(),
        version: 3,
    });
    ops.push(Request::Delete {
        path: "/app/queue/item-0000000042".into(),
        version: -1,
    });
    ops.push(Request::Delete {
        path: "/app/queue/item-0000000043".into(),
        version: -1,
    });
    Request::Multi(ops)
}

fn codec(c: &mut Criterion) {
    let mut g = c.benchmark_group("codec");
    g.throughput(Throughput::Elements(1));
    let mut buf = Vec::with_capacity(4096);

    let mut request = |name: &str, req: Request| {
        let opcode = req.opcode();
        g.bench_function(name, |b| {
            b.iter(|| {
                buf.clear();
                black_box(&req).encode(&mut buf);
                Request::decode(opcode, black_box(&buf)).unwrap()
            })
        });
    };
    request(
        "get_data_request",
        Request::GetData {
            path: "/app/config/service-0042".into(),
            watch: true,
        },
    );
    request(
        "set_data_request_1k",
        Request::SetData {
            path: "/app/state/shard-0042".into(),
            data: Some(vec![0xa5; 1024].into()),
            version: 17,
        },
    );
    // One element is the whole multi (10 ops).
    request("multi_10_ops", multi());

    let resp = Response::GetData {
        data: Some(vec![0x5a; 1024].into()),
        stat: stat(),
    };
    g.bench_function("get_data_response_1k", |b| {
        b.iter(|| {
            buf.clear();
            black_box(&resp).encode(&mut buf);
            Response::decode(op::GET_DATA, black_box(&buf)).unwrap()
        })
    });
    g.finish();
}

criterion_group!(benches, codec);
criterion_main!(benches);
