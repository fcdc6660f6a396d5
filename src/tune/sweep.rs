//! The group-commit sweep of tuning/fsync-sweep.sh as a subcommand option:
//! for each batch setting, a server (this binary) on a free loopback port
//! with its dataDir in dataLogDir, 100% setData (1 KiB) from
//! ringkeeper-loadgen (32 sessions x 100 outstanding), the loadgen's
//! ops/s and write latency read from its CSV. Every wait is bounded and
//! every process is killed by its pid.

use std::io::Read;
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::Context;

/// `--sweep` options.
#[derive(Debug, Clone)]
pub struct Options {
    /// Measured seconds per setting.
    pub seconds: u64,
    /// Rounds over all settings (alternating); each setting reports its
    /// median round.
    pub rounds: u32,
    pub loadgen: Option<PathBuf>,
}

const SESSIONS: u32 = 32;
const OUTSTANDING: u32 = 100;
const START_TIMEOUT: Duration = Duration::from_secs(15);
/// Beyond warm-up + measurement, for the loadgen's setup and teardown.
const LOADGEN_SLACK: Duration = Duration::from_secs(60);

/// The settings swept: a label and the zoo.cfg lines it adds.
pub fn settings() -> Vec<(&'static str, Vec<(&'static str, &'static str)>)> {
    vec![
        ("defaults", vec![]),
        ("fsyncDelayUs=200", vec![("ringkeeper.fsyncDelayUs", "200")]),
        (
            "fsyncDelayUs=1000",
            vec![("ringkeeper.fsyncDelayUs", "1000")],
        ),
        (
            "fsyncBatchTxnsMax=100",
            vec![("ringkeeper.fsyncBatchTxnsMax", "100")],
        ),
        (
            "fsyncBatchTxnsMax=1000",
            vec![("ringkeeper.fsyncBatchTxnsMax", "1000")],
        ),
    ]
}

/// One setting's result.
#[derive(Debug, Clone)]
pub struct Point {
    pub label: &'static str,
    pub lines: Vec<(&'static str, &'static str)>,
    pub ops_per_s: f64,
    pub write_p50_us: f64,
    pub write_p99_us: f64,
    pub errors: u64,
    /// (max - min) / median of the rounds' ops/s (0 with one round).
    pub spread: f64,
    /// The server's last `group commit ...` log line, when it logged one.
    pub group_commit: Option<String>,
    /// Why the point has no numbers.
    pub failed: Option<String>,
}

/// What the sweep found.
#[derive(Debug, Clone)]
pub struct Sweep {
    pub points: Vec<Point>,
    /// Index into points.
    pub chosen: Option<usize>,
    pub seconds: u64,
    pub warmup: u64,
    pub rounds: u32,
}

/// The median (the lower middle of an even count) of `v`.
pub fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    s.get(s.len().saturating_sub(1) / 2).copied().unwrap_or(0.0)
}

/// Splits one CSV line (quotes as the loadgen writes them).
pub fn csv_fields(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, quoted) {
            ('"', true) if chars.peek() == Some(&'"') => {
                cur.push('"');
                chars.next();
            }
            ('"', _) => quoted = !quoted,
            (',', false) => out.push(std::mem::take(&mut cur)),
            (c, _) => cur.push(c),
        }
    }
    out.push(cur);
    out
}

/// (ops/s, write p50 us, write p99 us, errors) of the loadgen's mix CSV.
pub fn parse_mix_csv(text: &str) -> Result<(f64, f64, f64, u64), String> {
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    let header = csv_fields(lines.next().ok_or("empty CSV")?);
    let row = csv_fields(lines.next().ok_or("CSV without a row")?);
    let col = |name: &str| -> Result<&str, String> {
        let i = header
            .iter()
            .position(|h| h == name)
            .ok_or_else(|| format!("CSV has no column {name}"))?;
        row.get(i)
            .map(String::as_str)
            .ok_or_else(|| format!("CSV row has no {name}"))
    };
    let num = |name: &str| -> Result<f64, String> {
        col(name)?
            .parse::<f64>()
            .map_err(|e| format!("{name}: {e}"))
    };
    Ok((
        num("ops_per_s")?,
        num("write_p50_us")?,
        num("write_p99_us")?,
        num("errors")? as u64,
    ))
}

