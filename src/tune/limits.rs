//! RLIMIT_MEMLOCK and RLIMIT_NOFILE against what the configured server
//! needs, sized as the server sizes its rings and buffers:
//!
//! - Each glommio executor (one per shard, plus the consensus core's own
//!   unless it shares shard 0's) refuses to start below 512 KiB of
//!   RLIMIT_MEMLOCK (`MIN_MEMLOCK_LIMIT` in vendor/glommio's reactor), and
//!   registers its I/O memory (`IO_MEMORY_BYTES` in src/server.rs, 1 MiB)
//!   as fixed buffers with each of its three rings. The kernel charges
//!   registered buffers to the user's locked memory, ring by ring, unless
//!   the process has CAP_IPC_LOCK; past the limit glommio logs "registering
//!   buffers ... Skipping" and the log's writes use unregistered buffers.
//!   Before Linux 5.12 the rings themselves were charged too (the glommio
//!   rings and each shard's client ring of src/uring.rs).
//! - Descriptors: one per client connection, plus the server's own (rings,
//!   eventfds, listeners, log segments, locks, peer sockets).
//!
//! The unit test at the end reads those constants from the sources, so a
//! change there fails here until the sizing follows.

use super::{bytes, Check, Context, Status, Value};

/// glommio's `MIN_MEMLOCK_LIMIT`.
const GLOMMIO_MIN_MEMLOCK: u64 = 512 * 1024;
/// src/server.rs `IO_MEMORY_BYTES`: each executor's registered I/O memory.
const IO_MEMORY_BYTES: u64 = 1 << 20;
/// glommio's rings per executor (main, latency, poll), each registering it.
const RINGS_PER_EXECUTOR: u64 = 3;
/// glommio's `DEFAULT_RING_SUBMISSION_DEPTH`.
const GLOMMIO_RING_DEPTH: u64 = 128;
/// src/uring.rs: a shard's client ring, `SQ_ENTRIES` x `CQ_FACTOR`.
const CLIENT_SQ_ENTRIES: u64 = 1024;
const CLIENT_CQ_FACTOR: u64 = 8;
const SQE_BYTES: u64 = 64;
const CQE_BYTES: u64 = 16;

/// Descriptors the server holds besides client connections: stdio, the
/// lock files, log segments (current and prepared), a snapshot being
/// written, the metrics listener, and per executor its rings, eventfds,
/// timers and listeners.
const FD_FIXED: u64 = 64;
const FD_PER_EXECUTOR: u64 = 16;
/// Per ensemble member: its election and quorum connections.
const FD_PER_PEER: u64 = 4;
/// linux/capability.h.
const CAP_IPC_LOCK: u32 = 14;
/// Clients to plan for when maxCnxns is 0 (unbounded).
const CLIENTS_UNBOUNDED: u64 = 10_000;
/// Below this many client descriptors the server is not serviceable.
const CLIENTS_MIN: u64 = 64;

fn getrlimit(resource: libc::__rlimit_resource_t) -> Option<(u64, u64)> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit only writes the struct it is given.
    if unsafe { libc::getrlimit(resource, &mut lim) } == 0 {
        Some((lim.rlim_cur, lim.rlim_max))
    } else {
        None
    }
}

fn limit_text(v: u64, unit_bytes: bool) -> String {
    if v == libc::RLIM_INFINITY {
        "unlimited".to_string()
    } else if unit_bytes {
        bytes(v)
    } else {
        v.to_string()
    }
}

fn limit_value(v: u64) -> Value {
    if v == libc::RLIM_INFINITY {
        Value::Text("unlimited".into())
    } else {
        Value::Int(v.min(i64::MAX as u64) as i64)
    }
}

/// (major, minor) of a release string such as `6.18.44-fc`.
pub fn kernel_version(release: &str) -> Option<(u32, u32)> {
    let mut it = release.split(|c: char| !c.is_ascii_digit());
    let major = it.next()?.parse().ok()?;
    let minor = it.next()?.parse().ok()?;
    Some((major, minor))
}

