#!/usr/bin/env bash
# prof.sh READS: perf record a standalone rk (server on CPU 1) under 32x8 at READS% reads.
cd /work/main
export SERVER_CPUS=1 CLIENT_CPUS=0
READS=${1:-0}
source tuning/lib.sh
start_rk rk
"${LOADGEN_PINNED[@]}" mix --target "$ADDR" --reads "$READS" --sessions 32 --outstanding 8 --value-bytes 1024 --warmup-s 2 --duration-s 8 -q > /tmp/s18/lg-$READS.txt 2>&1 &
LG=$!
sleep 3
perf record -F 2999 --call-graph dwarf,16384 -p "$PID" -o /tmp/s18/perf-$READS.data -- sleep 2 2>/dev/null
wait $LG
tail -5 /tmp/s18/lg-$READS.txt
