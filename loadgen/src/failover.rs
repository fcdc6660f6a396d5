//! The write outage across a failure: W writers, each a session doing
//! synchronous setData on a znode of its own, while a command (e.g. kill -9
//! of the leader) runs at a set time. The outage is the longest pause
//! between two acknowledged writes (of any writer) that ends after the
//! event started; also reported: when that pause ended, from the event.
//!
//! A writer whose request fails or times out (outcome unknown) opens a new
//! session, trying the target's servers in turn from the next one, with no
//! back-off beyond `retry_ms`: the outage measures the ensemble, not a
//! client's reconnect policy.

use std::cell::RefCell;
use std::rc::Rc;
use std::time::{Duration, Instant};

use ringkeeper::proto::Request;

use crate::session::{create_template, on_executor, Session, Template};
use crate::target::Target;

#[derive(Clone, Debug, serde::Serialize)]
pub struct FailoverParams {
    pub writers: usize,
    /// Seconds into the run when `event` starts.
    pub event_at_s: f64,
    pub event: String,
    pub duration_s: f64,
    pub request_timeout_ms: u64,
    pub retry_ms: u64,
    pub value_bytes: usize,
    pub root: String,
    pub session_timeout_ms: i32,
}

#[derive(Clone, Debug, serde::Serialize)]
pub struct FailoverResult {
    pub acked: usize,
    pub failed: usize,
    pub reconnects: usize,
    /// The longest pause between acknowledged writes that spans the event.
    pub outage_ms: f64,
    /// From the event's start to the end of that pause.
    pub resumed_after_event_ms: f64,
    /// The longest pause between acknowledged writes before the event.
    pub longest_gap_before_ms: f64,
    pub event_exit: Option<i32>,
}

/// What the writers share (one executor: no locking).
#[derive(Default)]
struct Log {
    acks: Vec<Instant>,
    failed: usize,
    reconnects: usize,
}

pub fn run(t: &Target, p: &FailoverParams) -> Result<FailoverResult, String> {
    let (t, p) = (t.clone(), p.clone());
    on_executor(
        "failover",
        move || async move { run_on_executor(&t, &p).await },
    )?
}

async fn run_on_executor(t: &Target, p: &FailoverParams) -> Result<FailoverResult, String> {
    // The writers' znodes, made first through the first server that serves.
    let mut setup = None;
    for s in &t.servers {
        if let Ok((sess, code)) = Session::connect_creating(s, p.session_timeout_ms, &p.root).await
        {
            if code == 0 || code == -110 {
                setup = Some(sess);
                break;
            }
        }
    }
    let mut setup = setup.ok_or("no server of the target created the root")?;
    let value = vec![b'f'; p.value_bytes];
    for w in 0..p.writers {
        let path = format!("{}/w{w}", p.root);
        let code = setup
            .call(&create_template(&path, &value))
            .await
            .map_err(|e| e.to_string())?;
        if code != 0 && code != -110 {
            return Err(format!("create {path}: error {code}"));
        }
    }
    setup.close().await;

    let log = Rc::new(RefCell::new(Log::default()));
    let start = Instant::now();
    let end = start + Duration::from_secs_f64(p.duration_s);
    let mut tasks = Vec::new();
    for w in 0..p.writers {
        let (log, servers, p) = (log.clone(), t.servers.clone(), p.clone());
        let set = Template::new(&Request::SetData {
            path: format!("{}/w{w}", p.root),
            data: Some(vec![b'f'; p.value_bytes].into()),
            version: -1,
        });
        tasks.push(glommio::spawn_local(async move {
            writer(w % servers.len(), &servers, &set, &p, end, &log).await
        }));
    }
    let event_at = start + Duration::from_secs_f64(p.event_at_s);
    glommio::timer::sleep(event_at.saturating_duration_since(Instant::now())).await;
    let event_started = Instant::now();
    // Spawned, not waited for here: the writers keep running meanwhile.
    let mut event = std::process::Command::new("sh")
        .arg("-c")
        .arg(&p.event)
        .spawn()
        .map_err(|e| format!("running the event {:?}: {e}", p.event))?;
    for task in tasks {
        task.await;
    }
    let event_exit = event.wait().map_err(|e| e.to_string())?.code();
    let log = log.borrow();
    let mut acks = log.acks.clone();
    acks.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let (before, after): (Vec<Instant>, Vec<Instant>) =
        acks.iter().partition(|a| **a <= event_started);
    // The pauses that end after the event started (the event takes a
    // moment: writes in flight then are still acknowledged); the longest.
    let mut pauses: Vec<(Instant, Instant)> = after
        .iter()
        .scan(before.last().copied(), |prev, a| {
            let pause = prev.map(|p| (p, *a));
            *prev = Some(*a);
            Some(pause)
        })
        .flatten()
        .collect();
    if let Some(last) = acks.last() {
        // A run that never recovered ends in a pause to its end.
        pauses.push((*last, end.max(*last)));
    }
    let longest = pauses.iter().copied().max_by_key(|(from, to)| *to - *from);
    Ok(FailoverResult {
        acked: acks.len(),
        failed: log.failed,
        reconnects: log.reconnects,
        outage_ms: longest.map_or(f64::NAN, |(from, to)| ms(to - from)),
        resumed_after_event_ms: longest.map_or(f64::NAN, |(_, to)| {
            ms(to.saturating_duration_since(event_started))
        }),
        longest_gap_before_ms: before
            .windows(2)
            .map(|w| ms(w[1] - w[0]))
            .fold(0.0, f64::max),
        event_exit,
    })
}

