//! A scripted zkCli.sh session (Apache ZooKeeper's own CLI, a Java client)
//! run against Apache ZooKeeper and against the server under test (ringkeeper,
//! or a second Apache ZooKeeper with RK_DIFF_SELF=1); the outputs are
//! compared after normalizing zxids, times, session ids, ports, the order of
//! children lists, and the order of asynchronous watch notifications.
//!
//! zkCli.sh reads commands from stdin when it has no terminal; it is started
//! with `-waitforconnection` (otherwise the first commands race the session
//! handshake), in its own process group, and killed with the group if it
//! does not finish in time.

mod common;

use std::collections::HashMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::bounded::run_bounded;
use common::{Flavor, ZKCLI};

const CLI_TIMEOUT: Duration = Duration::from_secs(90);

/// The session. Output of every command goes to stdout or stderr; both are
/// captured into one file (the CLI's main thread writes them in order).
const SCRIPT: &str = r#"create /cli "top"
create -s /cli/seq- s
create -s /cli/seq- s
create -e /cli/eph e
create -s -e /cli/es- x
create -c /cli/cont
create /cli/cont/child c
create /cli/x/y/z bad
create /cli again
create /cli/
ls /cli
ls -s /cli
ls -R /cli
get /cli
get -s /cli
stat /cli
stat /cli/eph
get -s /cli/es-0000000003
stat /cli/nonexistent
get /cli/nonexistent
set /cli newdata
set -s /cli data2
set -v 0 /cli data3
set -v 2 /cli data3
get -s /cli
getAcl /cli
setAcl /cli world:anyone:cdrwa
setAcl -v 5 /cli world:anyone:r
getAcl -s /cli
sync /cli
getAllChildrenNumber /cli
getAllChildrenNumber /
getEphemerals /cli
getEphemerals
addWatch /cli
addWatch -m PERSISTENT /cli/cont
set /cli wdata
create /cli/cont/w w
set /cli/cont/w w2
delete /cli/cont/w
get -w /cli/seq-0000000000
set /cli/seq-0000000000 changed
ls -w /cli/cont
create /cli/cont/w2
stat -w /cli/nope
create /cli/nope
delete /cli/seq-0000000001
delete -v 7 /cli/seq-0000000000
delete -v 1 /cli/seq-0000000000
delete /cli/cont
deleteall /cli/cont
ls /cli
setquota -n 10 /cli
listquota /cli
create /cli/q1 12345
set /cli/q1 1234567890
listquota /cli
ls -R /zookeeper
get /zookeeper/quota/cli/zookeeper_stats
delquota /cli
listquota /cli
ls /zookeeper
ls -s /zookeeper
config
whoami
addauth digest user:pass
whoami
create /cli/authed secret auth::cdrwa
getAcl /cli/authed
create /cli/ro r world:anyone:r
set /cli/ro w
create /cli/ro/child x
deleteall /cli
ls /
quit
"#;

fn other_flavor() -> Flavor {
    if std::env::var("RK_DIFF_SELF").is_ok_and(|v| v == "1") {
        Flavor::ZooKeeper
    } else {
        Flavor::Ringkeeper
    }
}

fn side_name(f: Flavor) -> &'static str {
    match f {
        Flavor::ZooKeeper => "zookeeper",
        Flavor::Ringkeeper => "ringkeeper",
    }
}

/// Runs the script through zkCli.sh against 127.0.0.1:port; returns the
/// combined stdout+stderr.
fn run_cli(port: u16, dir: &Path) -> String {
    let input = dir.join("zkcli-input.txt");
    std::fs::write(&input, SCRIPT).unwrap();
    // zkCli prints errors to stderr: one stream keeps them in order.
    let mut cmd = Command::new("bash");
    cmd.arg("-c")
        .arg("exec bash \"$0\" \"$@\" 2>&1")
        .arg(ZKCLI)
        .arg("-waitforconnection")
        .arg("-timeout")
        .arg("20000")
        .arg("-server")
        .arg(format!("127.0.0.1:{port}"));
    let stdin = Stdio::from(std::fs::File::open(&input).unwrap());
    let run = run_bounded(cmd, stdin, dir, "zkcli", CLI_TIMEOUT);
    let text = run.out;
    assert!(
        run.status.is_some(),
        "zkCli.sh against port {port} did not finish within {CLI_TIMEOUT:?}; output so far:\n{text}"
    );
    text
}

#[derive(Default)]
struct CliNorm {
    zxids: HashMap<String, usize>,
    sessions: HashMap<String, usize>,
}

impl CliNorm {
    fn zxid(&mut self, hex: &str) -> String {
        if hex == "0x0" {
            return "0x0".into();
        }
        let n = self.zxids.len();
        format!("z{}", self.zxids.entry(hex.to_string()).or_insert(n))
    }

    fn session(&mut self, hex: &str) -> String {
        if hex == "0x0" {
            return "0x0".into();
        }
        let n = self.sessions.len();
        format!(
            "session{}",
            self.sessions.entry(hex.to_string()).or_insert(n)
        )
    }
}

