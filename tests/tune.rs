//! `ringkeeper tune check` and `tune suggest` (issue 29 §3), run as the
//! built binary on this machine: every check present with a status, the
//! fdatasync numbers measured, and conditions that must fail failing (a
//! dataLogDir on ramfs, which refuses O_DIRECT; on tmpfs, which is not
//! durable; missing, not a directory, read-only; RLIMIT_NOFILE and
//! RLIMIT_MEMLOCK lowered in the child; a pinCores CPU that is not
//! online); /proc and /sys missing altogether (a chroot) give `unknown`,
//! not a panic. `suggest` prints zoo.cfg lines the server's own Config
//! loads; `suggest --sweep` runs the load generator against servers it
//! starts. Mounts need root (CAP_SYS_ADMIN), as tests/disk_full.rs does.

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

const RUN_TIMEOUT: Duration = Duration::from_secs(120);

/// Every check `tune check` runs.
const CHECKS: &[&str] = &[
    "io_uring",
    "memlock",
    "nofile",
    "cpu_governor",
    "transparent_hugepages",
    "cpu_layout",
    "swap",
    "clocksource",
    "data_log_dir",
    "log_filesystem",
    "o_direct",
    "write_cache",
    "fdatasync_latency",
];

// ---------------------------------------------------------------- running

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

/// Runs `cmd` to completion, at most `limit`; killed by its pid past it.
fn run_bounded(mut cmd: Command, limit: Duration) -> Run {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn ringkeeper");
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let out_t = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let err_t = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let until = Instant::now() + limit;
    let status = loop {
        if let Some(s) = child.try_wait().expect("try_wait") {
            break s;
        }
        if Instant::now() >= until {
            let _ = child.kill();
            let _ = child.wait();
            panic!("ringkeeper tune did not finish within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Run {
        code: status.code().expect("exited, not killed by a signal"),
        stdout: out_t.join().unwrap(),
        stderr: err_t.join().unwrap(),
    }
}

fn tune(args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ringkeeper"));
    cmd.arg("tune").args(args);
    cmd
}

/// `tune check --json` on `dir` with few syncs (fast), plus `extra` args.
fn check_json(dir: &Path, extra: &[&str]) -> (Run, Json) {
    check_json_with(tune_check_cmd(dir, extra))
}

fn tune_check_cmd(dir: &Path, extra: &[&str]) -> Command {
    let mut cmd = tune(&["check", "--json", "--syncs", "50", "--data-log-dir"]);
    cmd.arg(dir).args(extra);
    cmd
}

fn check_json_with(cmd: Command) -> (Run, Json) {
    let run = run_bounded(cmd, RUN_TIMEOUT);
    let json = parse_json(&run.stdout).unwrap_or_else(|e| {
        panic!(
            "tune check --json printed no JSON ({e}):\n{}\nstderr:\n{}",
            run.stdout, run.stderr
        )
    });
    (run, json)
}

/// The check named `name` of a report.
fn check<'a>(report: &'a Json, name: &str) -> &'a Json {
    report
        .get("checks")
        .and_then(Json::array)
        .and_then(|a| a.iter().find(|c| c.str_of("name") == Some(name)))
        .unwrap_or_else(|| panic!("no check {name} in the report"))
}

fn status(report: &Json, name: &str) -> String {
    check(report, name)
        .str_of("status")
        .expect("a status")
        .to_string()
}

fn found(report: &Json, name: &str) -> String {
    check(report, name)
        .str_of("found")
        .unwrap_or("")
        .to_string()
}

