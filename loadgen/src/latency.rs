//! The phases of zk-smoketest's zk-latencies.py, on one session per server
//! in turn: create, set, get, delete of N permanent znodes; create of N
//! ephemerals; watches set on them (exists); delete of the ephemerals, which
//! fires the watches; and the notifications, timed from each delete's send.
//! Synchronous (one request at a time) and asynchronous (pipelined, up to
//! `window` in flight) calls.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use ringkeeper::proto::codes::{err, event, op};
use ringkeeper::proto::{Acl, Response};
use serde::Serialize;

use crate::counters::{CounterCheck, CounterSnapshot};
use crate::session::{create_body, on_executor, open_acl, Session};
use crate::stats::{histogram, ClientCost, CostMeter, Errors, Percentiles};
use crate::target::Target;

const NOTIFY_TIMEOUT: Duration = Duration::from_secs(60);
const EPHEMERAL: i32 = 1;

#[derive(Clone, Debug, Serialize)]
pub struct LatencyParams {
    pub count: usize,
    pub value_bytes: usize,
    /// Which modes: "sync", "async".
    pub modes: Vec<String>,
    /// Requests in flight in async mode.
    pub window: usize,
    pub root: String,
    pub force: bool,
    pub session_timeout_ms: i32,
}

#[derive(Clone, Debug, Serialize)]
pub struct Phase {
    pub target: String,
    pub server: String,
    pub mode: String,
    pub phase: String,
    pub ops: u64,
    pub ms: f64,
    pub ms_per_op: f64,
    pub ops_per_s: f64,
    /// Per op: send to reply (notifications: delete sent to event).
    pub latency_us: Percentiles,
    pub errors: std::collections::BTreeMap<String, u64>,
    pub error_total: u64,
}

#[derive(Clone, Debug, Serialize)]
pub struct LatencyRun {
    pub phases: Vec<Phase>,
    pub client: ClientCost,
    pub counters: CounterCheck,
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Create(i32),
    Set,
    Get,
    Delete,
    Watch,
}

/// Runs every mode on every server of `t`, as zk-latencies.py --servers.
pub fn run(t: &Target, p: &LatencyParams) -> Result<LatencyRun, String> {
    let counters = CounterSnapshot::take(&t.servers);
    let meter = CostMeter::start();
    let mut phases = Vec::new();
    for server in &t.servers {
        for mode in &p.modes {
            let (server, p2, mode2) = (server.clone(), p.clone(), mode.clone());
            let mut got = on_executor("lg-latency", move || async move {
                one_session(&server, &p2, &mode2).await
            })??;
            for ph in &mut got {
                ph.target = t.name.clone();
            }
            phases.extend(got);
        }
    }
    let ops = phases
        .iter()
        .filter(|p| p.phase != "notif")
        .map(|p| p.ops)
        .sum();
    Ok(LatencyRun {
        phases,
        client: meter.stop().per_op(ops, 1),
        counters: counters.finish(&t.servers),
    })
}

struct Runner<'a> {
    s: Session,
    p: &'a LatencyParams,
    server: String,
    mode: String,
    window: usize,
    acl: Vec<Acl>,
    value: Vec<u8>,
    out: Vec<u8>,
    path: String,
    sent_at: Vec<Instant>,
    notifs: Notifs,
    phases: Vec<Phase>,
}

/// The watches' NodeDeleted notifications.
struct Notifs {
    /// Per ephemeral: when its delete was sent.
    delete_at: Vec<Option<Instant>>,
    count: usize,
    /// Delete sent to notification received, per notification.
    us: hdrhistogram::Histogram<u64>,
    last: Option<Instant>,
}

impl Notifs {
    /// A NodeDeleted event on `{root}/session_{j}`: times it from j's delete.
    fn note(&mut self, body: &[u8], at: Instant, root: &str) {
        let Some((kind, path)) = crate::session::parse_event(body) else {
            return;
        };
        if kind != event::NODE_DELETED {
            return;
        }
        let Some(rest) = path
            .strip_prefix(root.as_bytes())
            .and_then(|r| r.strip_prefix(b"/session_"))
        else {
            return;
        };
        let j = std::str::from_utf8(rest)
            .ok()
            .and_then(|s| s.parse::<usize>().ok());
        if let Some(Some(sent)) = j.and_then(|j| self.delete_at.get(j)) {
            let us = at.saturating_duration_since(*sent).as_micros().max(1) as u64;
            let _ = self.us.record(us);
            self.count += 1;
            self.last = Some(at);
        }
    }
}

