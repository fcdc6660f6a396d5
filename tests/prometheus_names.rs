//! The Prometheus names ZooKeeper's own alert rules and Grafana dashboard
//! use (ServerMetrics' names, PrometheusMetricsProvider's types and
//! quantiles, the Java client's process figures), scraped from a running
//! server after a known number of requests: `fsynctime`, `snapshottime`,
//! `commit_count`, `unrecoverable_error_count`, `connection_drop_count`,
//! `readlatency`, `updatelatency`, `process_cpu_seconds_total` and
//! `process_resident_memory_bytes`.
//!
//! Debian's ZooKeeper ships without the Prometheus provider, so the
//! reference here is its source (3.8): summaries of DetailLevel.BASIC
//! (fsynctime, snapshottime) have the quantile 0.5 only, ADVANCED ones
//! (readlatency, updatelatency) 0.5, 0.9 and 0.99; counters have no
//! `_total` suffix (simpleclient 0.9). No timing assertions: waits are
//! bounded loops for a state to be reached.

mod common;

use std::time::Duration;

use common::prom::{scrape, scrape_until, Kind};
use common::raw::*;
use common::{free_port, start_ringkeeper};

const PROMETHEUS: &str = "org.apache.zookeeper.metrics.prometheus.PrometheusMetricsProvider";
const WAIT_MAX: Duration = Duration::from_secs(30);
const CREATES: usize = 40;
const GETS: usize = 25;

/// utime + stime of `pid` in seconds, and its VmRSS in bytes.
fn proc_figures(pid: u32) -> (f64, u64) {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after = &stat[stat.rfind(')').unwrap() + 1..];
    let f: Vec<&str> = after.split_whitespace().collect();
    let ticks: u64 = f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap();
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let rss_kb: u64 = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .unwrap()
        .parse()
        .unwrap();
    (ticks as f64 / hz, rss_kb * 1024)
}

#[test]
fn zookeepers_dashboard_names_are_exported_with_its_types() {
    let mport = free_port();
    let server = start_ringkeeper(&format!(
        "metricsProvider.className={PROMETHEUS}\nmetricsProvider.httpHost=127.0.0.1\n\
         metricsProvider.httpPort={mport}\nsnapCount=10\nringkeeper.shards=2\n"
    ));
    let before = scrape(mport);
    for name in [
        "commit_count",
        "unrecoverable_error_count",
        "connection_drop_count",
    ] {
        assert_eq!(before.kind(name), Kind::Counter, "{name}");
        assert_eq!(before.value(name), 0.0, "{name} on a fresh server");
    }
    assert_eq!(before.kind("process_cpu_seconds_total"), Kind::Counter);
    assert_eq!(before.kind("process_resident_memory_bytes"), Kind::Gauge);
    for (name, quantiles) in [
        ("fsynctime", &["0.5"][..]),
        ("snapshottime", &["0.5"][..]),
        ("readlatency", &["0.5", "0.9", "0.99"][..]),
        ("updatelatency", &["0.5", "0.9", "0.99"][..]),
    ] {
        assert_eq!(before.kind(name), Kind::Summary, "{name}");
        assert_eq!(before.quantiles(name), quantiles, "{name}'s quantiles");
        assert_eq!(before.value(&format!("{name}_count")), 0.0, "{name}");
        assert!(before.labelled(name, &[("quantile", "0.5")]).is_nan());
    }

    // Two sessions (two createSession txns), CREATES creates, GETS reads.
    let mut a = Conn::handshake(server.port, 30_000);
    let dropped = Conn::handshake(server.port, 30_000);
    for i in 0..CREATES {
        let (r, _) = a.call(
            i as i32 + 1,
            OP_CREATE,
            &create_body(&format!("/n{i}"), b"v", 0),
        );
        assert_eq!(r.err, 0);
    }
    for i in 0..GETS {
        let (r, _) = a.call(1000 + i as i32, OP_GET_DATA, &get_body("/n0", false));
        assert_eq!(r.err, 0);
    }
    // A client that goes away without closeSession; a four-letter word's
    // connection, which the server closes, is not a drop.
    drop(dropped);
    assert!(server.four_letter("ruok").contains("imok"));

    let txns = (CREATES + 2) as f64;
    let e = scrape_until(mport, "every figure", WAIT_MAX, |e| {
        e.value("connection_drop_count") >= 1.0
            && e.value("fsynctime_count") > 0.0
            && e.value("snapshottime_count") > 0.0
            && e.value("commit_count") >= txns
    });
    assert_eq!(e.value("connection_drop_count"), 1.0);
    assert_eq!(e.value("commit_count"), txns, "one per durable txn");
    assert_eq!(e.value("unrecoverable_error_count"), 0.0);
    // ZooKeeper counts requests with a txn header as updates, the rest
    // (reads, pings) as reads; the createSessions are updates.
    assert_eq!(e.value("updatelatency_count"), txns);
    assert_eq!(e.value("readlatency_count"), GETS as f64);
    for name in ["fsynctime", "snapshottime", "readlatency", "updatelatency"] {
        let p50 = e.labelled(name, &[("quantile", "0.5")]);
        assert!(p50.is_finite() && p50 >= 0.0, "{name} p50 {p50}");
        assert!(e.value(&format!("{name}_sum")) >= 0.0);
    }
    // At least one fsync per group-committed batch, at most one per txn.
    let fsyncs = e.value("fsynctime_count");
    assert!((1.0..=txns).contains(&fsyncs), "{fsyncs} fsyncs");

    // The process figures lie between two readings of /proc taken around
    // a scrape (CPU only grows; RSS moves a little, so within 2x).
    let (cpu_before, rss_before) = proc_figures(server.pid());
    let e = scrape(mport);
    let (cpu_after, _) = proc_figures(server.pid());
    let cpu = e.value("process_cpu_seconds_total");
    assert!(
        cpu_before - 0.02 <= cpu && cpu <= cpu_after + 0.02,
        "{cpu_before} <= {cpu} <= {cpu_after}"
    );
    let rss = e.value("process_resident_memory_bytes");
    assert!(
        rss >= rss_before as f64 / 2.0 && rss <= rss_before as f64 * 2.0,
        "rss {rss} vs /proc {rss_before}"
    );
    drop(a);
}
