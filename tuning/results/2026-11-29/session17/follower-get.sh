#!/usr/bin/env bash
# fget.sh ROUNDS: a fresh 3-member ensemble pinned to CPU 1 per round, rtt-client (CPU 1) on each follower and the leader: get p50
cd /work/main
source tuning/lib.sh
RINGKEEPER=${RK:-/tmp/s17/rk-watch}
SERVER_TASKSET=(taskset -c 1)
for r in $(seq ${1:-3}); do
  start_ensemble "fget-$r" rk 80 3 2000
  leader=$(leader_index)
  read -r f1 f2 <<<"$(follower_indexes "$leader")"
  for i in $f1 $f2 $leader; do
    a=${MEMBER_ADDR[i]}
    role=F; [ $i = $leader ] && role=L
    echo "round $r member $i ($role): $(taskset -c 1 /tmp/s17/rtt-client ${a%:*} ${a##*:} 500 1024 | grep -E 'get' | awk '{printf "%s p50 %s p90 %s ", $2, $4, $6}')"
  done
  stop_ensemble "fget-$r"
done
