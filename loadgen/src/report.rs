//! The final human tables, and the --json / --csv files.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

use crate::counters::CounterCheck;
use crate::creates::CreatesPoint;
use crate::latency::LatencyRun;
use crate::mix::MixPoint;
use crate::servercost::ServerWindow;
use crate::stats::{ClientCost, Percentiles};
use crate::timeline::Timeline;

/// 850us, 1.25ms, 2.1s.
pub fn us(v: u64) -> String {
    if v < 1_000 {
        format!("{v}us")
    } else if v < 1_000_000 {
        format!("{:.2}ms", v as f64 / 1e3)
    } else {
        format!("{:.2}s", v as f64 / 1e6)
    }
}

fn lat_cells(p: &Percentiles) -> String {
    if p.count == 0 {
        return format!("{:>8} {:>8} {:>8} {:>8} {:>8}", "-", "-", "-", "-", "-");
    }
    format!(
        "{:>8} {:>8} {:>8} {:>8} {:>8}",
        us(p.p50),
        us(p.p90),
        us(p.p99),
        us(p.p999),
        us(p.max)
    )
}

fn check_cell(c: &CounterCheck) -> String {
    match c.diff_pct {
        Some(d) => format!("{d:+.2}%"),
        None => "n/a".into(),
    }
}

/// For each (target, outstanding, read%), the round with the median ops/s.
pub fn medians(points: &[MixPoint]) -> Vec<MixPoint> {
    let mut groups: BTreeMap<(usize, u32, String), Vec<&MixPoint>> = BTreeMap::new();
    for p in points {
        groups
            .entry((p.outstanding, p.read_pct, p.target.clone()))
            .or_default()
            .push(p);
    }
    let mut out: Vec<MixPoint> = groups
        .into_values()
        .map(|mut g| {
            g.sort_by(|a, b| a.ops_per_s.total_cmp(&b.ops_per_s));
            g[g.len() / 2].clone()
        })
        .collect();
    // Targets in first-seen order within each read%.
    let order: Vec<String> = points.iter().fold(Vec::new(), |mut v, p| {
        if !v.contains(&p.target) {
            v.push(p.target.clone());
        }
        v
    });
    out.sort_by_key(|p| {
        (
            p.outstanding,
            p.read_pct,
            order.iter().position(|t| *t == p.target).unwrap_or(0),
        )
    });
    out
}

/// The same (outstanding, read%) point.
fn same_point(a: &MixPoint, b: &MixPoint) -> bool {
    a.outstanding == b.outstanding && a.read_pct == b.read_pct
}

/// More than one depth (--outstanding) was measured.
fn several_depths(points: &[MixPoint]) -> bool {
    points
        .iter()
        .any(|p| p.outstanding != points[0].outstanding)
}

/// Spread of ops/s over rounds, percent of the median ((max - min) / median).
pub fn spread_pct(points: &[MixPoint], of: &MixPoint) -> Option<f64> {
    let v: Vec<f64> = points
        .iter()
        .filter(|p| p.target == of.target && same_point(p, of))
        .map(|p| p.ops_per_s)
        .collect();
    if v.len() < 2 {
        return None;
    }
    let (mn, mx) = v
        .iter()
        .fold((f64::MAX, f64::MIN), |(a, b), &x| (a.min(x), b.max(x)));
    let mut s = v.clone();
    s.sort_by(f64::total_cmp);
    Some((mx - mn) * 100.0 / s[s.len() / 2].max(1e-9))
}