/// The best point: among those within 3% of the highest ops/s, the
/// defaults when they are there (a run's noise is no reason to move off
/// the measured and documented defaults), else the lowest write p99; on a
/// tie the earlier.
pub fn choose(points: &[Point]) -> Option<usize> {
    let ok: Vec<usize> = (0..points.len())
        .filter(|&i| {
            points[i].failed.is_none() && points[i].errors == 0 && points[i].ops_per_s > 0.0
        })
        .collect();
    let best = ok
        .iter()
        .map(|&i| points[i].ops_per_s)
        .fold(0.0f64, f64::max);
    let near: Vec<usize> = ok
        .into_iter()
        .filter(|&i| points[i].ops_per_s >= best * 0.97)
        .collect();
    if let Some(&d) = near.iter().find(|&&i| points[i].lines.is_empty()) {
        return Some(d);
    }
    near.into_iter().min_by(|&a, &b| {
        points[a]
            .write_p99_us
            .total_cmp(&points[b].write_p99_us)
            .then(a.cmp(&b))
    })
}

fn find_loadgen(given: Option<&Path>) -> Result<PathBuf, String> {
    if let Some(p) = given {
        return if p.is_file() {
            Ok(p.to_path_buf())
        } else {
            Err(format!("--loadgen {}: no such file", p.display()))
        };
    }
    if let Some(beside) = std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().map(|d| d.join("ringkeeper-loadgen")))
        .filter(|p| p.is_file())
    {
        return Ok(beside);
    }
    std::env::var_os("PATH")
        .and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|d| d.join("ringkeeper-loadgen"))
                .find(|p| p.is_file())
        })
        .ok_or_else(|| {
            "the sweep needs ringkeeper-loadgen: not beside this binary nor on PATH (build it \
             with `cargo build --release -p ringkeeper-loadgen`, or pass --loadgen)"
                .to_string()
        })
}

fn free_port() -> Result<u16, String> {
    let l = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).map_err(|e| format!("bind: {e}"))?;
    l.local_addr()
        .map(|a| a.port())
        .map_err(|e| format!("local_addr: {e}"))
}

