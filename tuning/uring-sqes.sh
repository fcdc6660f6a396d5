#!/usr/bin/env bash
# io_uring submissions per request, by opcode, of a standalone ringkeeper
# and of the floor (tuning/request-floor.c, uring variant with its log),
# under the load generator's mix at 32 x 8, 1 KiB values: how many SEND
# entries (each one a loopback TCP send, and a wake-up of the client) a
# request costs each server. The issue-27 tables give CPU per op; this
# says how many sends that CPU paid for. At 50% reads a connection's
# replies leave in two groups (reads answered at once, writes at their
# commit), so both servers send more often per request than at 0% or
# 100%: the kernel part of that is the workload's, not the server's.
# Counts the io_uring:io_uring_submit_req tracepoint with `perf record`
# for WINDOW_S seconds inside the measured span of the mix.
# Needs perf (apt-get install -y linux-perf), liburing-dev and a C compiler.
# Usage: [RK=path/to/ringkeeper] tuning/uring-sqes.sh [READS...]
#        (default 0 50 100)
source "$(dirname "$0")/lib.sh"
command -v perf >/dev/null || { echo "perf is needed: apt-get install -y linux-perf" >&2; exit 1; }
READS_LIST=("$@")
[ $# -gt 0 ] || READS_LIST=(0 50 100)
WINDOW_S=${WINDOW_S:-3}
RINGKEEPER=${RK:-$RINGKEEPER}
[ -n "${RK:-}" ] || build
build_floor
SERVER_TASKSET=(taskset -c "${SERVER_CPUS:-1}")
LOADGEN_PINNED=(taskset -c "${CLIENT_CPUS:-0}" "$LOADGEN")

# count NAME READS: submissions per request of the server at ADDR (PID).
count() {
    local name=$1 reads=$2 data=$WORK/$1-$2.perf perf_pid ops
    mix() {
        "${LOADGEN_PINNED[@]}" mix --target "$ADDR" --reads "$reads" --sessions 32 \
            --outstanding 8 --value-bytes 1024 -q "$@"
    }
    mix --warmup-s 2 --duration-s 1 >/dev/null
    mix --warmup-s 1 --duration-s $((WINDOW_S + 2)) --csv "$WORK/$name-$reads.csv" >/dev/null &
    local mix_pid=$!
    PIDS+=("$mix_pid")
    sleep 1.5
    timeout $((WINDOW_S + 10)) perf record -q -e io_uring:io_uring_submit_req -p "$PID" \
        -o "$data" -- sleep "$WINDOW_S" >/dev/null 2>&1 &
    perf_pid=$!
    PIDS+=("$perf_pid")
    wait "$perf_pid" || true
    wait "$mix_pid"
    # Requests in the window: the mix's rate times the window.
    ops=$(python3 -c "
import csv
r = list(csv.DictReader(open('$WORK/$name-$reads.csv')))[0]
print(int(float(r['ops_per_s']) * $WINDOW_S))")
    perf script -i "$data" -F trace 2>/dev/null | grep -o 'opcode [A-Z_0-9]*' | sort | uniq -c |
        awk -v ops="$ops" -v name="$name" -v reads="$reads" '
            { n[$3] = $1; all += $1 }
            END {
                printf "%-6s %3d%% reads: %.3f submissions per request (%d requests):", name, reads, all / ops, ops
                for (o in n) if (n[o] / ops >= 0.001) printf " %s %.3f", o, n[o] / ops
                printf "\n"
            }'
}

for reads in "${READS_LIST[@]}"; do
    start_rk rk
    count rk "$reads"
    kill -9 "$PID" 2>/dev/null || true
    start_floor floor uring-log
    count floor "$reads"
    kill -9 "$PID" 2>/dev/null || true
done
