#!/usr/bin/env bash
# What one idle session's request costs a standalone server, counted rather
# than timed: the io_uring operations it submits (by opcode), its
# io_uring_enter and read() system calls, its context switches and its CPU
# time, each per request, for this build and (with BASE) another, rounds
# alternating. The client is tuning/rtt-client.c (create, set, get, delete:
# COUNT of each, 1 KiB values), the server and the client share CPU 1 (as
# idle-latency.sh's PIN=same). perf's tracepoints cost a little per event,
# so the CPU column reads high; compare builds within one run.
# Needs perf and root. Usage: [BASE=/path/to/ringkeeper] tuning/idle-ops.sh [ROUNDS] [COUNT]
source "$(dirname "$0")/lib.sh"
ROUNDS=${1:-2}
COUNT=${2:-1000}
build
cc -O2 -o "$WORK/rtt-client" "$ROOT/tuning/rtt-client.c"
SERVER_TASKSET=(taskset -c 1)
builds=("rk=$RINGKEEPER")
[ -n "${BASE:-}" ] && builds+=("rk-base=$BASE")

# measure NAME: one server of that build, one client run, its counts.
measure() {
    local name=$1 data=$WORK/$1-$2.perf tracer
    RINGKEEPER=${3} start_rk "$1-$2"
    perf record -q -o "$data" -p "$PID" \
        -e io_uring:io_uring_submit_req -e syscalls:sys_enter_io_uring_enter \
        -e syscalls:sys_enter_read -e sched:sched_switch -e task-clock \
        -- sleep 600 >/dev/null 2>&1 &
    tracer=$!
    sleep 0.5
    taskset -c 1 "$WORK/rtt-client" 127.0.0.1 "${ADDR#*:}" "$COUNT" 1024 >"$WORK/$1-$2.rtt"
    kill -INT "$tracer"
    wait "$tracer" || true
    kill "$PID"
    printf '%-8s round %s  ' "$1" "$2"
    awk '{ printf "%s %s  ", $2, $4 }' "$WORK/$1-$2.rtt"
    echo
    perf script -i "$data" -F event,trace,period 2>/dev/null | awk -v n=$((4 * COUNT)) '
        /io_uring_submit_req/ { for (i = 1; i <= NF; i++) if ($i == "opcode") { op = $(i + 1); sub(",", "", op); c[op]++ } }
        /sys_enter_io_uring_enter/ { c["io_uring_enter"]++ }
        /sys_enter_read/ { c["read()"]++ }
        /sched_switch/ { c["context switches"]++ }
        /task-clock/ { cpu += $1 }
        END {
            for (k in c) if (c[k] / n >= 0.005) printf "    %-18s %6.2f per request\n", k, c[k] / n
            printf "    %-18s %6.1f us per request\n", "cpu", cpu / n / 1000
        }' | sort
}

for r in $(seq "$ROUNDS"); do
    for b in "${builds[@]}"; do
        measure "${b%%=*}" "$r" "${b#*=}"
    done
done
