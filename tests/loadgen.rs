//! ringkeeper-loadgen, end to end: each subcommand briefly against a
//! ringkeeper started here, the count-agreement check (the loadgen's sent
//! requests vs the server's srvr Received), and one mix point against
//! Apache ZooKeeper 3.8 to prove it drives a foreign server.
//!
//! The loadgen is another workspace member, so CARGO_BIN_EXE_ does not name
//! it: it is built once here with the cargo running the tests, into the
//! same target directory and profile as the ringkeeper binary.

mod common;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use common::{start_ringkeeper, start_zookeeper, Server};

const RUN_TIMEOUT: Duration = Duration::from_secs(120);

fn loadgen() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let rk = PathBuf::from(env!("CARGO_BIN_EXE_ringkeeper"));
        let profile_dir = rk.parent().expect("binary directory");
        let target_dir = profile_dir.parent().expect("target directory");
        let mut cmd = Command::new(env!("CARGO"));
        cmd.args(["build", "--quiet", "-p", "ringkeeper-loadgen"])
            .arg("--bin")
            .arg("ringkeeper-loadgen")
            .env("CARGO_TARGET_DIR", target_dir)
            .current_dir(env!("CARGO_MANIFEST_DIR"));
        match profile_dir.file_name().and_then(|n| n.to_str()) {
            Some("debug") => {}
            Some("release") => {
                cmd.arg("--release");
            }
            Some(other) => {
                cmd.args(["--profile", other]);
            }
            None => {}
        }
        let status = cmd.status().expect("run cargo build");
        assert!(status.success(), "building ringkeeper-loadgen failed");
        let bin = profile_dir.join("ringkeeper-loadgen");
        assert!(bin.exists(), "{} was not built", bin.display());
        bin
    })
}

