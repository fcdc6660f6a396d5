//! `ringkeeper log dump FILE` on a log the server wrote: one line per txn
//! as ZooKeeper's TxnLogToolkit prints it, checked against the real
//! TxnLogToolkit (Debian's ZooKeeper 3.8) run on a log Apache ZooKeeper
//! wrote for the same requests from the same raw client; and `--json`, one
//! JSON object per txn (read back by Python's json module).
//!
//! What is compared: everything after the session id (cxid, zxid, op name,
//! fields). Dates and session ids differ between two servers; ZooKeeper's
//! ACL lists carry a newline that ringkeeper leaves out (one line per
//! txn), so ZooKeeper's continuation lines are joined before comparing.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::raw::*;
use common::{start, Flavor, Server, ZK_CONF_DIR, ZK_JAR};

const OP_SET_ACL: i32 = 7;
const OP_CREATE_CONTAINER: i32 = 19;
const EPHEMERAL: i32 = 1;
const SEQUENTIAL: i32 = 2;
const CONTAINER: i32 = 4;
const CMD_LIMIT: Duration = Duration::from_secs(60);

fn set_data_body(path: &str, data: &[u8]) -> Vec<u8> {
    let mut b = Vec::new();
    put_str(&mut b, path);
    put_buf(&mut b, data);
    put_i32(&mut b, -1);
    b
}

fn delete_body(path: &str) -> Vec<u8> {
    let mut b = Vec::new();
    put_str(&mut b, path);
    put_i32(&mut b, -1);
    b
}

fn set_acl_body(path: &str) -> Vec<u8> {
    let mut b = Vec::new();
    put_str(&mut b, path);
    put_i32(&mut b, 1);
    put_i32(&mut b, 3);
    put_str(&mut b, "digest");
    put_str(&mut b, "u:cGFz,c3dvcmQ=");
    put_i32(&mut b, -1);
    b
}

/// The same requests on either server; returns the errors answered.
fn make_txns(server: &Server) -> Vec<i32> {
    let mut c = Conn::handshake(server.port, 30_000);
    let requests: Vec<(i32, Vec<u8>)> = vec![
        (OP_CREATE, create_body("/foo", b"bar", 0)),
        (OP_CREATE, create_body("/eph", b"x", EPHEMERAL)),
        (OP_CREATE, create_body("/seq-", b"d", SEQUENTIAL)),
        (OP_SET_DATA, set_data_body("/foo", b"baz")),
        (OP_CREATE, create_body("/foo", b"again", 0)),
        (OP_DELETE, delete_body("/nonexist")),
        (OP_SET_ACL, set_acl_body("/foo")),
        (OP_CREATE_CONTAINER, create_body("/cont", b"c", CONTAINER)),
        (OP_CREATE, create_body("/cont/child", b"", 0)),
        (OP_DELETE, delete_body("/foo")),
        (OP_CLOSE_SESSION, Vec::new()),
    ];
    let mut errs = Vec::new();
    for (i, (op, body)) in requests.iter().enumerate() {
        let (r, _) = c.call(i as i32 + 1, *op, body);
        errs.push(r.err);
    }
    errs
}

/// Runs `cmd` to its end (bounded), returning stdout; panics on failure.
fn run(mut cmd: Command) -> String {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > CMD_LIMIT {
            let _ = child.kill();
            panic!("{cmd:?} took longer than {CMD_LIMIT:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8(out.stdout).expect("UTF-8 output");
    assert!(
        out.status.success(),
        "{cmd:?}: {}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

fn ringkeeper_dump(file: &Path, json: bool) -> String {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ringkeeper"));
    cmd.arg("log").arg("dump").arg(file);
    if json {
        cmd.arg("--json");
    }
    run(cmd)
}

fn zookeeper_dump(file: &Path) -> String {
    let mut cmd = Command::new("java");
    cmd.arg("-Duser.timezone=UTC")
        .arg("-Duser.language=en")
        .arg("-Duser.country=US")
        .arg("-cp")
        .arg(format!("{ZK_CONF_DIR}:{ZK_JAR}"))
        .arg("org.apache.zookeeper.server.persistence.TxnLogToolkit")
        .arg(file);
    run(cmd)
}

/// The log segments in `dir` whose name starts with "log.", in name order.
fn logs_in(dir: &Path) -> Vec<PathBuf> {
    let mut logs: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("log."))
        })
        .collect();
    logs.sort();
    logs
}

/// A txn line's date, session and the rest ("cxid ... zxid ... op fields").
fn split_line(line: &str) -> (&str, &str, &str) {
    let (date, rest) = line
        .split_once(" session 0x")
        .unwrap_or_else(|| panic!("no session in {line:?}"));
    let (session, rest) = rest.split_once(' ').unwrap();
    (date, session, rest)
}

/// "M/d/yy, h:mm:ss AM UTC".
fn is_toolkit_date(d: &str) -> bool {
    let Some((day, time)) = d.split_once(", ") else {
        return false;
    };
    let day_ok = day.split('/').count() == 3
        && day
            .split('/')
            .all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()));
    let t: Vec<&str> = time.split(' ').collect();
    day_ok
        && t.len() == 3
        && t[0].split(':').count() == 3
        && (t[1] == "AM" || t[1] == "PM")
        && t[2] == "UTC"
}

