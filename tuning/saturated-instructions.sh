#!/usr/bin/env bash
# Instructions per request of a saturated server, counted rather than timed:
# a standalone ringkeeper under valgrind's callgrind, driven by the load
# generator's mix at READS% reads (SESSIONS x OUTSTANDING, 1 KiB values)
# until it is saturated, the counts zeroed, then SECONDS of the same mix
# counted and divided by the requests the load generator had answered.
# idle-instructions.sh counts one idle session's requests, each its own
# batch; here the batches are as deep as at saturation (the server runs
# about 50x slower under valgrind, so all SESSIONS x OUTSTANDING requests
# wait on every fsync), which is where issue 27's CPU per op is measured.
# On a VM without hardware counters this is the one repeatable view of
# what the server's own code costs per request: timings here move by tens
# of percent between runs, these counts by about a percent.
# Caveat (as in idle-instructions.sh): copies and fills done with `rep movs`
# (glibc's memcpy above a few KiB: a commit batch staged into the log's
# buffer, the client ring's received bytes) count one instruction per byte,
# so __memcpy_avx_unaligned_erms is overstated several times over; the
# total without it is printed too.
# Needs valgrind (apt-get install -y valgrind).
# Usage: [RK=path/to/ringkeeper] [KEEP=dir] tuning/saturated-instructions.sh
#        [READS] [SECONDS] [TOP] [SESSIONS] [OUTSTANDING]
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/callgrind-report.sh"
READS=${1:-0}
SECONDS_COUNTED=${2:-10}
TOP=${3:-25}
SESSIONS=${4:-32}
OUTSTANDING=${5:-8}
RINGKEEPER=${RK:-$RINGKEEPER}
command -v valgrind >/dev/null || { echo "valgrind is needed: apt-get install -y valgrind" >&2; exit 1; }
[ -n "${RK:-}" ] || build
cg_start saturated
port=$CG_PORT
VPID=$CG_PID
mix() {
    "$LOADGEN" mix --target "127.0.0.1:$port" --reads "$READS" --sessions "$SESSIONS" \
        --outstanding "$OUTSTANDING" --value-bytes 1024 -q "$@"
}
# Warm-up: the znodes created, the sessions' first requests, the next log
# segment's preparation started.
mix --warmup-s 5 --duration-s 2 >/dev/null
callgrind_control -z "$VPID" >/dev/null 2>&1
mix --warmup-s 0 --duration-s "$SECONDS_COUNTED" --csv "$WORK/mix.csv" >"$WORK/mix.txt"
callgrind_control -d "$VPID" >/dev/null 2>&1
# The requests counted: the measured window's, plus the mix's own set-up
# (its sessions' connects and a check of its znodes: a few dozen requests).
ops=$(python3 -c "
import csv
r = list(csv.DictReader(open('$WORK/mix.csv')))[0]
print(int(float(r['ops_per_s']) * float(r['seconds'])))")
echo "reads $READS%, $SESSIONS x $OUTSTANDING: $ops requests counted over ${SECONDS_COUNTED} s"
dump=$(ls "$WORK"/cg.out.* | head -1)
[ -n "${KEEP:-}" ] && mkdir -p "$KEEP" && cp "$dump" "$KEEP"/
cg_report "$dump" "$ops" "$TOP" "saturated"
total=$(callgrind_annotate "$dump" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1; exit}')
copies=$(callgrind_annotate --threshold=100 "$dump" 2>/dev/null | awk '/__memcpy_avx_unaligned_erms/ && $1 ~ /^[0-9,]+$/ && !n++ {gsub(",", "", $1); print $1}')
printf '  without memcpy (rep movs counts bytes): %d per request\n' $(((total - ${copies:-0}) / ops))
