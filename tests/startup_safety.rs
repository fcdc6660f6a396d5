//! Startup never fails open (issue 11, sections 3 and 4): the embedded
//! default (relative `./data`) takes writes; a config with `server.N` lines
//! for other servers, a client port already in use, a dataDir or dataLogDir
//! already used by another ringkeeper, or an unwritable dataDir each stop
//! startup with a clear message (and the unwritable dir with ZooKeeper's
//! exit code 3); a dataDir holding Apache ZooKeeper's files is refused and
//! left byte for byte as it was.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use zk::{Acls, Client, CreateMode};
use zookeeper_client as zk;

const START_LIMIT: Duration = Duration::from_secs(30);

/// A ringkeeper process with its output in a file; killed by pid on drop.
struct Rk {
    child: Child,
    log: PathBuf,
    _log_dir: tempfile::TempDir,
}

impl Rk {
    /// Starts `ringkeeper <args>` in `cwd`.
    fn spawn(cwd: &Path, args: &[&str]) -> Rk {
        let log_dir = tempfile::tempdir().unwrap();
        let log = log_dir.path().join("out.log");
        let out = std::fs::File::create(&log).unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_ringkeeper"))
            .args(args)
            .current_dir(cwd)
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .expect("spawn ringkeeper");
        Rk {
            child,
            log,
            _log_dir: log_dir,
        }
    }

