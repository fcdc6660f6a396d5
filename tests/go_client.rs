//! The Go client (Debian's golang-github-samuel-go-zookeeper-dev, the
//! samuel/go-zookeeper package) against ringkeeper and against Apache
//! ZooKeeper 3.8. tests/go_client/main.go is built in GOPATH mode (no
//! modules, no network) with Debian's Go into the test's temporary
//! directory, then run per scenario:
//! - `api` (one server): creates of every mode, flags beyond the client's
//!   own, versions, errors, null and empty data, data/child/exists watches
//!   and their one-shot semantics, multi that succeeds and that fails (and
//!   the watches each fires), digest/ip/world ACLs, getACL/setACL with
//!   versions, ACL ids and auth data beyond ASCII, an unknown auth scheme,
//!   the /zookeeper nodes, path characters the client lets through and
//!   ZooKeeper may refuse, sync, ephemerals after close, values around
//!   jute.maxbuffer, watches set again after the server closed the
//!   connection, and a session expired behind a proxy that cut the client
//!   off;
//! - `lock` (one server): the client's Lock recipe, four connections with
//!   three goroutines each, a counter changed only under the lock;
//! - `ensemble`: one session pinned to each member, watches through every
//!   member for a write through another, four writers (sequential creates,
//!   CAS increments of a counter) through every member, then every
//!   member's view after a sync, and ACLs whose ids go beyond ASCII made
//!   through a follower and read and written through every member.
//!
//! The program prints `PASS`/`FAIL` per check and `RESULT <name> <value>` for
//! every outcome both servers must share (error names, stat fields, zxids
//! relative to the scenario's first write, child lists, watch events in
//! order, multi results). `api` and `lock` run against Apache ZooKeeper and
//! against ringkeeper, each on a fresh server; every check must pass on both
//! (ZooKeeper passing them checks the program) and ringkeeper's RESULT lines
//! must equal ZooKeeper's. `ensemble` runs against three Apache ZooKeeper
//! servers (the reference), three ringkeeper servers and two mixed
//! ensembles (a Java leader with a ringkeeper and a Java follower, a
//! ringkeeper leader with a Java and a ringkeeper follower; server 3 leads
//! each); the RESULT lines must equal the reference's, except those of ACL
//! ids beyond the BMP, where ZooKeeper's own members disagree with their
//! leader and ringkeeper's agree with theirs (`ASTRAL`).
//!
//! The flavors are named here, not taken from RK_TEST_TARGET: each test
//! already runs both servers.
//!
//! Needs: apt-get install -y golang-go golang-github-samuel-go-zookeeper-dev
//! zookeeper

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use common::bounded::{run_bounded, server_context, tail, Finished};
use common::cluster::Cluster;
use common::ensemble_client::ELECTION_TIMEOUT;
use common::Flavor::{self, Ringkeeper as Rk, ZooKeeper as Zk};
use common::ZK_JAR;

const INSTALL: &str = "apt-get install -y golang-go golang-github-samuel-go-zookeeper-dev";
const GOPATH: &str = "/usr/share/gocode";
const GO_ZK_PACKAGE: &str = "/usr/share/gocode/src/github.com/samuel/go-zookeeper/zk";
const BUILD_TIMEOUT: Duration = Duration::from_secs(300);
/// Above the program's own bounds (150 s for api and lock, 200 s for
/// ensemble), so that its watchdog reports where it was.
const RUN_TIMEOUT: Duration = Duration::from_secs(240);
/// Standalone servers: no fsync (as tests/kazoo.rs), and the container
/// reaper every second (`api` watches a node made with the container flag).
const STANDALONE_CFG: &str = "forceSync=no\nznode.container.checkIntervalMs=1000";
/// Ensembles: the Go sessions ask for 10 s; the cluster's tickTime of 200 ms
/// would cap them at 4 s, which two cores running JVMs can miss.
const ENSEMBLE_CFG: &str = "maxSessionTimeout=20000\n";

