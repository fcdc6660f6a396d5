//! The paper's Figure 5 experiment: saturated throughput at a given read
//! percentage, N sessions with K outstanding requests each.

use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use glommio::{LocalExecutorBuilder, Placement};
use hdrhistogram::Histogram;
use ringkeeper::proto::Request;

use crate::session::{create_template, InFlight, Session, Template};

const WARMUP: u8 = 0;
const MEASURE: u8 = 1;
const STOP: u8 = 2;

#[derive(Clone, Debug)]
pub struct MixParams {
    pub targets: Vec<String>,
    pub sessions: usize,
    pub outstanding: usize,
    pub znodes: usize,
    pub value_bytes: usize,
    pub warmup: Duration,
    pub duration: Duration,
    pub threads: usize,
    pub root: String,
}

pub struct PointResult {
    pub read_pct: u32,
    pub seconds: f64,
    pub reads: u64,
    pub writes: u64,
    pub read_us: Histogram<u64>,
    pub write_us: Histogram<u64>,
    pub errors: BTreeMap<i32, u64>,
    pub client_cpu_s: f64,
    pub failed_sessions: u64,
}

impl PointResult {
    pub fn ops_per_s(&self) -> f64 {
        (self.reads + self.writes) as f64 / self.seconds
    }

    /// Client CPU time per completed op, in microseconds.
    pub fn client_cpu_us_per_op(&self) -> f64 {
        let ops = (self.reads + self.writes).max(1) as f64;
        self.client_cpu_s * 1e6 / ops
    }
}

struct Tally {
    reads: u64,
    writes: u64,
    read_us: Histogram<u64>,
    write_us: Histogram<u64>,
    errors: BTreeMap<i32, u64>,
    failed_sessions: u64,
}

impl Tally {
    fn new() -> Tally {
        let h = || Histogram::new_with_bounds(1, 60_000_000, 3).expect("histogram bounds");
        Tally {
            reads: 0,
            writes: 0,
            read_us: h(),
            write_us: h(),
            errors: BTreeMap::new(),
            failed_sessions: 0,
        }
    }

    fn merge(&mut self, o: &Tally) {
        self.reads += o.reads;
        self.writes += o.writes;
        self.read_us.add(&o.read_us).expect("same bounds");
        self.write_us.add(&o.write_us).expect("same bounds");
        for (k, v) in &o.errors {
            *self.errors.entry(*k).or_default() += v;
        }
        self.failed_sessions += o.failed_sessions;
    }
}

fn znode_path(root: &str, i: usize) -> String {
    format!("{root}/n{i}")
}

/// Creates the root and the znodes the mix reads and writes (idempotent).
pub fn prepare(p: &MixParams) -> Result<(), String> {
    let p = p.clone();
    LocalExecutorBuilder::new(Placement::Unbound)
        .name("lg-setup")
        .spawn(move || async move {
            let mut s = Session::connect(&p.targets[0], 30_000)
                .await
                .map_err(|e| format!("connect {}: {e}", p.targets[0]))?;
            let value = vec![b'x'; p.value_bytes];
            s.call(&create_template(&p.root, b""))
                .await
                .map_err(|e| e.to_string())?;
            for i in 0..p.znodes {
                s.call(&create_template(&znode_path(&p.root, i), &value))
                    .await
                    .map_err(|e| e.to_string())?;
            }
            s.close().await;
            Ok(())
        })
        .map_err(|e| e.to_string())?
        .join()
        .map_err(|e| e.to_string())?
}

/// Runs one point of the mix and returns what was measured.
pub fn run_point(p: &MixParams, read_pct: u32) -> Result<PointResult, String> {
    let phase = Arc::new(AtomicU8::new(WARMUP));
    let mut handles = Vec::new();
    for t in 0..p.threads {
        let p = p.clone();
        let phase = phase.clone();
        let sessions: Vec<usize> = (0..p.sessions).filter(|s| s % p.threads == t).collect();
        let h = LocalExecutorBuilder::new(Placement::Unbound)
            .name(&format!("lg-{t}"))
            .spawn(move || async move { run_thread(p, sessions, read_pct, phase).await })
            .map_err(|e| e.to_string())?;
        handles.push(h);
    }
    std::thread::sleep(p.warmup);
    let cpu0 = cpu_seconds();
    let t0 = Instant::now();
    phase.store(MEASURE, Ordering::Relaxed);
    std::thread::sleep(p.duration);
    phase.store(STOP, Ordering::Relaxed);
    let seconds = t0.elapsed().as_secs_f64();
    let client_cpu_s = cpu_seconds() - cpu0;
    let mut total = Tally::new();
    for h in handles {
        let t = h.join().map_err(|e| e.to_string())?;
        total.merge(&t);
    }
    Ok(PointResult {
        read_pct,
        seconds,
        reads: total.reads,
        writes: total.writes,
        read_us: total.read_us,
        write_us: total.write_us,
        errors: total.errors,
        client_cpu_s,
        failed_sessions: total.failed_sessions,
    })
}

