//! ZooKeeper's AdminServer (issue 29 §4), ringkeeper against Apache
//! ZooKeeper 3.8: the same requests to both, standalone and in ensembles
//! (leader, follower, a member without quorum, a mixed ensemble), with
//! the JSON compared key by key (names, order at the top level, value
//! types) and the fixed values (`command`, `error`, ruok, the status
//! codes) compared exactly. The probes that operators run are run as they
//! are written: Kubernetes' httpGet on `/commands/ruok`, and the Bitnami
//! chart's liveness and readiness commands (bitnami/charts,
//! bitnami/zookeeper/templates/statefulset.yaml: `curl ... /commands/ruok
//! | grep ruok`, `... | grep error | grep null` with `useAdmin`, and
//! `echo "ruok" | timeout 2 nc -w 2 localhost <port> | grep imok`
//! otherwise), through bash, curl and nc.
//!
//! And the Prometheus names that ZooKeeper's alert rules
//! (zookeeper-docs/.../zookeeperMonitor.md, "Alerting with Prometheus")
//! and its Grafana dashboard (grafana.com dashboard 10465, which the same
//! page links; its panel queries) use, scraped from a ringkeeper leader
//! and follower. The JVM's figures (jvm_*) have no counterpart; `up` is
//! Prometheus' own.
//!
//! Where ringkeeper differs on purpose (see `src/admin/commands.rs`), the
//! test says so: `system_properties` is unknown to ringkeeper (no JVM),
//! `monitor` without quorum answers (ZooKeeper 3.8.0 fails with HTTP 500),
//! and a port that cannot be bound leaves a standalone ringkeeper running
//! without the AdminServer (a standalone ZooKeeper exits with status 4).

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::cluster::Cluster;
use common::raw::*;
use common::{free_port, start, Flavor, Server};

const NOT_SERVING: &str = "This ZooKeeper instance is not currently serving requests";
const WAIT_MAX: Duration = Duration::from_secs(60);

/// Every name and alias of ZooKeeper 3.8's Commands.
const NAMES: &[&str] = &[
    "connection_stat_reset",
    "crst",
    "configuration",
    "conf",
    "config",
    "connections",
    "cons",
    "hash",
    "dirs",
    "dump",
    "environment",
    "env",
    "envi",
    "get_trace_mask",
    "gtmk",
    "initial_configuration",
    "icfg",
    "is_read_only",
    "isro",
    "last_snapshot",
    "lsnp",
    "leader",
    "lead",
    "monitor",
    "mntr",
    "observer_connection_stat_reset",
    "orst",
    "ruok",
    "set_trace_mask",
    "stmk",
    "server_stats",
    "srvr",
    "stats",
    "stat",
    "stat_reset",
    "srst",
    "observers",
    "obsr",
    "system_properties",
    "sysp",
    "voting_view",
    "watches",
    "wchc",
    "watches_by_path",
    "wchp",
    "watch_summary",
    "wchs",
    "zabstate",
];

/// What ringkeeper answers as unknown (no JVM system properties).
const UNKNOWN_TO_RINGKEEPER: &[&str] = &["system_properties", "sysp"];

// ---------------------------------------------------------------------
// HTTP

struct Http {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Http {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// One HTTP/1.1 request (Connection: close), read to the end; bounded.
fn http(ip: &str, port: u16, method: &str, target: &str) -> Http {
    let mut s = TcpStream::connect_timeout(
        &format!("{ip}:{port}").parse().unwrap(),
        Duration::from_secs(5),
    )
    .unwrap_or_else(|e| panic!("connect {ip}:{port}: {e}"));
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    write!(
        s,
        "{method} {target} HTTP/1.1\r\nHost: {ip}:{port}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw)
        .unwrap_or_else(|e| panic!("{method} {target} on {ip}:{port}: {e}"));
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("no status line in {text:?}"));
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_string(), v.trim().to_string()))
        .collect();
    Http {
        status,
        headers,
        body: body.to_string(),
    }
}

// ---------------------------------------------------------------------
// JSON (what Jackson writes: enough to compare shapes and values)

#[derive(Clone, Debug, PartialEq)]
enum J {
    Null,
    Bool(bool),
    Int(i64),
    Dbl(f64),
    Str(String),
    Arr(Vec<J>),
    Obj(Vec<(String, J)>),
}

