//! The Prometheus metrics endpoint (`metricsProvider.*` in zoo.cfg): off by
//! default, on with ZooKeeper's PrometheusMetricsProvider class; what it
//! counts against the requests a raw client made; its HTTP answers to good,
//! bad and slow clients, and that none of them disturbs ZooKeeper clients.
//!
//! Every exposition is checked by a strict parser of the text format
//! written here, and once by the Python Prometheus client's parser
//! (Debian's python3-prometheus-client, under /usr/bin/python3).
//! No timing assertions: waits are bounded loops for a state to be reached.

mod common;

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::prom::{scrape, scrape_until, Exposition, Kind};
use common::raw::*;
use common::{free_port, start_ringkeeper, Server};

const PROMETHEUS: &str = "org.apache.zookeeper.metrics.prometheus.PrometheusMetricsProvider";
const PYTHON: &str = "/usr/bin/python3";
/// How long a bounded wait for a state lasts before the test fails.
const WAIT_MAX: Duration = Duration::from_secs(20);
/// The server's bound on concurrent metrics connections (http::CONNS_MAX).
const HTTP_CONNS_MAX: usize = 16;

fn metrics_cfg(port: u16, extra: &str) -> String {
    format!(
        "metricsProvider.className={PROMETHEUS}\nmetricsProvider.httpHost=127.0.0.1\n\
         metricsProvider.httpPort={port}\nmetricsProvider.exportJvmInfo=true\n{extra}"
    )
}

/// A server with metrics on; returns it and the metrics port.
fn start_with_metrics(extra: &str) -> (Server, u16) {
    let port = free_port();
    let server = start_ringkeeper(&metrics_cfg(port, extra));
    (server, port)
}

// ---------------------------------------------------------------------------
// HTTP, by hand: the exact bytes matter here.

