//! Recovery from damaged and partial files (issue #4). ringkeeper is killed
//! (SIGKILL), its files are edited the way a crash or a bad disk would leave
//! them, and it is restarted on the same data dir and port:
//!
//! - a torn tail (the last record cut short, garbage or half a record after
//!   the written part, a segment whose only record is torn, an empty segment
//!   left by a crash during a roll) is cut: the server starts, every whole
//!   record is there, `ringkeeper log verify` passes, and writing goes on;
//! - one flipped byte in an early record, with acknowledged records after
//!   it, is corruption: the server refuses to start and names the file and
//!   the offset, and so does `ringkeeper log verify`;
//! - snapshots: with snapCount=1000, thousands of txns come back through
//!   the newest snapshot plus the log after it (also once autopurge removed
//!   the log the snapshot covers); `ringkeeper snapshot dump` reads them.
//!
//! Segment layout (src/log/header.rs, src/log/record.rs), read here
//! independently: a 4096-byte header (magic "RKTXNLOG", version), then
//! records `u32 len | u32 crc32c | i64 zxid | i64 durable_zxid | payload | pad to 8`.

mod common;

use common::raw_fallible as raw;

use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use common::restart::Proc;
use common::{four_letter, start_ringkeeper, Server};
use raw::*;

// ---------------------------------------------------------------------------
// Restarting a killed server on the same data dir and port.
// (Candidate for tests/common: Server's child is private there.)

/// `ringkeeper <args>`: the offline tools (output through files, so that
/// a long dump never blocks on a pipe).
fn tool(args: &[&str]) -> Output {
    let dir = tempfile::tempdir().unwrap();
    let (out_path, err_path) = (dir.path().join("out"), dir.path().join("err"));
    let mut child = Command::new(env!("CARGO_BIN_EXE_ringkeeper"))
        .args(args)
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out_path).unwrap())
        .stderr(std::fs::File::create(&err_path).unwrap())
        .spawn()
        .expect("spawn ringkeeper tool");
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > Duration::from_secs(30) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("ringkeeper {args:?} did not finish within 30 s");
        }
        thread::sleep(Duration::from_millis(20));
    };
    Output {
        status,
        stdout: std::fs::read(&out_path).unwrap(),
        stderr: std::fs::read(&err_path).unwrap(),
    }
}

fn log_verify(dir: &Path) -> Output {
    tool(&["log", "verify", dir.to_str().unwrap()])
}

fn text(o: &Output) -> String {
    format!(
        "status {}\nstdout:\n{}\nstderr:\n{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn assert_log_verifies(dir: &Path) {
    let o = log_verify(dir);
    assert!(
        o.status.success(),
        "log verify {}: {}",
        dir.display(),
        text(&o)
    );
}

// ---------------------------------------------------------------------------
// Segment files, read independently of the server's code.

const HEADER: usize = 24;
/// The segment header before the first record.
const SEGMENT_HEADER: usize = 4096;

fn framed_len(payload: usize) -> usize {
    (HEADER + payload + 7) & !7
}

#[derive(Debug, Clone, Copy)]
struct Rec {
    offset: usize,
    payload_len: usize,
    zxid: i64,
    durable: i64,
}

impl Rec {
    fn end(&self) -> usize {
        self.offset + framed_len(self.payload_len)
    }
}

/// `log.*` files in zxid order.
fn segments(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<(u64, PathBuf)> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| {
            let p = e.unwrap().path();
            let name = p.file_name()?.to_str()?.to_string();
            let hex = name.strip_prefix("log.")?;
            Some((u64::from_str_radix(hex, 16).ok()?, p))
        })
        .collect();
    v.sort();
    v.into_iter().map(|(_, p)| p).collect()
}

fn snapshots(dir: &Path) -> Vec<(i64, PathBuf)> {
    let mut v: Vec<(i64, PathBuf)> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| {
            let p = e.unwrap().path();
            let name = p.file_name()?.to_str()?.to_string();
            let hex = name.strip_prefix("snapshot.")?;
            Some((i64::from_str_radix(hex, 16).ok()?, p))
        })
        .collect();
    v.sort();
    v
}

