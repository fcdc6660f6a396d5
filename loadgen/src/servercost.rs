//! mix/compare --server-pid: what the server process(es) spent over a
//! measured window, per completed op. CPU time (all threads, exited ones
//! included) from the process's CPU clock, its user/system split from
//! /proc/PID/stat; context switches summed over /proc/PID/task/*/status;
//! syscalls (and io_uring_enter calls) counted by perf_event_open on the
//! raw_syscalls:sys_enter and syscalls:sys_enter_io_uring_enter tracepoints,
//! one counter per thread, inherited by threads created during the window
//! (io_uring's iou-wrk/iou-sqp threads are tasks of the process too).
//!
//! A number that cannot be measured is None ("n/a"), never estimated; why
//! is said once on stderr.

use std::collections::BTreeMap;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::Instant;

use serde::Serialize;

/// The server's cost over one measured window (summed over its processes).
#[derive(Clone, Debug, Default, Serialize)]
pub struct ServerWindow {
    pub pids: Vec<u32>,
    /// Threads (tasks) of the processes at the window's end.
    pub threads: usize,
    /// Threads seen at the start and gone at the end: their context
    /// switches within the window are not counted (their CPU time and,
    /// when perf counted, their syscalls are).
    pub threads_exited: usize,
    /// Ops completed in the window (the per-op figures' divisor).
    pub ops: u64,
    pub cpu_s: f64,
    pub cpu_us_per_op: f64,
    /// The kernel's share of the CPU time (/proc/PID/stat: clock ticks).
    pub sys_s: f64,
    pub sys_us_per_op: f64,
    /// CPU time / wall time: 1.0 = one core busy.
    pub cpu_cores_busy: f64,
    pub ctx_switches: u64,
    pub ctx_switches_per_op: f64,
    pub voluntary_ctx_switches: u64,
    /// System calls entered (io_uring_enter included); None: perf could
    /// not count them (see `perf_unavailable`).
    pub syscalls: Option<u64>,
    pub syscalls_per_op: Option<f64>,
    pub io_uring_enters: Option<u64>,
    pub io_uring_enters_per_op: Option<f64>,
    pub perf_unavailable: Option<String>,
}

/// Counters of one thread: syscalls, and io_uring_enter when available.
struct ThreadCounters {
    sys: OwnedFd,
    uring: Option<OwnedFd>,
}

struct Proc {
    pid: u32,
    cpu0_ns: u64,
    ticks0: (u64, u64),
    /// tid -> (voluntary, involuntary) context switches at the start.
    csw0: BTreeMap<u32, (u64, u64)>,
    counters: Vec<ThreadCounters>,
}

/// A window being measured, from [`ServerMeter::start`] to [`ServerMeter::stop`].
pub struct ServerMeter {
    procs: Vec<Proc>,
    perf_err: Option<String>,
    t0: Instant,
}

static PERF_REPORTED: AtomicBool = AtomicBool::new(false);

/// Checks that every pid names a live process (before any load is sent).
pub fn check_pids(pids: &[u32]) -> Result<(), String> {
    for &pid in pids {
        if cpu_clock_ns(pid).is_none() && proc_ticks(pid).is_none() {
            return Err(format!("--server-pid {pid}: no such process"));
        }
    }
    Ok(())
}

impl ServerMeter {
    /// Opens the counters (enabled) and takes the start readings. Call it
    /// right before the window starts.
    pub fn start(pids: &[u32]) -> ServerMeter {
        let ids = tracepoint_ids();
        let mut perf_err = ids.as_ref().err().cloned();
        let mut procs = Vec::new();
        for &pid in pids {
            let tids = tids(pid);
            let mut counters = Vec::new();
            if let (Ok((sys_id, uring_id)), None) = (&ids, &perf_err) {
                for &tid in &tids {
                    match open_tracepoint(*sys_id, tid) {
                        Ok(sys) => counters.push(ThreadCounters {
                            sys,
                            uring: uring_id.and_then(|id| open_tracepoint(id, tid).ok()),
                        }),
                        // The thread exited since the listing: nothing to count.
                        Err(e) if e.raw_os_error() == Some(libc::ESRCH) => {}
                        Err(e) => {
                            perf_err = Some(format!(
                                "perf_event_open(raw_syscalls:sys_enter, tid {tid}): {e}"
                            ));
                            counters.clear();
                            break;
                        }
                    }
                }
            }
            let csw0 = tids
                .iter()
                .filter_map(|&t| Some((t, ctx_switches(pid, t)?)))
                .collect();
            procs.push(Proc {
                pid,
                cpu0_ns: 0,
                ticks0: (0, 0),
                csw0,
                counters,
            });
        }
        if perf_err.is_some() {
            for p in &mut procs {
                p.counters.clear();
            }
        }
        if let Some(e) = &perf_err {
            if !PERF_REPORTED.swap(true, Relaxed) {
                eprintln!("ringkeeper-loadgen: server syscalls not counted (n/a): {e}");
            }
        }
        // The start readings, last, so opening is not in the window.
        for p in &mut procs {
            p.cpu0_ns = cpu_clock_ns(p.pid).unwrap_or(0);
            p.ticks0 = proc_ticks(p.pid).unwrap_or((0, 0));
            for c in &p.counters {
                ioctl(&c.sys, PERF_EVENT_IOC_ENABLE);
                if let Some(u) = &c.uring {
                    ioctl(u, PERF_EVENT_IOC_ENABLE);
                }
            }
        }
        ServerMeter {
            procs,
            perf_err,
            t0: Instant::now(),
        }
    }