    fn output(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits until `srvr` answers on `port`; panics with the output if the
    /// process exits first or takes too long.
    fn wait_serving(&mut self, port: u16) {
        let start = Instant::now();
        loop {
            if common::four_letter(port, "srvr").is_ok_and(|o| o.contains("Mode:")) {
                return;
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("ringkeeper exited ({status}):\n{}", self.output());
            }
            assert!(
                start.elapsed() < START_LIMIT,
                "not serving within {START_LIMIT:?}:\n{}",
                self.output()
            );
            thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits for the process to exit on its own; panics (with its output)
    /// if it is still running after the limit.
    fn wait_exit(&mut self) -> ExitStatus {
        let start = Instant::now();
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return status;
            }
            assert!(
                start.elapsed() < START_LIMIT,
                "still running after {START_LIMIT:?}, expected it to refuse to start:\n{}",
                self.output()
            );
            thread::sleep(Duration::from_millis(20));
        }
    }

    /// Expects startup to be refused with `exit_code` and every one of
    /// `needles` in the output; returns the output.
    fn expect_refused(mut self, exit_code: i32, needles: &[&str]) -> String {
        let status = self.wait_exit();
        let out = self.output();
        assert_eq!(
            status.code(),
            Some(exit_code),
            "exit status; output:\n{out}"
        );
        for n in needles {
            assert!(out.contains(n), "output lacks {n:?}:\n{out}");
        }
        out
    }
}

impl Drop for Rk {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Writes a zoo.cfg in `dir` (dataDir `dir/data` unless `extra` sets it).
fn write_cfg(dir: &Path, port: u16, extra: &str) -> PathBuf {
    let cfg = dir.join("zoo.cfg");
    let data = if extra.contains("dataDir=") {
        String::new()
    } else {
        format!("dataDir={}\n", dir.join("data").display())
    };
    let text = format!(
        "tickTime=2000\nclientPort={port}\nclientPortAddress=127.0.0.1\n{data}\
         4lw.commands.whitelist=*\n{extra}\n"
    );
    std::fs::write(&cfg, text).unwrap();
    cfg
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// Creates `/path` through a real client and reads it back.
fn create_and_read(port: u16, path: &str) {
    runtime().block_on(async {
        tokio::time::timeout(START_LIMIT, async {
            let c = Client::connector()
                .with_session_timeout(Duration::from_secs(10))
                .connect(&format!("127.0.0.1:{port}"))
                .await
                .expect("connect");
            let mode = CreateMode::Persistent.with_acls(Acls::anyone_all());
            c.create(path, b"v", &mode).await.expect("create");
            let (data, _) = c.get_data(path).await.expect("get");
            assert_eq!(data, b"v");
        })
        .await
        .expect("create and read within the limit")
    })
}

// ---------------------------------------------------------------------------
// 3. The embedded default

/// No config file: the embedded default's dataDir is `./data`, relative to
/// the working directory. The log used to open it with io_uring as a
/// relative path (EBADF) and every write failed.
#[test]
fn embedded_default_takes_writes_in_a_fresh_working_directory() {
    let cwd = tempfile::tempdir().unwrap();
    let port = common::free_port();
    let mut rk = Rk::spawn(cwd.path(), &["--port", &port.to_string()]);
    rk.wait_serving(port);
    create_and_read(port, "/relative");
    let data = cwd.path().join("data");
    let names: Vec<String> = std::fs::read_dir(&data)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        names
            .iter()
            .any(|n| n.starts_with("log.") && n != "log.prepared"),
        "a log segment in {}: {names:?}",
        data.display()
    );
    // Logs to a file carry no colour codes, and one line gives the
    // effective configuration, with the directory made absolute.
    let out = rk.output();
    assert!(
        !out.contains('\x1b'),
        "ANSI escape codes in a log file:\n{out}"
    );
    let data = std::fs::canonicalize(&data).unwrap();
    let line = out
        .lines()
        .find(|l| l.contains("starting ringkeeper"))
        .unwrap_or_else(|| panic!("no startup line:\n{out}"));
    for field in [
        format!("client=127.0.0.1:{port}"),
        format!("data_dir={}", data.display()),
        format!("data_log_dir={}", data.display()),
        "force_sync=true".into(),
        "log_write=".into(),
        "shards=".into(),
        "pinning=".into(),
        "consensus_executor=".into(),
        "metrics=".into(),
        "transparent_huge_pages=false".into(),
    ] {
        assert!(line.contains(&field), "startup line lacks {field}: {line}");
    }
    // The default turns transparent huge pages off for the server
    // (src/memory.rs); the kernel says so for the process (Linux 5.0 on).
    let status = std::fs::read_to_string(format!("/proc/{}/status", rk.child.id())).unwrap();
    let thp = status
        .lines()
        .find(|l| l.starts_with("THP_enabled:"))
        .unwrap_or_else(|| panic!("no THP_enabled line (kernel before 5.0?):\n{status}"));
    assert_eq!(thp.split_whitespace().nth(1), Some("0"), "{thp}");
}

/// `--port` belongs to the embedded default; with a config file it is a
/// usage error rather than a silent override.
#[test]
fn port_option_conflicts_with_a_config_file() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = write_cfg(dir.path(), common::free_port(), "");
    let rk = Rk::spawn(
        dir.path(),
        &["--config", cfg.to_str().unwrap(), "--port", "2999"],
    );
    rk.expect_refused(2, &["--port"]);
}

// ---------------------------------------------------------------------------
// 4. Never fail open: a port or a directory another server uses

/// A second server on a port a ringkeeper serves: its shards would have
/// bound it too (SO_REUSEPORT), and the kernel would have split new
/// clients between the two data trees.
#[test]
fn a_second_server_on_a_port_in_use_is_refused() {
    let first = common::start_ringkeeper("");
    let dir = tempfile::tempdir().unwrap();
    let cfg = write_cfg(dir.path(), first.port, "");
    let second = Rk::spawn(dir.path(), &["--config", cfg.to_str().unwrap()]);
    second.expect_refused(1, &["Address already in use"]);
    create_and_read(first.port, "/still-the-first");
}

/// Two servers on one dataDir (different ports): the second is refused,
/// naming the directory; the first is untouched and serves on.
#[test]
fn a_second_server_on_a_data_dir_in_use_is_refused() {
    let first = common::start_ringkeeper("");
    let dir = tempfile::tempdir().unwrap();
    let data = first.data_dir();
    let cfg = write_cfg(
        dir.path(),
        common::free_port(),
        &format!("dataDir={}", data.display()),
    );
    let second = Rk::spawn(dir.path(), &["--config", cfg.to_str().unwrap()]);
    second.expect_refused(1, &["in use by another ringkeeper", data.to_str().unwrap()]);
    create_and_read(first.port, "/still-the-first");
}

/// The same with only dataLogDir shared.
#[test]
fn a_second_server_on_a_data_log_dir_in_use_is_refused() {
    let first_dir = tempfile::tempdir().unwrap();
    let logs = first_dir.path().join("logs");
    let port = common::free_port();
    let cfg = write_cfg(
        first_dir.path(),
        port,
        &format!("dataLogDir={}", logs.display()),
    );
    let mut first = Rk::spawn(first_dir.path(), &["--config", cfg.to_str().unwrap()]);
    first.wait_serving(port);
    let dir = tempfile::tempdir().unwrap();
    let cfg = write_cfg(
        dir.path(),
        common::free_port(),
        &format!("dataLogDir={}", logs.display()),
    );
    let second = Rk::spawn(dir.path(), &["--config", cfg.to_str().unwrap()]);
    second.expect_refused(1, &["dataLogDir", "in use by another ringkeeper"]);
    create_and_read(port, "/still-the-first");
}

/// The lock dies with its process: a server killed with SIGKILL does not
/// keep its successor out.
#[test]
fn a_killed_server_does_not_keep_its_data_dir_locked() {
    let dir = tempfile::tempdir().unwrap();
    let port = common::free_port();
    let cfg = write_cfg(dir.path(), port, "");
    let mut first = Rk::spawn(dir.path(), &["--config", cfg.to_str().unwrap()]);
    first.wait_serving(port);
    create_and_read(port, "/before");
    drop(first);
    let mut second = Rk::spawn(dir.path(), &["--config", cfg.to_str().unwrap()]);
    second.wait_serving(port);
    create_and_read(port, "/after");
}

/// A read-only directory for the life of the guard: a read-only tmpfs
/// mounted on a fresh temporary directory when running as root (root
/// ignores permission bits), else a directory without write permission.
/// Dropping it unmounts (lazily, so that a process still in it cannot keep
/// the mount) and removes everything, on every path out of the test.
struct ReadOnlyDir {
    path: PathBuf,
    mounted: bool,
    _parent: tempfile::TempDir,
}

impl ReadOnlyDir {
    fn new() -> ReadOnlyDir {
        let parent = tempfile::tempdir().unwrap();
        let path = parent.path().join("ro");
        std::fs::create_dir(&path).unwrap();
        let root = unsafe { libc::geteuid() } == 0;
        if root {
            let status = Command::new("mount")
                .args(["-t", "tmpfs", "-o", "ro,size=1m", "tmpfs"])
                .arg(&path)
                .status()
                .expect("run mount");
            assert!(status.success(), "mount a read-only tmpfs on {path:?}");
        } else {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o555)).unwrap();
        }
        ReadOnlyDir {
            path,
            mounted: root,
            _parent: parent,
        }
    }
}

