//! Session establishment rate (issue 11, section 5): N sessions, C at a
//! time, each a TCP connect, a ConnectRequest and its ConnectResponse.
//! Mode `create` then closes the TCP connection (the session lives on in
//! the server until it expires); mode `create-close` first sends
//! closeSession and waits for its reply. sessions/s = sessions established
//! (and closed) / the mode's wall time.

use std::cell::RefCell;
use std::fmt::Write as _;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_lite::{AsyncReadExt, AsyncWriteExt};
use glommio::net::TcpStream;
use ringkeeper::proto::codes::op;
use ringkeeper::proto::{ConnectRequest, ConnectResponse};
use serde::Serialize;

use crate::session::CONNECTS_SENT;
use crate::stats::{histogram, ClientCost, CostMeter, Percentiles, ServerCost, ServerMeter};
use crate::target::Target;

/// Bound on one session's connect (and on its close).
const STEP_TIMEOUT: Duration = Duration::from_secs(10);

pub const MODES: &[&str] = &["create", "create-close"];

#[derive(Clone, Debug, Serialize)]
pub struct SessionsParams {
    pub count: usize,
    pub concurrency: usize,
    pub modes: Vec<String>,
    pub threads: usize,
    pub session_timeout_ms: i32,
    /// Whole-run bound per mode: no new session is started after it.
    pub max_seconds: f64,
    /// The server's pid, to measure its CPU per session (a rate measured
    /// on one box is bounded by the client's own TCP work too).
    pub server_pid: Option<u32>,
}

#[derive(Clone, Debug, Serialize)]
pub struct SessionsPoint {
    pub target: String,
    pub mode: String,
    pub attempted: u64,
    /// Sessions established (and, in create-close, closed with a reply).
    pub ok: u64,
    pub failed: u64,
    pub seconds: f64,
    pub sessions_per_s: f64,
    /// TCP connect to ConnectResponse.
    pub connect_latency_us: Percentiles,
    /// closeSession to its reply (create-close only).
    pub close_latency_us: Percentiles,
    /// First few failure messages.
    pub failures: Vec<String>,
    pub client: ClientCost,
    /// With --server-pid: the server's CPU over the mode's run.
    pub server: Option<ServerCost>,
}

struct Tally {
    attempted: u64,
    ok: u64,
    failed: u64,
    connect: hdrhistogram::Histogram<u64>,
    close: hdrhistogram::Histogram<u64>,
    failures: Vec<String>,
}

impl Tally {
    fn new() -> Tally {
        Tally {
            attempted: 0,
            ok: 0,
            failed: 0,
            connect: histogram(),
            close: histogram(),
            failures: Vec::new(),
        }
    }

    fn merge(&mut self, o: &Tally) {
        self.attempted += o.attempted;
        self.ok += o.ok;
        self.failed += o.failed;
        self.connect.add(&o.connect).expect("same bounds");
        self.close.add(&o.close).expect("same bounds");
        for f in &o.failures {
            if self.failures.len() < 5 {
                self.failures.push(f.clone());
            }
        }
    }

    fn fail(&mut self, e: String) {
        self.failed += 1;
        if self.failures.len() < 5 {
            self.failures.push(e);
        }
    }
}

fn frame(body: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
    let mut buf = vec![0u8; 4];
    body(&mut buf);
    let len = (buf.len() - 4) as i32;
    buf[0..4].copy_from_slice(&len.to_be_bytes());
    buf
}

fn connect_frame(timeout_ms: i32) -> Vec<u8> {
    frame(|b| {
        ConnectRequest {
            protocol_version: 0,
            last_zxid_seen: 0,
            timeout_ms,
            session_id: 0,
            passwd: vec![0; 16],
            read_only: false,
            has_read_only: true,
        }
        .encode(b)
    })
}

fn close_frame() -> Vec<u8> {
    frame(|b| {
        b.extend_from_slice(&1i32.to_be_bytes());
        b.extend_from_slice(&op::CLOSE_SESSION.to_be_bytes());
    })
}

async fn read_frame(io: &mut TcpStream) -> std::io::Result<Vec<u8>> {
    let mut len = [0u8; 4];
    io.read_exact(&mut len).await?;
    let len = i32::from_be_bytes(len);
    if !(0..=1 << 20).contains(&len) {
        return Err(std::io::Error::other(format!("frame length {len}")));
    }
    let mut body = vec![0u8; len as usize];
    io.read_exact(&mut body).await?;
    Ok(body)
}