async fn one_session(server: &str, p: &LatencyParams, mode: &str) -> Result<Vec<Phase>, String> {
    let io = |e: std::io::Error| format!("{server}: {e}");
    let s = Session::connect(server, p.session_timeout_ms)
        .await
        .map_err(io)?;
    let mut r = Runner {
        s,
        p,
        server: server.to_string(),
        mode: mode.to_string(),
        window: if mode == "sync" { 1 } else { p.window.max(1) },
        acl: open_acl(),
        value: vec![b'x'; p.value_bytes],
        out: Vec::new(),
        path: String::new(),
        sent_at: vec![Instant::now(); p.count],
        notifs: Notifs {
            delete_at: vec![None; p.count],
            count: 0,
            us: histogram(),
            last: None,
        },
        phases: Vec::new(),
    };
    r.prepare_root().await?;
    r.phase("create", Kind::Create(0)).await.map_err(io)?;
    r.phase("set", Kind::Set).await.map_err(io)?;
    r.phase("get", Kind::Get).await.map_err(io)?;
    r.phase("delete", Kind::Delete).await.map_err(io)?;
    r.phase("create_ephemeral", Kind::Create(EPHEMERAL))
        .await
        .map_err(io)?;
    r.phase("watch", Kind::Watch).await.map_err(io)?;
    r.phase("delete_ephemeral", Kind::Delete)
        .await
        .map_err(io)?;
    r.notifications().await.map_err(io)?;
    let code =
        r.s.call(&crate::session::Template::new(
            &ringkeeper::proto::Request::Delete {
                path: p.root.clone(),
                version: -1,
            },
        ))
        .await
        .map_err(io)?;
    if code != 0 {
        eprintln!("ringkeeper-loadgen: delete {}: error {code}", p.root);
    }
    r.s.close().await;
    Ok(r.phases)
}

