#!/usr/bin/env bash
# Figure 5, standalone, for two builds of ringkeeper and Apache ZooKeeper in
# one run (the same client, targets alternating point by point): an A/B of
# a change. The first argument is the other build's server binary, e.g. a
# worktree of an older commit built with
#   git worktree add /tmp/old c4c51c5
#   (cd /tmp/old && CARGO_TARGET_DIR=/tmp/old-target cargo build --release --bin ringkeeper)
#   tuning/compare-builds.sh /tmp/old-target/release/ringkeeper --reads 0,50,100 --duration-s 5 --rounds 3
# MODE=ensemble compares 3-server ensembles of each (as tuning/ensemble.sh).
# Standalone, each server's CPU, syscalls and context switches per op are
# reported too (loadgen --server-pid). SERVER_CPUS=1 CLIENT_CPUS=0 pins the
# servers and the client apart (tuning/lib.sh).
# Extra arguments go to the loadgen.
source "$(dirname "$0")/lib.sh"
OTHER=${1:?usage: compare-builds.sh OTHER_RINGKEEPER_BINARY [loadgen args]}
shift
build
require_free_disk compare-builds
if [ "${MODE:-standalone}" = ensemble ]; then
    start_ensemble rk rk 10 3 2000;                         RK=$ENSEMBLE
    RINGKEEPER=$OTHER start_ensemble rk-other rk 30 3 2000; RKO=$ENSEMBLE
    start_ensemble zk zk 50 3 2000;                         ZK=$ENSEMBLE
    COST=()
else
    start_rk rk;                          RK=$ADDR; RK_PID=$PID
    RINGKEEPER=$OTHER start_rk rk-other;  RKO=$ADDR; RKO_PID=$PID
    start_zk zk;                          ZK=$ADDR; ZK_PID=$PID
    COST=(--server-pid "rk=$RK_PID" --server-pid "rk-other=$RKO_PID" --server-pid "zk=$ZK_PID")
fi
"${LOADGEN_PINNED[@]}" compare --target rk="$RK" --target rk-other="$RKO" --target zk="$ZK" "${COST[@]}" \
    --warmup-s 5 "$@" \
    --json "$OUT/compare-builds.json" --csv "$OUT/compare-builds.csv" \
    --plot "$OUT/compare-builds.svg"
