//! One big multi (issue 11, section 1): a single multi of N creates under a
//! fresh parent, timed from the send to the reply, then a single multi that
//! deletes them again. The request is N x ~(path + value + 40) bytes, so both
//! servers need a jute.maxbuffer above it (the result says how big it was).

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use ringkeeper::proto::codes::{err, op};
use ringkeeper::proto::{Request, Response};
use serde::Serialize;

use crate::session::{on_executor, open_acl, Session, Template};
use crate::target::Target;

#[derive(Clone, Debug, Serialize)]
pub struct BigMultiParams {
    pub ops: usize,
    pub value_bytes: usize,
    pub root: String,
    /// Leave the znodes (no delete multi).
    pub keep: bool,
    pub timeout_s: f64,
    pub session_timeout_ms: i32,
}

/// One multi's measurement.
#[derive(Clone, Debug, Default, Serialize)]
pub struct MultiRun {
    pub ops: usize,
    pub request_bytes: usize,
    pub reply_bytes: usize,
    /// The reply header's error code (0: the multi was applied).
    pub err: i32,
    /// Results in the reply that succeeded / failed.
    pub results_ok: u64,
    pub results_failed: u64,
    /// From the start of the send to the read that completed the reply.
    pub seconds: f64,
    pub ops_per_s: f64,
    /// The parent's numChildren (exists) after the multi.
    pub children_after: i64,
}

#[derive(Clone, Debug, Serialize)]
pub struct BigMultiResult {
    pub target: String,
    pub create: MultiRun,
    pub delete: Option<MultiRun>,
}

/// Sends `t` and returns (error code, reply body, when the reply was read).
async fn call_body(s: &mut Session, t: &Template) -> std::io::Result<(i32, Vec<u8>, Instant)> {
    let mut out = Vec::with_capacity(t.bytes.len());
    let xid = s.push(&mut out, t);
    s.send(&out).await?;
    let mut got = None;
    while got.is_none() {
        s.recv(|fr| {
            if fr.xid == xid {
                got = Some((fr.err, fr.body.to_vec(), fr.at));
            }
        })
        .await?;
    }
    Ok(got.expect("reply"))
}

async fn num_children(s: &mut Session, path: &str) -> std::io::Result<i64> {
    let t = Template::new(&Request::Exists {
        path: path.to_string(),
        watch: false,
    });
    let (code, body, _) = call_body(s, &t).await?;
    if code != 0 {
        return Ok(-1);
    }
    Ok(match Response::decode(op::EXISTS, &body) {
        Ok(Response::Stat(st)) => st.num_children as i64,
        _ => -1,
    })
}

async fn run_multi(s: &mut Session, ops: Vec<Request>, parent: &str) -> std::io::Result<MultiRun> {
    let n = ops.len();
    let t = Template::new(&Request::Multi(ops));
    let sent = Instant::now();
    let (code, body, at) = call_body(s, &t).await?;
    let seconds = at.saturating_duration_since(sent).as_secs_f64();
    let (mut ok, mut failed) = (0, 0);
    if let Ok(Response::Multi(results)) = Response::decode(op::MULTI, &body) {
        for (_, r) in results {
            match r {
                Ok(_) => ok += 1,
                Err(_) => failed += 1,
            }
        }
    }
    Ok(MultiRun {
        ops: n,
        request_bytes: t.bytes.len(),
        reply_bytes: body.len() + 20,
        err: code,
        results_ok: ok,
        results_failed: failed,
        seconds,
        ops_per_s: if code == 0 {
            n as f64 / seconds.max(1e-9)
        } else {
            0.0
        },
        children_after: num_children(s, parent).await?,
    })
}

pub fn run(t: &Target, p: &BigMultiParams) -> Result<BigMultiResult, String> {
    let (server, p, name) = (t.servers[0].clone(), p.clone(), t.name.clone());
    on_executor("lg-bigmulti", move || async move {
        let work = async {
            let (mut s, code) =
                Session::connect_creating(&server, p.session_timeout_ms, &p.root).await?;
            match code {
                0 => {}
                err::NODE_EXISTS => {
                    return Err(format!(
                        "{} already exists (a previous run?): use another --root",
                        p.root
                    ))
                }
                c => return Err(format!("create {}: error {c}", p.root)),
            }
            let value = vec![b'm'; p.value_bytes];
            let creates: Vec<Request> = (0..p.ops)
                .map(|i| Request::Create {
                    opcode: op::CREATE,
                    path: format!("{}/m{i}", p.root),
                    data: Some(value.clone().into()),
                    acl: open_acl(),
                    flags: 0,
                    ttl: -1,
                })
                .collect();
            let create = run_multi(&mut s, creates, &p.root)
                .await
                .map_err(|e| format!("create multi: {e} (a server closes the connection when the request exceeds its jute.maxbuffer)"))?;
            let mut delete = None;
            if !p.keep {
                if create.err == 0 {
                    let deletes: Vec<Request> = (0..p.ops)
                        .map(|i| Request::Delete {
                            path: format!("{}/m{i}", p.root),
                            version: -1,
                        })
                        .collect();
                    delete = Some(
                        run_multi(&mut s, deletes, &p.root)
                            .await
                            .map_err(|e| format!("delete multi: {e}"))?,
                    );
                }
                let del = Template::new(&Request::Delete {
                    path: p.root.clone(),
                    version: -1,
                });
                let _ = s.call(&del).await;
            }
            s.close().await;
            Ok(BigMultiResult {
                target: name,
                create,
                delete,
            })
        };
        let timeout = async {
            glommio::timer::sleep(Duration::from_secs_f64(p.timeout_s.max(1.0))).await;
            Err(format!(
                "bigmulti did not finish within --timeout-s {}",
                p.timeout_s
            ))
        };
        futures_lite::future::or(work, timeout).await
    })?
}

pub fn table(r: &BigMultiResult) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "{:<8} {:>8} {:>11} {:>11} {:>9} {:>11} {:>6} {:>8} {:>8} {:>9}",
        "multi",
        "ops",
        "req bytes",
        "reply bytes",
        "seconds",
        "ops/s",
        "err",
        "ok",
        "failed",
        "children"
    );
    let mut row = |name: &str, m: &MultiRun| {
        let _ = writeln!(
            o,
            "{:<8} {:>8} {:>11} {:>11} {:>9.3} {:>11.0} {:>6} {:>8} {:>8} {:>9}",
            name,
            m.ops,
            m.request_bytes,
            m.reply_bytes,
            m.seconds,
            m.ops_per_s,
            m.err,
            m.results_ok,
            m.results_failed,
            m.children_after
        );
    };
    row("create", &r.create);
    if let Some(d) = &r.delete {
        row("delete", d);
    }
    o
}

pub const CSV: &[&str] = &[
    "target",
    "multi",
    "ops",
    "request_bytes",
    "reply_bytes",
    "err",
    "results_ok",
    "results_failed",
    "seconds",
    "ops_per_s",
    "children_after",
];

pub fn rows(r: &BigMultiResult) -> Vec<Vec<String>> {
    let row = |name: &str, m: &MultiRun| {
        vec![
            r.target.clone(),
            name.to_string(),
            m.ops.to_string(),
            m.request_bytes.to_string(),
            m.reply_bytes.to_string(),
            m.err.to_string(),
            m.results_ok.to_string(),
            m.results_failed.to_string(),
            format!("{:.4}", m.seconds),
            format!("{:.1}", m.ops_per_s),
            m.children_after.to_string(),
        ]
    };
    let mut v = vec![row("create", &r.create)];
    if let Some(d) = &r.delete {
        v.push(row("delete", d));
    }
    v
}
