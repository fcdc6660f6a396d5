//! What a run measures: op counts, latency histograms, errors by code, the
//! client's own CPU time and heap allocations.

use std::alloc::{GlobalAlloc, Layout, System};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use hdrhistogram::Histogram;
use serde::Serialize;

/// Error code the loadgen records for requests lost with their connection
/// (ZooKeeper's CONNECTIONLOSS; never sent by a server).
pub const CONNECTION_LOSS: i32 = -4;

/// Latency histogram in microseconds, 1 us .. 10 min, 3 significant digits.
pub fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 600_000_000, 3).expect("histogram bounds")
}

/// Error counts by code: a small fixed table, so counting one allocates
/// nothing on the hot path.
#[derive(Clone, Default)]
pub struct Errors {
    slots: [(i32, u64); 16],
    used: usize,
    other: u64,
}

impl Errors {
    pub fn add(&mut self, code: i32, n: u64) {
        for s in &mut self.slots[..self.used] {
            if s.0 == code {
                s.1 += n;
                return;
            }
        }
        if self.used < self.slots.len() {
            self.slots[self.used] = (code, n);
            self.used += 1;
        } else {
            self.other += n;
        }
    }

    pub fn merge(&mut self, o: &Errors) {
        for &(c, n) in &o.slots[..o.used] {
            self.add(c, n);
        }
        self.other += o.other;
    }

    pub fn total(&self) -> u64 {
        self.slots[..self.used].iter().map(|s| s.1).sum::<u64>() + self.other
    }

    /// Named counts, e.g. {"NONODE(-101)": 3}.
    pub fn by_name(&self) -> BTreeMap<String, u64> {
        let mut m = BTreeMap::new();
        for &(c, n) in &self.slots[..self.used] {
            m.insert(format!("{}({c})", code_name(c)), n);
        }
        if self.other > 0 {
            m.insert("other".into(), self.other);
        }
        m
    }
}

/// KeeperException.Code names.
pub fn code_name(code: i32) -> &'static str {
    match code {
        0 => "OK",
        -1 => "SYSTEMERROR",
        -2 => "RUNTIMEINCONSISTENCY",
        -3 => "DATAINCONSISTENCY",
        -4 => "CONNECTIONLOSS",
        -5 => "MARSHALLINGERROR",
        -6 => "UNIMPLEMENTED",
        -7 => "OPERATIONTIMEOUT",
        -8 => "BADARGUMENTS",
        -13 => "NEWCONFIGNOQUORUM",
        -14 => "RECONFIGINPROGRESS",
        -101 => "NONODE",
        -102 => "NOAUTH",
        -103 => "BADVERSION",
        -108 => "NOCHILDRENFOREPHEMERALS",
        -110 => "NODEEXISTS",
        -111 => "NOTEMPTY",
        -112 => "SESSIONEXPIRED",
        -113 => "INVALIDCALLBACK",
        -114 => "INVALIDACL",
        -115 => "AUTHFAILED",
        -118 => "SESSIONMOVED",
        -119 => "NOTREADONLY",
        -120 => "EPHEMERALONLOCALSESSION",
        -121 => "NOWATCHER",
        -122 => "REQUESTTIMEOUT",
        -123 => "RECONFIGDISABLED",
        -124 => "SESSIONCLOSEDREQUIRESASLAUTH",
        -125 => "QUOTAEXCEEDED",
        -127 => "THROTTLEDOP",
        _ => "UNKNOWN",
    }
}

/// Latency percentiles of one histogram, microseconds.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Percentiles {
    pub count: u64,
    pub mean: f64,
    pub p50: u64,
    pub p90: u64,
    pub p99: u64,
    pub p999: u64,
    pub max: u64,
}

impl Percentiles {
    pub fn of(h: &Histogram<u64>) -> Percentiles {
        if h.is_empty() {
            return Percentiles::default();
        }
        Percentiles {
            count: h.len(),
            mean: h.mean(),
            p50: h.value_at_quantile(0.5),
            p90: h.value_at_quantile(0.9),
            p99: h.value_at_quantile(0.99),
            p999: h.value_at_quantile(0.999),
            max: h.max(),
        }
    }
}

/// Process CPU time (user + system), seconds.
pub fn cpu_seconds() -> f64 {
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// CPU time (user + system, all threads) of another process, seconds, from
/// /proc/PID/stat; None when it cannot be read.
pub fn process_cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces and parentheses: fields count from
    // after its closing one (state is field 3; utime 14, stime 15).
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| fields.get(i)?.parse::<u64>().ok();
    let (utime, stime) = (ticks(11)?, ticks(12)?);
    // SAFETY: sysconf reads a constant of the running system.
    let per_s = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    (per_s > 0).then(|| (utime + stime) as f64 / per_s as f64)
}

