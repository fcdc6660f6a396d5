//! CPU frequency scaling: the governor of each online CPU
//! (/sys/devices/system/cpu/cpu*/cpufreq). Virtual machines usually have no
//! cpufreq interface at all: the hypervisor's host decides, which this
//! check says rather than failing.

use std::collections::BTreeMap;

use super::cpus::{cpu_list_text, online_cpus};
use super::{Check, Context, Status, Value};

pub fn check(ctx: &Context) -> Check {
    let c = Check::new("cpu_governor", "CPU frequency scaling").why(
        "Between batches the consensus core and the shards sleep, and a governor that \
         scales frequency down (powersave, ondemand, schedutil) lets the next request \
         run at a low clock and ramp up: single-write latency and its tail grow by tens \
         of microseconds. `performance` keeps the clock up.",
    );
    let online = online_cpus(&ctx.host);
    // governor -> CPUs
    let mut governors: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    let mut driver = None;
    let mut freqs = Vec::new();
    for &cpu in &online {
        let base = format!("/sys/devices/system/cpu/cpu{cpu}/cpufreq");
        if let Some(g) = ctx.host.read(&format!("{base}/scaling_governor")) {
            governors.entry(g).or_default().push(cpu);
        }
        if driver.is_none() {
            driver = ctx.host.read(&format!("{base}/scaling_driver"));
        }
        let khz = |f: &str| {
            ctx.host
                .read(&format!("{base}/{f}"))
                .and_then(|v| v.parse::<u64>().ok())
        };
        if let (Some(cur), Some(max)) = (khz("scaling_cur_freq"), khz("cpuinfo_max_freq")) {
            freqs.push((cpu, cur, max));
        }
    }
    if governors.is_empty() {
        return c
            .status(Status::Unknown)
            .found(format!(
                "no cpufreq interface for CPUs {}: this kernel does not scale their \
                 frequency (usual in a virtual machine, where the hypervisor's host \
                 decides; not a failure)",
                if online.is_empty() {
                    "(unknown)".to_string()
                } else {
                    cpu_list_text(&online)
                }
            ))
            .fix(
                "on a VM, ask for instances with fixed-frequency or dedicated CPUs; on \
                 bare metal, load the cpufreq driver to see and set the governor",
            );
    }
    let mut found = governors
        .iter()
        .map(|(g, cpus)| format!("{g} on CPUs {}", cpu_list_text(cpus)))
        .collect::<Vec<_>>()
        .join("; ");
    if let Some(d) = &driver {
        found.push_str(&format!(" (driver {d})"));
    }
    if !freqs.is_empty() {
        let lowest = freqs
            .iter()
            .min_by_key(|f| f.1)
            .copied()
            .unwrap_or_default();
        found.push_str(&format!(
            "; CPU {} runs at {} MHz of {} MHz now",
            lowest.0,
            lowest.1 / 1000,
            lowest.2 / 1000
        ));
    }
    let scaled: Vec<&String> = governors.keys().filter(|g| *g != "performance").collect();
    let c = c.found(found).value(
        "governors",
        Value::Text(governors.keys().cloned().collect::<Vec<_>>().join(",")),
    );
    if scaled.is_empty() {
        c
    } else {
        c.status(Status::Warn).fix(
            "cpupower frequency-set -g performance (or write `performance` to \
             /sys/devices/system/cpu/cpu*/cpufreq/scaling_governor), at least on the CPUs \
             in ringkeeper.pinCores; persist it with your distribution's cpufrequtils or \
             tuned profile (latency-performance)",
        )
    }
}
