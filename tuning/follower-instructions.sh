#!/usr/bin/env bash
# Instructions per write through a follower, counted rather than timed
# (issue 27's follower target): a 3-member ringkeeper ensemble with every
# member under valgrind's callgrind, one idle session (tuning/rtt-client.c,
# COUNT each of create, set, get and delete, 1 KiB) on a follower, every
# member's counts dumped after each phase (RTT_AFTER_PHASE). Prints, per
# phase and per member (F1: the client's follower, L: the leader, F2: the
# other follower), the instructions it ran per request, the inclusive
# counts of its loop's parts (callgrind-report.sh: glommio's park, the
# consensus runner, the peer links' reader and writer, the shard's apply,
# the client's read loop and ring) and the TOP functions by their own count;
# then the three members' sum. The members' own parts repeat to about a
# percent between runs; the park's share moves with timing (see
# idle-instructions.sh for the caveats of counting under valgrind).
# Needs valgrind (apt-get install -y valgrind) and cc.
# Usage: [RK=path/to/ringkeeper] [KEEP=dir] tuning/follower-instructions.sh [COUNT] [TOP]
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/callgrind-report.sh"
COUNT=${1:-500}
TOP=${2:-10}
command -v valgrind >/dev/null || { echo "valgrind is needed: apt-get install -y valgrind" >&2; exit 1; }
[ -n "${RK:-}" ] || build
REAL=${RK:-$RINGKEEPER}
cc -O2 -o "$WORK/rtt-client" "$ROOT/tuning/rtt-client.c"
# start_ensemble runs "$RINGKEEPER --config DIR/zoo.cfg": each member runs
# under callgrind, its dumps in DIR.
cat >"$WORK/rk-callgrind" <<EOC
#!/bin/sh
exec valgrind --tool=callgrind --callgrind-out-file="\$(dirname "\$2")/cg.out" "$REAL" "\$@"
EOC
chmod +x "$WORK/rk-callgrind"
RINGKEEPER=$WORK/rk-callgrind
start_ensemble cg rk 80 3 2000
lead=$(leader_index)
[ -n "$lead" ] || { echo "no leader" >&2; exit 1; }
read -r f1 f2 <<<"$(follower_indexes "$lead")"
ROLES=("F1=$f1" "L=$lead" "F2=$f2")
dump=""
for i in "$f1" "$lead" "$f2"; do
    dump+="callgrind_control -d ${MEMBER_PID[i]} >/dev/null 2>&1; "
done
client=${MEMBER_ADDR[f1]}
# A warm-up run, then time for each member's next log segment's zero-fill
# (which its first write starts) to end before anything is counted.
"$WORK/rtt-client" "${client%:*}" "${client##*:}" 20 1024 >/dev/null
sleep "${SETTLE:-15}"
for i in "$f1" "$lead" "$f2"; do
    callgrind_control -z "${MEMBER_PID[i]}" >/dev/null 2>&1
done
RTT_AFTER_PHASE="$dump" "$WORK/rtt-client" "${client%:*}" "${client##*:}" "$COUNT" 1024 >"$WORK/rtt.txt"
cat "$WORK/rtt.txt"
if [ -n "${KEEP:-}" ]; then
    for r in "${ROLES[@]}"; do
        mkdir -p "$KEEP/${r%%=*}" && cp "$WORK/cg-${r#*=}"/cg.out.* "$KEEP/${r%%=*}/"
    done
fi
phase=0
for name in create set get delete; do
    phase=$((phase + 1))
    sum=0
    for r in "${ROLES[@]}"; do
        f=$WORK/cg-${r#*=}/cg.out.$phase
        cg_report "$f" "$COUNT" "$TOP" "$name ${r%%=*}"
        n=$(callgrind_annotate "$f" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1; exit}')
        sum=$((sum + n))
    done
    printf '%s: the three members, %d instructions per request\n' "$name" $((sum / COUNT))
done
