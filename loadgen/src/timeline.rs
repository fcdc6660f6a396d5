//! The paper's Figure 8: throughput sampled every interval (100 ms) over a
//! run at a fixed mix, while scheduled shell commands run at given seconds
//! (kill -9 a server, restart it). Sessions whose server dies reconnect to
//! the next server of the ensemble; what they lose is counted.

use std::os::fd::AsFd;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::counters::{CounterCheck, CounterSnapshot};
use crate::engine::{self, LiveTotals, MEASURE, STOP};
use crate::mix::MixParams;
use crate::progress::Progress;
use crate::stats::{ClientCost, CostMeter, Percentiles};
use crate::target::Target;

/// A shell command to run `at_s` seconds into the measured run.
#[derive(Clone, Debug, Serialize)]
pub struct Event {
    pub at_s: f64,
    pub command: String,
}

impl Event {
    /// `SECONDS:COMMAND`, e.g. `5:kill -9 1234`.
    pub fn parse(spec: &str) -> Result<Event, String> {
        let (at, cmd) = spec
            .split_once(':')
            .ok_or_else(|| format!("bad event {spec:?}: want SECONDS:COMMAND"))?;
        let at_s: f64 = at
            .trim()
            .parse()
            .map_err(|_| format!("bad event time {at:?} in {spec:?}"))?;
        if at_s < 0.0 || cmd.trim().is_empty() {
            return Err(format!("bad event {spec:?}: want SECONDS:COMMAND"));
        }
        Ok(Event {
            at_s,
            command: cmd.trim().to_string(),
        })
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct Sample {
    /// End of the interval, seconds since the measured run started.
    pub t_s: f64,
    pub ops_per_s: f64,
    pub reads_per_s: f64,
    pub writes_per_s: f64,
    /// Errors (lost requests included) in the interval.
    pub errors: u64,
    pub errors_per_s: f64,
    pub reconnects: u64,
}

#[derive(Clone, Debug, Serialize)]
pub struct EventRun {
    pub at_s: f64,
    pub command: String,
    /// When it was started, seconds into the run.
    pub started_s: f64,
    /// Exit status (None: killed by a signal or still running at the end).
    pub exit_code: Option<i32>,
    pub finished_s: Option<f64>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Timeline {
    pub target: String,
    pub read_pct: u32,
    pub interval_ms: u64,
    pub samples: Vec<Sample>,
    pub events: Vec<EventRun>,
    pub seconds: f64,
    pub reads: u64,
    pub writes: u64,
    pub ops_per_s: f64,
    pub read_latency_us: Percentiles,
    pub write_latency_us: Percentiles,
    pub errors: std::collections::BTreeMap<String, u64>,
    pub error_total: u64,
    pub disconnects: u64,
    pub client: ClientCost,
    pub counters: CounterCheck,
}

pub fn run(
    t: &Target,
    p: &MixParams,
    read_pct: u32,
    interval: Duration,
    events: &[Event],
    progress: &Progress,
) -> Result<Timeline, String> {
    let counters = CounterSnapshot::take(&t.servers);
    let running = engine::start(&p.engine(t, read_pct))?;
    crate::progress::watch(
        progress,
        &running,
        Duration::from_secs_f64(p.warmup_s),
        &crate::progress::phase_label(&t.name, read_pct, 0),
    );
    let meter = CostMeter::start();
    running.set_phase(MEASURE);
    let start = Instant::now();
    let span = Duration::from_secs_f64(p.duration_s);
    let mut pending: Vec<&Event> = events.iter().collect();
    pending.sort_by(|a, b| a.at_s.total_cmp(&b.at_s));
    let mut pending = pending.into_iter().peekable();
    let mut children: Vec<(usize, Child)> = Vec::new();
    let mut ran: Vec<EventRun> = Vec::new();
    let mut samples = Vec::new();
    let mut last = running.live();
    let mut last_at = start;
    let mut tick = 1u32;
    loop {
        let next = interval * tick;
        let now = start.elapsed();
        // Events due before the next sample start on time.
        while let Some(ev) = pending.peek() {
            let due = Duration::from_secs_f64(ev.at_s);
            if due > next.min(span) {
                break;
            }
            if due > now {
                std::thread::sleep(due - now);
            }
            let ev = pending.next().expect("peeked");
            let run = start_event(ev, start, progress, ran.len(), &mut children);
            ran.push(run);
        }
        let now = start.elapsed();
        if next > now {
            std::thread::sleep(next - now);
        }
        let live = running.live();
        samples.push(sample(start, last_at, &last, &live));
        last = live;
        last_at = Instant::now();
        reap(&mut children, &mut ran, start);
        if let Some(s) = samples.last() {
            progress.status(&format!(
                "[{} timeline {:>6.1}/{:.0}s] ops/s {:>9.0}  errors {}  reconnects {}",
                t.name,
                s.t_s,
                span.as_secs_f64(),
                s.ops_per_s,
                live.errors,
                live.reconnects
            ));
        }
        if next >= span {
            break;
        }
        tick += 1;
    }
    running.set_phase(STOP);
    let cost = meter.stop();
    let seconds = cost.wall_s;
    let tally = running.join()?;
    progress.clear();
    finish_events(&mut children, &mut ran, start);
    let ops = tally.reads + tally.writes;
    Ok(Timeline {
        target: t.name.clone(),
        read_pct,
        interval_ms: interval.as_millis() as u64,
        samples,
        events: ran,
        seconds,
        reads: tally.reads,
        writes: tally.writes,
        ops_per_s: ops as f64 / seconds,
        read_latency_us: Percentiles::of(&tally.read_us),
        write_latency_us: Percentiles::of(&tally.write_us),
        error_total: tally.errors.total(),
        errors: tally.errors.by_name(),
        disconnects: tally.disconnects,
        client: cost.per_op(ops, p.threads),
        counters: if events.is_empty() {
            counters.finish(&t.servers)
        } else {
            counters
                .finish(&t.servers)
                .void("events ran (a restarted server starts its counters again)")
        },
    })
}

/// Rates over the actual interval (from `prev` to now), not the nominal one.
fn sample(start: Instant, prev: Instant, a: &LiveTotals, b: &LiveTotals) -> Sample {
    let now = Instant::now();
    let dt = now.duration_since(prev).as_secs_f64().max(1e-6);
    Sample {
        t_s: now.duration_since(start).as_secs_f64(),
        ops_per_s: (b.ops() - a.ops()) as f64 / dt,
        reads_per_s: (b.reads - a.reads) as f64 / dt,
        writes_per_s: (b.writes - a.writes) as f64 / dt,
        errors: b.errors - a.errors,
        errors_per_s: (b.errors - a.errors) as f64 / dt,
        reconnects: b.reconnects - a.reconnects,
    }
}

fn start_event(
    ev: &Event,
    start: Instant,
    progress: &Progress,
    index: usize,
    children: &mut Vec<(usize, Child)>,
) -> EventRun {
    let started_s = start.elapsed().as_secs_f64();
    progress.note(&format!("[{started_s:>6.1}s] event: {}", ev.command));
    let mut run = EventRun {
        at_s: ev.at_s,
        command: ev.command.clone(),
        started_s,
        exit_code: None,
        finished_s: None,
    };
    // Its output goes to our stderr (stdout is the report's); stdin closed.
    let stdout = match std::io::stderr().as_fd().try_clone_to_owned() {
        Ok(fd) => Stdio::from(fd),
        Err(_) => Stdio::null(),
    };
    let spawned = Command::new("sh")
        .arg("-c")
        .arg(&ev.command)
        .stdin(Stdio::null())
        .stdout(stdout)
        .spawn();
    match spawned {
        Ok(c) => children.push((index, c)),
        Err(e) => {
            eprintln!("ringkeeper-loadgen: event {:?}: {e}", ev.command);
            run.exit_code = Some(-1);
            run.finished_s = Some(started_s);
        }
    }
    run
}

/// Collects the events that finished.
fn reap(children: &mut Vec<(usize, Child)>, ran: &mut [EventRun], start: Instant) {
    children.retain_mut(|(i, c)| match c.try_wait() {
        Ok(Some(status)) => {
            ran[*i].exit_code = status.code();
            ran[*i].finished_s = Some(start.elapsed().as_secs_f64());
            false
        }
        Ok(None) => true,
        Err(_) => false,
    });
}

/// Waits up to 5 s for events still running; leaves the rest (a restarted
/// server is the user's to stop) and says so.
fn finish_events(children: &mut Vec<(usize, Child)>, ran: &mut [EventRun], start: Instant) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !children.is_empty() && Instant::now() < deadline {
        reap(children, ran, start);
        std::thread::sleep(Duration::from_millis(50));
    }
    for (i, c) in children.iter() {
        eprintln!(
            "ringkeeper-loadgen: event {:?} (pid {}) still running; left running",
            ran[*i].command,
            c.id()
        );
    }
}
