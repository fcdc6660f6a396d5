//! Metrics over HTTP in the Prometheus text format, as ZooKeeper's
//! PrometheusMetricsProvider serves them (`metricsProvider.*` in zoo.cfg,
//! off by default; see `config::MetricsConfig`).
//!
//! # Where each number comes from, and what collecting it costs
//!
//! * **Request latency** ([`latency`]): every shard records each answered
//!   request into its own per-operation hdrhistogram (µs), held in a
//!   `RefCell` on the shard's executor. The read path pays a `RefCell`
//!   borrow and a histogram increment: no lock, no atomic shared with
//!   another core, no hop.
//! * **Shard gauges**: connections, outstanding requests and packets come
//!   from each shard's `ShardStats` (relaxed atomics only that shard
//!   writes, which mntr already reads); sessions and watches from the
//!   shard's report below.
//! * **Consensus core** ([`group_commit`]): the core stores its gauges and
//!   counters in atomics only it writes, a few stores per loop turn and per
//!   fsync (never a lock per txn), and publishes a copy of its fsync latency
//!   histogram every [`group_commit::PUBLISH_EVERY`] when it changed.
//!
//! # Gathering across shards: the admin mailbox, on demand
//!
//! The HTTP endpoint runs as tasks on shard 0's executor (no thread of its
//! own). A scrape builds shard 0's part directly and asks every other shard
//! for its [`ShardMetrics`] through the mailbox the four-letter words use
//! (`admin::mailbox`, `Ask::Metrics`): each shard's mailbox task, which looks
//! every `mailbox::POLL`, copies its histograms *on its own executor*,
//! between requests, and hands them over behind the mailbox's mutex, which
//! requests never touch. Chosen over periodic publication because it costs
//! the shards nothing while nobody scrapes, and a scrape sees every request
//! answered before it asked (a scrape takes up to one POLL longer with more
//! than one shard). The shards' parts are taken moments apart, not as one
//! atomic cut.
//!
//! # Names
//!
//! Numbers ZooKeeper also exports keep ZooKeeper's names, types and units
//! (ServerMetrics and the Prometheus Java client's StandardExports), so
//! ZooKeeper's alert rules and Grafana dashboard work unchanged: gauges
//! such as `znode_count`, `num_alive_connections`, `packets_received`,
//! `avg_latency` in ms; the counters `connection_rejected`, `commit_count`,
//! `unrecoverable_error_count`, `connection_drop_count` (without `_total`,
//! as simpleclient 0.9, which ZooKeeper 3.8 ships, prints counters); the
//! summaries `fsynctime`, `snapshottime` (quantile 0.5, as ZooKeeper's
//! DetailLevel.BASIC), `readlatency`, `updatelatency` (0.5, 0.9, 0.99, as
//! ADVANCED), all in ms; `process_cpu_seconds_total` and
//! `process_resident_memory_bytes`. Where ringkeeper differs: values are
//! exact floats (ZooKeeper observes whole ms), samples carry no trailing
//! comma in their labels and integers no `.0` (both mean the same to a
//! Prometheus parser), HELP texts say what the figure is rather than
//! repeating the name, and quantiles cover everything since start
//! (ZooKeeper's rotate over 10 minutes). `commit_count` counts every
//! durable txn (ZooKeeper counts commits on a quorum leader only, so a
//! standalone ZooKeeper shows 0).
//!
//! The rest start with `ringkeeper_`, with units last. Operation labels
//! are spelled as ZooKeeper's `Request.op2String` (`getData`, `setData`,
//! `create`, `createSession`, ...). Those summaries report the quantiles
//! 0.5, 0.9, 0.99 and 0.999 over everything since the server started, with
//! an exact `_sum` and `_count`.

pub mod group_commit;
pub mod http;
pub mod latency;
pub mod process;
pub mod text;

use std::sync::Arc;

use super::report::ShardCounts;
use super::stats::Totals;
use group_commit::CoreMetrics;
use latency::{LatencyBook, Summary, QUANTILES};
use process::ProcessView;
use text::{Exposition, Kind};