/// Runs the loadgen with `args`; it must succeed.
fn run(args: &[&str]) -> Output {
    let out = run_any(args);
    assert!(
        out.status.success(),
        "ringkeeper-loadgen {args:?} failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Runs the loadgen with `args`, killed if it outlives RUN_TIMEOUT.
fn run_any(args: &[&str]) -> Output {
    let mut child = Command::new(loadgen())
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn ringkeeper-loadgen");
    let start = Instant::now();
    loop {
        if child.try_wait().expect("wait").is_some() {
            break;
        }
        if start.elapsed() > RUN_TIMEOUT {
            let _ = child.kill();
            let out = child.wait_with_output().expect("output");
            panic!(
                "ringkeeper-loadgen {args:?} ran over {RUN_TIMEOUT:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().expect("output")
}

/// A CSV file as rows of name -> value.
fn csv(path: &Path) -> Vec<HashMap<String, String>> {
    let text = std::fs::read_to_string(path).expect("csv written");
    let mut lines = text.lines();
    let header: Vec<String> = lines
        .next()
        .expect("header")
        .split(',')
        .map(String::from)
        .collect();
    lines
        .map(|l| {
            header
                .iter()
                .cloned()
                .zip(l.split(',').map(String::from))
                .collect()
        })
        .collect()
}

fn num(row: &HashMap<String, String>, key: &str) -> f64 {
    row.get(key)
        .unwrap_or_else(|| panic!("column {key} missing in {row:?}"))
        .parse()
        .unwrap_or_else(|_| panic!("column {key} not a number in {row:?}"))
}

/// srvr's "Node count:".
fn node_count(server: &Server) -> u64 {
    let srvr = server.four_letter("srvr");
    srvr.lines()
        .find_map(|l| l.strip_prefix("Node count:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no node count in {srvr}"))
}

fn out_files(dir: &Path, stem: &str) -> (PathBuf, PathBuf, PathBuf) {
    (
        dir.join(format!("{stem}.json")),
        dir.join(format!("{stem}.csv")),
        dir.join(format!("{stem}.svg")),
    )
}

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

fn short_mix<'a>(server: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut v = vec![
        "--target",
        server,
        "--sessions",
        "4",
        "--outstanding",
        "20",
        "--znodes",
        "10",
        "--warmup-s",
        "0.3",
        "--duration-s",
        "1",
        "--quiet",
    ];
    v.extend_from_slice(extra);
    v
}

fn assert_svg(path: &Path) {
    let svg = std::fs::read_to_string(path).expect("svg written");
    assert!(svg.contains("<svg") && svg.contains("</svg>"), "not an SVG");
}

#[test]
fn mix_points_measure_reads_writes_and_write_every_output() {
    let rk = start_ringkeeper("");
    let dir = tempfile::tempdir().unwrap();
    let (json, csvp, svg) = out_files(dir.path(), "mix");
    let addr = format!("rk={}", rk.addr());
    let mut args = vec!["mix"];
    args.extend(short_mix(
        &addr,
        &[
            "--reads",
            "0,50,100",
            "--json",
            s(&json),
            "--csv",
            s(&csvp),
            "--plot",
            s(&svg),
        ],
    ));
    let out = run(&args);
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        table.contains("ops/s") && table.contains("cpu/op"),
        "{table}"
    );
    let rows = csv(&csvp);
    assert_eq!(rows.len(), 3, "one row per read%: {rows:?}");
    for r in &rows {
        let pct = num(r, "read_pct");
        assert!(num(r, "ops_per_s") > 0.0, "{r:?}");
        assert_eq!(num(r, "errors"), 0.0, "{r:?}");
        if pct == 0.0 {
            assert_eq!(num(r, "reads_per_s"), 0.0);
        }
        if pct == 100.0 {
            assert_eq!(num(r, "writes_per_s"), 0.0);
        }
        if pct == 50.0 {
            assert!(num(r, "reads_per_s") > 0.0 && num(r, "writes_per_s") > 0.0);
            assert!(num(r, "read_p99_us") > 0.0 && num(r, "write_p99_us") > 0.0);
        }
        assert!(num(r, "client_cpu_us_per_op") > 0.0);
        // The per-request path allocates nothing: what there is comes from
        // glommio's bookkeeping per socket operation, each carrying many
        // requests, so far below one allocation per op.
        assert!(num(r, "client_allocs_per_op") < 0.5, "{r:?}");
        assert!(num(r, "client_io_per_op") < 0.5, "{r:?}");
    }
    let j = std::fs::read_to_string(&json).unwrap();
    assert!(j.contains("\"experiment\": \"mix\"") && j.contains("\"medians\""));
    assert_svg(&svg);
}

/// mix --server-pid over a sweep of depths: one point per (outstanding,
/// reads) pair, each with the server's CPU and context switches per op,
/// and its syscalls per op where perf may count them (empty, never made
/// up, where it may not).
#[test]
fn mix_reports_server_cost_per_depth() {
    let rk = start_ringkeeper("");
    let dir = tempfile::tempdir().unwrap();
    let (json, csvp, svg) = out_files(dir.path(), "depth");
    let addr = rk.addr();
    let pid = rk.pid().to_string();
    let mut args = vec!["mix"];
    args.extend(short_mix(
        &addr,
        &[
            "--server-pid",
            &pid,
            "--outstanding",
            "2,10",
            "--reads",
            "0,100",
            "--json",
            s(&json),
            "--csv",
            s(&csvp),
            "--plot",
            s(&svg),
        ],
    ));
    let out = run(&args);
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        table.contains("depth") && table.contains("sysc/op"),
        "{table}"
    );
    let rows = csv(&csvp);
    let points: Vec<(f64, f64)> = rows
        .iter()
        .map(|r| (num(r, "outstanding"), num(r, "read_pct")))
        .collect();
    assert_eq!(
        points,
        [(2.0, 0.0), (2.0, 100.0), (10.0, 0.0), (10.0, 100.0)]
    );
    for r in &rows {
        assert!(num(r, "ops_per_s") > 0.0, "{r:?}");
        assert!(num(r, "server_cpu_us_per_op") > 0.0, "{r:?}");
        assert!(num(r, "server_ctx_switches_per_op") >= 0.0, "{r:?}");
        assert!(num(r, "server_threads") >= 1.0, "{r:?}");
        // Every request is read from a socket: at least some syscall or
        // io_uring_enter per batch of requests. As root (CI: scripts/
        // test-all.sh runs as root and mounts tracefs) perf can count
        // them, so an empty column there is a failure, not a skip.
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } == 0 {
            assert!(
                !r["server_syscalls_per_op"].is_empty(),
                "running as root, yet syscalls were not counted (is tracefs mounted?): {r:?}"
            );
        }
        if !r["server_syscalls_per_op"].is_empty() {
            assert!(num(r, "server_syscalls_per_op") > 0.0, "{r:?}");
        }
    }
    let j = std::fs::read_to_string(&json).unwrap();
    assert!(j.contains("\"outstanding_sweep\"") && j.contains("\"ctx_switches\""));
    assert_svg(&svg);
}