fn sort_list(l: &str) -> String {
    let inner = &l[1..l.len() - 1];
    if inner.is_empty() {
        return l.to_string();
    }
    let mut items: Vec<&str> = inner.split(", ").collect();
    items.sort();
    format!("[{}]", items.join(", "))
}

/// Returns (output lines, watch notifications). Notifications are printed by
/// the CLI's event thread, so their place between command outputs is not
/// deterministic: they are compared as a sorted list (the raw-protocol
/// differential tests check event order).
fn normalize(raw: &str) -> (Vec<String>, Vec<String>) {
    let mut n = CliNorm::default();
    let mut lines = Vec::new();
    let mut events = Vec::new();
    for line in raw.lines() {
        let l = line.trim_end();
        if l.is_empty() || l == "WATCHER::" || l.starts_with("SLF4J:") {
            continue;
        }
        if l.starts_with("WatchedEvent ") {
            events.push(l.to_string());
            continue;
        }
        if l.starts_with("Connecting to ") {
            lines.push("Connecting to <server>".into());
            continue;
        }
        let mut done = false;
        for key in ["cZxid = ", "mZxid = ", "pZxid = "] {
            if let Some(v) = l.strip_prefix(key) {
                let z = n.zxid(v);
                lines.push(format!("{key}{z}"));
                done = true;
            }
        }
        for key in ["ctime = ", "mtime = "] {
            if l.starts_with(key) {
                lines.push(format!("{key}<time>"));
                done = true;
            }
        }
        if let Some(v) = l.strip_prefix("ephemeralOwner = ") {
            let s = n.session(v);
            lines.push(format!("ephemeralOwner = {s}"));
            done = true;
        }
        if done {
            continue;
        }
        if l.starts_with('[') && l.ends_with(']') {
            lines.push(sort_list(l));
            continue;
        }
        lines.push(l.to_string());
    }
    // `ls -R` prints a breadth-first walk in the server's children order:
    // sort each run of lines that are paths.
    let mut i = 0;
    while i < lines.len() {
        if lines[i].starts_with('/') {
            let mut j = i;
            while j < lines.len() && lines[j].starts_with('/') {
                j += 1;
            }
            lines[i..j].sort();
            i = j;
        } else {
            i += 1;
        }
    }
    events.sort();
    (lines, events)
}

fn first_diff(a: &[String], b: &[String]) -> Option<usize> {
    (0..a.len().max(b.len())).find(|&i| a.get(i) != b.get(i))
}

fn report(what: &str, a: &[String], b: &[String]) -> Option<String> {
    let i = first_diff(a, b)?;
    let mut s = format!("zkCli {what} differ at line {i}:\n  context:\n");
    for l in &a[i.saturating_sub(6)..i] {
        s.push_str(&format!("    {l}\n"));
    }
    s.push_str(&format!(
        "  zookeeper : {}\n  {:<10}: {}\n",
        a.get(i).map(String::as_str).unwrap_or("<end>"),
        side_name(other_flavor()),
        b.get(i).map(String::as_str).unwrap_or("<end>")
    ));
    Some(s)
}

#[test]
fn zkcli_scripted_session() {
    assert!(Path::new(ZKCLI).exists(), "{ZKCLI} is not installed");
    // Start both servers concurrently; whichever fails, the other is waited
    // for and dropped (killed) before the panic goes on.
    let a = std::thread::spawn(|| common::start(Flavor::ZooKeeper, "forceSync=no"));
    let b = std::panic::catch_unwind(|| common::start(other_flavor(), "forceSync=no"));
    let (a, b) = match (a.join(), b) {
        (Ok(a), Ok(b)) => (a, b),
        (a, Err(e)) => {
            drop(a);
            std::panic::resume_unwind(e)
        }
        (Err(e), b) => {
            drop(b);
            std::panic::resume_unwind(e)
        }
    };
    eprintln!(
        "zkCli session: zookeeper on {} vs {} on {}",
        a.addr(),
        side_name(other_flavor()),
        b.addr()
    );
    let (pa, da) = (a.port, a.dir.path().to_path_buf());
    let (pb, db) = (b.port, b.dir.path().to_path_buf());
    let ta = std::thread::spawn(move || run_cli(pa, &da));
    let rb = run_cli(pb, &db);
    let ra = ta.join().expect("zkCli against the reference");
    let (la, ea) = normalize(&ra);
    let (lb, eb) = normalize(&rb);
    if std::env::var("RK_DIFF_DUMP").is_ok_and(|v| v == "1") {
        eprintln!("---- zkCli output on zookeeper (normalized)");
        for l in la.iter().chain(ea.iter()) {
            eprintln!("{l}");
        }
    }
    assert!(
        la.iter().any(|l| l == "Sync is OK"),
        "the reference session did not run: {ra}"
    );
    let mut failures = Vec::new();
    failures.extend(report("outputs", &la, &lb));
    failures.extend(report("watch notifications (sorted)", &ea, &eb));
    assert!(
        failures.is_empty(),
        "{}\n---- raw output on zookeeper:\n{ra}\n---- raw output on {}:\n{rb}",
        failures.join("\n"),
        side_name(other_flavor())
    );
}
