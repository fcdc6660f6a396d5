//! Live progress on a terminal: one status line, rewritten every second, on
//! stderr. Silent when stderr is not a terminal or with --quiet.

use std::io::Write;
use std::time::{Duration, Instant};

use crate::engine::{LiveTotals, Running, MEASURE};

pub struct Progress {
    enabled: bool,
}

impl Progress {
    pub fn new(quiet: bool) -> Progress {
        let tty = unsafe { libc::isatty(libc::STDERR_FILENO) } == 1;
        Progress {
            enabled: tty && !quiet,
        }
    }

    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// Rewrites the status line.
    pub fn status(&self, line: &str) {
        if self.enabled {
            let mut e = std::io::stderr().lock();
            let _ = write!(e, "\r\x1b[2K{line}");
            let _ = e.flush();
        }
    }

    /// Clears the status line (before ordinary output).
    pub fn clear(&self) {
        if self.enabled {
            let mut e = std::io::stderr().lock();
            let _ = write!(e, "\r\x1b[2K");
            let _ = e.flush();
        }
    }

    /// A message that stays (on a terminal) above the status line.
    pub fn note(&self, line: &str) {
        if self.enabled {
            self.clear();
            eprintln!("{line}");
        }
    }
}

/// Waits `span` while the engine runs, refreshing the status line every
/// second with the last second's rates.
pub fn watch(progress: &Progress, running: &Running, span: Duration, label: &str) {
    let start = Instant::now();
    let mut last = running.live();
    let mut last_t = start;
    loop {
        let left = span.saturating_sub(start.elapsed());
        if left.is_zero() {
            break;
        }
        std::thread::sleep(left.min(Duration::from_secs(1)));
        if !progress.enabled() {
            continue;
        }
        let now = running.live();
        let dt = last_t.elapsed().as_secs_f64().max(1e-6);
        progress.status(&status_line(label, start, span, &last, &now, dt));
        last = now;
        last_t = Instant::now();
    }
}

fn status_line(
    label: &str,
    start: Instant,
    span: Duration,
    a: &LiveTotals,
    b: &LiveTotals,
    dt: f64,
) -> String {
    format!(
        "{label} {:>4.0}/{:.0}s  ops/s {:>9.0}  reads/s {:>9.0}  writes/s {:>9.0}  errors {}  reconnects {}",
        start.elapsed().as_secs_f64(),
        span.as_secs_f64(),
        (b.ops() - a.ops()) as f64 / dt,
        (b.reads - a.reads) as f64 / dt,
        (b.writes - a.writes) as f64 / dt,
        b.errors,
        b.reconnects,
    )
}

/// Label of a mix phase for the status line.
pub fn phase_label(target: &str, read_pct: u32, phase: u8) -> String {
    let ph = if phase == MEASURE {
        "measure"
    } else {
        "warm-up"
    };
    format!("[{target} {read_pct:>3}% reads {ph}]")
}
