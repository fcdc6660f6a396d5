#!/usr/bin/env bash
# Figure 5, side by side: ringkeeper, Apache ZooKeeper (fsync per write
# batch, its default) and Apache ZooKeeper with forceSync=no (no fsync, like
# ringkeeper today), standalone, measured by the same client in one run,
# alternating targets point by point. Extra arguments go to the loadgen,
# e.g.: tuning/compare.sh --reads 0,50,100 --duration-s 5 --rounds 3
source "$(dirname "$0")/lib.sh"
build
start_rk rk;                       RK=$ADDR
start_zk zk;                       ZK=$ADDR
start_zk zk-nosync "forceSync=no"; ZKN=$ADDR
"$LOADGEN" compare --target rk="$RK" --target zk="$ZK" --target zk-nosync="$ZKN" \
    --warmup-s 5 "$@" \
    --json "$OUT/compare.json" --csv "$OUT/compare.csv" --plot "$OUT/compare.svg"