pub fn mix_table(all: &[MixPoint]) -> String {
    let meds = medians(all);
    let rounds = all.iter().map(|p| p.round).max().unwrap_or(0) + 1;
    let mut o = String::new();
    if rounds > 1 {
        let _ = writeln!(
            o,
            "median of {rounds} rounds per point (spread = (max-min)/median)"
        );
    }
    let w = meds
        .iter()
        .map(|p| p.target.len())
        .max()
        .unwrap_or(0)
        .max(8);
    let depth = several_depths(all);
    let server = all.iter().any(|p| p.server.is_some());
    let _ = write!(
        o,
        "{:<w$} {}{:>5} {:>10} {:>10} {:>10} | {:>8} {:>8} {:>8} {:>8} {:>8} | {:>8} {:>8} {:>8} {:>8} {:>8} | {:>7} {:>8} {:>7} {:>7}",
        "target", if depth { format!("{:>5} ", "depth") } else { String::new() },
        "read%", "ops/s", "reads/s", "writes/s",
        "r p50", "r p90", "r p99", "r p99.9", "r max",
        "w p50", "w p90", "w p99", "w p99.9", "w max",
        "errors", "cpu/op", "srv", "spread"
    );
    if server {
        let _ = write!(
            o,
            " | {:>9} {:>9} {:>8} {:>8} {:>8}",
            "srv cpu", "srv sys", "sysc/op", "uring/op", "csw/op"
        );
    }
    o.push('\n');
    for p in &meds {
        let spread = spread_pct(all, p)
            .map(|s| format!("{s:.1}%"))
            .unwrap_or_else(|| "-".into());
        let _ = write!(
            o,
            "{:<w$} {}{:>5} {:>10.0} {:>10.0} {:>10.0} | {} | {} | {:>7} {:>6.2}us {:>7} {:>7}",
            p.target,
            if depth {
                format!("{:>5} ", p.outstanding)
            } else {
                String::new()
            },
            p.read_pct,
            p.ops_per_s,
            p.reads_per_s,
            p.writes_per_s,
            lat_cells(&p.read_latency_us),
            lat_cells(&p.write_latency_us),
            p.error_total,
            p.client.cpu_us_per_op,
            check_cell(&p.counters),
            spread
        );
        if server {
            o.push_str(&server_cells(p.server.as_ref()));
        }
        o.push('\n');
    }
    let _ = writeln!(
        o,
        "cpu/op: client CPU per op; srv: servers' srvr Received vs requests sent"
    );
    if server {
        let _ = writeln!(
            o,
            "srv cpu/sys: server CPU (its kernel part) per op; sysc/op: server syscalls per op (io_uring_enter included), uring/op: its io_uring_enter calls; csw/op: its context switches per op"
        );
    }
    o.push_str(&mix_notes(all));
    o
}

fn per_op_cell(v: Option<f64>) -> String {
    v.map(|v| format!("{v:.2}")).unwrap_or_else(|| "n/a".into())
}

/// The server columns of a point's row.
fn server_cells(s: Option<&ServerWindow>) -> String {
    match s {
        Some(s) => format!(
            " | {:>7.2}us {:>7.2}us {:>8} {:>8} {:>8.2}",
            s.cpu_us_per_op,
            s.sys_us_per_op,
            per_op_cell(s.syscalls_per_op),
            per_op_cell(s.io_uring_enters_per_op),
            s.ctx_switches_per_op
        ),
        None => format!(
            " | {:>9} {:>9} {:>8} {:>8} {:>8}",
            "n/a", "n/a", "n/a", "n/a", "n/a"
        ),
    }
}

/// The line shown as each point finishes.
pub fn point_line(p: &MixPoint, depth: bool) -> String {
    let mut o = format!("{} ", p.target);
    if depth {
        let _ = write!(o, "x{} outstanding ", p.outstanding);
    }
    let _ = write!(
        o,
        "{:>3}% reads round {}: {:.0} ops/s, errors {}, client {:.2}us CPU/op",
        p.read_pct, p.round, p.ops_per_s, p.error_total, p.client.cpu_us_per_op
    );
    if let Some(s) = &p.server {
        let _ = write!(
            o,
            "; server {:.2}us CPU/op ({:.2}us sys), {} syscalls/op ({} io_uring_enter), {:.2} ctx switches/op, {:.2} cores",
            s.cpu_us_per_op,
            s.sys_us_per_op,
            per_op_cell(s.syscalls_per_op),
            per_op_cell(s.io_uring_enters_per_op),
            s.ctx_switches_per_op,
            s.cpu_cores_busy
        );
    }
    o
}

/// Errors by code, failures and warnings, for every point that had any.
fn mix_notes(all: &[MixPoint]) -> String {
    let mut o = String::new();
    for p in all {
        let tag = if several_depths(all) {
            format!(
                "{} x{} {}% round {}",
                p.target, p.outstanding, p.read_pct, p.round
            )
        } else {
            format!("{} {}% round {}", p.target, p.read_pct, p.round)
        };
        if p.error_total > 0 {
            let _ = writeln!(o, "  {tag}: errors {:?}", p.errors);
        }
        if p.disconnects > 0 || p.sessions_never_connected > 0 {
            let _ = writeln!(
                o,
                "  {tag}: {} disconnects/failed connects, {} sessions never connected",
                p.disconnects, p.sessions_never_connected
            );
        }
        o.push_str(&cost_warning(&tag, &p.client));
        if p.counters.agrees() == Some(false) {
            let _ = writeln!(
                o,
                "  {tag}: WARNING counters disagree: {}",
                p.counters.describe()
            );
        }
        if let Some(s) = p.server.as_ref().filter(|s| s.threads_exited > 0) {
            let _ = writeln!(
                o,
                "  {tag}: {} server threads exited in the window: their context switches are not counted",
                s.threads_exited
            );
        }
    }
    o
}

