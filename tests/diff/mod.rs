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

/// How long one side may spend on a list of cases: a server that stops
/// answering costs OP_TIMEOUT per op, so the whole run is bounded. Cases
/// not started by then are not run (and so not compared).
pub const CASES_BUDGET: std::time::Duration = std::time::Duration::from_secs(120);

/// What `diff_cases` found.
pub struct CaseResults {
    /// How many cases ran on both sides with identical transcripts.
    pub identical: usize,
    /// One report per case whose transcripts differ.
    pub differ: Vec<String>,
    /// Cases that were not run on one side or both (the time budget ran
    /// out first): nothing is known about them.
    pub not_compared: Vec<String>,
}

impl CaseResults {
    /// Panics unless every case ran on both sides and compared equal,
    /// naming the cases that differ and those that were not compared.
    pub fn assert_all_identical(&self, what: &str) {
        let mut msg = String::new();
        if !self.not_compared.is_empty() {
            msg += &format!(
                "{} {what} case(s) not compared (not run within the {CASES_BUDGET:?} budget): {}\n\n",
                self.not_compared.len(),
                self.not_compared.join("; ")
            );
        }
        if !self.differ.is_empty() {
            msg += &format!(
                "{} {what} case(s) differ:\n\n{}",
                self.differ.len(),
                self.differ.join("\n")
            );
        }
        assert!(msg.is_empty(), "{msg}");
        assert!(
            self.identical > 0,
            "no {what} case ran (does RK_DIFF_CASE match any?)"
        );
    }
}

/// Runs `cases` against both servers (each side on its own thread, a fresh
/// `Runner` per case) and says which cases are identical, which differ
/// and which were not compared (not run within `CASES_BUDGET` on one side
/// or both). RK_DIFF_CASE filters by name and RK_DIFF_DUMP=1 prints the
/// reference transcripts, as in the scripted cases of differential.rs.
pub fn diff_cases(a: &Server, b: &Server, cases: &'static [(&'static str, Case)]) -> CaseResults {
    let filter = std::env::var("RK_DIFF_CASE").ok();
    // Per selected case, its transcript, or None when it was not run.
    let run = move |addr: String| {
        let mut out: Vec<(&'static str, Option<Vec<String>>)> = Vec::new();
        let start = std::time::Instant::now();
        for (name, case) in cases {
            if filter.as_ref().is_some_and(|f| !name.contains(f.as_str())) {
                continue;
            }
            if start.elapsed() > CASES_BUDGET {
                out.push((*name, None));
                continue;
            }
            let mut r = ops::Runner::new(&addr);
            case(&mut r);
            r.close_all();
            out.push((*name, Some(r.out)));
        }
        out
    };
    let (addr_a, addr_b) = (a.addr(), b.addr());
    let run_b = run.clone();
    let ta = std::thread::spawn(move || run(addr_a));
    let tb = std::thread::spawn(move || run_b(addr_b));
    let ra = ta.join().expect("reference side panicked");
    let rb = tb.join().expect("other side panicked");
    assert_eq!(ra.len(), rb.len(), "both sides select the same cases");
    let other = side_name(other_flavor());
    let mut results = CaseResults {
        identical: 0,
        differ: Vec::new(),
        not_compared: Vec::new(),
    };
    for ((name, ta), (name_b, tb)) in ra.iter().zip(rb.iter()) {
        assert_eq!(name, name_b, "both sides run the cases in one order");
        let (ta, tb) = match (ta, tb) {
            (Some(ta), Some(tb)) => (ta, tb),
            (ta, tb) => {
                let not_run: Vec<&str> = [("zookeeper", ta.is_none()), (other, tb.is_none())]
                    .iter()
                    .filter(|(_, missing)| *missing)
                    .map(|(side, _)| *side)
                    .collect();
                results
                    .not_compared
                    .push(format!("{name} (not run on {})", not_run.join(" and ")));
                continue;
            }
        };
        if dump_enabled() {
            eprintln!("==== case {name} (zookeeper)");
            for l in ta {
                eprintln!("{l}");
            }
        }
        match diff_report(&format!("case {name}"), ta, tb, 6) {
            Some(rep) => results.differ.push(rep),
            None => results.identical += 1,
        }
    }
    eprintln!(
        "{} cases: {} identical, {} differ, {} not compared",
        ra.len(),
        results.identical,
        results.differ.len(),
        results.not_compared.len()
    );
    results
}

pub fn dump_enabled() -> bool {
    std::env::var("RK_DIFF_DUMP").is_ok_and(|v| v == "1")
}
