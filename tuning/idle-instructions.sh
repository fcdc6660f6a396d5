#!/usr/bin/env bash
# Instructions per idle request, counted rather than timed: a standalone
# ringkeeper under valgrind's callgrind, one idle session (tuning/rtt-client.c,
# COUNT each of create, set, get and delete, 1 KiB), the counts dumped after
# each phase (RTT_AFTER_PHASE). Prints, per phase, the instructions the
# server ran per request, the share of the main parts of its loop (inclusive:
# glommio's park, the client ring's turns, the consensus runner, the shard's
# apply, the connection's read loop) and the TOP functions by their own
# instructions. The server's own parts move by about a percent between
# runs, where timings of one idle session move by tens of percent on this
# VM, so an A/B of a change to the loop's own work shows here first; then
# confirm it in time. The park's share moves more (10-20%: how often the
# executor parks per request depends on timing), hence the total without
# it, and gets (a few thousand instructions besides the park) move most.
# Caveats: the server runs about 50x slower under valgrind, so its loop
# passes more often per request than natively (glommio's park runs about 3
# times per request here, about once natively), and rep-prefixed copies
# and fills (memcpy, memset) count one instruction per iteration.
# Needs valgrind (apt-get install -y valgrind) and cc.
# Usage: [RK=path/to/ringkeeper] [KEEP=dir] tuning/idle-instructions.sh [COUNT] [TOP]
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/callgrind-report.sh"
COUNT=${1:-1000}
TOP=${2:-15}
RINGKEEPER=${RK:-$RINGKEEPER}
command -v valgrind >/dev/null || { echo "valgrind is needed: apt-get install -y valgrind" >&2; exit 1; }
[ -n "${RK:-}" ] || build
cc -O2 -o "$WORK/rtt-client" "$ROOT/tuning/rtt-client.c"
cg_start idle
port=$CG_PORT
VPID=$CG_PID
# A warm-up run, then time for the next log segment's zero-fill (which the
# first write starts) to end before anything is counted.
"$WORK/rtt-client" 127.0.0.1 "$port" 20 1024 >/dev/null
sleep "${SETTLE:-10}"
callgrind_control -z "$VPID" >/dev/null 2>&1
RTT_AFTER_PHASE="callgrind_control -d $VPID >/dev/null 2>&1" \
    "$WORK/rtt-client" 127.0.0.1 "$port" "$COUNT" 1024 >"$WORK/rtt.txt"
cat "$WORK/rtt.txt"
# KEEP=DIR keeps the dumps (cg.out.1..4: create, set, get, delete) for
# callgrind_annotate --tree=calling or kcachegrind.
[ -n "${KEEP:-}" ] && mkdir -p "$KEEP" && cp "$WORK"/cg.out.* "$KEEP"/
phase=0
for name in create set get delete; do
    phase=$((phase + 1))
    cg_report "$WORK/cg.out.$phase" "$COUNT" "$TOP" "$name"
done