/// What one shard hands a scrape, built on its own executor.
#[derive(Clone, Debug, Default)]
pub struct ShardMetrics {
    pub latency: LatencyBook,
    pub counts: ShardCounts,
}

/// Given to shard 0 at startup when metrics are on: the endpoint's socket
/// (bound by the launcher, so a port in use stops the server at once) and
/// what the consensus core publishes.
pub struct MetricsSetup {
    pub listener: std::net::TcpListener,
    pub core: Arc<CoreMetrics>,
}

/// One shard's row in a scrape.
#[derive(Clone, Debug, Default)]
pub struct ShardView {
    pub id: usize,
    pub connections: u64,
    pub outstanding: u64,
    pub packets_received: u64,
    pub packets_sent: u64,
    pub watches: u64,
    pub sessions: u64,
}

/// The consensus core's numbers at scrape time.
#[derive(Clone, Debug, Default)]
pub struct CoreView {
    pub outstanding_txns: u64,
    pub inbox_requests: u64,
    pub fsyncs: u64,
    pub txns: u64,
    pub log_bytes: u64,
    pub fsync_batch_txns: u64,
    pub fsync_batch_bytes: u64,
    pub fsync_latency_us: Option<Arc<Summary>>,
    pub snapshot_time_us: Summary,
}

impl CoreView {
    pub fn read(m: &CoreMetrics) -> CoreView {
        use std::sync::atomic::Ordering::Relaxed;
        CoreView {
            outstanding_txns: m.outstanding_txns.load(Relaxed),
            inbox_requests: m.inbox_requests.load(Relaxed),
            fsyncs: m.fsyncs.load(Relaxed),
            txns: m.txns.load(Relaxed),
            log_bytes: m.log_bytes.load(Relaxed),
            fsync_batch_txns: m.fsync_batch_txns.load(Relaxed),
            fsync_batch_bytes: m.fsync_batch_bytes.load(Relaxed),
            fsync_latency_us: m.fsync_latency(),
            snapshot_time_us: m.snapshot_time(),
        }
    }
}

/// Everything one exposition shows.
#[derive(Clone, Debug, Default)]
pub struct Scrape {
    pub version: String,
    /// Sums over the shards' counters, as mntr shows them.
    pub totals: Totals,
    /// Sums over the shards' reports, as mntr shows them.
    pub watch_count: u64,
    pub sessions: u64,
    /// Of the answering shard's view of the tree.
    pub node_count: u64,
    pub ephemerals_count: u64,
    pub approximate_data_size: u64,
    pub open_fds: u64,
    pub max_fds: u64,
    pub shards: Vec<ShardView>,
    /// Every shard's request latency, merged.
    pub latency_us: LatencyBook,
    pub core: CoreView,
    /// Txn log failures since start (ZooKeeper's unrecoverable_error_count).
    pub unrecoverable_errors: u64,
    pub process: ProcessView,
    /// An ensemble member's role and gauges (None: standalone or electing).
    pub ensemble: Option<(bool, crate::admin::health::EnsembleView)>,
}

/// The exposition text of `s`.
pub fn render(s: &Scrape) -> String {
    let mut e = Exposition::default();
    zookeeper_families(&mut e, s);
    zookeeper_server_metrics(&mut e, s);
    process_families(&mut e, &s.process);
    e.family(
        "ringkeeper_build_info",
        Kind::Gauge,
        "Always 1, labelled with the server version",
    );
    e.sample("", &[("version", &s.version)], 1u64);
    shard_families(&mut e, &s.shards);
    e.family(
        "ringkeeper_request_latency_us",
        Kind::Summary,
        "Time from reading a request to queueing its reply, by operation (Request.op2String), in microseconds",
    );
    for (op, summary) in s.latency_us.iter() {
        summary_samples(&mut e, &[("op", op)], summary);
    }
    core_families(&mut e, &s.core);
    match &s.ensemble {
        Some((leading, view)) => ensemble_families(&mut e, *leading, view),
        None => {
            // ServerMetrics registers election_time on every server; a
            // standalone one never elects (the alert rules' `increase(
            // election_time_count[5m])` reads 0 instead of no series).
            e.family(
                "election_time",
                Kind::Summary,
                "Leader elections this server took part in, in ms (count and sum)",
            );
            e.sample("_sum", &[], 0u64);
            e.sample("_count", &[], 0u64);
        }
    }
    e.finish()
}