impl Runner<'_> {
    fn child(&mut self, j: usize) {
        self.path.clear();
        let _ = write!(self.path, "{}/session_{j}", self.p.root);
    }

    /// Creates the root; an existing one is an error unless --force, which
    /// empties it first (as zk-latencies.py).
    async fn prepare_root(&mut self) -> Result<(), String> {
        let root = self.p.root.clone();
        let t = crate::session::create_template(&root, b"ringkeeper-loadgen latency root");
        let code = self.s.call(&t).await.map_err(|e| e.to_string())?;
        if code == 0 {
            return Ok(());
        }
        if code != err::NODE_EXISTS {
            return Err(format!("create {root}: error {code}"));
        }
        if !self.p.force {
            return Err(format!("{root} already exists (use --force to empty it)"));
        }
        let ls = crate::session::Template::new(&ringkeeper::proto::Request::GetChildren {
            path: root.clone(),
            watch: false,
        });
        self.out.clear();
        let xid = self.s.push(&mut self.out, &ls);
        self.s.send(&self.out).await.map_err(|e| e.to_string())?;
        let mut children = Vec::new();
        loop {
            let mut done = false;
            self.s
                .recv(|fr| {
                    if fr.xid == xid {
                        done = true;
                        if let Ok(Response::Children(c)) =
                            Response::decode(op::GET_CHILDREN, fr.body)
                        {
                            children = c;
                        }
                    }
                })
                .await
                .map_err(|e| e.to_string())?;
            if done {
                break;
            }
        }
        let dels: Vec<_> = children
            .iter()
            .map(|c| {
                crate::session::Template::new(&ringkeeper::proto::Request::Delete {
                    path: format!("{root}/{c}"),
                    version: -1,
                })
            })
            .collect();
        self.s
            .call_many(&dels, 100)
            .await
            .map_err(|e| e.to_string())?;
        Ok(())
    }

    fn push(&mut self, kind: Kind, j: usize) -> i32 {
        self.child(j);
        let (path, value, acl) = (&self.path, &self.value, &self.acl);
        let xid = match kind {
            Kind::Create(flags) => self.s.push_with(&mut self.out, op::CREATE, |w| {
                create_body(w, path, value, acl, flags)
            }),
            Kind::Set => self.s.push_with(&mut self.out, op::SET_DATA, |w| {
                w.string(path).buffer(value).i32(-1);
            }),
            Kind::Get => self.s.push_with(&mut self.out, op::GET_DATA, |w| {
                w.string(path).bool(false);
            }),
            Kind::Delete => self.s.push_with(&mut self.out, op::DELETE, |w| {
                w.string(path).i32(-1);
            }),
            Kind::Watch => self.s.push_with(&mut self.out, op::EXISTS, |w| {
                w.string(path).bool(true);
            }),
        };
        xid
    }

    /// One phase: `count` requests, at most `window` in flight.
    async fn phase(&mut self, name: &str, kind: Kind) -> std::io::Result<()> {
        let n = self.p.count;
        let mut lat = histogram();
        let mut errors = Errors::default();
        let watching_deletes = name == "delete_ephemeral";
        let start = Instant::now();
        let (mut next, mut done) = (0usize, 0usize);
        while done < n {
            self.out.clear();
            let batch_start = next;
            while next < n && next - done < self.window {
                self.push(kind, next);
                next += 1;
            }
            let now = Instant::now();
            for j in batch_start..next {
                self.sent_at[j] = now;
                if watching_deletes {
                    self.notifs.delete_at[j] = Some(now);
                }
            }
            if next > batch_start {
                self.s.send(&self.out).await?;
            }
            let (sent_at, root, notifs) = (&self.sent_at, &self.p.root, &mut self.notifs);
            self.s
                .recv(|fr| {
                    if fr.xid == -1 {
                        notifs.note(fr.body, fr.at, root);
                    } else if fr.xid > 0 && done < n {
                        let us = fr.at.saturating_duration_since(sent_at[done]);
                        let _ = lat.record(us.as_micros().max(1) as u64);
                        let ok = fr.err == 0 || (kind == Kind::Watch && fr.err == err::NO_NODE);
                        if !ok {
                            errors.add(fr.err, 1);
                        }
                        done += 1;
                    }
                })
                .await?;
        }
        self.record(name, n as u64, start.elapsed(), &lat, &errors);
        Ok(())
    }

    /// Waits for the watches' notifications still missing after the
    /// deletes, then records them: ms from the first delete sent to the last
    /// notification received (zk-latencies times only the wait after the
    /// deletes, usually "included in prior").
    async fn notifications(&mut self) -> std::io::Result<()> {
        let n = self.p.count;
        let mut errors = Errors::default();
        let wait = async {
            while self.notifs.count < n {
                let (root, notifs) = (&self.p.root, &mut self.notifs);
                self.s
                    .recv(|fr| {
                        if fr.xid == -1 {
                            notifs.note(fr.body, fr.at, root);
                        }
                    })
                    .await?;
            }
            Ok::<bool, std::io::Error>(true)
        };
        let timeout = async {
            glommio::timer::sleep(NOTIFY_TIMEOUT).await;
            Ok(false)
        };
        if !futures_lite::future::or(wait, timeout).await? {
            // Missing notifications are errors, never hidden.
            errors.add(err::SYSTEM_ERROR, (n - self.notifs.count) as u64);
        }
        let first = self.notifs.delete_at.iter().flatten().min().copied();
        let took = match (first, self.notifs.last) {
            (Some(a), Some(b)) => b.saturating_duration_since(a),
            _ => Duration::ZERO,
        };
        let h = std::mem::replace(&mut self.notifs.us, histogram());
        self.record("notif", self.notifs.count as u64, took, &h, &errors);
        Ok(())
    }

    fn record(
        &mut self,
        name: &str,
        ops: u64,
        took: Duration,
        lat: &hdrhistogram::Histogram<u64>,
        errors: &Errors,
    ) {
        let ms = took.as_secs_f64() * 1e3;
        self.phases.push(Phase {
            target: String::new(),
            server: self.server.clone(),
            mode: self.mode.clone(),
            phase: name.to_string(),
            ops,
            ms,
            ms_per_op: ms / ops.max(1) as f64,
            ops_per_s: ops as f64 / took.as_secs_f64().max(1e-9),
            latency_us: Percentiles::of(lat),
            error_total: errors.total(),
            errors: errors.by_name(),
        });
    }
}
