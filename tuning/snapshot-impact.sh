#!/usr/bin/env bash
# Issue 11, section 1: does a snapshot of a big tree lower write throughput
# while it runs? Loads ZNODES (1M) znodes over 100 parents with the scale
# experiment, then runs a write-only timeline (setData, 100-byte values,
# SESSIONS x 100 outstanding, throughput every 100 ms) for DURATION (40) s.
# The server snapshots by its own policy during the timeline (snapCount
# txns and half a snapshot's worth of log since the last one: every few
# seconds at this rate); snapshot-impact.py lines the server's "snapshot
# started"/"snapshot written" log lines up with the samples and compares
# writes/s while a snapshot runs with writes/s while none does, and with
# writes/s of a second server, loaded the same way, that takes no snapshot
# (snapCount 10^9): a paced snapshot runs most of the time, so "between"
# has few samples.
#
#   tuning/snapshot-impact.sh                  # 1M znodes, 40 s
#   ZNODES=100k DURATION=10 tuning/snapshot-impact.sh   # a smoke run
#   SNAPSHOT_MBPS=0 tuning/snapshot-impact.sh  # unpaced snapshots
#
# Environment: ZNODES, DURATION, SESSIONS (8), SNAPSHOT_MBPS (the server's
# ringkeeper.snapshotWriteMBps; unset: its default), OUT. Results:
# $OUT/snapshot-impact.{json,csv} (the timeline),
# $OUT/snapshot-impact-nosnap.json (the baseline's) and
# $OUT/snapshot-impact-summary.json.
source "$(dirname "$0")/lib.sh"
build
pace=""
[ -n "${SNAPSHOT_MBPS:-}" ] && pace="ringkeeper.snapshotWriteMBps=$SNAPSHOT_MBPS"

# load_and_time NAME CFG TIMELINE_JSON [TIMELINE ARGS]: a server with CFG,
# ZNODES znodes, then the write-only timeline.
load_and_time() {
    local name=$1 cfg=$2 json=$3
    shift 3
    RUST_LOG=info start_rk "$name" "$cfg"
    echo "== $name (pid $PID, $ADDR): loading ${ZNODES:-1M} znodes" >&2
    "$LOADGEN" scale --target "rk=$ADDR" --layout spread --parents 100 \
        --checkpoints "${ZNODES:-1M}" --server-pid "$PID" --warmup 0 -q >/dev/null
    echo "== $name: write-only timeline, ${DURATION:-40} s" >&2
    "$LOADGEN" timeline --target "rk=$ADDR" --read-pct 0 --sessions "${SESSIONS:-8}" \
        --outstanding 100 --value-bytes 100 --znodes 1000 --duration-s "${DURATION:-40}" \
        -q --json "$json" "$@"
    kill -9 "$PID"
}

load_and_time rk "forceSync=yes
$pace" "$OUT/snapshot-impact.json" \
    --event "0:date +%s.%N >$WORK/t0" --csv "$OUT/snapshot-impact.csv"
load_and_time rk-nosnap "forceSync=yes
snapCount=1000000000" "$OUT/snapshot-impact-nosnap.json"
python3 "$ROOT/tuning/snapshot-impact.py" "$OUT/snapshot-impact.json" "$WORK/t0" \
    "$WORK/rk/server.log" --baseline "$OUT/snapshot-impact-nosnap.json" \
    --json "$OUT/snapshot-impact-summary.json"