/// An ensemble member's families, under ZooKeeper's names: quorum_size
/// and election_time on every member; on the leader what
/// LeaderZooKeeperServer registers: learners, synced_followers,
/// pending_syncs, leader_uptime, synced_observers,
/// synced_non_voting_followers and the proposal sizes.
fn ensemble_families(e: &mut Exposition, leading: bool, v: &crate::admin::health::EnsembleView) {
    e.family("quorum_size", Kind::Gauge, "Voting members in the ensemble");
    e.sample("", &[], v.quorum_size);
    if leading {
        let gauges = [
            ("learners", "Learners connected to this leader", v.learners),
            (
                "synced_followers",
                "Followers synced with this leader",
                v.synced_followers,
            ),
            (
                "pending_syncs",
                "Forwarded syncs waiting for their commit",
                v.pending_syncs,
            ),
            (
                "leader_uptime",
                "Milliseconds since this server established its epoch as leader",
                v.leader_uptime_ms,
            ),
            (
                "synced_observers",
                "Observers synced with this leader (ringkeeper ensembles have none)",
                0,
            ),
            (
                "synced_non_voting_followers",
                "Non-voting followers synced with this leader (none: every follower votes)",
                0,
            ),
        ];
        for (name, help, value) in gauges {
            e.family(name, Kind::Gauge, help);
            e.sample("", &[], value);
        }
        let sizes = [
            (
                "last_proposal_size",
                "Bytes of the last proposal (-1: none yet)",
                v.last_proposal_bytes,
            ),
            (
                "min_proposal_size",
                "Bytes of the smallest proposal (-1: none yet)",
                v.min_proposal_bytes,
            ),
            (
                "max_proposal_size",
                "Bytes of the largest proposal (-1: none yet)",
                v.max_proposal_bytes,
            ),
        ];
        for (name, help, value) in sizes {
            e.family(name, Kind::Gauge, help);
            // -1 before the first proposal, as ZooKeeper's BufferStats.
            e.sample("", &[], value as f64);
        }
    }
    e.family(
        "election_time",
        Kind::Summary,
        "Leader elections this server took part in, in ms (count and sum)",
    );
    e.sample("_sum", &[], v.election_sum_ms);
    e.sample("_count", &[], v.election_count);
}

/// The gauges (and one counter) ZooKeeper's provider exports under these
/// names, with the values mntr shows.
fn zookeeper_families(e: &mut Exposition, s: &Scrape) {
    let t = &s.totals;
    let gauges: [(&str, &str, u64); 14] = [
        ("znode_count", "Znodes in the tree", s.node_count),
        ("watch_count", "Watches set by clients", s.watch_count),
        ("ephemerals_count", "Ephemeral znodes", s.ephemerals_count),
        (
            "approximate_data_size",
            "Bytes of paths and data in the tree",
            s.approximate_data_size,
        ),
        (
            "global_sessions",
            "Sessions, with a connection or not",
            s.sessions,
        ),
        (
            "num_alive_connections",
            "Client connections open",
            t.connections,
        ),
        (
            "outstanding_requests",
            "Requests read and not yet answered",
            t.outstanding,
        ),
        (
            "packets_received",
            "Packets received since start or srst",
            t.packets_received,
        ),
        (
            "packets_sent",
            "Packets sent since start or srst",
            t.packets_sent,
        ),
        (
            "min_latency",
            "Least request latency since start or srst, in ms",
            t.latency_min_ms,
        ),
        (
            "max_latency",
            "Greatest request latency since start or srst, in ms",
            t.latency_max_ms,
        ),
        (
            "uptime",
            "Time since the server started, in ms",
            t.uptime_ms,
        ),
        (
            "open_file_descriptor_count",
            "File descriptors open",
            s.open_fds,
        ),
        (
            "max_file_descriptor_count",
            "File descriptor limit (soft RLIMIT_NOFILE)",
            s.max_fds,
        ),
    ];
    for (name, help, value) in gauges {
        e.family(name, Kind::Gauge, help);
        e.sample("", &[], value);
    }
    e.family(
        "avg_latency",
        Kind::Gauge,
        "Mean request latency since start or srst, in ms",
    );
    e.sample("", &[], t.latency_avg_ms);
    e.family(
        "connection_rejected",
        Kind::Counter,
        "Connections refused by maxClientCnxns or maxCnxns since start or srst",
    );
    e.sample("", &[], t.connections_rejected);
}