/// Every check there, each with a valid status and text; the exit code
/// 1 exactly when one fails.
fn assert_well_formed(run: &Run, report: &Json) {
    let checks = report.get("checks").and_then(Json::array).expect("checks");
    let names: Vec<&str> = checks.iter().filter_map(|c| c.str_of("name")).collect();
    assert_eq!(names, CHECKS, "the checks, in order");
    let mut failed = 0;
    for c in checks {
        let s = c.str_of("status").unwrap();
        assert!(
            ["ok", "warn", "fail", "unknown"].contains(&s),
            "status {s} of {c:?}"
        );
        failed += usize::from(s == "fail");
        assert!(
            !c.str_of("found").unwrap().is_empty(),
            "{c:?} found nothing"
        );
        assert!(!c.str_of("why").unwrap().is_empty(), "{c:?} says no why");
        if s == "fail" || s == "warn" {
            assert!(!c.str_of("fix").unwrap().is_empty(), "{c:?} has no fix");
        }
    }
    assert_eq!(
        report.get("failed").and_then(Json::num),
        Some(failed as f64)
    );
    assert_eq!(
        run.code,
        i32::from(failed > 0),
        "exit code with {failed} failing check(s):\n{}",
        run.stdout
    );
}

/// A temporary dataLogDir on the disk the build is on (target/tmp), not
/// in /tmp, which some machines mount as tmpfs.
fn disk_tempdir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("rk-tune-")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .unwrap()
}

// ----------------------------------------------------------------- mounts

/// A filesystem mounted for one test, unmounted (lazily if busy) on drop.
struct Mounted {
    root: tempfile::TempDir,
}

impl Mounted {
    fn new(fs_type: &str, options: &str) -> Mounted {
        let root = tempfile::Builder::new()
            .prefix("rk-tune-mnt-")
            .tempdir()
            .unwrap();
        let mnt = root.path().join("mnt");
        std::fs::create_dir(&mnt).unwrap();
        let out = Command::new("mount")
            .args(["-t", fs_type, "-o", options, fs_type])
            .arg(&mnt)
            .output()
            .expect("run mount");
        assert!(
            out.status.success(),
            "mount -t {fs_type} (needs root): {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Mounted { root }
    }

    fn path(&self) -> PathBuf {
        self.root.path().join("mnt")
    }

    fn remount(&self, options: &str) {
        let st = Command::new("mount")
            .args(["-o", &format!("remount,{options}")])
            .arg(self.path())
            .status()
            .unwrap();
        assert!(st.success(), "remount {options}");
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        let ok = Command::new("umount")
            .arg(self.path())
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            let _ = Command::new("umount").arg("-l").arg(self.path()).status();
        }
    }
}