/// TxnLogToolkit's txn lines, continuation lines (after the newline in an
/// ACL list) joined back onto their txn.
fn zookeeper_txn_lines(dump: &str) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    for l in dump.lines() {
        if l.starts_with("SLF4J") || l.starts_with("ZooKeeper Transactional Log File") {
            continue;
        }
        if l.contains(" session 0x") || l.starts_with("EOF reached") {
            lines.push(l.to_string());
        } else {
            lines.last_mut().expect("a txn line first").push_str(l);
        }
    }
    lines
}

#[test]
fn log_dump_prints_txn_log_toolkit_lines_and_json() {
    let mut rk = start(Flavor::Ringkeeper, "");
    let rk_errs = make_txns(&rk);
    rk.kill();
    let segments = logs_in(&rk.data_dir());
    assert!(!segments.is_empty(), "no log segment written");
    let ours = ringkeeper_dump(&segments[0], false);
    let mut lines = ours.lines();
    assert!(lines
        .next()
        .unwrap()
        .starts_with("ringkeeper txn log segment "));
    let ours: Vec<&str> = lines.collect();
    // createSession, 11 requests (closeSession included) = 12 txns.
    assert_eq!(ours.len(), 13, "{ours:#?}");
    assert_eq!(*ours.last().unwrap(), "EOF reached after 12 txns.");
    for line in &ours[..12] {
        let (date, session, _) = split_line(line);
        assert!(is_toolkit_date(date), "date {date:?} in {line:?}");
        assert!(i64::from_str_radix(session, 16).is_ok(), "{line:?}");
    }
    // The ringkeeper-only expectations (these hold whatever ZooKeeper says).
    assert!(
        ours[0].ends_with(" zxid 0x1 createSession 30000"),
        "{}",
        ours[0]
    );
    assert!(
        ours[1].ends_with(" create /foo,bar,[31,s{'world,'anyone}],false,1"),
        "{}",
        ours[1]
    );
    assert!(
        ours[2].ends_with(" create /eph,x,[31,s{'world,'anyone}],true,2"),
        "{}",
        ours[2]
    );
    assert!(ours[11].ends_with(" closeSession v{'/eph}"), "{}", ours[11]);

    // --json: one object per txn, the same txns.
    let json = ringkeeper_dump(&segments[0], true);
    assert_eq!(json.lines().count(), 12, "{json}");
    let script = "import sys, json\n\
        for l in sys.stdin:\n    o = json.loads(l)\n    print(o['zxid'], o['op'], o.get('path', ''), o.get('err', ''))\n";
    let mut py = Command::new("python3");
    py.arg("-c").arg(script);
    let mut child = py
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3");
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), json.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "python could not read the JSON lines");
    let read_back = String::from_utf8(out.stdout).unwrap();
    let read_back: Vec<&str> = read_back.lines().collect();
    assert_eq!(read_back[0], "0x1 createSession  ");
    assert_eq!(read_back[1], "0x2 create /foo ");
    assert_eq!(read_back[5], "0x6 error  -110");
    assert_eq!(read_back[7], "0x8 setACL /foo ");

    // The same requests on Apache ZooKeeper, dumped by its TxnLogToolkit.
    let mut zk = start(Flavor::ZooKeeper, "");
    let zk_errs = make_txns(&zk);
    zk.kill();
    assert_eq!(rk_errs, zk_errs, "both servers answer the requests alike");
    let zk_logs = logs_in(&zk.data_dir().join("version-2"));
    let theirs = zookeeper_txn_lines(&zookeeper_dump(&zk_logs[0]));
    assert_eq!(theirs.len(), ours.len(), "{theirs:#?}");
    for (mine, zks) in ours.iter().zip(&theirs) {
        if zks.starts_with("EOF") {
            assert_eq!(*mine, zks);
            continue;
        }
        let (zk_date, _, zk_rest) = split_line(zks);
        assert!(is_toolkit_date(zk_date), "ZooKeeper's date {zk_date:?}");
        let (_, _, my_rest) = split_line(mine);
        assert_eq!(my_rest, zk_rest);
    }

    // ZooKeeper's own log read by `ringkeeper log dump`: the very lines
    // its TxnLogToolkit prints for it, dates and sessions included.
    let read = ringkeeper_dump(&zk_logs[0], false);
    let mut read = read.lines();
    assert!(read
        .next()
        .unwrap()
        .starts_with("Apache ZooKeeper txn log "));
    let read: Vec<&str> = read.collect();
    assert_eq!(read, theirs, "ZooKeeper's log as ringkeeper reads it");
    let json = ringkeeper_dump(&zk_logs[0], true);
    assert_eq!(json.lines().count(), read.len() - 1, "{json}");
}
