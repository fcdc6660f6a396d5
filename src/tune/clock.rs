//! The clock source (/sys/devices/system/clocksource/clocksource0), and
//! what a clock_gettime costs here.

use std::time::Instant;

use super::{Check, Context, Status, Value};

/// Clock sources the vDSO reads without a system call.
const FAST: &[&str] = &[
    "tsc",
    "kvm-clock",
    "arch_sys_counter",
    "hyperv_clocksource_tsc_page",
];

/// ns per clock_gettime(CLOCK_MONOTONIC), over `n` calls.
fn clock_gettime_ns(n: u32) -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    let start = Instant::now();
    for _ in 0..n {
        // SAFETY: clock_gettime writes only the timespec it is given.
        unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
        std::hint::black_box(&ts);
    }
    start.elapsed().as_nanos() as f64 / f64::from(n)
}

pub fn check(ctx: &Context) -> Check {
    let c = Check::new("clocksource", "Clock source").why(
        "The server reads the clock for every request (timeouts, latency metrics, \
         session touches) and every batch. With tsc (or kvm-clock, arm's counter) \
         clock_gettime is a vDSO read of tens of nanoseconds; with hpet, acpi_pm or xen \
         it is a system call or a device read of 0.5-2 microseconds, paid many times \
         per request.",
    );
    let base = "/sys/devices/system/clocksource/clocksource0";
    let current = ctx.host.read(&format!("{base}/current_clocksource"));
    let available = ctx
        .host
        .read(&format!("{base}/available_clocksource"))
        .unwrap_or_default();
    let ns = clock_gettime_ns(200_000);
    let c = c.value("clock_gettime_ns", Value::Num(ns));
    let Some(current) = current else {
        return c.status(Status::Unknown).found(format!(
            "no {base}/current_clocksource; clock_gettime takes {ns:.0} ns here"
        ));
    };
    let c = c
        .found(format!(
            "{current} (available: {}); clock_gettime takes {ns:.0} ns here",
            if available.is_empty() {
                "?"
            } else {
                &available
            }
        ))
        .value("clocksource", Value::Text(current.clone()));
    if FAST.contains(&current.as_str()) && ns < 500.0 {
        c
    } else {
        let fix = if available.split_whitespace().any(|a| a == "tsc") {
            format!("echo tsc > {base}/current_clocksource (clocksource=tsc tsc=reliable on the kernel command line to keep it)")
        } else {
            "a VM type or kernel whose clock source the vDSO reads (tsc, kvm-clock); on \
             Xen, tsc is usually available with the hypervisor's invariant-TSC flag"
                .to_string()
        };
        c.status(Status::Warn).fix(fix)
    }
}
