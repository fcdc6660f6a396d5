//! ringkeeper-loadgen: the ZooKeeper paper's throughput and latency
//! experiments, against any ZooKeeper-compatible server (raw wire protocol,
//! thread-per-core on glommio, pipelined, allocation-free per request).

mod bigmulti;
mod counters;
mod creates;
mod engine;
mod failover;
mod latency;
mod mix;
mod plot;
mod progress;
mod report;
mod scale;
mod servercost;
mod session;
mod sessions;
mod stats;
mod storm;
mod target;
mod timeline;

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use clap::{Args, Parser, Subcommand};
use serde::Serialize;

use progress::Progress;
use target::Target;

#[global_allocator]
static ALLOC: stats::CountingAlloc = stats::CountingAlloc;

#[derive(Parser)]
#[command(version, about, long_about = None, args_override_self = true)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Saturated throughput as the read percentage varies (paper, Figure 5).
    Mix {
        /// The ensemble: [name=]host:port[,host:port...]; sessions are spread over its servers.
        #[arg(long, default_value = "127.0.0.1:2181")]
        target: String,
        #[command(flatten)]
        sweep: SweepOpts,
        #[command(flatten)]
        mix: MixOpts,
        #[command(flatten)]
        out: OutOpts,
    },
    /// mix against several targets, alternating point by point, with ratios.
    Compare {
        /// name=host:port[,host:port...]; repeat for each target (the first is the ratios' numerator).
        #[arg(long, required = true, num_args = 1)]
        target: Vec<String>,
        #[command(flatten)]
        sweep: SweepOpts,
        #[command(flatten)]
        mix: MixOpts,
        #[command(flatten)]
        out: OutOpts,
    },
    /// W workers, each a synchronous create then an asynchronous delete (paper, Table 2).
    Creates {
        #[arg(long, default_value = "127.0.0.1:2181")]
        target: String,
        /// Worker counts to measure, one point each.
        #[arg(long, value_delimiter = ',', default_value = "1,10,20")]
        workers: Vec<usize>,
        /// Creates per worker (the paper: 50000).
        #[arg(long, default_value_t = 5000)]
        count: usize,
        #[arg(long, default_value_t = 0)]
        value_bytes: usize,
        /// Client executors (threads).
        #[arg(long, default_value_t = 1)]
        threads: usize,
        #[arg(long, default_value = "/rk-loadgen-creates")]
        root: String,
        #[arg(long, default_value_t = 30_000)]
        session_timeout_ms: i32,
        #[command(flatten)]
        out: OutOpts,
    },
    /// zk-smoketest's zk-latencies.py phases, synchronous and asynchronous.
    Latency {
        /// Servers are tested in turn, one session each.
        #[arg(long, default_value = "127.0.0.1:2181")]
        target: String,
        /// znodes per phase (zk-latencies: --znode_count).
        #[arg(long, default_value_t = 10_000)]
        count: usize,
        /// zk-latencies: --znode_size.
        #[arg(long, default_value_t = 25)]
        value_bytes: usize,
        /// sync, async, or both.
        #[arg(long, value_delimiter = ',', default_value = "sync,async")]
        mode: Vec<String>,
        /// Requests in flight in async mode.
        #[arg(long, default_value_t = 1000)]
        window: usize,
        #[arg(long, default_value = "/rk-loadgen-latencies")]
        root: String,
        /// Empty the root first if it exists (zk-latencies: --force).
        #[arg(long)]
        force: bool,
        #[arg(long, default_value_t = 30_000)]
        session_timeout_ms: i32,
        #[command(flatten)]
        out: OutOpts,
    },
    /// Creates the mix's znodes (as mix does first), e.g. after restarting a
    /// server that keeps no data, from a timeline --event.
    Setup {
        #[arg(long, default_value = "127.0.0.1:2181")]
        target: String,
        #[command(flatten)]
        mix: MixOpts,
    },
    /// Throughput every interval at a fixed mix while events run (paper, Figure 8).
    Timeline {
        #[arg(long, default_value = "127.0.0.1:2181")]
        target: String,
        #[arg(long, default_value_t = 80)]
        read_pct: u32,
        #[arg(long, default_value_t = 100)]
        interval_ms: u64,
        /// SECONDS:COMMAND, run with sh -c that many seconds into the run; repeatable.
        #[arg(long = "event")]
        events: Vec<String>,
        #[command(flatten)]
        mix: MixOpts,
        #[command(flatten)]
        out: OutOpts,
    },
    /// Grow a tree with pipelined creates to checkpoints; creates/s per
    /// window between checkpoints (and over each window's last 10%), and the
    /// server's RSS at each checkpoint with --server-pid.
    Scale {
        #[arg(long, default_value = "127.0.0.1:2181")]
        target: String,
        /// Children created, cumulative (k and M suffixes allowed).
        #[arg(long, value_delimiter = ',', default_value = "1k,10k,100k,1M")]
        checkpoints: Vec<String>,
        /// one-parent (every child under ROOT/p0) or spread (round robin over --parents).
        #[arg(long, default_value = "one-parent")]
        layout: String,
        /// Parents for --layout spread.
        #[arg(long, default_value_t = 100)]
        parents: usize,
        #[arg(long, default_value_t = 8)]
        sessions: usize,
        /// Creates in flight per session.
        #[arg(long, default_value_t = 100)]
        outstanding: usize,
        #[arg(long, default_value_t = 100)]
        value_bytes: usize,
        /// Client executors (threads).
        #[arg(long, default_value_t = 1)]
        threads: usize,
        /// Must not exist yet.
        #[arg(long, default_value = "/rk-scale")]
        root: String,
        /// No create is sent after this many seconds (the run then reports
        /// the windows it reached).
        #[arg(long, default_value_t = 1800.0)]
        max_seconds: f64,
        /// The server's pid: report its VmRSS and VmHWM at each checkpoint.
        #[arg(long)]
        server_pid: Option<u32>,
        /// The "at size" rate is over each window's last 10%, but at least
        /// this many creates (default: 4 x sessions x outstanding, several
        /// group commits' worth of replies); 0: exactly 10%.
        #[arg(long)]
        tail_min: Option<u64>,
        /// Create and delete this many znodes (one session, pipelined) before
        /// the measured load: the first window then does not measure the
        /// server's cold start.
        #[arg(long, default_value_t = 0)]
        warmup: usize,
        /// At each checkpoint, pause the growth and run this many probe
        /// rounds: each times --probe-creates creates of the children the
        /// growth would add next, then deletes them (untimed), so the tree
        /// stays at the checkpoint's size; the median round is the rate at
        /// that size. 0: no probe.
        #[arg(long, default_value_t = 0)]
        probe_rounds: usize,
        #[arg(long, default_value_t = 10_000)]
        probe_creates: u64,
        #[arg(long, default_value_t = 30_000)]
        session_timeout_ms: i32,
        #[command(flatten)]
        out: OutOpts,
    },
    /// One multi of N creates under a fresh parent (send to reply), then
    /// one multi deleting them. Needs jute.maxbuffer above the request size.
    Bigmulti {
        #[arg(long, default_value = "127.0.0.1:2181")]
        target: String,
        #[arg(long, default_value_t = 100_000)]
        ops: usize,
        #[arg(long, default_value_t = 10)]
        value_bytes: usize,
        /// Must not exist yet; removed at the end unless --keep.
        #[arg(long, default_value = "/rk-bigmulti")]
        root: String,
        /// Keep the znodes (no delete multi).
        #[arg(long)]
        keep: bool,
        /// Bound on the whole experiment.
        #[arg(long, default_value_t = 600.0)]
        timeout_s: f64,
        #[arg(long, default_value_t = 30_000)]
        session_timeout_ms: i32,
        #[command(flatten)]
        out: OutOpts,
    },
    /// The write outage across an event (e.g. kill -9 of the leader): synchronous setData writers, the longest pause between acknowledged writes
    Failover {
        /// The servers the writers use (e.g. the followers): host:port[,host:port...]
        #[arg(long, default_value = "127.0.0.1:2181")]
        target: String,
        #[arg(long, default_value_t = 4)]
        writers: usize,
        /// Shell command run this many seconds into the run: SECONDS:COMMAND
        #[arg(long)]
        event: String,
        /// The whole run, in seconds.
        #[arg(long, default_value_t = 8.0)]
        duration_s: f64,
        /// A request (or connect) without an answer this long counts as failed.
        #[arg(long, default_value_t = 2_000)]
        request_timeout_ms: u64,
        /// Pause before trying the next server after a failed connect.
        #[arg(long, default_value_t = 5)]
        retry_ms: u64,
        #[arg(long, default_value_t = 100)]
        value_bytes: usize,
        #[arg(long, default_value = "/rk-failover")]
        root: String,
        #[arg(long, default_value_t = 4_000)]
        session_timeout_ms: i32,
        #[command(flatten)]
        out: OutOpts,
    },
    /// A reconnect storm: N sessions held on an ensemble's members (tcp+tls://
    /// for TLS), an event (e.g. kill -9 of the leader) breaks some, each
    /// reconnects at once with its session id; prints how many the event
    /// broke and how many were kept, expired or failed, and reconnect times
    Storm {
        /// The members: host:port[,host:port...] (each may be tcp+tls://)
        #[arg(long)]
        target: String,
        #[arg(long, default_value_t = 10_000)]
        sessions: usize,
        #[arg(long, default_value_t = 64)]
        concurrency: usize,
        #[arg(long, default_value_t = 30_000)]
        session_timeout_ms: i32,
        /// Shell command run once every session is established
        #[arg(long)]
        event: String,
        /// Seconds between the last session established and the event
        #[arg(long, default_value_t = 2.0)]
        event_delay_s: f64,
        /// Seconds after the event that broken sessions may take to return
        #[arg(long, default_value_t = 30.0)]
        wait_s: f64,
        #[arg(long, default_value_t = 5_000)]
        request_timeout_ms: u64,
        #[command(flatten)]
        out: OutOpts,
    },
    /// Session establishment rate: N sessions, C at a time; mode create
    /// (then drop the TCP connection) and create-close (closeSession first).
    /// Prints sessions/s per mode (and the server's CPU per session with
    /// --server-pid)
    Sessions {
        #[arg(long, default_value = "127.0.0.1:2181")]
        target: String,
        #[arg(long, default_value_t = 10_000)]
        count: usize,
        #[arg(long, default_value_t = 32)]
        concurrency: usize,
        /// create, create-close, or both (in that order by default: the
        /// sessions of create then expire while create-close runs).
        #[arg(long, value_delimiter = ',', default_value = "create-close,create")]
        mode: Vec<String>,
        #[arg(long, default_value_t = 1)]
        threads: usize,
        /// Requested timeout of each session (ZooKeeper grants at least 2 ticks).
        #[arg(long, default_value_t = 4_000)]
        session_timeout_ms: i32,
        /// Per mode: no new session is started after this many seconds.
        #[arg(long, default_value_t = 600.0)]
        max_seconds: f64,
        /// The server's pid: report its CPU time per session.
        #[arg(long)]
        server_pid: Option<u32>,
        #[command(flatten)]
        out: OutOpts,
    },
}