/// Whether this process has CAP_IPC_LOCK (bit 14 of CapEff).
fn has_ipc_lock(ctx: &Context) -> Option<bool> {
    let status = ctx.host.read("/proc/self/status")?;
    let hex = status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))?
        .trim()
        .to_string();
    let caps = u64::from_str_radix(&hex, 16).ok()?;
    Some(caps & (1 << CAP_IPC_LOCK) != 0)
}

/// Locked memory the configured server needs: (bytes, how it adds up).
pub fn memlock_need(executors: u64, shards: u64, kernel: Option<(u32, u32)>) -> (u64, String) {
    let registered = executors * RINGS_PER_EXECUTOR * IO_MEMORY_BYTES;
    let mut need = registered;
    let mut how = format!(
        "{executors} executor(s) x {RINGS_PER_EXECUTOR} rings x {} of registered I/O memory = {}",
        bytes(IO_MEMORY_BYTES),
        bytes(registered)
    );
    if kernel.is_some_and(|k| k < (5, 12)) {
        let glommio_ring = GLOMMIO_RING_DEPTH * SQE_BYTES + 2 * GLOMMIO_RING_DEPTH * CQE_BYTES;
        let client_ring =
            CLIENT_SQ_ENTRIES * SQE_BYTES + CLIENT_SQ_ENTRIES * CLIENT_CQ_FACTOR * CQE_BYTES;
        let rings = executors * RINGS_PER_EXECUTOR * glommio_ring + shards * client_ring;
        need += rings;
        how.push_str(&format!(
            ", plus {} of rings (charged to locked memory before Linux 5.12)",
            bytes(rings)
        ));
    }
    (need.max(GLOMMIO_MIN_MEMLOCK), how)
}

pub fn memlock(ctx: &Context) -> Check {
    let c = Check::new("memlock", "RLIMIT_MEMLOCK for io_uring").why(
        "glommio refuses to start an executor below 512 KiB of locked memory, and \
         registers each executor's I/O memory with its rings; the kernel charges that \
         to the user's locked memory (all of the user's processes together) unless the \
         process has CAP_IPC_LOCK. Past the limit the registration is skipped (a warning \
         in the log) and the txn log's O_DIRECT writes use unregistered buffers.",
    );
    let Some((soft, hard)) = getrlimit(libc::RLIMIT_MEMLOCK) else {
        return c.status(Status::Unknown).found("getrlimit failed");
    };
    let kernel = ctx.host.kernel_release().and_then(|r| kernel_version(&r));
    let (need, how) = memlock_need(ctx.executors() as u64, ctx.shards as u64, kernel);
    let ipc_lock = has_ipc_lock(ctx);
    let mut found = format!(
        "soft {}, hard {}; the configured server ({} shard(s), consensus core {}) needs {} \
         ({how})",
        limit_text(soft, true),
        limit_text(hard, true),
        ctx.shards,
        match ctx.layout {
            crate::config::ConsensusExecutor::Own => "on an executor of its own",
            _ => "beside shard 0",
        },
        bytes(need)
    );
    match ipc_lock {
        Some(true) => found.push_str(
            "; this process has CAP_IPC_LOCK, so only glommio's 512 KiB floor binds it (a \
             server running as its own user usually lacks it)",
        ),
        Some(false) => found.push_str("; no CAP_IPC_LOCK"),
        None => {}
    }
    let c = c
        .found(found)
        .value("soft_bytes", limit_value(soft))
        .value("hard_bytes", limit_value(hard))
        .value("need_bytes", Value::Int(need as i64));
    let fix = format!(
        "raise it to at least {} KiB: LimitMEMLOCK={}K in the systemd unit, or \
         `ulimit -l {}` before starting, or a memlock line in /etc/security/limits.conf",
        need.div_ceil(1024),
        need.div_ceil(1024),
        need.div_ceil(1024)
    );
    if soft < GLOMMIO_MIN_MEMLOCK {
        c.status(Status::Fail).fix(fix)
    } else if soft < need {
        c.status(Status::Warn).fix(fix)
    } else {
        c
    }
}

