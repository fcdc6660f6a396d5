//! zxid epochs (issue 12, step 1). A standalone server is an ensemble of
//! one: it resumes the epoch its log is in at every start, numbering txns
//! on as Apache ZooKeeper's standalone server does (0x1, 0x2, ... on a
//! fresh one), and its ZAB establishes the next epoch (acceptedEpoch, then
//! currentEpoch, written atomically in dataDir) when the epoch's zxid
//! counter reaches its limit (`ringkeeper.epochCounterLimit`, low here so
//! the test reaches it). Every write survives kill -9 across the epoch
//! changes, the log verifies, and epoch files that do not belong with the
//! log refuse the start.

mod common;

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::raw::{create_body, get_body, Conn, Rd};
use common::restart::Proc;
use common::{start_ringkeeper, Server};

const CREATE: i32 = 1;
const GET_DATA: i32 = 4;

static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

fn epoch(zxid: i64) -> u32 {
    (zxid >> 32) as u32
}

fn counter(zxid: i64) -> u32 {
    zxid as u32
}

fn read_epoch_file(dir: &Path, name: &str) -> u32 {
    std::fs::read_to_string(dir.join(name))
        .unwrap_or_else(|e| panic!("{name}: {e}"))
        .trim()
        .parse()
        .unwrap()
}

/// Creates `/e<i>` for i in `range`, one at a time; returns their zxids.
fn create_all(port: u16, range: std::ops::Range<i32>) -> Vec<i64> {
    let mut c = Conn::handshake(port, 30_000);
    range
        .map(|i| {
            let (r, _) = c.call(i + 1, CREATE, &create_body(&format!("/e{i}"), b"x", 0));
            assert_eq!(r.err, 0, "create /e{i}");
            r.zxid
        })
        .collect()
}

/// Each `/e<i>`'s czxid, in order.
fn czxids(port: u16, range: std::ops::Range<i32>) -> Vec<i64> {
    let mut c = Conn::handshake(port, 30_000);
    range
        .map(|i| {
            let (r, _) = c.call(i + 1, GET_DATA, &get_body(&format!("/e{i}"), false));
            assert_eq!(r.err, 0, "getData /e{i}");
            let mut rd = Rd(&r.body);
            rd.buf();
            rd.i64()
        })
        .collect()
}

