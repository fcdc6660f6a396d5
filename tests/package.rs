//! The Debian package (issue 29 §2) on a clean Debian system: `cargo deb`
//! builds it; debootstrap makes a minimal Debian 12 (bookworm, minbase)
//! under target/tmp/package-test/ (cached there, copied afresh for every
//! run, so a run starts from a system nothing was installed on); `dpkg -i`
//! installs it inside that chroot (with /proc and /sys mounted); then:
//!
//! - postinst made the `ringkeeper` system user and group, /var/lib and
//!   /var/log/ringkeeper owned by them, installed and enabled the unit, and
//!   `systemd-analyze verify` (on the host) finds nothing wrong with it;
//! - the server runs as the unit runs it (its ExecStart, as its User and
//!   Group, with its Environment and LimitNOFILE/LimitMEMLOCK applied through
//!   prlimit: systemd itself does not run in a chroot), on a free loopback
//!   port written into the chroot's zoo.cfg, and passes the README's smoke
//!   test (`srvr`, then its kazoo script creating /smoke and reading it
//!   back); SIGTERM (systemd's stop) ends it;
//! - `ringkeeper tune check --json` (issue 29 §3), run the same way, exits 0,
//!   or 1 with every failed check explained (found, why, fix);
//! - the zkServer.sh wrapper (`ringkeeper-server`): --config <dir>, ZOOCFGDIR,
//!   ZOO_LOG_DIR and the [config] argument, start-foreground, then status,
//!   start, status, start again, print-cmd, stop, stop again and restart,
//!   with ZooKeeper 3.8's output lines and exit statuses; `status` prints the
//!   very same stdout as Apache ZooKeeper's own zkServer.sh (Debian's) run
//!   against the same server, running and stopped; the data the unit's
//!   server wrote is what the wrapper's server serves;
//! - `apt-get remove` stops the wrapper's server and keeps config and data;
//!   `dpkg --purge` removes config, logs and the unit's enablement and keeps
//!   the data, which a reinstalled package serves again;
//!   `RINGKEEPER_PURGE_DATA=yes dpkg --purge` removes the data too.
//!
//! Every command runs with a timeout; the servers are killed by pid (every
//! process whose root is the chroot), and the mounts unmounted, on every
//! exit path (a guard's Drop, also when an assertion fails). A missing
//! prerequisite fails the test with what to install: root, debootstrap and
//! network access to the Debian mirror (RK_DEBIAN_MIRROR overrides
//! http://deb.debian.org/debian), cargo-deb (`cargo install cargo-deb
//! --locked`), systemd-analyze, python3-kazoo and zookeeper (for its
//! zkServer.sh); scripts/test-all.sh installs them.
//!
//! This host may not let root raise hard limits (no CAP_SYS_RESOURCE in a
//! container): the unit's limits are then applied up to the hard limits the
//! test has, which it says, and the server is checked to run with them.

mod common;

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::{four_letter, free_port};

const SUITE: &str = "bookworm";
const MIRROR: &str = "http://deb.debian.org/debian";
const PYTHON: &str = "/usr/bin/python3";
const ZK_SERVER_SH: &str = "/usr/share/zookeeper/bin/zkServer.sh";
const CHROOT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
/// Most commands (dpkg, apt-get, the wrapper, a client) take seconds.
const STEP: Duration = Duration::from_secs(120);
/// `cargo deb` builds the release binaries: from nothing, on 2 cores.
const BUILD: Duration = Duration::from_secs(45 * 60);
/// debootstrap downloads and unpacks ~80 packages.
const DEBOOTSTRAP: Duration = Duration::from_secs(15 * 60);
const SERVER_READY: Duration = Duration::from_secs(30);
const SERVER_EXIT: Duration = Duration::from_secs(30);
const SMOKE_MARKER: &str = "python3 - 127.0.0.1:2181 <<'EOF'";

fn work_dir() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("package-test")
}

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// A finished command: how it exited and what it printed.
struct Ran {
    what: String,
    status: ExitStatus,
    out: String,
    err: String,
}

impl Ran {
    fn report(&self) -> String {
        format!(
            "{} exited with {}\n---- stdout:\n{}\n---- stderr:\n{}",
            self.what,
            self.status,
            tail(&self.out, 60),
            tail(&self.err, 60)
        )
    }

    fn ok(self) -> Self {
        assert!(self.status.success(), "{}", self.report());
        self
    }

    fn code(&self) -> Option<i32> {
        self.status.code()
    }
}

fn tail(s: &str, lines: usize) -> String {
    let v: Vec<&str> = s.lines().collect();
    v[v.len().saturating_sub(lines)..].join("\n")
}

static RUNS: AtomicUsize = AtomicUsize::new(0);

/// Runs `cmd` in a process group of its own, stdin from /dev/null, stdout
/// and stderr to files under logs/; after `timeout` the whole group is
/// killed and the test fails. A normal exit leaves the group alone: a
/// server that `zkServer.sh start` put in the background keeps running
/// (the chroot guard kills it by pid).
fn run(what: &str, mut cmd: Command, timeout: Duration) -> Ran {
    let n = RUNS.fetch_add(1, Ordering::Relaxed);
    let logs = work_dir().join("logs");
    fs::create_dir_all(&logs).unwrap();
    let slug: String = what
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .take(60)
        .collect();
    let out_path = logs.join(format!("{n:03}-{slug}.out"));
    let err_path = logs.join(format!("{n:03}-{slug}.err"));
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(fs::File::create(&out_path).unwrap())
        .stderr(fs::File::create(&err_path).unwrap())
        .process_group(0)
        .spawn()
        .unwrap_or_else(|e| panic!("{what}: cannot run {:?}: {e}", cmd.get_program()));
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if start.elapsed() > timeout {
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let read = |p: &Path| fs::read_to_string(p).unwrap_or_default();
    match status {
        Some(status) => Ran {
            what: what.to_string(),
            status,
            out: read(&out_path),
            err: read(&err_path),
        },
        None => {
            unsafe {
                libc::kill(-(child.id() as i32), libc::SIGKILL);
            }
            let _ = child.wait();
            panic!(
                "{what} did not finish within {timeout:?}\n---- stdout:\n{}\n---- stderr:\n{}",
                tail(&read(&out_path), 60),
                tail(&read(&err_path), 60)
            );
        }
    }
}

fn host(program: &str, args: &[&str]) -> Command {
    let mut c = Command::new(program);
    c.args(args);
    c
}

/// Fails the test, naming what to install, unless `program` is on PATH.
fn require(program: &str, install: &str) {
    let found = Command::new("sh")
        .arg("-c")
        .arg(format!("command -v {program}"))
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    assert!(found, "{program} is missing: {install}");
}

/// Process ids whose root directory is `root`: whatever runs in the chroot.
fn processes_in(root: &Path) -> Vec<i32> {
    let mut pids = Vec::new();
    for entry in fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        if fs::read_link(entry.path().join("root")).ok().as_deref() == Some(root) {
            pids.push(pid);
        }
    }
    pids
}

