#!/usr/bin/env bash
# A standalone ringkeeper and request-floor --log under one rtt-client:
# context switches, CPU and io_uring_enter per write (perf stat).
source "$(dirname "$0")/../../../lib.sh"
cc -O2 -o "$WORK/rtt-client" "$ROOT/tuning/rtt-client.c"
cc -O2 -o "$WORK/request-floor" "$ROOT/tuning/request-floor.c" -luring
N=2000
measure() { # name pid port
  perf stat -e context-switches,cpu-clock,syscalls:sys_enter_io_uring_enter -p $2 -o $WORK/ps.$1 -- sleep 100 >/dev/null 2>&1 & local sp=$!
  sleep 0.3
  "$WORK/rtt-client" 127.0.0.1 $3 $N 1024 > $WORK/rc.$1
  kill -INT $sp; wait $sp 2>/dev/null
  echo "== $1"; grep -E "create|set" $WORK/rc.$1; grep -E "context|cpu-clock|io_uring" $WORK/ps.$1 | awk -v n=$((3*N)) '{printf "  %s per write: %.2f\n", $2, $1/n}'
}
start_rk solo; measure rk $PID ${ADDR#*:}
port=$(free_port); mkdir -p $WORK/fl
$WORK/request-floor uring $port 1024 --log $WORK/fl > $WORK/fl.log 2>&1 & FP=$!; PIDS+=($FP)
sleep 1; measure floor-log $FP $port
