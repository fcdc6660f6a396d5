#!/usr/bin/env bash
# loaded-ir.sh BIN RATE READS: instructions per op under a paced load, server under callgrind.
source /work/main/tuning/lib.sh
B=$1 RATE=$2 READS=$3
port=$(write_cfg ld)
valgrind --tool=callgrind --callgrind-out-file="$WORK/cg.out" "$B" --config "$WORK/ld/zoo.cfg" >"$WORK/ld/server.log" 2>&1 &
VPID=$!; PIDS+=("$VPID")
wait_ready "$port"
"$LOADGEN" mix --target 127.0.0.1:$port --reads $READS --sessions 8 --outstanding 8 --rate-ops-s $RATE --duration-s 2 --warmup-s 1 >/dev/null 2>&1
sleep 8
callgrind_control -z "$VPID" >/dev/null 2>&1
"$LOADGEN" mix --target 127.0.0.1:$port --reads $READS --sessions 8 --outstanding 8 --rate-ops-s $RATE --duration-s 10 --warmup-s 0.1 > "$WORK/lg.txt" 2>&1
callgrind_control -d "$VPID" >/dev/null 2>&1
grep "^127" "$WORK/lg.txt" | awk '{print "ops/s", $3}'
ops=$(grep "^127" "$WORK/lg.txt" | awk '{print $3}')
total=$(callgrind_annotate "$WORK/cg.out.1" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1; exit}')
echo "instructions $total over about $((ops * 10)) ops (plus warm-up): $((total / (ops * 10))) per op"
callgrind_annotate --inclusive=yes --threshold=100 "$WORK/cg.out.1" 2>/dev/null | grep -E "Parker::park \[|runner::run::\{\{closure\}\} \[|Shard::apply_batch \[|read_loop::\{\{closure\}\} \[|ClientRing::turn \[" | awk -v n=$((ops*10)) '{c=$1; gsub(",","",c); print int(c/n), $NF, $(NF-1)}' | cut -c1-150
