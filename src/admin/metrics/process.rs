//! The process figures the Prometheus Java client's StandardExports gives
//! every JVM (ZooKeeper's provider with exportJvmInfo=true):
//! `process_cpu_seconds_total` and `process_resident_memory_bytes`, read
//! from /proc/self when scraped.

/// CPU time and resident memory of this process.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ProcessView {
    /// User plus system CPU time, in seconds.
    pub cpu_seconds: f64,
    /// Resident set size, in bytes.
    pub resident_bytes: u64,
}

impl ProcessView {
    /// Reads /proc/self; a figure that cannot be read is 0.
    pub fn read() -> ProcessView {
        let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
        let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        // SAFETY: sysconf only reads a configuration value.
        let ticks_per_s = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
        ProcessView {
            cpu_seconds: cpu_ticks(&stat).map_or(0.0, |t| t as f64 / ticks_per_s.max(1) as f64),
            resident_bytes: vm_rss_kb(&status).map_or(0, |kb| kb * 1024),
        }
    }
}

/// utime + stime (fields 14 and 15 of /proc/self/stat), in clock ticks.
/// The fields are counted after the command name's closing parenthesis,
/// since the name itself may hold spaces.
fn cpu_ticks(stat: &str) -> Option<u64> {
    let after_name = &stat[stat.rfind(')')? + 1..];
    let mut fields = after_name.split_whitespace().skip(11);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some(utime + stime)
}

/// `VmRSS:` of /proc/self/status, in kB (as StandardExports reads it).
fn vm_rss_kb(status: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_proc_files() {
        let stat = "1234 (rk (a) b) S 1 2 3 4 5 6 7 8 9 10 250 50 0 0 20 0 8 0 100 200 300";
        assert_eq!(cpu_ticks(stat), Some(300));
        assert_eq!(cpu_ticks("garbage"), None);
        let status = "Name:\tringkeeper\nVmSize:\t  2000 kB\nVmRSS:\t  1536 kB\n";
        assert_eq!(vm_rss_kb(status), Some(1536));
        let me = ProcessView::read();
        assert!(me.resident_bytes > 0);
        assert!(me.cpu_seconds >= 0.0);
    }
}