#[derive(Args, Clone)]
struct SweepOpts {
    /// Read percentages to measure, one point each.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "0,10,20,30,40,50,60,70,80,90,100"
    )]
    reads: Vec<u32>,
    /// Repeat the sweep; each point reports the round with the median ops/s.
    #[arg(long, default_value_t = 1)]
    rounds: usize,
    /// The target's server process: over each measured window, report its
    /// CPU us, syscalls, io_uring_enter calls and context switches per op.
    /// PID or NAME=PID (compare: NAME=PID); repeat or give a comma list
    /// for an ensemble's processes (their sums are reported). Syscalls are
    /// counted with perf tracepoints (root or CAP_PERFMON), which adds a
    /// little to every syscall's cost while the window runs.
    #[arg(long, value_delimiter = ',')]
    server_pid: Vec<String>,
}

#[derive(Args, Clone)]
struct MixOpts {
    /// Client sessions (the paper: 250; Apache ZooKeeper allows 60 per client
    /// address unless maxClientCnxns is raised).
    #[arg(long, default_value_t = 50)]
    sessions: usize,
    /// Requests in flight per session (the paper: 100). mix and compare
    /// take a comma list: one point per (outstanding, reads) pair. Given
    /// twice, the last one counts.
    #[arg(long, value_delimiter = ',', default_value = "100", action = clap::ArgAction::Set)]
    outstanding: Vec<usize>,
    /// znodes the mix reads and writes.
    #[arg(long, default_value_t = 100)]
    znodes: usize,
    /// Bytes per setData (and per znode); the paper: 1 KiB.
    #[arg(long, default_value_t = 1024)]
    value_bytes: usize,
    #[arg(long, default_value_t = 2.0)]
    warmup_s: f64,
    /// Measured seconds per point (timeline: the whole run).
    #[arg(long, default_value_t = 10.0)]
    duration_s: f64,
    /// Client executors (threads), one per core.
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// CPUs to pin the executors to (comma list); default: unpinned.
    #[arg(long, value_delimiter = ',')]
    pin: Vec<usize>,
    /// Parent znode of the mix's znodes.
    #[arg(long, default_value = "/rk-loadgen")]
    root: String,
    #[arg(long, default_value_t = 30_000)]
    session_timeout_ms: i32,
    /// Offered load: pace the sessions to this many ops/s in all (each
    /// session its share), so that servers are compared at one load rather
    /// than each at its own saturation. Default: unpaced (every session keeps
    /// --outstanding requests in flight).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    rate_ops_s: Option<u64>,
}