async fn bounded<T>(
    what: &str,
    f: impl std::future::Future<Output = std::io::Result<T>>,
) -> Result<T, String> {
    let timeout = async {
        glommio::timer::sleep(STEP_TIMEOUT).await;
        Err(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            "timed out",
        ))
    };
    futures_lite::future::or(f, timeout)
        .await
        .map_err(|e| format!("{what}: {e}"))
}

/// One session: connect, and in create-close mode close it. Returns the
/// connect and close latencies.
async fn one(
    addr: &str,
    connect: &[u8],
    close: Option<&[u8]>,
) -> Result<(Duration, Option<Duration>), String> {
    let t0 = Instant::now();
    let mut s = bounded("connect", async {
        let mut s = TcpStream::connect(addr).await?;
        s.set_nodelay(true)?;
        CONNECTS_SENT.fetch_add(1, Relaxed);
        s.write_all(connect).await?;
        let body = read_frame(&mut s).await?;
        let resp =
            ConnectResponse::decode(&body).map_err(|e| std::io::Error::other(e.to_string()))?;
        if resp.session_id == 0 {
            return Err(std::io::Error::other("session refused (session id 0)"));
        }
        Ok(s)
    })
    .await?;
    let connected = t0.elapsed();
    let Some(close) = close else {
        return Ok((connected, None));
    };
    let t1 = Instant::now();
    bounded("closeSession", async {
        s.write_all(close).await?;
        // The reply (xid 1); anything else first (none expected) is skipped.
        loop {
            let body = read_frame(&mut s).await?;
            if body.len() >= 16 && i32::from_be_bytes(body[0..4].try_into().unwrap()) == 1 {
                let err = i32::from_be_bytes(body[12..16].try_into().unwrap());
                if err != 0 {
                    return Err(std::io::Error::other(format!("closeSession error {err}")));
                }
                return Ok(());
            }
        }
    })
    .await?;
    Ok((connected, Some(t1.elapsed())))
}

pub fn run(t: &Target, p: &SessionsParams) -> Result<Vec<SessionsPoint>, String> {
    for m in &p.modes {
        if !MODES.contains(&m.as_str()) {
            return Err(format!("--mode {m}: want create or create-close"));
        }
    }
    p.modes.iter().map(|m| run_mode(t, p, m)).collect()
}

fn run_mode(t: &Target, p: &SessionsParams, mode: &str) -> Result<SessionsPoint, String> {
    let concurrency = p.concurrency.max(1);
    let threads = p.threads.clamp(1, concurrency);
    let next = Arc::new(AtomicU64::new(0));
    let meter = CostMeter::start();
    let server_meter = ServerMeter::start(p.server_pid);
    let start = Instant::now();
    let deadline = start + Duration::from_secs_f64(p.max_seconds.max(0.1));
    let mut handles = Vec::new();
    for th in 0..threads {
        let tasks = (0..concurrency).filter(|c| c % threads == th).count();
        let (servers, next, count) = (t.servers.clone(), next.clone(), p.count as u64);
        let (timeout_ms, close) = (p.session_timeout_ms, mode == "create-close");
        let h = glommio::LocalExecutorBuilder::new(glommio::Placement::Unbound)
            .name(&format!("lg-{th}"))
            .spawn(move || async move {
                let tally = Rc::new(RefCell::new(Tally::new()));
                let (cf, clf) = (Rc::new(connect_frame(timeout_ms)), Rc::new(close_frame()));
                let servers = Rc::new(servers);
                let mut js = Vec::new();
                for _ in 0..tasks {
                    let (tally, next, cf, clf, servers) = (
                        tally.clone(),
                        next.clone(),
                        cf.clone(),
                        clf.clone(),
                        servers.clone(),
                    );
                    js.push(glommio::spawn_local(async move {
                        let mut local = Tally::new();
                        loop {
                            if Instant::now() >= deadline {
                                break;
                            }
                            let i = next.fetch_add(1, Relaxed);
                            if i >= count {
                                break;
                            }
                            local.attempted += 1;
                            let addr = &servers[i as usize % servers.len()];
                            let c = if close { Some(&clf[..]) } else { None };
                            match one(addr, &cf, c).await {
                                Ok((conn, cl)) => {
                                    local.ok += 1;
                                    let _ = local.connect.record(conn.as_micros().max(1) as u64);
                                    if let Some(cl) = cl {
                                        let _ = local.close.record(cl.as_micros().max(1) as u64);
                                    }
                                }
                                Err(e) => local.fail(e),
                            }
                        }
                        tally.borrow_mut().merge(&local);
                    }));
                }
                for j in js {
                    j.await;
                }
                Rc::try_unwrap(tally).ok().expect("tasks done").into_inner()
            })
            .map_err(|e| e.to_string())?;
        handles.push(h);
    }
    let mut total = Tally::new();
    for h in handles {
        total.merge(&h.join().map_err(|e| e.to_string())?);
    }
    let seconds = start.elapsed().as_secs_f64();
    Ok(SessionsPoint {
        target: t.name.clone(),
        mode: mode.to_string(),
        attempted: total.attempted,
        ok: total.ok,
        failed: total.failed,
        seconds,
        sessions_per_s: total.ok as f64 / seconds.max(1e-9),
        connect_latency_us: Percentiles::of(&total.connect),
        close_latency_us: Percentiles::of(&total.close),
        failures: total.failures,
        client: meter.stop().per_op(total.ok, threads),
        server: server_meter.and_then(|m| m.stop(total.ok)),
    })
}

