//! kazoo's recipes (Debian's python3-kazoo, 2.8) against ringkeeper and
//! against Apache ZooKeeper 3.8 (the latter checks the script itself):
//! tests/kazoo/recipes.py exercises Lock, Semaphore, Election, Barrier and
//! DoubleBarrier, Queue and LockingQueue, Counter, Party and ShallowParty
//! with several clients and threads, client.server_version() (which reads
//! the `envi` four-letter word), a reconnect on the same session through a
//! cutting proxy, TreeCache and transactions, printing one PASS/FAIL line
//! each.
//! The script runs under Debian's /usr/bin/python3 (where python3-kazoo
//! lives), in its own process group, bounded by a timeout; the group is
//! killed whatever happens.
//!
//! Needs: apt-get install -y python3-kazoo zookeeper

mod common;

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use common::{Flavor, Server};

const PYTHON: &str = "/usr/bin/python3";
const RECIPES: [&str; 11] = [
    "Lock",
    "Semaphore",
    "Election",
    "Barrier",
    "Queue",
    "Counter",
    "Party",
    "server_version",
    "Reconnect",
    "TreeCache",
    "Transaction",
];
const RUN_TIMEOUT: Duration = Duration::from_secs(300);

/// The two tests take turns: two cores, and ZooKeeper is a JVM.
static SERIAL: Mutex<()> = Mutex::new(());

/// Runs `cmd` in its own process group with stdout and stderr to files in
/// `dir`; kills the group when it exits or after `timeout`. Returns the exit
/// status (None on timeout), stdout and stderr.
fn run_bounded(
    mut cmd: Command,
    dir: &Path,
    name: &str,
    timeout: Duration,
) -> (Option<ExitStatus>, String, String) {
    let out_path = dir.join(format!("{name}.out"));
    let err_path = dir.join(format!("{name}.err"));
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out_path).unwrap())
        .stderr(std::fs::File::create(&err_path).unwrap())
        .process_group(0)
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {name}: {e}"));
    let pgid = child.id() as i32;
    let start = Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break Some(st);
        }
        if start.elapsed() > timeout {
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    // Nothing of the child's process group survives it.
    unsafe {
        libc::kill(-pgid, libc::SIGKILL);
    }
    let _ = child.wait();
    (
        status,
        std::fs::read_to_string(&out_path).unwrap_or_default(),
        std::fs::read_to_string(&err_path).unwrap_or_default(),
    )
}

fn tail(s: &str, lines: usize) -> String {
    let v: Vec<&str> = s.lines().collect();
    v[v.len().saturating_sub(lines)..].join("\n")
}

fn check_kazoo(dir: &Path) {
    let mut cmd = Command::new(PYTHON);
    cmd.arg("-c")
        .arg("import kazoo.version; print(kazoo.version.__version__)");
    let (status, out, err) = run_bounded(cmd, dir, "kazoo-version", Duration::from_secs(30));
    assert!(
        status.is_some_and(|s| s.success()),
        "kazoo is not importable by {PYTHON}: apt-get install -y python3-kazoo\n{out}{err}"
    );
    eprintln!("kazoo {}", out.trim());
}

/// Whether the server process still runs, or how it ended: read from
/// /proc/PID/stat before the harness reaps it (a zombie keeps its wait
/// status in field 52).
fn server_state(server: &Server) -> String {
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", server.pid())).unwrap_or_default();
    // Fields after the parenthesized command name, which may hold spaces.
    let rest: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, r)| r.split_whitespace().collect())
        .unwrap_or_default();
    match (
        rest.first(),
        rest.last().and_then(|c| c.parse::<i32>().ok()),
    ) {
        (Some(&"Z"), Some(code)) if code & 0x7f != 0 => {
            format!("the server process was killed by signal {}", code & 0x7f)
        }
        (Some(&"Z"), Some(code)) => format!("the server process exited with {}", code >> 8),
        (Some(state), _) => format!("the server process is running (state {state})"),
        _ => "the server process is gone".to_string(),
    }
}

fn kazoo_recipes(flavor: Flavor) {
    let _turn = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let work = tempfile::tempdir().unwrap();
    check_kazoo(work.path());
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/kazoo/recipes.py");
    let server: Server = common::start(flavor, "forceSync=no");
    let mut cmd = Command::new(PYTHON);
    cmd.arg("-u").arg(&script).arg(server.addr());
    let started = Instant::now();
    let (status, out, err) = run_bounded(cmd, work.path(), "recipes", RUN_TIMEOUT);
    eprintln!(
        "kazoo recipes against {flavor:?} on {} ({:.1}s):\n{out}",
        server.addr(),
        started.elapsed().as_secs_f64()
    );
    let context = || {
        format!(
            "{}\n---- stdout:\n{out}\n---- stderr (tail):\n{}\n---- server log (tail):\n{}",
            server_state(&server),
            tail(&err, 60),
            tail(
                &std::fs::read_to_string(server.dir.path().join("server.log")).unwrap_or_default(),
                40
            )
        )
    };
    assert!(
        status.is_some(),
        "the kazoo script did not finish within {RUN_TIMEOUT:?}\n{}",
        context()
    );
    let failed: Vec<&str> = out.lines().filter(|l| l.starts_with("FAIL ")).collect();
    let missing: Vec<&str> = RECIPES
        .iter()
        .copied()
        .filter(|r| !out.lines().any(|l| l.starts_with(&format!("PASS {r}:"))))
        .collect();
    assert!(
        failed.is_empty() && missing.is_empty(),
        "kazoo recipes against {flavor:?}: failed {failed:?}, not passed {missing:?}\n{}",
        context()
    );
    assert!(
        status.is_some_and(|s| s.success())
            && out.contains(&format!("DONE passed={} failed=0", RECIPES.len())),
        "the kazoo script exited with {status:?}\n{}",
        context()
    );
}

#[test]
fn kazoo_recipes_ringkeeper() {
    kazoo_recipes(Flavor::Ringkeeper);
}

#[test]
fn kazoo_recipes_zookeeper() {
    kazoo_recipes(Flavor::ZooKeeper);
}
