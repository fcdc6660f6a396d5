//! The clients' view of a 3-server ensemble, with kazoo (Debian's
//! python3-kazoo): tests/kazoo/ensemble_view.py pins each client to one
//! server and checks watches across servers, sync then read, a session
//! moving between servers, ephemerals deleted once when their session
//! expires, and Lock, Election, Queue and DoubleBarrier with contenders on
//! different servers. Runs against Apache ZooKeeper too
//! (RK_TEST_TARGET=zookeeper), which checks the script.
//!
//! Needs: apt-get install -y python3-kazoo zookeeper

mod common;

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::cluster::Cluster;
use common::ensemble_client::ELECTION_TIMEOUT;
use common::target_flavor;

const CHECKS: [&str; 8] = [
    "watches_across_servers",
    "sync_then_read",
    "session_move",
    "ephemerals_expire_once",
    "lock",
    "election",
    "queue",
    "double_barrier",
];
const RUN_TIMEOUT: Duration = Duration::from_secs(240);

#[test]
fn kazoo_sees_one_ensemble_from_every_server() {
    let c = Cluster::start(target_flavor(), 3);
    c.wait_for_leader(ELECTION_TIMEOUT);
    let work = tempfile::tempdir().unwrap();
    let out_path = work.path().join("view.out");
    let err_path = work.path().join("view.err");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/kazoo/ensemble_view.py");
    let mut child = Command::new("/usr/bin/python3")
        .arg("-u")
        .arg(&script)
        .args(c.members.iter().map(|m| m.client.to_string()))
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out_path).unwrap())
        .stderr(std::fs::File::create(&err_path).unwrap())
        .process_group(0)
        .spawn()
        .expect("python3 (apt-get install -y python3-kazoo)");
    let pgid = child.id() as i32;
    let start = Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break Some(st);
        }
        if start.elapsed() > RUN_TIMEOUT {
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    // Nothing of the script's process group survives it.
    unsafe {
        libc::kill(-pgid, libc::SIGKILL);
    }
    let _ = child.wait();
    let out = std::fs::read_to_string(&out_path).unwrap_or_default();
    let err = std::fs::read_to_string(&err_path).unwrap_or_default();
    eprintln!(
        "kazoo ensemble view ({:.1}s):\n{out}",
        start.elapsed().as_secs_f64()
    );
    let context = || {
        format!(
            "{out}\n--- stderr (tail)\n{}\n{}",
            tail(&err, 30),
            c.report()
        )
    };
    assert!(
        status.is_some(),
        "the script did not finish within {RUN_TIMEOUT:?}\n{}",
        context()
    );
    let failed: Vec<&str> = out.lines().filter(|l| l.starts_with("FAIL")).collect();
    let missing: Vec<&&str> = CHECKS
        .iter()
        .filter(|name| !out.lines().any(|l| l.starts_with(&format!("PASS {name}:"))))
        .collect();
    assert!(
        failed.is_empty() && missing.is_empty(),
        "failed {failed:?}, not passed {missing:?}\n{}",
        context()
    );
    assert!(status.unwrap().success(), "{}", context());
}

fn tail(s: &str, lines: usize) -> String {
    let v: Vec<&str> = s.lines().collect();
    v[v.len().saturating_sub(lines)..].join("\n")
}
