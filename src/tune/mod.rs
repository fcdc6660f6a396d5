//! `ringkeeper tune check` and `ringkeeper tune suggest` (issue 29 §3):
//! what this host offers the server, and the zoo.cfg values that follow.
//!
//! `check` runs one check per submodule, each saying what it found, why
//! that matters to ringkeeper and how to fix it, with a status: `ok`,
//! `warn` (works, but costs latency or throughput, or risks it), `fail`
//! (the server cannot run as configured, or acknowledged writes are not
//! durable) or `unknown` (the kernel does not show it: a missing /proc or
//! /sys file is never an error, so the checks run in containers and
//! chroots). The exit status is 1 when any check fails, 0 otherwise.
//!
//! `suggest` measures what the values depend on (CPUs and their NIC
//! interrupts, fdatasync latency on dataLogDir, O_DIRECT) and prints a
//! zoo.cfg fragment, each value with its reason; `--sweep` also runs the
//! group-commit sweep of `tuning/fsync-sweep.sh` with the load generator.

mod clock;
mod cpufreq;
pub mod cpus;
mod device;
mod fsync;
mod json;
mod limits;
mod logdir;
pub mod mountinfo;
mod odirect;
mod suggest;
mod swap;
mod sweep;
mod thp;
mod uring;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::config::{Config, ConsensusExecutor};

pub use fsync::percentile;

/// `ringkeeper tune ...`
#[derive(clap::Subcommand, Debug)]
pub enum TuneCommand {
    /// Check this host for ringkeeper: io_uring, memlock and descriptor
    /// limits, CPU frequency scaling, transparent huge pages, the CPU and
    /// NIC interrupt layout for pinning, swap, the clock source, and on
    /// dataLogDir the filesystem, O_DIRECT, the device's write cache and
    /// FUA, and measured fdatasync latency. Exits 1 when a check fails.
    Check {
        /// The server's zoo.cfg (dataDir/dataLogDir, shards, pinning,
        /// connection limits); without it the embedded default (./data).
        #[arg(long, short)]
        config: Option<PathBuf>,
        /// Check this directory instead of the config's dataLogDir.
        #[arg(long)]
        data_log_dir: Option<PathBuf>,
        /// One JSON object: {"checks": [{name, status, found, why, fix, values}], ...}.
        #[arg(long)]
        json: bool,
        /// Most fdatasyncs to time (stops after 2 s in any case).
        #[arg(long, default_value_t = fsync::MAX_SYNCS)]
        syncs: usize,
        /// Read /proc and /sys under this directory (tests).
        #[arg(long, hide = true)]
        sys_root: Option<PathBuf>,
    },
    /// Print a zoo.cfg fragment for this host (ringkeeper.pinCores,
    /// ringkeeper.shards, the fsync batching keys), each value with its
    /// reason, from the CPU layout and fdatasync latency measured here.
    Suggest {
        /// The server's zoo.cfg: its dataLogDir is where fdatasync is timed.
        #[arg(long, short)]
        config: Option<PathBuf>,
        /// Time fdatasync in this directory instead of the config's dataLogDir.
        #[arg(long)]
        data_log_dir: Option<PathBuf>,
        /// One JSON object instead of the fragment.
        #[arg(long)]
        json: bool,
        /// Also run the group-commit sweep (tuning/fsync-sweep.sh): a server
        /// on a free loopback port per batch setting, 100% setData from
        /// ringkeeper-loadgen, and choose the setting with the best
        /// throughput (p99 breaks near-ties).
        #[arg(long)]
        sweep: bool,
        /// Measured seconds per sweep setting (after a warm-up of up to 2 s).
        #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..=120))]
        sweep_seconds: u64,
        /// Rounds over all sweep settings, alternating (each reports its
        /// median round): more rounds for a noisy host.
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=9))]
        sweep_rounds: u32,
        /// The load generator (default: ringkeeper-loadgen beside this
        /// binary, then on PATH).
        #[arg(long)]
        loadgen: Option<PathBuf>,
        /// Read /proc and /sys under this directory (tests).
        #[arg(long, hide = true)]
        sys_root: Option<PathBuf>,
    },
}

/// A check's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Status {
    Ok,
    /// The kernel does not show it (no such /proc or /sys file).
    Unknown,
    Warn,
    Fail,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Unknown => "unknown",
            Status::Warn => "warn",
            Status::Fail => "fail",
        }
    }
}

/// A measured value, for tools reading `--json`.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Int(i64),
    Num(f64),
    Text(String),
}