/// Kills (SIGKILL, by pid) every process running in `root` and waits until
/// they are gone.
fn kill_processes_in(root: &Path) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let pids = processes_in(root);
        if pids.is_empty() {
            return;
        }
        if Instant::now() > deadline {
            eprintln!("package test: processes {pids:?} in {root:?} outlived SIGKILL");
            return;
        }
        for pid in pids {
            unsafe {
                libc::kill(pid, libc::SIGKILL);
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Mount points at or under `dir`, deepest first.
fn mounts_under(dir: &Path) -> Vec<PathBuf> {
    let info = fs::read_to_string("/proc/self/mountinfo").unwrap();
    let mut points: Vec<PathBuf> = info
        .lines()
        .filter_map(|l| l.split_whitespace().nth(4))
        .map(|p| PathBuf::from(p.replace("\\040", " ")))
        .filter(|p| p.starts_with(dir))
        .collect();
    points.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
    points
}

fn unmount(point: &Path) {
    let p = point.to_str().unwrap();
    let ok = |mut c: Command| {
        c.stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    if !ok(host("timeout", &["30", "umount", p]))
        && !ok(host("timeout", &["30", "umount", "-l", p]))
    {
        eprintln!("package test: could not unmount {p}");
    }
}

/// Unmounts and empties `dir` (left by an earlier run that was killed).
fn remove_tree(dir: &Path) {
    if !dir.exists() {
        return;
    }
    kill_processes_in(&dir.canonicalize().unwrap());
    for point in mounts_under(&dir.canonicalize().unwrap()) {
        unmount(&point);
    }
    let left = mounts_under(&dir.canonicalize().unwrap());
    assert!(
        left.is_empty(),
        "cannot unmount {left:?}: not removing {dir:?}"
    );
    fs::remove_dir_all(dir).unwrap_or_else(|e| panic!("remove {dir:?}: {e}"));
}

/// The test's Debian system: its processes killed and its mounts undone
/// when dropped, whatever happened.
struct Chroot {
    root: PathBuf,
    mounted: Vec<PathBuf>,
}

impl Chroot {
    fn path(&self, p: &str) -> PathBuf {
        self.root.join(p.trim_start_matches('/'))
    }

    /// A command inside the chroot, with a clean environment.
    fn cmd(&self, args: &[&str]) -> Command {
        self.cmd_env(&[], args)
    }

    fn cmd_env(&self, env: &[(&str, &str)], args: &[&str]) -> Command {
        let mut c = Command::new("chroot");
        c.arg(&self.root)
            .args(args)
            .env_clear()
            .env("PATH", CHROOT_PATH)
            .env("LANG", "C")
            .env("HOME", "/root")
            .env("DEBIAN_FRONTEND", "noninteractive");
        for (k, v) in env {
            c.env(k, v);
        }
        c
    }

    fn run(&self, what: &str, args: &[&str]) -> Ran {
        run(what, self.cmd(args), STEP)
    }

    fn run_env(&self, what: &str, env: &[(&str, &str)], args: &[&str]) -> Ran {
        run(what, self.cmd_env(env, args), STEP)
    }

    fn mount(&mut self, fstype: &str, opts: &str, at: &str) {
        let point = self.path(at);
        let p = point.to_str().unwrap().to_string();
        run(
            &format!("mount {fstype} on {at}"),
            host("mount", &["-t", fstype, "-o", opts, fstype, &p]),
            STEP,
        )
        .ok();
        self.mounted.push(point);
    }
}

impl Drop for Chroot {
    fn drop(&mut self) {
        kill_processes_in(&self.root);
        for point in self.mounted.drain(..).rev() {
            unmount(&point);
        }
    }
}

/// A process the test started: killed (SIGKILL) when dropped.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The [Service] settings of a unit file, in order (a key may repeat).
fn service_settings(unit: &str) -> Vec<(String, String)> {
    let mut section = String::new();
    let mut out = Vec::new();
    for line in unit.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if line.starts_with('[') {
            section = line.to_string();
            continue;
        }
        if section == "[Service]" {
            let (k, v) = line.split_once('=').expect("key=value");
            out.push((k.trim().to_string(), v.trim().to_string()));
        }
    }
    out
}

fn setting<'a>(settings: &'a [(String, String)], key: &str) -> Option<&'a str> {
    settings
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

/// A unit's Limit* value as a number of the resource (None: infinity).
fn unit_limit(v: &str) -> Option<u64> {
    match v {
        "infinity" => None,
        n => Some(
            n.parse()
                .unwrap_or_else(|_| panic!("limit {n}: a number or infinity")),
        ),
    }
}

/// Whether this process may raise hard limits (CAP_SYS_RESOURCE).
fn can_raise_hard_limits() -> bool {
    let status = fs::read_to_string("/proc/self/status").unwrap();
    let eff = status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .map(|v| u64::from_str_radix(v.trim(), 16).unwrap())
        .unwrap();
    // CAP_SYS_RESOURCE is capability 24 (linux/capability.h).
    eff & (1 << 24) != 0
}

/// The limit the test can give a child for `resource` when the unit asks
/// for `wanted` (None: infinity), and a note when that is less.
fn applicable_limit(
    resource: libc::__rlimit_resource_t,
    name: &str,
    wanted: Option<u64>,
) -> Option<u64> {
    if can_raise_hard_limits() {
        return wanted;
    }
    let mut cur = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    assert_eq!(unsafe { libc::getrlimit(resource, &mut cur) }, 0);
    let hard = (cur.rlim_max != libc::RLIM_INFINITY).then_some(cur.rlim_max);
    let fits = match (wanted, hard) {
        (_, None) => true,
        (None, Some(_)) => false,
        (Some(w), Some(h)) => w <= h,
    };
    if fits {
        wanted
    } else {
        eprintln!(
            "package test: the unit's {name} is {wanted:?} (None: infinity); without \
             CAP_SYS_RESOURCE this test can give at most its hard limit {hard:?}, which it does"
        );
        hard
    }
}

fn prlimit_arg(v: Option<u64>) -> String {
    match v {
        None => "unlimited".to_string(),
        Some(n) => n.to_string(),
    }
}

/// /proc/PID/limits' soft and hard value of one limit, as prlimit spells
/// them ("unlimited" or a number).
fn proc_limit(pid: u32, label: &str) -> (String, String) {
    let limits = fs::read_to_string(format!("/proc/{pid}/limits")).unwrap();
    let line = limits
        .lines()
        .find(|l| l.starts_with(label))
        .unwrap_or_else(|| panic!("no {label} in /proc/{pid}/limits"));
    let mut f = line[label.len()..].split_whitespace();
    (f.next().unwrap().to_string(), f.next().unwrap().to_string())
}

/// The Uid: (or Gid:) line of /proc/PID/status: real, effective, saved, fs.
fn proc_ids(pid: u32, key: &str) -> Vec<u32> {
    fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .unwrap()
        .split_whitespace()
        .map(|v| v.parse().unwrap())
        .collect()
}

fn running(pid: u32) -> bool {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    match stat.rsplit_once(')') {
        Some((_, rest)) => !rest.trim_start().starts_with('Z'),
        None => false,
    }
}

fn wait_gone(pid: u32, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    while running(pid) {
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    true
}

/// Waits until the server on `port` answers srvr with a Mode line; fails
/// (with its log) when `alive` says it died or after SERVER_READY.
fn wait_serving(port: u16, log: &Path, mut alive: impl FnMut() -> bool) -> String {
    let deadline = Instant::now() + SERVER_READY;
    loop {
        if let Ok(out) = four_letter(port, "srvr") {
            if out.contains("Mode:") {
                return out;
            }
        }
        let log_text = || tail(&read_log(log), 40);
        assert!(
            alive(),
            "the server exited before it answered\n{}",
            log_text()
        );
        assert!(
            Instant::now() < deadline,
            "no srvr answer on port {port} within {SERVER_READY:?}\n{}",
            log_text()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A log file, or every file of a log directory (zkServer.sh's ZOO_LOG_DIR).
fn read_log(log: &Path) -> String {
    if !log.is_dir() {
        return fs::read_to_string(log).unwrap_or_default();
    }
    let mut text = String::new();
    for e in fs::read_dir(log).unwrap().flatten() {
        text += &format!("---- {}\n", e.path().display());
        text += &fs::read_to_string(e.path()).unwrap_or_default();
    }
    text
}

/// The README's smoke test script (its kazoo part), for `python3 - ADDR`.
fn readme_smoke_script() -> String {
    let readme = fs::read_to_string(repo().join("README.md")).unwrap();
    let mut lines = readme.lines().skip_while(|l| l.trim() != SMOKE_MARKER);
    assert!(
        lines.next().is_some(),
        "README.md has no smoke test (a code line `{SMOKE_MARKER}`): the Install section lost it?"
    );
    let body: Vec<&str> = lines
        .take_while(|l| l.trim() != "EOF")
        .map(|l| l.strip_prefix("    ").unwrap_or(l))
        .collect();
    assert!(
        body.iter().any(|l| l.contains("KazooClient")),
        "README's smoke test: {body:?}"
    );
    body.join("\n") + "\n"
}

/// Runs a kazoo script with /usr/bin/python3 (where python3-kazoo lives)
/// against 127.0.0.1:`port`; returns its stdout.
fn kazoo(what: &str, script: &str, port: u16) -> String {
    let file = work_dir()
        .join("logs")
        .join(format!("{}.py", what.replace(' ', "-")));
    fs::write(&file, script).unwrap();
    let addr = format!("127.0.0.1:{port}");
    run(
        what,
        host(PYTHON, &[file.to_str().unwrap(), &addr]),
        Duration::from_secs(60),
    )
    .ok()
    .out
}

const READ_SMOKE: &str = "import sys
from kazoo.client import KazooClient
zk = KazooClient(hosts=sys.argv[1])
zk.start(timeout=10)
print(zk.get('/smoke')[0].decode())
zk.stop()
";

/// Reads `tune check --json` (argv[1]): one line per check, every field
/// present, a failed check's found/why/fix not empty; then `failed=N`
/// (checked against the report's own count).
const TUNE_SUMMARY: &str = "import json, sys
d = json.load(open(sys.argv[1]))
assert d['checks'], 'no checks'
failed = 0
for c in d['checks']:
    for k in ('name', 'status', 'found', 'why', 'fix'):
        assert isinstance(c.get(k), str), (k, c)
    assert c['status'] in ('ok', 'warn', 'fail', 'unknown'), c
    if c['status'] == 'fail':
        failed += 1
        assert c['found'] and c['why'] and c['fix'], ('a failure it does not explain', c)
    print(c['status'], c['name'], '-', c['found'])
assert d['failed'] == failed, (d['failed'], failed)
print('failed=%d' % failed)
";

/// Points the chroot's /etc/ringkeeper/zoo.cfg at 127.0.0.1:`port`.
fn set_client_port(c: &Chroot, port: u16) {
    let cfg = c.path("/etc/ringkeeper/zoo.cfg");
    let text = fs::read_to_string(&cfg).unwrap();
    assert_eq!(
        text.lines().filter(|l| *l == "clientPort=2181").count(),
        1,
        "the packaged zoo.cfg has one clientPort=2181 line:\n{text}"
    );
    let text = text.replace(
        "clientPort=2181\n",
        &format!("clientPort={port}\nclientPortAddress=127.0.0.1\nadmin.enableServer=false\n"),
    );
    fs::write(&cfg, text).unwrap();
}

fn read_pid(path: &Path) -> u32 {
    let text = fs::read_to_string(path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    text.trim()
        .parse()
        .unwrap_or_else(|_| panic!("{path:?} holds {text:?}, not a pid"))
}

/// The passwd entry of `user` in the chroot: (uid, gid, home, shell).
fn passwd(c: &Chroot, user: &str) -> Option<(u32, u32, String, String)> {
    let text = fs::read_to_string(c.path("/etc/passwd")).unwrap();
    text.lines().find_map(|l| {
        let f: Vec<&str> = l.split(':').collect();
        (f[0] == user).then(|| {
            (
                f[2].parse().unwrap(),
                f[3].parse().unwrap(),
                f[5].to_string(),
                f[6].to_string(),
            )
        })
    })
}

fn group_id(c: &Chroot, group: &str) -> Option<u32> {
    let text = fs::read_to_string(c.path("/etc/group")).unwrap();
    text.lines().find_map(|l| {
        let f: Vec<&str> = l.split(':').collect();
        (f[0] == group).then(|| f[2].parse().unwrap())
    })
}

/// An exclusive flock on `path`, waited for at most `within`.
fn lock_exclusive(path: &Path, within: Duration) -> fs::File {
    use std::os::unix::io::AsRawFd;
    let file = fs::File::create(path).unwrap();
    let deadline = Instant::now() + within;
    while unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        assert!(
            Instant::now() < deadline,
            "another package test held {path:?} for {within:?}"
        );
        std::thread::sleep(Duration::from_secs(1));
    }
    file
}

fn phase(start: Instant, what: &str) {
    eprintln!(
        "package test: {:>6.1} s  {what}",
        start.elapsed().as_secs_f64()
    );
}

#[test]
fn package_installs_and_runs_on_a_clean_debian() {
    let t0 = Instant::now();
    // Prerequisites: each missing one fails with what to install.
    assert_eq!(
        unsafe { libc::geteuid() },
        0,
        "the package test needs root (debootstrap, chroot, mount, dpkg in the chroot)"
    );
    for (p, install) in [
        ("debootstrap", "apt-get install -y debootstrap"),
        ("chroot", "apt-get install -y coreutils"),
        ("prlimit", "apt-get install -y util-linux"),
        ("mount", "apt-get install -y mount"),
        ("systemd-analyze", "apt-get install -y systemd"),
    ] {
        require(p, install);
    }
    let cargo = env!("CARGO");
    assert!(
        host(cargo, &["deb", "--version"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success()),
        "cargo-deb is missing: cargo install cargo-deb --locked"
    );
    assert!(
        host(PYTHON, &["-c", "import kazoo"])
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success()),
        "kazoo is not importable by {PYTHON}: apt-get install -y python3-kazoo"
    );
    assert!(
        Path::new(ZK_SERVER_SH).exists(),
        "{ZK_SERVER_SH} is missing: apt-get install -y zookeeper"
    );
    let work = work_dir();
    fs::create_dir_all(&work).unwrap();
    // One run at a time on this machine (several people's `cargo test` in
    // one tree share target/tmp): the lock is released when the file closes.
    let _lock = lock_exclusive(&work.join("lock"), BUILD);
    let _ = fs::remove_dir_all(work.join("logs"));
    fs::create_dir_all(work.join("logs")).unwrap();

    // The package, built now from this tree.
    let deb = work.join("ringkeeper.deb");
    let _ = fs::remove_file(&deb);
    let _ = fs::remove_file(work.join("ringkeeper.ddeb"));
    // Stripped as `cargo deb` strips into the -dbgsym package, which this
    // test does not need (compressing its debug info takes minutes);
    // lighter compression, the same files.
    let mut build = host(
        cargo,
        &[
            "deb",
            "--no-dbgsym",
            "--strip",
            "--fast",
            "--output",
            deb.to_str().unwrap(),
        ],
    );
    build.current_dir(repo());
    run("cargo deb", build, BUILD).ok();
    assert!(deb.exists(), "cargo deb made no {deb:?}");
    phase(t0, "cargo deb");

    // A clean Debian 12: debootstrapped once into the cache, copied afresh.
    let base = work.join(format!("{SUITE}-minbase"));
    let done = base.join(".ringkeeper-debootstrap-complete");
    if !done.exists() {
        remove_tree(&base);
        let mirror = std::env::var("RK_DEBIAN_MIRROR").unwrap_or(MIRROR.to_string());
        run(
            "debootstrap",
            host(
                "debootstrap",
                &["--variant=minbase", SUITE, base.to_str().unwrap(), &mirror],
            ),
            DEBOOTSTRAP,
        )
        .ok();
        fs::write(
            &done,
            format!("debootstrap --variant=minbase {SUITE} {mirror}\n"),
        )
        .unwrap();
        phase(t0, "debootstrap (cached for the next run)");
    }
    let root_dir = work.join("root");
    remove_tree(&root_dir);
    run(
        "copy the clean chroot",
        host(
            "cp",
            &["-a", base.to_str().unwrap(), root_dir.to_str().unwrap()],
        ),
        STEP,
    )
    .ok();
    let mut c = Chroot {
        root: root_dir.canonicalize().unwrap(),
        mounted: Vec::new(),
    };
    c.mount("proc", "nosuid,nodev,noexec", "/proc");
    c.mount("sysfs", "ro,nosuid,nodev,noexec", "/sys");
    assert!(
        passwd(&c, "ringkeeper").is_none(),
        "the clean chroot already has a ringkeeper user"
    );
    phase(t0, "fresh chroot");

    // Install.
    fs::copy(&deb, c.path("/tmp/ringkeeper.deb")).unwrap();
    c.run("dpkg -i", &["dpkg", "-i", "/tmp/ringkeeper.deb"])
        .ok();
    let status = c.run("dpkg -s", &["dpkg", "-s", "ringkeeper"]).ok();
    assert!(
        status.out.contains("Status: install ok installed"),
        "{}",
        status.out
    );
    phase(t0, "dpkg -i");

    // What postinst made: the user and group, the directories.
    let (uid, gid, home, shell) =
        passwd(&c, "ringkeeper").expect("postinst made no ringkeeper user");
    assert!(uid < 1000, "ringkeeper's uid {uid} is not a system uid");
    assert_eq!(group_id(&c, "ringkeeper"), Some(gid), "ringkeeper's group");
    assert_eq!(home, "/var/lib/ringkeeper");
    assert_eq!(shell, "/usr/sbin/nologin");
    for dir in ["/var/lib/ringkeeper", "/var/log/ringkeeper"] {
        let m = fs::metadata(c.path(dir)).unwrap_or_else(|e| panic!("{dir}: {e}"));
        assert!(m.is_dir(), "{dir}");
        assert_eq!((m.uid(), m.gid()), (uid, gid), "{dir}'s owner");
        assert_eq!(m.permissions().mode() & 0o7777, 0o750, "{dir}'s mode");
    }
    // The files: binaries, wrapper, config and unit as in packaging/.
    let unit_path = c.path("/usr/lib/systemd/system/ringkeeper.service");
    let unit = fs::read_to_string(&unit_path).expect("the package installs no unit");
    assert_eq!(
        unit,
        fs::read_to_string(repo().join("packaging/systemd/ringkeeper.service")).unwrap()
    );
    assert_eq!(
        fs::read_to_string(c.path("/etc/ringkeeper/zoo.cfg")).unwrap(),
        fs::read_to_string(repo().join("packaging/zoo.cfg")).unwrap()
    );
    let wants = c.path("/etc/systemd/system/multi-user.target.wants/ringkeeper.service");
    assert!(
        wants.symlink_metadata().is_ok(),
        "postinst did not enable the unit ({wants:?} missing)"
    );
    assert_eq!(
        fs::read_link(c.path("/usr/bin/ringkeeper-server")).unwrap(),
        Path::new("../share/ringkeeper/bin/zkServer.sh")
    );
    let version = c
        .run("ringkeeper --version", &["ringkeeper", "--version"])
        .ok();
    assert!(version.out.starts_with("ringkeeper "), "{}", version.out);
    c.run(
        "ringkeeper-loadgen --help",
        &["ringkeeper-loadgen", "--help"],
    )
    .ok();
    let wrapper_version = c
        .run(
            "ringkeeper-server version",
            &["ringkeeper-server", "version"],
        )
        .ok();
    assert_eq!(wrapper_version.out, version.out);

    // The unit: systemd-analyze verify on the host, with ExecStart's
    // binary at its path in the chroot (the host has none at /usr/bin).
    let settings = service_settings(&unit);
    let exec_start = setting(&settings, "ExecStart").expect("ExecStart");
    assert!(
        exec_start.starts_with("/usr/bin/ringkeeper "),
        "ExecStart={exec_start}"
    );
    let verify_dir = work.join("verify");
    let _ = fs::remove_dir_all(&verify_dir);
    fs::create_dir_all(&verify_dir).unwrap();
    let verify_unit = verify_dir.join("ringkeeper.service");
    fs::write(
        &verify_unit,
        unit.replace(
            "ExecStart=/usr/bin/ringkeeper ",
            &format!("ExecStart={}/usr/bin/ringkeeper ", c.root.display()),
        ),
    )
    .unwrap();
    let verify = run(
        "systemd-analyze verify",
        host(
            "systemd-analyze",
            &["verify", "--man=no", verify_unit.to_str().unwrap()],
        ),
        STEP,
    )
    .ok();
    // It exits 0 on settings it ignores: those are only printed.
    assert!(
        verify.out.trim().is_empty() && verify.err.trim().is_empty(),
        "{}",
        verify.report()
    );
    // What issue 29 asks of the unit.
    for (key, value) in [
        ("User", "ringkeeper"),
        ("Group", "ringkeeper"),
        ("Restart", "on-failure"),
        ("LimitMEMLOCK", "infinity"),
        ("StandardError", "journal"),
    ] {
        assert_eq!(setting(&settings, key), Some(value), "the unit's {key}");
    }
    // The server has no reload signal (src/main.rs installs no handler:
    // SIGHUP would end it), so the unit must not claim one.
    assert_eq!(setting(&settings, "ExecReload"), None);
    phase(t0, "postinst's user, directories and unit");

    // The server as the unit runs it.
    let port = free_port();
    set_client_port(&c, port);
    let user = setting(&settings, "User").unwrap();
    let group = setting(&settings, "Group").unwrap();
    let nofile = applicable_limit(
        libc::RLIMIT_NOFILE,
        "LimitNOFILE",
        unit_limit(setting(&settings, "LimitNOFILE").expect("LimitNOFILE")),
    );
    let memlock = applicable_limit(
        libc::RLIMIT_MEMLOCK,
        "LimitMEMLOCK",
        unit_limit(setting(&settings, "LimitMEMLOCK").unwrap()),
    );
    assert!(!exec_start.contains('"') && !exec_start.contains('\''));
    let environment: Vec<String> = settings
        .iter()
        .filter(|(k, _)| k == "Environment")
        .map(|(_, v)| v.clone())
        .collect();
    // `args` in the chroot as the unit runs its ExecStart: its User and
    // Group, its limits, and (as systemd does) an empty environment plus the
    // unit's.
    let as_unit = |args: &[&str]| {
        let mut cmd = Command::new("prlimit");
        cmd.arg(format!("--nofile={0}:{0}", prlimit_arg(nofile)))
            .arg(format!("--memlock={0}:{0}", prlimit_arg(memlock)))
            .args(["--", "chroot"])
            .arg(&c.root)
            .args([
                "/usr/bin/setpriv",
                &format!("--reuid={user}"),
                &format!("--regid={group}"),
                "--init-groups",
                "--reset-env",
                "--",
                "/usr/bin/env",
            ])
            .args(&environment)
            .args(args)
            .env_clear()
            .env("PATH", CHROOT_PATH);
        cmd
    };
    let exec_args: Vec<&str> = exec_start.split_whitespace().collect();
    let mut unit_cmd = as_unit(&exec_args);
    let journal = work.join("logs/unit-server.journal");
    let journal_file = fs::File::create(&journal).unwrap();
    let mut server = Proc(
        unit_cmd
            .stdin(Stdio::null())
            .stdout(journal_file.try_clone().unwrap())
            .stderr(journal_file)
            .process_group(0)
            .spawn()
            .expect("spawn the unit's server"),
    );
    let pid = server.0.id();
    let srvr = wait_serving(port, &journal, || matches!(server.0.try_wait(), Ok(None)));
    assert!(srvr.contains("Mode: standalone"), "{srvr}");
    assert_eq!(
        fs::read_link(format!("/proc/{pid}/exe")).unwrap(),
        c.path("/usr/bin/ringkeeper")
    );
    assert_eq!(
        proc_ids(pid, "Uid:"),
        vec![uid; 4],
        "the unit's server's uids"
    );
    assert_eq!(
        proc_ids(pid, "Gid:"),
        vec![gid; 4],
        "the unit's server's gids"
    );
    let want = |v: Option<u64>| (prlimit_arg(v), prlimit_arg(v));
    assert_eq!(proc_limit(pid, "Max open files"), want(nofile));
    assert_eq!(proc_limit(pid, "Max locked memory"), want(memlock));
    // The README's smoke test: srvr (above), then its kazoo script.
    let smoke = kazoo("readme smoke test", &readme_smoke_script(), port);
    assert_eq!(
        smoke.trim(),
        "hello",
        "the README's smoke test printed {smoke:?}"
    );
    // Its files belong to the service's user; its log is plain stderr.
    let data: Vec<String> = fs::read_dir(c.path("/var/lib/ringkeeper"))
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            let m = e.metadata().unwrap();
            assert_eq!(m.uid(), uid, "{:?} is not the service user's", e.path());
            e.file_name().to_string_lossy().into_owned()
        })
        .collect();
    assert!(
        data.iter().any(|f| f.starts_with("log.")),
        "dataDir holds {data:?}"
    );
    // systemd's stop: SIGTERM, which ends it at once (no data to flush).
    unsafe {
        libc::kill(pid as i32, libc::SIGTERM);
    }
    let deadline = Instant::now() + SERVER_EXIT;
    let exit = loop {
        if let Some(st) = server.0.try_wait().unwrap() {
            break st;
        }
        assert!(Instant::now() < deadline, "SIGTERM did not stop the server");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(exit.signal(), Some(libc::SIGTERM), "{exit}");
    drop(server);
    let log = fs::read_to_string(&journal).unwrap();
    assert!(
        log.contains("shard listening") && !log.contains('\u{1b}'),
        "the server's stderr (the journal's input), without colour codes:\n{}",
        tail(&log, 40)
    );
    phase(t0, "the unit's server: smoke test, user, limits, stop");

    // `ringkeeper tune check --json` on the packaged config, as the unit
    // would run the server: exit 0, or 1 with every failed check saying
    // what it found, why that matters and the fix (this host's hardware
    // and limits decide which checks pass; warnings are not failures).
    let tune = run(
        "ringkeeper tune check --json",
        as_unit(&[
            "/usr/bin/ringkeeper",
            "tune",
            "check",
            "--json",
            "--config",
            "/etc/ringkeeper/zoo.cfg",
        ]),
        STEP,
    );
    let tune_json = work.join("logs/tune-check.json");
    fs::write(&tune_json, &tune.out).unwrap();
    let summary = run(
        "read tune check's JSON",
        host(PYTHON, &["-c", TUNE_SUMMARY, tune_json.to_str().unwrap()]),
        STEP,
    )
    .ok();
    let failed: usize = summary
        .out
        .lines()
        .find_map(|l| l.strip_prefix("failed="))
        .unwrap_or_else(|| panic!("{}\n{}", summary.report(), tune.report()))
        .parse()
        .unwrap();
    eprintln!(
        "package test: tune check in the chroot:\n{}",
        summary.out.trim_end()
    );
    assert_eq!(
        tune.code(),
        Some(if failed == 0 { 0 } else { 1 }),
        "tune check's exit status with {failed} failed checks\n{}",
        tune.report()
    );

    // The wrapper with another config: --config <dir>, ZOO_LOG_DIR,
    // ZOOCFGDIR, the [config] argument; start-foreground.
    let alt_port = free_port();
    fs::create_dir_all(c.path("/tmp/alt")).unwrap();
    fs::write(
        c.path("/tmp/alt/zoo.cfg"),
        format!(
            "tickTime=2000\ndataDir=/tmp/alt/data\nclientPort={alt_port}\n\
             clientPortAddress=127.0.0.1\nadmin.enableServer=false\n"
        ),
    )
    .unwrap();
    let started = c
        .run_env(
            "zkServer.sh --config /tmp/alt start",
            &[("ZOO_LOG_DIR", "/tmp/alt/log")],
            &["ringkeeper-server", "--config", "/tmp/alt", "start"],
        )
        .ok();
    assert_eq!(
        started.out,
        "Starting zookeeper ... STARTED\n",
        "{}",
        started.report()
    );
    assert!(
        started.err.contains("Using config: /tmp/alt/zoo.cfg"),
        "{}",
        started.report()
    );
    let alt_pid = read_pid(&c.path("/tmp/alt/data/zookeeper_server.pid"));
    let alt_out = fs::read_dir(c.path("/tmp/alt/log"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect::<Vec<_>>();
    assert!(
        alt_out.len() == 1 && alt_out[0].starts_with("ringkeeper-") && alt_out[0].ends_with(".out"),
        "ZOO_LOG_DIR holds {alt_out:?}"
    );
    let alt_log = c.path("/tmp/alt/log").join(&alt_out[0]);
    wait_serving(alt_port, &alt_log, || running(alt_pid));
    assert_eq!(
        fs::metadata(c.path("/tmp/alt/data")).unwrap().uid(),
        uid,
        "the wrapper made dataDir for the service user"
    );
    assert_eq!(proc_ids(alt_pid, "Uid:"), vec![uid; 4]);
    let st = c.run_env(
        "ZOOCFGDIR=/tmp/alt zkServer.sh status",
        &[("ZOOCFGDIR", "/tmp/alt")],
        &["ringkeeper-server", "status"],
    );
    assert_eq!(st.code(), Some(0), "{}", st.report());
    assert_eq!(
        st.out,
        format!(
            "Client port found: {alt_port}. Client address: 127.0.0.1. Client SSL: false.\n\
             Mode: standalone\n"
        )
    );
    let stopped = c
        .run(
            "zkServer.sh stop /tmp/alt/zoo.cfg",
            &[
                "/usr/share/ringkeeper/bin/zkServer.sh",
                "stop",
                "/tmp/alt/zoo.cfg",
            ],
        )
        .ok();
    assert_eq!(stopped.out, "Stopping zookeeper ... STOPPED\n");
    assert!(!running(alt_pid), "stop returned with the server running");
    assert!(!c.path("/tmp/alt/data/zookeeper_server.pid").exists());
    // start-foreground: the server in place of the script (exec).
    let fg_log = work.join("logs/start-foreground.log");
    let fg_file = fs::File::create(&fg_log).unwrap();
    let mut fg = Proc(
        c.cmd_env(
            &[("ZOOCFGDIR", "/tmp/alt")],
            &["ringkeeper-server", "start-foreground"],
        )
        .stdin(Stdio::null())
        .stdout(fg_file.try_clone().unwrap())
        .stderr(fg_file)
        .process_group(0)
        .spawn()
        .unwrap(),
    );
    let fg_pid = fg.0.id();
    wait_serving(alt_port, &fg_log, || matches!(fg.0.try_wait(), Ok(None)));
    assert_eq!(
        fs::read_link(format!("/proc/{fg_pid}/exe")).unwrap(),
        c.path("/usr/bin/ringkeeper"),
        "start-foreground execs the server"
    );
    unsafe {
        libc::kill(fg_pid as i32, libc::SIGTERM);
    }
    assert!(
        wait_gone(fg_pid, SERVER_EXIT),
        "SIGTERM did not stop start-foreground's server"
    );
    drop(fg);
    phase(
        t0,
        "zkServer.sh: --config, ZOOCFGDIR, [config], start-foreground",
    );

    // The wrapper with the packaged config, beside Apache ZooKeeper's own
    // zkServer.sh (Debian's) asked about the same server.
    let zk_status = |what: &str| {
        let mut cmd = host(
            ZK_SERVER_SH,
            &[
                "status",
                c.path("/etc/ringkeeper/zoo.cfg").to_str().unwrap(),
            ],
        );
        // Its pid file's directory instead of creating dataDir on the host.
        cmd.env("ZOOPIDFILE", work.join("logs/zk-status.pid"));
        run(what, cmd, STEP)
    };
    let cfg_line =
        format!("Client port found: {port}. Client address: 127.0.0.1. Client SSL: false.\n");
    let ours = c.run(
        "zkServer.sh status (stopped)",
        &["ringkeeper-server", "status"],
    );
    assert_eq!(ours.code(), Some(1), "{}", ours.report());
    assert_eq!(
        ours.out,
        format!("{cfg_line}Error contacting service. It is probably not running.\n")
    );
    assert!(ours.err.contains("Using config: /etc/ringkeeper/zoo.cfg"));
    let theirs = zk_status("ZooKeeper's zkServer.sh status (stopped)");
    assert_eq!(
        (theirs.code(), &theirs.out),
        (ours.code(), &ours.out),
        "{}",
        theirs.report()
    );

    let started = c
        .run("zkServer.sh start", &["ringkeeper-server", "start"])
        .ok();
    assert_eq!(
        started.out,
        "Starting zookeeper ... STARTED\n",
        "{}",
        started.report()
    );
    let pidfile = c.path("/var/lib/ringkeeper/zookeeper_server.pid");
    let wpid = read_pid(&pidfile);
    let wlog = c.path("/var/log/ringkeeper");
    wait_serving(port, &wlog, || running(wpid));
    assert_eq!(
        proc_ids(wpid, "Uid:"),
        vec![uid; 4],
        "the wrapper's server's uids"
    );
    assert_eq!(fs::read_link(format!("/proc/{wpid}/root")).unwrap(), c.root);
    // As root, the wrapper gives the server the unit's limits where it can
    // (soft raised to hard otherwise).
    assert_eq!(proc_limit(wpid, "Max open files"), want(nofile));
    assert_eq!(proc_limit(wpid, "Max locked memory"), want(memlock));

    let ours = c.run(
        "zkServer.sh status (running)",
        &["ringkeeper-server", "status"],
    );
    assert_eq!(ours.code(), Some(0), "{}", ours.report());
    assert_eq!(ours.out, format!("{cfg_line}Mode: standalone\n"));
    let theirs = zk_status("ZooKeeper's zkServer.sh status (running)");
    assert_eq!(
        (theirs.code(), &theirs.out),
        (ours.code(), &ours.out),
        "{}",
        theirs.report()
    );
    // The unit's server's write is served by the wrapper's: one dataDir.
    assert_eq!(kazoo("read smoke", READ_SMOKE, port).trim(), "hello");

    let again = c.run(
        "zkServer.sh start (running)",
        &["ringkeeper-server", "start"],
    );
    assert_eq!(again.code(), Some(1), "{}", again.report());
    assert_eq!(
        again.out,
        format!("Starting zookeeper ... already running as process {wpid}.\n")
    );
    let cmd = c
        .run("zkServer.sh print-cmd", &["ringkeeper-server", "print-cmd"])
        .ok();
    assert!(
        cmd.out.contains("\"/usr/bin/ringkeeper\" --config \"/etc/ringkeeper/zoo.cfg\" > \"/var/log/ringkeeper/ringkeeper-")
            && cmd.out.trim_end().ends_with(".out\" 2>&1 < /dev/null"),
        "{}",
        cmd.out
    );
    let stopped = c
        .run("zkServer.sh stop", &["ringkeeper-server", "stop"])
        .ok();
    assert_eq!(stopped.out, "Stopping zookeeper ... STOPPED\n");
    assert!(!running(wpid), "stop returned with the server running");
    assert!(!pidfile.exists(), "stop left the pid file");
    let stopped = c
        .run("zkServer.sh stop (stopped)", &["ringkeeper-server", "stop"])
        .ok();
    assert_eq!(
        stopped.out,
        "Stopping zookeeper ... no zookeeper to stop (could not find file \
         /var/lib/ringkeeper/zookeeper_server.pid)\n"
    );
    let restarted = c
        .run("zkServer.sh restart", &["ringkeeper-server", "restart"])
        .ok();
    assert_eq!(
        restarted.out,
        "Stopping zookeeper ... no zookeeper to stop (could not find file \
         /var/lib/ringkeeper/zookeeper_server.pid)\nStarting zookeeper ... STARTED\n"
    );
    let wpid = read_pid(&pidfile);
    wait_serving(port, &wlog, || running(wpid));
    let usage = c.run("zkServer.sh (no command)", &["ringkeeper-server"]);
    assert_eq!(
        usage.code(),
        Some(0),
        "ZooKeeper's script exits 0 after its usage"
    );
    assert!(usage.err.contains("Usage: "), "{}", usage.report());
    phase(t0, "zkServer.sh with the packaged config");

    // apt-get remove: stops the wrapper's server (prerm), keeps config,
    // data, logs and the user.
    c.run("apt-get remove", &["apt-get", "remove", "-y", "ringkeeper"])
        .ok();
    assert!(
        wait_gone(wpid, Duration::from_secs(5)),
        "remove left the server running"
    );
    assert!(!c.path("/usr/bin/ringkeeper").exists());
    assert!(
        c.path("/etc/ringkeeper/zoo.cfg").exists(),
        "remove took the config"
    );
    assert!(c.path("/var/log/ringkeeper").is_dir());
    let kept = |c: &Chroot| -> Vec<String> {
        fs::read_dir(c.path("/var/lib/ringkeeper"))
            .map(|d| {
                d.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default()
    };
    assert!(
        kept(&c).iter().any(|f| f.starts_with("log.")),
        "remove took the data: {:?}",
        kept(&c)
    );
    assert!(passwd(&c, "ringkeeper").is_some());
    // The unit is masked (its enablement stays until purge, as debhelper's
    // scripts do: a reinstall finds it enabled again).
    let mask = c.path("/etc/systemd/system/ringkeeper.service");
    assert_eq!(
        fs::read_link(&mask).ok().as_deref(),
        Some(Path::new("/dev/null")),
        "remove did not mask the unit"
    );
    assert!(
        wants.symlink_metadata().is_ok(),
        "remove dropped the enablement"
    );
    let st = c
        .run("dpkg -s after remove", &["dpkg", "-s", "ringkeeper"])
        .ok();
    assert!(
        st.out.contains("Status: deinstall ok config-files"),
        "{}",
        st.out
    );

    // dpkg --purge: config, logs and enablement go; data and user stay.
    let purged = c
        .run("dpkg --purge", &["dpkg", "--purge", "ringkeeper"])
        .ok();
    assert!(
        purged
            .err
            .contains("purge keeps the data in /var/lib/ringkeeper"),
        "{}",
        purged.report()
    );
    assert!(
        !c.path("/etc/ringkeeper").exists(),
        "purge left /etc/ringkeeper"
    );
    assert!(
        !c.path("/var/log/ringkeeper").exists(),
        "purge left /var/log/ringkeeper"
    );
    assert!(
        wants.symlink_metadata().is_err(),
        "purge left the unit enabled"
    );
    assert!(
        mask.symlink_metadata().is_err(),
        "purge left the unit masked"
    );
    assert!(
        kept(&c).iter().any(|f| f.starts_with("log.")),
        "purge took the data: {:?}",
        kept(&c)
    );
    assert!(passwd(&c, "ringkeeper").is_some(), "purge removed the user");
    assert_ne!(
        c.run("dpkg -s after purge", &["dpkg", "-s", "ringkeeper"])
            .code(),
        Some(0)
    );
    phase(t0, "apt-get remove, dpkg --purge");

    // Installed again, the package serves the kept data.
    c.run("dpkg -i (again)", &["dpkg", "-i", "/tmp/ringkeeper.deb"])
        .ok();
    assert_eq!(
        passwd(&c, "ringkeeper").map(|p| p.0),
        Some(uid),
        "the same user"
    );
    set_client_port(&c, port);
    let started = c
        .run("zkServer.sh start (again)", &["ringkeeper-server", "start"])
        .ok();
    assert_eq!(
        started.out,
        "Starting zookeeper ... STARTED\n",
        "{}",
        started.report()
    );
    let wpid = read_pid(&pidfile);
    wait_serving(port, &c.path("/var/log/ringkeeper"), || running(wpid));
    assert_eq!(kazoo("read smoke again", READ_SMOKE, port).trim(), "hello");
    c.run("zkServer.sh stop (again)", &["ringkeeper-server", "stop"])
        .ok();
    assert!(!running(wpid));

    // Asked for, purge removes the data too.
    let purged = c
        .run_env(
            "RINGKEEPER_PURGE_DATA=yes dpkg --purge",
            &[("RINGKEEPER_PURGE_DATA", "yes")],
            &["dpkg", "--purge", "ringkeeper"],
        )
        .ok();
    assert!(
        !c.path("/var/lib/ringkeeper").exists(),
        "{}",
        purged.report()
    );
    assert!(
        !purged.err.contains("purge keeps the data"),
        "{}",
        purged.report()
    );
    phase(
        t0,
        "reinstall over kept data, purge with RINGKEEPER_PURGE_DATA=yes",
    );

    assert!(
        processes_in(&c.root).is_empty(),
        "processes left in the chroot"
    );
    drop(c);
    remove_tree(&root_dir);
    phase(t0, "done");
}
