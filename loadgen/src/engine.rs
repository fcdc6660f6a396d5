//! The pipelined engine behind mix, compare and timeline: N sessions spread
//! over an ensemble's servers and over T glommio executors, each session
//! keeping K getData/setData requests in flight. Sessions whose connection
//! drops reconnect (round robin over the servers) and the requests lost with
//! the connection are counted as CONNECTIONLOSS errors.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use glommio::{ExecutorJoinHandle, LocalExecutorBuilder, Placement};
use hdrhistogram::Histogram;
use ringkeeper::proto::Request;

use crate::session::{InFlight, Session, Template};
use crate::stats::{histogram, Errors, CONNECTION_LOSS};

pub const WARMUP: u8 = 0;
pub const MEASURE: u8 = 1;
pub const STOP: u8 = 2;

/// How long stopping sessions wait for replies still in flight.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);
/// Reconnect backoff: 10 ms doubling up to this (a timeline should show
/// the server's outage, not the client's backoff).
const RECONNECT_BACKOFF_MAX: Duration = Duration::from_millis(250);

#[derive(Clone, Debug)]
pub struct EngineParams {
    /// The ensemble: sessions are spread over these servers.
    pub servers: Vec<String>,
    pub sessions: usize,
    pub outstanding: usize,
    pub threads: usize,
    /// CPUs to pin executors to (round robin); empty: unbound.
    pub pin: Vec<usize>,
    pub session_timeout_ms: i32,
    pub root: String,
    pub znodes: usize,
    pub value_bytes: usize,
    pub read_pct: u32,
    /// Offered ops/s over all sessions; None: unpaced.
    pub rate_ops_s: Option<u64>,
}

pub fn znode_path(root: &str, i: usize) -> String {
    format!("{root}/n{i}")
}

/// Counters a thread publishes while it runs (every batch), for progress
/// lines and the timeline's 100 ms samples.
#[derive(Default)]
#[repr(align(128))]
pub struct Live {
    pub reads: AtomicU64,
    pub writes: AtomicU64,
    pub errors: AtomicU64,
    pub reconnects: AtomicU64,
    /// A disconnect was reported on stderr (one line per thread and run).
    pub reported: std::sync::atomic::AtomicBool,
}

/// Sums of every thread's live counters.
#[derive(Clone, Copy, Debug, Default)]
pub struct LiveTotals {
    pub reads: u64,
    pub writes: u64,
    pub errors: u64,
    pub reconnects: u64,
}

impl LiveTotals {
    pub fn ops(&self) -> u64 {
        self.reads + self.writes
    }
}

/// What the sessions measured while the phase was MEASURE.
pub struct Tally {
    /// Successful getData / setData (error replies are in `errors`).
    pub reads: u64,
    pub writes: u64,
    pub read_us: Histogram<u64>,
    pub write_us: Histogram<u64>,
    pub errors: Errors,
    /// Connections lost or refused (each followed by a reconnect attempt).
    pub disconnects: u64,
    /// Sessions that never connected at all.
    pub never_connected: u64,
}

impl Tally {
    pub fn new() -> Tally {
        Tally {
            reads: 0,
            writes: 0,
            read_us: histogram(),
            write_us: histogram(),
            errors: Errors::default(),
            disconnects: 0,
            never_connected: 0,
        }
    }

    pub fn merge(&mut self, o: &Tally) {
        self.reads += o.reads;
        self.writes += o.writes;
        self.read_us.add(&o.read_us).expect("same bounds");
        self.write_us.add(&o.write_us).expect("same bounds");
        self.errors.merge(&o.errors);
        self.disconnects += o.disconnects;
        self.never_connected += o.never_connected;
    }
}

/// A started engine: executors are running their sessions.
pub struct Running {
    phase: Arc<AtomicU8>,
    lives: Vec<Arc<Live>>,
    handles: Vec<ExecutorJoinHandle<Tally>>,
}

impl Running {
    pub fn set_phase(&self, phase: u8) {
        self.phase.store(phase, Relaxed);
    }

    pub fn live(&self) -> LiveTotals {
        let mut t = LiveTotals::default();
        for l in &self.lives {
            t.reads += l.reads.load(Relaxed);
            t.writes += l.writes.load(Relaxed);
            t.errors += l.errors.load(Relaxed);
            t.reconnects += l.reconnects.load(Relaxed);
        }
        t
    }

    /// Waits for the sessions to finish (after STOP) and sums their tallies.
    pub fn join(self) -> Result<Tally, String> {
        let mut total = Tally::new();
        for h in self.handles {
            total.merge(&h.join().map_err(|e| e.to_string())?);
        }
        Ok(total)
    }
}