    /// Closes the window (per-op figures follow with [`ServerWindow::per_op`]).
    /// Err when a server process is gone (its numbers would be partial).
    pub fn stop(self) -> Result<ServerWindow, String> {
        let wall = self.t0.elapsed().as_secs_f64().max(1e-9);
        for p in &self.procs {
            for c in &p.counters {
                ioctl(&c.sys, PERF_EVENT_IOC_DISABLE);
                if let Some(u) = &c.uring {
                    ioctl(u, PERF_EVENT_IOC_DISABLE);
                }
            }
        }
        let mut w = ServerWindow {
            pids: self.procs.iter().map(|p| p.pid).collect(),
            perf_unavailable: self.perf_err.clone(),
            ..ServerWindow::default()
        };
        let (mut cpu_ns, mut sys_ticks) = (0u64, 0u64);
        let (mut syscalls, mut urings) = (Some(0u64), Some(0u64));
        for p in &self.procs {
            let gone = || format!("server pid {} exited during the window", p.pid);
            let (ns, ticks) = match (cpu_clock_ns(p.pid), proc_ticks(p.pid)) {
                (Some(ns), Some(t)) => (ns, t),
                _ => return Err(gone()),
            };
            cpu_ns += ns.saturating_sub(p.cpu0_ns);
            sys_ticks += ticks.1.saturating_sub(p.ticks0.1);
            let tids = tids(p.pid);
            w.threads += tids.len();
            w.threads_exited += p.csw0.keys().filter(|t| !tids.contains(t)).count();
            for &t in &tids {
                let Some((v, n)) = ctx_switches(p.pid, t) else {
                    continue;
                };
                let (v0, n0) = p.csw0.get(&t).copied().unwrap_or((0, 0));
                let dv = v.saturating_sub(v0);
                w.voluntary_ctx_switches += dv;
                w.ctx_switches += dv + n.saturating_sub(n0);
            }
            if p.counters.is_empty() {
                syscalls = None;
            }
            for c in &p.counters {
                syscalls = syscalls.zip(read_counter(&c.sys)).map(|(a, b)| a + b);
                urings = match &c.uring {
                    Some(u) => urings.zip(read_counter(u)).map(|(a, b)| a + b),
                    None => None,
                };
            }
        }
        if syscalls.is_none() {
            urings = None;
        }
        w.cpu_s = cpu_ns as f64 / 1e9;
        w.sys_s = sys_ticks as f64 / clk_tck();
        w.cpu_cores_busy = w.cpu_s / wall;
        w.syscalls = syscalls;
        w.io_uring_enters = urings;
        Ok(w)
    }
}

impl ServerWindow {
    /// Fills in the per-op figures once the window's op count is known.
    pub fn per_op(mut self, ops: u64) -> ServerWindow {
        let per = |v: f64| v / ops.max(1) as f64;
        self.ops = ops;
        self.cpu_us_per_op = per(self.cpu_s * 1e6);
        self.sys_us_per_op = per(self.sys_s * 1e6);
        self.ctx_switches_per_op = per(self.ctx_switches as f64);
        self.syscalls_per_op = self.syscalls.map(|s| per(s as f64));
        self.io_uring_enters_per_op = self.io_uring_enters.map(|s| per(s as f64));
        self
    }
}

/// The process's CPU time (every thread, exited ones included), ns, from
/// its CPU-time clock (clock_getcpuclockid).
fn cpu_clock_ns(pid: u32) -> Option<u64> {
    let mut clock: libc::clockid_t = 0;
    // SAFETY: plain calls with out-pointers to locals.
    unsafe {
        if libc::clock_getcpuclockid(pid as libc::pid_t, &mut clock) != 0 {
            return None;
        }
        let mut ts: libc::timespec = std::mem::zeroed();
        if libc::clock_gettime(clock, &mut ts) != 0 {
            return None;
        }
        Some(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
    }
}

fn clk_tck() -> f64 {
    // SAFETY: sysconf reads a constant of the running system.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as f64
    } else {
        100.0
    }
}