const API_CHECKS: [&str; 37] = [
    "api.acl_corner_cases",
    "api.connect",
    "api.create_modes",
    "api.create_errors",
    "api.get_set_versions",
    "api.null_and_empty_data",
    "api.delete",
    "api.exists_children",
    "api.sync",
    "api.ephemerals_of_closed_sessions",
    "api.watch_data",
    "api.watch_children",
    "api.watch_exists_created",
    "api.watch_deleted",
    "api.watch_one_shot",
    "api.watch_exists_data",
    "api.multi_ok",
    "api.multi_fail_middle",
    "api.multi_fail_first",
    "api.multi_fail_last",
    "api.multi_empty_and_create_delete",
    "api.multi_watches",
    "api.acl_creator_only",
    "api.acl_other_digest",
    "api.acl_same_user_other_session",
    "api.acl_world_read_only",
    "api.acl_ip",
    "api.acl_invalid",
    "api.set_acl_versions",
    "api.auth_unknown_scheme",
    "api.acl_encodings",
    "api.special_nodes",
    "api.path_edges",
    "api.watches_across_reconnect",
    "api.session_expiry",
    "api.ephemerals_after_close",
    "api.big_values",
];
const LOCK_CHECKS: [&str; 6] = [
    "lock.connect",
    "lock.setup",
    "lock.all_done",
    "lock.exclusive",
    "lock.no_lost_update",
    "lock.released",
];
const ENSEMBLE_CHECKS: [&str; 9] = [
    "ens.acl_ids",
    "ens.connect",
    "ens.setup",
    "ens.watches_across_members",
    "ens.writes_acked",
    "ens.read_your_writes",
    "ens.sequence_gap_free",
    "ens.every_member_sees_every_write",
    "ens.counter",
];

/// The tests take turns: two cores, and ZooKeeper is a JVM (three in an
/// ensemble).
static SERIAL: Mutex<()> = Mutex::new(());

fn take_turn() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// Debian's `go` (golang-go), on PATH or where the package puts it.
fn go_tool() -> PathBuf {
    let on_path: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).map(|d| d.join("go")).collect())
        .unwrap_or_default();
    on_path
        .into_iter()
        .chain([PathBuf::from("/usr/lib/go/bin/go")])
        .find(|p| p.is_file())
        .unwrap_or_else(|| panic!("no `go` on PATH or in /usr/lib/go/bin: {INSTALL}"))
}

/// Builds tests/go_client/main.go into `dir` and returns the program.
fn build(dir: &Path) -> PathBuf {
    let go = go_tool();
    assert!(
        Path::new(GO_ZK_PACKAGE).join("conn.go").is_file(),
        "the Go client's source is not in {GO_ZK_PACKAGE}: {INSTALL}"
    );
    let mut version = Command::new(&go);
    version.arg("version").env("HOME", dir).env("GOENV", "off");
    let run = run_bounded(
        version,
        Stdio::null(),
        dir,
        "go-version",
        Duration::from_secs(30),
    );
    assert!(
        run.success(),
        "{} version failed ({:?}; {INSTALL}):\n{}{}",
        go.display(),
        run.status,
        run.out,
        run.err
    );
    eprintln!("{}", run.out.trim());
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/go_client/main.go");
    let program = dir.join("gozk");
    // The build cache outlives the test (target/tmp): later builds take a
    // second. HOME is the test's own: CI runs as root with no usable one.
    let cache = Path::new(env!("CARGO_TARGET_TMPDIR")).join("go-client-cache");
    let mut cmd = Command::new(&go);
    cmd.arg("build")
        .arg("-o")
        .arg(&program)
        .arg(&source)
        .env("GO111MODULE", "off")
        .env("GOPATH", GOPATH)
        .env("GOCACHE", &cache)
        .env("HOME", dir)
        .env("GOENV", "off")
        .env("GOFLAGS", "")
        .env("GOPROXY", "off")
        .env("GOTOOLCHAIN", "local")
        .env("CGO_ENABLED", "0");
    let started = Instant::now();
    let run = run_bounded(cmd, Stdio::null(), dir, "go-build", BUILD_TIMEOUT);
    assert!(
        run.success() && program.is_file(),
        "{} build {} failed ({:?}; {INSTALL}):\n{}{}",
        go.display(),
        source.display(),
        run.status,
        run.out,
        run.err
    );
    eprintln!(
        "built {} in {:.1}s",
        program.display(),
        started.elapsed().as_secs_f64()
    );
    program
}