impl MixOpts {
    fn params(&self) -> mix::MixParams {
        mix::MixParams {
            sessions: self.sessions.max(1),
            outstanding: self.outstanding.first().copied().unwrap_or(100).max(1),
            znodes: self.znodes.max(1),
            value_bytes: self.value_bytes,
            warmup_s: self.warmup_s.max(0.0),
            duration_s: self.duration_s.max(0.1),
            threads: self.threads.max(1),
            pin: self.pin.clone(),
            root: self.root.clone(),
            session_timeout_ms: self.session_timeout_ms,
            rate_ops_s: self.rate_ops_s,
        }
    }

    /// The depths a sweep measures, in the order given.
    fn depths(&self) -> Vec<usize> {
        let mut v: Vec<usize> = Vec::new();
        for d in self.outstanding.iter().map(|&d| d.max(1)) {
            if !v.contains(&d) {
                v.push(d);
            }
        }
        if v.is_empty() {
            v.push(100);
        }
        v
    }

    fn one_depth(&self, experiment: &str) -> Result<(), String> {
        match self.depths().len() {
            1 => Ok(()),
            _ => Err(format!("{experiment} takes one --outstanding value")),
        }
    }
}

#[derive(Args, Clone)]
struct OutOpts {
    /// Write every measured value as JSON.
    #[arg(long)]
    json: Option<String>,
    /// Write one row per point as CSV.
    #[arg(long)]
    csv: Option<String>,
    /// Draw the experiment's figure as SVG.
    #[arg(long)]
    plot: Option<String>,
    /// No live progress (it is shown only on a terminal anyway).
    #[arg(long, short)]
    quiet: bool,
}