/// --rate-ops-s paces the sessions: the measured rate stays near what is
/// offered (unpaced, this server answers tens of thousands of ops/s here).
#[test]
fn a_paced_mix_offers_its_rate() {
    let rk = start_ringkeeper("");
    let dir = tempfile::tempdir().unwrap();
    let (_, csvp, _) = out_files(dir.path(), "paced");
    let addr = rk.addr();
    let mut args = vec!["mix"];
    args.extend(short_mix(
        &addr,
        &["--reads", "50", "--rate-ops-s", "2000", "--csv", s(&csvp)],
    ));
    run(&args);
    let rows = csv(&csvp);
    assert_eq!(rows.len(), 1);
    let ops = num(&rows[0], "ops_per_s");
    // 2,000 ops/s offered: 4 sessions of 500 each, a batch of 20 requests
    // every 40 ms; one early batch per session is the most it can run ahead.
    assert!(
        ops > 500.0 && ops < 2600.0,
        "paced at 2000 ops/s, measured {ops}"
    );
    assert_eq!(num(&rows[0], "errors"), 0.0);
}

#[test]
fn count_agreement_with_srvr_received() {
    let rk = start_ringkeeper("");
    let dir = tempfile::tempdir().unwrap();
    let (_, csvp, _) = out_files(dir.path(), "count");
    let addr = rk.addr();
    let mut args = vec!["mix"];
    args.extend(short_mix(&addr, &["--reads", "30,90", "--csv", s(&csvp)]));
    run(&args);
    for r in csv(&csvp) {
        let sent = num(&r, "client_sent");
        let received = num(&r, "server_received");
        assert!(sent > 1000.0, "too few requests to compare: {r:?}");
        let diff = (received - sent).abs() / sent * 100.0;
        assert!(
            diff <= 1.0,
            "server counted {received}, loadgen sent {sent} ({diff:.3}%)"
        );
        assert!((num(&r, "counter_diff_pct").abs() - diff).abs() < 0.01);
    }
}

#[test]
fn compare_alternates_targets_and_prints_ratios() {
    let rk = start_ringkeeper("");
    let dir = tempfile::tempdir().unwrap();
    let (json, csvp, svg) = out_files(dir.path(), "cmp");
    let (a, b) = (format!("a={}", rk.addr()), format!("b={}", rk.addr()));
    let mut args = vec!["compare", "--target", &a];
    args.extend(short_mix(
        &b,
        &[
            "--reads",
            "20,80",
            "--rounds",
            "2",
            "--json",
            s(&json),
            "--csv",
            s(&csvp),
            "--plot",
            s(&svg),
        ],
    ));
    let out = run(&args);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("a/b"), "ratio column missing: {text}");
    assert!(
        text.contains("per round (min-max)"),
        "per-round ratio column missing: {text}"
    );
    // Each row of the ratio table ends with the per-round median and range
    // of a/b: "1.02x (0.97-1.07)" (the same server twice: near 1).
    let cells: Vec<&str> = text
        .lines()
        .filter(|l| l.trim_start().starts_with("20 ") || l.trim_start().starts_with("80 "))
        .filter(|l| l.trim_end().ends_with(')'))
        .collect();
    assert_eq!(cells.len(), 2, "one ratio row per point: {text}");
    for row in cells {
        let range = row.rsplit('(').next().unwrap().trim_end_matches(')');
        let (lo, hi) = range.split_once('-').unwrap();
        let (lo, hi): (f64, f64) = (lo.parse().unwrap(), hi.parse().unwrap());
        assert!(lo > 0.0 && lo <= hi, "range {range} in {row}");
    }
    let order: Vec<String> = csv(&csvp)
        .iter()
        .map(|r| format!("{}{}", r["target"], r["read_pct"]))
        .collect();
    assert_eq!(order.len(), 8, "2 targets x 2 points x 2 rounds: {order:?}");
    assert_eq!(
        order[..4],
        ["a20", "b20", "b80", "a80"],
        "alternating order"
    );
    assert_svg(&svg);
}

