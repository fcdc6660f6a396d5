//! Tree growth (issue 11, sections 1 and 2): S sessions x O outstanding
//! pipelined creates grow a tree to a list of checkpoints; the creates/s of
//! each window between two checkpoints, and over the last 10% of each window
//! (the rate "at" that size), show whether a write's cost grows with the
//! tree. With --server-pid the server's RSS (VmRSS) and peak (VmHWM) are
//! read from /proc at each checkpoint, for memory per znode.
//!
//! Layouts: `one-parent`, every child under `ROOT/p0`; `spread`, child i
//! under `ROOT/p(i mod P)`. Checkpoints count the children created by the
//! load (the root and the P parents are created first and not counted).

use std::cell::RefCell;
use std::fmt::Write as _;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Barrier, OnceLock};
use std::time::{Duration, Instant};

use ringkeeper::proto::codes::{err, op};
use ringkeeper::proto::Request;
use serde::Serialize;

use crate::progress::Progress;
use crate::session::{create_body, create_template, on_executor, open_acl, Session, Template};
use crate::stats::{process_run_seconds, ClientCost, CostMeter, Errors};
use crate::target::Target;

/// After --max-seconds no new create is sent; replies still in flight get
/// this long before the sessions give up.
const DRAIN_GRACE: Duration = Duration::from_secs(30);
/// The main thread polls the progress this often (for RSS samples).
const POLL: Duration = Duration::from_millis(2);

#[derive(Clone, Debug, Serialize)]
pub struct ScaleParams {
    /// "one-parent" or "spread".
    pub layout: String,
    pub parents: usize,
    /// Children created, cumulative, increasing.
    pub checkpoints: Vec<u64>,
    pub sessions: usize,
    pub outstanding: usize,
    pub value_bytes: usize,
    pub threads: usize,
    pub root: String,
    pub max_seconds: f64,
    pub server_pid: Option<u32>,
    pub session_timeout_ms: i32,
    /// The tail of a window (the "at size" rate) is its last 10% but at
    /// least this many creates.
    pub tail_min: u64,
    /// Creates (then deletes) this many znodes under ROOT/warmup before the
    /// measured load, so that the first window is not the server's cold start
    /// (first fsyncs, page faults, a JVM's JIT); the tree is back to the root
    /// and its parents when the load starts.
    pub warmup: usize,
    /// At each checkpoint, this many probe rounds (0: none; the load then
    /// runs through the checkpoints without pausing).
    pub probe_rounds: usize,
    /// Creates timed per probe round (then deleted).
    pub probe_creates: u64,
    /// No per-checkpoint lines on stderr.
    #[serde(skip)]
    pub quiet: bool,
}

/// One window: from the previous checkpoint (0 for the first) to `to`.
#[derive(Clone, Debug, Serialize)]
pub struct Window {
    pub from: u64,
    pub to: u64,
    /// False when the run stopped (time bound, errors) inside this window:
    /// creates and seconds then cover what was done, the rates are partial.
    pub reached: bool,
    pub creates: u64,
    pub seconds: f64,
    pub creates_per_s: f64,
    /// The window's tail: its last 10%, at least --tail-min creates (the
    /// rate at size `to`).
    pub tail_creates: u64,
    pub tail_seconds: f64,
    pub tail_per_s: Option<f64>,
    /// /proc/PID/status of --server-pid when the checkpoint was seen.
    pub rss_bytes: Option<u64>,
    pub hwm_bytes: Option<u64>,
    /// Children created when RSS was read (a few ms after the checkpoint).
    pub rss_at_creates: Option<u64>,
    /// (RSS - RSS before the load) / children at the sample.
    pub rss_growth_bytes_per_znode: Option<f64>,
    /// The same for the peak (VmHWM - RSS before the load).
    pub hwm_growth_bytes_per_znode: Option<f64>,
    /// With --probe-rounds: the median creates/s of the probe's rounds at
    /// this checkpoint (the rate at size `to`, held there), and each round.
    pub probe_per_s: Option<f64>,
    pub probe_rounds_per_s: Vec<f64>,
    /// With --server-pid: the server's CPU time per timed create, median
    /// over the rounds (all threads, from schedstat), microseconds. Far
    /// steadier than the rate on a host whose disk and neighbours jitter.
    pub probe_server_cpu_us: Option<f64>,
    pub probe_rounds_server_cpu_us: Vec<f64>,
    /// When each round started and ended (unix seconds), to line rounds
    /// up with what the server logged meanwhile (a snapshot running, say:
    /// `tuning/probe-vs-snapshots.py`).
    pub probe_rounds_unix_s: Vec<(f64, f64)>,
}