fn main() {
    let cli = Cli::parse();
    if let Err(e) = run(cli.cmd) {
        eprintln!("ringkeeper-loadgen: {e}");
        std::process::exit(1);
    }
}

fn parse_target(spec: &str) -> Result<Target, String> {
    Target::parse(spec)
}

fn run(cmd: Cmd) -> Result<(), String> {
    match cmd {
        Cmd::Mix {
            target,
            sweep,
            mix,
            out,
        } => {
            let t = parse_target(&target)?;
            run_sweep("mix", &[t], &sweep, &mix, &out)
        }
        Cmd::Compare {
            target,
            sweep,
            mix,
            out,
        } => {
            let ts = target
                .iter()
                .map(|s| parse_target(s))
                .collect::<Result<Vec<_>, _>>()?;
            if ts.len() < 2 {
                return Err("compare needs at least two --target".into());
            }
            run_sweep("compare", &ts, &sweep, &mix, &out)
        }
        Cmd::Creates {
            target,
            workers,
            count,
            value_bytes,
            threads,
            root,
            session_timeout_ms,
            out,
        } => {
            let t = parse_target(&target)?;
            let p = creates::CreatesParams {
                workers,
                count,
                value_bytes,
                threads: threads.max(1),
                root,
                session_timeout_ms,
            };
            let progress = Progress::new(out.quiet);
            progress.status(&format!(
                "[{} creates] running {:?} workers",
                t.name, p.workers
            ));
            let points = creates::run(&t, &p)?;
            progress.clear();
            print!("{}", report::creates_table(&points));
            outputs(
                &out,
                "creates",
                &[t],
                &p,
                &points,
                |path| report::write_csv(path, report::CREATES_CSV, &report::creates_rows(&points)),
                |path| plot::creates(path, &points),
            )
        }
        Cmd::Scale {
            target,
            checkpoints,
            layout,
            parents,
            sessions,
            outstanding,
            value_bytes,
            threads,
            root,
            max_seconds,
            server_pid,
            tail_min,
            warmup,
            probe_rounds,
            probe_creates,
            session_timeout_ms,
            out,
        } => {
            let t = parse_target(&target)?;
            let parents = match layout.as_str() {
                "one-parent" => 1,
                "spread" => parents.max(1),
                l => return Err(format!("--layout {l}: want one-parent or spread")),
            };
            let checkpoints = checkpoints
                .iter()
                .map(|c| parse_count(c))
                .collect::<Result<Vec<_>, _>>()?;
            let p = scale::ScaleParams {
                layout,
                parents,
                checkpoints,
                sessions: sessions.max(1),
                outstanding: outstanding.max(1),
                value_bytes,
                threads: threads.max(1),
                root,
                max_seconds,
                server_pid,
                session_timeout_ms,
                tail_min: tail_min.unwrap_or(4 * (sessions.max(1) * outstanding.max(1)) as u64),
                warmup,
                probe_rounds,
                probe_creates: probe_creates.max(1),
                quiet: out.quiet,
            };
            no_plot(&out, "scale")?;
            let progress = Progress::new(out.quiet);
            progress.status(&format!(
                "[{} scale] growing to {:?} children",
                t.name, p.checkpoints
            ));
            let r = scale::run(&t, &p, &progress)?;
            print!("{}", scale::table(&r, &p));
            outputs(
                &out,
                "scale",
                &[t],
                &p,
                &r,
                |path| report::write_csv(path, scale::CSV, &scale::rows(&r)),
                |_| Ok(()),
            )
        }
        Cmd::Bigmulti {
            target,
            ops,
            value_bytes,
            root,
            keep,
            timeout_s,
            session_timeout_ms,
            out,
        } => {
            let t = parse_target(&target)?;
            let p = bigmulti::BigMultiParams {
                ops: ops.max(1),
                value_bytes,
                root,
                keep,
                timeout_s,
                session_timeout_ms,
            };
            no_plot(&out, "bigmulti")?;
            let r = bigmulti::run(&t, &p)?;
            print!("{}", bigmulti::table(&r));
            outputs(
                &out,
                "bigmulti",
                &[t],
                &p,
                &r,
                |path| report::write_csv(path, bigmulti::CSV, &bigmulti::rows(&r)),
                |_| Ok(()),
            )
        }
        Cmd::Failover {
            target,
            writers,
            event,
            duration_s,
            request_timeout_ms,
            retry_ms,
            value_bytes,
            root,
            session_timeout_ms,
            out,
        } => {
            let t = parse_target(&target)?;
            let (at, command) = event
                .split_once(':')
                .and_then(|(s, c)| Some((s.trim().parse::<f64>().ok()?, c.to_string())))
                .ok_or_else(|| format!("bad --event {event:?}: want SECONDS:COMMAND"))?;
            let p = failover::FailoverParams {
                writers: writers.max(1),
                event_at_s: at,
                event: command,
                duration_s,
                request_timeout_ms,
                retry_ms,
                value_bytes,
                root,
                session_timeout_ms,
            };
            no_plot(&out, "failover")?;
            let r = failover::run(&t, &p)?;
            print!("{}", failover::table(&t, &r));
            let rows = vec![failover::row(&t, &r)];
            outputs(
                &out,
                "failover",
                &[t],
                &p,
                &r,
                |path| report::write_csv(path, failover::CSV, &rows),
                |_| Ok(()),
            )
        }
        Cmd::Storm {
            target,
            sessions,
            concurrency,
            session_timeout_ms,
            event,
            event_delay_s,
            wait_s,
            request_timeout_ms,
            out,
        } => {
            let t = parse_target(&target)?;
            let p = storm::StormParams {
                sessions,
                concurrency: concurrency.max(1),
                session_timeout_ms,
                event,
                event_delay_s,
                wait_s,
                request_timeout_ms,
            };
            no_plot(&out, "storm")?;
            let r = storm::run(&t, &p)?;
            print!("{}", storm::table(&t, &r));
            let rows = vec![storm::row(&t, &r)];
            outputs(
                &out,
                "storm",
                &[t],
                &p,
                &r,
                |path| report::write_csv(path, storm::CSV, &rows),
                |_| Ok(()),
            )
        }
        Cmd::Sessions {
            target,
            count,
            concurrency,
            mode,
            threads,
            session_timeout_ms,
            max_seconds,
            server_pid,
            out,
        } => {
            let t = parse_target(&target)?;
            let p = sessions::SessionsParams {
                server_pid,
                count,
                concurrency: concurrency.max(1),
                modes: mode,
                threads: threads.max(1),
                session_timeout_ms,
                max_seconds,
            };
            no_plot(&out, "sessions")?;
            let points = sessions::run(&t, &p)?;
            print!("{}", sessions::table(&points, &p));
            outputs(
                &out,
                "sessions",
                &[t],
                &p,
                &points,
                |path| report::write_csv(path, sessions::CSV, &sessions::rows(&points)),
                |_| Ok(()),
            )
        }
        Cmd::Latency {
            target,
            count,
            value_bytes,
            mode,
            window,
            root,
            force,
            session_timeout_ms,
            out,
        } => {
            let t = parse_target(&target)?;
            for m in &mode {
                if m != "sync" && m != "async" {
                    return Err(format!("--mode {m}: want sync or async"));
                }
            }
            let p = latency::LatencyParams {
                count: count.max(1),
                value_bytes,
                modes: mode,
                window,
                root,
                force,
                session_timeout_ms,
            };
            let progress = Progress::new(out.quiet);
            progress.status(&format!(
                "[{} latency] {} znodes per phase",
                t.name, p.count
            ));
            let runs = vec![latency::run(&t, &p)?];
            progress.clear();
            print!("{}", report::latency_table(&runs));
            outputs(
                &out,
                "latency",
                &[t],
                &p,
                &runs,
                |path| report::write_csv(path, report::LATENCY_CSV, &report::latency_rows(&runs)),
                |path| plot::latency(path, &runs),
            )
        }
        Cmd::Setup { target, mix } => {
            let t = parse_target(&target)?;
            let p = mix.params();
            mix::prepare(&t, &p)?;
            println!(
                "{}: {} znodes of {} bytes under {}",
                t.name, p.znodes, p.value_bytes, p.root
            );
            Ok(())
        }
        Cmd::Timeline {
            target,
            read_pct,
            interval_ms,
            events,
            mix,
            out,
        } => {
            let t = parse_target(&target)?;
            mix.one_depth("timeline")?;
            let events = events
                .iter()
                .map(|s| timeline::Event::parse(s))
                .collect::<Result<Vec<_>, _>>()?;
            let p = mix.params();
            mix::prepare(&t, &p)?;
            let progress = Progress::new(out.quiet);
            let tl = timeline::run(
                &t,
                &p,
                read_pct.min(100),
                Duration::from_millis(interval_ms.max(1)),
                &events,
                &progress,
            )?;
            print!("{}", report::timeline_summary(&tl));
            #[derive(Serialize)]
            struct TimelineParams<'a> {
                mix: &'a mix::MixParams,
                read_pct: u32,
                interval_ms: u64,
                events: &'a [timeline::Event],
            }
            let params = TimelineParams {
                mix: &p,
                read_pct,
                interval_ms,
                events: &events,
            };
            outputs(
                &out,
                "timeline",
                &[t],
                &params,
                &tl,
                |path| report::write_csv(path, report::TIMELINE_CSV, &report::timeline_rows(&tl)),
                |path| plot::timeline(path, &tl),
            )
        }
    }
}

