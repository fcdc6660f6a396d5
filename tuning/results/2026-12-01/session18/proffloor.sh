#!/usr/bin/env bash
cd /work/main
export SERVER_CPUS=1 CLIENT_CPUS=0
READS=${1:-0}
source tuning/lib.sh
port=$(free_port); mkdir -p $WORK/fl.d
taskset -c 1 /tmp/s18/request-floor uring $port 1024 --log $WORK/fl.d > $WORK/fl.log 2>&1 &
PID=$!; PIDS+=($PID)
sleep 0.5
"${LOADGEN_PINNED[@]}" mix --target 127.0.0.1:$port --reads "$READS" --sessions 32 --outstanding 8 --value-bytes 1024 --warmup-s 2 --duration-s 8 -q > /tmp/s18/lgf-$READS.txt 2>&1 &
LG=$!
sleep 3
perf record -F 4999 -g -p "$PID" -o /tmp/s18/perff-$READS.data -- sleep 4 2>/dev/null
wait $LG
tail -3 /tmp/s18/lgf-$READS.txt