pub fn cost_warning(tag: &str, c: &ClientCost) -> String {
    if c.saturated {
        format!(
            "  {tag}: WARNING the client was saturated ({:.2} cores busy): these numbers may measure the load generator, not the server (add --threads or cores)\n",
            c.cpu_cores_busy
        )
    } else {
        String::new()
    }
}

/// The first target's ratio to `other` at `at`'s point, round by round (each
/// round measured the two back to back), sorted.
fn paired_ratios(all: &[MixPoint], base: &str, other: &str, at: &MixPoint) -> Vec<f64> {
    let mut ratios: Vec<f64> = all
        .iter()
        .filter(|p| same_point(p, at) && p.target == base)
        .filter_map(|a| {
            let b = all
                .iter()
                .find(|b| same_point(b, at) && b.target == other && b.round == a.round)?;
            (b.ops_per_s > 0.0).then(|| a.ops_per_s / b.ops_per_s)
        })
        .collect();
    ratios.sort_by(f64::total_cmp);
    ratios
}

/// compare: per read%, every target's ops/s (median round) and the first
/// target's ratio to each other target: the ratio of the medians and, with
/// several rounds, the median of the per-round ratios with their range. On
/// a machine whose load drifts (CPU steal, other tenants) the per-round
/// ratio is the steadier figure: each round measures the targets back to
/// back.
pub fn compare_table(all: &[MixPoint], targets: &[String]) -> String {
    let meds = medians(all);
    let rounds = all.iter().map(|p| p.round + 1).max().unwrap_or(1);
    let mut o = String::new();
    let depth = several_depths(all);
    if depth {
        let _ = write!(o, "{:>5} ", "depth");
    }
    let _ = write!(o, "{:>5}", "read%");
    for t in targets {
        let _ = write!(
            o,
            " {:>12} {:>9}",
            format!("{t} ops/s"),
            format!("{t} w p99")
        );
    }
    for t in &targets[1..] {
        let _ = write!(o, " {:>10}", format!("{}/{t}", targets[0]));
        if rounds > 1 {
            let _ = write!(o, " {:>22}", format!("per round (min-max)"));
        }
    }
    o.push('\n');
    let mut at: Vec<&MixPoint> = Vec::new();
    for p in &meds {
        if !at.iter().any(|a| same_point(a, p)) {
            at.push(p);
        }
    }
    for at in at {
        let get = |t: &str| meds.iter().find(|p| same_point(p, at) && p.target == t);
        if depth {
            let _ = write!(o, "{:>5} ", at.outstanding);
        }
        let _ = write!(o, "{:>5}", at.read_pct);
        for t in targets {
            match get(t) {
                Some(p) => {
                    let wp99 = if p.write_latency_us.count > 0 {
                        us(p.write_latency_us.p99)
                    } else {
                        "-".into()
                    };
                    let _ = write!(o, " {:>12.0} {:>9}", p.ops_per_s, wp99);
                }
                None => {
                    let _ = write!(o, " {:>12} {:>9}", "-", "-");
                }
            }
        }
        let base = get(&targets[0]).map(|p| p.ops_per_s);
        for t in &targets[1..] {
            match (base, get(t).map(|p| p.ops_per_s)) {
                (Some(a), Some(b)) if b > 0.0 => {
                    let _ = write!(o, " {:>9.2}x", a / b);
                }
                _ => {
                    let _ = write!(o, " {:>10}", "-");
                }
            }
            if rounds > 1 {
                let r = paired_ratios(all, &targets[0], t, at);
                if r.is_empty() {
                    let _ = write!(o, " {:>22}", "-");
                } else {
                    let cell =
                        format!("{:.2}x ({:.2}-{:.2})", r[r.len() / 2], r[0], r[r.len() - 1]);
                    let _ = write!(o, " {cell:>22}");
                }
            }
        }
        o.push('\n');
    }
    o
}