fn set_rlimit(resource: libc::__rlimit_resource_t, soft: u64) -> std::io::Result<()> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit read and write only the struct given.
    unsafe {
        if libc::getrlimit(resource, &mut lim) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        lim.rlim_cur = soft.min(lim.rlim_max);
        if libc::setrlimit(resource, &lim) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

// ------------------------------------------------------------------ tests

#[test]
fn check_json_on_this_machine() {
    let dir = disk_tempdir();
    let (run, report) = check_json(dir.path(), &[]);
    assert_well_formed(&run, &report);
    let fsync = check(&report, "fdatasync_latency");
    let values = fsync.get("values").expect("values");
    let num = |k: &str| values.get(k).and_then(Json::num).unwrap_or(-1.0);
    assert!(num("syncs") >= 1.0 && num("syncs") <= 50.0, "{fsync:?}");
    assert!(num("p50_us") > 0.0, "{fsync:?}");
    assert!(num("p99_us") >= num("p50_us"), "{fsync:?}");
    assert!(num("max_us") >= num("p99_us"), "{fsync:?}");
    // A temp dir on this machine's disk: usable, O_DIRECT works.
    assert_eq!(status(&report, "data_log_dir"), "ok", "{report:?}");
    assert_eq!(status(&report, "o_direct"), "ok", "{report:?}");
    assert_ne!(status(&report, "io_uring"), "fail", "{report:?}");
    // Nothing left behind in dataLogDir.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[test]
fn human_output_has_one_block_per_check() {
    let dir = disk_tempdir();
    let mut cmd = tune(&["check", "--syncs", "20", "--data-log-dir"]);
    cmd.arg(dir.path());
    let run = run_bounded(cmd, RUN_TIMEOUT);
    for name in CHECKS {
        let heading = run
            .stdout
            .lines()
            .position(|l| l.starts_with('[') && l.ends_with(&format!("({name})")))
            .unwrap_or_else(|| panic!("no block for {name}:\n{}", run.stdout));
        let block: Vec<&str> = run.stdout.lines().skip(heading + 1).take(2).collect();
        assert!(
            block[0].trim_start().starts_with("found"),
            "{name}: {block:?}"
        );
    }
    assert!(run.stdout.contains(" ok, "), "{}", run.stdout);
}

#[test]
fn ramfs_refuses_o_direct_and_fails() {
    let m = Mounted::new("ramfs", "mode=0755");
    let (run, report) = check_json(&m.path(), &[]);
    assert_well_formed(&run, &report);
    assert_eq!(status(&report, "o_direct"), "fail", "{report:?}");
    assert!(
        found(&report, "o_direct").contains("O_DIRECT"),
        "{report:?}"
    );
    // In memory: not durable either.
    assert_eq!(status(&report, "log_filesystem"), "fail", "{report:?}");
    assert!(found(&report, "log_filesystem").contains("ramfs"));
    assert_eq!(run.code, 1);
}

#[test]
fn tmpfs_is_not_durable_and_fails() {
    // Linux 6.6 and later take O_DIRECT on tmpfs (it is memory all the
    // same): the filesystem check is what fails there.
    let m = Mounted::new("tmpfs", "size=64m");
    let (run, report) = check_json(&m.path(), &[]);
    assert_well_formed(&run, &report);
    assert_eq!(status(&report, "log_filesystem"), "fail", "{report:?}");
    assert!(found(&report, "log_filesystem").starts_with("tmpfs"));
    assert_eq!(status(&report, "write_cache"), "unknown", "{report:?}");
    assert!(found(&report, "write_cache").contains("not on a block device"));
    assert_eq!(run.code, 1);
}

#[test]
fn a_missing_or_unusable_dir_fails_clearly() {
    let tmp = disk_tempdir();
    let missing = tmp.path().join("no/such/dir");
    let (run, report) = check_json(&missing, &[]);
    assert_well_formed(&run, &report);
    assert_eq!(status(&report, "data_log_dir"), "fail");
    assert!(
        found(&report, "data_log_dir").contains("does not exist"),
        "{report:?}"
    );
    for name in ["o_direct", "fdatasync_latency"] {
        assert_eq!(status(&report, name), "unknown");
        assert!(found(&report, name).starts_with("not measured"));
    }
    assert!(!missing.exists(), "tune check must not create dataLogDir");
    assert_eq!(run.code, 1);

    let file = tmp.path().join("a-file");
    std::fs::write(&file, "x").unwrap();
    let (run, report) = check_json(&file, &[]);
    assert_eq!(status(&report, "data_log_dir"), "fail");
    assert!(found(&report, "data_log_dir").contains("is not a directory"));
    assert_eq!(run.code, 1);

    // Root writes anywhere, so read-only is a read-only mount.
    let m = Mounted::new("tmpfs", "size=4m");
    m.remount("ro");
    let (run, report) = check_json(&m.path(), &[]);
    assert_well_formed(&run, &report);
    assert_eq!(status(&report, "data_log_dir"), "fail");
    assert!(
        found(&report, "data_log_dir").contains("Read-only file system"),
        "{report:?}"
    );
    assert_eq!(run.code, 1);
}

#[test]
fn low_descriptor_and_memlock_limits_are_flagged() {
    let dir = disk_tempdir();
    // Room for a few clients only: fail.
    let mut cmd = tune_check_cmd(dir.path(), &[]);
    // SAFETY: setrlimit is async-signal-safe; nothing else runs in the child.
    unsafe { cmd.pre_exec(|| set_rlimit(libc::RLIMIT_NOFILE, 100)) };
    let (run, report) = check_json_with(cmd);
    assert_well_formed(&run, &report);
    assert_eq!(status(&report, "nofile"), "fail", "{report:?}");
    assert!(found(&report, "nofile").starts_with("soft 100,"));
    assert_eq!(run.code, 1);

    // Room for 2,000 of the 10,000 clients an unbounded maxCnxns plans:
    // warn. One shard, so that the server's own share does not depend on
    // this machine's CPU count.
    let cfgs = disk_tempdir();
    let unbounded = cfgs.path().join("unbounded.cfg");
    std::fs::write(
        &unbounded,
        "dataDir=/tmp/unused\nclientPort=2181\nringkeeper.shards=1\n",
    )
    .unwrap();
    let mut cmd = tune_check_cmd(dir.path(), &["--config", unbounded.to_str().unwrap()]);
    // SAFETY: as above.
    unsafe { cmd.pre_exec(|| set_rlimit(libc::RLIMIT_NOFILE, 2000)) };
    let (_, report) = check_json_with(cmd);
    assert_eq!(status(&report, "nofile"), "warn", "{report:?}");

    // maxCnxns bounds what is needed: 2,000 descriptors are then enough.
    let bounded = cfgs.path().join("bounded.cfg");
    std::fs::write(
        &bounded,
        "dataDir=/tmp/unused\nclientPort=2181\nringkeeper.shards=1\nmaxCnxns=500\n",
    )
    .unwrap();
    let mut cmd = tune_check_cmd(dir.path(), &["--config", bounded.to_str().unwrap()]);
    // SAFETY: as above.
    unsafe { cmd.pre_exec(|| set_rlimit(libc::RLIMIT_NOFILE, 2000)) };
    let (_, report) = check_json_with(cmd);
    assert_eq!(status(&report, "nofile"), "ok", "{report:?}");
    assert!(found(&report, "nofile").contains("maxCnxns=500: needs 580"));

    // Below glommio's 512 KiB floor no executor starts: fail.
    let mut cmd = tune_check_cmd(dir.path(), &[]);
    // SAFETY: as above.
    unsafe { cmd.pre_exec(|| set_rlimit(libc::RLIMIT_MEMLOCK, 256 << 10)) };
    let (run, report) = check_json_with(cmd);
    assert_eq!(status(&report, "memlock"), "fail", "{report:?}");
    assert!(found(&report, "memlock").starts_with("soft 256 KiB"));
    assert_eq!(run.code, 1);
}

#[test]
fn a_pinned_cpu_that_is_not_online_fails() {
    let dir = disk_tempdir();
    let cfg = dir.path().join("zoo.cfg");
    std::fs::write(
        &cfg,
        format!(
            "dataDir={}\nclientPort=2181\nringkeeper.pinCores=0,4000\n",
            dir.path().join("data").display()
        ),
    )
    .unwrap();
    let (run, report) = check_json(dir.path(), &["--config", cfg.to_str().unwrap()]);
    assert_well_formed(&run, &report);
    assert_eq!(status(&report, "cpu_layout"), "fail", "{report:?}");
    let f = found(&report, "cpu_layout");
    assert!(f.contains("shard 0 on CPU 4000"), "{f}");
    assert!(f.contains("not online"), "{f}");
    assert_eq!(report.get("shards").and_then(Json::num), Some(1.0));
}

#[test]
fn without_proc_and_sys_checks_say_unknown() {
    let dir = disk_tempdir();
    let empty = tempfile::tempdir().unwrap();
    let root = empty.path().to_str().unwrap().to_string();
    let (run, report) = check_json(dir.path(), &["--sys-root", &root]);
    assert_well_formed(&run, &report);
    for name in [
        "cpu_governor",
        "transparent_hugepages",
        "cpu_layout",
        "swap",
        "clocksource",
        "write_cache",
    ] {
        assert_eq!(status(&report, name), "unknown", "{name}: {report:?}");
    }
    // What does not depend on /proc and /sys is still measured.
    assert_eq!(status(&report, "data_log_dir"), "ok");
    assert_eq!(status(&report, "o_direct"), "ok");
    assert!(found(&report, "fdatasync_latency").contains("p50"));
}

/// A /proc and /sys of an 8-CPU host (4 cores x 2 SMT threads, siblings
/// n and n+4) whose NIC eth0 has taken all its interrupts on CPU 0.
fn fake_smt_host() -> tempfile::TempDir {
    let root = tempfile::tempdir().unwrap();
    let w = |rel: &str, text: &str| {
        let p = root.path().join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    };
    w("sys/devices/system/cpu/online", "0-7\n");
    for cpu in 0..8 {
        w(
            &format!("sys/devices/system/cpu/cpu{cpu}/topology/thread_siblings_list"),
            &format!("{},{}\n", cpu % 4, cpu % 4 + 4),
        );
    }
    let header: String = (0..8).map(|c| format!("       CPU{c}")).collect();
    w(
        "proc/interrupts",
        &format!(
            "{header}\n 40:      90000          0          0          0          0          0          0          0  PCI-MSIX-0000:00:03.0   0-edge      eth0-TxRx-0\n LOC:  1 1 1 1 1 1 1 1   Local timer interrupts\n"
        ),
    );
    w("proc/irq/40/smp_affinity_list", "0\n");
    let dev = root.path().join("sys/devices/pci0000:00/0000:00:03.0");
    std::fs::create_dir_all(dev.join("net")).unwrap();
    std::fs::create_dir_all(root.path().join("sys/class/net/eth0")).unwrap();
    std::os::unix::fs::symlink(&dev, root.path().join("sys/class/net/eth0/device")).unwrap();
    root
}

#[test]
fn a_fake_smt_host_gets_one_thread_per_core_away_from_the_nic() {
    let host = fake_smt_host();
    let dir = disk_tempdir();
    let root = host.path().to_str().unwrap();
    let mut cmd = tune(&["suggest", "--sys-root", root, "--data-log-dir"]);
    cmd.arg(dir.path());
    let run = run_bounded(cmd, RUN_TIMEOUT);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let entries = fragment_entries(&run.stdout);
    let value = |k: &str| entries.iter().find(|e| e.0 == k).unwrap().1.clone();
    // The consensus core on a CPU without NIC interrupts, one thread per core.
    assert_eq!(value("ringkeeper.pinCores"), "3,0,1,2", "{}", run.stdout);
    assert_eq!(value("ringkeeper.shards"), "3");
    assert!(
        run.stdout.contains("one SMT thread per core"),
        "{}",
        run.stdout
    );
    let c = load_with(dir.path(), &run.stdout);
    assert_eq!(
        c.cpu_pinning,
        ringkeeper::config::CpuPinning::Cpus(vec![3, 0, 1, 2])
    );
    assert!(c.warnings.is_empty(), "{:?}", c.warnings);

    // Pinned the other way round, the consensus core takes the NIC's
    // interrupts: the layout check warns and says what to do.
    let cfg = dir.path().join("pinned.cfg");
    std::fs::write(
        &cfg,
        format!(
            "dataDir={}\nclientPort=2181\nringkeeper.pinCores=0,1,2,3\n",
            dir.path().join("data").display()
        ),
    )
    .unwrap();
    let (run, report) = check_json(
        dir.path(),
        &["--sys-root", root, "--config", cfg.to_str().unwrap()],
    );
    assert_well_formed(&run, &report);
    assert_eq!(status(&report, "cpu_layout"), "warn", "{report:?}");
    let f = found(&report, "cpu_layout");
    assert!(
        f.contains("IRQ 40 eth0-TxRx-0 [CPU0 90000] affinity 0"),
        "{f}"
    );
    assert!(f.contains("consensus core on CPU 0"), "{f}");
    assert!(f.contains("takes 90000 NIC interrupts"), "{f}");
    assert!(check(&report, "cpu_layout")
        .str_of("fix")
        .unwrap()
        .contains("smp_affinity_list"));
}

#[test]
fn an_unreadable_config_is_an_error() {
    let run = run_bounded(
        tune(&["check", "--config", "/nonexistent/zoo.cfg"]),
        RUN_TIMEOUT,
    );
    assert_eq!(run.code, 1);
    assert!(
        run.stderr.contains("/nonexistent/zoo.cfg"),
        "{}",
        run.stderr
    );
}

/// The fragment's `key=value` lines, each checked to follow a comment.
fn fragment_entries(text: &str) -> Vec<(String, String)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        if l.is_empty() || l.starts_with('#') {
            continue;
        }
        let (k, v) = l
            .split_once('=')
            .unwrap_or_else(|| panic!("not key=value: {l}"));
        assert!(
            i > 0 && lines[i - 1].starts_with("# "),
            "{k} has no reason above it:\n{text}"
        );
        out.push((k.to_string(), v.to_string()));
    }
    out
}