impl J {
    fn get(&self, key: &str) -> Option<&J> {
        match self {
            J::Obj(e) => e.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    fn at(&self, key: &str) -> &J {
        self.get(key)
            .unwrap_or_else(|| panic!("no {key:?} in {self:?}"))
    }

    fn keys(&self) -> Vec<&str> {
        match self {
            J::Obj(e) => e.iter().map(|(k, _)| k.as_str()).collect(),
            _ => vec![],
        }
    }

    fn len(&self) -> usize {
        match self {
            J::Arr(v) => v.len(),
            J::Obj(e) => e.len(),
            other => panic!("no length: {other:?}"),
        }
    }

    fn kind(&self) -> &'static str {
        match self {
            J::Null => "null",
            J::Bool(_) => "bool",
            J::Int(_) => "int",
            J::Dbl(_) => "double",
            J::Str(_) => "string",
            J::Arr(_) => "array",
            J::Obj(_) => "object",
        }
    }

    fn s(v: &str) -> J {
        J::Str(v.to_string())
    }
}

fn parse_json(text: &str) -> J {
    let b = text.as_bytes();
    let mut i = 0;
    let v = value(b, &mut i);
    ws(b, &mut i);
    assert_eq!(i, b.len(), "trailing bytes after JSON: {text}");
    v
}

fn ws(b: &[u8], i: &mut usize) {
    while *i < b.len() && b[*i].is_ascii_whitespace() {
        *i += 1;
    }
}

fn value(b: &[u8], i: &mut usize) -> J {
    ws(b, i);
    match b[*i] {
        b'{' => {
            *i += 1;
            let mut entries = Vec::new();
            ws(b, i);
            if b[*i] == b'}' {
                *i += 1;
                return J::Obj(entries);
            }
            loop {
                ws(b, i);
                let J::Str(k) = value(b, i) else {
                    panic!("object key at {i}")
                };
                ws(b, i);
                assert_eq!(b[*i], b':');
                *i += 1;
                entries.push((k, value(b, i)));
                ws(b, i);
                *i += 1;
                if b[*i - 1] == b'}' {
                    return J::Obj(entries);
                }
            }
        }
        b'[' => {
            *i += 1;
            let mut items = Vec::new();
            ws(b, i);
            if b[*i] == b']' {
                *i += 1;
                return J::Arr(items);
            }
            loop {
                items.push(value(b, i));
                ws(b, i);
                *i += 1;
                if b[*i - 1] == b']' {
                    return J::Arr(items);
                }
            }
        }
        b'"' => {
            *i += 1;
            let mut out = String::new();
            loop {
                match b[*i] {
                    b'"' => {
                        *i += 1;
                        return J::Str(out);
                    }
                    b'\\' => {
                        let c = b[*i + 1];
                        *i += 2;
                        match c {
                            b'n' => out.push('\n'),
                            b't' => out.push('\t'),
                            b'r' => out.push('\r'),
                            b'b' => out.push('\u{8}'),
                            b'f' => out.push('\u{c}'),
                            b'u' => {
                                let hex = std::str::from_utf8(&b[*i..*i + 4]).unwrap();
                                out.push(
                                    char::from_u32(u32::from_str_radix(hex, 16).unwrap()).unwrap(),
                                );
                                *i += 4;
                            }
                            c => out.push(c as char),
                        }
                    }
                    _ => {
                        let start = *i;
                        while b[*i] != b'"' && b[*i] != b'\\' {
                            *i += 1;
                        }
                        out.push_str(std::str::from_utf8(&b[start..*i]).unwrap());
                    }
                }
            }
        }
        b't' => {
            *i += 4;
            J::Bool(true)
        }
        b'f' => {
            *i += 5;
            J::Bool(false)
        }
        b'n' => {
            *i += 4;
            J::Null
        }
        _ => {
            let start = *i;
            while *i < b.len()
                && (b[*i] == b'-'
                    || b[*i] == b'+'
                    || b[*i] == b'.'
                    || b[*i] == b'e'
                    || b[*i] == b'E'
                    || b[*i].is_ascii_digit())
            {
                *i += 1;
            }
            let t = std::str::from_utf8(&b[start..*i]).unwrap();
            if t.contains(['.', 'e', 'E']) {
                J::Dbl(t.parse().unwrap())
            } else {
                J::Int(t.parse().unwrap())
            }
        }
    }
}

/// Objects whose keys are data (session ids, expiry times): compared by
/// entry count and the shape of their values, not by key.
const DATA_KEYED: &[&str] = &[
    "expiry_time_to_session_ids",
    "session_id_to_ephemeral_paths",
    "session_id_to_watched_paths",
];

/// Where `rk`'s shape differs from `zk`'s: names, types, the key order at
/// the top level (`ordered`), the key sets below it (a Java bean's
/// property order comes from reflection and varies between ZooKeeper runs).
fn shape_diff(path: &str, zk: &J, rk: &J, ordered: bool, out: &mut Vec<String>) {
    if zk.kind() != rk.kind() {
        out.push(format!(
            "{path}: ZooKeeper has {} {zk:?}, ringkeeper {} {rk:?}",
            zk.kind(),
            rk.kind()
        ));
        return;
    }
    match (zk, rk) {
        (J::Obj(z), J::Obj(r)) => {
            let leaf = path.rsplit('.').next().unwrap_or("");
            if DATA_KEYED.contains(&leaf) {
                // ZooKeeper keeps an expiry time's emptied set until that
                // time passes; ringkeeper lists only sets with sessions.
                let full = |e: &Vec<(String, J)>| -> Vec<(String, J)> {
                    e.iter()
                        .filter(|(_, v)| v != &J::Arr(vec![]))
                        .cloned()
                        .collect()
                };
                let (z, r) = (full(z), full(r));
                if z.len() != r.len() {
                    out.push(format!("{path}: {} entries vs {}", z.len(), r.len()));
                } else if let (Some(a), Some(b)) = (z.first(), r.first()) {
                    shape_diff(&format!("{path}.*"), &a.1, &b.1, false, out);
                }
                return;
            }
            let (mut zk_keys, mut rk_keys) = (zk.keys(), rk.keys());
            if !ordered {
                zk_keys.sort_unstable();
                rk_keys.sort_unstable();
            }
            if zk_keys != rk_keys {
                out.push(format!(
                    "{path}: keys differ:\n  ZooKeeper  {zk_keys:?}\n  ringkeeper {rk_keys:?}"
                ));
                return;
            }
            for (k, zv) in z {
                shape_diff(&format!("{path}.{k}"), zv, rk.at(k), false, out);
            }
        }
        (J::Arr(z), J::Arr(r)) => {
            if z.len() != r.len() {
                out.push(format!("{path}: {} items vs {}", z.len(), r.len()));
            } else if let (Some(a), Some(b)) = (z.first(), r.first()) {
                shape_diff(&format!("{path}[0]"), a, b, false, out);
            }
        }
        _ => {}
    }
}

// ---------------------------------------------------------------------
// Servers

/// A server with its AdminServer on 127.0.0.1:<admin>.
fn start_with_admin(flavor: Flavor) -> (Server, u16) {
    let admin = free_port();
    let server = start(
        flavor,
        &format!(
            "admin.enableServer=true\nadmin.serverAddress=127.0.0.1\nadmin.serverPort={admin}\n"
        ),
    );
    wait_for_http("127.0.0.1", admin);
    (server, admin)
}

/// Waits until something answers HTTP on ip:port.
fn wait_for_http(ip: &str, port: u16) {
    let start = Instant::now();
    loop {
        if let Ok(mut s) = TcpStream::connect((ip, port)) {
            let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
            if write!(s, "GET /commands/ruok HTTP/1.0\r\n\r\n").is_ok() {
                let mut buf = [0u8; 12];
                if s.read_exact(&mut buf).is_ok() && buf.starts_with(b"HTTP/1.") {
                    return;
                }
            }
        }
        assert!(
            start.elapsed() < WAIT_MAX,
            "no AdminServer on {ip}:{port} within {WAIT_MAX:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The same client activity on a server: a session with a persistent and
/// an ephemeral node, a data watch on /a and an exists watch on /nope.
fn client_activity(port: u16) -> Conn {
    let mut c = Conn::handshake(port, 30_000);
    assert_eq!(c.call(1, OP_CREATE, &create_body("/a", b"x", 0)).0.err, 0);
    assert_eq!(c.call(2, OP_CREATE, &create_body("/e", b"y", 1)).0.err, 0);
    assert_eq!(c.call(3, OP_GET_DATA, &get_body("/a", true)).0.err, 0);
    assert_eq!(
        c.call(4, OP_EXISTS, &get_body("/nope", true)).0.err,
        ERR_NO_NODE
    );
    c
}

fn command(ip: &str, port: u16, target: &str) -> (Http, J) {
    let r = http(ip, port, "GET", &format!("/commands/{target}"));
    assert_eq!(r.status, 200, "{target} on {ip}:{port}: {}", r.body);
    assert_eq!(
        r.header("Content-Type"),
        Some("application/json"),
        "{target}"
    );
    let j = parse_json(&r.body);
    (r, j)
}

/// `error` and `command` as ZooKeeper's runCommand puts them.
fn command_and_error(j: &J) -> (J, J) {
    (j.at("command").clone(), j.at("error").clone())
}

/// mntr keys ZooKeeper makes per namespace or per learner handler, which
/// ringkeeper does not have (see `src/admin/four_letter.rs`).
fn is_dynamic_monitor_key(k: &str) -> bool {
    k.contains("_learner_handler_qp_") || k.ends_with("_per_namespace")
}

/// Compares one command's answers; returns the differences.
fn compare(name: &str, zk: &J, rk: &J) -> Vec<String> {
    compare_with(name, zk, rk, true)
}

/// As `compare`; `monitor_order`: whether monitor's keys must come in
/// ZooKeeper's order. Not on ensemble members: there ZooKeeper's own
/// order (its metrics provider's ConcurrentHashMap, to which the roles
/// add and remove gauges) differs from run to run.
fn compare_with(name: &str, zk: &J, rk: &J, monitor_order: bool) -> Vec<String> {
    let mut out = Vec::new();
    if UNKNOWN_TO_RINGKEEPER.contains(&name) {
        assert_eq!(
            rk,
            &J::Obj(vec![
                ("command".into(), J::s(name)),
                ("error".into(), J::Str(format!("Unknown command: {name}"))),
            ]),
            "{name}: ringkeeper has no JVM system properties"
        );
        assert_eq!(zk.at("error"), &J::Null, "{name} on ZooKeeper");
        return out;
    }
    if command_and_error(zk) != command_and_error(rk) {
        out.push(format!(
            "{name}: command/error differ: ZooKeeper {:?}, ringkeeper {:?}",
            command_and_error(zk),
            command_and_error(rk)
        ));
    }
    if zk.at("command") == &J::s("monitor") {
        // The same keys in the same order, but for ZooKeeper's dynamic ones.
        let zk_keys: Vec<&str> = zk
            .keys()
            .into_iter()
            .filter(|k| !is_dynamic_monitor_key(k))
            .collect();
        let rk_keys = rk.keys();
        let missing: Vec<_> = zk_keys.iter().filter(|k| !rk_keys.contains(k)).collect();
        let extra: Vec<_> = rk_keys.iter().filter(|k| !zk_keys.contains(k)).collect();
        if !missing.is_empty() || !extra.is_empty() {
            out.push(format!(
                "{name}: missing {missing:?}, not in ZooKeeper {extra:?}"
            ));
        } else if monitor_order && zk_keys != rk_keys {
            let at = zk_keys.iter().zip(&rk_keys).position(|(a, b)| a != b);
            let at = at.unwrap_or(0);
            out.push(format!(
                "{name}: key order differs at {at}:\n  ZooKeeper  {:?}\n  ringkeeper {:?}",
                &zk_keys[at.saturating_sub(2)..(at + 4).min(zk_keys.len())],
                &rk_keys[at.saturating_sub(2)..(at + 4).min(rk_keys.len())]
            ));
        }
        for k in &rk_keys {
            if let Some(zv) = zk.get(k) {
                shape_diff(&format!("{name}.{k}"), zv, rk.at(k), false, &mut out);
            }
        }
        return out;
    }
    shape_diff(name, zk, rk, true, &mut out);
    out
}

/// Runs `script` with bash, bounded; its exit status.
fn bash(script: &str) -> i32 {
    let mut child = Command::new("bash")
        .arg("-c")
        .arg(script)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("bash");
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status.code().unwrap_or(-1);
        }
        if start.elapsed() > Duration::from_secs(30) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{script:?} did not finish within 30 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Whether a probe passes as a kubelet decides it: it fails only after
/// failureThreshold (the chart's default: 6) failed runs in a row, a
/// periodSeconds apart (here 1 s); a run that times out (2 s in the
/// chart's commands) counts as failed.
fn probe_passes(script: &str) -> bool {
    for attempt in 0..6 {
        if attempt > 0 {
            std::thread::sleep(Duration::from_secs(1));
        }
        if bash(script) == 0 {
            return true;
        }
    }
    false
}

/// The Bitnami chart's probes, as its statefulset template writes them
/// (probeCommandTimeout 2), on this server's ports: liveness and
/// readiness with `useAdmin`, and the four-letter-word ones.
fn bitnami_liveness_admin(admin: u16) -> String {
    format!("curl -s -m 2 http://localhost:{admin}/commands/ruok | grep ruok")
}

fn bitnami_readiness_admin(admin: u16) -> String {
    format!("curl -s -m 2 http://localhost:{admin}/commands/ruok | grep error | grep null")
}

fn bitnami_ruok(client: u16) -> String {
    format!("echo \"ruok\" | timeout 2 nc -w 2 localhost {client} | grep imok")
}

fn assert_tools() {
    for tool in ["curl", "nc", "timeout"] {
        assert_eq!(
            bash(&format!("command -v {tool}")),
            0,
            "{tool} is needed for the chart's probes (scripts/test-all.sh installs it)"
        );
    }
}

// ---------------------------------------------------------------------
// Standalone

#[test]
fn standalone_commands_answer_as_zookeepers() {
    let (zk, zk_admin) = start_with_admin(Flavor::ZooKeeper);
    let (rk, rk_admin) = start_with_admin(Flavor::Ringkeeper);
    let _zk_client = client_activity(zk.port);
    let _rk_client = client_activity(rk.port);
    let mut problems = Vec::new();
    let mut answers = Vec::new();
    for name in NAMES {
        let (_, z) = command("127.0.0.1", zk_admin, name);
        let (_, r) = command("127.0.0.1", rk_admin, name);
        problems.extend(compare(name, &z, &r));
        answers.push((name, z, r));
    }
    for extra in [
        "nosuch",
        "RUOK",
        "ruok/x",
        "%72uok",
        "set_trace_mask?traceMask=306",
        "set_trace_mask?traceMask=abc",
        "stmk?traceMask=%2B306",
    ] {
        let (_, z) = command("127.0.0.1", zk_admin, extra);
        let (_, r) = command("127.0.0.1", rk_admin, extra);
        // Fixed answers: equal as a whole.
        if z != r {
            problems.push(format!("{extra}: ZooKeeper {z:?}\n  ringkeeper {r:?}"));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));

    // Values that are the same on both.
    let of = |name: &str| {
        let (_, z, r) = answers.iter().find(|(n, _, _)| **n == name).unwrap();
        (z.clone(), r.clone())
    };
    for name in [
        "ruok",
        "lead",
        "zabstate",
        "voting_view",
        "observers",
        "hash",
        "isro",
        "gtmk",
        "stmk",
        "wchs",
        "orst",
        "crst",
        "srst",
    ] {
        let (z, r) = of(name);
        assert_eq!(z, r, "{name}");
    }
    assert_eq!(
        of("ruok").1,
        J::Obj(vec![
            ("command".into(), J::s("ruok")),
            ("error".into(), J::Null)
        ])
    );
    // Standalone: the leader command's own error comes first.
    assert_eq!(of("leader").1.keys(), ["error", "command"]);
    assert_eq!(of("wchs").1.at("num_total_watches"), &J::Int(2));
    let (z, r) = of("wchp");
    assert_eq!(z.at("path_to_session_ids").keys(), ["/a", "/nope"]);
    assert_eq!(r.at("path_to_session_ids").keys(), ["/a", "/nope"]);
    let (z, r) = of("dump");
    for j in [&z, &r] {
        let J::Obj(owners) = j.at("session_id_to_ephemeral_paths") else {
            panic!("{j:?}")
        };
        assert_eq!(owners.len(), 1);
        assert_eq!(owners[0].1, J::Arr(vec![J::s("/e")]));
    }
    let (z, r) = of("conf");
    for key in [
        "tick_time",
        "max_client_cnxns",
        "min_session_timeout",
        "max_session_timeout",
        "server_id",
        "client_port_listen_backlog",
    ] {
        assert_eq!(z.at(key), r.at(key), "configuration.{key}");
    }
    assert_eq!(r.at("client_port"), &J::Int(i64::from(rk.port)));
    // initial_configuration is each one's own zoo.cfg, as written.
    for (j, server) in [(of("icfg").0, &zk), (of("icfg").1, &rk)] {
        let text = std::fs::read_to_string(server.dir.path().join("zoo.cfg")).unwrap();
        assert_eq!(j.at("initial_configuration"), &J::Str(text));
    }
    let (z, r) = of("stat");
    assert_eq!(z.at("connections").len(), 1);
    assert_eq!(r.at("connections").len(), 1);
    assert_eq!(r.at("server_stats").at("server_state"), &J::s("standalone"));
    assert_eq!(r.at("read_only"), &J::Bool(false));

    // The list of commands: ZooKeeper's, but for system_properties.
    let zl = http("127.0.0.1", zk_admin, "GET", "/commands");
    let rl = http("127.0.0.1", rk_admin, "GET", "/commands");
    assert_eq!((zl.status, rl.status), (200, 200));
    let expected = zl.body.replace(
        "<a href=\"/commands/system_properties\">system_properties</a>\n<br/>\n",
        "",
    );
    assert_ne!(expected, zl.body, "ZooKeeper lists system_properties");
    assert_eq!(rl.body, expected);
    assert_eq!(
        http("127.0.0.1", rk_admin, "GET", "/commands/").body,
        expected
    );

    // Status codes, path by path and method by method.
    for (method, target) in [
        ("GET", "/"),
        ("GET", "/foo"),
        ("GET", "/Commands/ruok"),
        ("HEAD", "/commands/ruok"),
        ("HEAD", "/foo"),
        ("POST", "/commands/ruok"),
        ("POST", "/foo"),
        ("PUT", "/commands/ruok"),
        ("DELETE", "/commands/ruok"),
        ("TRACE", "/commands/ruok"),
        ("OPTIONS", "/commands/ruok"),
        ("FOO", "/commands/ruok"),
        ("GET", "/commands/%zz"),
    ] {
        let z = http("127.0.0.1", zk_admin, method, target);
        let r = http("127.0.0.1", rk_admin, method, target);
        assert_eq!(z.status, r.status, "{method} {target}");
        if method == "HEAD" {
            assert_eq!((z.body.as_str(), r.body.as_str()), ("", ""), "{target}");
        }
        if method == "HEAD" && target == "/commands/ruok" {
            assert_eq!(z.header("Content-Length"), r.header("Content-Length"));
        }
        if method == "OPTIONS" {
            assert_eq!(z.header("Allow"), r.header("Allow"));
        }
    }
}

#[test]
fn probes_pass_on_both_standalone() {
    assert_tools();
    for flavor in [Flavor::ZooKeeper, Flavor::Ringkeeper] {
        let (server, admin) = start_with_admin(flavor);
        // Kubernetes' httpGet probe: any status from 200 to 399 passes.
        let r = http("127.0.0.1", admin, "GET", "/commands/ruok");
        assert_eq!(r.status, 200, "{flavor:?}");
        assert!(
            r.body.contains("\"error\" : null"),
            "{flavor:?}: {}",
            r.body
        );
        // The same with curl, as a probe script would.
        let curl =
            format!("curl -s http://127.0.0.1:{admin}/commands/ruok | grep -q '\"error\" : null'");
        assert!(probe_passes(&curl), "{flavor:?}: {curl}");
        for probe in [
            bitnami_liveness_admin(admin),
            bitnami_readiness_admin(admin),
            bitnami_ruok(server.port),
        ] {
            assert!(probe_passes(&probe), "{flavor:?}: {probe}");
        }
    }
}

#[test]
fn a_port_in_use_leaves_zookeeper_exited_and_ringkeeper_serving() {
    // Something else holds the AdminServer's port.
    // (A port free a moment ago may be taken by the time it is bound: a
    // bounded retry with another.)
    let (admin, _holder) = (0..20)
        .find_map(|_| {
            let port = free_port();
            std::net::TcpListener::bind(("127.0.0.1", port))
                .ok()
                .map(|l| (port, l))
        })
        .expect("a port to hold within 20 tries");
    let cfg = format!(
        "admin.enableServer=true\nadmin.serverAddress=127.0.0.1\nadmin.serverPort={admin}\n"
    );
    // ringkeeper: serves clients, without the AdminServer, and says why.
    let rk = start(Flavor::Ringkeeper, &cfg);
    assert!(rk.four_letter("ruok").contains("imok"));
    let log = std::fs::read_to_string(rk.dir.path().join("server.log")).unwrap();
    assert!(
        log.contains(&format!(
            "Problem starting AdminServer on address 127.0.0.1, port {admin} and command URL /commands"
        )),
        "{log}"
    );
    // A standalone ZooKeeper 3.8 exits with ERROR_STARTING_ADMIN_SERVER (4).
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    let zoo = dir.path().join("zoo.cfg");
    std::fs::write(
        &zoo,
        format!(
            "tickTime=2000\ndataDir={}\nclientPort={}\nclientPortAddress=127.0.0.1\n{cfg}",
            data.display(),
            free_port()
        ),
    )
    .unwrap();
    let mut java = Command::new("java")
        .arg(format!("-Dzookeeper.log.dir={}", dir.path().display()))
        .arg("-cp")
        .arg(format!(
            "{}:{}:{}:{}",
            common::ZK_CONF_DIR,
            common::ZK_JAR,
            common::NETTY_CODEC_JAR,
            common::SERVLET_API_JAR
        ))
        .arg("org.apache.zookeeper.server.quorum.QuorumPeerMain")
        .arg(&zoo)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let start = Instant::now();
    let status = loop {
        if let Some(s) = java.try_wait().unwrap() {
            break s;
        }
        if start.elapsed() > WAIT_MAX {
            let _ = java.kill();
            let _ = java.wait();
            panic!("ZooKeeper kept running with its AdminServer port in use");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(status.code(), Some(4));
}

#[test]
fn admin_server_settings_are_used() {
    let admin = free_port();
    let rk = start(
        Flavor::Ringkeeper,
        &format!(
            "admin.enableServer=true\nadmin.serverAddress=127.0.0.1\nadmin.serverPort={admin}\n\
             admin.commandURL=/zk/cmds\nadmin.idleTimeout=1000\n"
        ),
    );
    wait_for_port(admin);
    let r = http("127.0.0.1", admin, "GET", "/zk/cmds/ruok");
    assert_eq!(r.status, 200);
    assert_eq!(parse_json(&r.body).at("error"), &J::Null);
    let r = http("127.0.0.1", admin, "GET", "/zk/cmds/srvr");
    assert_eq!(r.status, 200);
    assert_eq!(parse_json(&r.body).at("command"), &J::s("server_stats"));
    assert!(http("127.0.0.1", admin, "GET", "/zk/cmds")
        .body
        .contains("<a href=\"/zk/cmds/ruok\">ruok</a>"));
    assert_eq!(
        http("127.0.0.1", admin, "GET", "/commands/ruok").status,
        404
    );

    // idleTimeout: a connection that sends nothing is closed after it.
    let mut idle = TcpStream::connect(("127.0.0.1", admin)).unwrap();
    idle.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let opened = Instant::now();
    let mut buf = [0u8; 16];
    assert_eq!(idle.read(&mut buf).unwrap_or(0), 0);
    let held = opened.elapsed();
    assert!(
        held >= Duration::from_millis(900) && held < Duration::from_secs(5),
        "closed after {held:?}"
    );

    // A request head over 8 KiB: 431, as Jetty's default.
    let mut big = TcpStream::connect(("127.0.0.1", admin)).unwrap();
    big.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let filler = "x".repeat(9000);
    let _ = write!(
        big,
        "GET /zk/cmds/ruok HTTP/1.1\r\nHost: h\r\nX-Filler: {filler}\r\n\r\n"
    );
    let mut answer = String::new();
    let _ = big.read_to_string(&mut answer);
    assert!(answer.starts_with("HTTP/1.1 431 "), "{answer:.80}");

    // At most 32 connections at once: the next is closed unanswered,
    // and once they go, requests are answered again.
    let held: Vec<TcpStream> = (0..32)
        .map(|_| TcpStream::connect(("127.0.0.1", admin)).unwrap())
        .collect();
    std::thread::sleep(Duration::from_millis(200));
    let mut over = TcpStream::connect(("127.0.0.1", admin)).unwrap();
    over.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let _ = write!(over, "GET /zk/cmds/ruok HTTP/1.0\r\n\r\n");
    let mut text = String::new();
    let _ = over.read_to_string(&mut text);
    assert_eq!(text, "", "a connection past the bound got an answer");
    drop(held);
    // Until the server has seen them go, a new connection may still be
    // closed at accept.
    let start = Instant::now();
    loop {
        if let Some(r) = try_http("127.0.0.1", admin, "/zk/cmds/ruok") {
            assert_eq!(r, 200);
            break;
        }
        assert!(start.elapsed() < WAIT_MAX, "no answer after the bound");
        std::thread::sleep(Duration::from_millis(50));
    }
    drop(rk);
}

/// A GET's status, or None when the connection closed without an answer.
fn try_http(ip: &str, port: u16, target: &str) -> Option<u16> {
    let mut s = TcpStream::connect((ip, port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(20))).ok()?;
    write!(s, "GET {target} HTTP/1.0\r\n\r\n").ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    text.split(' ').nth(1)?.parse().ok()
}

#[test]
fn commands_gather_every_shard() {
    let (admin, metrics) = (free_port(), free_port());
    let rk = start(
        Flavor::Ringkeeper,
        &format!(
            "admin.enableServer=true\nadmin.serverAddress=127.0.0.1\nadmin.serverPort={admin}\n\
             ringkeeper.shards=2\nmetricsProvider.className=org.apache.zookeeper.metrics.\
             prometheus.PrometheusMetricsProvider\nmetricsProvider.httpHost=127.0.0.1\n\
             metricsProvider.httpPort={metrics}\n"
        ),
    );
    wait_for_http("127.0.0.1", admin);
    // The kernel spreads connections over the shards' SO_REUSEPORT
    // listeners by a hash of the addresses: sessions, each with a watch on
    // a path of its own, are opened until both shards hold some (at most
    // 32: all on one shard has odds of 2^-31).
    let shard_counts = || -> Vec<u64> {
        let text = http("127.0.0.1", metrics, "GET", "/metrics").body;
        (0..2)
            .map(|shard| {
                let line = text
                    .lines()
                    .find(|l| {
                        l.starts_with(&format!(
                            "ringkeeper_shard_connections{{shard=\"{shard}\"}} "
                        ))
                    })
                    .unwrap_or_else(|| panic!("no connection count for shard {shard}"));
                line.rsplit(' ').next().unwrap().parse().unwrap()
            })
            .collect()
    };
    let mut clients: Vec<Conn> = Vec::new();
    while clients.len() < 4 || shard_counts().contains(&0) {
        assert!(
            clients.len() < 32,
            "every connection on one shard: {:?}",
            shard_counts()
        );
        let i = clients.len();
        let mut c = Conn::handshake(rk.port, 30_000);
        let path = format!("/w{i}");
        assert_eq!(
            c.call(1, OP_EXISTS, &get_body(&path, true)).0.err,
            ERR_NO_NODE
        );
        clients.push(c);
    }
    let n = clients.len();
    assert_eq!(shard_counts().iter().sum::<u64>(), n as u64);
    let (_, cons) = command("127.0.0.1", admin, "cons");
    assert_eq!(cons.at("connections").len(), n, "{cons:?}");
    let (_, wchs) = command("127.0.0.1", admin, "wchs");
    assert_eq!(wchs.at("num_connections"), &J::Int(n as i64));
    assert_eq!(wchs.at("num_total_watches"), &J::Int(n as i64));
    let (_, wchc) = command("127.0.0.1", admin, "wchc");
    assert_eq!(wchc.at("session_id_to_watched_paths").len(), n);
    let (_, dump) = command("127.0.0.1", admin, "dump");
    let sessions: usize = match dump.at("expiry_time_to_session_ids") {
        J::Obj(sets) => sets.iter().map(|(_, ids)| ids.len()).sum(),
        other => panic!("{other:?}"),
    };
    assert_eq!(sessions, n);
    let (_, mntr) = command("127.0.0.1", admin, "mntr");
    assert_eq!(mntr.at("watch_count"), &J::Int(n as i64));
    assert_eq!(mntr.at("num_alive_connections"), &J::Int(n as i64));
    drop(clients);
}

#[test]
fn standalone_exports_the_dashboard_names() {
    let metrics = free_port();
    let _rk = start(
        Flavor::Ringkeeper,
        &format!(
            "metricsProvider.className=org.apache.zookeeper.metrics.prometheus.\
             PrometheusMetricsProvider\nmetricsProvider.httpHost=127.0.0.1\n\
             metricsProvider.httpPort={metrics}\n"
        ),
    );
    wait_for_port(metrics);
    let e = scrape_at("127.0.0.1", metrics);
    // quorum_size is a QuorumZooKeeperServer gauge: not on a standalone
    // ZooKeeper either; nor are the leader's.
    let missing: Vec<&str> = ALERT_AND_DASHBOARD_NAMES
        .iter()
        .copied()
        .filter(|n| *n != "quorum_size" && !e.contains(n))
        .collect();
    assert!(missing.is_empty(), "missing {missing:?}");
    for n in LEADER_ONLY_NAMES.iter().chain(&["quorum_size"]) {
        assert!(!e.contains(n), "{n} on a standalone server");
    }
    assert_eq!(e.value("election_time_count"), 0.0);
}

#[test]
fn no_command_shows_a_secret() {
    const SECRET: &str = "TS-admin-s3cret-6631";
    // super:D/InIHSb7yEEbrWz8b9l71RjZJU= is the digest of super:test.
    let digest = "D/InIHSb7yEEbrWz8b9l71RjZJU=";
    let admin = free_port();
    let rk = start(
        Flavor::Ringkeeper,
        &format!(
            "admin.enableServer=true\nadmin.serverAddress=127.0.0.1\nadmin.serverPort={admin}\n\
             ssl.trustStore.password={SECRET}\nsuperDigest=super:{digest}\n"
        ),
    );
    wait_for_http("127.0.0.1", admin);
    let _client = client_activity(rk.port);
    for name in NAMES {
        let r = http("127.0.0.1", admin, "GET", &format!("/commands/{name}"));
        assert!(!r.body.contains(SECRET), "{name} shows the password");
        assert!(!r.body.contains(digest), "{name} shows superDigest");
    }
    let (_, j) = command("127.0.0.1", admin, "initial_configuration");
    let J::Str(text) = j.at("initial_configuration") else {
        panic!("{j:?}")
    };
    assert!(
        text.contains("\nssl.trustStore.password=********\n"),
        "{text}"
    );
    assert!(text.contains("\nsuperDigest=********\n"), "{text}");
    assert!(
        text.contains(&format!("\nadmin.serverPort={admin}\n")),
        "{text}"
    );
}

/// Waits until ip:port accepts connections.
fn wait_for_port(port: u16) {
    let start = Instant::now();
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(start.elapsed() < WAIT_MAX, "nothing on port {port}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

// ---------------------------------------------------------------------
// Ensembles

/// A 3-member ensemble whose members serve the AdminServer on
/// 127.0.0.<id>:<admin> (and, for ringkeeper members, Prometheus metrics
/// on 127.0.0.<id>:<metrics>): each member is restarted with those lines
/// added to its zoo.cfg.
struct AdminCluster {
    cluster: Cluster,
    admin: u16,
    metrics: u16,
}

impl AdminCluster {
    fn start(flavors: &[Flavor]) -> AdminCluster {
        let mut cluster = Cluster::start_mixed(flavors);
        cluster.wait_for_leader(WAIT_MAX);
        let (admin, metrics) = (free_port(), free_port());
        for i in 0..cluster.size() {
            cluster.kill(i);
            let ip = format!("127.0.0.{}", i + 1);
            let mut lines = format!(
                "\nadmin.enableServer=true\nadmin.serverAddress={ip}\nadmin.serverPort={admin}\n"
            );
            if cluster.members[i].flavor == Flavor::Ringkeeper {
                lines.push_str(&format!(
                    "metricsProvider.className=org.apache.zookeeper.metrics.prometheus.\
                     PrometheusMetricsProvider\nmetricsProvider.httpHost={ip}\n\
                     metricsProvider.httpPort={metrics}\n"
                ));
            }
            let cfg = cluster.members[i].cfg.clone();
            let mut text = std::fs::read_to_string(&cfg).unwrap();
            text.push_str(&lines);
            std::fs::write(&cfg, text).unwrap();
            cluster.restart(i);
            cluster.wait_for_leader(WAIT_MAX);
        }
        for i in 0..cluster.size() {
            wait_for_http(&format!("127.0.0.{}", i + 1), admin);
        }
        AdminCluster {
            cluster,
            admin,
            metrics,
        }
    }

    fn ip(&self, index: usize) -> String {
        format!("127.0.0.{}", index + 1)
    }

    fn command(&self, index: usize, name: &str) -> J {
        command(&self.ip(index), self.admin, name).1
    }

    /// Waits until every member's AdminServer says it serves (ruok's error
    /// is null) and returns the leader's index.
    fn leader(&self) -> usize {
        let start = Instant::now();
        loop {
            let leader = self.cluster.wait_for_leader(WAIT_MAX);
            let serving =
                (0..self.cluster.size()).all(|i| self.command(i, "ruok").at("error") == &J::Null);
            if serving {
                return leader;
            }
            assert!(start.elapsed() < WAIT_MAX, "{}", self.cluster.report());
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

const ROLE_COMMANDS: &[&str] = &[
    "ruok",
    "monitor",
    "server_stats",
    "stats",
    "configuration",
    "connections",
    "dump",
    "dirs",
    "is_read_only",
    "watches",
    "watches_by_path",
    "watch_summary",
    "leader",
    "voting_view",
    "zabstate",
    "last_snapshot",
    "observers",
    "hash",
    "initial_configuration",
    "get_trace_mask",
    "environment",
];

/// What voting_view shows for a cluster, seen from member `me`.
fn expected_voting_view(c: &Cluster, me: usize) -> J {
    let mut entries = Vec::new();
    for (i, m) in c.members.iter().enumerate() {
        let client = if i == me {
            J::Str(m.client.to_string())
        } else {
            J::s("")
        };
        entries.push((
            (i + 1).to_string(),
            J::Obj(vec![
                (
                    "server_addresses".into(),
                    J::Arr(vec![J::Str(m.quorum.to_string())]),
                ),
                (
                    "election_addresses".into(),
                    J::Arr(vec![J::Str(m.election.to_string())]),
                ),
                ("client_address".into(), client),
                ("learner_type".into(), J::s("participant")),
            ]),
        ));
    }
    J::Obj(entries)
}

#[test]
fn ensemble_roles_answer_as_zookeepers() {
    assert_tools();
    let zk = AdminCluster::start(&[Flavor::ZooKeeper; 3]);
    let rk = AdminCluster::start(&[Flavor::Ringkeeper; 3]);
    let zk_leader = zk.leader();
    let rk_leader = rk.leader();
    let zk_follower = (zk_leader + 1) % 3;
    let rk_follower = (rk_leader + 1) % 3;
    let mut problems = Vec::new();
    for (role, zi, ri) in [
        ("leader", zk_leader, rk_leader),
        ("follower", zk_follower, rk_follower),
    ] {
        for name in ROLE_COMMANDS {
            let z = zk.command(zi, name);
            let r = rk.command(ri, name);
            problems.extend(
                compare_with(name, &z, &r, false)
                    .into_iter()
                    .map(|p| format!("{role}: {p}")),
            );
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));

    for (c, leader) in [(&zk, zk_leader), (&rk, rk_leader)] {
        let flavor = c.cluster.flavor;
        let leader_id = (leader + 1) as i64;
        for i in 0..3 {
            let is_leader = i == leader;
            let l = c.command(i, "lead");
            assert_eq!(
                l,
                J::Obj(vec![
                    ("is_leader".into(), J::Bool(is_leader)),
                    ("leader_id".into(), J::Int(leader_id)),
                    ("leader_ip".into(), J::Str(format!("127.0.0.{leader_id}"))),
                    ("command".into(), J::s("leader")),
                    ("error".into(), J::Null),
                ]),
                "{flavor:?} member {}",
                i + 1
            );
            let z = c.command(i, "zabstate");
            assert_eq!(z.at("myid"), &J::Int(i as i64 + 1));
            assert_eq!(z.at("is_leader"), &J::Bool(is_leader));
            assert_eq!(z.at("voting"), &J::Bool(true));
            assert_eq!(z.at("zabstate"), &J::s("broadcast"), "{flavor:?}");
            let m = &c.cluster.members[i];
            assert_eq!(
                z.at("quorum_address").at("one"),
                &J::Str(m.quorum.to_string())
            );
            assert_eq!(
                z.at("election_address").at("all_ports"),
                &J::Arr(vec![J::Int(i64::from(m.election.port()))])
            );
            assert_eq!(z.at("client_address"), &J::Str(m.client.to_string()));
            assert_eq!(
                c.command(i, "voting_view").at("current_config"),
                &expected_voting_view(&c.cluster, i),
                "{flavor:?} member {}",
                i + 1
            );
            let s = c.command(i, "srvr");
            assert_eq!(s.get("proposal_stats").is_some(), is_leader, "{flavor:?}");
            let state = if is_leader { "leader" } else { "follower" };
            assert_eq!(s.at("server_stats").at("server_state"), &J::s(state));
            assert_eq!(c.command(i, "conf").at("server_id"), &J::Int(i as i64 + 1));
            let mon = c.command(i, "mntr");
            assert_eq!(mon.at("server_state"), &J::s(state));
            let peer = if is_leader { "leading" } else { "following" };
            assert_eq!(mon.at("peer_state"), &J::Str(format!("{peer} - broadcast")));
            // Both probes pass on every member.
            let ip = c.ip(i);
            let ready = format!(
                "curl -s -m 2 http://{ip}:{}/commands/ruok | grep error | grep null",
                c.admin
            );
            assert!(probe_passes(&ready), "{flavor:?}: {ready}");
        }
    }

    // Prometheus: the names of ZooKeeper's alert rules and Grafana
    // dashboard, on ringkeeper's leader and follower.
    for (i, leading) in [(rk_leader, true), (rk_follower, false)] {
        let e = scrape_at(&rk.ip(i), rk.metrics);
        let mut missing: Vec<&str> = ALERT_AND_DASHBOARD_NAMES
            .iter()
            .copied()
            .filter(|n| !e.contains(n))
            .collect();
        for n in LEADER_ONLY_NAMES {
            if e.contains(n) != leading {
                missing.push(n);
            }
        }
        assert!(
            missing.is_empty(),
            "{} lacks (or, leader-only, has) {missing:?}",
            if leading { "the leader" } else { "a follower" }
        );
    }
    let leader_scrape = scrape_at(&rk.ip(rk_leader), rk.metrics);
    assert_eq!(leader_scrape.value("learners"), 2.0);
    assert_eq!(leader_scrape.value("quorum_size"), 3.0);
    // Each follower was synced by DIFF or SNAP at least once (more when
    // it restarted), and monitor counts the same.
    let syncs = leader_scrape.value("snap_count") + leader_scrape.value("diff_count");
    assert!(syncs >= 2.0, "{syncs} syncs");
    assert_eq!(syncs, mntr_syncs(&rk, rk_leader));

    // Without quorum: only the first member runs in each ensemble.
    let (mut zk, mut rk) = (zk, rk);
    for c in [&mut zk, &mut rk] {
        c.cluster.kill(1);
        c.cluster.kill(2);
    }
    for c in [&zk, &rk] {
        let flavor = c.cluster.flavor;
        let start = Instant::now();
        while c.command(0, "ruok").at("error") == &J::Null {
            assert!(start.elapsed() < WAIT_MAX, "{flavor:?} still serving");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    for name in NAMES {
        let z = zk.command_or_status(name);
        let r = rk.command_or_status(name);
        match *name {
            // ZooKeeper 3.8.0 answers 500 (no server object); ringkeeper
            // the monitor values with the not-serving error.
            "monitor" | "mntr" => {
                assert_eq!(z, Err(500), "{name} on ZooKeeper");
                let r = r.unwrap();
                assert_eq!(r.at("server_state"), &J::s("looking"));
                assert_eq!(r.at("command"), &J::s("monitor"));
                assert_eq!(r.at("error"), &J::s(NOT_SERVING));
            }
            n if UNKNOWN_TO_RINGKEEPER.contains(&n) => {
                assert_eq!(
                    r.unwrap().at("error"),
                    &J::Str(format!("Unknown command: {n}"))
                );
            }
            _ => {
                let (z, r) = (z.unwrap(), r.unwrap());
                let p = compare(name, &z, &r);
                assert!(p.is_empty(), "without quorum: {}", p.join("\n"));
                if ![
                    "environment",
                    "env",
                    "envi",
                    "get_trace_mask",
                    "gtmk",
                    "set_trace_mask",
                    "stmk",
                    "zabstate",
                ]
                .contains(name)
                {
                    assert_eq!(
                        r,
                        J::Obj(vec![
                            ("command".into(), J::s(name)),
                            ("error".into(), J::s(NOT_SERVING)),
                        ]),
                        "{name}"
                    );
                }
            }
        }
    }
    let zab = rk.command(0, "zabstate");
    assert_eq!(zab, zk.command(0, "zabstate"));
    assert_eq!(zab.at("zabstate"), &J::s(""));
    // Liveness (grep ruok) passes, readiness (error null) does not.
    for c in [&zk, &rk] {
        let flavor = c.cluster.flavor;
        let ip = c.ip(0);
        let alive = format!(
            "curl -s -m 2 http://{ip}:{}/commands/ruok | grep ruok",
            c.admin
        );
        let ready = format!(
            "curl -s -m 2 http://{ip}:{}/commands/ruok | grep error | grep null",
            c.admin
        );
        assert!(probe_passes(&alive), "{flavor:?}: {alive}");
        assert!(!probe_passes(&ready), "{flavor:?}: {ready}");
    }
}

impl AdminCluster {
    /// The first member's answer, or the HTTP status when it is not 200.
    fn command_or_status(&self, name: &str) -> Result<J, u16> {
        let r = http(&self.ip(0), self.admin, "GET", &format!("/commands/{name}"));
        if r.status == 200 {
            Ok(parse_json(&r.body))
        } else {
            Err(r.status)
        }
    }
}

/// snap_count + diff_count as the leader's monitor command shows them.
fn mntr_syncs(c: &AdminCluster, leader: usize) -> f64 {
    let m = c.command(leader, "monitor");
    let n = |k: &str| match m.at(k) {
        J::Int(v) => *v as f64,
        other => panic!("{k}: {other:?}"),
    };
    n("snap_count") + n("diff_count")
}

#[test]
fn a_mixed_ensemble_agrees_on_its_leader() {
    assert_tools();
    let c = AdminCluster::start(&[Flavor::ZooKeeper, Flavor::Ringkeeper, Flavor::Ringkeeper]);
    let leader = c.leader();
    for i in 0..3 {
        let l = c.command(i, "leader");
        assert_eq!(
            l.at("leader_id"),
            &J::Int(leader as i64 + 1),
            "member {}",
            i + 1
        );
        assert_eq!(l.at("is_leader"), &J::Bool(i == leader), "member {}", i + 1);
        let zab = c.command(i, "zabstate");
        assert_eq!(zab.at("zabstate"), &J::s("broadcast"), "member {}", i + 1);
        let ready = bitnami_readiness_admin_at(&c.ip(i), c.admin);
        assert!(probe_passes(&ready), "member {}: {ready}", i + 1);
        let alive = format!(
            "curl -s -m 2 http://{}:{}/commands/ruok | grep ruok",
            c.ip(i),
            c.admin
        );
        assert!(probe_passes(&alive), "member {}", i + 1);
    }
}

/// The chart's readiness command against another address than localhost.
fn bitnami_readiness_admin_at(ip: &str, admin: u16) -> String {
    bitnami_readiness_admin(admin).replace("localhost", ip)
}

// ---------------------------------------------------------------------
// Prometheus

/// Names in ZooKeeper's alert rules (zookeeperMonitor.md) and its Grafana
/// dashboard's queries that every role exports.
const ALERT_AND_DASHBOARD_NAMES: &[&str] = &[
    // Alert rules.
    "znode_count",
    "num_alive_connections",
    "approximate_data_size",
    "watch_count",
    "election_time_count",
    "open_file_descriptor_count",
    "fsynctime_sum",
    "snapshottime_sum",
    "avg_latency",
    // The dashboard.
    "quorum_size",
    "outstanding_requests",
    "max_latency",
    "min_latency",
    "global_sessions",
    "local_sessions",
    "ephemerals_count",
    "packets_received",
    "packets_sent",
    "connection_rejected",
    "connection_drop_count",
    "unrecoverable_error_count",
    "digest_mismatches_count",
    "election_time_sum",
    "commit_count",
    "snap_count",
    "proposal_count",
];

/// What only a leader registers (LeaderZooKeeperServer).
const LEADER_ONLY_NAMES: &[&str] = &["leader_uptime", "learners", "synced_observers"];

/// Sample names and values of one scrape.
struct Scrape(Vec<(String, f64)>);

impl Scrape {
    fn contains(&self, name: &str) -> bool {
        self.0.iter().any(|(n, _)| n == name)
    }

    fn value(&self, name: &str) -> f64 {
        self.0
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| *v)
            .unwrap_or_else(|| panic!("no {name}"))
    }
}

fn scrape_at(ip: &str, port: u16) -> Scrape {
    let r = http(ip, port, "GET", "/metrics");
    assert_eq!(r.status, 200);
    Scrape(
        r.body
            .lines()
            .filter(|l| !l.starts_with('#') && !l.is_empty())
            .filter_map(|l| {
                let (name, value) = l.rsplit_once(' ')?;
                let name = name.split('{').next()?.to_string();
                Some((name, value.parse().unwrap_or(f64::NAN)))
            })
            .collect(),
    )
}
