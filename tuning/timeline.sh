#!/usr/bin/env bash
# Figure 8 on one standalone server: throughput every 100 ms at a fixed mix
# while the server is killed (kill -9) at KILL_AT (10) s and restarted at
# RESTART_AT (12) s, over DURATION (25) s.
# Usage: [KILL_AT=s RESTART_AT=s DURATION=s] tuning/timeline.sh rk|zk [loadgen args...]
# Both servers recover the mix's znodes and the sessions from their logs:
# sessions reconnect with their ids and carry on.
source "$(dirname "$0")/lib.sh"
which=${1:-rk}
shift || true
kill_at=${KILL_AT:-10}
restart_at=${RESTART_AT:-12}
build
events=()
case $which in
    rk)
        start_rk rk
        events=(--event "$kill_at:kill -9 $PID" --event "$restart_at:$(rk_cmd rk)")
        ;;
    zk)
        start_zk zk
        events=(--event "$kill_at:kill -9 $PID" --event "$restart_at:$(zk_cmd zk)")
        ;;
    *) echo "usage: $0 rk|zk [loadgen args]" >&2; exit 2 ;;
esac
"$LOADGEN" timeline --target "$which=$ADDR" --duration-s "${DURATION:-25}" --warmup-s 3 "${events[@]}" "$@" \
    --json "$OUT/timeline-$which.json" --csv "$OUT/timeline-$which.csv" --plot "$OUT/timeline-$which.svg"