/// The records of a segment, up to the first zero length (checksums are
/// not checked: this only finds the boundaries).
fn records(path: &Path) -> Vec<Rec> {
    let b = std::fs::read(path).unwrap();
    let u32_at = |i: usize| u32::from_be_bytes(b[i..i + 4].try_into().unwrap());
    let i64_at = |i: usize| i64::from_be_bytes(b[i..i + 8].try_into().unwrap());
    let mut v = Vec::new();
    if b.is_empty() {
        return v;
    }
    assert!(
        b.starts_with(b"RKTXNLOG\0\0\0\x01"),
        "{}: no segment header",
        path.display()
    );
    let mut off = SEGMENT_HEADER;
    while off + HEADER <= b.len() && u32_at(off) != 0 {
        let r = Rec {
            offset: off,
            payload_len: u32_at(off) as usize,
            zxid: i64_at(off + 8),
            durable: i64_at(off + 16),
        };
        assert!(
            r.end() <= b.len(),
            "{}: record past the end",
            path.display()
        );
        v.push(r);
        off = r.end();
    }
    v
}

/// A whole framed record, as the server writes it.
fn frame_record(zxid: i64, durable: i64, payload: &[u8]) -> Vec<u8> {
    let len = payload.len() as u32;
    let mut crc = crc32c::crc32c(&len.to_be_bytes());
    crc = crc32c::crc32c_append(crc, &zxid.to_be_bytes());
    crc = crc32c::crc32c_append(crc, &durable.to_be_bytes());
    crc = crc32c::crc32c_append(crc, payload);
    let mut out = Vec::with_capacity(framed_len(payload.len()));
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(&crc.to_be_bytes());
    out.extend_from_slice(&zxid.to_be_bytes());
    out.extend_from_slice(&durable.to_be_bytes());
    out.extend_from_slice(payload);
    out.resize(framed_len(payload.len()), 0);
    out
}

fn write_at(path: &Path, offset: usize, bytes: &[u8]) {
    let f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    f.write_all_at(bytes, offset as u64).unwrap();
}

fn flip_byte(path: &Path, offset: usize) {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .unwrap();
    let mut b = [0u8];
    f.read_exact_at(&mut b, offset as u64).unwrap();
    b[0] ^= 0x5a;
    f.write_all_at(&b, offset as u64).unwrap();
}

// ---------------------------------------------------------------------------
// Writing and checking data.

fn node(i: usize) -> (String, Vec<u8>) {
    (format!("/t/n{i:05}"), format!("value {i}").into_bytes())
}

/// Creates /t, then /t/n00000.. one at a time: each its own fsync batch, so
/// every record after the first few says the ones before it are durable.
/// Returns the connection's last reply zxid.
fn write_sequentially(port: u16, from: usize, count: usize) -> i64 {
    let mut c = Conn::new_session(port, 30_000).expect("connect");
    if from == 0 {
        let r = c.call(OP_CREATE, &create_body("/t", b"", 0)).unwrap();
        assert_eq!(r.err, 0);
    }
    let mut zxid = 0;
    for i in from..from + count {
        let (p, d) = node(i);
        let r = c.call(OP_CREATE, &create_body(&p, &d, 0)).unwrap();
        assert_eq!(r.err, 0, "create {p}");
        zxid = r.zxid;
    }
    zxid
}

/// Every node in `present` is there with its value, none in `absent` is.
fn check_nodes(
    proc: &Proc,
    present: impl IntoIterator<Item = usize>,
    absent: impl IntoIterator<Item = usize>,
) {
    let mut c = Conn::new_session(proc.port, 30_000).unwrap_or_else(|e| {
        panic!(
            "no new session after recovery ({e}); server output:\n{}",
            proc.output()
        )
    });
    let present: Vec<usize> = present.into_iter().collect();
    let paths: Vec<String> = present.iter().map(|i| node(*i).0).collect();
    let got = get_many(&mut c, &paths).unwrap();
    for (i, d) in present.iter().zip(got) {
        let (p, want) = node(*i);
        assert_eq!(d.as_ref(), Some(&want), "{p} after recovery");
    }
    let absent: Vec<usize> = absent.into_iter().collect();
    let paths: Vec<String> = absent.iter().map(|i| node(*i).0).collect();
    for (p, d) in paths.iter().zip(get_many(&mut c, &paths).unwrap()) {
        assert_eq!(d, None, "{p} was cut with the torn tail");
    }
}