impl Window {
    #[allow(clippy::too_many_arguments)]
    fn new(
        from: u64,
        to: u64,
        reached: bool,
        creates: u64,
        seconds: f64,
        tail_creates: u64,
        tail_seconds: f64,
        tail_per_s: Option<f64>,
    ) -> Window {
        Window {
            from,
            to,
            reached,
            creates,
            seconds,
            creates_per_s: creates as f64 / seconds.max(1e-9),
            tail_creates,
            tail_seconds,
            tail_per_s,
            rss_bytes: None,
            hwm_bytes: None,
            rss_at_creates: None,
            rss_growth_bytes_per_znode: None,
            hwm_growth_bytes_per_znode: None,
            probe_per_s: None,
            probe_rounds_per_s: Vec::new(),
            probe_server_cpu_us: None,
            probe_rounds_server_cpu_us: Vec::new(),
            probe_rounds_unix_s: Vec::new(),
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct ScaleResult {
    pub target: String,
    pub layout: String,
    pub parents: usize,
    pub windows: Vec<Window>,
    /// Children created (successful creates).
    pub created: u64,
    pub seconds: f64,
    pub error_total: u64,
    pub errors: std::collections::BTreeMap<String, u64>,
    /// Sessions that failed to connect or lost their connection.
    pub failed_sessions: u64,
    pub stopped_by_time: bool,
    /// Rate of the last reached window / the first.
    pub ratio_last_first_window: Option<f64>,
    /// Rate over the tail of the last reached window / of the first.
    pub ratio_last_first_at_size: Option<f64>,
    /// Probe median at the last checkpoint / at the first.
    pub ratio_last_first_probe: Option<f64>,
    pub rss_before_bytes: Option<u64>,
    pub rss_after_bytes: Option<u64>,
    pub hwm_after_bytes: Option<u64>,
    pub client: ClientCost,
}

/// VmRSS and VmHWM of a process, bytes.
pub fn proc_memory(pid: u32) -> Option<(u64, u64)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .map(|kb| kb * 1024)
    };
    Some((field("VmRSS:")?, field("VmHWM:")?))
}

/// A create count whose completion time is recorded by the session whose
/// replies crossed it.
struct Mark {
    at: u64,
    ns: AtomicU64,
}

const UNSET: u64 = u64::MAX;

struct Shared {
    /// Children that existed when this phase started.
    base: u64,
    total: u64,
    next: AtomicU64,
    done: AtomicU64,
    /// Sorted by `at`: every checkpoint and its 90% point.
    marks: Vec<Mark>,
    start: OnceLock<Instant>,
    deadline: Duration,
    running: AtomicUsize,
    failed: AtomicU64,
}

impl Shared {
    fn crossed(&self, prev: u64, now: u64, at: Instant) {
        let start = *self.start.get().expect("started");
        let ns = at.saturating_duration_since(start).as_nanos() as u64;
        let first = self.marks.partition_point(|m| m.at <= prev);
        for m in &self.marks[first..] {
            if m.at > now {
                break;
            }
            m.ns.store(ns, Relaxed);
        }
    }

