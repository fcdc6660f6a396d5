//! External client programs (kazoo scripts, Curator programs, zkCli.sh)
//! run bounded: in a process group of their own, with output to files,
//! killed as a group when they exit or when their time is up.

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// How a bounded run ended: its exit status (None when it ran out of
/// time), its stdout and its stderr.
pub struct Finished {
    pub status: Option<ExitStatus>,
    pub out: String,
    pub err: String,
}

impl Finished {
    pub fn success(&self) -> bool {
        self.status.is_some_and(|s| s.success())
    }
}

/// Runs `cmd` with `stdin` in its own process group, stdout and stderr to
/// `dir/name.out` and `dir/name.err`; kills the whole group when the
/// program exits or after `timeout`, whichever comes first.
pub fn run_bounded(
    mut cmd: Command,
    stdin: Stdio,
    dir: &Path,
    name: &str,
    timeout: Duration,
) -> Finished {
    let out_path = dir.join(format!("{name}.out"));
    let err_path = dir.join(format!("{name}.err"));
    let mut child = cmd
        .stdin(stdin)
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
    // Nothing of the program's process group survives it.
    unsafe {
        libc::kill(-pgid, libc::SIGKILL);
    }
    let _ = child.wait();
    Finished {
        status,
        out: std::fs::read_to_string(&out_path).unwrap_or_default(),
        err: std::fs::read_to_string(&err_path).unwrap_or_default(),
    }
}

/// The last `lines` lines of `s`.
pub fn tail(s: &str, lines: usize) -> String {
    let v: Vec<&str> = s.lines().collect();
    v[v.len().saturating_sub(lines)..].join("\n")
}

/// Whether process `pid` still runs, or how it ended: read from
/// /proc/PID/stat before its parent reaps it (a zombie keeps its wait
/// status in field 52).
pub fn process_state(pid: u32) -> String {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
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

/// What explains a failed client run against a server: whether its
/// process still runs (or how it ended), then its log's last 40 lines.
pub fn server_context(pid: u32, log: &std::path::Path) -> String {
    format!(
        "{}\n---- server log (tail):\n{}",
        process_state(pid),
        tail(&std::fs::read_to_string(log).unwrap_or_default(), 40)
    )
}

/// Asserts that a program which prints "PASS <name>: ..." or
/// "FAIL <name>: ..." per check and then "DONE passed=<n> failed=<n>"
/// finished in time, passed every check in `expected`, failed none and
/// exited 0. `context` adds what explains a failure (logs, server state).
pub fn assert_all_passed(
    f: &Finished,
    expected: &[&str],
    what: &str,
    context: &dyn Fn() -> String,
) {
    let out = &f.out;
    let report = || {
        format!(
            "---- stdout:\n{out}\n---- stderr (tail):\n{}\n{}",
            tail(&f.err, 60),
            context()
        )
    };
    assert!(
        f.status.is_some(),
        "{what} did not finish in time\n{}",
        report()
    );
    let failed: Vec<&str> = out.lines().filter(|l| l.starts_with("FAIL ")).collect();
    let missing: Vec<&str> = expected
        .iter()
        .copied()
        .filter(|name| !out.lines().any(|l| l.starts_with(&format!("PASS {name}:"))))
        .collect();
    assert!(
        failed.is_empty() && missing.is_empty(),
        "{what}: failed {failed:?}, not passed {missing:?}\n{}",
        report()
    );
    assert!(
        f.success() && out.contains(&format!("DONE passed={} failed=0", expected.len())),
        "{what} exited with {:?}\n{}",
        f.status,
        report()
    );
}
