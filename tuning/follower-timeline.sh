#!/usr/bin/env bash
# Where one write through a follower spends its time, event by event: a
# fresh 3-member ringkeeper ensemble, one session's synchronous creates on
# a follower (loadgen latency), and 1.5 s of kernel tracepoints across the
# machine in the middle of them (perf record -a): each process's sends and
# receives, its log write's io_uring submission and completion, the disk's
# requests (WS = the O_DIRECT|O_DSYNC write, FF = the cache flush that
# follows it on a disk without FUA), interrupts, wake-ups and context
# switches with the CPU each ran on. Prints WRITES consecutive writes
# (default 2; the client is tuning/rtt-client.c), times in us from the client's send, threads named by role
# (client, F1 = the client's follower, L = leader, F2 = the other
# follower; kworkers and the idle task by name).
# (perf can take most of a second to start tracing on a slow VM: a 0.25 s
# window there traced nothing.) Needs perf and root. Usage: tuning/follower-timeline.sh [WRITES]
source "$(dirname "$0")/lib.sh"
WRITES=${1:-2}
build
cc -O2 -o "$WORK/rtt-client" "$ROOT/tuning/rtt-client.c"

start_ensemble tl rk 70 3 2000
leader=$(leader_index)
read -r f1 f2 <<<"$(follower_indexes "$leader")"
follower=${MEMBER_ADDR[f1]}
# Thread id -> role, for every thread of each member.
roles=$WORK/roles
: >"$roles"
for r in "L:$leader" "F1:$f1" "F2:$f2"; do
    for t in /proc/"${MEMBER_PID[${r#*:}]}"/task/*; do
        echo "${t##*/} ${r%%:*}" >>"$roles"
    done
done
sleep 0.5
(
    sleep 0.5
    timeout 1.5 perf record -a -o "$WORK/perf.data" \
        -e syscalls:sys_enter_sendto -e syscalls:sys_exit_recvfrom \
        -e io_uring:io_uring_submit_req -e io_uring:io_uring_complete \
        -e block:block_rq_issue -e block:block_rq_complete \
        -e sched:sched_switch -e sched:sched_wakeup -e irq:irq_handler_entry \
        >/dev/null 2>&1 || true
) &
tracer=$!
"$WORK/rtt-client" "${follower%:*}" "${follower#*:}" 5000 >/dev/null
wait "$tracer"
stop_ensemble tl
perf script -i "$WORK/perf.data" 2>/dev/null >"$WORK/perf.txt"
python3 - "$WORK/perf.txt" "$roles" "$WRITES" <<'PY'
import re, sys
trace, roles_file, writes = sys.argv[1], sys.argv[2], int(sys.argv[3])
roles = dict(l.split() for l in open(roles_file))
events, log_writes = [], {}
line_re = re.compile(r'\s*(.+?)\s+(\d+)\s+\[(\d+)\]\s+([\d.]+):\s+(\S+):\s*(.*)')

def who(tid, comm):
    if tid in roles:
        return roles[tid]
    if comm.startswith("lg-") or comm.startswith("rtt-client"):
        return "client"
    return comm[:12]

for line in open(trace):
    m = line_re.match(line)
    if not m:
        continue
    comm, tid, cpu, t, name, rest = m.groups()
    actor = who(tid, comm)
    add = lambda text: events.append((float(t) * 1e6, int(cpu), actor, text))
    if name == "syscalls:sys_enter_sendto":
        add("send %d bytes" % int(re.search(r"len: (0x[0-9a-f]+)", rest).group(1), 16))
    elif name == "syscalls:sys_exit_recvfrom":
        n = int(rest.split()[0], 16)
        if 0 < n < 1 << 63:
            add("recv %d bytes" % n)
    elif name == "io_uring:io_uring_submit_req" and "WRITE_FIXED" in rest:
        req = re.search(r"req (0x[0-9a-f]+)", rest)
        if req:
            log_writes[req.group(1)] = actor
        add("log write submitted")
    elif name == "io_uring:io_uring_submit_req" and "opcode SEND" in rest:
        # F1's reply on its client ring, or a member's peer frames sent
        # together (src/peer/send_batch.rs).
        add("send (io_uring)")
    elif name == "io_uring:io_uring_complete":
        # Completions posted without a request (multishot recv, the
        # shards' client ring) print "req (nil)".
        req = re.search(r"req (0x[0-9a-f]+)", rest)
        owner = log_writes.pop(req.group(1), None) if req else None
        if owner:
            events.append((float(t) * 1e6, int(cpu), owner, "log write completes"))
    elif name == "block:block_rq_issue":
        add("disk issue " + rest.split()[1])
    elif name == "block:block_rq_complete":
        add("disk done " + rest.split()[1])
    elif name == "irq:irq_handler_entry":
        add("irq " + rest.split("name=")[1])
    elif name == "sched:sched_wakeup":
        w = re.search(r"comm=(.*?) pid=(\d+).*target_cpu=(\d+)", rest)
        add("wakes %s on cpu%d" % (who(w.group(2), w.group(1)), int(w.group(3))))
    elif name == "sched:sched_switch":
        s = re.search(r"prev_comm=(.*?) prev_pid=(\d+).*prev_state=(\S+) ==> next_comm=(.*?) next_pid=(\d+)", rest)
        state = {"R": "preempted", "R+": "preempted", "S": "sleeps", "D": "waits (D)", "I": "idles"}.get(s.group(3), s.group(3))
        add("%s, switch to %s" % (state, who(s.group(5), s.group(4))))
events.sort()
# A write starts with the client's send of a create (larger than a get).
starts = [i for i, e in enumerate(events) if e[2] == "client" and e[3].startswith("send") and int(e[3].split()[1]) > 80]
if len(starts) < writes + 2:
    sys.exit("too few writes traced (%d)" % len(starts))
first = len(starts) // 2
for k in range(first, first + writes):
    t0 = events[starts[k]][0]
    print("--- write %d" % (k - first + 1))
    for t, cpu, actor, text in events[starts[k]:starts[k + 1]]:
        print("%7.0f  cpu%d  %-12s %s" % (t - t0, cpu, actor, text))
PY