/// ZooKeeper's quantiles for a summary of DetailLevel.BASIC
/// (PrometheusMetricsProvider: the median only) and ADVANCED.
const BASIC_QUANTILES: [f64; 1] = [0.5];
const ADVANCED_QUANTILES: [f64; 3] = [0.5, 0.9, 0.99];

/// ServerMetrics' counters and summaries that ZooKeeper's alert rules and
/// Grafana dashboard use, where ringkeeper has the figure; in ZooKeeper's
/// units (ms) and with its quantiles.
fn zookeeper_server_metrics(e: &mut Exposition, s: &Scrape) {
    let counters = [
        (
            "commit_count",
            "Txns committed (in ZooKeeper, by a quorum leader; here every durable txn)",
            s.core.txns,
        ),
        (
            "unrecoverable_error_count",
            "Txn log failures after which the server serves reads only until restart",
            s.unrecoverable_errors,
        ),
        (
            "connection_drop_count",
            "Connections the client closed while the server still read them",
            s.totals.connection_drops,
        ),
    ];
    for (name, help, value) in counters {
        e.family(name, Kind::Counter, help);
        e.sample("", &[], value);
    }
    // ServerMetrics' proposal_count and digest_mismatches_count, and
    // ZooKeeperServer's local_sessions gauge, on every role as in
    // ZooKeeper (its Grafana dashboard plots them).
    let proposals = s.ensemble.as_ref().map_or(0, |(_, v)| v.proposal_count);
    e.family(
        "proposal_count",
        Kind::Counter,
        "Txns this leader proposed to its ensemble (0 standalone and on followers)",
    );
    e.sample("", &[], proposals);
    let (snaps, diffs) = s
        .ensemble
        .as_ref()
        .map_or((0, 0), |(_, v)| (v.snap_syncs, v.diff_syncs));
    e.family(
        "snap_count",
        Kind::Counter,
        "Learners this leader synced by sending a snapshot (SNAP)",
    );
    e.sample("", &[], snaps);
    e.family(
        "diff_count",
        Kind::Counter,
        "Learners this leader synced by sending txns (DIFF, or TRUNC)",
    );
    e.sample("", &[], diffs);
    e.family(
        "digest_mismatches_count",
        Kind::Counter,
        "Tree digest mismatches found (ringkeeper keeps no tree digest: none are found)",
    );
    e.sample("", &[], 0u64);
    e.family(
        "local_sessions",
        Kind::Gauge,
        "Local sessions (ringkeeper has none: every session is global, as ZooKeeper without localSessionsEnabled)",
    );
    e.sample("", &[], 0u64);
    let empty = Summary::new();
    let fsync = s.core.fsync_latency_us.as_deref().unwrap_or(&empty);
    let (reads, updates) = s.latency_us.reads_and_updates();
    let summaries: [(&str, &str, &Summary, &[f64]); 4] = [
        (
            "fsynctime",
            "Time one group-commit fdatasync of the txn log took, in ms (published every 250 ms)",
            fsync,
            &BASIC_QUANTILES,
        ),
        (
            "snapshottime",
            "Time writing one snapshot took, in ms",
            &s.core.snapshot_time_us,
            &BASIC_QUANTILES,
        ),
        (
            "readlatency",
            "Time from reading a request without a txn (reads, pings, sync) to queueing its reply, in ms",
            &reads,
            &ADVANCED_QUANTILES,
        ),
        (
            "updatelatency",
            "Time from reading a request that makes a txn to queueing its reply, in ms",
            &updates,
            &ADVANCED_QUANTILES,
        ),
    ];
    for (name, help, summary, quantiles) in summaries {
        e.family(name, Kind::Summary, help);
        ms_summary_samples(e, summary, quantiles);
    }
}