#[test]
fn creates_counts_every_create_and_deletes_them() {
    let rk = start_ringkeeper("");
    let dir = tempfile::tempdir().unwrap();
    let (json, csvp, svg) = out_files(dir.path(), "creates");
    let addr = rk.addr();
    let nodes_before = node_count(&rk);
    run(&[
        "creates",
        "--target",
        &addr,
        "--workers",
        "1,3",
        "--count",
        "200",
        "--quiet",
        "--json",
        s(&json),
        "--csv",
        s(&csvp),
        "--plot",
        s(&svg),
    ]);
    let rows = csv(&csvp);
    assert_eq!(rows.len(), 2);
    for r in &rows {
        assert_eq!(num(r, "creates"), num(r, "workers") * 200.0, "{r:?}");
        assert_eq!(num(r, "errors"), 0.0, "{r:?}");
        assert!(num(r, "creates_per_s") > 0.0);
    }
    // Every create was deleted again: only the experiment's root remains.
    assert_eq!(node_count(&rk), nodes_before + 1);
    assert_svg(&svg);
}

#[test]
fn latency_runs_every_phase_sync_and_async() {
    let rk = start_ringkeeper("");
    let dir = tempfile::tempdir().unwrap();
    let (json, csvp, svg) = out_files(dir.path(), "lat");
    let addr = rk.addr();
    let nodes_before = node_count(&rk);
    let out = run(&[
        "latency",
        "--target",
        &addr,
        "--count",
        "300",
        "--window",
        "50",
        "--quiet",
        "--json",
        s(&json),
        "--csv",
        s(&csvp),
        "--plot",
        s(&svg),
    ]);
    let rows = csv(&csvp);
    let phases = [
        "create",
        "set",
        "get",
        "delete",
        "create_ephemeral",
        "watch",
        "delete_ephemeral",
        "notif",
    ];
    for mode in ["sync", "async"] {
        let got: Vec<&str> = rows
            .iter()
            .filter(|r| r["mode"] == mode)
            .map(|r| r["phase"].as_str())
            .collect();
        assert_eq!(got, phases, "{mode}");
    }
    for r in &rows {
        assert_eq!(num(r, "ops"), 300.0, "{r:?}");
        assert_eq!(num(r, "errors"), 0.0, "{r:?}");
    }
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("ms/op"), "{text}");
    // The root was removed at the end.
    assert_eq!(node_count(&rk), nodes_before);
    assert_svg(&svg);
}