/// After recovery, writing goes on, and survives one more kill -9 and
/// restart (recovery of a log that recovery already cut).
fn check_writes_go_on(server: &Server, mut proc: Proc, from: usize, tag: &str) {
    let port = server.port;
    let mut c = Conn::new_session(port, 30_000).unwrap_or_else(|e| {
        panic!(
            "{tag}: no new session after recovery ({e}):\n{}",
            proc.output()
        )
    });
    for i in from..from + 5 {
        let (p, d) = node(i);
        let r = c.call(OP_CREATE, &create_body(&p, &d, 0)).unwrap();
        assert_eq!(
            r.err,
            0,
            "{tag}: create {p} after recovery:\n{}",
            proc.output()
        );
    }
    drop(c);
    proc.kill();
    let proc = Proc::restart(server, &format!("{tag}-again"));
    check_nodes(&proc, from..from + 5, []);
    drop(proc);
    assert_log_verifies(&server.data_dir());
}

/// Starts a server with small segments and writes `count` nodes one by
/// one; returns it killed, with the last segment's path and records.
fn written_and_killed(count: usize) -> (Server, PathBuf, Vec<Rec>) {
    written_and_killed_with(count, "preAllocSize=64")
}

fn written_and_killed_with(count: usize, cfg: &str) -> (Server, PathBuf, Vec<Rec>) {
    let mut server = start_ringkeeper(cfg);
    write_sequentially(server.port, 0, count);
    server.kill();
    let segs = segments(&server.data_dir());
    let last = segs.last().expect("a log segment").clone();
    let recs = records(&last);
    let total: usize = segs.iter().map(|s| records(s).len()).sum();
    assert!(total > count, "{total} records in {segs:?}");
    (server, last, recs)
}

// ---------------------------------------------------------------------------
// Torn tails.

/// Cuts the segment `last` in the middle of its last record; returns it.
fn cut_last_record_short<'a>(last: &Path, recs: &'a [Rec]) -> &'a Rec {
    let tail = recs.last().unwrap();
    let cut = tail.offset + HEADER + tail.payload_len / 2;
    std::fs::OpenOptions::new()
        .write(true)
        .open(last)
        .unwrap()
        .set_len(cut as u64)
        .unwrap();
    tail
}

#[test]
fn last_record_cut_short_is_a_torn_tail() {
    let (server, last, recs) = written_and_killed(40);
    // The file ends in the middle of the last record (node 39's create).
    cut_last_record_short(&last, &recs);

    let proc = Proc::restart(&server, "restart-cut");
    check_nodes(&proc, 0..39, [39]);
    assert_log_verifies(&server.data_dir());
    check_writes_go_on(&server, proc, 100, "cut");
}

#[test]
fn garbage_after_the_written_part_is_a_torn_tail() {
    let (server, last, recs) = written_and_killed(40);
    let end = recs.last().unwrap().end();
    // Non-zero bytes where the next record would start: a header that is
    // nothing like a record, as a crash can leave a half-copied one.
    let mut garbage = Vec::new();
    let mut x: u32 = 0x1234_5678;
    for _ in 0..300 {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        garbage.push((x >> 24) as u8 | 1);
    }
    write_at(&last, end, &garbage);

    let proc = Proc::restart(&server, "restart-garbage");
    check_nodes(&proc, 0..40, []);
    assert_log_verifies(&server.data_dir());
    check_writes_go_on(&server, proc, 100, "garbage");
}

#[test]
fn half_a_record_after_the_written_part_is_a_torn_tail() {
    let (server, last, recs) = written_and_killed(40);
    let tail = *recs.last().unwrap();
    // The next record, framed as the server would (the next zxid, durable
    // up to the last one), but only its first half reached the file.
    let bytes = std::fs::read(&last).unwrap();
    let payload = bytes[tail.offset + HEADER..tail.offset + HEADER + tail.payload_len].to_vec();
    let next = frame_record(tail.zxid + 1, tail.zxid, &payload);
    write_at(&last, tail.end(), &next[..next.len() / 2]);

    let proc = Proc::restart(&server, "restart-half");
    check_nodes(&proc, 0..40, []);
    assert_log_verifies(&server.data_dir());
    check_writes_go_on(&server, proc, 100, "half");
}