/// The two StandardExports figures ZooKeeper's dashboards chart.
fn process_families(e: &mut Exposition, p: &ProcessView) {
    e.family(
        "process_cpu_seconds_total",
        Kind::Counter,
        "Total user and system CPU time spent in seconds.",
    );
    e.sample("", &[], p.cpu_seconds);
    e.family(
        "process_resident_memory_bytes",
        Kind::Gauge,
        "Resident memory size in bytes.",
    );
    e.sample("", &[], p.resident_bytes);
}

/// A summary recorded in µs, shown in ms as ZooKeeper's are: the
/// `quantiles` (NaN before the first observation), then `_count` and
/// `_sum` in the order the Prometheus Java client prints them.
fn ms_summary_samples(e: &mut Exposition, s: &Summary, quantiles: &[f64]) {
    for &q in quantiles {
        let q_label = q.to_string();
        let v = s.quantile(q).map_or(f64::NAN, |us| us as f64 / 1000.0);
        e.sample("", &[("quantile", &q_label)], v);
    }
    e.sample("_count", &[], s.count());
    e.sample("_sum", &[], s.sum() as f64 / 1000.0);
}

fn shard_families(e: &mut Exposition, shards: &[ShardView]) {
    type Field = fn(&ShardView) -> u64;
    let families: [(&str, &str, Field); 6] = [
        (
            "ringkeeper_shard_connections",
            "Client connections open on the shard",
            |s| s.connections,
        ),
        (
            "ringkeeper_shard_outstanding_requests",
            "Requests read on the shard and not yet answered (writes in flight and what queues behind them)",
            |s| s.outstanding,
        ),
        (
            "ringkeeper_shard_sessions",
            "Sessions whose connection is on the shard",
            |s| s.sessions,
        ),
        (
            "ringkeeper_shard_watches",
            "Watches set through the shard's connections",
            |s| s.watches,
        ),
        (
            "ringkeeper_shard_packets_received",
            "Packets the shard received since start or srst",
            |s| s.packets_received,
        ),
        (
            "ringkeeper_shard_packets_sent",
            "Packets the shard sent since start or srst",
            |s| s.packets_sent,
        ),
    ];
    for (name, help, field) in families {
        e.family(name, Kind::Gauge, help);
        for s in shards {
            e.sample("", &[("shard", &s.id.to_string())], field(s));
        }
    }
}

fn core_families(e: &mut Exposition, c: &CoreView) {
    let gauges = [
        (
            "ringkeeper_core_outstanding_txns",
            "Txns prepped by the consensus core and not yet durable",
            c.outstanding_txns,
        ),
        (
            "ringkeeper_core_inbox_requests",
            "Requests from the shards waiting in the consensus core's inbox",
            c.inbox_requests,
        ),
        (
            "ringkeeper_core_fsync_batch_txns",
            "Txns in the last batch one fdatasync made durable",
            c.fsync_batch_txns,
        ),
        (
            "ringkeeper_core_fsync_batch_bytes",
            "Log bytes in the last batch one fdatasync made durable",
            c.fsync_batch_bytes,
        ),
    ];
    for (name, help, value) in gauges {
        e.family(name, Kind::Gauge, help);
        e.sample("", &[], value);
    }
    let counters = [
        (
            "ringkeeper_core_fsyncs_total",
            "Txn log fdatasyncs completed",
            c.fsyncs,
        ),
        (
            "ringkeeper_core_txns_total",
            "Txns made durable in the txn log",
            c.txns,
        ),
        (
            "ringkeeper_core_log_bytes_total",
            "Txn log bytes made durable",
            c.log_bytes,
        ),
    ];
    for (name, help, value) in counters {
        e.family(name, Kind::Counter, help);
        e.sample("", &[], value);
    }
    e.family(
        "ringkeeper_core_fsync_latency_us",
        Kind::Summary,
        "Time one group-commit fdatasync of the txn log took, in microseconds (published every 250 ms)",
    );
    let empty = Summary::new();
    summary_samples(e, &[], c.fsync_latency_us.as_deref().unwrap_or(&empty));
}