pub fn creates_table(points: &[CreatesPoint]) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "{:<8} {:>7} {:>9} {:>8} {:>11} | {:>8} {:>8} {:>8} {:>8} {:>8} | {:>7} {:>8} {:>7}",
        "target",
        "workers",
        "creates",
        "secs",
        "creates/s",
        "p50",
        "p90",
        "p99",
        "p99.9",
        "max",
        "errors",
        "cpu/op",
        "srv"
    );
    for p in points {
        let _ = writeln!(
            o,
            "{:<8} {:>7} {:>9} {:>8.2} {:>11.0} | {} | {:>7} {:>6.2}us {:>7}",
            p.target,
            p.workers,
            p.creates,
            p.seconds,
            p.creates_per_s,
            lat_cells(&p.create_latency_us),
            p.error_total,
            p.client.cpu_us_per_op,
            check_cell(&p.counters)
        );
    }
    for p in points {
        let tag = format!("{} W={}", p.target, p.workers);
        if p.error_total > 0 {
            let _ = writeln!(o, "  {tag}: errors {:?}", p.errors);
        }
        if p.failed_workers > 0 {
            let _ = writeln!(o, "  {tag}: {} workers failed", p.failed_workers);
        }
        if p.counters.agrees() == Some(false) {
            let _ = writeln!(o, "  {tag}: WARNING {}", p.counters.describe());
        }
    }
    o
}

pub fn latency_table(runs: &[LatencyRun]) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "{:<8} {:<16} {:<6} {:<17} {:>7} {:>9} {:>9} {:>10} | {:>8} {:>8} {:>8} | {:>6}",
        "target",
        "server",
        "mode",
        "phase",
        "ops",
        "ms",
        "ms/op",
        "ops/s",
        "p50",
        "p99",
        "max",
        "errors"
    );
    for r in runs {
        for p in &r.phases {
            let _ = writeln!(
                o,
                "{:<8} {:<16} {:<6} {:<17} {:>7} {:>9.1} {:>9.4} {:>10.0} | {:>8} {:>8} {:>8} | {:>6}",
                p.target,
                p.server,
                p.mode,
                p.phase,
                p.ops,
                p.ms,
                p.ms_per_op,
                p.ops_per_s,
                us(p.latency_us.p50),
                us(p.latency_us.p99),
                us(p.latency_us.max),
                p.error_total
            );
        }
        for p in r.phases.iter().filter(|p| p.error_total > 0) {
            let _ = writeln!(
                o,
                "  {} {} {}: errors {:?}",
                p.target, p.mode, p.phase, p.errors
            );
        }
        let _ = writeln!(
            o,
            "client {:.2}us CPU/op; counters: {}",
            r.client.cpu_us_per_op,
            r.counters.describe()
        );
    }
    let _ = writeln!(
        o,
        "notif: ms from the first delete sent to the last notification received; latency: each delete sent to its notification"
    );
    o
}

pub fn timeline_summary(t: &Timeline) -> String {
    let mut o = String::new();
    let rates: Vec<f64> = t.samples.iter().map(|s| s.ops_per_s).collect();
    let mut sorted = rates.clone();
    sorted.sort_by(f64::total_cmp);
    let pick = |q: f64| {
        sorted
            .get(((sorted.len().max(1) - 1) as f64 * q) as usize)
            .copied()
            .unwrap_or(0.0)
    };
    let _ = writeln!(
        o,
        "{} {}% reads, {:.1}s in {} samples of {}ms: mean {:.0} ops/s; per sample min {:.0}, median {:.0}, max {:.0}",
        t.target,
        t.read_pct,
        t.seconds,
        t.samples.len(),
        t.interval_ms,
        t.ops_per_s,
        pick(0.0),
        pick(0.5),
        pick(1.0)
    );
    let _ = writeln!(
        o,
        "read latency  p50 {} p99 {} max {}; write latency p50 {} p99 {} max {}",
        us(t.read_latency_us.p50),
        us(t.read_latency_us.p99),
        us(t.read_latency_us.max),
        us(t.write_latency_us.p50),
        us(t.write_latency_us.p99),
        us(t.write_latency_us.max)
    );
    let zero = t.samples.iter().filter(|s| s.ops_per_s == 0.0).count();
    let _ = writeln!(
        o,
        "errors {} {:?}; disconnects {}; samples with no completed op: {zero}",
        t.error_total, t.errors, t.disconnects
    );
    for e in &t.events {
        let _ = writeln!(
            o,
            "event at {:.1}s (started {:.2}s): {:?} -> {}",
            e.at_s,
            e.started_s,
            e.command,
            match (e.exit_code, e.finished_s) {
                (Some(c), Some(f)) => format!("exit {c} at {f:.2}s"),
                (None, Some(f)) => format!("killed by a signal at {f:.2}s"),
                _ => "still running at the end".into(),
            }
        );
    }
    let _ = writeln!(
        o,
        "client {:.2}us CPU/op; counters: {}",
        t.client.cpu_us_per_op,
        t.counters.describe()
    );
    o.push_str(&cost_warning(&t.target, &t.client));
    o
}