#[test]
fn torn_first_record_of_a_segment_is_a_torn_tail() {
    // After a restart the first txn starts a new segment. Kill right after
    // it (a new session: one createSession record) and tear that record:
    // the cut leaves a segment with no record at all.
    let (server, first_segment, _) = written_and_killed(20);
    let mut proc = Proc::restart(&server, "restart-1");
    let c = Conn::new_session(server.port, 30_000).unwrap();
    drop(c);
    proc.kill();
    let segs = segments(&server.data_dir());
    assert_eq!(segs.len(), 2, "a new segment after the restart: {segs:?}");
    let second = segs[1].clone();
    assert_ne!(second, first_segment);
    let recs = records(&second);
    assert_eq!(recs.len(), 1, "only the createSession record in {second:?}");
    let torn = recs[0];
    let zeros = vec![0u8; torn.payload_len / 2];
    write_at(&second, torn.offset + HEADER + torn.payload_len / 2, &zeros);

    let proc = Proc::restart(&server, "restart-2");
    check_nodes(&proc, 0..20, []);
    assert_log_verifies(&server.data_dir());
    check_writes_go_on(&server, proc, 100, "torn-first");
}

#[test]
fn empty_segment_left_by_a_crash_during_a_roll() {
    // A crash between creating (and fsyncing the name of) a new segment and
    // copying its first record leaves a preallocated file of zeros named
    // after the next zxid.
    let (server, _, recs) = written_and_killed(20);
    let next = recs.last().unwrap().zxid + 1;
    let empty = server.data_dir().join(format!("log.{next:016x}"));
    std::fs::write(&empty, vec![0u8; 64 * 1024]).unwrap();

    let proc = Proc::restart(&server, "restart-empty");
    check_nodes(&proc, 0..20, []);
    assert_log_verifies(&server.data_dir());
    check_writes_go_on(&server, proc, 100, "empty-segment");
}

#[test]
fn torn_tail_before_an_empty_segment_left_by_a_crash_during_a_roll() {
    // The last batch of one segment not yet synced when the next segment
    // was created and the crash came: a torn tail in the segment before
    // the newest, which is a headerless file of zeros. Cutting the tail
    // removes the later segments, that one among them.
    let (server, last, recs) = written_and_killed(40);
    let tail = cut_last_record_short(&last, &recs);
    let next = tail.zxid + 1;
    let empty = server.data_dir().join(format!("log.{next:016x}"));
    std::fs::write(&empty, vec![0u8; 64 * 1024]).unwrap();

    let proc = Proc::restart(&server, "restart-cut-empty");
    check_nodes(&proc, 0..39, [39]);
    assert!(!empty.exists(), "the empty segment stays removed");
    assert_log_verifies(&server.data_dir());
    check_writes_go_on(&server, proc, 100, "cut-empty");
}

// ---------------------------------------------------------------------------
// Corruption.

/// One byte of an early, acknowledged record flipped: refusal, naming the
/// file and the record's offset, by the server and by `log verify`.
fn assert_refused(server: &Server, seg: &Path, rec: &Rec, what: &str) {
    let want_offset = format!("offset {}", rec.offset);
    let name = seg.file_name().unwrap().to_str().unwrap();

    let mut p = Proc::spawn(server, &format!("refuse-{}", rec.offset), "warn");
    let status = p.wait_exit(Duration::from_secs(10)).unwrap_or_else(|| {
        panic!(
            "{what}: the server did not exit within 10 s (it must refuse to start):\n{}",
            p.output()
        )
    });
    let out = p.output();
    assert!(!status.success(), "{what}: exit status {status}:\n{out}");
    assert!(
        out.contains(name) && out.contains(&want_offset),
        "{what}: the refusal must name {name} and {want_offset}:\n{out}"
    );
    assert!(
        four_letter(server.port, "ruok").is_err(),
        "{what}: nothing may serve"
    );

    eprintln!("{what}: the server refused: {}", out.trim_end());

    let o = log_verify(&server.data_dir());
    let err = String::from_utf8_lossy(&o.stderr);
    eprintln!("{what}: log verify: {}", err.trim_end());
    assert!(
        !o.status.success(),
        "{what}: log verify passed: {}",
        text(&o)
    );
    assert!(
        err.contains(name) && err.contains(&want_offset),
        "{what}: log verify must name {name} and {want_offset}: {}",
        text(&o)
    );
}