/// 1000, 10k, 1M, 5m.
fn parse_count(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let (num, mul) = match s.chars().last() {
        Some('k' | 'K') => (&s[..s.len() - 1], 1_000),
        Some('m' | 'M') => (&s[..s.len() - 1], 1_000_000),
        _ => (s, 1),
    };
    num.parse::<u64>()
        .map(|n| n * mul)
        .map_err(|_| format!("{s:?} is not a count (e.g. 5000, 10k, 1M)"))
}

fn no_plot(out: &OutOpts, experiment: &str) -> Result<(), String> {
    match out.plot {
        Some(_) => Err(format!("{experiment} has no --plot (use --json or --csv)")),
        None => Ok(()),
    }
}

fn run_sweep(
    name: &str,
    targets: &[Target],
    sweep: &SweepOpts,
    opts: &MixOpts,
    out: &OutOpts,
) -> Result<(), String> {
    let p = opts.params();
    let depths = opts.depths();
    let pids = servercost::pids_by_target(&sweep.server_pid, targets)?;
    let progress = Progress::new(out.quiet);
    for t in targets {
        mix::prepare(t, &p).map_err(|e| format!("{}: setup: {e}", t.name))?;
    }
    let mut points = Vec::new();
    for round in 0..sweep.rounds.max(1) {
        let mut i = 0;
        for &depth in &depths {
            let p = mix::MixParams {
                outstanding: depth,
                ..p.clone()
            };
            for &pct in &sweep.reads {
                // Alternate the order point by point so that drift in the
                // machine's load does not favour one target.
                let mut order: Vec<usize> = (0..targets.len()).collect();
                if (i + round) % 2 == 1 {
                    order.reverse();
                }
                i += 1;
                for ti in order {
                    let t = &targets[ti];
                    let pt = mix::run_point(t, &p, pct.min(100), round, &pids[ti], &progress)?;
                    progress.note(&report::point_line(&pt, depths.len() > 1));
                    points.push(pt);
                }
            }
        }
    }
    print!("{}", report::mix_table(&points));
    if targets.len() > 1 {
        let names: Vec<String> = targets.iter().map(|t| t.name.clone()).collect();
        print!("\n{}", report::compare_table(&points, &names));
    }
    #[derive(Serialize)]
    struct SweepResults<'a> {
        points: &'a [mix::MixPoint],
        medians: Vec<mix::MixPoint>,
    }
    #[derive(Serialize)]
    struct SweepParams<'a> {
        mix: &'a mix::MixParams,
        reads: &'a [u32],
        rounds: usize,
        /// Every depth measured (mix.outstanding is the first).
        outstanding_sweep: &'a [usize],
        server_pids: BTreeMap<&'a str, &'a [u32]>,
    }
    let results = SweepResults {
        points: &points,
        medians: report::medians(&points),
    };
    let params = SweepParams {
        mix: &p,
        reads: &sweep.reads,
        rounds: sweep.rounds.max(1),
        outstanding_sweep: &depths,
        server_pids: targets
            .iter()
            .zip(&pids)
            .filter(|(_, p)| !p.is_empty())
            .map(|(t, p)| (t.name.as_str(), p.as_slice()))
            .collect(),
    };
    let depth_list: Vec<String> = depths.iter().map(|d| d.to_string()).collect();
    let title = format!(
        "saturated throughput: {} sessions x {} outstanding, {} B values",
        p.sessions,
        depth_list.join("/"),
        p.value_bytes
    );
    outputs(
        out,
        name,
        targets,
        &params,
        &results,
        |path| report::write_csv(path, report::MIX_CSV, &report::mix_rows(&points)),
        |path| plot::mix(path, &results.medians, &title),
    )
}

/// Writes whichever of --json, --csv and --plot were asked for.
fn outputs<P: Serialize, R: Serialize>(
    out: &OutOpts,
    experiment: &str,
    targets: &[Target],
    params: &P,
    results: &R,
    csv: impl FnOnce(&str) -> Result<(), String>,
    svg: impl FnOnce(&str) -> Result<(), String>,
) -> Result<(), String> {
    if let Some(path) = &out.json {
        let file = report::RunFile {
            experiment,
            loadgen_version: env!("CARGO_PKG_VERSION"),
            started_unix_s: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0),
            targets,
            params,
            results,
        };
        report::write_json(path, &file)?;
    }
    if let Some(path) = &out.csv {
        csv(path)?;
    }
    if let Some(path) = &out.plot {
        svg(path)?;
    }
    Ok(())
}