/// Loads `fragment` after a base zoo.cfg with the server's own parser.
fn load_with(dir: &Path, fragment: &str) -> ringkeeper::config::Config {
    let cfg = dir.join("suggested.cfg");
    std::fs::write(
        &cfg,
        format!(
            "tickTime=2000\ndataDir={}\nclientPort=2181\n{fragment}",
            dir.join("data").display()
        ),
    )
    .unwrap();
    ringkeeper::config::Config::load(&cfg)
        .unwrap_or_else(|e| panic!("the server refuses the fragment: {e}\n{fragment}"))
}

const SUGGESTED_KEYS: &[&str] = &[
    "ringkeeper.pinCores",
    "ringkeeper.shards",
    "ringkeeper.fsyncDelayUs",
    "ringkeeper.fsyncBatchTxnsMax",
    "ringkeeper.fsyncBatchBytesMax",
    "ringkeeper.logWrite",
];

#[test]
fn suggest_prints_a_fragment_the_server_loads() {
    let dir = disk_tempdir();
    let mut cmd = tune(&["suggest", "--data-log-dir"]);
    cmd.arg(dir.path());
    let run = run_bounded(cmd, RUN_TIMEOUT);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let entries = fragment_entries(&run.stdout);
    let keys: Vec<&str> = entries.iter().map(|e| e.0.as_str()).collect();
    assert_eq!(keys, SUGGESTED_KEYS, "{}", run.stdout);
    assert!(run.stdout.contains("# measured: fdatasync of 4 KiB"));
    let c = load_with(dir.path(), &run.stdout);
    assert!(c.warnings.is_empty(), "{:?}", c.warnings);
    let value = |k: &str| entries.iter().find(|e| e.0 == k).unwrap().1.clone();
    assert_eq!(
        c.shard_count,
        Some(value("ringkeeper.shards").parse().unwrap())
    );
    assert_eq!(
        c.fsync_batch_txns_max.to_string(),
        value("ringkeeper.fsyncBatchTxnsMax")
    );
    assert!(c.fsync_batch_txns_max >= 10_000);
    assert_eq!(value("ringkeeper.logWrite"), "direct");

    // --json: the same suggestions with their reasons.
    let mut cmd = tune(&["suggest", "--json", "--data-log-dir"]);
    cmd.arg(dir.path());
    let run = run_bounded(cmd, RUN_TIMEOUT);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let j = parse_json(&run.stdout).expect("JSON");
    let s = j
        .get("suggestions")
        .and_then(Json::array)
        .expect("suggestions");
    let keys: Vec<&str> = s.iter().filter_map(|e| e.str_of("key")).collect();
    assert_eq!(keys, SUGGESTED_KEYS);
    assert!(s
        .iter()
        .all(|e| e.str_of("reason").is_some_and(|r| r.len() > 20)));
    // Nothing left behind in dataLogDir but what this test wrote.
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(left, ["suggested.cfg"], "{left:?}");
}