/// The whole run, as written to --json.
#[derive(Serialize)]
pub struct RunFile<'a, P: Serialize, R: Serialize> {
    pub experiment: &'a str,
    pub loadgen_version: &'a str,
    pub started_unix_s: u64,
    pub targets: &'a [crate::target::Target],
    pub params: &'a P,
    pub results: &'a R,
}

pub fn write_json<T: Serialize>(path: &str, v: &T) -> Result<(), String> {
    let text = serde_json::to_string_pretty(v).map_err(|e| e.to_string())?;
    std::fs::write(path, text + "\n").map_err(|e| format!("{path}: {e}"))
}

/// Writes a CSV file: a header and rows of cells (quoted when needed).
pub fn write_csv(path: &str, header: &[&str], rows: &[Vec<String>]) -> Result<(), String> {
    let mut o = String::new();
    let line = |o: &mut String, cells: &mut dyn Iterator<Item = String>| {
        let v: Vec<String> = cells.map(|c| csv_cell(&c)).collect();
        o.push_str(&v.join(","));
        o.push('\n');
    };
    line(&mut o, &mut header.iter().map(|s| s.to_string()));
    for r in rows {
        line(&mut o, &mut r.iter().cloned());
    }
    std::fs::write(path, o).map_err(|e| format!("{path}: {e}"))
}

fn csv_cell(c: &str) -> String {
    if c.contains([',', '"', '\n']) {
        format!("\"{}\"", c.replace('"', "\"\""))
    } else {
        c.to_string()
    }
}

fn opt<T: ToString>(v: Option<T>) -> String {
    v.map(|x| x.to_string()).unwrap_or_default()
}

fn errs(m: &BTreeMap<String, u64>) -> String {
    m.iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(" ")
}

fn lat_csv(p: &Percentiles) -> Vec<String> {
    vec![
        p.p50.to_string(),
        p.p90.to_string(),
        p.p99.to_string(),
        p.p999.to_string(),
        p.max.to_string(),
    ]
}

pub const MIX_CSV: &[&str] = &[
    "target",
    "read_pct",
    "round",
    "seconds",
    "ops_per_s",
    "reads_per_s",
    "writes_per_s",
    "read_p50_us",
    "read_p90_us",
    "read_p99_us",
    "read_p999_us",
    "read_max_us",
    "write_p50_us",
    "write_p90_us",
    "write_p99_us",
    "write_p999_us",
    "write_max_us",
    "errors",
    "errors_by_code",
    "disconnects",
    "client_cpu_us_per_op",
    "client_cores_busy",
    "client_allocs_per_op",
    "client_io_per_op",
    "client_saturated",
    "client_sent",
    "server_received",
    "counter_diff_pct",
    "outstanding",
    "server_cpu_us_per_op",
    "server_sys_us_per_op",
    "server_cores_busy",
    "server_syscalls_per_op",
    "server_io_uring_enters_per_op",
    "server_ctx_switches_per_op",
    "server_threads",
];