/// (utime, stime) of the whole process, clock ticks, from /proc/PID/stat.
fn proc_ticks(pid: u32) -> Option<(u64, u64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    Some((f.get(11)?.parse().ok()?, f.get(12)?.parse().ok()?))
}

/// The process's threads, kernel io threads (iou-sqp-*, iou-wrk-*) included.
fn tids(pid: u32) -> Vec<u32> {
    let mut v: Vec<u32> = std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    v.sort_unstable();
    v
}

/// (voluntary, nonvoluntary) context switches of one thread.
fn ctx_switches(pid: u32, tid: u32) -> Option<(u64, u64)> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/status")).ok()?;
    let field = |name: &str| -> Option<u64> {
        s.lines()
            .find_map(|l| l.strip_prefix(name))?
            .trim()
            .parse()
            .ok()
    };
    Some((
        field("voluntary_ctxt_switches:")?,
        field("nonvoluntary_ctxt_switches:")?,
    ))
}

/// Tracepoint ids: raw_syscalls:sys_enter, and syscalls:sys_enter_io_uring_enter
/// when the kernel has syscall tracepoints.
fn tracepoint_ids() -> Result<(u64, Option<u64>), String> {
    let roots = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"];
    let read = |ev: &str| -> Result<u64, String> {
        let mut errs = Vec::new();
        for r in roots {
            let path = format!("{r}/events/{ev}/id");
            match std::fs::read_to_string(&path) {
                Ok(s) => {
                    return s
                        .trim()
                        .parse()
                        .map_err(|_| format!("{path}: not a number"))
                }
                Err(e) => errs.push(format!("{path}: {e}")),
            }
        }
        Err(errs.join("; "))
    };
    let sys = match read("raw_syscalls/sys_enter") {
        Ok(id) => id,
        // Some hosts boot without tracefs mounted (a VM's minimal init);
        // as root it can be mounted where the kernel expects it.
        Err(e) if mount_tracefs() => read("raw_syscalls/sys_enter").map_err(|_| e)?,
        Err(e) => return Err(e),
    };
    Ok((sys, read("syscalls/sys_enter_io_uring_enter").ok()))
}

/// Mounts tracefs on /sys/kernel/tracing (empty when it is not mounted);
/// says whether it did. Needs CAP_SYS_ADMIN: otherwise nothing happens.
fn mount_tracefs() -> bool {
    let target = c"/sys/kernel/tracing";
    let fs = c"tracefs";
    // SAFETY: the strings are NUL-terminated literals and no data is passed.
    let rc = unsafe {
        libc::mount(
            fs.as_ptr(),
            target.as_ptr(),
            fs.as_ptr(),
            0,
            std::ptr::null(),
        )
    };
    rc == 0
}

const PERF_TYPE_TRACEPOINT: u32 = 2;
const PERF_EVENT_IOC_ENABLE: libc::c_ulong = 0x2400;
const PERF_EVENT_IOC_DISABLE: libc::c_ulong = 0x2401;
const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 1 << 3;
const ATTR_DISABLED: u64 = 1 << 0;
const ATTR_INHERIT: u64 = 1 << 1;
/// Inherit into new threads only, not into child processes (Linux 5.13).
const ATTR_INHERIT_THREAD: u64 = 1 << 35;

/// struct perf_event_attr up to config2 (PERF_ATTR_SIZE_VER1, 72 bytes).
#[repr(C)]
#[derive(Default)]
struct PerfEventAttr {
    type_: u32,
    size: u32,
    config: u64,
    sample_period: u64,
    sample_type: u64,
    read_format: u64,
    flags: u64,
    wakeup_events: u32,
    bp_type: u32,
    config1: u64,
    config2: u64,
}

/// A counting (not sampling) tracepoint counter on one thread, disabled
/// until PERF_EVENT_IOC_ENABLE, inherited by the threads it creates (and,
/// on kernels before 5.13, by the processes it forks).
fn open_tracepoint(id: u64, tid: u32) -> std::io::Result<OwnedFd> {
    match open_counter(id, tid, ATTR_DISABLED | ATTR_INHERIT | ATTR_INHERIT_THREAD) {
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
            open_counter(id, tid, ATTR_DISABLED | ATTR_INHERIT)
        }
        r => r,
    }
}