/// One run of the program and what it printed.
struct Outcome {
    label: String,
    run: Finished,
    /// Everything wrong with the run by itself.
    problems: Vec<String>,
    /// The RESULT lines in order: (name, value).
    results: Vec<(String, String)>,
    /// Server state and log, for failure reports.
    context: String,
    /// An ensemble's leader while the program ran (1-based), as observed.
    leader: Option<usize>,
}

impl Outcome {
    fn new(label: String, run: Finished, expected: &[&str], context: String) -> Outcome {
        let problems = check_run(&run, expected);
        let results = run
            .out
            .lines()
            .filter_map(|l| l.strip_prefix("RESULT "))
            .map(|l| match l.split_once(' ') {
                Some((n, v)) => (n.to_string(), v.to_string()),
                None => (l.to_string(), String::new()),
            })
            .collect();
        eprintln!("---- {label}:\n{}", run.out);
        Outcome {
            label,
            run,
            problems,
            results,
            context,
            leader: None,
        }
    }

    fn report(&self) -> String {
        format!(
            "==== {}: {}\n---- stdout:\n{}\n---- stderr (tail):\n{}\n{}\n",
            self.label,
            if self.problems.is_empty() {
                "every check passed".to_string()
            } else {
                self.problems.join("; ")
            },
            self.run.out,
            tail(&self.run.err, 40),
            self.context
        )
    }
}

/// What is wrong with a run by itself: not finished in time, a FAIL line,
/// an expected check without its PASS line, an unexpected check, a RESULT
/// name printed twice, no `DONE passed=N failed=0`, a non-zero exit.
fn check_run(run: &Finished, expected: &[&str]) -> Vec<String> {
    let mut problems = Vec::new();
    if run.status.is_none() {
        problems.push(format!("did not finish within {RUN_TIMEOUT:?}"));
    }
    let out = &run.out;
    let failed: Vec<&str> = out.lines().filter(|l| l.starts_with("FAIL ")).collect();
    if !failed.is_empty() {
        problems.push(format!("failed: {failed:?}"));
    }
    let passed: Vec<&str> = out
        .lines()
        .filter_map(|l| l.strip_prefix("PASS "))
        .collect();
    let missing: Vec<&&str> = expected.iter().filter(|n| !passed.contains(n)).collect();
    if !missing.is_empty() {
        problems.push(format!("not passed: {missing:?}"));
    }
    let unknown: Vec<&&str> = passed.iter().filter(|n| !expected.contains(n)).collect();
    if !unknown.is_empty() {
        problems.push(format!(
            "checks this driver does not list (add them to its list): {unknown:?}"
        ));
    }
    let mut names = std::collections::HashSet::new();
    for l in out.lines().filter_map(|l| l.strip_prefix("RESULT ")) {
        let name = l.split(' ').next().unwrap_or("");
        if !names.insert(name) {
            problems.push(format!("RESULT {name} printed twice"));
        }
    }
    let done = format!("DONE passed={} failed=0", expected.len());
    if !out.lines().any(|l| l == done) {
        problems.push(format!("no line `{done}`"));
    }
    if run.status.is_some() && !run.success() {
        problems.push(format!("exited with {:?}", run.status));
    }
    problems
}

