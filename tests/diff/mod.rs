//! Differential testing support: start Apache ZooKeeper (side A, the
//! reference) and the server under test (side B: ringkeeper, or a second
//! Apache ZooKeeper when RK_DIFF_SELF=1), run the same script on both and
//! compare normalized transcripts.
#![allow(dead_code)]

pub mod cases;
pub mod norm;
pub mod ops;
pub mod random;
pub mod wire;

use crate::common::{self, Flavor, Server};

/// Server config shared by both sides. `forceSync=no` keeps ZooKeeper's
/// fsync out of the op latency; `extendedTypesEnabled=true` enables TTL
/// nodes (ZooKeeper maps unknown zoo.cfg keys to `zookeeper.<key>`).
pub const DIFF_CFG: &str = "forceSync=no\nextendedTypesEnabled=true\n";

/// The flavor of side B.
pub fn other_flavor() -> Flavor {
    if std::env::var("RK_DIFF_SELF").is_ok_and(|v| v == "1") {
        Flavor::ZooKeeper
    } else {
        Flavor::Ringkeeper
    }
}

pub fn side_name(f: Flavor) -> &'static str {
    match f {
        Flavor::ZooKeeper => "zookeeper",
        Flavor::Ringkeeper => "ringkeeper",
    }
}

/// Starts the reference and the other side concurrently. If either fails,
/// the other is still waited for and dropped (killed) before the panic goes
/// on, so no server outlives the test.
pub fn start_pair(cfg: &str) -> (Server, Server) {
    let cfg_a = cfg.to_string();
    let a = std::thread::spawn(move || common::start(Flavor::ZooKeeper, &cfg_a));
    let b = std::panic::catch_unwind(|| common::start(other_flavor(), cfg));
    let a = a.join();
    match (a, b) {
        (Ok(a), Ok(b)) => (a, b),
        (a, Err(e)) => {
            drop(a);
            std::panic::resume_unwind(e)
        }
        (Err(e), b) => {
            drop(b);
            std::panic::resume_unwind(e)
        }
    }
}

/// The simulations' deterministic PRNG (splitmix64).
pub use ringkeeper::sim::Rng;

/// Index of the first differing line, if any.
pub fn first_diff(a: &[String], b: &[String]) -> Option<usize> {
    (0..a.len().max(b.len())).find(|&i| a.get(i) != b.get(i))
}

/// A readable report of the first difference with `ctx` lines of context.
pub fn diff_report(title: &str, a: &[String], b: &[String], ctx: usize) -> Option<String> {
    let i = first_diff(a, b)?;
    let from = i.saturating_sub(ctx);
    let mut s = format!(
        "{title}: first difference at transcript line {i} (zookeeper: {} lines, {}: {} lines)\n",
        a.len(),
        side_name(other_flavor()),
        b.len()
    );
    s.push_str("  context (identical on both sides):\n");
    for l in &a[from..i] {
        s.push_str(&format!("    {l}\n"));
    }
    s.push_str(&format!(
        "  zookeeper : {}\n",
        a.get(i)
            .map(String::as_str)
            .unwrap_or("<end of transcript>")
    ));
    s.push_str(&format!(
        "  {:<10}: {}\n",
        side_name(other_flavor()),
        b.get(i)
            .map(String::as_str)
            .unwrap_or("<end of transcript>")
    ));
    for (name, t) in [("zookeeper", a), (side_name(other_flavor()), b)] {
        let next: Vec<&String> = t.iter().skip(i + 1).take(3).collect();
        if !next.is_empty() {
            s.push_str(&format!("  next on {name}:\n"));
            for l in next {
                s.push_str(&format!("    {l}\n"));
            }
        }
    }
    Some(s)
}

/// A named script of ops for a `Runner`.
pub type Case = fn(&mut ops::Runner);

/// Runs `cases` against both servers (each side on its own thread, a fresh
/// `Runner` per case) and returns one report per case whose transcripts
/// differ. RK_DIFF_CASE filters by name and RK_DIFF_DUMP=1 prints the
/// reference transcripts, as in the scripted cases of differential.rs.
pub fn diff_cases(a: &Server, b: &Server, cases: &'static [(&'static str, Case)]) -> Vec<String> {
    let filter = std::env::var("RK_DIFF_CASE").ok();
    let run = move |addr: String| {
        let mut out = Vec::new();
        let start = std::time::Instant::now();
        for (name, case) in cases {
            if filter.as_ref().is_some_and(|f| !name.contains(f.as_str())) {
                continue;
            }
            // A server that stops answering costs OP_TIMEOUT per op: bound
            // the whole run.
            if start.elapsed() > std::time::Duration::from_secs(120) {
                out.push((
                    *name,
                    vec!["SKIPPED: the cases ran out of time".to_string()],
                ));
                continue;
            }
            let mut r = ops::Runner::new(&addr);
            case(&mut r);
            r.close_all();
            out.push((*name, r.out));
        }
        out
    };
    let (addr_a, addr_b) = (a.addr(), b.addr());
    let run_b = run.clone();
    let ta = std::thread::spawn(move || run(addr_a));
    let tb = std::thread::spawn(move || run_b(addr_b));
    let ra = ta.join().expect("reference side panicked");
    let rb = tb.join().expect("other side panicked");
    let mut failures = Vec::new();
    for ((name, ta), (_, tb)) in ra.iter().zip(rb.iter()) {
        if dump_enabled() {
            eprintln!("==== case {name} (zookeeper)");
            for l in ta {
                eprintln!("{l}");
            }
        }
        if let Some(rep) = diff_report(&format!("case {name}"), ta, tb, 6) {
            failures.push(rep);
        }
    }
    eprintln!(
        "{} of {} cases identical",
        ra.len() - failures.len(),
        ra.len()
    );
    failures
}

pub fn dump_enabled() -> bool {
    std::env::var("RK_DIFF_DUMP").is_ok_and(|v| v == "1")
}