async fn run_thread(
    p: MixParams,
    sessions: Vec<usize>,
    read_pct: u32,
    phase: Arc<AtomicU8>,
) -> Tally {
    let tally = Rc::new(std::cell::RefCell::new(Tally::new()));
    let p = Rc::new(p);
    let mut tasks = Vec::new();
    for s in sessions {
        let (p, phase, tally) = (p.clone(), phase.clone(), tally.clone());
        tasks.push(glommio::spawn_local(async move {
            let target = &p.targets[s % p.targets.len()];
            let mut local = Tally::new();
            if let Err(e) = drive(&p, target, s as u64, read_pct, &phase, &mut local).await {
                eprintln!("session {s} on {target}: {e}");
                local.failed_sessions += 1;
            }
            tally.borrow_mut().merge(&local);
        }));
    }
    for t in tasks {
        t.await;
    }
    Rc::try_unwrap(tally)
        .ok()
        .expect("all session tasks finished")
        .into_inner()
}

/// One session: keeps `outstanding` requests in flight until told to stop.
async fn drive(
    p: &MixParams,
    target: &str,
    seed: u64,
    read_pct: u32,
    phase: &AtomicU8,
    tally: &mut Tally,
) -> std::io::Result<()> {
    let mut s = Session::connect(target, 30_000).await?;
    let value = vec![b'y'; p.value_bytes];
    let reads: Vec<Template> = (0..p.znodes)
        .map(|i| {
            Template::new(&Request::GetData {
                path: znode_path(&p.root, i),
                watch: false,
            })
        })
        .collect();
    let writes: Vec<Template> = (0..p.znodes)
        .map(|i| {
            Template::new(&Request::SetData {
                path: znode_path(&p.root, i),
                data: Some(value.clone()),
                version: -1,
            })
        })
        .collect();
    let mut rng = SplitMix(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let mut inflight = InFlight::with_capacity(p.outstanding);
    let mut out = Vec::with_capacity(p.outstanding * 64);
    let mut to_send = p.outstanding;
    loop {
        out.clear();
        let now = Instant::now();
        for _ in 0..to_send {
            let t = pick(&mut rng, &reads, &writes, read_pct);
            let xid = s.push(&mut out, t);
            inflight.push(xid, now, t.is_write);
        }
        s.send(&out).await?;
        let stopping = phase.load(Ordering::Relaxed) == STOP;
        let measuring = phase.load(Ordering::Relaxed) == MEASURE;
        let mut order_error = false;
        to_send = s
            .recv_replies(|h| {
                let Some((at, is_write)) = inflight.pop(h.xid) else {
                    order_error = true;
                    return;
                };
                if !measuring {
                    return;
                }
                let us = at.elapsed().as_micros().max(1) as u64;
                if is_write {
                    tally.writes += 1;
                    let _ = tally.write_us.record(us);
                } else {
                    tally.reads += 1;
                    let _ = tally.read_us.record(us);
                }
                if h.err != 0 {
                    *tally.errors.entry(h.err).or_default() += 1;
                }
            })
            .await?;
        if order_error {
            return Err(std::io::Error::other("reply out of xid order"));
        }
        if stopping {
            break;
        }
    }
    // Drain what is still in flight, then close the session.
    while !inflight.is_empty() {
        s.recv_replies(|h| {
            inflight.pop(h.xid);
        })
        .await?;
    }
    s.close().await;
    Ok(())
}

fn pick<'a>(
    rng: &mut SplitMix,
    reads: &'a [Template],
    writes: &'a [Template],
    read_pct: u32,
) -> &'a Template {
    let i = (rng.next() % reads.len() as u64) as usize;
    if (rng.next() % 100) < read_pct as u64 {
        &reads[i]
    } else {
        &writes[i]
    }
}

/// Process CPU time (user + system), seconds.
pub fn cpu_seconds() -> f64 {
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}
