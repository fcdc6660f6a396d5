#!/usr/bin/env bash
# One session's synchronous writes against the durability target: write
# latency within 1.5x of (loopback round trip + one fdatasync). Each round
# measures, back to back: ringkeeper's sync create/set/get p50 (the get is
# the round trip), Apache ZooKeeper's, and one fdatasync on this disk
# (fdatasync-latency.py, in the directory the servers write to). Only one
# server runs at a time: an idle JVM next to ringkeeper still costs it.
# Usage: tuning/write-latency.sh [ROUNDS] [COUNT]; EXTRA_RK="key=value"
# adds lines to ringkeeper's zoo.cfg.
source "$(dirname "$0")/lib.sh"
ROUNDS=${1:-5}
COUNT=${2:-2000}
build

# p50 in microseconds of PHASE in a latency CSV.
p50() { awk -F, -v ph="$2" '$4 == ph { print $9 }' "$1"; }

printf '%-5s %8s %9s %8s | %9s %9s | %9s %9s | %7s %7s\n' round rtt fdatasync target \
    rk_create rk_set zk_create zk_set rk/base zk/base
for i in $(seq "$ROUNDS"); do
    start_rk "rk$i" "${EXTRA_RK:-}"
    "$LOADGEN" latency --target "rk=$ADDR" --count "$COUNT" --mode sync -q --csv "$WORK/rk.csv" >/dev/null
    kill -9 "$PID"
    start_zk "zk$i"
    "$LOADGEN" latency --target "zk=$ADDR" --count "$COUNT" --mode sync -q --csv "$WORK/zk.csv" >/dev/null
    kill -9 "$PID"
    fsync=$(FDATASYNC_DIR="$WORK" python3 "$ROOT/tuning/fdatasync-latency.py" | awk '{print $3}')
    rtt=$(p50 "$WORK/rk.csv" get)
    rkc=$(p50 "$WORK/rk.csv" create)
    rks=$(p50 "$WORK/rk.csv" set)
    zkc=$(p50 "$WORK/zk.csv" create)
    zks=$(p50 "$WORK/zk.csv" set)
    python3 - "$i" "$rtt" "$fsync" "$rkc" "$rks" "$zkc" "$zks" <<'EOF'
import sys
i, rtt, fs, rkc, rks, zkc, zks = sys.argv[1:]
rtt, fs, rkc, rks, zkc, zks = map(float, (rtt, fs, rkc, rks, zkc, zks))
base = rtt + fs
print("%-5s %6.0fus %7.0fus %6.0fus | %7.0fus %7.0fus | %7.0fus %7.0fus | %6.2fx %6.2fx"
      % (i, rtt, fs, 1.5 * base, rkc, rks, zkc, zks, rkc / base, zkc / base))
EOF
done
echo "rk/base and zk/base: sync create p50 / (round trip + fdatasync); the target is 1.5x"
