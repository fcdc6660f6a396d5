//! Log append and group commit: the cost of framing and copying a txn into
//! a memory-mapped segment, and of making a batch durable, by batch size
//! (the amortization group commit buys) and by `ringkeeper.logWrite` mode:
//! one O_DIRECT|O_DSYNC write (direct), or write/map copy plus fdatasync.

use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use glommio::LocalExecutorBuilder;
use ringkeeper::log::record;
use ringkeeper::log::segment::Segment;
use ringkeeper::log::{LogSettings, LogWrite, TxnLog};

const PAYLOAD: [u8; 1100] = [0x5a; 1100];

fn append(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let mut seg = Segment::create(dir.path(), 1, 256 << 20, true).unwrap();
    let mut zxid = 1i64;
    let mut g = c.benchmark_group("log");
    g.throughput(Throughput::Elements(1));
    g.bench_function("append_1k_record", |b| {
        b.iter(|| {
            if seg.len() > 200 << 20 {
                seg = Segment::create(dir.path(), zxid, 256 << 20, true).unwrap();
            }
            seg.append(zxid, zxid - 1, &PAYLOAD).unwrap();
            zxid += 1;
        })
    });
    // The consensus core's framing alone: a txn's payload already encoded
    // after room for the header, the header and its crc filled in place.
    let mut buf = Vec::with_capacity(64 << 10);
    g.bench_function("frame_1k_in_place", |b| {
        b.iter(|| {
            if buf.len() > 60 << 10 {
                buf.clear();
            }
            let start = buf.len();
            buf.resize(start + record::HEADER_BYTES, 0);
            buf.extend_from_slice(&PAYLOAD);
            record::finish_in_place(&mut buf, start, zxid, zxid - 1);
            zxid += 1;
            std::hint::black_box(buf.len())
        })
    });
    g.finish();
}

/// Appends `batch` framed records and syncs them once, `iters` times,
/// inside a glommio executor (fdatasync goes through io_uring).
fn group_commit_run(batch: usize, iters: u64, force_sync: bool, write: LogWrite) -> Duration {
    LocalExecutorBuilder::default()
        .spawn(move || async move {
            let dir = tempfile::tempdir().unwrap();
            let settings = LogSettings {
                dir: dir.path().to_path_buf(),
                preallocate_bytes: 64 << 20,
                segment_bytes_max: 64 << 20,
                force_sync,
                write,
            };
            let mut log = TxnLog::new(settings, 0);
            let n = record::framed_len(PAYLOAD.len());
            let mut framed = vec![0u8; n * batch];
            let mut zxid = 0i64;
            let start = Instant::now();
            for _ in 0..iters {
                let first = zxid + 1;
                for (i, chunk) in framed.chunks_mut(n).enumerate() {
                    record::write(chunk, first + i as i64, zxid, &PAYLOAD);
                }
                zxid += batch as i64;
                log.append_batch(&framed, first, zxid).await.unwrap();
                log.sync_job().await.unwrap();
            }
            start.elapsed()
        })
        .unwrap()
        .join()
        .unwrap()
}

fn group_commit(c: &mut Criterion) {
    let mut g = c.benchmark_group("group_commit");
    g.sample_size(10);
    g.measurement_time(Duration::from_secs(5));
    for (name, write) in [
        ("direct", LogWrite::Direct),
        ("buffered", LogWrite::Buffered),
        ("mmap", LogWrite::Mmap),
    ] {
        for batch in [1usize, 10, 100, 400] {
            g.throughput(Throughput::Elements(batch as u64));
            g.bench_with_input(
                BenchmarkId::new(format!("{name}_per_batch"), batch),
                &batch,
                |b, &batch| b.iter_custom(|iters| group_commit_run(batch, iters, true, write)),
            );
        }
    }
    g.bench_function("no_sync_batch_100", |b| {
        b.iter_custom(|iters| group_commit_run(100, iters, false, LogWrite::Buffered))
    });
    g.finish();
}

criterion_group!(benches, append, group_commit);
criterion_main!(benches);
