//! Log segments carry a header (magic "RKTXNLOG", format version 1) and
//! recovery only ever modifies files that have it (issue #11, section 4,
//! "A foreign dataDir is data, not a torn tail"):
//!
//! - a file named like a segment (`log.<16 hex digits>`) holding random
//!   bytes, ZooKeeper's "ZKLG" txn log, a ringkeeper header of an unknown
//!   format version, or headerless zeros that are not the newest segment,
//!   stops startup with an error naming the file, and every byte in the
//!   data dir is as it was; `ringkeeper log verify` exits non-zero on it,
//!   and `ringkeeper log dump` refuses it. (Before the header, the random
//!   file was read as our segment with a "torn tail" at offset 0 and
//!   zeroed.)
//! - in every `ringkeeper.logWrite` mode (direct, buffered, mmap), every
//!   segment the server writes starts with the header, and a restart after
//!   kill -9 recovers every write, twice over.

mod common;

use common::raw_fallible as raw;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use common::restart::Proc;
use common::{four_letter, start_ringkeeper, Server};
use raw::*;

/// The segment header as the server writes it (src/log/header.rs), read
/// here independently: magic, u32 BE version, zeros to 4096.
const SEGMENT_MAGIC: &[u8] = b"RKTXNLOG\0\0\0\x01";
const SEGMENT_HEADER_BYTES: usize = 4096;

/// One test at a time: each kills servers and restarts them on the same
/// port, and a parallel test's free_port() could take that port meanwhile.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

fn tool(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ringkeeper"))
        .args(args)
        .env("RUST_LOG", "warn")
        .output()
        .expect("run the ringkeeper tool")
}

/// Every file under `dir` with its bytes.
fn files(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(files(&p));
        } else {
            out.insert(p.clone(), std::fs::read(&p).unwrap());
        }
    }
    out
}

fn segments(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .and_then(|n| n.strip_prefix("log."))
                .is_some_and(|h| h.len() == 16 && u64::from_str_radix(h, 16).is_ok())
        })
        .collect();
    v.sort();
    v
}

