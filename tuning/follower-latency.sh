#!/usr/bin/env bash
# One session's synchronous writes through a follower of a 3-server
# ensemble against the target: within 1.5x of (2 round trips + one
# fdatasync). Each round, back to back: a fresh ringkeeper ensemble, the
# sync create/set/get p50 of one session on a follower (the get, served by
# the follower, is the round trip); the same on an Apache ZooKeeper
# ensemble; one fdatasync on this disk (fdatasync-latency.py, where the
# servers write). One ensemble runs at a time.
# base = 2 RTT + fdatasync (the issue's target is 1.5x base); path = 3 RTT +
# fdatasync, the sequential hops a write through a follower needs: client
# <-> follower, follower -> leader (REQUEST) and leader -> follower (COMMIT),
# leader <-> a follower (PROPOSAL, ACK) around that follower's fdatasync
# (the leader's own runs alongside). See tuning/fsync.md, session 7.
# Usage: tuning/follower-latency.sh [ROUNDS] [COUNT]
source "$(dirname "$0")/lib.sh"
ROUNDS=${1:-5}
COUNT=${2:-2000}
build

p50() { awk -F, -v ph="$2" '$4 == ph { print $9 }' "$1"; }

# follower_latency NAME FLAVOR BASE CSV
follower_latency() {
    local leader i follower=""
    start_ensemble "$1" "$2" "$3" 3 2000
    leader=$(leader_index)
    for i in 1 2 3; do [ "$i" = "$leader" ] || { follower=${MEMBER_ADDR[i]}; break; }; done
    rm -f "$4"
    # A failed run (e.g. a member restarting its election) leaves no CSV:
    # the round is skipped.
    "$LOADGEN" latency --target "$2=$follower" --count "$COUNT" --mode sync -q --csv "$4" >/dev/null || true
    stop_ensemble "$1"
}

printf '%-5s %8s %9s %8s | %9s %9s | %9s %9s | %7s %7s | %7s %7s\n' round rtt fdatasync target \
    rk_create rk_set zk_create zk_set rk/base zk/base rk/path zk/path
for i in $(seq "$ROUNDS"); do
    follower_latency "rk$i" rk 80 "$WORK/rk.csv"
    follower_latency "zk$i" zk 90 "$WORK/zk.csv"
    [ -s "$WORK/rk.csv" ] && [ -s "$WORK/zk.csv" ] || { echo "$i      (a run failed: skipped)"; continue; }
    fsync=$(FDATASYNC_DIR="$WORK" python3 "$ROOT/tuning/fdatasync-latency.py" | awk '{print $3}')
    rtt=$(p50 "$WORK/rk.csv" get)
    python3 - "$i" "$rtt" "$fsync" "$(p50 "$WORK/rk.csv" create)" "$(p50 "$WORK/rk.csv" set)" \
        "$(p50 "$WORK/zk.csv" create)" "$(p50 "$WORK/zk.csv" set)" <<'PY'
import sys
i, rtt, fs, rkc, rks, zkc, zks = sys.argv[1:]
rtt, fs, rkc, rks, zkc, zks = map(float, (rtt, fs, rkc, rks, zkc, zks))
base = 2 * rtt + fs
path = 3 * rtt + fs
print("%-5s %6.0fus %7.0fus %6.0fus | %7.0fus %7.0fus | %7.0fus %7.0fus | %6.2fx %6.2fx | %6.2fx %6.2fx"
      % (i, rtt, fs, 1.5 * base, rkc, rks, zkc, zks, rkc / base, zkc / base, rkc / path, zkc / path))
PY
done
