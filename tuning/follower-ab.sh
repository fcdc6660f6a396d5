#!/usr/bin/env bash
# An A/B of one session's writes through a follower: for each round, the
# bare path (tuning/path-floor.c, both ways), then a fresh 3-member ensemble
# of each build in turn, one session (tuning/rtt-client.c) on a follower:
# create and set p50, and the three members' CPU per request (their
# /proc utime + stime over the client's run, in 10 ms ticks).
# Usage: BUILD_DIR=DIR [BUILDS="a b"] [ROUNDS=4] [COUNT=1500] tuning/follower-ab.sh
#   DIR holds one ringkeeper binary per name in BUILDS (default "rk-head rk-new").
source "$(dirname "$0")/lib.sh"
cc -O2 -o "$WORK/rtt-client" "$ROOT/tuning/rtt-client.c"
cc -O2 -pthread -o "$WORK/path-floor" "$ROOT/tuning/path-floor.c"
N=${COUNT:-1500}
cpu() { awk '{print $14+$15}' /proc/"$1"/stat; }
for r in $(seq 1 "${ROUNDS:-4}"); do
    mkdir -p "$WORK/pf-$r"
    echo "floor round $r: $("$WORK/path-floor" "$WORK/pf-$r" 1000 | tr '\n' ' ')"
    for b in ${BUILDS:-rk-head rk-new}; do
        RINGKEEPER=${BUILD_DIR:?BUILD_DIR: a directory holding the builds}/$b
        start_ensemble "$b-$r" rk 70 3 2000
        leader=$(leader_index)
        read -r f1 _ <<<"$(follower_indexes "$leader")"
        follower=${MEMBER_ADDR[f1]}
        s=0; for i in 1 2 3; do s=$((s + $(cpu "${MEMBER_PID[i]}"))); done
        "$WORK/rtt-client" "${follower%:*}" "${follower#*:}" "$N" 1024 >"$WORK/rc"
        e=0; for i in 1 2 3; do e=$((e + $(cpu "${MEMBER_PID[i]}"))); done
        echo "$b round $r: $(grep -E "create|set" "$WORK/rc" | awk '{printf "%s p50 %s  ", $2, $4}')" \
            "members' cpu/request $(python3 -c "print(round(($e - $s) * 10000 / (4 * $N), 1))") us"
        stop_ensemble "$b-$r"
    done
done