/// Starts the executors and their sessions, in the WARMUP phase.
pub fn start(p: &EngineParams) -> Result<Running, String> {
    let phase = Arc::new(AtomicU8::new(WARMUP));
    let threads = p.threads.max(1);
    let mut lives = Vec::new();
    let mut handles = Vec::new();
    for t in 0..threads {
        let p = p.clone();
        let phase = phase.clone();
        let live = Arc::new(Live::default());
        lives.push(live.clone());
        let sessions: Vec<usize> = (0..p.sessions).filter(|s| s % threads == t).collect();
        let placement = if p.pin.is_empty() {
            Placement::Unbound
        } else {
            Placement::Fixed(p.pin[t % p.pin.len()])
        };
        let h = LocalExecutorBuilder::new(placement)
            .name(&format!("lg-{t}"))
            .spawn(move || async move { run_thread(p, sessions, phase, live).await })
            .map_err(|e| e.to_string())?;
        handles.push(h);
    }
    Ok(Running {
        phase,
        lives,
        handles,
    })
}

/// The templates every session of a thread picks from.
struct Workload {
    reads: Vec<Template>,
    writes: Vec<Template>,
    read_pct: u32,
    max_len: usize,
}

impl Workload {
    fn new(p: &EngineParams) -> Workload {
        let value = vec![b'y'; p.value_bytes];
        let znodes = p.znodes.max(1);
        let reads: Vec<Template> = (0..znodes)
            .map(|i| {
                Template::new(&Request::GetData {
                    path: znode_path(&p.root, i),
                    watch: false,
                })
            })
            .collect();
        let writes: Vec<Template> = (0..znodes)
            .map(|i| {
                Template::new(&Request::SetData {
                    path: znode_path(&p.root, i),
                    data: Some(value.clone().into()),
                    version: -1,
                })
            })
            .collect();
        let max_len = writes.iter().map(|t| t.bytes.len()).max().unwrap_or(0);
        Workload {
            reads,
            writes,
            read_pct: p.read_pct.min(100),
            max_len,
        }
    }

    fn pick(&self, rng: &mut SplitMix) -> &Template {
        let i = (rng.next() % self.reads.len() as u64) as usize;
        if (rng.next() % 100) < self.read_pct as u64 {
            &self.reads[i]
        } else {
            &self.writes[i]
        }
    }
}

