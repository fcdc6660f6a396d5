#!/usr/bin/env bash
# paced.sh READS RATE ROUNDS: rk (HEAD build) vs floor-log, same offered rate, servers on cpu1
READS=$1; RATE=$2; ROUNDS=${3:-3}
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
D=$(mktemp -d /var/tmp/p29.XXXX); mkdir -p $D/data $D/flog
P1=$(free_port); P2=$(free_port)
printf "tickTime=2000\ndataDir=$D/data\nclientPort=$P1\nclientPortAddress=127.0.0.1\nadmin.enableServer=false\n4lw.commands.whitelist=*\nmaxClientCnxns=0\n" > $D/zoo.cfg
RUST_LOG=warn taskset -c 1 ${RK:-/work/main/target/release/ringkeeper} --config $D/zoo.cfg > $D/rk.log 2>&1 & A=$!
taskset -c 1 /tmp/p29/request-floor uring $P2 1024 --log $D/flog > $D/f.log 2>&1 & B=$!
trap "kill -9 $A $B 2>/dev/null; rm -rf $D" EXIT
for p in $P1 $P2; do for i in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/$p) 2>/dev/null && break; sleep 0.1; done; done
taskset -c 0 /work/main/target/release/ringkeeper-loadgen compare --target rk=127.0.0.1:$P1 --target floorlog=127.0.0.1:$P2 --server-pid rk=$A --server-pid floorlog=$B --reads $READS --rounds $ROUNDS --sessions 32 --outstanding 8 --value-bytes 1024 --warmup-s 2 --duration-s 4 --rate-ops-s $RATE -q 2>&1 | grep -v WARNING | sed -n '/^target/,/^cpu\/op/p' | awk -F'|' '{print $1 "|" $5}' | grep -v '^cpu'
