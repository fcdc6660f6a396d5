#!/usr/bin/env bash
# fwarm.sh ROUNDS COUNT: follower write p50, cold (right after the ensemble forms) vs warmed (5 writes, 3 s settle)
source "$(dirname "$0")/../../../lib.sh"
ROUNDS=${1:-2}; COUNT=${2:-1000}
cc -O2 -o "$WORK/rtt-client" "$ROOT/tuning/rtt-client.c"
for r in $(seq $ROUNDS); do for mode in cold warm; do
  start_ensemble "f$r$mode" rk 80 3 2000
  leader=$(leader_index); read -r i _ <<<"$(follower_indexes "$leader")"
  a=${MEMBER_ADDR[i]}
  if [ $mode = warm ]; then "$WORK/rtt-client" ${a%:*} ${a#*:} 5 >/dev/null; sleep 3; fi
  echo "$mode $( "$WORK/rtt-client" ${a%:*} ${a#*:} $COUNT | awk '{printf "%s %s  ", $2, $4}')"
  stop_ensemble "f$r$mode"
done; done