    fn mark_s(&self, at: u64) -> Option<f64> {
        if at == self.base {
            return Some(0.0);
        }
        let i = self.marks.partition_point(|m| m.at < at);
        let m = self.marks.get(i).filter(|m| m.at == at)?;
        let ns = m.ns.load(Relaxed);
        (ns != UNSET).then(|| ns as f64 / 1e9)
    }
}

/// Where the window (from, to]'s tail starts: its last 10%, but at least
/// `tail_min` creates (the whole window if it is shorter): replies come in
/// bursts of up to sessions x outstanding (a group commit), so a tail of
/// one burst would measure the burst, not the rate.
fn tail_from(from: u64, to: u64, tail_min: u64) -> u64 {
    to - (to - from).div_ceil(10).max(tail_min).min(to - from)
}

pub fn child_path(out: &mut String, root: &str, parents: usize, i: u64) {
    out.clear();
    let _ = write!(out, "{root}/p{}/n{i}", i % parents.max(1) as u64);
}

/// Creates the root and the parents; the root must not exist.
fn setup(t: &Target, p: &ScaleParams) -> Result<(), String> {
    let (server, root, parents, timeout) = (
        t.servers[0].clone(),
        p.root.clone(),
        p.parents,
        p.session_timeout_ms,
    );
    let (warmup, window, value) = (
        p.warmup,
        (p.sessions * p.outstanding).max(1),
        vec![b'w'; p.value_bytes],
    );
    let bound = Duration::from_secs_f64(p.max_seconds.max(1.0));
    on_executor("lg-setup", move || async move {
        let work = async {
            let (mut s, code) = Session::connect_creating(&server, timeout, &root).await?;
            match code {
                0 => {}
                err::NODE_EXISTS => {
                    return Err(format!(
                        "{root} already exists: the scale experiment needs a fresh tree \
                     (a new server, or another --root)"
                    ))
                }
                c => return Err(format!("create {root}: error {c}")),
            }
            let ts: Vec<Template> = (0..parents)
                .map(|j| create_template(&format!("{root}/p{j}"), b""))
                .collect();
            let codes = s.call_many(&ts, 500).await.map_err(|e| e.to_string())?;
            if let Some(c) = codes.iter().find(|&&c| c != 0) {
                return Err(format!("creating the parents under {root}: error {c}"));
            }
            if warmup > 0 {
                let w = format!("{root}/warmup");
                let mut ts = vec![create_template(&w, b"")];
                ts.extend((0..warmup).map(|i| create_template(&format!("{w}/w{i}"), &value)));
                ts.extend((0..warmup).map(|i| {
                    Template::new(&Request::Delete {
                        path: format!("{w}/w{i}"),
                        version: -1,
                    })
                }));
                ts.push(Template::new(&Request::Delete {
                    path: w.clone(),
                    version: -1,
                }));
                let codes = s.call_many(&ts, window).await.map_err(|e| e.to_string())?;
                if let Some(c) = codes.iter().find(|&&c| c != 0) {
                    return Err(format!("warm-up under {w}: error {c}"));
                }
            }
            s.close().await;
            Ok(())
        };
        within(
            bound,
            || {
                format!(
                    "setup (root, parents, warm-up) did not finish within --max-seconds {bound:?}"
                )
            },
            work,
        )
        .await
    })?
}

/// `work`'s result, or the error `late` makes if `bound` passes first.
async fn within<T>(
    bound: Duration,
    late: impl FnOnce() -> String,
    work: impl std::future::Future<Output = Result<T, String>>,
) -> Result<T, String> {
    let expired = async {
        glommio::timer::sleep(bound).await;
        Err(late())
    };
    futures_lite::future::or(work, expired).await
}

/// What one growth phase (from `base` to its last checkpoint) measured.
struct Phase {
    windows: Vec<Window>,
    /// Children that exist when the phase ends (base + successful creates).
    done: u64,
    seconds: f64,
    errors: Errors,
    failed: u64,
    stopped_by_time: bool,
}

pub fn run(t: &Target, p: &ScaleParams, progress: &Progress) -> Result<ScaleResult, String> {
    if p.checkpoints.is_empty() || p.checkpoints.windows(2).any(|w| w[0] >= w[1]) {
        return Err("--checkpoints: want increasing counts, e.g. 1000,10000".into());
    }
    if p.checkpoints[0] == 0 {
        return Err("--checkpoints: counts must be > 0".into());
    }
    setup(t, p)?;
    let rss_before = p.server_pid.and_then(proc_memory).map(|m| m.0);
    let meter = CostMeter::start();
    let started = Instant::now();
    let budget = Duration::from_secs_f64(p.max_seconds.max(0.1));
    let mut windows = Vec::new();
    let mut errors = Errors::default();
    let (mut created, mut seconds, mut failed, mut stopped) = (0u64, 0.0, 0u64, false);
    let mut ops = 0u64;
    // Without probes the load runs through every checkpoint in one go; with
    // them it pauses at each checkpoint for the probe.
    let phases: Vec<&[u64]> = if p.probe_rounds == 0 {
        vec![&p.checkpoints[..]]
    } else {
        p.checkpoints.chunks(1).collect()
    };
    for cps in phases {
        let left = budget.saturating_sub(started.elapsed());
        if left.is_zero() {
            stopped = true;
            break;
        }
        let ph = grow_phase(t, p, created, cps, left, progress, rss_before)?;
        ops += ph.done - created;
        created = ph.done;
        seconds += ph.seconds;
        errors.merge(&ph.errors);
        failed += ph.failed;
        stopped |= ph.stopped_by_time;
        let reached = ph.windows.last().is_some_and(|w| w.reached);
        windows.extend(ph.windows);
        if !reached || ph.failed > 0 {
            break;
        }
        if p.probe_rounds > 0 {
            let pr = probe_at(t, p, created, budget.saturating_sub(started.elapsed()))?;
            ops += 2 * pr.creates * pr.rounds_per_s.len() as u64;
            if !p.quiet {
                progress.clear();
                eprintln!(
                    "[{} scale] probe at {} children: median {:.0} creates/s, {} us of server CPU per create, over {} rounds of {}",
                    t.name,
                    created,
                    pr.median_per_s.unwrap_or(0.0),
                    pr.median_cpu_us
                        .map(|v| format!("{v:.2}"))
                        .unwrap_or_else(|| "-".into()),
                    pr.rounds_per_s.len(),
                    pr.creates
                );
            }
            let w = windows.last_mut().expect("a reached window");
            w.probe_per_s = pr.median_per_s;
            w.probe_rounds_per_s = pr.rounds_per_s;
            w.probe_server_cpu_us = pr.median_cpu_us;
            w.probe_rounds_server_cpu_us = pr.rounds_cpu_us;
            w.probe_rounds_unix_s = pr.rounds_unix_s;
        }
    }
    progress.clear();
    let client = meter
        .stop()
        .per_op(ops, p.threads.clamp(1, p.sessions.max(1)));
    let after = p.server_pid.and_then(proc_memory);
    let reached: Vec<&Window> = windows.iter().filter(|w| w.reached).collect();
    let (ratio_w, ratio_a, ratio_p) = match (reached.first(), reached.last()) {
        (Some(a), Some(b)) if reached.len() > 1 => {
            let r = |x: Option<f64>, y: Option<f64>| match (x, y) {
                (Some(x), Some(y)) => Some(y / x.max(1e-9)),
                _ => None,
            };
            (
                Some(b.creates_per_s / a.creates_per_s.max(1e-9)),
                r(a.tail_per_s, b.tail_per_s),
                r(a.probe_per_s, b.probe_per_s),
            )
        }
        _ => (None, None, None),
    };
    Ok(ScaleResult {
        target: t.name.clone(),
        layout: p.layout.clone(),
        parents: p.parents,
        windows,
        created,
        seconds,
        error_total: errors.total(),
        errors: errors.by_name(),
        failed_sessions: failed,
        stopped_by_time: stopped,
        ratio_last_first_window: ratio_w,
        ratio_last_first_at_size: ratio_a,
        ratio_last_first_probe: ratio_p,
        rss_before_bytes: rss_before,
        rss_after_bytes: after.map(|m| m.0),
        hwm_after_bytes: after.map(|m| m.1),
        client,
    })
}

/// One probe's rounds at a checkpoint.
struct Probe {
    creates: u64,
    rounds_per_s: Vec<f64>,
    median_per_s: Option<f64>,
    rounds_cpu_us: Vec<f64>,
    median_cpu_us: Option<f64>,
    /// Start and end of each round (its sessions' setup included, its
    /// untimed deletes not), unix seconds.
    rounds_unix_s: Vec<(f64, f64)>,
}

fn unix_now_s() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

fn median(v: &[f64]) -> Option<f64> {
    let mut sorted = v.to_vec();
    sorted.sort_by(f64::total_cmp);
    let m = sorted.len() / 2;
    match sorted.len() {
        0 => None,
        n if n % 2 == 1 => Some(sorted[m]),
        _ => Some((sorted[m - 1] + sorted[m]) / 2.0),
    }
}

/// At `size` children: --probe-rounds rounds, each timing --probe-creates
/// creates (the same sessions, pipelining and name series as the growth:
/// children `size + r*P ..`, so they land where the growth's next children
/// would, not in leaves a previous round warmed) and then deleting them,
/// untimed. The tree is back at `size` after every round, so the rate is the
/// rate at that size, and the median of the rounds rides out the bursts of
/// a noisy host that a single short window cannot.
fn probe_at(t: &Target, p: &ScaleParams, size: u64, left: Duration) -> Result<Probe, String> {
    let quiet = ScaleParams {
        quiet: true,
        server_pid: None,
        ..p.clone()
    };
    let started = Instant::now();
    let n = p.probe_creates.max(1);
    let mut rounds = Vec::new();
    let mut cpu = Vec::new();
    let mut spans = Vec::new();
    let run_s = || p.server_pid.and_then(process_run_seconds);
    for r in 0..p.probe_rounds as u64 {
        let budget = left.saturating_sub(started.elapsed());
        if budget.is_zero() {
            break;
        }
        let base = size + r * n;
        let cpu0 = run_s();
        let start_unix_s = unix_now_s();
        let ph = grow_phase(
            t,
            &quiet,
            base,
            &[base + n],
            budget,
            &Progress::new(true),
            None,
        )?;
        let w = ph.windows.last().filter(|w| w.reached && ph.failed == 0);
        let Some(w) = w else {
            return Err(format!(
                "probe at {size} children: round {r} did not complete ({} of {n} created, errors {:?})",
                ph.done - base,
                ph.errors.by_name()
            ));
        };
        rounds.push(w.creates_per_s);
        spans.push((start_unix_s, unix_now_s()));
        if let (Some(a), Some(b)) = (cpu0, run_s()) {
            cpu.push((b - a) * 1e6 / n as f64);
        }
        delete_range(
            t,
            p,
            base,
            base + n,
            budget.saturating_sub(started.elapsed()),
        )?;
    }
    Ok(Probe {
        creates: n,
        median_per_s: median(&rounds),
        rounds_per_s: rounds,
        median_cpu_us: median(&cpu),
        rounds_cpu_us: cpu,
        rounds_unix_s: spans,
    })
}

/// Deletes children `from..to` (one session, pipelined as the growth).
fn delete_range(
    t: &Target,
    p: &ScaleParams,
    from: u64,
    to: u64,
    left: Duration,
) -> Result<(), String> {
    let (server, root, parents, timeout) = (
        t.servers[0].clone(),
        p.root.clone(),
        p.parents,
        p.session_timeout_ms,
    );
    let window = (p.sessions * p.outstanding).max(1);
    on_executor("lg-probe-delete", move || async move {
        let work = async {
            let mut s = Session::connect(&server, timeout)
                .await
                .map_err(|e| e.to_string())?;
            let mut path = String::new();
            let ts: Vec<Template> = (from..to)
                .map(|i| {
                    child_path(&mut path, &root, parents, i);
                    Template::new(&Request::Delete {
                        path: path.clone(),
                        version: -1,
                    })
                })
                .collect();
            let codes = s.call_many(&ts, window).await.map_err(|e| e.to_string())?;
            s.close().await;
            match codes.iter().find(|&&c| c != 0) {
                Some(c) => Err(format!("deleting probe children {from}..{to}: error {c}")),
                None => Ok(()),
            }
        };
        within(
            left,
            || format!("deleting probe children {from}..{to}: out of --max-seconds"),
            work,
        )
        .await
    })?
}

/// Grows the tree from `base` children through `checkpoints` (absolute
/// counts), within `left`.
fn grow_phase(
    t: &Target,
    p: &ScaleParams,
    base: u64,
    checkpoints: &[u64],
    left: Duration,
    progress: &Progress,
    rss_before: Option<u64>,
) -> Result<Phase, String> {
    let mut marks = Vec::new();
    let mut from = base;
    for &c in checkpoints {
        let m = tail_from(from, c, p.tail_min);
        if m > from {
            marks.push(m);
        }
        marks.push(c);
        from = c;
    }
    marks.dedup();
    let total = *checkpoints.last().expect("a checkpoint");
    let threads = p.threads.clamp(1, p.sessions.max(1));
    let sh = Arc::new(Shared {
        base,
        total,
        next: AtomicU64::new(base),
        done: AtomicU64::new(base),
        marks: marks
            .into_iter()
            .map(|at| Mark {
                at,
                ns: AtomicU64::new(UNSET),
            })
            .collect(),
        start: OnceLock::new(),
        deadline: left,
        running: AtomicUsize::new(threads),
        failed: AtomicU64::new(0),
    });
    // Every thread connects its sessions, then all start together.
    let barrier = Arc::new(Barrier::new(threads + 1));
    let mut handles = Vec::new();
    for th in 0..threads {
        let (p, sh, barrier) = (p.clone(), sh.clone(), barrier.clone());
        let servers = t.servers.clone();
        let mine: Vec<usize> = (0..p.sessions).filter(|s| s % threads == th).collect();
        let h = glommio::LocalExecutorBuilder::new(glommio::Placement::Unbound)
            .name(&format!("lg-{th}"))
            .spawn(move || async move {
                let e = run_thread(&p, &servers, &sh, &barrier, mine).await;
                sh.running.fetch_sub(1, Relaxed);
                e
            })
            .map_err(|e| e.to_string())?;
        handles.push(h);
    }
    barrier.wait();
    let start = *sh.start.get_or_init(Instant::now);
    // RSS at each checkpoint, as soon as it is seen.
    let mut rss: Vec<Option<(u64, u64, u64)>> = vec![None; checkpoints.len()];
    let mut k = 0;
    let (mut last_status, mut last_done, mut last_cp) = (start, base, (start, base));
    loop {
        let running = sh.running.load(Relaxed);
        let done = sh.done.load(Relaxed);
        while k < checkpoints.len() && done >= checkpoints[k] {
            if let Some(pid) = p.server_pid {
                let now = sh.done.load(Relaxed);
                rss[k] = proc_memory(pid).map(|(r, h)| (r, h, now));
            }
            // One line per checkpoint (unless --quiet): long runs show
            // where they are; the figures are the final table's.
            if !p.quiet {
                let now = Instant::now();
                let rate = (checkpoints[k] - last_cp.1) as f64
                    / now.duration_since(last_cp.0).as_secs_f64().max(1e-9);
                progress.clear();
                eprintln!(
                    "[{} scale] {} children at {:.1}s (~{:.0} creates/s since the last checkpoint){}",
                    t.name,
                    checkpoints[k],
                    now.duration_since(start).as_secs_f64(),
                    rate,
                    rss[k]
                        .map(|(r, _, _)| format!(", server RSS {:.1} MB", r as f64 / 1048576.0))
                        .unwrap_or_default()
                );
                last_cp = (now, checkpoints[k]);
            }
            k += 1;
        }
        if running == 0 {
            break;
        }
        if last_status.elapsed() >= Duration::from_secs(1) {
            let now = Instant::now();
            progress.status(&format!(
                "[{} scale] {} children, {:.0} creates/s",
                t.name,
                done,
                (done - last_done) as f64 / now.duration_since(last_status).as_secs_f64()
            ));
            (last_status, last_done) = (now, done);
        }
        std::thread::sleep(POLL);
    }
    let mut errors = Errors::default();
    for h in handles {
        errors.merge(&h.join().map_err(|e| e.to_string())?);
    }
    let seconds = start.elapsed().as_secs_f64();
    let created = sh.done.load(Relaxed);
    let end_s = seconds;
    let mut windows = Vec::new();
    let mut from = base;
    for (i, &to) in checkpoints.iter().enumerate() {
        if from > created {
            break;
        }
        let t0 = sh.mark_s(from).unwrap_or(end_s);
        let reached = created >= to;
        let mut w = match (reached, sh.mark_s(to)) {
            (true, Some(t1)) => {
                let l = tail_from(from, to, p.tail_min);
                let (lc, ls, lr) = match sh.mark_s(l) {
                    Some(tl) => {
                        let s = t1 - tl;
                        (to - l, s, (s > 0.0).then(|| (to - l) as f64 / s))
                    }
                    _ => (0, 0.0, None),
                };
                let s = t1 - t0;
                Window::new(from, to, true, to - from, s, lc, ls, lr)
            }
            _ => {
                let c = created.min(to) - from;
                let s = (end_s - t0).max(0.0);
                Window::new(from, to, false, c, s, 0, 0.0, None)
            }
        };
        if let Some((r, h, at)) = rss[i] {
            w.rss_bytes = Some(r);
            w.hwm_bytes = Some(h);
            w.rss_at_creates = Some(at);
            if let Some(b) = rss_before {
                let n = at.max(1) as f64;
                w.rss_growth_bytes_per_znode = Some((r as f64 - b as f64) / n);
                w.hwm_growth_bytes_per_znode = Some((h as f64 - b as f64) / n);
            }
        }
        windows.push(w);
        from = to;
    }
    Ok(Phase {
        windows,
        done: created,
        seconds,
        errors,
        failed: sh.failed.load(Relaxed),
        stopped_by_time: created < total && seconds >= left.as_secs_f64(),
    })
}

async fn run_thread(
    p: &ScaleParams,
    servers: &[String],
    sh: &Arc<Shared>,
    barrier: &Barrier,
    mine: Vec<usize>,
) -> Errors {
    let mut sessions = Vec::new();
    for &i in &mine {
        match Session::connect(&servers[i % servers.len()], p.session_timeout_ms).await {
            Ok(s) => sessions.push(s),
            Err(e) => {
                eprintln!("ringkeeper-loadgen: session {i}: {e}");
                sh.failed.fetch_add(1, Relaxed);
            }
        }
    }
    // Blocks this executor, whose sessions are all connected and idle.
    barrier.wait();
    let start = *sh.start.get_or_init(Instant::now);
    let errors = Rc::new(RefCell::new(Errors::default()));
    let mut tasks = Vec::new();
    for s in sessions {
        let (p, sh, errors) = (p.clone(), sh.clone(), errors.clone());
        tasks.push(glommio::spawn_local(async move {
            let mut local = Errors::default();
            if let Err(e) = grow(&p, &sh, s, start, &mut local).await {
                eprintln!("ringkeeper-loadgen: scale session: {e}");
                sh.failed.fetch_add(1, Relaxed);
            }
            errors.borrow_mut().merge(&local);
        }));
    }
    for t in tasks {
        t.await;
    }
    Rc::try_unwrap(errors)
        .ok()
        .expect("tasks done")
        .into_inner()
}

/// Keeps `outstanding` creates in flight until every child is claimed (or
/// the time is up), then drains. Allocation-free per request.
async fn grow(
    p: &ScaleParams,
    sh: &Shared,
    mut s: Session,
    start: Instant,
    errors: &mut Errors,
) -> std::io::Result<()> {
    let acl = open_acl();
    let value = vec![b'v'; p.value_bytes];
    let window = p.outstanding.max(1) as u64;
    let mut out = Vec::with_capacity(p.outstanding * (p.root.len() + p.value_bytes + 96));
    let mut path = String::with_capacity(p.root.len() + 48);
    let mut inflight = 0u64;
    let hard_deadline = start + sh.deadline + DRAIN_GRACE;
    loop {
        let want = window - inflight;
        if want > 0 && start.elapsed() < sh.deadline {
            let a = sh.next.fetch_add(want, Relaxed);
            if a < sh.total {
                let b = (a + want).min(sh.total);
                out.clear();
                for i in a..b {
                    child_path(&mut path, &p.root, p.parents, i);
                    s.push_with(&mut out, op::CREATE, |w| {
                        create_body(w, &path, &value, &acl, 0)
                    });
                }
                s.send(&out).await?;
                inflight += b - a;
            }
        }
        if inflight == 0 {
            break;
        }
        let (mut ok, mut bad, mut last) = (0u64, 0u64, None);
        let receiving = s.recv(|fr| {
            if fr.xid < 0 {
                return;
            }
            if fr.err == 0 {
                ok += 1;
            } else {
                bad += 1;
                errors.add(fr.err, 1);
            }
            last = Some(fr.at);
        });
        let timeout = async {
            glommio::timer::sleep(hard_deadline.saturating_duration_since(Instant::now())).await;
            Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!("{inflight} replies still missing {DRAIN_GRACE:?} after --max-seconds"),
            ))
        };
        futures_lite::future::or(receiving, timeout).await?;
        inflight -= ok + bad;
        if ok > 0 {
            let prev = sh.done.fetch_add(ok, Relaxed);
            sh.crossed(prev, prev + ok, last.unwrap_or_else(Instant::now));
        }
    }
    s.close().await;
    Ok(())
}

