//! The paper's Figure 5: saturated throughput as the read percentage
//! varies. One point = warm-up, then a measured span, of N sessions with K
//! getData/setData requests in flight each. `sweep` runs the points of one
//! or more targets, alternating targets point by point (compare).

use std::collections::BTreeMap;
use std::time::Duration;

use ringkeeper::proto::codes::err;
use ringkeeper::proto::Request;
use serde::Serialize;

use crate::counters::{CounterCheck, CounterSnapshot};
use crate::engine::{self, znode_path, EngineParams, MEASURE, STOP};
use crate::progress::{self, Progress};
use crate::servercost::{ServerMeter, ServerWindow};
use crate::session::{create_template, on_executor, Session, Template};
use crate::stats::{ClientCost, CostMeter, Percentiles};
use crate::target::Target;

#[derive(Clone, Debug, Serialize)]
pub struct MixParams {
    pub sessions: usize,
    pub outstanding: usize,
    pub znodes: usize,
    pub value_bytes: usize,
    pub warmup_s: f64,
    pub duration_s: f64,
    pub threads: usize,
    pub pin: Vec<usize>,
    pub root: String,
    pub session_timeout_ms: i32,
    /// Offered ops/s in all; None: unpaced.
    pub rate_ops_s: Option<u64>,
}

impl MixParams {
    pub fn engine(&self, t: &Target, read_pct: u32) -> EngineParams {
        EngineParams {
            servers: t.servers.clone(),
            sessions: self.sessions,
            outstanding: self.outstanding,
            threads: self.threads,
            pin: self.pin.clone(),
            session_timeout_ms: self.session_timeout_ms,
            root: self.root.clone(),
            znodes: self.znodes,
            value_bytes: self.value_bytes,
            read_pct,
            rate_ops_s: self.rate_ops_s,
        }
    }
}

/// One measured point.
#[derive(Clone, Debug, Serialize)]
pub struct MixPoint {
    pub target: String,
    pub read_pct: u32,
    /// Requests in flight per session (the depth).
    pub outstanding: usize,
    pub round: usize,
    pub seconds: f64,
    pub reads: u64,
    pub writes: u64,
    pub ops_per_s: f64,
    pub reads_per_s: f64,
    pub writes_per_s: f64,
    pub read_latency_us: Percentiles,
    pub write_latency_us: Percentiles,
    pub errors: BTreeMap<String, u64>,
    pub error_total: u64,
    pub disconnects: u64,
    pub sessions_never_connected: u64,
    pub client: ClientCost,
    /// The server processes' cost over the window (with --server-pid).
    pub server: Option<ServerWindow>,
    pub counters: CounterCheck,
}

/// Creates the root and the znodes the mix reads and writes (idempotent:
/// existing znodes get the configured value size).
pub fn prepare(t: &Target, p: &MixParams) -> Result<(), String> {
    let server = t.servers[0].clone();
    let (root, znodes, value_bytes, timeout) = (
        p.root.clone(),
        p.znodes,
        p.value_bytes,
        p.session_timeout_ms,
    );
    on_executor("lg-setup", move || async move {
        let mut s = Session::connect(&server, timeout)
            .await
            .map_err(|e| format!("connect {server}: {e}"))?;
        let value = vec![b'x'; value_bytes];
        let code = s
            .call(&create_template(&root, b""))
            .await
            .map_err(|e| e.to_string())?;
        if code != 0 && code != err::NODE_EXISTS {
            return Err(format!("create {root}: error {code}"));
        }
        let creates: Vec<Template> = (0..znodes)
            .map(|i| create_template(&znode_path(&root, i), &value))
            .collect();
        let codes = s
            .call_many(&creates, 100)
            .await
            .map_err(|e| e.to_string())?;
        let sets: Vec<Template> = (0..znodes)
            .filter(|&i| codes[i] == err::NODE_EXISTS)
            .map(|i| {
                Template::new(&Request::SetData {
                    path: znode_path(&root, i),
                    data: Some(value.clone().into()),
                    version: -1,
                })
            })
            .collect();
        let set_codes = s.call_many(&sets, 100).await.map_err(|e| e.to_string())?;
        s.close().await;
        if let Some(c) = codes
            .iter()
            .chain(&set_codes)
            .find(|&&c| c != 0 && c != err::NODE_EXISTS)
        {
            return Err(format!("creating the znodes under {root}: error {c}"));
        }
        Ok(())
    })?
}

/// Runs one point: warm-up, measured span, stop (drain and close); with
/// `server_pids`, their cost over the measured span.
pub fn run_point(
    t: &Target,
    p: &MixParams,
    read_pct: u32,
    round: usize,
    server_pids: &[u32],
    progress: &Progress,
) -> Result<MixPoint, String> {
    let counters = CounterSnapshot::take(&t.servers);
    let running = engine::start(&p.engine(t, read_pct))?;
    let warmup = Duration::from_secs_f64(p.warmup_s);
    progress::watch(
        progress,
        &running,
        warmup,
        &progress::phase_label(&t.name, read_pct, 0),
    );
    let server = (!server_pids.is_empty()).then(|| ServerMeter::start(server_pids));
    let meter = CostMeter::start();
    running.set_phase(MEASURE);
    let span = Duration::from_secs_f64(p.duration_s);
    progress::watch(
        progress,
        &running,
        span,
        &progress::phase_label(&t.name, read_pct, MEASURE),
    );
    // The measured span ends here; draining and closing are not measured.
    running.set_phase(STOP);
    let span = meter.stop();
    let server = server.and_then(|m| {
        m.stop()
            .map_err(|e| eprintln!("ringkeeper-loadgen: {}: server cost n/a: {e}", t.name))
            .ok()
    });
    let tally = running.join()?;
    let ops = tally.reads + tally.writes;
    let server = server.map(|w| w.per_op(ops));
    let seconds = span.wall_s;
    let client = span.per_op(ops, p.threads);
    progress.clear();
    let counters = counters.finish(&t.servers);
    Ok(MixPoint {
        target: t.name.clone(),
        read_pct,
        outstanding: p.outstanding,
        round,
        seconds,
        reads: tally.reads,
        writes: tally.writes,
        ops_per_s: ops as f64 / seconds,
        reads_per_s: tally.reads as f64 / seconds,
        writes_per_s: tally.writes as f64 / seconds,
        read_latency_us: Percentiles::of(&tally.read_us),
        write_latency_us: Percentiles::of(&tally.write_us),
        error_total: tally.errors.total(),
        errors: tally.errors.by_name(),
        disconnects: tally.disconnects,
        sessions_never_connected: tally.never_connected,
        client,
        server,
        counters,
    })
}
