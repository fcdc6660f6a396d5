#!/usr/bin/env bash
# Figure 8 on one standalone server: throughput every 100 ms at a fixed mix
# while the server is killed (kill -9) at 10 s and restarted at 12 s.
# Usage: tuning/timeline.sh rk|zk [loadgen args...]
# ringkeeper keeps no data across a restart yet, so for rk the mix's znodes
# are created again at 13 s (until then its NONODE answers are counted as
# errors); Apache ZooKeeper recovers them from its log.
source "$(dirname "$0")/lib.sh"
which=${1:-rk}
shift || true
build
events=()
case $which in
    rk)
        start_rk rk
        events=(--event "10:kill -9 $PID" --event "12:$(rk_cmd rk)"
                --event "13:$LOADGEN setup --target $ADDR")
        ;;
    zk)
        start_zk zk
        events=(--event "10:kill -9 $PID" --event "12:$(zk_cmd zk)")
        ;;
    *) echo "usage: $0 rk|zk [loadgen args]" >&2; exit 2 ;;
esac
"$LOADGEN" timeline --target "$which=$ADDR" --duration-s 25 --warmup-s 3 "${events[@]}" "$@" \
    --json "$OUT/timeline-$which.json" --csv "$OUT/timeline-$which.csv" --plot "$OUT/timeline-$which.svg"
