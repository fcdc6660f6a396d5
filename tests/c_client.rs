//! Apache ZooKeeper's own C client (libzookeeper_mt, Debian's
//! libzookeeper-mt-dev 3.8), the library under zkpython, the Perl, PHP and
//! Ruby bindings and the C CLI, against ringkeeper.
//!
//! tests/c_client/zkc.c is compiled into a temporary directory and run
//! with a scenario:
//! - `api` and `session` against a standalone Apache ZooKeeper 3.8 (which
//!   checks the program itself) and against a standalone ringkeeper. Each
//!   check prints `PASS <name>` or `FAIL <name>: <detail>`, and every
//!   outcome that must not depend on the server (return codes, the
//!   deterministic stat fields, sorted child lists, watch events in arrival
//!   order, multi per-op results, what an oversized request or a TTL create
//!   gets) a `RESULT <name> <value>` line: ringkeeper's RESULT lines must
//!   equal ZooKeeper's, line for line.
//! - `ensemble` against a 3-server ringkeeper ensemble, two mixed ones
//!   (a ringkeeper following a Java leader; a ringkeeper leader with a Java
//!   follower) and, to check the program, a ZooKeeper one: one handle
//!   per member, concurrent writers through every member, then sync and a
//!   read-back on every member.
//!
//! The program runs in its own process group, bounded by a timeout (and by
//! an alarm of its own); the group is killed whatever happens, and every
//! server by pid when its handle drops.
//!
//! Needs: apt-get install -y gcc libzookeeper-mt-dev zookeeper

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use common::bounded::{run_bounded, server_context, tail, Finished};
use common::cluster::Cluster;
use common::ensemble_client::ELECTION_TIMEOUT;
use common::Flavor::{self, Ringkeeper as Rk, ZooKeeper as Zk};

const SOURCE: &str = "tests/c_client/zkc.c";
const HEADER: &str = "/usr/include/zookeeper/zookeeper.h";
const COMPILE_TIMEOUT: Duration = Duration::from_secs(120);
/// The program's own alarm fires at 200 s (api, session) and 280 s
/// (ensemble); these bound it from outside.
const STANDALONE_TIMEOUT: Duration = Duration::from_secs(240);
const ENSEMBLE_TIMEOUT: Duration = Duration::from_secs(320);

/// Every test runs servers (JVMs among them) and a client on two cores:
/// they take turns.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// Compiles zkc.c into `dir`; a missing compiler, header or library fails
/// the test, naming the package that has it.
fn compile(dir: &Path) -> PathBuf {
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".to_string());
    let mut version = Command::new(&cc);
    version.arg("--version");
    let found = run_bounded(
        version,
        Stdio::null(),
        dir,
        "cc-version",
        Duration::from_secs(30),
    );
    assert!(
        found.success(),
        "no C compiler ({cc}): apt-get install -y gcc\n{}{}",
        found.out,
        found.err
    );
    assert!(
        Path::new(HEADER).exists(),
        "{HEADER} is missing: apt-get install -y libzookeeper-mt-dev"
    );
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join(SOURCE);
    let bin = dir.join("zkc");
    let mut cmd = Command::new(&cc);
    cmd.args(["-std=gnu11", "-O1", "-g", "-Wall", "-Wextra"])
        .args([
            "-Werror=implicit-function-declaration",
            "-Werror=incompatible-pointer-types",
            "-Werror=int-conversion",
            "-Werror=return-type",
        ])
        .args(["-DTHREADED", "-pthread", "-o"])
        .arg(&bin)
        .arg(&source)
        .arg("-lzookeeper_mt");
    let built = run_bounded(cmd, Stdio::null(), dir, "cc", COMPILE_TIMEOUT);
    assert!(
        built.success(),
        "compiling {SOURCE} failed ({:?}){}:\n{}{}",
        built.status,
        if built.err.contains("zookeeper") {
            "; libzookeeper_mt comes with apt-get install -y libzookeeper-mt-dev"
        } else {
            ""
        },
        built.out,
        built.err
    );
    if !built.err.trim().is_empty() {
        eprintln!("compiler warnings for {SOURCE}:\n{}", built.err);
    }
    bin
}

