#!/usr/bin/env bash
# Figure 5, standalone, for two builds of ringkeeper and Apache ZooKeeper in
# one run (the same client, targets alternating point by point): an A/B of
# a change. The first argument is the other build's server binary, e.g. a
# worktree of an older commit built with
#   git worktree add /tmp/old c4c51c5
#   (cd /tmp/old && CARGO_TARGET_DIR=/tmp/old-target cargo build --release --bin ringkeeper)
#   tuning/compare-builds.sh /tmp/old-target/release/ringkeeper --reads 0,50,100 --duration-s 5 --rounds 3
# MODE=ensemble compares 3-server ensembles of each (as tuning/ensemble.sh).
# Extra arguments go to the loadgen.
source "$(dirname "$0")/lib.sh"
OTHER=${1:?usage: compare-builds.sh OTHER_RINGKEEPER_BINARY [loadgen args]}
shift
build
if [ "${MODE:-standalone}" = ensemble ]; then
    start_ensemble rk rk 10 3 2000;                         RK=$ENSEMBLE
    RINGKEEPER=$OTHER start_ensemble rk-other rk 30 3 2000; RKO=$ENSEMBLE
    start_ensemble zk zk 50 3 2000;                         ZK=$ENSEMBLE
else
    start_rk rk;                          RK=$ADDR
    RINGKEEPER=$OTHER start_rk rk-other;  RKO=$ADDR
    start_zk zk;                          ZK=$ADDR
fi
"$LOADGEN" compare --target rk="$RK" --target rk-other="$RKO" --target zk="$ZK" \
    --warmup-s 5 "$@" \
    --json "$OUT/compare-builds.json" --csv "$OUT/compare-builds.csv" \
    --plot "$OUT/compare-builds.svg"
