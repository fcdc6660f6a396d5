#!/usr/bin/env bash
# One session's creates and sets through a follower of a fresh 3-member
# ensemble of each build (BUILD_DIR/NAME for each NAME in BUILDS, default
# "rk-head rk-p7"), rounds
# alternating with path-floor, and the members' CPU per request.
source "$(dirname "$0")/../../../lib.sh"
cc -O2 -o "$WORK/rtt-client" "$ROOT/tuning/rtt-client.c"
cc -O2 -pthread -o "$WORK/path-floor" "$ROOT/tuning/path-floor.c"
N=1500
cpu() { awk '{print $14+$15}' /proc/$1/stat; }
for r in 1 2 3 4; do
  mkdir -p $WORK/pf-$r; echo "floor round $r: $("$WORK/path-floor" $WORK/pf-$r 1000 | tr '\n' ' ')"
  for b in ${BUILDS:-rk-head rk-p7}; do
    RINGKEEPER=${BUILD_DIR:?a directory holding rk-head and rk-p7}/$b
    start_ensemble $b-$r rk 70 3 2000
    leader=$(leader_index); read -r f1 f2 <<<"$(follower_indexes "$leader")"; follower=${MEMBER_ADDR[f1]}
    s=0; for i in 1 2 3; do s=$((s+$(cpu ${MEMBER_PID[i]}))); done
    "$WORK/rtt-client" "${follower%:*}" "${follower#*:}" $N 1024 > $WORK/rc
    e=0; for i in 1 2 3; do e=$((e+$(cpu ${MEMBER_PID[i]}))); done
    echo "$b round $r: $(grep -E "create|set" $WORK/rc | awk '{printf "%s p50 %s  ", $2, $4}') members' cpu/request $(python3 -c "print(round(($e-$s)*10000/(4*$N),1))") us"
    stop_ensemble $b-$r
  done
done