pub fn nofile(ctx: &Context) -> Check {
    let cfg = &ctx.config;
    let c = Check::new("nofile", "RLIMIT_NOFILE for connections").why(
        "Every client connection is a descriptor. At the limit accept fails with EMFILE: \
         the server backs off accepting (10 ms to 1 s) and new clients wait or go \
         elsewhere, while connected ones are served. ringkeeper does not raise its soft \
         limit itself.",
    );
    let Some((soft, hard)) = getrlimit(libc::RLIMIT_NOFILE) else {
        return c.status(Status::Unknown).found("getrlimit failed");
    };
    let reserve = FD_FIXED
        + FD_PER_EXECUTOR * ctx.executors() as u64
        + FD_PER_PEER * cfg.servers.len() as u64;
    let (clients, basis) = if cfg.max_cnxns > 0 {
        (
            u64::from(cfg.max_cnxns),
            format!("maxCnxns={}", cfg.max_cnxns),
        )
    } else {
        (
            CLIENTS_UNBOUNDED,
            format!(
                "maxCnxns=0 (unbounded; planned for {CLIENTS_UNBOUNDED} clients, \
                 maxClientCnxns={} per address)",
                cfg.max_client_cnxns
            ),
        )
    };
    let need = reserve + clients;
    let room = soft.saturating_sub(reserve);
    let c = c
        .found(format!(
            "soft {}, hard {}; the server keeps about {reserve} for itself ({} executor(s)), \
             leaving room for {} client connections; {basis}: needs {need}",
            limit_text(soft, false),
            limit_text(hard, false),
            ctx.executors(),
            if soft == libc::RLIM_INFINITY {
                "unlimited".to_string()
            } else {
                room.to_string()
            },
        ))
        .value("soft", limit_value(soft))
        .value("hard", limit_value(hard))
        .value("need", Value::Int(need as i64));
    let target = need.next_power_of_two().max(65536);
    let fix = if hard != libc::RLIM_INFINITY && hard < need {
        format!(
            "raise the hard limit too (it is {hard}): LimitNOFILE={target} in the systemd unit, \
             or nofile lines in /etc/security/limits.conf"
        )
    } else {
        format!("LimitNOFILE={target} in the systemd unit, or `ulimit -n {target}` before starting")
    };
    if soft < reserve + CLIENTS_MIN {
        c.status(Status::Fail).fix(fix)
    } else if soft < need {
        c.status(Status::Warn).fix(fix)
    } else {
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The sizing above copies constants of other files; they must agree.
    #[test]
    fn constants_match_their_sources() {
        let server = include_str!("../server.rs");
        assert!(server.contains("const IO_MEMORY_BYTES: usize = 1 << 20;"));
        let uring = include_str!("../uring.rs");
        assert!(uring.contains("const SQ_ENTRIES: u32 = 1024;"));
        assert!(uring.contains("const CQ_FACTOR: u32 = 8;"));
        let reactor = include_str!("../../vendor/glommio/src/sys/uring.rs");
        assert!(reactor.contains("const MIN_MEMLOCK_LIMIT: u64 = 512 * 1024;"));
        let executor = include_str!("../../vendor/glommio/src/executor/mod.rs");
        assert!(executor.contains("const DEFAULT_RING_SUBMISSION_DEPTH: usize = 128;"));
    }

    #[test]
    fn memlock_need_counts_executors_and_old_kernels() {
        assert_eq!(memlock_need(2, 1, Some((6, 1))).0, 6 << 20);
        assert!(memlock_need(2, 1, Some((5, 10))).0 > 6 << 20);
        assert_eq!(memlock_need(0, 0, None).0, GLOMMIO_MIN_MEMLOCK);
    }

    #[test]
    fn kernel_versions_parse() {
        assert_eq!(kernel_version("6.18.44-fc-v669"), Some((6, 18)));
        assert_eq!(kernel_version("5.4.0"), Some((5, 4)));
        assert_eq!(kernel_version("x"), None);
    }
}