/// kill -9 the server one second in, restart it half a second later on the
/// same port: throughput drops to zero, sessions reconnect, the requests
/// lost are counted as errors, and so are the NONODE answers of the
/// restarted server (which keeps no data yet) until `setup` creates the
/// znodes again; then throughput comes back.
#[test]
fn timeline_marks_a_kill_and_restart() {
    let mut rk: Server = start_ringkeeper("");
    let dir = tempfile::tempdir().unwrap();
    let (json, csvp, svg) = out_files(dir.path(), "tl");
    let pidfile = dir.path().join("restarted.pid");
    let kill = format!("1:kill -9 {}", rk.pid());
    let restart = format!(
        "1.5:{} --config {} >{} 2>&1 & echo $! > {}",
        env!("CARGO_BIN_EXE_ringkeeper"),
        rk.dir.path().join("zoo.cfg").display(),
        dir.path().join("restarted.log").display(),
        pidfile.display()
    );
    let addr = rk.addr();
    let setup = format!(
        "2.5:{} setup --target {addr} --znodes 10",
        loadgen().display()
    );
    let out = run(&[
        "timeline",
        "--target",
        &addr,
        "--sessions",
        "4",
        "--outstanding",
        "10",
        "--znodes",
        "10",
        "--read-pct",
        "100",
        "--warmup-s",
        "0.2",
        "--duration-s",
        "4.5",
        "--event",
        &kill,
        "--event",
        &restart,
        "--event",
        &setup,
        "--quiet",
        "--json",
        s(&json),
        "--csv",
        s(&csvp),
        "--plot",
        s(&svg),
    ]);
    // The restarted server is ours to stop.
    let restarted = std::fs::read_to_string(&pidfile).unwrap_or_default();
    if let Ok(pid) = restarted.trim().parse::<i32>() {
        let _ = Command::new("kill").arg("-9").arg(pid.to_string()).status();
    }
    rk.kill();
    let rows = csv(&csvp);
    assert!(
        (40..=50).contains(&rows.len()),
        "4.5 s of 100 ms samples: {}",
        rows.len()
    );
    let t = |r: &HashMap<String, String>| num(r, "t_s");
    let ops = |r: &HashMap<String, String>| num(r, "ops_per_s");
    assert!(
        rows.iter().filter(|r| t(r) < 0.9).all(|r| ops(r) > 0.0),
        "throughput before the kill"
    );
    assert!(
        rows.iter()
            .any(|r| t(r) > 1.1 && t(r) < 1.6 && ops(r) == 0.0),
        "no zero-throughput sample while the server was down"
    );
    assert!(
        rows.iter().filter(|r| t(r) > 3.5).all(|r| ops(r) > 0.0),
        "throughput did not come back: {rows:?}"
    );
    assert!(rows.iter().any(|r| num(r, "reconnects") > 0.0));
    let events: Vec<&String> = rows
        .iter()
        .map(|r| &r["event"])
        .filter(|e| !e.is_empty())
        .collect();
    assert_eq!(events.len(), 3, "every event marked: {events:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(text.matches("-> exit 0").count(), 3, "{text}");
    // The kill shows as lost connections; the znodes survive the restart
    // (the log is durable), so NONODE need not appear.
    assert!(text.contains("CONNECTIONLOSS(-4)"), "{text}");
    assert_svg(&svg);
}

#[test]
fn mix_point_against_apache_zookeeper() {
    let zk = start_zookeeper("");
    let dir = tempfile::tempdir().unwrap();
    let (_, csvp, _) = out_files(dir.path(), "zk");
    let addr = format!("zk={}", zk.addr());
    let mut args = vec!["mix"];
    args.extend(short_mix(&addr, &["--reads", "50", "--csv", s(&csvp)]));
    run(&args);
    let rows = csv(&csvp);
    assert_eq!(rows.len(), 1);
    let r = &rows[0];
    assert!(num(r, "reads_per_s") > 0.0 && num(r, "writes_per_s") > 0.0);
    assert_eq!(num(r, "errors"), 0.0, "{r:?}");
    let (sent, received) = (num(r, "client_sent"), num(r, "server_received"));
    assert!(
        (received - sent).abs() / sent <= 0.01,
        "ZooKeeper counted {received}, loadgen sent {sent}"
    );
}

/// `scale` against `addr` with the server's pid, bounded, quiet, writing
/// `json` and `csv`, plus `extra`.
fn run_scale(addr: &str, pid: &str, json: &Path, csv: &Path, extra: &[&str]) -> Output {
    let mut args = vec!["scale", "--target", addr, "--server-pid", pid];
    args.extend_from_slice(extra);
    args.extend_from_slice(&[
        "--max-seconds",
        "60",
        "--quiet",
        "--json",
        s(json),
        "--csv",
        s(csv),
    ]);
    run(&args)
}

/// scale: the windows' creates add up to the last checkpoint, every
/// checkpoint is reached, the tree holds exactly what was created, and the
/// server's RSS is read at each checkpoint. Not timed.
#[test]
fn scale_grows_the_tree_to_each_checkpoint() {
    let rk = start_ringkeeper("");
    let dir = tempfile::tempdir().unwrap();
    let addr = rk.addr();
    let pid = rk.pid().to_string();
    for (layout, parents, root, checkpoints, total) in [
        ("one-parent", 1u64, "/sc1", "300,1k", 1000u64),
        ("spread", 7, "/sc2", "500,1500", 1500),
    ] {
        let (json, csvp, _) = out_files(dir.path(), layout);
        let before = node_count(&rk);
        let parents_arg = parents.to_string();
        let out = run_scale(
            &addr,
            &pid,
            &json,
            &csvp,
            &[
                "--layout",
                layout,
                "--parents",
                &parents_arg,
                "--root",
                root,
                "--checkpoints",
                checkpoints,
                "--sessions",
                "4",
                "--outstanding",
                "20",
                "--warmup",
                "100",
            ],
        );
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("ratio last/first window"), "{text}");
        let rows = csv(&csvp);
        assert_eq!(rows.len(), 2, "one row per checkpoint: {rows:?}");
        let mut from = 0.0;
        let mut sum = 0.0;
        for r in &rows {
            assert_eq!(r["reached"], "true", "{r:?}");
            assert_eq!(num(r, "from"), from, "{r:?}");
            assert_eq!(num(r, "creates"), num(r, "to") - num(r, "from"), "{r:?}");
            assert!(num(r, "creates_per_s") > 0.0 && num(r, "seconds") > 0.0);
            let tail = num(r, "tail_creates");
            assert!(tail > 0.0 && tail <= num(r, "creates"), "{r:?}");
            assert!(num(r, "tail_seconds") <= num(r, "seconds"), "{r:?}");
            assert!(num(r, "rss_bytes") > 0.0 && num(r, "hwm_bytes") >= num(r, "rss_bytes"));
            assert!(num(r, "rss_at_creates") >= num(r, "to"), "{r:?}");
            assert_eq!(num(r, "errors"), 0.0, "{r:?}");
            sum += num(r, "creates");
            from = num(r, "to");
        }
        assert_eq!(sum, total as f64);
        // The root, its parents and every child; the warm-up is gone.
        assert_eq!(node_count(&rk), before + 1 + parents + total);
        let j = std::fs::read_to_string(&json).unwrap();
        assert!(j.contains("\"experiment\": \"scale\""), "{j}");
        assert!(j.contains(&format!("\"created\": {total},")), "{j}");
        assert!(!j.contains("\"ratio_last_first_window\": null"), "{j}");
    }
    // The tree must be fresh: a second run on the same root is refused.
    let again = run_any(&["scale", "--target", &addr, "--root", "/sc1", "--quiet"]);
    assert!(!again.status.success());
    let err = String::from_utf8_lossy(&again.stderr);
    assert!(err.contains("/sc1 already exists"), "{err}");
}