/// The RESULT lines of `other` that differ from `reference`'s, one entry
/// per name, in the reference's order (names only one side has last);
/// names `skip` accepts are left out.
fn result_diff(reference: &Outcome, other: &Outcome, skip: &dyn Fn(&str) -> bool) -> Vec<String> {
    let theirs: BTreeMap<&str, &str> = other
        .results
        .iter()
        .filter(|(n, _)| !skip(n))
        .map(|(n, v)| (n.as_str(), v.as_str()))
        .collect();
    let ours: BTreeMap<&str, &str> = reference
        .results
        .iter()
        .filter(|(n, _)| !skip(n))
        .map(|(n, v)| (n.as_str(), v.as_str()))
        .collect();
    let mut diff = Vec::new();
    for (name, want) in reference.results.iter().filter(|(n, _)| !skip(n)) {
        match theirs.get(name.as_str()) {
            Some(got) if got == want => {}
            Some(got) => diff.push(format!(
                "{name}\n    {}: {want}\n    {}: {got}",
                reference.label, other.label
            )),
            None => diff.push(format!(
                "{name}\n    {}: {want}\n    {}: (no such line)",
                reference.label, other.label
            )),
        }
    }
    for (name, got) in other.results.iter().filter(|(n, _)| !skip(n)) {
        if !ours.contains_key(name.as_str()) {
            diff.push(format!(
                "{name}\n    {}: (no such line)\n    {}: {got}",
                reference.label, other.label
            ));
        }
    }
    diff
}

/// Panics with everything that went wrong: runs with problems (the
/// reference's own problems are the test's; the other's are the server's)
/// and the RESULT lines where the other run differs from the reference.
fn assert_matches(what: &str, reference: &Outcome, other: &Outcome, skip: &dyn Fn(&str) -> bool) {
    let diff = result_diff(reference, other, skip);
    let mut report = String::new();
    for o in [reference, other] {
        if !o.problems.is_empty() {
            report.push_str(&o.report());
        }
    }
    if !diff.is_empty() {
        report.push_str(&format!(
            "==== RESULT lines that differ ({} of {}, {} first):\n{}\n",
            diff.len(),
            reference.results.len(),
            reference.label,
            diff.join("\n")
        ));
        if other.problems.is_empty() {
            report.push_str(&other.report());
        }
    }
    assert!(report.is_empty(), "{what}:\n{report}");
    eprintln!(
        "{what}: every check passed on both; {} RESULT lines identical",
        reference.results.iter().filter(|(n, _)| !skip(n)).count()
    );
}

/// Runs `scenario` against a fresh standalone server of `flavor`.
fn run_standalone(program: &Path, dir: &Path, flavor: Flavor, scenario: &str) -> Outcome {
    let expected: &[&str] = match scenario {
        "api" => &API_CHECKS,
        "lock" => &LOCK_CHECKS,
        _ => unreachable!("standalone scenarios are api and lock"),
    };
    let server = common::start(flavor, STANDALONE_CFG);
    let mut cmd = Command::new(program);
    cmd.arg(server.addr()).arg(scenario);
    let started = Instant::now();
    let name = format!("{scenario}-{flavor:?}");
    let run = run_bounded(cmd, Stdio::null(), dir, &name, RUN_TIMEOUT);
    let label = format!(
        "{flavor:?} ({scenario} on {}, {:.1}s)",
        server.addr(),
        started.elapsed().as_secs_f64()
    );
    let context = server_context(server.pid(), &server.dir.path().join("server.log"));
    Outcome::new(label, run, expected, context)
    // The server is killed here, by pid (Server's Drop).
}