/// ringkeeper-loadgen, built as tests/loadgen.rs builds it (another
/// workspace member: CARGO_BIN_EXE_ does not name it).
fn loadgen() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let rk = PathBuf::from(env!("CARGO_BIN_EXE_ringkeeper"));
        let profile_dir = rk.parent().expect("binary directory");
        let target_dir = profile_dir.parent().expect("target directory");
        let mut cmd = Command::new(env!("CARGO"));
        cmd.args(["build", "--quiet", "-p", "ringkeeper-loadgen"])
            .args(["--bin", "ringkeeper-loadgen"])
            .env("CARGO_TARGET_DIR", target_dir)
            .current_dir(env!("CARGO_MANIFEST_DIR"));
        match profile_dir.file_name().and_then(|n| n.to_str()) {
            Some("debug") | None => {}
            Some("release") => {
                cmd.arg("--release");
            }
            Some(other) => {
                cmd.args(["--profile", other]);
            }
        }
        assert!(
            cmd.status().expect("cargo build").success(),
            "build ringkeeper-loadgen"
        );
        let bin = profile_dir.join("ringkeeper-loadgen");
        assert!(bin.exists(), "{} was not built", bin.display());
        bin
    })
}

#[test]
fn suggest_sweep_runs_the_load_generator() {
    let dir = disk_tempdir();
    let mut cmd = tune(&[
        "suggest",
        "--sweep",
        "--sweep-seconds",
        "1",
        "--sweep-rounds",
        "2",
        "--loadgen",
    ]);
    cmd.arg(loadgen()).arg("--data-log-dir").arg(dir.path());
    let run = run_bounded(cmd, Duration::from_secs(300));
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let table: Vec<&str> = run
        .stdout
        .lines()
        .filter(|l| l.starts_with("#   "))
        .collect();
    for setting in [
        "defaults",
        "fsyncDelayUs=200",
        "fsyncDelayUs=1000",
        "fsyncBatchTxnsMax=100",
        "fsyncBatchTxnsMax=1000",
    ] {
        let row = table
            .iter()
            .find(|l| l[4..].starts_with(&format!("{setting} ")))
            .unwrap_or_else(|| panic!("no row for {setting}:\n{}", run.stdout));
        let ops: f64 = row
            .split_whitespace()
            .nth(2)
            .unwrap()
            .parse()
            .unwrap_or_else(|_| {
                panic!(
                    "{setting} has no ops/s (the point failed?):\n{}",
                    run.stdout
                )
            });
        assert!(ops > 0.0, "{row}");
    }
    assert!(
        run.stdout.contains("2 round(s) (medians)") && table[0].ends_with("spread"),
        "{}",
        run.stdout
    );
    let chosen = run
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("# chosen: "))
        .expect("a chosen setting");
    assert!(
        table.iter().any(|l| l.contains("<- chosen")),
        "{}",
        run.stdout
    );
    let c = load_with(dir.path(), &run.stdout);
    // The chosen setting is what the fragment sets.
    match chosen {
        "fsyncDelayUs=200" => assert_eq!(c.fsync_delay_us, 200),
        "fsyncDelayUs=1000" => assert_eq!(c.fsync_delay_us, 1000),
        "fsyncBatchTxnsMax=100" => assert_eq!(c.fsync_batch_txns_max, 100),
        "fsyncBatchTxnsMax=1000" => assert_eq!(c.fsync_batch_txns_max, 1000),
        "defaults" => {
            assert_eq!(c.fsync_delay_us, 0);
            assert!(c.fsync_batch_txns_max >= 10_000);
        }
        other => panic!("chosen {other}"),
    }
    // The sweep's servers and data are gone.
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(left, ["suggested.cfg"], "{left:?}");
}

