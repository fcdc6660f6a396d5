//! A reconnect storm (issue 28 §5): N sessions held open on an ensemble's
//! members (spread over them; `tcp+tls://` members for TLS), each touching
//! its session every third of its timeout; an event (say, kill -9 of the
//! leader) breaks some of their connections, and every broken one
//! reconnects at once to the next member with its session id and
//! password, as a ZooKeeper client does. Reported: how many sessions the
//! event broke, how many of those came back with their session (kept),
//! how many the ensemble answered as expired, how many found no member
//! within the wait (failed), and how long reconnecting took.

use std::cell::RefCell;
use std::rc::Rc;
use std::time::{Duration, Instant};

use ringkeeper::proto::Request;
use serde::Serialize;

use crate::session::{on_executor, Session, Template};
use crate::target::Target;

#[derive(Clone, Serialize)]
pub struct StormParams {
    pub sessions: usize,
    /// Sessions being established at once before the event.
    pub concurrency: usize,
    pub session_timeout_ms: i32,
    /// Shell command run once every session is established (and this long
    /// after).
    pub event: String,
    pub event_delay_s: f64,
    /// How long after the event broken sessions may take to come back.
    pub wait_s: f64,
    /// A connect or request without an answer this long fails.
    pub request_timeout_ms: u64,
}

#[derive(Default, Serialize)]
pub struct StormResult {
    pub established: usize,
    pub establish_s: f64,
    pub broken: usize,
    pub kept: usize,
    pub expired: usize,
    pub failed: usize,
    pub reconnect_p50_ms: f64,
    pub reconnect_p99_ms: f64,
    pub reconnect_max_ms: f64,
    pub event_exit: Option<i32>,
}

#[derive(Default)]
struct Tally {
    broken: usize,
    kept: usize,
    expired: usize,
    failed: usize,
    reconnect_ms: Vec<f64>,
}

pub fn run(t: &Target, p: &StormParams) -> Result<StormResult, String> {
    let (t, p) = (t.clone(), p.clone());
    on_executor(
        "storm",
        move || async move { run_on_executor(&t, &p).await },
    )?
}

async fn bounded<T>(
    ms: u64,
    f: impl std::future::Future<Output = std::io::Result<T>>,
) -> std::io::Result<T> {
    let timeout = async {
        glommio::timer::sleep(Duration::from_millis(ms)).await;
        Err(std::io::ErrorKind::TimedOut.into())
    };
    futures_lite::future::or(f, timeout).await
}

struct Held {
    session: Session,
    id: i64,
    passwd: Vec<u8>,
    member: usize,
}

async fn run_on_executor(t: &Target, p: &StormParams) -> Result<StormResult, String> {
    let servers = Rc::new(t.servers.clone());
    let start = Instant::now();
    // Establish: `concurrency` workers take the next index each.
    let next = Rc::new(RefCell::new(0usize));
    let held: Rc<RefCell<Vec<Held>>> = Rc::new(RefCell::new(Vec::with_capacity(p.sessions)));
    let mut workers = Vec::new();
    for _ in 0..p.concurrency.max(1) {
        let (next, held, servers, p) = (next.clone(), held.clone(), servers.clone(), p.clone());
        workers.push(glommio::spawn_local(async move {
            loop {
                let i = {
                    let mut n = next.borrow_mut();
                    if *n >= p.sessions {
                        return Ok::<(), String>(());
                    }
                    *n += 1;
                    *n - 1
                };
                let member = i % servers.len();
                let addr = &servers[member];
                let (session, resp) = bounded(
                    p.request_timeout_ms,
                    Session::attach(addr, p.session_timeout_ms, 0, vec![0; 16]),
                )
                .await
                .map_err(|e| format!("session {i} on {addr}: {e}"))?;
                if resp.session_id == 0 {
                    return Err(format!("session {i} on {addr}: refused"));
                }
                held.borrow_mut().push(Held {
                    session,
                    id: resp.session_id,
                    passwd: resp.passwd,
                    member,
                });
            }
        }));
    }
    for w in workers {
        w.await?;
    }
    let established = held.borrow().len();
    let establish_s = start.elapsed().as_secs_f64();
    // Hold every session until the end; reconnect the broken ones.
    let tally = Rc::new(RefCell::new(Tally::default()));
    let event_at = Instant::now() + Duration::from_secs_f64(p.event_delay_s);
    let end = event_at + Duration::from_secs_f64(p.wait_s);
    let touch = Template::new(&Request::Exists {
        path: "/".into(),
        watch: false,
    });
    let mut tasks = Vec::new();
    for h in std::mem::take(&mut *held.borrow_mut()) {
        let (tally, servers, p, touch) = (tally.clone(), servers.clone(), p.clone(), touch.clone());
        tasks.push(glommio::spawn_local(async move {
            hold(h, &servers, &p, &touch, end, &tally).await
        }));
    }
    glommio::timer::sleep(event_at.saturating_duration_since(Instant::now())).await;
    let event_exit = std::process::Command::new("sh")
        .arg("-c")
        .arg(&p.event)
        .status()
        .map_err(|e| format!("running the event {:?}: {e}", p.event))?
        .code();
    for t in tasks {
        t.await;
    }
    let mut tally = tally.take();
    tally.reconnect_ms.sort_by(f64::total_cmp);
    let pct = |q: f64| {
        let v = &tally.reconnect_ms;
        if v.is_empty() {
            f64::NAN
        } else {
            v[((v.len() - 1) as f64 * q).round() as usize]
        }
    };
    Ok(StormResult {
        established,
        establish_s,
        broken: tally.broken,
        kept: tally.kept,
        expired: tally.expired,
        failed: tally.failed,
        reconnect_p50_ms: pct(0.5),
        reconnect_p99_ms: pct(0.99),
        reconnect_max_ms: tally.reconnect_ms.last().copied().unwrap_or(f64::NAN),
        event_exit,
    })
}

