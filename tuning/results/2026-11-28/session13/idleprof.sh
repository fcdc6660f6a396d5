#!/usr/bin/env bash
# idleprof.sh KIND [N]: one idle session (tuning/rtt-client.c: N each of
# create, set, get, delete, 1 KiB) against a standalone ringkeeper (KIND=rk,
# RK=binary) or tuning/request-floor.c --log (KIND=floor), server and client
# on CPU 1. One warm-up client run and SETTLE seconds (3) first, so that the
# next log segment's zero-fill, which the first write starts, is done. Prints
# the server's user and system time per request (from /proc/PID/stat, in
# clock ticks: coarse, use N >= 5000), the disk's requests per request, the
# client's latencies, and perf stat's context switches, task-clock and
# io_uring_enter calls per request. PERF=1 also records a profile
# (PERFARGS, default -F 20000 -g) as PERF_OUT (default ./idleprof.perf.data).
source "$(dirname "$0")/../../../lib.sh"
KIND=$1; N=${2:-5000}
RINGKEEPER=${RK:-$RINGKEEPER}
SERVER_TASKSET=(taskset -c 1)
D=$WORK
cc -O2 -o "$D/rtt-client" "$ROOT/tuning/rtt-client.c"
cc -O2 -o "$D/request-floor" "$ROOT/tuning/request-floor.c" -luring
if [ "$KIND" = rk ]; then
    start_rk idle
    SP=$PID PORT=${ADDR#*:}
else
    PORT=$(free_port); mkdir -p "$D/floor"
    "${SERVER_TASKSET[@]}" "$D/request-floor" uring "$PORT" 1024 --log "$D/floor" >"$D/floor.log" 2>&1 &
    SP=$!; PIDS+=("$SP")
    wait_ready "$PORT"
fi
taskset -c 1 "$D/rtt-client" 127.0.0.1 "$PORT" 5 1024 >/dev/null
sleep "${SETTLE:-3}"
disk() { awk '$3 == "vda" {print $8, $10, $11}' /proc/diskstats; }
read -r w0 s0 f0 <<<"$(disk)"; T0=$(awk '{print $14, $15}' "/proc/$SP/stat")
PERF_REC=()
[ -n "${PERF:-}" ] && PERF_REC=(perf record ${PERFARGS:--F 20000 -g} -p "$SP" -o "${PERF_OUT:-$PWD/idleprof.perf.data}" --)
# perf stat counts the server while the client runs.
perf stat -e ${STATEV:-context-switches,task-clock,syscalls:sys_enter_io_uring_enter} -p "$SP" -o "$D/stat" -- \
    "${PERF_REC[@]}" taskset -c 1 "$D/rtt-client" 127.0.0.1 "$PORT" "$N" 1024 >"$D/rtt" 2>/dev/null
T1=$(awk '{print $14, $15}' "/proc/$SP/stat"); read -r w1 s1 f1 <<<"$(disk)"
R=$((4 * N)); HZ=$(getconf CLK_TCK)
echo "$T0 $T1" | awk -v n=$R -v hz="$HZ" '{printf "user us/req %.1f sys us/req %.1f\n", ($3-$1)*1e6/hz/n, ($4-$2)*1e6/hz/n}'
echo "disk writes/req $(((w1 - w0) * 1000 / R))e-3 KB/req $(((s1 - s0) * 1000 / 2 / R))e-3"
cat "$D/rtt"
awk -v n=$R '/context|task-clock|io_uring|probe/ {printf "  %s per req: %.3f\n", $2, $1/n}' "$D/stat"
