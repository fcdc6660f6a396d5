#!/usr/bin/env bash
# Issue 11, section 1: does a snapshot of a big tree lower write throughput
# while it runs? Loads ZNODES (1M) znodes over 100 parents with the scale
# experiment, then runs a write-only timeline (setData, 100-byte values,
# SESSIONS x 100 outstanding, throughput every 100 ms) for DURATION (40) s.
# The server snapshots by its own policy during the timeline (snapCount
# txns and half a snapshot's worth of log since the last one: every few
# seconds at this rate); snapshot-impact.py lines the server's "snapshot
# started"/"snapshot written" log lines up with the samples and compares
# writes/s while a snapshot runs with writes/s while none does.
#
#   tuning/snapshot-impact.sh                  # 1M znodes, 40 s
#   ZNODES=100k DURATION=10 tuning/snapshot-impact.sh   # a smoke run
#
# Environment: ZNODES, DURATION, SESSIONS (8), OUT. Results:
# $OUT/snapshot-impact.{json,csv} (the timeline) and
# $OUT/snapshot-impact-summary.json.
source "$(dirname "$0")/lib.sh"
build
RUST_LOG=info start_rk rk "forceSync=yes"
echo "== rk (pid $PID, $ADDR): loading ${ZNODES:-1M} znodes" >&2
"$LOADGEN" scale --target "rk=$ADDR" --layout spread --parents 100 \
    --checkpoints "${ZNODES:-1M}" --server-pid "$PID" --warmup 0 -q >/dev/null
echo "== write-only timeline, ${DURATION:-40} s" >&2
"$LOADGEN" timeline --target "rk=$ADDR" --read-pct 0 --sessions "${SESSIONS:-8}" \
    --outstanding 100 --value-bytes 100 --znodes 1000 --duration-s "${DURATION:-40}" \
    --event "0:date +%s.%N >$WORK/t0" -q \
    --json "$OUT/snapshot-impact.json" --csv "$OUT/snapshot-impact.csv"
kill -9 "$PID"
python3 "$ROOT/tuning/snapshot-impact.py" "$OUT/snapshot-impact.json" "$WORK/t0" \
    "$WORK/rk/server.log" --json "$OUT/snapshot-impact-summary.json"
