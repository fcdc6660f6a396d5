#!/usr/bin/env bash
# zk-latencies.py's phases (create, set, get, delete, ephemerals, watches),
# synchronous and asynchronous, against ringkeeper, Apache ZooKeeper and
# Apache ZooKeeper with forceSync=no, one server at a time.
# Extra arguments go to the loadgen, e.g. --count 2000; TARGETS="zk" runs
# only some of rk, zk, zk-nosync.
source "$(dirname "$0")/lib.sh"
build
for t in ${TARGETS:-rk zk zk-nosync}; do
    case $t in
        rk) start_rk "$t" ;;
        zk) start_zk "$t" ;;
        zk-nosync) start_zk "$t" "forceSync=no" ;;
    esac
    "$LOADGEN" latency --target "$t=$ADDR" "$@" \
        --json "$OUT/latency-$t.json" --csv "$OUT/latency-$t.csv" --plot "$OUT/latency-$t.svg"
    kill -9 "$PID"
done