impl Drop for ReadOnlyDir {
    fn drop(&mut self) {
        if self.mounted {
            let _ = Command::new("umount").arg("-l").arg(&self.path).status();
        } else {
            use std::os::unix::fs::PermissionsExt;
            let _ = std::fs::set_permissions(&self.path, std::fs::Permissions::from_mode(0o755));
        }
    }
}

/// An unwritable dataDir used to start a server that refused every
/// session while answering ruok with imok; now startup stops with
/// ZooKeeper's exit code 3 and names the directory.
#[test]
fn an_unwritable_data_dir_exits_with_code_3() {
    let ro = ReadOnlyDir::new();
    let dir = tempfile::tempdir().unwrap();
    let cfg = write_cfg(
        dir.path(),
        common::free_port(),
        &format!("dataDir={}", ro.path.display()),
    );
    let rk = Rk::spawn(dir.path(), &["--config", cfg.to_str().unwrap()]);
    rk.expect_refused(3, &["dataDir", ro.path.to_str().unwrap(), "not writable"]);
}

/// The same for dataLogDir alone (dataDir writable).
#[test]
fn an_unwritable_data_log_dir_exits_with_code_3() {
    let ro = ReadOnlyDir::new();
    let dir = tempfile::tempdir().unwrap();
    let cfg = write_cfg(
        dir.path(),
        common::free_port(),
        &format!("dataLogDir={}", ro.path.display()),
    );
    let rk = Rk::spawn(dir.path(), &["--config", cfg.to_str().unwrap()]);
    rk.expect_refused(
        3,
        &["dataLogDir", ro.path.to_str().unwrap(), "not writable"],
    );
}