/// One run of the program, parsed.
struct Outcome {
    what: String,
    run: Finished,
    elapsed: Duration,
    passed: Vec<String>,
    failed: Vec<String>,
    results: Vec<(String, String)>,
    /// What explains a failure: the server's state and log, taken before
    /// the server was stopped.
    context: String,
}

impl Outcome {
    fn new(what: String, run: Finished, elapsed: Duration, context: String) -> Outcome {
        let mut o = Outcome {
            what,
            passed: Vec::new(),
            failed: Vec::new(),
            results: Vec::new(),
            run,
            elapsed,
            context,
        };
        for line in o.run.out.lines() {
            if let Some(name) = line.strip_prefix("PASS ") {
                o.passed.push(name.trim().to_string());
            } else if line.starts_with("FAIL ") {
                o.failed.push(line.to_string());
            } else if let Some(rest) = line.strip_prefix("RESULT ") {
                let (name, value) = rest.split_once(' ').unwrap_or((rest, ""));
                o.results.push((name.to_string(), value.to_string()));
            }
        }
        o
    }

    /// Everything wrong with the run itself, empty when it passed.
    fn problems(&self) -> Vec<String> {
        let mut p = Vec::new();
        if self.run.status.is_none() {
            p.push(format!(
                "{} did not finish within its time limit",
                self.what
            ));
        } else if !self.run.success() {
            p.push(format!("{} exited with {:?}", self.what, self.run.status));
        }
        for f in &self.failed {
            p.push(format!("{}: {f}", self.what));
        }
        let done = format!("DONE passed={} failed=0", self.passed.len());
        if self.passed.is_empty() || !self.run.out.lines().any(|l| l == done) {
            p.push(format!(
                "{}: no `{done}` line (the program stopped early)",
                self.what
            ));
        }
        let mut seen = BTreeSet::new();
        for (name, _) in &self.results {
            if !seen.insert(name) {
                p.push(format!("{}: RESULT {name} printed twice", self.what));
            }
        }
        p
    }

    fn report(&self) -> String {
        format!(
            "==== {} ({:.1}s)\n---- stdout:\n{}\n---- stderr (tail):\n{}\n---- {}\n",
            self.what,
            self.elapsed.as_secs_f64(),
            self.run.out,
            tail(&self.run.err, 40),
            self.context
        )
    }
}

/// Runs `scenario` against a fresh standalone server of `flavor`; the
/// server is stopped before this returns.
fn run_standalone(flavor: Flavor, scenario: &str, bin: &Path, work: &Path) -> Outcome {
    if flavor == Zk {
        require_zookeeper();
    }
    let server = common::start(flavor, "");
    let mut cmd = Command::new(bin);
    cmd.arg(server.addr()).arg(scenario);
    let name = format!("{scenario}-{flavor:?}");
    let started = Instant::now();
    let run = run_bounded(cmd, Stdio::null(), work, &name, STANDALONE_TIMEOUT);
    let elapsed = started.elapsed();
    let context = server_context(server.pid(), &server.dir.path().join("server.log"));
    let o = Outcome::new(
        format!("`{scenario}` against {flavor:?} on {}", server.addr()),
        run,
        elapsed,
        context,
    );
    drop(server);
    eprintln!(
        "{} ({:.1}s): {} passed, {} failed, {} results",
        o.what,
        elapsed.as_secs_f64(),
        o.passed.len(),
        o.failed.len(),
        o.results.len()
    );
    o
}

fn require_zookeeper() {
    assert!(
        Path::new(common::ZK_JAR).exists(),
        "Apache ZooKeeper is not installed: apt-get install -y zookeeper"
    );
}