/// Touches the session every third of its timeout until `end`; on a
/// broken connection, reconnects (each member in turn from the next one)
/// with the session's id and password until it is kept, expired, or `end`.
async fn hold(
    mut h: Held,
    servers: &[String],
    p: &StormParams,
    touch: &Template,
    end: Instant,
    tally: &RefCell<Tally>,
) {
    let every = Duration::from_millis((p.session_timeout_ms.max(300) / 3) as u64);
    loop {
        if Instant::now() >= end {
            return;
        }
        glommio::timer::sleep(every.min(end.saturating_duration_since(Instant::now()))).await;
        let ok = bounded(p.request_timeout_ms, h.session.call(touch))
            .await
            .is_ok();
        if ok {
            continue;
        }
        let broke = Instant::now();
        tally.borrow_mut().broken += 1;
        let mut attempt = 0;
        loop {
            if Instant::now() >= end {
                tally.borrow_mut().failed += 1;
                return;
            }
            attempt += 1;
            let member = (h.member + attempt) % servers.len();
            let r = bounded(
                p.request_timeout_ms,
                Session::attach(
                    &servers[member],
                    p.session_timeout_ms,
                    h.id,
                    h.passwd.clone(),
                ),
            )
            .await;
            match r {
                Ok((session, resp)) if resp.session_id == h.id && resp.timeout_ms > 0 => {
                    let mut t = tally.borrow_mut();
                    t.kept += 1;
                    t.reconnect_ms.push(broke.elapsed().as_secs_f64() * 1e3);
                    h.session = session;
                    h.member = member;
                    break;
                }
                Ok(_) => {
                    tally.borrow_mut().expired += 1;
                    return;
                }
                // Refused (a member without a leader closes at once) or
                // unreachable: the next member, a moment later.
                Err(_) => glommio::timer::sleep(Duration::from_millis(20)).await,
            }
        }
    }
}

pub fn table(t: &Target, r: &StormResult) -> String {
    format!(
        "target {}: {} sessions established in {:.1} s; the event (exit {:?}) broke {}: \
         kept {}, expired {}, failed {}; reconnect p50 {:.0} ms p99 {:.0} ms max {:.0} ms\n",
        t.name,
        r.established,
        r.establish_s,
        r.event_exit,
        r.broken,
        r.kept,
        r.expired,
        r.failed,
        r.reconnect_p50_ms,
        r.reconnect_p99_ms,
        r.reconnect_max_ms
    )
}

pub const CSV: &[&str] = &[
    "target",
    "established",
    "establish_s",
    "broken",
    "kept",
    "expired",
    "failed",
    "reconnect_p50_ms",
    "reconnect_p99_ms",
    "reconnect_max_ms",
];

pub fn row(t: &Target, r: &StormResult) -> Vec<String> {
    vec![
        t.name.clone(),
        r.established.to_string(),
        format!("{:.2}", r.establish_s),
        r.broken.to_string(),
        r.kept.to_string(),
        r.expired.to_string(),
        r.failed.to_string(),
        format!("{:.1}", r.reconnect_p50_ms),
        format!("{:.1}", r.reconnect_p99_ms),
        format!("{:.1}", r.reconnect_max_ms),
    ]
}
