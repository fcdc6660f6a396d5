#!/usr/bin/env bash
# 2-shard A/B: this build vs OTHER, standalone, shards=2 core own, unpinned.
cd "$(dirname "$0")/../../../.."
source tuning/lib.sh
OTHER=$1; shift
build
CFG=$'ringkeeper.shards=2\nringkeeper.consensusExecutor=own'
start_rk rk "$CFG";                  RK=$ADDR; RK_PID=$PID
RINGKEEPER=$OTHER start_rk rk-other "$CFG"; RKO=$ADDR; RKO_PID=$PID
"${LOADGEN_PINNED[@]}" compare --target rk="$RK" --target rk-other="$RKO" \
  --server-pid "rk=$RK_PID" --server-pid "rk-other=$RKO_PID" --warmup-s 3 "$@"