// ---------------------------------------------------- a minimal JSON reader

#[derive(Debug, Clone, PartialEq)]
enum Json {
    Null,
    Bool(bool),
    Num(f64),
    Str(String),
    Arr(Vec<Json>),
    Obj(Vec<(String, Json)>),
}

impl Json {
    fn get(&self, key: &str) -> Option<&Json> {
        match self {
            Json::Obj(m) => m.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }
    fn array(&self) -> Option<&Vec<Json>> {
        match self {
            Json::Arr(a) => Some(a),
            _ => None,
        }
    }
    fn num(&self) -> Option<f64> {
        match self {
            Json::Num(n) => Some(*n),
            _ => None,
        }
    }
    fn str_of(&self, key: &str) -> Option<&str> {
        match self.get(key)? {
            Json::Str(s) => Some(s),
            _ => None,
        }
    }
}

fn parse_json(text: &str) -> Result<Json, String> {
    let b = text.as_bytes();
    let mut i = 0;
    let v = value(b, &mut i)?;
    ws(b, &mut i);
    if i != b.len() {
        return Err(format!("trailing bytes at {i}"));
    }
    Ok(v)
}

fn ws(b: &[u8], i: &mut usize) {
    while *i < b.len() && b[*i].is_ascii_whitespace() {
        *i += 1;
    }
}

fn value(b: &[u8], i: &mut usize) -> Result<Json, String> {
    ws(b, i);
    let lit = |i: &mut usize, word: &str, v: Json| {
        if b[*i..].starts_with(word.as_bytes()) {
            *i += word.len();
            Ok(v)
        } else {
            Err(format!("bad literal at {i}"))
        }
    };
    match b.get(*i) {
        None => Err("unexpected end".into()),
        Some(b'{') => {
            *i += 1;
            let mut m = Vec::new();
            ws(b, i);
            if b.get(*i) == Some(&b'}') {
                *i += 1;
                return Ok(Json::Obj(m));
            }
            loop {
                ws(b, i);
                let Json::Str(k) = value(b, i)? else {
                    return Err(format!("object key at {i}"));
                };
                ws(b, i);
                if b.get(*i) != Some(&b':') {
                    return Err(format!("expected ':' at {i}"));
                }
                *i += 1;
                m.push((k, value(b, i)?));
                ws(b, i);
                match b.get(*i) {
                    Some(b',') => *i += 1,
                    Some(b'}') => {
                        *i += 1;
                        return Ok(Json::Obj(m));
                    }
                    _ => return Err(format!("expected ',' or '}}' at {i}")),
                }
            }
        }
        Some(b'[') => {
            *i += 1;
            let mut a = Vec::new();
            ws(b, i);
            if b.get(*i) == Some(&b']') {
                *i += 1;
                return Ok(Json::Arr(a));
            }
            loop {
                a.push(value(b, i)?);
                ws(b, i);
                match b.get(*i) {
                    Some(b',') => *i += 1,
                    Some(b']') => {
                        *i += 1;
                        return Ok(Json::Arr(a));
                    }
                    _ => return Err(format!("expected ',' or ']' at {i}")),
                }
            }
        }
        Some(b'"') => {
            *i += 1;
            let mut s = Vec::new();
            loop {
                match b.get(*i) {
                    None => return Err("unterminated string".into()),
                    Some(b'"') => {
                        *i += 1;
                        break;
                    }
                    Some(b'\\') => {
                        let e = *b.get(*i + 1).ok_or("bad escape")?;
                        *i += 2;
                        match e {
                            b'n' => s.push(b'\n'),
                            b't' => s.push(b'\t'),
                            b'r' => s.push(b'\r'),
                            b'b' => s.push(8),
                            b'f' => s.push(12),
                            b'u' => {
                                let hex = std::str::from_utf8(&b[*i..*i + 4])
                                    .map_err(|e| e.to_string())?;
                                let c = u32::from_str_radix(hex, 16).map_err(|e| e.to_string())?;
                                *i += 4;
                                let ch = char::from_u32(c).ok_or("surrogate")?;
                                s.extend_from_slice(ch.to_string().as_bytes());
                            }
                            other => s.push(other),
                        }
                    }
                    Some(&c) => {
                        if c < 0x20 {
                            return Err(format!("control byte in a string at {i}"));
                        }
                        s.push(c);
                        *i += 1;
                    }
                }
            }
            String::from_utf8(s)
                .map(Json::Str)
                .map_err(|e| e.to_string())
        }
        Some(b't') => lit(i, "true", Json::Bool(true)),
        Some(b'f') => lit(i, "false", Json::Bool(false)),
        Some(b'n') => lit(i, "null", Json::Null),
        Some(_) => {
            let start = *i;
            while *i < b.len() && matches!(b[*i], b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9') {
                *i += 1;
            }
            std::str::from_utf8(&b[start..*i])
                .ok()
                .and_then(|s| s.parse().ok())
                .map(Json::Num)
                .ok_or_else(|| format!("bad value at {start}"))
        }
    }
}

#[test]
fn the_json_reader_reads_what_it_should() {
    let j =
        parse_json(r#" {"a": [1, -2.5e1, "x\"\u00e9\n"], "b": {"c": null, "d": true}, "e": {}} "#)
            .unwrap();
    assert_eq!(
        j.get("a"),
        Some(&Json::Arr(vec![
            Json::Num(1.0),
            Json::Num(-25.0),
            Json::Str("x\"é\n".into())
        ]))
    );
    assert_eq!(j.get("b").and_then(|b| b.get("d")), Some(&Json::Bool(true)));
    assert!(parse_json("{\"a\": }").is_err());
    assert!(parse_json("[1, 2").is_err());
    assert!(parse_json("{} x").is_err());
}