async fn run_thread(
    p: EngineParams,
    sessions: Vec<usize>,
    phase: Arc<AtomicU8>,
    live: Arc<Live>,
) -> Tally {
    let tally = Rc::new(RefCell::new(Tally::new()));
    let p = Rc::new(p);
    let work = Rc::new(Workload::new(&p));
    let mut tasks = Vec::new();
    for s in sessions {
        let (p, work, phase, live, tally) = (
            p.clone(),
            work.clone(),
            phase.clone(),
            live.clone(),
            tally.clone(),
        );
        tasks.push(glommio::spawn_local(async move {
            let mut local = Tally::new();
            run_session(&p, &work, s, &phase, &live, &mut local).await;
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

/// One client: connects, drives, and reconnects until told to stop.
async fn run_session(
    p: &EngineParams,
    work: &Workload,
    idx: usize,
    phase: &AtomicU8,
    live: &Live,
    tally: &mut Tally,
) {
    let mut server = idx % p.servers.len();
    let mut rng = SplitMix((idx as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let mut inflight = InFlight::with_capacity(p.outstanding);
    let mut out = Vec::with_capacity(p.outstanding * (work.max_len + 16));
    let mut ever_connected = false;
    let mut backoff = Duration::from_millis(10);
    while phase.load(Relaxed) != STOP {
        let target = &p.servers[server];
        match Session::connect(target, p.session_timeout_ms).await {
            Ok(mut s) => {
                ever_connected = true;
                backoff = Duration::from_millis(10);
                let r = drive(
                    p,
                    work,
                    &mut s,
                    &mut rng,
                    &mut inflight,
                    &mut out,
                    phase,
                    live,
                    tally,
                )
                .await;
                match r {
                    Ok(()) => {
                        s.close().await;
                        return;
                    }
                    Err(e) => {
                        let lost = inflight.clear() as u64;
                        if phase.load(Relaxed) == MEASURE {
                            tally.errors.add(CONNECTION_LOSS, lost);
                        }
                        live.errors.fetch_add(lost, Relaxed);
                        note_disconnect(tally, live, idx, target, &e);
                    }
                }
            }
            Err(e) => note_disconnect(tally, live, idx, target, &e),
        }
        server = (server + 1) % p.servers.len();
        glommio::timer::sleep(backoff).await;
        backoff = (backoff * 2).min(RECONNECT_BACKOFF_MAX);
    }
    if !ever_connected {
        tally.never_connected += 1;
    }
}

fn note_disconnect(tally: &mut Tally, live: &Live, idx: usize, target: &str, e: &std::io::Error) {
    tally.disconnects += 1;
    live.reconnects.fetch_add(1, Relaxed);
    // One line per thread for the first failure; the rest are counted.
    if !live.reported.swap(true, Relaxed) {
        eprintln!(
            "ringkeeper-loadgen: session {idx} on {target}: {e} (reconnecting; further disconnects are counted, not printed)"
        );
    }
}

/// Keeps `outstanding` requests in flight until the phase is STOP, then
/// drains what is in flight. Allocation-free per request.
#[allow(clippy::too_many_arguments)]
async fn drive(
    p: &EngineParams,
    work: &Workload,
    s: &mut Session,
    rng: &mut SplitMix,
    inflight: &mut InFlight,
    out: &mut Vec<u8>,
    phase: &AtomicU8,
    live: &Live,
    tally: &mut Tally,
) -> std::io::Result<()> {
    let mut to_send = p.outstanding.max(1);
    let mut pacer = p
        .rate_ops_s
        .map(|r| Pacer::new(r as f64 / p.sessions.max(1) as f64, Instant::now()));
    loop {
        if let Some(wait) = pacer
            .as_mut()
            .and_then(|pc| pc.wait(Instant::now(), to_send))
        {
            glommio::timer::sleep(wait).await;
        }
        out.clear();
        let now = Instant::now();
        for _ in 0..to_send {
            let t = work.pick(rng);
            let xid = s.push(out, t);
            inflight.push(xid, now, t.is_write);
        }
        s.send(out).await?;
        let ph = phase.load(Relaxed);
        let measuring = ph == MEASURE;
        let mut order_error = false;
        // Replies with an error code are not throughput: they are counted
        // (by code) as errors, and their latency is not recorded.
        let (mut reads, mut writes, mut errors) = (0u64, 0u64, 0u64);
        s.recv(|fr| {
            if fr.xid < 0 {
                return; // notification or ping: not ours
            }
            let Some((at, is_write)) = inflight.pop(fr.xid) else {
                order_error = true;
                return;
            };
            if fr.err != 0 {
                errors += 1;
                if measuring {
                    tally.errors.add(fr.err, 1);
                }
                return;
            }
            if is_write {
                writes += 1;
            } else {
                reads += 1;
            }
            if measuring {
                let us = fr.at.saturating_duration_since(at).as_micros().max(1) as u64;
                if is_write {
                    let _ = tally.write_us.record(us);
                } else {
                    let _ = tally.read_us.record(us);
                }
            }
        })
        .await?;
        // Only replies to our requests free a slot.
        to_send = (reads + writes + errors) as usize;
        live.reads.fetch_add(reads, Relaxed);
        live.writes.fetch_add(writes, Relaxed);
        if errors > 0 {
            live.errors.fetch_add(errors, Relaxed);
        }
        if measuring {
            tally.reads += reads;
            tally.writes += writes;
        }
        if order_error {
            return Err(std::io::Error::other("reply out of xid order"));
        }
        if ph == STOP {
            break;
        }
    }
    drain(s, inflight).await
}

async fn drain(s: &mut Session, inflight: &mut InFlight) -> std::io::Result<()> {
    let draining = async {
        while !inflight.is_empty() {
            s.recv(|fr| {
                if fr.xid >= 0 {
                    inflight.pop(fr.xid);
                }
            })
            .await?;
        }
        Ok(())
    };
    let timeout = async {
        glommio::timer::sleep(DRAIN_TIMEOUT).await;
        Err(std::io::Error::other("replies still missing after drain"))
    };
    futures_lite::future::or(draining, timeout).await
}

/// Paces one session to `ops_per_s`: a batch of n requests may leave once
/// the previous batches' n / rate seconds have passed. A session that falls
/// behind (a slow server) starts again from now, so it never bursts to
/// catch up.
struct Pacer {
    ops_per_s: f64,
    next_at: Instant,
}

impl Pacer {
    fn new(ops_per_s: f64, now: Instant) -> Pacer {
        assert!(ops_per_s > 0.0, "a positive rate");
        Pacer {
            ops_per_s,
            next_at: now,
        }
    }

    /// How long to wait before sending `n` requests at `now` (None: send).
    fn wait(&mut self, now: Instant, n: usize) -> Option<Duration> {
        let due = self.next_at;
        self.next_at = due.max(now) + Duration::from_secs_f64(n as f64 / self.ops_per_s);
        (due > now).then(|| due - now)
    }
}

pub struct SplitMix(pub u64);

impl SplitMix {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

#[cfg(test)]
mod pacer_tests {
    use super::Pacer;
    use std::time::{Duration, Instant};

    /// At 1,000 ops/s a batch of 8 holds the next one back 8 ms; a session
    /// behind its schedule sends at once and does not burst to catch up.
    #[test]
    fn batches_leave_at_the_rate_and_a_late_session_does_not_burst() {
        let t0 = Instant::now();
        let ms = |n: u64| t0 + Duration::from_millis(n);
        let mut p = Pacer::new(1000.0, t0);
        assert_eq!(p.wait(t0, 8), None);
        assert_eq!(p.wait(ms(2), 8), Some(Duration::from_millis(6)));
        // Sent at 8 ms: the next batch is due at 16 ms.
        assert_eq!(p.wait(ms(8), 4), Some(Duration::from_millis(8)));
        // Due at 20 ms, asked at 100: sends now, and the next is due 4 ms
        // after now, not at 24 ms (no catching up).
        assert_eq!(p.wait(ms(100), 4), None);
        assert_eq!(p.wait(ms(100), 1), Some(Duration::from_millis(4)));
    }
}