fn log_verify(dir: &Path) {
    let o = Command::new(env!("CARGO_BIN_EXE_ringkeeper"))
        .args(["log", "verify"])
        .arg(dir)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "log verify: {}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

fn killed(mut server: Server) -> Server {
    server.kill();
    server
}

#[test]
fn the_counter_limit_starts_new_epochs_and_every_write_survives() {
    let _serial = serial();
    const LIMIT: u32 = 50;
    let server = start_ringkeeper(&format!("ringkeeper.epochCounterLimit={LIMIT}"));
    let dir = server.data_dir();
    let zxids = create_all(server.port, 0..230);
    assert_eq!(zxids[0], 2, "a fresh server: createSession 0x1, then 0x2");
    assert!(zxids.windows(2).all(|w| w[1] > w[0]), "zxids increase");
    assert!(
        zxids
            .iter()
            .all(|z| counter(*z) >= 1 && counter(*z) < LIMIT),
        "every counter below the limit: {zxids:x?}"
    );
    let epochs: BTreeSet<u32> = zxids.iter().map(|z| epoch(*z)).collect();
    assert_eq!(
        epochs,
        (0..=4).collect(),
        "231 txns in epochs of 49: {zxids:x?}"
    );
    let last = *zxids.last().unwrap();
    assert_eq!(read_epoch_file(&dir, "acceptedEpoch"), epoch(last));
    assert_eq!(read_epoch_file(&dir, "currentEpoch"), epoch(last));

    let server = killed(server);
    log_verify(&dir);
    let proc = Proc::restart(&server, "after-epochs");
    assert_eq!(
        czxids(proc.port, 0..230),
        zxids,
        "every create is back, as it was"
    );
    // The restart resumes the last epoch: czxids' createSession, then
    // create_all's, then the create.
    let after = create_all(proc.port, 230..231);
    assert_eq!(after[0], last + 3);
}

#[test]
fn a_restart_resumes_the_epoch_as_zookeeper_standalone_does() {
    let _serial = serial();
    let server = start_ringkeeper("");
    let dir = server.data_dir();
    let first = create_all(server.port, 0..3);
    assert_eq!(first, [2, 3, 4]);
    let mut server = killed(server);
    let mut last = 4;
    for round in 1..=2 {
        let mut proc = Proc::restart(&server, &format!("round-{round}"));
        let zxids = create_all(proc.port, round * 10..round * 10 + 2);
        assert_eq!(zxids, [last + 2, last + 3], "round {round}");
        assert_eq!(czxids(proc.port, 0..3), first);
        // czxids' session was one more txn.
        last = zxids[1] + 1;
        proc.kill();
    }
    server.kill();
    assert_eq!(read_epoch_file(&dir, "acceptedEpoch"), 0);
    assert_eq!(read_epoch_file(&dir, "currentEpoch"), 0);
    log_verify(&dir);
}

#[test]
fn a_current_epoch_older_than_the_log_refuses_to_start() {
    let _serial = serial();
    let server = start_ringkeeper("ringkeeper.epochCounterLimit=5");
    let dir = server.data_dir();
    let zxids = create_all(server.port, 0..10);
    let last_epoch = epoch(*zxids.last().unwrap());
    assert!(last_epoch >= 2);
    let server = killed(server);
    std::fs::write(dir.join("currentEpoch"), "0").unwrap();
    let mut proc = Proc::spawn(&server, "old-current-epoch", "warn");
    let status = proc.wait_exit(Duration::from_secs(20)).expect("it exits");
    assert!(!status.success());
    let out = proc.output();
    assert!(
        out.contains("currentEpoch") && out.contains("is older than the last zxid in the log"),
        "{out}"
    );
    // The crash ZOOKEEPER-1653 describes: the new value is in
    // currentEpoch.tmp, never renamed. It is taken.
    std::fs::write(dir.join("currentEpoch.tmp"), last_epoch.to_string()).unwrap();
    let proc = Proc::restart(&server, "tmp-current-epoch");
    assert_eq!(czxids(proc.port, 0..10), zxids);
    drop(proc);
    assert!(!dir.join("currentEpoch.tmp").exists());
    // czxids' session took the last counter of the epoch: the next one
    // may already be established.
    assert!(read_epoch_file(&dir, "currentEpoch") >= last_epoch);
}

/// A crash between creating a segment's name and its header's fsync leaves
/// a headerless all-zero newest segment, named for the next zxid. When the
/// next start begins a new epoch, its first segment has another name:
/// recovery removes the empty one, or the start after would find it before
/// a newer segment and refuse.
#[test]
fn a_headerless_newest_segment_does_not_outlive_a_new_epoch() {
    let _serial = serial();
    // createSession 0x1 and creates 0x2..0x4: the counter is at its limit,
    // so the next start leads epoch 1.
    let server = start_ringkeeper("preAllocSize=64\nringkeeper.epochCounterLimit=5");
    let dir = server.data_dir();
    assert_eq!(create_all(server.port, 0..3), [2, 3, 4]);
    let server = killed(server);
    let fresh = dir.join(format!("log.{:016x}", 5));
    std::fs::write(&fresh, vec![0u8; 8192]).unwrap();
    let mut proc = Proc::restart(&server, "fresh-1");
    let zxids = create_all(proc.port, 10..11);
    assert_eq!(epoch(zxids[0]), 1);
    proc.kill();
    assert!(!fresh.exists(), "the empty headerless segment was removed");
    let proc = Proc::restart(&server, "fresh-2");
    assert_eq!(czxids(proc.port, 0..3), [2, 3, 4]);
    drop(proc);
    log_verify(&dir);
}
