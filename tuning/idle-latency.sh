#!/usr/bin/env bash
# One idle session's round trips, every server measured by the same lean
# client (tuning/rtt-client.c: one blocking socket, no runtime), against the
# bare paths with no server in the way (issue 27 §3). Each round, back to
# back:
#   path-floor   tuning/path-floor.c: the bare read round trip and the bare
#                write through a follower (four processes, blocking
#                sockets, O_DIRECT|O_DSYNC writes), the faster of its ways;
#   req-floor    tuning/request-floor.c (uring), ZooKeeper frames answered
#                with no tree and no log: the bare server for rtt-client;
#   rk / rk-streams  a standalone ringkeeper on its client ring / on
#                glommio's streams (ringkeeper.clientRing=false);
#   rk-base      with BASE=path/to/ringkeeper: another build, standalone
#                (a before/after of one session's sync writes);
#   rk-f / zk-f  a follower of a fresh 3-server ensemble (ringkeeper,
#                Apache ZooKeeper): the write through a follower.
# PIN=same puts every server and the client on CPU 1 (a wake-up stays on
# its CPU); PIN=apart puts servers on CPU 1 and the client on CPU 0 (every
# round trip is two cross-CPU wake-ups, costly in a VM); unset, the
# scheduler places them (the bare paths always float). The ensembles and
# path-floor are never pinned. Medians of the rounds' p50s at the end.
# Usage: tuning/idle-latency.sh [ROUNDS] [COUNT]
source "$(dirname "$0")/lib.sh"
ROUNDS=${1:-5}
COUNT=${2:-2000}
build
command -v cc >/dev/null || { echo "cc is needed: apt-get install -y gcc" >&2; exit 1; }
[ -f /usr/include/liburing.h ] || { echo "liburing is needed: apt-get install -y liburing-dev" >&2; exit 1; }
cc -O2 -pthread -o "$WORK/path-floor" "$ROOT/tuning/path-floor.c"
cc -O2 -o "$WORK/request-floor" "$ROOT/tuning/request-floor.c" -luring
cc -O2 -o "$WORK/rtt-client" "$ROOT/tuning/rtt-client.c"
case "${PIN:-}" in
    same) SERVER_TASKSET=(taskset -c 1); CLIENT=(taskset -c 1 "$WORK/rtt-client") ;;
    apart) SERVER_TASKSET=(taskset -c 1); CLIENT=(taskset -c 0 "$WORK/rtt-client") ;;
    "") CLIENT=("$WORK/rtt-client") ;;
    *) echo "PIN is same, apart or unset" >&2; exit 2 ;;
esac
RESULTS=$WORK/results
: >"$RESULTS"

# record NAME HOST:PORT: one rtt-client run; a line per phase in RESULTS
# if every phase completed, else nothing and a failed status.
record() {
    local out
    out=$("${CLIENT[@]}" "${2%:*}" "${2#*:}" "$COUNT") || return 1
    awk -v n="$1" '{print n, $2, $4; printf "  %-10s %-6s p50 %7.1f us  p90 %7.1f us\n", n, $2, $4, $7 > "/dev/stderr"}' \
        <<<"$out" >>"$RESULTS"
}

for r in $(seq "$ROUNDS"); do
    echo "round $r" >&2
    "$WORK/path-floor" "$WORK" "$COUNT" | awk '{print $5, $9}' | sort -k2 -n | head -1 |
        awk '{print "path-floor get", $1; print "path-floor write", $2;
              printf "  path-floor read p50 %7.1f us  write p50 %7.1f us\n", $1, $2 > "/dev/stderr"}' >>"$RESULTS"
    port=$(free_port)
    "${SERVER_TASKSET[@]}" "$WORK/request-floor" uring "$port" 25 >"$WORK/request-floor.log" 2>&1 &
    floor_pid=$!
    PIDS+=("$floor_pid")
    wait_ready "$port"
    record req-floor "127.0.0.1:$port"
    kill "$floor_pid"
    start_rk "rk$r"
    record rk "$ADDR"
    kill -9 "$PID"
    start_rk "rks$r" "ringkeeper.clientRing=false"
    record rk-streams "$ADDR"
    kill -9 "$PID"
    if [ -n "${BASE:-}" ]; then
        RINGKEEPER=$BASE start_rk "rkb$r"
        record rk-base "$ADDR"
        kill -9 "$PID"
    fi
    # Apache ZooKeeper 3.8.0 now and then holds a request until the
    # session expires (tuning/follower-latency.sh): up to 3 attempts.
    for flavor in rk zk; do
        base=80; [ $flavor = zk ] && base=90
        for attempt in 1 2 3; do
            start_ensemble "$flavor-f$r-$attempt" "$flavor" "$base" 3 2000
            leader=$(leader_index)
            read -r i _ <<<"$(follower_indexes "$leader")"
            ok=1
            record "$flavor-f" "${MEMBER_ADDR[i]}" || ok=""
            stop_ensemble "$flavor-f$r-$attempt"
            [ -n "$ok" ] && break
            echo "  ($flavor-f attempt $attempt failed)" >&2
        done
    done
done

echo "medians over $ROUNDS rounds (p50s, us), PIN=${PIN:-unset}, count $COUNT:"
python3 - "$RESULTS" <<'PY'
import statistics, sys
vals = {}
for line in open(sys.argv[1]):
    name, phase, v = line.split()
    vals.setdefault((name, phase), []).append(float(v))
med = {k: statistics.median(v) for k, v in vals.items()}
for (name, phase), m in sorted(med.items()):
    print("%-11s %-7s %8.1f   (%s)" % (name, phase, m, " ".join("%.0f" % x for x in vals[(name, phase)])))
nan = float("nan")
m = lambda name, phase: med.get((name, phase), nan)
bare_read, bare_write = m("path-floor", "get"), m("path-floor", "write")
print("rk get / path-floor read:             %.2fx (target <= 1.5x)" % (m("rk", "get") / bare_read))
print("rk get / req-floor get (same client): %.2fx" % (m("rk", "get") / m("req-floor", "get")))
# The ensemble floats and the client may be pinned: a round whose follower
# runs on the other vCPU pays two cross-vCPU wake-ups (networking.md §22).
print("rk-f get / path-floor read:           %.2fx (the member floats)" % (m("rk-f", "get") / bare_read))
for op in ("create", "set"):
    print("rk-f %-6s / path-floor write:      %.2fx (target <= 1.25x); zk-f %.2fx"
          % (op, m("rk-f", op) / bare_write, m("zk-f", op) / bare_write))
    if ("rk-base", op) in med:
        print("rk %-6s / rk-base %-6s:          %.2fx (no loss: <= 1.05x)" % (op, op, m("rk", op) / m("rk-base", op)))
PY