/// One check's result.
#[derive(Debug, Clone)]
pub struct Check {
    /// Stable, machine-readable name (`fdatasync_latency`).
    pub name: &'static str,
    /// What a person reads as the block's heading.
    pub title: &'static str,
    pub status: Status,
    /// What the check saw on this host.
    pub found: String,
    /// Why it matters to ringkeeper.
    pub why: String,
    /// What to do (empty when nothing is to be done).
    pub fix: String,
    pub values: Vec<(&'static str, Value)>,
}

impl Check {
    fn new(name: &'static str, title: &'static str) -> Check {
        Check {
            name,
            title,
            status: Status::Ok,
            found: String::new(),
            why: String::new(),
            fix: String::new(),
            values: Vec::new(),
        }
    }

    fn status(mut self, status: Status) -> Check {
        self.status = status;
        self
    }

    fn found(mut self, found: impl Into<String>) -> Check {
        self.found = found.into();
        self
    }

    fn why(mut self, why: impl Into<String>) -> Check {
        self.why = why.into();
        self
    }

    fn fix(mut self, fix: impl Into<String>) -> Check {
        self.fix = fix.into();
        self
    }

    fn value(mut self, key: &'static str, v: Value) -> Check {
        self.values.push((key, v));
        self
    }
}

/// Where /proc and /sys are read: `/` on a host, a fake tree in tests.
/// Every read is optional: a file the kernel (or a container) does not
/// have is `None`, never an error.
#[derive(Debug, Clone)]
pub struct Host {
    root: PathBuf,
}

impl Host {
    pub fn new(root: Option<PathBuf>) -> Host {
        Host {
            root: root.unwrap_or_else(|| PathBuf::from("/")),
        }
    }

    /// Whether this is the running system (not a tree under --sys-root):
    /// only then do this process's own properties (its CPU affinity)
    /// belong with what /proc and /sys say.
    pub fn is_real(&self) -> bool {
        self.root == Path::new("/")
    }

    /// `abs` (an absolute path such as `/proc/swaps`) under the root.
    pub fn path(&self, abs: &str) -> PathBuf {
        self.root.join(abs.trim_start_matches('/'))
    }

    /// The file's text, trimmed; None when it cannot be read.
    pub fn read(&self, abs: &str) -> Option<String> {
        read_trimmed(&self.path(abs))
    }

    /// The kernel's release (`6.18.44-...`): uname on the running system
    /// (no /proc needed, as in a chroot), else the tree's osrelease.
    pub fn kernel_release(&self) -> Option<String> {
        if !self.is_real() {
            return self.read("/proc/sys/kernel/osrelease");
        }
        // SAFETY: uname fills the struct it is given with NUL-terminated fields.
        let mut u: libc::utsname = unsafe { std::mem::zeroed() };
        if unsafe { libc::uname(&mut u) } != 0 {
            return None;
        }
        // SAFETY: release is NUL-terminated within the struct.
        let release = unsafe { std::ffi::CStr::from_ptr(u.release.as_ptr()) };
        Some(release.to_string_lossy().into_owned())
    }
}

fn read_trimmed(path: &Path) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_string())
}

/// What the checks know about the server they check for.
pub struct Context {
    pub host: Host,
    pub config: Config,
    /// The config file, or "the embedded default".
    pub config_source: String,
    pub log_dir: PathBuf,
    /// Shard executors the server would start.
    pub shards: usize,
    /// Where its consensus core would run.
    pub layout: ConsensusExecutor,
    /// Most fdatasyncs to time.
    pub max_syncs: usize,
    /// At most this long timing them.
    pub max_sync_time: Duration,
}

impl Context {
    fn new(
        config: Option<PathBuf>,
        data_log_dir: Option<PathBuf>,
        sys_root: Option<PathBuf>,
        max_syncs: usize,
    ) -> Result<Context, String> {
        let (config, config_source) = match &config {
            Some(path) => (
                Config::load(path).map_err(|e| e.to_string())?,
                path.display().to_string(),
            ),
            None => (
                Config::embedded_default(),
                "the embedded default (no --config)".to_string(),
            ),
        };
        let log_dir = data_log_dir.unwrap_or_else(|| config.data_log_dir.clone());
        // As the server decides them (src/server.rs).
        let shards = config
            .shard_count
            .unwrap_or_else(crate::server::default_shard_count);
        let layout = config
            .consensus_executor
            .resolve(shards, &config.cpu_pinning);
        Ok(Context {
            host: Host::new(sys_root),
            config,
            config_source,
            log_dir,
            shards,
            layout,
            max_syncs: max_syncs.clamp(1, fsync::MAX_SYNCS),
            max_sync_time: fsync::MAX_TIME,
        })
    }

    /// glommio executors the server starts: one per shard, plus the
    /// consensus core's own unless it shares shard 0's.
    pub fn executors(&self) -> usize {
        self.shards + usize::from(self.layout == ConsensusExecutor::Own)
    }
}