// ---------------------------------------------------------------------------
// 4. server.N lines

/// A zoo.cfg copied from a 3-server ensemble used to start a standalone
/// server that accepted writes on its own (split brain by configuration).
/// Now it runs as an ensemble member, which needs its id: without
/// `dataDir/myid`, or with an id no server.N line names, it stops.
#[test]
fn an_ensemble_config_without_its_myid_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let servers = "server.1=127.0.0.1:2888:3888\nserver.2=127.0.0.2:2888:3888\n\
                   server.3=127.0.0.3:2888:3888";
    let cfg = write_cfg(dir.path(), common::free_port(), servers);
    let rk = Rk::spawn(dir.path(), &["--config", cfg.to_str().unwrap()]);
    rk.expect_refused(1, &["myid is missing", "server.1, server.2, server.3"]);
    std::fs::write(dir.path().join("data").join("myid"), "7\n").unwrap();
    let rk = Rk::spawn(dir.path(), &["--config", cfg.to_str().unwrap()]);
    rk.expect_refused(1, &["server id 7 has no server.7 line"]);
}

/// What ensembles cannot do yet stops startup, naming the line.
#[test]
fn observers_and_reconfig_are_refused_naming_the_line() {
    let servers = "server.1=127.0.0.1:2888:3888\nserver.2=127.0.0.2:2888:3888:observer";
    for (extra, needle) in [
        (
            servers.to_string(),
            "line 7: server.2: observers are not supported yet",
        ),
        (
            format!("{servers}\nreconfigEnabled=true").replace(":observer", ""),
            "line 8: reconfigEnabled: dynamic reconfiguration is not supported yet",
        ),
        (
            "dynamicConfigFile=/etc/zoo.cfg.dynamic".to_string(),
            "line 6: dynamicConfigFile: not supported yet",
        ),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let cfg = write_cfg(dir.path(), common::free_port(), &extra);
        let rk = Rk::spawn(dir.path(), &["--config", cfg.to_str().unwrap()]);
        rk.expect_refused(2, &[needle]);
    }
}

/// One server.N line alone runs standalone, as in ZooKeeper.
#[test]
fn a_single_server_line_runs_standalone() {
    let dir = tempfile::tempdir().unwrap();
    let port = common::free_port();
    let cfg = write_cfg(dir.path(), port, "server.1=127.0.0.1:2888:3888");
    let mut rk = Rk::spawn(dir.path(), &["--config", cfg.to_str().unwrap()]);
    rk.wait_serving(port);
    assert!(common::four_letter(port, "srvr")
        .unwrap()
        .contains("Mode: standalone"));
    create_and_read(port, "/one");
}

// ---------------------------------------------------------------------------
// 4. Security settings are never ignored