/// `scenario` against Apache ZooKeeper, then against ringkeeper.
fn standalone_same_as_zookeeper(scenario: &str) {
    let _turn = take_turn();
    assert!(
        Path::new(ZK_JAR).exists(),
        "Apache ZooKeeper is not installed: apt-get install -y zookeeper"
    );
    let work = tempfile::tempdir().unwrap();
    let program = build(work.path());
    let zk = run_standalone(&program, work.path(), Zk, scenario);
    let rk = run_standalone(&program, work.path(), Rk, scenario);
    assert_matches(
        &format!("the Go client's `{scenario}` scenario, ringkeeper against Apache ZooKeeper"),
        &zk,
        &rk,
        &|_| false,
    );
}

#[test]
fn go_api_same_as_zookeeper() {
    standalone_same_as_zookeeper("api");
}

#[test]
fn go_lock_same_as_zookeeper() {
    standalone_same_as_zookeeper("lock");
}

/// Runs `ensemble` against an ensemble whose member i runs `flavors[i]`.
/// The two members of one flavor in a mixed ensemble of three make a
/// quorum by themselves, and the higher id of the two leads first
/// (tests/ensemble_interop.rs): the last member's flavor leads.
fn run_ensemble(program: &Path, dir: &Path, flavors: &[Flavor]) -> Outcome {
    let c = Cluster::start_mixed_with_cfg(flavors, ENSEMBLE_CFG);
    let leader = c.wait_for_leader(ELECTION_TIMEOUT);
    assert_eq!(
        c.members[leader].flavor,
        flavors[flavors.len() - 1],
        "the first leader of {flavors:?} is server {}\n{}",
        leader + 1,
        c.report()
    );
    let servers: Vec<String> = c.members.iter().map(|m| m.client.to_string()).collect();
    let mut cmd = Command::new(program);
    cmd.arg(servers.join(",")).arg("ensemble");
    let started = Instant::now();
    let name = format!(
        "ensemble-{}",
        flavors
            .iter()
            .map(|f| format!("{f:?}"))
            .collect::<Vec<_>>()
            .join("-")
    );
    let run = run_bounded(cmd, Stdio::null(), dir, &name, RUN_TIMEOUT);
    let label = format!(
        "{flavors:?} (server {} leads, {:.1}s)",
        leader + 1,
        started.elapsed().as_secs_f64()
    );
    let mut outcome = Outcome::new(label, run, &ENSEMBLE_CHECKS, c.report());
    outcome.leader = Some(leader + 1);
    outcome
    // Every member is killed here, by pid (Cluster's Drop).
}

/// The `ensemble` scenario against three Apache ZooKeeper servers: the
/// reference the other ensembles' RESULT lines are compared with, run once
/// per test binary (by whichever test needs it first, in its turn).
fn zookeeper_reference(program: &Path, dir: &Path) -> &'static Outcome {
    static REFERENCE: OnceLock<Outcome> = OnceLock::new();
    REFERENCE.get_or_init(|| {
        assert!(
            Path::new(ZK_JAR).exists(),
            "Apache ZooKeeper is not installed: apt-get install -y zookeeper"
        );
        run_ensemble(program, dir, &[Zk, Zk, Zk])
    })
}

fn ensemble_same_as_zookeeper(flavors: &[Flavor]) {
    let _turn = take_turn();
    let work = tempfile::tempdir().unwrap();
    let program = build(work.path());
    let reference = zookeeper_reference(&program, work.path());
    let other = run_ensemble(&program, work.path(), flavors);
    assert_matches(
        &format!(
            "the Go client's `ensemble` scenario on {flavors:?}, against three ZooKeeper servers"
        ),
        reference,
        &other,
        &|name| name.contains(ASTRAL),
    );
    assert_astral_acls_follow_the_leader(&other, reference, flavors);
}

