#!/usr/bin/env bash
# ab.sh A_BIN B_BIN [loadgen compare args]: two standalone builds on CPU 1,
# the loadgen on CPU 0, alternating point by point, with each server's cost.
source /work/main/tuning/lib.sh
A=$1 B=$2; shift 2
SERVER_TASKSET=(taskset -c 1)
RINGKEEPER=$A start_rk a; AA=$ADDR AP=$PID
RINGKEEPER=$B start_rk b; BA=$ADDR BP=$PID
sleep 3
taskset -c 0 "$LOADGEN" compare --target a="$AA" --target b="$BA" --server-pid a=$AP --server-pid b=$BP "$@"