/// The run against Apache ZooKeeper that ringkeeper's must equal: made
/// once per scenario (by whichever of its two tests comes first).
fn zookeeper_reference(scenario: &'static str) -> &'static Outcome {
    static API: OnceLock<Outcome> = OnceLock::new();
    static SESSION: OnceLock<Outcome> = OnceLock::new();
    let cell = match scenario {
        "api" => &API,
        "session" => &SESSION,
        other => panic!("no reference for scenario {other}"),
    };
    cell.get_or_init(|| {
        let work = tempfile::tempdir().unwrap();
        let bin = compile(work.path());
        run_standalone(Zk, scenario, &bin, work.path())
    })
}

/// Lines naming every RESULT that differs between the two runs.
fn diff_results(zk: &Outcome, rk: &Outcome) -> Vec<String> {
    let zk_map: BTreeMap<&str, &str> = zk
        .results
        .iter()
        .map(|(n, v)| (n.as_str(), v.as_str()))
        .collect();
    let rk_map: BTreeMap<&str, &str> = rk
        .results
        .iter()
        .map(|(n, v)| (n.as_str(), v.as_str()))
        .collect();
    let mut out = Vec::new();
    for (name, zv) in &zk.results {
        match rk_map.get(name.as_str()) {
            Some(rv) if rv == zv => {}
            Some(rv) => out.push(format!(
                "RESULT {name}\n      zookeeper:  {zv}\n      ringkeeper: {rv}"
            )),
            None => out.push(format!(
                "RESULT {name}\n      zookeeper:  {zv}\n      ringkeeper: (not printed)"
            )),
        }
    }
    for (name, rv) in &rk.results {
        if !zk_map.contains_key(name.as_str()) {
            out.push(format!(
                "RESULT {name}\n      zookeeper:  (not printed)\n      ringkeeper: {rv}"
            ));
        }
    }
    if out.is_empty() {
        let zk_order: Vec<&str> = zk.results.iter().map(|(n, _)| n.as_str()).collect();
        let rk_order: Vec<&str> = rk.results.iter().map(|(n, _)| n.as_str()).collect();
        if zk_order != rk_order {
            out.push(format!(
                "the same RESULT lines in another order:\n  zookeeper:  {zk_order:?}\n  ringkeeper: {rk_order:?}"
            ));
        }
    }
    let zk_passed: BTreeSet<&String> = zk.passed.iter().collect();
    let rk_passed: BTreeSet<&String> = rk.passed.iter().collect();
    let only_zk: Vec<&&String> = zk_passed.difference(&rk_passed).collect();
    if !only_zk.is_empty() {
        out.push(format!(
            "checks that passed against ZooKeeper but not against ringkeeper: {only_zk:?}"
        ));
    }
    out
}

/// The scenario against Apache ZooKeeper passes: the program's checks and
/// its idea of what a ZooKeeper server answers hold.
fn reference_passes(scenario: &'static str) {
    let _turn = serial();
    let zk = zookeeper_reference(scenario);
    eprintln!("{}", zk.report());
    let problems = zk.problems();
    assert!(
        problems.is_empty(),
        "the C client against Apache ZooKeeper:\n  {}\n{}",
        problems.join("\n  "),
        zk.report()
    );
}

/// The scenario against ringkeeper passes, and every RESULT line equals
/// the one from Apache ZooKeeper.
fn ringkeeper_matches(scenario: &'static str) {
    let _turn = serial();
    let zk = zookeeper_reference(scenario);
    let work = tempfile::tempdir().unwrap();
    let bin = compile(work.path());
    let rk = run_standalone(Rk, scenario, &bin, work.path());
    eprintln!("{}", rk.report());
    let mut problems = Vec::new();
    let zk_problems = zk.problems();
    if !zk_problems.is_empty() {
        problems.push(format!(
            "the reference run against Apache ZooKeeper failed, so there is nothing to compare \
             with (see the {scenario}_against_zookeeper test):\n    {}",
            zk_problems.join("\n    ")
        ));
    }
    problems.extend(rk.problems());
    let diff = diff_results(zk, &rk);
    if !diff.is_empty() {
        problems.push(format!(
            "{} RESULT difference(s) between Apache ZooKeeper and ringkeeper:\n    {}",
            diff.len(),
            diff.join("\n    ")
        ));
    }
    assert!(
        problems.is_empty(),
        "the C client, scenario `{scenario}`:\n  {}\n{}{}",
        problems.join("\n  "),
        rk.report(),
        if zk_problems.is_empty() && diff.is_empty() {
            String::new()
        } else {
            zk.report()
        }
    );
}

#[test]
fn api_against_zookeeper() {
    reference_passes("api");
}

#[test]
fn api_against_ringkeeper_matches_zookeeper() {
    ringkeeper_matches("api");
}

#[test]
fn session_against_zookeeper() {
    reference_passes("session");
}

#[test]
fn session_against_ringkeeper_matches_zookeeper() {
    ringkeeper_matches("session");
}

/// The `ensemble` scenario against an ensemble of `flavors`, a handle on
/// every member; `leader_flavor` is the flavor that must lead.
fn ensemble(flavors: &[Flavor], leader_flavor: Flavor) {
    let _turn = serial();
    if flavors.contains(&Zk) {
        require_zookeeper();
    }
    let work = tempfile::tempdir().unwrap();
    let bin = compile(work.path());
    let c = Cluster::start_mixed(flavors);
    let leader = c.wait_for_leader(ELECTION_TIMEOUT);
    assert_eq!(
        c.members[leader].flavor,
        leader_flavor,
        "ensemble {flavors:?}: server {} leads\n{}",
        leader + 1,
        c.report()
    );
    let hosts: Vec<String> = c.members.iter().map(|m| m.client.to_string()).collect();
    eprintln!(
        "ensemble {flavors:?}: server {} ({:?}) leads; members {hosts:?}",
        leader + 1,
        c.members[leader].flavor
    );
    let mut cmd = Command::new(&bin);
    cmd.arg(hosts.join(",")).arg("ensemble");
    let started = Instant::now();
    let run = run_bounded(
        cmd,
        Stdio::null(),
        work.path(),
        "ensemble",
        ENSEMBLE_TIMEOUT,
    );
    let elapsed = started.elapsed();
    let o = Outcome::new(
        format!(
            "`ensemble` against {flavors:?} (server {} leads)",
            leader + 1
        ),
        run,
        elapsed,
        format!("ensemble state:\n{}", c.report()),
    );
    eprintln!(
        "{} ({:.1}s):\n{}{}",
        o.what,
        elapsed.as_secs_f64(),
        o.run.out,
        tail(&o.run.err, 10)
    );
    let problems = o.problems();
    assert!(
        problems.is_empty(),
        "the C client across an ensemble:\n  {}\n{}",
        problems.join("\n  "),
        o.report()
    );
}

#[test]
fn ensemble_of_ringkeepers() {
    ensemble(&[Rk, Rk, Rk], Rk);
}

/// A Java leader (the two Java members are a quorum of their own and, on
/// empty data dirs, the highest id wins) with a ringkeeper follower.
#[test]
fn ensemble_mixed_java_leader() {
    ensemble(&[Rk, Zk, Zk], Zk);
}

/// A ringkeeper leader with a Java follower and a ringkeeper follower.
#[test]
fn ensemble_mixed_ringkeeper_leader() {
    ensemble(&[Zk, Rk, Rk], Rk);
}

/// The same program against Apache ZooKeeper checks the program.
#[test]
fn ensemble_of_zookeepers() {
    ensemble(&[Zk, Zk, Zk], Zk);
}