#[test]
fn flipped_byte_in_an_early_record_refuses_to_start() {
    let (server, seg, recs) = written_and_killed(60);
    let pristine = std::fs::read(&seg).unwrap();
    // Records after #10 say (durable_zxid) that #10 had been made durable.
    assert!(recs[recs.len() - 1].durable >= recs[10].zxid);
    let cases = [
        (
            "payload byte of record #10",
            10,
            HEADER + recs[10].payload_len / 2,
        ),
        ("crc of record #12", 12, 5),
        ("zxid of record #20", 20, 15),
        ("length of record #30", 30, 3),
        ("durable_zxid of record #40", 40, 23),
        (
            "last payload byte of record #50",
            50,
            HEADER + recs[50].payload_len - 1,
        ),
    ];
    for (what, i, at) in cases {
        std::fs::write(&seg, &pristine).unwrap();
        flip_byte(&seg, recs[i].offset + at);
        assert_refused(&server, &seg, &recs[i], what);
    }
    // The pristine log still starts (and nothing was cut meanwhile).
    std::fs::write(&seg, &pristine).unwrap();
    let proc = Proc::restart(&server, "restart-pristine");
    check_nodes(&proc, 0..60, []);
    drop(proc);
}

#[test]
fn flipped_byte_in_the_last_record_of_an_earlier_segment_refuses_to_start() {
    // 4 KiB segments: the evidence that the damaged record had been made
    // durable is in the next segment.
    let (server, _, _) =
        written_and_killed_with(100, "preAllocSize=64\nringkeeper.segmentBytesMax=4096");
    let segs = segments(&server.data_dir());
    assert!(segs.len() >= 3, "several segments: {segs:?}");
    let seg = &segs[1];
    let rec = *records(seg).last().unwrap();
    flip_byte(seg, rec.offset + HEADER + rec.payload_len / 2);
    assert_refused(&server, seg, &rec, "last record of the second segment");
}

// ---------------------------------------------------------------------------
// Snapshots plus the log after them.