pub fn mix_rows(points: &[MixPoint]) -> Vec<Vec<String>> {
    points
        .iter()
        .map(|p| {
            let mut r = vec![
                p.target.clone(),
                p.read_pct.to_string(),
                p.round.to_string(),
                format!("{:.3}", p.seconds),
                format!("{:.1}", p.ops_per_s),
                format!("{:.1}", p.reads_per_s),
                format!("{:.1}", p.writes_per_s),
            ];
            r.extend(lat_csv(&p.read_latency_us));
            r.extend(lat_csv(&p.write_latency_us));
            r.extend([
                p.error_total.to_string(),
                errs(&p.errors),
                p.disconnects.to_string(),
                format!("{:.3}", p.client.cpu_us_per_op),
                format!("{:.3}", p.client.cpu_cores_busy),
                format!("{:.4}", p.client.allocs_per_op),
                format!("{:.4}", p.client.io_per_op),
                p.client.saturated.to_string(),
                p.counters.client_sent.to_string(),
                opt(p.counters.server_received),
                opt(p.counters.diff_pct.map(|d| format!("{d:.3}"))),
                p.outstanding.to_string(),
            ]);
            let s = p.server.as_ref();
            let f = |v: Option<f64>, prec: usize| opt(v.map(|v| format!("{v:.prec$}")));
            r.extend([
                f(s.map(|s| s.cpu_us_per_op), 3),
                f(s.map(|s| s.sys_us_per_op), 3),
                f(s.map(|s| s.cpu_cores_busy), 3),
                f(s.and_then(|s| s.syscalls_per_op), 4),
                f(s.and_then(|s| s.io_uring_enters_per_op), 4),
                f(s.map(|s| s.ctx_switches_per_op), 4),
                opt(s.map(|s| s.threads)),
            ]);
            r
        })
        .collect()
}

pub const CREATES_CSV: &[&str] = &[
    "target",
    "workers",
    "creates",
    "seconds",
    "creates_per_s",
    "p50_us",
    "p90_us",
    "p99_us",
    "p999_us",
    "max_us",
    "errors",
    "errors_by_code",
    "failed_workers",
    "client_cpu_us_per_op",
    "client_sent",
    "server_received",
    "counter_diff_pct",
];

pub fn creates_rows(points: &[CreatesPoint]) -> Vec<Vec<String>> {
    points
        .iter()
        .map(|p| {
            let mut r = vec![
                p.target.clone(),
                p.workers.to_string(),
                p.creates.to_string(),
                format!("{:.3}", p.seconds),
                format!("{:.1}", p.creates_per_s),
            ];
            r.extend(lat_csv(&p.create_latency_us));
            r.extend([
                p.error_total.to_string(),
                errs(&p.errors),
                p.failed_workers.to_string(),
                format!("{:.3}", p.client.cpu_us_per_op),
                p.counters.client_sent.to_string(),
                opt(p.counters.server_received),
                opt(p.counters.diff_pct.map(|d| format!("{d:.3}"))),
            ]);
            r
        })
        .collect()
}

pub const LATENCY_CSV: &[&str] = &[
    "target",
    "server",
    "mode",
    "phase",
    "ops",
    "ms",
    "ms_per_op",
    "ops_per_s",
    "p50_us",
    "p90_us",
    "p99_us",
    "p999_us",
    "max_us",
    "errors",
    "errors_by_code",
];

pub fn latency_rows(runs: &[LatencyRun]) -> Vec<Vec<String>> {
    let mut rows = Vec::new();
    for r in runs {
        for p in &r.phases {
            let mut row = vec![
                p.target.clone(),
                p.server.clone(),
                p.mode.clone(),
                p.phase.clone(),
                p.ops.to_string(),
                format!("{:.3}", p.ms),
                format!("{:.5}", p.ms_per_op),
                format!("{:.1}", p.ops_per_s),
            ];
            row.extend(lat_csv(&p.latency_us));
            row.extend([p.error_total.to_string(), errs(&p.errors)]);
            rows.push(row);
        }
    }
    rows
}

pub const TIMELINE_CSV: &[&str] = &[
    "t_s",
    "ops_per_s",
    "reads_per_s",
    "writes_per_s",
    "errors",
    "reconnects",
    "event",
];

pub fn timeline_rows(t: &Timeline) -> Vec<Vec<String>> {
    let mut rows = Vec::new();
    let mut prev = 0.0;
    for s in &t.samples {
        let ev: Vec<&str> = t
            .events
            .iter()
            .filter(|e| e.started_s > prev && e.started_s <= s.t_s)
            .map(|e| e.command.as_str())
            .collect();
        rows.push(vec![
            format!("{:.3}", s.t_s),
            format!("{:.1}", s.ops_per_s),
            format!("{:.1}", s.reads_per_s),
            format!("{:.1}", s.writes_per_s),
            s.errors.to_string(),
            s.reconnects.to_string(),
            ev.join("; "),
        ]);
        prev = s.t_s;
    }
    rows
}