/// One writer: synchronous setData until `end`, a new session on failure.
async fn writer(
    first: usize,
    servers: &[String],
    set: &Template,
    p: &FailoverParams,
    end: Instant,
    log: &Rc<RefCell<Log>>,
) {
    let timeout = Duration::from_millis(p.request_timeout_ms);
    let mut at = first;
    let mut session: Option<Session> = None;
    while Instant::now() < end {
        let Some(s) = session.as_mut() else {
            let connecting = Session::connect(&servers[at % servers.len()], p.session_timeout_ms);
            match bounded(connecting, timeout).await {
                Some(Ok(s)) => session = Some(s),
                _ => {
                    at += 1;
                    glommio::timer::sleep(Duration::from_millis(p.retry_ms)).await;
                }
            }
            continue;
        };
        match bounded(s.call(set), timeout).await {
            Some(Ok(0)) => log.borrow_mut().acks.push(Instant::now()),
            _ => {
                let mut l = log.borrow_mut();
                l.failed += 1;
                l.reconnects += 1;
                session = None;
                at += 1;
            }
        }
    }
}

async fn bounded<T>(f: impl std::future::Future<Output = T>, limit: Duration) -> Option<T> {
    futures_lite::future::or(async { Some(f.await) }, async {
        glommio::timer::sleep(limit).await;
        None
    })
    .await
}

pub fn table(t: &Target, r: &FailoverResult) -> String {
    format!(
        "{t}: outage {:.0} ms (writes resumed {:.0} ms after the event; longest gap before it {:.0} ms); \
         {} acked, {} failed, {} reconnects, event exit {:?}\n",
        r.outage_ms,
        r.resumed_after_event_ms,
        r.longest_gap_before_ms,
        r.acked,
        r.failed,
        r.reconnects,
        r.event_exit
    )
}

pub const CSV: &[&str] = &[
    "target",
    "outage_ms",
    "resumed_after_event_ms",
    "longest_gap_before_ms",
    "acked",
    "failed",
    "reconnects",
];

pub fn row(t: &Target, r: &FailoverResult) -> Vec<String> {
    vec![
        t.name.clone(),
        format!("{:.1}", r.outage_ms),
        format!("{:.1}", r.resumed_after_event_ms),
        format!("{:.1}", r.longest_gap_before_ms),
        r.acked.to_string(),
        r.failed.to_string(),
        r.reconnects.to_string(),
    ]
}