/// Time on CPU of every thread of another process, seconds, summed from
/// /proc/PID/task/*/schedstat (nanoseconds, where /proc/PID/stat counts
/// clock ticks: fine enough for intervals of a few milliseconds). Threads
/// that exited are not counted. None when it cannot be read.
pub fn process_run_seconds(pid: u32) -> Option<f64> {
    let mut ns = 0u64;
    for t in std::fs::read_dir(format!("/proc/{pid}/task")).ok()? {
        let Ok(t) = t else { continue };
        if let Ok(s) = std::fs::read_to_string(t.path().join("schedstat")) {
            ns += s
                .split_whitespace()
                .next()
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0);
        }
    }
    Some(ns as f64 / 1e9)
}

/// Server-side cost of a measured interval (with --server-pid).
#[derive(Clone, Debug, Default, Serialize)]
pub struct ServerCost {
    /// The server process's CPU seconds (all threads) over the interval.
    pub cpu_s: f64,
    /// Its CPU microseconds per completed op.
    pub cpu_us_per_op: f64,
    /// CPU time / wall time: 1.0 = one core busy.
    pub cpu_cores_busy: f64,
}

/// Server CPU over an interval, started with [`ServerMeter::start`].
pub struct ServerMeter {
    pid: u32,
    cpu0: f64,
    t0: std::time::Instant,
}

impl ServerMeter {
    pub fn start(pid: Option<u32>) -> Option<ServerMeter> {
        let pid = pid?;
        Some(ServerMeter {
            pid,
            cpu0: process_cpu_seconds(pid)?,
            t0: std::time::Instant::now(),
        })
    }

    pub fn stop(&self, ops: u64) -> Option<ServerCost> {
        let cpu_s = process_cpu_seconds(self.pid)? - self.cpu0;
        Some(ServerCost {
            cpu_s,
            cpu_us_per_op: cpu_s * 1e6 / ops.max(1) as f64,
            cpu_cores_busy: cpu_s / self.t0.elapsed().as_secs_f64().max(1e-9),
        })
    }
}

/// Cores this process may run on.
pub fn cores() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}

/// The system allocator, counting allocations so a run can show that its
/// per-request path allocates nothing (allocs/op in the report).
pub struct CountingAlloc;

pub static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Relaxed);
        System.alloc(layout)
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Relaxed);
        System.alloc_zeroed(layout)
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Relaxed);
        System.realloc(ptr, layout, new_size)
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }
}

fn io_ops() -> u64 {
    crate::session::IO_OPS.load(Relaxed)
}

pub fn allocations() -> u64 {
    ALLOCATIONS.load(Relaxed)
}

/// Client-side cost of a measured interval.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ClientCost {
    /// Client CPU seconds (all threads) over the interval.
    pub cpu_s: f64,
    /// CPU microseconds per completed op.
    pub cpu_us_per_op: f64,
    /// CPU time / wall time: 1.0 = one core busy.
    pub cpu_cores_busy: f64,
    /// Heap allocations per completed op: none per request; glommio
    /// allocates per socket operation, and requests are batched.
    pub allocs_per_op: f64,
    /// Socket reads + writes per completed op (batching).
    pub io_per_op: f64,
    /// The client was close to its CPU limit: results may measure it.
    pub saturated: bool,
}

/// Snapshot taken at the start of an interval.
pub struct CostMeter {
    cpu0: f64,
    allocs0: u64,
    io0: u64,
    t0: std::time::Instant,
}

impl CostMeter {
    pub fn start() -> CostMeter {
        CostMeter {
            cpu0: cpu_seconds(),
            allocs0: allocations(),
            io0: io_ops(),
            t0: std::time::Instant::now(),
        }
    }

    /// Closes the interval (before its op count may be known).
    pub fn stop(&self) -> CostSpan {
        CostSpan {
            cpu_s: cpu_seconds() - self.cpu0,
            wall_s: self.t0.elapsed().as_secs_f64().max(1e-9),
            allocs: allocations() - self.allocs0,
            io: io_ops() - self.io0,
        }
    }
}

/// A closed interval: wall time, client CPU time and allocations.
pub struct CostSpan {
    pub cpu_s: f64,
    pub wall_s: f64,
    pub allocs: u64,
    pub io: u64,
}

impl CostSpan {
    /// The cost per op; `threads` is how many client executors ran.
    pub fn per_op(&self, ops: u64, threads: usize) -> ClientCost {
        let ops_f = ops.max(1) as f64;
        let busy = self.cpu_s / self.wall_s;
        ClientCost {
            cpu_s: self.cpu_s,
            cpu_us_per_op: self.cpu_s * 1e6 / ops_f,
            cpu_cores_busy: busy,
            allocs_per_op: self.allocs as f64 / ops_f,
            io_per_op: self.io as f64 / ops_f,
            saturated: busy >= 0.9 * threads.clamp(1, cores()) as f64,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_table_counts_and_overflows() {
        let mut e = Errors::default();
        for c in 0..20 {
            e.add(-100 - c, 1);
        }
        e.add(-101, 2);
        assert_eq!(e.total(), 22);
        assert_eq!(e.by_name()["NONODE(-101)"], 3);
        assert_eq!(e.by_name()["other"], 4);
    }
}