/// A child killed (by pid) and reaped when dropped.
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Waits up to `limit` for `child` to exit.
fn wait_bounded(child: &mut Child, limit: Duration) -> Option<std::process::ExitStatus> {
    let until = Instant::now() + limit;
    while Instant::now() < until {
        if let Ok(Some(s)) = child.try_wait() {
            return Some(s);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}

fn tail(path: &Path, lines: usize) -> String {
    let mut s = String::new();
    let _ = std::fs::File::open(path).and_then(|mut f| f.read_to_string(&mut s));
    let strip = strip_ansi(&s);
    let v: Vec<&str> = strip.lines().collect();
    v[v.len().saturating_sub(lines)..].join("\n")
}

fn strip_ansi(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for d in chars.by_ref() {
                if d.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// The working directory in dataLogDir, removed when dropped.
struct WorkDir(PathBuf);

impl Drop for WorkDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn run_point(
    server: &Path,
    loadgen: &Path,
    work: &Path,
    shards: usize,
    lines: &[(&str, &str)],
    warmup: u64,
    seconds: u64,
) -> Result<(f64, f64, f64, u64, Option<String>), String> {
    let data = work.join("data");
    let _ = std::fs::remove_dir_all(&data);
    let port = free_port()?;
    let mut cfg = format!(
        "tickTime=2000\ndataDir={}\nclientPort={port}\nclientPortAddress=127.0.0.1\n\
         ringkeeper.shards={shards}\n",
        data.display()
    );
    for (k, v) in lines {
        cfg.push_str(&format!("{k}={v}\n"));
    }
    let cfg_path = work.join("zoo.cfg");
    std::fs::write(&cfg_path, cfg).map_err(|e| format!("write {}: {e}", cfg_path.display()))?;
    let log_path = work.join("server.log");
    let log = std::fs::File::create(&log_path).map_err(|e| format!("server log: {e}"))?;
    let mut srv = Reaped(
        Command::new(server)
            .arg("--config")
            .arg(&cfg_path)
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .map_err(|e| format!("start {}: {e}", server.display()))?,
    );
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let until = Instant::now() + START_TIMEOUT;
    loop {
        if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
            break;
        }
        if let Ok(Some(status)) = srv.0.try_wait() {
            return Err(format!(
                "the server exited ({status}) before listening:\n{}",
                tail(&log_path, 5)
            ));
        }
        if Instant::now() >= until {
            return Err(format!(
                "the server did not listen on {addr} within {START_TIMEOUT:?}"
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let csv = work.join("point.csv");
    let _ = std::fs::remove_file(&csv);
    let out_path = work.join("loadgen.out");
    let out = std::fs::File::create(&out_path).map_err(|e| format!("loadgen output: {e}"))?;
    let err = out
        .try_clone()
        .map_err(|e| format!("loadgen output: {e}"))?;
    let mut lg = Reaped(
        Command::new(loadgen)
            .args(["mix", "--target", &addr.to_string()])
            .args(["--sessions", &SESSIONS.to_string()])
            .args(["--outstanding", &OUTSTANDING.to_string()])
            .args(["--reads", "0", "--value-bytes", "1024"])
            .args(["--warmup-s", &warmup.to_string()])
            .args(["--duration-s", &seconds.to_string()])
            .arg("-q")
            .arg("--csv")
            .arg(&csv)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .map_err(|e| format!("start {}: {e}", loadgen.display()))?,
    );
    let limit = Duration::from_secs(warmup + seconds) + LOADGEN_SLACK;
    match wait_bounded(&mut lg.0, limit) {
        Some(s) if s.success() => {}
        Some(s) => {
            return Err(format!(
                "ringkeeper-loadgen failed ({s}):\n{}",
                tail(&out_path, 5)
            ))
        }
        None => {
            return Err(format!(
                "ringkeeper-loadgen did not finish within {limit:?}"
            ))
        }
    }
    drop(lg);
    drop(srv);
    let text = std::fs::read_to_string(&csv).map_err(|e| format!("read the loadgen CSV: {e}"))?;
    let (ops, p50, p99, errors) = parse_mix_csv(&text)?;
    let group = tail(&log_path, 10_000)
        .lines()
        .rev()
        .find_map(|l| l.find("group commit").map(|i| l[i..].to_string()));
    Ok((ops, p50, p99, errors, group))
}

/// Runs the sweep; Err when it cannot run at all (no loadgen, no dir).
pub fn run(ctx: &Context, opts: &Options) -> Result<Sweep, String> {
    let loadgen = find_loadgen(opts.loadgen.as_deref())?;
    let server = std::env::current_exe().map_err(|e| format!("this binary's path: {e}"))?;
    let base = super::logdir::absolute(&ctx.log_dir);
    if !base.is_dir() {
        return Err(format!(
            "the sweep runs its servers in dataLogDir, and {} is not a directory",
            base.display()
        ));
    }
    let work = WorkDir(base.join(format!(".ringkeeper-tune-sweep.{}", std::process::id())));
    std::fs::create_dir(&work.0).map_err(|e| format!("create {}: {e}", work.0.display()))?;
    let warmup = opts.seconds.min(2);
    let settings = settings();
    // Per setting: each round's (ops/s, p50, p99), errors, first failure,
    // last group-commit line.
    type Rounds = (Vec<(f64, f64, f64)>, u64, Option<String>, Option<String>);
    let mut results: Vec<Rounds> = vec![(Vec::new(), 0, None, None); settings.len()];
    for _ in 0..opts.rounds.max(1) {
        for (i, (_, lines)) in settings.iter().enumerate() {
            let r = &mut results[i];
            if r.2.is_some() {
                continue;
            }
            match run_point(
                &server,
                &loadgen,
                &work.0,
                ctx.shards,
                lines,
                warmup,
                opts.seconds,
            ) {
                Ok((ops, p50, p99, errors, group)) => {
                    r.0.push((ops, p50, p99));
                    r.1 += errors;
                    if group.is_some() {
                        r.3 = group;
                    }
                }
                Err(e) => r.2 = Some(e),
            }
        }
    }
    let points: Vec<Point> = settings
        .into_iter()
        .zip(results)
        .map(|((label, lines), (rounds, errors, failed, group_commit))| {
            let ops: Vec<f64> = rounds.iter().map(|r| r.0).collect();
            let median_ops = median(&ops);
            let max = ops.iter().copied().fold(f64::MIN, f64::max);
            let min = ops.iter().copied().fold(f64::MAX, f64::min);
            Point {
                label,
                lines,
                ops_per_s: median_ops,
                write_p50_us: median(&rounds.iter().map(|r| r.1).collect::<Vec<_>>()),
                write_p99_us: median(&rounds.iter().map(|r| r.2).collect::<Vec<_>>()),
                errors,
                spread: if ops.len() > 1 && median_ops > 0.0 {
                    (max - min) / median_ops
                } else {
                    0.0
                },
                group_commit,
                failed,
            }
        })
        .collect();
    let chosen = choose(&points);
    Ok(Sweep {
        points,
        chosen,
        seconds: opts.seconds,
        warmup,
        rounds: opts.rounds.max(1),
    })
}

/// The sweep's table, one line per setting.
pub fn table(s: &Sweep) -> Vec<String> {
    let mut out = vec![format!(
        "{:<24} {:>10} {:>12} {:>12} {:>7}{}",
        "setting",
        "ops/s",
        "w p50 (us)",
        "w p99 (us)",
        "errors",
        if s.rounds > 1 { "  spread" } else { "" }
    )];
    for (i, p) in s.points.iter().enumerate() {
        let mark = if Some(i) == s.chosen {
            " <- chosen"
        } else {
            ""
        };
        match &p.failed {
            Some(e) => out.push(format!(
                "{:<24} failed: {}",
                p.label,
                e.lines().next().unwrap_or("")
            )),
            None => out.push(format!(
                "{:<24} {:>10.0} {:>12.0} {:>12.0} {:>7}{}{mark}",
                p.label,
                p.ops_per_s,
                p.write_p50_us,
                p.write_p99_us,
                p.errors,
                if s.rounds > 1 {
                    format!(" {:>6.0}%", p.spread * 100.0)
                } else {
                    String::new()
                }
            )),
        }
        if let Some(g) = &p.group_commit {
            out.push(format!("  {g}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(label: &'static str, ops: f64, p99: f64, errors: u64) -> Point {
        Point {
            label,
            lines: vec![],
            ops_per_s: ops,
            write_p50_us: p99 / 2.0,
            write_p99_us: p99,
            errors,
            spread: 0.0,
            group_commit: None,
            failed: None,
        }
    }

    #[test]
    fn csv_lines_split_with_quotes() {
        assert_eq!(
            csv_fields("a,\"b,c\",\"d\"\"e\",,f"),
            ["a", "b,c", "d\"e", "", "f"]
        );
        let csv = "target,read_pct,ops_per_s,write_p50_us,write_p99_us,errors,errors_by_code\n\
                   127.0.0.1:1,0,138620.5,23087,58303,0,\"\"\n";
        assert_eq!(parse_mix_csv(csv).unwrap(), (138620.5, 23087.0, 58303.0, 0));
        assert!(parse_mix_csv("ops_per_s\n").is_err());
        assert!(parse_mix_csv("a,b\n1,2\n")
            .unwrap_err()
            .contains("ops_per_s"));
    }

    #[test]
    fn the_choice_prefers_throughput_then_tail() {
        let mut pts = vec![
            point("defaults", 90_000.0, 50_000.0, 0),
            point("a", 102_000.0, 80_000.0, 0),
            point("b", 101_000.0, 40_000.0, 0),
            point("c", 200_000.0, 1.0, 5),
        ];
        for p in &mut pts[1..] {
            p.lines = vec![("ringkeeper.fsyncDelayUs", "1")];
        }
        assert_eq!(choose(&pts), Some(2));
        // Defaults within 3% of the best stay.
        pts[0].ops_per_s = 99_500.0;
        assert_eq!(choose(&pts), Some(0));
        let mut pts = vec![point("defaults", 100.0, 10.0, 0), point("a", 90.0, 1.0, 0)];
        pts[1].lines = vec![("ringkeeper.fsyncDelayUs", "1")];
        assert_eq!(choose(&pts), Some(0));
        let mut failed = point("x", 1.0, 1.0, 0);
        failed.failed = Some("no".into());
        assert_eq!(choose(&[failed]), None);
    }

    #[test]
    fn medians_take_the_lower_middle() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 2.0);
        assert_eq!(median(&[5.0]), 5.0);
        assert_eq!(median(&[]), 0.0);
    }

    #[test]
    fn ansi_codes_are_stripped() {
        assert_eq!(strip_ansi("\u{1b}[2mgroup\u{1b}[0m commit"), "group commit");
    }
}
