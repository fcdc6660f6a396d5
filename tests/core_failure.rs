//! A consensus core that fails ends the process (issue 26, defect 5;
//! DESIGN.md §5): before, a panic on the core left shards that answered
//! pings and served a frozen tree. The fault is asked for through
//! `RINGKEEPER_FAULT_PANIC_CORE_AT_TICK` (src/fault.rs).

mod common;

use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Bound on the whole wait: the core ticks every few hundred ms at most.
const EXIT_TIMEOUT: Duration = Duration::from_secs(60);

fn assert_failed_core_ended_it(status: std::process::ExitStatus, err: &str) {
    assert!(!status.success(), "exit status {status:?}");
    assert_eq!(
        status.signal(),
        Some(SIGABRT),
        "aborted, not exited normally: {status:?}\n{err}"
    );
    assert!(
        err.contains("the consensus core fails on purpose"),
        "the panic is reported:\n{err}"
    );
    assert!(err.contains("stopping the server"), "{err}");
}

const SIGABRT: i32 = 6;

#[test]
fn a_standalone_server_whose_core_panics_exits() {
    let (status, err) = run_until_exit("", tempfile::tempdir().unwrap());
    assert_failed_core_ended_it(status, &err);
}

#[test]
fn an_ensemble_member_whose_core_panics_exits() {
    // One member of a three-server ensemble whose peers never come: its
    // core runs (electing) and ticks.
    let [a, b, c, d, e, f] = [(); 6].map(|_| common::free_port());
    let servers = format!(
        "server.1=127.0.0.1:{a}:{b}\nserver.2=127.0.0.1:{c}:{d}\nserver.3=127.0.0.1:{e}:{f}\n"
    );
    let dir = tempfile::tempdir().unwrap();
    // myid lives in dataDir: write it through a config that points there.
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    std::fs::write(data.join("myid"), "1\n").unwrap();
    let (status, err) = run_until_exit(&servers, dir);
    assert_failed_core_ended_it(status, &err);
}

/// Runs the server on `dir` (with `dir/data`) until it exits, with the core
/// asked to panic at its 150th tick; returns how it ended and its stderr.
fn run_until_exit(cfg_extra: &str, dir: tempfile::TempDir) -> (std::process::ExitStatus, String) {
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    let port = common::free_port();
    let cfg = dir.path().join("zoo.cfg");
    std::fs::write(
        &cfg,
        format!(
            "tickTime=200\ninitLimit=10\nsyncLimit=5\ndataDir={}\nclientPort={port}\n\
             clientPortAddress=127.0.0.1\n{cfg_extra}",
            data.display()
        ),
    )
    .unwrap();
    let err_path = dir.path().join("server.err");
    let mut child = Command::new(env!("CARGO_BIN_EXE_ringkeeper"))
        .arg("--config")
        .arg(&cfg)
        .env(ringkeeper::fault::PANIC_CORE_AT_TICK, "150")
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&err_path).unwrap())
        .spawn()
        .unwrap();
    let start = Instant::now();
    let mut served = false;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        // Alive: its shards answer (the ensemble member is electing).
        served |= common::four_letter(port, "srvr").is_ok_and(|a| !a.is_empty());
        if start.elapsed() > EXIT_TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the process outlived its failed core by {EXIT_TIMEOUT:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(served, "the server answered before its core failed");
    let err = std::fs::read_to_string(&err_path).unwrap_or_default();
    (status, err)
}