fn mb(b: Option<u64>) -> String {
    b.map(|b| format!("{:.1}", b as f64 / (1 << 20) as f64))
        .unwrap_or_else(|| "-".into())
}

fn count(n: u64) -> String {
    if n >= 1_000_000 && n.is_multiple_of(1_000_000) {
        format!("{}M", n / 1_000_000)
    } else if n >= 1_000 && n.is_multiple_of(1_000) {
        format!("{}k", n / 1_000)
    } else {
        n.to_string()
    }
}

pub fn table(r: &ScaleResult, p: &ScaleParams) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "{}: layout {}{}, {} sessions x {} outstanding, {} B values",
        r.target,
        r.layout,
        if r.layout == "spread" {
            format!(" over {} parents", r.parents)
        } else {
            String::new()
        },
        p.sessions,
        p.outstanding,
        p.value_bytes
    );
    let _ = writeln!(
        o,
        "{:>9} {:>10} {:>9} {:>11} {:>14} {:>10} {:>10} | {:>8} {:>8} {:>9} {:>10}",
        "children",
        "creates",
        "seconds",
        "creates/s",
        "at size /s",
        "probe /s",
        "probe cpu",
        "RSS MB",
        "peak MB",
        "dRSS B/zn",
        "dpeak B/zn"
    );
    for w in &r.windows {
        let per = |v: Option<f64>| v.map(|v| format!("{v:.0}")).unwrap_or_else(|| "-".into());
        let _ = writeln!(
            o,
            "{:>9} {:>10} {:>9.3} {:>11.0} {:>14} {:>10} {:>10} | {:>8} {:>8} {:>9} {:>10}{}",
            count(w.to),
            w.creates,
            w.seconds,
            w.creates_per_s,
            per(w.tail_per_s),
            per(w.probe_per_s),
            w.probe_server_cpu_us
                .map(|v| format!("{v:.2}us"))
                .unwrap_or_else(|| "-".into()),
            mb(w.rss_bytes),
            mb(w.hwm_bytes),
            per(w.rss_growth_bytes_per_znode),
            per(w.hwm_growth_bytes_per_znode),
            if w.reached { "" } else { "  (not reached)" }
        );
    }
    let _ = writeln!(
        o,
        "created {} children in {:.2}s; errors {}{}; failed sessions {}",
        r.created,
        r.seconds,
        r.error_total,
        if r.error_total > 0 {
            format!(" {:?}", r.errors)
        } else {
            String::new()
        },
        r.failed_sessions
    );
    let _ = writeln!(
        o,
        "at size: the window's tail (last 10%, at least --tail-min creates); \
         dRSS, dpeak: (VmRSS or VmHWM - VmRSS before the load) / children"
    );
    if p.probe_rounds > 0 {
        let _ = writeln!(
            o,
            "probe: median of {} rounds at the checkpoint, each {} creates (timed) then deleted; \
             probe cpu: the server's CPU time per timed create (with --server-pid)",
            p.probe_rounds, p.probe_creates
        );
    }
    o.push_str(&crate::report::cost_warning(&r.target, &r.client));
    if r.stopped_by_time {
        let _ = writeln!(o, "stopped by --max-seconds before the last checkpoint");
    }
    let ratio = |v: Option<f64>| v.map(|v| format!("{v:.2}")).unwrap_or_else(|| "-".into());
    let _ = writeln!(
        o,
        "ratio last/first window: {} (whole windows), {} (at size: each window's tail), {} (probe)",
        ratio(r.ratio_last_first_window),
        ratio(r.ratio_last_first_at_size),
        ratio(r.ratio_last_first_probe)
    );
    o
}