pub fn table(points: &[SessionsPoint], p: &SessionsParams) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "{} sessions, {} at a time (us/s: CPU microseconds per session)",
        p.count,
        p.concurrency.max(1)
    );
    let _ = writeln!(
        o,
        "{:<10} {:<13} {:>8} {:>8} {:>8} {:>11} | {:>8} {:>8} {:>8} | {:>9} {:>8} | {:>11} {:>11}",
        "target",
        "mode",
        "ok",
        "failed",
        "seconds",
        "sessions/s",
        "conn p50",
        "p99",
        "max",
        "close p50",
        "p99",
        "client us/s",
        "server us/s"
    );
    for pt in points {
        let l = |v: u64, n: u64| {
            if n == 0 {
                "-".into()
            } else {
                crate::report::us(v)
            }
        };
        let _ = writeln!(
            o,
            "{:<10} {:<13} {:>8} {:>8} {:>8.3} {:>11.0} | {:>8} {:>8} {:>8} | {:>9} {:>8} | {:>11.1} {:>11}",
            pt.target,
            pt.mode,
            pt.ok,
            pt.failed,
            pt.seconds,
            pt.sessions_per_s,
            l(pt.connect_latency_us.p50, pt.connect_latency_us.count),
            l(pt.connect_latency_us.p99, pt.connect_latency_us.count),
            l(pt.connect_latency_us.max, pt.connect_latency_us.count),
            l(pt.close_latency_us.p50, pt.close_latency_us.count),
            l(pt.close_latency_us.p99, pt.close_latency_us.count),
            pt.client.cpu_us_per_op,
            pt.server
                .as_ref()
                .map_or("-".to_string(), |s| format!("{:.1}", s.cpu_us_per_op)),
        );
        for f in &pt.failures {
            let _ = writeln!(o, "  {} {}: {f}", pt.target, pt.mode);
        }
    }
    o
}

pub const CSV: &[&str] = &[
    "target",
    "mode",
    "attempted",
    "ok",
    "failed",
    "seconds",
    "sessions_per_s",
    "connect_p50_us",
    "connect_p99_us",
    "connect_max_us",
    "close_p50_us",
    "close_p99_us",
    "close_max_us",
    "client_cpu_us_per_session",
    "server_cpu_us_per_session",
];

pub fn rows(points: &[SessionsPoint]) -> Vec<Vec<String>> {
    points
        .iter()
        .map(|pt| {
            vec![
                pt.target.clone(),
                pt.mode.clone(),
                pt.attempted.to_string(),
                pt.ok.to_string(),
                pt.failed.to_string(),
                format!("{:.4}", pt.seconds),
                format!("{:.1}", pt.sessions_per_s),
                pt.connect_latency_us.p50.to_string(),
                pt.connect_latency_us.p99.to_string(),
                pt.connect_latency_us.max.to_string(),
                pt.close_latency_us.p50.to_string(),
                pt.close_latency_us.p99.to_string(),
                pt.close_latency_us.max.to_string(),
                format!("{:.1}", pt.client.cpu_us_per_op),
                pt.server
                    .as_ref()
                    .map_or(String::new(), |s| format!("{:.1}", s.cpu_us_per_op)),
            ]
        })
        .collect()
}
