//! The paper's Table 2 (a benchmark modelled on Chubby's): W workers, each
//! a session that sends a create, waits for it, sends an asynchronous delete
//! of the new znode, and starts the next create. Throughput = creates
//! completed / time for all workers to finish.

use std::cell::RefCell;
use std::fmt::Write as _;
use std::rc::Rc;
use std::time::Instant;

use ringkeeper::proto::codes::{err, op};
use ringkeeper::proto::Acl;
use serde::Serialize;

use crate::counters::{CounterCheck, CounterSnapshot};
use crate::session::{create_body, on_executor, open_acl, Session};
use crate::stats::{histogram, ClientCost, CostMeter, Errors, Percentiles};
use crate::target::Target;

#[derive(Clone, Debug, Serialize)]
pub struct CreatesParams {
    pub workers: Vec<usize>,
    /// Creates per worker.
    pub count: usize,
    pub value_bytes: usize,
    pub threads: usize,
    pub root: String,
    pub session_timeout_ms: i32,
}

#[derive(Clone, Debug, Serialize)]
pub struct CreatesPoint {
    pub target: String,
    pub workers: usize,
    pub creates: u64,
    pub seconds: f64,
    pub creates_per_s: f64,
    pub create_latency_us: Percentiles,
    pub errors: std::collections::BTreeMap<String, u64>,
    pub error_total: u64,
    pub failed_workers: u64,
    pub client: ClientCost,
    pub counters: CounterCheck,
}

struct WorkerTally {
    creates: u64,
    latency: hdrhistogram::Histogram<u64>,
    errors: Errors,
    failed: u64,
}

impl WorkerTally {
    fn new() -> WorkerTally {
        WorkerTally {
            creates: 0,
            latency: histogram(),
            errors: Errors::default(),
            failed: 0,
        }
    }

    fn merge(&mut self, o: &WorkerTally) {
        self.creates += o.creates;
        self.latency.add(&o.latency).expect("same bounds");
        self.errors.merge(&o.errors);
        self.failed += o.failed;
    }
}

/// Runs every worker count of `p` against `t`.
pub fn run(t: &Target, p: &CreatesParams) -> Result<Vec<CreatesPoint>, String> {
    ensure_root(t, p)?;
    p.workers.iter().map(|&w| run_point(t, p, w)).collect()
}

fn ensure_root(t: &Target, p: &CreatesParams) -> Result<(), String> {
    let (server, root, timeout) = (t.servers[0].clone(), p.root.clone(), p.session_timeout_ms);
    on_executor("lg-setup", move || async move {
        let (s, code) = Session::connect_creating(&server, timeout, &root).await?;
        s.close().await;
        match code {
            0 | err::NODE_EXISTS => Ok(()),
            c => Err(format!("create {root}: error {c}")),
        }
    })?
}

fn run_point(t: &Target, p: &CreatesParams, workers: usize) -> Result<CreatesPoint, String> {
    let counters = CounterSnapshot::take(&t.servers);
    let threads = p.threads.clamp(1, workers.max(1));
    let meter = CostMeter::start();
    let mut handles = Vec::new();
    for th in 0..threads {
        let (p, servers) = (p.clone(), t.servers.clone());
        let mine: Vec<usize> = (0..workers).filter(|w| w % threads == th).collect();
        let h = glommio::LocalExecutorBuilder::new(glommio::Placement::Unbound)
            .name(&format!("lg-{th}"))
            .spawn(move || async move { run_thread(&p, &servers, workers, mine).await })
            .map_err(|e| e.to_string())?;
        handles.push(h);
    }
    let mut total = WorkerTally::new();
    let mut seconds: f64 = 0.0;
    for h in handles {
        let (tally, secs) = h.join().map_err(|e| e.to_string())?;
        total.merge(&tally);
        seconds = seconds.max(secs);
    }
    let client = meter.stop().per_op(total.creates, threads);
    Ok(CreatesPoint {
        target: t.name.clone(),
        workers,
        creates: total.creates,
        seconds,
        creates_per_s: total.creates as f64 / seconds.max(1e-9),
        create_latency_us: Percentiles::of(&total.latency),
        error_total: total.errors.total(),
        errors: total.errors.by_name(),
        failed_workers: total.failed,
        client,
        counters: counters.finish(&t.servers),
    })
}