/// Everything `check` runs, in the order it prints them.
pub fn run_checks(ctx: &Context) -> Vec<Check> {
    let mut checks = vec![
        uring::check(ctx),
        limits::memlock(ctx),
        limits::nofile(ctx),
        cpufreq::check(ctx),
        thp::check(ctx),
        cpus::check(ctx),
        swap::check(ctx),
        clock::check(ctx),
    ];
    let dir = logdir::usable(ctx);
    let usable = dir.status != Status::Fail;
    checks.push(dir);
    checks.push(logdir::filesystem(ctx));
    if usable {
        checks.push(odirect::check(ctx));
    } else {
        checks.push(not_measured(odirect::NAME, odirect::TITLE, ctx));
    }
    checks.push(device::check(ctx));
    if usable {
        checks.push(fsync::check(ctx));
    } else {
        checks.push(not_measured(fsync::NAME, fsync::TITLE, ctx));
    }
    checks
}

fn not_measured(name: &'static str, title: &'static str, ctx: &Context) -> Check {
    Check::new(name, title)
        .status(Status::Unknown)
        .found(format!(
            "not measured: dataLogDir {} is not usable (see data_log_dir)",
            ctx.log_dir.display()
        ))
        .why("measured with a temporary file in dataLogDir")
        .fix("make dataLogDir usable, then check again")
}

/// Runs a `tune` command, writing its report to `out`; the exit status.
pub fn run(cmd: TuneCommand, out: &mut dyn Write) -> Result<i32, String> {
    let code = match cmd {
        TuneCommand::Check {
            config,
            data_log_dir,
            json,
            syncs,
            sys_root,
        } => {
            let ctx = Context::new(config, data_log_dir, sys_root, syncs)?;
            let checks = run_checks(&ctx);
            let failed = checks.iter().any(|c| c.status == Status::Fail);
            if json {
                json::write_checks(&ctx, &checks, out)
            } else {
                write_human(&ctx, &checks, out)
            }
            .map_err(|e| format!("writing the report: {e}"))?;
            i32::from(failed)
        }
        TuneCommand::Suggest {
            config,
            data_log_dir,
            json,
            sweep,
            sweep_seconds,
            sweep_rounds,
            loadgen,
            sys_root,
        } => {
            let ctx = Context::new(config, data_log_dir, sys_root, fsync::MAX_SYNCS)?;
            let sweep = if sweep {
                Some(sweep::Options {
                    seconds: sweep_seconds,
                    rounds: sweep_rounds,
                    loadgen,
                })
            } else {
                None
            };
            let s = suggest::suggest(&ctx, sweep.as_ref())?;
            if json {
                suggest::write_json(&s, out)
            } else {
                suggest::write_fragment(&s, out)
            }
            .map_err(|e| format!("writing the suggestion: {e}"))?;
            0
        }
    };
    out.flush()
        .map_err(|e| format!("writing the report: {e}"))?;
    Ok(code)
}

/// One block per check: a heading with its status, then found/why/fix.
fn write_human(ctx: &Context, checks: &[Check], out: &mut dyn Write) -> std::io::Result<()> {
    writeln!(
        out,
        "ringkeeper tune check: config {}, dataLogDir {}, {} shard(s)",
        ctx.config_source,
        ctx.log_dir.display(),
        ctx.shards
    )?;
    for c in checks {
        writeln!(out)?;
        writeln!(out, "[{:<7}] {} ({})", c.status.as_str(), c.title, c.name)?;
        write_field(out, "found", &c.found)?;
        write_field(out, "why", &c.why)?;
        if !c.fix.is_empty() {
            write_field(out, "fix", &c.fix)?;
        }
    }
    let count = |s: Status| checks.iter().filter(|c| c.status == s).count();
    writeln!(out)?;
    writeln!(
        out,
        "{} ok, {} warn, {} fail, {} unknown",
        count(Status::Ok),
        count(Status::Warn),
        count(Status::Fail),
        count(Status::Unknown)
    )
}

fn write_field(out: &mut dyn Write, label: &str, text: &str) -> std::io::Result<()> {
    let mut first = true;
    for line in text.lines() {
        if first {
            writeln!(out, "  {label:<6} {line}")?;
            first = false;
        } else {
            writeln!(out, "         {line}")?;
        }
    }
    Ok(())
}

/// "12.3 MiB" etc.
fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{n} B")
    } else if v.fract() == 0.0 {
        format!("{v:.0} {}", UNITS[u])
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_are_readable() {
        assert_eq!(bytes(512), "512 B");
        assert_eq!(bytes(8 << 20), "8 MiB");
        assert_eq!(bytes(1536), "1.5 KiB");
    }

    #[test]
    fn a_missing_file_is_none() {
        let dir = tempfile::tempdir().unwrap();
        let host = Host::new(Some(dir.path().to_path_buf()));
        assert_eq!(host.read("/proc/swaps"), None);
        std::fs::create_dir_all(dir.path().join("proc")).unwrap();
        std::fs::write(dir.path().join("proc/swaps"), "x\n").unwrap();
        assert_eq!(host.read("/proc/swaps").as_deref(), Some("x"));
    }
}
