//! Apache Curator recipes (Debian's libcurator-recipes-java and
//! libcurator-framework-java, 5.4) against ringkeeper and against Apache
//! ZooKeeper 3.8: tests/curator/*.java is compiled with javac into a
//! temporary directory and run with `java`, which exercises
//! InterProcessMutex, LeaderLatch, CuratorCache and DistributedAtomicLong
//! (and InterProcessReadWriteLock, InterProcessSemaphoreV2, LeaderSelector,
//! SharedCount, DistributedDoubleBarrier, transactions, and a reconnect
//! through a cutting proxy that checks setWatches) with several clients and
//! threads, and prints one PASS/FAIL line per recipe. javac and java run in their own process groups, bounded by a
//! timeout, and the group is killed whatever happens.
//!
//! Needs: apt-get install -y default-jdk-headless libcurator-recipes-java
//! libcurator-framework-java zookeeper

mod common;

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use common::{Flavor, Server, ZK_JAR};

const CURATOR_JARS: [&str; 3] = [
    "/usr/share/java/curator-recipes.jar",
    "/usr/share/java/curator-framework.jar",
    "/usr/share/java/curator-client.jar",
];
/// The PASS lines expected: the four recipes of issue #5, then more of
/// Curator's recipes, its transactions, and a reconnect (setWatches).
const RECIPES: [&str; 11] = [
    "InterProcessMutex",
    "LeaderLatch",
    "CuratorCache",
    "DistributedAtomicLong",
    "InterProcessReadWriteLock",
    "InterProcessSemaphoreV2",
    "LeaderSelector",
    "SharedCount",
    "DistributedDoubleBarrier",
    "Transaction",
    "Reconnect",
];
const JAVAC_TIMEOUT: Duration = Duration::from_secs(120);
const RUN_TIMEOUT: Duration = Duration::from_secs(240);

/// The two tests each start a JVM client and a server (a second JVM for
/// ZooKeeper): on two cores they take turns.
static SERIAL: Mutex<()> = Mutex::new(());

fn classpath() -> String {
    for jar in CURATOR_JARS.iter().chain([&ZK_JAR]) {
        assert!(
            Path::new(jar).exists(),
            "{jar} is missing: apt-get install -y libcurator-recipes-java \
             libcurator-framework-java zookeeper"
        );
    }
    let mut cp: Vec<&str> = CURATOR_JARS.to_vec();
    cp.push(ZK_JAR);
    cp.join(":")
}

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

fn sources() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/curator");
    let mut v: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "java"))
        .collect();
    v.sort();
    assert!(!v.is_empty(), "no Java sources in {}", dir.display());
    v
}

fn compile(classes: &Path, cp: &str) {
    let mut cmd = Command::new("javac");
    cmd.arg("-nowarn")
        .arg("-encoding")
        .arg("UTF-8")
        .arg("-d")
        .arg(classes)
        .arg("-cp")
        .arg(cp)
        .args(sources());
    let (status, out, err) = run_bounded(cmd, classes, "javac", JAVAC_TIMEOUT);
    assert!(
        status.is_some_and(|s| s.success()),
        "javac failed ({status:?}; is default-jdk-headless installed?):\n{out}\n{err}"
    );
}

fn tail(s: &str, lines: usize) -> String {
    let v: Vec<&str> = s.lines().collect();
    v[v.len().saturating_sub(lines)..].join("\n")
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

fn curator_recipes(flavor: Flavor) {
    let _turn = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let cp = classpath();
    let work = tempfile::tempdir().unwrap();
    compile(work.path(), &cp);
    let server: Server = common::start(flavor, "forceSync=no");
    let mut cmd = Command::new("java");
    cmd.arg("-Xmx256m")
        .arg("-XX:TieredStopAtLevel=1")
        .arg("-cp")
        .arg(format!("{}:{cp}", work.path().display()))
        .arg("Recipes")
        .arg(server.addr());
    let started = Instant::now();
    let (status, out, err) = run_bounded(cmd, work.path(), "recipes", RUN_TIMEOUT);
    eprintln!(
        "Curator recipes against {flavor:?} on {} ({:.1}s):\n{out}",
        server.addr(),
        started.elapsed().as_secs_f64()
    );
    let server_log = || {
        tail(
            &std::fs::read_to_string(server.dir.path().join("server.log")).unwrap_or_default(),
            40,
        )
    };
    let context = || {
        format!(
            "{}\n---- stdout:\n{out}\n---- stderr (tail):\n{}\n---- server log (tail):\n{}",
            server_state(&server),
            tail(&err, 60),
            server_log()
        )
    };
    assert!(
        status.is_some(),
        "the Curator program did not finish within {RUN_TIMEOUT:?}\n{}",
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
        "Curator recipes against {flavor:?}: failed {failed:?}, not passed {missing:?}\n{}",
        context()
    );
    assert!(
        status.is_some_and(|s| s.success())
            && out.contains(&format!("DONE passed={} failed=0", RECIPES.len())),
        "the Curator program exited with {status:?}\n{}",
        context()
    );
}

#[test]
fn curator_recipes_ringkeeper() {
    curator_recipes(Flavor::Ringkeeper);
}

#[test]
fn curator_recipes_zookeeper() {
    curator_recipes(Flavor::ZooKeeper);
}