/// Connects this thread's workers, starts them together, and returns their
/// tally and the time from the start until the last one finished.
async fn run_thread(
    p: &CreatesParams,
    servers: &[String],
    workers: usize,
    mine: Vec<usize>,
) -> (WorkerTally, f64) {
    let tally = Rc::new(RefCell::new(WorkerTally::new()));
    let mut sessions = Vec::new();
    for &w in &mine {
        match Session::connect(&servers[w % servers.len()], p.session_timeout_ms).await {
            Ok(s) => sessions.push((w, s)),
            Err(e) => {
                eprintln!("ringkeeper-loadgen: worker {w}: {e}");
                tally.borrow_mut().failed += 1;
            }
        }
    }
    let start = Instant::now();
    let acl = Rc::new(open_acl());
    let mut tasks = Vec::new();
    for (w, mut s) in sessions {
        let (tally, acl, root, value) = (
            tally.clone(),
            acl.clone(),
            p.root.clone(),
            vec![b'c'; p.value_bytes],
        );
        let count = p.count;
        tasks.push(glommio::spawn_local(async move {
            let mut local = WorkerTally::new();
            let prefix = format!("{root}/c{workers}-{w}-");
            if let Err(e) = worker(&mut s, &prefix, &value, &acl, count, &mut local).await {
                eprintln!("ringkeeper-loadgen: worker {w}: {e}");
                local.failed += 1;
            } else {
                s.close().await;
            }
            tally.borrow_mut().merge(&local);
        }));
    }
    for t in tasks {
        t.await;
    }
    let secs = start.elapsed().as_secs_f64();
    let tally = Rc::try_unwrap(tally).ok().expect("tasks done").into_inner();
    (tally, secs)
}

/// create (wait), delete (don't wait), next create; allocation-free per op.
async fn worker(
    s: &mut Session,
    prefix: &str,
    value: &[u8],
    acl: &[Acl],
    count: usize,
    t: &mut WorkerTally,
) -> std::io::Result<()> {
    let mut out = Vec::with_capacity(2 * (prefix.len() + value.len() + 64));
    let mut path = String::with_capacity(prefix.len() + 24);
    let mut prev = String::with_capacity(prefix.len() + 24);
    let mut deletes_in_flight = 0usize;
    for i in 0..count {
        out.clear();
        if !prev.is_empty() {
            s.push_with(&mut out, op::DELETE, |w| {
                w.string(&prev).i32(-1);
            });
            deletes_in_flight += 1;
        }
        path.clear();
        let _ = write!(path, "{prefix}{i}");
        let xid = s.push_with(&mut out, op::CREATE, |w| {
            create_body(w, &path, value, acl, 0)
        });
        let sent = Instant::now();
        s.send(&out).await?;
        let code = s
            .wait_for(xid, |fr| {
                if fr.xid > 0 {
                    deletes_in_flight -= 1;
                    if fr.err != 0 {
                        t.errors.add(fr.err, 1);
                    }
                }
            })
            .await?;
        let _ = t.latency.record(sent.elapsed().as_micros().max(1) as u64);
        if code == 0 {
            t.creates += 1;
            std::mem::swap(&mut prev, &mut path);
        } else {
            t.errors.add(code, 1);
            prev.clear();
        }
    }
    // The last delete, then every delete's reply.
    if !prev.is_empty() {
        out.clear();
        s.push_with(&mut out, op::DELETE, |w| {
            w.string(&prev).i32(-1);
        });
        s.send(&out).await?;
        deletes_in_flight += 1;
    }
    while deletes_in_flight > 0 {
        s.recv(|fr| {
            if fr.xid > 0 {
                deletes_in_flight -= 1;
                if fr.err != 0 {
                    t.errors.add(fr.err, 1);
                }
            }
        })
        .await?;
    }
    Ok(())
}