/// Each used to start without a word (and an unauthenticated client then
/// wrote); now startup stops, naming the line.
#[test]
fn unsupported_security_keys_stop_startup_naming_the_line() {
    for line in [
        "skipACL=yes",
        "authProvider.1=com.example.CustomAuthenticationProvider",
        "kerberos.removeHostFromPrincipal=true",
    ] {
        let dir = tempfile::tempdir().unwrap();
        let cfg = write_cfg(dir.path(), common::free_port(), line);
        let rk = Rk::spawn(dir.path(), &["--config", cfg.to_str().unwrap()]);
        let key = line.split('=').next().unwrap();
        rk.expect_refused(
            2,
            &[&format!("line 6: {key}: security setting not supported")],
        );
    }
    // Security that is supported but incomplete names its line too.
    for (line, needle) in [
        (
            "secureClientPort=2281",
            "line 6: secureClientPort or client.portUnification",
        ),
        (
            "sessionRequireClientSASLAuth=true",
            "'sasl' is not available",
        ),
        ("ssl.crl=true", "line 6: ssl.crl: certificate revocation"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let cfg = write_cfg(dir.path(), common::free_port(), line);
        let rk = Rk::spawn(dir.path(), &["--config", cfg.to_str().unwrap()]);
        rk.expect_refused(2, &[needle]);
    }
}

/// enforce.auth.enabled without schemes is refused, as ZooKeeper does.
#[test]
fn enforce_auth_without_schemes_stops_startup() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = write_cfg(dir.path(), common::free_port(), "enforce.auth.enabled=true");
    let rk = Rk::spawn(dir.path(), &["--config", cfg.to_str().unwrap()]);
    rk.expect_refused(
        2,
        &["line 6: enforce.auth.enabled: ", "enforce.auth.schemes"],
    );
}

// ---------------------------------------------------------------------------
// 4. A foreign dataDir is data, not a torn tail

/// Every file under `dir` with its bytes, for before/after comparison.
fn snapshot_tree(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p.clone());
                out.push((p, Vec::new()));
            } else {
                let bytes = std::fs::read(&p).unwrap();
                out.push((p, bytes));
            }
        }
    }
    out.sort();
    out
}

/// A real Apache ZooKeeper dataDir (Debian's 3.8, one znode written, then
/// killed): ringkeeper pointed at it, or at its version-2/, refuses to
/// start, says it is ZooKeeper's, and leaves every byte as it was (it used
/// to "cut a torn tail" by zeroing ZooKeeper's log.1); `log verify` fails.
#[test]
fn an_apache_zookeeper_data_dir_is_refused_and_left_unchanged() {
    let mut zk = common::start_zookeeper("");
    create_and_read(zk.port, "/zk-data");
    zk.kill();
    let zk_data = zk.data_dir();
    let version2 = zk_data.join("version-2");
    assert!(
        std::fs::read_dir(&version2).unwrap().any(|e| e
            .unwrap()
            .file_name()
            .to_string_lossy()
            .starts_with("log.")),
        "ZooKeeper wrote a txn log"
    );
    let before = snapshot_tree(&zk_data);
    for (data_dir, needles) in [
        (
            &zk_data,
            vec!["version-2", "Apache ZooKeeper data directory"],
        ),
        (
            &version2,
            vec!["Apache ZooKeeper", "this is an Apache ZooKeeper dataDir"],
        ),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let cfg = write_cfg(
            dir.path(),
            common::free_port(),
            &format!("dataDir={}", data_dir.display()),
        );
        let rk = Rk::spawn(dir.path(), &["--config", cfg.to_str().unwrap()]);
        rk.expect_refused(1, &needles);
        assert!(
            snapshot_tree(&zk_data) == before,
            "ZooKeeper's files changed"
        );
    }
    let out = Command::new(env!("CARGO_BIN_EXE_ringkeeper"))
        .args(["log", "verify"])
        .arg(&version2)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "log verify passed ZooKeeper's log: {err}"
    );
    assert!(err.contains("Apache ZooKeeper"), "{err}");
    assert!(
        snapshot_tree(&zk_data) == before,
        "ZooKeeper's files changed"
    );
}