/// scale --probe-rounds: at each checkpoint every round is recorded (its
/// rate and the server's CPU per create), the probe's children are gone
/// again (the tree holds exactly the growth's children), and the growth
/// goes on from the checkpoint to the next. Not timed.
#[test]
fn scale_probes_hold_the_tree_at_each_checkpoint() {
    let rk = start_ringkeeper("");
    let dir = tempfile::tempdir().unwrap();
    let (json, csvp, _) = out_files(dir.path(), "probe");
    let addr = rk.addr();
    let pid = rk.pid().to_string();
    let before = node_count(&rk);
    let out = run_scale(
        &addr,
        &pid,
        &json,
        &csvp,
        &[
            "--layout",
            "spread",
            "--parents",
            "5",
            "--root",
            "/pr",
            "--checkpoints",
            "400,1k",
            "--sessions",
            "3",
            "--outstanding",
            "10",
            "--probe-rounds",
            "3",
            "--probe-creates",
            "150",
        ],
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("probe: median of 3 rounds"), "{text}");
    let rows = csv(&csvp);
    assert_eq!(rows.len(), 2, "one row per checkpoint: {rows:?}");
    let mut from = 0.0;
    for r in &rows {
        assert_eq!(r["reached"], "true", "{r:?}");
        assert_eq!(num(r, "from"), from, "{r:?}");
        assert_eq!(num(r, "probe_rounds"), 3.0, "{r:?}");
        assert!(num(r, "probe_per_s") > 0.0, "{r:?}");
        assert!(num(r, "probe_server_cpu_us") > 0.0, "{r:?}");
        assert_eq!(num(r, "errors"), 0.0, "{r:?}");
        from = num(r, "to");
    }
    // The root, its parents and the growth's 1,000 children: no probe child
    // is left behind.
    assert_eq!(node_count(&rk), before + 1 + 5 + 1000);
    let j = std::fs::read_to_string(&json).unwrap();
    assert!(j.contains("\"probe_rounds_per_s\""), "{j}");
    assert!(!j.contains("\"ratio_last_first_probe\": null"), "{j}");
}