/// The RESULT lines of ACL ids with a character outside the BMP. Java
/// writes such a character as two CESU-8 surrogates, to clients and to the
/// other members, and reads those back as two U+FFFD: three ZooKeeper
/// servers end up with different ACLs on one znode (the followers hold
/// replacement characters where the leader holds the character), and a
/// digest user's own node can refuse it. A ringkeeper member reads the pair
/// back as the character (README: where ringkeeper differs), so the ACLs it
/// answers are its leader's, whichever server leads; a Java member's lines
/// are Java's own and not checked. Whether a write through a member passes
/// the ACL is the leader's decision, from the auth ids the member passes on
/// (as jute strings, which a Java leader reads as Java does): with a Java
/// leader it is ZooKeeper's answer for that member, with a ringkeeper
/// leader the digest user may write its node through any ringkeeper member,
/// as on one server. What a single server answers for such ids is compared
/// with ZooKeeper's in `api`.
const ASTRAL: &str = ".acl_astral.";

fn assert_astral_acls_follow_the_leader(run: &Outcome, reference: &Outcome, flavors: &[Flavor]) {
    // `run_ensemble` asserted the leader's flavor: the last member's. Which
    // member of that flavor leads is observed: usually the last (the
    // higher id), but the other one when the last came up too late for
    // the first election (a Java member's start on a busy machine).
    let leader = run.leader.expect("an ensemble's outcome");
    let reference_leader = reference.leader.expect("an ensemble's outcome");
    let lines = |o: &Outcome, member: usize| -> BTreeMap<String, String> {
        let prefix = format!("ens.member{member}{ASTRAL}");
        o.results
            .iter()
            .filter_map(|(n, v)| Some((n.strip_prefix(&prefix)?.to_string(), v.clone())))
            .collect()
    };
    let mut led = lines(run, leader);
    assert_eq!(
        led.keys().map(String::as_str).collect::<Vec<_>>(),
        ["auth_acl", "auth_set", "id_acl"],
        "the leader's (member {leader}) lines for ACL ids beyond the BMP\n{}",
        run.report()
    );
    led.remove("auth_set");
    for (i, flavor) in flavors.iter().enumerate() {
        if *flavor != Rk {
            continue;
        }
        let member = i + 1;
        let mut ours = lines(run, member);
        let set = ours.remove("auth_set").unwrap_or_default();
        assert_eq!(
            ours, led,
            "{}: ringkeeper member {member} holds other ACLs than its leader (member {leader}) for ids beyond the BMP",
            run.label
        );
        let want = if flavors[leader - 1] == Rk {
            "ok".to_string()
        } else {
            // ZooKeeper's answer through a follower (this member follows
            // a Java leader): the reference member in the same role.
            let like = if member == reference_leader {
                (1..=flavors.len())
                    .find(|m| *m != reference_leader)
                    .expect("a follower in the reference")
            } else {
                member
            };
            lines(reference, like)
                .remove("auth_set")
                .unwrap_or_default()
        };
        assert_eq!(
            set, want,
            "{}: a digest user beyond the BMP writing its node through ringkeeper member {member}",
            run.label
        );
    }
}

/// The reference by itself: the program's checks hold on Apache ZooKeeper.
#[test]
fn go_ensemble_zookeeper_reference() {
    let _turn = take_turn();
    let work = tempfile::tempdir().unwrap();
    let program = build(work.path());
    let reference = zookeeper_reference(&program, work.path());
    assert!(
        reference.problems.is_empty(),
        "the Go client's `ensemble` scenario on three ZooKeeper servers:\n{}",
        reference.report()
    );
}

#[test]
fn go_ensemble_ringkeeper() {
    ensemble_same_as_zookeeper(&[Rk, Rk, Rk]);
}

/// Member 1 ringkeeper, 2 and 3 Java: Java (server 3) leads a ringkeeper
/// and a Java follower.
#[test]
fn go_ensemble_mixed_java_leads() {
    ensemble_same_as_zookeeper(&[Rk, Zk, Zk]);
}

/// Member 1 Java, 2 and 3 ringkeeper: ringkeeper (server 3) leads a Java
/// and a ringkeeper follower.
#[test]
fn go_ensemble_mixed_ringkeeper_leads() {
    ensemble_same_as_zookeeper(&[Zk, Rk, Rk]);
}
