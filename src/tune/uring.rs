//! io_uring: allowed by the kernel (`kernel.io_uring_disabled`), a ring can
//! actually be set up (what glommio needs for every executor), and a
//! shard's client ring as src/uring.rs builds it (SINGLE_ISSUER,
//! DEFER_TASKRUN, multishot receive into provided buffers).

use super::{Check, Context, Status, Value};

pub fn check(ctx: &Context) -> Check {
    let c = Check::new("io_uring", "io_uring available and not disabled").why(
        "Every executor (the consensus core and each shard) is a glommio reactor on \
         io_uring: the txn log's writes and fsyncs, timers and sockets all go through it. \
         Without a ring the server does not start. Each shard also drives its client \
         sockets through a ring of its own (ringkeeper.clientRing), which needs Linux 6.0 \
         for multishot receive; without it the shard falls back to one recv and one send \
         system call per connection and turn.",
    );
    let sysctl = ctx.host.read("/proc/sys/kernel/io_uring_disabled");
    let kernel = ctx.host.kernel_release();
    let disabled = sysctl.as_deref().and_then(|s| s.parse::<u32>().ok());
    let mut found = format!(
        "kernel {}; kernel.io_uring_disabled = {}",
        kernel.as_deref().unwrap_or("(unknown)"),
        match disabled {
            Some(0) => "0 (allowed)".to_string(),
            Some(1) => "1 (only members of kernel.io_uring_group and CAP_SYS_ADMIN)".to_string(),
            Some(2) => "2 (disabled for everyone)".to_string(),
            Some(n) => n.to_string(),
            None => "(not readable: absent before Linux 6.6, or /proc is not mounted)".to_string(),
        }
    );
    let c = c.value(
        "io_uring_disabled",
        match disabled {
            Some(n) => Value::Int(n.into()),
            None => Value::Text("absent".into()),
        },
    );
    // A plain ring, as glommio sets up three per executor.
    match io_uring::IoUring::new(8) {
        Ok(_) => found.push_str("; a ring sets up"),
        Err(e) => {
            found.push_str(&format!("; setting up a ring failed: {e}"));
            let fix = match disabled {
                Some(2) => {
                    "sysctl -w kernel.io_uring_disabled=0 (and in /etc/sysctl.d/ to keep it)"
                }
                Some(1) => {
                    "run the server as a member of the group kernel.io_uring_group names, or \
                     sysctl -w kernel.io_uring_disabled=0"
                }
                _ => {
                    "allow io_uring: a container runtime's seccomp profile may block \
                     io_uring_setup (Docker's default does since 25.0: run with a profile \
                     that allows io_uring_setup, io_uring_enter and io_uring_register)"
                }
            };
            return c
                .status(Status::Fail)
                .found(found)
                .fix(fix)
                .value("ring", Value::Text(e.to_string()));
        }
    }
    match crate::uring::ClientRing::new() {
        Ok(_) => {
            found.push_str("; a shard's client ring (provided buffers, multishot receive) sets up");
            c.found(found)
                .value("client_ring", Value::Text("ok".into()))
        }
        Err(e) => {
            found.push_str(&format!("; a shard's client ring is refused: {e}"));
            c.status(Status::Warn)
                .found(found)
                .fix(
                    "a kernel of 6.1 or later (6.0 has multishot receive, 6.1 adds \
                     DEFER_TASKRUN); meanwhile the shards use glommio's sockets (set \
                     ringkeeper.clientRing=false to say so in the config)",
                )
                .value("client_ring", Value::Text(e.to_string()))
        }
    }
}