/// ~5000 txns: creates, then setData on some and deletes of others,
/// pipelined (large batches), then a few one by one so that the log goes on
/// past the newest snapshot. Kill, restart, check everything.
fn snapshot_and_replay(extra_cfg: &str, purge: bool) {
    const CREATES: usize = 4000;
    let mut server = start_ringkeeper(extra_cfg);
    let port = server.port;
    let mut c = Conn::new_session(port, 30_000).unwrap();
    assert_eq!(
        c.call(OP_CREATE, &create_body("/t", b"", 0)).unwrap().err,
        0
    );
    // A parent whose children change only before the snapshot: its
    // cversion and pzxid come back from the snapshot alone (no replayed txn
    // touches them), and the next sequential name continues from them.
    assert_eq!(
        c.call(OP_CREATE, &create_body("/u", b"", 0)).unwrap().err,
        0
    );
    for _ in 0..3 {
        let r = c.call(OP_CREATE, &create_body("/u/s-", b"", 2)).unwrap();
        assert_eq!(r.err, 0);
    }
    assert_eq!(
        c.call(OP_DELETE, &delete_body("/u/s-0000000001", -1))
            .unwrap()
            .err,
        0
    );
    let u_stat = c.call(OP_EXISTS, &get_body("/u", false)).unwrap().body;
    let nodes: Vec<(String, Vec<u8>)> = (0..CREATES).map(node).collect();
    create_many(&mut c, &nodes).unwrap();
    // setData on every 8th node from 1000, delete every 8th from 1004.
    let sets: Vec<usize> = (1000..CREATES).step_by(8).collect();
    let dels: Vec<usize> = (1004..CREATES).step_by(8).collect();
    let mut xids = Vec::new();
    for i in &sets {
        let body = set_body(&node(*i).0, format!("set {i}").as_bytes(), 0);
        xids.push(c.send(OP_SET_DATA, &body).unwrap());
    }
    for i in &dels {
        xids.push(c.send(OP_DELETE, &delete_body(&node(*i).0, -1)).unwrap());
    }
    for xid in xids {
        let r = c.recv().unwrap();
        assert_eq!((r.xid, r.err), (xid, 0));
    }
    // Wait for a snapshot, then a few more txns one by one after it.
    let dir = server.data_dir();
    let start = Instant::now();
    while snapshots(&dir).is_empty() {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "no snapshot written"
        );
        thread::sleep(Duration::from_millis(50));
    }
    if purge {
        // Autopurge runs after a snapshot has been written, in the
        // background: keep writing (outside /t) until it has removed the
        // first segment, however slow the machine is today (bounded).
        let first_log = dir.join(format!("log.{:016x}", 1));
        let filler = "/purge-filler";
        assert_eq!(
            c.call(OP_CREATE, &create_body(filler, b"", 0)).unwrap().err,
            0
        );
        let start = Instant::now();
        while first_log.exists() {
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "autopurge never removed the first segment"
            );
            let xids: Vec<i32> = (0..200)
                .map(|_| {
                    c.send(OP_SET_DATA, &set_body(filler, &[7u8; 512], -1))
                        .unwrap()
                })
                .collect();
            for xid in xids {
                let r = c.recv().unwrap();
                assert_eq!((r.xid, r.err), (xid, 0));
            }
            thread::sleep(Duration::from_millis(50));
        }
    }
    let mut last_zxid = 0;
    for i in CREATES..CREATES + 20 {
        let (p, d) = node(i);
        let r = c.call(OP_CREATE, &create_body(&p, &d, 0)).unwrap();
        assert_eq!(r.err, 0);
        last_zxid = r.zxid;
    }
    drop(c);
    server.kill();

    let snaps = snapshots(&dir);
    assert!(!snaps.is_empty());
    let (newest_zxid, newest) = snaps.last().unwrap().clone();
    assert!(
        newest_zxid < last_zxid,
        "txns after the newest snapshot ({newest_zxid:#x} < {last_zxid:#x}): replay needed"
    );
    if purge {
        let first_log = dir.join(format!("log.{:016x}", 1));
        assert!(
            !first_log.exists(),
            "autopurge removed the first segment: recovery needs the snapshot"
        );
    }

    let dump = tool(&["snapshot", "dump", newest.to_str().unwrap()]);
    assert!(dump.status.success(), "snapshot dump: {}", text(&dump));
    let dumped = String::from_utf8_lossy(&dump.stdout);
    assert!(
        dumped.contains(&format!("\n  {}\n", node(0).0)) && dumped.contains("\n  /t\n"),
        "snapshot dump lists the nodes: {}",
        &dumped[..dumped.len().min(2000)]
    );

    let proc = Proc::restart_logging(&server, "restart-snapshot", "info");
    let out = proc.output();
    assert!(
        out.contains("loaded snapshot"),
        "recovery loaded a snapshot:\n{out}"
    );
    let mut c = Conn::new_session(port, 30_000).unwrap();
    let all: Vec<usize> = (0..CREATES + 20).collect();
    let paths: Vec<String> = all.iter().map(|i| node(*i).0).collect();
    let got = get_many(&mut c, &paths).unwrap();
    for (i, d) in all.iter().zip(got) {
        let want = if dels.contains(i) {
            None
        } else if sets.contains(i) {
            Some(format!("set {i}").into_bytes())
        } else {
            Some(node(*i).1)
        };
        assert_eq!(d, want, "{} after snapshot + replay", node(*i).0);
    }
    let children = children_of(&mut c, "/t").unwrap();
    assert_eq!(children.len(), CREATES + 20 - dels.len());
    assert_eq!(
        c.call(OP_EXISTS, &get_body("/u", false)).unwrap().body,
        u_stat,
        "/u's stat (cversion, pzxid) as before the restart"
    );
    let r = c.call(OP_CREATE, &create_body("/u/s-", b"", 2)).unwrap();
    assert_eq!(r.err, 0);
    assert!(
        String::from_utf8_lossy(&r.body).ends_with("/u/s-0000000003"),
        "the sequence goes on after a restart from a snapshot: {:?}",
        String::from_utf8_lossy(&r.body)
    );
    drop(c);
    drop(proc);
    assert_log_verifies(&dir);
}

#[test]
fn snapshot_plus_log_replay_after_kill_9() {
    snapshot_and_replay("snapCount=1000", false);
}

#[test]
fn snapshot_plus_log_replay_after_autopurge() {
    // Small segments, so that purging has whole segments to remove.
    snapshot_and_replay(
        "snapCount=1000\npreAllocSize=64\nringkeeper.segmentBytesMax=65536\n\
         autopurge.purgeInterval=1\nautopurge.snapRetainCount=3",
        true,
    );
}
