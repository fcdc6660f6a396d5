#!/usr/bin/env bash
# Table 2: W workers, each a synchronous create then an asynchronous
# delete; creates/s for W = 1, 10, 20 against ringkeeper, Apache ZooKeeper
# and Apache ZooKeeper with forceSync=no, one server at a time.
# Extra arguments go to the loadgen, e.g. --count 20000; TARGETS="zk" runs
# only some of rk, zk, zk-nosync.
source "$(dirname "$0")/lib.sh"
build
for t in ${TARGETS:-rk zk zk-nosync}; do
    case $t in
        rk) start_rk "$t" ;;
        zk) start_zk "$t" ;;
        zk-nosync) start_zk "$t" "forceSync=no" ;;
    esac
    "$LOADGEN" creates --target "$t=$ADDR" "$@" \
        --json "$OUT/creates-$t.json" --csv "$OUT/creates-$t.csv" --plot "$OUT/creates-$t.svg"
    kill -9 "$PID"
done
