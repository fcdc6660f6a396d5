#!/usr/bin/env bash
# sqes-per-request.sh [COUNT]: io_uring submissions and completions, io_uring_enter
# calls, all system calls and context switches of each member of a 3-member
# ringkeeper ensemble (perf stat on each), while one idle session
# (tuning/rtt-client.c, 1 KiB) runs COUNT keys through the follower F1:
# create, set, get, delete of each. Printed per key (three writes, which
# every member sees, and one read, which only F1 serves).
# RK=path picks the build (default: this tree's release build).
source "$(dirname "$0")/../../../lib.sh"
COUNT=${1:-300}
RINGKEEPER=${RK:-$RINGKEEPER}
cc -O2 -o "$WORK/rtt-client" "$ROOT/tuning/rtt-client.c"
start_ensemble sq rk 90 3 2000
lead=$(leader_index)
read -r f1 f2 <<<"$(follower_indexes "$lead")"
EV=io_uring:io_uring_submit_req,io_uring:io_uring_complete,syscalls:sys_enter_io_uring_enter,raw_syscalls:sys_enter,sched:sched_switch
for i in "$f1" "$lead" "$f2"; do
  perf stat -e $EV -p "${MEMBER_PID[i]}" -o "$WORK/stat-$i.txt" &
  SP+=($!)
done
sleep 0.5
"$WORK/rtt-client" "${MEMBER_ADDR[f1]%:*}" "${MEMBER_ADDR[f1]#*:}" "$COUNT" 1024
for p in "${SP[@]}"; do kill -INT "$p"; done; wait "${SP[@]}" 2>/dev/null || true
for r in "F1 $f1" "L $lead" "F2 $f2"; do set -- $r; echo "== $1"; awk -v n="$COUNT" '/io_uring|sys_enter|sched/ {gsub(",","",$1); printf "  %-40s %.2f per key\n", $2, $1/n}' "$WORK/stat-$2.txt"; done
stop_ensemble sq 2>/dev/null || true