/// A summary's quantiles (NaN before the first observation, as Prometheus
/// clients print them), `_sum` and `_count`.
fn summary_samples(e: &mut Exposition, labels: &[(&str, &str)], s: &Summary) {
    for q in QUANTILES {
        let q_label = q.to_string();
        let mut with_q = labels.to_vec();
        with_q.push(("quantile", &q_label));
        match s.quantile(q) {
            Some(v) => e.sample("", &with_q, v),
            None => e.sample("", &with_q, f64::NAN),
        }
    }
    e.sample("_sum", labels, s.sum());
    e.sample("_count", labels, s.count());
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::codes::op;

    #[test]
    fn an_ensemble_member_adds_its_families() {
        let view = crate::admin::health::EnsembleView {
            quorum_size: 3,
            learners: 2,
            election_count: 1,
            election_sum_ms: 250,
            ..Default::default()
        };
        let text = |ensemble| {
            render(&Scrape {
                ensemble,
                ..Default::default()
            })
        };
        let leader = text(Some((true, view)));
        for line in [
            "quorum_size 3",
            "learners 2",
            "synced_followers 0",
            "election_time_sum 250",
            "election_time_count 1",
        ] {
            assert!(leader.lines().any(|l| l == line), "leader lacks {line}");
        }
        let follower = text(Some((false, view)));
        assert!(follower.contains("\nquorum_size 3\n"));
        assert!(!follower.contains("learners"));
        assert!(!text(None).contains("quorum_size"));
    }

    #[test]
    fn renders_every_family_with_help_and_type() {
        let mut latency_us = LatencyBook::default();
        latency_us.record(op::GET_DATA, 100);
        latency_us.record(op::GET_DATA, 300);
        let s = Scrape {
            version: "3.9.3-ringkeeper".into(),
            node_count: 5,
            shards: vec![
                ShardView {
                    id: 0,
                    connections: 2,
                    ..Default::default()
                },
                ShardView {
                    id: 1,
                    connections: 1,
                    ..Default::default()
                },
            ],
            latency_us,
            ..Default::default()
        };
        let text = render(&s);
        assert!(
            text.contains("\n# TYPE znode_count gauge\nznode_count 5\n"),
            "{text}"
        );
        assert!(text.contains("\nringkeeper_shard_connections{shard=\"1\"} 1\n"));
        assert!(text.contains("\nringkeeper_request_latency_us_count{op=\"getData\"} 2\n"));
        assert!(text.contains("\nringkeeper_request_latency_us_sum{op=\"getData\"} 400\n"));
        assert!(
            text.contains("ringkeeper_request_latency_us{op=\"getData\",quantile=\"0.999\"} 30")
        );
        assert!(text.contains("\nringkeeper_core_fsync_latency_us{quantile=\"0.5\"} NaN\n"));
        assert!(text.contains("\nringkeeper_core_fsync_latency_us_count 0\n"));
        assert!(text.contains("\navg_latency 0\n"), "{text}");
        let families = text.lines().filter(|l| l.starts_with("# TYPE ")).count();
        let helps = text.lines().filter(|l| l.starts_with("# HELP ")).count();
        assert_eq!(families, helps);
        assert!(text.ends_with('\n'));
    }
}