/// bigmulti: one multi creates every znode (the parent then has them all as
/// children), one multi deletes them, and the parent goes too.
#[test]
fn bigmulti_creates_and_deletes_in_one_multi_each() {
    let rk = start_ringkeeper("jute.maxbuffer=4194304");
    let dir = tempfile::tempdir().unwrap();
    let (json, csvp, _) = out_files(dir.path(), "bigmulti");
    let addr = rk.addr();
    let before = node_count(&rk);
    run(&[
        "bigmulti",
        "--target",
        &addr,
        "--ops",
        "3000",
        "--json",
        s(&json),
        "--csv",
        s(&csvp),
    ]);
    let rows = csv(&csvp);
    assert_eq!(rows.len(), 2, "{rows:?}");
    let (c, d) = (&rows[0], &rows[1]);
    assert_eq!(
        (c["multi"].as_str(), d["multi"].as_str()),
        ("create", "delete")
    );
    for r in &rows {
        assert_eq!(num(r, "ops"), 3000.0, "{r:?}");
        assert_eq!(num(r, "err"), 0.0, "{r:?}");
        assert_eq!(num(r, "results_ok"), 3000.0, "{r:?}");
        assert_eq!(num(r, "results_failed"), 0.0, "{r:?}");
        assert!(num(r, "request_bytes") > 3000.0 * 20.0, "{r:?}");
        assert!(num(r, "ops_per_s") > 0.0);
    }
    assert_eq!(num(c, "children_after"), 3000.0);
    assert_eq!(num(d, "children_after"), 0.0);
    assert_eq!(node_count(&rk), before);
    let j = std::fs::read_to_string(&json).unwrap();
    assert!(j.contains("\"experiment\": \"bigmulti\""), "{j}");
}

/// sessions: every session of each mode is attempted once and established
/// (and closed, in create-close).
#[test]
fn sessions_establishes_every_session_in_both_modes() {
    let rk = start_ringkeeper("");
    let dir = tempfile::tempdir().unwrap();
    let (json, csvp, _) = out_files(dir.path(), "sessions");
    let addr = rk.addr();
    run(&[
        "sessions",
        "--target",
        &addr,
        "--count",
        "150",
        "--concurrency",
        "8",
        "--json",
        s(&json),
        "--csv",
        s(&csvp),
    ]);
    let rows = csv(&csvp);
    let modes: Vec<&str> = rows.iter().map(|r| r["mode"].as_str()).collect();
    assert_eq!(modes, ["create-close", "create"]);
    for r in &rows {
        assert_eq!(num(r, "attempted"), 150.0, "{r:?}");
        assert_eq!(num(r, "ok"), 150.0, "{r:?}");
        assert_eq!(num(r, "failed"), 0.0, "{r:?}");
        assert!(num(r, "sessions_per_s") > 0.0 && num(r, "connect_p50_us") > 0.0);
        let closed = num(r, "close_p50_us") > 0.0;
        assert_eq!(closed, r["mode"] == "create-close", "{r:?}");
    }
    let j = std::fs::read_to_string(&json).unwrap();
    assert!(j.contains("\"experiment\": \"sessions\""), "{j}");
}