struct HttpAnswer {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl HttpAnswer {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Sends `request` as is and reads until the server closes. None: closed
/// without an answer.
fn http_raw(port: u16, request: &[u8]) -> Option<HttpAnswer> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect to the metrics port");
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    // The server may answer (431) and close before it read everything.
    let _ = s.write_all(request);
    let mut raw = Vec::new();
    let _ = s.read_to_end(&mut raw);
    parse_http(&raw)
}

fn parse_http(raw: &[u8]) -> Option<HttpAnswer> {
    if raw.is_empty() {
        return None;
    }
    let text = String::from_utf8(raw.to_vec()).expect("UTF-8 answer");
    let (head, body) = text.split_once("\r\n\r\n").expect("a complete head");
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap();
    let mut parts = status_line.splitn(3, ' ');
    assert_eq!(parts.next(), Some("HTTP/1.1"), "{status_line}");
    let status = parts.next().unwrap().parse().unwrap();
    let headers = lines
        .map(|l| {
            let (n, v) = l.split_once(':').expect("header with a colon");
            (n.to_string(), v.trim().to_string())
        })
        .collect();
    let answer = HttpAnswer {
        status,
        headers,
        body: body.to_string(),
    };
    if let Some(len) = answer.header("Content-Length") {
        let len: usize = len.parse().unwrap();
        if !status_line.contains("200") || !answer.body.is_empty() {
            assert_eq!(answer.body.len(), len, "Content-Length");
        }
    }
    assert_eq!(answer.header("Connection"), Some("close"));
    Some(answer)
}

fn get(port: u16, path: &str) -> HttpAnswer {
    let req = format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAccept: */*\r\n\r\n");
    http_raw(port, req.as_bytes()).expect("an answer")
}

#[test]
fn the_strict_parser_rejects_what_it_should() {
    let good = "# HELP a A\n# TYPE a gauge\na 1\n# HELP s S\n# TYPE s summary\n\
                s{quantile=\"0.5\"} NaN\ns_sum 1\ns_count 2\n";
    let e = Exposition::parse(good).unwrap();
    assert_eq!(e.value("s_count"), 2.0);
    for bad in [
        "# HELP a A\n# TYPE a gauge\na 1",
        "a 1\n",
        "# TYPE a gauge\na 1\n",
        "# HELP a A\n# TYPE a gauge\na 1\na 2\n",
        "# HELP a A\n# TYPE a gauge\na{x=\"1\",x=\"2\"} 1\n",
        "# HELP a A\n# TYPE a gauge\na{x=1} 1\n",
        "# HELP a A\n# TYPE a gauge\na one\n",
        "# HELP a A\n# TYPE a gauge\na  1\n",
        "# HELP a A\n# TYPE a gauge\na{x=\"\\q\"} 1\n",
        "# HELP a A\n# TYPE a gaug\na 1\n",
        "# HELP s S\n# TYPE s summary\ns 1\n",
        "# HELP s S\n# TYPE s summary\ns_sum{quantile=\"0.5\"} 1\n",
        "# HELP a A\n# TYPE a gauge\n# HELP b B\n# TYPE b gauge\nb 1\na 1\n",
        "# HELP a A\n# TYPE a gauge\na 1\n# HELP b B\n# TYPE b gauge\nb 1\n# TYPE a gauge\n",
    ] {
        assert!(Exposition::parse(bad).is_err(), "accepted {bad:?}");
    }
}

// ---------------------------------------------------------------------------
// Helpers on the ZooKeeper side.

/// The TCP ports process `pid` listens on (its sockets in /proc/PID/fd,
/// matched with the listening sockets of its network namespace).
fn listening_ports(pid: u32) -> BTreeSet<u16> {
    let inodes: HashSet<String> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .expect("the server's fds")
        .filter_map(|fd| {
            let link = std::fs::read_link(fd.ok()?.path()).ok()?;
            let link = link.to_str()?;
            Some(
                link.strip_prefix("socket:[")?
                    .strip_suffix(']')?
                    .to_string(),
            )
        })
        .collect();
    let mut ports = BTreeSet::new();
    for table in ["tcp", "tcp6"] {
        let text = std::fs::read_to_string(format!("/proc/{pid}/net/{table}")).unwrap_or_default();
        for line in text.lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            // local_address is f[1] (ADDR:PORT in hex), st f[3], inode f[9].
            if f.len() > 9 && f[3] == "0A" && inodes.contains(f[9]) {
                let port = f[1].rsplit(':').next().unwrap();
                ports.insert(u16::from_str_radix(port, 16).unwrap());
            }
        }
    }
    ports
}

fn set_body(path: &str, data: &[u8]) -> Vec<u8> {
    let mut b = Vec::new();
    put_str(&mut b, path);
    put_buf(&mut b, data);
    put_i32(&mut b, -1);
    b
}

fn mntr(server: &Server) -> BTreeMap<String, String> {
    server
        .four_letter("mntr")
        .lines()
        .filter_map(|l| {
            let (k, v) = l.split_once('\t')?;
            Some((k.to_string(), v.to_string()))
        })
        .collect()
}

// ---------------------------------------------------------------------------
// The tests.

#[test]
fn metrics_are_off_by_default() {
    // Host and port alone do not turn the endpoint on (as in ZooKeeper,
    // whose default provider ignores them).
    let port = free_port();
    let server = start_ringkeeper(&format!(
        "metricsProvider.httpHost=127.0.0.1\nmetricsProvider.httpPort={port}\n"
    ));
    assert_eq!(
        listening_ports(server.pid()),
        BTreeSet::from([server.port]),
        "only the client port listens"
    );
    assert!(TcpStream::connect(("127.0.0.1", port)).is_err());
}

#[test]
fn metrics_count_the_requests_made() {
    const CONNS: usize = 3;
    const CREATES: usize = 12;
    const GETS: usize = 30;
    const SETS: usize = 7;
    // Two shards: the scrape gathers the other shard through its mailbox.
    let (server, mport) = start_with_metrics("ringkeeper.shards=2\n");
    assert_eq!(
        listening_ports(server.pid()),
        BTreeSet::from([server.port, mport])
    );
    let before = scrape(mport);
    let nodes_before = before.value("znode_count");
    assert_eq!(before.sum("ringkeeper_request_latency_us_count"), 0.0);

    let mut conns: Vec<Conn> = (0..CONNS)
        .map(|_| Conn::handshake(server.port, 30_000))
        .collect();
    let mut xid = 0;
    for i in 0..CREATES {
        let c = &mut conns[i % CONNS];
        xid += 1;
        let (r, _) = c.call(xid, OP_CREATE, &create_body(&format!("/m{i}"), b"d", 0));
        assert_eq!(r.err, 0);
    }
    for i in 0..GETS {
        let c = &mut conns[i % CONNS];
        xid += 1;
        let (r, _) = c.call(
            xid,
            OP_GET_DATA,
            &get_body(&format!("/m{}", i % CREATES), false),
        );
        assert_eq!(r.err, 0);
    }
    for i in 0..SETS {
        let c = &mut conns[i % CONNS];
        xid += 1;
        let (r, _) = c.call(xid, OP_SET_DATA, &set_body("/m0", b"new"));
        assert_eq!(r.err, 0);
    }
    // One watch, set by an exists on a missing node (counted as exists).
    xid += 1;
    let (r, _) = conns[0].call(xid, OP_EXISTS, &get_body("/absent", true));
    assert_eq!(r.err, ERR_NO_NODE);

    // Summaries: one per operation used, counts exact.
    let e = scrape(mport);
    let count = |op: &str| e.labelled("ringkeeper_request_latency_us_count", &[("op", op)]);
    assert_eq!(count("create"), CREATES as f64);
    assert_eq!(count("getData"), GETS as f64);
    assert_eq!(count("setData"), SETS as f64);
    assert_eq!(count("exists"), 1.0);
    assert_eq!(count("createSession"), CONNS as f64);
    assert_eq!(
        e.sum("ringkeeper_request_latency_us_count"),
        (CREATES + GETS + SETS + 1 + CONNS) as f64,
        "no other operation was counted"
    );
    assert_eq!(e.kind("ringkeeper_request_latency_us"), Kind::Summary);
    for op in ["create", "getData", "setData", "exists", "createSession"] {
        let mut last = 0.0;
        for q in ["0.5", "0.9", "0.99", "0.999"] {
            let v = e.labelled(
                "ringkeeper_request_latency_us",
                &[("op", op), ("quantile", q)],
            );
            assert!(v >= last, "{op}: quantiles grow");
            last = v;
        }
        let sum = e.labelled("ringkeeper_request_latency_us_sum", &[("op", op)]);
        assert!(sum >= 0.0 && sum.is_finite());
    }

    // Gauges, against what was done and what mntr says.
    assert_eq!(e.value("znode_count"), nodes_before + CREATES as f64);
    assert_eq!(e.value("num_alive_connections"), CONNS as f64);
    assert_eq!(e.sum("ringkeeper_shard_connections"), CONNS as f64);
    assert_eq!(e.value("global_sessions"), CONNS as f64);
    assert_eq!(e.sum("ringkeeper_shard_sessions"), CONNS as f64);
    assert_eq!(e.value("watch_count"), 1.0);
    assert_eq!(e.sum("ringkeeper_shard_watches"), 1.0);
    assert_eq!(e.value("outstanding_requests"), 0.0);
    assert_eq!(e.value("ephemerals_count"), 0.0);
    let shards: BTreeSet<String> = e
        .samples
        .iter()
        .filter(|s| s.name == "ringkeeper_shard_connections")
        .map(|s| s.labels["shard"].clone())
        .collect();
    assert_eq!(shards, BTreeSet::from(["0".to_string(), "1".to_string()]));
    let requests = (CREATES + GETS + SETS + 1) as f64;
    assert_eq!(
        e.value("packets_received"),
        e.sum("ringkeeper_shard_packets_received")
    );
    assert!(e.value("packets_received") >= requests + CONNS as f64);
    assert_eq!(e.kind("znode_count"), Kind::Gauge);
    assert_eq!(e.kind("connection_rejected"), Kind::Counter);

    // The consensus core: every session and write is one durable txn.
    let txns = (CONNS + CREATES + SETS) as f64;
    assert_eq!(e.value("ringkeeper_core_txns_total"), txns);
    let fsyncs = e.value("ringkeeper_core_fsyncs_total");
    assert!((1.0..=txns).contains(&fsyncs), "{fsyncs}");
    assert!(e.value("ringkeeper_core_fsync_batch_txns") >= 1.0);
    assert!(e.value("ringkeeper_core_fsync_batch_bytes") > 0.0);
    assert!(e.value("ringkeeper_core_log_bytes_total") > 0.0);
    // The fsync summary is published every 250 ms, and the core notes that
    // nothing is outstanding when its loop comes round after the last
    // batch (maybe just after the client got its reply): wait for both.
    let e = scrape_until(
        mport,
        "the fsync summary and no txn outstanding",
        WAIT_MAX,
        |e| {
            e.value("ringkeeper_core_fsync_latency_us_count") == fsyncs
                && e.value("ringkeeper_core_outstanding_txns") == 0.0
        },
    );
    let p999 = e.labelled("ringkeeper_core_fsync_latency_us", &[("quantile", "0.999")]);
    assert!(p999.is_finite() && p999 >= 0.0);

    // mntr tells the same about the tree (asked last: its connection
    // would otherwise count among the alive ones).
    let m = mntr(&server);
    for key in [
        "znode_count",
        "watch_count",
        "ephemerals_count",
        "approximate_data_size",
    ] {
        assert_eq!(
            m[&format!("zk_{key}")].parse::<f64>().unwrap(),
            e.value(key),
            "{key}"
        );
    }
    drop(conns);
}

#[test]
fn the_python_prometheus_parser_reads_the_exposition() {
    let (server, mport) = start_with_metrics("");
    let mut c = Conn::handshake(server.port, 30_000);
    let (r, _) = c.call(1, OP_CREATE, &create_body("/p", b"x", 0));
    assert_eq!(r.err, 0);
    let text = get(mport, "/metrics").body;
    let ours = Exposition::parse(&text).expect("valid");
    let script = "import sys\n\
        from prometheus_client.parser import text_string_to_metric_families as parse\n\
        fams = list(parse(sys.stdin.read()))\n\
        print(len(fams), sum(len(f.samples) for f in fams))\n";
    let mut child = Command::new(PYTHON)
        .arg("-c")
        .arg(script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{PYTHON}: {e}"));
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !stderr.contains("No module named 'prometheus_client'"),
        "apt-get install -y python3-prometheus-client"
    );
    assert!(
        out.status.success(),
        "python parser failed: {stderr}\n{text}"
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let (families, samples) = stdout.trim().split_once(' ').unwrap();
    assert_eq!(families.parse::<usize>().unwrap(), ours.families.len());
    assert_eq!(samples.parse::<usize>().unwrap(), ours.samples.len());
}

#[test]
fn http_answers_and_errors() {
    let (_server, mport) = start_with_metrics("");
    // Both paths serve the exposition; HEAD its head only.
    assert_eq!(get(mport, "/").status, 200);
    let m = get(mport, "/metrics?name[]=znode_count");
    assert_eq!(m.status, 200);
    let head = http_raw(
        mport,
        format!("HEAD /metrics HTTP/1.1\r\nHost: x:{mport}\r\n\r\n").as_bytes(),
    )
    .unwrap();
    assert_eq!(head.status, 200);
    assert!(head.body.is_empty());
    assert!(
        head.header("Content-Length")
            .unwrap()
            .parse::<usize>()
            .unwrap()
            > 0
    );
    // HTTP/1.0 and bare LF line ends are accepted.
    let old = http_raw(mport, b"GET /metrics HTTP/1.0\n\n").unwrap();
    assert_eq!(old.status, 200);
    assert!(old.body.contains("# TYPE znode_count gauge\n"));

    assert_eq!(get(mport, "/nope").status, 404);
    assert_eq!(get(mport, "/metrics/").status, 404);
    let post = http_raw(
        mport,
        b"POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc",
    )
    .unwrap();
    assert_eq!(post.status, 405);
    assert_eq!(post.header("Allow"), Some("GET, HEAD"));

    for bad in [
        &b"hello\r\n\r\n"[..],
        b"GET /metrics\r\n\r\n",
        b"GET /metrics HTTP/1.1\r\n\r\n",
        b"GET /metrics HTTP/1.1\r\nHost x\r\n\r\n",
        b"GET metrics HTTP/1.0\r\n\r\n",
        b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n",
    ] {
        let a = http_raw(mport, bad).expect("an answer before the close");
        assert_eq!(a.status, 400, "{:?}", String::from_utf8_lossy(bad));
    }
    assert_eq!(
        http_raw(mport, b"GET / HTTP/2.0\r\n\r\n").unwrap().status,
        505
    );
    // A head that never ends, past the bound.
    let mut huge = b"GET /metrics HTTP/1.1\r\nHost: x\r\n".to_vec();
    huge.extend(std::iter::repeat_n(b'a', 16 * 1024));
    assert_eq!(http_raw(mport, &huge).unwrap().status, 431);
    // A request cut short: 400 when the client half-closes.
    let mut s = TcpStream::connect(("127.0.0.1", mport)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\nHo").unwrap();
    s.shutdown(Shutdown::Write).unwrap();
    let mut raw = Vec::new();
    let _ = s.read_to_end(&mut raw);
    assert_eq!(parse_http(&raw).unwrap().status, 400);
    // After all that, the endpoint still answers.
    scrape(mport);
}

#[test]
fn slow_and_malformed_http_clients_do_not_disturb_zookeeper_clients() {
    let (server, mport) = start_with_metrics("");
    // Clients that start a request and never finish it take every slot.
    let slow: Vec<TcpStream> = (0..HTTP_CONNS_MAX)
        .map(|_| {
            let mut s = TcpStream::connect(("127.0.0.1", mport)).unwrap();
            s.write_all(b"GET /metrics HTTP/1.1\r\nHost: slow\r\n")
                .unwrap();
            s
        })
        .collect();
    // One more is closed at once, without an answer.
    let mut extra = TcpStream::connect(("127.0.0.1", mport)).unwrap();
    extra
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let _ = extra.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
    let mut raw = Vec::new();
    let _ = extra.read_to_end(&mut raw);
    assert!(raw.is_empty(), "{}", String::from_utf8_lossy(&raw));
    // Garbage on the metrics port, from another client meanwhile.
    let mut garbage = TcpStream::connect(("127.0.0.1", mport)).unwrap();
    let _ = garbage.write_all(&[0u8, 0, 0, 45, 0xff, 0xfe, 0x00, 0x01]);

    // ZooKeeper clients are served as usual all along.
    let mut c = Conn::handshake(server.port, 30_000);
    for i in 0..50 {
        let (r, _) = c.call(
            2 * i + 1,
            OP_CREATE,
            &create_body(&format!("/s{i}"), b"v", 0),
        );
        assert_eq!(r.err, 0);
        let (r, _) = c.call(2 * i + 2, OP_GET_DATA, &get_body(&format!("/s{i}"), false));
        assert_eq!(r.err, 0);
        assert!(r.body.starts_with(&[0, 0, 0, 1, b'v']));
    }
    assert!(server.four_letter("ruok") == "imok");

    // Once the slow clients give up, the endpoint answers again (their
    // slots come back as the server sees them go).
    drop(slow);
    drop(garbage);
    let start = Instant::now();
    loop {
        let req = format!("GET /metrics HTTP/1.1\r\nHost: 127.0.0.1:{mport}\r\n\r\n");
        if let Some(a) = http_raw(mport, req.as_bytes()) {
            assert_eq!(a.status, 200);
            let e = Exposition::parse(&a.body).expect("valid");
            assert_eq!(
                e.labelled("ringkeeper_request_latency_us_count", &[("op", "create")]),
                50.0
            );
            break;
        }
        assert!(start.elapsed() < WAIT_MAX, "the endpoint never came back");
        std::thread::sleep(Duration::from_millis(50));
    }
}

// ---------------------------------------------------------------------------
// Startup errors: run the binary on a config and wait (bounded) for its exit.

/// Runs ringkeeper on `cfg` (plus clientPort and dataDir) and returns its
/// exit code and stderr; fails if it is still running after WAIT_MAX.
fn run_to_exit(cfg: &str) -> (Option<i32>, String) {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    let path = dir.path().join("zoo.cfg");
    let text = format!(
        "clientPort={}\nclientPortAddress=127.0.0.1\ndataDir={}\n{cfg}",
        free_port(),
        data.display()
    );
    std::fs::write(&path, text).unwrap();
    let err_path = dir.path().join("stderr");
    let mut child = Command::new(env!("CARGO_BIN_EXE_ringkeeper"))
        .arg("--config")
        .arg(&path)
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&err_path).unwrap())
        .spawn()
        .unwrap();
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > WAIT_MAX {
            let _ = child.kill();
            let _ = child.wait();
            panic!("ringkeeper kept running: {}", read(&err_path));
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    (status.code(), read(&err_path))
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

#[test]
fn a_metrics_port_in_use_stops_startup() {
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let (code, stderr) = run_to_exit(&metrics_cfg(port, ""));
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "cannot start the metrics endpoint on 127.0.0.1:{port}"
        )),
        "{stderr}"
    );
}

#[test]
fn an_unknown_provider_class_stops_startup_naming_the_line() {
    let (code, stderr) = run_to_exit("metricsProvider.className=com.example.Metrics\n");
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr
            .contains("line 4: metricsProvider.className: 'com.example.Metrics' is not supported"),
        "{stderr}"
    );
}