pub const CSV: &[&str] = &[
    "target",
    "layout",
    "parents",
    "from",
    "to",
    "reached",
    "creates",
    "seconds",
    "creates_per_s",
    "tail_creates",
    "tail_seconds",
    "tail_per_s",
    "rss_bytes",
    "hwm_bytes",
    "rss_at_creates",
    "rss_growth_bytes_per_znode",
    "hwm_growth_bytes_per_znode",
    "probe_per_s",
    "probe_server_cpu_us",
    "probe_rounds",
    "errors",
];

pub fn rows(r: &ScaleResult) -> Vec<Vec<String>> {
    let o = |v: Option<u64>| v.map(|v| v.to_string()).unwrap_or_default();
    let f = |v: Option<f64>| v.map(|v| format!("{v:.1}")).unwrap_or_default();
    r.windows
        .iter()
        .map(|w| {
            vec![
                r.target.clone(),
                r.layout.clone(),
                r.parents.to_string(),
                w.from.to_string(),
                w.to.to_string(),
                w.reached.to_string(),
                w.creates.to_string(),
                format!("{:.4}", w.seconds),
                format!("{:.1}", w.creates_per_s),
                w.tail_creates.to_string(),
                format!("{:.4}", w.tail_seconds),
                f(w.tail_per_s),
                o(w.rss_bytes),
                o(w.hwm_bytes),
                o(w.rss_at_creates),
                f(w.rss_growth_bytes_per_znode),
                f(w.hwm_growth_bytes_per_znode),
                f(w.probe_per_s),
                w.probe_server_cpu_us
                    .map(|v| format!("{v:.2}"))
                    .unwrap_or_default(),
                w.probe_rounds_per_s.len().to_string(),
                r.error_total.to_string(),
            ]
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tail_of_a_window() {
        assert_eq!(tail_from(0, 1000, 0), 900);
        assert_eq!(tail_from(1000, 10_000, 0), 9100);
        assert_eq!(tail_from(0, 5, 0), 4);
        assert_eq!(tail_from(1000, 10_000, 3200), 6800);
        assert_eq!(tail_from(1000, 2000, 3200), 1000);
        assert_eq!(tail_from(1_000_000, 5_000_000, 3200), 4_600_000);
    }

    #[test]
    fn paths_round_robin_over_parents() {
        let mut s = String::new();
        child_path(&mut s, "/r", 3, 7);
        assert_eq!(s, "/r/p1/n7");
        child_path(&mut s, "/r", 1, 7);
        assert_eq!(s, "/r/p0/n7");
    }
}