fn open_counter(id: u64, tid: u32, flags: u64) -> std::io::Result<OwnedFd> {
    let attr = PerfEventAttr {
        type_: PERF_TYPE_TRACEPOINT,
        size: std::mem::size_of::<PerfEventAttr>() as u32,
        config: id,
        flags,
        ..PerfEventAttr::default()
    };
    // SAFETY: perf_event_open(attr, pid, cpu, group_fd, flags) with a
    // valid attr of the size it declares.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            &attr as *const PerfEventAttr,
            tid as libc::pid_t,
            -1 as libc::c_int,
            -1 as libc::c_int,
            PERF_FLAG_FD_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a new descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as libc::c_int) })
}

fn ioctl(fd: &OwnedFd, req: libc::c_ulong) {
    // SAFETY: an argument-less perf ioctl on a perf descriptor.
    unsafe { libc::ioctl(fd.as_raw_fd(), req as _, 0) };
}

/// The counter's value: its own count and its inherited children's.
fn read_counter(fd: &OwnedFd) -> Option<u64> {
    let mut v = 0u64;
    // SAFETY: reads 8 bytes into a u64.
    let n = unsafe { libc::read(fd.as_raw_fd(), (&mut v as *mut u64).cast(), 8) };
    (n == 8).then_some(v)
}

/// `--server-pid` values: PID or NAME=PID, comma lists allowed; for each
/// target, its pids. Bare pids belong to the only target (mix).
pub fn pids_by_target(
    specs: &[String],
    targets: &[crate::target::Target],
) -> Result<Vec<Vec<u32>>, String> {
    let mut out = vec![Vec::new(); targets.len()];
    for spec in specs.iter().map(|s| s.trim()).filter(|s| !s.is_empty()) {
        let (name, pid) = match spec.split_once('=') {
            Some((n, p)) => (Some(n.trim()), p.trim()),
            None => (None, spec),
        };
        let pid: u32 = pid
            .parse()
            .map_err(|_| format!("--server-pid {spec:?}: want PID or NAME=PID"))?;
        let i = match name {
            Some(n) => targets
                .iter()
                .position(|t| t.name == n)
                .ok_or_else(|| format!("--server-pid {spec:?}: no target named {n}"))?,
            None if targets.len() == 1 => 0,
            None => {
                return Err(format!(
                    "--server-pid {spec:?}: with several targets, say whose: NAME=PID"
                ))
            }
        };
        out[i].push(pid);
    }
    for pids in &out {
        check_pids(pids)?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::target::Target;

    #[test]
    fn server_pids_go_to_their_targets() {
        let me = std::process::id();
        let one = [Target::parse("rk=127.0.0.1:1").unwrap()];
        let s = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            pids_by_target(&s(&[&me.to_string()]), &one).unwrap(),
            [vec![me]]
        );
        let two = [
            Target::parse("a=127.0.0.1:1").unwrap(),
            Target::parse("b=127.0.0.1:2").unwrap(),
        ];
        let got = pids_by_target(&s(&[&format!("b={me}"), &format!("b={me}")]), &two).unwrap();
        assert_eq!(got, [vec![], vec![me, me]]);
        assert!(pids_by_target(&s(&[&me.to_string()]), &two).is_err());
        assert!(pids_by_target(&s(&["c=1"]), &two).is_err());
        assert!(pids_by_target(&s(&["x"]), &one).is_err());
    }

    /// Our own process, measured over a window of known work: its CPU time,
    /// and (where perf may count) the syscalls made by a thread started
    /// within the window (counted through the inherited counters).
    #[test]
    fn measures_this_process() {
        let me = std::process::id();
        let m = ServerMeter::start(&[me]);
        // A thread that did not exist when the window opened: some CPU,
        // then 2,000 syscalls (this thread makes only a few, to start and
        // join it).
        let burned = std::thread::spawn(|| {
            let mut x = 0u64;
            for _ in 0..5_000_000 {
                x = x.wrapping_add(std::hint::black_box(1));
            }
            std::hint::black_box(x);
            for _ in 0..2000 {
                // SAFETY: getppid has no arguments and cannot fail.
                std::hint::black_box(unsafe { libc::syscall(libc::SYS_getppid) });
            }
            let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
            // SAFETY: an out-pointer to a local.
            unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
            ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9
        })
        .join()
        .unwrap();
        let w = m.stop().unwrap().per_op(1000);
        assert!(burned > 0.0 && w.cpu_s >= burned, "{burned} {w:?}");
        assert!(w.threads >= 1);
        if let Some(s) = w.syscalls {
            assert!(s >= 2000, "{w:?}");
            assert!(w.syscalls_per_op.unwrap() >= 2.0);
        } else {
            assert!(w.perf_unavailable.is_some());
        }
    }
}