fn random_bytes(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

/// The start of a ZooKeeper txn log (FileHeader: magic "ZKLG", version 2,
/// dbid 0), then records' worth of bytes.
fn zookeeper_log() -> Vec<u8> {
    let mut b = b"ZKLG".to_vec();
    b.extend_from_slice(&2i32.to_be_bytes());
    b.extend_from_slice(&0i64.to_be_bytes());
    b.extend_from_slice(&random_bytes(8192, 7));
    b
}

fn node(i: usize) -> (String, Vec<u8>) {
    (format!("/m/n{i:04}"), format!("value {i}").into_bytes())
}

/// Creates /m (when `from` is 0) and /m/n<from>.. one at a time.
fn write_nodes(port: u16, from: usize, count: usize) {
    let mut c = Conn::new_session(port, 30_000).expect("connect");
    if from == 0 {
        assert_eq!(
            c.call(OP_CREATE, &create_body("/m", b"", 0)).unwrap().err,
            0
        );
    }
    for i in from..from + count {
        let (p, d) = node(i);
        let r = c.call(OP_CREATE, &create_body(&p, &d, 0)).unwrap();
        assert_eq!(r.err, 0, "create {p}");
    }
}

fn check_nodes(proc: &Proc, upto: usize) {
    let mut c = Conn::new_session(proc.port, 30_000)
        .unwrap_or_else(|e| panic!("no session after restart ({e}):\n{}", proc.output()));
    let paths: Vec<String> = (0..upto).map(|i| node(i).0).collect();
    for (i, got) in get_many(&mut c, &paths).unwrap().into_iter().enumerate() {
        assert_eq!(got, Some(node(i).1), "{} after restart", node(i).0);
    }
}

/// Starts a server, writes 20 nodes and kills it (SIGKILL).
fn written_and_killed(cfg: &str) -> Server {
    let mut server = start_ringkeeper(cfg);
    write_nodes(server.port, 0, 20);
    server.kill();
    assert!(
        !segments(&server.data_dir()).is_empty(),
        "no segment written"
    );
    server
}

/// The server refuses to start on its data dir naming `file` (and every
/// string of `needles`), leaves every byte of the data dir as it was, and
/// `log verify` fails on it too, and so does `log dump` unless the file is
/// all zeros (no txns to show, wherever it is).
fn assert_refused_unchanged(server: &Server, file: &Path, needles: &[&str], what: &str) {
    let dir = server.data_dir();
    let before = files(&dir);
    let name = file.file_name().unwrap().to_str().unwrap();

    let mut p = Proc::spawn(server, &format!("refused-{name}"), "warn");
    let status = p.wait_exit(Duration::from_secs(20)).unwrap_or_else(|| {
        panic!(
            "{what}: the server did not exit within 20 s (it must refuse to start):\n{}",
            p.output()
        )
    });
    let out = p.output();
    assert!(!status.success(), "{what}: exit status {status}:\n{out}");
    assert!(
        out.contains(name),
        "{what}: the error must name {name}:\n{out}"
    );
    for n in needles {
        assert!(out.contains(n), "{what}: the error must say {n:?}:\n{out}");
    }
    assert!(
        four_letter(server.port, "ruok").is_err(),
        "{what}: nothing may serve"
    );
    let after = files(&dir);
    assert!(
        after == before,
        "{what}: the data dir changed: {:?}",
        after
            .iter()
            .filter(|(p, b)| before.get(*p) != Some(*b))
            .map(|(p, _)| p)
            .chain(before.keys().filter(|p| !after.contains_key(*p)))
            .collect::<Vec<_>>()
    );
    eprintln!("{what}: refused: {}", out.trim_end());

    let o = tool(&["log", "verify", dir.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{what}: log verify passed: {err}");
    assert!(
        err.contains(name),
        "{what}: log verify must name {name}: {err}"
    );
    let o = tool(&["log", "dump", file.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&o.stderr);
    let zeros = before[file].iter().all(|b| *b == 0);
    assert!(
        zeros || !o.status.success(),
        "{what}: log dump passed: {err}"
    );
    assert!(
        files(&dir) == before,
        "{what}: the tools changed the data dir"
    );
}

/// Foreign contents under a segment name, as the newest segment (where a
/// torn tail would be cut) and as an older one (before ours).
#[test]
fn a_foreign_file_named_like_a_segment_is_refused_and_left_unchanged() {
    let _serial = serial();
    let mut newer_version = SEGMENT_MAGIC[..8].to_vec();
    newer_version.extend_from_slice(&2u32.to_be_bytes());
    newer_version.resize(SEGMENT_HEADER_BYTES + 512, 0);
    newer_version.extend_from_slice(&random_bytes(512, 3));
    let cases: [(&str, Vec<u8>, &[&str]); 4] = [
        (
            "random bytes",
            random_bytes(64 << 10, 0x1234_5678),
            &["not a ringkeeper", "magic"],
        ),
        (
            "ZooKeeper's txn log",
            zookeeper_log(),
            &["Apache ZooKeeper", "ZKLG"],
        ),
        (
            "our magic, format version 2",
            newer_version,
            &["format version 2"],
        ),
        (
            "data after zeros, no header",
            {
                let mut b = vec![0u8; 8192];
                b.extend_from_slice(&random_bytes(100, 9));
                b
            },
            &["not a ringkeeper"],
        ),
    ];
    let server = written_and_killed("preAllocSize=64");
    let dir = server.data_dir();
    for (what, bytes, needles) in cases {
        // zxid 0 sorts before every segment of ours; u64::MAX after them.
        for zxid in [u64::MAX >> 1, 0] {
            let file = dir.join(format!("log.{zxid:016x}"));
            std::fs::write(&file, &bytes).unwrap();
            assert_refused_unchanged(&server, &file, needles, &format!("{what} as {zxid:#x}"));
            assert_eq!(std::fs::read(&file).unwrap(), bytes, "{what}: changed");
            std::fs::remove_file(&file).unwrap();
        }
    }
    // The server's own files are still good once the foreign one is gone.
    let proc = Proc::restart(&server, "restart-after-foreign");
    check_nodes(&proc, 20);
}

/// Alone in an otherwise empty data dir: nothing of ours to compare with.
#[test]
fn a_foreign_segment_in_a_fresh_data_dir_is_refused_and_left_unchanged() {
    let _serial = serial();
    let mut server = start_ringkeeper("");
    server.kill();
    let dir = server.data_dir();
    for p in std::fs::read_dir(&dir).unwrap() {
        let p = p.unwrap().path();
        if p.file_name().unwrap().to_string_lossy().starts_with("log.") {
            std::fs::remove_file(p).unwrap();
        }
    }
    for (what, bytes, needle) in [
        ("random bytes", random_bytes(4096, 99), "magic"),
        ("ZooKeeper's txn log", zookeeper_log(), "Apache ZooKeeper"),
    ] {
        let file = dir.join("log.0000000000000001");
        std::fs::write(&file, &bytes).unwrap();
        assert_refused_unchanged(&server, &file, &[needle], what);
        std::fs::remove_file(&file).unwrap();
    }
}

/// Headerless zeros are ours only as the newest segment (a crash between
/// creating it and its header's fsync); before a segment of ours they are
/// refused and kept.
#[test]
fn headerless_zeros_are_ours_only_as_the_newest_segment() {
    let _serial = serial();
    let server = written_and_killed("preAllocSize=64");
    let dir = server.data_dir();
    let file = dir.join(format!("log.{:016x}", 0));
    std::fs::write(&file, vec![0u8; 8192]).unwrap();
    assert_refused_unchanged(&server, &file, &["only the newest segment"], "zeros first");
    std::fs::remove_file(&file).unwrap();
}

/// Every write mode: the header is at the start of every segment, and a
/// restart after kill -9 brings every write back, twice over.
#[test]
fn restart_after_writes_works_in_every_write_mode() {
    let _serial = serial();
    for mode in ["direct", "buffered", "mmap"] {
        let cfg = format!("preAllocSize=64\nringkeeper.logWrite={mode}");
        let server = written_and_killed(&cfg);
        let dir = server.data_dir();
        let check_headers = |when: &str| {
            for seg in segments(&dir) {
                let b = std::fs::read(&seg).unwrap();
                assert!(
                    b.starts_with(SEGMENT_MAGIC)
                        && b.len() >= SEGMENT_HEADER_BYTES
                        && b[SEGMENT_MAGIC.len()..SEGMENT_HEADER_BYTES]
                            .iter()
                            .all(|x| *x == 0),
                    "{mode} {when}: {} does not start with the segment header",
                    seg.display()
                );
            }
        };
        check_headers("first run");
        let mut proc = Proc::restart(&server, &format!("restart-{mode}"));
        check_nodes(&proc, 20);
        write_nodes(proc.port, 20, 10);
        proc.kill();
        check_headers("after a restart");
        let proc = Proc::restart(&server, &format!("restart-{mode}-again"));
        check_nodes(&proc, 30);
        drop(proc);
        let o = tool(&["log", "verify", dir.to_str().unwrap()]);
        assert!(
            o.status.success(),
            "{mode}: log verify: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        for seg in segments(&dir) {
            let o = tool(&["log", "dump", seg.to_str().unwrap()]);
            assert!(
                o.status.success(),
                "{mode}: log dump {}: {}",
                seg.display(),
                String::from_utf8_lossy(&o.stderr)
            );
        }
    }
}
